/* Engine dataset backend: file data (pread/pwrite/truncate) and readdir.
 *
 * pread maps blocks itself (one extent lookup per run) and reads runs of contiguous blocks
 * with one call (holes and unwritten extents read as zeros), the device reads without the
 * lock; block-aligned pwrites allocate whole ranges (growing the last extent when they
 * append) and write the data without the lock (ordered mode: commits wait for it); other
 * pwrites and size changes go through libext2fs' file API, which allocates and frees
 * blocks (freed ones are discarded back to the pool by the allocation callbacks in
 * vfs_ext2.c). readdir drops the lock between directory blocks and never calls back with
 * it held, so a callback may use the other ops. */
#define _GNU_SOURCE
#include "storage/fs/vfs_ext2_int.h"
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define E2_READ_RUN_MAX 256         /* blocks per device read */
#define E2_WRITE_PIECE (1u << 20)   /* bytes per atomic piece of a pwrite */

int e2_set_size(struct e2 *e, ext2_ino_t ino, struct ext2_inode_large *in, uint64_t size)
{
    ext2_file_t file;
    e->dirty = true;
    errcode_t err = ext2fs_file_open2(e->fs, ino, (struct ext2_inode *)in, EXT2_FILE_WRITE, &file);
    if (err) return e2_errno(err);
    err = ext2fs_file_set_size2(file, size);
    errcode_t cerr = ext2fs_file_close(file);
    if (!err) err = cerr;
    if (err) return e2_errno(err);
    /* the file API wrote the 128-byte inode; reread it whole to set the times */
    memset(in, 0, sizeof *in);
    err = ext2fs_read_inode_full(e->fs, ino, (struct ext2_inode *)in, sizeof *in);
    if (err) return e2_errno(err);
    e2_touch(in, false, true, true);
    return e2_iput(e, ino, in);
}

int e2_truncate(struct nasd_fsroot *f, int fd, uint64_t size)
{
    struct e2 *e = E2(f);
    struct ext2_inode_large in;
    e2_lock(e);
    int rc = e2_iget(e, fd, &in);
    if (rc) goto out;
    if (LINUX_S_ISDIR(in.i_mode)) { rc = -EISDIR; goto out; }
    if (!LINUX_S_ISREG(in.i_mode)) { rc = -EINVAL; goto out; }
    /* like ftruncate on a writable fd: the caller checked access (NFS lets an owner
     * truncate a file whose mode forbids writing, as local opens allow) */
    if (size > (uint64_t)INT64_MAX) { rc = -EFBIG; goto out; }
    rc = e2_set_size(e, (ext2_ino_t)fd, &in, size);
out:
    e2_unlock(e);
    return rc;
}

static int map_block(struct e2 *e, ext2_ino_t ino, struct ext2_inode_large *in, blk64_t lblk, blk64_t *pblk)
{
    int flags = 0;
    errcode_t err = ext2fs_bmap2(e->fs, ino, (struct ext2_inode *)in, NULL, 0, lblk, &flags, pblk);
    if (err) return e2_errno(err);
    if (flags & BMAP_RET_UNINIT) *pblk = 0;   /* unwritten extent reads as zeros */
    return 0;
}

/* The mapping run at lblk, at most max blocks: *pblk (0 for a hole or an unwritten
 * extent, which read as zeros) and *k blocks that continue it contiguously. One extent
 * lookup per run (h: the file's extent handle, NULL for block-mapped files); holes
 * between extents go block by block through bmap. */
static int run_at(struct e2 *e, ext2_extent_handle_t h, ext2_ino_t ino, struct ext2_inode_large *in,
                  blk64_t lblk, blk64_t max, blk64_t *pblk, blk64_t *k)
{
    struct ext2fs_extent ex;
    if (h && !ext2fs_extent_goto2(h, 0, lblk) && !ext2fs_extent_get(h, EXT2_EXTENT_CURRENT, &ex) &&
        lblk >= ex.e_lblk && lblk < ex.e_lblk + ex.e_len) {
        blk64_t left = ex.e_lblk + ex.e_len - lblk;
        *k = left < max ? left : max;
        *pblk = ex.e_flags & EXT2_EXTENT_FLAGS_UNINIT ? 0 : ex.e_pblk + (lblk - ex.e_lblk);
        return 0;
    }
    *k = 1;
    int rc = map_block(e, ino, in, lblk, pblk);
    if (rc || h || *pblk == 0) return rc;
    /* block-mapped file: extend while contiguous */
    while (*k < max) {
        blk64_t q;
        if ((rc = map_block(e, ino, in, lblk + *k, &q))) return rc;
        if (q != *pblk + *k) break;
        (*k)++;
    }
    return 0;
}

