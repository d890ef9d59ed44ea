#pragma once
/* Internals shared by the storage/ceph files: the connection object and the pool record. */
#include "storage/ceph/ceph.h"
#include <stdatomic.h>
#ifdef NASD_CEPH
#include <rados/librados.h>
#include <rbd/librbd.h>

#define CEPH_CONFIG_OBJ "nasd.config"

struct ceph_pool {
    struct ceph_conf conf;
    char name[64];        /* the nasd pool */
    char fsid[64];        /* the cluster's, part of every volume's identity */
    rados_t cluster;
    rados_ioctx_t io;
    atomic_int refs;      /* the storage manager's + one per open image */
};

static inline struct ceph_pool *ceph_get(struct ceph_pool *cp) { atomic_fetch_add(&cp->refs, 1); return cp; }
void ceph_put(struct ceph_pool *cp);
/* kind "volume" | "dataset"; 0 or -errno */
int ceph_record(struct ceph_pool *cp, const char *kind, const char *name, uint64_t size);
int ceph_unrecord(struct ceph_pool *cp, const char *kind, const char *name);
/* A bdev over an opened image (takes the image over, closes it on the last put). */
uint64_t ceph_image_used(rbd_image_t img);
/* snap: the snapshot the image was opened at (read-only), NULL for the image itself; it is
 * part of the identity, so a snapshot LUN never looks like a path to the volume. */
nasd_bdev *ceph_rbd_bdev(struct ceph_pool *cp, rbd_image_t img, const char *name, const char *snap,
                         uint32_t block_size, int *errp);
#endif
