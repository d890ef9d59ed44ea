/* Field validators for REST input (names, sizes, IQNs, paths, CHAP); 0 or -1 with a reason. */
#include "api/validate.h"
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int valid_name(const char *s, char *err, size_t errlen)
{
    if (!s || !*s) { snprintf(err, errlen, "name is required"); return -1; }
    size_t n = strlen(s);
    if (n > NASD_NAME_MAX) { snprintf(err, errlen, "name longer than %d characters", NASD_NAME_MAX); return -1; }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (!isalnum(c) && c != '_' && c != '.' && c != ':' && c != '-') {
            snprintf(err, errlen, "name may contain only letters, digits and _ . : - (bad character at %zu)", i);
            return -1;
        }
    }
    if (s[0] == '.' || s[0] == '-') { snprintf(err, errlen, "name may not start with '%c'", s[0]); return -1; }
    if (strstr(s, "..")) { snprintf(err, errlen, "name may not contain '..'"); return -1; }
    return 0;
}

int parse_size(const json_t *v, uint64_t *out, char *err, size_t errlen)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i <= 0) { snprintf(err, errlen, "size must be positive"); return -1; }
        *out = (uint64_t)i;
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s) { snprintf(err, errlen, "size must be a number of bytes or a string like \"10G\""); return -1; }
    char *end;
    while (isspace((unsigned char)*s)) s++;
    if (!isdigit((unsigned char)*s)) { snprintf(err, errlen, "invalid size \"%s\"", json_string_value(v)); return -1; }
    double num = strtod(s, &end);
    while (isspace((unsigned char)*end)) end++;
    double mult = 1;
    const char *units = "KMGTP";
    if (*end) {
        const char *u = strchr(units, toupper((unsigned char)*end));
        if (!u) { snprintf(err, errlen, "invalid size unit in \"%s\" (use K, M, G, T, P)", s); return -1; }
        mult = pow(1024, (double)(u - units + 1));
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'B' || *end == 'b') end++;
    }
    if (*end) { snprintf(err, errlen, "invalid size \"%s\"", s); return -1; }
    double bytes = num * mult;
    if (!(bytes >= 1) || bytes >= 9.2e18 || !isfinite(bytes)) {
        snprintf(err, errlen, "size \"%s\" out of range", s);
        return -1;
    }
    *out = (uint64_t)bytes;
    return 0;
}

static int all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return 0;
    return s[n] == 0;
}

int valid_iqn(const char *s, char *err, size_t errlen)
{
    if (!s || !*s) { snprintf(err, errlen, "iqn is required"); return -1; }
    size_t n = strlen(s);
    if (n > 223) { snprintf(err, errlen, "iSCSI name longer than 223 bytes"); return -1; }
    if (!strncmp(s, "eui.", 4)) {
        if (all_hex(s + 4, 16)) return 0;
        snprintf(err, errlen, "eui. names need 16 hex digits");
        return -1;
    }
    if (!strncmp(s, "naa.", 4)) {
        if (all_hex(s + 4, 16) || all_hex(s + 4, 32)) return 0;
        snprintf(err, errlen, "naa. names need 16 or 32 hex digits");
        return -1;
    }
    if (strncmp(s, "iqn.", 4) || n < 12 || !isdigit((unsigned char)s[4]) || !isdigit((unsigned char)s[7]) ||
        s[8] != '-' || !isdigit((unsigned char)s[9]) || !isdigit((unsigned char)s[10]) || s[11] != '.') {
        snprintf(err, errlen, "iSCSI name must look like iqn.YYYY-MM.reverse.domain[:name]");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (!(islower(c) || isdigit(c) || c == '.' || c == '-' || c == ':')) {
            snprintf(err, errlen, "iSCSI names use lower-case letters, digits, '.', '-' and ':'");
            return -1;
        }
    }
    return 0;
}

int valid_abs_path(const char *s, char *err, size_t errlen)
{
    if (!s || s[0] != '/') { snprintf(err, errlen, "path must be absolute"); return -1; }
    size_t n = strlen(s);
    if (n > 1023) { snprintf(err, errlen, "path longer than 1023 bytes"); return -1; }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) { snprintf(err, errlen, "path has control characters"); return -1; }
    if (strstr(s, "//")) { snprintf(err, errlen, "path may not contain '//'"); return -1; }
    for (const char *p = s; p; p = strchr(p + 1, '/')) {
        const char *c = p + 1;
        size_t len = strcspn(c, "/");
        if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) {
            snprintf(err, errlen, "path may not contain '.' or '..' components");
            return -1;
        }
    }
    return 0;
}

int valid_chap(const char *user, const char *secret, char *err, size_t errlen)
{
    size_t ul = user ? strlen(user) : 0, sl = secret ? strlen(secret) : 0;
    if (!ul && !sl) return 0;
    if (!ul || ul > 63) { snprintf(err, errlen, "CHAP user must be 1..63 characters"); return -1; }
    if (sl < 12 || sl > 16) { snprintf(err, errlen, "CHAP secret must be 12..16 characters"); return -1; }
    for (size_t i = 0; i < ul; i++)
        if (!isgraph((unsigned char)user[i])) { snprintf(err, errlen, "CHAP user has invalid characters"); return -1; }
    for (size_t i = 0; i < sl; i++)
        if (!isgraph((unsigned char)secret[i])) { snprintf(err, errlen, "CHAP secret has invalid characters"); return -1; }
    return 0;
}
