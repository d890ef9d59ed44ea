/* First storage backend: a pool records its member disks and keeps its volumes
 * (sparse files) and datasets (directories) under <state>/pools/<name>/. The pool
 * engine (vpool) replaces the data layout; this file keeps the manager's interface. */
#define _GNU_SOURCE
#include "storage/storage.h"
#include "nasd/log.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_MEMBERS 16

struct pool {
    char name[64];
    char layout[16];
    int nmembers;
    struct storage_member members[MAX_MEMBERS];
    uint64_t capacity;
    struct pool *next;
};

struct storage {
    char state_dir[PATH_MAX];
    pthread_mutex_t lock;
    struct pool *pools;
};

struct storage *storage_new(const char *state_dir)
{
    struct storage *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    snprintf(st->state_dir, sizeof st->state_dir, "%s", state_dir);
    pthread_mutex_init(&st->lock, NULL);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/pools", state_dir);
    mkdir(state_dir, 0755);
    mkdir(p, 0755);
    return st;
}

void storage_free(struct storage *st)
{
    if (!st) return;
    while (st->pools) {
        struct pool *p = st->pools;
        st->pools = p->next;
        free(p);
    }
    pthread_mutex_destroy(&st->lock);
    free(st);
}

static struct pool *find_pool(struct storage *st, const char *name)
{
    for (struct pool *p = st->pools; p; p = p->next)
        if (!strcmp(p->name, name)) return p;
    return NULL;
}

static void pool_dir(struct storage *st, const char *pool, const char *sub, const char *name,
                     char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/pools/%s%s%s%s%s", st->state_dir, pool, sub ? "/" : "", sub ? sub : "",
             name ? "/" : "", name ? name : "");
}

/* Size of a member that exists: file size or block device size; 0 if missing. */
static uint64_t member_size(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat s;
    uint64_t sz = 0;
    if (fstat(fd, &s) == 0) {
        if (S_ISBLK(s.st_mode)) ioctl(fd, BLKGETSIZE64, &sz);
        else if (S_ISREG(s.st_mode)) sz = s.st_size;
    }
    close(fd);
    return sz;
}

static int layout_capacity(const char *layout, const struct storage_member *m, int n, uint64_t *cap,
                           char *err, size_t errlen)
{
    uint64_t sum = 0, min = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        sum += m[i].size;
        if (m[i].size < min) min = m[i].size;
    }
    if (!strcmp(layout, "stripe")) {
        if (n < 1) goto few;
        *cap = sum;
    } else if (!strcmp(layout, "mirror")) {
        if (n < 2) goto few;
        *cap = min;
    } else if (!strcmp(layout, "raidz1")) {
        if (n < 3) goto few;
        *cap = min * (uint64_t)(n - 1);
    } else {
        snprintf(err, errlen, "layout must be stripe, mirror or raidz1");
        return -EINVAL;
    }
    return 0;
few:
    snprintf(err, errlen, "layout %s needs at least %d member disks", layout,
             !strcmp(layout, "stripe") ? 1 : !strcmp(layout, "mirror") ? 2 : 3);
    return -EINVAL;
}

static int add_pool(struct storage *st, const char *name, const char *layout,
                    const struct storage_member *m, int n, char *err, size_t errlen)
{
    if (n > MAX_MEMBERS) { snprintf(err, errlen, "at most %d member disks", MAX_MEMBERS); return -EINVAL; }
    struct pool *p = calloc(1, sizeof *p);
    if (!p) return -ENOMEM;
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->layout, sizeof p->layout, "%s", layout);
    memcpy(p->members, m, n * sizeof *m);
    p->nmembers = n;
    int rc = layout_capacity(layout, m, n, &p->capacity, err, errlen);
    if (rc) { free(p); return rc; }
    char d[PATH_MAX];
    pool_dir(st, name, NULL, NULL, d, sizeof d);
    mkdir(d, 0755);
    pool_dir(st, name, "volumes", NULL, d, sizeof d);
    mkdir(d, 0755);
    pool_dir(st, name, "datasets", NULL, d, sizeof d);
    mkdir(d, 0755);
    pthread_mutex_lock(&st->lock);
    p->next = st->pools;
    st->pools = p;
    pthread_mutex_unlock(&st->lock);
    return 0;
}

