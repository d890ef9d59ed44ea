/* Datasets: each one is an ext2 filesystem inside a thin pool volume named ".<name>"
 * (storage/fs/vfs_ext2*.c), so its blocks come from the pool, are checksummed, cached,
 * compressed (lz4) and made redundant by the engine like any volume's.
 * Directory datasets under <state>/pools/<pool>/datasets/ made by older versions
 * are still opened (with the posix backend) but never created any more. */
#define _GNU_SOURCE
#include "storage/manager/storage_impl.h"
#include "util/log.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DS_MIN_SIZE (64ull << 20)

static int ds_volume(const char *name, char *out, size_t outlen)
{
    if (strlen(name) + 1 >= 64) return -ENAMETOOLONG;   /* engine names hold 63 bytes */
    snprintf(out, outlen, ".%s", name);
    return 0;
}

void datasets_close_all(struct pool *p)
{
    while (p->datasets) {
        struct open_dataset *d = p->datasets;
        p->datasets = d->next;
        nasd_fsroot_put(d->fs);
        free(d);
    }
}

/* Drops the storage's reference to an open dataset (storage.lock held). */
static void dataset_forget(struct pool *p, const char *name)
{
    for (struct open_dataset **pp = &p->datasets; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->name, name)) continue;
        struct open_dataset *d = *pp;
        *pp = d->next;
        nasd_fsroot_put(d->fs);
        free(d);
        return;
    }
}

void storage_dataset_path(struct storage *st, const char *pool, const char *name, char *out, size_t outlen)
{
    char legacy[PATH_MAX];
    struct stat s;
    pool_dir(st, pool, "datasets", name, legacy, sizeof legacy);
    if (stat(legacy, &s) == 0 && S_ISDIR(s.st_mode)) snprintf(out, outlen, "%s", legacy);
    else snprintf(out, outlen, "%s/%s", pool, name);
}

int storage_dataset_create(struct storage *st, const char *pool, const char *name, int lz4,
                           char *err, size_t errlen)
{
    POOL_REF(r);
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, pool, &is_ceph, err, errlen);
    if (is_ceph) return !cp ? -ENXIO : lz4 ? (snprintf(err, errlen, "ceph pools do not compress (lz4)"), -EINVAL)
                                           : ceph_dataset_create(cp, name, err, errlen);
    struct vpool *vp = engine(st, &r, pool, err, errlen);
    if (!vp) return -ENOENT;
    char vol[64];
    if (ds_volume(name, vol, sizeof vol)) {
        snprintf(err, errlen, "dataset names are limited to 62 characters");
        return -EINVAL;
    }
    struct vpool_status s;
    vpool_get_status(vp, &s);
    /* thin: the filesystem spans the pool, its blocks are allocated as files grow and
     * never from space thick volumes were promised */
    uint64_t size = s.size & ~((1ull << 20) - 1);
    if (size < DS_MIN_SIZE) { snprintf(err, errlen, "pool %s is too small for a dataset", pool); return -ENOSPC; }
    int rc = vpool_vol_create(vp, vol, size, VPOOL_VOL_THIN | (lz4 ? VPOOL_VOL_LZ4 : 0));
    if (rc) {
        snprintf(err, errlen, "dataset %s/%s: %s", pool, name, rc == -EEXIST ? "exists in the pool" : strerror(-rc));
        return rc;
    }
    nasd_bdev *b = vpool_vol_open(vp, vol, 4096, &rc);
    if (b) {
        rc = nasd_ext2_format(b, name);
        nasd_bdev_put(b);
    }
    if (rc) {
        snprintf(err, errlen, "dataset %s/%s: cannot create its filesystem: %s", pool, name, strerror(-rc));
        vpool_vol_destroy(vp, vol);
    }
    return rc;
}

/* Holders of an open dataset besides the storage itself (exports, self-tests);
 * storage.lock held. */
static int dataset_holders(struct pool *p, const char *name)
{
    for (struct open_dataset *d = p->datasets; d; d = d->next)
        if (!strcmp(d->name, name)) return atomic_load(&d->fs->refs) - 1;
    return 0;
}

int datasets_busy(struct storage *st, struct pool *p, const char *name, char *err, size_t errlen)
{
    /* a just-removed export or a finishing self-test may drop its reference shortly */
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&st->lock);
        int n = 0;
        const char *who = NULL;
        for (struct open_dataset *d = p->datasets; d; d = d->next) {
            if (name && strcmp(d->name, name)) continue;
            int h = dataset_holders(p, d->name);
            if (h > 0 && !who) who = d->name;
            n += h;
        }
        char first[64];
        snprintf(first, sizeof first, "%s", who ? who : "");
        pthread_mutex_unlock(&st->lock);
        if (!n) return 0;
        if (i == 99) {
            snprintf(err, errlen, "dataset %s/%s is still in use (%d open references: an export or a running "
                     "self-test); nothing was deleted", p->name, first, n);
            return -EBUSY;
        }
        usleep(20000);
    }
    return 0;
}

