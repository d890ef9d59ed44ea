/* Log writes of format 3 pools: every write appends whole raidz1 parity groups to the
 * open segment (nothing is read, nothing live is overwritten, so there is no
 * read-modify-write and no write hole), the cleaner re-logs the live sectors of the
 * emptiest segments, and the commit journals location records. An emptied segment
 * becomes free only at a checkpoint: until then the journal or the checkpointed
 * location table may still name its contents, which replay falls back to when a newer
 * copy did not reach the disk. */
#include "storage/pool/vpool_xl.h"
#include "util/log.h"
#include <isa-l.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t zero_sect[VP_SECTOR] __attribute__((aligned(64)));
#define VP_XL_SMALL 64   /* durable commits up to this many sectors journal their data */
/* live sectors a cleaner round copies at most: 56 MiB, so that with read_live's scratch
 * (1 MiB per member) the round's arena stays within what the pool keeps (64 MiB,
 * vp_arena_trim) up to 7 members */
#define VP_XL_CLEAN_MAX 14336u

/* h consecutive parity groups of one row from offset w0; the data sectors fill the
 * columns one after the other (column c, offset i = data index first + c*h + i), so a
 * run of consecutive pool sectors stays consecutive on one member */
struct xl_range { uint64_t row; unsigned w0, h; size_t first, end; };

static int take_segment(struct vpool *p)
{
    struct vp_xl *x = p->xl;
    /* full: used. Not pending even if nothing lives there yet: the write that filled it
     * publishes its sectors after placing them all (settle() then looks again) */
    if (x->open_seg != UINT64_MAX) xl_state_set(x, x->open_seg, XS_USED);
    x->open_seg = UINT64_MAX;
    /* next fit from the last segment taken: the log sweeps the disks, and a nearly full
     * pool does not scan every segment before it for each new one */
    for (uint64_t i = 0; i < x->nseg; i++) {
        uint64_t g = (x->next_seg + i) % x->nseg;
        if (xl_state_get(x, g) != XS_FREE) continue;
        x->next_seg = g + 1;
        xl_state_set(x, g, XS_OPEN);
        x->nfree--;
        x->open_seg = g;
        x->open_row = x->open_w = 0;
        return 0;
    }
    return -ENOSPC;
}

/* Places nd data sectors: ranges[] in order (*nr of them). */
static int place(struct vpool *p, size_t nd, struct xl_range **out, size_t *nr)
{
    struct vp_xl *x = p->xl;
    size_t cap = 16, n = 0;
    struct xl_range *r = malloc(cap * sizeof *r);
    if (!r) return -ENOMEM;
    for (size_t k = 0; k < nd;) {
        if (x->open_seg == UINT64_MAX || x->open_row == VP_SEG_ROWS) {
            int rc = take_segment(p);
            if (rc) { free(r); return rc; }
        }
        size_t rem = nd - k, h = (rem + p->ndata - 1) / p->ndata;
        if (h > VP_CHUNK_SECT - x->open_w) h = VP_CHUNK_SECT - x->open_w;
        if (n == cap) {
            struct xl_range *nr2 = realloc(r, cap * 2 * sizeof *r);
            if (!nr2) { free(r); return -ENOMEM; }
            r = nr2; cap *= 2;
        }
        size_t take = h * p->ndata < rem ? h * p->ndata : rem;
        r[n++] = (struct xl_range){ x->open_seg * VP_SEG_ROWS + x->open_row, x->open_w, (unsigned)h, k, k + take };
        k += take;
        x->open_w += (unsigned)h;
        if (x->open_w == VP_CHUNK_SECT) { x->open_row++; x->open_w = 0; }
    }
    *out = r;
    *nr = n;
    return 0;
}

/* After a write (published or failed): a segment it filled that holds nothing live
 * is pending. */
static void settle(struct vp_xl *x, const struct xl_range *r, size_t nr)
{
    for (size_t i = 0; i < nr; i++) {
        uint64_t g = r[i].row / VP_SEG_ROWS;
        if (xl_state_get(x, g) == XS_USED && !x->live[g]) {
            xl_state_set(x, g, XS_PENDING);
            x->npending++;
        }
    }
}

