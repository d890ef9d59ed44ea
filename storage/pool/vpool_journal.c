/* Commit and journal. A commit takes every dirty cached sector plus the pending
 * metadata deltas (allocations, unmaps) and writes them as checksummed batches at the
 * same journal offset on 2 members (all members for a mirror) with
 * pwritev2(RWF_DSYNC), and only then writes the data in place and publishes the
 * checksums. Sectors are journaled in one of two ways:
 *  - with their data (VP_REC_WRITE): small durable commits (a FUA write, a flush
 *    after a few writes), lz4 volumes and degraded pools. One synchronous write makes
 *    them durable; the in-place copy is synced by the next checkpoint.
 *  - as intents (VP_REC_INTENT: checksum only, 24 bytes): everything else. The data is
 *    written once, in place; a durable commit then fdatasyncs the members. This is
 *    what keeps large and write-back traffic from being written twice (journal copies
 *    plus in place); vpool_intent.c sorts out old/new sectors and parity at import.
 * Import replays the batches newer than the last checkpoint, in order; every record is
 * an absolute "set", so replaying over partly checkpointed metadata converges to the
 * same state. */
#include "storage/pool/vpool_impl.h"
#include "util/log.h"
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define VP_BATCH_MAX 1000          /* data sectors per batch: fits IOV_MAX iovecs */
#define VP_BATCH_RECS 16384        /* records per batch (intents carry no data) */
#define VP_SMALL_DURABLE 64        /* durable commits up to this many sectors journal data */
#define VP_JNL_MAGIC 0x4c4e524a4c505644ull   /* "DVPLJRNL" */

struct jhdr {
    uint64_t magic;
    uint8_t pool[16];
    uint64_t seq;
    uint32_t nrec, hdr_pages, data_pages, pad;
    uint64_t csum;     /* XXH3-64 (seed seq) of the whole batch with csum = 0 */
};

/* Writes zeros into the holes of a member file's journal region, and only there, so what
 * the region holds stays the same (safe before replay). A synchronous journal write into
 * a hole makes the host file system allocate blocks and commit its own journal as well:
 * 72 KiB RWF_DSYNC writes took 245-256 us into holes and 181 us into written blocks here,
 * and every write of the first pass through the journal (up to 256 MiB) paid that. Best
 * effort: block devices have no holes, and a failure costs only that speed. */
void vp_journal_fill(struct vpool *p, int fd, const char *path)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) return;
    uint64_t pos = VP_JOURNAL_OFF, end = VP_JOURNAL_OFF + p->jnl_size, zlen = 1u << 20;
    uint8_t *z = NULL;
    bool wrote = false;
    int err = 0;
    while (pos < end && !err) {
        off_t h = lseek(fd, (off_t)pos, SEEK_HOLE);
        if (h < 0 || (uint64_t)h >= end) break;
        off_t d = lseek(fd, h, SEEK_DATA);   /* ENXIO: no data after the hole */
        if (d < 0 && errno != ENXIO) { err = errno; break; }
        uint64_t hend = d < 0 || (uint64_t)d > end ? end : (uint64_t)d;
        if (hend <= (uint64_t)h) break;   /* nothing to fill: the file changed under us */
        if (!z) {
            if (posix_memalign((void **)&z, 4096, zlen)) { z = NULL; err = ENOMEM; break; }
            memset(z, 0, zlen);
        }
        for (uint64_t o = (uint64_t)h; o < hend && !err;) {
            size_t n = hend - o < zlen ? (size_t)(hend - o) : (size_t)zlen;
            ssize_t w = pwrite(fd, z, n, (off_t)o);
            if (w != (ssize_t)n) err = w < 0 ? errno : EIO;
            o += n;
            wrote = true;
        }
        pos = hend;
    }
    if (wrote && !err && fdatasync(fd)) err = errno;
    if (err) log_warn("vpool %s: %s: journal region not preallocated (%s); sync writes will be slower", p->name, path,
                      strerror(err));
    free(z);
}

void vp_pend_add(struct vpool *p, const struct vp_rec *r)
{
    pthread_mutex_lock(&p->pend_lock);
    if (p->npend == p->pend_cap) {
        size_t nc = p->pend_cap ? p->pend_cap * 2 : 64;
        struct vp_rec *n = realloc(p->pend, nc * sizeof *n);
        while (!n) { sched_yield(); n = realloc(p->pend, nc * sizeof *n); }
        p->pend = n; p->pend_cap = nc;
    }
    p->pend[p->npend++] = *r;
    pthread_mutex_unlock(&p->pend_lock);
}

size_t vp_pend_count(struct vpool *p)
{
    pthread_mutex_lock(&p->pend_lock);
    size_t n = p->npend;
    pthread_mutex_unlock(&p->pend_lock);
    return n;
}

void vp_pend_restore(struct vpool *p, const struct vp_rec *recs, size_t n)
{
    pthread_mutex_lock(&p->pend_lock);
    struct vp_rec *m = malloc((n + p->npend) * sizeof *m);
    if (m) {
        memcpy(m, recs, n * sizeof *m);
        if (p->npend) memcpy(m + n, p->pend, p->npend * sizeof *m);
        free(p->pend);
        p->pend = m;
        p->npend += n;
        p->pend_cap = p->npend;
    }
    pthread_mutex_unlock(&p->pend_lock);
}

