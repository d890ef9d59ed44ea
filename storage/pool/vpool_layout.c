/* Data placement: verified reads with repair from redundancy, in-place application of
 * committed writes (raidz1 parity by reconstruct-write, read-modify-write when
 * degraded), row rebuild for resilver and row verification for scrub.
 * Everything that writes in place holds the row lock; the read fast path takes no
 * lock and falls back to the locked path on a checksum mismatch. */
#include "storage/pool/vpool_impl.h"
#include "util/log.h"
#include <isa-l.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/uio.h>

static void *xalloc(size_t len)
{
    void *b = NULL;
    return posix_memalign(&b, 64, len) ? NULL : b;
}

/* dst = XOR of n >= 2 sectors */
static void xor_sources(uint8_t *dst, const uint8_t *const *src, int n)
{
    uint64_t *d = (uint64_t *)dst;
    for (size_t i = 0; i < VP_SECTOR / 8; i++) {
        uint64_t v = 0;
        for (int k = 0; k < n; k++) { uint64_t x; memcpy(&x, src[k] + i * 8, 8); v ^= x; }
        d[i] = v;
    }
}


/* ---------------- reads ---------------- */

/* Locked path for one sector: the data at physical sector phys (= the pool sector on
 * formats 1-2) must match cs; else reconstruct and repair. s names it in messages.
 * quiet: only say whether it matches (no repair, counts or messages: replay checks
 * locations that a crash may have left torn). */
static int read_at_locked(struct vpool *p, uint64_t phys, uint32_t cs, uint8_t *buf, uint64_t s, bool quiet)
{
    if (!vp_has_data(cs)) { memset(buf, 0, VP_SECTOR); return 0; }
    int col;
    uint64_t row = vp_row_of(p, phys, &col);
    unsigned w = phys % VP_CHUNK_SECT;
    uint64_t off = vp_moff(p, row, w);
    uint8_t *tmp = xalloc(VP_SECTOR);
    if (!tmp) return -ENOMEM;
    int rc = -EIO;

    if (p->layout == VPOOL_MIRROR) {
        uint32_t bad = 0;
        bool good = false;
        for (int m = 0; m < p->n; m++) {
            if (!vp_readable(p, m)) continue;
            bool read_ok = vp_mread(p, m, tmp, VP_SECTOR, off) == 0;
            if (read_ok && vp_sect_ok(cs, tmp)) {
                if (!good) memcpy(buf, tmp, VP_SECTOR);
                good = true;
            } else {
                bad |= 1u << m;
                if (read_ok && !quiet) vp_member_ck_err(p, m);
            }
        }
        if (good && quiet) rc = 0;
        else if (good) {
            rc = 0;
            for (int m = 0; m < p->n; m++) {
                if (!(bad & (1u << m)) || !vp_readable(p, m)) continue;
                if (vp_mwrite(p, m, buf, VP_SECTOR, off) == 0) atomic_fetch_add(&p->repaired, 1);
            }
        }
    } else {
        int dm = vp_col_member(p, row, col);
        bool dm_bad = false;
        if (vp_readable(p, dm)) {
            bool read_ok = vp_mread(p, dm, buf, VP_SECTOR, off) == 0;
            if (read_ok && vp_sect_ok(cs, buf)) { free(tmp); return 0; }
            dm_bad = vp_readable(p, dm) && !quiet;   /* still usable: rewrite it once rebuilt */
            if (read_ok && !quiet) vp_member_ck_err(p, dm);
        }
        if (p->layout == VPOOL_RAIDZ1) {
            memset(buf, 0, VP_SECTOR);
            if (vp_xor_members(p, off, 1u << dm, buf, tmp) && vp_sect_ok(cs, buf)) {
                rc = 0;
                if (dm_bad && vp_mwrite(p, dm, buf, VP_SECTOR, off) == 0) atomic_fetch_add(&p->repaired, 1);
            }
        }
    }
    if (rc && !quiet) {
        atomic_fetch_add(&p->unrepairable, 1);
        log_warn("vpool %s: unrecoverable checksum error at pool sector %llu", p->name, (unsigned long long)s);
    }
    free(tmp);
    return rc;
}

static int read_locked(struct vpool *p, uint64_t s, uint8_t *buf)
{
    return read_at_locked(p, s, vp_csum_get(p, s), buf, s, false);
}

int vp_read_phys(struct vpool *p, uint64_t phys, uint32_t cs, uint8_t *buf, uint64_t s, bool quiet)
{
    int col;
    uint64_t row = vp_row_of(p, phys, &col);
    pthread_mutex_t *l = vp_rowlock(p, row);
    pthread_mutex_lock(l);
    int rc = read_at_locked(p, phys, cs, buf, s, quiet);
    pthread_mutex_unlock(l);
    return rc;
}

static int read_slow(struct vpool *p, uint64_t s, uint8_t *buf)
{
    int col;
    uint64_t row = vp_row_of(p, s, &col);
    pthread_mutex_t *l = vp_rowlock(p, row);
    pthread_mutex_lock(l);
    int rc = read_locked(p, s, buf);
    pthread_mutex_unlock(l);
    return rc;
}

