#pragma once
/* A dataset as the NFS server sees it: a root object (root_fd) reached only through
 * the operations in vfs (storage/vfs.h), resolving names relative to objects obtained
 * from the root, never through paths. Backends: a host directory (posix) or an ext2
 * filesystem in a pool volume (engine).
 * Quota: nasd tracks used bytes, the blocks regular files have allocated (like du: a
 * sparse file counts what was written, not its size; a hard-linked file counts once);
 * services reserve what a write may allocate and settle with the allocation after it. */
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include "storage/bdev.h"
#include "storage/vfs.h"

struct nasd_fsroot {
    int root_fd;              /* the root object (posix: an O_DIRECTORY fd) */
    char path[4096];          /* where it lives (for logs and handle generations) */
    char name[128];           /* "pool/dataset" */
    uint64_t fsid;            /* stable, unique per dataset */
    _Atomic uint64_t quota;   /* bytes, 0 = none; may change live via REST */
    _Atomic int64_t used;     /* bytes allocated to regular files (st_blocks, like du) */
    atomic_int refs;
    const struct nasd_vfs_ops *vfs;  /* how NFS reaches the files (storage/vfs.h) */
    void *vfs_priv;                  /* backend state */
};

/* Opens the dataset directory and computes current usage by walking it. */
struct nasd_fsroot *nasd_fsroot_open(const char *path, const char *name, uint64_t fsid,
                                     uint64_t quota, int *err);
struct nasd_fsroot *nasd_fsroot_get(struct nasd_fsroot *f);
void nasd_fsroot_put(struct nasd_fsroot *f);
/* Account delta bytes (positive to grow). Returns 0, or -EDQUOT (nothing charged). */
int nasd_fsroot_charge(struct nasd_fsroot *f, int64_t delta);
/* Bytes a file occupies for quota purposes: its allocated blocks (0 unless regular). */
static inline int64_t nasd_fsroot_usage_st(const struct stat *st)
{
    return S_ISREG(st->st_mode) ? (int64_t)st->st_blocks * 512 : 0;
}
/* Settles a reservation with what was really allocated; never fails (may exceed quota
 * by the metadata blocks of one write). */
static inline void nasd_fsroot_charge_force(struct nasd_fsroot *f, int64_t delta)
{
    atomic_fetch_add(&f->used, delta);
}

/* Engine datasets: an ext2 filesystem (libext2fs) inside a pool volume, with a
 * redo journal at the end of the volume (storage/fs/vfs_ext2*.c, storage/fs/txblock.c).
 * format writes a fresh empty filesystem over the whole bdev. */
int nasd_ext2_format(nasd_bdev *b, const char *label);
/* Takes its own reference on b. Replays the journal, computes usage for quota. */
struct nasd_fsroot *nasd_fsroot_open_ext2(nasd_bdev *b, const char *name, uint64_t fsid,
                                          uint64_t quota, int *err);
/* Engine datasets: commits the filesystem and runs fn while no operation can change it,
 * so that fn (a volume snapshot) sees a commit point. Other backends: just fn. */
int nasd_ext2_commit_hold(struct nasd_fsroot *f, int (*fn)(void *), void *arg);
