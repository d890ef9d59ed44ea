/* Engine dataset backend (storage/vfs_ext2*.c): POSIX semantics of every vfs op on an ext2
 * filesystem inside a file bdev or a vpool raidz1 volume, permissions for non-root
 * credentials, persistence, crash consistency (checked with e2fsck) and space returning
 * to the pool. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "nasd/log.h"
#include "storage/fsroot.h"
#include "storage/vfs_ext2_int.h"
#include "storage/vpool.h"

#define DEV_SIZE (512ull << 20)

static char tmpdir[256], devpath[300];

static void tmp_setup(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/vfs-ext2-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(devpath, sizeof devpath, "%s/dev", tmpdir);
    nasd_vfs_set_cred(NULL);
}

static void tmp_teardown(void)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", tmpdir);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static nasd_bdev *file_dev(const char *path, uint64_t size)
{
    int err = 0;
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    nasd_bdev *b = nasd_file_bdev_open(path, size, 4096, "ext2test", &err);
    ck_assert_msg(b != NULL, "file bdev: %d", err);
    return b;
}

static struct nasd_fsroot *open_fs(nasd_bdev *b)
{
    int err = 0;
    struct nasd_fsroot *f = nasd_fsroot_open_ext2(b, "tank/ds", 77, 0, &err);
    ck_assert_msg(f != NULL, "open_ext2: %d", err);
    return f;
}

/* A freshly formatted filesystem on the test's file bdev. */
static struct nasd_fsroot *fresh_fs(void)
{
    nasd_bdev *b = file_dev(devpath, DEV_SIZE);
    ck_assert_int_eq(nasd_ext2_format(b, "test"), 0);
    struct nasd_fsroot *f = open_fs(b);
    nasd_bdev_put(b);
    return f;
}

static struct nasd_fsroot *reopen_fs(void)
{
    nasd_bdev *b = file_dev(devpath, 0);
    struct nasd_fsroot *f = open_fs(b);
    nasd_bdev_put(b);
    return f;
}

/* e2fsck -fn over the image (the filesystem is closed); returns its exit status. */
static int fsck(const char *path)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "e2fsck -fn '%s' > '%s.fsck' 2>&1", path, path);
    int st = system(cmd);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (rc) {
        snprintf(cmd, sizeof cmd, "cat '%s.fsck'", path);
        if (system(cmd)) {}
    }
    return rc;
}

#define V(f) ((f)->vfs)
#define R(f) ((f)->root_fd)

static int creat_file(struct nasd_fsroot *f, int dir, const char *name)
{
    return V(f)->openat(f, dir, name, O_CREAT | O_RDWR | O_EXCL, 0644);
}

static struct stat st_of(struct nasd_fsroot *f, int dir, const char *name)
{
    struct stat st;
    int rc = V(f)->fstatat(f, dir, name, &st, name[0] ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH);
    ck_assert_msg(rc == 0, "stat %s: %d", name, rc);
    return st;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static int lookup_ino(struct nasd_fsroot *f, int dir, const char *name)
{
    struct stat st;
    int rc = V(f)->fstatat(f, dir, name, &st, AT_SYMLINK_NOFOLLOW);
    return rc ? rc : (int)st.st_ino;
}

/* ---------- readdir collection ---------- */

struct names { int n, cap; char **v; uint64_t *cookie; unsigned char *type; int stop_after; };

static int collect(void *arg, const char *name, uint64_t ino, unsigned char type, uint64_t next)
{
    struct names *c = arg;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->v = realloc(c->v, c->cap * sizeof *c->v);
        c->cookie = realloc(c->cookie, c->cap * sizeof *c->cookie);
        c->type = realloc(c->type, c->cap);
    }
    c->v[c->n] = strdup(name);
    c->cookie[c->n] = next;
    c->type[c->n] = type;
    c->n++;
    return c->stop_after && c->n >= c->stop_after;
}

static void names_free(struct names *c)
{
    for (int i = 0; i < c->n; i++) free(c->v[i]);
    free(c->v); free(c->cookie); free(c->type);
    memset(c, 0, sizeof *c);
}

static int find_name(const struct names *c, const char *name)
{
    for (int i = 0; i < c->n; i++) if (!strcmp(c->v[i], name)) return i;
    return -1;
}

static int creat_file(struct nasd_fsroot *f, int dir, const char *name);
/* A few files and directories, enough for e2fsck to look at every kind of object. */
static void make_tree_small(struct nasd_fsroot *f)
{
    int r = f->root_fd;
    ck_assert_int_eq(f->vfs->mkdirat(f, r, "d", 0755), 0);
    for (int i = 0; i < 40; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "f%d", i);
        int fd = creat_file(f, r, nm);
        ck_assert_int_gt(fd, 0);
        ck_assert_int_eq(f->vfs->pwrite(f, fd, nm, strlen(nm), (uint64_t)i * 10000), (ssize_t)strlen(nm));
    }
    ck_assert_int_eq(f->vfs->symlinkat(f, "f1", r, "l"), 0);
}

/* ---------- tests ---------- */