int vp_cmp_wsect(const void *a, const void *b)
{
    const struct vp_wsect *x = a, *y = b;
    return x->sect < y->sect ? -1 : x->sect > y->sect;
}

/* Journal copies: every writable member for a mirror, else two, rotating with the
 * batch number so that no member takes all the journal traffic. */
static uint32_t journal_members(struct vpool *p, uint64_t seq)
{
    uint32_t mask = 0;
    int want = p->layout == VPOOL_MIRROR ? p->n : 2, got = 0;
    for (int k = 0; k < p->n && got < want; k++) {
        int m = (int)((seq + k) % p->n);
        if (vp_writable(p, m)) { mask |= 1u << m; got++; }
    }
    return mask;
}

struct jcopy { struct vpool *p; int fd, m, cnt; const struct iovec *iov; uint64_t off, len; bool dsync, ok; };

static void *jcopy_write(void *arg)
{
    struct jcopy *j = arg;
    ssize_t r = -1;
    if (vp_sim_before_write(j->p, j->m, j->off, j->len) == 0) {
        do r = pwritev2(j->fd, j->iov, j->cnt, (off_t)j->off, j->dsync ? RWF_DSYNC : 0);
        while (r < 0 && errno == EINTR);
    }
    j->ok = r == (ssize_t)j->len && (!j->dsync || vp_sim_synced(j->p, j->m, j->off, j->len) == 0);
    return NULL;
}

/* The batch is header pages (records) followed by the data sectors, written with
 * pwritev straight from the commit's buffers; the checksum is streamed likewise.
 * !dsync (format 3's location records, see vp_journal_records): written like the log's
 * data, unsynced until the members' next sync. */
static int write_batch_ex(struct vpool *p, const struct vp_rec *recs, size_t nrec,
                          const struct vp_wsect *ws, size_t nws, bool dsync)
{
    size_t ndata = 0;
    for (size_t i = 0; i < nws; i++) ndata += ws[i].data && !ws[i].intent;
    size_t hdr_bytes = sizeof(struct jhdr) + (nrec + nws) * sizeof(struct vp_rec);
    size_t hdr_pages = (hdr_bytes + VP_SECTOR - 1) / VP_SECTOR;
    size_t len = (hdr_pages + ndata) * VP_SECTOR;
    if (len > p->jnl_size) return -E2BIG;
    if (p->jpos + len > p->jnl_size) {
        int rc = vp_checkpoint(p);
        if (rc) return rc;
    }
    uint8_t *b = NULL;   /* aligned: O_DIRECT members write it as it is */
    struct iovec *iov = malloc((ndata + 1) * sizeof *iov);
    if (posix_memalign((void **)&b, VP_SECTOR, hdr_pages * VP_SECTOR) || !iov) { free(b); free(iov); return -ENOMEM; }
    memset(b, 0, hdr_pages * VP_SECTOR);
    struct jhdr *h = (struct jhdr *)b;
    struct vp_rec *r = (struct vp_rec *)(b + sizeof *h);
    if (nrec) memcpy(r, recs, nrec * sizeof *r);
    size_t k = 1;
    for (size_t i = 0; i < nws; i++) {
        struct vp_rec *x = &r[nrec + i];
        x->type = !ws[i].data ? VP_REC_CSUM : ws[i].intent ? VP_REC_INTENT : VP_REC_WRITE;
        x->a = ws[i].sect;
        x->a32 = ws[i].csum;
        if (x->type != VP_REC_WRITE) continue;
        iov[k++] = (struct iovec){ ws[i].data, VP_SECTOR };
        if (p->xl) continue;   /* format 3: replay writes it to its log location, never home */
        vp_bit_set(p->jbits, x->a);   /* see choose_intents */
        p->jbits_any = true;
    }
    iov[0] = (struct iovec){ b, hdr_pages * VP_SECTOR };
    h->magic = VP_JNL_MAGIC;
    memcpy(h->pool, p->uuid, 16);
    h->seq = p->seq + 1;
    h->nrec = (uint32_t)(nrec + nws);
    h->hdr_pages = (uint32_t)hdr_pages;
    h->data_pages = (uint32_t)ndata;
    XXH3_state_t *st = XXH3_createState();
    if (!st) { free(b); free(iov); return -ENOMEM; }
    XXH3_64bits_reset_withSeed(st, h->seq);
    for (size_t i = 0; i < k; i++) XXH3_64bits_update(st, iov[i].iov_base, iov[i].iov_len);
    h->csum = XXH3_64bits_digest(st);
    XXH3_freeState(st);

    /* one pwritev2(RWF_DSYNC) per copy, the copies in parallel: the sync covers just
     * this range, not the in-place data waiting in the page cache (synced at checkpoints) */
    if (!dsync) atomic_store(&p->unsynced, 1);   /* before it is written: a durable commit syncs it */
    uint32_t jm = journal_members(p, h->seq);
    struct iovec one, *wiov = iov;
    void *bounce = NULL;
    int wcnt = (int)k;
    for (int m = 0; m < p->n; m++)
        if ((jm & (1u << m)) && p->m[m].direct && !bounce && wiov == iov)
            wiov = (struct iovec *)vp_iov_for_direct(iov, &wcnt, len, &one, &bounce);
    struct jcopy jc[VP_MAXM];
    struct vp_job jobs[VP_MAXM];
    int nc = 0, ok = 0;
    for (int m = 0; m < p->n; m++)
        if (jm & (1u << m)) jc[nc++] = (struct jcopy){ .p = p, .fd = p->m[m].fd, .m = m, .iov = wiov, .cnt = wcnt,
                                                       .off = VP_JOURNAL_OFF + p->jpos, .len = len, .dsync = dsync };
    if (dsync) nasd_before_wait();   /* a device sync: an NFS leader hands its loop over */
    uint64_t t0 = vp_now_ns();
    for (int i = 0; i < nc; i++) jobs[i] = (struct vp_job){ jcopy_write, &jc[i] };
    vp_par_run(p, jobs, nc);
    atomic_fetch_add(&p->prof.jnl_ns, vp_now_ns() - t0);
    atomic_fetch_add(&p->prof.jnl_bytes, (uint64_t)len * nc);
    atomic_fetch_add(&p->prof.jnl_data_bytes, (uint64_t)ndata * VP_SECTOR * nc);
    for (int i = 0; i < nc; i++) {
        if (jc[i].ok) { ok++; continue; }
        atomic_fetch_add(&p->m[jc[i].m].wr_err, 1);
        vp_member_fault(p, jc[i].m, "journal write failed");
    }
    free(b);
    free(iov);
    free(bounce);
    if (!ok) return -EIO;
    p->jpos += len;
    p->seq++;
    return 0;
}

