/* txblock: buffered overlay reads/writes, atomic commits, crash recovery (including
 * crashes in the middle of a commit, with a write-back cache that loses a random subset
 * of unflushed writes), discards, and an ext2 filesystem through the io_manager. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "util/log.h"
#include "storage/fs/txblock.h"
#include "storage/pool/vpool.h"
#include "tests/unit/test_vpool_util.h"

#define DEV_SIZE (64ull << 20)
#define BS TXB_BLOCK

static char tmpdir[256], devpath[300];

static void tmp_setup(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/txb-test-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(devpath, sizeof devpath, "%s/dev", tmpdir);
}

static void tmp_teardown(void)
{
    unlink(devpath);
    rmdir(tmpdir);
}

/* A fresh sparse file bdev (the old file, if any, is replaced). */
static nasd_bdev *fresh_dev(void)
{
    unlink(devpath);
    FILE *f = fopen(devpath, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    int err = 0;
    nasd_bdev *b = nasd_file_bdev_open(devpath, DEV_SIZE, 4096, "txbtest", &err);
    ck_assert_msg(b != NULL, "file bdev: %d", err);
    return b;
}

static struct txb *open_txb(nasd_bdev *b)
{
    struct txb *t = NULL;
    int rc = txb_open(b, &t);
    ck_assert_msg(rc == 0, "txb_open: %d", rc);
    return t;
}

static void txb_put_pattern(struct txb *t, uint64_t blk, uint64_t seed)
{
    uint8_t buf[BS];
    fill_block(buf, blk * BS, seed);
    ck_assert_int_eq(txb_write(t, blk * BS, buf, BS), 0);
}

/* 1 if block blk reads as pattern seed (seed 0 = zeros), else 0 */
static int txb_has(struct txb *t, uint64_t blk, uint64_t seed)
{
    uint8_t buf[BS], want[BS];
    ck_assert_int_eq(txb_read(t, blk * BS, buf, BS), 0);
    if (!seed) return is_zero(buf, BS);
    fill_block(want, blk * BS, seed);
    return memcmp(buf, want, BS) == 0;
}

START_TEST(overlay_unaligned)
{
    nasd_bdev *b = fresh_dev();
    struct txb *t = open_txb(b);
    uint64_t ds = txb_data_size(t);
    ck_assert_uint_eq(ds % BS, 0);
    ck_assert(ds >= DEV_SIZE - TXB_JOURNAL_BYTES - BS && ds <= DEV_SIZE - TXB_JOURNAL_BYTES);

    /* a reference image of the first 64 KiB kept alongside */
    static uint8_t ref[16 * BS], got[16 * BS], pat[3 * BS];
    memset(ref, 0, sizeof ref);
    for (size_t i = 0; i < sizeof pat; i++) pat[i] = (uint8_t)(i * 7 + 3);
    struct { uint64_t off; size_t len; } w[] = {
        { 1024, 1024 }, { 4000, 200 }, { 3 * BS, BS }, { 5 * BS + 17, 2 * BS + 100 }, { 12 * BS - 1, 2 },
        { 0, 1 }, { 9 * BS, 3 * BS },
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        ck_assert_int_eq(txb_write(t, w[i].off, pat, w[i].len), 0);
        memcpy(ref + w[i].off, pat, w[i].len);
    }
    ck_assert_uint_eq(txb_dirty_bytes(t), 10 * BS);   /* blocks 0,1,3,5,6,7,9,10,11,12 */
    ck_assert_int_eq(txb_read(t, 0, got, sizeof got), 0);
    ck_assert(memcmp(got, ref, sizeof ref) == 0);
    for (uint64_t o = 0; o < sizeof ref; o += 777) {   /* unaligned reads at every phase */
        size_t n = sizeof ref - o < 5000 ? sizeof ref - o : 5000;
        ck_assert_int_eq(txb_read(t, o, got, n), 0);
        ck_assert_msg(memcmp(got, ref + o, n) == 0, "read at %llu", (unsigned long long)o);
    }
    /* the bdev itself still holds nothing before the commit */
    ck_assert_int_eq(nasd_bdev_read(b, got, 0, sizeof got), 0);
    ck_assert(is_zero(got, sizeof got));
    ck_assert_int_eq(txb_commit(t), 0);
    ck_assert_uint_eq(txb_dirty_bytes(t), 0);
    ck_assert_int_eq(nasd_bdev_read(b, got, 0, sizeof got), 0);
    ck_assert(memcmp(got, ref, sizeof ref) == 0);
    /* out of range */
    ck_assert_int_eq(txb_write(t, ds - 10, pat, 11), -EINVAL);
    ck_assert_int_eq(txb_read(t, ds, got, 1), -EINVAL);
    ck_assert_int_eq(txb_read(t, ds - 1, got, 1), 0);
    txb_close(t);
    t = open_txb(b);
    ck_assert_int_eq(txb_read(t, 0, got, sizeof got), 0);
    ck_assert(memcmp(got, ref, sizeof ref) == 0);
    txb_close(t);
    nasd_bdev_put(b);
}
END_TEST

/* Uncommitted writes vanish in a crash; committed ones survive. */
START_TEST(abandon_is_atomic)
{
    nasd_bdev *b = fresh_dev();
    struct txb *t = open_txb(b);
    for (uint64_t i = 0; i < 300; i++) txb_put_pattern(t, i * 37 % 5000, 1);
    ck_assert_int_eq(txb_commit(t), 0);
    for (uint64_t i = 0; i < 300; i++) txb_put_pattern(t, i * 53 % 5000, 2);
    txb_abandon(t);
    t = open_txb(b);
    for (uint64_t blk = 0; blk < 5000; blk++) {
        bool in1 = false;
        for (uint64_t i = 0; i < 300 && !in1; i++) in1 = i * 37 % 5000 == blk;
        ck_assert_msg(txb_has(t, blk, in1 ? 1 : 0), "block %llu", (unsigned long long)blk);
    }
    txb_close(t);
    nasd_bdev_put(b);
}
END_TEST


/* Ordered-mode data writes: straight to the device (not journaled) when safe; a commit
 * after them is written even with nothing buffered, so the previous transaction (which
 * holds older copies of those blocks) is never replayed over them; blocks buffered or
 * freed in the open transaction are journaled instead, so a crash keeps their old,
 * still committed content. */
START_TEST(ordered_data_writes)
{
    nasd_bdev *b = fresh_dev();
    struct txb *t = open_txb(b);
    uint8_t buf[4 * BS];
    for (uint64_t i = 0; i < 8; i++) txb_put_pattern(t, 100 + i, 1);   /* blocks 100..107 */
    ck_assert_int_eq(txb_commit(t), 0);
    /* 1. overwrite 100..103 directly; the commit with nothing buffered still counts */
    for (int i = 0; i < 4; i++) fill_block(buf + i * BS, (100 + i) * BS, 2);
    ck_assert_int_eq(txb_write_data(t, 100 * BS, buf, 4 * BS), 0);
    ck_assert_uint_eq(txb_dirty_bytes(t), 0);                    /* not buffered */
    ck_assert_int_eq(txb_commit(t), 0);
    txb_abandon(t);
    t = open_txb(b);                                             /* replays the empty one */
    for (uint64_t i = 0; i < 4; i++) ck_assert(txb_has(t, 100 + i, 2));
    /* 2. a block buffered in this transaction takes the journal */
    txb_put_pattern(t, 104, 3);
    fill_block(buf, 104 * BS, 4);
    ck_assert_int_eq(txb_write_data(t, 104 * BS, buf, BS), 0);
    ck_assert_uint_eq(txb_dirty_bytes(t), BS);
    /* 3. freed in this transaction, then reused: journaled, so the crash below keeps
     *    the committed content */
    ck_assert_int_eq(txb_discard(t, 105 * BS, 2 * BS), 0);
    for (int i = 0; i < 2; i++) fill_block(buf + i * BS, (105 + i) * BS, 5);
    ck_assert_int_eq(txb_write_data(t, 105 * BS, buf, 2 * BS), 0);
    ck_assert_uint_eq(txb_dirty_bytes(t), 3 * BS);
    txb_abandon(t);
    t = open_txb(b);
    for (uint64_t i = 104; i < 108; i++) ck_assert_msg(txb_has(t, i, 1), "block %llu", (unsigned long long)i);
    txb_close(t);
    nasd_bdev_put(b);
}
END_TEST

/* mke2fs-style: tables, zeroed inode tables, root, lost+found, reserved inodes, one file. */
static void make_fs(struct txb *t, const uint8_t *content, size_t clen)
{
    char name[64];
    txb_io_name(t, name, sizeof name);
    struct ext2_super_block param;
    memset(&param, 0, sizeof param);
    ext2fs_blocks_count_set(&param, txb_data_size(t) / BS);
    param.s_log_block_size = 2;   /* 4096 */
    param.s_rev_level = EXT2_DYNAMIC_REV;
    param.s_inode_size = 256;
    ext2_filsys fs = NULL;
    errcode_t e = ext2fs_initialize(name, EXT2_FLAG_64BITS, &param, nasd_txb_io_manager, &fs);
    ck_assert_msg(e == 0, "ext2fs_initialize: %ld", (long)e);
    ck_assert_int_eq(fs->blocksize, 4096);
    ck_assert_int_eq(ext2fs_allocate_tables(fs), 0);
    for (dgrp_t g = 0; g < fs->group_desc_count; g++)
        ck_assert_int_eq(ext2fs_zero_blocks2(fs, ext2fs_inode_table_loc(fs, g), fs->inode_blocks_per_group,
                                             NULL, NULL), 0);
    ck_assert_int_eq(ext2fs_mkdir(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, 0), 0);
    ck_assert_int_eq(ext2fs_mkdir(fs, EXT2_ROOT_INO, 0, "lost+found"), 0);
    for (ext2_ino_t i = EXT2_ROOT_INO + 1; i < EXT2_FIRST_INODE(fs->super); i++)
        ext2fs_inode_alloc_stats2(fs, i, +1, 0);
    ext2fs_inode_alloc_stats2(fs, EXT2_BAD_INO, +1, 0);
    ck_assert_int_eq(ext2fs_update_bb_inode(fs, NULL), 0);
    ck_assert_int_eq(ext2fs_mkdir(fs, EXT2_ROOT_INO, 0, "d1"), 0);

    ext2_ino_t ino;
    ck_assert_int_eq(ext2fs_new_inode(fs, EXT2_ROOT_INO, LINUX_S_IFREG | 0644, NULL, &ino), 0);
    ck_assert_int_eq(ext2fs_link(fs, EXT2_ROOT_INO, "f", ino, EXT2_FT_REG_FILE), 0);
    ext2fs_inode_alloc_stats2(fs, ino, +1, 0);
    struct ext2_inode inode;
    memset(&inode, 0, sizeof inode);
    inode.i_mode = LINUX_S_IFREG | 0644;
    inode.i_links_count = 1;
    ck_assert_int_eq(ext2fs_write_new_inode(fs, ino, &inode), 0);
    ext2_file_t f;
    ck_assert_int_eq(ext2fs_file_open(fs, ino, EXT2_FILE_WRITE, &f), 0);
    unsigned int got = 0;
    ck_assert_int_eq(ext2fs_file_write(f, content, (unsigned)clen, &got), 0);
    ck_assert_uint_eq(got, clen);
    ck_assert_int_eq(ext2fs_file_close(f), 0);
    ck_assert_int_eq(ext2fs_close_free(&fs), 0);
}

static void check_fs(struct txb *t, const uint8_t *content, size_t clen)
{
    char name[64];
    txb_io_name(t, name, sizeof name);
    ext2_filsys fs = NULL;
    errcode_t e = ext2fs_open2(name, NULL, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0, nasd_txb_io_manager, &fs);
    ck_assert_msg(e == 0, "ext2fs_open2: %ld", (long)e);
    ck_assert_int_eq(ext2fs_read_bitmaps(fs), 0);
    ext2_ino_t d1 = 0, fino = 0;
    ck_assert_int_eq(ext2fs_lookup(fs, EXT2_ROOT_INO, "d1", 2, NULL, &d1), 0);
    ck_assert_int_eq(ext2fs_check_directory(fs, d1), 0);
    ck_assert_int_eq(ext2fs_lookup(fs, EXT2_ROOT_INO, "f", 1, NULL, &fino), 0);
    ck_assert_int_eq(ext2fs_check_directory(fs, fino), EXT2_ET_NO_DIRECTORY);
    ext2_file_t f;
    ck_assert_int_eq(ext2fs_file_open(fs, fino, 0, &f), 0);
    ck_assert_uint_eq(ext2fs_file_get_size(f), clen);
    uint8_t *back = malloc(clen);
    unsigned int got = 0;
    ck_assert_int_eq(ext2fs_file_read(f, back, (unsigned)clen, &got), 0);
    ck_assert_uint_eq(got, clen);
    ck_assert(memcmp(back, content, clen) == 0);
    free(back);
    ck_assert_int_eq(ext2fs_file_close(f), 0);
    ck_assert_int_eq(ext2fs_close_free(&fs), 0);
}

START_TEST(ext2_round_trip)
{
    nasd_bdev *b = fresh_dev();
    struct txb *t = open_txb(b);
    size_t clen = 300000;
    uint8_t *content = malloc(clen);
    for (size_t i = 0; i < clen; i++) content[i] = (uint8_t)(i * 131 + (i >> 9));
    make_fs(t, content, clen);
    ck_assert_uint_eq(txb_dirty_bytes(t), 0);   /* ext2fs_close flushed = committed */
    check_fs(t, content, clen);
    txb_abandon(t);   /* a crash right after: everything was committed */
    t = open_txb(b);
    check_fs(t, content, clen);
    char name[64];
    txb_io_name(t, name, sizeof name);
    txb_close(t);
    /* the name no longer resolves; forged names never do */
    ext2_filsys fs = NULL;
    ck_assert_int_ne(ext2fs_open2(name, NULL, 0, 0, 0, nasd_txb_io_manager, &fs), 0);
    ck_assert_int_ne(ext2fs_open2("txb:99999", NULL, 0, 0, 0, nasd_txb_io_manager, &fs), 0);
    ck_assert_int_ne(ext2fs_open2("txb:0x1234", NULL, 0, 0, 0, nasd_txb_io_manager, &fs), 0);
    nasd_bdev_put(b);
    /* the data area is a plain ext2 image at offset 0: e2fsck must find it clean */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "e2fsck -fn %s >%s.log 2>&1", devpath, devpath);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat %s.log >&2", devpath);
        (void)!system(cmd);
    }
    snprintf(cmd, sizeof cmd, "%s.log", devpath);
    unlink(cmd);
    ck_assert_msg(rc == 0, "e2fsck -fn: %d", rc);
    free(content);
}
END_TEST


