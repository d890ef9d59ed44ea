/* Pool lifecycle: create, import, close, destroy, status, member management. */
#include "storage/pool/vpool_impl.h"
#include "util/log.h"
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define VP_DEFAULT_CACHE (64ull << 20)

int vp_test_create_fmt;

static struct vpool *pool_new(void)
{
    struct vpool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    for (int i = 0; i < VP_MAXM; i++) { p->m[i].fd = -1; atomic_init(&p->m[i].state, VPOOL_M_MISSING); }
    pthread_rwlock_init(&p->vol_lock, NULL);
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);   /* commits never starve */
    pthread_rwlock_init(&p->put_lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&p->alloc_lock, NULL);
    pthread_mutex_init(&p->pend_lock, NULL);
    pthread_mutex_init(&p->commit_lock, NULL);
    pthread_mutex_init(&p->bg_lock, NULL);
    pthread_mutex_init(&p->snap_mu, NULL);
    pthread_mutex_init(&p->flush_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);   /* the flusher's tick */
    pthread_cond_init(&p->flush_cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < VP_ROW_LOCKS; i++) pthread_mutex_init(&p->row_lock[i], NULL);
    for (int i = 0; i < 64; i++) pthread_mutex_init(&p->part_lock[i], NULL);
    atomic_init(&p->refs, 1);
    p->fmt = VP_FMT_DEFAULT;
    return p;
}

static void pool_free(struct vpool *p)
{
    vp_bg_stop(p);
    vp_flusher_stop(p);
    vp_par_stop(p);
    for (int i = 0; i < VP_MAX_VOLS; i++) if (p->vols[i]) vp_vol_free(p->vols[i]);
    for (int i = 0; i < VP_MAX_SNAPS; i++) free(p->snaps[i]);
    for (int i = 0; i < VP_MAXM; i++) {
        vp_unmap_member(p, i);
        if (p->m[i].fd >= 0) close(p->m[i].fd);
    }
    vc_free(p->cache);
    free(p->parena);
    free(p->rarena);
    vp_meta_free(p);
    free(p->pend);
    free(p);
}

void vp_pool_put(struct vpool *p)
{
    if (p && atomic_fetch_sub(&p->refs, 1) == 1) pool_free(p);
}

static int open_member(const char *path, uint64_t create_size, uint64_t *size, char *err, size_t errlen)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | (create_size ? O_CREAT : 0), 0600);
    if (fd < 0) { vp_set_err(err, errlen, "%s: %s", path, strerror(errno)); return -errno; }
    struct stat st;
    if (fstat(fd, &st) < 0) goto fail;
    if (S_ISBLK(st.st_mode)) {
        if (ioctl(fd, BLKGETSIZE64, size) < 0) goto fail;
    } else if (S_ISREG(st.st_mode)) {
        if ((uint64_t)st.st_size < create_size && ftruncate(fd, (off_t)create_size) < 0) goto fail;
        *size = (uint64_t)st.st_size < create_size ? create_size : (uint64_t)st.st_size;
    } else {
        vp_set_err(err, errlen, "%s: not a regular file or block device", path);
        close(fd);
        return -EINVAL;
    }
    return fd;
fail:
    vp_set_err(err, errlen, "%s: %s", path, strerror(errno));
    int e = -errno;
    close(fd);
    return e;
}

/* the number a /proc or /sys file starts with; 0 if none (missing, or e.g. "max") */
static uint64_t file_number(const char *path)
{
    unsigned long long v = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%llu", &v) != 1) v = 0;
        fclose(f);
    }
    return v;
}

static uint64_t vm_knob(const char *name)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/sys/vm/%s", name);
    return file_number(path);
}

/* RAM, or the cgroup's memory limit when lower (a container's OOM killer would take every
 * unflushed write with it) */
uint64_t vp_memory_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t mem = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 1ull << 30;
    uint64_t lim = file_number("/sys/fs/cgroup/memory.max");
    return lim && lim < mem ? lim : mem;
}

/* A *_bytes knob if set, else its *_ratio percent of memory (the kernel's defaults 10 / 20
 * where /proc does not say). */
