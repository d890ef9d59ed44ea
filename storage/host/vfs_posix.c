/* storage/vfs.h over a host directory tree: plain *at() syscalls on real fds.
 * Objects are O_PATH fds (or real open fds); handles are the kernel's
 * name_to_handle_at handles, opened again relative to fs->root_fd (the caller
 * needs CAP_DAC_READ_SEARCH for that, i.e. fsuid 0). Permissions are the
 * kernel's, checked against the calling thread's fsuid/fsgid/groups. */
#define _GNU_SOURCE
#include "storage/fsroot.h"
#include "storage/vfs.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A syscall's int result as the vfs wants it: >= 0, or -errno. */
static inline int neg_errno(int r)
{
    return r < 0 ? -errno : r;
}

static void proc_fd_path(char *buf, size_t len, int fd)
{
    snprintf(buf, len, "/proc/self/fd/%d", fd);
}

static int px_open_handle(struct nasd_fsroot *fs, const struct nasd_fh *h, int flags)
{
    if (h->len > NASD_FH_KMAX) return -ESTALE;
    union { struct file_handle fh; uint8_t raw[sizeof(struct file_handle) + NASD_FH_KMAX]; } u;
    u.fh.handle_bytes = h->len;
    u.fh.handle_type = h->type;
    memcpy(u.fh.f_handle, h->bytes, h->len);
    int fd = open_by_handle_at(fs->root_fd, &u.fh, flags | O_CLOEXEC);
    return neg_errno(fd);
}

static int px_handle(struct nasd_fsroot *fs, int dirfd, const char *name, int flags, struct nasd_fh *out)
{
    union { struct file_handle fh; uint8_t raw[sizeof(struct file_handle) + 128]; } u;
    u.fh.handle_bytes = 128;
    int mnt;
    if (name_to_handle_at(dirfd, name, &u.fh, &mnt, flags) < 0) return -errno;
    if (u.fh.handle_bytes > NASD_FH_KMAX) return -EOVERFLOW;
    out->type = u.fh.handle_type;
    out->len = u.fh.handle_bytes;
    memcpy(out->bytes, u.fh.f_handle, out->len);
    return 0;
}

static int px_openat(struct nasd_fsroot *fs, int dirfd, const char *name, int flags, mode_t mode)
{
    /* O_NONBLOCK is kept: it stops an open of an existing FIFO from blocking. */
    int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
    return neg_errno(fd);
}

static void px_close(struct nasd_fsroot *fs, int fd)
{
    if (fd >= 0) close(fd);
}

static int px_fstatat(struct nasd_fsroot *fs, int dirfd, const char *name, struct stat *st, int flags)
{
    int r;
    if (!name[0] && (flags & AT_EMPTY_PATH)) r = fstat(dirfd, st);   /* works on O_PATH fds too */
    else r = fstatat(dirfd, name, st, (flags & AT_EMPTY_PATH) | AT_SYMLINK_NOFOLLOW);
    return neg_errno(r);
}

static int px_mkdirat(struct nasd_fsroot *fs, int dirfd, const char *name, mode_t mode)
{
    return neg_errno(mkdirat(dirfd, name, mode));
}

static int px_mknodat(struct nasd_fsroot *fs, int dirfd, const char *name, mode_t mode, dev_t dev)
{
    return neg_errno(mknodat(dirfd, name, mode, dev));
}

static int px_symlinkat(struct nasd_fsroot *fs, const char *target, int dirfd, const char *name)
{
    return neg_errno(symlinkat(target, dirfd, name));
}

static int px_readlink(struct nasd_fsroot *fs, int fd, char *buf, size_t size)
{
    ssize_t n = readlinkat(fd, "", buf, size);
    return n < 0 ? -errno : (int)n;
}

static int px_unlinkat(struct nasd_fsroot *fs, int dirfd, const char *name, int flags)
{
    return neg_errno(unlinkat(dirfd, name, flags & AT_REMOVEDIR));
}

static int px_renameat(struct nasd_fsroot *fs, int olddir, const char *oldname, int newdir, const char *newname)
{
    return neg_errno(renameat(olddir, oldname, newdir, newname));
}

/* linkat(AT_EMPTY_PATH) would need CAP_DAC_READ_SEARCH; the /proc magic link
 * followed with AT_SYMLINK_FOLLOW links the fd's inode with normal checks. */
