/* Snapshot copies on log-structured (format 3) raidz1 pools under power loss, where
 * replay rewrites a copied sector from its source (vpool_xlate.c copy_back): a checkpoint
 * while a commit journals its records, and a member missing before the copies or lost
 * with the crash (written by a review of 0d3ce84, which both failed); whole-unit copies
 * that wait for their commit (vpool_xcow.c). */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <pthread.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"
#include "storage/pool/vpool_xl.h"
#include "storage/pool/vpool_snap.h"
#include "tests/unit/test_vpool_util.h"

#define MB (1ull << 20)

static uint64_t mk_dirty = 64 * MB;   /* write-back budget of the next mk() */

static struct vpool *mk(struct tdir *t, uint64_t msize, const char *const **paths)
{
    static const char *pp[3];
    struct vpool_member_spec ms[3];
    tdir_make(t, 3);
    for (int i = 0; i < 3; i++) { ms[i] = (struct vpool_member_spec){ t->member[i], msize }; pp[i] = t->member[i]; }
    struct vpool *p;
    char err[256];
    struct vpool_opts o = { .cache_bytes = 64 * MB, .dirty_bytes = mk_dirty, .log = 1 };
    ck_assert_msg(vpool_create("sr", VPOOL_RAIDZ1, ms, 3, &o, &p, err, sizeof err) == 0, "%s", err);
    *paths = pp;
    return p;
}

/* members of 64 MiB, volume v of 8 MiB with pattern 1 in its first 6 MiB (flushed), snapshot s0 */
static struct vpool *snapped(struct tdir *t, const char *const **paths, nasd_bdev **b)
{
    struct vpool *p = mk(t, 64 * MB, paths);
    ck_assert_int_eq(vpool_vol_create(p, "v", 8 * MB, 0), 0);
    *b = open_vol(p, "v", 4096);
    write_pattern(*b, 0, 6 * MB, 1, 1);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s0"), 0);
    return p;
}

static int commit_nodurable_rc(struct vpool *p)
{
    pthread_mutex_lock(&p->commit_lock);
    int rc = vp_commit_ex(p, false);
    pthread_mutex_unlock(&p->commit_lock);
    return rc;
}

static void commit_nodurable(struct vpool *p) { ck_assert_int_eq(commit_nodurable_rc(p), 0); }

/* A checkpoint made while a commit journals its records (the journal full) came after the
 * commit's record filter, so a snapshot copy's location records whose sectors had moved
 * on were journaled after the checkpoint that freed the copy's segment. A later flushed
 * write landing there was overwritten by the snapshot's data at import. */
