/* Engine dataset backend under concurrent callers: reads and writes do their device I/O
 * without the filesystem lock; reads never return blocks freed (and reused) meanwhile,
 * other operations go on during a write's I/O, and a commit (fsync) waits for that I/O
 * so what it makes durable never points at data not yet written; the flush of a large
 * write's data before a commit runs without the lock. */
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
    atomic_long reads, bad;   /* two readers count */
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
    ck_assert_msg(atomic_load(&r.bad) == 0, "%ld of %ld reads returned another file's data (%d rounds)", atomic_load(&r.bad), atomic_load(&r.reads), rounds);
    ck_assert_int_gt(atomic_load(&r.reads), 10);
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
    crash_check_file(f, "w", data, FILE_BYTES);   /* crash right after the fsync */
    free(data);
}
END_TEST

/* A bdev over the test's file whose first flush after flush_armed is set takes 300 ms:
 * the bulk of a commit after a large write phase is the flush of that data. */
struct slow_dev { nasd_bdev b; nasd_bdev *in; };
static atomic_int flush_armed;
#define IN(b) (((struct slow_dev *)(b))->in)
static int sd_read(nasd_bdev *b, void *buf, uint64_t off, size_t len) { return nasd_bdev_read(IN(b), buf, off, len); }
static int sd_write(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags)
{
    return nasd_bdev_write(IN(b), buf, off, len, flags);
}
static int sd_unmap(nasd_bdev *b, uint64_t off, uint64_t len) { return nasd_bdev_unmap(IN(b), off, len); }
static int sd_flush(nasd_bdev *b)
{
    if (atomic_exchange(&flush_armed, 0)) usleep(300000);
    return nasd_bdev_flush(IN(b));
}
static void sd_destroy(nasd_bdev *b) { nasd_bdev_put(IN(b)); free(b); }
static const struct nasd_bdev_ops sd_ops = { .read = sd_read, .write = sd_write, .flush = sd_flush,
                                             .unmap = sd_unmap, .destroy = sd_destroy };

struct committer { struct nasd_fsroot *f; int fd, rc; };
static void *fsync_thread(void *arg)
{
    struct committer *c = arg;
    c->rc = V(c->f)->fsync(c->f, c->fd, 0);
    return NULL;
}

/* NFS COMMIT after a large write: the flush of the data runs without the filesystem
 * lock (other clients go on), and what the commit returned for survives a crash. */
START_TEST(commit_flushes_data_without_the_lock)
{
    struct slow_dev *sd = calloc(1, sizeof *sd);
    sd->in = file_dev(devpath, DEV_SIZE);
    sd->b = (nasd_bdev){ .ops = &sd_ops, .size = sd->in->size, .block_size = 4096, .name = "slow" };
    atomic_init(&sd->b.refs, 1);
    ck_assert_int_eq(nasd_ext2_format(&sd->b, "test"), 0);
    struct nasd_fsroot *f = open_fs(&sd->b);
    nasd_bdev_put(&sd->b);
    nasd_ext2_set_commit_interval(f, 0);
    size_t len = 2 * E2_PREFLUSH_BYTES;
    uint8_t *data = malloc(len);
    fill(data, len, 5);
    struct committer c = { .f = f, .fd = creat_file(f, R(f), "big") };
    ck_assert_int_eq(V(f)->pwrite(f, c.fd, data, len, 0), (ssize_t)len);
    atomic_store(&flush_armed, 1);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, fsync_thread, &c), 0);
    usleep(50000);
    double t0 = now_ms();
    ck_assert_int_gt(creat_file(f, R(f), "other"), 0);
    struct stat st = st_of(f, R(f), "big");
    double waited = now_ms() - t0;
    pthread_join(th, NULL);
    ck_assert_int_eq(c.rc, 0);
    ck_assert_msg(atomic_load(&flush_armed) == 0, "the commit did not flush");
    ck_assert_msg(waited < 150, "a create and a stat waited %.0f ms for another file's commit", waited);
    ck_assert_uint_eq(st.st_size, len);
    crash_check_file(f, "big", data, len);   /* crash right after the COMMIT */
    free(data);
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
    tcase_add_test(tc, commit_flushes_data_without_the_lock);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    nasd_log_level = LOG_WARN;
    return run_suite(make_suite());
}