START_TEST(format_and_open)
{
    struct nasd_fsroot *f = fresh_fs();
    ck_assert_int_eq(R(f), 2);
    ck_assert_str_eq(f->path, "engine:tank/ds");
    struct stat st = st_of(f, R(f), "");
    ck_assert_uint_eq(st.st_mode, S_IFDIR | 0755);
    ck_assert_uint_eq(st.st_uid, 0);
    ck_assert_uint_eq(st.st_nlink, 2);
    ck_assert_uint_eq(st.st_blksize, 4096);
    struct statvfs sv;
    ck_assert_int_eq(V(f)->statvfs(f, &sv), 0);
    ck_assert_uint_eq(sv.f_bsize, 4096);
    ck_assert_uint_gt(sv.f_blocks, 100000);
    ck_assert_uint_gt(sv.f_bfree, sv.f_blocks * 9 / 10);
    ck_assert_uint_ge(sv.f_files, (DEV_SIZE - TXB_JOURNAL_BYTES) / 65536 - 64);
    struct names c = { 0 };
    ck_assert_int_eq(V(f)->readdir(f, R(f), 0, collect, &c), 0);
    ck_assert_int_eq(c.n, 2);
    ck_assert_str_eq(c.v[0], ".");
    ck_assert_str_eq(c.v[1], "..");
    ck_assert_int_eq(c.type[0], DT_DIR);
    names_free(&c);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
    /* a thin format: only metadata was written */
    struct stat fst;
    ck_assert_int_eq(stat(devpath, &fst), 0);
    printf("format of %llu MiB: %llu KiB allocated in the backing file\n",
           (unsigned long long)(DEV_SIZE >> 20), (unsigned long long)fst.st_blocks / 2);
    ck_assert_uint_lt((uint64_t)fst.st_blocks * 512, 4ull << 20);
}
END_TEST

/* A bdev without unmap over a file full of garbage: format must zero what it relies on. */
struct no_unmap { nasd_bdev b; nasd_bdev *inner; };
static int nu_read(nasd_bdev *b, void *buf, uint64_t off, size_t len)
{ return nasd_bdev_read(((struct no_unmap *)b)->inner, buf, off, len); }
static int nu_write(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags)
{ return nasd_bdev_write(((struct no_unmap *)b)->inner, buf, off, len, flags); }
static int nu_flush(nasd_bdev *b) { return nasd_bdev_flush(((struct no_unmap *)b)->inner); }
static void nu_destroy(nasd_bdev *b) { nasd_bdev_put(((struct no_unmap *)b)->inner); free(b); }
static const struct nasd_bdev_ops no_unmap_ops = { .read = nu_read, .write = nu_write, .flush = nu_flush,
                                                   .destroy = nu_destroy };