static void parity_of(const uint8_t *const *src, int n, uint8_t *dst)
{
    void *vec[VP_MAXM + 1];
    uintptr_t align = (uintptr_t)dst;
    for (int c = 0; c < n; c++) { vec[c] = (void *)src[c]; align |= (uintptr_t)src[c]; }
    vec[n] = dst;
    if (n >= 2 && align % 32 == 0 && xor_gen(n + 1, VP_SECTOR, vec) == 0) return;   /* ISA-L: 32 byte aligned */
    memcpy(dst, src[0], VP_SECTOR);
    for (int c = 1; c < n; c++) vp_xor_into(dst, src[c], VP_SECTOR);
}

static void lock_rows(struct vpool *p, const struct xl_range *r, size_t nr, bool lock)
{
    uint8_t held[VP_ROW_LOCKS] = {0};
    for (size_t i = 0; i < nr; i++) held[vp_rowlock(p, r[i].row) - p->row_lock] = 1;
    for (int i = 0; i < VP_ROW_LOCKS; i++) {
        if (!held[i]) continue;
        if (lock) pthread_mutex_lock(&p->row_lock[i]);
        else pthread_mutex_unlock(&p->row_lock[i]);
    }
}

static int add_rec(struct vp_rec **recs, size_t *nrecs, size_t *cap, const struct vp_rec *r)
{
    if (*nrecs == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        struct vp_rec *n = realloc(*recs, nc * sizeof *n);
        if (!n) return -ENOMEM;
        *recs = n; *cap = nc;
    }
    (*recs)[(*nrecs)++] = *r;
    return 0;
}

int vp_xl_write(struct vpool *p, struct vp_wsect *ws, size_t n, struct vp_rec **recs, size_t *nrecs)
{
    struct vp_xl *x = p->xl;
    size_t nd = 0, nr = 0, rcap = recs ? *nrecs : 0;
    for (size_t i = 0; i < n; i++) nd += ws[i].data != NULL;
    const uint8_t **dat = malloc((nd ? nd : 1) * sizeof *dat);
    uint64_t *phys = malloc((nd ? nd : 1) * sizeof *phys);
    struct xl_range *r = NULL;
    uint8_t *par = NULL;
    struct vp_wqueue q[VP_MAXM] = {{0}};
    int rc = dat && phys ? 0 : -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n && !rc; i++) if (ws[i].data) dat[k++] = ws[i].data;
    if (!rc && nd) rc = place(p, nd, &r, &nr);
    size_t ngroups = 0;
    for (size_t i = 0; i < nr; i++) ngroups += r[i].h;
    /* kept (fresh pages fault) and sector aligned (no bounce copy on O_DIRECT members) */
    if (!rc && ngroups) rc = vp_arena_fit(&p->parena, &p->parena_cap, ngroups * VP_SECTOR);
    if (!rc && ngroups) par = p->parena;
    size_t pg = 0;
    for (size_t i = 0; i < nr && !rc; i++) {
        const struct xl_range *g = &r[i];
        uint8_t *gpar = par + pg * VP_SECTOR;
        for (unsigned w = 0; w < g->h; w++) {
            const uint8_t *src[VP_MAXM];
            for (int c = 0; c < p->ndata; c++) {
                size_t idx = g->first + (size_t)c * g->h + w;
                src[c] = idx < g->end ? dat[idx] : zero_sect;
                if (idx < g->end) phys[idx] = vp_row_sect0(p, g->row, c) + g->w0 + w;
            }
            parity_of(src, p->ndata, gpar + (size_t)w * VP_SECTOR);
        }
        for (int c = 0; c < p->ndata && !rc; c++) {
            int m = vp_col_member(p, g->row, c);
            if (!vp_writable(p, m)) continue;
            for (unsigned w = 0; w < g->h && !rc; w++) {
                size_t idx = g->first + (size_t)c * g->h + w;
                rc = vp_wq_add(&q[m], vp_moff(p, g->row, g->w0 + w), idx < g->end ? dat[idx] : zero_sect, VP_SECTOR);
            }
        }
        int pm = vp_parity_member(p, g->row);
        if (!rc && vp_writable(p, pm)) rc = vp_wq_add(&q[pm], vp_moff(p, g->row, g->w0), gpar, (size_t)g->h * VP_SECTOR);
        x->pad_sect += (size_t)g->h * p->ndata - (g->end - g->first);
        pg += g->h;
    }
    if (!rc && nr) {
        lock_rows(p, r, nr, true);   /* against scrub, resilver and repairs of these rows */
        rc = vp_wq_flush(p, q);
        lock_rows(p, r, nr, false);
        for (size_t i = 0; i < nr; i++) vp_note_degraded_write(p, vp_row_sect0(p, r[i].row, 0));   /* resilver */
        atomic_store(&p->unsynced, 1);
    }
    for (int m = 0; m < VP_MAXM; m++) free(q[m].e);
    if (!rc && vp_pool_state(p) == VPOOL_FAULTED) rc = -EIO;
    if (!rc) {   /* publish: location and checksum change together for readers that repair */
        pthread_rwlock_wrlock(&x->lock);
        k = 0;
        for (size_t i = 0; i < n && !rc; i++) {
            uint64_t s = ws[i].sect;
            if (!ws[i].data) {   /* lz4: a sector that holds no data (or the chunk's mark) */
                vp_csum_set(p, s, ws[i].csum);
                struct vp_rec cr = { .type = VP_REC_CSUM, .a = s, .a32 = ws[i].csum };
                if (recs) rc = add_rec(recs, nrecs, &rcap, &cr);
                continue;
            }
            uint64_t ph = phys[k++];
            uint32_t old = x->loc[s];
            if (old) xl_unlive(x, old - 1);
            xl_enliven(x, ph, s);
            __atomic_store_n(&x->loc[s], (uint32_t)ph + 1, __ATOMIC_RELEASE);
            vp_loc_dirty(p, s);
            vp_csum_set(p, s, ws[i].csum);
            if (recs) {
                struct vp_rec lr = { .type = VP_REC_LOC, .a = s, .b = ph, .a32 = ws[i].csum };
                rc = add_rec(recs, nrecs, &rcap, &lr);
            }
        }
        x->written_sect += nd;
        pthread_rwlock_unlock(&x->lock);
    }
    settle(x, r, nr);
    free(dat); free(phys); free(r);
    vp_arena_trim(&p->parena, &p->parena_cap);
    return rc;
}

