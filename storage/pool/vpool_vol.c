/* Volumes: management and the nasd_bdev data path. Writes without FUA land in the
 * write-back cache (dirty, per 4 KiB pool sector) and become durable on flush, on a
 * FUA write, or when the dirty limit forces a commit. Reads check the cache first,
 * then read and verify exactly the sectors they need. */
#include "storage/pool/vpool_impl.h"
#include "util/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

struct vp_vbdev {
    nasd_bdev b;
    struct vpool *p;
    struct vp_vol *v;
    struct vp_vbdev *next;
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static void tls_make(void) { pthread_key_create(&tls_key, free); }

/* two 64 KiB scratch buffers per thread */
static uint8_t *scratch(void)
{
    pthread_once(&tls_once, tls_make);
    uint8_t *b = pthread_getspecific(tls_key);
    if (!b && !posix_memalign((void **)&b, 64, 2 * VP_CHUNK)) pthread_setspecific(tls_key, b);
    return b;
}

void vp_vol_free(struct vp_vol *v)
{
    for (struct vp_oldmap *o = v->old_maps, *nx; o; o = nx) { nx = o->next; free(o->map); free(o); }
    free(v->map);
    free(v->origin_map);
    pthread_mutex_destroy(&v->bdev_lock);
    pthread_rwlock_destroy(&v->snap_lock);
    free(v);
}

struct vp_vol *vp_vol_by_id(struct vpool *p, uint32_t id)
{
    return id && id <= VP_MAX_VOLS ? p->vols[id - 1] : NULL;
}

struct vp_vol *vp_vol_of_sect(struct vpool *p, uint64_t s)
{
    return vp_vol_by_id(p, p->au[s / VP_AU_SECT].vol_id);
}

static struct vp_vol *vol_find(struct vpool *p, const char *name)
{
    for (int i = 0; i < VP_MAX_VOLS; i++) if (p->vols[i] && !strcmp(p->vols[i]->name, name)) return p->vols[i];
    return NULL;
}

/* ---------------- data path ---------------- */

static inline uint64_t pool_sect(struct vp_vol *v, uint64_t vsect)
{
    uint32_t au = vp_map_get(v, vsect / VP_AU_SECT);
    return au ? (uint64_t)(au - 1) * VP_AU_SECT + vsect % VP_AU_SECT : UINT64_MAX;
}

/* Reads logical sectors [vsect, vsect+cnt) (cnt <= 16, same chunk) into out. */
static int read_sectors(struct vpool *p, struct vp_vol *v, uint64_t vsect, unsigned cnt, uint8_t *out)
{
    uint64_t ps = pool_sect(v, vsect);
    if (ps == UINT64_MAX) { memset(out, 0, (size_t)cnt * VP_SECTOR); return 0; }
    uint32_t hit = 0;
    uint64_t epoch = vc_epoch(p->cache);
    /* only dirty entries can differ from disk; with none, a multi-sector read skips the lookups */
    if ((cnt == 1 && p->direct_io) || vc_dirty_count(p->cache) || (v->flags & VPOOL_VOL_LZ4))
        for (unsigned i = 0; i < cnt; i++) if (vc_lookup(p->cache, ps + i, out + i * VP_SECTOR)) hit |= 1u << i;
    if (hit == (1u << cnt) - 1) return 0;
    uint8_t *tmp = scratch();
    if (!tmp) return -ENOMEM;
    int rc;
    if (v->flags & VPOOL_VOL_LZ4) {
        uint64_t ps0 = ps - ps % VP_CHUNK_SECT;
        if ((rc = vp_lz4_read_chunk(p, ps0, tmp))) return rc;
        for (unsigned i = 0; i < VP_CHUNK_SECT; i++) vc_put_clean(p->cache, ps0 + i, tmp + i * VP_SECTOR, epoch);
        for (unsigned i = 0; i < cnt; i++)
            if (!(hit & (1u << i))) memcpy(out + i * VP_SECTOR, tmp + (ps % VP_CHUNK_SECT + i) * VP_SECTOR, VP_SECTOR);
        return 0;
    }
    unsigned lo = __builtin_ctz(~hit), hi = cnt - 1;
    while (hit & (1u << hi)) hi--;
    if (!hit) {   /* common case: straight into the caller's buffer */
        if ((rc = vp_read_run(p, ps, cnt, out))) return rc;
        /* members in the page cache already cache it: a second copy here only costs */
        if (cnt == 1 && p->direct_io && vc_admit(p->cache, ps)) vc_put_clean(p->cache, ps, out, epoch);
        return 0;
    }
    if ((rc = vp_read_run(p, ps + lo, hi - lo + 1, tmp))) return rc;
    for (unsigned i = lo; i <= hi; i++)
        if (!(hit & (1u << i))) memcpy(out + i * VP_SECTOR, tmp + (i - lo) * VP_SECTOR, VP_SECTOR);
    return 0;
}

/* Reads [off, off+len) of v (bounds checked by the caller). */
static int read_range(struct vpool *p, struct vp_vol *v, uint8_t *dst, uint64_t off, size_t len)
{
    while (len) {
        uint64_t vsect = off / VP_SECTOR;
        unsigned inoff = off % VP_SECTOR;
        if (inoff || len < VP_SECTOR) {
            uint8_t sec[VP_SECTOR] __attribute__((aligned(64)));
            int rc = read_sectors(p, v, vsect, 1, sec);
            if (rc) return rc;
            size_t n = VP_SECTOR - inoff < len ? VP_SECTOR - inoff : len;
            memcpy(dst, sec + inoff, n);
            dst += n; off += n; len -= n;
            continue;
        }
        unsigned cnt = VP_CHUNK_SECT - vsect % VP_CHUNK_SECT;
        if (cnt > len / VP_SECTOR) cnt = (unsigned)(len / VP_SECTOR);
        /* more than a chunk of one unit, and no dirty sector to look up: one read per
         * stretch of a member (O_DIRECT members and lz4 go chunk by chunk) */
        uint64_t span = VP_AU_SECT - vsect % VP_AU_SECT;
        if (span > len / VP_SECTOR) span = len / VP_SECTOR;
        bool whole = span > cnt && !p->direct_io && !(v->flags & VPOOL_VOL_LZ4) && !vc_dirty_count(p->cache);
        uint64_t ps = whole ? pool_sect(v, vsect) : 0;
        int rc;
        if (whole) cnt = (unsigned)span;
        if (whole && ps == UINT64_MAX) { memset(dst, 0, (size_t)cnt * VP_SECTOR); rc = 0; }
        else rc = whole ? vp_read_span(p, ps, cnt, dst) : read_sectors(p, v, vsect, cnt, dst);
        if (rc) return rc;
        dst += (size_t)cnt * VP_SECTOR; off += (uint64_t)cnt * VP_SECTOR; len -= (size_t)cnt * VP_SECTOR;
    }
    return 0;
}

struct read_half { struct vpool *p; struct vp_vol *v; uint8_t *dst; uint64_t off; size_t len; int rc; };
static void *read_half_job(void *arg)
{
    struct read_half *h = arg;
    h->rc = read_range(h->p, h->v, h->dst, h->off, h->len);
    return NULL;
}

#define VP_READ_SPLIT (256u << 10)   /* reads from this size verify their halves on two CPUs */

static int vb_read(nasd_bdev *b, void *buf, uint64_t off, size_t len)
{
    struct vp_vbdev *vb = (struct vp_vbdev *)b;
    struct vpool *p = vb->p;
    if (atomic_load(&p->closed)) return -ENXIO;
    if (off + len > b->size || off + len < off) return -ERANGE;
    if (len >= VP_READ_SPLIT) {
        uint64_t mid = (off + len / 2) / VP_CHUNK * VP_CHUNK;
        if (mid > off && mid < off + len) {
            struct read_half h[2] = { { p, vb->v, buf, off, mid - off, 0 },
                                      { p, vb->v, (uint8_t *)buf + (mid - off), mid, off + len - mid, 0 } };
            struct vp_job jobs[2] = { { read_half_job, &h[0] }, { read_half_job, &h[1] } };
            if (vp_par_try_read(p, jobs, 2)) return h[0].rc ? h[0].rc : h[1].rc;
        }
    }
    return read_range(p, vb->v, buf, off, len);
}

static int map_for_write(struct vpool *p, struct vp_vol *v, uint64_t vsect, uint64_t *ps)
{
    *ps = pool_sect(v, vsect);
    if (*ps != UINT64_MAX) return 0;
    uint32_t au;
    int rc = vp_alloc_au(p, v, vsect / VP_AU_SECT, &au);
    if (rc) return rc;
    *ps = (uint64_t)au * VP_AU_SECT + vsect % VP_AU_SECT;
    return 0;
}

static int vb_write(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags)
{
    struct vp_vbdev *vb = (struct vp_vbdev *)b;
    struct vpool *p = vb->p;
    if (atomic_load(&p->closed)) return -ENXIO;
    if (off + len > b->size || off + len < off) return -ERANGE;
    if (vp_pool_state(p) == VPOOL_FAULTED) return -EIO;
    const uint8_t *src = buf;
    int rc = 0;
    pthread_rwlock_rdlock(&vb->v->snap_lock);
    size_t consumed;
    rc = vp_snap_cow_range(p, vb->v, src, off, len, &consumed);   /* units a snapshot or the clone origin holds */
    if (!rc && consumed == len) len = 0;   /* the copies hold all of it (in place, durable with the next commit) */
    if (!rc && vp_direct_ok(p, vb->v, off, len)) {   /* large: in place from buf, no cache copy */
        uint64_t ps;
        for (uint64_t o = off; o < off + len && !rc; o = (o / VP_AU_BYTES + 1) * VP_AU_BYTES)
            rc = map_for_write(p, vb->v, o / VP_SECTOR, &ps);
        if (!rc) rc = vp_direct_write(p, vb->v, src, off, len);
        if (!rc) len = 0;
        else if (rc == -EAGAIN) rc = 0;
    }
    pthread_rwlock_rdlock(&p->put_lock);
    while (len && !rc) {
        uint64_t vsect = off / VP_SECTOR, ps;
        unsigned inoff = off % VP_SECTOR;
        size_t n = VP_SECTOR - inoff < len ? VP_SECTOR - inoff : len;
        if ((rc = map_for_write(p, vb->v, vsect, &ps))) break;
        if (n == VP_SECTOR) vc_put_dirty(p->cache, ps, src);
        else {   /* sub-sector write: read-modify-write under a per-sector lock */
            uint8_t sec[VP_SECTOR] __attribute__((aligned(64)));
            pthread_mutex_t *l = &p->part_lock[ps % 64];
            pthread_mutex_lock(l);
            rc = read_sectors(p, vb->v, vsect, 1, sec);
            if (!rc) {
                memcpy(sec + inoff, src, n);
                vc_put_dirty(p->cache, ps, sec);
            }
            pthread_mutex_unlock(l);
        }
        src += n; off += n; len -= n;
    }
    pthread_rwlock_unlock(&p->put_lock);
    pthread_rwlock_unlock(&vb->v->snap_lock);
    uint64_t gen = atomic_fetch_add(&p->write_gen, 1) + 1;
    if (rc) return rc;
    if (flags & NASD_IO_FUA) rc = vp_flush_to(p, gen);
    else if (vp_dirty_over(p, p->dirty_max)) rc = vp_writeback(p);
    else if (vp_dirty_over(p, p->dirty_soft)) vp_flusher_kick(p);
    return rc;
}

static int vb_flush(nasd_bdev *b)
{
    struct vp_vbdev *vb = (struct vp_vbdev *)b;
    if (atomic_load(&vb->p->closed)) return -ENXIO;
    return vp_flush_to(vb->p, atomic_load(&vb->p->write_gen));
}

void vp_zero_csums(struct vpool *p, uint64_t ps, uint64_t cnt)
{
    bool any = false;
    for (uint64_t s = ps; s < ps + cnt; s++) {
        /* the checksum first: a reader that misses after the drop then reads no data */
        if (vp_csum_get(p, s)) { vp_csum_set(p, s, 0); any = true; }
        vc_drop(p->cache, s);
    }
    if (any) {
        struct vp_rec r = { .type = VP_REC_ZERO, .a = ps, .b = cnt };
        vp_pend_add(p, &r);
    }
}

/* Whole AUs are freed; whole sectors (whole 64 KiB units on lz4 volumes) become
 * unwritten; the remaining edges are written with zeros. */
static int vb_unmap(nasd_bdev *b, uint64_t off, uint64_t len)
{
    struct vp_vbdev *vb = (struct vp_vbdev *)b;
    struct vpool *p = vb->p;
    struct vp_vol *v = vb->v;
    if (atomic_load(&p->closed)) return -ENXIO;
    if (off + len > b->size || off + len < off) return -ERANGE;
    uint64_t gran = v->flags & VPOOL_VOL_LZ4 ? VP_CHUNK : VP_SECTOR;
    uint64_t a = (off + gran - 1) / gran * gran, e = (off + len) / gran * gran;
    int rc = 0;
    if (a < e) {
        pthread_rwlock_rdlock(&v->snap_lock);
        vp_commit_lock(p);   /* no commit may apply older data afterwards */
        for (uint64_t pos = a; pos < e && !rc;) {
            uint64_t vsect = pos / VP_SECTOR, vext = vsect / VP_AU_SECT;
            uint64_t au_end = (vext + 1) * VP_AU_BYTES, stop = e < au_end ? e : au_end;
            uint32_t au = vp_map_get(v, vext);
            if (au && (vp_snap_shared(p, v, au - 1) || (v->origin_map && vext < v->origin_len && v->origin_map[vext])))
                rc = vp_snap_unmap_shared(p, v, vext, vsect, (stop - pos) / VP_SECTOR);
            else if (au) {
                if (pos == vext * VP_AU_BYTES && stop == au_end) vp_free_au(p, au - 1);
                else vp_zero_csums(p, (uint64_t)(au - 1) * VP_AU_SECT + vsect % VP_AU_SECT, (stop - pos) / VP_SECTOR);
            }
            pos = stop;
        }
        atomic_fetch_add(&p->write_gen, 1);   /* so that the next flush commits the records */
        pthread_mutex_unlock(&p->commit_lock);
        pthread_rwlock_unlock(&v->snap_lock);
    } else a = e = off;
    static const uint8_t zeros[VP_CHUNK];
    for (uint64_t pos = off; pos < a && !rc;) {
        uint64_t n = a - pos < VP_CHUNK ? a - pos : VP_CHUNK;
        if (pos + n > off + len) n = off + len - pos;
        rc = vb_write(b, zeros, pos, n, 0);
        pos += n;
    }
    for (uint64_t pos = e > a ? e : a; pos < off + len && !rc;) {
        uint64_t n = off + len - pos < VP_CHUNK ? off + len - pos : VP_CHUNK;
        rc = vb_write(b, zeros, pos, n, 0);
        pos += n;
    }
    return rc;
}

static int vb_mapped(nasd_bdev *b, uint64_t off, uint64_t len, int *is_mapped, uint64_t *run)
{
    struct vp_vbdev *vb = (struct vp_vbdev *)b;
    struct vpool *p = vb->p;
    if (atomic_load(&p->closed)) return -ENXIO;
    if (off + len > b->size || off + len < off || !len) return -ERANGE;
    int rc = vp_flush_to(p, atomic_load(&p->write_gen));   /* answer from committed state */
    if (rc) return rc;
    uint64_t gran = vb->v->flags & VPOOL_VOL_LZ4 ? VP_CHUNK_SECT : 1;
    int first = -1;
    uint64_t pos = off;
    while (pos < off + len) {
        uint64_t vsect = pos / VP_SECTOR, g0 = vsect / gran * gran;
        uint64_t ps = pool_sect(vb->v, g0);
        int st = 0;
        for (uint64_t k = 0; k < gran && ps != UINT64_MAX && !st; k++) st = vp_csum_get(p, ps + k) != 0;
        if (first < 0) first = st;
        else if (st != first) break;
        pos = (g0 + gran) * VP_SECTOR;
    }
    *is_mapped = first;
    *run = (pos < off + len ? pos : off + len) - off;
    return 0;
}

static void vb_destroy(nasd_bdev *b)
{
    struct vp_vbdev *vb = (struct vp_vbdev *)b;
    pthread_mutex_lock(&vb->v->bdev_lock);
    for (struct vp_vbdev **pp = &vb->v->bdevs; *pp; pp = &(*pp)->next)
        if (*pp == vb) { *pp = vb->next; break; }
    pthread_mutex_unlock(&vb->v->bdev_lock);
    atomic_fetch_sub(&vb->v->open_count, 1);
    if (vb->v->view_of) {   /* snapshot view: private to this bdev */
        atomic_fetch_sub(&vb->v->view_of->open_count, 1);
        vp_vol_free(vb->v);
    }
    vp_pool_put(vb->p);
    free(vb);
}

static uint64_t vb_avail(nasd_bdev *b)
{
    struct vp_vbdev *vb = (struct vp_vbdev *)b;
    return vp_vol_avail(vb->p, vb->v);
}

static const struct nasd_bdev_ops vol_ops = {
    .read = vb_read, .write = vb_write, .flush = vb_flush, .unmap = vb_unmap,
    .mapped = vb_mapped, .destroy = vb_destroy, .avail = vb_avail,
};

static int ro_write(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags)
{
    (void)b; (void)buf; (void)off; (void)len; (void)flags;
    return -EROFS;
}
static int ro_unmap(nasd_bdev *b, uint64_t off, uint64_t len) { (void)b; (void)off; (void)len; return -EROFS; }
static int ro_flush(nasd_bdev *b) { (void)b; return 0; }
static uint64_t ro_avail(nasd_bdev *b) { (void)b; return 0; }

static const struct nasd_bdev_ops view_ops = {
    .read = vb_read, .write = ro_write, .flush = ro_flush, .unmap = ro_unmap,
    .mapped = vb_mapped, .destroy = vb_destroy, .avail = ro_avail,
};

static struct vp_vbdev *vbdev_new(struct vpool *p, struct vp_vol *v, uint32_t block_size, const struct nasd_bdev_ops *ops)
{
    struct vp_vbdev *vb = calloc(1, sizeof *vb);
    if (!vb) return NULL;
    vb->p = p; vb->v = v;
    vb->b.ops = ops;
    vb->b.priv = vb;
    vb->b.size = v->size / block_size * block_size;
    vb->b.block_size = block_size;
    memcpy(vb->b.uuid, v->uuid, 16);
    snprintf(vb->b.name, sizeof vb->b.name, "%s/%s", p->name, v->name);
    atomic_init(&vb->b.refs, 1);
    atomic_fetch_add(&v->open_count, 1);
    atomic_fetch_add(&p->refs, 1);
    return vb;
}

/* Read-only bdev over a snapshot view (vpool_snap.c); the bdev owns the view. */
nasd_bdev *vp_vol_open_view(struct vpool *p, struct vp_vol *view, uint32_t block_size)
{
    struct vp_vbdev *vb = vbdev_new(p, view, block_size, &view_ops);
    if (vb) vb->b.read_only = 1;
    return vb ? &vb->b : NULL;
}

/* ---------------- management ---------------- */


static void mark_voltab(struct vpool *p, uint32_t id) { atomic_store(&p->meta_dirty[(id - 1) / VP_VOL_PER_PG], 1); }

/* Pool and volume names as stored in labels and the volume table: 1..63 of [A-Za-z0-9._:-]
 * (the REST API's name rule). */
bool vp_name_ok(const char *n)
{
    size_t l = n ? strlen(n) : 0;
    if (!l || l > 63) return false;
    for (size_t i = 0; i < l; i++)
        if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') || (n[i] >= '0' && n[i] <= '9') ||
              n[i] == '-' || n[i] == '_' || n[i] == '.' || n[i] == ':'))
            return false;
    return true;
}

