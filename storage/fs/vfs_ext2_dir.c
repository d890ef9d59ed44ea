/* Directory entries of engine datasets without linear scans.
 *
 * ext2 directories (no dir_index here, so readdir cookies stay stable) are lists:
 * libext2fs's lookup and link read every block, so a create in a directory of 20k
 * names cost ~0.3 ms of string compares. Two fixes, both under the fs mutex:
 *  - a name index per large directory (hash of name -> inode and the directory block
 *    holding the entry, when known), built by one scan on first lookup and kept up to
 *    date by e2_dir_add / e2_dir_remove; a remove edits that one block; any other change
 *    to a directory's blocks must call e2_dir_forget;
 *  - adding a name tries the last block first, then the block of the latest indexed
 *    remove, then the full-scan link (which reuses any hole), and grows the directory
 *    only when all fail. */
#include "storage/fs/vfs_ext2_int.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define DIX_MIN_BYTES (2u * 4096)      /* smaller directories are scanned */
#define DIX_MAX_NAMES (1u << 20)       /* all indexes together; LRU directories go */
#define LBLK_UNKNOWN UINT32_MAX        /* placed by ext2fs_link: somewhere in the directory */

struct dix_name {
    struct dix_name *next;
    uint64_t hash;
    ext2_ino_t ino;
    uint32_t lblk;                     /* directory block of the entry, or LBLK_UNKNOWN */
    uint8_t len;
    char name[];
};

struct e2_dix {
    ext2_ino_t dir;
    uint32_t n, nbuckets;
    uint32_t hole;                     /* a block a remove made room in, or LBLK_UNKNOWN */
    struct dix_name **b;
    struct e2_dix *hnext, *prev, *next;   /* by dir; LRU (head = most recent) */
};

static uint64_t name_hash(const char *name, size_t len) { return XXH3_64bits(name, len); }

static void dix_free(struct e2_dix *x)
{
    for (uint32_t i = 0; i < x->nbuckets; i++) {
        struct dix_name *n = x->b[i];
        while (n) { struct dix_name *nx = n->next; free(n); n = nx; }
    }
    free(x->b);
    free(x);
}

static struct e2_dix **dix_slot(struct e2 *e, ext2_ino_t dir)
{
    struct e2_dix **pp = &e->dix[dir % E2_DIX_BUCKETS];
    while (*pp && (*pp)->dir != dir) pp = &(*pp)->hnext;
    return pp;
}

static void lru_unlink(struct e2 *e, struct e2_dix *x)
{
    if (x->prev) x->prev->next = x->next; else e->dix_lru = x->next;
    if (x->next) x->next->prev = x->prev; else e->dix_tail = x->prev;
    x->prev = x->next = NULL;
}

static void lru_front(struct e2 *e, struct e2_dix *x)
{
    x->next = e->dix_lru;
    x->prev = NULL;
    if (e->dix_lru) e->dix_lru->prev = x; else e->dix_tail = x;
    e->dix_lru = x;
}

void e2_dir_forget(struct e2 *e, ext2_ino_t dir)
{
    struct e2_dix **pp = dix_slot(e, dir), *x = *pp;
    if (!x) return;
    *pp = x->hnext;
    lru_unlink(e, x);
    e->dix_names -= x->n;
    dix_free(x);
}

void e2_dir_forget_all(struct e2 *e)
{
    while (e->dix_lru) e2_dir_forget(e, e->dix_lru->dir);
}

