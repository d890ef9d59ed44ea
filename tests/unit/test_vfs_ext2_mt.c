/* Engine dataset backend under concurrent callers: reads that run their device I/O
 * without the filesystem lock never return blocks freed (and reused) meanwhile. */
#define _GNU_SOURCE
#include "tests/unit/vfs_ext2_test_util.h"
#include <pthread.h>
#include <stdatomic.h>
#include "util/log.h"

#define V(f) ((f)->vfs)
#define R(f) ((f)->root_fd)
#define FILE_BYTES (64u << 10)

struct race {
    struct nasd_fsroot *f;
    int a, b;
    atomic_int stop;
    long reads, bad;
};

/* Reads a while the other thread frees its blocks and fills b (likely on the same blocks)
 * with another byte: a read of a may see 'A' or zeros, never 'B'. */
static void *reader(void *arg)
{
    struct race *r = arg;
    uint8_t *buf = malloc(FILE_BYTES);
    while (!atomic_load(&r->stop)) {
        ssize_t n = V(r->f)->pread(r->f, r->a, buf, FILE_BYTES, 0);
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != 'A' && buf[i] != 0) { r->bad++; break; }
        r->reads++;
    }
    free(buf);
    return NULL;
}

/* widens the window between a read's mapping and its device I/O */
static void slow_read(void) { usleep(1000 + rand() % 2000); }

START_TEST(reads_never_see_freed_blocks)
{
    struct nasd_fsroot *f = fresh_fs();
    struct race r = { .f = f, .a = creat_file(f, R(f), "a"), .b = creat_file(f, R(f), "b") };
    uint8_t *pa = malloc(FILE_BYTES), *pb = malloc(FILE_BYTES);
    memset(pa, 'A', FILE_BYTES);
    memset(pb, 'B', FILE_BYTES);
    ck_assert_int_eq(V(f)->pwrite(f, r.a, pa, FILE_BYTES, 0), FILE_BYTES);
    ck_assert_int_eq(V(f)->fsync(f, r.a, 0), 0);
    nasd_ext2_set_read_hook(f, slow_read);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, reader, &r), 0);
    double end = now_ms() + 1500;
    int rounds = 0;
    while (now_ms() < end) {
        ck_assert_int_eq(V(f)->truncate(f, r.a, 0), 0);
        ck_assert_int_eq(V(f)->pwrite(f, r.b, pb, FILE_BYTES, 0), FILE_BYTES);
        ck_assert_int_eq(V(f)->fsync(f, r.b, 0), 0);   /* b's journaled blocks go home */
        ck_assert_int_eq(V(f)->truncate(f, r.b, 0), 0);
        ck_assert_int_eq(V(f)->pwrite(f, r.a, pa, FILE_BYTES, 0), FILE_BYTES);
        ck_assert_int_eq(V(f)->fsync(f, r.a, 0), 0);   /* readers read a from the device */
        rounds++;
    }
    atomic_store(&r.stop, 1);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    ck_assert_msg(r.bad == 0, "%ld of %ld reads returned another file's data (%d rounds)", r.bad, r.reads, rounds);
    ck_assert_int_gt(r.reads, 10);
    V(f)->close(f, r.a);
    V(f)->close(f, r.b);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
    free(pa);
    free(pb);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("vfs_ext2_mt");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, reads_never_see_freed_blocks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    nasd_log_level = LOG_WARN;
    return run_suite(make_suite());
}