static uint64_t host_dirty(const char *bytes, const char *ratio, uint64_t dflt_pct)
{
    uint64_t b = vm_knob(bytes);
    if (b) return b;
    uint64_t pct = vm_knob(ratio);
    if (!pct || pct > 100) pct = dflt_pct;
    return vp_memory_bytes() / 100 * pct;
}

/* The write-back budget. By default as large as what the kernel lets dirty page cache
 * grow to before its flusher starts (soft) and before writers must wait (hard): a pool
 * then buffers what the same writes to a plain file would, and overwrites in RAM are
 * committed once (a random-write working set that fits is written as whole stripes;
 * ZFS keeps up to 10 % of RAM dirty the same way). Counted over every pool, see
 * vp_dirty_over(). A commit whose data goes to the journal and overruns it checkpoints
 * in the middle, so the journal size is no bound. */
#define VP_DIRTY_CAP (4ull << 30)   /* as ZFS's zfs_dirty_data_max_max */
static void dirty_limits(struct vpool *p, const struct vpool_opts *o)
{
    uint64_t hard, soft;
    if (o && o->dirty_bytes) {
        hard = o->dirty_bytes;
        soft = hard / 2;
    } else {
        soft = host_dirty("dirty_background_bytes", "dirty_background_ratio", 10);
        hard = host_dirty("dirty_bytes", "dirty_ratio", 20);
        if (hard > VP_DIRTY_CAP) hard = VP_DIRTY_CAP;
        if (soft >= hard) soft = hard / 2;
    }
    p->dirty_max = hard / VP_SECTOR;
    if (p->dirty_max < 1024) p->dirty_max = 1024;
    p->dirty_soft = soft / VP_SECTOR;
    if (p->dirty_soft < 512 || p->dirty_soft > p->dirty_max) p->dirty_soft = p->dirty_max / 2;
}

static int pool_start(struct vpool *p, const struct vpool_opts *o)
{
    uint64_t cb = o && o->cache_bytes ? o->cache_bytes : VP_DEFAULT_CACHE;
    p->cache = vc_new(cb, p->n_sect);
    if (!p->cache) return -ENOMEM;
    dirty_limits(p, o);
    return 0;
}