static int read_run(struct vpool *p, uint64_t s, unsigned count, uint8_t *buf, bool locked)
{
    int col;
    uint64_t row = vp_row_of(p, s, &col);
    unsigned w0 = s % VP_CHUNK_SECT;
    if (w0 + count > VP_CHUNK_SECT || s + count > p->n_sect) return -EINVAL;
    uint32_t cs[VP_CHUNK_SECT];
    int lo = -1, hi = -1;
    for (unsigned i = 0; i < count; i++) {
        cs[i] = vp_csum_get(p, s + i);
        if (vp_has_data(cs[i])) { if (lo < 0) lo = i; hi = i; }
    }
    int m;
    if (p->layout == VPOOL_MIRROR) {
        m = (int)(row % p->n);
        for (int k = 0; k < p->n && !vp_readable(p, m); k++) m = (m + 1) % p->n;
    } else m = vp_col_member(p, row, col);
    bool direct = lo >= 0 && vp_readable(p, m) &&
                  vp_mread_checked(p, m, buf + lo * VP_SECTOR, (hi - lo + 1) * VP_SECTOR, vp_moff(p, row, w0 + lo)) == 0;
    for (unsigned i = 0; i < count; i++) {
        uint8_t *b = buf + i * VP_SECTOR;
        if (!vp_has_data(cs[i])) { memset(b, 0, VP_SECTOR); continue; }
        if (direct && vp_sect_ok(cs[i], b)) continue;
        int rc = locked ? read_locked(p, s + i, b) : read_slow(p, s + i, b);
        if (rc) return rc;
    }
    return 0;
}

int vp_read_run(struct vpool *p, uint64_t s, unsigned count, uint8_t *buf)
{
    if (p->xl) return vp_xl_read_run(p, s, count, buf, false);
    return read_run(p, s, count, buf, false);
}

/* format 3: the caller holds the translation read lock instead of the row lock */
int vp_read_run_locked(struct vpool *p, uint64_t s, unsigned count, uint8_t *buf)
{
    if (p->xl) return vp_xl_read_run(p, s, count, buf, true);
    return read_run(p, s, count, buf, true);
}

/* ---------------- writes ---------------- */

/* A batch is applied in three steps: parity is computed row by row and every member
 * write is queued (data sectors point into the batch, parity into an arena); then
 * each member's queue goes out from its own thread, adjacent pieces merged into one
 * pwritev (a sequential batch becomes one or two writes per member, and no two threads
 * contend for one file's inode lock); then the checksums are published. The row locks
 * of every row in the batch are held throughout (taken in index order). */
struct apply_ctx {
    struct vpool *p;
    struct vp_wqueue q[VP_MAXM];
    size_t par_used;             /* bytes of p->parena handed out (parity of queued rows) */
    uint8_t *col[VP_MAXM], *tmp, *dpar;   /* scratch: columns read, degraded parity */
    bool oom;
};

int vp_wq_add(struct vp_wqueue *q, uint64_t off, const uint8_t *buf, size_t len)
{
    if (q->n && q->e[q->n - 1].off + q->e[q->n - 1].len == off && q->e[q->n - 1].buf + q->e[q->n - 1].len == buf) {
        q->e[q->n - 1].len += len;   /* contiguous in memory too */
        return 0;
    }
    if (q->n == q->cap) {
        size_t nc = q->cap ? q->cap * 2 : 256;
        struct vp_wq_ent *ne = realloc(q->e, nc * sizeof *ne);
        if (!ne) return -ENOMEM;
        q->e = ne; q->cap = nc;
    }
    q->e[q->n++] = (struct vp_wq_ent){ off, buf, len };
    return 0;
}

static void q_add(struct apply_ctx *a, int m, uint64_t off, const uint8_t *buf, size_t len)
{
    if (vp_wq_add(&a->q[m], off, buf, len)) a->oom = true;
}

/* parity space for one row: len bytes, 64 byte aligned, from the pool's arena (sized
 * by vp_apply_writes beforehand, so it never moves while writes are queued) */
static uint8_t *par_get(struct apply_ctx *a, size_t len)
{
    if (a->par_used + len > a->p->parena_cap) return NULL;
    uint8_t *b = a->p->parena + a->par_used;
    a->par_used += (len + 63) & ~(size_t)63;
    return b;
}

static void queue_runs(struct apply_ctx *a, int m, uint64_t row, const uint8_t *const *data)
{
    for (unsigned w = 0; w < VP_CHUNK_SECT; w++)
        if (data[w]) q_add(a, m, vp_moff(a->p, row, w), data[w], VP_SECTOR);
}

struct flush_job { struct vpool *p; int m; struct vp_wqueue *q; };

