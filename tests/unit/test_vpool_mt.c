/* Pool engine under concurrency: several I/O threads (4K and 64K writes, FUA,
 * flush, unmap, 512-byte partial writes, verified reads) with a small cache that
 * forces commits and evictions, while another thread scrubs and takes a raidz1
 * member offline and online again. Every read is checked against what the thread
 * last wrote; at the end the pool is re-imported and checked once more.
 * t_large_reads: reads of 256 KiB and more, whose halves are verified on two threads,
 * at odd offsets, over holes and dirty cached data, while sectors they cover are
 * corrupted on a member (repaired under row locks) and commits run. */
#include "tests/unit/check_main.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "tests/unit/test_vpool_util.h"
#include <fcntl.h>
#include "storage/pool/vpool_impl.h"   /* vp_debug_locate */

#define NT 4
#define VOL (48ull << 20)
#define REGION (64u << 10)            /* ownership unit: region r belongs to thread r % NT */
#define NREG (VOL / REGION)
#define BPR (REGION / 4096)

static nasd_bdev *vol4k, *vol512;
static uint32_t version[NREG][BPR];   /* 0 = zero; else seed of fill_block */
static _Atomic int stop_io, io_errors;
static _Atomic uint64_t nops;

static void expect_block(uint64_t blk, uint8_t *want)
{
    uint32_t v = version[blk / BPR][blk % BPR];
    if (v) fill_block(want, blk * 4096, v); else memset(want, 0, 4096);
}

static void *io_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    uint64_t x = 0x1234567ull * (t + 1);
    uint8_t *buf = malloc(REGION), want[4096];
    uint32_t ver = (uint32_t)t << 24;
    while (!atomic_load(&stop_io)) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint64_t reg = (x >> 8) % (NREG / NT) * NT + t, r = x % 100;
        uint64_t blk = reg * BPR + (x >> 40) % BPR;
        int rc = 0;
        if (r < 30) {                                  /* 4K write, sometimes FUA */
            fill_block(buf, blk * 4096, ++ver);
            rc = nasd_bdev_write(vol4k, buf, blk * 4096, 4096, r < 5 ? NASD_IO_FUA : 0);
            version[reg][blk % BPR] = ver;
        } else if (r < 38) {                           /* whole 64K region */
            ++ver;
            for (unsigned i = 0; i < BPR; i++) fill_block(buf + i * 4096, reg * REGION + i * 4096, ver);
            rc = nasd_bdev_write(vol4k, buf, reg * REGION, REGION, 0);
            for (unsigned i = 0; i < BPR; i++) version[reg][i] = ver;
        } else if (r < 41) {                           /* unmap a block */
            rc = nasd_bdev_unmap(vol4k, blk * 4096, 4096);
            version[reg][blk % BPR] = 0;
        } else if (r < 44) {                           /* 512-byte writes rebuilding a block */
            fill_block(buf, blk * 4096, ++ver);
            for (int s = 7; s >= 0 && !rc; s--) rc = nasd_bdev_write(vol512, buf + s * 512, blk * 4096 + s * 512, 512, 0);
            version[reg][blk % BPR] = ver;
        } else if (r < 46) {
            rc = nasd_bdev_flush(vol4k);
        } else {                                       /* verified read: 4K or region */
            bool whole = r > 90;
            rc = nasd_bdev_read(r & 1 ? vol512 : vol4k, buf, whole ? reg * REGION : blk * 4096, whole ? REGION : 4096);
            for (unsigned i = 0; !rc && i < (whole ? BPR : 1); i++) {
                expect_block(whole ? reg * BPR + i : blk, want);
                if (memcmp(buf + i * 4096, want, 4096)) {
                    fprintf(stderr, "thread %d: mismatch in block %llu\n", t, (unsigned long long)(whole ? reg * BPR + i : blk));
                    atomic_fetch_add(&io_errors, 1);
                }
            }
        }
        if (rc) { fprintf(stderr, "thread %d: I/O error %d\n", t, rc); atomic_fetch_add(&io_errors, 1); }
        atomic_fetch_add(&nops, 1);
    }
    free(buf);
    return NULL;
}

/* a raidz1 pool of 4 new member files in t with one volume "v" of vol bytes */
static struct vpool *raidz4_with_vol(struct tdir *t, const char *name, const struct vpool_opts *o, uint64_t vol)
{
    tdir_make(t, 4);
    struct vpool_member_spec ms[4];
    for (int i = 0; i < 4; i++) ms[i] = (struct vpool_member_spec){ t->member[i], MEMBER_SIZE };
    struct vpool *p;
    char err[256];
    ck_assert_int_eq(vpool_create(name, VPOOL_RAIDZ1, ms, 4, o, &p, err, sizeof err), 0);
    ck_assert_int_eq(vpool_vol_create(p, "v", vol, 0), 0);
    return p;
}

