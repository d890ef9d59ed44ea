#pragma once
/* Internals shared by storage.c (pools, volumes) and datasets.c. */
#include <limits.h>
#include <pthread.h>
#include "storage/manager/storage.h"
#include "storage/pool/vpool.h"
#include "storage/ceph/ceph.h"
#include <time.h>

#define VP_LIST_MAX 256 /* more than the engine's volume table holds */
/* A block device an exclusive open cannot take (member_probe refuses it, members_lock too). */
#define BLOCK_HELD_WHAT "held by the system (a mounted filesystem, or md, dm or LVM uses it)"

/* A dataset opened once and shared: libext2fs must never see two opens of one volume. */
struct open_dataset {
    char name[64];
    struct nasd_fsroot *fs;     /* the storage's reference */
    int closing;                /* a rollback or receive waits for its other holders: no new ones */
    struct open_dataset *next;
};

struct pool {
    char name[64];
    struct vpool *vp;          /* NULL when the pool could not be imported */
    char import_error[256];
    int nmembers;
    char members[VPOOL_MAX_MEMBERS][1024];
    struct open_dataset *datasets;  /* under storage.lock */
    /* ceph pools (layout "ceph"): conf set, ceph NULL while the cluster cannot be reached */
    int is_ceph;
    struct ceph_conf ceph_conf;
    struct ceph_pool *ceph;
    time_t ceph_retry;
    int lock_fd[VPOOL_MAX_MEMBERS]; /* flock held on each member while open; -1 none (member_lock.c) */
    uint8_t uuid[16];
    uint64_t hb_seq;                /* owner-sector heartbeat (under storage.lock) */
    int hb_off;                     /* no more heartbeats: closing or destroying */
    int refs;                       /* storage calls using it now (pool_hold; under storage.lock) */
    int closing;                    /* being destroyed: pool_hold fails */
    struct pool *next;
};

struct storage {
    char state_dir[PATH_MAX];
    uint64_t cache_bytes, dirty_bytes;
    pthread_mutex_t lock;      /* the pool list; vpool calls are thread-safe themselves */
    pthread_cond_t pool_cv;    /* a pool's refs dropped (destroy waits for them) */
    struct pool *pools;
    pthread_t hb_thread;       /* writes every open pool's owner sector once a second */
    pthread_mutex_t hb_mu;
    pthread_cond_t hb_cv;
    int hb_running, hb_stop;
};

/* Whether a pool of that name exists (no reference: for name checks on the REST thread). */
struct pool *find_pool(struct storage *st, const char *name);
/* A reference to a pool for the length of one storage call, dropped when it goes out of
 * scope. Snapshot tasks and send streams run storage calls on their own threads; destroy
 * waits for these references, so it never frees a pool (its engine, its cluster
 * connection) under one of them. */
struct pool_ref { struct storage *st; struct pool *p; };
void pool_ref_drop(struct pool_ref *r);
#define POOL_REF(r) struct pool_ref r __attribute__((cleanup(pool_ref_drop))) = { 0 }
/* The pool named name, held through r (an r holds one pool: later calls return it); NULL
 * when there is none or it is being destroyed. */
struct pool *pool_hold(struct storage *st, struct pool_ref *r, const char *name);
/* The pool's cluster connection if it is a ceph pool (reconnecting if it was lost at
 * start-up); sets *is_ceph. NULL with a message when it is ceph but unreachable. */
struct ceph_pool *ceph_of(struct storage *st, struct pool_ref *r, const char *name, int *is_ceph, char *err, size_t errlen);
/* The pool's engine, or NULL with a message (unknown or not imported). */
struct vpool *engine(struct storage *st, struct pool_ref *r, const char *name, char *err, size_t errlen);
void pool_dir(struct storage *st, const char *pool, const char *sub, const char *name, char *out, size_t outlen);
int rm_tree(int dirfd, const char *name);
json_t *volume_list(struct vpool *vp, int datasets);
/* Bytes of the pool not reserved by volumes (their sizes; skip: one left out, API name)
 * nor held by datasets: the largest size volume skip may have (storage.c). */
uint64_t unreserved(struct vpool *vp, const char *skip);
/* Bytes the pool has allocated to a volume (thin provisioning). */
uint64_t vol_allocated(struct vpool *vp, const char *vol);
/* Engine volumes whose names start with '.' hold datasets (API names never do). */
static inline int is_dataset_volume(const char *vol) { return vol[0] == '.'; }
/* Releases the pool's open datasets (storage.lock held). */
void datasets_close_all(struct pool *p);
/* -EBUSY with a message when something besides the storage holds the dataset (name) or
 * any dataset of the pool (name NULL), after waiting up to 2 s for it to let go. */
int datasets_busy(struct storage *st, struct pool *p, const char *name, char *err, size_t errlen);

/* ---- member ownership (member_lock.c) ---- */
/* Locks every member (creating the file when create[i]); missing ones get -1. -EBUSY with
 * a message naming the holder when one is locked by another pool or process; strict (new
 * members from the API): also when any other process merely has it open. */
int members_lock(const char *const *paths, const int *create, int n, int strict, int *fds, char *err, size_t errlen);
void members_unlock(int *fds, int n);
/* -EBUSY with a message when a member's owner sector shows another live nasd using the pool
 * (a shared disk another host has imported); force skips this. */
int members_check_owner(const char *const *paths, int n, char *err, size_t errlen);
/* Marks the pool's members ACTIVE (at open) or EXPORTED (at close). */
void pool_owner_mark(struct pool *p, int state);
void heartbeat_start(struct storage *st);
void heartbeat_stop(struct storage *st);
