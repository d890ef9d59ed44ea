/* Pool metadata: volume table, snapshot table, AU ownership table and per-sector checksum table,
 * kept in RAM and checkpointed as checksummed 4 KiB pages, twice per member
 * (copy A, fdatasync, copy B, fdatasync). Between checkpoints the journal holds every
 * change, so a page torn by a crash is always recoverable from the other copy plus
 * journal replay. Pages are grouped in regions (a bit each in the label): a region is
 * written whole the first time one of its pages changes, and until then it is empty and
 * never read, so creating a pool does not write tables sized for the whole pool. */
#include "storage/pool/vpool_impl.h"
#include "util/log.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#define VP_META_MAGIC 0x4154454du   /* "META" */

struct mp_hdr { uint32_t magic, index; uint64_t gen, csum; uint8_t pool[8]; };
struct vol_disk {
    uint32_t id, flags;
    uint64_t size;
    uint8_t uuid[16];
    char name[64];
    uint32_t origin_id, origin_gen;   /* clone: source snapshot (volume id, generation) */
    uint8_t pad[24];
};
struct snap_disk {
    uint32_t vol_id, gen;
    uint64_t ctime, size;
    uint8_t uuid[16];
    char name[64];
    uint8_t pad[24];
};
_Static_assert(sizeof(struct snap_disk) == 128, "snapshot entry");
_Static_assert(VP_MAX_SNAPS == VP_SNAPTAB_PAGES * VP_SNAP_PER_PG, "snapshot table size");
_Static_assert(sizeof(struct mp_hdr) == 32, "meta page header");
_Static_assert(sizeof(struct vol_disk) == 128, "volume entry");

#define SNAP_PG0 VP_VOLTAB_PAGES
static uint64_t au_pg0(const struct vpool *p) { return VP_VOLTAB_PAGES + vp_snaptab_pages(p); }
static uint64_t csum_pg0(const struct vpool *p) { return au_pg0(p) + (p->n_au + vp_au_per_pg(p) - 1) / vp_au_per_pg(p); }
/* Format 3 keeps each sector's checksum and location side by side in one page entry: a
 * crash in the middle of a checkpoint may leave some pages old and some new, and a
 * checksum from one checkpoint with a location from the other would not match. */
#define VP_PAIR_PER_PG (VP_MP_PAYLOAD / 8)   /* 508 */
static uint64_t sect_per_pg(const struct vpool *p) { return vp_is_log(p) ? VP_PAIR_PER_PG : VP_CSUM_PER_PG; }
static uint64_t pages_used(const struct vpool *p) { return csum_pg0(p) + (p->n_sect + sect_per_pg(p) - 1) / sect_per_pg(p); }

static bool region_init(const struct vpool *p, uint64_t idx)
{
    uint64_t r = p->meta_rpp ? idx / p->meta_rpp : 0;
    return !p->meta_rpp || (p->meta_init[r / 8] >> (r % 8) & 1);
}
static void region_set(struct vpool *p, uint64_t r) { p->meta_init[r / 8] |= (uint8_t)(1u << (r % 8)); }

unsigned vp_test_meta_regions, vp_test_meta_batch, vp_test_meta_nomem;
#define META_BATCH 16384   /* pages (64 MiB) built and written at once */

void vp_meta_regions_init(struct vpool *p, unsigned regions)
{
    if (!regions || regions > VP_META_REGIONS) regions = VP_META_REGIONS;
    p->meta_rpp = (uint32_t)((p->meta_pages + regions - 1) / regions);
    memset(p->meta_init, 0, sizeof p->meta_init);
    for (uint64_t i = 0; i < au_pg0(p); i += p->meta_rpp) region_set(p, i / p->meta_rpp);
}

/* A label's regions: they fit the bitmap, and the tables not journaled (volumes,
 * snapshots: vp_snaptab_write) are in written ones. */
bool vp_meta_regions_valid(const struct vpool *p)
{
    if (!p->meta_rpp) return true;
    if (p->meta_rpp > p->meta_pages || (p->meta_pages + p->meta_rpp - 1) / p->meta_rpp > VP_META_REGIONS) return false;
    for (uint64_t i = 0; i < au_pg0(p); i++) if (!region_init(p, i)) return false;
    return true;
}