START_TEST(format_over_garbage_without_unmap)
{
    uint64_t size = 96ull << 20;
    nasd_bdev *inner = file_dev(devpath, size);
    uint8_t *junk = malloc(1 << 20);
    memset(junk, 0xa5, 1 << 20);
    for (uint64_t off = 0; off < size; off += 1 << 20)
        ck_assert_int_eq(nasd_bdev_write(inner, junk, off, 1 << 20, 0), 0);
    free(junk);
    struct no_unmap *nu = calloc(1, sizeof *nu);
    nu->b.ops = &no_unmap_ops;
    nu->b.size = size;
    nu->b.block_size = 4096;
    snprintf(nu->b.name, sizeof nu->b.name, "nounmap");
    atomic_init(&nu->b.refs, 1);
    nu->inner = inner;
    ck_assert_int_eq(nasd_ext2_format(&nu->b, "junk"), 0);
    struct nasd_fsroot *f = open_fs(&nu->b);
    make_tree_small(f);
    nasd_fsroot_put(f);
    nasd_bdev_put(&nu->b);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

START_TEST(file_read_write)
{
    struct nasd_fsroot *f = fresh_fs();
    int fd = creat_file(f, R(f), "a");
    ck_assert_int_gt(fd, 2);
    ck_assert_int_eq(creat_file(f, R(f), "a"), -EEXIST);
    ck_assert_int_eq(V(f)->pwrite(f, fd, "hello", 5, 0), 5);
    char buf[64] = "";
    ck_assert_int_eq(V(f)->pread(f, fd, buf, sizeof buf, 0), 5);
    ck_assert(!memcmp(buf, "hello", 5));
    ck_assert_int_eq(V(f)->pread(f, fd, buf, sizeof buf, 5), 0);
    ck_assert_int_eq(V(f)->pread(f, fd, buf, 3, 2), 3);
    ck_assert(!memcmp(buf, "llo", 3));

    /* 3 MiB + 100 bytes at an unaligned offset, read back in odd pieces */
    size_t n = (3u << 20) + 100;
    uint8_t *data = malloc(n), *back = malloc(n);
    fill(data, n, 1);
    int big = creat_file(f, R(f), "big");
    ck_assert_int_eq(V(f)->pwrite(f, big, data, n, 777), (ssize_t)n);
    struct stat st = st_of(f, R(f), "big");
    ck_assert_int_eq(st.st_size, (off_t)(n + 777));
    ck_assert_int_ge(st.st_blocks, (blkcnt_t)(n / 512));
    memset(back, 0xaa, n);
    ck_assert_int_eq(V(f)->pread(f, big, back, 777, 0), 777);
    for (int i = 0; i < 777; i++) ck_assert_int_eq(back[i], 0);
    for (size_t off = 0; off < n;) {
        size_t k = 12345 + off % 70000;
        if (k > n - off) k = n - off;
        ck_assert_int_eq(V(f)->pread(f, big, back + off, k, 777 + off), (ssize_t)k);
        off += k;
    }
    ck_assert(!memcmp(data, back, n));

    /* sparse: a block far away; the hole reads zeros and takes no space */
    int sp = creat_file(f, R(f), "sparse");
    uint64_t far = 300ull << 20;
    ck_assert_int_eq(V(f)->pwrite(f, sp, "end", 3, far), 3);
    st = st_of(f, R(f), "sparse");
    ck_assert_int_eq(st.st_size, (off_t)(far + 3));
    ck_assert_int_le(st.st_blocks, 16);
    memset(back, 0xaa, 1 << 20);
    ck_assert_int_eq(V(f)->pread(f, sp, back, 1 << 20, far - (1 << 20) + 3), 1 << 20);
    for (size_t i = 0; i < (1u << 20) - 3; i++) ck_assert_int_eq(back[i], 0);
    ck_assert(!memcmp(back + (1 << 20) - 3, "end", 3));
    /* large offsets beyond the volume size are fine in a sparse file */
    uint64_t huge = 1ull << 40;
    ck_assert_int_eq(V(f)->pwrite(f, sp, "x", 1, huge), 1);
    ck_assert_int_eq(V(f)->pread(f, sp, buf, 10, huge), 1);
    ck_assert_int_eq(buf[0], 'x');

    /* mtime/ctime move on write, with nanoseconds */
    struct stat s1 = st_of(f, R(f), "a");
    usleep(20000);
    ck_assert_int_eq(V(f)->pwrite(f, fd, "!", 1, 100), 1);
    struct stat s2 = st_of(f, R(f), "a");
    ck_assert_int_eq(s2.st_size, 101);
    ck_assert(s2.st_mtim.tv_sec > s1.st_mtim.tv_sec || s2.st_mtim.tv_nsec > s1.st_mtim.tv_nsec);
    ck_assert(s2.st_mtim.tv_nsec != 0 || s1.st_mtim.tv_nsec != 0);

    /* errors */
    ck_assert_int_eq(V(f)->pwrite(f, R(f), "x", 1, 0), -EISDIR);
    ck_assert_int_eq(V(f)->openat(f, R(f), "nope", O_RDONLY, 0), -ENOENT);
    ck_assert_int_eq(V(f)->openat(f, R(f), "a", O_RDONLY | O_DIRECTORY, 0), -ENOTDIR);
    ck_assert_int_eq(V(f)->openat(f, fd, "x", O_RDONLY, 0), -ENOTDIR);
    ck_assert_int_eq(V(f)->pread(f, 99999999, buf, 1, 0), -ESTALE);
    free(data);
    free(back);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

START_TEST(truncate_grow_shrink)
{
    struct nasd_fsroot *f = fresh_fs();
    int fd = creat_file(f, R(f), "t");
    size_t n = 2u << 20;
    uint8_t *data = malloc(n), *back = malloc(n);
    fill(data, n, 2);
    ck_assert_int_eq(V(f)->pwrite(f, fd, data, n, 0), (ssize_t)n);
    struct statvfs a, b, c;
    ck_assert_int_eq(V(f)->statvfs(f, &a), 0);
    ck_assert_int_eq(V(f)->truncate(f, fd, 5000), 0);
    ck_assert_int_eq(V(f)->statvfs(f, &b), 0);
    ck_assert_uint_ge(b.f_bfree, a.f_bfree + (n / 4096) - 3);
    struct stat st = st_of(f, R(f), "t");
    ck_assert_int_eq(st.st_size, 5000);
    ck_assert_int_eq(st.st_blocks, 16);
    /* grow again: the old bytes beyond 5000 must read as zeros */
    ck_assert_int_eq(V(f)->truncate(f, fd, 1u << 20), 0);
    ck_assert_int_eq(V(f)->statvfs(f, &c), 0);
    ck_assert_uint_eq(c.f_bfree, b.f_bfree);   /* grow is sparse */
    ck_assert_int_eq(V(f)->pread(f, fd, back, n, 0), 1 << 20);
    ck_assert(!memcmp(back, data, 5000));
    for (size_t i = 5000; i < (1u << 20); i++) ck_assert_msg(back[i] == 0, "byte %zu", i);
    ck_assert_int_eq(V(f)->truncate(f, R(f), 0), -EISDIR);
    /* O_TRUNC */
    ck_assert_int_eq(V(f)->openat(f, R(f), "t", O_RDWR | O_TRUNC, 0), fd);
    ck_assert_int_eq(st_of(f, R(f), "t").st_size, 0);
    ck_assert_int_eq(st_of(f, R(f), "t").st_blocks, 0);
    free(data);
    free(back);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

START_TEST(directories)
{
    struct nasd_fsroot *f = fresh_fs();
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), "d", 0755), 0);
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), "d", 0755), -EEXIST);
    ck_assert_uint_eq(st_of(f, R(f), "").st_nlink, 3);
    int d = V(f)->openat(f, R(f), "d", O_RDONLY | O_DIRECTORY, 0);
    ck_assert_int_gt(d, 2);
    struct stat st = st_of(f, R(f), "d");
    ck_assert_uint_eq(st.st_mode, S_IFDIR | 0755);
    ck_assert_uint_eq(st.st_nlink, 2);
    ck_assert_int_eq(st.st_size, 4096);
    ck_assert_int_eq(lookup_ino(f, d, ".."), R(f));
    ck_assert_int_eq(lookup_ino(f, d, "."), d);
    ck_assert_int_eq(V(f)->mkdirat(f, d, "sub", 0700), 0);
    ck_assert_uint_eq(st_of(f, d, "").st_nlink, 3);
    ck_assert_int_gt(creat_file(f, d, "file"), 0);
    ck_assert_int_eq(V(f)->unlinkat(f, R(f), "d", AT_REMOVEDIR), -ENOTEMPTY);
    ck_assert_int_eq(V(f)->unlinkat(f, R(f), "d", 0), -EISDIR);
    ck_assert_int_eq(V(f)->unlinkat(f, d, "file", AT_REMOVEDIR), -ENOTDIR);
    ck_assert_int_eq(V(f)->unlinkat(f, d, "file", 0), 0);
    ck_assert_int_eq(V(f)->unlinkat(f, d, "file", 0), -ENOENT);
    ck_assert_int_eq(V(f)->unlinkat(f, d, "sub", AT_REMOVEDIR), 0);
    ck_assert_uint_eq(st_of(f, d, "").st_nlink, 2);
    ck_assert_int_eq(V(f)->unlinkat(f, R(f), "d", AT_REMOVEDIR), 0);
    ck_assert_uint_eq(st_of(f, R(f), "").st_nlink, 2);
    ck_assert_int_eq(V(f)->fstatat(f, d, "", &st, AT_EMPTY_PATH), -ESTALE);
    ck_assert_int_eq(V(f)->unlinkat(f, R(f), ".", AT_REMOVEDIR), -EINVAL);
    ck_assert_int_eq(V(f)->unlinkat(f, R(f), "..", AT_REMOVEDIR), -ENOTEMPTY);
    /* names */
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), "", 0755), -ENOENT);
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), ".", 0755), -EEXIST);
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), "..", 0755), -EEXIST);
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), "a/b", 0755), -EINVAL);
    char longname[300];
    memset(longname, 'n', sizeof longname);
    longname[256] = 0;
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), longname, 0755), -ENAMETOOLONG);
    longname[255] = 0;
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), longname, 0755), 0);
    ck_assert_int_gt(lookup_ino(f, R(f), longname), 0);
    /* many subdirectories: the parent grows past one block */
    for (int i = 0; i < 300; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "dir-with-a-long-name-%04d", i);
        ck_assert_int_eq(V(f)->mkdirat(f, R(f), nm, 0755), 0);
    }
    ck_assert_uint_eq(st_of(f, R(f), "").st_nlink, 303);
    ck_assert_int_gt(st_of(f, R(f), "").st_size, 4096);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