static int write_batch(struct vpool *p, const struct vp_rec *recs, size_t nrec, const struct vp_wsect *ws, size_t nws)
{
    return write_batch_ex(p, recs, nrec, ws, nws, true);
}

static size_t batch_len(size_t nrec, size_t ndata)
{
    size_t hdr_bytes = sizeof(struct jhdr) + nrec * sizeof(struct vp_rec);
    return ((hdr_bytes + VP_SECTOR - 1) / VP_SECTOR + ndata) * VP_SECTOR;
}

int vp_journal_room(struct vpool *p, size_t nrec, size_t ndata)
{
    size_t len = batch_len(nrec + ndata, ndata);
    if (len > p->jnl_size) return -E2BIG;
    return p->jpos + len > p->jnl_size ? vp_checkpoint(p) : 0;
}

int vp_journal_batch(struct vpool *p, const struct vp_rec *recs, size_t nrec, const struct vp_wsect *ws, size_t nws)
{
    return write_batch(p, recs, nrec, ws, nws);
}

/* A record that continues a snapshot copy: its CSUMs, or on format 3 its location
 * records (those name a source) */
static bool copy_rec(const struct vp_rec *r)
{
    return r->type == VP_REC_CSUM || (r->type == VP_REC_LOC && vp_loc_src1(r));
}

/* a location or checksum record (format 3 commits write one per sector) */
static bool sect_rec(const struct vp_rec *r) { return r->type == VP_REC_LOC || r->type == VP_REC_CSUM; }

/* Records in the batch from recs[k] of nr: up to VP_BATCH_RECS, but never ending inside
 * a snapshot copy's records (ALLOC, its CSUMs or locations, the old unit's LIFE: at most
 * 258; a whole-unit copy's start with a ZERO of the unit), since half a copy leaves two
 * units for one extent, nor inside the sector records of one 64 KiB chunk (an lz4 chunk's
 * only make sense together). Only those, a ZERO right after an ALLOC, and a LIFE right
 * after a copy's record or an ALLOC (and its ZERO) continue a copy (unmaps and rollbacks
 * add long runs of LIFE of their own). */
static size_t next_batch(const struct vp_rec *recs, size_t k, size_t nr)
{
    size_t c = nr - k < VP_BATCH_RECS ? nr - k : VP_BATCH_RECS;
    while (k + c < nr && c > 1) {
        const struct vp_rec *r = &recs[k + c];
        bool after_alloc = r[-1].type == VP_REC_ALLOC || (r[-1].type == VP_REC_ZERO && r[-2].type == VP_REC_ALLOC);
        bool inside = copy_rec(r) || (r->type == VP_REC_LIFE && (copy_rec(&r[-1]) || after_alloc)) ||
                      (r->type == VP_REC_ZERO && r[-1].type == VP_REC_ALLOC);
        inside |= sect_rec(r) && sect_rec(&r[-1]) && r->a / VP_CHUNK_SECT == r[-1].a / VP_CHUNK_SECT;
        if (!inside) break;
        c--;
    }
    if (c == 1 && nr - k > 1) {   /* no end outside a copy: a run of checksum records (lz4 chunks of zeros) */
        c = nr - k < VP_BATCH_RECS ? nr - k : VP_BATCH_RECS;
        while (k + c < nr && c > 1 && sect_rec(&recs[k + c]) && sect_rec(&recs[k + c - 1]) &&
               recs[k + c].a / VP_CHUNK_SECT == recs[k + c - 1].a / VP_CHUNK_SECT) c--;
    }
    return c;
}

