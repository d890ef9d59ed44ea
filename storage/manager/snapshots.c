/* Snapshots, clones, rollback and send/receive of volumes and datasets for the REST
 * layer (the engine does the work, storage/pool/vpool_snap.c). A dataset is the engine
 * volume ".<name>" holding an ext2 filesystem: its snapshot is taken while the
 * filesystem is held at a commit point, and a snapshot is mounted read-only through a
 * RAM overlay that absorbs the journal replay ext2 does on open. Ceph pools use RBD
 * snapshots and clones of the same image names (storage/ceph). */
#define _GNU_SOURCE
#include "storage/manager/storage_impl.h"
#include "storage/pool/vpool_snap.h"
#include "util/log.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int engine_name(const char *obj, int is_ds, char *out, char *err, size_t errlen)
{
    if (strlen(obj) + (is_ds ? 1 : 0) >= 64) { snprintf(err, errlen, "name too long"); return -EINVAL; }
    snprintf(out, 64, "%s%s", is_ds ? "." : "", obj);
    return 0;
}

static int prep(struct storage *st, struct pool_ref *r, const char *pool, const char *obj, int is_ds, struct vpool **vp,
                char *vol, char *err, size_t errlen)
{
    *vp = engine(st, r, pool, err, errlen);
    if (!*vp) return -ENOENT;
    return engine_name(obj, is_ds, vol, err, errlen);
}


/* Ceph pools: RBD snapshots of the same image names (storage/ceph). *is_ceph says whether
 * the pool is one; NULL with a message when it is but the cluster cannot be reached. */
static struct ceph_pool *rbd_pool(struct storage *st, struct pool_ref *r, const char *pool, const char *obj, int is_ds,
                                  char *img, int *is_ceph, int *rc, char *err, size_t errlen)
{
    struct ceph_pool *cp = ceph_of(st, r, pool, is_ceph, err, errlen);
    *rc = !*is_ceph ? 0 : !cp ? -ENXIO : engine_name(obj, is_ds, img, err, errlen);
    return *rc ? NULL : cp;
}

struct ceph_snap_arg { struct ceph_pool *cp; const char *img, *snap; char *err; size_t errlen; };
static int do_ceph_snap(void *arg)
{
    struct ceph_snap_arg *a = arg;
    return ceph_snap_create(a->cp, a->img, a->snap, a->err, a->errlen);
}

static int msg(int rc, char *err, size_t errlen, const char *pool, const char *obj, const char *snap, const char *op)
{
    const char *why = rc == -EBUSY ? "in use (a clone depends on it, or it is open)" :
                      rc == -ENOTEMPTY ? "newer snapshots exist; delete them first" :
                      rc == -EEXIST ? "exists" : rc == -ENOENT ? "not found" :
                      rc == -EOPNOTSUPP ? "the pool was created before snapshots (format 1) and cannot hold them" : strerror(-rc);
    snprintf(err, errlen, "%s %s/%s%s%s: %s", op, pool, obj, snap ? "@" : "", snap ? snap : "", why);
    return rc;
}

/* Runs fn with the dataset's filesystem (if open) held at a commit point. */
struct snap_arg { struct vpool *vp; const char *vol, *snap; };
static int do_snap(void *arg) { struct snap_arg *a = arg; return vpool_snap_create(a->vp, a->vol, a->snap); }

int storage_snap_create(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap,
                        char *err, size_t errlen)
{
    POOL_REF(r);
    struct vpool *vp = NULL;
    char vol[64];
    int is_ceph, rc;
    struct ceph_pool *cp = rbd_pool(st, &r, pool, obj, is_ds, vol, &is_ceph, &rc, err, errlen);
    if (!is_ceph && (rc = prep(st, &r, pool, obj, is_ds, &vp, vol, err, errlen)) != 0) return rc;
    if (is_ceph && !cp) return rc;
    struct snap_arg a = { vp, vol, snap };
    struct ceph_snap_arg ca = { cp, vol, snap, err, errlen };
    struct nasd_fsroot *fs = NULL;
    if (is_ds) {
        struct pool *p = pool_hold(st, &r, pool);
        pthread_mutex_lock(&st->lock);
        for (struct open_dataset *d = p ? p->datasets : NULL; d; d = d->next)
            if (!strcmp(d->name, obj)) { if (d->closing) rc = -EBUSY; else fs = nasd_fsroot_get(d->fs); }
        pthread_mutex_unlock(&st->lock);
        if (rc) {
            snprintf(err, errlen, "snapshot %s/%s@%s: the dataset is being rolled back or received; try again", pool, obj, snap);
            return rc;
        }
    }
    if (cp) {   /* the dataset's filesystem held at a commit point, as for engine pools */
        rc = fs ? nasd_ext2_commit_hold(fs, do_ceph_snap, &ca) : do_ceph_snap(&ca);
        nasd_fsroot_put(fs);
        return rc;
    }
    rc = fs ? nasd_ext2_commit_hold(fs, do_snap, &a) : do_snap(&a);
    nasd_fsroot_put(fs);
    return rc ? msg(rc, err, errlen, pool, obj, snap, "snapshot") : 0;
}