START_TEST(renames)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    int a = creat_file(f, r, "a"), b = creat_file(f, r, "b");
    ck_assert_int_eq(V(f)->pwrite(f, a, "AAAA", 4, 0), 4);
    ck_assert_int_eq(V(f)->pwrite(f, b, "BBBBBBBB", 8, 0), 8);
    struct nasd_fh hb;
    ck_assert_int_eq(V(f)->handle(f, r, "b", 0, &hb), 0);
    /* file over file: b's inode goes away */
    ck_assert_int_eq(V(f)->renameat(f, r, "a", r, "b"), 0);
    ck_assert_int_eq(lookup_ino(f, r, "a"), -ENOENT);
    ck_assert_int_eq(lookup_ino(f, r, "b"), a);
    ck_assert_int_eq(V(f)->open_handle(f, &hb, O_RDONLY), -ESTALE);
    char buf[16];
    ck_assert_int_eq(V(f)->pread(f, a, buf, 16, 0), 4);

    ck_assert_int_eq(V(f)->mkdirat(f, r, "d1", 0755), 0);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "d2", 0755), 0);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "full", 0755), 0);
    int d1 = lookup_ino(f, r, "d1"), d2 = lookup_ino(f, r, "d2"), full = lookup_ino(f, r, "full");
    ck_assert_int_gt(creat_file(f, full, "x"), 0);
    ck_assert_uint_eq(st_of(f, r, "").st_nlink, 5);
    /* dir over empty dir */
    ck_assert_int_eq(V(f)->renameat(f, r, "d1", r, "d2"), 0);
    ck_assert_int_eq(lookup_ino(f, r, "d2"), d1);
    ck_assert_uint_eq(st_of(f, r, "").st_nlink, 4);
    ck_assert_int_eq(V(f)->fstatat(f, d2, "", &(struct stat){0}, AT_EMPTY_PATH), -ESTALE);
    /* dir over non-empty dir, file over dir, dir over file */
    ck_assert_int_eq(V(f)->renameat(f, r, "d2", r, "full"), -ENOTEMPTY);
    ck_assert_int_eq(V(f)->renameat(f, r, "b", r, "full"), -EISDIR);
    ck_assert_int_eq(V(f)->renameat(f, r, "d2", r, "b"), -ENOTDIR);
    /* into its own subtree */
    ck_assert_int_eq(V(f)->mkdirat(f, d1, "inner", 0755), 0);
    int inner = lookup_ino(f, d1, "inner");
    ck_assert_int_eq(V(f)->renameat(f, r, "d2", inner, "loop"), -EINVAL);
    ck_assert_int_eq(V(f)->renameat(f, r, "d2", d1, "self"), -EINVAL);
    /* across directories: ".." and link counts follow */
    ck_assert_uint_eq(st_of(f, d1, "").st_nlink, 3);
    ck_assert_uint_eq(st_of(f, full, "").st_nlink, 2);
    ck_assert_int_eq(V(f)->renameat(f, d1, "inner", full, "moved"), 0);
    ck_assert_int_eq(lookup_ino(f, inner, ".."), full);
    ck_assert_uint_eq(st_of(f, d1, "").st_nlink, 2);
    ck_assert_uint_eq(st_of(f, full, "").st_nlink, 3);
    ck_assert_int_eq(lookup_ino(f, full, "moved"), inner);
    ck_assert_int_eq(lookup_ino(f, d1, "inner"), -ENOENT);
    /* a file across directories, onto an existing name */
    int y = creat_file(f, d1, "y");
    ck_assert_int_eq(V(f)->renameat(f, d1, "y", full, "x"), 0);
    ck_assert_int_eq(lookup_ino(f, full, "x"), y);
    /* same inode (hard links): nothing happens */
    ck_assert_int_eq(V(f)->link(f, y, r, "y2"), 0);
    ck_assert_int_eq(V(f)->renameat(f, r, "y2", full, "x"), 0);
    ck_assert_int_eq(lookup_ino(f, r, "y2"), y);
    ck_assert_uint_eq(st_of(f, r, "y2").st_nlink, 2);
    /* same name in place; missing source; dots */
    ck_assert_int_eq(V(f)->renameat(f, r, "b", r, "b"), 0);
    ck_assert_int_eq(V(f)->renameat(f, r, "nope", r, "z"), -ENOENT);
    ck_assert_int_eq(V(f)->renameat(f, r, ".", r, "z"), -EBUSY);
    /* simple rename within a directory keeps content */
    ck_assert_int_eq(V(f)->renameat(f, r, "b", r, "c"), 0);
    ck_assert_int_eq(V(f)->pread(f, lookup_ino(f, r, "c"), buf, 16, 0), 4);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

