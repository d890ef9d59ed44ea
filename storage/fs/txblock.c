/* Crash-atomic block commits over a nasd_bdev: a RAM dirty set plus a physical redo
 * journal at the end of the bdev (see txblock.h for the guarantees).
 *
 * Layout: [0, data_size) data | 1 header block | half 0 | half 1.
 * A transaction (seq s, stored in half s % 2) is one sequential write:
 *   descriptor blocks (header, sorted target block numbers, discarded ranges) | data blocks,
 * checksummed as a whole (XXH3, seeded with the journal nonce and seq), so a torn write
 * is simply invalid. Commit s: journal write, ONE flush (which also makes the in-place
 * writes of commit s-1 durable), unmaps, in-place writes. Open replays the valid
 * transaction with the highest seq (unmaps, then writes); older ones are home-durable.
 * Discards live in the transaction, so a crash cannot leak the space they free, and
 * nothing older than the newest transaction is ever replayed over a discarded range. */
#define _GNU_SOURCE
#include "storage/fs/txblock.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "util/log.h"

#define TXB_SUPER_MAGIC 0x3142585444534e41ull   /* "ANSDTXB1" */
#define TXB_DESC_MAGIC  0x4353454442585458ull   /* "XTXBDESC" */
#define TXB_VERSION     1u
#define TXB_DESC_HDR    64u                     /* bytes before the target list */
#define TXB_NBUCKETS    4096u                   /* > 2x the most blocks a half holds */
#define TXB_MAX_DISCARDS 4096u                  /* pending ranges before an early commit */

struct txb_super {          /* the header block */
    uint64_t magic;
    uint32_t version, block;
    uint64_t nonce;         /* identifies this journal: older garbage never matches */
    uint64_t data_size, half_bytes;
    uint64_t csum;          /* XXH3-64 of this struct with csum = 0 */
};

struct txb_desc {           /* first TXB_DESC_HDR bytes of a transaction */
    uint64_t magic, nonce, seq;
    uint32_t nblocks, ndesc;   /* data blocks, descriptor blocks */
    uint64_t csum;             /* XXH3-64 (seed nonce ^ seq) of the transaction with csum = 0 */
    uint32_t ndisc, pad0;      /* discarded ranges */
    uint8_t pad[TXB_DESC_HDR - 48];
    /* followed by uint64_t target[nblocks]: data block numbers, strictly increasing,
     * then struct drange disc[ndisc]: byte ranges unmapped before the in-place writes */
};
_Static_assert(sizeof(struct txb_desc) == TXB_DESC_HDR, "descriptor header size");

struct dblk {
    struct dblk *next;
    uint64_t blk;
    uint8_t data[TXB_BLOCK];
};

struct drange { uint64_t off, len; };

struct txb {
    nasd_bdev *b;
    uint64_t data_size, jstart;   /* jstart: header block; halves follow it */
    uint64_t nonce, seq;          /* seq: number of the next transaction */
    uint32_t max_blocks;          /* data blocks one half holds with its descriptor */
    struct dblk *bucket[TXB_NBUCKETS];
    uint32_t ndirty;
    struct drange *disc;
    size_t ndisc, capdisc;
    int failed;                   /* sticky: an in-place write failed after its journal */
    bool direct;                  /* txb_write_data went straight to the bdev since the last commit */
    _Atomic uint64_t disc_gen;    /* txb_discard calls so far */
    void (*hook)(void *);         /* runs first in every commit */
    void *hook_arg;
};


static uint32_t desc_blocks(uint32_t nblocks, uint32_t ndisc)
{
    return (uint32_t)((TXB_DESC_HDR + 8ull * nblocks + 16ull * ndisc + TXB_BLOCK - 1) / TXB_BLOCK);
}

static uint64_t half_off(const struct txb *t, uint64_t seq)
{
    return t->jstart + TXB_BLOCK + (seq & 1) * (uint64_t)TXB_JOURNAL_HALF;
}