static void *flush_member(void *arg)
{
    struct flush_job *j = arg;
    struct vp_wqueue *q = j->q;
    struct iovec iov[VP_IOV_MAX];
    for (size_t i = 0; i < q->n;) {
        uint64_t off = q->e[i].off, end = off;
        int k = 0;
        while (i < q->n && k < VP_IOV_MAX && q->e[i].off == end) {
            iov[k++] = (struct iovec){ (void *)q->e[i].buf, q->e[i].len };
            end += q->e[i].len;
            i++;
        }
        if (vp_mwritev(j->p, j->m, iov, k, off) < 0) q->err = -EIO;
    }
    return NULL;
}

/* raidz1 with a member unavailable: parity per sector, by reconstruct-write when
 * every unwritten column is readable, else read-modify-write (old data + old parity,
 * read before anything is overwritten). Written directly, not queued. */
static void raidz_row_degraded(struct apply_ctx *a, uint64_t row, const uint8_t *nd[][VP_CHUNK_SECT])
{
    struct vpool *p = a->p;
    int pm = vp_parity_member(p, row), ndc = p->ndata;
    uint8_t *par = a->dpar, *tmp = a->tmp;
    for (unsigned w = 0; w < VP_CHUNK_SECT; w++) {
        bool any = false;
        for (int c = 0; c < ndc; c++) any |= nd[c][w] != NULL;
        if (!any) continue;
        uint64_t off = vp_moff(p, row, w);
        bool par_ok = false;
        if (vp_writable(p, pm)) {
            bool can_rw = true, can_rmw = vp_readable(p, pm);
            for (int c = 0; c < ndc; c++) {
                bool rd = vp_readable(p, vp_col_member(p, row, c));
                if (!nd[c][w] && !rd) can_rw = false;
                if (nd[c][w] && !rd) can_rmw = false;
            }
            memset(par, 0, VP_SECTOR);
            if (can_rw) {
                par_ok = true;
                for (int c = 0; c < ndc && par_ok; c++) {
                    if (nd[c][w]) { vp_xor_into(par, nd[c][w], VP_SECTOR); continue; }
                    par_ok = vp_mread(p, vp_col_member(p, row, c), tmp, VP_SECTOR, off) == 0;
                    vp_xor_into(par, tmp, VP_SECTOR);
                }
            } else if (can_rmw) {
                par_ok = vp_mread(p, pm, par, VP_SECTOR, off) == 0;
                for (int c = 0; c < ndc && par_ok; c++) {
                    if (!nd[c][w]) continue;
                    par_ok = vp_mread(p, vp_col_member(p, row, c), tmp, VP_SECTOR, off) == 0;
                    vp_xor_into(par, tmp, VP_SECTOR);
                    vp_xor_into(par, nd[c][w], VP_SECTOR);
                }
            }
            if (!par_ok)
                log_err("vpool %s: row %llu: parity not updated (too many members unavailable)",
                        p->name, (unsigned long long)row);
        }
        for (int c = 0; c < ndc; c++) {
            int m = vp_col_member(p, row, c);
            if (nd[c][w] && vp_writable(p, m)) vp_mwrite(p, m, nd[c][w], VP_SECTOR, off);
        }
        if (par_ok) vp_mwrite(p, pm, par, VP_SECTOR, off);
    }
}

/* raidz1 row, all members available: read the unwritten parts of [wlo, whi] of every
 * data column (none for full-row writes), compute parity over the range in one go. */
/* columns a raidz1 row needs read for its parity, fetched for the whole batch before
 * any parity is computed: one thread per member, so the reads of different members
 * overlap (they are what random writes wait for, above all without the page cache) */
struct pre_read { uint8_t *buf[VP_MAXM]; int rc[VP_MAXM]; unsigned wlo, whi; };
struct rd_req { uint64_t off; size_t len; uint8_t *buf; size_t grp; int col; };
struct rd_queue { struct rd_req *r; size_t n, cap; };