START_TEST(t_ckpt_inside_journal_write)
{
    struct tdir t;
    const char *const *paths;
    struct vpool *p = mk(&t, 24 * MB, &paths);
    struct vp_xl *x = p->xl;
    uint64_t nseg = x->nseg;
    ck_assert_uint_eq(vp_xl_reserve(nseg), 4);
    ck_assert_uint_ge(nseg, 10);
    uint64_t W = nseg - 8;   /* segments of w data: the pool is then exactly full after the copies */
    ck_assert_int_eq(vpool_vol_create(p, "v", 4 * MB, 0), 0);
    ck_assert_int_eq(vpool_vol_create(p, "w", 2 * W * MB, 0), 0);
    ck_assert_int_eq(vpool_vol_create(p, "z", 1 * MB, 0), 0);
    nasd_bdev *bv = open_vol(p, "v", 4096), *bw = open_vol(p, "w", 4096), *bz = open_vol(p, "z", 4096);
    write_pattern(bv, 0, 4 * MB, 1, 1);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s0"), 0);
    for (uint64_t i = 0; i < W; i++) write_pattern(bw, i * 2 * MB, 2 * MB, 2, 1);
    /* fill the journal with record-only batches (no log space used) */
    uint8_t blk[4096];
    memset(blk, 0x11, sizeof blk);
    int iters = 0;
    while (p->jnl_size - p->jpos >= 8 * 4096ull) {
        ck_assert_int_eq(nasd_bdev_write(bz, blk, 0, 4096, 0), 0);
        ck_assert_int_eq(nasd_bdev_unmap(bz, 0, MB), 0);
        commit_nodurable(p);
        ck_assert_int_lt(++iters, 100000);
    }
    uint64_t e0 = x->epoch;
    write_pattern(bv, 0, 4 * MB, 3, 0);   /* copies the 4 units (src covers them whole) */
    ck_assert_uint_eq(x->epoch, e0);
    uint8_t *p1 = calloc(nseg, 1);
    int np1 = 0;
    /* simpler: the open/used segments that appeared since the fill are the copies' */
    for (uint64_t g = 0; g < nseg; g++) {
        bool all_v = x->live[g] > 0;
        for (uint64_t ph = g * x->seg_sect; ph < (g + 1) * x->seg_sect && all_v; ph++) {
            uint32_t r = x->rmap[ph];
            if (!r) continue;
            uint64_t s = r - 1, au = s / VP_AU_SECT;
            struct vp_vol *vv = p->au[au].vol_id ? p->vols[p->au[au].vol_id - 1] : NULL;
            all_v = vv && !strcmp(vv->name, "v") && p->au[au].birth > vv->last_snap;
        }
        if (all_v) { p1[g] = 1; np1++; }
    }
    ck_assert_int_ge(np1, 1);
    write_pattern(bv, 0, 4 * MB, 4, 1);   /* into the copies (cached), flushed: moves them on */
    ck_assert_msg(x->epoch == e0 + 1, "no checkpoint inside the commit (epoch %llu -> %llu)", (unsigned long long)e0,
                  (unsigned long long)x->epoch);
    for (uint64_t g = 0; g < nseg; g++) if (p1[g]) ck_assert_int_eq(xl_state_get(x, g), XS_FREE);
    /* flushed rewrites of w until one lands in a copy segment */
    uint64_t u = 0;
    bool landed = false;
    for (; u < 2 * W && !landed; u++) {
        write_pattern(bw, u * MB, MB, 5, 1);
        ck_assert_msg(x->epoch == e0 + 1, "checkpoint before reuse at w unit %llu", (unsigned long long)u);
        for (uint64_t g = 0; g < nseg; g++) if (p1[g] && xl_state_get(x, g) != XS_FREE) landed = true;
    }
    ck_assert(landed);
    struct vp_sim *sim = vp_sim_attach(p);
    vp_sim_kill(sim);   /* nothing unsynced: the flushes synced everything */
    nasd_bdev_put(bv); nasd_bdev_put(bw); nasd_bdev_put(bz);
    vpool_close(p);
    uint64_t undone;
    vp_sim_rollback(sim, paths, 3, VP_SIM_UNDO_ALL, &undone);
    char err[256];
    ck_assert_msg(vpool_import(paths, 3, NULL, &p, err, sizeof err) == 0, "%s", err);
    bv = open_vol(p, "v", 4096); bw = open_vol(p, "w", 4096);
    check_pattern(bv, 0, 4 * MB, 4);
    check_pattern(bw, 0, u * MB, 5);   /* flushed before the crash */
    check_pattern(bw, u * MB, 2 * W * MB - u * MB, 2);
    int e = 0;
    nasd_bdev *bs = vpool_snap_open(p, "v", "s0", 4096, &e);
    ck_assert_ptr_nonnull(bs);
    check_pattern(bs, 0, 4 * MB, 1);
    nasd_bdev_put(bs);
    nasd_bdev_put(bv); nasd_bdev_put(bw);
    vpool_close(p);
    tdir_remove(&t);
    free(p1);
}
END_TEST

/* Snapshot copies and a commit without a sync, power loss with every unsynced block
 * undone, import with a member missing: the copies' sectors read as the snapshot's data.
 * Loops 0-2: the member is missing from before the copies (the commit then syncs them
 * first); 3-5: it is lost with the crash (replay rewrites the copies from their sources,
 * and the parity for the missing member must be made after all of those writes). */