static uint32_t bucket_of(uint64_t blk)
{
    return (uint32_t)((blk * 0x9E3779B97F4A7C15ull) >> 52) & (TXB_NBUCKETS - 1);
}

static struct dblk *dirty_find(struct txb *t, uint64_t blk)
{
    for (struct dblk *d = t->bucket[bucket_of(blk)]; d; d = d->next)
        if (d->blk == blk) return d;
    return NULL;
}

static void dirty_drop(struct txb *t, uint64_t blk)
{
    for (struct dblk **pp = &t->bucket[bucket_of(blk)]; *pp; pp = &(*pp)->next) {
        if ((*pp)->blk != blk) continue;
        struct dblk *d = *pp;
        *pp = d->next;
        free(d);
        t->ndirty--;
        return;
    }
}

static void dirty_clear(struct txb *t)
{
    for (uint32_t i = 0; i < TXB_NBUCKETS; i++) {
        for (struct dblk *d = t->bucket[i], *n; d; d = n) { n = d->next; free(d); }
        t->bucket[i] = NULL;
    }
    t->ndirty = 0;
}

static bool range_ok(const struct txb *t, uint64_t off, uint64_t len)
{
    return off <= t->data_size && len <= t->data_size - off;
}

/* Reads [off, off+len) from the bdev, issuing only 4 KiB aligned I/O. */
static int read_home(struct txb *t, uint64_t off, uint8_t *p, size_t len)
{
    uint8_t bounce[TXB_BLOCK];
    while (len) {
        uint64_t in = off % TXB_BLOCK;
        if (in || len < TXB_BLOCK) {
            size_t n = TXB_BLOCK - in < len ? TXB_BLOCK - in : len;
            int rc = nasd_bdev_read(t->b, bounce, off - in, TXB_BLOCK);
            if (rc) return rc;
            memcpy(p, bounce + in, n);
            off += n; p += n; len -= n;
            continue;
        }
        size_t n = len / TXB_BLOCK * TXB_BLOCK;
        int rc = nasd_bdev_read(t->b, p, off, n);
        if (rc) return rc;
        off += n; p += n; len -= n;
    }
    return 0;
}

int txb_read(struct txb *t, uint64_t off, void *buf, size_t len)
{
    if (!range_ok(t, off, len)) return -EINVAL;
    uint8_t *p = buf;
    uint64_t end = off + len;
    while (off < end) {
        uint64_t in = off % TXB_BLOCK, n = TXB_BLOCK - in < end - off ? TXB_BLOCK - in : end - off;
        struct dblk *d = dirty_find(t, off / TXB_BLOCK);
        if (d) {
            memcpy(p, d->data + in, n);
            off += n; p += n;
            continue;
        }
        /* one bdev read for the whole run of clean blocks */
        uint64_t run = off + n;
        while (run < end && !dirty_find(t, run / TXB_BLOCK))
            run += TXB_BLOCK < end - run ? TXB_BLOCK : end - run;
        int rc = read_home(t, off, p, run - off);
        if (rc) return rc;
        p += run - off; off = run;
    }
    return 0;
}

bool txb_range_buffered(struct txb *t, uint64_t off, uint64_t len)
{
    for (uint64_t b = off / TXB_BLOCK; len && b <= (off + len - 1) / TXB_BLOCK; b++)
        if (dirty_find(t, b)) return true;
    return false;
}

/* Touches only t->b (fixed for t's life) and a stack buffer: safe without serialization. */
int txb_read_home(struct txb *t, uint64_t off, void *buf, size_t len)
{
    if (!range_ok(t, off, len)) return -EINVAL;
    return read_home(t, off, buf, len);
}