int storage_dataset_destroy(struct storage *st, const char *pool, const char *name, char *err, size_t errlen)
{
    POOL_REF(r);
    struct pool *p = pool_hold(st, &r, pool);
    if (!p) { snprintf(err, errlen, "pool %s not found", pool); return -ENOENT; }
    int busy = datasets_busy(st, p, name, err, errlen);
    if (busy) return busy;
    pthread_mutex_lock(&st->lock);
    if (dataset_holders(p, name) > 0) {  /* opened again meanwhile */
        pthread_mutex_unlock(&st->lock);
        snprintf(err, errlen, "dataset %s/%s is in use again; nothing was deleted", pool, name);
        return -EBUSY;
    }
    dataset_forget(p, name);
    pthread_mutex_unlock(&st->lock);
    if (p->is_ceph) {
        int is_ceph;
        struct ceph_pool *cp = ceph_of(st, &r, pool, &is_ceph, err, errlen);
        return cp ? ceph_dataset_destroy(cp, name, err, errlen) : -ENXIO;
    }
    char vol[64];
    int rc = 0;
    if (p->vp && !ds_volume(name, vol, sizeof vol)) {
        rc = vpool_vol_destroy(p->vp, vol);
        /* a just-removed export may still be finishing in-flight calls */
        for (int i = 0; rc == -EBUSY && i < 100; i++) {
            usleep(20000);
            rc = vpool_vol_destroy(p->vp, vol);
        }
        if (rc == -ENOENT) rc = 0;
    }
    char d[PATH_MAX];
    pool_dir(st, pool, "datasets", NULL, d, sizeof d);
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        int lrc = rm_tree(fd, name);
        close(fd);
        if (!rc && lrc != -ENOENT) rc = lrc;
    }
    if (rc) snprintf(err, errlen, "dataset %s/%s: %s", pool, name, rc == -EBUSY ? "still in use" : strerror(-rc));
    return rc;
}

static struct nasd_fsroot *open_backend(struct storage *st, struct pool *p, const char *name, uint64_t fsid,
                                        uint64_t quota, int *errp)
{
    char full[160], vol[64];
    snprintf(full, sizeof full, "%s/%s", p->name, name);
    if (p->is_ceph) {   /* storage.lock is held: no reconnecting here (ceph_of does on other calls) */
        if (p->ceph) return ceph_dataset_open(p->ceph, name, fsid, quota, errp);
        *errp = -ENXIO;
        return NULL;
    }
    if (!p->vp) { *errp = -ENXIO; return NULL; }
    if (ds_volume(name, vol, sizeof vol) == 0) {
        int e = 0;
        nasd_bdev *b = vpool_vol_open(p->vp, vol, 4096, &e);
        if (b) {
            struct nasd_fsroot *f = nasd_fsroot_open_ext2(b, full, fsid, quota, errp);
            nasd_bdev_put(b);
            return f;
        }
        if (e != -ENOENT) { *errp = e; return NULL; }
    }
    char legacy[PATH_MAX];
    pool_dir(st, p->name, "datasets", name, legacy, sizeof legacy);
    return nasd_fsroot_open(legacy, full, fsid, quota, errp);
}

struct nasd_fsroot *storage_dataset_open(struct storage *st, const char *pool, const char *name,
                                         uint64_t fsid, uint64_t quota, int *errp)
{
    POOL_REF(r);
    struct pool *p = pool_hold(st, &r, pool);
    if (!p) { *errp = -ENOENT; return NULL; }
    pthread_mutex_lock(&st->lock);
    struct open_dataset *d = p->datasets;
    while (d && strcmp(d->name, name)) d = d->next;
    struct nasd_fsroot *f = NULL;
    if (d && d->closing) {
        *errp = -EAGAIN;   /* its blocks are about to change: a new holder would outlive that */
    } else if (d) {
        f = d->fs;
        atomic_store(&f->quota, quota);
    } else if ((d = calloc(1, sizeof *d)) == NULL) {
        *errp = -ENOMEM;
    } else if ((d->fs = open_backend(st, p, name, fsid, quota, errp)) == NULL) {
        free(d);
    } else {
        snprintf(d->name, sizeof d->name, "%s", name);
        d->next = p->datasets;
        p->datasets = d;
        f = d->fs;
    }
    nasd_fsroot_get(f);
    pthread_mutex_unlock(&st->lock);
    return f;
}

void storage_dataset_idle(struct storage *st, const char *pool, const char *name)
{
    POOL_REF(r);
    struct pool *p = pool_hold(st, &r, pool);
    if (!p || !p->is_ceph) return;
    pthread_mutex_lock(&st->lock);   /* storage_dataset_open takes references under it too */
    for (struct open_dataset *d = p->datasets; d; d = d->next)
        if (!strcmp(d->name, name) && atomic_load(&d->fs->refs) == 1) { dataset_forget(p, name); break; }
    pthread_mutex_unlock(&st->lock);
}

uint64_t storage_dataset_allocated(struct storage *st, const char *pool, const char *name)
{
    POOL_REF(r);
    char err[256], vol[64];
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, pool, &is_ceph, err, sizeof err);
    if (is_ceph) return cp ? ceph_dataset_allocated(cp, name) : 0;
    struct vpool *vp = engine(st, &r, pool, err, sizeof err);
    return vp && !ds_volume(name, vol, sizeof vol) ? vol_allocated(vp, vol) : 0;
}

json_t *storage_pool_datasets(struct storage *st, const char *name)
{
    POOL_REF(r);
    char err[256];
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, name, &is_ceph, err, sizeof err);
    if (is_ceph) return cp ? ceph_pool_list(cp, 1) : NULL;
    struct vpool *vp = engine(st, &r, name, err, sizeof err);
    return vp ? volume_list(vp, 1) : NULL;
}
