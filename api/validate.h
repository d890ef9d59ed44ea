#pragma once
/* Input validation shared by the REST handlers. Each returns 0 when valid, else -1
 * with a human-readable reason in err. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define NASD_NAME_MAX 63

/* Object names: 1..63 of [A-Za-z0-9_.:-], not starting with '.' or '-', no "..". */
int valid_name(const char *s, char *err, size_t errlen);
/* Sizes: a JSON integer of bytes, or a string "512", "10G", "1.5T", "64KiB", "100MB"
 * (binary units: K M G T P, optional "i"/"B"). Must be > 0 and < 2^63. */
int parse_size(const json_t *v, uint64_t *out, char *err, size_t errlen);
/* iSCSI names: iqn.YYYY-MM.reverse-domain[:suffix], eui.<16 hex>, naa.<16|32 hex>; <= 223 bytes. */
int valid_iqn(const char *s, char *err, size_t errlen);
/* Absolute path, <= 1023 bytes, printable, no "." or ".." component, no "//". */
int valid_abs_path(const char *s, char *err, size_t errlen);
/* CHAP secrets: 12..16 printable characters (RFC 7143 recommends >= 12); users 1..63. */
int valid_chap(const char *user, const char *secret, char *err, size_t errlen);