int txb_write(struct txb *t, uint64_t off, const void *buf, size_t len)
{
    if (t->failed) return t->failed;
    if (!range_ok(t, off, len)) return -EINVAL;
    const uint8_t *p = buf;
    uint64_t end = off + len;
    while (off < end) {
        uint64_t blk = off / TXB_BLOCK, in = off % TXB_BLOCK;
        uint64_t n = TXB_BLOCK - in < end - off ? TXB_BLOCK - in : end - off;
        struct dblk *d = dirty_find(t, blk);
        if (!d) {
            if (t->ndirty >= t->max_blocks) {
                log_warn("txb %s: dirty data exceeds a journal half (%u blocks), committing early",
                         t->b->name, t->max_blocks);
                int rc = txb_commit(t);
                if (rc) return rc;
            }
            d = malloc(sizeof *d);
            if (!d) return -ENOMEM;
            if (n < TXB_BLOCK) {   /* partial block: start from its current content */
                int rc = nasd_bdev_read(t->b, d->data, blk * TXB_BLOCK, TXB_BLOCK);
                if (rc) { free(d); return rc; }
            }
            d->blk = blk;
            d->next = t->bucket[bucket_of(blk)];
            t->bucket[bucket_of(blk)] = d;
            t->ndirty++;
        }
        memcpy(d->data + in, p, n);
        off += n; p += n;
    }
    return 0;
}

bool txb_claim_direct(struct txb *t, uint64_t off, uint64_t len)
{
    if (t->failed || !range_ok(t, off, len) || off % TXB_BLOCK || len % TXB_BLOCK) return false;
    /* journaled when the range is buffered already or was freed in this transaction:
     * the last committed state may still own a freed block's old content */
    for (uint64_t b = off / TXB_BLOCK; b < (off + len) / TXB_BLOCK && t->ndirty; b++)
        if (dirty_find(t, b)) return false;
    for (size_t i = 0; i < t->ndisc; i++)
        if (off < t->disc[i].off + t->disc[i].len && t->disc[i].off < off + len) return false;
    t->direct = true;   /* the next commit flushes the bdev even if nothing else changed */
    return true;
}

int txb_write_home(struct txb *t, uint64_t off, const void *buf, size_t len)
{
    if (!range_ok(t, off, len)) return -EINVAL;
    return nasd_bdev_write(t->b, buf, off, len, 0);
}

int txb_write_data(struct txb *t, uint64_t off, const void *buf, size_t len)
{
    if (t->failed) return t->failed;
    if (!range_ok(t, off, len)) return -EINVAL;
    if (!txb_claim_direct(t, off, len)) return txb_write(t, off, buf, len);
    return nasd_bdev_write(t->b, buf, off, len, 0);
}

uint64_t txb_discard_gen(struct txb *t) { return atomic_load(&t->disc_gen); }

int txb_discard(struct txb *t, uint64_t off, uint64_t len)
{
    atomic_fetch_add(&t->disc_gen, 1);   /* before anything can reuse the range */
    if (t->failed) return t->failed;
    if (!range_ok(t, off, len)) return -EINVAL;
    /* only whole blocks: a partial block still holds data */
    uint64_t first = (off + TXB_BLOCK - 1) / TXB_BLOCK, last = (off + len) / TXB_BLOCK;
    if (first >= last) return 0;
    if (t->ndirty) {
        if (last - first <= 4ull * t->ndirty) {
            for (uint64_t b = first; b < last; b++) dirty_drop(t, b);
        } else {
            for (uint32_t i = 0; i < TXB_NBUCKETS; i++)
                for (struct dblk **pp = &t->bucket[i]; *pp;) {
                    struct dblk *d = *pp;
                    if (d->blk >= first && d->blk < last) { *pp = d->next; free(d); t->ndirty--; }
                    else pp = &d->next;
                }
        }
    }
    uint64_t o = first * TXB_BLOCK, l = (last - first) * TXB_BLOCK;
    if (t->ndisc) {   /* ext2 frees extents in order: merge with the previous range */
        struct drange *r = &t->disc[t->ndisc - 1];
        if (o <= r->off + r->len && o + l >= r->off) {
            uint64_t s = o < r->off ? o : r->off, e = o + l > r->off + r->len ? o + l : r->off + r->len;
            r->off = s; r->len = e - s;
            return 0;
        }
    }
    if (t->ndisc == t->capdisc) {
        if (t->capdisc >= TXB_MAX_DISCARDS) {
            int rc = txb_commit(t);
            if (rc) return rc;
        } else {
            size_t cap = t->capdisc ? t->capdisc * 2 : 64;
            struct drange *n = realloc(t->disc, cap * sizeof *n);
            if (!n) return -ENOMEM;
            t->disc = n; t->capdisc = cap;
        }
    }
    t->disc[t->ndisc++] = (struct drange){ o, l };
    return 0;
}