int vpool_create(const char *name, enum vpool_layout layout, const struct vpool_member_spec *ms, int n,
                 const struct vpool_opts *o, struct vpool **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!vp_name_ok(name)) { vp_set_err(err, errlen, "invalid pool name"); return -EINVAL; }
    if (n < 1 || n > VP_MAXM || (layout == VPOOL_MIRROR && n < 2) || (layout == VPOOL_RAIDZ1 && n < 3) ||
        layout > VPOOL_RAIDZ1) {
        vp_set_err(err, errlen, "%s needs %s members (max %d)", vpool_layout_name(layout),
                   layout == VPOOL_RAIDZ1 ? ">= 3" : layout == VPOOL_MIRROR ? ">= 2" : ">= 1", VP_MAXM);
        return -EINVAL;
    }
    struct vpool *p = pool_new();
    if (!p) return -ENOMEM;
    snprintf(p->name, sizeof p->name, "%s", name);
    if (vp_test_create_fmt) p->fmt = (uint32_t)vp_test_create_fmt;
    if (o && o->log) p->fmt = VP_FMT_LOG;
    if (vp_is_log(p) && layout != VPOOL_RAIDZ1) {
        vp_set_err(err, errlen, "a log-structured pool needs the raidz1 layout");
        pool_free(p);
        return -EINVAL;
    }
    p->layout = layout;
    p->n = n;
    uint64_t msize = UINT64_MAX;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        for (int j = 0; j < i; j++)
            if (!strcmp(ms[i].path, ms[j].path)) { vp_set_err(err, errlen, "%s listed twice", ms[i].path); rc = -EINVAL; }
        if (rc) break;
        snprintf(p->m[i].path, sizeof p->m[i].path, "%s", ms[i].path);
        int fd = open_member(ms[i].path, ms[i].create_size, &p->m[i].size, err, errlen);
        if (fd < 0) { rc = fd; break; }
        p->m[i].fd = fd;
        struct vp_label l;
        if (!ms[i].wipe && (vp_read_label(fd, VP_LABEL_A, &l) == 0 || vp_read_label(fd, VP_LABEL_B, &l) == 0)) {
            vp_set_err(err, errlen, "%s already belongs to pool '%s'; destroy that pool first", ms[i].path, l.name);
            rc = -EEXIST;
            break;
        }
        atomic_store(&p->m[i].state, VPOOL_M_ONLINE);
        if (getrandom(p->m[i].guid, 16, 0) != 16) rc = -EIO;
        if (p->m[i].size < msize) msize = p->m[i].size;
    }
    if (!rc && getrandom(p->uuid, 16, 0) != 16) rc = -EIO;
    if (!rc && (rc = vp_geometry(p, msize)))
        vp_set_err(err, errlen, "members too small (smallest %llu bytes, need >= 16 MiB)", (unsigned long long)msize);
    if (!rc && vp_is_log(p) && vp_xl_nphys(p) >= UINT32_MAX) {   /* before the journals are written */
        vp_set_err(err, errlen, "raidz1 (log-structured) addresses at most 16 TiB of data, these members "
                   "give %llu GiB: use smaller members or raidz1-inplace", (unsigned long long)(vp_xl_nphys(p) * VP_SECTOR >> 30));
        rc = -EFBIG;
    }
    for (int i = 0; i < n && !rc; i++)   /* nothing refused the members: the first writes */
        if (ms[i].wipe && (rc = ms[i].wipe(ms[i].path)))
            vp_set_err(err, errlen, "cannot wipe %s: %s", ms[i].path, strerror(-rc));
    for (int i = 0; i < n && !rc; i++) vp_journal_fill(p, p->m[i].fd, p->m[i].path);
    if (!rc && (rc = vp_meta_alloc(p))) vp_set_err(err, errlen, "out of memory for metadata");
    if (!rc) vp_meta_regions_init(p, vp_test_meta_regions);
    if (!rc && p->xl) rc = vp_xl_rebuild(p);
    if (!rc) rc = pool_start(p, o);
    if (!rc) {
        p->gen = 1;
        rc = vp_meta_write(p, true, 0);   /* the volume and snapshot tables' regions */
        if (!rc) rc = vp_write_labels(p, 0);
        if (rc) vp_set_err(err, errlen, "writing metadata: %s", strerror(-rc));
    }
    if (rc) { pool_free(p); return rc; }
    if (o && o->direct) for (int i = 0; i < n; i++) vp_set_direct(p, i);
    for (int i = 0; i < n; i++) vp_map_member(p, i);
    vp_flusher_start(p);
    log_info("vpool %s: created %s of %d members, %llu MiB usable", p->name, vpool_layout_label(layout, vp_is_log(p)), n,
             (unsigned long long)(p->n_au * VP_AU_BYTES >> 20));
    *out = p;
    return 0;
}

struct cand { int fd; uint64_t size; struct vp_label l; const char *path; };

static int read_best_label(int fd, struct vp_label *l)
{
    struct vp_label a, b;
    int ra = vp_read_label(fd, VP_LABEL_A, &a), rb = vp_read_label(fd, VP_LABEL_B, &b);
    if (ra && rb) return ra == -ENOENT ? rb : ra;
    if (!ra && (rb || a.gen >= b.gen)) *l = a; else *l = b;
    return 0;
}

