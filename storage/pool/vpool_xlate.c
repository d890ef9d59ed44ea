/* Translation layer of format 3 (log-structured raidz1) pools: the location of every
 * pool sector (checkpointed with the metadata), the reverse map and per-segment live
 * counts (rebuilt at import), verified reads through the locations, and replay of
 * location records. Writing, the cleaner and the commit are in vpool_xlog.c. */
#include "storage/pool/vpool_xl.h"
#include "util/log.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

uint64_t vp_xl_reserve(uint64_t nseg)
{
    /* the cleaner's working room: with less, a full pool pays for every write several
     * times over (bench-row-ceiling: amplification 5.5 at 90 % full) */
    return nseg / 16 > 4 ? nseg / 16 : 4;
}

static void *map_zeroed(size_t len)
{
    void *m = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

uint64_t vp_xl_nphys(const struct vpool *p)
{
    return p->rows / VP_SEG_ROWS * VP_SEG_ROWS * VP_CHUNK_SECT * p->ndata;
}

int vp_xl_alloc(struct vpool *p)
{
    struct vp_xl *x = calloc(1, sizeof *x);
    if (!x) return -ENOMEM;
    p->xl = x;
    x->nseg = p->rows / VP_SEG_ROWS;
    x->seg_sect = (uint64_t)VP_SEG_ROWS * VP_CHUNK_SECT * p->ndata;
    x->nphys = vp_xl_nphys(p);
    x->open_seg = UINT64_MAX;
    pthread_rwlock_init(&x->lock, NULL);
    if (x->nphys >= UINT32_MAX) return -EFBIG;   /* 4-byte locations: 16 TiB of data area */
    x->loc = map_zeroed(p->n_sect * 4);
    x->rmap = map_zeroed(x->nphys * 4);
    x->live = calloc(x->nseg ? x->nseg : 1, sizeof *x->live);
    x->state = calloc(x->nseg ? x->nseg : 1, 1);
    return x->loc && x->rmap && x->live && x->state ? 0 : -ENOMEM;
}

static void free_deferred(struct vp_xl *x)
{
    for (size_t i = 0; i < x->ndeferred; i++) free(x->deferred[i].data);
    free(x->deferred);
    x->deferred = NULL;
    x->ndeferred = x->deferred_cap = 0;
}

void vp_xl_free(struct vpool *p)
{
    struct vp_xl *x = p->xl;
    if (!x) return;
    if (x->loc) munmap(x->loc, p->n_sect ? p->n_sect * 4 : 1);
    if (x->rmap) munmap(x->rmap, x->nphys ? x->nphys * 4 : 1);
    free(x->live);
    free(x->state);
    free(x->replayed);
    free(x->dropped);
    free(x->cows.v);
    free_deferred(x);
    pthread_rwlock_destroy(&x->lock);
    free(x);
    p->xl = NULL;
}

uint32_t vp_xl_loc(struct vpool *p, uint64_t s) { return __atomic_load_n(&p->xl->loc[s], __ATOMIC_ACQUIRE); }
void vp_xl_loc_load(struct vpool *p, uint64_t s, uint32_t v) { p->xl->loc[s] = v; }
void vp_xl_rdlock(struct vpool *p) { pthread_rwlock_rdlock(&p->xl->lock); }
void vp_xl_unlock(struct vpool *p) { pthread_rwlock_unlock(&p->xl->lock); }

void xl_enliven(struct vp_xl *x, uint64_t phys, uint64_t s)
{
    __atomic_store_n(&x->rmap[phys], (uint32_t)s + 1, __ATOMIC_RELAXED);
    x->live[xl_seg_of(x, phys)]++;
}

void xl_unlive(struct vp_xl *x, uint64_t phys)
{
    uint64_t seg = xl_seg_of(x, phys);
    __atomic_store_n(&x->rmap[phys], 0, __ATOMIC_RELAXED);
    if (x->live[seg]) x->live[seg]--;
    if (!x->live[seg] && xl_state_get(x, seg) == XS_USED) {
        xl_state_set(x, seg, XS_PENDING);
        x->npending++;
    }
}

void vp_xl_drop(struct vpool *p, uint64_t s)
{
    struct vp_xl *x = p->xl;
    uint32_t l = x->loc[s];
    if (!l) return;
    __atomic_store_n(&x->loc[s], 0, __ATOMIC_RELEASE);   /* after the checksum (vp_csum_set) */
    vp_loc_dirty(p, s);
    if (x->built) xl_unlive(x, l - 1);
}

/* A parity group whose data reached the disk without its parity (or the reverse)
 * would turn a later member loss into lost sectors. The rows replayed records point
 * into are scrubbed (after the reverse map is built): a sector accepted through parity
 * is written back to its member, then parity is made the XOR of the data columns. The
 * groups there are this epoch's (written whole, once per checkpoint epoch), so nothing
 * older depends on their old parity. */
static int resync_rows(struct vpool *p)
{
    struct vp_xl *x = p->xl;
    uint64_t *g = x->replayed, rep = 0, unrep = 0;
    size_t n = x->nreplayed;
    for (size_t i = 0; i < n; i++) {
        int col;
        g[i] = vp_row_of(p, g[i], &col);
    }
    if (n) qsort(g, n, sizeof *g, vp_cmp_u64);   /* g may be NULL then */
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        if (!i || g[i] != g[i - 1]) rc = vp_resync_row(p, g[i], &rep, &unrep);
    if (rep || unrep)
        log_info("vpool %s: %llu sectors or parity written before the crash made good, %llu not", p->name,
                 (unsigned long long)rep, (unsigned long long)unrep);
    return rc;
}

/* The parity of each group whose missing member replay gave a sector: that sector XOR the
 * group's other columns as they are now, after every write of the replay (made earlier,
 * a neighbour's later rewrite from its source left the parity stale: the sector then
 * read as an error). */
static int parity_for_missing(struct vpool *p)
{
    struct vp_xl *x = p->xl;
    uint8_t *par = NULL, *t = NULL;
    int rc = 0;
    if (x->ndeferred && (posix_memalign((void **)&par, 64, VP_SECTOR) || posix_memalign((void **)&t, 64, VP_SECTOR)))
        rc = -ENOMEM;
    for (size_t i = 0; i < x->ndeferred && !rc; i++) {
        int col;
        uint64_t phys = x->deferred[i].phys, row = vp_row_of(p, phys, &col), off = vp_moff(p, row, phys % VP_CHUNK_SECT);
        int m = vp_col_member(p, row, col), pm = vp_parity_member(p, row);
        memcpy(par, x->deferred[i].data, VP_SECTOR);
        bool ok = vp_writable(p, pm) && vp_xor_members(p, off, 1u << m | 1u << pm, par, t);
        if (ok && vp_mwrite(p, pm, par, VP_SECTOR, off)) rc = -EIO;
    }
    free(par); free(t);
    free_deferred(x);
    return rc;
}

/* Import: every location must point into the data area, at most once, and only for a
 * sector with data; the rest is dropped (it cannot be read correctly anyway). */
int vp_xl_rebuild(struct vpool *p)
{
    struct vp_xl *x = p->xl;
    memset(x->live, 0, x->nseg * sizeof *x->live);
    /* dropping the pages zeroes them without touching each (1.2 GB at 400 GiB members) */
    if (x->nphys && madvise(x->rmap, x->nphys * 4, MADV_DONTNEED)) memset(x->rmap, 0, x->nphys * 4);
    uint64_t bad = 0, lost = 0, per = vp_meta_sect_per_page(p);
    for (uint64_t s = 0; s < p->n_sect; s++) {
        if (s % per == 0 && !vp_meta_sects_set(p, s)) {
            s += per - 1;   /* zeros (no location, no data), not read: it would fault each page in */
            continue;
        }
        uint32_t l = x->loc[s], cs = p->csum[s];
        if (!l) { lost += vp_has_data(cs); continue; }
        if (l - 1 >= x->nphys || !vp_has_data(cs) || x->rmap[l - 1]) {
            bad++;
            x->loc[s] = 0;
            vp_loc_dirty(p, s);
            continue;
        }
        x->rmap[l - 1] = (uint32_t)s + 1;
        x->live[xl_seg_of(x, l - 1)]++;
    }
    x->nfree = x->npending = 0;
    x->open_seg = UINT64_MAX;
    for (uint64_t g = 0; g < x->nseg; g++) {
        xl_state_set(x, g, x->live[g] ? XS_USED : XS_FREE);
        x->nfree += !x->live[g];
    }
    x->built = true;
    int rc = parity_for_missing(p);
    if (!rc) rc = resync_rows(p);
    free(x->replayed);
    free(x->dropped);
    x->replayed = NULL;
    x->dropped = NULL;
    x->nreplayed = x->replayed_cap = x->ndropped = x->dropped_cap = 0;
    if (rc) return rc;
    if (bad || lost)
        log_warn("vpool %s: %llu invalid locations dropped, %llu sectors without one (they read as errors)", p->name,
                 (unsigned long long)bad, (unsigned long long)lost);
    return 0;
}

/* Slow path of one sector: location and checksum read together, then a read that
 * rebuilds from parity and repairs. */
static int read_one_locked(struct vpool *p, uint64_t s, uint8_t *buf)
{
    uint32_t l = vp_xl_loc(p, s), cs = vp_csum_get(p, s);
    if (!vp_has_data(cs)) { memset(buf, 0, VP_SECTOR); return 0; }
    if (!l) {
        atomic_fetch_add(&p->unrepairable, 1);
        log_warn("vpool %s: pool sector %llu has no location", p->name, (unsigned long long)s);
        return -EIO;
    }
    return vp_read_phys(p, l - 1, cs, buf, s, false);
}

int vp_xl_read_run(struct vpool *p, uint64_t s, unsigned count, uint8_t *buf, bool xl_held)
{
    if (count > VP_CHUNK_SECT || s + count > p->n_sect) return -EINVAL;
    uint32_t cs[VP_CHUNK_SECT], lc[VP_CHUNK_SECT];
    bool ok[VP_CHUNK_SECT] = {0};
    for (unsigned i = 0; i < count; i++) {
        lc[i] = vp_xl_loc(p, s + i);
        cs[i] = vp_csum_get(p, s + i);
    }
    /* runs that are consecutive in one physical chunk: one read each */
    for (unsigned i = 0; i < count;) {
        if (!vp_has_data(cs[i]) || !lc[i]) { i++; continue; }
        unsigned j = i + 1;
        while (j < count && vp_has_data(cs[j]) && lc[j] == lc[j - 1] + 1 && (lc[j] - 1) % VP_CHUNK_SECT) j++;
        int col;
        uint64_t ph = lc[i] - 1, row = vp_row_of(p, ph, &col);
        int m = vp_col_member(p, row, col);
        if (vp_readable(p, m) &&
            vp_mread_checked(p, m, buf + (size_t)i * VP_SECTOR, (size_t)(j - i) * VP_SECTOR,
                             vp_moff(p, row, ph % VP_CHUNK_SECT)) == 0)
            for (unsigned k = i; k < j; k++) ok[k] = true;
        i = j;
    }
    for (unsigned i = 0; i < count; i++) {
        uint8_t *b = buf + (size_t)i * VP_SECTOR;
        if (!vp_has_data(cs[i])) { memset(b, 0, VP_SECTOR); continue; }
        if (ok[i] && vp_sect_ok(cs[i], b)) continue;
        if (!xl_held) vp_xl_rdlock(p);
        int rc = read_one_locked(p, s + i, b);
        if (!xl_held) vp_xl_unlock(p);
        if (rc) return rc;
    }
    return 0;
}

uint32_t vp_xl_phys_csum(struct vpool *p, uint64_t phys)
{
    struct vp_xl *x = p->xl;
    uint32_t r = phys < x->nphys ? xl_rmap_get(x, phys) : 0;
    if (!r || vp_xl_loc(p, r - 1) != phys + 1) return 0;
    return vp_csum_get(p, r - 1);
}

bool vp_xl_row_live(struct vpool *p, uint64_t row)
{
    struct vp_xl *x = p->xl;
    uint64_t seg = row / VP_SEG_ROWS;
    return seg < x->nseg && xl_state_get(x, seg) != XS_FREE;
}

/* The data at physical sector phys matches cs, read from its member or rebuilt from the
 * others (nothing is repaired or counted: a torn record is expected after a crash). */
static bool phys_matches(struct vpool *p, uint64_t phys, uint32_t cs)
{
    uint8_t *a = NULL;
    if (posix_memalign((void **)&a, 64, VP_SECTOR)) return false;
    bool ok = vp_read_phys(p, phys, cs, a, phys, true) == 0;
    free(a);
    return ok;
}

static int remember(void **arr, size_t *n, size_t *cap, size_t elem)
{
    if (*n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 256;
    void *m = realloc(*arr, nc * elem);
    if (!m) return -ENOMEM;
    *arr = m;
    *cap = nc;
    return 0;
}

void vp_xl_replay_batch(struct vpool *p) { p->xl->ndropped = 0; }

static int accept_loc(struct vpool *p, uint64_t s, uint64_t phys, uint32_t cs);

/* A location record whose data is not there: kept for a VP_REC_WRITE of the same batch
 * that carries the data (vp_xl_replay_data) */
static int drop_loc(struct vp_xl *x, const struct vp_rec *r)
{
    if (remember((void **)&x->dropped, &x->ndropped, &x->dropped_cap, sizeof *x->dropped)) return -ENOMEM;
    x->dropped[x->ndropped++] = *r;
    return 0;
}
static int put_data(struct vpool *p, uint64_t phys, const uint8_t *data);

/* A snapshot copy's sector whose data is not at phys: the source's data is written there
 * (what the copy held before its first write), or, where the source held none, the
 * sector has none either. A source that cannot be read leaves it as a dropped record. */
static int copy_back(struct vpool *p, const struct vp_rec *r, uint64_t phys, uint64_t src)
{
    struct vp_xl *x = p->xl;
    uint32_t cs = p->csum[src], l = x->loc[src];
    if (!vp_has_data(cs)) {
        if (p->csum[r->a] != cs) vp_csum_set(p, r->a, cs);
        return 0;
    }
    uint8_t *d = NULL;
    if (posix_memalign((void **)&d, 64, VP_SECTOR)) return -ENOMEM;
    int rc = l && l - 1 < x->nphys && vp_read_phys(p, l - 1, cs, d, src, true) == 0 ? put_data(p, phys, d) : 1;
    free(d);
    if (rc < 0) return rc;
    return rc ? drop_loc(x, r) : accept_loc(p, r->a, phys, cs);
}

int vp_xl_replay_loc(struct vpool *p, const struct vp_rec *r)
{
    struct vp_xl *x = p->xl;
    uint64_t phys = vp_loc_phys(r), src1 = vp_loc_src1(r);
    if (!x || r->a >= p->n_sect || phys >= x->nphys || !vp_has_data(r->a32) || src1 > p->n_sect) return -EBADMSG;
    if (phys_matches(p, phys, r->a32)) return accept_loc(p, r->a, phys, r->a32);
    if (src1) return copy_back(p, r, phys, src1 - 1);
    return drop_loc(x, r);   /* its data never made it: the older location stays */
}

int vp_xl_replay_data(struct vpool *p, const struct vp_rec *r, const uint8_t *data)
{
    struct vp_xl *x = p->xl;
    if (r->a >= p->n_sect || !vp_sect_ok(r->a32, data)) return -EBADMSG;
    size_t i = x->ndropped;
    while (i && x->dropped[i - 1].a != r->a) i--;
    if (!i) return 0;   /* its location record found the data in place */
    const struct vp_rec *l = &x->dropped[i - 1];
    if (l->a32 != r->a32) return -EBADMSG;
    int rc = put_data(p, vp_loc_phys(l), data);
    if (rc < 0) return rc;
    return rc ? 0 : accept_loc(p, l->a, vp_loc_phys(l), l->a32);   /* else two columns are gone: the older copy stays */
}

/* Writes one sector's data at phys during replay: 0 done, 1 not possible (its member
 * and the parity member missing), < 0 error. The location is this epoch's and nothing
 * else points there. For a missing member the parity is made to give the data back, at
 * the end of replay (parity_for_missing; the row resync cannot, with a member missing). */
static int put_data(struct vpool *p, uint64_t phys, const uint8_t *data)
{
    struct vp_xl *x = p->xl;
    int col;
    uint64_t row = vp_row_of(p, phys, &col), off = vp_moff(p, row, phys % VP_CHUNK_SECT);
    int m = vp_col_member(p, row, col);
    if (vp_writable(p, m)) return vp_mwrite(p, m, data, VP_SECTOR, off) ? -EIO : 0;
    if (!vp_writable(p, vp_parity_member(p, row))) return 1;
    if (remember((void **)&x->deferred, &x->ndeferred, &x->deferred_cap, sizeof *x->deferred)) return -ENOMEM;
    uint8_t *d = NULL;
    if (posix_memalign((void **)&d, 64, VP_SECTOR)) return -ENOMEM;
    memcpy(d, data, VP_SECTOR);
    x->deferred[x->ndeferred++] = (struct xl_defer){ phys, d };
    return 0;
}

static int accept_loc(struct vpool *p, uint64_t s, uint64_t phys, uint32_t cs)
{
    struct vp_xl *x = p->xl;
    if (remember((void **)&x->replayed, &x->nreplayed, &x->replayed_cap, sizeof *x->replayed)) return -ENOMEM;
    x->replayed[x->nreplayed++] = phys;
    vp_csum_set(p, s, cs);
    x->loc[s] = (uint32_t)phys + 1;
    vp_loc_dirty(p, s);
    return 0;
}

void vp_xl_stats(struct vpool *p, struct vp_xl_stats *st)
{
    struct vp_xl *x = p->xl;
    memset(st, 0, sizeof *st);
    if (!x) return;
    vp_commit_lock(p);
    *st = (struct vp_xl_stats){ x->nseg, x->nfree, x->npending, x->cleaned_segs, x->moved_sect, x->written_sect,
                                x->pad_sect, x->clean_reread };
    pthread_mutex_unlock(&p->commit_lock);
}