static void raidz_row(struct apply_ctx *a, uint64_t row, const uint8_t *nd[][VP_CHUNK_SECT], const struct pre_read *pr)
{
    struct vpool *p = a->p;
    int pm = vp_parity_member(p, row), ndc = p->ndata;
    unsigned wlo = VP_CHUNK_SECT, whi = 0;
    bool need_read[VP_MAXM] = {0}, fast = vp_writable(p, pm);
    for (int c = 0; c < ndc; c++) {
        for (unsigned w = 0; w < VP_CHUNK_SECT; w++)
            if (nd[c][w]) { if (w < wlo) wlo = w; if (w > whi) whi = w; }
    }
    if (wlo > whi) return;
    for (int c = 0; c < ndc; c++) {
        for (unsigned w = wlo; w <= whi; w++) if (!nd[c][w]) need_read[c] = true;
        int m = vp_col_member(p, row, c);
        if ((need_read[c] && !vp_readable(p, m)) || !vp_writable(p, m)) fast = false;
    }
    size_t len = (whi - wlo + 1) * VP_SECTOR, boff = wlo * VP_SECTOR;
    uint8_t *par = fast ? par_get(a, len) : NULL;
    if (!par) { raidz_row_degraded(a, row, nd); return; }
    par -= boff;   /* indexed by sector within the row below */
    const uint8_t *colbuf[VP_MAXM];
    for (int c = 0; c < ndc; c++) {
        colbuf[c] = a->col[c];
        if (!need_read[c]) continue;
        if (pr && pr->buf[c] && pr->wlo == wlo && pr->whi == whi) {   /* read ahead by prefetch_rows */
            if (pr->rc[c] < 0) { raidz_row_degraded(a, row, nd); return; }
            colbuf[c] = pr->buf[c] - boff;
        } else if (vp_mread(p, vp_col_member(p, row, c), a->col[c] + boff, len, vp_moff(p, row, wlo)) < 0) {
            raidz_row_degraded(a, row, nd);   /* the member just failed */
            return;
        }
    }
    /* parity per sector straight from the new data / the column just read (no copies) */
    for (unsigned w = wlo; w <= whi; w++) {
        const uint8_t *src[VP_MAXM];
        uintptr_t align = (uintptr_t)(par + w * VP_SECTOR);
        void *vec[VP_MAXM + 1];
        for (int c = 0; c < ndc; c++) {
            src[c] = nd[c][w] ? nd[c][w] : colbuf[c] + w * VP_SECTOR;
            vec[c] = (void *)src[c];
            align |= (uintptr_t)src[c];
        }
        vec[ndc] = par + w * VP_SECTOR;
        if (align % 32 || xor_gen(ndc + 1, VP_SECTOR, vec))   /* ISA-L needs 32 byte alignment */
            xor_sources(par + w * VP_SECTOR, src, ndc);
    }
    for (int c = 0; c < ndc; c++) queue_runs(a, vp_col_member(p, row, c), row, nd[c]);
    q_add(a, pm, vp_moff(p, row, wlo), par + boff, len);
}

/* Member I/O of one apply. With members in the page cache it is memory copies, and
 * handing them to the member workers pays only where idle CPUs take them and the work
 * outweighs the wakeups: the writes of an apply run on the caller's thread (whose cache
 * holds the data and parity) when there are no more CPUs than jobs, and so do a few reads
 * (the edges of a large write). Many reads (random writes) and O_DIRECT members, which
 * wait for the disk, run in parallel. bench-vpool -T 5 on 2 cores, 3 A/B rounds: seq
 * write 1M 0.36-0.41x raw before, 0.51-0.66x after; rand write 4K 0.05-0.07x, 0.06-0.09x. */
/* An apply whose member writes are many small pieces (random writes) runs them on the
 * workers even so: the hand-off is small next to thousands of pwrites, and the commit is
 * what every writer waits for (bench-vpool rand write 4K, 3 rounds, with vp_arena_fit:
 * 0.08-0.17x raw vs 0.08x inline). */
#define VP_INLINE_PIECES 64
static void run_member_jobs(struct vpool *p, const struct vp_job *jobs, int nj, bool here)
{
    if (here && !p->direct_io)
        for (int i = 0; i < nj; i++) jobs[i].fn(jobs[i].arg);
    else
        vp_par_run(p, jobs, nj);
}

int vp_wq_flush(struct vpool *p, struct vp_wqueue *q)
{
    struct flush_job fj[VP_MAXM];
    struct vp_job jobs[VP_MAXM];
    int nj = 0, rc = 0;
    size_t pieces = 0;
    for (int m = 0; m < p->n; m++) {
        fj[m] = (struct flush_job){ p, m, &q[m] };
        pieces += q[m].n;
        if (q[m].n) jobs[nj++] = (struct vp_job){ flush_member, &fj[m] };
    }
    run_member_jobs(p, jobs, nj, pieces <= VP_INLINE_PIECES);
    for (int m = 0; m < p->n; m++) {
        if (q[m].err) rc = -EIO;
        free(q[m].e);
        q[m] = (struct vp_wqueue){0};
    }
    return rc;
}

struct rd_job { struct vpool *p; int m; struct rd_queue *q; struct pre_read *pr; };

static void *read_member(void *arg)
{
    struct rd_job *j = arg;
    for (size_t i = 0; i < j->q->n; i++) {
        struct rd_req *r = &j->q->r[i];
        j->pr[r->grp].rc[r->col] = vp_mread(j->p, j->m, r->buf, r->len, r->off);
    }
    return NULL;
}

/* For every row group of the batch (in order) the columns raidz_row will need; read
 * in parallel across members. Returns the array (one entry per group) or NULL. */
/* Runs of a row: maximal runs of consecutive sector positions where some column has new
 * data. Each run gets its own parity and reads (a random 4K write reads and writes only
 * its own parity group, not everything between it and another write in the row). */
static uint32_t next_run(uint32_t *all)
{
    unsigned lo = (unsigned)__builtin_ctz(*all), hi = lo;
    while (hi + 1 < VP_CHUNK_SECT && (*all >> (hi + 1) & 1)) hi++;
    uint32_t run = (uint32_t)((1ull << (hi + 1)) - 1) & ~((1u << lo) - 1);
    *all &= ~run;
    return run;
}

