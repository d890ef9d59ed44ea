#pragma once
/* Internals of the engine dataset backend (storage/fs/vfs_ext2*.c): an ext2 filesystem
 * kept with libext2fs inside a txblock (storage/fs/txblock.h) over a pool volume.
 *
 * Objects are named by their inode number (fd == ino). One mutex per filesystem
 * serializes every operation (libext2fs is not thread-safe); commits happen only
 * between operations, under that mutex, so every committed state is consistent. File
 * data reads and writes map blocks under the mutex and do the device I/O without it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <ext2fs/ext2fs.h>
#include "storage/fsroot.h"
#include "storage/fs/txblock.h"

#define E2_FH_TYPE 0x4558          /* "EX" */
#define E2_FH_LEN 8                /* ino u32 + i_generation u32 */
#define E2_LINK_MAX 65000
#define E2_NAME_MAX 255
#define E2_SYMLINK_MAX 4095

/* Commits in the background at least this often while dirty, and at an operation's end
 * once this much is buffered (well below one journal half, so ops stay atomic). */
#define E2_COMMIT_INTERVAL_MS 1000
#define E2_COMMIT_DIRTY_BYTES (TXB_JOURNAL_HALF / 2)
#define E2_PREFLUSH_BYTES (4u << 20)   /* file data written since a flush: flush it before a commit, unlocked */
#define E2_PIN_BITS 10
#define E2_DIX_BUCKETS 256

struct e2 {
    pthread_mutex_t mu;
    ext2_filsys fs;
    struct txb *txb;
    nasd_bdev *bdev;
    dev_t dev;
    uint32_t next_gen;            /* i_generation for the next new inode */
    bool dirty;                   /* changed since the last commit */
    /* groups whose in-memory bitmaps differ from what was last written */
    uint8_t *bb_dirty, *ib_dirty;
    /* background committer */
    pthread_t committer;
    pthread_cond_t cv;
    bool stop, have_thread;
    int interval_ms;
    /* inode numbers held by open fds (vfs_ext2_pin.c) */
    struct e2_pin *pins[1u << E2_PIN_BITS];
    size_t npins;
    /* name indexes of large directories (vfs_ext2_dir.c) */
    struct e2_dix *dix[E2_DIX_BUCKETS], *dix_lru, *dix_tail;
    uint64_t dix_names;
    /* a range we pass to ext2fs_block_alloc_stats_range ourselves (see vfs_ext2.c) */
    blk64_t range_hint_start, range_hint_num;
    /* stats */
    uint64_t commits;
    /* data writes running without the lock (vfs_ext2_io.c): every commit waits for them
     * (txb commit hook, under data_mu only: the writers finish without the lock), so
     * metadata never becomes durable before the data it points to */
    pthread_mutex_t data_mu;
    pthread_cond_t data_cv;
    int data_inflight;
    _Atomic uint64_t data_unflushed;  /* file data bytes written since the last flush began (e2_preflush) */
    void (*io_hook)(void);        /* tests: runs between a read's or write's mapping and its
                                   * device I/O, without the lock */
};

static inline struct e2 *E2(struct nasd_fsroot *f) { return f->vfs_priv; }

/* vfs_ext2.c */
void e2_lock(struct e2 *e);
void e2_unlock(struct e2 *e);               /* commits early when much is buffered */
int e2_commit_locked(struct e2 *e);
/* Before taking the lock for a commit: flushes the file data written since the last
 * flush when there is much of it (see vfs_ext2.c). */
void e2_preflush(struct e2 *e);
int e2_errno(errcode_t err);                /* libext2fs error -> -errno */
/* Reads an in-use inode named by fd; -ESTALE when it is not (or no longer) in use. */
int e2_iget(struct e2 *e, int fd, struct ext2_inode_large *in);
int e2_iput(struct e2 *e, ext2_ino_t ino, struct ext2_inode_large *in);
int e2_dir_get(struct e2 *e, int fd, struct ext2_inode_large *in); /* + -ENOTDIR */
void e2_now(struct timespec *ts);
void e2_set_time(uint32_t *sec, uint32_t *extra, const struct timespec *ts);
void e2_get_time(uint32_t sec, uint32_t extra, struct timespec *ts);
void e2_touch(struct ext2_inode_large *in, bool a, bool m, bool c);
uint32_t e2_uid(const struct ext2_inode_large *in);
uint32_t e2_gid(const struct ext2_inode_large *in);
void e2_set_uid(struct ext2_inode_large *in, uint32_t uid);
void e2_set_gid(struct ext2_inode_large *in, uint32_t gid);
uint64_t e2_size(const struct ext2_inode_large *in);
/* Bitmap bookkeeping: every allocation change must be reported so commits write it. */
void e2_inode_alloc(struct e2 *e, ext2_ino_t ino, int delta, bool is_dir);
void e2_note_block(struct e2 *e, blk64_t blk, blk64_t num);
uint32_t e2_new_generation(struct e2 *e);