int storage_pool_create(struct storage *st, const char *name, const char *layout,
                        const struct storage_member *min, int n, char *err, size_t errlen)
{
    if (find_pool(st, name)) { snprintf(err, errlen, "pool %s exists", name); return -EEXIST; }
    if (n < 1 || n > MAX_MEMBERS) { snprintf(err, errlen, "a pool needs 1..%d member disks", MAX_MEMBERS); return -EINVAL; }
    struct storage_member m[MAX_MEMBERS];
    memcpy(m, min, n * sizeof *m);
    uint64_t cap;
    int rc = layout_capacity(layout, m, n, &cap, err, errlen); /* layout/count check before touching disks */
    if (rc) return rc;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            if (!strcmp(m[i].path, m[j].path)) { snprintf(err, errlen, "member %s listed twice", m[i].path); return -EINVAL; }
        struct stat s;
        int exists = stat(m[i].path, &s) == 0;
        if (m[i].create) {
            if (exists) { snprintf(err, errlen, "member %s already exists (omit \"create\" to use it)", m[i].path); return -EEXIST; }
            if (m[i].size < (64u << 20)) { snprintf(err, errlen, "member %s: size must be at least 64M", m[i].path); return -EINVAL; }
        } else {
            if (!exists) { snprintf(err, errlen, "member %s does not exist (set \"create\": true and a size)", m[i].path); return -ENOENT; }
            if (!S_ISREG(s.st_mode) && !S_ISBLK(s.st_mode)) { snprintf(err, errlen, "member %s is not a file or block device", m[i].path); return -EINVAL; }
            m[i].size = member_size(m[i].path);
            if (m[i].size < (64u << 20)) { snprintf(err, errlen, "member %s is smaller than 64M", m[i].path); return -EINVAL; }
        }
    }
    for (int i = 0; i < n; i++) {
        if (!m[i].create) continue;
        int fd = open(m[i].path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate(fd, m[i].size) < 0) {
            snprintf(err, errlen, "cannot create member %s: %s", m[i].path, strerror(errno));
            if (fd >= 0) { close(fd); unlink(m[i].path); }
            for (int j = 0; j < i; j++) if (m[j].create) unlink(m[j].path);
            return -EIO;
        }
        close(fd);
        m[i].create = 0;
    }
    return add_pool(st, name, layout, m, n, err, errlen);
}

int storage_pool_open(struct storage *st, const char *name, const char *layout,
                      const struct storage_member *m, int n, char *err, size_t errlen)
{
    return add_pool(st, name, layout, m, n, err, errlen);
}

static int rm_tree(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return unlinkat(dirfd, name, 0) == 0 || errno == ENOENT ? 0 : -errno;
    DIR *d = fdopendir(fd);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        rm_tree(fd, e->d_name);
    }
    if (d) closedir(d); else close(fd);
    return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 ? 0 : -errno;
}

int storage_pool_destroy(struct storage *st, const char *name, char *err, size_t errlen)
{
    pthread_mutex_lock(&st->lock);
    struct pool **pp = &st->pools;
    while (*pp && strcmp((*pp)->name, name)) pp = &(*pp)->next;
    struct pool *p = *pp;
    if (p) *pp = p->next;
    pthread_mutex_unlock(&st->lock);
    if (!p) { snprintf(err, errlen, "pool %s not found", name); return -ENOENT; }
    char d[PATH_MAX];
    pool_dir(st, name, NULL, NULL, d, sizeof d);
    rm_tree(AT_FDCWD, d);
    free(p);
    return 0;
}