uint64_t vp_meta_sect_per_page(const struct vpool *p) { return sect_per_pg(p); }

/* Whether the table page of sector s (s a multiple of vp_meta_sect_per_page) may hold
 * anything but zeros: its region was loaded, or it changed since (every change marks its
 * page dirty). Lets import and create skip the rest of a large pool without touching it. */
bool vp_meta_sects_set(struct vpool *p, uint64_t s)
{
    uint64_t idx = csum_pg0(p) + s / sect_per_pg(p);
    return region_init(p, idx) || atomic_load(&p->meta_dirty[idx]);
}

void vp_csum_set(struct vpool *p, uint64_t s, uint32_t v)
{
    __atomic_store_n(&p->csum[s], v, __ATOMIC_RELEASE);
    atomic_store(&p->meta_dirty[csum_pg0(p) + s / sect_per_pg(p)], 1);
    if (p->xl && !vp_has_data(v)) vp_xl_drop(p, s);
}

/* Without commit_lock (format 3): the checksum only. The location stays counted until the
 * cleaner copies the sector (its publish then drops it) or import drops it. */
void vp_csum_clear_only(struct vpool *p, uint64_t s)
{
    __atomic_store_n(&p->csum[s], 0, __ATOMIC_RELEASE);
    atomic_store(&p->meta_dirty[csum_pg0(p) + s / sect_per_pg(p)], 1);
}

void vp_loc_dirty(struct vpool *p, uint64_t s) { atomic_store(&p->meta_dirty[csum_pg0(p) + s / VP_PAIR_PER_PG], 1); }

void vp_au_set(struct vpool *p, uint64_t au, uint32_t vol_id, uint32_t vol_ext)
{
    /* field by field, atomically: vp_snap_shared reads them without a lock */
    __atomic_store_n(&p->au[au].vol_id, vol_id, __ATOMIC_RELAXED);
    p->au[au].vol_ext = vol_ext;
    __atomic_store_n(&p->au[au].birth, 0, __ATOMIC_RELAXED);
    p->au[au].death = 0;
    if (!vol_id && au < p->au_cursor) p->au_cursor = au;   /* lowest free first (vp_alloc_take) */
    atomic_store(&p->meta_dirty[au_pg0(p) + au / vp_au_per_pg(p)], 1);
}

void vp_au_set_life(struct vpool *p, uint64_t au, uint32_t birth, uint32_t death)
{
    __atomic_store_n(&p->au[au].birth, birth, __ATOMIC_RELAXED);
    p->au[au].death = death;
    atomic_store(&p->meta_dirty[au_pg0(p) + au / vp_au_per_pg(p)], 1);
}

void vp_snaptab_dirty(struct vpool *p, unsigned slot) { if (p->fmt >= 2) atomic_store(&p->meta_dirty[SNAP_PG0 + slot / VP_SNAP_PER_PG], 1); }

int vp_meta_alloc(struct vpool *p)
{
    if (pages_used(p) > p->meta_pages) return -EINVAL;
    p->csum = mmap(NULL, p->n_sect * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p->csum == MAP_FAILED) { p->csum = NULL; return -ENOMEM; }
    p->jbits = mmap(NULL, (p->n_sect + 63) / 64 * 8, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p->jbits == MAP_FAILED) { p->jbits = NULL; return -ENOMEM; }
    p->dbits = mmap(NULL, (p->n_sect + 63) / 64 * 8, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p->dbits == MAP_FAILED) { p->dbits = NULL; return -ENOMEM; }
    p->dlist = malloc(VP_DLIST_MAX * sizeof *p->dlist);
    if (!p->dlist) return -ENOMEM;
    p->nregions = (p->n_sect + VP_REGION_SECT - 1) / VP_REGION_SECT;
    p->rbits = calloc((p->nregions + 63) / 64, 8);
    p->au = calloc(p->n_au, sizeof *p->au);
    p->snap_cur = 1;
    p->meta_dirty = calloc(p->meta_pages, 1);
    p->changed_au = calloc(vp_phys_aus(p) ? vp_phys_aus(p) : 1, 1);
    if (!p->au || !p->meta_dirty || !p->changed_au || !p->rbits) return -ENOMEM;
    return vp_is_log(p) ? vp_xl_alloc(p) : 0;
}