/* A run of whole blocks to read from the device once the lock is dropped. */
struct seg { uint64_t off; uint8_t *dst; size_t len; };

/* Under the lock: maps [off, off+len) and reads it, except that whole-block runs not
 * buffered in the txblock go to segs (when segs is not NULL) for the caller to read
 * without the lock. Returns the byte count or -errno. */
static ssize_t pread_locked(struct e2 *e, int fd, uint8_t *buf, size_t len, uint64_t off, struct seg *segs,
                            unsigned *nsegs)
{
    ext2_filsys fs = e->fs;
    struct ext2_inode_large in;
    uint8_t *bounce = NULL;
    ext2_extent_handle_t h = NULL;
    int rc = e2_iget(e, fd, &in);
    if (rc) return rc;
    if (LINUX_S_ISDIR(in.i_mode)) return -EISDIR;
    if (!LINUX_S_ISREG(in.i_mode)) return -EINVAL;
    uint64_t size = e2_size(&in), bs = fs->blocksize;
    if (off >= size || !len) return 0;
    if ((in.i_flags & EXT4_EXTENTS_FL) && ext2fs_extent_open2(fs, (ext2_ino_t)fd, (struct ext2_inode *)&in, &h))
        h = NULL;
    uint64_t end = size - off < len ? size : off + len, pos = off;
    uint8_t *p = buf;
    while (pos < end) {
        blk64_t lblk = pos / bs, pblk, k;
        uint64_t in_off = pos % bs;
        uint64_t want = (end - lblk * bs + bs - 1) / bs;
        if ((rc = run_at(e, h, (ext2_ino_t)fd, &in, lblk, want < E2_READ_RUN_MAX ? want : E2_READ_RUN_MAX,
                         &pblk, &k)))
            goto out;
        uint64_t n = k * bs - in_off;
        if (n > end - pos) n = end - pos;
        if (!pblk) {
            memset(p, 0, n);
        } else if (!in_off && n == k * bs) {
            if (segs && !txb_range_buffered(e->txb, pblk * bs, n)) {
                segs[(*nsegs)++] = (struct seg){ pblk * bs, p, n };
            } else {
                errcode_t err = io_channel_read_blk64(fs->io, pblk, (int)k, p);
                if (err) { rc = e2_errno(err); goto out; }
            }
        } else {
            if (!bounce && !(bounce = malloc(E2_READ_RUN_MAX * bs))) { rc = -ENOMEM; goto out; }
            errcode_t err = io_channel_read_blk64(fs->io, pblk, (int)k, bounce);
            if (err) { rc = e2_errno(err); goto out; }
            memcpy(p, bounce + in_off, n);
        }
        pos += n;
        p += n;
    }
out:
    if (h) ext2fs_extent_free(h);
    free(bounce);
    return rc ? rc : (ssize_t)(end - off);
}

/* The device reads of whole unbuffered blocks run without the lock, so reads of one
 * dataset overlap. If a block was freed meanwhile (it might hold another file's data
 * by now) the whole read is redone under the lock. */