static int dix_insert(struct e2 *e, struct e2_dix *x, const char *name, size_t len, ext2_ino_t ino,
                      uint32_t lblk)
{
    if (x->n >= x->nbuckets) {                 /* grow: keep chains short */
        uint32_t nb = x->nbuckets * 2;
        struct dix_name **b = calloc(nb, sizeof *b);
        if (!b) return -ENOMEM;
        for (uint32_t i = 0; i < x->nbuckets; i++) {
            struct dix_name *n = x->b[i];
            while (n) { struct dix_name *nx = n->next; n->next = b[n->hash & (nb - 1)]; b[n->hash & (nb - 1)] = n; n = nx; }
        }
        free(x->b);
        x->b = b;
        x->nbuckets = nb;
    }
    struct dix_name *n = malloc(sizeof *n + len);
    if (!n) return -ENOMEM;
    n->hash = name_hash(name, len);
    n->ino = ino;
    n->lblk = lblk;
    n->len = (uint8_t)len;
    memcpy(n->name, name, len);
    n->next = x->b[n->hash & (x->nbuckets - 1)];
    x->b[n->hash & (x->nbuckets - 1)] = n;
    x->n++;
    e->dix_names++;
    return 0;
}

static struct dix_name **dix_find(struct e2_dix *x, const char *name, size_t len)
{
    uint64_t h = name_hash(name, len);
    struct dix_name **pp = &x->b[h & (x->nbuckets - 1)];
    while (*pp && ((*pp)->hash != h || (*pp)->len != len || memcmp((*pp)->name, name, len))) pp = &(*pp)->next;
    return pp;
}

/* Indexes every live entry of dir, block by block (so each name knows its block). */
static int dix_build(struct e2 *e, struct e2_dix *x, ext2_ino_t dir, struct ext2_inode *in)
{
    ext2_filsys fs = e->fs;
    char buf[4096];
    if (fs->blocksize > sizeof buf) return -EINVAL;   /* our format: 4 KiB */
    uint64_t nblk = EXT2_I_SIZE(in) / fs->blocksize;
    for (uint64_t lblk = 0; lblk < nblk; lblk++) {
        blk64_t pblk = 0;
        if (ext2fs_bmap2(fs, dir, in, NULL, 0, lblk, NULL, &pblk)) return -EIO;
        if (!pblk) continue;
        if (ext2fs_read_dir_block4(fs, pblk, buf, 0, dir)) return -EIO;
        for (unsigned off = 0; off + 8 <= fs->blocksize;) {
            struct ext2_dir_entry *de = (struct ext2_dir_entry *)(buf + off);
            unsigned rec = 0;
            if (ext2fs_get_rec_len(fs, de, &rec) || rec < 8 || rec % 4 || off + rec > fs->blocksize) return -EIO;
            unsigned nlen = (unsigned)ext2fs_dirent_name_len(de);
            if (de->inode && nlen && nlen + 8 <= rec) {
                int rc = dix_insert(e, x, de->name, nlen, de->inode, (uint32_t)lblk);
                if (rc) return rc;
            }
            off += rec;
        }
    }
    return 0;
}

/* The index of dir, built now if the directory is large; NULL: scan it instead. */
static struct e2_dix *dix_get(struct e2 *e, ext2_ino_t dir)
{
    struct e2_dix *x = *dix_slot(e, dir);
    if (x) {
        lru_unlink(e, x);
        lru_front(e, x);
        return x;
    }
    struct ext2_inode in;
    if (ext2fs_read_inode(e->fs, dir, &in) || !LINUX_S_ISDIR(in.i_mode) || EXT2_I_SIZE(&in) < DIX_MIN_BYTES)
        return NULL;
    x = calloc(1, sizeof *x);
    if (!x || !(x->b = calloc(x->nbuckets = 1024, sizeof *x->b))) { free(x); return NULL; }
    x->dir = dir;
    x->hole = LBLK_UNKNOWN;
    if (EXT2_I_SIZE(&in) / e->fs->blocksize >= LBLK_UNKNOWN || dix_build(e, x, dir, &in)) {
        e->dix_names -= x->n;
        dix_free(x);
        return NULL;
    }
    struct e2_dix **pp = dix_slot(e, dir);
    x->hnext = *pp;
    *pp = x;
    lru_front(e, x);
    while (e->dix_names > DIX_MAX_NAMES && e->dix_tail && e->dix_tail != x) e2_dir_forget(e, e->dix_tail->dir);
    return x;
}

