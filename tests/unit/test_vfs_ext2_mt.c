/* Engine dataset backend under concurrent callers: reads and writes do their device I/O
 * without the filesystem lock; reads never return blocks freed (and reused) meanwhile,
 * other operations go on during a write's I/O, and a commit (fsync) waits for that I/O
 * so what it makes durable never points at data not yet written. */
#define _GNU_SOURCE
#include "tests/unit/vfs_ext2_test_util.h"
#include <pthread.h>
#include <stdatomic.h>
#include "util/log.h"

#define V(f) ((f)->vfs)
#define R(f) ((f)->root_fd)
#define FILE_BYTES (64u << 10)

/* widens the window between an op's mapping and its device I/O, on threads that ask */
static _Thread_local int slow_me;
static void slow_io(void) { if (slow_me) usleep(slow_me == 1 ? 1000 + rand() % 2000 : 300000); }

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
    slow_me = 1;
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


START_TEST(reads_never_see_freed_blocks)
{
    struct nasd_fsroot *f = fresh_fs();
    struct race r = { .f = f, .a = creat_file(f, R(f), "a"), .b = creat_file(f, R(f), "b") };
    uint8_t *pa = malloc(FILE_BYTES), *pb = malloc(FILE_BYTES);
    memset(pa, 'A', FILE_BYTES);
    memset(pb, 'B', FILE_BYTES);
    ck_assert_int_eq(V(f)->pwrite(f, r.a, pa, FILE_BYTES, 0), FILE_BYTES);
    ck_assert_int_eq(V(f)->fsync(f, r.a, 0), 0);
    nasd_ext2_set_io_hook(f, slow_io);
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

struct slow_write { struct nasd_fsroot *f; int fd; const uint8_t *data; ssize_t rc; };

static void *slow_writer(void *arg)
{
    struct slow_write *w = arg;
    slow_me = 2;   /* 300 ms between the write's mapping and its data I/O */
    w->rc = V(w->f)->pwrite(w->f, w->fd, w->data, FILE_BYTES, 0);
    return NULL;
}

START_TEST(write_io_runs_without_the_lock)
{
    struct nasd_fsroot *f = fresh_fs();
    nasd_ext2_set_commit_interval(f, 0);
    uint8_t *data = malloc(FILE_BYTES);
    fill(data, FILE_BYTES, 9);
    struct slow_write w = { .f = f, .fd = creat_file(f, R(f), "w"), .data = data };
    ck_assert_int_eq(V(f)->fsync(f, w.fd, 0), 0);
    nasd_ext2_set_io_hook(f, slow_io);
    pthread_t th;
    double t0 = now_ms();
    ck_assert_int_eq(pthread_create(&th, NULL, slow_writer, &w), 0);
    usleep(50000);
    /* while the data is in flight: other ops are not held up... */
    ck_assert_int_gt(creat_file(f, R(f), "other"), 0);
    struct stat st = st_of(f, R(f), "other");
    ck_assert(S_ISREG(st.st_mode));
    double t1 = now_ms();
    ck_assert_msg(t1 - t0 < 250, "a create waited %.0f ms for another file's write", t1 - t0);
    /* ...but a commit waits for it, then holds the data */
    ck_assert_int_eq(V(f)->fsync(f, w.fd, 0), 0);
    ck_assert_msg(now_ms() - t0 >= 290, "fsync returned before the write's data was written");
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, FILE_BYTES);
    nasd_ext2_abandon(f);   /* crash right after the fsync */
    f = reopen_fs();
    int fd = lookup_ino(f, R(f), "w");
    uint8_t *back = malloc(FILE_BYTES);
    ck_assert_int_eq(V(f)->pread(f, fd, back, FILE_BYTES, 0), FILE_BYTES);
    ck_assert(!memcmp(back, data, FILE_BYTES));
    V(f)->close(f, fd);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
    free(data);
    free(back);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("vfs_ext2_mt");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, reads_never_see_freed_blocks);
    tcase_add_test(tc, write_io_runs_without_the_lock);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    nasd_log_level = LOG_WARN;
    return run_suite(make_suite());
}