/* A kept scratch arena of at least need bytes. Grown to the next power of two: commits
 * of random writes vary in size, and an arena sized to each new maximum was allocated
 * again (fresh pages: faults and clearing) by every commit a little larger than the last.
 * Sector aligned: O_DIRECT members write from it without a bounce copy. */
int vp_arena_fit(uint8_t **arena, size_t *cap, size_t need)
{
    if (*cap >= need) return 0;
    size_t sz = 1u << 20;
    while (sz < need) sz *= 2;
    free(*arena);
    *cap = 0;
    if (posix_memalign((void **)arena, VP_SECTOR, sz)) { *arena = NULL; return -ENOMEM; }
    *cap = sz;
    return 0;
}

/* A rare huge batch does not keep its arena (random write-back commits of the default
 * cache take up to 64 MiB). */
void vp_arena_trim(uint8_t **arena, size_t *cap)
{
    if (*cap <= (64u << 20)) return;
    free(*arena);
    *arena = NULL;
    *cap = 0;
}

static struct pre_read *prefetch_rows(struct vpool *p, const struct vp_wsect *ws, size_t n, size_t *ngroups)
{
    size_t ng = 0, cap = 64;
    struct pre_read *pr = calloc(cap, sizeof *pr);
    struct rd_queue q[VP_MAXM] = {{0}};
    bool any = false, oom = !pr;
    size_t total = 0;
    for (size_t i = 0; i < n && !oom;) {
        int col;
        uint64_t row = vp_row_of(p, ws[i].sect, &col);
        uint32_t have[VP_MAXM] = {0};   /* bit w: column c has new data at w */
        size_t j = i;
        for (; j < n; j++) {
            int c;
            if (vp_row_of(p, ws[j].sect, &c) != row) break;
            if (ws[j].data) have[c] |= 1u << (ws[j].sect % VP_CHUNK_SECT);   /* as raidz_row sees it */
        }
        i = j;
        uint32_t all = 0;
        for (int c = 0; c < p->ndata; c++) all |= have[c];
        while (all && !oom) {
            uint32_t span = next_run(&all);
            if (ng == cap) {
                struct pre_read *np = realloc(pr, cap * 2 * sizeof *np);
                if (!np) { oom = true; break; }
                memset(np + cap, 0, cap * sizeof *np);
                pr = np; cap *= 2;
            }
            struct pre_read *g = &pr[ng++];
            unsigned wlo = __builtin_ctz(span), whi = 31 - __builtin_clz(span);
            g->wlo = wlo; g->whi = whi;
            for (int c = 0; c < p->ndata; c++) {
                int m = vp_col_member(p, row, c);
                if ((have[c] & span) == span || !vp_readable(p, m)) continue;   /* raidz_row decides the rest */
                size_t len = (whi - wlo + 1) * VP_SECTOR;
                struct rd_queue *rq = &q[m];
                if (rq->n == rq->cap) {
                    size_t nc = rq->cap ? rq->cap * 2 : 64;
                    struct rd_req *nr = realloc(rq->r, nc * sizeof *nr);
                    if (!nr) { oom = true; break; }
                    rq->r = nr; rq->cap = nc;
                }
                /* offset into the read arena for now: it is sized once every read is known */
                rq->r[rq->n++] = (struct rd_req){ vp_moff(p, row, wlo), len, (uint8_t *)(uintptr_t)total, ng - 1, c };
                total += len;
                any = true;
            }
        }
    }
    /* one arena kept by the pool (commit_lock): fresh buffers per group cost page faults
     * (up to 18 % of a random-write profile) */
    if (!oom && any && vp_arena_fit(&p->rarena, &p->rarena_cap, total)) oom = true;
    for (int m = 0; m < p->n && !oom; m++)
        for (size_t k = 0; k < q[m].n; k++) {
            struct rd_req *r = &q[m].r[k];
            r->buf = p->rarena + (uintptr_t)r->buf;
            pr[r->grp].buf[r->col] = r->buf;
        }
    if (!oom && any) {
        struct rd_job jb[VP_MAXM];
        struct vp_job jobs[VP_MAXM];
        int nj = 0;
        for (int m = 0; m < p->n; m++) {
            jb[m] = (struct rd_job){ p, m, &q[m], pr };
            if (q[m].n) jobs[nj++] = (struct vp_job){ read_member, &jb[m] };
        }
        size_t nreq = 0;
        for (int m = 0; m < p->n; m++) nreq += q[m].n;
        run_member_jobs(p, jobs, nj, nreq <= 16);
    }
    for (int m = 0; m < VP_MAXM; m++) free(q[m].r);
    if (oom) {   /* raidz_row reads for itself */
        free(pr);
        return NULL;
    }
    *ngroups = ng;
    return pr;
}