START_TEST(t_concurrent)
{
    struct tdir t;
    struct vpool_opts o = { .cache_bytes = 4ull << 20, .dirty_bytes = 2ull << 20 };
    struct vpool *p = raidz4_with_vol(&t, "mt", &o, VOL);
    char err[256];
    vol4k = open_vol(p, "v", 4096);
    vol512 = open_vol(p, "v", 512);
    pthread_t th[NT];
    for (int i = 0; i < NT; i++) pthread_create(&th[i], NULL, io_thread, (void *)(intptr_t)i);
    for (int round = 0; round < 3; round++) {
        usleep(300000);
        ck_assert_int_eq(vpool_member_offline(p, round % 4), 0);
        usleep(300000);
        ck_assert_int_eq(vpool_member_online(p, round % 4), 0);
        vpool_wait_background(p);
        ck_assert_int_eq(vpool_scrub_start(p), 0);
        vpool_wait_background(p);
        struct vpool_status st;
        vpool_get_status(p, &st);
        ck_assert_int_eq(st.state, VPOOL_ONLINE);
        ck_assert_uint_eq(st.scrub_unrepairable, 0);
        ck_assert_uint_eq(st.scrub_repaired, 0);   /* parity and data stayed consistent */
    }
    atomic_store(&stop_io, 1);
    for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
    ck_assert_int_eq(atomic_load(&io_errors), 0);
    ck_assert_uint_gt(atomic_load(&nops), 1000);
    printf("vpool_mt: %llu operations verified\n", (unsigned long long)atomic_load(&nops));
    nasd_bdev_put(vol4k);
    nasd_bdev_put(vol512);
    vpool_close(p);

    const char *paths[4] = { t.member[0], t.member[1], t.member[2], t.member[3] };
    ck_assert_int_eq(vpool_import(paths + 1, 3, &o, &p, err, sizeof err), 0);   /* degraded: parity must hold */
    vol4k = open_vol(p, "v", 4096);
    uint8_t *buf = malloc(REGION), want[4096];
    for (uint64_t reg = 0; reg < NREG; reg++) {
        ck_assert_int_eq(nasd_bdev_read(vol4k, buf, reg * REGION, REGION), 0);
        for (unsigned i = 0; i < BPR; i++) {
            expect_block(reg * BPR + i, want);
            ck_assert_msg(memcmp(buf + i * 4096, want, 4096) == 0, "block %llu after re-import",
                          (unsigned long long)(reg * BPR + i));
        }
    }
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.unrepairable, 0);
    free(buf);
    nasd_bdev_put(vol4k);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* ---- large reads split over two threads ---- */
#define LR_VOL (16ull << 20)
#define LR_HOLE0 (9ull << 20)          /* [LR_HOLE0, +1 MiB): never written */
#define LR_DIRTY0 (12ull << 20)        /* [LR_DIRTY0, +1 MiB): seed 9, not flushed */
static _Atomic int lr_stop, lr_bad;
static _Atomic uint64_t lr_reads;

static void lr_expect(uint8_t *want, uint64_t blk)
{
    uint64_t off = blk * 4096;
    if (off >= LR_HOLE0 && off < LR_HOLE0 + (1u << 20)) memset(want, 0, 4096);
    else fill_block(want, off, off >= LR_DIRTY0 && off < LR_DIRTY0 + (1u << 20) ? 9 : 7);
}