/* ---- A bdev that dies after its K-th 4 KiB write chunk and models a volatile
 * write-back cache: on crash(), every chunk written or unmapped since the last flush
 * independently keeps its new content or gets its old one back. ---- */
struct undo { uint64_t off; uint8_t old[BS]; };
struct crashdev {
    nasd_bdev b;
    nasd_bdev *under;
    long limit, count;     /* limit < 0: unlimited */
    bool dead;
    uint64_t bad_read;     /* nonzero: reads covering this offset fail */
    int flushes;
    struct undo *undo;
    size_t nundo, capundo;
};

static int cd_save(struct crashdev *c, uint64_t off)
{
    if (c->nundo == c->capundo) {
        c->capundo = c->capundo ? 2 * c->capundo : 256;
        c->undo = realloc(c->undo, c->capundo * sizeof *c->undo);
        ck_assert_ptr_nonnull(c->undo);
    }
    c->undo[c->nundo].off = off;
    return nasd_bdev_read(c->under, c->undo[c->nundo++].old, off, BS);
}

static int cd_read(nasd_bdev *b, void *buf, uint64_t off, size_t len)
{
    struct crashdev *c = (struct crashdev *)b;
    if (c->bad_read && c->bad_read >= off && c->bad_read < off + len) return -EIO;
    return nasd_bdev_read(c->under, buf, off, len);
}

