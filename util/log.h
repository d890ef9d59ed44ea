#pragma once
/* Leveled logging to stderr; thread-safe (one write per line). */
enum { LOG_ERR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };
extern int nasd_log_level;
void nasd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int nasd_log_level_parse(const char *s); /* "error|warn|info|debug" -> level, -1 if unknown */
#define log_err(...)   nasd_log(LOG_ERR, __VA_ARGS__)
#define log_warn(...)  nasd_log(LOG_WARN, __VA_ARGS__)
#define log_info(...)  nasd_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (nasd_log_level >= LOG_DEBUG) nasd_log(LOG_DEBUG, __VA_ARGS__); } while (0)