int storage_snap_destroy(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap,
                         char *err, size_t errlen)
{
    POOL_REF(r);
    struct vpool *vp;
    char vol[64];
    int is_ceph, rc;
    struct ceph_pool *cp = rbd_pool(st, &r, pool, obj, is_ds, vol, &is_ceph, &rc, err, errlen);
    if (is_ceph) return cp ? ceph_snap_destroy(cp, vol, snap, err, errlen) : rc;
    rc = prep(st, &r, pool, obj, is_ds, &vp, vol, err, errlen);
    if (!rc) rc = vpool_snap_destroy(vp, vol, snap);
    for (int i = 0; rc == -EBUSY && i < 50; i++) {   /* a just-removed export may still hold it */
        usleep(20000);
        rc = vpool_snap_destroy(vp, vol, snap);
    }
    return rc ? msg(rc, err, errlen, pool, obj, snap, "delete snapshot") : 0;
}

static json_t *info_json(const struct vpool_snap_info *s)
{
    char uuid[33];
    for (int i = 0; i < 16; i++) snprintf(uuid + 2 * i, 3, "%02x", s->uuid[i]);
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:i, s:s}", "name", s->name, "created", (json_int_t)s->ctime,
                     "size", (json_int_t)s->size, "used", (json_int_t)s->used, "referenced", (json_int_t)s->referenced,
                     "clones", s->clones, "guid", uuid);
}

json_t *storage_snap_list(struct storage *st, const char *pool, const char *obj, int is_ds, int *errp)
{
    POOL_REF(r);
    struct vpool *vp;
    char vol[64], err[256];
    int is_ceph, rc;
    struct ceph_pool *cp = rbd_pool(st, &r, pool, obj, is_ds, vol, &is_ceph, &rc, err, sizeof err);
    if (is_ceph) {
        if (cp) return ceph_snap_list(cp, vol, NULL, errp);
        *errp = rc;
        return NULL;
    }
    rc = prep(st, &r, pool, obj, is_ds, &vp, vol, err, sizeof err);
    int n = rc ? rc : vpool_snap_list(vp, vol, NULL, 0);
    if (n < 0) { *errp = n; return NULL; }
    struct vpool_snap_info *si = calloc(n ? n : 1, sizeof *si);
    if (!si) { *errp = -ENOMEM; return NULL; }
    n = vpool_snap_list(vp, vol, si, n);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(arr, info_json(&si[i]));
    free(si);
    return arr;
}

json_t *storage_snap_get(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap, int *errp)
{
    POOL_REF(r);
    struct vpool *vp;
    char vol[64], err[256];
    int is_ceph, rc;
    struct ceph_pool *cp = rbd_pool(st, &r, pool, obj, is_ds, vol, &is_ceph, &rc, err, sizeof err);
    if (is_ceph) {
        json_t *one = cp ? ceph_snap_list(cp, vol, snap, errp) : NULL;
        if (!cp) *errp = rc;
        json_t *s0 = json_incref(json_array_get(one, 0));
        json_decref(one);
        return s0;
    }
    rc = prep(st, &r, pool, obj, is_ds, &vp, vol, err, sizeof err);
    struct vpool_snap_info si;
    if (!rc) rc = vpool_snap_info(vp, vol, snap, &si);
    if (rc) { *errp = rc; return NULL; }
    return info_json(&si);
}

/* Closes the shared filesystem object of a dataset whose blocks are about to change
 * underneath (rollback, receive): its RAM state would not match them any more. NFS calls
 * that began before the caller removed the exports, and self-tests, still hold it: this
 * waits for them (no new holder meanwhile), so that its last commit comes before the
 * change and nothing of it writes after. -EBUSY if one still holds it after
 * DS_RELEASE_MS (the object stays open). */