static int cd_write(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags)
{
    struct crashdev *c = (struct crashdev *)b;
    ck_assert(off % BS == 0 && len % BS == 0);
    for (size_t i = 0; i < len; i += BS) {
        if (c->dead || (c->limit >= 0 && c->count >= c->limit)) { c->dead = true; return -EIO; }
        int rc = cd_save(c, off + i);
        if (!rc) rc = nasd_bdev_write(c->under, (const uint8_t *)buf + i, off + i, BS, 0);
        if (rc) return rc;
        c->count++;
    }
    return 0;
}

static int cd_flush(nasd_bdev *b)
{
    struct crashdev *c = (struct crashdev *)b;
    if (c->dead) return -EIO;
    c->nundo = 0;
    c->flushes++;
    return 0;
}

static int cd_unmap(nasd_bdev *b, uint64_t off, uint64_t len)
{
    struct crashdev *c = (struct crashdev *)b;
    if (c->dead) return -EIO;
    for (uint64_t o = off; o < off + len; o += BS) ck_assert_int_eq(cd_save(c, o), 0);
    return nasd_bdev_unmap(c->under, off, len);
}

static void cd_destroy(nasd_bdev *b)
{
    struct crashdev *c = (struct crashdev *)b;
    nasd_bdev_put(c->under);
    free(c->undo);
    free(c);
}

