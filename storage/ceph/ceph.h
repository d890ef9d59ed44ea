#pragma once
/* Pools on a Ceph cluster: a connection to one RADOS pool (librados), volumes and
 * datasets as RBD images in it (librbd), and the pool's nasd configuration kept in the
 * cluster itself (omap of the object "nasd.config") so other gateways can import it.
 * The storage manager calls this for pools whose layout is "ceph". Without librbd at
 * build time (no NASD_CEPH) every call fails with -ENOTSUP and says so. */
#include <jansson.h>
#include <stdint.h>
#include "storage/bdev.h"
#include "storage/fsroot.h"

struct ceph_pool;

struct ceph_conf {
    char monitors[512];   /* mon_host, e.g. "127.0.0.1:6789" or "[v2:...,v1:...]"; "" = from conf */
    char conf[1024];      /* a ceph.conf to read first; "" = none */
    char pool[128];       /* RADOS pool holding the images */
    char user[64];        /* cephx id without "client." ("admin") */
    char keyring[1024];   /* keyring file, or */
    char key[128];        /* the base64 secret itself (never shown through the API) */
};

/* Connects (a few seconds at most; a dead cluster fails with -ETIMEDOUT). */
int ceph_pool_connect(const struct ceph_conf *c, const char *name, struct ceph_pool **out,
                      char *err, size_t errlen);
/* Drops the pool's reference; open volumes keep the connection until they are closed. */
void ceph_pool_close(struct ceph_pool *cp);
/* {state, health, size, allocated, free, members:[], ceph:{monitors,pool,user,objects}} */
json_t *ceph_pool_status(struct ceph_pool *cp);
/* Records nasd made in the cluster, for import: [{"name","size","lz4":false}]. */
json_t *ceph_pool_list(struct ceph_pool *cp, int datasets);
/* Removes the pool's record object (the RADOS pool itself stays). */
int ceph_pool_forget(struct ceph_pool *cp);

/* Volumes: thin RBD images named like the volume. */
int ceph_volume_create(struct ceph_pool *cp, const char *name, uint64_t size, char *err, size_t errlen);
int ceph_volume_resize(struct ceph_pool *cp, const char *name, uint64_t size, char *err, size_t errlen);
int ceph_volume_destroy(struct ceph_pool *cp, const char *name, char *err, size_t errlen);
nasd_bdev *ceph_volume_open(struct ceph_pool *cp, const char *name, uint32_t block_size, int *errp);
uint64_t ceph_volume_used(struct ceph_pool *cp, const char *name);

/* Datasets: an ext2 dataset filesystem (storage/fs) in an RBD image ".<name>", held by
 * one gateway at a time through an RBD exclusive lock. */
int ceph_dataset_create(struct ceph_pool *cp, const char *name, char *err, size_t errlen);
int ceph_dataset_destroy(struct ceph_pool *cp, const char *name, char *err, size_t errlen);
struct nasd_fsroot *ceph_dataset_open(struct ceph_pool *cp, const char *name, uint64_t fsid,
                                      uint64_t quota, int *errp);
uint64_t ceph_dataset_allocated(struct ceph_pool *cp, const char *name);

/* Snapshots (RBD snapshots) of an image: the volume's name, or ".<name>" for a dataset;
 * clones are RBD clones of the (then protected) snapshot, recorded as kind "volume" or
 * "dataset" under name (without the dot). Lists: [{name, created, size, used, referenced,
 * clones, guid}] (used/referenced: 0, RBD does not count them cheaply). */
int ceph_snap_create(struct ceph_pool *cp, const char *img, const char *snap, char *err, size_t errlen);
int ceph_snap_destroy(struct ceph_pool *cp, const char *img, const char *snap, char *err, size_t errlen);
int ceph_snap_rollback(struct ceph_pool *cp, const char *img, const char *snap, char *err, size_t errlen);
json_t *ceph_snap_list(struct ceph_pool *cp, const char *img, const char *only, int *errp);
int ceph_clone(struct ceph_pool *cp, const char *img, const char *snap, const char *newimg, const char *kind,
               const char *name, char *err, size_t errlen);
/* Read-only bdev over a snapshot. */
nasd_bdev *ceph_snap_open(struct ceph_pool *cp, const char *img, const char *snap, uint32_t block_size, int *errp);
/* Parent image and snapshot of a clone; -ENOENT if img is no clone. */
int ceph_image_origin(struct ceph_pool *cp, const char *img, char *oimg, char *osnap);