static int px_link(struct nasd_fsroot *fs, int fd, int dirfd, const char *name)
{
    char proc[64];
    proc_fd_path(proc, sizeof proc, fd);
    return neg_errno(linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW));
}

static int px_chown(struct nasd_fsroot *fs, int fd, uid_t uid, gid_t gid)
{
    return neg_errno(fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
}

/* fchmod refuses O_PATH fds; those go through their /proc magic link. */
static int px_chmod(struct nasd_fsroot *fs, int fd, mode_t mode)
{
    if (fchmod(fd, mode) == 0) return 0;
    if (errno != EBADF) return -errno;
    char proc[64];
    proc_fd_path(proc, sizeof proc, fd);
    return neg_errno(fchmodat(AT_FDCWD, proc, mode, 0));
}

static int px_utimens(struct nasd_fsroot *fs, int fd, const struct timespec ts[2])
{
    return neg_errno(utimensat(fd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
}

static int px_truncate(struct nasd_fsroot *fs, int fd, uint64_t size)
{
    if (size > (uint64_t)INT64_MAX) return -EFBIG;
    if (ftruncate(fd, (off_t)size) == 0) return 0;
    if (errno != EBADF) return -errno;
    char proc[64];           /* O_PATH fd: truncate by path, with a write check */
    proc_fd_path(proc, sizeof proc, fd);
    return neg_errno(truncate(proc, (off_t)size));
}

static ssize_t px_pread(struct nasd_fsroot *fs, int fd, void *buf, size_t len, uint64_t off)
{
    if (off > (uint64_t)INT64_MAX) return 0;
    ssize_t n;
    do n = pread(fd, buf, len, (off_t)off); while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

static ssize_t px_pwrite(struct nasd_fsroot *fs, int fd, const void *buf, size_t len, uint64_t off)
{
    if (off > (uint64_t)INT64_MAX) return -EFBIG;
    ssize_t n;
    do n = pwrite(fd, buf, len, (off_t)off); while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

static int px_fsync(struct nasd_fsroot *fs, int fd, int datasync)
{
    return neg_errno(datasync ? fdatasync(fd) : fsync(fd));
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

#define DENTS_BUF 32768

/* A private fd per call: the file position of a shared fd would race. Cookies
 * are the kernel's d_off values, so resuming is one lseek. */
static int px_readdir(struct nasd_fsroot *fs, int dirfd, uint64_t cookie, nasd_vfs_dirent_fn fn, void *arg)
{
    int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return -errno;
    if (cookie && (cookie > (uint64_t)INT64_MAX || lseek(dfd, (off_t)cookie, SEEK_SET) < 0)) {
        close(dfd);
        return -EINVAL;
    }
    static _Thread_local uint8_t dents[DENTS_BUF];
    int r = 0, stop = 0;
    while (!stop) {
        long n = syscall(SYS_getdents64, dfd, dents, sizeof dents);
        if (n < 0) { r = -errno; break; }
        if (n == 0) break;
        for (long pos = 0; pos < n && !stop;) {
            struct linux_dirent64 *de = (struct linux_dirent64 *)(dents + pos);
            pos += de->d_reclen;
            stop = fn(arg, de->d_name, de->d_ino, de->d_type, (uint64_t)de->d_off);
        }
    }
    close(dfd);
    return r;
}

static int px_statvfs(struct nasd_fsroot *fs, struct statvfs *out)
{
    return neg_errno(fstatvfs(fs->root_fd, out));
}

static void px_destroy(struct nasd_fsroot *fs)
{
    close(fs->root_fd);
    free(fs);
}

const struct nasd_vfs_ops nasd_vfs_posix = {
    .open_handle = px_open_handle,
    .handle = px_handle,
    .openat = px_openat,
    .close = px_close,
    .fstatat = px_fstatat,
    .mkdirat = px_mkdirat,
    .mknodat = px_mknodat,
    .symlinkat = px_symlinkat,
    .readlink = px_readlink,
    .unlinkat = px_unlinkat,
    .renameat = px_renameat,
    .link = px_link,
    .chown = px_chown,
    .chmod = px_chmod,
    .utimens = px_utimens,
    .truncate = px_truncate,
    .pread = px_pread,
    .pwrite = px_pwrite,
    .fsync = px_fsync,
    .readdir = px_readdir,
    .statvfs = px_statvfs,
    .destroy = px_destroy,
};
