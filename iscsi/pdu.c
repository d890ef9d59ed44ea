/* iSCSI wire helpers: LUN encoding, CRC32C digests, text key lists. */
#include "iscsi/pdu.h"
#include <ctype.h>
#include <isa-l.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t lun_decode(const uint8_t *f)
{
    switch (f[0] >> 6) {
    case 0: return f[0] ? UINT64_MAX : f[1];                  /* peripheral, bus 0 */
    case 1: return (uint64_t)(f[0] & 0x3f) << 8 | f[1];     /* flat space */
    default: return UINT64_MAX;
    }
}

void lun_encode(uint8_t *f, uint64_t lun)
{
    memset(f, 0, 8);
    if (lun < 256) { f[1] = (uint8_t)lun; return; }
    f[0] = 0x40 | ((lun >> 8) & 0x3f);
    f[1] = (uint8_t)lun;
}

uint32_t iscsi_crc32c(const void *buf, size_t len, uint32_t prev)
{
    /* isa-l's crc32_iscsi neither pre- nor post-inverts; keep the running value
     * inverted so callers can chain pieces and get the final digest directly. */
    uint32_t crc = ~prev;
    const unsigned char *p = buf;
    while (len) {
        int chunk = len > (1u << 30) ? (1 << 30) : (int)len;
        crc = crc32_iscsi((unsigned char *)p, chunk, crc);
        p += chunk; len -= chunk;
    }
    return ~crc;
}

int text_parse(char *buf, size_t len, struct text_list *out)
{
    out->n = 0;
    size_t i = 0;
    while (i < len) {
        if (buf[i] == '\0') { i++; continue; }            /* tolerate empty entries / padding */
        char *pair = buf + i;
        size_t end = i;
        while (end < len && buf[end]) end++;
        /* end == len: last pair without NUL; callers keep buf[len] == '\0' */
        char *eq = memchr(pair, '=', end - i);
        if (!eq) return -1;
        size_t klen = eq - pair, vlen = end - i - klen - 1;
        if (klen == 0 || klen > TEXT_MAX_KEY || vlen > TEXT_MAX_VALUE) return -1;
        if (out->n >= TEXT_MAX_PAIRS) return -1;
        *eq = '\0';
        for (unsigned k = 0; k < out->n; k++)
            if (!strcmp(out->p[k].key, pair)) return -1;
        out->p[out->n].key = pair;
        out->p[out->n].value = eq + 1;
        out->n++;
        i = end + 1;
    }
    return 0;
}

const char *text_get(const struct text_list *l, const char *key)
{
    for (unsigned i = 0; i < l->n; i++)
        if (!strcmp(l->p[i].key, key)) return l->p[i].value;
    return NULL;
}

void text_add(struct text_out *o, const char *key, const char *fmt, ...)
{
    char val[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    size_t need = strlen(key) + 1 + strlen(val) + 1;
    if (o->len + need > o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 512;
        while (nc < o->len + need) nc *= 2;
        char *nb = realloc(o->buf, nc);
        if (!nb) { o->oom = true; return; }
        o->buf = nb; o->cap = nc;
    }
    o->len += (size_t)sprintf(o->buf + o->len, "%s=%s", key, val) + 1;
}

void text_free(struct text_out *o)
{
    free(o->buf);
    memset(o, 0, sizeof *o);
}

int text_parse_number(const char *v, uint64_t *out)
{
    if (!v || !*v) return -1;
    int base = 10;
    if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) { base = 16; v += 2; if (!*v) return -1; }
    uint64_t r = 0;
    for (; *v; v++) {
        int d;
        if (isdigit((unsigned char)*v)) d = *v - '0';
        else if (base == 16 && isxdigit((unsigned char)*v)) d = tolower((unsigned char)*v) - 'a' + 10;
        else return -1;
        if (r > (UINT64_MAX - d) / base) return -1;
        r = r * base + d;
    }
    *out = r;
    return 0;
}

bool text_list_has(const char *list, const char *item)
{
    size_t il = strlen(item);
    const char *p = list;
    while (p && *p) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l == il && !strncmp(p, item, il)) return true;
        p = c ? c + 1 : NULL;
    }
    return false;
}

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

int text_decode_binary(const char *v, uint8_t *out, size_t max)
{
    if (!v || strlen(v) < 3 || v[0] != '0') return -1;
    size_t n = 0;
    if (v[1] == 'x' || v[1] == 'X') {
        const char *h = v + 2;
        size_t hl = strlen(h);
        int hi = -1;
        if (hl & 1) hi = 0;                      /* odd length: implicit leading zero nibble */
        for (size_t i = 0; i < hl; i++) {
            int c = (unsigned char)h[i];
            if (!isxdigit(c)) return -1;
            int d = isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
            if (hi < 0) { hi = d; continue; }
            if (n >= max) return -1;
            out[n++] = (uint8_t)(hi << 4 | d);
            hi = -1;
        }
        return (int)n;
    }
    if (v[1] == 'b' || v[1] == 'B') {
        uint32_t acc = 0; int bits = 0;
        for (const char *p = v + 2; *p && *p != '='; p++) {
            int d = b64val((unsigned char)*p);
            if (d < 0) return -1;
            acc = acc << 6 | (uint32_t)d; bits += 6;
            if (bits >= 8) {
                bits -= 8;
                if (n >= max) return -1;
                out[n++] = (uint8_t)(acc >> bits);
            }
        }
        return (int)n;
    }
    return -1;
}

void text_encode_hex(const uint8_t *in, size_t n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    *out++ = '0'; *out++ = 'x';
    for (size_t i = 0; i < n; i++) { *out++ = hx[in[i] >> 4]; *out++ = hx[in[i] & 15]; }
    *out = '\0';
}