/* Allocated bytes (st_blocks) of everything below dirfd (consumes dirfd). */
static uint64_t tree_blocks(int dirfd, int depth)
{
    DIR *d = fdopendir(dirfd);
    if (!d) { close(dirfd); return 0; }
    uint64_t sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat s;
        if (fstatat(dirfd, e->d_name, &s, AT_SYMLINK_NOFOLLOW) < 0) continue;
        sum += (uint64_t)s.st_blocks * 512;
        if (S_ISDIR(s.st_mode) && depth < 64) {
            int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) sum += tree_blocks(sub, depth + 1);
        }
    }
    closedir(d);
    return sum;
}

static uint64_t reserved_volume_bytes(struct storage *st, const char *pool)
{
    char d[PATH_MAX];
    pool_dir(st, pool, "volumes", NULL, d, sizeof d);
    DIR *dir = opendir(d);
    uint64_t sum = 0;
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
        struct stat s;
        if (e->d_name[0] != '.' && fstatat(dirfd(dir), e->d_name, &s, 0) == 0 && S_ISREG(s.st_mode))
            sum += s.st_size;
    }
    if (dir) closedir(dir);
    return sum;
}

json_t *storage_pool_status(struct storage *st, const char *name)
{
    pthread_mutex_lock(&st->lock);
    struct pool *p = find_pool(st, name);
    if (!p) { pthread_mutex_unlock(&st->lock); return NULL; }
    json_t *members = json_array();
    int missing = 0;
    for (int i = 0; i < p->nmembers; i++) {
        int ok = access(p->members[i].path, R_OK | W_OK) == 0;
        missing += !ok;
        json_array_append_new(members, json_pack("{s:s, s:I, s:s}", "path", p->members[i].path,
                                                 "size", (json_int_t)p->members[i].size,
                                                 "state", ok ? "ONLINE" : "MISSING"));
    }
    int tolerate = !strcmp(p->layout, "mirror") ? p->nmembers - 1 : !strcmp(p->layout, "raidz1") ? 1 : 0;
    const char *state = !missing ? "ONLINE" : missing <= tolerate ? "DEGRADED" : "FAULTED";
    uint64_t cap = p->capacity;
    pthread_mutex_unlock(&st->lock);
    char d[PATH_MAX];
    pool_dir(st, name, NULL, NULL, d, sizeof d);
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    uint64_t used = fd >= 0 ? tree_blocks(fd, 0) : 0;
    uint64_t reserved = reserved_volume_bytes(st, name);
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:o}", "state", state, "size", (json_int_t)cap,
                     "allocated", (json_int_t)reserved, "used", (json_int_t)used,
                     "free", (json_int_t)(cap > reserved ? cap - reserved : 0), "members", members);
}

static int volume_path(struct storage *st, const char *pool, const char *name, char *out, size_t len)
{
    char file[128];
    snprintf(file, sizeof file, "%s.img", name);
    pool_dir(st, pool, "volumes", file, out, len);
    return find_pool(st, pool) ? 0 : -ENOENT;
}

static int check_space(struct storage *st, const char *pool, uint64_t add, char *err, size_t errlen)
{
    pthread_mutex_lock(&st->lock);
    struct pool *p = find_pool(st, pool);
    uint64_t cap = p ? p->capacity : 0;
    pthread_mutex_unlock(&st->lock);
    if (!p) { snprintf(err, errlen, "pool %s not found", pool); return -ENOENT; }
    uint64_t have = reserved_volume_bytes(st, pool);
    if (have + add > cap) {
        snprintf(err, errlen, "pool %s has %llu bytes free, %llu requested", pool,
                 (unsigned long long)(cap > have ? cap - have : 0), (unsigned long long)add);
        return -ENOSPC;
    }
    return 0;
}