int vpool_import(const char *const *paths, int n, const struct vpool_opts *o, struct vpool **out,
                 char *err, size_t errlen)
{
    *out = NULL;
    if (n < 1 || n > 4 * VP_MAXM) { vp_set_err(err, errlen, "bad number of member paths"); return -EINVAL; }
    struct cand c[4 * VP_MAXM];
    int best = -1, rc = 0;
    char why[512] = "";
    for (int i = 0; i < n; i++) {
        c[i].path = paths[i];
        c[i].fd = open_member(paths[i], 0, &c[i].size, NULL, 0);
        if (c[i].fd < 0) {
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s%s: %s", *why ? "; " : "", paths[i], strerror(-c[i].fd));
            continue;
        }
        int lr = read_best_label(c[i].fd, &c[i].l);
        if (lr) {
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s%s: %s", *why ? "; " : "", paths[i],
                     lr == -ENOENT ? "no pool label" : lr == -EPROTO ? "unsupported label version" :
                     lr == -EIO ? "cannot read label" : "corrupt label");
            close(c[i].fd); c[i].fd = -1;
            continue;
        }
        if (best < 0 || c[i].l.gen > c[best].l.gen) best = i;
    }
    if (best < 0) { vp_set_err(err, errlen, "no importable member: %s", why); return -ENOENT; }
    if (*why) log_warn("vpool import: ignoring %s", why);
    struct vp_label *bl = &c[best].l;
    struct vpool *p = pool_new();
    if (!p) { rc = -ENOMEM; goto fail_c; }
    memcpy(p->uuid, bl->pool_uuid, 16);
    memcpy(p->name, bl->name, sizeof p->name);
    p->layout = bl->layout;
    p->n = (int)bl->nmembers;
    p->gen = bl->gen;
    p->fmt = bl->version;
    p->seq = bl->ckpt_seq;
    p->meta_rpp = bl->meta_rpp;
    memcpy(p->meta_init, bl->meta_init, sizeof p->meta_init);
    for (int i = 0; i < p->n; i++) {
        memcpy(p->m[i].guid, bl->guids[i], 16);
        atomic_store(&p->m[i].rd_err, bl->errs[i][0]);   /* error counters survive restarts */
        atomic_store(&p->m[i].wr_err, bl->errs[i][1]);
        atomic_store(&p->m[i].ck_err, bl->errs[i][2]);
    }
    if (vp_geometry(p, bl->member_size) || p->jnl_size != bl->jnl_size || p->meta_pages != bl->meta_pages ||
        p->data_off != bl->data_off || p->rows != bl->rows || p->n_au != bl->n_au || !vp_meta_regions_valid(p)) {
        vp_set_err(err, errlen, "label geometry is inconsistent");
        rc = -EBADMSG;
        goto fail_p;
    }
    uint32_t good = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].fd < 0) continue;
        struct vp_label *l = &c[i].l;
        int idx = (int)l->member_idx;
        if (memcmp(l->pool_uuid, p->uuid, 16)) {
            vp_set_err(err, errlen, "%s belongs to another pool (%s)", c[i].path, l->name);
            rc = -EINVAL;
            goto fail_p;
        }
        if (idx >= p->n || memcmp(l->guids[idx], p->m[idx].guid, 16) || p->m[idx].fd >= 0 ||
            c[i].size < p->member_size) {
            log_warn("vpool %s: %s is not a current member (replaced or duplicate); ignoring", p->name, c[i].path);
            continue;
        }
        struct vp_member *m = &p->m[idx];
        snprintf(m->path, sizeof m->path, "%s", c[i].path);
        m->fd = c[i].fd; c[i].fd = -1;
        m->size = c[i].size;
        /* one generation behind and ONLINE in the newest label: it missed only the label
         * write of the last checkpoint (its metadata pages were synced before any label) */
        bool current = (l->gen == p->gen || l->gen + 1 == p->gen) && bl->mstate[idx] == VPOOL_M_ONLINE;
        atomic_store(&m->state, current ? VPOOL_M_ONLINE : VPOOL_M_RESILVERING);
        if (current) good |= 1u << idx;
        else log_warn("vpool %s: member %d (%s) is stale (generation %llu < %llu), will resilver", p->name, idx,
                      m->path, (unsigned long long)l->gen, (unsigned long long)p->gen);
    }
    for (int i = 0; i < p->n; i++)
        if (p->m[i].fd < 0) snprintf(p->m[i].path, sizeof p->m[i].path, "(missing member %d)", i);
    if (vp_pool_state(p) == VPOOL_FAULTED) {
        int have = __builtin_popcount(good);
        vp_set_err(err, errlen, "pool '%s' is FAULTED: only %d of %d %s members are present and current%s%s",
                   p->name, have, p->n, vpool_layout_label(p->layout, vp_is_log(p)), *why ? " (" : "", *why ? why : "");
        if (*why) snprintf(err + strlen(err), errlen - strlen(err), ")");
        rc = -ENXIO;
        goto fail_p;
    }
    for (int i = 0; i < p->n; i++) vp_journal_fill(p, p->m[i].fd, p->m[i].path);   /* pools made before it */
    if ((rc = vp_meta_alloc(p))) goto fail_p;
    if ((rc = vp_meta_load(p, good, err, errlen))) goto fail_p;
    if ((rc = pool_start(p, o))) goto fail_p;
    if ((rc = vp_replay(p, p->seq, err, errlen))) goto fail_p;
    if (p->xl && (rc = vp_xl_rebuild(p))) goto fail_p;
    if ((rc = vp_rebuild_vol_maps(p))) goto fail_p;
    uint32_t stale = 0;
    for (int i = 0; i < p->n; i++) if (atomic_load(&p->m[i].state) == VPOOL_M_RESILVERING) stale |= 1u << i;
    vp_commit_lock(p);
    rc = vp_checkpoint(p);
    pthread_mutex_unlock(&p->commit_lock);
    if (rc) { vp_set_err(err, errlen, "writing checkpoint: %s", strerror(-rc)); goto fail_p; }
    log_info("vpool %s: imported (%s, %s)", p->name, vpool_layout_label(p->layout, vp_is_log(p)),
             vpool_state_name(vp_pool_state(p)));
    if (o && o->direct) for (int i = 0; i < p->n; i++) if (p->m[i].fd >= 0) vp_set_direct(p, i);
    for (int i = 0; i < p->n; i++) vp_map_member(p, i);
    if (stale) vp_bg_start(p, 2, stale);
    vp_flusher_start(p);
    *out = p;
    return 0;
