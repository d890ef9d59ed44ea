/* Engine dataset backend (storage/vfs_ext2*.c): format over garbage, ENOSPC, persistence,
 * crash consistency (abandoned state, kill -9 during a busy workload; checked with e2fsck),
 * concurrent workers, a raidz1 vpool volume (thin format, throughput, space returned to the
 * pool on delete) and the cost of a commit on bigger filesystems. */
#define _GNU_SOURCE
#include "tests/unit/vfs_ext2_test_util.h"
#include <pthread.h>
#include <signal.h>
#include "storage/pool/vpool.h"
#include "util/log.h"


/* A bdev without unmap over another (a file full of garbage: format must zero what it
 * relies on); it counts flushes. */
struct no_unmap { nasd_bdev b; nasd_bdev *inner; atomic_int flushes; };
static int nu_read(nasd_bdev *b, void *buf, uint64_t off, size_t len)
{ return nasd_bdev_read(((struct no_unmap *)b)->inner, buf, off, len); }
static int nu_write(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags)
{ return nasd_bdev_write(((struct no_unmap *)b)->inner, buf, off, len, flags); }
static int nu_flush(nasd_bdev *b)
{
    atomic_fetch_add(&((struct no_unmap *)b)->flushes, 1);
    return nasd_bdev_flush(((struct no_unmap *)b)->inner);
}
static void nu_destroy(nasd_bdev *b) { nasd_bdev_put(((struct no_unmap *)b)->inner); free(b); }
static const struct nasd_bdev_ops no_unmap_ops = { .read = nu_read, .write = nu_write, .flush = nu_flush,
                                                   .destroy = nu_destroy };

static struct no_unmap *no_unmap_over(nasd_bdev *inner, uint64_t size)
{
    struct no_unmap *nu = calloc(1, sizeof *nu);
    nu->b.ops = &no_unmap_ops;
    nu->b.size = size;
    nu->b.block_size = 4096;
    snprintf(nu->b.name, sizeof nu->b.name, "nounmap");
    atomic_init(&nu->b.refs, 1);
    nu->inner = inner;
    return nu;
}