static void lock_rows(struct vpool *p, const struct vp_wsect *ws, size_t n, uint8_t *held, bool lock)
{
    if (lock) {
        memset(held, 0, VP_ROW_LOCKS);
        for (size_t i = 0; i < n; i++) {
            int c;
            held[vp_rowlock(p, vp_row_of(p, ws[i].sect, &c)) - p->row_lock] = 1;
        }
    }
    for (int i = 0; i < VP_ROW_LOCKS; i++) {
        if (!held[i]) continue;
        if (lock) pthread_mutex_lock(&p->row_lock[i]);
        else pthread_mutex_unlock(&p->row_lock[i]);
    }
}

/* format 3: into the log; the location records join the pending ones (snapshot copies,
 * whose caller made room before taking the new unit: no checkpoint may fall between) */
static int apply_log(struct vpool *p, struct vp_wsect *ws, size_t n)
{
    struct vp_rec *recs = NULL;
    size_t nr = 0;
    if (!n) return 0;   /* replay of a batch without data */
    int rc = vp_xl_write(p, ws, n, &recs, &nr);
    for (size_t i = 0; i < nr && !rc; i++) vp_pend_add(p, &recs[i]);
    free(recs);
    return rc;
}

static int apply_slice(struct vpool *p, struct vp_wsect *ws, size_t n)
{
    struct apply_ctx a = { .p = p };
    uint8_t held[VP_ROW_LOCKS];
    int ncols = p->layout == VPOOL_RAIDZ1 ? p->ndata : 0, rc = 0;
    for (int c = 0; c < ncols; c++) if (!(a.col[c] = xalloc(VP_CHUNK))) rc = -ENOMEM;
    if (!(a.tmp = xalloc(VP_SECTOR)) || !(a.dpar = xalloc(VP_SECTOR))) rc = -ENOMEM;
    if (!rc && ncols) {   /* worst case: every sector in a row of its own */
        size_t need = n * VP_SECTOR;   /* each run's parity: 4 KiB per position, at most one per sector */
        rc = vp_arena_fit(&p->parena, &p->parena_cap, need);
    }
    if (rc) goto out;
    lock_rows(p, ws, n, held, true);
    size_t ngroups = 0, grp = 0;
    struct pre_read *pre = p->layout == VPOOL_RAIDZ1 && n > 1 ? prefetch_rows(p, ws, n, &ngroups) : NULL;
    for (size_t i = 0; i < n;) {
        int col;
        uint64_t row = vp_row_of(p, ws[i].sect, &col);
        const uint8_t *nd[VP_MAXM][VP_CHUNK_SECT];
        memset(nd, 0, sizeof nd);
        size_t j = i;
        for (; j < n; j++) {
            int c;
            if (vp_row_of(p, ws[j].sect, &c) != row) break;
            nd[c][ws[j].sect % VP_CHUNK_SECT] = ws[j].data;
        }
        if (p->layout == VPOOL_RAIDZ1) {   /* run by run, in prefetch_rows' order */
            uint32_t all = 0;
            for (int c = 0; c < p->ndata; c++)
                for (unsigned w = 0; w < VP_CHUNK_SECT; w++) if (nd[c][w]) all |= 1u << w;
            while (all) {
                uint32_t run = next_run(&all);
                const uint8_t *sub[VP_MAXM][VP_CHUNK_SECT];
                memset(sub, 0, sizeof sub);
                for (int c = 0; c < p->ndata; c++)
                    for (unsigned w = 0; w < VP_CHUNK_SECT; w++) if (run >> w & 1) sub[c][w] = nd[c][w];
                const struct pre_read *pg = pre && grp < ngroups ? &pre[grp] : NULL;
                grp++;
                raidz_row(&a, row, sub, pg);
            }
        } else if (p->layout == VPOOL_MIRROR) {
            for (int m = 0; m < p->n; m++) if (vp_writable(p, m)) queue_runs(&a, m, row, nd[0]);
        } else {
            for (int c = 0; c < p->n; c++) if (vp_writable(p, c)) queue_runs(&a, c, row, nd[c]);
        }
        i = j;
    }
    free(pre);
    vp_arena_trim(&p->rarena, &p->rarena_cap);
    if (a.oom) {   /* nothing queued was written: publish nothing, the commit fails */
        lock_rows(p, ws, n, held, false);
        rc = -ENOMEM;
        goto out;
    }
    struct flush_job fj[VP_MAXM];
    struct vp_job jobs[VP_MAXM];
    int nj = 0;
    for (int m = 0; m < p->n; m++) {
        fj[m] = (struct flush_job){ p, m, &a.q[m] };
        if (a.q[m].n) jobs[nj++] = (struct vp_job){ flush_member, &fj[m] };   /* the first on this thread */
    }
    static int ncpu;
    if (!ncpu) ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    size_t pieces = 0;
    for (int m = 0; m < p->n; m++) pieces += a.q[m].n;
    run_member_jobs(p, jobs, nj, ncpu < nj + 1 && pieces <= VP_INLINE_PIECES);
    for (size_t k = 0; k < n; k++) {
        vp_csum_set(p, ws[k].sect, ws[k].csum);
        vp_note_degraded_write(p, ws[k].sect);
    }
    lock_rows(p, ws, n, held, false);
out:
    vp_arena_trim(&p->parena, &p->parena_cap);   /* all written */
    for (int m = 0; m < VP_MAXM; m++) free(a.q[m].e);
    for (int c = 0; c < ncols; c++) free(a.col[c]);
    free(a.tmp); free(a.dpar);
    if (!rc && vp_pool_state(p) == VPOOL_FAULTED) rc = -EIO;
    return rc;
}

