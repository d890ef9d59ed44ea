#pragma once
/* Storage manager: pools (from member disks), volumes (block devices) and datasets
 * (directory trees) under the state directory. The REST layer calls this; the
 * protocol services only see the bdev / fsroot objects it hands out. */
#include <jansson.h>
#include <stdint.h>
#include "storage/bdev.h"
#include "storage/fsroot.h"

struct storage;

struct storage_member { char path[1024]; uint64_t size; int create; };

struct storage *storage_new(const char *state_dir);
void storage_free(struct storage *st);

/* Create a pool from member disks (files are created sparse when create is set).
 * layout: "stripe" | "mirror" | "raidz1". Returns 0 or -errno with a message. */
int storage_pool_create(struct storage *st, const char *name, const char *layout,
                        const struct storage_member *m, int n, char *err, size_t errlen);
/* Re-open a pool recorded in the DB at start-up. */
int storage_pool_open(struct storage *st, const char *name, const char *layout,
                      const struct storage_member *m, int n, char *err, size_t errlen);
int storage_pool_destroy(struct storage *st, const char *name, char *err, size_t errlen);
/* JSON: {state, size, allocated, free, members:[{path,size,state}]}; NULL if unknown. */
json_t *storage_pool_status(struct storage *st, const char *name);

int storage_volume_create(struct storage *st, const char *pool, const char *name, uint64_t size,
                          char *err, size_t errlen);
int storage_volume_resize(struct storage *st, const char *pool, const char *name, uint64_t size,
                          char *err, size_t errlen);
int storage_volume_destroy(struct storage *st, const char *pool, const char *name, char *err, size_t errlen);
nasd_bdev *storage_volume_open(struct storage *st, const char *pool, const char *name,
                               uint32_t block_size, int *errp);
/* Bytes actually allocated to the volume (thin provisioning). */
uint64_t storage_volume_used(struct storage *st, const char *pool, const char *name);

int storage_dataset_create(struct storage *st, const char *pool, const char *name, char *err, size_t errlen);
int storage_dataset_destroy(struct storage *st, const char *pool, const char *name, char *err, size_t errlen);
struct nasd_fsroot *storage_dataset_open(struct storage *st, const char *pool, const char *name,
                                         uint64_t fsid, uint64_t quota, int *errp);
/* Absolute path of a dataset directory (for display). */
void storage_dataset_path(struct storage *st, const char *pool, const char *name, char *out, size_t outlen);