#define DS_RELEASE_MS 5000
static int close_dataset(struct storage *st, struct pool_ref *r, const char *pool, const char *obj,
                         char *err, size_t errlen)
{
    struct pool *p = pool_hold(st, r, pool);
    struct nasd_fsroot *f = NULL;
    pthread_mutex_lock(&st->lock);
    for (struct open_dataset *d = p ? p->datasets : NULL; d && !f; d = d->next)
        if (!strcmp(d->name, obj) && !d->closing) { d->closing = 1; f = nasd_fsroot_get(d->fs); }
    pthread_mutex_unlock(&st->lock);
    if (!f) return 0;   /* not open (or another close runs: the pool operation serialises) */
    for (int ms = 0; atomic_load(&f->refs) > 2 && ms < DS_RELEASE_MS; ms++) usleep(1000);
    int rc = -EBUSY;
    pthread_mutex_lock(&st->lock);   /* refs only fall while closing: 2 = the storage's and ours */
    for (struct open_dataset **pp = &p->datasets; *pp; pp = &(*pp)->next) {
        struct open_dataset *d = *pp;
        if (d->fs != f) continue;
        if (atomic_load(&f->refs) == 2) {   /* both put here: it commits and closes before anyone looks again */
            *pp = d->next;
            nasd_fsroot_put(f);
            nasd_fsroot_put(f);
            free(d);
            rc = 0;
        } else d->closing = 0;
        break;
    }
    pthread_mutex_unlock(&st->lock);
    if (rc) nasd_fsroot_put(f);
    if (rc) snprintf(err, errlen, "dataset %s/%s is busy: NFS calls or a self-test still use it; try again", pool, obj);
    return rc;
}

int storage_snap_rollback(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap,
                          char *err, size_t errlen)
{
    POOL_REF(r);
    struct vpool *vp;
    char vol[64];
    int is_ceph, rc;
    struct ceph_pool *cp = rbd_pool(st, &r, pool, obj, is_ds, vol, &is_ceph, &rc, err, errlen);
    if (is_ceph) {
        if (!cp) return rc;
        if (is_ds && (rc = close_dataset(st, &r, pool, obj, err, errlen)) != 0) return rc;   /* also lets go of the image's lock */
        return ceph_snap_rollback(cp, vol, snap, err, errlen);
    }
    rc = prep(st, &r, pool, obj, is_ds, &vp, vol, err, errlen);
    if (rc) return rc;
    if (is_ds && (rc = close_dataset(st, &r, pool, obj, err, errlen)) != 0) return rc;
    rc = vpool_snap_rollback(vp, vol, snap);
    return rc ? msg(rc, err, errlen, pool, obj, snap, "rollback") : 0;
}

int storage_snap_clone(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap,
                       const char *clone, char *err, size_t errlen)
{
    POOL_REF(r);
    struct vpool *vp;
    char vol[64], cvol[64];
    int is_ceph, rc;
    struct ceph_pool *cp = rbd_pool(st, &r, pool, obj, is_ds, vol, &is_ceph, &rc, err, errlen);
    if (is_ceph) {
        if (!cp || (rc = engine_name(clone, is_ds, cvol, err, errlen)) != 0) return rc;
        return ceph_clone(cp, vol, snap, cvol, is_ds ? "dataset" : "volume", clone, err, errlen);
    }
    rc = prep(st, &r, pool, obj, is_ds, &vp, vol, err, errlen);
    if (!rc) rc = engine_name(clone, is_ds, cvol, err, errlen);
    if (!rc && (rc = vpool_snap_clone(vp, vol, snap, cvol))) msg(rc, err, errlen, pool, obj, snap, "clone");
    return rc;
}

static int fd_sink(void *ctx, const void *buf, size_t len)
{
    int fd = *(int *)ctx;
    for (const char *p = buf; len;) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? -errno : -EIO;
        p += n; len -= (size_t)n;
    }
    return 0;
}

static int fd_source(void *ctx, void *buf, size_t len)
{
    int fd = *(int *)ctx;
    for (char *p = buf; len;) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) return -EPIPE;   /* short stream */
        p += n; len -= (size_t)n;
    }
    return 0;
}

