/* Engine dataset backend, core: format, open, locking, commits, inode helpers.
 *
 * A dataset is an ext2 filesystem (libext2fs) inside a txblock (storage/fs/txblock.h) over a
 * thin pool volume. fd == inode number; every op runs under the filesystem's mutex; the
 * in-memory superblock, group descriptors and bitmaps are written and the txblock committed
 * only between ops, so every committed state is a consistent filesystem.
 *
 * fds stay valid while open: their inode numbers are not reused (vfs_ext2_pin.c).
 *
 * Commit cost: ext2fs_write_bitmaps() would rewrite the bitmaps of EVERY group (8 KiB per
 * 128 MiB group: 64 MiB per commit on a 1 TiB volume). Instead the allocation callbacks
 * record which groups changed and e2_commit_locked() writes only those, then lets
 * ext2fs_flush2() write the superblock and descriptor table (primary copies only). */
#define _GNU_SOURCE
#include "storage/fs/vfs_ext2_int.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include "util/log.h"
#include "util/wait_hook.h"

/* ---------- errors, times, ids ---------- */

static pthread_once_t err_table_once = PTHREAD_ONCE_INIT;
static void err_table_init(void) { initialize_ext2_error_table(); }

int e2_errno(errcode_t err)
{
    if (!err) return 0;
    if (err > 0 && err < 4096) return -(int)err;   /* a system errno passed through */
    switch (err) {
    case EXT2_ET_BLOCK_ALLOC_FAIL: case EXT2_ET_INODE_ALLOC_FAIL:
    case EXT2_ET_DIR_NO_SPACE: case EXT2_ET_EXTENT_NO_SPACE:
        return -ENOSPC;
    case EXT2_ET_NO_MEMORY: return -ENOMEM;
    case EXT2_ET_FILE_NOT_FOUND: return -ENOENT;
    case EXT2_ET_DIR_EXISTS: return -EEXIST;
    case EXT2_ET_FILE_TOO_BIG: return -EFBIG;
    case EXT2_ET_RO_FILSYS: return -EROFS;
    case EXT2_ET_NO_DIRECTORY: return -ENOTDIR;
    default:
        log_warn("ext2: libext2fs error %ld (%s)", (long)err, error_message(err));
        return -EIO;
    }
}

void e2_now(struct timespec *ts) { clock_gettime(CLOCK_REALTIME, ts); }

/* ext4 encoding: 32-bit seconds plus 2 epoch bits and the nanoseconds in *_extra. */
void e2_set_time(uint32_t *sec, uint32_t *extra, const struct timespec *ts)
{
    int64_t s = ts->tv_sec;
    *sec = (uint32_t)s;
    uint32_t epoch = (uint32_t)(((s - (int32_t)(uint32_t)s) >> 32) & 3);
    *extra = epoch | ((uint32_t)ts->tv_nsec << 2);
}

void e2_get_time(uint32_t sec, uint32_t extra, struct timespec *ts)
{
    ts->tv_sec = (int64_t)(int32_t)sec + ((int64_t)(extra & 3) << 32);
    ts->tv_nsec = extra >> 2;
    if (ts->tv_nsec >= 1000000000) ts->tv_nsec = 0;
}

void e2_touch(struct ext2_inode_large *in, bool a, bool m, bool c)
{
    struct timespec now;
    e2_now(&now);
    if (a) e2_set_time(&in->i_atime, &in->i_atime_extra, &now);
    if (m) e2_set_time(&in->i_mtime, &in->i_mtime_extra, &now);
    if (c) e2_set_time(&in->i_ctime, &in->i_ctime_extra, &now);
}