/* Pending records that take more than one batch. No checkpoint may fall between their
 * batches: replaying the first ones over tables that already hold the later changes
 * would undo those (a unit freed since would come back). So room for all of them
 * first or, where they would fill much of the journal, a checkpoint instead (the
 * tables hold every record's change). */
static uint64_t records_len(const struct vp_rec *recs, size_t nr)
{
    uint64_t total = 0;
    for (size_t k = 0; k < nr;) {
        size_t c = next_batch(recs, k, nr);
        total += batch_len(c, 0);
        k += c;
    }
    return total;
}

/* The checkpoint write_records() would make for these records, made now: afterwards the
 * same records, or fewer, are written without one (a log pool's commit filters its
 * records after this, see vp_xl_commit). */
int vp_journal_records_room(struct vpool *p, const struct vp_rec *recs, size_t nr)
{
    uint64_t total = records_len(recs, nr);
    return total > p->jnl_size / 4 || p->jpos + total > p->jnl_size ? vp_checkpoint(p) : 0;
}

static int write_records(struct vpool *p, const struct vp_rec *recs, size_t nr, bool dsync)
{
    uint64_t total = records_len(recs, nr);
    if (total > p->jnl_size / 4) return vp_checkpoint(p);
    int rc = p->jpos + total > p->jnl_size ? vp_checkpoint(p) : 0;
    for (size_t k = 0; k < nr && !rc;) {
        size_t c = next_batch(recs, k, nr);   /* the same batches as counted */
        rc = write_batch_ex(p, recs + k, c, NULL, 0, dsync);
        k += c;
    }
    return rc;
}

/* Intent-only is safe where a sector's old content cannot be needed to rebuild a
 * neighbour during replay: all members online (no degraded read-modify-write) and not
 * an lz4 chunk (whose sectors only make sense together). */
static void choose_intents(struct vpool *p, struct vp_wsect *ws, size_t n, bool durable, bool small_direct)
{
    bool ok = !(durable && n <= VP_SMALL_DURABLE && (!atomic_load(&p->unsynced) || small_direct));
    ok = ok && vp_all_online(p);
    for (size_t i = 0; i < n; i++) {
        ws[i].intent = 0;
        if (!ok || !ws[i].data) continue;
        uint64_t s = ws[i].sect;
        struct vp_vol *v = vp_vol_of_sect(p, s);
        ws[i].intent = !(v && (v->flags & VPOOL_VOL_LZ4)) && !vp_bit(p->jbits, s);
    }
}

/* Appends the dlisted sectors (read back from the members) to ws, except those the cache
 * holds a newer version of (vp_direct_write dropped older ones) or that were unmapped. */
static int add_direct(struct vpool *p, struct vp_wsect **ws, size_t *n, uint8_t **buf)
{
    size_t n0 = *n, k = p->dlist_n;
    struct vp_wsect *w = realloc(*ws, (n0 + k) * sizeof *w);
    if (!w) return -ENOMEM;
    *ws = w;
    if (posix_memalign((void **)buf, 64, k * VP_SECTOR)) { *buf = NULL; return -ENOMEM; }
    for (size_t i = 0; i < k; i++) {
        uint64_t s = p->dlist[i];
        uint32_t cs = vp_csum_get(p, s);
        bool skip = !vp_has_data(cs);
        for (size_t j = 0; j < n0 && !skip; j++) skip = w[j].sect == s;
        if (skip) continue;
        uint8_t *d = *buf + i * VP_SECTOR;
        int rc = vp_read_run(p, s, 1, d);
        if (rc) return rc;
        w[(*n)++] = (struct vp_wsect){ .sect = s, .csum = cs, .data = d };
    }
    return 0;
}

/* Format 3 only: its records need not be durable before anything (the log never
 * overwrites a live sector, and replay keeps a location only where the data matches), so
 * they are not synchronous writes: a durable commit syncs the members after them anyway
 * (one flush instead of two), and a write-back commit did not wait for the disk's flush
 * at all (O_DIRECT members: 19 ms per commit, most of a 32 MiB commit's time). Replay
 * stops at the first batch that did not make it, so a power loss keeps a prefix. */
int vp_journal_records(struct vpool *p, const struct vp_rec *recs, size_t n) { return write_records(p, recs, n, !p->xl); }

size_t vp_commit_take(struct vpool *p, struct vp_wsect **ws, struct vp_rec **recs, size_t *nrec)
{
    pthread_rwlock_wrlock(&p->put_lock);
    size_t n = vc_collect_dirty(p->cache, ws);
    pthread_rwlock_unlock(&p->put_lock);
    if (n == SIZE_MAX) return n;
    pthread_mutex_lock(&p->pend_lock);   /* after collecting: an allocation precedes its data */
    *recs = p->pend;
    *nrec = p->npend;
    p->pend = NULL; p->npend = p->pend_cap = 0;
    pthread_mutex_unlock(&p->pend_lock);
    return n;
}

int vp_journal_small(struct vpool *p, const struct vp_rec *recs, size_t nrec, const struct vp_wsect *ws, size_t nws)
{
    if (nrec + nws > VP_BATCH_RECS) return -E2BIG;
    return write_batch(p, recs, nrec, ws, nws);
}

