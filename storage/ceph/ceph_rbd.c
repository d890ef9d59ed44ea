/* Volumes, datasets and snapshots of a ceph pool as RBD images.
 * Volumes have only the layering feature: no exclusive lock, so two gateways can both
 * write an image (like two paths to one SAN disk) without the lock moving back and forth.
 * Datasets are an ext2 dataset filesystem in an image ".<name>" with the exclusive-lock
 * feature, taken explicitly on open: libext2fs caches metadata, so only one gateway may
 * have the filesystem open; another one gets -EBUSY until the holder closes it or dies
 * (librbd then breaks the dead owner's lock). */
#define _GNU_SOURCE
#include "storage/ceph/ceph_int.h"
#include "util/log.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef NASD_CEPH
#include <rbd/features.h>

#define DS_SIZE_MIN (64ull << 20)

static int create_image(struct ceph_pool *cp, const char *img, uint64_t size, uint64_t features)
{
    rbd_image_options_t o;
    rbd_image_options_create(&o);
    rbd_image_options_set_uint64(o, RBD_IMAGE_OPTION_FEATURES, features);
    int rc = rbd_create4(cp->io, img, size, o);
    rbd_image_options_destroy(o);
    return rc;
}

static int valid_image_name(const char *name, char *err, size_t errlen)
{
    if (strlen(name) > 62 || strchr(name, '/') || strchr(name, '@')) {
        snprintf(err, errlen, "RBD image names are limited to 62 characters without / or @");
        return -EINVAL;
    }
    return 0;
}

int ceph_volume_create(struct ceph_pool *cp, const char *name, uint64_t size, char *err, size_t errlen)
{
    int rc = valid_image_name(name, err, errlen);
    if (rc) return rc;
    rc = create_image(cp, name, size, RBD_FEATURE_LAYERING);
    if (rc) {
        snprintf(err, errlen, "RBD image %s/%s: %s", cp->conf.pool, name,
                 rc == -EEXIST ? "exists in the RADOS pool" : strerror(-rc));
        return rc;
    }
    if ((rc = ceph_record(cp, "volume", name, size)) != 0) {
        snprintf(err, errlen, "recording %s in %s: %s", name, CEPH_CONFIG_OBJ, strerror(-rc));
        rbd_remove(cp->io, name);
    }
    return rc;
}

int ceph_volume_resize(struct ceph_pool *cp, const char *name, uint64_t size, char *err, size_t errlen)
{
    rbd_image_t img;
    int rc = rbd_open(cp->io, name, &img, NULL);
    if (!rc) {
        rc = rbd_resize2(img, size, false, NULL, NULL);
        rbd_close(img);
    }
    if (!rc) ceph_record(cp, "volume", name, size);
    if (rc) snprintf(err, errlen, "resize %s/%s: %s", cp->name, name, strerror(-rc));
    return rc;
}

/* Removes an image with its (unprotected) snapshots. */
static int remove_image(struct ceph_pool *cp, const char *img_name)
{
    rbd_image_t img;
    if (rbd_open(cp->io, img_name, &img, NULL) == 0) {
        rbd_snap_info_t snaps[64];
        int max = 64, n = rbd_snap_list(img, snaps, &max);
        for (int i = 0; i < n; i++) {
            int prot = 0;
            rbd_snap_is_protected(img, snaps[i].name, &prot);
            if (prot) rbd_snap_unprotect(img, snaps[i].name);
            rbd_snap_remove(img, snaps[i].name);
        }
        if (n > 0) rbd_snap_list_end(snaps);
        rbd_close(img);
    }
    int rc = rbd_remove(cp->io, img_name);
    /* an export that was just removed may still hold the image open for a moment */
    for (int i = 0; rc == -EBUSY && i < 50; i++) {
        struct timespec ts = { 0, 100 * 1000000 };
        nanosleep(&ts, NULL);
        rc = rbd_remove(cp->io, img_name);
    }
    return rc == -ENOENT ? 0 : rc;
}

int ceph_volume_destroy(struct ceph_pool *cp, const char *name, char *err, size_t errlen)
{
    int rc = remove_image(cp, name);
    if (rc) {
        snprintf(err, errlen, "volume %s/%s: %s", cp->name, name,
                 rc == -EBUSY ? "still open (by another gateway?)" : rc == -ENOTEMPTY ? "has clones" : strerror(-rc));
        return rc;
    }
    return ceph_unrecord(cp, "volume", name);
}