START_TEST(format_over_garbage_without_unmap)
{
    uint64_t size = 96ull << 20;
    nasd_bdev *inner = file_dev(devpath, size);
    uint8_t *junk = malloc(1 << 20);
    memset(junk, 0xa5, 1 << 20);
    for (uint64_t off = 0; off < size; off += 1 << 20)
        ck_assert_int_eq(nasd_bdev_write(inner, junk, off, 1 << 20, 0), 0);
    free(junk);
    struct no_unmap *nu = no_unmap_over(inner, size);
    ck_assert_int_eq(nasd_ext2_format(&nu->b, "junk"), 0);
    struct nasd_fsroot *f = open_fs(&nu->b);
    make_tree_small(f);
    nasd_fsroot_put(f);
    nasd_bdev_put(&nu->b);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

/* A small write + fsync (NFS WRITE + COMMIT) is one commit with one device flush: the
 * superblock goes into the same atomic transaction as the rest, and the data, written
 * before, is covered by that flush too. ext2fs_flush2(fs, 0) had flushed twice. */
START_TEST(one_flush_per_commit)
{
    uint64_t size = 96ull << 20;
    struct no_unmap *nu = no_unmap_over(file_dev(devpath, size), size);
    ck_assert_int_eq(nasd_ext2_format(&nu->b, "one"), 0);
    struct nasd_fsroot *f = open_fs(&nu->b);
    nasd_ext2_set_commit_interval(f, 0);
    int fd = creat_file(f, R(f), "f");
    char buf[32768];
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(V(f)->pwrite(f, fd, buf, sizeof buf, (off_t)i * (off_t)sizeof buf), (ssize_t)sizeof buf);
        int before = atomic_load(&nu->flushes);
        ck_assert_int_eq(V(f)->fsync(f, fd, 1), 0);
        int flushes = atomic_load(&nu->flushes) - before;
        ck_assert_int_eq(flushes, 1);
    }
    /* one more write without fsync, then the process "dies": the 20 committed writes,
     * superblock included (fsck below), are what a reopen finds */
    ck_assert_int_eq(V(f)->pwrite(f, fd, buf, sizeof buf, 20 * (off_t)sizeof buf), (ssize_t)sizeof buf);
    nasd_ext2_abandon(f);
    f = open_fs(&nu->b);
    struct stat st;
    ck_assert_int_eq(V(f)->fstatat(f, R(f), "f", &st, 0), 0);
    ck_assert_int_eq(st.st_size, 20 * (off_t)sizeof buf);
    char back[32768];
    fd = lookup_ino(f, R(f), "f");
    ck_assert_int_eq(V(f)->pread(f, fd, back, sizeof back, 19 * (off_t)sizeof buf), (ssize_t)sizeof back);
    ck_assert(memcmp(back, buf, sizeof buf) == 0);
    nasd_fsroot_put(f);
    nasd_bdev_put(&nu->b);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

/* A tiny filesystem: running out of blocks or inodes gives -ENOSPC (partial writes report
 * what made it), failed creations leave nothing behind, and deleting frees the space. */
START_TEST(enospc)
{
    nasd_bdev *b = file_dev(devpath, TXB_JOURNAL_BYTES + (6ull << 20));
    ck_assert_int_eq(nasd_ext2_format(b, "tiny"), 0);
    struct nasd_fsroot *f = open_fs(b);
    nasd_bdev_put(b);
    int r = R(f);
    struct statvfs s0;
    ck_assert_int_eq(V(f)->statvfs(f, &s0), 0);
    int fd = creat_file(f, r, "fill");
    size_t n = 16u << 20;
    uint8_t *buf = malloc(n);
    memset(buf, 0x5a, n);
    ssize_t w = V(f)->pwrite(f, fd, buf, n, 0);
    ck_assert_int_gt(w, 1 << 20);
    ck_assert_int_lt(w, (ssize_t)n);
    ck_assert_int_eq(st_of(f, r, "fill").st_size, w);
    ck_assert_int_eq(V(f)->pwrite(f, fd, buf, 8192, (uint64_t)w), -ENOSPC);
    /* a new directory needs a block: refused, nothing left behind */
    int mk = V(f)->mkdirat(f, r, "nodir", 0755);
    ck_assert_int_eq(mk, -ENOSPC);
    ck_assert_int_eq(lookup_ino(f, r, "nodir"), -ENOENT);
    ck_assert_int_eq(V(f)->symlinkat(f, "a-target-long-enough-to-need-a-block-of-its-own-0123456789abcdef", r, "nolink"),
                     -ENOSPC);
    ck_assert_int_eq(lookup_ino(f, r, "nolink"), -ENOENT);
    /* inodes run out too (empty files need no blocks; give the blocks back first so
     * the directory can grow) */
    ck_assert_int_eq(V(f)->truncate(f, fd, 0), 0);
    int made = 0, rc = 0;
    for (int i = 0; i < 100000; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "e%d", i);
        rc = creat_file(f, r, nm);
        if (rc < 0) break;
        made++;
    }
    ck_assert_int_eq(rc, -ENOSPC);
    ck_assert_int_gt(made, 10);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "fill", 0), 0);
    int mk2 = V(f)->mkdirat(f, r, "nodir", 0755);   /* the only free inode is still open */
    ck_assert_int_eq(mk2, -ENOSPC);
    V(f)->close(f, fd);
    struct statvfs s1;
    ck_assert_int_eq(V(f)->statvfs(f, &s1), 0);
    ck_assert_uint_ge(s1.f_bfree + 4, s0.f_bfree);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "nodir", 0755), 0);
    free(buf);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST


START_TEST(persistence)
{
    struct nasd_fsroot *f = fresh_fs();
    make_tree(f, 1);
    ck_assert_int_eq(V(f)->fsync(f, R(f), 0), 0);
    make_tree(f, 2);   /* not synced: close commits it */
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
    f = reopen_fs();
    check_tree(f, 1);
    check_tree(f, 2);
    ck_assert_int_eq(f->used, (int64_t)atomic_load(&f->used));
    int64_t used = atomic_load(&f->used);
    int64_t want = 0;
    /* allocated blocks (quota counts them): make_tree's files are written whole */
    for (int i = 0; i < 20; i++) want += 2 * (int64_t)((((size_t)(i * 29989) % 600000) + 4095) & ~4095ull);
    ck_assert_int_eq(used, want);
    nasd_fsroot_put(f);
}
END_TEST

/* Block-aligned writes allocate whole ranges (libext2fs 1.47.0 reports those to the
 * allocation callback as (end, 0)): their bitmaps must still reach the commit, and the
 * blocks a truncate frees in ranges must be discarded. */
START_TEST(aligned_writes_commit_bitmaps)
{
    struct nasd_fsroot *f = fresh_fs();
    nasd_ext2_set_commit_interval(f, 0);
    size_t n = 3u << 20;
    uint8_t *data = malloc(n);
    fill(data, n, 5);
    int fds[4], fd;
    for (int i = 0; i < 4; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "a%d", i);
        fds[i] = creat_file(f, R(f), nm);
        for (size_t off = 0; off < n; off += 64 << 10)
            ck_assert_int_eq(V(f)->pwrite(f, fds[i], data + off, 64 << 10, off), 64 << 10);
    }
    ck_assert_int_eq(V(f)->fsync(f, fds[0], 0), 0);
    for (int i = 0; i < 4; i++) V(f)->close(f, fds[i]);
    nasd_ext2_abandon(f);   /* only what the fsync committed */
    ck_assert_int_eq(fsck(devpath), 0);
    f = reopen_fs();
    fd = lookup_ino(f, R(f), "a1");
    ck_assert_int_eq(V(f)->truncate(f, fd, 4096), 0);
    ck_assert_int_eq(V(f)->fsync(f, fd, 0), 0);
    V(f)->close(f, fd);
    nasd_ext2_abandon(f);
    ck_assert_int_eq(fsck(devpath), 0);
    f = reopen_fs();
    uint8_t *back = malloc(n);
    fd = lookup_ino(f, R(f), "a3");
    ck_assert_int_eq(V(f)->pread(f, fd, back, n, 0), (ssize_t)n);
    ck_assert(!memcmp(back, data, n));
    V(f)->close(f, fd);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
    free(data);
    free(back);
}
END_TEST

START_TEST(crash_keeps_last_commit)
{
    struct nasd_fsroot *f = fresh_fs();
    nasd_ext2_set_commit_interval(f, 0);
    make_tree(f, 1);
    ck_assert_int_eq(V(f)->fsync(f, R(f), 0), 0);
    /* after the commit: more files, an overwrite, a delete and a rename -- all lost
     * (small enough that no early commit happens) */
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), "tree2", 0755), 0);
    int t2 = lookup_ino(f, R(f), "tree2");
    for (int i = 0; i < 50; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "n%d", i);
        int fd = creat_file(f, t2, nm);
        ck_assert_int_eq(V(f)->pwrite(f, fd, nm, strlen(nm), 0), (ssize_t)strlen(nm));
    }
    int d = lookup_ino(f, R(f), "tree1");
    ck_assert_int_eq(V(f)->pwrite(f, lookup_ino(f, d, "file3"), "XXXX", 4, 0), 4);
    ck_assert_int_eq(V(f)->unlinkat(f, d, "file4", 0), 0);
    ck_assert_int_eq(V(f)->renameat(f, d, "file5", R(f), "moved"), 0);
    nasd_ext2_abandon(f);
    f = reopen_fs();
    check_tree(f, 1);
    ck_assert_int_eq(lookup_ino(f, R(f), "tree2"), -ENOENT);
    ck_assert_int_eq(lookup_ino(f, R(f), "moved"), -ENOENT);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
    /* the background committer makes changes durable without fsync */
    f = reopen_fs();
    make_tree(f, 3);
    usleep(1600 * 1000);
    nasd_ext2_abandon(f);
    f = reopen_fs();
    check_tree(f, 3);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