/* A slot freed since the last checkpoint is taken last: the journal since that checkpoint
 * may hold its old volume's allocations, and replay must not give them to a new one. */
int vp_vol_slot(struct vpool *p, bool *ckpt)
{
    int gone = -1;
    for (int i = 0; i < VP_MAX_VOLS; i++) {
        if (p->vols[i]) continue;
        if (!p->vol_gone[i]) { *ckpt = false; return i; }
        if (gone < 0) gone = i;
    }
    *ckpt = gone >= 0;
    return gone;
}

int vpool_vol_create(struct vpool *p, const char *name, uint64_t size, int flags)
{
    if (!vp_name_ok(name) || !size || (flags & ~(VPOOL_VOL_LZ4 | VPOOL_VOL_THIN)) || size > (1ull << 50))
        return -EINVAL;
    if (atomic_load(&p->closed)) return -ENXIO;
    size = (size + VP_SECTOR - 1) / VP_SECTOR * VP_SECTOR;
    struct vp_vol *v = calloc(1, sizeof *v);
    if (!v) return -ENOMEM;
    snprintf(v->name, sizeof v->name, "%s", name);
    v->size = size;
    v->flags = (uint32_t)flags;
    v->map_len = (size + VP_AU_BYTES - 1) / VP_AU_BYTES;
    v->map = calloc(v->map_len, sizeof *v->map);
    pthread_mutex_init(&v->bdev_lock, NULL);
    vp_snap_lock_init(&v->snap_lock);
    if (!v->map || getrandom(v->uuid, 16, 0) != 16) { vp_vol_free(v); return -ENOMEM; }
    vp_commit_lock(p);
    pthread_rwlock_wrlock(&p->vol_lock);
    int rc = 0, slot = -1;
    bool ckpt = false;
    if (vol_find(p, name)) rc = -EEXIST;
    else if ((slot = vp_vol_slot(p, &ckpt)) < 0) rc = -ENOSPC;
    if (!rc) { v->id = (uint32_t)slot + 1; p->vols[slot] = v; mark_voltab(p, v->id); }
    if (!rc && !(flags & VPOOL_VOL_THIN)) {
        pthread_mutex_lock(&p->alloc_lock);
        p->thick_unalloc += v->map_len;
        pthread_mutex_unlock(&p->alloc_lock);
    }
    pthread_rwlock_unlock(&p->vol_lock);
    /* its volume table page, not a checkpoint of every page changed since the last one
     * (seconds after heavy writes): the new volume owns no unit yet */
    if (!rc && ckpt) {
        rc = vp_commit(p);
        if (!rc) rc = vp_checkpoint(p);
    } else if (!rc) rc = vp_voltab_write(p, (unsigned)slot);
    if (rc && slot >= 0) atomic_store(&p->need_checkpoint, 1);   /* it stays in RAM: a checkpoint writes it */
    pthread_mutex_unlock(&p->commit_lock);
    if (rc && slot < 0) vp_vol_free(v);
    if (!rc) log_info("vpool %s: volume %s created (%llu bytes%s%s)", p->name, name, (unsigned long long)size,
                      flags & VPOOL_VOL_LZ4 ? ", lz4" : "", flags & VPOOL_VOL_THIN ? ", thin" : "");
    return rc;
}