uint64_t txb_dirty_bytes(const struct txb *t)
{
    return (uint64_t)t->ndirty * TXB_BLOCK;
}

uint64_t txb_data_size(const struct txb *t)
{
    return t->data_size;
}

static int cmp_dblk(const void *a, const void *b)
{
    uint64_t x = (*(struct dblk *const *)a)->blk, y = (*(struct dblk *const *)b)->blk;
    return x < y ? -1 : x > y;
}

/* Writes the transaction's data blocks to their home offsets, one bdev call per run
 * of consecutive block numbers (the data is contiguous in the transaction image). */
static int write_home(struct txb *t, const uint64_t *target, const uint8_t *data, uint32_t n)
{
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        while (j < n && target[j] == target[j - 1] + 1 && (j - i) < 2048) j++;
        int rc = nasd_bdev_write(t->b, data + (uint64_t)i * TXB_BLOCK, target[i] * TXB_BLOCK,
                                 (size_t)(j - i) * TXB_BLOCK, 0);
        if (rc) return rc;
        i = j;
    }
    return 0;
}

/* Unmaps first: a block written after its discard is in the transaction, so its
 * in-place write lands after the unmap. Unmap failures only cost space. */
static int apply_transaction(struct txb *t, const uint8_t *img)
{
    const struct txb_desc *h = (const struct txb_desc *)img;
    const uint64_t *target = (const uint64_t *)(img + TXB_DESC_HDR);
    const struct drange *disc = (const struct drange *)(target + h->nblocks);
    for (uint32_t i = 0; i < h->ndisc; i++) {
        int u = nasd_bdev_unmap(t->b, disc[i].off, disc[i].len);
        if (u && u != -EOPNOTSUPP)
            log_warn("txb %s: unmap %llu+%llu: %d", t->b->name, (unsigned long long)disc[i].off,
                     (unsigned long long)disc[i].len, u);
    }
    return write_home(t, target, img + (size_t)h->ndesc * TXB_BLOCK, h->nblocks);
}

void txb_set_commit_hook(struct txb *t, void (*fn)(void *), void *arg) { t->hook = fn; t->hook_arg = arg; }

int txb_commit(struct txb *t)
{
    if (t->hook) t->hook(t->hook_arg);
    if (t->failed) return t->failed;
    /* after direct writes even an empty transaction is written: it flushes them, and it
     * becomes the newest, so the one before (which may hold older copies of those
     * blocks) is never replayed over them */
    if (!t->ndirty && !t->ndisc && !t->direct) return 0;
    uint32_t n = t->ndirty, ndisc = (uint32_t)t->ndisc, nd = desc_blocks(n, ndisc);
    size_t bytes = (size_t)(nd + n) * TXB_BLOCK;
    struct dblk **list = malloc((n ? n : 1) * sizeof *list);
    uint8_t *img = aligned_alloc(TXB_BLOCK, bytes);
    if (!list || !img) { free(list); free(img); return -ENOMEM; }
    uint32_t k = 0;
    for (uint32_t i = 0; i < TXB_NBUCKETS; i++)
        for (struct dblk *d = t->bucket[i]; d; d = d->next) list[k++] = d;
    qsort(list, n, sizeof *list, cmp_dblk);

    memset(img, 0, (size_t)nd * TXB_BLOCK);
    struct txb_desc *h = (struct txb_desc *)img;
    uint64_t *target = (uint64_t *)(img + TXB_DESC_HDR);
    uint8_t *data = img + (size_t)nd * TXB_BLOCK;
    h->magic = TXB_DESC_MAGIC; h->nonce = t->nonce; h->seq = t->seq;
    h->nblocks = n; h->ndesc = nd; h->ndisc = ndisc;
    for (uint32_t i = 0; i < n; i++) {
        target[i] = list[i]->blk;
        memcpy(data + (size_t)i * TXB_BLOCK, list[i]->data, TXB_BLOCK);
    }
    free(list);
    if (ndisc) memcpy(target + n, t->disc, ndisc * sizeof *t->disc);
    h->csum = XXH3_64bits_withSeed(img, bytes, t->nonce ^ t->seq);

    /* Until the flush returns, a crash leaves the previous transaction the newest valid
     * one; on error the dirty set stays and a retry rewrites the same half. */
    int rc = nasd_bdev_write(t->b, img, half_off(t, t->seq), bytes, 0);
    if (!rc) rc = nasd_bdev_flush(t->b);
    if (rc) {
        log_err("txb %s: journal write of transaction %llu failed: %d", t->b->name,
                (unsigned long long)t->seq, rc);
        free(img);
        return rc;
    }
    t->seq++;
    t->ndisc = 0;
    rc = apply_transaction(t, img);
    free(img);
    if (rc) {   /* the journal holds the data; only a reopen (replay) can recover */
        log_err("txb %s: in-place write failed: %d; further writes refused until reopen", t->b->name, rc);
        t->failed = rc;
        return rc;
    }
    dirty_clear(t);
    t->direct = false;
    return 0;
}