int e2_dir_lookup(struct e2 *e, ext2_ino_t dir, const char *name, ext2_ino_t *ino)
{
    size_t len = strlen(name);
    struct e2_dix *x = dix_get(e, dir);
    if (!x) {
        errcode_t err = ext2fs_lookup(e->fs, dir, name, (int)len, NULL, ino);
        return err == EXT2_ET_FILE_NOT_FOUND ? -ENOENT : e2_errno(err);
    }
    struct dix_name *n = *dix_find(x, name, len);
    if (!n) return -ENOENT;
    *ino = n->ino;
    return 0;
}

/* Puts name into directory block *lblk (LBLK_UNKNOWN: the last one, then *lblk says
 * which) if it has room (EXT2_ET_DIR_NO_SPACE if not). */
static errcode_t insert_in_block(struct e2 *e, ext2_ino_t dir, const char *name, ext2_ino_t ino, int ft,
                                 uint32_t *lblk)
{
    ext2_filsys fs = e->fs;
    struct ext2_inode in;
    errcode_t err = ext2fs_read_inode(fs, dir, &in);
    if (err) return err;
    uint64_t size = EXT2_I_SIZE(&in), nblk = size / fs->blocksize;
    if (!size || size % fs->blocksize || nblk > LBLK_UNKNOWN) return EXT2_ET_DIR_NO_SPACE;
    if (*lblk == LBLK_UNKNOWN) *lblk = (uint32_t)(nblk - 1);
    if (*lblk >= nblk) return EXT2_ET_DIR_NO_SPACE;
    blk64_t pblk = 0;
    err = ext2fs_bmap2(fs, dir, &in, NULL, 0, *lblk, NULL, &pblk);
    if (err || !pblk) return err ? err : EXT2_ET_DIR_NO_SPACE;
    char buf[4096];
    if (fs->blocksize > sizeof buf) return EXT2_ET_DIR_NO_SPACE;   /* our format: 4 KiB */
    if ((err = ext2fs_read_dir_block4(fs, pblk, buf, 0, dir))) return err;
    unsigned len = (unsigned)strlen(name), need = EXT2_DIR_REC_LEN(len);
    for (unsigned off = 0; off < fs->blocksize;) {
        struct ext2_dir_entry *de = (struct ext2_dir_entry *)(buf + off);
        unsigned rec = 0;
        if ((err = ext2fs_get_rec_len(fs, de, &rec)) || rec < 8 || off + rec > fs->blocksize) return EXT2_ET_DIR_CORRUPTED;
        unsigned used = de->inode ? EXT2_DIR_REC_LEN(ext2fs_dirent_name_len(de)) : 0;
        if (rec - used >= need) {
            struct ext2_dir_entry *ne = de;
            if (used) {                        /* split: the new entry takes the slack */
                ne = (struct ext2_dir_entry *)(buf + off + used);
                if ((err = ext2fs_set_rec_len(fs, used, de))) return err;
                if ((err = ext2fs_set_rec_len(fs, rec - used, ne))) return err;
            }
            ne->inode = ino;
            ext2fs_dirent_set_name_len(ne, (int)len);
            ext2fs_dirent_set_file_type(ne, ft);
            memcpy(ne->name, name, len);
            return ext2fs_write_dir_block4(fs, pblk, buf, 0, dir);
        }
        off += rec;
    }
    return EXT2_ET_DIR_NO_SPACE;
}

int e2_dir_add(struct e2 *e, ext2_ino_t dir, const char *name, ext2_ino_t ino, int ft)
{
    e->dirty = true;
    struct e2_dix *hx = *dix_slot(e, dir);
    uint32_t lblk = LBLK_UNKNOWN;
    errcode_t err = insert_in_block(e, dir, name, ino, ft, &lblk);
    if (err == EXT2_ET_DIR_NO_SPACE && hx && hx->hole != LBLK_UNKNOWN) {   /* where a name was removed */
        lblk = hx->hole;
        err = insert_in_block(e, dir, name, ino, ft, &lblk);
        if (err == EXT2_ET_DIR_NO_SPACE) hx->hole = LBLK_UNKNOWN;
    }
    if (err == EXT2_ET_DIR_NO_SPACE) {
        lblk = LBLK_UNKNOWN;
        err = ext2fs_link(e->fs, dir, name, ino, ft);
    }
    if (err == EXT2_ET_DIR_NO_SPACE) {
        err = ext2fs_expand_dir(e->fs, dir);
        lblk = LBLK_UNKNOWN;
        if (!err) err = insert_in_block(e, dir, name, ino, ft, &lblk);
    }
    if (err) {
        e2_dir_forget(e, dir);                 /* whatever happened, rebuild from disk */
        return e2_errno(err);
    }
    struct e2_dix *x = *dix_slot(e, dir);
    if (x && dix_insert(e, x, name, strlen(name), ino, lblk)) e2_dir_forget(e, dir);
    return 0;
}