ssize_t e2_pread(struct nasd_fsroot *f, int fd, void *buf, size_t len, uint64_t off)
{
    struct e2 *e = E2(f);
    struct seg stack[16], *segs = stack;
    size_t maxsegs = len / e->fs->blocksize + 2;
    if (maxsegs > 16 && !(segs = malloc(maxsegs * sizeof *segs))) segs = NULL;   /* all under the lock */
    unsigned nsegs = 0;
    e2_lock(e);
    uint64_t gen = txb_discard_gen(e->txb);
    ssize_t n = pread_locked(e, fd, buf, len, off, segs, &nsegs);
    e2_unlock(e);
    if (nsegs && e->io_hook) e->io_hook();
    int rc = 0;
    for (unsigned i = 0; i < nsegs && n > 0 && !rc; i++) rc = txb_read_home(e->txb, segs[i].off, segs[i].dst, segs[i].len);
    if (n > 0 && nsegs && (rc || txb_discard_gen(e->txb) != gen)) {
        e2_lock(e);
        n = pread_locked(e, fd, buf, len, off, NULL, NULL);
        e2_unlock(e);
    }
    if (segs != stack) free(segs);
    return n;
}

/* Writes one piece (at most E2_WRITE_PIECE bytes) under the lock. Returns bytes written or
 * -errno; a partial write reports what made it. */
struct run { blk64_t pblk, n; };

/* Physical runs backing logical blocks [lblk, lblk+n) of an extent-mapped file; false
 * if any block is unmapped or uninitialized (the caller then takes the general path). */
static bool map_runs(struct e2 *e, ext2_ino_t ino, struct ext2_inode_large *in, blk64_t lblk, blk64_t n,
                     struct run *runs, unsigned *nruns)
{
    if (!(in->i_flags & EXT4_EXTENTS_FL)) return false;
    ext2_extent_handle_t h;
    if (ext2fs_extent_open2(e->fs, ino, (struct ext2_inode *)in, &h)) return false;
    bool ok = true;
    *nruns = 0;
    while (n && ok) {
        struct ext2fs_extent ex;
        ok = !ext2fs_extent_goto2(h, 0, lblk) && !ext2fs_extent_get(h, EXT2_EXTENT_CURRENT, &ex) &&
             !(ex.e_flags & EXT2_EXTENT_FLAGS_UNINIT) && lblk >= ex.e_lblk && lblk < ex.e_lblk + ex.e_len;
        if (!ok) break;
        blk64_t k = ex.e_lblk + ex.e_len - lblk < n ? ex.e_lblk + ex.e_len - lblk : n;
        runs[(*nruns)++] = (struct run){ ex.e_pblk + (lblk - ex.e_lblk), k };
        lblk += k;
        n -= k;
    }
    ext2fs_extent_free(h);
    return ok;
}

/* Appending right after the file's last extent, onto free blocks that follow it: the
 * extent grows instead of a new one being added (libext2fs's fallocate adds one per call:
 * a file written in 32 KiB pieces had one extent per piece, and every read and write
 * paid a linear search of thousands). false: not applicable, nothing changed. */
static bool extend_last_extent(struct e2 *e, ext2_ino_t ino, struct ext2_inode_large *in, blk64_t lblk, blk64_t n)
{
    ext2_filsys fs = e->fs;
    if (!(in->i_flags & EXT4_EXTENTS_FL) || !lblk) return false;
    ext2_extent_handle_t h;
    if (ext2fs_extent_open2(fs, ino, (struct ext2_inode *)in, &h)) return false;
    struct ext2fs_extent ex, next;
    bool ok = !ext2fs_extent_goto2(h, 0, lblk - 1) && !ext2fs_extent_get(h, EXT2_EXTENT_CURRENT, &ex) &&
              !(ex.e_flags & EXT2_EXTENT_FLAGS_UNINIT) && ex.e_lblk + ex.e_len == lblk &&
              ex.e_len + n <= EXT_INIT_MAX_LEN;
    blk64_t pstart = ok ? ex.e_pblk + ex.e_len : 0;
    ok = ok && pstart + n <= ext2fs_blocks_count(fs->super) &&
         ext2fs_test_block_bitmap_range2(fs->block_map, pstart, (unsigned)n);
    if (ok) {   /* nothing mapped in the range: the next extent (if any) starts past it */
        errcode_t err = ext2fs_extent_get(h, EXT2_EXTENT_NEXT_LEAF, &next);
        ok = err ? err == EXT2_ET_EXTENT_NO_NEXT : next.e_lblk >= lblk + n || next.e_lblk <= ex.e_lblk;
        ok = ok && !ext2fs_extent_goto2(h, 0, lblk - 1);   /* back to ex */
    }
    if (ok) {
        ex.e_len += (uint32_t)n;
        ok = !ext2fs_extent_replace(h, 0, &ex);   /* writes the inode if the leaf is in it */
    }
    ext2fs_extent_free(h);
    if (!ok) return false;
    e->range_hint_start = pstart;
    e->range_hint_num = n;
    ext2fs_block_alloc_stats_range(fs, pstart, (unsigned)n, +1);   /* bitmap, counts, our callbacks */
    e->range_hint_num = 0;
    ext2fs_iblk_add_blocks(fs, (struct ext2_inode *)in, n);
    return true;
}