fail_p:
    pool_free(p);
fail_c:
    for (int i = 0; i < n; i++) if (c[i].fd >= 0) close(c[i].fd);
    return rc;
}

static void close_common(struct vpool *p)
{
    vp_bg_stop(p);
    vp_flusher_stop(p);
    vp_commit_lock(p);
    if (atomic_load(&p->closed) < 2) {
        atomic_store(&p->closed, 1);
        if (vp_commit(p) == 0 && vp_pool_state(p) != VPOOL_FAULTED) vp_checkpoint(p);
        atomic_store(&p->closed, 2);
    }
    pthread_mutex_unlock(&p->commit_lock);
}

void vpool_close(struct vpool *p)
{
    if (!p) return;
    close_common(p);
    log_info("vpool %s: closed", p->name);
    vp_pool_put(p);
}

int vpool_destroy(struct vpool *p)
{
    pthread_rwlock_rdlock(&p->vol_lock);
    for (int i = 0; i < VP_MAX_VOLS; i++)
        if (p->vols[i] && atomic_load(&p->vols[i]->open_count)) { pthread_rwlock_unlock(&p->vol_lock); return -EBUSY; }
    pthread_rwlock_unlock(&p->vol_lock);
    close_common(p);
    vp_wipe_labels(p);
    log_info("vpool %s: destroyed", p->name);
    vp_pool_put(p);
    return 0;
}

int vpool_sync(struct vpool *p)
{
    if (atomic_load(&p->closed)) return -ENXIO;
    return vp_flush_to(p, atomic_load(&p->write_gen));
}

