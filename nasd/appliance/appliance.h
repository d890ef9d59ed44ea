#pragma once
/* The running appliance: configuration DB, storage manager, protocol services and
 * the runtime state of every export. REST handlers change the DB, then ask the
 * appliance to (re)apply the affected export to its service. */
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include "db/db.h"
#include "nasd/appliance/config.h"
#include "util/stats.h"
#include "storage/manager/storage.h"

struct iscsi_server;
struct nfs_server;

enum export_type { EXPORT_ISCSI = 0, EXPORT_NFS = 1 };

/* Runtime entry for one export; lives while the export exists in the DB. */
struct export_rt {
    enum export_type type;
    int64_t id;
    char name[64];
    int active;                   /* currently served */
    struct nasd_io_stats *stats;  /* survives re-applies so counters never reset */
    struct export_rt *next;
};

struct appliance {
    struct nasd_config cfg;
    nasd_db db;
    struct storage *storage;
    struct iscsi_server *iscsi;
    struct nfs_server *nfs;
    pthread_mutex_t lock;         /* config changes and the export list */
    struct export_rt *exports;
    time_t started;
    struct snap_tasks *snap_tasks;   /* nasd/appliance/snap_tasks.c */
    int state_lock_fd, db_lock_fd; /* exclusive flocks held for the daemon's life (-1: none) */
};

/* Open DB and storage, start the services, restore pools and exports. */
int appliance_start(struct appliance *a, const struct nasd_config *cfg, char *err, size_t errlen);
void appliance_stop(struct appliance *a);

/* (Re)apply an export from the DB to its service: added when enabled, removed when
 * disabled. 0, or -errno with a message (the DB row is left as is). */
int appliance_apply_export(struct appliance *a, enum export_type t, int64_t id, char *err, size_t errlen);
/* Stop serving an export (before its DB row is deleted). */
void appliance_remove_export(struct appliance *a, enum export_type t, int64_t id);
/* iSCSI discovery CHAP from the settings table (iscsi_discovery_{chap,mutual}_{user,secret}). */
void appliance_apply_discovery_auth(struct appliance *a);
/* Re-apply every export that uses this dataset (quota change etc.). */
void appliance_dataset_changed(struct appliance *a, int64_t dataset_id);
/* Is the export currently served by its service? */
int appliance_export_active(struct appliance *a, enum export_type t, int64_t id);
/* Create the demo pool (four 1 GiB sparse files) when the DB has no pools. */
int appliance_create_demo(struct appliance *a, char *err, size_t errlen);
/* Load members of a pool row from the DB into the storage manager. */
int appliance_open_pool(struct appliance *a, int64_t pool_id, char *err, size_t errlen);
/* Connection settings of a ceph pool (table ceph_pools); -1 if pool_id is not one. */
int appliance_ceph_conf(nasd_db *db, int64_t pool_id, struct ceph_conf *c);