uint32_t e2_uid(const struct ext2_inode_large *in)
{ return in->i_uid | ((uint32_t)in->osd2.linux2.l_i_uid_high << 16); }
uint32_t e2_gid(const struct ext2_inode_large *in)
{ return in->i_gid | ((uint32_t)in->osd2.linux2.l_i_gid_high << 16); }
void e2_set_uid(struct ext2_inode_large *in, uint32_t uid)
{ in->i_uid = (uint16_t)uid; in->osd2.linux2.l_i_uid_high = (uint16_t)(uid >> 16); }
void e2_set_gid(struct ext2_inode_large *in, uint32_t gid)
{ in->i_gid = (uint16_t)gid; in->osd2.linux2.l_i_gid_high = (uint16_t)(gid >> 16); }
uint64_t e2_size(const struct ext2_inode_large *in)
{ return in->i_size | ((uint64_t)in->i_size_high << 32); }

uint32_t e2_new_generation(struct e2 *e)
{
    if (++e->next_gen == 0) e->next_gen = 1;
    return e->next_gen;
}

/* ---------- inodes ---------- */

int e2_iget(struct e2 *e, int fd, struct ext2_inode_large *in)
{
    ext2_filsys fs = e->fs;
    if (fd < 0) return -EBADF;
    ext2_ino_t ino = (ext2_ino_t)fd;
    if (ino == 0 || ino > fs->super->s_inodes_count ||
        (ino != EXT2_ROOT_INO && ino < EXT2_FIRST_INO(fs->super)))
        return -ESTALE;
    if (!ext2fs_test_inode_bitmap2(fs->inode_map, ino)) return -ESTALE;
    memset(in, 0, sizeof *in);
    errcode_t err = ext2fs_read_inode_full(fs, ino, (struct ext2_inode *)in, sizeof *in);
    if (err) return e2_errno(err);
    if (in->i_links_count == 0 || in->i_mode == 0) return -ESTALE;
    return 0;
}

int e2_iput(struct e2 *e, ext2_ino_t ino, struct ext2_inode_large *in)
{
    e->dirty = true;
    if (in->i_extra_isize < sizeof(struct ext2_inode_large) - EXT2_GOOD_OLD_INODE_SIZE)
        in->i_extra_isize = sizeof(struct ext2_inode_large) - EXT2_GOOD_OLD_INODE_SIZE;
    return e2_errno(ext2fs_write_inode_full(e->fs, ino, (struct ext2_inode *)in, sizeof *in));
}

int e2_dir_get(struct e2 *e, int fd, struct ext2_inode_large *in)
{
    int rc = e2_iget(e, fd, in);
    if (rc) return rc;
    return LINUX_S_ISDIR(in->i_mode) ? 0 : -ENOTDIR;
}

/* ---------- bitmap bookkeeping ---------- */

void e2_inode_alloc(struct e2 *e, ext2_ino_t ino, int delta, bool is_dir)
{
    ext2fs_inode_alloc_stats2(e->fs, ino, delta, is_dir);
    e->ib_dirty[ext2fs_group_of_ino(e->fs, ino)] = 1;
    e->dirty = true;
}

void e2_note_block(struct e2 *e, blk64_t blk, blk64_t num)
{
    if (!num) return;
    dgrp_t g0 = ext2fs_group_of_blk2(e->fs, blk), g1 = ext2fs_group_of_blk2(e->fs, blk + num - 1);
    for (dgrp_t g = g0; g <= g1 && g < e->fs->group_desc_count; g++) e->bb_dirty[g] = 1;
    e->dirty = true;
}

/* Freed blocks go back to the pool: discarded in the txblock, unmapped after the commit
 * (only once the filesystem no longer references them durably). */
static void freed_blocks(struct e2 *e, blk64_t blk, blk64_t num)
{
    uint64_t bs = e->fs->blocksize;
    int rc = txb_discard(e->txb, blk * bs, num * bs);
    if (rc) log_warn("ext2 %s: discard of %llu+%llu blocks: %d", e->bdev->name,
                     (unsigned long long)blk, (unsigned long long)num, rc);
}

static void block_stats_cb(ext2_filsys fs, blk64_t blk, int inuse)
{
    struct e2 *e = fs->priv_data;
    e2_note_block(e, blk, 1);
    if (inuse < 0) freed_blocks(e, blk, 1);
}

#define E2_RANGE_MAX 32768u   /* the longest range libext2fs passes: one extent */