/* Reads and verifies the transaction in half h: *img = its image (caller frees), or NULL
 * if the half holds no valid transaction (never written, torn, or another journal's).
 * A read error fails: that half might hold the newest transaction, and replaying an
 * older one over its in-place writes would mix states. */
static int load_transaction(struct txb *t, int h, uint8_t **out)
{
    uint8_t first[TXB_BLOCK];
    uint64_t at = half_off(t, (uint64_t)h);
    *out = NULL;
    int rc = nasd_bdev_read(t->b, first, at, TXB_BLOCK);
    if (rc) return rc;
    const struct txb_desc *d = (const struct txb_desc *)first;
    if (d->magic != TXB_DESC_MAGIC || d->nonce != t->nonce || (d->seq & 1) != (uint64_t)h ||
        d->nblocks > t->max_blocks || d->ndisc > TXB_MAX_DISCARDS ||
        d->ndesc != desc_blocks(d->nblocks, d->ndisc))
        return 0;
    size_t bytes = (size_t)(d->ndesc + d->nblocks) * TXB_BLOCK;
    uint8_t *img = aligned_alloc(TXB_BLOCK, bytes);
    if (!img) return -ENOMEM;
    rc = nasd_bdev_read(t->b, img, at, bytes);
    if (rc) { free(img); return rc; }
    struct txb_desc *h2 = (struct txb_desc *)img;
    uint64_t want = h2->csum;
    h2->csum = 0;
    bool ok = XXH3_64bits_withSeed(img, bytes, t->nonce ^ h2->seq) == want;
    h2->csum = want;
    const uint64_t *target = (const uint64_t *)(img + TXB_DESC_HDR);
    for (uint32_t i = 0; ok && i < h2->nblocks; i++)
        ok = target[i] < t->data_size / TXB_BLOCK && (i == 0 || target[i] > target[i - 1]);
    const struct drange *disc = (const struct drange *)(target + h2->nblocks);
    for (uint32_t i = 0; ok && i < h2->ndisc; i++)
        ok = disc[i].off % TXB_BLOCK == 0 && disc[i].len % TXB_BLOCK == 0 && range_ok(t, disc[i].off, disc[i].len);
    if (!ok) { free(img); return 0; }
    *out = img;
    return 0;
}