void vp_meta_free(struct vpool *p)
{
    if (p->csum) munmap(p->csum, p->n_sect * 4);
    if (p->jbits) munmap(p->jbits, (p->n_sect + 63) / 64 * 8);
    p->jbits = NULL;
    if (p->dbits) munmap(p->dbits, (p->n_sect + 63) / 64 * 8);
    p->dbits = NULL;
    free(p->dlist);
    p->dlist = NULL;
    free(p->rbits);
    p->rbits = NULL;
    free(p->au);
    free((void *)p->meta_dirty);
    free(p->changed_au);
    vp_xl_free(p);
    p->csum = NULL; p->au = NULL; p->meta_dirty = NULL; p->changed_au = NULL;
}

static void page_build(struct vpool *p, uint64_t idx, uint8_t *pg)
{
    memset(pg, 0, VP_SECTOR);
    struct mp_hdr *h = (struct mp_hdr *)pg;
    uint8_t *pl = pg + sizeof *h;
    if (idx < VP_VOLTAB_PAGES) {
        pthread_rwlock_rdlock(&p->vol_lock);
        for (unsigned i = 0; i < VP_VOL_PER_PG; i++) {
            struct vp_vol *v = p->vols[idx * VP_VOL_PER_PG + i];
            if (!v) continue;
            struct vol_disk *d = (struct vol_disk *)(pl + i * sizeof *d);
            d->id = v->id; d->flags = v->flags; d->size = v->size;
            memcpy(d->uuid, v->uuid, 16);
            memcpy(d->name, v->name, sizeof d->name);
            d->origin_id = v->origin_id; d->origin_gen = v->origin_gen;
        }
        pthread_rwlock_unlock(&p->vol_lock);
    } else if (idx < au_pg0(p)) {
        pthread_rwlock_rdlock(&p->vol_lock);
        for (unsigned i = 0; i < VP_SNAP_PER_PG; i++) {
            struct vp_snap *sn = p->snaps[(idx - SNAP_PG0) * VP_SNAP_PER_PG + i];
            if (!sn) continue;
            struct snap_disk *d = (struct snap_disk *)(pl + i * sizeof *d);
            d->vol_id = sn->vol_id; d->gen = sn->gen; d->ctime = sn->ctime; d->size = sn->size;
            memcpy(d->uuid, sn->uuid, 16);
            memcpy(d->name, sn->name, sizeof d->name);
        }
        pthread_rwlock_unlock(&p->vol_lock);
    } else if (idx < csum_pg0(p)) {
        uint64_t per = vp_au_per_pg(p), first = (idx - au_pg0(p)) * per;
        uint64_t cnt = p->n_au - first < per ? p->n_au - first : per;
        pthread_mutex_lock(&p->alloc_lock);   /* no half-updated owner entries */
        if (p->fmt >= 2) memcpy(pl, &p->au[first], cnt * sizeof *p->au);
        else for (uint64_t i = 0; i < cnt; i++) memcpy(pl + i * 8, &p->au[first + i], 8);   /* vol_id, vol_ext */
        /* copies waiting for their commit are not on disk yet: written again after it */
        if (p->xl && vp_xcow_hide_units(p, first, cnt, (struct vp_au *)pl)) atomic_store(&p->meta_dirty[idx], 1);
        pthread_mutex_unlock(&p->alloc_lock);
    } else {   /* checksums; format 3: (checksum, location) pairs */
        uint64_t per = sect_per_pg(p), first = (idx - csum_pg0(p)) * per;
        uint64_t cnt = p->n_sect - first < per ? p->n_sect - first : per;
        uint32_t *o = (uint32_t *)pl;
        bool pair = vp_is_log(p);
        if (pair) vp_xl_rdlock(p);   /* no location and checksum published halfway */
        for (uint64_t i = 0; i < cnt; i++) {
            if (pair) { o[2 * i] = vp_csum_get(p, first + i); o[2 * i + 1] = vp_xl_loc(p, first + i); }
            else o[i] = vp_csum_get(p, first + i);
        }
        if (pair) vp_xl_unlock(p);
        if (pair && vp_xcow_hide_sectors(p, first, cnt, o)) atomic_store(&p->meta_dirty[idx], 1);
    }
    h->magic = VP_META_MAGIC;
    h->index = (uint32_t)idx;
    h->gen = p->gen;
    memcpy(h->pool, p->uuid, 8);
    h->csum = XXH3_64bits(pg, VP_SECTOR);
}