nasd_bdev *vpool_vol_open(struct vpool *p, const char *name, uint32_t block_size, int *err)
{
    int e = 0;
    if (block_size != 512 && block_size != 4096) e = -EINVAL;
    else if (atomic_load(&p->closed)) e = -ENXIO;
    struct vp_vbdev *vb = NULL;
    if (!e) {
        pthread_rwlock_rdlock(&p->vol_lock);
        struct vp_vol *v = vol_find(p, name);
        if (!v) e = -ENOENT;
        else if (!(vb = vbdev_new(p, v, block_size, &vol_ops))) e = -ENOMEM;
        else {
            pthread_mutex_lock(&v->bdev_lock);
            vb->next = v->bdevs; v->bdevs = vb;
            pthread_mutex_unlock(&v->bdev_lock);
        }
        pthread_rwlock_unlock(&p->vol_lock);
    }
    if (e) { free(vb); if (err) *err = e; return NULL; }
    return &vb->b;
}

int vpool_vol_destroy(struct vpool *p, const char *name)
{
    struct vp_snap **held = calloc(VP_MAX_SNAPS, sizeof *held);
    if (!held) return -ENOMEM;
    pthread_mutex_lock(&p->snap_mu);
    vp_commit_lock(p);
    int rc = vp_commit(p);
    pthread_rwlock_wrlock(&p->vol_lock);
    struct vp_vol *v = vol_find(p, name);
    if (!v) rc = -ENOENT;
    else if (atomic_load(&v->open_count)) rc = -EBUSY;
    else if (!rc) rc = vp_snap_vol_busy(p, v);   /* a clone still reads its snapshots */
    if (!rc) {
        vp_snap_vol_detach(p, v, held);
        p->vols[v->id - 1] = NULL;
        mark_voltab(p, v->id);
    }
    pthread_rwlock_unlock(&p->vol_lock);
    /* gone for good before its units are freed and reused: its table pages (volume and
     * snapshots), as a snapshot delete writes its page, not a checkpoint. The frees are
     * journaled by the commit below; after a crash before it, import frees the units of
     * volumes not in the table. */
    if (!rc) {
        rc = vp_vol_gone_write(p, v->id - 1, held);
        if (rc) {   /* it stays (members that wrote the pages lack it until the next checkpoint) */
            pthread_rwlock_wrlock(&p->vol_lock);
            p->vols[v->id - 1] = v;
            mark_voltab(p, v->id);
            for (int i = 0; i < VP_MAX_SNAPS; i++)
                if (held[i]) { p->snaps[i] = held[i]; held[i] = NULL; vp_snaptab_dirty(p, (unsigned)i); }
            pthread_rwlock_unlock(&p->vol_lock);
        }
    }
    if (!rc) {
        p->vol_gone[v->id - 1] = true;
        if (!(v->flags & VPOOL_VOL_THIN)) {   /* its unwritten units are no longer promised */
            pthread_mutex_lock(&p->alloc_lock);
            uint64_t left = v->map_len - vp_vol_mapped(v);
            p->thick_unalloc = p->thick_unalloc > left ? p->thick_unalloc - left : 0;
            pthread_mutex_unlock(&p->alloc_lock);
        }
        for (uint64_t au = 0; au < p->n_au; au++)   /* live and snapshot units it owns */
            if (p->au[au].vol_id == v->id) vp_free_au(p, au);
        rc = vp_commit(p);
        log_info("vpool %s: volume %s destroyed", p->name, name);
        vp_vol_free(v);
        for (int i = 0; i < VP_MAX_SNAPS; i++) free(held[i]);
    }
    pthread_mutex_unlock(&p->commit_lock);
    pthread_mutex_unlock(&p->snap_mu);
    free(held);
    return rc;
}

