#pragma once
/* The narrow file backend the NFS server uses: syscall-shaped operations on a
 * dataset (struct nasd_fsroot). Two backends implement it:
 *   - posix  (storage/host/vfs_posix.c): a directory tree on the host, plain *at() syscalls;
 *   - engine (storage/fs/vfs_ext2*.c): an ext2 filesystem kept with libext2fs inside a
 *     thin volume of the pool engine, so datasets allocate space from the pool.
 *
 * Objects are named by small non-negative ints ("fds"). fs->root_fd is the root.
 * Every call returns >= 0 on success or -errno; errno is never used.
 * Names are single components (no '/'); nothing ever follows a symlink.
 *
 * Permissions: namespace operations (openat with O_CREAT or a write access mode,
 * fstatat of a name, mkdirat, mknodat, symlinkat, unlinkat, renameat, link, chown,
 * chmod, utimens) are checked as the kernel would for the calling thread's
 * credentials (nasd_vfs_set_cred): the posix backend lets the kernel do it through
 * the thread's fsuid/fsgid/groups, the engine backend checks in userspace (uid 0
 * bypasses read/write/search checks like CAP_DAC_OVERRIDE). open_handle, pread,
 * pwrite, truncate (like ftruncate on a writable fd), readdir, readlink, fsync and
 * statvfs do not check: the NFS layer checks
 * access to an object itself (nfs_may) before I/O.
 *
 * Durability: pwrite/namespace changes may be buffered; fsync(fd) (and commit())
 * make everything written so far durable (NFS COMMIT, FILE_SYNC). The engine
 * backend also commits in the background at least every second and is crash
 * consistent: after kill -9 the filesystem reopens as of its last commit. */
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

struct nasd_fsroot;

#define NASD_FH_KMAX 40
/* Persistent identity of an object (the inner part of an NFS file handle). */
struct nasd_fh {
    int32_t type;
    uint32_t len;
    uint8_t bytes[NASD_FH_KMAX];
};

#define NASD_VFS_MAX_GROUPS 17
struct nasd_vfs_cred {
    uint32_t uid, gid, ngroups;
    uint32_t groups[NASD_VFS_MAX_GROUPS];
};
/* Per-thread credentials used by the engine backend's checks. NULL = root. */
void nasd_vfs_set_cred(const struct nasd_vfs_cred *c);
const struct nasd_vfs_cred *nasd_vfs_get_cred(void);   /* never NULL */

/* readdir callback: next_cookie resumes right after this entry. Return nonzero to stop. */
typedef int (*nasd_vfs_dirent_fn)(void *arg, const char *name, uint64_t ino, unsigned char d_type,
                                  uint64_t next_cookie);

struct nasd_vfs_ops {
    /* Object from a handle made by handle(); -ESTALE when it no longer exists.
     * flags: O_PATH, or O_RDONLY / O_RDWR, optionally | O_DIRECTORY. */
    int (*open_handle)(struct nasd_fsroot *fs, const struct nasd_fh *h, int flags);
    /* Handle of name in dirfd; name "" with AT_EMPTY_PATH: of dirfd itself. */
    int (*handle)(struct nasd_fsroot *fs, int dirfd, const char *name, int flags, struct nasd_fh *out);
    /* flags: O_PATH | O_RDONLY | O_WRONLY | O_RDWR, O_CREAT, O_EXCL, O_NOFOLLOW,
     * O_DIRECTORY, O_TRUNC (O_CLOEXEC/O_NONBLOCK ignored). O_NOFOLLOW is implied. */
    int (*openat)(struct nasd_fsroot *fs, int dirfd, const char *name, int flags, mode_t mode);
    void (*close)(struct nasd_fsroot *fs, int fd);
    /* name "" with AT_EMPTY_PATH: the object itself. Never follows symlinks. */
    int (*fstatat)(struct nasd_fsroot *fs, int dirfd, const char *name, struct stat *st, int flags);
    int (*mkdirat)(struct nasd_fsroot *fs, int dirfd, const char *name, mode_t mode);
    int (*mknodat)(struct nasd_fsroot *fs, int dirfd, const char *name, mode_t mode, dev_t dev);
    int (*symlinkat)(struct nasd_fsroot *fs, const char *target, int dirfd, const char *name);
    /* Returns the target length (not NUL-terminated, like readlink(2)). */
    int (*readlink)(struct nasd_fsroot *fs, int fd, char *buf, size_t size);
    int (*unlinkat)(struct nasd_fsroot *fs, int dirfd, const char *name, int flags); /* AT_REMOVEDIR */
    int (*renameat)(struct nasd_fsroot *fs, int olddir, const char *oldname, int newdir, const char *newname);
    int (*link)(struct nasd_fsroot *fs, int fd, int dirfd, const char *name);
    int (*chown)(struct nasd_fsroot *fs, int fd, uid_t uid, gid_t gid);   /* (uid_t)-1: unchanged */
    int (*chmod)(struct nasd_fsroot *fs, int fd, mode_t mode);
    int (*utimens)(struct nasd_fsroot *fs, int fd, const struct timespec ts[2]); /* UTIME_NOW/OMIT */
    int (*truncate)(struct nasd_fsroot *fs, int fd, uint64_t size);
    /* Return bytes transferred (short only at end of file for pread). */
    ssize_t (*pread)(struct nasd_fsroot *fs, int fd, void *buf, size_t len, uint64_t off);
    ssize_t (*pwrite)(struct nasd_fsroot *fs, int fd, const void *buf, size_t len, uint64_t off);
    int (*fsync)(struct nasd_fsroot *fs, int fd, int datasync);
    /* Entries of a directory from cookie (0 = the start, "." and ".." included) in a
     * stable order; -EINVAL for a cookie that cannot be resumed from. */
    int (*readdir)(struct nasd_fsroot *fs, int dirfd, uint64_t cookie, nasd_vfs_dirent_fn fn, void *arg);
    int (*statvfs)(struct nasd_fsroot *fs, struct statvfs *out);
    /* Releases backend state when the last reference is put. */
    void (*destroy)(struct nasd_fsroot *fs);
};

extern const struct nasd_vfs_ops nasd_vfs_posix;