START_TEST(links_symlinks_nodes)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    int a = creat_file(f, r, "a");
    ck_assert_int_eq(V(f)->link(f, a, r, "a2"), 0);
    ck_assert_int_eq(V(f)->link(f, a, r, "a2"), -EEXIST);
    ck_assert_uint_eq(st_of(f, r, "a").st_nlink, 2);
    ck_assert_int_eq(V(f)->link(f, r, r, "rootlink"), -EPERM);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "a", 0), 0);
    ck_assert_uint_eq(st_of(f, r, "a2").st_nlink, 1);
    ck_assert_int_eq(V(f)->pwrite(f, a, "still", 5, 0), 5);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "a2", 0), 0);
    ck_assert_int_eq(V(f)->pwrite(f, a, "gone", 4, 0), -ESTALE);

    /* symlinks: fast (inline) and slow (a block) */
    char buf[5000];
    ck_assert_int_eq(V(f)->symlinkat(f, "short/target", r, "s"), 0);
    int s = lookup_ino(f, r, "s");
    struct stat st = st_of(f, r, "s");
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(st.st_size, 12);
    ck_assert_int_eq(st.st_blocks, 0);
    ck_assert_int_eq(V(f)->readlink(f, s, buf, sizeof buf), 12);
    ck_assert(!memcmp(buf, "short/target", 12));
    char lt[1001];
    for (int i = 0; i < 1000; i++) lt[i] = (char)('a' + i % 26);
    lt[1000] = 0;
    ck_assert_int_eq(V(f)->symlinkat(f, lt, r, "l"), 0);
    int l = lookup_ino(f, r, "l");
    st = st_of(f, r, "l");
    ck_assert_int_eq(st.st_size, 1000);
    ck_assert_int_eq(st.st_blocks, 8);
    ck_assert_int_eq(V(f)->readlink(f, l, buf, sizeof buf), 1000);
    ck_assert(!memcmp(buf, lt, 1000));
    ck_assert_int_eq(V(f)->readlink(f, l, buf, 10), 10);
    ck_assert_int_eq(V(f)->readlink(f, r, buf, 10), -EINVAL);
    ck_assert_int_eq(V(f)->openat(f, r, "s", O_RDONLY, 0), -ELOOP);
    ck_assert_int_eq(V(f)->openat(f, r, "s", O_PATH | O_NOFOLLOW, 0), s);
    ck_assert_int_eq(V(f)->symlinkat(f, "", r, "e"), -ENOENT);
    char toolong[4200];
    memset(toolong, 'x', sizeof toolong);
    toolong[4096] = 0;
    ck_assert_int_eq(V(f)->symlinkat(f, toolong, r, "e"), -ENAMETOOLONG);
    toolong[4095] = 0;
    ck_assert_int_eq(V(f)->symlinkat(f, toolong, r, "max"), 0);
    ck_assert_int_eq(V(f)->readlink(f, lookup_ino(f, r, "max"), buf, sizeof buf), 4095);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "l", 0), 0);

    /* device nodes and fifos */
    ck_assert_int_eq(V(f)->mknodat(f, r, "fifo", S_IFIFO | 0640, 0), 0);
    st = st_of(f, r, "fifo");
    ck_assert_uint_eq(st.st_mode, S_IFIFO | 0640);
    ck_assert_int_eq(V(f)->mknodat(f, r, "tty", S_IFCHR | 0600, makedev(4, 64)), 0);
    ck_assert(st_of(f, r, "tty").st_rdev == makedev(4, 64));
    ck_assert_int_eq(V(f)->mknodat(f, r, "bigdev", S_IFBLK | 0600, makedev(300, 70000)), 0);
    st = st_of(f, r, "bigdev");
    ck_assert(S_ISBLK(st.st_mode));
    ck_assert(st.st_rdev == makedev(300, 70000));
    ck_assert_int_eq(V(f)->mknodat(f, r, "sock", S_IFSOCK | 0600, 0), 0);
    ck_assert_int_eq(V(f)->mknodat(f, r, "fifo", S_IFIFO | 0600, 0), -EEXIST);
    struct names c = { 0 };
    ck_assert_int_eq(V(f)->readdir(f, r, 0, collect, &c), 0);
    ck_assert_int_eq(c.type[find_name(&c, "fifo")], DT_FIFO);
    ck_assert_int_eq(c.type[find_name(&c, "tty")], DT_CHR);
    ck_assert_int_eq(c.type[find_name(&c, "bigdev")], DT_BLK);
    ck_assert_int_eq(c.type[find_name(&c, "sock")], DT_SOCK);
    ck_assert_int_eq(c.type[find_name(&c, "s")], DT_LNK);
    names_free(&c);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