/* Block-aligned writes: allocate the range as extents in one go, then write the data
 * per extent run straight to the device (txb_write_data, ordered mode) instead of
 * block by block through the journal. 1: done, 0: use the general path, <0: error. */
/* A run of whole blocks to write to the device once the lock is dropped. */
struct wseg { uint64_t off; const uint8_t *src; size_t len; };

/* defer (may be NULL): runs that may go straight to the device are left there for the
 * caller to write without the lock (the inode, size included, is updated already). */
static int pwrite_aligned(struct e2 *e, ext2_ino_t ino, struct ext2_inode_large *in, const uint8_t *buf,
                          size_t len, uint64_t off, struct wseg *defer, unsigned *ndefer)
{
    uint64_t bs = e->fs->blocksize;
    if (off % bs || len % bs || !len || len > E2_WRITE_PIECE) return 0;
    blk64_t lblk = off / bs, n = len / bs;
    /* fallocate updates *in (the extent root lives in it); written back below */
    errcode_t err = 0;
    if (!extend_last_extent(e, ino, in, lblk, n))
        err = ext2fs_fallocate(e->fs, EXT2_FALLOCATE_FORCE_INIT, ino, (struct ext2_inode *)in, ~0ULL, lblk, n);
    if (err) return 0;   /* e.g. nearly full: block by block, as far as it goes */
    struct run runs[E2_WRITE_PIECE / 4096];
    unsigned nruns = 0;
    if (bs != 4096 || !map_runs(e, ino, in, lblk, n, runs, &nruns)) return 0;
    for (unsigned i = 0; i < nruns; i++) {
        uint64_t at = runs[i].pblk * bs, n = runs[i].n * bs;
        if (defer && txb_claim_direct(e->txb, at, n)) {
            defer[(*ndefer)++] = (struct wseg){ at, buf, n };
        } else {
            int rc = txb_write_data(e->txb, at, buf, n);
            if (rc) return rc;
        }
        buf += n;
    }
    if (off + len > e2_size(in) && (err = ext2fs_inode_size_set(e->fs, (struct ext2_inode *)in, off + len)))
        return e2_errno(err);
    int rc = e2_iput(e, ino, in);
    return rc ? rc : 1;
}

static ssize_t pwrite_piece(struct e2 *e, int fd, const uint8_t *buf, size_t len, uint64_t off,
                            struct wseg *defer, unsigned *ndefer)
{
    struct ext2_inode_large in;
    int rc = e2_iget(e, fd, &in);
    if (rc) return rc;
    if (LINUX_S_ISDIR(in.i_mode)) return -EISDIR;
    if (!LINUX_S_ISREG(in.i_mode)) return -EINVAL;
    ext2_file_t file;
    unsigned wrote = 0;
    e->dirty = true;
    errcode_t err = 0;
    rc = pwrite_aligned(e, (ext2_ino_t)fd, &in, buf, len, off, defer, ndefer);
    if (rc < 0) return rc;
    if (rc == 1) {
        wrote = (unsigned)len;
    } else {
        err = ext2fs_file_open2(e->fs, (ext2_ino_t)fd, (struct ext2_inode *)&in, EXT2_FILE_WRITE, &file);
        if (err) return e2_errno(err);
        err = ext2fs_file_llseek(file, off, EXT2_SEEK_SET, NULL);
        if (!err) err = ext2fs_file_write(file, buf, (unsigned)len, &wrote);
        if (!err && wrote != len) err = EXT2_ET_SHORT_WRITE;
        errcode_t cerr = ext2fs_file_close(file);
        if (!err) err = cerr;
    }
    if (err) {
        rc = e2_errno(err);
        if (!wrote) return rc;
    }
    memset(&in, 0, sizeof in);
    err = ext2fs_read_inode_full(e->fs, (ext2_ino_t)fd, (struct ext2_inode *)&in, sizeof in);
    if (err) return e2_errno(err);
    /* like file_remove_privs: a write by someone else drops setuid/setgid */
    if (!e2_is_root() && ((in.i_mode & S_ISUID) || (in.i_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)))
        in.i_mode &= ~(S_ISUID | S_ISGID);
    e2_touch(&in, false, true, true);
    rc = e2_iput(e, (ext2_ino_t)fd, &in);
    return rc && !wrote ? rc : (ssize_t)wrote;
}