int vp_commit(struct vpool *p) { return vp_commit_ex(p, true); }

int vp_writeback(struct vpool *p)
{
    vp_commit_lock(p);
    int rc = vp_dirty_over(p, p->dirty_soft) ? vp_commit_ex(p, false) : 0;
    pthread_mutex_unlock(&p->commit_lock);
    return rc;
}

/* Caller holds commit_lock. */
int vp_commit_ex(struct vpool *p, bool durable)
{
    if (p->xl) return vp_xl_commit(p, durable);
    if (atomic_load(&p->closed) == 2) return -ENXIO;
    uint64_t target = atomic_load(&p->write_gen);
    struct vp_wsect *ws;
    uint8_t *extra = NULL;
    struct vp_rec *recs;
    size_t nrec, n = vp_commit_take(p, &ws, &recs, &nrec);
    if (n == SIZE_MAX) return -ENOMEM;

    /* a durable commit makes the checksums of direct writes durable too (vpool_direct.c) */
    bool dckpt = durable && p->dlist_over;
    size_t dlisted = 0;
    /* when a few direct-written sectors are all the unsynced in-place data (a small write
     * then COMMIT), their content is journaled like a small cached commit's: one
     * synchronous journal write instead of intents plus a member sync */
    bool small_direct = durable && !dckpt && p->dlist_n && atomic_load(&p->unsynced) && p->unsynced_direct &&
                        n + p->dlist_n <= VP_SMALL_DURABLE && p->layout == VPOOL_STRIPE;
    uint8_t *dbuf = NULL;
    if (small_direct) dlisted = p->dlist_n;
    else if (durable && p->dlist_n && !dckpt) {
        struct vp_rec *nr = realloc(recs, (nrec + p->dlist_n) * sizeof *nr);
        if (!nr) dckpt = true;
        else {
            recs = nr;
            for (size_t k = 0; k < p->dlist_n; k++) {
                uint32_t cs = vp_csum_get(p, p->dlist[k]);
                if (!vp_has_data(cs)) continue;   /* unmapped since: its record covers it */
                recs[nrec++] = (struct vp_rec){ .type = VP_REC_INTENT, .a = p->dlist[k], .a32 = cs };
            }
            dlisted = p->dlist_n;
        }
    }
    int rc = 0;
    bool recs_journaled = false;
    struct vp_wsect *lent = NULL;   /* the cache's buffers as collected (ws gets sorted, lz4 replaces it) */
    size_t nlent = n;
    bool committed = false;
    if (nrec && p->cow_unsynced) {   /* snapshot copies first, then the records that switch to them */
        uint64_t t0 = vp_now_ns();
        if (vp_sync_members(p) < 0 || vp_pool_state(p) == VPOOL_FAULTED) {
            rc = -EIO;
            if (n) vc_release(p->cache, ws, n, false, false);
            goto out;
        }
        atomic_fetch_add(&p->prof.sync_ns, vp_now_ns() - t0);
        p->cow_unsynced = false;
    }
    if (n) {
        lent = malloc(n * sizeof *lent);
        if (!lent) { vc_release(p->cache, ws, n, false, false); rc = -ENOMEM; nlent = 0; goto out; }
        memcpy(lent, ws, n * sizeof *lent);
        rc = vp_lz4_commit_prepare(p, &ws, &n, &extra);
        if (rc) goto out;
    }
    if (small_direct && (rc = add_direct(p, &ws, &n, &dbuf))) goto out;
    if (n) {
        for (size_t i = 0; i < n; i++) if (ws[i].data) ws[i].csum = vp_csum_of(ws[i].data);
        qsort(ws, n, sizeof *ws, vp_cmp_wsect);
        choose_intents(p, ws, n, durable, small_direct);
    }
    if (!n && !nrec) goto done;
    atomic_fetch_add(&p->prof.commits, 1);

    size_t max_sect = p->jnl_size / 2 / VP_SECTOR;
    if (max_sect > VP_BATCH_MAX) max_sect = VP_BATCH_MAX;   /* one pwritev2 per journal copy */
    size_t i = 0;
    bool any_intent = false;
    do {
        size_t cnt = 0, nd = 0;
        while (i + cnt < n && cnt < VP_BATCH_RECS) {
            bool d = ws[i + cnt].data && !ws[i + cnt].intent;
            if (d && nd == max_sect) break;
            nd += d;
            any_intent |= ws[i + cnt].intent != 0;
            cnt++;
        }
        size_t nr = i == 0 ? nrec : 0;
        if (nr > VP_BATCH_RECS) {   /* very many unmaps, intents or copies: write them alone first */
            rc = write_records(p, recs, nr, true);
            nr = 0;
        }
        if (!rc) rc = write_batch(p, recs, nr, ws + i, cnt);
        if (!rc && !recs_journaled) p->frees_pending = false;   /* every FREE came under commit_lock */
        if (!rc) recs_journaled = true;
        uint64_t t0 = vp_now_ns();
        if (!rc && cnt) rc = vp_apply_writes(p, ws + i, cnt);
        atomic_fetch_add(&p->prof.apply_ns, vp_now_ns() - t0);
        if (rc) break;
        i += cnt;
    } while (i < n);
    if (any_intent) { atomic_store(&p->unsynced, 1); p->unsynced_direct = false; }
    if (rc) goto out;
    committed = true;
done:
    if (dlisted) vp_direct_clear(p);
    if (dckpt) {   /* more direct writes than records are worth: sync and write the tables */
        if ((rc = vp_checkpoint(p))) goto out;
    } else if (small_direct && committed) {   /* their data is in the journal now */
        atomic_store(&p->unsynced, 0);
        p->unsynced_direct = false;
    } else if (durable && atomic_load(&p->unsynced)) {   /* in-place data of intents becomes durable */
        uint64_t t0 = vp_now_ns();
        /* every member counts: a member whose sync failed is faulted, and one too many
         * makes the pool FAULTED (one good member is not enough as it is for journal copies) */
        if (vp_sync_members(p) < 0 || vp_pool_state(p) == VPOOL_FAULTED) { rc = -EIO; goto out; }
        atomic_fetch_add(&p->prof.sync_ns, vp_now_ns() - t0);
        atomic_store(&p->unsynced, 0);
        p->unsynced_direct = false;
        p->synced_seq = p->seq;
        p->synced_unlogged = true;
    }
    if (durable && atomic_load(&p->durable_gen) < target) atomic_store(&p->durable_gen, target);
    if (atomic_load(&p->need_checkpoint)) rc = vp_checkpoint(p);
out:
    if (rc && nrec && !recs_journaled) vp_pend_restore(p, recs, nrec);
    if (rc) log_err("vpool %s: commit failed: %s", p->name, strerror(-rc));
    if (lent) vc_release(p->cache, lent, nlent, committed, p->direct_io);   /* else the page cache has it */
    free(lent); free(ws); free(extra); free(recs); free(dbuf);
    return rc;
}