/* v->size changed (vol_lock held): its volume table page is dirty, its bdevs see it */
static void size_changed(struct vpool *p, struct vp_vol *v)
{
    mark_voltab(p, v->id);
    pthread_mutex_lock(&v->bdev_lock);
    for (struct vp_vbdev *b = v->bdevs; b; b = b->next) b->b.size = v->size / b->b.block_size * b->b.block_size;
    pthread_mutex_unlock(&v->bdev_lock);
}

/* A rollback to a snapshot taken before v grew: v takes the snapshot's size again. Its
 * units past that end were born after the snapshot and are freed, and that commit is
 * durable, before the volume table page says the smaller size (a crash between leaves
 * the rolled-back volume at the larger size, as before). commit_lock held. */
int vp_vol_shrink(struct vpool *p, struct vp_vol *v, uint64_t size)
{
    pthread_rwlock_wrlock(&p->vol_lock);
    uint64_t nl = (size + VP_AU_BYTES - 1) / VP_AU_BYTES;
    bool shrunk = size && size < v->size && nl <= v->map_len;   /* 0: not recorded */
    if (shrunk) {
        pthread_mutex_lock(&p->alloc_lock);
        uint64_t gone = 0;   /* unmapped slots past the new end: a thick volume's reservation */
        for (uint64_t e = nl; e < v->map_len; e++) gone += !v->map[e];
        if (!(v->flags & VPOOL_VOL_THIN)) p->thick_unalloc = p->thick_unalloc > gone ? p->thick_unalloc - gone : 0;
        __atomic_store_n(&v->map_len, nl, __ATOMIC_RELEASE);
        v->size = size;
        pthread_mutex_unlock(&p->alloc_lock);
        size_changed(p, v);
    }
    pthread_rwlock_unlock(&p->vol_lock);
    return shrunk ? vp_voltab_write(p, v->id - 1) : 0;
}