/* ---------------- cleaner ---------------- */

/* The pool sectors living in the chunk of row, column c (0 = none); the span [*lo, *hi]
 * that holds them, *lo = -1 when none does. */
static void chunk_live(struct vpool *p, uint64_t row, int c, uint32_t *sect, int *lo, int *hi)
{
    struct vp_xl *x = p->xl;
    uint64_t ph0 = vp_row_sect0(p, row, c);
    *lo = *hi = -1;
    for (unsigned w = 0; w < VP_CHUNK_SECT; w++) {
        uint32_t rs = xl_rmap_get(x, ph0 + w);
        sect[w] = rs && x->loc[rs - 1] == ph0 + w + 1 ? rs : 0;
        if (sect[w]) { if (*lo < 0) *lo = (int)w; *hi = (int)w; }
    }
}

/* Reads the live sectors of segment g into buf (room for x->live[g]), as ws entries.
 * scratch: VP_CHUNK + n * VP_SEG_ROWS * VP_CHUNK bytes. A member with live data in most
 * of its chunks is read in one call over the whole segment, dead sectors and parity
 * included: on O_DIRECT members 1 MiB reads ran at 3.3 GB/s here, 64 KiB ones at 1.2. */
static int read_live(struct vpool *p, uint64_t g, struct vp_wsect *ws, size_t *n, uint8_t *buf, uint8_t *scratch)
{
    uint64_t row0 = g * VP_SEG_ROWS;
    uint8_t *chunk = scratch, *whole = scratch + VP_CHUNK;   /* whole: member m's stretch at m * VP_SEG_ROWS chunks */
    bool big[VP_MAXM] = { 0 }, big_ok[VP_MAXM] = { 0 };
    unsigned used[VP_MAXM] = { 0 };
    /* what lives where, once: which members to read whole depends on all of it */
    struct { uint32_t sect[VP_CHUNK_SECT]; int lo, hi; } live[VP_SEG_ROWS][VP_MAXM - 1];
    for (unsigned r = 0; r < VP_SEG_ROWS; r++)
        for (int c = 0; c < p->ndata; c++) {
            chunk_live(p, row0 + r, c, live[r][c].sect, &live[r][c].lo, &live[r][c].hi);
            used[vp_col_member(p, row0 + r, c)] += live[r][c].lo >= 0;
        }
    for (int m = 0; m < p->n; m++) {
        big[m] = used[m] * 2 > VP_SEG_ROWS && vp_readable(p, m);
        big_ok[m] = big[m] && vp_mread(p, m, whole + (size_t)m * VP_SEG_ROWS * VP_CHUNK, (size_t)VP_SEG_ROWS * VP_CHUNK,
                                       vp_moff(p, row0, 0)) == 0;
    }
    for (uint64_t row = row0; row < row0 + VP_SEG_ROWS; row++) {
        for (int c = 0; c < p->ndata; c++) {
            uint64_t ph0 = vp_row_sect0(p, row, c);
            const uint32_t *sect = live[row - row0][c].sect;
            int lo = live[row - row0][c].lo, hi = live[row - row0][c].hi;
            if (lo < 0) continue;
            int m = vp_col_member(p, row, c);
            const uint8_t *src = chunk;
            bool rd;
            if (big[m]) {
                src = whole + ((size_t)m * VP_SEG_ROWS + (row - row0)) * VP_CHUNK;
                rd = big_ok[m];
            } else
                rd = vp_readable(p, m) &&
                     vp_mread(p, m, chunk + lo * VP_SECTOR, (size_t)(hi - lo + 1) * VP_SECTOR, vp_moff(p, row, (unsigned)lo)) == 0;
            for (int w = lo; w <= hi; w++) {
                if (!sect[w]) continue;
                uint64_t s = sect[w] - 1;
                uint32_t cs = vp_csum_get(p, s);
                uint8_t *d = buf + *n * VP_SECTOR;
                if (rd && vp_sect_ok(cs, src + w * VP_SECTOR)) memcpy(d, src + w * VP_SECTOR, VP_SECTOR);
                else {
                    p->xl->clean_reread++;
                    vp_xl_rdlock(p);
                    int rc = vp_read_phys(p, ph0 + w, cs, d, s, false);
                    vp_xl_unlock(p);
                    if (rc == -ENOMEM) return rc;
                    if (rc) {   /* lost already (counted, logged): let go of it, so the segment can be freed */
                        vp_xl_drop(p, s);
                        continue;
                    }
                }
                ws[(*n)++] = (struct vp_wsect){ .sect = s, .csum = cs, .data = d };
            }
        }
    }
    return 0;
}