struct worker { struct nasd_fsroot *f; int id; int errors; };

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct nasd_fsroot *f = w->f;
    char nm[64];
    snprintf(nm, sizeof nm, "w%d", w->id);
    if (V(f)->mkdirat(f, R(f), nm, 0755)) w->errors++;
    int d = lookup_ino(f, R(f), nm);
    uint8_t buf[20000];
    for (int i = 0; i < 200 && d > 0; i++) {
        snprintf(nm, sizeof nm, "f%d", i);
        int fd = creat_file(f, d, nm);
        fill(buf, sizeof buf, (uint64_t)w->id * 1000 + i);
        if (fd < 0 || V(f)->pwrite(f, fd, buf, sizeof buf, 0) != sizeof buf) w->errors++;
        if (i % 3 == 0 && V(f)->unlinkat(f, d, nm, 0)) w->errors++;
        if (i % 50 == 0 && V(f)->fsync(f, fd, 0) && i % 3) w->errors++;
    }
    return NULL;
}

START_TEST(concurrent_workers)
{
    struct nasd_fsroot *f = fresh_fs();
    enum { NT = 4 };
    pthread_t th[NT];
    struct worker w[NT];
    for (int i = 0; i < NT; i++) {
        w[i] = (struct worker){ f, i, 0 };
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].errors, 0);
    }
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

/* kill -9 at random moments of a busy workload (background commits, fsyncs, renames,
 * deletes, big and small writes): every reopen replays to a state e2fsck finds clean, and
 * the files fsynced before the kill are intact. */
static void churn(struct nasd_fsroot *f, int round)
{
    int r = R(f);
    uint8_t *buf = malloc(300000);
    char nm[64], nm2[64];
    for (int i = 0;; i++) {
        snprintf(nm, sizeof nm, "r%d-%d", round, i % 97);
        int fd = V(f)->openat(f, r, nm, O_CREAT | O_RDWR | O_TRUNC, 0644);
        if (fd < 0) continue;
        size_t n = (size_t)(i * 7919) % 300000;
        fill(buf, n > 64 ? 64 : n, (uint64_t)i);
        V(f)->pwrite(f, fd, buf, n, (uint64_t)(i % 5) * 4096);
        if (i % 7 == 0) {
            snprintf(nm2, sizeof nm2, "d%d-%d", round, i % 13);
            V(f)->mkdirat(f, r, nm2, 0755);
            V(f)->renameat(f, r, nm, lookup_ino(f, r, nm2), "moved");
        }
        if (i % 11 == 0) V(f)->unlinkat(f, r, nm, 0);
        if (i % 13 == 0) V(f)->truncate(f, fd, (uint64_t)(i % 3) * 5000);
        if (i % 17 == 0) V(f)->symlinkat(f, nm, r, "link");
        if (i % 19 == 0) V(f)->unlinkat(f, r, "link", 0);
    }
}

START_TEST(kill9_during_churn)
{
    struct nasd_fsroot *f = fresh_fs();
    make_tree(f, 1);
    ck_assert_int_eq(V(f)->fsync(f, R(f), 0), 0);
    nasd_fsroot_put(f);
    for (int round = 0; round < 4; round++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            struct nasd_fsroot *c = reopen_fs();
            churn(c, round);
            _exit(0);
        }
        usleep(300000 + (useconds_t)round * 370000);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        ck_assert(WIFSIGNALED(st));
        f = reopen_fs();   /* replays the newest complete transaction */
        check_tree(f, 1);
        nasd_fsroot_put(f);
        ck_assert_int_eq(fsck(devpath), 0);
    }
}
END_TEST