/* libext2fs 1.47.0's ext2fs_block_alloc_stats_range calls back after its loop consumed
 * the range: with (end, 0) instead of (start, num). The bitmap is already updated, so
 * the range is recovered from it as the run of bits in the new state that ends at end:
 * possibly longer than the real one (neighbours in the same state), which only costs an
 * extra bitmap write or discard of free blocks, never a missed one. */
static blk64_t range_start(ext2_filsys fs, blk64_t end, bool set)
{
    uint8_t bits[E2_RANGE_MAX / 8];
    blk64_t first = fs->super->s_first_data_block, lo = end > first + E2_RANGE_MAX ? end - E2_RANGE_MAX : first;
    if (end <= lo || ext2fs_get_block_bitmap_range2(fs->block_map, lo, (unsigned)(end - lo), bits)) return end;
    uint8_t same = set ? 0xff : 0;
    for (blk64_t i = end - lo; i > 0;) {
        if (i % 8 == 0 && bits[i / 8 - 1] == same) { i -= 8; continue; }   /* whole bytes */
        bool b = bits[(i - 1) / 8] & (1u << ((i - 1) % 8));
        if (b != set) return lo + i;
        i--;
    }
    return lo;
}

static void block_range_stats_cb(ext2_filsys fs, blk64_t blk, blk_t num, int inuse)
{
    struct e2 *e = fs->priv_data;
    if (!num && e->range_hint_num && e->range_hint_start + e->range_hint_num == blk) {   /* our own call */
        blk = e->range_hint_start;
        num = (blk_t)e->range_hint_num;
    } else if (!num && blk > fs->super->s_first_data_block && blk <= ext2fs_blocks_count(fs->super)) {
        blk64_t start = range_start(fs, blk, inuse > 0);
        num = (blk_t)(blk - start);
        blk = start;
    }
    e2_note_block(e, blk, num);
    if (inuse < 0) freed_blocks(e, blk, num);
}

static void wait_data(void *arg);

static int attach(struct e2 *e, ext2_filsys fs)
{
    e->fs = fs;
    fs->priv_data = e;
    txb_set_commit_hook(e->txb, wait_data, e);
    e->bb_dirty = calloc(fs->group_desc_count, 1);
    e->ib_dirty = calloc(fs->group_desc_count, 1);
    if (!e->bb_dirty || !e->ib_dirty) return -ENOMEM;
    ext2fs_set_block_alloc_stats_callback(fs, block_stats_cb, NULL);
    ext2fs_set_block_alloc_stats_range_callback(fs, block_range_stats_cb, NULL);
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r) r = (uint32_t)time(NULL) * 2654435761u;
    e->next_gen = r;
    return 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) if (p[i]) return false;
    return true;
}

/* Writes the bitmaps of the groups marked in bb_dirty/ib_dirty (as ext2fs_write_bitmaps
 * lays them out: unused tail bits set). skip_zero: an all-zero block is not written because
 * the device already reads zeros there (fresh format of an unmapped volume). Inode bitmaps
 * have set padding bits past inodes_per_group, so only block bitmaps are ever skipped. */