static void *lr_reader(void *arg)
{
    nasd_bdev *b = arg;
    uint64_t x = (uintptr_t)arg | 1;
    uint8_t *buf = malloc(4u << 20), *want = malloc(4096);
    while (!atomic_load(&lr_stop)) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint64_t len = (256u << 10) + (x >> 20) % (3u << 20);          /* 256 KiB .. 3.25 MiB */
        uint64_t off = (x >> 8) % (LR_VOL - len);
        if (b->block_size == 4096) { off &= ~4095ull; len &= ~4095ull; } else { off &= ~511ull; len &= ~511ull; }
        int rc = nasd_bdev_read(b, buf, off, len);
        if (rc) { fprintf(stderr, "large read at %llu+%llu: %d\n", (unsigned long long)off, (unsigned long long)len, rc); atomic_fetch_add(&lr_bad, 1); continue; }
        for (uint64_t pos = off; pos < off + len;) {
            uint64_t blk = pos / 4096, in = pos % 4096, n = 4096 - in < off + len - pos ? 4096 - in : off + len - pos;
            lr_expect(want, blk);
            if (memcmp(buf + (pos - off), want + in, n)) {
                fprintf(stderr, "large read at %llu+%llu: mismatch at %llu\n", (unsigned long long)off,
                        (unsigned long long)len, (unsigned long long)pos);
                atomic_fetch_add(&lr_bad, 1);
                break;
            }
            pos += n;
        }
        atomic_fetch_add(&lr_reads, 1);
    }
    free(buf); free(want);
    return NULL;
}

/* rewrites blocks of the first 8 MiB with the content they have (commits lock their rows) */
static void *lr_writer(void *arg)
{
    nasd_bdev *b = arg;
    uint8_t buf[4096];
    uint64_t x = 99;
    for (int i = 0; !atomic_load(&lr_stop); i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint64_t blk = x % ((8u << 20) / 4096);
        fill_block(buf, blk * 4096, 7);
        if (nasd_bdev_write(b, buf, blk * 4096, 4096, 0)) atomic_fetch_add(&lr_bad, 1);
        if (i % 32 == 0 && nasd_bdev_flush(b)) atomic_fetch_add(&lr_bad, 1);
    }
    return NULL;
}

START_TEST(t_large_reads)
{
    struct tdir t;
    struct vpool_opts o = { .cache_bytes = 16ull << 20, .dirty_bytes = 8ull << 20 };
    struct vpool *p = raidz4_with_vol(&t, "lr", &o, LR_VOL);
    nasd_bdev *b4 = open_vol(p, "v", 4096), *b512 = open_vol(p, "v", 512);
    write_pattern(b4, 0, LR_HOLE0, 7, 0);
    write_pattern(b4, LR_HOLE0 + (1u << 20), LR_DIRTY0 - LR_HOLE0 - (1u << 20), 7, 0);
    write_pattern(b4, LR_DIRTY0, 1u << 20, 7, 0);
    write_pattern(b4, LR_DIRTY0 + (1u << 20), LR_VOL - LR_DIRTY0 - (1u << 20), 7, 1);
    write_pattern(b4, LR_DIRTY0, 1u << 20, 9, 0);   /* newer data in the cache only */
    pthread_t th[4];
    pthread_create(&th[0], NULL, lr_reader, b4);
    pthread_create(&th[1], NULL, lr_reader, b512);
    pthread_create(&th[2], NULL, lr_reader, b4);
    pthread_create(&th[3], NULL, lr_writer, b4);
    /* corrupt sectors of member 1 in the second half (the writer's commits do not read
     * those rows' columns for parity), fewer than would fault the member */
    int fd = open(t.member[1], O_RDWR);
    ck_assert_int_ge(fd, 0);
    int hits = 0;
    for (uint64_t v = 8u << 20; v < LR_DIRTY0 && hits < 40; v += 4096 * 7) {
        if (v >= LR_HOLE0 && v < LR_HOLE0 + (1u << 20)) continue;
        int m;
        uint64_t off, ps;
        ck_assert_int_eq(vp_debug_locate(p, "v", v, &m, &off, &ps), 0);
        if (m != 1) continue;
        static const uint8_t z[4096];
        ck_assert_int_eq(pwrite(fd, z, sizeof z, (off_t)off), (ssize_t)sizeof z);
        hits++;
        usleep(20000);
    }
    close(fd);
    usleep(300000);
    atomic_store(&lr_stop, 1);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    ck_assert_int_eq(atomic_load(&lr_bad), 0);
    ck_assert_uint_gt(atomic_load(&lr_reads), 20);
    ck_assert_int_gt(hits, 10);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    ck_assert_uint_eq(st.unrepairable, 0);
    ck_assert_uint_gt(st.repaired, 0);
    printf("vpool_mt: %llu large reads verified, %d sectors corrupted and repaired\n",
           (unsigned long long)atomic_load(&lr_reads), hits);
    nasd_bdev_put(b4);
    nasd_bdev_put(b512);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

int main(void)
{
    nasd_log_level = LOG_WARN;   /* keep the test output readable */
    Suite *s = suite_create("vpool_mt");
    TCase *tc = tcase_create("mt");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, t_concurrent);
    tcase_add_test(tc, t_large_reads);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