START_TEST(readdir_2000_resume)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "big", 0755), 0);
    int d = lookup_ino(f, r, "big");
    enum { N = 2000 };
    for (int i = 0; i < N; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "entry-%d-%s", i, i % 7 ? "f" : "a-somewhat-longer-name-for-variety");
        if (i % 10 == 0) ck_assert_int_eq(V(f)->mkdirat(f, d, nm, 0755), 0);
        else ck_assert_int_gt(creat_file(f, d, nm), 0);
    }
    /* delete some so the directory has holes, then refill a few */
    for (int i = 5; i < N; i += 50) {
        char nm[64];
        snprintf(nm, sizeof nm, "entry-%d-%s", i, i % 7 ? "f" : "a-somewhat-longer-name-for-variety");
        ck_assert_int_eq(V(f)->unlinkat(f, d, nm, 0), 0);
    }
    struct names all = { 0 };
    ck_assert_int_eq(V(f)->readdir(f, d, 0, collect, &all), 0);
    ck_assert_int_eq(all.n, N - N / 50 + 2);
    ck_assert_str_eq(all.v[0], ".");
    ck_assert_str_eq(all.v[1], "..");
    for (int i = 0; i < all.n; i++) ck_assert_int_eq(find_name(&all, all.v[i]), i);   /* unique */
    for (int i = 2; i < all.n; i++) {
        int k = atoi(all.v[i] + 6);
        ck_assert_int_eq(all.type[i], k % 10 == 0 ? DT_DIR : DT_REG);
    }
    /* resuming from every 100th cookie yields exactly the remaining entries */
    for (int i = 0; i < all.n; i += 100) {
        struct names rest = { 0 };
        ck_assert_int_eq(V(f)->readdir(f, d, all.cookie[i], collect, &rest), 0);
        ck_assert_int_eq(rest.n, all.n - i - 1);
        for (int j = 0; j < rest.n; j++) ck_assert_str_eq(rest.v[j], all.v[i + 1 + j]);
        names_free(&rest);
    }
    /* paging in pieces of 100 gives every name exactly once */
    struct names paged = { 0 };
    uint64_t cookie = 0;
    for (;;) {
        struct names page = { .stop_after = 100 };
        ck_assert_int_eq(V(f)->readdir(f, d, cookie, collect, &page), 0);
        for (int j = 0; j < page.n; j++) collect(&paged, page.v[j], 0, 0, 0);
        int n = page.n;
        if (n) cookie = page.cookie[n - 1];
        names_free(&page);
        if (n < 100) break;
    }
    ck_assert_int_eq(paged.n, all.n);
    for (int i = 0; i < all.n; i++) ck_assert_str_eq(paged.v[i], all.v[i]);
    names_free(&paged);
    names_free(&all);
    ck_assert_int_eq(V(f)->readdir(f, d, 1ull << 40, collect, &all), -EINVAL);
    nasd_fsroot_put(f);
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
    /* inodes run out too (empty files need no blocks) */
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

START_TEST(statvfs_and_stale_handles)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    struct statvfs s0, s1, s2;
    ck_assert_int_eq(V(f)->statvfs(f, &s0), 0);
    int fd = creat_file(f, r, "f");
    size_t n = 6u << 20;
    uint8_t *data = calloc(1, n);
    ck_assert_int_eq(V(f)->pwrite(f, fd, data, n, 0), (ssize_t)n);
    ck_assert_int_eq(V(f)->statvfs(f, &s1), 0);
    ck_assert_uint_le(s1.f_bfree, s0.f_bfree - n / 4096);
    ck_assert_uint_eq(s1.f_ffree, s0.f_ffree - 1);
    struct nasd_fh h, hr_dummy;
    ck_assert_int_eq(V(f)->handle(f, r, "", AT_EMPTY_PATH, &hr_dummy), 0);
    ck_assert_int_eq(V(f)->handle(f, r, "f", 0, &h), 0);
    ck_assert_int_eq(h.type, 0x4558);
    ck_assert_int_eq(h.len, 8);
    ck_assert_int_eq(V(f)->open_handle(f, &h, O_RDONLY), fd);
    ck_assert_int_eq(V(f)->open_handle(f, &h, O_RDONLY | O_DIRECTORY), -ENOTDIR);
    ck_assert_int_eq(V(f)->open_handle(f, &hr_dummy, O_RDWR), -EISDIR);
    struct nasd_fh hr;
    ck_assert_int_eq(V(f)->handle(f, r, "", AT_EMPTY_PATH, &hr), 0);
    ck_assert_int_eq(V(f)->open_handle(f, &hr, O_RDONLY | O_DIRECTORY), r);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "f", 0), 0);
    ck_assert_int_eq(V(f)->statvfs(f, &s2), 0);
    ck_assert_uint_eq(s2.f_bfree, s0.f_bfree);
    ck_assert_uint_eq(s2.f_ffree, s0.f_ffree);
    ck_assert_int_eq(V(f)->open_handle(f, &h, O_RDONLY), -ESTALE);
    /* while fds are open on it, the inode number is not reused: they stay stale */
    int other = creat_file(f, r, "other");
    ck_assert_int_ne(other, fd);
    ck_assert_int_eq(V(f)->pwrite(f, fd, "x", 1, 0), -ESTALE);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "other", 0), 0);
    V(f)->close(f, other);
    V(f)->close(f, fd);   /* creat_file's */
    V(f)->close(f, fd);   /* open_handle's */
    V(f)->close(f, fd);   /* a close too many is harmless */
    /* the inode number comes back for a new file: the old handle stays stale */
    int fd2 = creat_file(f, r, "g");
    ck_assert_int_eq(fd2, fd);
    ck_assert_int_eq(V(f)->open_handle(f, &h, O_RDONLY), -ESTALE);
    struct nasd_fh h2;
    ck_assert_int_eq(V(f)->handle(f, r, "g", 0, &h2), 0);
    ck_assert_int_eq(V(f)->open_handle(f, &h2, O_RDONLY), fd2);
    struct nasd_fh bad = h2;
    bad.len = 4;
    ck_assert_int_eq(V(f)->open_handle(f, &bad, O_RDONLY), -ESTALE);
    bad = h2;
    bad.type = 1;
    ck_assert_int_eq(V(f)->open_handle(f, &bad, O_RDONLY), -ESTALE);
    uint32_t forged[2] = { 0x7fffffff, 0 };
    memcpy(bad.bytes, forged, 8);
    bad.type = 0x4558;
    ck_assert_int_eq(V(f)->open_handle(f, &bad, O_RDONLY), -ESTALE);
    free(data);
    nasd_fsroot_put(f);
}
END_TEST