/* The filesystem spans a thin volume in a shared pool: ext2 may think it has free
 * blocks the pool can no longer give (other datasets, thick volumes' reservations).
 * Refuse up front, with room for what is buffered and the redo journal, instead of
 * failing a commit. Conservative: overwrites need no new space but are counted. */
static bool pool_has_room(struct e2 *e, size_t n)
{
    if (!e->bdev->ops->avail) return true;
    uint64_t need = (uint64_t)n + txb_dirty_bytes(e->txb) + TXB_JOURNAL_BYTES;
    return e->bdev->ops->avail(e->bdev) >= need;
}

/* Large writes go in pieces with a chance to commit between them: every commit must hold a
 * consistent filesystem, and a single op that overflowed a journal half would force the
 * txblock to commit early, in the middle of it (blocks mapped, bitmaps not yet written). */
ssize_t e2_pwrite(struct nasd_fsroot *f, int fd, const void *buf, size_t len, uint64_t off)
{
    if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off) return -EFBIG;
    struct e2 *e = E2(f);
    size_t done = 0;
    ssize_t rc = 0;
    e2_lock(e);
    do {
        size_t n = len - done > E2_WRITE_PIECE ? E2_WRITE_PIECE : len - done;
        if (done && e->dirty && txb_dirty_bytes(e->txb) >= E2_COMMIT_DIRTY_BYTES) e2_commit_locked(e);
        if (n && !pool_has_room(e, n)) { rc = -ENOSPC; break; }
        /* every commit waits for the deferred data (the txb commit hook) without dropping
         * the lock; the mark keeps early commits inside other ops unlikely */
        bool may_defer = txb_dirty_bytes(e->txb) < E2_COMMIT_DIRTY_BYTES;
        struct wseg segs[E2_WRITE_PIECE / 4096];
        unsigned nsegs = 0;
        rc = n ? pwrite_piece(e, fd, (const uint8_t *)buf + done, n, off + done, may_defer ? segs : NULL, &nsegs) : 0;
        if (nsegs) {   /* the data, without the lock: other ops of the dataset go on */
            pthread_mutex_lock(&e->data_mu);
            e->data_inflight++;
            pthread_mutex_unlock(&e->data_mu);
            pthread_mutex_unlock(&e->mu);
            if (e->io_hook) e->io_hook();
            int wrc = 0;
            for (unsigned i = 0; i < nsegs && !wrc; i++) wrc = txb_write_home(e->txb, segs[i].off, segs[i].src, segs[i].len);
            pthread_mutex_lock(&e->data_mu);
            if (--e->data_inflight == 0) pthread_cond_broadcast(&e->data_cv);
            pthread_mutex_unlock(&e->data_mu);
            e2_lock(e);
            if (wrc) { rc = wrc; break; }
        }
        if (rc > 0) done += (size_t)rc;
        if (rc < (ssize_t)n) break;
    } while (done < len);
    atomic_fetch_add(&e->data_unflushed, done);
    e2_unlock(e);
    return done ? (ssize_t)done : rc;
}

void nasd_ext2_set_io_hook(struct nasd_fsroot *f, void (*fn)(void)) { E2(f)->io_hook = fn; }

/* ---------- readdir ---------- */

struct dent {
    uint64_t ino, next_cookie;
    unsigned char type;
    uint16_t name_off;
};

