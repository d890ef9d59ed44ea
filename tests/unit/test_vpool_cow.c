/* Snapshot copy-on-write whose switch (ALLOC of the copy, its checksums, LIFE of the old
 * unit) waits for the next commit: crashes around that commit keep every flushed write and
 * unmap, never mix a copy with later records of its sectors, never split a copy over two
 * journal batches, and never let a copy land in a unit whose FREE is not durable yet.
 * (Found by review of the lazy switch; each test failed on it.) Also: copies on O_DIRECT
 * members over a damaged sector. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <fcntl.h>
#include <xxhash.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"
#include "storage/pool/vpool_snap.h"
#include "tests/unit/test_vpool_util.h"

#define MB (1ull << 20)

static void fill(uint8_t *b, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; b[i] = (uint8_t)x; }
}

/* A pool "sp" of 3 fresh member files of msize bytes; pp gets their paths. */
static struct vpool *pool3(struct tdir *t, const char **pp, uint64_t msize, enum vpool_layout layout)
{
    struct vpool_member_spec ms[3];
    tdir_make(t, 3);
    for (int i = 0; i < 3; i++) { ms[i] = (struct vpool_member_spec){ t->member[i], msize }; pp[i] = t->member[i]; }
    struct vpool *p;
    char err[256];
    struct vpool_opts o = { .cache_bytes = 8ull << 20, .dirty_bytes = 4ull << 20 };
    ck_assert_msg(vpool_create("sp", layout, ms, 3, &o, &p, err, sizeof err) == 0, "%s", err);
    return p;
}

static struct vpool *setup(struct tdir *t, const char *const **paths, nasd_bdev **b, uint8_t *A)
{
    static const char *pp[3];
    struct vpool *p = pool3(t, pp, MEMBER_SIZE, VPOOL_RAIDZ1);
    *paths = pp;
    ck_assert_int_eq(vpool_vol_create(p, "v", 8 * MB, 0), 0);
    *b = open_vol(p, "v", 4096);
    memset(A, 0, 8 * MB);
    fill(A, 6 * MB, 1);
    ck_assert_int_eq(nasd_bdev_write(*b, A, 0, 6 * MB, 0), 0);
    ck_assert_int_eq(nasd_bdev_flush(*b), 0);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s0"), 0);
    return p;
}

static struct vpool *crash_import(struct vpool *p, struct vp_sim *sim, const char *const *paths, nasd_bdev *b)
{
    nasd_bdev_put(b);
    vpool_close(p);
    uint64_t undone;
    vp_sim_rollback(sim, paths, 3, VP_SIM_UNDO_ALL, &undone);
    char err[256];
    ck_assert_msg(vpool_import(paths, 3, NULL, &p, err, sizeof err) == 0, "import: %s", err);
    return p;
}

/* A flushed unmap of part of a just-copied unit: ZERO is applied at once by replay,
 * the copy's CSUM records (same batch) only at the batch's end. */
START_TEST(t_unmap_after_cow_lost)
{
    struct tdir t; const char *const *paths; nasd_bdev *b;
    uint8_t *A = malloc(8 * MB), *cur = malloc(8 * MB);
    struct vpool *p = setup(&t, &paths, &b, A);
    uint8_t w[4096]; fill(w, 4096, 9);
    ck_assert_int_eq(nasd_bdev_write(b, w, MB + 8192, 4096, 0), 0);   /* copies unit 1 */
    memcpy(A + MB + 8192, w, 4096);
    ck_assert_int_eq(nasd_bdev_unmap(b, MB, 65536), 0);
    memset(A + MB, 0, 65536);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    ck_assert_int_eq(nasd_bdev_read(b, cur, 0, 8 * MB), 0);
    ck_assert_msg(!memcmp(cur, A, 8 * MB), "before the crash");
    struct vp_sim *sim = vp_sim_attach(p);
    vp_sim_kill(sim);
    p = crash_import(p, sim, paths, b);
    b = open_vol(p, "v", 4096);
    ck_assert_int_eq(nasd_bdev_read(b, cur, 0, 8 * MB), 0);
    int bad = 0;
    for (uint64_t s = 0; s < 16; s++) bad += !is_zero(cur + MB + s * 4096, 4096);
    ck_assert_msg(bad == 0, "flushed unmap undone by replay: %d of 16 sectors read old data", bad);
    nasd_bdev_put(b); vpool_close(p); tdir_remove(&t); free(A); free(cur);
}
END_TEST