static const struct nasd_bdev_ops cd_ops = {
    .read = cd_read, .write = cd_write, .flush = cd_flush, .unmap = cd_unmap, .destroy = cd_destroy,
};

static struct crashdev *crashdev_new(nasd_bdev *under)
{
    struct crashdev *c = calloc(1, sizeof *c);
    ck_assert_ptr_nonnull(c);
    c->b.ops = &cd_ops;
    c->b.size = under->size;
    c->b.block_size = under->block_size;
    snprintf(c->b.name, sizeof c->b.name, "crash(%s)", under->name);
    atomic_init(&c->b.refs, 1);
    c->under = nasd_bdev_get(under);
    c->limit = -1;
    return c;
}

/* Power loss: the unflushed chunks keep new or old content at random (newest undone first). */
static void crashdev_crash(struct crashdev *c, uint64_t *rng)
{
    for (size_t i = c->nundo; i-- > 0;) {
        *rng ^= *rng << 13; *rng ^= *rng >> 7; *rng ^= *rng << 17;
        if (*rng & 1) ck_assert_int_eq(nasd_bdev_write(c->under, c->undo[i].old, c->undo[i].off, BS, 0), 0);
    }
    c->nundo = 0;
    c->dead = true;
}

/* Old state: set A (seed 1) over zeros. New state: set B (seed 2) written over it
 * (overlapping part of A) plus a discard of some A-only blocks. */