int vpool_get_status(struct vpool *p, struct vpool_status *st)
{
    memset(st, 0, sizeof *st);
    snprintf(st->name, sizeof st->name, "%s", p->name);
    memcpy(st->uuid, p->uuid, 16);
    st->layout = p->layout;
    st->log = vp_is_log(p);
    st->state = vp_pool_state(p);
    st->size = p->n_au * VP_AU_BYTES;
    st->allocated = vp_au_count_used(p) * VP_AU_BYTES;
    st->free = st->size - st->allocated;
    st->nmembers = p->n;
    for (int i = 0; i < p->n; i++) {
        struct vpool_member_status *m = &st->members[i];
        snprintf(m->path, sizeof m->path, "%s", p->m[i].path);
        m->state = atomic_load(&p->m[i].state);
        m->size = p->m[i].size;
        m->read_errors = atomic_load(&p->m[i].rd_err);
        m->write_errors = atomic_load(&p->m[i].wr_err);
        m->checksum_errors = atomic_load(&p->m[i].ck_err);
    }
    uint64_t total = atomic_load(&p->bg_total), done = atomic_load(&p->bg_done);
    double prog = total ? (double)done / (double)total : 1.0;
    st->scrub_running = atomic_load(&p->scrub_running);
    st->resilver_running = atomic_load(&p->resilver_running);
    st->scrub_progress = st->scrub_running ? prog : (atomic_load(&p->scrub_finished) ? 1.0 : 0.0);
    st->resilver_progress = st->resilver_running ? prog : 1.0;
    st->resilver_rows = atomic_load(&p->bg_rebuilt);
    st->resilver_bytes = st->resilver_rows * VP_CHUNK;
    st->dirty = vc_dirty_count(p->cache) * VP_SECTOR;
    st->dirty_soft = p->dirty_soft * VP_SECTOR;
    st->dirty_max = p->dirty_max * VP_SECTOR;
    st->scrub_repaired = atomic_load(&p->scrub_repaired);
    st->scrub_unrepairable = atomic_load(&p->scrub_unrepairable);
    st->scrub_started = atomic_load(&p->scrub_started);
    st->scrub_finished = atomic_load(&p->scrub_finished);
    st->repaired = atomic_load(&p->repaired);
    st->unrepairable = atomic_load(&p->unrepairable);
    return 0;
}

/* ---------------- members ---------------- */

static bool would_fault(struct vpool *p, int idx)
{
    int saved = atomic_exchange(&p->m[idx].state, VPOOL_M_OFFLINE);
    bool f = vp_pool_state(p) == VPOOL_FAULTED;
    atomic_store(&p->m[idx].state, saved);
    return f;
}

int vpool_member_offline(struct vpool *p, int idx)
{
    if (idx < 0 || idx >= p->n) return -EINVAL;
    if (atomic_load(&p->m[idx].state) != VPOOL_M_ONLINE) return -EINVAL;
    if (would_fault(p, idx)) return -EBUSY;
    vp_commit_lock(p);
    int rc = vp_commit(p);
    if (!rc) {
        /* the marks start afresh only when every member is in sync: another member away
         * or being resilvered (a 3-way mirror) still needs what was marked for it */
        if (vp_all_online(p)) {
            memset(p->changed_au, 0, vp_phys_aus(p));
            p->changed_any = 0;
        }
        atomic_store(&p->m[idx].state, VPOOL_M_OFFLINE);
        rc = vp_checkpoint(p);   /* its label now lags: a later import knows it is stale */
    }
    pthread_mutex_unlock(&p->commit_lock);
    log_info("vpool %s: member %d offline", p->name, idx);
    return rc;
}

int vpool_member_online(struct vpool *p, int idx)
{
    if (idx < 0 || idx >= p->n) return -EINVAL;
    int s = atomic_load(&p->m[idx].state);
    if (s != VPOOL_M_OFFLINE && s != VPOOL_M_FAULTED) return -EINVAL;
    if (p->m[idx].fd < 0) return -ENXIO;
    vp_bg_stop(p);
    vp_commit_lock(p);
    int rc = vp_commit(p);
    atomic_store(&p->m[idx].state, VPOOL_M_RESILVERING);
    if (!rc) rc = vp_checkpoint(p);
    pthread_mutex_unlock(&p->commit_lock);
    if (rc) return rc;
    /* after an admin offline only what changed meanwhile needs rebuilding */
    return vp_bg_start(p, s == VPOOL_M_OFFLINE ? 3 : 2, 1u << idx);
}