int vpool_vol_resize(struct vpool *p, const char *name, uint64_t new_size)
{
    new_size = (new_size + VP_SECTOR - 1) / VP_SECTOR * VP_SECTOR;
    vp_commit_lock(p);
    pthread_rwlock_wrlock(&p->vol_lock);
    struct vp_vol *v = vol_find(p, name);
    int rc = !v ? -ENOENT : new_size < v->size || new_size > (1ull << 50) ? -EINVAL : 0;
    bool grown = false;
    if (!rc && new_size > v->size) {
        uint64_t nl = (new_size + VP_AU_BYTES - 1) / VP_AU_BYTES;
        uint32_t *nm = calloc(nl, sizeof *nm);
        struct vp_oldmap *om = calloc(1, sizeof *om);
        if (!nm || !om) { free(nm); free(om); rc = -ENOMEM; }
        else {
            pthread_mutex_lock(&p->alloc_lock);
            memcpy(nm, v->map, v->map_len * sizeof *nm);
            om->map = v->map; om->next = v->old_maps; v->old_maps = om;
            __atomic_store_n(&v->map, nm, __ATOMIC_RELEASE);
            if (!(v->flags & VPOOL_VOL_THIN)) p->thick_unalloc += nl - v->map_len;
            __atomic_store_n(&v->map_len, nl, __ATOMIC_RELEASE);
            v->size = new_size;
            grown = true;
            pthread_mutex_unlock(&p->alloc_lock);
            size_changed(p, v);
        }
    }
    pthread_rwlock_unlock(&p->vol_lock);
    /* its volume table page (nothing beyond the old end is committed before it: commit_lock) */
    if (grown) rc = vp_voltab_write(p, v->id - 1);
    else if (!rc && atomic_load(&p->need_checkpoint)) rc = vp_checkpoint(p);   /* a member fault, all the same */
    pthread_mutex_unlock(&p->commit_lock);
    return rc;
}