START_TEST(attributes)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    int fd = creat_file(f, r, "f");
    ck_assert_int_eq(V(f)->chown(f, fd, 1000, 100), 0);
    ck_assert_int_eq(V(f)->chmod(f, fd, 04755), 0);
    struct stat st = st_of(f, r, "f");
    ck_assert_uint_eq(st.st_uid, 1000);
    ck_assert_uint_eq(st.st_gid, 100);
    ck_assert_uint_eq(st.st_mode, S_IFREG | 04755);
    ck_assert_int_eq(V(f)->chown(f, fd, 70000, (gid_t)-1), 0);   /* 32-bit ids */
    st = st_of(f, r, "f");
    ck_assert_uint_eq(st.st_uid, 70000);
    ck_assert_uint_eq(st.st_gid, 100);
    ck_assert_uint_eq(st.st_mode & 07777, 0755);   /* chown drops setuid */
    struct timespec ts[2] = { { 1000000000, 123456789 }, { 3000000000ll, 5 } };   /* mtime past 2038 */
    ck_assert_int_eq(V(f)->utimens(f, fd, ts), 0);
    st = st_of(f, r, "f");
    ck_assert_int_eq(st.st_atim.tv_sec, 1000000000);
    ck_assert_int_eq(st.st_atim.tv_nsec, 123456789);
    ck_assert_int_eq(st.st_mtim.tv_sec, 3000000000ll);
    ck_assert_int_eq(st.st_mtim.tv_nsec, 5);
    struct timespec omit[2] = { { 0, UTIME_OMIT }, { 0, UTIME_NOW } };
    ck_assert_int_eq(V(f)->utimens(f, fd, omit), 0);
    struct stat st2 = st_of(f, r, "f");
    ck_assert_int_eq(st2.st_atim.tv_sec, 1000000000);
    ck_assert_int_gt(st2.st_mtim.tv_sec, 1600000000);
    ck_assert(st2.st_ctim.tv_sec >= st2.st_mtim.tv_sec - 1);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

static const struct nasd_vfs_cred alice = { 1000, 1000, 1, { 1000 } };
static const struct nasd_vfs_cred bob = { 1001, 1001, 2, { 1001, 50 } };

START_TEST(permissions)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    /* root-owned 0755: nobody else may create or remove */
    nasd_vfs_set_cred(&alice);
    ck_assert_int_eq(creat_file(f, r, "x"), -EACCES);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "x", 0755), -EACCES);
    ck_assert_int_eq(V(f)->symlinkat(f, "t", r, "x"), -EACCES);
    ck_assert_int_eq(V(f)->mknodat(f, r, "x", S_IFIFO | 0644, 0), -EACCES);
    nasd_vfs_set_cred(NULL);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "tmp", 01777), 0);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "priv", 0700), 0);
    int tmp = lookup_ino(f, r, "tmp"), priv = lookup_ino(f, r, "priv");
    ck_assert_uint_eq(st_of(f, r, "tmp").st_mode, S_IFDIR | 01777);
    int rootfile = creat_file(f, r, "rootfile");
    ck_assert_int_eq(V(f)->chmod(f, rootfile, 0644), 0);

    nasd_vfs_set_cred(&alice);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "rootfile", 0), -EACCES);
    ck_assert_int_eq(V(f)->openat(f, r, "rootfile", O_WRONLY, 0), -EACCES);
    ck_assert_int_eq(V(f)->openat(f, r, "rootfile", O_RDONLY, 0), rootfile);
    ck_assert_int_eq(V(f)->truncate(f, rootfile, 0), -EACCES);
    ck_assert_int_eq(V(f)->chmod(f, rootfile, 0777), -EPERM);
    ck_assert_int_eq(V(f)->chown(f, rootfile, 1000, (gid_t)-1), -EPERM);
    ck_assert_int_eq(V(f)->utimens(f, rootfile, (struct timespec[2]){ { 1, 0 }, { 1, 0 } }), -EPERM);
    ck_assert_int_eq(V(f)->utimens(f, rootfile, NULL), -EACCES);
    struct stat st;
    ck_assert_int_eq(V(f)->fstatat(f, priv, "anything", &st, 0), -EACCES);   /* no search */
    ck_assert_int_eq(creat_file(f, priv, "x"), -EACCES);
    /* the sticky directory */
    int af = creat_file(f, tmp, "alice-file");
    ck_assert_int_gt(af, 0);
    st = st_of(f, tmp, "alice-file");
    ck_assert_uint_eq(st.st_uid, 1000);
    ck_assert_uint_eq(st.st_gid, 1000);
    ck_assert_uint_eq(st.st_mode, S_IFREG | 0644);
    ck_assert_int_eq(V(f)->chmod(f, af, 0666), 0);
    ck_assert_int_eq(V(f)->chown(f, af, 1001, (gid_t)-1), -EPERM);
    ck_assert_int_eq(V(f)->chown(f, af, (uid_t)-1, 50), -EPERM);     /* not alice's group */
    ck_assert_int_eq(V(f)->chown(f, af, 1000, 1000), 0);             /* no-op change is fine */
    ck_assert_int_eq(V(f)->mkdirat(f, tmp, "alice-dir", 0777), 0);
    nasd_vfs_set_cred(&bob);
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "alice-file", 0), -EPERM);
    ck_assert_int_eq(V(f)->renameat(f, tmp, "alice-file", tmp, "mine"), -EPERM);
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "alice-dir", AT_REMOVEDIR), -EPERM);
    int bf = creat_file(f, tmp, "bob-file");
    ck_assert_int_gt(bf, 0);
    ck_assert_int_eq(V(f)->renameat(f, tmp, "bob-file", tmp, "alice-file"), -EPERM);   /* replace */
    /* write permission on 0666 lets bob set times to now, but not explicit times */
    ck_assert_int_eq(V(f)->utimens(f, af, NULL), 0);
    ck_assert_int_eq(V(f)->utimens(f, af, (struct timespec[2]){ { 1, 0 }, { 1, 0 } }), -EPERM);
    ck_assert_int_eq(V(f)->openat(f, tmp, "alice-file", O_WRONLY | O_TRUNC, 0), af);
    nasd_vfs_set_cred(&alice);
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "bob-file", 0), -EPERM);
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "alice-file", 0), 0);
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "alice-dir", AT_REMOVEDIR), 0);
    nasd_vfs_set_cred(NULL);   /* root may remove anything */
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "bob-file", 0), 0);

    /* setgid inheritance */
    ck_assert_int_eq(V(f)->mkdirat(f, r, "shared", 0777), 0);
    int sh = lookup_ino(f, r, "shared");
    ck_assert_int_eq(V(f)->chown(f, sh, 0, 50), 0);
    ck_assert_int_eq(V(f)->chmod(f, sh, 02777), 0);
    nasd_vfs_set_cred(&alice);
    ck_assert_int_gt(creat_file(f, sh, "file"), 0);
    ck_assert_uint_eq(st_of(f, sh, "file").st_gid, 50);
    ck_assert_int_eq(V(f)->mkdirat(f, sh, "sub", 0755), 0);
    st = st_of(f, sh, "sub");
    ck_assert_uint_eq(st.st_gid, 50);
    ck_assert_uint_eq(st.st_mode, S_IFDIR | 02755);
    /* chmod by a non-member of the file's group drops setgid */
    int fl = lookup_ino(f, sh, "file");
    ck_assert_int_eq(V(f)->chmod(f, fl, 02755), 0);
    ck_assert_uint_eq(st_of(f, sh, "file").st_mode, S_IFREG | 0755);
    nasd_vfs_set_cred(&bob);   /* bob is in group 50 */
    int bfile = creat_file(f, sh, "bobs");
    ck_assert_int_eq(V(f)->chmod(f, bfile, 02755), 0);
    ck_assert_uint_eq(st_of(f, sh, "bobs").st_mode, S_IFREG | 02755);
    ck_assert_int_eq(V(f)->chown(f, bfile, (uid_t)-1, 1001), 0);     /* owner, own group */
    ck_assert_uint_eq(st_of(f, sh, "bobs").st_gid, 1001);
    ck_assert_int_eq(V(f)->mknodat(f, sh, "dev", S_IFCHR | 0600, makedev(1, 3)), -EPERM);
    nasd_vfs_set_cred(NULL);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