/* ---------- on the pool engine ---------- */

static uint64_t pool_allocated(struct vpool *p)
{
    struct vpool_status st;
    ck_assert_int_eq(vpool_get_status(p, &st), 0);
    return st.allocated;
}

START_TEST(vpool_raidz1_dataset)
{
    char m[3][320];
    struct vpool_member_spec ms[3];
    for (int i = 0; i < 3; i++) {
        snprintf(m[i], sizeof m[i], "%s/m%d", tmpdir, i);
        ms[i] = (struct vpool_member_spec){ m[i], 1ull << 30 };
    }
    char err[256] = "";
    struct vpool *p = NULL;
    ck_assert_msg(vpool_create("tank", VPOOL_RAIDZ1, ms, 3, NULL, &p, err, sizeof err) == 0, "%s", err);
    uint64_t vol_size = 1ull << 30;
    ck_assert_int_eq(vpool_vol_create(p, "ds", vol_size, 0), 0);
    int e = 0;
    nasd_bdev *b = vpool_vol_open(p, "ds", 4096, &e);
    ck_assert_ptr_nonnull(b);
    uint64_t a0 = pool_allocated(p);
    double t0 = now_ms();
    ck_assert_int_eq(nasd_ext2_format(b, "ds"), 0);
    double t_format = now_ms() - t0;
    ck_assert_int_eq(vpool_sync(p), 0);
    uint64_t a1 = pool_allocated(p);
    printf("vpool raidz1: format of a 1 GiB volume took %.1f ms and allocated %llu MiB\n", t_format,
           (unsigned long long)((a1 - a0) >> 20));
    ck_assert_uint_le(a1 - a0, 24ull << 20);

    struct nasd_fsroot *f = open_fs(b);
    /* throughput: 1000 small files, then one 64 MiB file in 1 MiB writes */
    t0 = now_ms();
    uint8_t small[4096];
    for (int i = 0; i < 1000; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "s%d", i);
        int fd = creat_file(f, R(f), nm);
        fill(small, sizeof small, (uint64_t)i);
        ck_assert_int_eq(V(f)->pwrite(f, fd, small, sizeof small, 0), 4096);
    }
    ck_assert_int_eq(V(f)->fsync(f, R(f), 0), 0);
    double t_small = now_ms() - t0;
    size_t chunk = 1u << 20, total = 64u << 20;
    uint8_t *buf = malloc(chunk), *back = malloc(chunk);
    int big = creat_file(f, R(f), "big");
    fill(buf, chunk, 9);
    t0 = now_ms();
    for (size_t off = 0; off < total; off += chunk) {
        memcpy(buf, &off, sizeof off);   /* every chunk differs */
        ck_assert_int_eq(V(f)->pwrite(f, big, buf, chunk, off), (ssize_t)chunk);
    }
    ck_assert_int_eq(V(f)->fsync(f, big, 0), 0);
    double t_big = now_ms() - t0;
    t0 = now_ms();
    for (size_t off = 0; off < total; off += chunk) {
        ck_assert_int_eq(V(f)->pread(f, big, back, chunk, off), (ssize_t)chunk);
        memcpy(buf, &off, sizeof off);
        ck_assert(!memcmp(buf, back, chunk));
    }
    double t_read = now_ms() - t0;
    printf("vpool raidz1: 1000 x (create + 4 KiB write) + fsync: %.0f ms (%.0f files/s); "
           "64 MiB in 1 MiB pwrites + fsync: %.0f ms (%.1f MiB/s); read back %.0f ms (%.1f MiB/s)\n",
           t_small, 1000 / (t_small / 1000), t_big, 64 / (t_big / 1000), t_read, 64 / (t_read / 1000));
    ck_assert_int_eq(vpool_sync(p), 0);
    uint64_t a2 = pool_allocated(p);
    ck_assert_uint_ge(a2, a1 + (64ull << 20));
    /* deleting it returns the space to the pool after the next commit */
    ck_assert_int_eq(V(f)->unlinkat(f, R(f), "big", 0), 0);
    ck_assert_int_eq(V(f)->fsync(f, R(f), 0), 0);
    ck_assert_int_eq(vpool_sync(p), 0);
    uint64_t a3 = pool_allocated(p);
    printf("vpool raidz1: allocated %llu MiB with the 64 MiB file, %llu MiB after deleting it\n",
           (unsigned long long)((a2 - a0) >> 20), (unsigned long long)((a3 - a0) >> 20));
    ck_assert_uint_le(a3, a2 - (56ull << 20));
    nasd_fsroot_put(f);
    /* reopen through the pool */
    f = open_fs(b);
    ck_assert_int_eq(lookup_ino(f, R(f), "big"), -ENOENT);
    int s5 = lookup_ino(f, R(f), "s5");
    ck_assert_int_eq(V(f)->pread(f, s5, back, 4096, 0), 4096);
    fill(small, sizeof small, 5);
    ck_assert(!memcmp(small, back, 4096));
    nasd_fsroot_put(f);
    nasd_bdev_put(b);
    vpool_close(p);
    free(buf);
    free(back);
}
END_TEST