/* Chooses the victims of a round, emptiest first (ties: lowest segment), in two passes
 * over the segments whatever their number: a histogram of the used segments' live
 * counts, along which the choice is made, then marking them in chosen[]. *nv_out gets
 * how many, *total_out their live sectors. */
static int pick_victims(struct vp_xl *x, uint64_t want, uint64_t avail, uint64_t slack, uint8_t *chosen,
                        uint64_t *nv_out, uint64_t *total_out)
{
    uint64_t *hist = calloc(x->seg_sect, sizeof *hist);
    if (!hist) return -ENOMEM;
    for (uint64_t g = 0; g < x->nseg; g++)
        if (xl_state_get(x, g) == XS_USED && x->live[g] < x->seg_sect) hist[x->live[g]]++;
    uint64_t total = 0, nv = 0, last = 0, at_last = 0;
    bool done = false;
    for (uint64_t v = 0; v < x->seg_sect && !done; v++) {
        for (uint64_t k = 0; k < hist[v]; k++) {
            if (total + v + slack > avail || (nv && total + v > VP_XL_CLEAN_MAX)) { done = true; break; }
            total += v;
            nv++;
            if (last != v) { last = v; at_last = 0; }
            at_last++;
            /* enough once the freed segments, less what the copies fill, cover the want */
            if (x->nfree + x->npending + nv >= want + (total + slack + x->seg_sect - 1) / x->seg_sect) { done = true; break; }
        }
    }
    /* counts may only have dropped since (unmaps): never more than nv and total */
    uint64_t marked = 0, mtotal = 0;
    for (uint64_t g = 0; g < x->nseg && marked < nv; g++) {
        uint64_t v = x->live[g];
        if (xl_state_get(x, g) != XS_USED || v > last || mtotal + v > total) continue;
        if (v == last) { if (!at_last) continue; at_last--; }
        chosen[g] = 1;
        marked++;
        mtotal += v;
    }
    free(hist);
    *nv_out = marked;
    *total_out = total;
    return 0;
}