/* A small tree with content derived from its seed; check_tree verifies it exactly. */
static void make_tree(struct nasd_fsroot *f, int seed)
{
    int r = R(f);
    char nm[64];
    snprintf(nm, sizeof nm, "tree%d", seed);
    ck_assert_int_eq(V(f)->mkdirat(f, r, nm, 0750), 0);
    int d = lookup_ino(f, r, nm);
    uint8_t *buf = malloc(600000);
    for (int i = 0; i < 20; i++) {
        snprintf(nm, sizeof nm, "file%d", i);
        int fd = creat_file(f, d, nm);
        ck_assert_int_gt(fd, 0);
        size_t n = (size_t)(i * 29989) % 600000;
        fill(buf, n, (uint64_t)seed * 100 + i);
        ck_assert_int_eq(V(f)->pwrite(f, fd, buf, n, 0), (ssize_t)n);
    }
    ck_assert_int_eq(V(f)->symlinkat(f, "file1", d, "link"), 0);
    free(buf);
}

static void check_tree(struct nasd_fsroot *f, int seed)
{
    int r = R(f);
    char nm[64];
    snprintf(nm, sizeof nm, "tree%d", seed);
    int d = lookup_ino(f, r, nm);
    ck_assert_msg(d > 0, "%s: %d", nm, d);
    ck_assert_uint_eq(st_of(f, r, nm).st_mode, S_IFDIR | 0750);
    uint8_t *buf = malloc(600000), *back = malloc(600001);
    for (int i = 0; i < 20; i++) {
        snprintf(nm, sizeof nm, "file%d", i);
        int fd = lookup_ino(f, d, nm);
        ck_assert_int_gt(fd, 0);
        size_t n = (size_t)(i * 29989) % 600000;
        fill(buf, n, (uint64_t)seed * 100 + i);
        ck_assert_int_eq(V(f)->pread(f, fd, back, 600001, 0), (ssize_t)n);
        ck_assert(!memcmp(buf, back, n));
    }
    char t[16];
    ck_assert_int_eq(V(f)->readlink(f, lookup_ino(f, d, "link"), t, sizeof t), 5);
    free(buf);
    free(back);
}

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
    for (int i = 0; i < 20; i++) want += 2 * nasd_fsroot_usage_of((size_t)(i * 29989) % 600000);
    ck_assert_int_eq(used, want);
    nasd_fsroot_put(f);
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

static Suite *ext2_suite(void)
{
    Suite *s = suite_create("vfs_ext2");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, format_and_open);
    tcase_add_test(tc, format_over_garbage_without_unmap);
    tcase_add_test(tc, file_read_write);
    tcase_add_test(tc, truncate_grow_shrink);
    tcase_add_test(tc, directories);
    tcase_add_test(tc, renames);
    tcase_add_test(tc, links_symlinks_nodes);
    tcase_add_test(tc, readdir_2000_resume);
    tcase_add_test(tc, enospc);
    tcase_add_test(tc, statvfs_and_stale_handles);
    tcase_add_test(tc, attributes);
    tcase_add_test(tc, permissions);
    tcase_add_test(tc, persistence);
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
    return run_suite(ext2_suite());
}