static int super_init(struct txb *t)
{
    uint8_t blk[TXB_BLOCK] = { 0 };
    struct txb_super *s = (struct txb_super *)blk;
    if (getrandom(&t->nonce, sizeof t->nonce, 0) != sizeof t->nonce)
        t->nonce = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() ^ (uintptr_t)t;
    s->magic = TXB_SUPER_MAGIC; s->version = TXB_VERSION; s->block = TXB_BLOCK;
    s->nonce = t->nonce; s->data_size = t->data_size; s->half_bytes = TXB_JOURNAL_HALF;
    s->csum = XXH3_64bits(s, sizeof *s);
    int rc = nasd_bdev_write(t->b, blk, t->jstart, TXB_BLOCK, 0);
    if (!rc) rc = nasd_bdev_flush(t->b);
    t->seq = 1;
    return rc;
}

static int super_load(struct txb *t)
{
    uint8_t blk[TXB_BLOCK];
    int rc = nasd_bdev_read(t->b, blk, t->jstart, TXB_BLOCK);
    if (rc) return rc;
    struct txb_super s;
    memcpy(&s, blk, sizeof s);
    uint64_t want = s.csum;
    s.csum = 0;
    if (s.magic != TXB_SUPER_MAGIC || XXH3_64bits(&s, sizeof s) != want || s.version != TXB_VERSION ||
        s.block != TXB_BLOCK || s.data_size != t->data_size || s.half_bytes != TXB_JOURNAL_HALF)
        return -ENOENT;
    t->nonce = s.nonce;
    return 0;
}

/* Replays the newest valid transaction (idempotent) and sets the next seq. */
static int recover(struct txb *t)
{
    uint8_t *img[2] = { NULL, NULL };
    int rc = load_transaction(t, 0, &img[0]);
    if (!rc) rc = load_transaction(t, 1, &img[1]);
    if (rc) {
        log_err("txb %s: cannot read the journal: %d", t->b->name, rc);
        free(img[0]);
        return rc;
    }
    uint64_t seq[2] = { img[0] ? ((struct txb_desc *)img[0])->seq : 0,
                        img[1] ? ((struct txb_desc *)img[1])->seq : 0 };
    int best = seq[1] > seq[0] ? 1 : 0;
    if (img[best]) {
        const struct txb_desc *d = (const struct txb_desc *)img[best];
        rc = apply_transaction(t, img[best]);
        if (!rc) rc = nasd_bdev_flush(t->b);
        log_info("txb %s: replayed transaction %llu (%u blocks, %u discards): %d", t->b->name,
                 (unsigned long long)d->seq, d->nblocks, d->ndisc, rc);
        t->seq = d->seq + 1;
    } else {
        t->seq = 1;
    }
    free(img[0]);
    free(img[1]);
    return rc;
}

int txb_open(nasd_bdev *b, struct txb **out)
{
    *out = NULL;
    if (!b || b->size <= TXB_JOURNAL_BYTES + (1u << 20)) return -EINVAL;
    struct txb *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    t->b = nasd_bdev_get(b);
    t->data_size = (b->size - TXB_JOURNAL_BYTES) / TXB_BLOCK * TXB_BLOCK;
    t->jstart = t->data_size;
    t->max_blocks = TXB_JOURNAL_HALF / TXB_BLOCK;
    while (t->max_blocks + desc_blocks(t->max_blocks, TXB_MAX_DISCARDS) > TXB_JOURNAL_HALF / TXB_BLOCK)
        t->max_blocks--;
    int rc = super_load(t);
    if (rc == -ENOENT) {
        log_info("txb %s: no journal found, formatting one", b->name);
        rc = super_init(t);
    } else if (!rc) {
        rc = recover(t);
    }
    if (rc) {
        log_err("txb %s: open failed: %d", b->name, rc);
        nasd_bdev_put(t->b);
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}

static void txb_free(struct txb *t)
{
    txb_io_forget(t);
    dirty_clear(t);
    free(t->disc);
    nasd_bdev_put(t->b);
    free(t);
}

void txb_close(struct txb *t)
{
    if (!t) return;
    int rc = txb_commit(t);
    if (!rc) rc = nasd_bdev_flush(t->b);   /* the last in-place writes */
    if (rc) log_err("txb %s: close lost uncommitted data: %d", t->b->name, rc);
    txb_free(t);
}

void txb_abandon(struct txb *t)
{
    if (t) txb_free(t);
}