#define NA 60
#define NB 50
static uint64_t set_a[NA], set_b[NB], disc_blk[4];

static void make_sets(void)
{
    for (int i = 0; i < NA; i++) set_a[i] = i < 16 ? 100 + (uint64_t)i : 1000 + (uint64_t)i * 97 % 3000;
    for (int i = 0; i < NB; i++)
        set_b[i] = i < 20 ? 108 + (uint64_t)i : i < 30 ? 1000 + (uint64_t)i * 97 % 3000 : 5000 + (uint64_t)i * 13;
    /* A-only blocks to discard in the new state */
    disc_blk[0] = 100; disc_blk[1] = 101; disc_blk[2] = set_a[50]; disc_blk[3] = set_a[55];
}

static bool in_list(const uint64_t *l, int n, uint64_t v)
{
    for (int i = 0; i < n; i++) if (l[i] == v) return true;
    return false;
}

/* expected seed of blk in the old (new=false) or new state; 0 = zeros */
static uint64_t expect(uint64_t blk, bool new_state)
{
    if (new_state && in_list(set_b, NB, blk)) return 2;
    if (new_state && in_list(disc_blk, 4, blk)) return 0;
    return in_list(set_a, NA, blk) ? 1 : 0;
}

/* 1 = every block in the old state, 2 = every block in the new state, 0 = a mix */
static int which_state(struct txb *t)
{
    bool old_ok = true, new_ok = true;
    for (uint64_t blk = 0; blk < 6000; blk++) {
        uint8_t buf[BS], w1[BS], w2[BS];
        ck_assert_int_eq(txb_read(t, blk * BS, buf, BS), 0);
        uint64_t eo = expect(blk, false), en = expect(blk, true);
        if (eo) fill_block(w1, blk * BS, (uint64_t)eo); else memset(w1, 0, BS);
        if (en) fill_block(w2, blk * BS, (uint64_t)en); else memset(w2, 0, BS);
        if (memcmp(buf, w1, BS)) old_ok = false;
        if (memcmp(buf, w2, BS)) new_ok = false;   /* discards are replayed too: zeros */
    }
    return old_ok ? 1 : new_ok ? 2 : 0;
}