int vp_flush_to(struct vpool *p, uint64_t target)
{
    if (atomic_load(&p->durable_gen) >= target) return 0;
    vp_commit_lock(p);
    int rc = atomic_load(&p->durable_gen) >= target ? 0 : vp_commit(p);
    pthread_mutex_unlock(&p->commit_lock);
    return rc;
}

/* ---------------- background flusher ---------------- */

/* Dirty data is committed within VP_DIRTY_EXPIRE_S (+1) seconds of the flusher first
 * seeing it after a commit, however little: the write-back budget may be gigabytes, and
 * a crash or kill -9 should not cost more than a few seconds of writes nobody flushed
 * (ZFS's transaction groups close every 5 s). */
#define VP_DIRTY_EXPIRE_S 5
#define VP_RELEASE_IDLE_S 5   /* idle ticks before free cache buffers go back to the system */
static bool expired(struct vpool *p)
{
    uint64_t now = vp_now_ns(), commits = atomic_load(&p->prof.commits);
    if (!vc_dirty_count(p->cache)) { p->dirty_since_ns = 0; return false; }
    if (!p->dirty_since_ns || commits != p->dirty_since_commit) {   /* dirtied since that commit */
        p->dirty_since_ns = now;
        p->dirty_since_commit = commits;
        return false;
    }
    return now - p->dirty_since_ns >= VP_DIRTY_EXPIRE_S * 1000000000ull;
}

static void *flusher_main(void *arg)
{
    struct vpool *p = arg;
    pthread_mutex_lock(&p->flush_mu);
    while (!p->flush_stop) {
        bool old = false;
        if (!p->flush_kick) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&p->flush_cv, &p->flush_mu, &ts);
            if (p->flush_stop) break;
            /* a FAULTED pool's data waits for clear (or close): no commits every few
             * seconds that fail, and it does not count against the other pools' budget */
            bool faulted = vp_pool_state(p) == VPOOL_FAULTED;
            vc_count_dirty(p->cache, !faulted);
            old = !faulted && expired(p);
            if (old && p->flush_skip) { p->flush_skip--; old = false; }   /* after a failure */
            if (!p->flush_kick && !old) {
                uint64_t g = atomic_load(&p->write_gen);
                p->idle_ticks = g == p->idle_gen ? p->idle_ticks + 1 : 0;
                p->idle_gen = g;
                /* sectors kept over the read cache's size for reuse: freed when the pool was
                 * idle for a tick, or when all pools' cached sectors pass the soft limit. The
                 * buffers' memory goes back to the system after VP_RELEASE_IDLE_S idle ticks, or
                 * when with all pools' cached sectors it passes the hard limit (a pool written
                 * every few seconds): fresh memory costs a page fault per 4 KiB, 10 us on the
                 * development VM, so a write of new sectors after a short pause (a snapshot
                 * rewrite after the fill's flush) ran at 400 MB/s */
                bool pressure = vc_entries_all() > p->dirty_soft;
                bool over = vc_entries_all() + vc_unreleased_all() > p->dirty_max;
                if (p->idle_ticks || pressure || over) {
                    bool release = p->idle_ticks >= VP_RELEASE_IDLE_S || over;
                    pthread_mutex_unlock(&p->flush_mu);
                    size_t freed = vc_trim(p->cache, release);
                    /* glibc keeps the freed entries' pages otherwise; it walks every arena */
                    if (release && (freed > 4096 || p->idle_ticks == VP_RELEASE_IDLE_S)) malloc_trim(0);
                    pthread_mutex_lock(&p->flush_mu);
                }
                continue;
            }
        }
        p->flush_kick = false;
        pthread_mutex_unlock(&p->flush_mu);
        atomic_store(&p->flush_pending, 0);
        if (old) {
            vp_commit_lock(p);
            int rc = vp_commit_ex(p, false);
            pthread_mutex_unlock(&p->commit_lock);
            /* failing (out of space, a member gone bad): retry after 1, 2, 4 .. 64 ticks */
            p->flush_fails = rc ? (p->flush_fails ? p->flush_fails * 2 : 1) : 0;
            if (p->flush_fails > 64) p->flush_fails = 64;
            p->flush_skip = p->flush_fails;
        } else vp_writeback(p);
        pthread_mutex_lock(&p->flush_mu);
    }
    pthread_mutex_unlock(&p->flush_mu);
    return NULL;
}