int vpool_vol_rename(struct vpool *p, const char *from, const char *to)
{
    if (!vp_name_ok(to)) return -EINVAL;
    vp_commit_lock(p);   /* table pages are written under it: none sees a half-copied name */
    pthread_rwlock_wrlock(&p->vol_lock);
    struct vp_vol *v = vol_find(p, from);
    int rc = !v ? -ENOENT : vol_find(p, to) ? -EEXIST : 0;
    if (!rc) snprintf(v->name, sizeof v->name, "%s", to);
    pthread_rwlock_unlock(&p->vol_lock);
    if (!rc) rc = vp_voltab_write(p, v->id - 1);
    pthread_mutex_unlock(&p->commit_lock);
    return rc;
}

int vpool_vol_list(struct vpool *p, char names[][64], uint64_t *sizes, int max)
{
    int n = 0;
    pthread_rwlock_rdlock(&p->vol_lock);
    for (int i = 0; i < VP_MAX_VOLS && n < max; i++) {
        if (!p->vols[i]) continue;
        snprintf(names[n], 64, "%s", p->vols[i]->name);
        if (sizes) sizes[n] = p->vols[i]->size;
        n++;
    }
    pthread_rwlock_unlock(&p->vol_lock);
    return n;
}

int vpool_vol_flags(struct vpool *p, const char *name)
{
    pthread_rwlock_rdlock(&p->vol_lock);
    struct vp_vol *v = vol_find(p, name);
    int flags = v ? (int)v->flags : -ENOENT;
    pthread_rwlock_unlock(&p->vol_lock);
    return flags;
}

/* For tests and tools: where the data sector behind volume byte offset off lives. */
int vp_debug_locate(struct vpool *p, const char *vol, uint64_t off, int *member, uint64_t *moff, uint64_t *psect)
{
    pthread_rwlock_rdlock(&p->vol_lock);
    struct vp_vol *v = vol_find(p, vol);
    uint64_t ps = v ? pool_sect(v, off / VP_SECTOR) : UINT64_MAX;
    pthread_rwlock_unlock(&p->vol_lock);
    if (ps == UINT64_MAX) return -ENOENT;
    uint64_t phys = ps;
    if (p->xl && !(phys = vp_xl_loc(p, ps))) return -ENOENT;
    if (p->xl) phys--;
    int col;
    uint64_t row = vp_row_of(p, phys, &col);
    *member = p->layout == VPOOL_MIRROR ? 0 : vp_col_member(p, row, col);
    *moff = vp_moff(p, row, phys % VP_CHUNK_SECT);
    if (psect) *psect = ps;
    return 0;
}