/* A flushed whole-unit unmap of a just-copied unit: FREE applied at once, CSUM after. */
START_TEST(t_free_after_cow_stale)
{
    struct tdir t; const char *const *paths; nasd_bdev *b;
    uint8_t *A = malloc(8 * MB);
    struct vpool *p = setup(&t, &paths, &b, A);
    uint8_t w[4096]; fill(w, 4096, 9);
    ck_assert_int_eq(nasd_bdev_write(b, w, MB + 8192, 4096, 0), 0);
    int m; uint64_t moff, ps;
    ck_assert_int_eq(vp_debug_locate(p, "v", MB, &m, &moff, &ps), 0);
    uint64_t nau = ps / VP_AU_SECT;
    ck_assert_int_eq(nasd_bdev_unmap(b, MB, MB), 0);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    struct vp_sim *sim = vp_sim_attach(p);
    vp_sim_kill(sim);
    p = crash_import(p, sim, paths, b);
    int stale = 0;
    for (uint64_t s = nau * VP_AU_SECT; s < (nau + 1) * VP_AU_SECT; s++) stale += p->csum[s] != 0;
    ck_assert_msg(p->au[nau].vol_id == 0, "unit %llu not free", (unsigned long long)nau);
    ck_assert_msg(stale == 0, "free unit %llu has %d checksums after replay", (unsigned long long)nau, stale);
    vpool_close(p); tdir_remove(&t); free(A);
}
END_TEST

/* Cached writes (journaled as intents) into a just-copied unit, crash after the
 * journal batch, before their in-place data: each sector must be old or new. */
START_TEST(t_intent_after_cow_zeroed)
{
    struct tdir t; const char *const *paths; nasd_bdev *b;
    uint8_t *A = malloc(8 * MB), *B = malloc(8 * MB), *cur = malloc(8 * MB);
    struct vpool *p = setup(&t, &paths, &b, A);
    memcpy(B, A, 8 * MB);
    uint8_t w[4096]; fill(w, 4096, 9);
    ck_assert_int_eq(nasd_bdev_write(b, w, MB, 4096, 0), 0);   /* copies unit 1 */
    memcpy(A + MB, w, 4096); memcpy(B + MB, w, 4096);          /* A: state after the copy */
    for (int i = 0; i < 80; i++) {
        fill(B + MB + i * 4096, 4096, 100 + i);
        ck_assert_int_eq(nasd_bdev_write(b, B + MB + i * 4096, MB + i * 4096, 4096, 0), 0);
    }
    struct vp_sim *sim = vp_sim_attach(p);
    vp_sim_kill_after(sim, 2);   /* the two journal copies of the flush's batch, nothing in place */
    int rc = nasd_bdev_flush(b);
    ck_assert(rc != 0 && vp_sim_died(sim));
    p = crash_import(p, sim, paths, b);
    b = open_vol(p, "v", 4096);
    ck_assert_int_eq(nasd_bdev_read(b, cur, 0, 8 * MB), 0);
    int zero = 0, other = 0;
    for (int i = 0; i < 256; i++) {
        uint64_t o = MB + i * 4096;
        bool old = !memcmp(cur + o, A + o, 4096), new_ = !memcmp(cur + o, B + o, 4096);
        if (!old && !new_) { if (is_zero(cur + o, 4096)) zero++; else other++; }
    }
    ck_assert_msg(zero == 0 && other == 0, "unit 1: %d sectors zeroed, %d other (neither old nor new)", zero, other);
    nasd_bdev_put(b); vpool_close(p); tdir_remove(&t); free(A); free(B); free(cur);
}
END_TEST


/* Volume x with one flushed, checkpointed unit of X, then unmapped without a flush:
 * that unit's FREE is pending. The allocator is pointed at it (as when the cursor wraps
 * in a full pool), so the next unit taken is it. Returns the unit. */
