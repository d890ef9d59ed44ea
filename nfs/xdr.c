/* RPC record-marking reassembly. */
#include "nfs/xdr.h"
#include <errno.h>
#include <stdlib.h>

void rm_init(struct rm_reasm *r, size_t max_record)
{
    memset(r, 0, sizeof *r);
    r->max_record = max_record;
}

void rm_free(struct rm_reasm *r)
{
    free(r->rec);
    r->rec = NULL;
    r->rec_len = r->rec_cap = 0;
}

static int rm_grow(struct rm_reasm *r, size_t need)
{
    if (need <= r->rec_cap) return 0;
    size_t cap = r->rec_cap ? r->rec_cap : 512;
    while (cap < need) cap *= 2;
    if (cap > r->max_record) cap = r->max_record;
    uint8_t *n = realloc(r->rec, cap);
    if (!n) return -ENOMEM;
    r->rec = n;
    r->rec_cap = cap;
    return 0;
}

int rm_feed(struct rm_reasm *r, const uint8_t *data, size_t n, rm_record_cb cb, void *arg)
{
    size_t used;
    return rm_feed_some(r, data, n, cb, arg, &used);
}

int rm_feed_some(struct rm_reasm *r, const uint8_t *data, size_t n, rm_record_cb cb, void *arg, size_t *used)
{
    const uint8_t *start = data;
    *used = 0;
    while (n > 0 || (r->in_frag && r->frag_left == 0)) {
        if (!r->in_frag) {
            size_t take = 4 - r->hdr_have;
            if (take > n) take = n;
            memcpy(r->hdr + r->hdr_have, data, take);
            r->hdr_have += take;
            data += take;
            n -= take;
            if (r->hdr_have < 4) break;
            uint32_t h = ((uint32_t)r->hdr[0] << 24) | ((uint32_t)r->hdr[1] << 16) |
                         ((uint32_t)r->hdr[2] << 8) | r->hdr[3];
            r->hdr_have = 0;
            r->last = !!(h & RM_LAST_FRAG);
            r->frag_left = h & ~RM_LAST_FRAG;
            if (r->frag_left > r->max_record - r->rec_len) return -EMSGSIZE;
            r->in_frag = 1;
        }
        size_t take = r->frag_left < n ? r->frag_left : n;
        if (take) {
            /* grow with the data actually received, not with what the header
             * promises, so idle half-sent records cannot pin much memory */
            int e = rm_grow(r, r->rec_len + take);
            if (e) return e;
            memcpy(r->rec + r->rec_len, data, take);
            r->rec_len += take;
            r->frag_left -= (uint32_t)take;
            data += take;
            n -= take;
        }
        if (r->frag_left) break;
        r->in_frag = 0;
        if (r->last) {
            uint8_t *rec = r->rec;
            size_t len = r->rec_len;
            r->rec = NULL;
            r->rec_len = r->rec_cap = 0;
            if (!rec) { rec = malloc(1); if (!rec) return -ENOMEM; }
            int e = cb(arg, rec, len);
            if (e < 0) return e;
            if (e == RM_PAUSE) break;
        }
    }
    *used = (size_t)(data - start);
    return 0;
}
