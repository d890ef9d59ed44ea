/* The pool's write-back budget: by default the host's dirty page limits
 * (vm.dirty_background_* / vm.dirty_*), a set budget is never exceeded, the limits
 * count every pool of the process, and dirty data nobody flushes is committed within
 * about 5 s (then it survives the process: a re-import reads it back). */
#include "tests/unit/check_main.h"
#include <stdio.h>
#include <unistd.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "tests/unit/test_vpool_util.h"

#define MB (1ull << 20)

static struct vpool *pool(struct tdir *t, const char *name, uint64_t dirty_bytes)
{
    tdir_make(t, 3);
    struct vpool_member_spec ms[3];
    for (int i = 0; i < 3; i++) ms[i] = (struct vpool_member_spec){ t->member[i], 128 * MB };
    struct vpool_opts o = { .dirty_bytes = dirty_bytes };
    struct vpool *p;
    char err[256] = "";
    ck_assert_msg(vpool_create(name, VPOOL_RAIDZ1, ms, 3, &o, &p, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(vpool_vol_create(p, "v", 160 * MB, 0), 0);
    return p;
}

/* in 4 KiB writes: larger ones on raidz1 go to the members directly, not the cache */
static void write_4k(nasd_bdev *b, uint64_t off, uint64_t len, uint64_t seed)
{
    uint8_t buf[4096];
    for (uint64_t o = off; o < off + len; o += 4096) {
        fill_block(buf, o, seed);
        ck_assert_int_eq(nasd_bdev_write(b, buf, o, 4096, 0), 0);
    }
}

static uint64_t dirty(struct vpool *p)
{
    struct vpool_status st;
    vpool_get_status(p, &st);
    return st.dirty;
}

static uint64_t vm(const char *knob)
{
    char path[128];
    unsigned long long v = 0;
    snprintf(path, sizeof path, "/proc/sys/vm/%s", knob);
    FILE *f = fopen(path, "r");
    if (f) { if (fscanf(f, "%llu", &v) != 1) v = 0; fclose(f); }
    return v;
}

static uint64_t host(const char *bytes, const char *ratio)
{
    if (vm(bytes)) return vm(bytes);
    return (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) / 100 * vm(ratio);
}

START_TEST(t_default_is_host)
{
    struct tdir t;
    struct vpool *p = pool(&t, "d", 0);
    struct vpool_status st;
    vpool_get_status(p, &st);
    uint64_t soft = host("dirty_background_bytes", "dirty_background_ratio"), hard = host("dirty_bytes", "dirty_ratio");
    printf("write-back: flusher from %llu MiB, writers wait at %llu MiB\n", (unsigned long long)(st.dirty_soft >> 20),
           (unsigned long long)(st.dirty_max >> 20));
    ck_assert_uint_eq(st.dirty_soft / 4096, soft / 4096);
    ck_assert_uint_eq(st.dirty_max / 4096, (hard > soft ? hard : soft) / 4096);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* 4 KiB random writes, never flushed: the dirty data stays within the budget (a
 * writer over it commits before it returns) and everything reads back after import */
START_TEST(t_budget_bound)
{
    struct tdir t;
    struct vpool *p = pool(&t, "b", 8 * MB);
    nasd_bdev *b = open_vol(p, "v", 4096);
    uint64_t x = 3 * 7919 + 1, most = 0;   /* check_pattern_random's sequence for seed 3 */
    uint8_t buf[4096];
    for (int i = 0; i < 12000; i++) {
        uint64_t off = rnd_off(&x, 0, 160 * MB);
        fill_block(buf, off, 3);
        ck_assert_int_eq(nasd_bdev_write(b, buf, off, 4096, 0), 0);
        uint64_t d = dirty(p);
        if (d > most) most = d;
    }
    printf("budget 8 MiB: at most %llu KiB dirty over 12000 writes of 4 KiB\n", (unsigned long long)(most >> 10));
    ck_assert_uint_le(most, 8 * MB + 4096);
    ck_assert_uint_ge(most, 4 * MB);   /* and it was used: the flusher starts at half */
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, 3, -1);
    b = open_vol(p, "v", 4096);
    check_pattern_random(b, 0, 160 * MB, 12000, 3);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* The limits count every pool: a pool under its own soft limit commits once the
 * process's total is over it and it holds a share (16 MiB) of that. */
START_TEST(t_budget_shared)
{
    struct tdir ta, tb;
    struct vpool *a = pool(&ta, "a", 128 * MB), *bp = pool(&tb, "bb", 128 * MB);   /* soft: 64 MiB */
    nasd_bdev *va = open_vol(a, "v", 4096), *vb = open_vol(bp, "v", 4096);
    write_4k(vb, 0, 40 * MB, 5);
    usleep(1500000);
    ck_assert_uint_eq(dirty(bp), 40 * MB);   /* alone: under its soft limit, kept */
    ck_assert_int_eq(nasd_bdev_flush(vb), 0);
    ck_assert_uint_eq(dirty(bp), 0);
    write_4k(va, 0, 40 * MB, 6);
    write_4k(vb, 0, 40 * MB, 7);
    for (int i = 0; i < 40 && dirty(bp) >= 40 * MB; i++) usleep(50000);
    printf("shared budget: a holds %llu MiB, b %llu MiB\n", (unsigned long long)(dirty(a) >> 20),
           (unsigned long long)(dirty(bp) >> 20));
    ck_assert_uint_lt(dirty(bp), 40 * MB);
    ck_assert_uint_eq(dirty(a), 40 * MB);   /* its data is its own writers' business */
    check_pattern(vb, 0, 40 * MB, 7);
    check_pattern(va, 0, 40 * MB, 6);
    nasd_bdev_put(va);
    nasd_bdev_put(vb);
    vpool_close(a);
    vpool_close(bp);
    tdir_remove(&ta);
    tdir_remove(&tb);
}
END_TEST

/* Written and never flushed: committed within about 5 s, not before 3 */
START_TEST(t_expire)
{
    struct tdir t;
    struct vpool *p = pool(&t, "e", 64 * MB);
    nasd_bdev *b = open_vol(p, "v", 4096);
    write_4k(b, 0, 1 * MB, 8);
    double waited = 0;
    ck_assert_uint_eq(dirty(p), 1 * MB);
    while (dirty(p) && waited < 10) { usleep(100000); waited += 0.1; }
    printf("unflushed 1 MiB committed after %.1f s\n", waited);
    ck_assert_uint_eq(dirty(p), 0);
    ck_assert(waited >= 3 && waited <= 8.5);   /* ticks of 1 s; slow builds (TSan) commit later */
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, 3, -1);
    b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 1 * MB, 8);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

int main(void)
{
    nasd_log_level = LOG_WARN;
    Suite *s = suite_create("vpool_writeback");
    TCase *tc = tcase_create("wb");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t_default_is_host);
    tcase_add_test(tc, t_budget_bound);
    tcase_add_test(tc, t_budget_shared);
    tcase_add_test(tc, t_expire);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