static int write_group_bitmaps(struct e2 *e, bool formatting, bool skip_zero)
{
    ext2_filsys fs = e->fs;
    uint32_t bs = fs->blocksize;
    uint8_t *buf = malloc(bs);
    if (!buf) return -ENOMEM;
    int rc = 0;
    uint32_t bpg = EXT2_CLUSTERS_PER_GROUP(fs->super), ipg = fs->super->s_inodes_per_group;
    for (dgrp_t g = 0; g < fs->group_desc_count && !rc; g++) {
        if (e->bb_dirty[g]) {
            memset(buf, 0xff, bs);
            blk64_t start = EXT2FS_B2C(fs, fs->super->s_first_data_block) + (blk64_t)g * bpg;
            errcode_t err = ext2fs_get_block_bitmap_range2(fs->block_map, start, bpg, buf);
            if (!err && g == fs->group_desc_count - 1) {
                uint64_t nbits = EXT2FS_NUM_B2C(fs, (ext2fs_blocks_count(fs->super) -
                                                     fs->super->s_first_data_block) % EXT2_BLOCKS_PER_GROUP(fs->super));
                if (nbits)
                    for (uint64_t j = nbits; j < (uint64_t)bs * 8; j++) ext2fs_set_bit((unsigned)j, buf);
            }
            if (!err && !(skip_zero && all_zero(buf, bs)))
                err = io_channel_write_blk64(fs->io, ext2fs_block_bitmap_loc(fs, g), 1, buf);
            if (err) rc = e2_errno(err);
            else e->bb_dirty[g] = 0;
        }
        if (!rc && e->ib_dirty[g]) {
            memset(buf, 0xff, bs);
            errcode_t err = ext2fs_get_inode_bitmap_range2(fs->inode_map, (uint64_t)g * ipg + 1, ipg, buf);
            if (!err && !(skip_zero && all_zero(buf, bs)))
                err = io_channel_write_blk64(fs->io, ext2fs_inode_bitmap_loc(fs, g), 1, buf);
            if (err) rc = e2_errno(err);
            else e->ib_dirty[g] = 0;
        }
        /* format of a big volume: bitmaps would overflow a journal half (format is not
         * atomic anyway; a half-formatted volume is never opened) */
        if (!rc && formatting && txb_dirty_bytes(e->txb) >= E2_COMMIT_DIRTY_BYTES) rc = txb_commit(e->txb);
    }
    free(buf);
    return rc;
}

/* txb commit hook: ordered mode, data written without the lock lands before the
 * metadata naming it becomes durable (early commits inside an op included). */
static void wait_data(void *arg)
{
    struct e2 *e = arg;
    pthread_mutex_lock(&e->data_mu);
    while (e->data_inflight) pthread_cond_wait(&e->data_cv, &e->data_mu);
    pthread_mutex_unlock(&e->data_mu);
}

/* A commit after a large write phase spends most of its time in the device flush of
 * that data (the pool engine syncs its members: about 1 s after 1 GiB). Flushing it
 * first, without the lock, leaves the commit under the lock little to sync, so the
 * dataset's other clients are not held up for the whole flush. A little data is left
 * to the commit's own flush: one flush, not two, for a small write and COMMIT. */
void e2_preflush(struct e2 *e)
{
    if (atomic_load(&e->data_unflushed) < E2_PREFLUSH_BYTES) return;
    atomic_store(&e->data_unflushed, 0);
    int rc = nasd_bdev_flush(e->bdev);   /* the commit's own flush follows and reports */
    if (rc) log_warn("ext2 %s: flush before commit failed: %d", e->bdev->name, rc);
}