/* Cost of one commit (a small change) on bigger filesystems. */
START_TEST(commit_cost)
{
    uint64_t sizes[2] = { 1ull << 30, 8ull << 30 };
    for (int s = 0; s < 2; s++) {
        char path[400];
        snprintf(path, sizeof path, "%s/big%d", tmpdir, s);
        nasd_bdev *b = file_dev(path, sizes[s]);
        double t0 = now_ms();
        ck_assert_int_eq(nasd_ext2_format(b, "big"), 0);
        double t_format = now_ms() - t0;
        t0 = now_ms();
        struct nasd_fsroot *f = open_fs(b);
        double t_open = now_ms() - t0;
        nasd_ext2_set_commit_interval(f, 0);
        struct stat fst;
        stat(path, &fst);
        enum { N = 200 };
        t0 = now_ms();
        for (int i = 0; i < N; i++) {
            char nm[32];
            snprintf(nm, sizeof nm, "f%d", i);
            int fd = creat_file(f, R(f), nm);
            ck_assert_int_eq(V(f)->pwrite(f, fd, "data", 4, 0), 4);
            ck_assert_int_eq(V(f)->fsync(f, fd, 0), 0);
        }
        double t_commit = (now_ms() - t0) / N;
        printf("ext2 on %llu GiB file bdev: format %.1f ms (%llu KiB written), open %.1f ms, "
               "create+write+commit %.3f ms each\n",
               (unsigned long long)(sizes[s] >> 30), t_format, (unsigned long long)fst.st_blocks / 2, t_open,
               t_commit);
        nasd_fsroot_put(f);
        ck_assert_int_eq(fsck(path), 0);
        nasd_bdev_put(b);
        unlink(path);
    }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("vfs_ext2_durability");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, format_over_garbage_without_unmap);
    tcase_add_test(tc, one_flush_per_commit);
    tcase_add_test(tc, enospc);
    tcase_add_test(tc, persistence);
    tcase_add_test(tc, aligned_writes_commit_bitmaps);
    tcase_add_test(tc, crash_keeps_last_commit);
    tcase_add_test(tc, concurrent_workers);
    tcase_add_test(tc, kill9_during_churn);
    tcase_add_test(tc, vpool_raidz1_dataset);
    tcase_add_test(tc, commit_cost);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    nasd_log_level = LOG_WARN;
    return run_suite(make_suite());
}