void vp_flusher_start(struct vpool *p)
{
    p->flush_stop = p->flush_kick = false;
    p->flusher_on = pthread_create(&p->flusher, NULL, flusher_main, p) == 0;
}

void vp_flusher_stop(struct vpool *p)
{
    if (!p->flusher_on) return;
    pthread_mutex_lock(&p->flush_mu);
    p->flush_stop = true;
    pthread_cond_signal(&p->flush_cv);
    pthread_mutex_unlock(&p->flush_mu);
    pthread_join(p->flusher, NULL);
    p->flusher_on = false;
}

void vp_flusher_kick(struct vpool *p)
{
    if (!p->flusher_on || atomic_exchange(&p->flush_pending, 1)) return;
    pthread_mutex_lock(&p->flush_mu);
    p->flush_kick = true;
    pthread_cond_signal(&p->flush_cv);
    pthread_mutex_unlock(&p->flush_mu);
}

/* ---------------- replay ---------------- */

static uint8_t *read_batch(struct vpool *p, int m, uint64_t pos, uint64_t seq, uint64_t *len_out)
{
    uint8_t hp[VP_SECTOR];
    if (pos + VP_SECTOR > p->jnl_size || vp_mread(p, m, hp, VP_SECTOR, VP_JOURNAL_OFF + pos) < 0) return NULL;
    struct jhdr *h = (struct jhdr *)hp;
    if (h->magic != VP_JNL_MAGIC || memcmp(h->pool, p->uuid, 16) || h->seq != seq) return NULL;
    uint64_t len = ((uint64_t)h->hdr_pages + h->data_pages) * VP_SECTOR;
    if (!h->hdr_pages || len > p->jnl_size - pos ||
        sizeof *h + (uint64_t)h->nrec * sizeof(struct vp_rec) > (uint64_t)h->hdr_pages * VP_SECTOR) return NULL;
    uint8_t *b = malloc(len);
    if (!b) return NULL;
    if (vp_mread(p, m, b, len, VP_JOURNAL_OFF + pos) < 0) { free(b); return NULL; }
    h = (struct jhdr *)b;
    uint64_t c = h->csum;
    h->csum = 0;
    if (XXH3_64bits_withSeed(b, len, seq) != c) { free(b); return NULL; }
    *len_out = len;
    return b;
}

