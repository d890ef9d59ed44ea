/* Snapshots, clones and rollback of pool volumes (see vpool_snap.h for the model):
 * AU birth/death generations, copy-on-write of shared AUs, snapshot table changes
 * (each one checkpointed before it is acknowledged), garbage collection of dead AUs
 * no snapshot holds, and the clone fallback to the origin snapshot's map. */
#include "storage/pool/vpool_impl.h"
#include "storage/pool/vpool_snap.h"
#include "util/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ---------------- lookups (vol_lock held) ---------------- */

static struct vp_vol *vol_find(struct vpool *p, const char *name)
{
    for (int i = 0; i < VP_MAX_VOLS; i++) if (p->vols[i] && !strcmp(p->vols[i]->name, name)) return p->vols[i];
    return NULL;
}

static int snap_slot(struct vpool *p, uint32_t vol_id, const char *name)
{
    for (int i = 0; i < VP_MAX_SNAPS; i++)
        if (p->snaps[i] && p->snaps[i]->vol_id == vol_id && !strcmp(p->snaps[i]->name, name)) return i;
    return -1;
}

static struct vp_snap *snap_by_gen(struct vpool *p, uint32_t vol_id, uint32_t gen)
{
    for (int i = 0; i < VP_MAX_SNAPS; i++)
        if (p->snaps[i] && p->snaps[i]->vol_id == vol_id && p->snaps[i]->gen == gen) return p->snaps[i];
    return NULL;
}

static uint32_t newest_gen(struct vpool *p, uint32_t vol_id)
{
    uint32_t g = 0;
    for (int i = 0; i < VP_MAX_SNAPS; i++)
        if (p->snaps[i] && p->snaps[i]->vol_id == vol_id && p->snaps[i]->gen > g) g = p->snaps[i]->gen;
    return g;
}