int storage_snap_send(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap,
                      const char *from, int fd, char *err, size_t errlen)
{
    POOL_REF(r);
    struct vpool *vp;
    char vol[64];
    int rc = prep(st, &r, pool, obj, is_ds, &vp, vol, err, errlen);
    if (!rc && (rc = vpool_send(vp, vol, snap, from, fd_sink, &fd)))
        msg(rc, err, errlen, pool, obj, snap, rc == -EINVAL ? "send (from must be an older snapshot)" : "send");
    return rc;
}

int storage_snap_receive(struct storage *st, const char *pool, const char *obj, int is_ds, int fd, int force,
                         char *snap_out, char *err, size_t errlen)
{
    POOL_REF(r);
    struct vpool *vp;
    char vol[64];
    int rc = prep(st, &r, pool, obj, is_ds, &vp, vol, err, errlen);
    if (!rc && is_ds) rc = close_dataset(st, &r, pool, obj, err, errlen);
    if (rc) return rc;
    /* a volume as POST /volumes makes one: reserved thickly; a dataset thin, within
     * STORAGE_RECV_DATASET_FACTOR times the pool (the engine's map takes 4 bytes per MiB) */
    struct vpool_status s;
    vpool_get_status(vp, &s);
    struct vpool_recv_limit lim = { is_ds ? s.size * STORAGE_RECV_DATASET_FACTOR : unreserved(vp, obj), is_ds };
    return vpool_receive(vp, vol, force, &lim, fd_source, &fd, snap_out, err, errlen);
}

nasd_bdev *storage_snap_open_volume(struct storage *st, const char *pool, const char *vol, const char *snap,
                                    uint32_t block_size, int *errp)
{
    POOL_REF(r);
    char err[256];
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, pool, &is_ceph, err, sizeof err);
    if (is_ceph) {
        if (cp) return ceph_snap_open(cp, vol, snap, block_size, errp);
        *errp = -ENXIO;
        return NULL;
    }
    struct vpool *vp = engine(st, &r, pool, err, sizeof err);
    if (!vp) { *errp = -ENOENT; return NULL; }
    return vpool_snap_open(vp, vol, snap, block_size, errp);
}

struct nasd_fsroot *storage_snap_open_dataset(struct storage *st, const char *pool, const char *ds, const char *snap,
                                              uint64_t fsid, int *errp)
{
    POOL_REF(r);
    char err[256], vol[64], full[200];
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, pool, &is_ceph, err, sizeof err);
    struct vpool *vp = is_ceph ? NULL : engine(st, &r, pool, err, sizeof err);
    if (!vp && !cp) { *errp = is_ceph ? -ENXIO : -ENOENT; return NULL; }
    if ((*errp = engine_name(ds, 1, vol, err, sizeof err))) return NULL;
    nasd_bdev *b = cp ? ceph_snap_open(cp, vol, snap, 4096, errp) : vpool_snap_open(vp, vol, snap, 4096, errp);
    if (!b) return NULL;
    nasd_bdev *ov = nasd_overlay_bdev(b, errp);
    nasd_bdev_put(b);
    if (!ov) return NULL;
    snprintf(full, sizeof full, "%s/%s@%s", pool, ds, snap);
    struct nasd_fsroot *f = nasd_fsroot_open_ext2(ov, full, fsid, 0, errp);
    nasd_bdev_put(ov);
    /* the snapshot's guid in the path, which NFS handle generations hash: a handle from a
     * deleted snapshot stays stale under a new one of the same name and export id */
    json_t *info = f ? storage_snap_get(st, pool, ds, 1, snap, errp) : NULL;
    const char *guid = json_string_value(json_object_get(info, "guid"));
    if (f && !guid) {
        nasd_fsroot_put(f);
        f = NULL;
        if (!*errp) *errp = -ENOENT;
    } else if (f)
        snprintf(f->path, sizeof f->path, "engine:%s#%s", full, guid);
    json_decref(info);
    return f;
}

int storage_volume_origin(struct storage *st, const char *pool, const char *obj, int is_ds, char *ovol, char *osnap)
{
    POOL_REF(r);
    char err[256], vol[64];
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, pool, &is_ceph, err, sizeof err);
    struct vpool *vp = is_ceph ? NULL : engine(st, &r, pool, err, sizeof err);
    if ((!vp && !cp) || engine_name(obj, is_ds, vol, err, sizeof err)) return -ENOENT;
    int rc = cp ? ceph_image_origin(cp, vol, ovol, osnap) : vpool_vol_origin(vp, vol, ovol, osnap);
    if (!rc && is_ds && ovol[0] == '.') memmove(ovol, ovol + 1, strlen(ovol));
    return rc;
}