/* Crashes after k write chunks of the second commit, for every k that lands in its
 * journal write or its in-place writes. A is committed through the same cache, so its
 * in-place writes are still unflushed when B's commit starts and may be lost too. */
static int crash_run(long k, uint64_t seed, int *commit_rc)
{
    nasd_bdev *raw = fresh_dev();
    struct crashdev *c = crashdev_new(raw);
    struct txb *t = open_txb(&c->b);
    for (int i = 0; i < NA; i++) txb_put_pattern(t, set_a[i], 1);
    ck_assert_int_eq(txb_commit(t), 0);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(txb_discard(t, disc_blk[i] * BS, BS), 0);
    for (int i = 0; i < NB; i++) txb_put_pattern(t, set_b[i], 2);
    c->limit = c->count + k;
    *commit_rc = txb_commit(t);
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + (uint64_t)k + 1;
    crashdev_crash(c, &rng);
    txb_abandon(t);
    nasd_bdev_put(&c->b);
    t = open_txb(raw);
    int st = which_state(t);
    txb_close(t);
    nasd_bdev_put(raw);
    return st;
}

START_TEST(crash_during_commit)
{
    make_sets();
    nasd_log_level = -1;   /* every run logs the injected I/O errors */
    int nold = 0, nnew = 0;
    /* B's transaction: 1 descriptor + NB data chunks, then NB in-place chunks */
    for (long k = 0; k <= 2 * NB + 3; k++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            int crc;
            int st = crash_run(k, seed, &crc);
            ck_assert_msg(st != 0, "k=%ld seed=%llu: mixed old/new state after recovery", k, (unsigned long long)seed);
            if (crc == 0) ck_assert_msg(st == 2, "k=%ld: commit returned 0 but the old state came back", k);
            if (k <= NB) ck_assert_msg(st == 1, "k=%ld: journal incomplete but new state", k);
            if (k > NB) ck_assert_msg(st == 2, "k=%ld: journal flushed but old state", k);
            st == 1 ? nold++ : nnew++;
        }
    }
    ck_assert(nold > 0 && nnew > 0);
}
END_TEST

/* The journal is durable, the in-place writes all fail: the txb refuses further
 * writes, and a reopen replays the transaction. */
START_TEST(replay_after_journal_only)
{
    make_sets();
    nasd_log_level = -1;
    nasd_bdev *raw = fresh_dev();
    struct crashdev *c = crashdev_new(raw);
    struct txb *t = open_txb(&c->b);
    for (int i = 0; i < NA; i++) txb_put_pattern(t, set_a[i], 1);
    ck_assert_int_eq(txb_commit(t), 0);
    ck_assert_int_eq(nasd_bdev_flush(&c->b), 0);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(txb_discard(t, disc_blk[i] * BS, BS), 0);
    for (int i = 0; i < NB; i++) txb_put_pattern(t, set_b[i], 2);
    int flushes = c->flushes;
    c->limit = c->count + 1 + NB;   /* exactly the journal write */
    ck_assert_int_eq(txb_commit(t), -EIO);
    ck_assert_int_eq(c->flushes, flushes + 1);   /* one flush per commit */
    ck_assert_int_eq(txb_write(t, 0, "x", 1), -EIO);
    txb_abandon(t);
    /* home locations still hold the old state; the discard was applied (ahead of the home writes) */
    uint8_t buf[BS], want[BS];
    ck_assert_int_eq(nasd_bdev_read(raw, buf, set_b[0] * BS, BS), 0);
    fill_block(want, set_b[0] * BS, 1);
    ck_assert(memcmp(buf, want, BS) == 0);
    nasd_bdev_put(&c->b);
    t = open_txb(raw);
    ck_assert_int_eq(which_state(t), 2);
    txb_close(t);
    nasd_bdev_put(raw);
}
END_TEST


static int raw_mapped(nasd_bdev *b, uint64_t blk)
{
    int m = 1;
    uint64_t run;
    ck_assert_int_eq(b->ops->mapped(b, blk * BS, BS, &m, &run), 0);
    return m;
}

/* Committed discards read as zeros (holes in the file) and no later replay brings the
 * old data back; a block rewritten after its discard keeps the new data. */