int storage_volume_create(struct storage *st, const char *pool, const char *name, uint64_t size,
                          char *err, size_t errlen)
{
    char path[PATH_MAX];
    int rc = check_space(st, pool, size, err, errlen);
    if (rc) return rc;
    volume_path(st, pool, name, path, sizeof path);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) { snprintf(err, errlen, "volume %s/%s: %s", pool, name, strerror(errno)); return -errno; }
    if (ftruncate(fd, size) < 0) {
        rc = -errno;
        snprintf(err, errlen, "volume %s/%s: %s", pool, name, strerror(errno));
        close(fd);
        unlink(path);
        return rc;
    }
    close(fd);
    return 0;
}

int storage_volume_resize(struct storage *st, const char *pool, const char *name, uint64_t size,
                          char *err, size_t errlen)
{
    char path[PATH_MAX];
    struct stat s;
    if (volume_path(st, pool, name, path, sizeof path) || stat(path, &s) < 0) {
        snprintf(err, errlen, "volume %s/%s not found", pool, name);
        return -ENOENT;
    }
    if (size < (uint64_t)s.st_size) { snprintf(err, errlen, "volumes can only grow"); return -EINVAL; }
    int rc = check_space(st, pool, size - s.st_size, err, errlen);
    if (rc) return rc;
    if (truncate(path, size) < 0) { snprintf(err, errlen, "resize: %s", strerror(errno)); return -errno; }
    return 0;
}

int storage_volume_destroy(struct storage *st, const char *pool, const char *name, char *err, size_t errlen)
{
    char path[PATH_MAX];
    volume_path(st, pool, name, path, sizeof path);
    if (unlink(path) < 0 && errno != ENOENT) {
        snprintf(err, errlen, "volume %s/%s: %s", pool, name, strerror(errno));
        return -errno;
    }
    return 0;
}

nasd_bdev *storage_volume_open(struct storage *st, const char *pool, const char *name,
                               uint32_t block_size, int *errp)
{
    char path[PATH_MAX], full[160];
    if (volume_path(st, pool, name, path, sizeof path)) { *errp = -ENOENT; return NULL; }
    snprintf(full, sizeof full, "%s/%s", pool, name);
    return nasd_file_bdev_open(path, 0, block_size, full, errp);
}

uint64_t storage_volume_used(struct storage *st, const char *pool, const char *name)
{
    char path[PATH_MAX];
    struct stat s;
    if (volume_path(st, pool, name, path, sizeof path) || stat(path, &s) < 0) return 0;
    return (uint64_t)s.st_blocks * 512;
}

void storage_dataset_path(struct storage *st, const char *pool, const char *name, char *out, size_t outlen)
{
    pool_dir(st, pool, "datasets", name, out, outlen);
}

int storage_dataset_create(struct storage *st, const char *pool, const char *name, char *err, size_t errlen)
{
    if (!find_pool(st, pool)) { snprintf(err, errlen, "pool %s not found", pool); return -ENOENT; }
    char path[PATH_MAX];
    storage_dataset_path(st, pool, name, path, sizeof path);
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "dataset %s/%s: %s", pool, name, strerror(errno));
        return -errno;
    }
    return 0;
}

int storage_dataset_destroy(struct storage *st, const char *pool, const char *name, char *err, size_t errlen)
{
    char d[PATH_MAX];
    pool_dir(st, pool, "datasets", NULL, d, sizeof d);
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) { snprintf(err, errlen, "pool %s not found", pool); return -ENOENT; }
    int rc = rm_tree(fd, name);
    close(fd);
    if (rc && rc != -ENOENT) { snprintf(err, errlen, "dataset %s/%s: %s", pool, name, strerror(-rc)); return rc; }
    return 0;
}

struct nasd_fsroot *storage_dataset_open(struct storage *st, const char *pool, const char *name,
                                         uint64_t fsid, uint64_t quota, int *errp)
{
    char path[PATH_MAX], full[160];
    storage_dataset_path(st, pool, name, path, sizeof path);
    snprintf(full, sizeof full, "%s/%s", pool, name);
    return nasd_fsroot_open(path, full, fsid, quota, errp);
}
