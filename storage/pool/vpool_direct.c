/* Direct writes: a large request (raidz1: most of a row; stripe: VP_DIRECT_MIN on) is
 * written in place straight from the caller's
 * buffer (data and raidz1 parity, under the commit lock), instead of being copied into
 * the write-back cache and written by a later commit. Its checksums are published at
 * once and journaled as intents by the next commit, like the cache's.
 *
 * The kernel may write the in-place data back before those intents reach the journal,
 * so a crash can leave sectors whose content matches no checksum on record. Before
 * the first direct write into a region (VP_REGION_SECT pool sectors) since the last
 * checkpoint, a durable journal record names the region (a write-intent log, as md's
 * bitmap). Import then accepts, in the named regions only, data that differs from its
 * recorded checksum (an unflushed write: old or new content are both valid outcomes)
 * and recomputes the parity of every row there. A checkpoint syncs the members and
 * writes the checksum table, which retires every region. */
#include "storage/pool/vpool_impl.h"
#include "util/log.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* raidz1: large enough that the row's parity needs no reads for most of it. A stripe
 * has no parity: from VP_DIRECT_MIN on, the one copy into the members' page cache is
 * cheaper than the cache's two plus the background writeback of them, whose 16 MiB
 * bursts (journal write with RWF_DSYNC, then in place) made 2-5 % of QD1 32 KiB NFS
 * writes take 1-5 ms (p99 0.9-2.4 ms with the flusher, 0.2-0.7 ms without it). */
bool vp_direct_ok(struct vpool *p, struct vp_vol *v, uint64_t off, size_t len)
{
    if (p->layout == VPOOL_MIRROR || (v->flags & VPOOL_VOL_LZ4) || p->xl) return false;   /* format 3: the log */
    size_t min = p->layout == VPOOL_RAIDZ1 ? (size_t)VP_CHUNK * p->ndata : VP_DIRECT_MIN;
    if (off % VP_SECTOR || len % VP_SECTOR || len < min) return false;
    return vp_all_online(p);
}

int vp_log_regions(struct vpool *p, const struct vp_wsect *ws, size_t n)
{
    struct vp_rec recs[64];
    size_t all = 0, nr = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = ws[i].sect / VP_REGION_SECT;
        if (all && recs[all - 1].a == r) continue;
        if (all == 64) return -EAGAIN;   /* a request spans at most a few regions */
        recs[all++] = (struct vp_rec){ .type = VP_REC_REGION, .a = r };
    }
    /* room first: a checkpoint clears rbits, and then every region must be named */
    int rc = vp_journal_room(p, all, 0);
    if (rc) return rc;
    for (size_t i = 0; i < all; i++) if (!vp_bit(p->rbits, recs[i].a)) recs[nr++] = recs[i];
    if (!nr) return 0;
    if ((rc = vp_journal_batch(p, recs, nr, NULL, 0))) return rc;
    for (size_t i = 0; i < nr; i++) vp_bit_set(p->rbits, recs[i].a);
    return 0;
}

int vp_direct_write(struct vpool *p, struct vp_vol *v, const uint8_t *buf, uint64_t off, size_t len)
{
    size_t n = len / VP_SECTOR;
    struct vp_wsect *ws = malloc(n * sizeof *ws);
    if (!ws) return -EAGAIN;
    bool sorted = true;
    for (size_t i = 0; i < n; i++) {
        uint64_t vsect = off / VP_SECTOR + i;
        uint32_t au = vp_map_get(v, vsect / VP_AU_SECT);
        if (!au) { free(ws); return -EAGAIN; }   /* unmapped meanwhile: the cache path allocates */
        const uint8_t *d = buf + i * VP_SECTOR;
        ws[i] = (struct vp_wsect){ .sect = (uint64_t)(au - 1) * VP_AU_SECT + vsect % VP_AU_SECT,
                                   .csum = vp_csum_of(d), .data = (uint8_t *)d };
        if (i && ws[i].sect < ws[i - 1].sect) sorted = false;
    }
    if (!sorted) qsort(ws, n, sizeof *ws, vp_cmp_wsect);

    vp_commit_lock(p);
    int rc = 0;
    /* a sector journaled with its data since the checkpoint is rewritten by replay:
     * it must be journaled with its data again (vpool_journal.c, choose_intents) */
    for (size_t i = 0; i < n && p->jbits_any && !rc; i++)
        if (vp_bit(p->jbits, ws[i].sect)) rc = -EAGAIN;
    if (!rc && !vp_direct_ok(p, v, off, len)) rc = -EAGAIN;   /* a member failed meanwhile */
    if (!rc && p->frees_pending) rc = vp_commit_ex(p, false);   /* a newly taken unit may not be free on disk yet */
    if (!rc) rc = vp_log_regions(p, ws, n);
    if (!rc && p->synced_unlogged) {
        /* the sectors may hold what a flush just made durable: replay must know that this
         * data is on disk, or it may take the state before it for the newer one */
        struct vp_rec r = { .type = VP_REC_SYNCED, .a = p->synced_seq };
        if (!(rc = vp_journal_room(p, 1, 0)) && p->synced_unlogged) rc = vp_journal_batch(p, &r, 1, NULL, 0);
        if (!rc) p->synced_unlogged = false;
    }
    if (rc) goto out;
    if ((rc = vp_apply_writes(p, ws, n))) goto out;
    /* Older cached versions of these sectors must not be written after this (no commit
     * runs before: commit_lock). Dropped only now that the new data is published: until
     * then a reader gets the acknowledged older version from the cache (dropped before,
     * the disk gave it a sector never committed: zeros, test_vpool_stale), and a copy a
     * reader cached meanwhile (O_DIRECT members cache single-sector misses) goes too.
     * Without O_DIRECT only dirty entries (and lz4 volumes, not taken here) live in the
     * cache: none dirty, nothing to drop. */
    if (p->direct_io || vc_dirty_count(p->cache))
        for (size_t i = 0; i < n; i++) vc_drop(p->cache, ws[i].sect);
    for (size_t i = 0; i < n; i++) {
        uint64_t s = ws[i].sect;
        if (vp_bit(p->dbits, s)) continue;
        vp_bit_set(p->dbits, s);
        if (p->dlist_n < VP_DLIST_MAX) p->dlist[p->dlist_n++] = s;
        else p->dlist_over = true;
    }
    if (!atomic_load(&p->unsynced)) p->unsynced_direct = true;
    if (p->dlist_over) p->unsynced_direct = false;
    atomic_store(&p->unsynced, 1);   /* the next durable commit syncs the members */
out:
    pthread_mutex_unlock(&p->commit_lock);
    free(ws);
    return rc;
}