START_TEST(t_degraded_copy_back)
{
    int miss = _i % 3, before = _i < 3;
    struct tdir t;
    const char *const *paths;
    nasd_bdev *b;
    struct vpool *p = snapped(&t, &paths, &b);
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, 3, before ? miss : -1);   /* degraded, or all there */
    struct vpool_status st;
    b = open_vol(p, "v", 4096);
    struct vp_sim *sim = vp_sim_attach(p);
    uint8_t w[4096];
    memset(w, 0x5a, sizeof w);
    ck_assert_int_eq(nasd_bdev_write(b, w, 5 * MB + 4096, 4096, 0), 0);   /* copies unit 5 */
    ck_assert_int_eq(nasd_bdev_write(b, w, 2 * MB, 4096, 0), 0);          /* copies unit 2 */
    commit_nodurable(p);
    vp_sim_kill(sim);
    nasd_bdev_put(b);
    vpool_close(p);
    uint64_t undone;
    const char *all[3] = { t.member[0], t.member[1], t.member[2] };
    vp_sim_rollback(sim, all, 3, VP_SIM_UNDO_ALL, &undone);
    p = import_pool(&t, 3, miss);
    b = open_vol(p, "v", 4096);
    uint8_t got[4096], want[4096];
    int bad = 0, eio = 0;
    for (uint64_t o = 0; o < 8 * MB; o += 4096) {
        int rc = nasd_bdev_read(b, got, o, 4096);
        if (o < 6 * MB) fill_block(want, o, 1); else memset(want, 0, 4096);
        if (rc) {
            eio++;
            struct vp_vol *vv = NULL;
            for (int i = 0; i < VP_MAX_VOLS && !vv; i++) if (p->vols[i] && !strcmp(p->vols[i]->name, "v")) vv = p->vols[i];
            uint64_t au = vv->map[o / MB] - 1, ps = au * VP_AU_SECT + (o % MB) / 4096;
            uint32_t l = p->xl->loc[ps];
            int col = -1, mem = -1;
            if (l) { uint64_t row = vp_row_of(p, l - 1, &col); mem = vp_col_member(p, row, col); }
            if (eio <= 3 || mem != miss || col != 0)
                printf("  unreadable at %llu: pool sector %llu phys %u column %d member %d (missing %d)\n",
                       (unsigned long long)o, (unsigned long long)ps, l - 1, col, mem, miss);
            continue;
        }
        if (memcmp(got, want, 4096) && !((o == 5 * MB + 4096 || o == 2 * MB) && !memcmp(got, w, 4096))) bad++;
    }
    vpool_get_status(p, &st);
    printf("miss %d: undone %llu, read errors %d, wrong %d, unrepairable %llu\n", miss, (unsigned long long)undone, eio,
           bad, (unsigned long long)st.unrepairable);
    ck_assert_msg(eio == 0 && bad == 0, "missing member %d: %d sectors unreadable, %d wrong", miss, eio, bad);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* whole units written with seed, one request each (a request of all of a unit) */
static void write_units(nasd_bdev *b, uint64_t first, uint64_t n, uint64_t seed)
{
    uint8_t *buf = malloc(MB);
    for (uint64_t u = first; u < first + n; u++) {
        for (uint64_t k = 0; k < MB; k += 4096) fill_block(buf + k, u * MB + k, seed);
        ck_assert_int_eq(nasd_bdev_write(b, buf, u * MB, MB, 0), 0);
    }
    free(buf);
}

static void checkpoint(struct vpool *p)
{
    pthread_mutex_lock(&p->commit_lock);
    ck_assert_int_eq(vp_checkpoint(p), 0);
    pthread_mutex_unlock(&p->commit_lock);
}

/* Whole units written after a snapshot wait in the cache with their switch (vpool_xcow.c):
 * nothing goes to the log before the commit, and a checkpoint meanwhile must still show
 * the old units. Power loss with every unsynced block undone, after:
 *   0: a checkpoint only: all reads as before the writes (no unit reads as zeros);
 *   1: a checkpoint, then a commit without a sync: each 4 KiB old or new;
 *   2: a checkpoint, then a flush: all new;
 *   3: one waiting unit unmapped whole and 4 KiB of another, then a flush.
 * The snapshot reads as before, nothing is unreadable, nothing leaks. */