/* One round: re-log the live sectors of as many of the emptiest segments as the free
 * space takes, then checkpoint (which frees them). */
static int clean_round(struct vpool *p, uint64_t want)
{
    struct vp_xl *x = p->xl;
    uint64_t slack = (uint64_t)p->ndata * VP_CHUNK_SECT * 2;   /* padding of the last groups */
    uint64_t open_left = x->open_seg == UINT64_MAX ? 0 : (VP_SEG_ROWS - x->open_row) * (uint64_t)VP_CHUNK_SECT * p->ndata;
    uint64_t avail = x->nfree * x->seg_sect + open_left, total = 0, nv = 0;
    uint8_t *chosen = calloc(x->nseg, 1);
    if (!chosen) return -ENOMEM;
    /* at most VP_XL_CLEAN_MAX live sectors: bounded memory, and commit_lock hold */
    int rc = pick_victims(x, want, avail, slack, chosen, &nv, &total);
    if (rc) { free(chosen); return rc; }
    if (!nv) {
        free(chosen);
        if (x->npending) return vp_checkpoint(p);
        log_err("vpool %s: no segment to clean (pool full)", p->name);
        return -ENOSPC;
    }
    struct vp_wsect *ws = malloc((total ? total : 1) * sizeof *ws);
    /* the copies and read_live's scratch, in the kept arena: the log writes from it */
    uint8_t *buf = NULL, *scratch = NULL;
    size_t scratch_len = VP_CHUNK + (size_t)p->n * VP_SEG_ROWS * VP_CHUNK;   /* read_live's */
    if (!ws || vp_arena_fit(&p->rarena, &p->rarena_cap, scratch_len + total * VP_SECTOR)) rc = -ENOMEM;
    else { scratch = p->rarena; buf = scratch + scratch_len; }
    size_t n = 0;
    for (uint64_t g = 0; g < x->nseg && !rc; g++) if (chosen[g]) rc = read_live(p, g, ws, &n, buf, scratch);
    if (!rc && n) {
        qsort(ws, n, sizeof *ws, vp_cmp_wsect);   /* pool order: runs stay runs */
        rc = vp_xl_write(p, ws, n, NULL, NULL);   /* the checkpoint below records where they went */
    }
    if (!rc) {
        x->cleaned_segs += nv;
        x->moved_sect += n;
        rc = vp_checkpoint(p);
    }
    free(ws); free(chosen);
    vp_arena_trim(&p->rarena, &p->rarena_cap);
    return rc;
}

/* Removes the location records from recs (n of them); returns how many are left. After
 * a checkpoint the tables hold what they say, and their places may be reused once the
 * sectors moved on. */
size_t vp_xl_drop_locs(struct vp_rec *recs, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) if (recs[i].type != VP_REC_LOC) recs[k++] = recs[i];
    return k;
}

void vp_xl_checkpointed(struct vpool *p)
{
    struct vp_xl *x = p->xl;
    x->epoch++;
    x->ahead = false;
    pthread_mutex_lock(&p->pend_lock);   /* snapshot copies' records not journaled yet */
    p->npend = vp_xl_drop_locs(p->pend, p->npend);
    pthread_mutex_unlock(&p->pend_lock);
    if (!x->npending) return;
    for (uint64_t g = 0; g < x->nseg; g++)
        if (xl_state_get(x, g) == XS_PENDING) { xl_state_set(x, g, XS_FREE); x->nfree++; }
    x->npending = 0;
}

int vp_xl_make_room(struct vpool *p, size_t n)
{
    struct vp_xl *x = p->xl;
    if (!x->built) return -EINVAL;   /* import writes nothing before vp_xl_rebuild */
    uint64_t need = (n + (uint64_t)p->ndata * VP_CHUNK_SECT + x->seg_sect - 1) / x->seg_sect + 1;
    /* below a quarter of the reserve, free half of it at once: every checkpoint syncs all
     * members, and one per commit made random writes wait for the disk far more often */
    uint64_t want = vp_xl_reserve(x->nseg) / 2 > need ? vp_xl_reserve(x->nseg) / 2 : need;
    if (x->nfree >= need && x->nfree >= want / 2) return 0;
    for (int round = 0;; round++) {   /* after the first round, enough for this write will do */
        if (x->nfree >= want || (round && x->nfree >= need)) return 0;
        if (round > 64) { log_err("vpool %s: cleaner makes no progress", p->name); return -ENOSPC; }
        int rc = x->nfree + x->npending >= want ? vp_checkpoint(p) : clean_round(p, want);
        if (rc) return rc;
    }
}