static int clones_of(struct vpool *p, uint32_t vol_id, uint32_t gen)
{
    int n = 0;
    for (int i = 0; i < VP_MAX_VOLS; i++)
        if (p->vols[i] && p->vols[i]->origin_id == vol_id && (!gen || p->vols[i]->origin_gen == gen)) n++;
    return n;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted generations of vol_id's snapshots (vol_lock held); *n entries, NULL if none. */
static uint32_t *snap_gens(struct vpool *p, uint32_t vol_id, int *n)
{
    int cnt = 0;
    for (int i = 0; i < VP_MAX_SNAPS; i++) if (p->snaps[i] && p->snaps[i]->vol_id == vol_id) cnt++;
    *n = 0;
    if (!cnt) return NULL;
    uint32_t *g = malloc(cnt * sizeof *g);
    if (!g) return NULL;
    for (int i = 0; i < VP_MAX_SNAPS; i++) if (p->snaps[i] && p->snaps[i]->vol_id == vol_id) g[(*n)++] = p->snaps[i]->gen;
    qsort(g, *n, sizeof *g, cmp_u32);
    return g;
}

/* Index of the first generation >= x in sorted g[n]. */
static int lower_bound(const uint32_t *g, int n, uint32_t x)
{
    int lo = 0, hi = n;
    while (lo < hi) { int mid = (lo + hi) / 2; if (g[mid] < x) lo = mid + 1; else hi = mid; }
    return lo;
}

static bool held_by_any(const uint32_t *g, int n, const struct vp_au *a)
{
    int i = lower_bound(g, n, a->birth);
    return i < n && (a->death == 0 || g[i] < a->death);
}

/* ---------------- maps ---------------- */

uint32_t *vp_snap_build_map(struct vpool *p, uint32_t vol_id, uint32_t g, uint64_t len)
{
    uint32_t *m = calloc(len ? len : 1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_lock(&p->alloc_lock);
    for (uint64_t i = 0; i < p->n_au; i++) {
        const struct vp_au *a = &p->au[i];
        if (a->vol_id == vol_id && a->vol_ext < len && vp_au_held(a, g)) m[a->vol_ext] = (uint32_t)i + 1;
    }
    pthread_mutex_unlock(&p->alloc_lock);
    struct vp_vol *v = vp_vol_by_id(p, vol_id);
    static _Thread_local int depth;
    if (v && v->origin_id && depth < 64) {   /* a clone reads its origin where it wrote nothing */
        depth++;
        uint32_t *om = vp_snap_build_map(p, v->origin_id, v->origin_gen, len);
        depth--;
        if (!om) { free(m); return NULL; }
        for (uint64_t e = 0; e < len; e++) if (!m[e]) m[e] = om[e];
        free(om);
    }
    return m;
}

/* Replaces v's live map by m (len entries = v->map_len). alloc_lock held. */
static void set_live_map(struct vpool *p, struct vp_vol *v, uint32_t *m)
{
    struct vp_oldmap *om = calloc(1, sizeof *om);
    uint64_t mapped = 0;
    for (uint64_t e = 0; e < v->map_len; e++) mapped += m[e] != 0;
    if (om) { om->map = v->map; om->next = v->old_maps; v->old_maps = om; }
    else { memcpy(v->map, m, v->map_len * sizeof *m); free(m); m = v->map; }   /* readers may see a mix briefly */
    __atomic_store_n(&v->map, m, __ATOMIC_RELEASE);
    if (!(v->flags & VPOOL_VOL_THIN)) {
        int64_t d = (int64_t)v->mapped - (int64_t)mapped;
        p->thick_unalloc = (int64_t)p->thick_unalloc + d > 0 ? (uint64_t)((int64_t)p->thick_unalloc + d) : 0;
    }
    v->mapped = mapped;
}

/* ---------------- copy-on-write ---------------- */

/* commit_lock held. A write of all of unit vext on a log pool: nothing of the old unit is
 * needed, so the new unit's data goes to the cache like any write, and the switch waits for
 * the commit that writes it (vpool_xcow.c), instead of a copy written now and again then. */
static int cow_whole(struct vpool *p, struct vp_vol *v, uint64_t vext, uint64_t old, struct vp_au oa,
                     const uint8_t *data)
{
    bool own = oa.vol_id == v->id;
    int rc = vp_journal_room(p, 2, 0);   /* as below: no checkpoint between taking and publishing */
    uint64_t nau = 0;
    pthread_mutex_lock(&p->alloc_lock);
    if (!rc) rc = vp_alloc_take(p, v, vext, &nau);
    pthread_mutex_unlock(&p->alloc_lock);
    if (rc) return rc;
    pthread_rwlock_rdlock(&p->put_lock);
    for (unsigned i = 0; i < VP_AU_SECT; i++) vc_put_dirty(p->cache, nau * VP_AU_SECT + i, data + (size_t)i * VP_SECTOR);
    pthread_rwlock_unlock(&p->put_lock);
    pthread_mutex_lock(&p->alloc_lock);
    rc = vp_xcow_add(p, nau, old, own, oa.death);
    if (rc) {   /* nothing refers to the new unit: give it back */
        for (unsigned i = 0; i < VP_AU_SECT; i++) vc_drop(p->cache, nau * VP_AU_SECT + i);
        vp_alloc_untake(p, nau);
        pthread_mutex_unlock(&p->alloc_lock);
        return rc;
    }
    struct vp_rec r = { .type = VP_REC_ALLOC, .a32 = v->id, .a = nau, .b = vext | (uint64_t)p->au[nau].birth << 32 };
    vp_pend_add(p, &r);
    if (own) {
        vp_au_set_life(p, old, oa.birth, p->snap_cur);
        r = (struct vp_rec){ .type = VP_REC_LIFE, .a = old, .a32 = p->snap_cur };
        vp_pend_add(p, &r);
    }
    __atomic_store_n(&v->map[vext], (uint32_t)nau + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&p->alloc_lock);
    return 0;
}

/* commit_lock held. Copies the AU behind vext into a new AU of v, replacing volume
 * bytes [off, off+len) by src (src NULL: by unwritten sectors, whole sectors only),
 * and maps the copy at once. The copy goes in place into the new unit (nothing on
 * disk refers to it yet); its allocation, the old unit's death and the copy's
 * checksums join the pending records, which the next commit journals only after
 * syncing the members (cow_unsynced), so a crash before that leaves the volume on the
 * old unit, as for any write not yet flushed. (A member sync plus a journal batch per
 * copied unit capped a snapshotted volume's writes near 160 MB/s.) A log-structured
 * pool syncs nothing for a copy: its location records name each sector's source, and
 * replay rewrites a copied sector from there when the copy's data did not reach the
 * disk (the member sync per commit held its page-cache writes with snapshots at 0.03x
 * of the raw files). */
static int cow_locked(struct vpool *p, struct vp_vol *v, uint64_t vext, const uint8_t *src, uint64_t off,
                      size_t len, size_t *used)
{
    *used = 0;
    uint32_t cur = vp_map_get(v, vext);
    if (!cur) return 0;
    uint64_t old = cur - 1;
    pthread_mutex_lock(&p->alloc_lock);
    struct vp_au oa = p->au[old];
    pthread_mutex_unlock(&p->alloc_lock);
    bool own = oa.vol_id == v->id;
    if (own && oa.birth > v->last_snap) return 0;   /* someone copied it meanwhile */
    bool lz4 = v->flags & VPOOL_VOL_LZ4;
    uint64_t a0 = vext * VP_AU_BYTES, lo = 0, hi = 0;
    if (len && (src == NULL || !lz4)) {
        lo = off > a0 ? off - a0 : 0;
        hi = off + len < a0 + VP_AU_BYTES ? off + len - a0 : VP_AU_BYTES;
    }
    /* bounds the records waiting for a commit (258 per copy); and the new unit must be
     * free on disk too (frees_pending) */
    if (vp_pend_count(p) > VP_COW_PEND_MAX || p->frees_pending) { int rc = vp_commit_ex(p, false); if (rc) return rc; }
    if (src && !lz4 && lo == 0 && hi == VP_AU_BYTES && vp_xcow_ok(p)) {
        int rc = cow_whole(p, v, vext, old, oa, src + (a0 - off));
        *used = rc ? 0 : VP_AU_BYTES;
        return rc;
    }
    uint8_t *arena = NULL;
    struct vp_wsect *ws = malloc(VP_AU_SECT * sizeof *ws);
    /* sector aligned: O_DIRECT members read straight into it */
    if (posix_memalign((void **)&arena, VP_SECTOR, VP_AU_BYTES) || !ws) { free(arena); free(ws); return -ENOMEM; }
    size_t n = 0;
    int rc = 0;
    uint32_t idx[VP_AU_SECT];
    bool need_old[VP_AU_SECT / VP_CHUNK_SECT] = { 0 }, all_old = true;
    for (unsigned c = 0; c < VP_AU_SECT / VP_CHUNK_SECT; c++) {
        for (unsigned i = c * VP_CHUNK_SECT; i < (c + 1) * VP_CHUNK_SECT; i++) {
            uint64_t s0 = (uint64_t)i * VP_SECTOR;
            if (!(lo <= s0 && s0 + VP_SECTOR <= hi) && vp_csum_get(p, old * VP_AU_SECT + i)) need_old[c] = true;
        }
        all_old &= need_old[c];
    }
    /* the usual case, a small write into a unit with data in every chunk: the old unit in
     * one read per member stretch, not one per chunk (O_DIRECT here: 64 KiB reads 1.2 GB/s,
     * 1 MiB reads 3.3 GB/s) */
    if (all_old) rc = vp_read_span(p, old * VP_AU_SECT, VP_AU_SECT, arena);
    for (unsigned c = 0; c < VP_AU_SECT / VP_CHUNK_SECT && !rc; c++) {
        uint8_t *cb = arena + (size_t)c * VP_CHUNK;
        if (need_old[c] && !all_old) rc = vp_read_run(p, old * VP_AU_SECT + c * VP_CHUNK_SECT, VP_CHUNK_SECT, cb);
        for (unsigned i = c * VP_CHUNK_SECT; i < (c + 1) * VP_CHUNK_SECT && !rc; i++) {
            uint64_t s0 = (uint64_t)i * VP_SECTOR;
            uint8_t *d = arena + s0;
            uint32_t cs = vp_csum_get(p, old * VP_AU_SECT + i);
            bool full = lo <= s0 && s0 + VP_SECTOR <= hi, part = !full && lo < s0 + VP_SECTOR && s0 < hi;
            if ((full || part) && !src) continue;                        /* unmapped */
            if (full) {
                d = (uint8_t *)src + (a0 + s0 - off);   /* written from the caller's buffer */
                cs = 1;
            } else if (part) {
                if (!need_old[c]) memset(d, 0, VP_SECTOR);
                uint64_t b = lo > s0 ? lo : s0, e = hi < s0 + VP_SECTOR ? hi : s0 + VP_SECTOR;
                memcpy(d + (b - s0), src + (a0 + b - off), e - b);
                cs = 1;   /* has data now */
            }
            if (cs == VP_CSUM_ZERO) continue;
            bool kept = !full && !part;   /* as it was: its checksum (the read verified it) stays */
            idx[n] = i;
            ws[n++] = (struct vp_wsect){ .csum = kept ? cs : 0, .data = kept && cs == VP_CSUM_MARK ? NULL : d };
        }
    }
    for (size_t k = 0; k < n && !rc; k++) if (ws[k].data && !ws[k].csum) ws[k].csum = vp_csum_of(ws[k].data);
    /* journal room first: no checkpoint may fall between taking the new unit and
     * publishing it, or import would find two units for one extent */
    if (!rc && p->xl) rc = vp_xl_make_room(p, n);   /* its checkpoints too come before taking the unit */
    if (!rc) rc = vp_journal_room(p, 2, 0);
    uint64_t nau = 0;
    bool taken = false;
    for (int tries = 0; !rc && !taken && tries < 2; tries++) {
        pthread_mutex_lock(&p->alloc_lock);
        rc = vp_alloc_take(p, v, vext, &nau);
        taken = !rc;
        /* sectors of it journaled with data since the checkpoint would be rewritten by
         * replay over the copy (see choose_intents): checkpoint, then take again */
        bool replayed = false;
        for (size_t k = 0; k < VP_AU_SECT && taken && p->jbits_any && !replayed; k++)
            replayed = vp_bit(p->jbits, nau * VP_AU_SECT + k);
        if (replayed) { vp_alloc_untake(p, nau); taken = false; }
        pthread_mutex_unlock(&p->alloc_lock);
        if (replayed && !(rc = vp_checkpoint(p))) rc = vp_journal_room(p, 2, 0);
    }
    if (!rc && !taken) rc = -EAGAIN;
    for (size_t k = 0; k < n; k++) ws[k].sect = nau * VP_AU_SECT + idx[k];
    /* rows shared with neighbouring units get new parity: a crash before the sync
     * resyncs them at import, as after a direct write */
    if (!rc && n && !p->xl) rc = vp_log_regions(p, ws, n);   /* format 3 writes no row in place */
    struct vp_rec *xr = NULL;   /* format 3: the copy's location (and lz4 mark) records */
    size_t nx = 0;
    if (!rc) rc = p->xl ? vp_xl_write(p, ws, n, &xr, &nx) : vp_apply_writes(p, ws, n);
    if (rc) {   /* nothing refers to the new unit: give it back */
        free(xr);
        if (taken) {   /* checksums first: once free, the unit may be taken at once */
            for (size_t k = 0; k < n; k++) if (vp_csum_get(p, ws[k].sect)) vp_csum_set(p, ws[k].sect, 0);
            pthread_mutex_lock(&p->alloc_lock);
            vp_alloc_untake(p, nau);
            pthread_mutex_unlock(&p->alloc_lock);
        }
        goto out;
    }
    pthread_mutex_lock(&p->alloc_lock);
    struct vp_rec r = { .type = VP_REC_ALLOC, .a32 = v->id, .a = nau, .b = vext | (uint64_t)p->au[nau].birth << 32 };
    vp_pend_add(p, &r);
    for (size_t k = 0; k < nx; k++) {   /* each location record names its source sector */
        if (xr[k].type == VP_REC_LOC) xr[k].b |= (old * VP_AU_SECT + (xr[k].a - nau * VP_AU_SECT) + 1) << 32;
        vp_pend_add(p, &xr[k]);
    }
    for (size_t k = 0; k < n && !p->xl; k++) {
        r = (struct vp_rec){ .type = VP_REC_CSUM, .a = ws[k].sect, .a32 = ws[k].csum };
        vp_pend_add(p, &r);
    }
    if (own) {
        vp_au_set_life(p, old, oa.birth, p->snap_cur);
        r = (struct vp_rec){ .type = VP_REC_LIFE, .a = old, .a32 = p->snap_cur };
        vp_pend_add(p, &r);
    }
    p->cow_unsynced = true;   /* on a log pool only while a member is missing, see vp_xl_commit */
    free(xr);
    __atomic_store_n(&v->map[vext], (uint32_t)nau + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&p->alloc_lock);
    *used = src ? hi - lo : 0;
out:
    free(ws); free(arena);
    return rc;
}

int vp_snap_cow(struct vpool *p, struct vp_vol *v, uint64_t vext, const uint8_t *src, uint64_t off, size_t len,
                size_t *used)
{
    vp_commit_lock(p);
    int rc = cow_locked(p, v, vext, src, off, len, used);
    pthread_mutex_unlock(&p->commit_lock);
    return rc;
}

int vp_snap_cow_range(struct vpool *p, struct vp_vol *v, const uint8_t *src, uint64_t off, size_t len, size_t *consumed)
{
    *consumed = 0;
    if (!len || (!__atomic_load_n(&v->last_snap, __ATOMIC_RELAXED) && !v->origin_id)) return 0;
    int rc = 0;
    for (uint64_t e = off / VP_AU_BYTES; e <= (off + len - 1) / VP_AU_BYTES && !rc; e++) {
        uint32_t au = vp_map_get(v, e);
        size_t used = 0;
        if (au && vp_snap_shared(p, v, au - 1)) rc = vp_snap_cow(p, v, e, src, off, len, &used);
        *consumed += used;
    }
    return rc;
}

int vp_snap_unmap_shared(struct vpool *p, struct vp_vol *v, uint64_t vext, uint64_t vs, uint64_t cnt)
{
    uint32_t cur = vp_map_get(v, vext);
    if (!cur) return 0;
    uint64_t old = cur - 1;
    bool fallback = v->origin_map && vext < v->origin_len && v->origin_map[vext];
    pthread_mutex_lock(&p->alloc_lock);
    struct vp_au a = p->au[old];
    bool own = a.vol_id == v->id, shared = !own || a.birth <= v->last_snap;
    if (own && shared && !fallback && cnt == VP_AU_SECT) {   /* a snapshot keeps it; the volume lets go */
        vp_au_set_life(p, old, a.birth, p->snap_cur);
        struct vp_rec r = { .type = VP_REC_LIFE, .a = old, .a32 = p->snap_cur };
        vp_pend_add(p, &r);
        __atomic_store_n(&v->map[vext], 0, __ATOMIC_RELEASE);
        v->mapped--;
        if (!(v->flags & VPOOL_VOL_THIN)) p->thick_unalloc++;
        pthread_mutex_unlock(&p->alloc_lock);
        return 0;
    }
    pthread_mutex_unlock(&p->alloc_lock);
    if (!shared) {   /* own and unshared, but freeing it would uncover the origin's data: zero it */
        vp_zero_csums(p, old * VP_AU_SECT + vs % VP_AU_SECT, cnt);
        return 0;
    }
    size_t used;
    return cow_locked(p, v, vext, NULL, vs * VP_SECTOR, cnt * VP_SECTOR, &used);
}

/* ---------------- import ---------------- */

void vp_snap_import_fix(struct vpool *p)
{
    uint32_t top = 0;
    for (int i = 0; i < VP_MAX_SNAPS; i++) {
        struct vp_snap *s = p->snaps[i];
        if (!s) continue;
        struct vp_vol *v = vp_vol_by_id(p, s->vol_id);
        if (!v || snap_slot(p, s->vol_id, s->name) != i) {
            log_warn("vpool %s: dropping snapshot %s of missing volume %u (or duplicate)", p->name, s->name, s->vol_id);
            free(s); p->snaps[i] = NULL; vp_snaptab_dirty(p, i);
            continue;
        }
        if (s->gen > v->last_snap) v->last_snap = s->gen;
        if (s->gen > top) top = s->gen;
    }
    uint64_t freed = 0;
    uint32_t *gens[VP_MAX_VOLS] = {0};
    int ngens[VP_MAX_VOLS] = {0};
    for (int i = 0; i < VP_MAX_VOLS; i++) if (p->vols[i]) gens[i] = snap_gens(p, p->vols[i]->id, &ngens[i]);
    for (uint64_t au = 0; au < p->n_au; au++) {
        struct vp_au *a = &p->au[au];
        if (!a->vol_id) continue;
        if (a->birth > top) top = a->birth;
        if (a->death > top) top = a->death;
        if (!a->death || a->vol_id > VP_MAX_VOLS || !p->vols[a->vol_id - 1]) continue;
        if (held_by_any(gens[a->vol_id - 1], ngens[a->vol_id - 1], a)) continue;
        vp_au_set(p, au, 0, 0);   /* a snapshot delete or rollback that did not finish */
        vp_au_clear(p, au, false);
        freed++;
    }
    for (int i = 0; i < VP_MAX_VOLS; i++) free(gens[i]);
    p->snap_cur = top + 1;
    if (freed) log_info("vpool %s: freed %llu units no snapshot holds any more", p->name, (unsigned long long)freed);
}

int vp_snap_import_clones(struct vpool *p)
{
    for (int i = 0; i < VP_MAX_VOLS; i++) {
        struct vp_vol *v = p->vols[i];
        if (!v || !v->origin_id) continue;
        if (!vp_vol_by_id(p, v->origin_id) || !snap_by_gen(p, v->origin_id, v->origin_gen)) {
            log_err("vpool %s: origin snapshot of clone %s is missing; it keeps only its own data", p->name, v->name);
            v->origin_id = v->origin_gen = 0;
            atomic_store(&p->meta_dirty[i / VP_VOL_PER_PG], 1);
            continue;
        }
        free(v->origin_map);
        v->origin_len = v->map_len;
        v->origin_map = vp_snap_build_map(p, v->origin_id, v->origin_gen, v->origin_len);
        if (!v->origin_map) return -ENOMEM;
        for (uint64_t e = 0; e < v->map_len; e++)
            if (!v->map[e] && v->origin_map[e]) { v->map[e] = v->origin_map[e]; v->mapped++; }
    }
    return 0;
}

/* ---------------- volume destroy ---------------- */

int vp_snap_vol_busy(struct vpool *p, struct vp_vol *v)
{
    if (clones_of(p, v->id, 0)) return -EBUSY;
    for (int i = 0; i < VP_MAX_SNAPS; i++)
        if (p->snaps[i] && p->snaps[i]->vol_id == v->id && atomic_load(&p->snaps[i]->open_count)) return -EBUSY;
    return 0;
}

void vp_snap_vol_detach(struct vpool *p, struct vp_vol *v, struct vp_snap **held)
{
    for (int i = 0; i < VP_MAX_SNAPS; i++)
        if (p->snaps[i] && p->snaps[i]->vol_id == v->id) { held[i] = p->snaps[i]; p->snaps[i] = NULL; vp_snaptab_dirty(p, i); }
}

/* ---------------- management ---------------- */

/* Finds vol under snap_mu (volumes are only freed under it). */
static struct vp_vol *find_vol(struct vpool *p, const char *vol)
{
    pthread_rwlock_rdlock(&p->vol_lock);
    struct vp_vol *v = vol_find(p, vol);
    pthread_rwlock_unlock(&p->vol_lock);
    return v;
}

static int snap_create(struct vpool *p, const char *vol, const char *name, const uint8_t *uuid, uint64_t ctime)
{
    if (p->fmt < 2) return -EOPNOTSUPP;   /* no snapshot table on disk */
    if (!vp_name_ok(name)) return -EINVAL;
    if (atomic_load(&p->closed)) return -ENXIO;
    pthread_mutex_lock(&p->snap_mu);
    struct vp_vol *v = find_vol(p, vol);
    int rc = v ? 0 : -ENOENT, slot = -1;
    if (!rc && snap_slot(p, v->id, name) >= 0) rc = -EEXIST;
    for (int i = 0; i < VP_MAX_SNAPS && !rc && slot < 0; i++) if (!p->snaps[i]) slot = i;
    if (!rc && slot < 0) rc = -ENOSPC;
    struct vp_snap *s = rc ? NULL : calloc(1, sizeof *s);
    if (!rc && !s) rc = -ENOMEM;
    if (!rc && uuid) memcpy(s->uuid, uuid, 16);
    else if (!rc && getrandom(s->uuid, 16, 0) != 16) rc = -EIO;
    if (rc) { free(s); pthread_mutex_unlock(&p->snap_mu); return rc; }
    snprintf(s->name, sizeof s->name, "%s", name);
    s->vol_id = v->id;
    s->ctime = ctime ? ctime : (uint64_t)time(NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_rwlock_wrlock(&v->snap_lock);   /* no write is between its map lookup and the cache */
    vp_commit_lock(p);
    rc = vp_commit(p);
    uint32_t prev_last = v->last_snap;
    if (!rc) {
        s->size = v->size;
        pthread_rwlock_wrlock(&p->vol_lock);
        p->snaps[slot] = s;
        pthread_rwlock_unlock(&p->vol_lock);
        pthread_mutex_lock(&p->alloc_lock);
        s->gen = p->snap_cur++;
        pthread_mutex_unlock(&p->alloc_lock);
        __atomic_store_n(&v->last_snap, s->gen, __ATOMIC_RELEASE);
        vp_snaptab_dirty(p, (unsigned)slot);
    }
    pthread_rwlock_unlock(&v->snap_lock);   /* writers go on; copies wait for commit_lock */
    /* only its table page, not a checkpoint: that writes every table page changed since
     * the last one (13-21 s on a 1 TiB volume just written), the journal holds the rest */
    if (!rc) {
        rc = vp_snaptab_write(p, (unsigned)slot);
        if (rc) {
            pthread_rwlock_wrlock(&p->vol_lock);
            p->snaps[slot] = NULL;
            pthread_rwlock_unlock(&p->vol_lock);
            __atomic_store_n(&v->last_snap, prev_last, __ATOMIC_RELEASE);
            vp_snaptab_dirty(p, (unsigned)slot);
        }
    }
    pthread_mutex_unlock(&p->commit_lock);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc) free(s);
    else log_info("vpool %s: snapshot %s@%s created (generation %u, %.1f ms)", p->name, vol, name, s->gen,
                  (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    pthread_mutex_unlock(&p->snap_mu);
    return rc;
}

int vpool_snap_create(struct vpool *p, const char *vol, const char *snap) { return snap_create(p, vol, snap, NULL, 0); }
int vp_snap_create_uuid(struct vpool *p, const char *vol, const char *snap, const uint8_t *uuid, uint64_t ctime)
{
    return snap_create(p, vol, snap, uuid, ctime);
}

/* Frees the dead AUs of v no snapshot holds. commit_lock held. */
static void gc_dead(struct vpool *p, struct vp_vol *v)
{
    int ng;
    pthread_rwlock_rdlock(&p->vol_lock);
    uint32_t *g = snap_gens(p, v->id, &ng);
    pthread_rwlock_unlock(&p->vol_lock);
    for (uint64_t au = 0; au < p->n_au; au++) {
        pthread_mutex_lock(&p->alloc_lock);
        struct vp_au a = p->au[au];
        pthread_mutex_unlock(&p->alloc_lock);
        if (a.vol_id == v->id && a.death && !held_by_any(g, ng, &a)) vp_free_au(p, au);
    }
    free(g);
}

int vpool_snap_destroy(struct vpool *p, const char *vol, const char *snap)
{
    if (atomic_load(&p->closed)) return -ENXIO;
    pthread_mutex_lock(&p->snap_mu);
    struct vp_vol *v = find_vol(p, vol);
    int slot = v ? snap_slot(p, v->id, snap) : -1;
    int rc = !v || slot < 0 ? -ENOENT : 0;
    struct vp_snap *s = rc ? NULL : p->snaps[slot];
    if (!rc && (atomic_load(&s->open_count) || clones_of(p, v->id, s->gen))) rc = -EBUSY;
    if (!rc) {
        vp_commit_lock(p);
        rc = vp_commit(p);
        if (!rc) {
            pthread_rwlock_wrlock(&p->vol_lock);
            p->snaps[slot] = NULL;   /* last_snap stays until the page is out: until then
                                      * writes still copy the units it may hold */
            pthread_rwlock_unlock(&p->vol_lock);
            vp_snaptab_dirty(p, (unsigned)slot);
            /* gone for good before its units are freed and reused: its table page, as a
             * create writes it (not a checkpoint of every page changed since the last one:
             * 17-20 s on a 1 TiB volume just written). The frees are journaled by the
             * commit below; after a crash before it, import frees the units no snapshot
             * holds (vp_snap_import_fix). */
            rc = vp_snaptab_write(p, (unsigned)slot);
            if (!rc) {
                pthread_rwlock_wrlock(&p->vol_lock);
                __atomic_store_n(&v->last_snap, newest_gen(p, v->id), __ATOMIC_RELEASE);
                pthread_rwlock_unlock(&p->vol_lock);
                gc_dead(p, v);
                rc = vp_commit(p);
                free(s);
            } else {   /* the snapshot stays (members that wrote the page lack it until the
                        * next checkpoint writes it again); last_snap never moved */
                pthread_rwlock_wrlock(&p->vol_lock);
                p->snaps[slot] = s;
                pthread_rwlock_unlock(&p->vol_lock);
                vp_snaptab_dirty(p, (unsigned)slot);
            }
        }
        pthread_mutex_unlock(&p->commit_lock);
        if (!rc) log_info("vpool %s: snapshot %s@%s destroyed", p->name, vol, snap);
    }
    pthread_mutex_unlock(&p->snap_mu);
    return rc;
}

static void fill_info(struct vpool *p, struct vp_snap *s, struct vpool_snap_info *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", s->name);
    o->gen = s->gen; o->ctime = s->ctime; o->size = s->size;
    memcpy(o->uuid, s->uuid, 16);
    o->clones = clones_of(p, s->vol_id, s->gen);
}

static int cmp_info(const void *a, const void *b)
{
    const struct vpool_snap_info *x = a, *y = b;
    return x->gen < y->gen ? -1 : x->gen > y->gen;
}

/* used/referenced of the n snapshots in o (sorted by gen) of volume v. vol_lock held. */
static void space(struct vpool *p, struct vp_vol *v, struct vpool_snap_info *o, int n)
{
    uint32_t *g = malloc(n * sizeof *g);
    int64_t *diff = calloc(n + 1, sizeof *diff);
    if (!g || !diff) { free(g); free(diff); return; }
    for (int i = 0; i < n; i++) g[i] = o[i].gen;
    pthread_mutex_lock(&p->alloc_lock);
    for (uint64_t au = 0; au < p->n_au; au++) {
        const struct vp_au *a = &p->au[au];
        if (a->vol_id != v->id) continue;
        int lo = lower_bound(g, n, a->birth), hi = a->death ? lower_bound(g, n, a->death) : n;
        if (lo >= hi) continue;
        diff[lo]++; diff[hi]--;
        if (hi - lo == 1 && a->death) o[lo].used += VP_AU_BYTES;
    }
    pthread_mutex_unlock(&p->alloc_lock);
    int64_t run = 0;
    for (int i = 0; i < n; i++) { run += diff[i]; o[i].referenced = (uint64_t)run * VP_AU_BYTES; }
    if (v->origin_id)   /* clones also read units of their origin */
        for (int i = 0; i < n; i++) {
            uint64_t len = (o[i].size + VP_AU_BYTES - 1) / VP_AU_BYTES, cnt = 0;
            uint32_t *m = vp_snap_build_map(p, v->id, g[i], len);
            for (uint64_t e = 0; m && e < len; e++) cnt += m[e] != 0;
            if (m) o[i].referenced = cnt * VP_AU_BYTES;
            free(m);
        }
    free(g); free(diff);
}

int vpool_snap_list(struct vpool *p, const char *vol, struct vpool_snap_info *out, int max)
{
    pthread_rwlock_rdlock(&p->vol_lock);
    struct vp_vol *v = vol_find(p, vol);
    if (!v) { pthread_rwlock_unlock(&p->vol_lock); return -ENOENT; }
    int n = 0;
    for (int i = 0; i < VP_MAX_SNAPS; i++) if (p->snaps[i] && p->snaps[i]->vol_id == v->id) n++;
    struct vpool_snap_info *all = calloc(n ? n : 1, sizeof *all);
    if (!all) { pthread_rwlock_unlock(&p->vol_lock); return -ENOMEM; }
    int k = 0;
    for (int i = 0; i < VP_MAX_SNAPS; i++) if (p->snaps[i] && p->snaps[i]->vol_id == v->id) fill_info(p, p->snaps[i], &all[k++]);
    qsort(all, n, sizeof *all, cmp_info);
    space(p, v, all, n);
    pthread_rwlock_unlock(&p->vol_lock);
    if (out) memcpy(out, all, (n < max ? n : max) * sizeof *all);
    free(all);
    return n;
}

int vpool_snap_info(struct vpool *p, const char *vol, const char *snap, struct vpool_snap_info *out)
{
    int n = vpool_snap_list(p, vol, NULL, 0);
    if (n < 0) return n;
    struct vpool_snap_info *all = calloc(n ? n : 1, sizeof *all);
    if (!all) return -ENOMEM;
    n = vpool_snap_list(p, vol, all, n);
    int rc = -ENOENT;
    for (int i = 0; i < n && rc; i++) if (!strcmp(all[i].name, snap)) { *out = all[i]; rc = 0; }
    free(all);
    return rc;
}

int vpool_snap_rollback(struct vpool *p, const char *vol, const char *snap)
{
    if (atomic_load(&p->closed)) return -ENXIO;
    pthread_mutex_lock(&p->snap_mu);
    struct vp_vol *v = find_vol(p, vol);
    int slot = v ? snap_slot(p, v->id, snap) : -1;
    int rc = !v || slot < 0 ? -ENOENT : 0;
    uint32_t S = rc ? 0 : p->snaps[slot]->gen;
    if (!rc && newest_gen(p, v->id) > S) rc = -ENOTEMPTY;
    if (rc) { pthread_mutex_unlock(&p->snap_mu); return rc; }
    pthread_rwlock_wrlock(&v->snap_lock);
    vp_commit_lock(p);
    rc = vp_commit(p);
    /* first free what was written after S, then revive what S holds: a crash in
     * between leaves extents unmapped (a retry finishes), never mapped twice */
    for (uint64_t au = 0; au < p->n_au && !rc; au++) {
        pthread_mutex_lock(&p->alloc_lock);
        struct vp_au a = p->au[au];
        pthread_mutex_unlock(&p->alloc_lock);
        if (a.vol_id == v->id && !a.death && a.birth > S) vp_free_au(p, au);
    }
    uint32_t *nm = NULL;
    if (!rc) {
        pthread_mutex_lock(&p->alloc_lock);
        for (uint64_t au = 0; au < p->n_au; au++) {
            struct vp_au *a = &p->au[au];
            if (a->vol_id != v->id || !a->death || !vp_au_held(a, S)) continue;
            vp_au_set_life(p, au, a->birth, 0);
            struct vp_rec r = { .type = VP_REC_LIFE, .a = au, .a32 = 0 };
            vp_pend_add(p, &r);
        }
        pthread_mutex_unlock(&p->alloc_lock);
        pthread_rwlock_rdlock(&p->vol_lock);
        nm = vp_snap_build_map(p, v->id, VP_GEN_LIVE, v->map_len);
        pthread_rwlock_unlock(&p->vol_lock);
        if (!nm) rc = -ENOMEM;
    }
    if (!rc) {
        pthread_mutex_lock(&p->alloc_lock);
        set_live_map(p, v, nm);
        pthread_mutex_unlock(&p->alloc_lock);
        atomic_fetch_add(&p->write_gen, 1);
        rc = vp_commit(p);
    }
    if (!rc) rc = vp_vol_shrink(p, v, p->snaps[slot]->size);   /* its size at S too */
    pthread_mutex_unlock(&p->commit_lock);
    pthread_rwlock_unlock(&v->snap_lock);
    if (!rc) log_info("vpool %s: volume %s rolled back to %s", p->name, vol, snap);
    pthread_mutex_unlock(&p->snap_mu);
    return rc;
}

int vpool_snap_clone(struct vpool *p, const char *vol, const char *snap, const char *clone)
{
    if (!vp_name_ok(clone)) return -EINVAL;
    if (atomic_load(&p->closed)) return -ENXIO;
    pthread_mutex_lock(&p->snap_mu);
    vp_commit_lock(p);
    pthread_rwlock_wrlock(&p->vol_lock);
    struct vp_vol *o = vol_find(p, vol), *v = NULL;
    int slot = o ? snap_slot(p, o->id, snap) : -1, vslot = -1;
    int rc = !o || slot < 0 ? -ENOENT : vol_find(p, clone) ? -EEXIST : 0;
    bool ckpt = false;
    if (!rc && (vslot = vp_vol_slot(p, &ckpt)) < 0) rc = -ENOSPC;
    if (!rc && !(v = calloc(1, sizeof *v))) rc = -ENOMEM;
    if (!rc) {
        struct vp_snap *s = p->snaps[slot];
        snprintf(v->name, sizeof v->name, "%s", clone);
        v->id = (uint32_t)vslot + 1;
        v->size = s->size;
        v->flags = o->flags;
        v->origin_id = o->id;
        v->origin_gen = s->gen;
        v->map_len = v->origin_len = (v->size + VP_AU_BYTES - 1) / VP_AU_BYTES;
        pthread_mutex_init(&v->bdev_lock, NULL);
        vp_snap_lock_init(&v->snap_lock);
        v->origin_map = vp_snap_build_map(p, o->id, s->gen, v->map_len);
        v->map = calloc(v->map_len, sizeof *v->map);
        if (!v->origin_map || !v->map || getrandom(v->uuid, 16, 0) != 16) rc = -ENOMEM;
    }
    if (!rc) {
        memcpy(v->map, v->origin_map, v->map_len * sizeof *v->map);
        for (uint64_t e = 0; e < v->map_len; e++) v->mapped += v->map[e] != 0;
        pthread_mutex_lock(&p->alloc_lock);
        if (!(v->flags & VPOOL_VOL_THIN)) p->thick_unalloc += v->map_len - v->mapped;
        pthread_mutex_unlock(&p->alloc_lock);
        p->vols[vslot] = v;
        atomic_store(&p->meta_dirty[vslot / VP_VOL_PER_PG], 1);
    } else if (v) { free(v->origin_map); v->origin_map = NULL; vp_vol_free(v); }
    pthread_rwlock_unlock(&p->vol_lock);
    if (!rc) rc = vp_commit(p);
    /* its volume table page, as a snapshot create writes its own, not a checkpoint: the
     * clone owns no unit yet, its map comes from the snapshot at import, and its writes
     * are journaled. A slot freed since the last checkpoint comes with one (vp_vol_slot). */
    if (!rc && ckpt) rc = vp_checkpoint(p);
    else if (!rc) rc = vp_voltab_write(p, (unsigned)vslot);
    pthread_mutex_unlock(&p->commit_lock);
    if (!rc) log_info("vpool %s: volume %s cloned from %s@%s", p->name, clone, vol, snap);
    pthread_mutex_unlock(&p->snap_mu);
    return rc;
}

nasd_bdev *vpool_snap_open(struct vpool *p, const char *vol, const char *snap, uint32_t block_size, int *err)
{
    int e = 0;
    struct vp_vol *view = NULL;
    if (block_size != 512 && block_size != 4096) e = -EINVAL;
    else if (atomic_load(&p->closed)) e = -ENXIO;
    if (!e) {
        pthread_mutex_lock(&p->snap_mu);
        pthread_rwlock_rdlock(&p->vol_lock);
        struct vp_vol *v = vol_find(p, vol);
        int slot = v ? snap_slot(p, v->id, snap) : -1;
        if (slot < 0) e = -ENOENT;
        else if (!(view = calloc(1, sizeof *view))) e = -ENOMEM;
        else {
            struct vp_snap *s = p->snaps[slot];
            view->id = v->id;
            view->flags = v->flags;
            view->size = s->size;
            snprintf(view->name, sizeof view->name, "%.40s@%.22s", v->name, s->name);
            memcpy(view->uuid, s->uuid, 16);
            view->map_len = (s->size + VP_AU_BYTES - 1) / VP_AU_BYTES;
            pthread_mutex_init(&view->bdev_lock, NULL);
            vp_snap_lock_init(&view->snap_lock);
            view->map = vp_snap_build_map(p, v->id, s->gen, view->map_len);
            view->view_of = s;
            if (!view->map) e = -ENOMEM;
            else atomic_fetch_add(&s->open_count, 1);
        }
        pthread_rwlock_unlock(&p->vol_lock);
        pthread_mutex_unlock(&p->snap_mu);
    }
    nasd_bdev *b = e ? NULL : vp_vol_open_view(p, view, block_size);
    if (!b && !e) { atomic_fetch_sub(&view->view_of->open_count, 1); e = -ENOMEM; }
    if (e) {
        if (view) { view->view_of = NULL; vp_vol_free(view); }
        if (err) *err = e;
    }
    return b;
}

int vpool_vol_origin(struct vpool *p, const char *vol, char *ovol, char *osnap)
{
    pthread_rwlock_rdlock(&p->vol_lock);
    struct vp_vol *v = vol_find(p, vol);
    int rc = -ENOENT;
    if (v && v->origin_id) {
        struct vp_vol *o = vp_vol_by_id(p, v->origin_id);
        struct vp_snap *s = o ? snap_by_gen(p, o->id, v->origin_gen) : NULL;
        if (o && s) { snprintf(ovol, 64, "%s", o->name); snprintf(osnap, 64, "%s", s->name); rc = 0; }
    }
    pthread_rwlock_unlock(&p->vol_lock);
    return rc;
}