START_TEST(t_whole_unit_copies)
{
    struct tdir t;
    const char *const *paths;
    nasd_bdev *b;
    struct vpool *p = snapped(&t, &paths, &b);
    struct vp_xl_stats a0, a1;
    vp_xl_stats(p, &a0);
    struct vp_sim *sim = vp_sim_attach(p);
    write_units(b, 0, 4, 2);
    vp_xl_stats(p, &a1);
    ck_assert_uint_eq(p->xl->cows.n, 4);
    ck_assert_uint_eq(a1.written_sect, a0.written_sect);   /* no copy written */
    check_pattern(b, 0, 4 * MB, 2);
    check_pattern(b, 4 * MB, 2 * MB, 1);
    checkpoint(p);
    if (_i == 1) commit_nodurable(p);
    if (_i == 3) {
        ck_assert_int_eq(nasd_bdev_unmap(b, MB, MB), 0);
        ck_assert_int_eq(nasd_bdev_unmap(b, 2 * MB + 8192, 4096), 0);
        ck_assert_uint_eq(p->xl->cows.n, 3);
    }
    if (_i >= 2) ck_assert_int_eq(nasd_bdev_flush(b), 0);
    if (_i >= 1) ck_assert_uint_eq(p->xl->cows.n, 0);
    vp_sim_kill(sim);
    nasd_bdev_put(b);
    vpool_close(p);
    uint64_t undone;
    vp_sim_rollback(sim, paths, 3, VP_SIM_UNDO_ALL, &undone);
    p = import_pool(&t, 3, -1);
    b = open_vol(p, "v", 4096);
    uint8_t got[4096], o1[4096], n1[4096], z[4096] = {0};
    int bad = 0, eio = 0, nnew = 0;
    for (uint64_t o = 0; o < 8 * MB; o += 4096) {
        if (nasd_bdev_read(b, got, o, 4096)) { eio++; continue; }
        if (o < 6 * MB) fill_block(o1, o, 1); else memset(o1, 0, 4096);
        if (o < 4 * MB) fill_block(n1, o, 2); else memcpy(n1, o1, 4096);
        if (_i == 3 && ((o >= MB && o < 2 * MB) || o == 2 * MB + 8192)) memcpy(n1, z, 4096);
        bool is_old = !memcmp(got, o1, 4096), is_new = !memcmp(got, n1, 4096);
        nnew += is_new && !is_old;
        if (_i == 0 ? !is_old : _i == 1 ? !is_old && !is_new : !is_new) bad++;
    }
    struct vpool_status st;
    vpool_get_status(p, &st);
    printf("whole units %d: undone %llu, new %d, wrong %d, unreadable %d\n", _i, (unsigned long long)undone, nnew, bad, eio);
    ck_assert_msg(eio == 0 && bad == 0 && st.unrepairable == 0, "case %d: %d unreadable, %d wrong", _i, eio, bad);
    int e = 0;
    nasd_bdev *bs = vpool_snap_open(p, "v", "s0", 4096, &e);
    ck_assert_ptr_nonnull(bs);
    check_pattern(bs, 0, 6 * MB, 1);
    nasd_bdev_put(bs);
    /* the snapshot's 6 units, and the volume's own new units if they are there */
    uint64_t used = 0;
    for (uint64_t au = 0; au < p->n_au; au++) used += p->au[au].vol_id != 0;
    uint64_t want = _i == 0 ? 6 : _i == 3 ? 9 : 10;
    if (_i == 1 && used == 6) want = 6;   /* none of the switches made it */
    ck_assert_msg(used == want, "case %d: %llu units in use, want %llu", _i, (unsigned long long)used,
                  (unsigned long long)want);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* A commit fails after it wrote a waiting whole unit (a member dies in its second slice),
 * a checkpoint follows without a commit (a volume grown), then 4 KiB of that unit are
 * unmapped, written again and flushed. That flush's records held a ZERO of the sector
 * after the unit's location records: replayed last, it lost the flushed write (zeros).
 * (Found by a review of 585694b.) */
START_TEST(t_unmap_after_failed_commit)
{
    struct tdir t;
    const char *const *paths;
    nasd_bdev *b;
    struct vpool *p = snapped(&t, &paths, &b);
    ck_assert_uint_eq(p->xl->seg_sect / 2, VP_AU_SECT);   /* a commit slice is one unit here */
    struct vp_sim *sim = vp_sim_attach(p);
    write_units(b, 0, 1, 2);                    /* unit 0 waits */
    write_pattern(b, 7 * MB, 4096, 4, 0);       /* a new unit after it: the commit's second slice */
    ck_assert_uint_eq(p->xl->cows.n, 1);
    uint64_t nau = p->xl->cows.v[0].nau;
    vp_sim_kill_member_after(sim, 0, 1);
    pthread_mutex_lock(&p->commit_lock);
    int rc = vp_commit_ex(p, false);
    pthread_mutex_unlock(&p->commit_lock);
    ck_assert_int_ne(rc, 0);
    ck_assert_int_eq(vp_pool_state(p), VPOOL_DEGRADED);
    ck_assert_uint_eq(p->xl->cows.n, 1);
    ck_assert_uint_ne(vp_csum_get(p, nau * VP_AU_SECT + 2), 0);   /* the unit was written and published */
    struct vp_prof before, after;
    vp_debug_prof(p, &before);
    ck_assert_int_eq(vpool_vol_resize(p, "v", 9 * MB), 0);   /* a checkpoint (the member fault), no commit */
    vp_debug_prof(p, &after);
    ck_assert_uint_eq(after.checkpoints, before.checkpoints + 1);
    ck_assert_uint_eq(p->xl->cows.n, 1);
    ck_assert_int_eq(nasd_bdev_unmap(b, 8192, 4096), 0);
    uint8_t blk[4096], got[4096];
    fill_block(blk, 8192, 3);
    ck_assert_int_eq(nasd_bdev_write(b, blk, 8192, 4096, 0), 0);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    ck_assert_uint_eq(p->xl->cows.n, 0);
    vp_sim_kill(sim);
    nasd_bdev_put(b);
    vpool_close(p);
    uint64_t undone;
    vp_sim_rollback(sim, paths, 3, VP_SIM_UNDO_ALL, &undone);
    p = import_pool(&t, 3, 0);   /* the dead member stays out */
    b = open_vol(p, "v", 4096);
    ck_assert_int_eq(nasd_bdev_read(b, got, 8192, 4096), 0);
    ck_assert_msg(!memcmp(got, blk, 4096), "the flushed write read back as %s", is_zero(got, 4096) ? "zeros" : "other data");
    for (uint64_t o = 0; o < MB; o += 4096) {
        if (o == 8192) continue;
        fill_block(blk, o, 2);
        ck_assert_int_eq(nasd_bdev_read(b, got, o, 4096), 0);
        ck_assert_msg(!memcmp(got, blk, 4096), "unit 0 at %llu: not the flushed data", (unsigned long long)o);
    }
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* 64 KiB chunks whose first rnd bytes are random (seed), the rest zeros: lz4 stores such a
 * chunk in about rnd / 4 KiB sectors (none when all zeros, raw when rnd is near 64 KiB) */
static void chunk_fill(uint8_t *c, size_t rnd, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    memset(c, 0, 65536);
    for (size_t i = 0; i < rnd; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; c[i] = (uint8_t)x; }
}

/* A commit writes its sectors in slices (of half a segment); a member dies in the second.
 * A slice that ended inside an lz4 chunk left it half in its new form in memory: a read of
 * an unchanged sector of it failed, and so did every later commit (merging the partly
 * written chunk reads it). (Found by a review of e8d1c25.) */
START_TEST(t_lz4_failed_slice)
{
    struct tdir t;
    const char *const *paths;
    struct vpool *p = mk(&t, 256 * MB, &paths);
    ck_assert_int_eq(vpool_vol_create(p, "a", 1 * MB, 0), 0);
    ck_assert_int_eq(vpool_vol_create(p, "z", 1 * MB, VPOOL_VOL_LZ4), 0);
    nasd_bdev *ba = open_vol(p, "a", 4096), *bz = open_vol(p, "z", 4096);
    write_pattern(ba, 0, 32768, 1, 1);
    uint8_t *c = malloc(1 * MB);
    for (int i = 0; i < 16; i++) chunk_fill(c + i * 65536, 8192, (uint64_t)i + 1);
    ck_assert_int_eq(nasd_bdev_write(bz, c, 0, 1 * MB, 0), 0);
    ck_assert_int_eq(nasd_bdev_flush(bz), 0);
    write_pattern(ba, 0, 32768, 2, 0);   /* 8 sectors before z's: 16 x 16 + 8 > one slice of 256 */
    uint8_t s[8 * 4096];
    for (int i = 0; i < 16; i++) {
        for (int k = 0; k < 8; k++) fill_block(s + k * 4096, (uint64_t)k, 100 + (uint64_t)i);
        ck_assert_int_eq(nasd_bdev_write(bz, s, (uint64_t)i * 65536, i == 15 ? sizeof s : 4096, 0), 0);
    }
    struct vp_sim *sim = vp_sim_attach(p);
    vp_sim_kill_member_after(sim, 0, 1);
    ck_assert_int_ne(commit_nodurable_rc(p), 0);
    ck_assert_int_eq(vp_pool_state(p), VPOOL_DEGRADED);
    uint8_t buf[4096], zero[4096] = {0};
    int rrc = nasd_bdev_read(bz, buf, 15 * 65536 + 10 * 4096, 4096);
    ck_assert_msg(rrc == 0 && !memcmp(buf, zero, 4096), "an unchanged sector of a chunk the failed commit cut: %d", rrc);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(commit_nodurable_rc(p), 0);
    ck_assert_uint_eq(vc_dirty_count(p->cache), 0);
    nasd_bdev_put(ba); nasd_bdev_put(bz);
    vpool_close(p);
    tdir_remove(&t);
    free(c);
}
END_TEST

/* A commit turns 16 lz4 chunks from compressed to raw and fails in its second slice (a
 * member dies), after the first was published. The next commit saw raw -> raw in memory
 * and journaled without a sync, though the disk still held the compressed form: power
 * loss at each member write (loop 0) or sync (loop 1) of that commit, with a random part
 * of the unsynced blocks undone, must leave each chunk old or new. (Found by a review of
 * e8d1c25: 7 of 16 chunks unreadable.) */
START_TEST(t_lz4_after_failed_commit)
{
    uint8_t *o = malloc(MB), *n = malloc(MB), *got = malloc(65536);
    for (uint64_t c = 0; c < 16; c++) { chunk_fill(o + c * 65536, 8192, c + 1); chunk_fill(n + c * 65536, 65536, c + 100); }
    int k = 0;
    for (bool died = true; died; k++) {
        struct tdir t;
        const char *const *paths;
        struct vpool *p = mk(&t, 64 * MB, &paths);
        ck_assert_uint_eq(p->xl->seg_sect / 2, 256);
        ck_assert_int_eq(vpool_vol_create(p, "z", MB, VPOOL_VOL_LZ4), 0);
        ck_assert_int_eq(vpool_vol_create(p, "a", MB, 0), 0);
        nasd_bdev *bz = open_vol(p, "z", 4096), *ba = open_vol(p, "a", 4096);
        ck_assert_int_eq(nasd_bdev_write(bz, o, 0, MB, 0), 0);
        ck_assert_int_eq(nasd_bdev_flush(bz), 0);
        write_pattern(ba, 0, 4096, 1, 1);
        ck_assert_int_eq(nasd_bdev_write(bz, n, 0, MB, 0), 0);   /* slice 1: z's 256 sectors */
        write_pattern(ba, 0, 4096, 2, 0);                        /* slice 2 */
        struct vp_sim *sim = vp_sim_attach(p);
        vp_sim_kill_member_after(sim, 0, 1);
        ck_assert_int_ne(commit_nodurable_rc(p), 0);
        ck_assert_int_eq(vp_pool_state(p), VPOOL_DEGRADED);
        if (_i) vp_sim_kill_at_sync(sim, k); else vp_sim_kill_after(sim, k);
        int rc = commit_nodurable_rc(p);
        died = vp_sim_died(sim);
        ck_assert_msg(rc == 0 || died, "k=%d: commit failed without a crash: %d", k, rc);
        vp_sim_kill(sim);
        nasd_bdev_put(bz); nasd_bdev_put(ba);
        vpool_close(p);
        uint64_t undone;
        vp_sim_rollback(sim, paths, 3, (uint64_t)k * 7 + 3, &undone);
        p = import_pool(&t, 3, 0);   /* the dead member stays out */
        bz = open_vol(p, "z", 4096);
        int eio = 0, mixed = 0;
        for (uint64_t c = 0; c < 16; c++) {
            if (nasd_bdev_read(bz, got, c * 65536, 65536)) { eio++; continue; }
            mixed += memcmp(got, o + c * 65536, 65536) && memcmp(got, n + c * 65536, 65536);
        }
        ck_assert_msg(eio == 0 && mixed == 0, "k=%d (%s, undone %llu): %d chunks unreadable, %d neither old nor new", k,
                      _i ? "sync" : "write", (unsigned long long)undone, eio, mixed);
        nasd_bdev_put(bz);
        vpool_close(p);
        tdir_remove(&t);
        ck_assert_int_lt(k, 400);
    }
    printf("lz4 after a failed commit: power loss at each of %d member %s\n", k - 1, _i ? "syncs" : "writes");
    free(o); free(n); free(got);
}
END_TEST

/* 96 MiB of lz4 chunks become all zeros in one commit: 24,576 checksum records and no
 * data. They were taken for one long snapshot copy, which no batch may end inside, so the
 * commit wrote one journal batch per record (a synchronous write each), or with this many
 * a checkpoint instead. (Found by a review of e8d1c25.) */
START_TEST(t_lz4_zero_run)
{
    struct tdir t;
    const char *const *paths;
    mk_dirty = 512 * MB;   /* all the zeros in one commit */
    struct vpool *p = mk(&t, 64 * MB, &paths);
    mk_dirty = 64 * MB;
    ck_assert_int_eq(vpool_vol_create(p, "z", 96 * MB, VPOOL_VOL_LZ4 | VPOOL_VOL_THIN), 0);
    nasd_bdev *bz = open_vol(p, "z", 4096);
    uint8_t *c = malloc(MB), *zero = calloc(1, MB);
    for (int i = 0; i < 16; i++) chunk_fill(c + i * 65536, 8192, (uint64_t)i + 1);
    for (uint64_t o = 0; o < 96 * MB; o += MB) ck_assert_int_eq(nasd_bdev_write(bz, c, o, MB, 0), 0);
    ck_assert_int_eq(nasd_bdev_flush(bz), 0);
    for (uint64_t o = 0; o < 96 * MB; o += MB) ck_assert_int_eq(nasd_bdev_write(bz, zero, o, MB, 0), 0);
    uint64_t seq0 = p->seq, e0 = p->xl->epoch;
    commit_nodurable(p);
    printf("zero run: %llu journal batches, %llu checkpoints\n", (unsigned long long)(p->seq - seq0),
           (unsigned long long)(p->xl->epoch - e0));
    /* (one batch per record made the records too long for the journal: a checkpoint instead) */
    ck_assert_uint_eq(p->xl->epoch, e0);
    ck_assert(p->seq - seq0 >= 1 && p->seq - seq0 <= 4);
    ck_assert_int_eq(nasd_bdev_read(bz, c, 0, MB), 0);
    ck_assert(!memcmp(c, zero, MB));
    nasd_bdev_put(bz);
    vpool_close(p);
    tdir_remove(&t);
    free(c); free(zero);
}
END_TEST

/* An lz4 chunk on the log-structured raidz1 rewritten to another compressed length, committed without a
 * sync, then a power loss at each member write of that commit (and after it), with a
 * random part of the unsynced blocks undone: each chunk reads as before or as after,
 * never as an I/O error or a mix (the no-data sectors' checksum records of the new form
 * were replayed over the old form's data). Loop: old and new sizes (compressed shorter,
 * longer, raw to compressed, compressed to raw). */
START_TEST(t_lz4_rewrite_crash)
{
    static const size_t sizes[4][2] = { { 40960, 8192 }, { 8192, 40960 }, { 65536, 8192 }, { 8192, 65536 } };
    size_t s_old = sizes[_i][0], s_new = sizes[_i][1];
    uint8_t *o = malloc(4 * MB), *n = malloc(4 * MB), *got = malloc(4 * MB);
    for (uint64_t c = 0; c < 64; c++) { chunk_fill(o + c * 65536, s_old, c + 1); chunk_fill(n + c * 65536, s_new, c + 100); }
    int k = 0, nnew = 0;
    for (bool died = true; died; k++) {
        struct tdir t;
        const char *const *paths;
        struct vpool *p = mk(&t, 64 * MB, &paths);
        ck_assert_int_eq(vpool_vol_create(p, "z", 4 * MB, VPOOL_VOL_LZ4), 0);
        nasd_bdev *b = open_vol(p, "z", 4096);
        ck_assert_int_eq(nasd_bdev_write(b, o, 0, 4 * MB, 0), 0);
        ck_assert_int_eq(nasd_bdev_flush(b), 0);
        ck_assert_int_eq(nasd_bdev_write(b, n, 0, 4 * MB, 0), 0);
        struct vp_sim *sim = vp_sim_attach(p);
        vp_sim_kill_after(sim, k);
        pthread_mutex_lock(&p->commit_lock);
        int rc = vp_commit_ex(p, false);
        pthread_mutex_unlock(&p->commit_lock);
        died = vp_sim_died(sim);
        ck_assert_msg(rc == 0 || died, "k=%d: commit failed without a crash: %d", k, rc);
        vp_sim_kill(sim);
        nasd_bdev_put(b);
        vpool_close(p);
        uint64_t undone;
        vp_sim_rollback(sim, paths, 3, (uint64_t)k * 7 + (uint64_t)_i, &undone);
        p = import_pool(&t, 3, -1);
        b = open_vol(p, "z", 4096);
        int eio = 0, mixed = 0;
        for (uint64_t c = 0; c < 64; c++) {
            if (nasd_bdev_read(b, got, c * 65536, 65536)) { eio++; continue; }
            bool is_old = !memcmp(got, o + c * 65536, 65536), is_new = !memcmp(got, n + c * 65536, 65536);
            mixed += !is_old && !is_new;
            nnew += is_new;
        }
        ck_assert_msg(eio == 0 && mixed == 0, "%zu -> %zu, k=%d (undone %llu): %d chunks unreadable, %d neither old nor new",
                      s_old, s_new, k, (unsigned long long)undone, eio, mixed);
        nasd_bdev_put(b);
        vpool_close(p);
        tdir_remove(&t);
    }
    printf("lz4 %zu -> %zu bytes: crashed at each of %d member writes, chunks read new %d times\n", s_old, s_new, k - 1, nnew);
    ck_assert_int_ge(k, 4);
    free(o); free(n); free(got);
}
END_TEST

int main(void)
{
    nasd_log_level = LOG_ERR;
    Suite *s = suite_create("vpool_log_cow");
    TCase *tc = tcase_create("log_cow");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, t_ckpt_inside_journal_write);
    tcase_add_loop_test(tc, t_degraded_copy_back, 0, 6);
    tcase_add_loop_test(tc, t_whole_unit_copies, 0, 4);
    tcase_add_test(tc, t_unmap_after_failed_commit);
    tcase_add_loop_test(tc, t_lz4_rewrite_crash, 0, 4);
    tcase_add_test(tc, t_lz4_failed_slice);
    tcase_add_test(tc, t_lz4_zero_run);
    tcase_add_loop_test(tc, t_lz4_after_failed_commit, 0, 2);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