/* ---------------- commit ---------------- */

int vp_xl_commit(struct vpool *p, bool durable)
{
    if (atomic_load(&p->closed) == 2) return -ENXIO;
    struct vp_xl *x = p->xl;
    uint64_t target = atomic_load(&p->write_gen);
    struct vp_wsect *ws;
    uint8_t *extra = NULL;
    struct vp_rec *recs;
    size_t nrec, n = vp_commit_take(p, &ws, &recs, &nrec);
    if (n == SIZE_MAX) return -ENOMEM;
    size_t nrec0 = nrec;   /* location records of this commit go after these */
    uint64_t epoch0 = x->epoch;   /* a checkpoint during the commit: see the record filter below */
    struct vp_wsect *lent = NULL;
    size_t nlent = n;
    bool committed = false, journaled = false;
    int rc = 0;
    struct xl_cows taken = { 0 };   /* whole-unit snapshot copies whose data this commit wrote */
    /* snapshot copies made or committed with a member missing: their data first (replay
     * cannot rewrite a copied sector from its source with correct parity then) */
    if (nrec && p->cow_unsynced && !vp_all_online(p)) {
        if (vp_sync_members(p) < 0 || vp_pool_state(p) == VPOOL_FAULTED) rc = -EIO;
        else {   /* every log write so far: they all run under commit_lock, as this does */
            p->cow_unsynced = false;
            atomic_store(&p->unsynced, 0);
        }
    }
    if (!rc && n) {
        lent = malloc(n * sizeof *lent);
        if (!lent) rc = -ENOMEM;
        else {
            memcpy(lent, ws, n * sizeof *lent);
            rc = vp_lz4_commit_prepare(p, &ws, &n, &extra);
        }
    }
    if (rc) goto out;
    if (n) {
        for (size_t i = 0; i < n; i++) if (ws[i].data) ws[i].csum = vp_csum_of(ws[i].data);
        qsort(ws, n, sizeof *ws, vp_cmp_wsect);
    }
    if (n || nrec) atomic_fetch_add(&p->prof.commits, 1);
    /* a small durable commit with nothing unsynced before it (a FUA write, a COMMIT after
     * a few writes) puts its data in the journal batch too: one synchronous write instead
     * of a sync of every member; replay writes the data to its location if needed */
    bool small = durable && n && n <= VP_XL_SMALL && !atomic_load(&p->unsynced) && nrec + 2 * n <= 4096;
    small = small && vp_pool_state(p) == VPOOL_ONLINE && !x->cows.n;   /* every member: see replay */
    for (size_t i = 0; i < n && small; i++) small = ws[i].data != NULL;
    /* The data before the records where replay could not do without it: an lz4 chunk
     * stored compressed before or after (its sectors only make sense together: records
     * replayed for some, dropped for others whose data did not reach the disk, read as a
     * broken stream), and waiting copies with a member gone (vpool_xcow.c) */
    bool lz4c = x->ahead;   /* after a failed commit the tables in memory may not be on disk */
    for (size_t i = 0; i < n && !lz4c; i++)
        lz4c = ws[i].sect % VP_CHUNK_SECT == VP_CHUNK_SECT - 1 &&
               (ws[i].csum == VP_CSUM_MARK || vp_csum_get(p, ws[i].sect) == VP_CSUM_MARK);
    uint64_t t0 = vp_now_ns();
    /* in slices of half a segment: the cleaner then always finds room, even when this
     * commit rewrites most of a full pool */
    for (size_t i = 0, c; i < n && !rc; i += c) {
        c = n - i < x->seg_sect / 2 ? n - i : x->seg_sect / 2;
        /* never inside one 64 KiB chunk: between slices (readers, a failure, a checkpoint
         * of the cleaner) an lz4 chunk would be half in its new form */
        while (i + c < n && c > 1 && ws[i + c].sect / VP_CHUNK_SECT == ws[i + c - 1].sect / VP_CHUNK_SECT) c--;
        rc = vp_xl_make_room(p, c);
        if (!rc) rc = vp_xl_write(p, ws + i, c, &recs, &nrec);
        if (!rc) x->ahead = true;   /* published, not journaled yet */
    }
    atomic_fetch_add(&p->prof.apply_ns, vp_now_ns() - t0);
    if (!rc && ((lz4c && !small) || (x->cows.n && !vp_all_online(p)))) {   /* small: data in the batch */
        t0 = vp_now_ns();
        if (vp_sync_members(p) < 0 || vp_pool_state(p) == VPOOL_FAULTED) rc = -EIO;
        else { atomic_store(&p->unsynced, 0); x->ahead = false; }
        atomic_fetch_add(&p->prof.sync_ns, vp_now_ns() - t0);
    }
    if (!rc) rc = vp_xcow_records(p, &recs, &nrec, &nrec0, &taken);
    /* journal room first: a checkpoint while journaling would come after the filter below,
     * and a copy's record kept there would name a place that checkpoint freed (replay then
     * wrote the snapshot's data over a later, flushed write) */
    if (!rc && (small || nrec)) rc = small ? vp_journal_room(p, nrec, n) : vp_journal_records_room(p, recs, nrec);
    /* a location record whose sector has moved on since (the cleaner, a checkpoint in
     * between) is dropped: the checkpoint holds the newer place, and the old one may be in
     * use again, by data that could even match. A snapshot copy's records stay while no
     * checkpoint came between: replay needs the copy under a later write of the sector
     * whose data may not reach the disk (with no location it read as an error) */
    size_t kept = 0, kept0 = 0;
    for (size_t i = 0; i < nrec && !rc; i++) {
        const struct vp_rec *l = &recs[i];
        bool moved = l->type == VP_REC_LOC && vp_xl_loc(p, l->a) != vp_loc_phys(l) + 1;
        /* a whole-unit copy's records were made after any checkpoint of this commit */
        bool waiting = l->type == VP_REC_LOC && taken.n && vp_xcow_in(&taken, l->a);
        if (l->type == VP_REC_LOC && (vp_loc_src1(l) && !waiting ? x->epoch != epoch0 : moved)) continue;
        recs[kept++] = recs[i];
        kept0 += i < nrec0;
    }
    if (!rc) { nrec = kept; nrec0 = kept0; }
    if (!rc && small) {
        rc = vp_journal_small(p, recs, nrec, ws, n);
        if (!rc) atomic_store(&p->unsynced, 0);   /* all this commit wrote is in the journal */
    } else if (!rc && nrec) rc = vp_journal_records(p, recs, nrec);
    journaled = !rc && (small || nrec);
    if (!rc) x->ahead = false;
    if (journaled) p->frees_pending = false;
    if (journaled && nrec0) p->cow_unsynced = false;   /* the copies' records are out */
    if (rc) goto out;
    committed = true;
    if (durable && atomic_load(&p->unsynced)) {   /* the log data of this and earlier commits */
        t0 = vp_now_ns();
        if (vp_sync_members(p) < 0 || vp_pool_state(p) == VPOOL_FAULTED) { rc = -EIO; goto out; }
        atomic_fetch_add(&p->prof.sync_ns, vp_now_ns() - t0);
        atomic_store(&p->unsynced, 0);
    }
    if (durable && atomic_load(&p->durable_gen) < target) atomic_store(&p->durable_gen, target);
    if (atomic_load(&p->need_checkpoint)) rc = vp_checkpoint(p);
out:
    /* keep the metadata deltas, in order, for the next try; this commit's own location
     * records are not needed: its sectors stay dirty in the cache and are written again */
    if (rc && nrec0 && !journaled) {
        if (x->epoch != epoch0) nrec0 = vp_xl_drop_locs(recs, nrec0);   /* the checkpoint holds them */
        nrec0 = vp_xcow_strip(&taken, recs, nrec0);   /* made again by the next try */
        vp_pend_restore(p, recs, nrec0);
    }
    if (rc && !journaled && taken.n) vp_xcow_put_back(p, &taken);
    free(taken.v);
    if (rc) log_err("vpool %s: commit failed: %s", p->name, strerror(-rc));
    if (lent) vc_release(p->cache, lent, nlent, committed, p->direct_io);
    else if (rc && n && n != SIZE_MAX) vc_release(p->cache, ws, n, false, false);
    free(lent); free(ws); free(extra); free(recs);
    return rc;
}
