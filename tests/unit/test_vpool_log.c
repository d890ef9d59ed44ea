/* Format 3 (log-structured raidz1) pools: data read back after random overwrites,
 * re-import and with a member missing; the cleaner on a full pool; repair of corrupt
 * sectors by reads and scrub; unmap; snapshots. Power loss: test_vpool_crash. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdatomic.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"
#include "storage/pool/vpool_snap.h"
#include "tests/unit/test_vpool_util.h"

static uint32_t seeds[1u << 16];   /* per 4 KiB block of the volume: the seed it was written with */

static struct vpool *make_pool(struct tdir *t, uint64_t msize, uint64_t cache)
{
    tdir_make(t, 4);
    struct vpool_member_spec ms[4];
    for (int i = 0; i < 4; i++) ms[i] = (struct vpool_member_spec){ t->member[i], msize };
    /* a write-back budget far below the working sets here, so that commits (and the
     * cleaner) run while the tests write; the default would hold them in RAM */
    struct vpool_opts o = { .cache_bytes = cache, .dirty_bytes = cache ? cache / 2 : 32ull << 20, .log = 1 };
    struct vpool *p;
    char err[256];
    ck_assert_msg(vpool_create("lg", VPOOL_RAIDZ1, ms, 4, &o, &p, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(p->fmt, VP_FMT_LOG);
    return p;
}

static struct vpool *reimport(struct tdir *t, int skip, uint64_t cache)
{
    const char *paths[4];
    int n = 0;
    for (int i = 0; i < 4; i++) if (i != skip) paths[n++] = t->member[i];
    struct vpool_opts o = { .cache_bytes = cache, .dirty_bytes = cache ? cache / 2 : 32ull << 20 };
    struct vpool *p;
    char err[256];
    ck_assert_msg(vpool_import(paths, n, &o, &p, err, sizeof err) == 0, "import: %s", err);
    ck_assert_uint_eq(p->fmt, VP_FMT_LOG);
    return p;
}

/* random writes of 1..16 blocks, each block's seed remembered */
static void scribble(nasd_bdev *b, uint64_t nblk, unsigned ops, uint32_t seed0, int flush_every)
{
    static uint8_t buf[16 * 4096];
    uint64_t x = 0x9E3779B97F4A7C15ull * (seed0 + 1);
    for (unsigned i = 0; i < ops; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        unsigned cnt = 1 + (unsigned)(x >> 40) % 16;
        uint64_t blk = (x >> 8) % (nblk - cnt + 1);
        uint32_t sd = seed0 + i;
        for (unsigned k = 0; k < cnt; k++) { fill_block(buf + k * 4096, (blk + k) * 4096, sd); seeds[blk + k] = sd; }
        ck_assert_int_eq(nasd_bdev_write(b, buf, blk * 4096, cnt * 4096, 0), 0);
        if (flush_every && i % flush_every == 0) ck_assert_int_eq(nasd_bdev_flush(b), 0);
    }
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
}

static void check_all(struct vpool *p, uint64_t nblk)
{
    nasd_bdev *b = open_vol(p, "v", 4096);
    static uint8_t buf[64 * 4096];
    uint8_t want[4096];
    for (uint64_t blk = 0; blk < nblk; blk += 64) {
        uint64_t cnt = nblk - blk < 64 ? nblk - blk : 64;
        ck_assert_int_eq(nasd_bdev_read(b, buf, blk * 4096, cnt * 4096), 0);
        for (uint64_t k = 0; k < cnt; k++) {
            fill_block(want, (blk + k) * 4096, seeds[blk + k]);
            ck_assert_msg(!memcmp(buf + k * 4096, want, 4096), "block %llu differs", (unsigned long long)(blk + k));
        }
    }
    nasd_bdev_put(b);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.unrepairable, 0);
}

static void fill(nasd_bdev *b, uint64_t nblk, uint32_t sd)
{
    write_pattern(b, 0, nblk * 4096, sd, 1);
    for (uint64_t i = 0; i < nblk; i++) seeds[i] = sd;
}

/* Volume "v" over pct % of what the pool offers (*nblk blocks), filled with seed 1. */
static nasd_bdev *filled_vol(struct vpool *p, unsigned pct, uint64_t *nblk)
{
    struct vpool_status st;
    vpool_get_status(p, &st);
    *nblk = st.size / 4096 * pct / 100;
    ck_assert_int_eq(vpool_vol_create(p, "v", *nblk * 4096, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    fill(b, *nblk, 1);
    return b;
}

START_TEST(t_log_overwrite)
{
    struct tdir t;
    struct vpool *p = make_pool(&t, MEMBER_SIZE, 8ull << 20);
    uint64_t nblk = 16384;   /* 64 MiB */
    ck_assert_int_eq(vpool_vol_create(p, "v", nblk * 4096, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    fill(b, nblk, 1);
    scribble(b, nblk, 6000, 100, 97);
    nasd_bdev_put(b);
    check_all(p, nblk);
    struct vp_xl_stats xs;
    vp_xl_stats(p, &xs);
    ck_assert_uint_gt(xs.written_sect, nblk);
    vpool_close(p);
    p = reimport(&t, -1, 0);
    check_all(p, nblk);
    vpool_close(p);
    for (int skip = 0; skip < 4; skip++) {   /* every column rebuilt from parity */
        p = reimport(&t, skip, 1u << 20);
        check_all(p, nblk);
        vpool_close(p);
        p = reimport(&t, -1, 1u << 20);   /* the member left out is resilvered */
        vpool_wait_background(p);
        struct vpool_status st;
        vpool_get_status(p, &st);
        ck_assert_int_eq(st.state, VPOOL_ONLINE);
        vpool_close(p);
    }
    p = reimport(&t, -1, 0);
    check_all(p, nblk);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

START_TEST(t_log_cleaner)
{
    struct tdir t;
    struct vpool *p = make_pool(&t, 16ull << 20, 4ull << 20);
    uint64_t nblk;
    nasd_bdev *b = filled_vol(p, 90, &nblk);
    struct vpool_status st;
    scribble(b, nblk, 3000, 1000, 13);
    struct vp_xl_stats xs;
    vp_xl_stats(p, &xs);
    printf("cleaner: %llu segments cleaned, %llu sectors moved, %llu written, %llu padding\n",
           (unsigned long long)xs.cleaned_segs, (unsigned long long)xs.moved_sect, (unsigned long long)xs.written_sect,
           (unsigned long long)xs.pad_sect);
    ck_assert_uint_gt(xs.cleaned_segs, 0);
    ck_assert_uint_eq(xs.clean_reread, 0);   /* every read of a healthy pool right (offsets too) */
    nasd_bdev_put(b);
    check_all(p, nblk);
    vpool_scrub_start(p);
    vpool_wait_background(p);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.scrub_unrepairable, 0);
    ck_assert_uint_eq(st.scrub_repaired, 0);
    vpool_close(p);
    p = reimport(&t, 2, 1u << 20);
    check_all(p, nblk);
    b = open_vol(p, "v", 4096);
    scribble(b, nblk, 500, 5000, 0);   /* degraded: the cleaner reads through parity */
    nasd_bdev_put(b);
    check_all(p, nblk);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

static void corrupt(struct vpool *p, uint64_t off)
{
    int m;
    uint64_t moff, ps;
    ck_assert_int_eq(vp_debug_locate(p, "v", off, &m, &moff, &ps), 0);
    int fd = open(p->m[m].path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    uint8_t junk[4096];
    memset(junk, 0x5a, sizeof junk);
    ck_assert_int_eq(pwrite(fd, junk, sizeof junk, (off_t)moff), 4096);
    close(fd);
}

/* The cleaner reads most of a segment in one call per member: a corrupt sector in such
 * a read is rebuilt from parity before it moves, not copied with its old checksum (its
 * new row's parity would then hold the garbage, and the sector be lost). */
START_TEST(t_log_cleaner_corrupt)
{
    struct tdir t;
    struct vpool *p = make_pool(&t, 16ull << 20, 4ull << 20);
    uint64_t nblk;
    nasd_bdev *b = filled_vol(p, 90, &nblk);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    unsigned bad = 0;
    for (uint64_t blk = 5; blk < nblk; blk += 37, bad++) corrupt(p, blk * 4096);
    scribble(b, nblk, 1500, 9000, 0);
    struct vp_xl_stats xs;
    vp_xl_stats(p, &xs);
    ck_assert_uint_gt(xs.cleaned_segs, 8);
    struct vpool_status st;
    vpool_get_status(p, &st);
    printf("cleaner over %u corrupt sectors: %llu segments cleaned, %llu repaired, %llu read again\n", bad,
           (unsigned long long)xs.cleaned_segs, (unsigned long long)st.repaired, (unsigned long long)xs.clean_reread);
    ck_assert_uint_gt(st.repaired, 0);
    /* only the corrupt ones: a wrong offset would make good sectors fail and read again */
    ck_assert_uint_le(xs.clean_reread, bad);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev_put(b);
    check_all(p, nblk);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

START_TEST(t_log_repair)
{
    struct tdir t;
    struct vpool *p = make_pool(&t, MEMBER_SIZE, 1u << 20);
    uint64_t nblk = 4096;
    ck_assert_int_eq(vpool_vol_create(p, "v", nblk * 4096, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    fill(b, nblk, 7);
    scribble(b, nblk, 300, 50, 0);
    corrupt(p, 123 * 4096);
    check_all(p, nblk);   /* the read rebuilt it from parity and rewrote it */
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_ge(st.repaired, 1);
    corrupt(p, 3000 * 4096);
    vpool_scrub_start(p);
    vpool_wait_background(p);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.scrub_repaired, 1);
    ck_assert_uint_eq(st.scrub_unrepairable, 0);
    nasd_bdev_put(b);
    check_all(p, nblk);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

START_TEST(t_log_unmap_snapshot)
{
    struct tdir t;
    struct vpool *p = make_pool(&t, MEMBER_SIZE, 4ull << 20);
    uint64_t nblk = 8192;
    ck_assert_int_eq(vpool_vol_create(p, "v", nblk * 4096, VPOOL_VOL_THIN), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    fill(b, nblk, 3);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s1"), 0);
    scribble(b, nblk, 400, 70, 0);   /* copies the units the snapshot holds, into the log */
    nasd_bdev *sb = vpool_snap_open(p, "v", "s1", 4096, NULL);
    ck_assert_ptr_nonnull(sb);
    check_pattern(sb, 0, nblk * 4096, 3);
    nasd_bdev_put(sb);
    ck_assert_int_eq(nasd_bdev_unmap(b, 0, 4ull << 20), 0);   /* the first 4 MiB: units and sectors */
    ck_assert_int_eq(nasd_bdev_unmap(b, (4ull << 20) + 4096, 8192), 0);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    nasd_bdev_put(b);
    for (uint64_t i = 0; i < 1024; i++) seeds[i] = UINT32_MAX;
    seeds[1025] = seeds[1026] = UINT32_MAX;
    vpool_close(p);
    p = reimport(&t, 1, 1u << 20);
    b = open_vol(p, "v", 4096);
    static uint8_t buf[4096];
    uint8_t want[4096];
    for (uint64_t blk = 0; blk < nblk; blk++) {
        ck_assert_int_eq(nasd_bdev_read(b, buf, blk * 4096, 4096), 0);
        if (seeds[blk] == UINT32_MAX) { ck_assert_msg(is_zero(buf, 4096), "block %llu not unmapped", (unsigned long long)blk); continue; }
        fill_block(want, blk * 4096, seeds[blk]);
        ck_assert_msg(!memcmp(buf, want, 4096), "block %llu differs", (unsigned long long)blk);
    }
    nasd_bdev_put(b);
    sb = vpool_snap_open(p, "v", "s1", 4096, NULL);
    ck_assert_ptr_nonnull(sb);
    check_pattern(sb, 0, nblk * 4096, 3);
    nasd_bdev_put(sb);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* Eight writers over a volume filling 82 % of a 4 x 256 MiB pool: the cleaner works in
 * rounds of many segments, and a segment filled by one write is live, not free (a full
 * segment was once freed with all its data: 18,000 of 130,000 blocks read back wrong). */
struct wr_arg { nasd_bdev *b; uint64_t first, nblk; uint32_t seed; };
static _Atomic int wr_stop;
static uint32_t *wseeds;   /* per block of the big volume (each writer has its own eighth) */
static void *writer(void *arg)
{
    struct wr_arg *a = arg;
    uint8_t *buf = aligned_alloc(4096, 4 * 4096);
    uint64_t x = 0x9E3779B97F4A7C15ull * (a->seed + 1);
    for (uint32_t sd = a->seed; !atomic_load(&wr_stop); sd++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        unsigned cnt = 1 + (unsigned)(x >> 40) % 4;
        uint64_t blk = a->first + (x >> 8) % (a->nblk - cnt);
        for (unsigned k = 0; k < cnt; k++) { fill_block(buf + k * 4096, (blk + k) * 4096, sd); wseeds[blk + k] = sd; }
        ck_assert_int_eq(nasd_bdev_write(a->b, buf, blk * 4096, cnt * 4096, 0), 0);
    }
    free(buf);
    return NULL;
}

START_TEST(t_log_threads)
{
    struct tdir t;
    struct vpool *p = make_pool(&t, 256ull << 20, 0);
    struct vpool_status st;
    vpool_get_status(p, &st);
    uint64_t nblk = st.size / 4096 * 82 / 100 / 8 * 8;
    wseeds = calloc(nblk, sizeof *wseeds);
    ck_assert_int_eq(vpool_vol_create(p, "v", nblk * 4096, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    write_pattern(b, 0, nblk * 4096, 1, 1);
    atomic_store(&wr_stop, 0);
    pthread_t th[8];
    struct wr_arg wa[8];
    for (uint64_t i = 0; i < nblk; i++) wseeds[i] = 1;
    for (int i = 0; i < 8; i++) {
        wa[i] = (struct wr_arg){ b, nblk / 8 * i, nblk / 8, (uint32_t)i << 24 };
        pthread_create(&th[i], NULL, writer, &wa[i]);
    }
    struct vp_xl_stats xs;
    for (int ms = 0; ms < 20000; ms += 100) {   /* until the cleaner has done 60 segments (slower builds: TSan) */
        usleep(100000);
        vp_xl_stats(p, &xs);
        if (xs.cleaned_segs >= 60 && ms >= 1000) break;
    }
    atomic_store(&wr_stop, 1);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    vp_xl_stats(p, &xs);
    printf("threads: %llu segments cleaned, %llu sectors moved\n", (unsigned long long)xs.cleaned_segs,
           (unsigned long long)xs.moved_sect);
    ck_assert_uint_ge(xs.cleaned_segs, 60);
    static uint8_t rb[4096];
    uint8_t want[4096];
    for (uint64_t i = 0; i < nblk; i++) {
        ck_assert_int_eq(nasd_bdev_read(b, rb, i * 4096, 4096), 0);
        fill_block(want, i * 4096, wseeds[i]);
        ck_assert_msg(!memcmp(rb, want, 4096), "block %llu differs", (unsigned long long)i);
    }
    nasd_bdev_put(b);
    vpool_close(p);
    free(wseeds);
    tdir_remove(&t);
}
END_TEST

/* A member offline for a while: only the rows the log wrote meanwhile are rebuilt
 * (nothing at all when nothing was written), and the rebuilt member then serves as
 * the source of another member's column. The cleaner runs while the member is away. */
START_TEST(t_log_resilver_changed)
{
    struct tdir t;
    struct vpool *p = make_pool(&t, 16ull << 20, 4ull << 20);
    uint64_t nblk;
    nasd_bdev *b = filled_vol(p, 80, &nblk);
    struct vpool_status st;
    scribble(b, nblk, 1500, 3000, 0);   /* the log wraps: from here on writes clean */
    ck_assert_int_eq(vpool_member_offline(p, 1), 0);   /* nothing written: nothing to do */
    ck_assert_int_eq(vpool_member_online(p, 1), 0);
    vpool_wait_background(p);
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    ck_assert_uint_eq(st.resilver_rows, 0);
    ck_assert_int_eq(vpool_member_offline(p, 1), 0);
    struct vp_xl_stats before, after;
    vp_xl_stats(p, &before);
    scribble(b, nblk, 200, 7000, 0);
    vp_xl_stats(p, &after);
    uint64_t live = 0;
    for (uint64_t r = 0; r < p->rows; r++) live += vp_row_live(p, r);
    ck_assert_uint_gt(after.cleaned_segs, before.cleaned_segs);
    ck_assert_int_eq(vpool_member_online(p, 1), 0);
    vpool_wait_background(p);
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    printf("changed-only resilver: %llu of %llu live rows\n", (unsigned long long)st.resilver_rows,
           (unsigned long long)live);
    ck_assert_uint_gt(st.resilver_rows, 0);
    ck_assert_uint_lt(st.resilver_rows, live);
    ck_assert_int_eq(vpool_member_offline(p, 3), 0);   /* column 1 now only from member 1 */
    nasd_bdev_put(b);
    check_all(p, nblk);
    ck_assert_int_eq(vpool_member_online(p, 3), 0);
    vpool_wait_background(p);
    vpool_close(p);
    p = reimport(&t, 2, 1u << 20);   /* and without another member, after an import */
    check_all(p, nblk);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

START_TEST(t_log_needs_raidz1)
{
    struct tdir t;
    tdir_make(&t, 2);
    struct vpool_member_spec ms[2] = { { t.member[0], MEMBER_SIZE }, { t.member[1], MEMBER_SIZE } };
    struct vpool_opts o = { .log = 1 };
    struct vpool *p;
    char err[256] = "";
    ck_assert_int_eq(vpool_create("lm", VPOOL_MIRROR, ms, 2, &o, &p, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "raidz1"));
    tdir_remove(&t);
    /* 17 TiB of data (sparse members): past what 4-byte locations address, refused with
     * a reason before anything is written */
    tdir_make(&t, 3);
    struct vpool_member_spec big[3];
    for (int i = 0; i < 3; i++) big[i] = (struct vpool_member_spec){ t.member[i], 17ull << 39 };
    ck_assert_int_eq(vpool_create("lb", VPOOL_RAIDZ1, big, 3, &o, &p, err, sizeof err), -EFBIG);
    ck_assert_msg(strstr(err, "16 TiB") != NULL, "%s", err);
    for (int i = 0; i < 3; i++) {
        struct stat st;
        ck_assert_int_eq(stat(t.member[i], &st), 0);
        ck_assert_int_lt(st.st_blocks, 2048);   /* < 1 MiB written */
    }
    tdir_remove(&t);
}
END_TEST

int main(void)
{
    nasd_log_level = LOG_ERR;
    Suite *s = suite_create("vpool_log");
    TCase *tc = tcase_create("log");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, t_log_overwrite);
    tcase_add_test(tc, t_log_cleaner);
    tcase_add_test(tc, t_log_cleaner_corrupt);
    tcase_add_test(tc, t_log_repair);
    tcase_add_test(tc, t_log_unmap_snapshot);
    tcase_add_test(tc, t_log_threads);
    tcase_add_test(tc, t_log_resilver_changed);
    tcase_add_test(tc, t_log_needs_raidz1);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