static int apply_batch(struct vpool *p, uint8_t *b, struct vp_intents *it, char *err, size_t errlen)
{
    struct jhdr *h = (struct jhdr *)b;
    struct vp_rec *r = (struct vp_rec *)(b + sizeof *h);
    uint8_t *d = b + (uint64_t)h->hdr_pages * VP_SECTOR, *dend = d + (uint64_t)h->data_pages * VP_SECTOR;
    struct vp_wsect *ws = calloc(h->nrec ? h->nrec : 1, sizeof *ws);
    size_t nws = 0;
    if (!ws) return -ENOMEM;
    vp_intents_batch(it, h->seq);
    if (p->xl) vp_xl_replay_batch(p);
    for (uint32_t i = 0; i < h->nrec; i++) {
        const struct vp_rec *x = &r[i];
        /* format 3 writes nothing in place: no data, intents or regions in its journal */
        bool in_place = x->type == VP_REC_INTENT || x->type == VP_REC_REGION;
        if (p->xl ? in_place : x->type == VP_REC_LOC) goto bad;
        if (p->xl && x->type == VP_REC_WRITE) {   /* the data of a location record before it */
            if (d >= dend || vp_xl_replay_data(p, x, d)) goto bad;
            d += VP_SECTOR;
            continue;
        }
        switch (x->type) {
        case VP_REC_LOC:
            if (vp_xl_replay_loc(p, x)) goto bad;
            break;
        case VP_REC_WRITE:
            if (x->a >= p->n_sect || d >= dend) goto bad;
            ws[nws++] = (struct vp_wsect){ .sect = x->a, .csum = x->a32, .data = d };
            d += VP_SECTOR;
            if (vp_intents_override(it, x->a, 1)) goto nomem;
            break;
        case VP_REC_CSUM:   /* at once, in record order: a later ZERO, FREE or INTENT of the sector builds on it */
            if (x->a >= p->n_sect) goto bad;
            if (vp_intents_override(it, x->a, 1)) goto nomem;
            if (p->csum[x->a] != x->a32) vp_csum_set(p, x->a, x->a32);
            break;
        case VP_REC_INTENT:
            if (x->a >= p->n_sect || x->a32 == VP_CSUM_ZERO || x->a32 == VP_CSUM_MARK) goto bad;
            if (vp_intents_add(it, x->a, p->csum[x->a], x->a32)) goto nomem;
            vp_csum_set(p, x->a, x->a32);
            break;
        case VP_REC_ZERO:
            if (x->a > p->n_sect || x->b > p->n_sect - x->a) goto bad;
            for (uint64_t s = x->a; s < x->a + x->b; s++) if (p->csum[s]) vp_csum_set(p, s, 0);
            if (vp_intents_override(it, x->a, x->b)) goto nomem;
            break;
        case VP_REC_ALLOC:
            if (x->a >= p->n_au || !x->a32 || x->a32 > VP_MAX_VOLS) goto bad;
            vp_au_set(p, x->a, x->a32, (uint32_t)x->b);
            vp_au_set_life(p, x->a, (uint32_t)(x->b >> 32), 0);
            break;
        case VP_REC_REGION:
            if (x->a >= p->nregions) goto bad;
            vp_bit_set(p->rbits, x->a);
            break;
        case VP_REC_SYNCED:
            if (x->a >= h->seq) goto bad;
            vp_intents_synced(it, x->a);
            break;
        case VP_REC_LIFE:
            if (x->a >= p->n_au) goto bad;
            vp_au_set_life(p, x->a, p->au[x->a].birth, x->a32);
            break;
        case VP_REC_FREE:
            if (x->a >= p->n_au) goto bad;
            vp_au_set(p, x->a, 0, 0);
            vp_au_clear(p, x->a, false);
            if (vp_intents_override(it, x->a * VP_AU_SECT, VP_AU_SECT)) goto nomem;
            break;
        default:
            goto bad;
        }
    }
    qsort(ws, nws, sizeof *ws, vp_cmp_wsect);
    int rc = vp_apply_writes(p, ws, nws);
    free(ws);
    return rc;
bad:
    free(ws);
    vp_set_err(err, errlen, "journal batch %llu has an invalid record", (unsigned long long)h->seq);
    return -EBADMSG;
nomem:
    free(ws);
    return -ENOMEM;
}

int vp_replay(struct vpool *p, uint64_t from_seq, char *err, size_t errlen)
{
    uint64_t pos = 0, seq = from_seq + 1, applied = 0;
    struct vp_intents *it = vp_intents_new();
    if (!it) return -ENOMEM;
    for (;;) {
        uint8_t *b = NULL;
        uint64_t len = 0;
        for (int m = 0; m < p->n && !b; m++)
            if (vp_readable(p, m) || atomic_load(&p->m[m].state) == VPOOL_M_RESILVERING)
                b = read_batch(p, m, pos, seq, &len);
        if (!b) break;
        int rc = apply_batch(p, b, it, err, errlen);
        free(b);
        if (rc) { vp_intents_resolve(p, it); return rc; }
        pos += len;
        p->seq = seq++;
        applied++;
    }
    p->jpos = pos;
    /* Format 3 writes batches unsynced (vp_journal_records): after a power loss one may
     * have made it beyond the first that did not, with the next number. New batches
     * start far beyond every number the journal can hold, so a later replay never takes
     * that stale one for theirs. */
    if (p->xl) p->seq += p->jnl_size / VP_SECTOR + 1;
    int rc = vp_intents_resolve(p, it);
    if (!rc) rc = vp_regions_resolve(p);
    if (rc) return rc;
    if (applied) log_info("vpool %s: replayed %llu journal batches", p->name, (unsigned long long)applied);
    return 0;
}

uint64_t vp_debug_journal_max_seq(struct vpool *p)
{
    uint64_t max = 0;
    uint8_t hp[VP_SECTOR];
    const struct jhdr *h = (const struct jhdr *)hp;
    for (int m = 0; m < p->n; m++)
        for (uint64_t pos = 0; vp_readable(p, m) && pos + VP_SECTOR <= p->jnl_size; pos += VP_SECTOR)
            if (vp_mread(p, m, hp, VP_SECTOR, VP_JOURNAL_OFF + pos) == 0 && h->magic == VP_JNL_MAGIC &&
                !memcmp(h->pool, p->uuid, 16) && h->seq > max)
                max = h->seq;
    return max;
}

void vp_debug_prof(struct vpool *p, struct vp_prof *o)
{
    o->commits = atomic_load(&p->prof.commits);
    o->jnl_ns = atomic_load(&p->prof.jnl_ns);
    o->apply_ns = atomic_load(&p->prof.apply_ns);
    o->sync_ns = atomic_load(&p->prof.sync_ns);
    o->jnl_bytes = atomic_load(&p->prof.jnl_bytes);
    o->jnl_data_bytes = atomic_load(&p->prof.jnl_data_bytes);
    o->inplace_bytes = atomic_load(&p->prof.inplace_bytes);
    o->checkpoints = atomic_load(&p->prof.checkpoints);
    o->meta_bytes = atomic_load(&p->prof.meta_bytes);
    o->ckpt_ns = atomic_load(&p->prof.ckpt_ns);
}