static uint64_t pending_free_unit(struct vpool *p, nasd_bdev **xb, uint8_t *X)
{
    ck_assert_int_eq(vpool_vol_create(p, "x", 8 * MB, 0), 0);
    *xb = open_vol(p, "x", 4096);
    fill(X, MB, 55);
    ck_assert_int_eq(nasd_bdev_write(*xb, X, 0, MB, 0), 0);
    ck_assert_int_eq(nasd_bdev_flush(*xb), 0);
    ck_assert_int_eq(vpool_vol_create(p, "y", MB, 0), 0);   /* a checkpoint: x's checksums in the table */
    int m; uint64_t moff, ps;
    ck_assert_int_eq(vp_debug_locate(p, "x", 0, &m, &moff, &ps), 0);
    uint64_t k = ps / VP_AU_SECT;
    ck_assert_int_eq(nasd_bdev_unmap(*xb, 0, MB), 0);
    pthread_mutex_lock(&p->alloc_lock);
    p->au_cursor = k;
    pthread_mutex_unlock(&p->alloc_lock);
    return k;
}

/* The copy takes a unit whose FREE (unmap of volume x) is still pending; the copy's
 * REGION record is durable at once. Crash before the next commit: import accepts the
 * copy's data as x's content (x's unmap was never flushed: old data or zeros expected). */
START_TEST(t_region_accepts_foreign_copy)
{
    struct tdir t; const char *const *paths; nasd_bdev *b;
    uint8_t *A = malloc(8 * MB), *X = malloc(MB), *cur = malloc(MB);
    struct vpool *p = setup(&t, &paths, &b, A);
    nasd_bdev *xb;
    uint64_t k = pending_free_unit(p, &xb, X);
    int m; uint64_t moff, ps;
    uint8_t w[4096]; fill(w, 4096, 9);
    ck_assert_int_eq(nasd_bdev_write(b, w, MB, 4096, 0), 0);   /* copies v's unit 1 into k */
    ck_assert_int_eq(vp_debug_locate(p, "v", MB, &m, &moff, &ps), 0);
    ck_assert_uint_eq(ps / VP_AU_SECT, k);
    struct vp_sim *sim = vp_sim_attach(p);
    vp_sim_kill(sim);
    nasd_bdev_put(xb);
    p = crash_import(p, sim, paths, b);
    xb = open_vol(p, "x", 4096);
    int rc = nasd_bdev_read(xb, cur, 0, MB);
    int foreign = 0, zero = 0, old = 0;
    for (int i = 0; rc == 0 && i < 256; i++) {
        if (!memcmp(cur + i * 4096, X + i * 4096, 4096)) old++;
        else if (is_zero(cur + i * 4096, 4096)) zero++;
        else if (!memcmp(cur + i * 4096, i ? A + MB + i * 4096 : w, 4096)) foreign++;
    }
    ck_assert_msg(rc == 0 && foreign == 0, "x after the crash: read rc %d, %d sectors hold v's copy, %d old, %d zero",
                  rc, foreign, old, zero);
    nasd_bdev_put(xb); vpool_close(p); tdir_remove(&t); free(A); free(X); free(cur);
}
END_TEST

/* The same for a direct write (a whole row and more, in place from the caller's buffer)
 * into a unit newly taken by another volume while the unit's FREE is pending. */
START_TEST(t_region_accepts_foreign_direct)
{
    struct tdir t; const char *const *paths; nasd_bdev *b;
    uint8_t *A = malloc(8 * MB), *X = malloc(MB), *cur = malloc(MB), *Z = malloc(MB);
    struct vpool *p = setup(&t, &paths, &b, A);
    ck_assert_int_eq(vpool_vol_create(p, "z", 8 * MB, 0), 0);
    nasd_bdev *xb, *zb = open_vol(p, "z", 4096);
    uint64_t k = pending_free_unit(p, &xb, X);
    int m; uint64_t moff, ps;
    fill(Z, MB, 77);
    ck_assert_int_eq(nasd_bdev_write(zb, Z, 0, MB, 0), 0);     /* direct, into k */
    ck_assert_int_eq(vp_debug_locate(p, "z", 0, &m, &moff, &ps), 0);
    ck_assert_uint_eq(ps / VP_AU_SECT, k);
    struct vp_sim *sim = vp_sim_attach(p);
    vp_sim_kill(sim);
    nasd_bdev_put(xb);
    nasd_bdev_put(zb);
    p = crash_import(p, sim, paths, b);
    xb = open_vol(p, "x", 4096);
    int rc = nasd_bdev_read(xb, cur, 0, MB);
    int foreign = 0;
    for (int i = 0; rc == 0 && i < 256; i++) foreign += !memcmp(cur + i * 4096, Z + i * 4096, 4096);
    ck_assert_msg(rc == 0 && foreign == 0, "x after the crash: read rc %d, %d sectors hold z's data", rc, foreign);
    nasd_bdev_put(xb); vpool_close(p); tdir_remove(&t); free(A); free(X); free(cur); free(Z);
}
END_TEST