START_TEST(discard_never_resurrects)
{
    nasd_bdev *b = fresh_dev();
    struct txb *t = open_txb(b);
    for (uint64_t blk = 200; blk < 264; blk++) txb_put_pattern(t, blk, 1);
    ck_assert_int_eq(txb_commit(t), 0);
    ck_assert(raw_mapped(b, 205));
    ck_assert_int_eq(txb_discard(t, 200 * BS, 32 * BS), 0);
    ck_assert_int_eq(txb_discard(t, 240 * BS + 100, 2 * BS), 0);   /* only block 241 is whole */
    txb_put_pattern(t, 210, 3);                                     /* rewritten after its discard */
    txb_put_pattern(t, 300, 1);
    ck_assert_int_eq(txb_discard(t, 300 * BS, BS), 0);              /* dirty, then dropped */
    ck_assert_uint_eq(txb_dirty_bytes(t), BS);
    ck_assert_int_eq(txb_discard(t, 5 * BS + 1, BS - 2), 0);        /* no whole block: nothing */
    ck_assert_int_eq(txb_discard(t, txb_data_size(t), 1), -EINVAL);
    ck_assert_int_eq(txb_commit(t), 0);
    for (int round = 0; round < 3; round++) {
        for (uint64_t blk = 200; blk < 264; blk++) {
            uint64_t want = blk == 210 ? 3 : (blk < 232 || blk == 241) ? 0 : 1;
            ck_assert_msg(txb_has(t, blk, want), "round %d block %llu", round, (unsigned long long)blk);
        }
        ck_assert(txb_has(t, 300, 0));
        ck_assert(!raw_mapped(b, 205) && !raw_mapped(b, 241) && !raw_mapped(b, 300));
        ck_assert(raw_mapped(b, 210) && raw_mapped(b, 240));
        if (round == 1) {   /* a later transaction elsewhere, then a crash */
            txb_put_pattern(t, 4000, 1);
            ck_assert_int_eq(txb_commit(t), 0);
        }
        txb_abandon(t);     /* crash: reopen replays the newest transaction */
        t = open_txb(b);
    }
    txb_close(t);
    nasd_bdev_put(b);
}
END_TEST

/* More dirty data than one journal half: committed early, nothing lost. */
START_TEST(early_commit_when_half_is_full)
{
    nasd_bdev *b = fresh_dev();
    struct txb *t = open_txb(b);
    nasd_log_level = LOG_ERR;   /* the early commit warns by design */
    size_t len = TXB_JOURNAL_HALF + (1u << 20) + 123;
    uint8_t *big = malloc(len), *back = malloc(len);
    for (size_t i = 0; i < len; i++) big[i] = (uint8_t)(i % 251);
    ck_assert_int_eq(txb_write(t, 77, big, len), 0);
    ck_assert(txb_dirty_bytes(t) > 0 && txb_dirty_bytes(t) < len);
    ck_assert_int_eq(txb_read(t, 77, back, len), 0);
    ck_assert(memcmp(big, back, len) == 0);
    ck_assert_int_eq(txb_commit(t), 0);
    txb_abandon(t);
    t = open_txb(b);
    memset(back, 0, len);
    ck_assert_int_eq(txb_read(t, 77, back, len), 0);
    ck_assert(memcmp(big, back, len) == 0);
    txb_close(t);
    nasd_bdev_put(b);
    free(big);
    free(back);
}
END_TEST

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* On a raidz1 pool volume: ext2 round trip across a pool export/import, and the
 * commit latency of small random transactions. */
