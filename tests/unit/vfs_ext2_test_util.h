#pragma once
/* Helpers shared by the engine dataset backend tests (test_vfs_ext2*.c): a temp dir with a
 * sparse file bdev, format/open/reopen, e2fsck of the image, and small tree builders. */
#include "tests/unit/check_main.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "storage/fsroot.h"
#include "storage/fs/vfs_ext2_int.h"

#define DEV_SIZE (512ull << 20)

static char tmpdir[256], devpath[300];   /* per test binary */

static inline void tmp_setup(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/vfs-ext2-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(devpath, sizeof devpath, "%s/dev", tmpdir);
    nasd_vfs_set_cred(NULL);
}

static inline void tmp_teardown(void)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", tmpdir);
}

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline nasd_bdev *file_dev(const char *path, uint64_t size)
{
    int err = 0;
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    nasd_bdev *b = nasd_file_bdev_open(path, size, 4096, "ext2test", &err);
    ck_assert_msg(b != NULL, "file bdev: %d", err);
    return b;
}

static inline struct nasd_fsroot *open_fs(nasd_bdev *b)
{
    int err = 0;
    struct nasd_fsroot *f = nasd_fsroot_open_ext2(b, "tank/ds", 77, 0, &err);
    ck_assert_msg(f != NULL, "open_ext2: %d", err);
    return f;
}

/* A freshly formatted filesystem on the test's file bdev. */
static inline struct nasd_fsroot *fresh_fs(void)
{
    nasd_bdev *b = file_dev(devpath, DEV_SIZE);
    ck_assert_int_eq(nasd_ext2_format(b, "test"), 0);
    struct nasd_fsroot *f = open_fs(b);
    nasd_bdev_put(b);
    return f;
}

static inline struct nasd_fsroot *reopen_fs(void)
{
    nasd_bdev *b = file_dev(devpath, 0);
    struct nasd_fsroot *f = open_fs(b);
    nasd_bdev_put(b);
    return f;
}

/* e2fsck -fn over the image (the filesystem is closed); returns its exit status. */
static inline int fsck(const char *path)
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

static inline int creat_file(struct nasd_fsroot *f, int dir, const char *name)
{
    return V(f)->openat(f, dir, name, O_CREAT | O_RDWR | O_EXCL, 0644);
}

static inline struct stat st_of(struct nasd_fsroot *f, int dir, const char *name)
{
    struct stat st;
    int rc = V(f)->fstatat(f, dir, name, &st, name[0] ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH);
    ck_assert_msg(rc == 0, "stat %s: %d", name, rc);
    return st;
}

static inline void fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static inline int lookup_ino(struct nasd_fsroot *f, int dir, const char *name)
{
    struct stat st;
    int rc = V(f)->fstatat(f, dir, name, &st, AT_SYMLINK_NOFOLLOW);
    return rc ? rc : (int)st.st_ino;
}

/* Crash now (nothing of f is committed any more), reopen, check that file name holds
 * data[len], and that e2fsck finds the image clean. */
static inline void crash_check_file(struct nasd_fsroot *f, const char *name, const uint8_t *data, size_t len)
{
    nasd_ext2_abandon(f);
    f = reopen_fs();
    int fd = lookup_ino(f, R(f), name);
    uint8_t *back = malloc(len);
    ck_assert_int_eq(V(f)->pread(f, fd, back, len, 0), (ssize_t)len);
    ck_assert(!memcmp(back, data, len));
    V(f)->close(f, fd);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
    free(back);
}

/* ---------- readdir collection ---------- */

struct names { int n, cap; char **v; uint64_t *cookie; unsigned char *type; int stop_after; };

static inline int collect(void *arg, const char *name, uint64_t ino, unsigned char type, uint64_t next)
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

static inline void names_free(struct names *c)
{
    for (int i = 0; i < c->n; i++) free(c->v[i]);
    free(c->v); free(c->cookie); free(c->type);
    memset(c, 0, sizeof *c);
}

static inline int find_name(const struct names *c, const char *name)
{
    for (int i = 0; i < c->n; i++) if (!strcmp(c->v[i], name)) return i;
    return -1;
}

/* A few files and directories, enough for e2fsck to look at every kind of object. */
static inline void make_tree_small(struct nasd_fsroot *f)
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


/* A small tree with content derived from its seed; check_tree verifies it exactly. */
static inline void make_tree(struct nasd_fsroot *f, int seed)
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

static inline void check_tree(struct nasd_fsroot *f, int seed)
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
