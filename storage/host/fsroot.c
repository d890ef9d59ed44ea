/* Dataset roots for NFS with nasd-tracked quota. nasd_fsroot_open makes a posix
 * one (a host directory, storage/host/vfs_posix.c); engine datasets come from
 * nasd_fsroot_open_ext2. The last put hands the root to its backend's destroy. */
#define _GNU_SOURCE
#include "storage/fsroot.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes allocated to regular files below dirfd (consumes dirfd); a file with n links
 * counts 1/n at each, so once in all. */
static int64_t tree_usage(int dirfd, int depth)
{
    DIR *d = fdopendir(dirfd);
    if (!d) { close(dirfd); return 0; }
    int64_t sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
        if (S_ISREG(st.st_mode)) sum += nasd_fsroot_usage_st(&st) / (st.st_nlink > 1 ? st.st_nlink : 1);
        else if (S_ISDIR(st.st_mode) && depth < 256) {
            int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) sum += tree_usage(sub, depth + 1);
        }
    }
    closedir(d);
    return sum;
}

struct nasd_fsroot *nasd_fsroot_open(const char *path, const char *name, uint64_t fsid,
                                     uint64_t quota, int *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) { *err = -errno; return NULL; }
    struct nasd_fsroot *f = calloc(1, sizeof *f);
    if (!f) { close(fd); *err = -ENOMEM; return NULL; }
    f->root_fd = fd;
    f->vfs = &nasd_vfs_posix;
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->fsid = fsid;
    atomic_init(&f->quota, quota);
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    atomic_init(&f->used, dup >= 0 ? tree_usage(dup, 0) : 0);
    atomic_init(&f->refs, 1);
    return f;
}

struct nasd_fsroot *nasd_fsroot_get(struct nasd_fsroot *f)
{
    if (f) atomic_fetch_add(&f->refs, 1);
    return f;
}

void nasd_fsroot_put(struct nasd_fsroot *f)
{
    if (f && atomic_fetch_sub(&f->refs, 1) == 1) f->vfs->destroy(f);
}

int nasd_fsroot_charge(struct nasd_fsroot *f, int64_t delta)
{
    if (delta <= 0) { atomic_fetch_add(&f->used, delta); return 0; }
    int64_t cur = atomic_load(&f->used);
    for (;;) {
        uint64_t q = atomic_load(&f->quota);
        if (q && cur + delta > (int64_t)q) return -EDQUOT;
        if (atomic_compare_exchange_weak(&f->used, &cur, cur + delta)) return 0;
    }
}