int vpool_member_replace(struct vpool *p, int idx, const char *new_path, uint64_t create_size, vpool_wipe_fn wipe)
{
    if (idx < 0 || idx >= p->n || !new_path) return -EINVAL;
    if (p->layout == VPOOL_STRIPE && atomic_load(&p->m[idx].state) != VPOOL_M_ONLINE) return -ENOTSUP;
    for (int i = 0; i < p->n; i++)
        if (i != idx && p->m[i].fd >= 0 && !strcmp(p->m[i].path, new_path)) return -EINVAL;
    uint64_t size = 0;
    int fd = open_member(new_path, create_size, &size, NULL, 0);
    if (fd < 0) return fd;
    if (size < p->member_size) { close(fd); return -ENOSPC; }
    if (p->layout == VPOOL_STRIPE) { close(fd); return -ENOTSUP; }   /* no redundancy to rebuild from */
    int wr = wipe ? wipe(new_path) : 0;
    if (wr) { close(fd); return wr; }
    vp_bg_stop(p);
    vp_commit_lock(p);
    int rc = vp_commit(p);
    struct vp_member *m = &p->m[idx];
    atomic_store(&m->state, VPOOL_M_OFFLINE);   /* no I/O to it while the fd changes */
    if (m->fd >= 0) {
        /* keep the descriptor number: a racing reader that already loaded it then reads
         * the new (still unverified) file instead of a recycled descriptor */
        if (dup2(fd, m->fd) < 0) rc = rc ? rc : -errno;
        close(fd);
    } else m->fd = fd;
    vp_journal_fill(p, m->fd, new_path);   /* offline and under commit_lock: no journal write races it */
    if (m->direct) vp_set_direct(p, idx);   /* the new file gets the same treatment */
    vp_map_member(p, idx);
    snprintf(m->path, sizeof m->path, "%s", new_path);
    m->size = size;
    if (getrandom(m->guid, 16, 0) != 16) rc = rc ? rc : -EIO;
    atomic_store(&m->rd_err, 0); atomic_store(&m->wr_err, 0); atomic_store(&m->ck_err, 0);
    atomic_store(&m->state, VPOOL_M_RESILVERING);
    if (!rc) rc = vp_checkpoint(p);
    pthread_mutex_unlock(&p->commit_lock);
    if (rc) return rc;
    log_info("vpool %s: member %d replaced by %s, resilvering", p->name, idx, new_path);
    return vp_bg_start(p, 2, 1u << idx);
}

/* Like zpool clear: error counters to zero (persisted by a checkpoint), and faulted
 * members that are still open come back through a full resilver. */
int vpool_clear(struct vpool *p)
{
    if (atomic_load(&p->closed)) return -ENXIO;
    uint32_t mask = 0;
    for (int i = 0; i < p->n; i++)
        if (atomic_load(&p->m[i].state) == VPOOL_M_FAULTED && p->m[i].fd >= 0) mask |= 1u << i;
    if (mask) vp_bg_stop(p);
    vp_commit_lock(p);
    int rc = vp_commit(p);
    for (int i = 0; i < p->n; i++) {
        atomic_store(&p->m[i].rd_err, 0);
        atomic_store(&p->m[i].wr_err, 0);
        atomic_store(&p->m[i].ck_err, 0);
        if (!(mask & (1u << i))) continue;
        struct stat sb;   /* a file cut short gets its size back, or import would not take it */
        if (fstat(p->m[i].fd, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size < p->member_size) {
            if (ftruncate(p->m[i].fd, (off_t)p->member_size) == 0) p->m[i].size = p->member_size;
            else { rc = rc ? rc : -errno; continue; }
        }
        atomic_store(&p->m[i].state, VPOOL_M_RESILVERING);
    }
    if (!rc) rc = vp_checkpoint(p);
    pthread_mutex_unlock(&p->commit_lock);
    if (mask) {
        log_info("vpool %s: errors cleared, resilvering members 0x%x", p->name, mask);
        int brc = vp_bg_start(p, 2, mask);
        if (!rc) rc = brc;
    } else log_info("vpool %s: errors cleared", p->name);
    return rc;
}