/* Removes the entry name -> ino from directory block lblk as ext2fs_unlink would (merged
 * into the previous entry of the block, or cleared if first). EXT2_ET_DIR_NO_SPACE:
 * not in that block. */
static errcode_t remove_in_block(struct e2 *e, ext2_ino_t dir, uint32_t lblk, const char *name, ext2_ino_t ino)
{
    ext2_filsys fs = e->fs;
    struct ext2_inode in;
    char buf[4096];
    if (fs->blocksize > sizeof buf) return EXT2_ET_DIR_NO_SPACE;
    errcode_t err = ext2fs_read_inode(fs, dir, &in);
    if (err) return err;
    blk64_t pblk = 0;
    if ((uint64_t)lblk >= EXT2_I_SIZE(&in) / fs->blocksize) return EXT2_ET_DIR_NO_SPACE;
    err = ext2fs_bmap2(fs, dir, &in, NULL, 0, lblk, NULL, &pblk);
    if (err || !pblk) return err ? err : EXT2_ET_DIR_NO_SPACE;
    if ((err = ext2fs_read_dir_block4(fs, pblk, buf, 0, dir))) return err;
    size_t len = strlen(name);
    struct ext2_dir_entry *prev = NULL;
    for (unsigned off = 0; off + 8 <= fs->blocksize;) {
        struct ext2_dir_entry *de = (struct ext2_dir_entry *)(buf + off);
        unsigned rec = 0;
        if (ext2fs_get_rec_len(fs, de, &rec) || rec < 8 || rec % 4 || off + rec > fs->blocksize)
            return EXT2_ET_DIR_CORRUPTED;
        if (de->inode == ino && (size_t)ext2fs_dirent_name_len(de) == len && !memcmp(de->name, name, len)) {
            if (prev) {
                unsigned prec = 0;
                if ((err = ext2fs_get_rec_len(fs, prev, &prec)) || (err = ext2fs_set_rec_len(fs, prec + rec, prev)))
                    return err;
            } else {
                de->inode = 0;
            }
            return ext2fs_write_dir_block4(fs, pblk, buf, 0, dir);
        }
        prev = de;
        off += rec;
    }
    return EXT2_ET_DIR_NO_SPACE;
}

int e2_dir_remove(struct e2 *e, ext2_ino_t dir, const char *name, ext2_ino_t ino)
{
    e->dirty = true;
    struct e2_dix *x = *dix_slot(e, dir);
    struct dix_name *known = x ? *dix_find(x, name, strlen(name)) : NULL;
    errcode_t err = EXT2_ET_DIR_NO_SPACE;
    if (known && known->ino == ino && known->lblk != LBLK_UNKNOWN) {
        err = remove_in_block(e, dir, known->lblk, name, ino);
        if (!err) x->hole = known->lblk;   /* the next add may fit there */
    }
    if (err == EXT2_ET_DIR_NO_SPACE) err = ext2fs_unlink(e->fs, dir, name, ino, 0);
    if (err) {
        if (x) e2_dir_forget(e, dir);
        return e2_errno(err);
    }
    if (x) {
        struct dix_name **pp = dix_find(x, name, strlen(name)), *n = *pp;
        if (n) { *pp = n->next; free(n); x->n--; e->dix_names--; }
        else e2_dir_forget(e, dir);
    }
    return 0;
}