static bool page_valid(struct vpool *p, uint64_t idx, uint8_t *pg)
{
    struct mp_hdr *h = (struct mp_hdr *)pg;
    if (h->magic != VP_META_MAGIC || h->index != idx || memcmp(h->pool, p->uuid, 8)) return false;
    uint64_t c = h->csum;
    h->csum = 0;
    bool ok = XXH3_64bits(pg, VP_SECTOR) == c;
    h->csum = c;
    return ok;
}

/* Writes metadata pages to both copies of the members in member_mask (0 = every
 * writable member): the dirty ones (clearing their flags), or all of the written
 * regions (flags untouched: used to seed a new member). A dirty page of a region never
 * written takes its whole region along; the region counts as written once its pages
 * are (the caller's labels then record it). */
static int write_pages(struct vpool *p, const uint64_t *idx, uint64_t cnt, uint32_t member_mask, uint8_t *buf);

int vp_meta_write(struct vpool *p, bool all_pages, uint32_t member_mask)
{
    uint64_t np = pages_used(p), rpp = p->meta_rpp ? p->meta_rpp : np;
    uint64_t *idx = malloc(np * sizeof *idx);
    uint8_t *buf = NULL, *fresh = calloc(np / rpp + 1, 1);
    int rc = 0;
    if (!idx || !fresh) { rc = -ENOMEM; goto out; }
    uint64_t cnt = 0;
    for (uint64_t lo = 0; lo < np; lo += rpp) {
        uint64_t hi = lo + rpp < np ? lo + rpp : np, start = cnt;
        bool init = region_init(p, lo);
        for (uint64_t i = lo; i < hi; i++)
            if (all_pages ? init : atomic_exchange(&p->meta_dirty[i], 0)) idx[cnt++] = i;
        if (cnt > start && !init) {
            cnt = start;
            for (uint64_t i = lo; i < hi; i++) idx[cnt++] = i;
            fresh[lo / rpp] = 1;
        }
    }
    if (!cnt) goto out;
    /* in batches: random writes over a large pool dirty a page per write, up to every
     * page of the tables (4 GB per TiB of data area in a single buffer otherwise) */
    uint64_t batch = vp_test_meta_batch ? vp_test_meta_batch : META_BATCH;
    if (batch > cnt) batch = cnt;
    buf = vp_test_meta_nomem && vp_test_meta_nomem-- ? NULL : malloc(batch * VP_SECTOR);
    if (!buf) {
        if (!all_pages) for (uint64_t i = 0; i < cnt; i++) atomic_store(&p->meta_dirty[idx[i]], 1);
        rc = -ENOMEM;
        goto out;
    }
    for (uint64_t i = 0; i < cnt && !rc; i += batch)
        rc = write_pages(p, idx + i, cnt - i < batch ? cnt - i : batch, member_mask, buf);
    if (!rc) for (uint64_t r = 0; r * rpp < np; r++) if (fresh[r]) region_set(p, r);
out:
    free(buf);
    free(fresh);
    free(idx);
    return rc;
}

/* On failure the next commit checkpoints: a create or grow that failed here stays in RAM,
 * and writes to it must not be acknowledged before its table page is out. */