int e2_commit_locked(struct e2 *e)
{
    ext2_filsys fs = e->fs;
    atomic_store(&e->data_unflushed, 0);   /* the commit's flush covers what came before */
    int rc = write_group_bitmaps(e, false, false);
    if (rc) { log_err("ext2 %s: writing bitmaps: %d", e->bdev->name, rc); return rc; }
    /* our bitmaps are written: keep ext2fs_flush2 from rewriting all groups' */
    fs->flags &= ~(EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
    ext2fs_mark_super_dirty(fs);
    /* super + descriptors, then one io flush = one txb_commit. ext2fs_flush2(fs, 0) flushes
     * twice (before and after the primary superblock, for ordering a journal-less disk
     * needs), which made every commit two journal writes and two device flushes; a txb
     * commit is atomic, so one holds both. QD1 COMMIT on an engine dataset: 2 RWF_DSYNC
     * journal writes per call before, 1 after. */
    errcode_t err = ext2fs_flush2(fs, EXT2_FLAG_FLUSH_NO_SYNC);
    if (!err) err = io_channel_flush(fs->io);
    if (err) {
        rc = e2_errno(err);
        log_err("ext2 %s: commit failed: %d", e->bdev->name, rc);
        return rc;
    }
    e->dirty = false;
    e->commits++;
    return 0;
}

/* held maybe for a slow commit: an NFS leader hands its loop over before it waits */
void e2_lock(struct e2 *e) { nasd_lock_handing_off(&e->mu); }

void e2_unlock(struct e2 *e)
{
    if (e->dirty && txb_dirty_bytes(e->txb) >= E2_COMMIT_DIRTY_BYTES) e2_commit_locked(e);
    pthread_mutex_unlock(&e->mu);
}

static void *committer_main(void *arg)
{
    struct e2 *e = arg;
    pthread_mutex_lock(&e->mu);
    while (!e->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += e->interval_ms / 1000;
        until.tv_nsec += (long)(e->interval_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&e->cv, &e->mu, &until);
        if (!e->stop && e->dirty && atomic_load(&e->data_unflushed) >= E2_PREFLUSH_BYTES) {
            pthread_mutex_unlock(&e->mu);
            e2_preflush(e);
            pthread_mutex_lock(&e->mu);
        }
        if (!e->stop && e->dirty) e2_commit_locked(e);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* libext2fs 1.47.0's punch refuses an extent that ends at the filesystem's last block
 * (punch_extent_blocks checks free_start + count >= blocks_count, fixed upstream to >):
 * a file holding that block could never be deleted or truncated. The block is listed in the
 * bad blocks inode instead, so no file ever gets it and e2fsck still accounts for it. */
static int guard_last_block(struct e2 *e)
{
    ext2_filsys fs = e->fs;
    blk64_t last = ext2fs_blocks_count(fs->super) - 1;
    ext2_badblocks_list bb = NULL;
    errcode_t err = ext2fs_read_bb_inode(fs, &bb);
    if (err) return e2_errno(err);
    int rc = 0;
    if (!ext2fs_badblocks_list_test(bb, (blk_t)last)) {
        if (ext2fs_test_block_bitmap2(fs->block_map, last)) goto out;   /* metadata or data: leave it */
        err = ext2fs_badblocks_list_add(bb, (blk_t)last);
        if (!err) {
            err = ext2fs_update_bb_inode(fs, bb);   /* does the allocation accounting */
            e->dirty = true;
        }
        rc = e2_errno(err);
    }
out:
    ext2fs_badblocks_list_free(bb);
    return rc;
}

/* ---------- format ---------- */

static void e2_free(struct e2 *e)
{
    if (!e) return;
    free(e->bb_dirty);
    free(e->ib_dirty);
    e2_pins_free(e);
    e2_dir_forget_all(e);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    pthread_cond_destroy(&e->data_cv);
    pthread_mutex_destroy(&e->data_mu);
    free(e);
}

static struct e2 *e2_alloc(void)
{
    struct e2 *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&e->data_cv, NULL);
    pthread_mutex_init(&e->data_mu, NULL);
    e->interval_ms = E2_COMMIT_INTERVAL_MS;
    return e;
}

int nasd_ext2_format(nasd_bdev *b, const char *label)
{
    /* Forget whatever the volume held: afterwards it reads zeros, which is what lets format
     * skip zeroing the inode tables (and all-clear bitmaps) -- on a thin volume writing them
     * would allocate pool space for nothing. If unmap is unsupported they are zeroed. */
    pthread_once(&err_table_once, err_table_init);
    bool zeroed = nasd_bdev_unmap(b, 0, b->size) == 0;
    struct txb *t = NULL;
    int rc = txb_open(b, &t);
    if (rc) return rc;
    char ioname[64];
    txb_io_name(t, ioname, sizeof ioname);

    uint64_t blocks = txb_data_size(t) / 4096;
    if (blocks > 0xffffffffull) {   /* no 64bit feature: 16 TiB is the limit */
        log_warn("ext2 %s: filesystem limited to 16 TiB", b->name);
        blocks = 0xffffffffull;
    }
    struct ext2_super_block param;
    memset(&param, 0, sizeof param);
    ext2fs_blocks_count_set(&param, blocks);
    param.s_log_block_size = 2;                  /* 4 KiB */
    param.s_rev_level = EXT2_DYNAMIC_REV;
    param.s_inode_size = 256;                    /* room for nanosecond times */
    /* 1 inode per 16 KiB, mke2fs's default: NAS shares hold many small files, and
     * unused inode tables cost no pool space (thin volume, never written) */
    param.s_inodes_count = (uint32_t)(blocks / 4 > 0xfff00000u ? 0xfff00000u : blocks / 4);
    if (param.s_inodes_count < 64) param.s_inodes_count = 64;
    param.s_log_groups_per_flex = 10;            /* bitmaps of 1024 groups packed together */
    param.s_backup_bgs[0] = 1;                   /* sparse_super2: two backups only */
    param.s_backup_bgs[1] = ~0u;
    param.s_feature_compat = EXT4_FEATURE_COMPAT_SPARSE_SUPER2;
    param.s_feature_incompat = EXT2_FEATURE_INCOMPAT_FILETYPE | EXT3_FEATURE_INCOMPAT_EXTENTS |
                               EXT4_FEATURE_INCOMPAT_FLEX_BG;
    param.s_feature_ro_compat = EXT2_FEATURE_RO_COMPAT_LARGE_FILE | EXT4_FEATURE_RO_COMPAT_HUGE_FILE |
                                EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE;

    ext2_filsys fs = NULL;
    struct e2 *e = e2_alloc();
    errcode_t err = e ? ext2fs_initialize(ioname, EXT2_FLAG_64BITS, &param, nasd_txb_io_manager, &fs)
                      : EXT2_ET_NO_MEMORY;
    if (err) { rc = e2_errno(err); goto out; }
    e->txb = t;
    e->bdev = b;
    rc = attach(e, fs);
    if (rc) goto out;
    if (getrandom(fs->super->s_uuid, sizeof fs->super->s_uuid, 0) != sizeof fs->super->s_uuid)
        memcpy(fs->super->s_uuid, b->uuid, sizeof fs->super->s_uuid);
    snprintf((char *)fs->super->s_volume_name, sizeof fs->super->s_volume_name, "%s", label ? label : "");
    fs->super->s_max_mnt_count = -1;
    fs->super->s_r_blocks_count = 0;
    fs->umask = 022;

    err = ext2fs_allocate_tables(fs);
    if (err) { rc = e2_errno(err); goto out; }
    /* allocate_tables marks the bitmaps directly (no callbacks): every group is written once
     * below, all-clear blocks skipped when the volume reads zeros. */
    memset(e->bb_dirty, 1, fs->group_desc_count);
    memset(e->ib_dirty, 1, fs->group_desc_count);
    if (!zeroed) {
        for (dgrp_t g = 0; g < fs->group_desc_count && !err; g++) {
            err = ext2fs_zero_blocks2(fs, ext2fs_inode_table_loc(fs, g), fs->inode_blocks_per_group, NULL, NULL);
            if (!err && txb_dirty_bytes(t) >= E2_COMMIT_DIRTY_BYTES) err = (errcode_t)-txb_commit(t);
        }
        if (err) { rc = e2_errno(err); goto out; }
    }
    /* reserved inodes 1..10 are in use; 1 is the (empty) bad blocks list */
    for (ext2_ino_t i = 1; i < EXT2_FIRST_INO(fs->super); i++)
        if (i != EXT2_ROOT_INO) e2_inode_alloc(e, i, +1, false);
    err = ext2fs_update_bb_inode(fs, NULL);
    if (err) { rc = e2_errno(err); goto out; }
    rc = guard_last_block(e);
    if (rc) goto out;
    rc = e2_make_root(e);
    if (rc) goto out;

    rc = write_group_bitmaps(e, true, zeroed);
    if (rc) goto out;
    fs->flags &= ~(EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
    ext2fs_mark_super_dirty(fs);
    err = ext2fs_close_free(&fs);   /* writes super + descriptors (with backups), commits */
    if (err) rc = e2_errno(err);
out:
    if (fs) ext2fs_free(fs);
    if (rc) { log_err("ext2 %s: format failed: %d", b->name, rc); txb_abandon(t); }
    else txb_close(t);
    e2_free(e);
    return rc;
}

/* ---------- open / destroy ---------- */

static int64_t usage_scan(ext2_filsys fs)
{
    int64_t sum = 0;
    ext2_ino_t ino = EXT2_FIRST_INO(fs->super), last = fs->super->s_inodes_count, found;
    struct ext2_inode_large in;
    while (ino <= last && ext2fs_find_first_set_inode_bitmap2(fs->inode_map, ino, last, &found) == 0) {
        if (ext2fs_read_inode_full(fs, found, (struct ext2_inode *)&in, sizeof in) == 0 &&
            in.i_links_count && LINUX_S_ISREG(in.i_mode))
            sum += (int64_t)ext2fs_get_stat_i_blocks(fs, (struct ext2_inode *)&in) * 512;   /* as st_blocks */
        ino = found + 1;
    }
    return sum;
}

static void stop_committer(struct e2 *e)
{
    if (!e->have_thread) return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->committer, NULL);
    e->have_thread = false;
}

static void e2_destroy(struct nasd_fsroot *f)
{
    struct e2 *e = E2(f);
    stop_committer(e);
    pthread_mutex_lock(&e->mu);
    if (e->dirty) e2_commit_locked(e);
    errcode_t err = ext2fs_close_free(&e->fs);
    if (err) log_err("ext2 %s: close: %s", e->bdev->name, error_message(err));
    pthread_mutex_unlock(&e->mu);
    txb_close(e->txb);
    nasd_bdev_put(e->bdev);
    e2_free(e);
    free(f);
}

/* fds are inode numbers; closing one lets its number be reused */
static void e2_close(struct nasd_fsroot *f, int fd)
{
    struct e2 *e = E2(f);
    if (fd <= 0) return;
    e2_lock(e);
    e2_unpin(e, (ext2_ino_t)fd);
    e2_unlock(e);
}

static int e2_fsync(struct nasd_fsroot *f, int fd, int datasync)
{
    struct e2 *e = E2(f);
    struct ext2_inode_large in;
    e2_preflush(e);
    e2_lock(e);
    int rc = e2_iget(e, fd, &in);
    if (!rc && e->dirty) rc = e2_commit_locked(e);
    e2_unlock(e);
    return rc;
}

static int e2_statvfs(struct nasd_fsroot *f, struct statvfs *out)
{
    struct e2 *e = E2(f);
    memset(out, 0, sizeof *out);
    e2_lock(e);
    struct ext2_super_block *s = e->fs->super;
    out->f_bsize = out->f_frsize = e->fs->blocksize;
    out->f_blocks = ext2fs_blocks_count(s);
    out->f_bfree = ext2fs_free_blocks_count(s);
    /* the filesystem spans the pool: what the pool can still give this thin volume
     * (other datasets and thick volumes' reservations share it) bounds its free space */
    if (e->bdev->ops->avail) {
        uint64_t pool_free = e->bdev->ops->avail(e->bdev) / e->fs->blocksize;
        if (pool_free < out->f_bfree) out->f_bfree = pool_free;
    }
    uint64_t r = ext2fs_r_blocks_count(s);
    out->f_bavail = out->f_bfree > r ? out->f_bfree - r : 0;
    out->f_files = s->s_inodes_count;
    out->f_ffree = out->f_favail = s->s_free_inodes_count;
    e2_unlock(e);
    out->f_fsid = (unsigned long)f->fsid;
    out->f_namemax = E2_NAME_MAX;
    return 0;
}

static const struct nasd_vfs_ops e2_ops = {
    .open_handle = e2_open_handle,
    .handle = e2_handle,
    .openat = e2_openat,
    .close = e2_close,
    .fstatat = e2_fstatat,
    .mkdirat = e2_mkdirat,
    .mknodat = e2_mknodat,
    .symlinkat = e2_symlinkat,
    .readlink = e2_readlink,
    .unlinkat = e2_unlinkat,
    .renameat = e2_renameat,
    .link = e2_link,
    .chown = e2_chown,
    .chmod = e2_chmod,
    .utimens = e2_utimens,
    .truncate = e2_truncate,
    .pread = e2_pread,
    .pwrite = e2_pwrite,
    .fsync = e2_fsync,
    .readdir = e2_readdir,
    .statvfs = e2_statvfs,
    .destroy = e2_destroy,
};

struct nasd_fsroot *nasd_fsroot_open_ext2(nasd_bdev *b, const char *name, uint64_t fsid,
                                          uint64_t quota, int *errp)
{
    int rc;
    pthread_once(&err_table_once, err_table_init);
    struct nasd_fsroot *f = calloc(1, sizeof *f);
    struct e2 *e = e2_alloc();
    struct txb *t = NULL;
    ext2_filsys fs = NULL;
    if (!f || !e) { rc = -ENOMEM; goto fail; }
    rc = txb_open(b, &t);   /* replays the newest committed transaction */
    if (rc) goto fail;
    char ioname[64];
    txb_io_name(t, ioname, sizeof ioname);
    errcode_t err = ext2fs_open2(ioname, NULL, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0, nasd_txb_io_manager, &fs);
    if (!err) err = ext2fs_read_bitmaps(fs);
    if (err) {
        log_err("ext2 %s: open: %s", b->name, error_message(err));
        rc = err == EXT2_ET_BAD_MAGIC ? -EINVAL : e2_errno(err);
        goto fail;
    }
    fs->flags |= EXT2_FLAG_MASTER_SB_ONLY;   /* backups hold only static fields */
    e->txb = t;
    e->bdev = nasd_bdev_get(b);
    e->dev = (dev_t)(fsid ^ (fsid >> 32)) & 0xffffffffu;
    rc = attach(e, fs);
    if (!rc) rc = guard_last_block(e);   /* no-op on filesystems formatted here */
    if (rc) { nasd_bdev_put(e->bdev); goto fail; }

    f->root_fd = EXT2_ROOT_INO;
    snprintf(f->path, sizeof f->path, "engine:%s", name);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->fsid = fsid;
    atomic_init(&f->quota, quota);
    atomic_init(&f->used, usage_scan(fs));
    atomic_init(&f->refs, 1);
    f->vfs = &e2_ops;
    f->vfs_priv = e;
    if (pthread_create(&e->committer, NULL, committer_main, e) == 0) e->have_thread = true;
    else log_warn("ext2 %s: no background committer thread", b->name);
    log_info("ext2 %s: opened %s (%llu blocks, %u inodes, %lld bytes used)", b->name, name,
             (unsigned long long)ext2fs_blocks_count(fs->super), fs->super->s_inodes_count,
             (long long)atomic_load(&f->used));
    return f;
fail:
    if (fs) ext2fs_close_free(&fs);
    if (t) txb_close(t);
    if (e) e2_free(e);
    free(f);
    *errp = rc ? rc : -EIO;
    return NULL;
}

/* Tests: commit interval in ms (0 = never in the background). */
void nasd_ext2_set_commit_interval(struct nasd_fsroot *f, int ms)
{
    struct e2 *e = E2(f);
    pthread_mutex_lock(&e->mu);
    e->interval_ms = ms > 0 ? ms : 1000 * 3600 * 24;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* Tests: lose everything not committed, as if the process died now (f is freed). */
void nasd_ext2_abandon(struct nasd_fsroot *f)
{
    struct e2 *e = E2(f);
    stop_committer(e);
    txb_abandon(e->txb);   /* forgets the io name: nothing below can reach the device */
    e->fs->flags &= ~(EXT2_FLAG_DIRTY | EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
    e->fs->flags &= ~EXT2_FLAG_RW;
    ext2fs_free(e->fs);
    nasd_bdev_put(e->bdev);
    e2_free(e);
    free(f);
}

int nasd_ext2_commit_hold(struct nasd_fsroot *f, int (*fn)(void *), void *arg)
{
    if (f->vfs != &e2_ops) return fn(arg);
    struct e2 *e = E2(f);
    e2_preflush(e);
    e2_lock(e);
    int rc = e->dirty ? e2_commit_locked(e) : 0;
    if (!rc) rc = fn(arg);
    e2_unlock(e);
    return rc;
}
