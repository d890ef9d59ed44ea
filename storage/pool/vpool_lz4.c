/* lz4 volumes: each 64 KiB chunk of the volume is compressed at commit time. A
 * chunk that shrinks to <= 14 sectors is stored in its first k sectors (8 byte
 * header + lz4 stream); the rest of its sectors hold nothing (checksum 0) and the last
 * one carries VP_CSUM_MARK. On sparse member files the unused sectors stay holes, so
 * the space saving is real on disk; an all-zero chunk stores nothing at all. Chunks
 * that do not compress are stored raw. The cache always holds logical data. */
#include "storage/pool/vpool_impl.h"
#include <lz4.h>
#include <stdlib.h>
#include <string.h>

#define LZ4C_MAGIC 0x43345a4cu   /* "LZ4C" */
#define LZ4C_MAX_SECT 14u

struct lz4c_hdr { uint32_t magic, clen; };

/* Logical content of the chunk starting at pool sector ps0. */
int vp_lz4_read_chunk(struct vpool *p, uint64_t ps0, uint8_t *out)
{
    int col;
    uint64_t row = vp_row_of(p, ps0, &col);
    /* the sectors of a compressed chunk only make sense together: no commit may change
     * them meanwhile (format 3: the location lock; in place: the row lock) */
    pthread_mutex_t *l = p->xl ? NULL : vp_rowlock(p, row);
    if (l) pthread_mutex_lock(l); else vp_xl_rdlock(p);
    int rc = 0;
    if (vp_csum_get(p, ps0 + VP_CHUNK_SECT - 1) != VP_CSUM_MARK) {
        rc = vp_read_run_locked(p, ps0, VP_CHUNK_SECT, out);
        if (l) pthread_mutex_unlock(l); else vp_xl_unlock(p);
        return rc;
    }
    uint8_t *c = malloc(LZ4C_MAX_SECT * VP_SECTOR);
    unsigned k = 0;
    while (c && k < LZ4C_MAX_SECT && vp_csum_get(p, ps0 + k)) k++;
    struct lz4c_hdr h;
    rc = !c ? -ENOMEM : k ? vp_read_run_locked(p, ps0, k, c) : -EIO;
    if (l) pthread_mutex_unlock(l); else vp_xl_unlock(p);
    if (!rc) {
        memcpy(&h, c, sizeof h);
        if (h.magic != LZ4C_MAGIC || h.clen > k * VP_SECTOR - sizeof h ||
            LZ4_decompress_safe((const char *)c + sizeof h, (char *)out, (int)h.clen, VP_CHUNK) != (int)VP_CHUNK)
            rc = -EIO;
    }
    free(c);
    return rc;
}

/* Replaces the logical dirty sectors of lz4 volumes by the physical sectors to
 * write (data == NULL entries only set a checksum value). commit_lock held. */
int vp_lz4_commit_prepare(struct vpool *p, struct vp_wsect **wsp, size_t *np, uint8_t **extra)
{
    struct vp_wsect *ws = *wsp;
    size_t n = *np, groups = 0;
    for (size_t i = 0; i < n; i++) {
        struct vp_vol *v = vp_vol_of_sect(p, ws[i].sect);
        if (v && (v->flags & VPOOL_VOL_LZ4)) groups++;
    }
    if (!groups) return 0;
    qsort(ws, n, sizeof *ws, vp_cmp_wsect);
    struct vp_wsect *out = malloc((n + groups * VP_CHUNK_SECT) * sizeof *out);
    uint8_t *arena = malloc(groups * (VP_CHUNK + LZ4C_MAX_SECT * VP_SECTOR));
    uint8_t *cbuf = malloc(sizeof(struct lz4c_hdr) + LZ4_compressBound(VP_CHUNK));
    if (!out || !arena || !cbuf) { free(out); free(arena); free(cbuf); return -ENOMEM; }
    size_t no = 0, ga = 0;
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        struct vp_vol *v = vp_vol_of_sect(p, ws[i].sect);
        if (!v || !(v->flags & VPOOL_VOL_LZ4)) { out[no++] = ws[i++]; continue; }
        uint64_t ps0 = ws[i].sect - ws[i].sect % VP_CHUNK_SECT;
        uint8_t *logical = arena + ga * (VP_CHUNK + LZ4C_MAX_SECT * VP_SECTOR), *phys = logical + VP_CHUNK;
        ga++;
        uint32_t have = 0;
        for (; i < n && ws[i].sect < ps0 + VP_CHUNK_SECT; i++) {
            unsigned w = ws[i].sect - ps0;
            memcpy(logical + w * VP_SECTOR, ws[i].data, VP_SECTOR);
            have |= 1u << w;
        }
        if (have != 0xffffu) {   /* merge with what the chunk holds now */
            uint8_t *cur = malloc(VP_CHUNK);
            if (!cur || (rc = vp_lz4_read_chunk(p, ps0, cur))) { free(cur); rc = rc ? rc : -ENOMEM; break; }
            for (unsigned w = 0; w < VP_CHUNK_SECT; w++)
                if (!(have & (1u << w))) memcpy(logical + w * VP_SECTOR, cur + w * VP_SECTOR, VP_SECTOR);
            free(cur);
        }
        if (vp_all_zero(logical, VP_CHUNK)) {
            for (unsigned w = 0; w < VP_CHUNK_SECT; w++)
                out[no++] = (struct vp_wsect){ .sect = ps0 + w, .csum = VP_CSUM_ZERO };
            continue;
        }
        int clen = LZ4_compress_default((const char *)logical, (char *)cbuf + sizeof(struct lz4c_hdr),
                                        VP_CHUNK, LZ4_compressBound(VP_CHUNK));
        size_t total = sizeof(struct lz4c_hdr) + (size_t)(clen > 0 ? clen : 0);
        if (clen <= 0 || total > LZ4C_MAX_SECT * VP_SECTOR) {
            for (unsigned w = 0; w < VP_CHUNK_SECT; w++)
                out[no++] = (struct vp_wsect){ .sect = ps0 + w, .data = logical + w * VP_SECTOR };
            continue;
        }
        struct lz4c_hdr h = { LZ4C_MAGIC, (uint32_t)clen };
        memcpy(cbuf, &h, sizeof h);
        unsigned k = (unsigned)((total + VP_SECTOR - 1) / VP_SECTOR);
        memset(phys, 0, (size_t)k * VP_SECTOR);
        memcpy(phys, cbuf, total);
        for (unsigned w = 0; w < VP_CHUNK_SECT; w++) {
            struct vp_wsect x = { .sect = ps0 + w };
            if (w < k) x.data = phys + w * VP_SECTOR;
            else x.csum = w == VP_CHUNK_SECT - 1 ? VP_CSUM_MARK : VP_CSUM_ZERO;
            out[no++] = x;
        }
    }
    free(cbuf);
    if (rc) { free(out); free(arena); return rc; }
    free(ws);
    *wsp = out;
    *np = no;
    *extra = arena;
    return 0;
}