nasd_bdev *ceph_volume_open(struct ceph_pool *cp, const char *name, uint32_t block_size, int *errp)
{
    rbd_image_t img;
    int rc = rbd_open(cp->io, name, &img, NULL);
    if (rc) { *errp = rc; return NULL; }
    return ceph_rbd_bdev(cp, img, name, NULL, block_size, errp);
}

uint64_t ceph_volume_used(struct ceph_pool *cp, const char *name)
{
    rbd_image_t img;
    if (rbd_open_read_only(cp->io, name, &img, NULL)) return 0;
    uint64_t used = ceph_image_used(img);
    rbd_close(img);
    return used;
}

static void ds_image(const char *name, char *out, size_t outlen) { snprintf(out, outlen, ".%s", name); }

/* Opens the dataset image holding its exclusive lock. */
static int open_locked(struct ceph_pool *cp, const char *img_name, rbd_image_t *img)
{
    int rc = rbd_open(cp->io, img_name, img, NULL);
    if (rc) return rc;
    rc = rbd_lock_acquire(*img, RBD_LOCK_MODE_EXCLUSIVE);
    if (rc) {
        rbd_close(*img);
        return rc == -EROFS || rc == -EAGAIN ? -EBUSY : rc;
    }
    return 0;
}

int ceph_dataset_create(struct ceph_pool *cp, const char *name, char *err, size_t errlen)
{
    char img_name[80];
    int rc = valid_image_name(name, err, errlen);
    if (rc) return rc;
    ds_image(name, img_name, sizeof img_name);
    /* thin: the filesystem spans what the cluster can hold now, blocks are written as
     * files grow */
    struct rados_cluster_stat_t cs;
    rc = rados_cluster_stat(cp->cluster, &cs);
    uint64_t size = rc ? 0 : (cs.kb_avail * 1024) & ~((1ull << 20) - 1);
    if (!rc && size < DS_SIZE_MIN) { snprintf(err, errlen, "the cluster has too little free space for a dataset"); return -ENOSPC; }
    if (!rc) rc = create_image(cp, img_name, size, RBD_FEATURE_LAYERING | RBD_FEATURE_EXCLUSIVE_LOCK);
    if (rc) {
        snprintf(err, errlen, "dataset %s/%s: %s", cp->name, name, rc == -EEXIST ? "exists in the RADOS pool" : strerror(-rc));
        return rc;
    }
    rbd_image_t img;
    nasd_bdev *b = NULL;
    rc = open_locked(cp, img_name, &img);
    if (!rc) b = ceph_rbd_bdev(cp, img, name, NULL, 4096, &rc);
    if (b) {
        rc = nasd_ext2_format(b, name);
        nasd_bdev_put(b);
    }
    if (!rc) rc = ceph_record(cp, "dataset", name, size);
    if (rc) {
        snprintf(err, errlen, "dataset %s/%s: cannot create its filesystem: %s", cp->name, name, strerror(-rc));
        remove_image(cp, img_name);
    }
    return rc;
}

int ceph_dataset_destroy(struct ceph_pool *cp, const char *name, char *err, size_t errlen)
{
    char img_name[80];
    ds_image(name, img_name, sizeof img_name);
    int rc = remove_image(cp, img_name);
    if (rc) {
        snprintf(err, errlen, "dataset %s/%s: %s", cp->name, name, rc == -EBUSY ? "still in use" : strerror(-rc));
        return rc;
    }
    return ceph_unrecord(cp, "dataset", name);
}

struct nasd_fsroot *ceph_dataset_open(struct ceph_pool *cp, const char *name, uint64_t fsid, uint64_t quota, int *errp)
{
    char img_name[80], full[160];
    ds_image(name, img_name, sizeof img_name);
    snprintf(full, sizeof full, "%s/%s", cp->name, name);
    rbd_image_t img;
    int rc = open_locked(cp, img_name, &img);
    if (rc) {
        if (rc == -EBUSY) log_warn("dataset %s: its image is locked by another gateway", full);
        *errp = rc;
        return NULL;
    }
    nasd_bdev *b = ceph_rbd_bdev(cp, img, name, NULL, 4096, errp);
    if (!b) return NULL;
    struct nasd_fsroot *f = nasd_fsroot_open_ext2(b, full, fsid, quota, errp);
    nasd_bdev_put(b);
    return f;
}

