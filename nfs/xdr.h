#pragma once
/* XDR (RFC 4506) decode/encode over flat buffers with strict bounds checks.
 * Decoders never read past `end`; any violation sets `err` and returns zeros,
 * so callers can decode a whole structure and check `err` once. */
#include <stdint.h>
#include <stddef.h>
#include <string.h>

struct xdr_dec {
    const uint8_t *p, *end;
    int err;
};

struct xdr_enc {
    uint8_t *buf;
    size_t len, cap;
    int err;
};

static inline void xdr_dec_init(struct xdr_dec *d, const void *buf, size_t len)
{
    d->p = buf;
    d->end = (const uint8_t *)buf + len;
    d->err = 0;
}

static inline size_t xdr_dec_left(const struct xdr_dec *d) { return (size_t)(d->end - d->p); }

static inline uint32_t xdr_get_u32(struct xdr_dec *d)
{
    if (d->err || xdr_dec_left(d) < 4) { d->err = 1; return 0; }
    uint32_t v = ((uint32_t)d->p[0] << 24) | ((uint32_t)d->p[1] << 16) |
                 ((uint32_t)d->p[2] << 8) | d->p[3];
    d->p += 4;
    return v;
}

static inline uint64_t xdr_get_u64(struct xdr_dec *d)
{
    uint64_t hi = xdr_get_u32(d);
    return (hi << 32) | xdr_get_u32(d);
}

static inline int xdr_get_bool(struct xdr_dec *d)
{
    uint32_t v = xdr_get_u32(d);
    if (v > 1) d->err = 1;
    return (int)v;
}

/* Fixed-length opaque: returns a pointer into the buffer (NULL on error). */
static inline const uint8_t *xdr_get_fixed(struct xdr_dec *d, size_t len)
{
    size_t padded = (len + 3) & ~(size_t)3;
    if (d->err || padded < len || xdr_dec_left(d) < padded) { d->err = 1; return NULL; }
    const uint8_t *r = d->p;
    d->p += padded;
    return r;
}

/* Variable-length opaque<max>: pointer into the buffer + length. */
static inline const uint8_t *xdr_get_opaque(struct xdr_dec *d, uint32_t *len, uint32_t max)
{
    uint32_t n = xdr_get_u32(d);
    if (d->err || n > max) { d->err = 1; *len = 0; return NULL; }
    *len = n;
    return xdr_get_fixed(d, n);
}

/* string<max> copied NUL-terminated into out (outsz > max). Embedded NULs rejected. */
static inline void xdr_get_string(struct xdr_dec *d, char *out, size_t outsz, uint32_t max)
{
    uint32_t n;
    const uint8_t *s = xdr_get_opaque(d, &n, max);
    if (!s || n >= outsz || memchr(s, 0, n)) { d->err = 1; if (outsz) out[0] = 0; return; }
    memcpy(out, s, n);
    out[n] = 0;
}

static inline void xdr_enc_init(struct xdr_enc *e, void *buf, size_t cap)
{
    e->buf = buf;
    e->len = 0;
    e->cap = cap;
    e->err = 0;
}

/* Reserve n bytes (padded to 4, padding zeroed); NULL and err on overflow. */
static inline uint8_t *xdr_reserve(struct xdr_enc *e, size_t n)
{
    size_t padded = (n + 3) & ~(size_t)3;
    if (e->err || e->cap - e->len < padded) { e->err = 1; return NULL; }
    uint8_t *p = e->buf + e->len;
    if (padded != n) memset(p + n, 0, padded - n);
    e->len += padded;
    return p;
}

static inline void xdr_put_u32(struct xdr_enc *e, uint32_t v)
{
    uint8_t *p = xdr_reserve(e, 4);
    if (!p) return;
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static inline void xdr_put_u64(struct xdr_enc *e, uint64_t v)
{
    xdr_put_u32(e, (uint32_t)(v >> 32));
    xdr_put_u32(e, (uint32_t)v);
}

static inline void xdr_put_fixed(struct xdr_enc *e, const void *data, size_t len)
{
    uint8_t *p = xdr_reserve(e, len);
    if (p && len) memcpy(p, data, len);
}

static inline void xdr_put_opaque(struct xdr_enc *e, const void *data, uint32_t len)
{
    xdr_put_u32(e, len);
    xdr_put_fixed(e, data, len);
}

static inline void xdr_put_string(struct xdr_enc *e, const char *s)
{
    xdr_put_opaque(e, s, (uint32_t)strlen(s));
}

/* ---- RPC record marking (RFC 5531 section 11) ---- */
#define RM_LAST_FRAG 0x80000000u

/* Reassembles fragments from a byte stream into whole records. */
struct rm_reasm {
    uint8_t hdr[4];
    unsigned hdr_have;     /* bytes of the current fragment header collected */
    uint32_t frag_left;    /* payload bytes still expected for the current fragment */
    int in_frag;           /* header complete, collecting payload */
    int last;              /* current fragment is the last of its record */
    uint8_t *rec;          /* record being assembled (malloc) */
    size_t rec_len, rec_cap;
    size_t max_record;     /* protocol limit; larger records are an error */
};

/* Called with each complete record; takes ownership of rec (free()). Return <0 to stop
 * with an error, RM_PAUSE to stop after this record (rm_feed_some). */
typedef int (*rm_record_cb)(void *arg, uint8_t *rec, size_t len);
#define RM_PAUSE 1

void rm_init(struct rm_reasm *r, size_t max_record);
void rm_free(struct rm_reasm *r);
/* Feed stream bytes. Returns 0, -EMSGSIZE on an oversized record, -ENOMEM, or the
 * callback's negative return value. */
int rm_feed(struct rm_reasm *r, const uint8_t *data, size_t n, rm_record_cb cb, void *arg);
/* rm_feed that stops where the callback returned RM_PAUSE: *used bytes of data were
 * taken (all of them unless paused; the caller keeps the rest for later). */
int rm_feed_some(struct rm_reasm *r, const uint8_t *data, size_t n, rm_record_cb cb, void *arg, size_t *used);