/* Writes sectors (sorted by pool sector) in place and then publishes their checksums.
 * In slices of whole rows: a commit of the write-back budget's gigabytes in one piece
 * sized its scratch arenas (parity, columns read) in the hundreds of MiB, too large to
 * keep, so every batch faulted them in afresh (iSCSI 4K random writes on the daemon's
 * raidz1 volume: 18,000 IOPS). A slice's arenas stay under arena_trim's bound. */
#define VP_APPLY_SLICE 4096
int vp_apply_writes(struct vpool *p, struct vp_wsect *ws, size_t n)
{
    if (p->xl) return apply_log(p, ws, n);
    int rc = 0, c;
    for (size_t i = 0; i < n && !rc;) {
        size_t j = n - i > VP_APPLY_SLICE ? i + VP_APPLY_SLICE : n;
        if (j < n) {
            uint64_t row = vp_row_of(p, ws[j - 1].sect, &c);
            while (j < n && vp_row_of(p, ws[j].sect, &c) == row) j++;
        }
        rc = apply_slice(p, ws + i, j - i);
        i = j;
    }
    return rc;
}

/* ---------------- resilver / scrub ---------------- */

bool vp_row_live(struct vpool *p, uint64_t row)
{
    if (p->xl) return vp_xl_row_live(p, row);
    for (int c = 0; c < p->ndata; c++) {
        uint64_t au = vp_row_sect0(p, row, c) / VP_AU_SECT;
        if (au < p->n_au && p->au[au].vol_id) return true;
    }
    return false;
}

/* Recomputes the chunk of row on every member in target_mask from the others. */
int vp_rebuild_row(struct vpool *p, uint64_t row, uint32_t target_mask)
{
    if (p->layout == VPOOL_STRIPE) return -ENOTSUP;
    uint8_t *acc = xalloc(VP_CHUNK), *tmp = xalloc(VP_CHUNK);
    int rc = 0;
    if (!acc || !tmp) { free(acc); free(tmp); return -ENOMEM; }
    pthread_mutex_t *l = vp_rowlock(p, row);
    pthread_mutex_lock(l);
    uint64_t off = vp_moff(p, row, 0);
    if (p->layout == VPOOL_RAIDZ1) {
        memset(acc, 0, VP_CHUNK);
        for (int m = 0; m < p->n && !rc; m++) {
            if (target_mask & (1u << m)) continue;
            if (!vp_readable(p, m) || vp_mread(p, m, tmp, VP_CHUNK, off) < 0) rc = -EIO;
            else vp_xor_into(acc, tmp, VP_CHUNK);
        }
    } else {
        /* mirror: per sector, the first copy whose checksum verifies */
        uint64_t s0 = vp_row_sect0(p, row, 0);
        bool have = false;
        for (int m = 0; m < p->n; m++) {
            if ((target_mask & (1u << m)) || !vp_readable(p, m)) continue;
            if (vp_mread(p, m, acc, VP_CHUNK, off) == 0) { have = true; break; }
        }
        if (!have) rc = -EIO;
        for (unsigned w = 0; w < VP_CHUNK_SECT && !rc; w++) {
            uint32_t cs = vp_csum_get(p, s0 + w);
            uint8_t *sec = acc + w * VP_SECTOR;
            if (!vp_has_data(cs) || vp_sect_ok(cs, sec)) continue;
            bool fixed = false;
            for (int m = 0; m < p->n && !fixed; m++) {
                if ((target_mask & (1u << m)) || !vp_readable(p, m)) continue;
                fixed = vp_mread(p, m, tmp, VP_SECTOR, off + w * VP_SECTOR) == 0 && vp_sect_ok(cs, tmp);
                if (fixed) memcpy(sec, tmp, VP_SECTOR);
            }
            if (!fixed) atomic_fetch_add(&p->unrepairable, 1);
        }
    }
    for (int m = 0; m < p->n && !rc; m++)
        if ((target_mask & (1u << m)) && vp_writable(p, m) && vp_mwrite(p, m, acc, VP_CHUNK, off) < 0) rc = -EIO;
    pthread_mutex_unlock(l);
    free(acc); free(tmp);
    return rc;
}

/* Verifies every checksummed sector of a row (and raidz1 parity); repairs what
 * redundancy allows. Adds to *rep / *unrep. */
/* checksum of what the data area holds at phys: on format 3 through the reverse map */
static uint32_t phys_csum(struct vpool *p, uint64_t phys)
{
    return p->xl ? vp_xl_phys_csum(p, phys) : vp_csum_get(p, phys);
}