uint64_t ceph_dataset_allocated(struct ceph_pool *cp, const char *name)
{
    char img_name[80];
    ds_image(name, img_name, sizeof img_name);
    return ceph_volume_used(cp, img_name);
}

/* Snapshots and clones */

static int with_image(struct ceph_pool *cp, const char *img_name, rbd_image_t *img, char *err, size_t errlen)
{
    int rc = rbd_open(cp->io, img_name, img, NULL);
    if (rc) snprintf(err, errlen, "%s/%s: %s", cp->name, img_name, rc == -ENOENT ? "not found" : strerror(-rc));
    return rc;
}

static int snap_msg(int rc, struct ceph_pool *cp, const char *img, const char *snap, const char *op, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s %s/%s@%s: %s", op, cp->name, img, snap,
             rc == -EEXIST ? "exists" : rc == -ENOENT ? "not found" : rc == -EBUSY ? "in use (a clone depends on it)" :
             strerror(-rc));
    return rc;
}

int ceph_snap_create(struct ceph_pool *cp, const char *img_name, const char *snap, char *err, size_t errlen)
{
    rbd_image_t img;
    int rc = with_image(cp, img_name, &img, err, errlen);
    if (rc) return rc;
    rc = rbd_snap_create(img, snap);
    rbd_close(img);
    return rc ? snap_msg(rc, cp, img_name, snap, "snapshot", err, errlen) : 0;
}

int ceph_snap_destroy(struct ceph_pool *cp, const char *img_name, const char *snap, char *err, size_t errlen)
{
    rbd_image_t img;
    int rc = with_image(cp, img_name, &img, err, errlen);
    if (rc) return rc;
    int prot = 0;
    rbd_snap_is_protected(img, snap, &prot);
    if (prot) rc = rbd_snap_unprotect(img, snap);   /* -EBUSY while clones use it */
    if (!rc) rc = rbd_snap_remove(img, snap);
    rbd_close(img);
    return rc ? snap_msg(rc, cp, img_name, snap, "delete snapshot", err, errlen) : 0;
}

int ceph_snap_rollback(struct ceph_pool *cp, const char *img_name, const char *snap, char *err, size_t errlen)
{
    rbd_image_t img;
    int rc = with_image(cp, img_name, &img, err, errlen);
    if (rc) return rc;
    rc = rbd_snap_rollback(img, snap);
    rbd_close(img);
    return rc ? snap_msg(rc, cp, img_name, snap, "rollback", err, errlen) : 0;
}

json_t *ceph_snap_list(struct ceph_pool *cp, const char *img_name, const char *only, int *errp)
{
    rbd_image_t img;
    char err[256];
    if ((*errp = with_image(cp, img_name, &img, err, sizeof err)) != 0) return NULL;
    rbd_snap_info_t snaps[256];
    int max = 256, n = rbd_snap_list(img, snaps, &max);
    if (n < 0) { rbd_close(img); *errp = n; return NULL; }
    json_t *out = json_array();
    for (int i = 0; i < n; i++) {
        if (only && strcmp(only, snaps[i].name)) continue;
        struct timespec ts = { 0 };
        char guid[40];
        rbd_snap_get_timestamp(img, snaps[i].id, &ts);
        snprintf(guid, sizeof guid, "%s-%llu", cp->fsid, (unsigned long long)snaps[i].id);
        json_array_append_new(out, json_pack("{s:s, s:I, s:I, s:I, s:I, s:i, s:s}", "name", snaps[i].name,
                                             "created", (json_int_t)ts.tv_sec, "size", (json_int_t)snaps[i].size,
                                             "used", (json_int_t)0, "referenced", (json_int_t)0, "clones", 0, "guid", guid));
    }
    rbd_snap_list_end(snaps);
    rbd_close(img);
    if (only && !json_array_size(out)) { json_decref(out); *errp = -ENOENT; return NULL; }
    return out;
}