static unsigned char dtype_of(int ft)
{
    switch (ft) {
    case EXT2_FT_REG_FILE: return DT_REG;
    case EXT2_FT_DIR: return DT_DIR;
    case EXT2_FT_CHRDEV: return DT_CHR;
    case EXT2_FT_BLKDEV: return DT_BLK;
    case EXT2_FT_FIFO: return DT_FIFO;
    case EXT2_FT_SOCK: return DT_SOCK;
    case EXT2_FT_SYMLINK: return DT_LNK;
    default: return DT_UNKNOWN;
    }
}

/* Copies the live entries of directory block lblk at positions >= from into ents/names.
 * Returns the number of entries, or -errno. *eof when lblk is past the end. */
static int read_dir_block(struct e2 *e, int dirfd, blk64_t lblk, uint64_t from, uint8_t *blockbuf,
                          struct dent *ents, char *names, bool *eof)
{
    struct ext2_inode_large d;
    int rc = e2_dir_get(e, dirfd, &d);
    if (rc) return rc;
    uint64_t bs = e->fs->blocksize;
    if (lblk * bs >= e2_size(&d)) { *eof = true; return 0; }
    blk64_t pblk;
    if ((rc = map_block(e, (ext2_ino_t)dirfd, &d, lblk, &pblk))) return rc;
    if (!pblk) return 0;
    errcode_t err = ext2fs_read_dir_block4(e->fs, pblk, blockbuf, 0, (ext2_ino_t)dirfd);
    if (err) return e2_errno(err);
    int n = 0;
    size_t name_used = 0;
    for (uint64_t off = 0; off + 8 <= bs;) {
        struct ext2_dir_entry *de = (struct ext2_dir_entry *)(blockbuf + off);
        unsigned rec_len;
        if (ext2fs_get_rec_len(e->fs, de, &rec_len) || rec_len < 8 || rec_len % 4 || off + rec_len > bs)
            return -EIO;   /* corrupt block */
        unsigned nlen = (unsigned)ext2fs_dirent_name_len(de);
        uint64_t pos = lblk * bs + off;
        if (de->inode && nlen && nlen + 8 <= rec_len && pos >= from) {
            ents[n].ino = de->inode;
            ents[n].next_cookie = pos + 1;
            ents[n].type = dtype_of(ext2fs_dirent_file_type(de));
            ents[n].name_off = (uint16_t)name_used;
            memcpy(names + name_used, de->name, nlen);
            names[name_used + nlen] = 0;
            name_used += nlen + 1;
            n++;
        }
        off += rec_len;
    }
    return n;
}

/* Cookies: an entry's byte position in the directory + 1. Entries never move (no htree,
 * deletes merge into the previous entry), so resuming from any cookie returned is exact. */
int e2_readdir(struct nasd_fsroot *f, int dirfd, uint64_t cookie, nasd_vfs_dirent_fn fn, void *arg)
{
    struct e2 *e = E2(f);
    uint64_t bs = e->fs->blocksize;
    size_t max_ents = bs / 12 + 1;
    uint8_t *blockbuf = malloc(bs);
    struct dent *ents = malloc(max_ents * sizeof *ents);
    char *names = malloc(bs + max_ents);
    int rc = 0;
    if (!blockbuf || !ents || !names) { rc = -ENOMEM; goto done; }
    e2_lock(e);
    struct ext2_inode_large d;
    rc = e2_dir_get(e, dirfd, &d);
    if (!rc && cookie > e2_size(&d)) rc = -EINVAL;
    e2_unlock(e);
    if (rc) goto done;
    for (blk64_t lblk = cookie / bs;; lblk++) {
        bool eof = false;
        e2_lock(e);
        int n = read_dir_block(e, dirfd, lblk, cookie, blockbuf, ents, names, &eof);
        e2_unlock(e);
        if (n < 0) { rc = n; break; }
        if (eof) break;
        for (int i = 0; i < n; i++)
            if (fn(arg, names + ents[i].name_off, ents[i].ino, ents[i].type, ents[i].next_cookie))
                goto done;
    }
done:
    free(blockbuf);
    free(ents);
    free(names);
    return rc;
}
