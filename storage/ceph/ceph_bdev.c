/* nasd_bdev over an RBD image through librbd's asynchronous API: each call issues one
 * rbd_aio_* request and waits for its completion (the iSCSI target calls from many
 * threads at once, so requests overlap). The connection has no client cache, so an
 * acknowledged write is on the OSDs; FUA and flush still go through rbd_aio_flush.
 * COMPARE AND WRITE of one 512-byte block maps onto rbd_aio_compare_and_write, which
 * the OSD executes atomically, so it stays atomic when several gateways serve the image. */
#define _GNU_SOURCE
#include "storage/ceph/ceph_int.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#ifdef NASD_CEPH

struct rbd_bdev {
    nasd_bdev b;
    struct ceph_pool *cp;
    rbd_image_t img;
};

static rbd_image_t img_of(nasd_bdev *b) { return ((struct rbd_bdev *)b)->img; }

/* Waits for c; returns the request's value (bytes or -errno) and releases c. */
static ssize_t finish(rbd_completion_t c, int submit_rc)
{
    if (submit_rc < 0) { rbd_aio_release(c); return submit_rc; }
    rbd_aio_wait_for_complete(c);
    ssize_t r = rbd_aio_get_return_value(c);
    rbd_aio_release(c);
    return r;
}

static int in_range(nasd_bdev *b, uint64_t off, uint64_t len)
{
    return off + len >= off && off + len <= b->size;
}

static int rb_read(nasd_bdev *b, void *buf, uint64_t off, size_t len)
{
    if (!in_range(b, off, len)) return -ERANGE;
    rbd_completion_t c;
    if (rbd_aio_create_completion(NULL, NULL, &c)) return -ENOMEM;
    ssize_t r = finish(c, rbd_aio_read(img_of(b), off, len, buf, c));
    return r < 0 ? (int)r : (size_t)r == len ? 0 : -EIO;
}

static int rb_flush(nasd_bdev *b)
{
    rbd_completion_t c;
    if (rbd_aio_create_completion(NULL, NULL, &c)) return -ENOMEM;
    return (int)finish(c, rbd_aio_flush(img_of(b), c));
}

static int rb_write(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags)
{
    if (!in_range(b, off, len)) return -ERANGE;
    rbd_completion_t c;
    if (rbd_aio_create_completion(NULL, NULL, &c)) return -ENOMEM;
    ssize_t r = finish(c, rbd_aio_write2(img_of(b), off, len, buf, c,
                                         (flags & NASD_IO_FUA) ? LIBRADOS_OP_FLAG_FADVISE_FUA : 0));
    if (r < 0) return (int)r;
    return (flags & NASD_IO_FUA) ? rb_flush(b) : 0;
}

static int rb_unmap(nasd_bdev *b, uint64_t off, uint64_t len)
{
    if (!in_range(b, off, len)) return -ERANGE;
    rbd_completion_t c;
    if (rbd_aio_create_completion(NULL, NULL, &c)) return -ENOMEM;
    ssize_t r = finish(c, rbd_aio_discard(img_of(b), off, len, c));
    return r < 0 ? (int)r : 0;
}

static int rb_write_same(nasd_bdev *b, const void *pattern, size_t plen, uint64_t off, uint64_t len)
{
    if (!in_range(b, off, len) || !plen || len % plen) return -ERANGE;
    /* librbd takes a size_t length; split very large ranges */
    while (len) {
        uint64_t l = len > (1ull << 30) ? (1ull << 30) / plen * plen : len;
        rbd_completion_t c;
        if (rbd_aio_create_completion(NULL, NULL, &c)) return -ENOMEM;
        ssize_t r = finish(c, rbd_aio_writesame(img_of(b), off, l, pattern, plen, c, 0));
        if (r < 0) return (int)r;
        off += l;
        len -= l;
    }
    return 0;
}

/* librbd (Pacific) compares and writes one 512-byte sector at most (longer requests get
 * -EINVAL); the caller falls back to lock + read + compare + write, which is atomic on this
 * gateway only. The miscompare offset librbd reports is relative to off. */
static int rb_compare_and_write(nasd_bdev *b, const void *cmp, const void *data, uint64_t off, size_t len,
                                uint64_t *miscompare)
{
    if (!in_range(b, off, len)) return -ERANGE;
    if (len > 512) return -EOPNOTSUPP;
    rbd_completion_t c;
    if (rbd_aio_create_completion(NULL, NULL, &c)) return -ENOMEM;
    uint64_t mis = 0;
    ssize_t r = finish(c, (int)rbd_aio_compare_and_write(img_of(b), off, len, cmp, data, c, &mis, 0));
    if (r == -EILSEQ) { *miscompare = mis; return -EILSEQ; }
    return r < 0 ? (int)r : 0;
}

static int diff_cb(uint64_t off, size_t len, int exists, void *arg)
{
    if (exists) *(uint64_t *)arg += len;
    return 0;
}

/* Bytes of backing objects the image has (whole RADOS objects). */
uint64_t ceph_image_used(rbd_image_t img)
{
    uint64_t size = 0, used = 0;
    if (rbd_get_size(img, &size)) return 0;
    rbd_diff_iterate2(img, NULL, 0, size, 1, 1, diff_cb, &used);
    return used;
}

static uint64_t rb_avail(nasd_bdev *b)
{
    struct rados_cluster_stat_t cs;
    struct ceph_pool *cp = ((struct rbd_bdev *)b)->cp;
    return rados_cluster_stat(cp->cluster, &cs) ? 0 : cs.kb_avail * 1024;
}

static void rb_destroy(nasd_bdev *b)
{
    struct rbd_bdev *r = (struct rbd_bdev *)b;
    rb_flush(b);
    rbd_close(r->img);
    ceph_put(r->cp);
    free(r);
}

static const struct nasd_bdev_ops rbd_ops = {
    .read = rb_read, .write = rb_write, .flush = rb_flush, .unmap = rb_unmap, .destroy = rb_destroy,
    .avail = rb_avail, .write_same = rb_write_same, .compare_and_write = rb_compare_and_write,
};

nasd_bdev *ceph_rbd_bdev(struct ceph_pool *cp, rbd_image_t img, const char *name, const char *snap,
                         uint32_t block_size, int *errp)
{
    struct rbd_bdev *r = calloc(1, sizeof *r);
    uint64_t size = 0;
    char id[64] = "";
    int rc = r ? rbd_get_size(img, &size) : -ENOMEM;
    if (!rc) rc = rbd_get_id(img, id, sizeof id);
    if (rc) { free(r); rbd_close(img); *errp = rc; return NULL; }
    r->b.ops = &rbd_ops;
    r->b.size = size / block_size * block_size;
    r->b.block_size = block_size;
    r->b.remote = 1;
    snprintf(r->b.name, sizeof r->b.name, "%s/%s%s%s", cp->name, name, snap ? "@" : "", snap ? snap : "");
    /* identity from the cluster, the RADOS pool and the image id: every gateway derives
     * the same NAA designator and serial for the image */
    char key[256];
    int n = snprintf(key, sizeof key, "rbd:%s:%lld:%s%s%s", cp->fsid, (long long)rados_ioctx_get_id(cp->io), id,
                     snap ? "@" : "", snap ? snap : "");
    XXH128_hash_t h = XXH3_128bits(key, (size_t)n);
    memcpy(r->b.uuid, &h.high64, 8);
    memcpy(r->b.uuid + 8, &h.low64, 8);
    atomic_init(&r->b.refs, 1);
    r->cp = ceph_get(cp);
    r->img = img;
    return &r->b;
}

#endif