static int table_pages_write(struct vpool *p, const uint64_t *idx, uint64_t cnt)
{
    uint8_t *buf = malloc(cnt * VP_SECTOR);
    int rc = buf ? write_pages(p, idx, cnt, 0, buf) : -ENOMEM;   /* still dirty: the next checkpoint writes them too */
    free(buf);
    if (rc) atomic_store(&p->need_checkpoint, 1);
    return rc;
}

/* A member that failed a page write is faulted in memory only: until a checkpoint records
 * it in the labels, import could read the page from it, without the change. */
static int fault_recorded(struct vpool *p, int rc)
{
    return !rc && atomic_load(&p->need_checkpoint) ? vp_checkpoint(p) : rc;
}

int vp_snaptab_write(struct vpool *p, unsigned slot)
{
    uint64_t idx = SNAP_PG0 + slot / VP_SNAP_PER_PG;
    return fault_recorded(p, table_pages_write(p, &idx, 1));
}
int vp_voltab_write(struct vpool *p, unsigned slot)
{
    uint64_t idx = slot / VP_VOL_PER_PG;
    return fault_recorded(p, table_pages_write(p, &idx, 1));
}

int vp_vol_gone_write(struct vpool *p, unsigned vslot, struct vp_snap *const *held)
{
    /* the volume page first, both copies synced, then its snapshots' pages: a crash in
     * between leaves the volume gone (import drops snapshots of missing volumes), never
     * the volume without its snapshots, as unsynced pages of one write could (any mix of
     * them survives a power loss). Once the volume page is out the destroy stands: if
     * the snapshot pages fail, the checkpoint below writes them. */
    uint64_t idx[VP_SNAPTAB_PAGES], cnt = 0, vpg = vslot / VP_VOL_PER_PG;
    int rc = table_pages_write(p, &vpg, 1);
    for (unsigned s = 0; s < VP_MAX_SNAPS; s++)
        if (held[s] && (!cnt || idx[cnt - 1] != SNAP_PG0 + s / VP_SNAP_PER_PG)) idx[cnt++] = SNAP_PG0 + s / VP_SNAP_PER_PG;
    if (!rc && cnt) table_pages_write(p, idx, cnt);
    return fault_recorded(p, rc);
}

/* Builds pages idx[0..cnt) into buf and writes them to both copies of the members in
 * member_mask (0: every writable member), the first copy synced before the second. A page
 * keeps a valid copy whenever a crash comes; pages of different batches may be old and
 * new, as pages of one batch may: replay of the journal since the labels covers both. */
static int write_pages(struct vpool *p, const uint64_t *idx, uint64_t cnt, uint32_t member_mask, uint8_t *buf)
{
    int rc = 0;
    for (uint64_t i = 0; i < cnt; i++) page_build(p, idx[i], buf + i * VP_SECTOR);
    for (int copy = 0; copy < 2; copy++) {
        for (int m = 0; m < p->n; m++) {
            if (!vp_writable(p, m) || (member_mask && !(member_mask & (1u << m)))) continue;
            for (uint64_t i = 0; i < cnt;) {
                uint64_t j = i + 1;
                while (j < cnt && idx[j] == idx[j - 1] + 1 && j - i < 256) j++;
                vp_mwrite(p, m, buf + i * VP_SECTOR, (j - i) * VP_SECTOR, p->meta_off[copy] + idx[i] * VP_SECTOR);
                atomic_fetch_add_explicit(&p->prof.meta_bytes, (j - i) * VP_SECTOR, memory_order_relaxed);
                i = j;
            }
        }
        for (int m = 0; m < p->n; m++) {
            if (!vp_writable(p, m) || (member_mask && !(member_mask & (1u << m)))) continue;
            vp_msync(p, m);
        }
    }
    if (vp_pool_state(p) == VPOOL_FAULTED) rc = -EIO;
    return rc;
}

