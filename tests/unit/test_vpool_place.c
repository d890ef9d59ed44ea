/* Where the pool puts things on its members: freed units are taken again first, and the
 * journal region of a member file has no holes (synchronous journal writes into holes
 * cost the host file system an allocation and a journal commit each). */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"
#include "tests/unit/test_vpool_util.h"

static uint64_t unit_of(struct vpool *p, uint64_t off)
{
    int m; uint64_t moff, ps;
    ck_assert_int_eq(vp_debug_locate(p, "v", off, &m, &moff, &ps), 0);
    return ps / VP_AU_SECT;
}

/* Freed units are taken again before never-used ones, also after an import: sparse
 * members stay as large as the data, and writes land where member pages are cached. */
START_TEST(t_freed_units_reused_first)
{
    struct tdir t;
    tdir_make(&t, 3);
    struct vpool *p = pool_with_data(&t, VPOOL_RAIDZ1, 3, 16ull << 20, 8ull << 20, 61);
    nasd_bdev *b = open_vol(p, "v", 4096);
    uint64_t was[3];
    for (int e = 0; e < 3; e++) was[e] = unit_of(p, (uint64_t)(e + 1) << 20);
    ck_assert_int_eq(nasd_bdev_unmap(b, 1ull << 20, 3ull << 20), 0);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    write_pattern(b, 8ull << 20, 3ull << 20, 62, 1);   /* three new extents */
    for (int e = 0; e < 3; e++) ck_assert_uint_eq(unit_of(p, (uint64_t)(e + 8) << 20), was[e]);
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, 3, -1);
    b = open_vol(p, "v", 4096);
    uint64_t first = unit_of(p, 0);
    ck_assert_int_eq(nasd_bdev_unmap(b, 0, 1ull << 20), 0);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    write_pattern(b, 11ull << 20, 1ull << 20, 63, 1);
    ck_assert_uint_eq(unit_of(p, 11ull << 20), first);
    check_pattern(b, 8ull << 20, 3ull << 20, 62);
    check_pattern(b, 4ull << 20, 4ull << 20, 61);
    check_pattern(b, 11ull << 20, 1ull << 20, 63);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* Unmaps of volume "a" free units that writes to "b" take at once (lowest free first):
 * freeing must not drop b's new data from the cache, nor clear its checksums. */
struct churn { struct vpool *p; _Atomic int stop; };

static void *unmap_churn(void *arg)
{
    struct churn *c = arg;
    nasd_bdev *a = open_vol(c->p, "a", 4096);
    static uint8_t buf[4 << 20];   /* four units freed per unmap: a longer window */
    memset(buf, 0x5a, sizeof buf);
    while (!atomic_load(&c->stop)) {
        ck_assert_int_eq(nasd_bdev_write(a, buf, 0, sizeof buf, 0), 0);
        ck_assert_int_eq(nasd_bdev_unmap(a, 0, sizeof buf), 0);
    }
    nasd_bdev_put(a);
    return NULL;
}

START_TEST(t_reuse_races_free)
{
    struct tdir t;
    tdir_make(&t, 3);
    struct vpool *p;
    create_pool(&t, VPOOL_RAIDZ1, 3, &p);
    ck_assert_int_eq(vpool_vol_create(p, "a", 4ull << 20, 0), 0);
    ck_assert_int_eq(vpool_vol_create(p, "b", 32ull << 20, 0), 0);
    struct churn c = { .p = p };
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, unmap_churn, &c), 0);
    nasd_bdev *b = open_vol(p, "b", 4096);
    uint8_t w[4096], r[4096];
    for (int i = 0; i < 20000; i++) {
        uint64_t ext = (uint64_t)(i % 32) << 20, off = ext + (1 << 20) - 4096;   /* the sector freed last */
        memset(w, i & 0xff, sizeof w);
        w[0] = (uint8_t)(i >> 8);
        ck_assert_int_eq(nasd_bdev_write(b, w, off, sizeof w, 0), 0);
        ck_assert_int_eq(nasd_bdev_read(b, r, off, sizeof r), 0);
        ck_assert_msg(!memcmp(w, r, sizeof w), "write %d at %llu lost", i, (unsigned long long)off);
        ck_assert_int_eq(nasd_bdev_unmap(b, ext, 1 << 20), 0);
    }
    atomic_store(&c.stop, 1);
    pthread_join(th, NULL);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* no hole in [VP_JOURNAL_OFF, + jnl_size) of the member file at path */
static void journal_written(const char *path, uint64_t jnl_size)
{
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    off_t h = lseek(fd, (off_t)VP_JOURNAL_OFF, SEEK_HOLE);
    ck_assert_msg(h >= (off_t)(VP_JOURNAL_OFF + jnl_size), "%s: hole at %lld in the journal region", path,
                  (long long)h);
    close(fd);
}

/* Created on sparse files: the journal region is written at once. A pool whose journal
 * region has holes (made before that) gets them filled at import, keeping its data. */
START_TEST(t_journal_region_written)
{
    struct tdir t;
    tdir_make(&t, 3);
    struct vpool *p = pool_with_data(&t, VPOOL_RAIDZ1, 3, 16ull << 20, 8ull << 20, 71);
    uint64_t jnl = p->jnl_size;
    for (int i = 0; i < 3; i++) journal_written(t.member[i], jnl);
    struct stat st;
    ck_assert_int_eq(stat(t.member[0], &st), 0);
    ck_assert_msg((uint64_t)st.st_blocks * 512 < MEMBER_SIZE / 2, "the rest of the member stays sparse");
    vpool_close(p);
    for (int i = 0; i < 3; i++) {   /* holes where a clean close left no batch to replay: its tail */
        int fd = open(t.member[i], O_RDWR);
        ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                   (off_t)(VP_JOURNAL_OFF + jnl - (1 << 20)), 1 << 20), 0);
        close(fd);
    }
    p = import_pool(&t, 3, -1);
    for (int i = 0; i < 3; i++) journal_written(t.member[i], jnl);
    nasd_bdev *b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 8ull << 20, 71);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

Suite *vpool_place_suite(void)
{
    Suite *s = suite_create("vpool_place");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, t_freed_units_reused_first);
    tcase_add_test(tc, t_journal_region_written);
    tcase_add_test(tc, t_reuse_races_free);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    nasd_log_level = LOG_WARN;
    return run_suite(vpool_place_suite());
}