/* vfs_ext2_pin.c: fds pin inode numbers against reuse (see there) */
struct e2_pin;
void e2_pin(struct e2 *e, ext2_ino_t ino);
void e2_unpin(struct e2 *e, ext2_ino_t ino);
bool e2_pinned(struct e2 *e, ext2_ino_t ino);
void e2_pins_free(struct e2 *e);
errcode_t e2_new_inode(struct e2 *e, ext2_ino_t dir, int mode, ext2_ino_t *out);

/* vfs_ext2_perm.c: 0 or -EACCES/-EPERM for the calling thread's credentials */
#define E2_MAY_EXEC 1
#define E2_MAY_WRITE 2
#define E2_MAY_READ 4
bool e2_is_root(void);
bool e2_in_group(uint32_t gid);
int e2_may(const struct ext2_inode_large *in, int mask);
int e2_may_delete(const struct ext2_inode_large *dir, const struct ext2_inode_large *victim);
bool e2_is_owner(const struct ext2_inode_large *in);
int e2_may_hardlink(const struct ext2_inode_large *in);
int e2_chown(struct nasd_fsroot *f, int fd, uid_t uid, gid_t gid);
int e2_chmod(struct nasd_fsroot *f, int fd, mode_t mode);
int e2_utimens(struct nasd_fsroot *f, int fd, const struct timespec ts[2]);

/* vfs_ext2_ns.c */
int e2_check_name(const char *name);        /* for names being created */
int e2_lookup(struct e2 *e, ext2_ino_t dir, const char *name, ext2_ino_t *ino);
int e2_ft_of_mode(unsigned mode);            /* EXT2_FT_* of an inode mode */

/* vfs_ext2_dir.c: every change to directory entries goes through these (or forgets
 * the directory's index). */
int e2_dir_lookup(struct e2 *e, ext2_ino_t dir, const char *name, ext2_ino_t *ino);
int e2_dir_add(struct e2 *e, ext2_ino_t dir, const char *name, ext2_ino_t ino, int ft);
int e2_dir_remove(struct e2 *e, ext2_ino_t dir, const char *name, ext2_ino_t ino);
void e2_dir_forget(struct e2 *e, ext2_ino_t dir);
void e2_dir_forget_all(struct e2 *e);
int e2_openat(struct nasd_fsroot *f, int dirfd, const char *name, int flags, mode_t mode);
int e2_fstatat(struct nasd_fsroot *f, int dirfd, const char *name, struct stat *st, int flags);
int e2_mkdirat(struct nasd_fsroot *f, int dirfd, const char *name, mode_t mode);
int e2_mknodat(struct nasd_fsroot *f, int dirfd, const char *name, mode_t mode, dev_t dev);
int e2_symlinkat(struct nasd_fsroot *f, const char *target, int dirfd, const char *name);
int e2_readlink(struct nasd_fsroot *f, int fd, char *buf, size_t size);
int e2_unlinkat(struct nasd_fsroot *f, int dirfd, const char *name, int flags);
int e2_link(struct nasd_fsroot *f, int fd, int dirfd, const char *name);
int e2_handle(struct nasd_fsroot *f, int dirfd, const char *name, int flags, struct nasd_fh *out);
int e2_open_handle(struct nasd_fsroot *f, const struct nasd_fh *h, int flags);
/* Drops one link of ino (whose inode is *in); frees it at zero. Writes the inode. */
int e2_drop_link(struct e2 *e, ext2_ino_t ino, struct ext2_inode_large *in);
int e2_dir_is_empty(struct e2 *e, ext2_ino_t dir);
int e2_make_root(struct e2 *e);             /* format: inode 2, mode 0755, root-owned */

/* vfs_ext2_rename.c */
int e2_renameat(struct nasd_fsroot *f, int olddir, const char *oldname, int newdir, const char *newname);

/* vfs_ext2_io.c */
int e2_truncate(struct nasd_fsroot *f, int fd, uint64_t size);
ssize_t e2_pread(struct nasd_fsroot *f, int fd, void *buf, size_t len, uint64_t off);
ssize_t e2_pwrite(struct nasd_fsroot *f, int fd, const void *buf, size_t len, uint64_t off);
int e2_readdir(struct nasd_fsroot *f, int dirfd, uint64_t cookie, nasd_vfs_dirent_fn fn, void *arg);
/* Frees the blocks of ino from logical block start on (punch) and sets the size. */
int e2_set_size(struct e2 *e, ext2_ino_t ino, struct ext2_inode_large *in, uint64_t size);

/* Tests only (vfs_ext2.c) */
void nasd_ext2_set_commit_interval(struct nasd_fsroot *f, int ms);   /* 0: no background commits */
void nasd_ext2_abandon(struct nasd_fsroot *f);   /* drop uncommitted state, as if the process died */
void nasd_ext2_set_io_hook(struct nasd_fsroot *f, void (*fn)(void));   /* see struct e2 */