static int page_decode(struct vpool *p, uint64_t idx, const uint8_t *pg, char *err, size_t errlen)
{
    const uint8_t *pl = pg + sizeof(struct mp_hdr);
    if (idx < VP_VOLTAB_PAGES) {
        for (unsigned i = 0; i < VP_VOL_PER_PG; i++) {
            const struct vol_disk *d = (const struct vol_disk *)(pl + i * sizeof *d);
            unsigned slot = idx * VP_VOL_PER_PG + i;
            if (!d->id) continue;
            if (d->id != slot + 1 || !d->name[0] || memchr(d->name, 0, sizeof d->name) == NULL ||
                !d->size || d->size > (1ull << 50) || (d->flags & ~(uint32_t)(VPOOL_VOL_LZ4 | VPOOL_VOL_THIN))) {
                vp_set_err(err, errlen, "volume table entry %u is malformed", slot);
                return -EBADMSG;
            }
            struct vp_vol *v = calloc(1, sizeof *v);
            if (!v) return -ENOMEM;
            v->id = d->id; v->flags = d->flags; v->size = d->size;
            memcpy(v->uuid, d->uuid, 16);
            memcpy(v->name, d->name, sizeof v->name);
            v->origin_id = d->origin_id <= VP_MAX_VOLS ? d->origin_id : 0;
            v->origin_gen = d->origin_gen;
            pthread_mutex_init(&v->bdev_lock, NULL);
            vp_snap_lock_init(&v->snap_lock);
            p->vols[slot] = v;
        }
    } else if (idx < au_pg0(p)) {
        for (unsigned i = 0; i < VP_SNAP_PER_PG; i++) {
            const struct snap_disk *d = (const struct snap_disk *)(pl + i * sizeof *d);
            unsigned slot = (idx - SNAP_PG0) * VP_SNAP_PER_PG + i;
            if (!d->vol_id) continue;
            if (d->vol_id > VP_MAX_VOLS || !d->gen || !d->name[0] || !memchr(d->name, 0, sizeof d->name)) {
                vp_set_err(err, errlen, "snapshot table entry %u is malformed", slot);
                return -EBADMSG;
            }
            struct vp_snap *sn = calloc(1, sizeof *sn);
            if (!sn) return -ENOMEM;
            sn->vol_id = d->vol_id; sn->gen = d->gen; sn->ctime = d->ctime; sn->size = d->size;
            memcpy(sn->uuid, d->uuid, 16);
            memcpy(sn->name, d->name, sizeof sn->name);
            p->snaps[slot] = sn;
        }
    } else if (idx < csum_pg0(p)) {
        uint64_t per = vp_au_per_pg(p), first = (idx - au_pg0(p)) * per;
        uint64_t cnt = p->n_au - first < per ? p->n_au - first : per;
        if (p->fmt >= 2) memcpy(&p->au[first], pl, cnt * sizeof *p->au);
        else for (uint64_t i = 0; i < cnt; i++) memcpy(&p->au[first + i], pl + i * 8, 8);   /* born 0, alive */
    } else {
        uint64_t per = sect_per_pg(p), first = (idx - csum_pg0(p)) * per;
        uint64_t cnt = p->n_sect - first < per ? p->n_sect - first : per;
        const uint32_t *in = (const uint32_t *)pl;
        for (uint64_t i = 0; i < cnt; i++) {
            if (!vp_is_log(p)) { if (in[i]) p->csum[first + i] = in[i]; continue; }
            p->csum[first + i] = in[2 * i];
            vp_xl_loc_load(p, first + i, in[2 * i + 1]);   /* checked by vp_xl_rebuild */
        }
    }
    return 0;
}