/* More than 63 copies pending: the commit writes their records in chunks of
 * VP_BATCH_RECS, which can split one copy (ALLOC in one batch, LIFE of the old unit in
 * the next). A crash between them: both units alive for one extent. */
START_TEST(t_split_switch)
{
    struct tdir t;
    const char *pp[3];
    char err[256];
    struct vpool *p = pool3(&t, pp, 256ull << 20, VPOOL_RAIDZ1);
    const uint64_t VS = 64 * MB;
    uint8_t *A = malloc(VS), *cur = malloc(VS);
    ck_assert_int_eq(vpool_vol_create(p, "pad", 80 * MB, 0), 0);
    nasd_bdev *pb = open_vol(p, "pad", 4096);
    fill(A, VS, 3);
    ck_assert_int_eq(nasd_bdev_write(pb, A, 0, VS, 0), 0);
    ck_assert_int_eq(nasd_bdev_write(pb, A, VS, 16 * MB, 0), 0);
    ck_assert_int_eq(nasd_bdev_flush(pb), 0);
    nasd_bdev_put(pb);
    ck_assert_int_eq(vpool_vol_create(p, "v", VS, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    fill(A, VS, 1);
    ck_assert_int_eq(nasd_bdev_write(b, A, 0, VS, 0), 0);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s0"), 0);
    ck_assert_int_eq(vpool_vol_destroy(p, "pad"), 0);   /* units 0..79 free */
    pthread_mutex_lock(&p->alloc_lock);
    p->au_cursor = 0;   /* as after the cursor wrapped: copies land below the originals */
    pthread_mutex_unlock(&p->alloc_lock);
    uint8_t w[4096];
    for (int e = 0; e < 64; e++) {
        fill(w, 4096, 1000 + e);
        ck_assert_int_eq(nasd_bdev_write(b, w, (uint64_t)e * MB, 4096, 0), 0);
    }
    ck_assert_uint_gt(p->npend, 16384);   /* more than one batch */
    struct vp_sim *sim = vp_sim_attach(p);
    vp_sim_kill_after(sim, 2);   /* the first batch of records (two copies), not the second */
    int rc = nasd_bdev_flush(b);
    ck_assert_int_ne(rc, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    uint64_t undone;
    vp_sim_rollback(sim, pp, 3, 1, &undone);
    ck_assert_msg(vpool_import(pp, 3, NULL, &p, err, sizeof err) == 0, "import: %s", err);
    int e2 = 0;
    nasd_bdev *sb = vpool_snap_open(p, "v", "s0", 4096, &e2);
    ck_assert_ptr_nonnull(sb);
    ck_assert_int_eq(nasd_bdev_read(sb, cur, 0, VS), 0);
    int lost = 0;
    for (int e = 0; e < 64; e++) lost += memcmp(cur + e * MB, A + e * MB, MB) != 0;
    nasd_bdev_put(sb);
    b = open_vol(p, "v", 4096);
    ck_assert_int_eq(nasd_bdev_read(b, cur, 0, VS), 0);
    int mixed = 0;
    for (int e = 0; e < 64; e++) {
        fill(w, 4096, 1000 + e);
        bool old = !memcmp(cur + e * MB, A + e * MB, MB);
        bool new_ = !memcmp(cur + e * MB, w, 4096) && !memcmp(cur + e * MB + 4096, A + e * MB + 4096, MB - 4096);
        mixed += !old && !new_;
    }
    ck_assert_msg(lost == 0 && mixed == 0, "snapshot units changed: %d, volume units neither old nor new: %d", lost, mixed);
    nasd_bdev_put(b); vpool_close(p); tdir_remove(&t); free(A); free(cur);
}
END_TEST

/* A copy followed by more than VP_BATCH_RECS LIFE records of whole-unit unmaps of
 * shared units, all in one commit: the batches must neither cut the copy (ALLOC alone in
 * the first batch: import then freed the snapshot's unit as "mapped twice") nor shrink
 * to one record each through the LIFE run. */
START_TEST(t_split_by_life_run)
{
    struct tdir t;
    const char *pp[3];
    char err[256];
    struct vpool *p = pool3(&t, pp, 6ull << 30, VPOOL_STRIPE);
    const uint64_t NU = 16500;
    ck_assert_int_eq(vpool_vol_create(p, "pad", MB, VPOOL_VOL_THIN), 0);
    nasd_bdev *pb = open_vol(p, "pad", 4096);
    uint8_t w[4096]; fill(w, 4096, 7);
    ck_assert_int_eq(nasd_bdev_write(pb, w, 0, 4096, 0), 0);
    ck_assert_int_eq(nasd_bdev_flush(pb), 0);
    nasd_bdev_put(pb);
    ck_assert_int_eq(vpool_vol_create(p, "v", NU * MB, VPOOL_VOL_THIN), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    uint8_t *A = malloc(MB), *cur = malloc(MB);
    fill(A, MB, 1);
    ck_assert_int_eq(nasd_bdev_write(b, A, 0, MB, 0), 0);
    for (uint64_t e = 1; e < NU; e++) ck_assert_int_eq(nasd_bdev_write(b, w, e * MB, 4096, 0), 0);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s0"), 0);
    ck_assert_int_eq(vpool_vol_destroy(p, "pad"), 0);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    pthread_mutex_lock(&p->alloc_lock);
    p->au_cursor = 0;   /* the copy lands below the original */
    pthread_mutex_unlock(&p->alloc_lock);
    uint8_t w2[4096]; fill(w2, 4096, 99);
    ck_assert_int_eq(nasd_bdev_write(b, w2, 8192, 4096, 0), 0);      /* copies unit 0 */
    ck_assert_int_eq(nasd_bdev_unmap(b, MB, (NU - 1) * MB), 0);     /* a LIFE per unit */
    ck_assert_uint_gt(p->npend, 16384 + 258);
    uint64_t jpos0 = p->jpos;
    struct vp_sim *sim = vp_sim_attach(p);
    vp_sim_kill_after(sim, 2);   /* the two journal copies of the first batch, not the second */
    ck_assert_int_ne(nasd_bdev_flush(b), 0);
    ck_assert_msg(p->jpos - jpos0 < (1u << 20), "the first batch took %llu bytes of journal",
                  (unsigned long long)(p->jpos - jpos0));
    nasd_bdev_put(b);
    vpool_close(p);
    uint64_t undone;
    vp_sim_rollback(sim, pp, 3, VP_SIM_UNDO_ALL, &undone);
    ck_assert_msg(vpool_import(pp, 3, NULL, &p, err, sizeof err) == 0, "import: %s", err);
    int e2 = 0;
    nasd_bdev *sb = vpool_snap_open(p, "v", "s0", 4096, &e2);
    ck_assert_ptr_nonnull(sb);
    ck_assert_int_eq(nasd_bdev_read(sb, cur, 0, MB), 0);
    bool snap_ok = !memcmp(cur, A, MB);
    nasd_bdev_put(sb);
    b = open_vol(p, "v", 4096);
    ck_assert_int_eq(nasd_bdev_read(b, cur, 0, MB), 0);
    bool vol_old = !memcmp(cur, A, MB);
    bool vol_new = !memcmp(cur + 8192, w2, 4096) && !memcmp(cur, A, 8192) && !memcmp(cur + 12288, A + 12288, MB - 12288);
    nasd_bdev_put(b); vpool_close(p); tdir_remove(&t); free(A); free(cur);
    ck_assert_msg(snap_ok && (vol_old || vol_new), "snapshot unit 0 intact: %d, volume unit 0 old %d new %d",
                  snap_ok, vol_old, vol_new);
}
END_TEST

/* Damages the data sector behind volume offset off on its member. */
static void damage(struct vpool *p, struct tdir *t, uint64_t off)
{
    int m;
    uint64_t moff;
    ck_assert_int_eq(vp_debug_locate(p, "v", off, &m, &moff, NULL), 0);
    int fd = open(t->member[m], O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t junk[4096];
    memset(junk, 0xA5, sizeof junk);
    ck_assert_int_eq(pwrite(fd, junk, sizeof junk, (off_t)moff), (ssize_t)sizeof junk);
    ck_assert_int_eq(fsync(fd), 0);
    close(fd);
}

/* Copies on O_DIRECT members, in place (_i 0) and log-structured (_i 1): the old unit is
 * read in one span straight into the copy, and the sectors copied as they were keep their
 * checksums. A damaged sector in an old unit reaches the copy repaired, and after an
 * import the volume reads back with no repair at all (a kept checksum that did not match
 * its data would need one, or fail), the snapshot as it was. */
START_TEST(t_copy_direct_damaged)
{
    struct tdir t;
    const char *pp[3];
    struct vpool_member_spec ms[3];
    tdir_make(&t, 3);
    for (int i = 0; i < 3; i++) { ms[i] = (struct vpool_member_spec){ t.member[i], MEMBER_SIZE }; pp[i] = t.member[i]; }
    struct vpool *p;
    char err[256];
    struct vpool_opts o = { .cache_bytes = 8 * MB, .dirty_bytes = 4 * MB, .direct = 1, .log = _i };
    ck_assert_msg(vpool_create("sp", VPOOL_RAIDZ1, ms, 3, &o, &p, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(vpool_vol_create(p, "v", 8 * MB, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    uint8_t *A = aligned_alloc(4096, 8 * MB), *S = malloc(8 * MB), *got = aligned_alloc(4096, 8 * MB), w[4096];
    memset(A, 0, 8 * MB);
    fill(A, 6 * MB, 1);
    ck_assert_int_eq(nasd_bdev_write(b, A, 0, 6 * MB, 0), 0);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    memcpy(S, A, 8 * MB);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s0"), 0);
    damage(p, &t, MB + 20 * 4096);
    damage(p, &t, 3 * MB + 200 * 4096);
    uint64_t offs[3] = { MB + 5 * 4096, 3 * MB + 17 * 4096, 4 * MB + 255 * 4096 };
    for (int k = 0; k < 3; k++) {   /* one small write to each of three units: three copies */
        fill(w, sizeof w, 10 + (uint64_t)k);
        memcpy(A + offs[k], w, sizeof w);
        ck_assert_int_eq(nasd_bdev_write(b, w, offs[k], sizeof w, 0), 0);
    }
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_ge(st.repaired, 2);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    ck_assert_msg(vpool_import(pp, 3, &o, &p, err, sizeof err) == 0, "import: %s", err);
    b = open_vol(p, "v", 4096);
    ck_assert_int_eq(nasd_bdev_read(b, got, 0, 8 * MB), 0);
    for (uint64_t i = 0; i < 8 * MB; i += 4096)
        ck_assert_msg(!memcmp(got + i, A + i, 4096), "volume differs at %llu", (unsigned long long)i);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.repaired, 0);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev *sb = vpool_snap_open(p, "v", "s0", 4096, &(int){0});
    ck_assert_ptr_nonnull(sb);
    ck_assert_int_eq(nasd_bdev_read(sb, got, 0, 8 * MB), 0);
    ck_assert_msg(!memcmp(got, S, 8 * MB), "snapshot differs");
    nasd_bdev_put(sb);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
    free(A); free(S); free(got);
}
END_TEST

int main(void)
{
    nasd_log_level = LOG_WARN;
    Suite *s = suite_create("vpool_cow");
    TCase *tc = tcase_create("cow");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, t_unmap_after_cow_lost);
    tcase_add_test(tc, t_free_after_cow_stale);
    tcase_add_test(tc, t_intent_after_cow_zeroed);
    tcase_add_test(tc, t_region_accepts_foreign_copy);
    tcase_add_test(tc, t_region_accepts_foreign_direct);
    tcase_add_test(tc, t_split_switch);
    tcase_add_test(tc, t_split_by_life_run);
    tcase_add_loop_test(tc, t_copy_direct_damaged, 0, 2);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
