/* Pools on a Ceph cluster in the storage manager: adding them and reconnecting them. The
 * other storage_* calls (storage.c, datasets.c, snapshots.c) hand ceph pools to
 * storage/ceph at their start (see ceph_of). */
#define _GNU_SOURCE
#include "storage/manager/storage_impl.h"
#include "util/log.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ceph_pool *ceph_of(struct storage *st, struct pool_ref *r, const char *name, int *is_ceph, char *err, size_t errlen)
{
    struct pool *p = pool_hold(st, r, name);
    *is_ceph = p && p->is_ceph;
    if (!*is_ceph) return NULL;
    pthread_mutex_lock(&st->lock);
    if (!p->ceph && time(NULL) >= p->ceph_retry) {
        char e[256];
        struct ceph_pool *cp = NULL;
        p->ceph_retry = time(NULL) + 5;
        if (ceph_pool_connect(&p->ceph_conf, name, &cp, e, sizeof e) == 0) {
            p->ceph = cp;
            p->import_error[0] = 0;
            log_info("pool %s: connected to the ceph cluster", name);
        } else {
            snprintf(p->import_error, sizeof p->import_error, "%s", e);
        }
    }
    struct ceph_pool *cp = p->ceph;
    if (!cp) snprintf(err, errlen, "pool %s is not available: %s", name, p->import_error);
    pthread_mutex_unlock(&st->lock);
    return cp;
}

int storage_ceph_pool_add(struct storage *st, const char *name, const struct ceph_conf *c, int create,
                          char *err, size_t errlen)
{
    if (find_pool(st, name)) { snprintf(err, errlen, "pool %s exists", name); return -EEXIST; }
    struct ceph_pool *cp = NULL;
    int rc = ceph_pool_connect(c, name, &cp, err, errlen);
    if (rc && create) return rc;
    struct pool *p = calloc(1, sizeof *p);
    if (!p) { ceph_pool_close(cp); return -ENOMEM; }
    snprintf(p->name, sizeof p->name, "%s", name);
    p->is_ceph = 1;
    for (int i = 0; i < VPOOL_MAX_MEMBERS; i++) p->lock_fd[i] = -1;   /* no member disks to lock */
    p->ceph_conf = *c;
    p->ceph = cp;
    if (rc) {
        snprintf(p->import_error, sizeof p->import_error, "%s", err);
        p->ceph_retry = time(NULL) + 5;
    }
    pthread_mutex_lock(&st->lock);
    p->next = st->pools;
    st->pools = p;
    pthread_mutex_unlock(&st->lock);
    return rc;
}