void vp_direct_clear(struct vpool *p)
{
    if (p->dlist_over) {   /* zero pages of the bitmap, without touching untouched ones */
        size_t len = (p->n_sect + 63) / 64 * 8;
        if (madvise(p->dbits, len, MADV_DONTNEED)) memset(p->dbits, 0, len);
    } else
        for (size_t i = 0; i < p->dlist_n; i++) p->dbits[p->dlist[i] / 64] &= ~(1ull << (p->dlist[i] % 64));
    p->dlist_n = 0;
    p->dlist_over = false;
}

/* ---------------- import ---------------- */

/* One row of a named region: data columns read whole; a sector whose checksum does
 * not match what is there is taken as written (only sectors that hold data: an unmap
 * or a never-written sector stays zero), then parity = XOR of the columns. */
static void resolve_row(struct vpool *p, uint64_t row, uint8_t *col, uint8_t *par, uint64_t *accepted,
                        uint64_t *lost)
{
    uint64_t off = vp_moff(p, row, 0);
    int pm = p->layout == VPOOL_RAIDZ1 ? vp_parity_member(p, row) : -1;
    bool par_ok = pm >= 0 && vp_writable(p, pm);
    int missing = -1;
    memset(par, 0, VP_CHUNK);
    for (int c = 0; c < p->ndata; c++) {
        int m = vp_col_member(p, row, c);
        uint64_t s0 = vp_row_sect0(p, row, c);
        if (!vp_readable(p, m) || vp_mread(p, m, col, VP_CHUNK, off) < 0) {
            missing = c;
            par_ok = false;
            continue;
        }
        vp_xor_into(par, col, VP_CHUNK);
        for (unsigned w = 0; w < VP_CHUNK_SECT; w++) {
            uint64_t s = s0 + w;
            if (s >= p->n_sect) break;
            uint32_t cs = vp_csum_get(p, s);
            if (!vp_has_data(cs) || !p->au[s / VP_AU_SECT].vol_id) continue;
            uint32_t now = vp_csum_of(col + w * VP_SECTOR);
            if (now != cs) { vp_csum_set(p, s, now); (*accepted)++; }
        }
    }
    if (par_ok) { vp_mwrite(p, pm, par, VP_CHUNK, off); return; }
    if (missing < 0 || pm < 0 || !vp_readable(p, pm)) return;
    /* a data column is missing: what parity rebuilds must match its checksums */
    if (vp_mread(p, pm, col, VP_CHUNK, off) < 0) return;
    vp_xor_into(par, col, VP_CHUNK);
    uint64_t s0 = vp_row_sect0(p, row, missing);
    for (unsigned w = 0; w < VP_CHUNK_SECT; w++) {
        uint32_t cs = s0 + w < p->n_sect ? vp_csum_get(p, s0 + w) : VP_CSUM_ZERO;
        if (vp_has_data(cs) && vp_csum_of(par + w * VP_SECTOR) != cs) (*lost)++;
    }
}

int vp_regions_resolve(struct vpool *p)
{
    bool any = false;
    for (uint64_t i = 0; i < (p->nregions + 63) / 64 && !any; i++) any = p->rbits[i] != 0;
    if (!any) return 0;
    uint8_t *col = NULL, *par = NULL;
    if (posix_memalign((void **)&col, 64, VP_CHUNK) || posix_memalign((void **)&par, 64, VP_CHUNK)) {
        free(col);
        return -ENOMEM;
    }
    uint64_t regions = 0, accepted = 0, lost = 0, chunks_per_row = (uint64_t)p->ndata;
    for (uint64_t r = 0; r < p->nregions; r++) {
        if (!vp_bit(p->rbits, r)) continue;
        regions++;
        uint64_t c0 = r * VP_REGION_SECT / VP_CHUNK_SECT, c1 = (r + 1) * VP_REGION_SECT / VP_CHUNK_SECT;
        for (uint64_t row = c0 / chunks_per_row; row <= (c1 - 1) / chunks_per_row && row < p->rows; row++)
            resolve_row(p, row, col, par, &accepted, &lost);
    }
    free(col);
    free(par);
    log_info("vpool %s: %llu regions with direct writes around the crash resynced, %llu sectors taken as written",
             p->name, (unsigned long long)regions, (unsigned long long)accepted);
    if (lost)
        log_warn("vpool %s: %llu sectors of the missing member cannot be rebuilt (written around the crash)",
                 p->name, (unsigned long long)lost);
    return 0;
}
