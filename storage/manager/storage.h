#pragma once
/* Storage manager: pools (the vpool engine over member disks), volumes (block devices
 * allocated from a pool) and datasets (filesystems kept in thin pool volumes). The REST
 * layer calls this; the protocol services only see the bdev / fsroot objects it hands out. */
#include <jansson.h>
#include <stdint.h>
#include "storage/bdev.h"
#include "storage/fsroot.h"
#include "storage/ceph/ceph.h"

struct storage;

struct storage_member { char path[1024]; uint64_t size; int create; int wipe; /* force: erase what it holds */ };

/* cache_bytes: RAM read cache per pool, dirty_bytes: its write-back budget (0: engine
 * defaults, see vpool_opts). */
struct storage *storage_new(const char *state_dir, uint64_t cache_bytes, uint64_t dirty_bytes);
void storage_free(struct storage *st);

/* Layout names a pool is created with: the name as it is recorded and shown, or NULL if
 * unknown ("raidz1-log", the old name of "raidz1", gives "raidz1"). */
const char *storage_layout_canonical(const char *layout);
#define STORAGE_LAYOUT_HELP "layout must be stripe, mirror, raidz1 or raidz1-inplace"
/* Create a pool from member disks (files are created sparse when create is set).
 * layout: a name storage_layout_canonical knows. Returns 0 or -errno with a message. */
int storage_pool_create(struct storage *st, const char *name, const char *layout,
                        const struct storage_member *m, int n, char *err, size_t errlen);
/* Re-open a pool recorded in the DB at start-up. */
int storage_pool_open(struct storage *st, const char *name, const char *layout,
                      const struct storage_member *m, int n, char *err, size_t errlen);
/* A pool on a Ceph cluster (storage/ceph): volumes and datasets are RBD images in
 * c->pool. create: the cluster must answer; open (start-up): the pool is kept, shown
 * FAULTED, and reconnected on use when the cluster is down. */
int storage_ceph_pool_add(struct storage *st, const char *name, const struct ceph_conf *c, int create,
                          char *err, size_t errlen);
int storage_pool_destroy(struct storage *st, const char *name, char *err, size_t errlen);
/* Import a pool from its member disks alone (labels name the layout and order).
 * *layout gets the layout name. */
int storage_pool_import(struct storage *st, const char *name, const char *const *paths, int n,
                        const char **layout, char *err, size_t errlen);
/* force: import even when the members' owner sector shows another live nasd using them
 * (a shared disk): only when that host is known to be down. */
int storage_pool_import_force(struct storage *st, const char *name, const char *const *paths, int n, int force,
                              const char **layout, char *err, size_t errlen);
/* JSON: {state, size, allocated, free, members:[{path,size,state,*_errors}], scrub:{...},
 * resilver:{...}}; NULL if unknown. */
json_t *storage_pool_status(struct storage *st, const char *name);
int storage_pool_scrub(struct storage *st, const char *name, char *err, size_t errlen);
/* Resets member error counters; faulted members still present are resilvered. */
int storage_pool_clear(struct storage *st, const char *name, char *err, size_t errlen);
/* op: "offline" | "online" | "replace" (new_path, create_size for replace; wipe: force,
 * erase what new_path holds once nothing else refuses the replace). */
int storage_pool_member(struct storage *st, const char *name, const char *op, int idx, const char *new_path,
                        uint64_t create_size, int wipe, char *err, size_t errlen);
/* Volumes recorded in the pool itself: [{"name","size","lz4"}] (for import); NULL if unknown. */
json_t *storage_pool_volumes(struct storage *st, const char *name);

/* lz4: compress the volume's data (pool engine). */
int storage_volume_create(struct storage *st, const char *pool, const char *name, uint64_t size, int lz4,
                          char *err, size_t errlen);
int storage_volume_resize(struct storage *st, const char *pool, const char *name, uint64_t size,
                          char *err, size_t errlen);