int ceph_clone(struct ceph_pool *cp, const char *img_name, const char *snap, const char *newimg, const char *kind,
               const char *name, char *err, size_t errlen)
{
    rbd_image_t img;
    int rc = valid_image_name(name, err, errlen);
    if (rc || (rc = with_image(cp, img_name, &img, err, errlen)) != 0) return rc;
    int prot = 0;
    rc = rbd_snap_is_protected(img, snap, &prot);
    if (!rc && !prot) rc = rbd_snap_protect(img, snap);    /* clones need a protected parent */
    uint64_t size = 0;
    rbd_get_size(img, &size);
    uint64_t features = 0;
    rbd_get_features(img, &features);
    rbd_close(img);
    if (!rc) {
        rbd_image_options_t o;
        rbd_image_options_create(&o);
        rbd_image_options_set_uint64(o, RBD_IMAGE_OPTION_FEATURES, features & (RBD_FEATURE_LAYERING | RBD_FEATURE_EXCLUSIVE_LOCK));
        rc = rbd_clone3(cp->io, img_name, snap, cp->io, newimg, o);
        rbd_image_options_destroy(o);
    }
    if (!rc) rc = ceph_record(cp, kind, name, size);
    if (rc) snap_msg(rc, cp, img_name, snap, rc == -EEXIST ? "clone (target exists)" : "clone", err, errlen);
    return rc;
}

nasd_bdev *ceph_snap_open(struct ceph_pool *cp, const char *img_name, const char *snap, uint32_t block_size, int *errp)
{
    rbd_image_t img;
    int rc = rbd_open_read_only(cp->io, img_name, &img, snap);
    if (rc) { *errp = rc; return NULL; }
    return ceph_rbd_bdev(cp, img, img_name, snap, block_size, errp);
}

int ceph_image_origin(struct ceph_pool *cp, const char *img_name, char *oimg, char *osnap)
{
    rbd_image_t img;
    int rc = rbd_open_read_only(cp->io, img_name, &img, NULL);
    if (rc) return rc;
    rbd_linked_image_spec_t pi;
    rbd_snap_spec_t ps;
    rc = rbd_get_parent(img, &pi, &ps);
    rbd_close(img);
    if (rc) return rc;
    /* both out buffers hold 64 bytes (engine volume names); a dataset's image keeps its dot,
     * the caller strips it */
    snprintf(oimg, 64, "%s", pi.image_name);
    snprintf(osnap, 64, "%s", ps.name);
    rbd_linked_image_spec_cleanup(&pi);
    rbd_snap_spec_cleanup(&ps);
    return 0;
}

#else /* !NASD_CEPH: no pool can be connected, so these are never reached */

#define NOTSUP(...) { return -ENOTSUP; }
int ceph_volume_create(struct ceph_pool *cp, const char *name, uint64_t size, char *err, size_t errlen) NOTSUP()
int ceph_volume_resize(struct ceph_pool *cp, const char *name, uint64_t size, char *err, size_t errlen) NOTSUP()
int ceph_volume_destroy(struct ceph_pool *cp, const char *name, char *err, size_t errlen) NOTSUP()
nasd_bdev *ceph_volume_open(struct ceph_pool *cp, const char *name, uint32_t block_size, int *errp)
{ *errp = -ENOTSUP; return NULL; }
uint64_t ceph_volume_used(struct ceph_pool *cp, const char *name) { return 0; }
int ceph_dataset_create(struct ceph_pool *cp, const char *name, char *err, size_t errlen) NOTSUP()
int ceph_dataset_destroy(struct ceph_pool *cp, const char *name, char *err, size_t errlen) NOTSUP()
struct nasd_fsroot *ceph_dataset_open(struct ceph_pool *cp, const char *name, uint64_t fsid, uint64_t quota, int *errp)
{ *errp = -ENOTSUP; return NULL; }
uint64_t ceph_dataset_allocated(struct ceph_pool *cp, const char *name) { return 0; }
int ceph_snap_create(struct ceph_pool *cp, const char *img, const char *snap, char *err, size_t errlen) NOTSUP()
int ceph_snap_destroy(struct ceph_pool *cp, const char *img, const char *snap, char *err, size_t errlen) NOTSUP()
int ceph_snap_rollback(struct ceph_pool *cp, const char *img, const char *snap, char *err, size_t errlen) NOTSUP()
json_t *ceph_snap_list(struct ceph_pool *cp, const char *img, const char *only, int *errp) { *errp = -ENOTSUP; return NULL; }
int ceph_clone(struct ceph_pool *cp, const char *img, const char *snap, const char *newimg, const char *kind,
               const char *name, char *err, size_t errlen) NOTSUP()
nasd_bdev *ceph_snap_open(struct ceph_pool *cp, const char *img, const char *snap, uint32_t block_size, int *errp)
{ *errp = -ENOTSUP; return NULL; }
int ceph_image_origin(struct ceph_pool *cp, const char *img, char *oimg, char *osnap) NOTSUP()

#endif
