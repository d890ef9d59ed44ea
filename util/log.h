#pragma once
/* Leveled logging to stderr; thread-safe (one write per line); repeated lines are rate-limited. */
#include <stddef.h>
enum { LOG_ERR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };
extern int nasd_log_level;
void nasd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int nasd_log_level_parse(const char *s); /* "error|warn|info|debug" -> level, -1 if unknown */
/* Copies in[0..inlen) to out as printable ASCII: bytes outside 0x20..0x7e and '\\' become
 * "\xNN" / "\\\\", so a client string can never start a new log line or send terminal
 * escapes. out is always NUL-terminated (outlen > 0) and never holds half an escape;
 * returns the length written (without the NUL). */
size_t nasd_log_escape(const char *in, size_t inlen, char *out, size_t outlen);
/* Room for an escaped copy of n client bytes. */
#define NASD_LOG_ESC_SIZE(n) (4 * (n) + 1)
#define log_err(...)   nasd_log(LOG_ERR, __VA_ARGS__)
#define log_warn(...)  nasd_log(LOG_WARN, __VA_ARGS__)
#define log_info(...)  nasd_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (nasd_log_level >= LOG_DEBUG) nasd_log(LOG_DEBUG, __VA_ARGS__); } while (0)