static int scrub_row(struct vpool *p, uint64_t row, uint64_t *rep, uint64_t *unrep, bool count);

/* format 3: under the translation read lock, so no location changes mid-row */
int vp_scrub_row(struct vpool *p, uint64_t row, uint64_t *rep, uint64_t *unrep)
{
    if (p->xl) vp_xl_rdlock(p);
    int rc = scrub_row(p, row, rep, unrep, true);
    if (p->xl) vp_xl_unlock(p);
    return rc;
}

/* Import of a format 3 pool: rows written since the last member sync, where a
 * mismatch is a write the crash cut short, not a member's fault (not counted). */
int vp_resync_row(struct vpool *p, uint64_t row, uint64_t *rep, uint64_t *unrep)
{
    return scrub_row(p, row, rep, unrep, false);
}

static int scrub_row(struct vpool *p, uint64_t row, uint64_t *rep, uint64_t *unrep, bool count)
{
    int n = p->n;
    uint8_t *buf[VP_MAXM] = {0}, *tmp = xalloc(VP_SECTOR);
    bool rd[VP_MAXM] = {0};
    int rc = 0;
    for (int m = 0; m < n; m++) if (!(buf[m] = xalloc(VP_CHUNK))) rc = -ENOMEM;
    if (rc || !tmp) goto out;
    pthread_mutex_t *l = vp_rowlock(p, row);
    pthread_mutex_lock(l);
    uint64_t off = vp_moff(p, row, 0);
    for (int m = 0; m < n; m++) rd[m] = vp_readable(p, m) && vp_mread(p, m, buf[m], VP_CHUNK, off) == 0;

    for (unsigned w = 0; w < VP_CHUNK_SECT; w++) {
        uint64_t woff = off + w * VP_SECTOR;
        if (p->layout == VPOOL_MIRROR) {
            uint32_t cs = phys_csum(p, vp_row_sect0(p, row, 0) + w);
            if (!vp_has_data(cs)) continue;
            int good = -1; uint32_t bad = 0;
            for (int m = 0; m < n; m++) {
                if (!rd[m]) continue;
                if (vp_sect_ok(cs, buf[m] + w * VP_SECTOR)) { if (good < 0) good = m; }
                else bad |= 1u << m;
            }
            for (int m = 0; m < n; m++) {
                if (!(bad & (1u << m))) continue;
                if (count) vp_member_ck_err(p, m);
                if (good >= 0 && vp_mwrite(p, m, buf[good] + w * VP_SECTOR, VP_SECTOR, woff) == 0) (*rep)++;
                else if (good < 0) { (*unrep)++; break; }
            }
            continue;
        }
        int bad_col = -1, nbad = 0, ncols = p->ndata;
        bool all_rd = true;
        for (int m = 0; m < n; m++) all_rd &= rd[m];
        for (int c = 0; c < ncols; c++) {
            int m = vp_col_member(p, row, c);
            uint32_t cs = phys_csum(p, vp_row_sect0(p, row, c) + w);
            if (!vp_has_data(cs) || !rd[m]) continue;
            if (!vp_sect_ok(cs, buf[m] + w * VP_SECTOR)) {
                bad_col = c; nbad++;
                if (count) vp_member_ck_err(p, m);
            }
        }
        if (p->layout == VPOOL_STRIPE) { *unrep += nbad; continue; }
        int pm = vp_parity_member(p, row);
        if (nbad == 1 && all_rd) {
            int bm = vp_col_member(p, row, bad_col);
            uint32_t cs = phys_csum(p, vp_row_sect0(p, row, bad_col) + w);
            memset(tmp, 0, VP_SECTOR);
            for (int m = 0; m < n; m++) if (m != bm) vp_xor_into(tmp, buf[m] + w * VP_SECTOR, VP_SECTOR);
            if (vp_sect_ok(cs, tmp) && vp_mwrite(p, bm, tmp, VP_SECTOR, woff) == 0) {
                memcpy(buf[bm] + w * VP_SECTOR, tmp, VP_SECTOR);
                (*rep)++;
            } else (*unrep)++;
        } else if (nbad) {
            *unrep += nbad;
            continue;
        }
        if (!all_rd) continue;
        /* data verified (or unwritten): XOR of all columns including parity must be 0 */
        void *vec[VP_MAXM];
        for (int m = 0; m < n; m++) vec[m] = buf[m] + w * VP_SECTOR;
        if (xor_check(n, VP_SECTOR, vec)) {
            memset(tmp, 0, VP_SECTOR);
            for (int m = 0; m < n; m++) if (m != pm) vp_xor_into(tmp, buf[m] + w * VP_SECTOR, VP_SECTOR);
            if (count) vp_member_ck_err(p, pm);
            if (vp_mwrite(p, pm, tmp, VP_SECTOR, woff) == 0) (*rep)++;
            else (*unrep)++;
        }
    }
    pthread_mutex_unlock(l);
out:
    for (int m = 0; m < n; m++) free(buf[m]);
    free(tmp);
    return rc;
}