int storage_volume_destroy(struct storage *st, const char *pool, const char *name, char *err, size_t errlen);
nasd_bdev *storage_volume_open(struct storage *st, const char *pool, const char *name,
                               uint32_t block_size, int *errp);
/* Bytes actually allocated to the volume (thin provisioning). */
uint64_t storage_volume_used(struct storage *st, const char *pool, const char *name);

/* lz4: the engine compresses the dataset's blocks. Names are limited to 62 characters. */
int storage_dataset_create(struct storage *st, const char *pool, const char *name, int lz4,
                           char *err, size_t errlen);
int storage_dataset_destroy(struct storage *st, const char *pool, const char *name, char *err, size_t errlen);
/* One shared object per dataset (opened on first use, kept until destroy or
 * storage_free); each call returns a new reference and sets the quota. */
struct nasd_fsroot *storage_dataset_open(struct storage *st, const char *pool, const char *name,
                                         uint64_t fsid, uint64_t quota, int *errp);
/* Ceph pools: closes the shared object of a dataset nobody else holds (no export), so this
 * gateway lets go of the image's lock after showing its usage. No-op for local pools. */
void storage_dataset_idle(struct storage *st, const char *pool, const char *name);
/* Bytes the pool holds for the dataset (after compression). */
uint64_t storage_dataset_allocated(struct storage *st, const char *pool, const char *name);
/* Datasets recorded in the pool itself: [{"name","size","lz4"}] (for import). */
json_t *storage_pool_datasets(struct storage *st, const char *name);
/* Where a dataset lives, for display: "pool/name", or the directory of an old one. */
void storage_dataset_path(struct storage *st, const char *pool, const char *name, char *out, size_t outlen);

/* Snapshots (storage/manager/snapshots.c) of a volume (is_ds 0) or a dataset (is_ds 1).
 * Errors: -errno with a message in err. A dataset snapshot is taken at a filesystem
 * commit point; rolling a dataset back (or receiving into it) closes its open filesystem
 * once every holder let go (callers unexport it first), -EBUSY if one still holds it
 * after 5 s; meanwhile opening it gives -EAGAIN. Lists: [{name, created, size, used, referenced, clones, guid}]. */
int storage_snap_create(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap,
                        char *err, size_t errlen);
int storage_snap_destroy(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap,
                         char *err, size_t errlen);
json_t *storage_snap_list(struct storage *st, const char *pool, const char *obj, int is_ds, int *errp);
json_t *storage_snap_get(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap, int *errp);
int storage_snap_rollback(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap,
                          char *err, size_t errlen);
int storage_snap_clone(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap,
                       const char *clone, char *err, size_t errlen);
/* Stream of snap (or of the changes since from) written to fd / applied from fd. */
int storage_snap_send(struct storage *st, const char *pool, const char *obj, int is_ds, const char *snap,
                      const char *from, int fd, char *err, size_t errlen);
/* A received dataset is thin and spans its source pool, which may be larger than this one:
 * its size may be up to this many times the pool's (a volume: the unreserved space). */
#define STORAGE_RECV_DATASET_FACTOR 16
int storage_snap_receive(struct storage *st, const char *pool, const char *obj, int is_ds, int fd, int force,
                         char *snap_out, char *err, size_t errlen);
/* Read-only views: a bdev over a volume snapshot, a filesystem over a dataset snapshot. */
nasd_bdev *storage_snap_open_volume(struct storage *st, const char *pool, const char *vol, const char *snap,
                                    uint32_t block_size, int *errp);
struct nasd_fsroot *storage_snap_open_dataset(struct storage *st, const char *pool, const char *ds, const char *snap,
                                              uint64_t fsid, int *errp);
/* Clone origin ("vol", "snap") of a volume/dataset; -ENOENT if it is no clone. */
int storage_volume_origin(struct storage *st, const char *pool, const char *obj, int is_ds, char *ovol, char *osnap);