START_TEST(vpool_raidz1_volume)
{
    struct tdir td;
    tdir_make(&td, 3);
    struct vpool_member_spec ms[3];
    for (int i = 0; i < 3; i++) ms[i] = (struct vpool_member_spec){ td.member[i], MEMBER_SIZE };
    char err[256] = "";
    struct vpool *p = NULL;
    ck_assert_msg(vpool_create("tank", VPOOL_RAIDZ1, ms, 3, NULL, &p, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(vpool_vol_create(p, "fs", 64ull << 20, 0), 0);
    nasd_bdev *v = open_vol(p, "fs", 4096);
    struct txb *t = open_txb(v);
    size_t clen = 1 << 20;
    uint8_t *content = malloc(clen);
    for (size_t i = 0; i < clen; i++) content[i] = (uint8_t)(i * 31 + (i >> 12));
    make_fs(t, content, clen);
    check_fs(t, content, clen);

    /* 100 commits of 16 random 4 KiB blocks each (beyond the ext2 metadata area) */
    enum { NCOMMIT = 100, PER = 16 };
    double total = 0, worst = 0;
    uint64_t x = 88172645463325252ull, base = 40ull << 20, span = txb_data_size(t) - base;
    static uint64_t last_seed[1 << 14];
    ck_assert(span / BS <= (1 << 14));
    memset(last_seed, 0, sizeof last_seed);
    for (int c = 0; c < NCOMMIT; c++) {
        for (int i = 0; i < PER; i++) {
            uint64_t off = rnd_off(&x, base, span);
            txb_put_pattern(t, off / BS, 10 + (uint64_t)c);
            last_seed[(off - base) / BS] = 10 + (uint64_t)c;
        }
        double t0 = now_ms();
        ck_assert_int_eq(txb_commit(t), 0);
        double dt = now_ms() - t0;
        total += dt;
        if (dt > worst) worst = dt;
    }
    printf("txb on vpool raidz1: %d commits of %d x 4 KiB: mean %.2f ms, max %.2f ms\n",
           NCOMMIT, PER, total / NCOMMIT, worst);
    txb_close(t);
    nasd_bdev_put(v);
    vpool_close(p);

    const char *paths[3] = { td.member[0], td.member[1], td.member[2] };
    ck_assert_msg(vpool_import(paths, 3, NULL, &p, err, sizeof err) == 0, "%s", err);
    v = open_vol(p, "fs", 4096);
    t = open_txb(v);
    check_fs(t, content, clen);
    for (uint64_t i = 0; i < span / BS; i++)
        if (last_seed[i]) ck_assert(txb_has(t, (base / BS) + i, last_seed[i]));
    txb_close(t);
    nasd_bdev_put(v);
    vpool_close(p);
    tdir_remove(&td);
    free(content);
}
END_TEST


/* A journal left by an earlier format (other nonce) is never replayed; an unreadable
 * journal half fails the open instead of replaying an older transaction. */
START_TEST(stale_and_unreadable_journal)
{
    nasd_bdev *b = fresh_dev();
    struct txb *t = open_txb(b);
    uint64_t jhdr = txb_data_size(t);
    txb_put_pattern(t, 5, 1);
    ck_assert_int_eq(txb_commit(t), 0);
    txb_close(t);
    uint8_t zero[BS] = { 0 }, buf[BS];
    ck_assert_int_eq(nasd_bdev_write(b, zero, jhdr, BS, 0), 0);     /* header gone: a new journal */
    fill_block(buf, 5 * BS, 9);
    ck_assert_int_eq(nasd_bdev_write(b, buf, 5 * BS, BS, 0), 0);
    t = open_txb(b);
    ck_assert(txb_has(t, 5, 9));
    txb_put_pattern(t, 6, 1);
    ck_assert_int_eq(txb_commit(t), 0);
    txb_abandon(t);
    t = open_txb(b);
    ck_assert(txb_has(t, 5, 9) && txb_has(t, 6, 1));
    txb_close(t);

    nasd_log_level = -1;
    for (int half = 0; half < 2; half++) {
        struct crashdev *c = crashdev_new(b);
        c->bad_read = jhdr + BS + (uint64_t)half * TXB_JOURNAL_HALF;
        struct txb *t2 = NULL;
        ck_assert_int_eq(txb_open(&c->b, &t2), -EIO);
        ck_assert_ptr_null(t2);
        nasd_bdev_put(&c->b);
    }
    nasd_bdev_put(b);
}
END_TEST

static Suite *txb_suite(void)
{
    Suite *s = suite_create("txblock");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, overlay_unaligned);
    tcase_add_test(tc, abandon_is_atomic);
    tcase_add_test(tc, ordered_data_writes);
    tcase_add_test(tc, ext2_round_trip);
    tcase_add_test(tc, crash_during_commit);
    tcase_add_test(tc, replay_after_journal_only);
    tcase_add_test(tc, discard_never_resurrects);
    tcase_add_test(tc, early_commit_when_half_is_full);
    tcase_add_test(tc, stale_and_unreadable_journal);
    tcase_add_test(tc, vpool_raidz1_volume);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    nasd_log_level = LOG_WARN;
    return run_suite(txb_suite());
}