/* Loads every page from the first member/copy in good_mask that has it intact. */
int vp_meta_load(struct vpool *p, uint32_t good_mask, char *err, size_t errlen)
{
    uint64_t np = pages_used(p);
    int first = -1;
    for (int m = 0; m < p->n && first < 0; m++) if (good_mask & (1u << m)) first = m;
    if (first < 0) { vp_set_err(err, errlen, "no member with current metadata"); return -ENXIO; }
    uint64_t run = 256;
    uint8_t *buf = malloc(run * VP_SECTOR), pg[VP_SECTOR];
    if (!buf) return -ENOMEM;
    int rc = 0;
    for (uint64_t base = 0, cnt; base < np && !rc; base += cnt) {
        for (cnt = 0; cnt < run && base + cnt < np && region_init(p, base + cnt);) cnt++;
        if (!cnt) { cnt = 1; continue; }   /* never written: empty, as RAM starts */
        if (vp_mread(p, first, buf, cnt * VP_SECTOR, p->meta_off[0] + base * VP_SECTOR) < 0)
            memset(buf, 0, cnt * VP_SECTOR);
        for (uint64_t i = 0; i < cnt && !rc; i++) {
            uint64_t idx = base + i;
            uint8_t *src = buf + i * VP_SECTOR;
            bool ok = page_valid(p, idx, src);
            for (int m = 0; m < p->n && !ok; m++) {
                if (!(good_mask & (1u << m))) continue;
                for (int copy = 0; copy < 2 && !ok; copy++) {
                    if (m == first && copy == 0) continue;
                    if (vp_mread(p, m, pg, VP_SECTOR, p->meta_off[copy] + idx * VP_SECTOR) == 0 &&
                        page_valid(p, idx, pg)) {
                        src = pg; ok = true;
                        log_warn("vpool %s: metadata page %llu damaged on %s, using copy %c of member %d",
                                 p->name, (unsigned long long)idx, p->m[first].path, 'A' + copy, m);
                        atomic_store(&p->meta_dirty[idx], 1);   /* rewritten at the next checkpoint */
                    }
                }
            }
            if (!ok) {
                vp_set_err(err, errlen, "metadata page %llu is corrupt on every member and copy",
                           (unsigned long long)idx);
                rc = -EBADMSG;
                break;
            }
            rc = page_decode(p, idx, src, err, errlen);
            /* the volume and snapshot tables are written outside checkpoints too (a new
             * snapshot), and no journal holds them: the import's checkpoint puts the copy
             * used here on every member, so that they cannot differ */
            if (idx < au_pg0(p)) atomic_store(&p->meta_dirty[idx], 1);
        }
    }
    free(buf);
    return rc;
}

/* Makes the pool state on disk match RAM: syncs in-place data, writes dirty metadata
 * pages (both copies) and then labels naming the last journal batch now covered.
 * After this the journal restarts at offset 0. Caller holds commit_lock. */
int vp_checkpoint(struct vpool *p)
{
    atomic_store(&p->need_checkpoint, 0);
    uint64_t t0 = vp_now_ns();
    atomic_fetch_add(&p->prof.checkpoints, 1);
    int rc = vp_sync_members(p) < 0 ? -EIO : 0;
    atomic_fetch_add(&p->prof.sync_ns, vp_now_ns() - t0);
    if (rc) goto out;
    atomic_store(&p->unsynced, 0);
    p->unsynced_direct = false;
    p->cow_unsynced = false;
    p->frees_pending = false;
    if (p->jbits_any) {   /* every journaled sector is now synced in place */
        memset(p->jbits, 0, (p->n_sect + 63) / 64 * 8);
        p->jbits_any = false;
    }
    /* the journal restarts: no region needs resolving any more (members just synced,
     * and the checksum table written below covers every direct write) */
    memset(p->rbits, 0, (p->nregions + 63) / 64 * 8);
    vp_direct_clear(p);
    p->synced_unlogged = false;   /* batch numbers go on, but nothing before is replayed */
    p->gen++;
    rc = vp_meta_write(p, false, 0);
    if (!rc) rc = vp_write_labels(p, 0);
    if (!rc) {
        p->jpos = 0;
        memset(p->vol_gone, 0, sizeof p->vol_gone);   /* no record names a destroyed volume now */
        if (p->xl) vp_xl_checkpointed(p);
        if (vp_pool_state(p) == VPOOL_FAULTED) rc = -EIO;
    }
out:
    /* a member state change is still not in the labels: the next commit tries again (and
     * snapshot create and delete still see it) */
    if (rc) atomic_store(&p->need_checkpoint, 1);
    atomic_fetch_add(&p->prof.ckpt_ns, vp_now_ns() - t0);
    return rc;
}
