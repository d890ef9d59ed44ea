/* Ceph pools: the librados connection, cluster/pool statistics and health, and the
 * record of nasd's volumes and datasets in the omap of the object "nasd.config" in the
 * RADOS pool (shared by every gateway attached to that pool). */
#define _GNU_SOURCE
#include "storage/ceph/ceph_int.h"
#include "util/log.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef NASD_CEPH

static int set(rados_t r, const char *k, const char *v, char *err, size_t errlen)
{
    int rc = rados_conf_set(r, k, v);
    if (rc) snprintf(err, errlen, "ceph option %s: %s", k, strerror(-rc));
    return rc;
}

int ceph_pool_connect(const struct ceph_conf *c, const char *name, struct ceph_pool **out,
                      char *err, size_t errlen)
{
    if (!c->pool[0]) { snprintf(err, errlen, "ceph.pool (the RADOS pool) is required"); return -EINVAL; }
    if (!c->monitors[0] && !c->conf[0]) { snprintf(err, errlen, "ceph.monitors or ceph.conf is required"); return -EINVAL; }
    if (!c->key[0] && !c->keyring[0] && !c->conf[0]) { snprintf(err, errlen, "ceph.key or ceph.keyring is required"); return -EINVAL; }
    struct ceph_pool *cp = calloc(1, sizeof *cp);
    if (!cp) return -ENOMEM;
    cp->conf = *c;
    snprintf(cp->name, sizeof cp->name, "%s", name);
    atomic_init(&cp->refs, 1);
    int rc = rados_create(&cp->cluster, c->user[0] ? c->user : "admin");
    if (rc) { snprintf(err, errlen, "rados_create: %s", strerror(-rc)); free(cp); return rc; }
    if (c->conf[0] && (rc = rados_conf_read_file(cp->cluster, c->conf)) != 0) {
        snprintf(err, errlen, "cannot read %s: %s", c->conf, strerror(-rc));
        goto fail;
    }
    /* bounded waits: a dead cluster must fail REST calls, not hang them; no client-side
     * cache, so a write is on the OSDs when acknowledged and a second gateway reads it */
    if (set(cp->cluster, "log_to_stderr", "false", err, errlen) ||   /* first: the others may complain */
        set(cp->cluster, "err_to_stderr", "false", err, errlen) ||
        (c->monitors[0] && set(cp->cluster, "mon_host", c->monitors, err, errlen)) ||
        (c->keyring[0] && set(cp->cluster, "keyring", c->keyring, err, errlen)) ||
        (c->key[0] && set(cp->cluster, "key", c->key, err, errlen)) ||
        set(cp->cluster, "client_mount_timeout", "10", err, errlen) ||
        set(cp->cluster, "rados_mon_op_timeout", "10", err, errlen) ||
        set(cp->cluster, "rados_osd_op_timeout", "30", err, errlen) ||
        set(cp->cluster, "rbd_cache", "false", err, errlen) ||
        set(cp->cluster, "rbd_skip_partial_discard", "false", err, errlen)) {
        rc = -EINVAL;
        goto fail;
    }
    if ((rc = rados_connect(cp->cluster)) != 0) {
        snprintf(err, errlen, "cannot connect to the ceph cluster: %s", strerror(-rc));
        goto fail;
    }
    if ((rc = rados_ioctx_create(cp->cluster, c->pool, &cp->io)) != 0) {
        snprintf(err, errlen, "RADOS pool %s: %s", c->pool, rc == -ENOENT ? "does not exist" : strerror(-rc));
        rados_shutdown(cp->cluster);
        free(cp);
        return rc;
    }
    char fsid[64] = "";
    rados_cluster_fsid(cp->cluster, fsid, sizeof fsid);
    snprintf(cp->fsid, sizeof cp->fsid, "%s", fsid);
    *out = cp;
    return 0;
fail:
    rados_shutdown(cp->cluster);
    free(cp);
    return rc;
}

void ceph_put(struct ceph_pool *cp)
{
    if (!cp || atomic_fetch_sub(&cp->refs, 1) != 1) return;
    rados_ioctx_destroy(cp->io);
    rados_shutdown(cp->cluster);
    free(cp);
}

void ceph_pool_close(struct ceph_pool *cp) { ceph_put(cp); }

/* "HEALTH_OK" / "HEALTH_WARN" / "HEALTH_ERR" from the monitors; "" if they do not answer. */
static void health(struct ceph_pool *cp, char *out, size_t outlen)
{
    const char *cmd[] = { "{\"prefix\":\"health\",\"format\":\"json\"}" };
    char *obuf = NULL, *ostat = NULL;
    size_t olen = 0, slen = 0;
    *out = 0;
    if (rados_mon_command(cp->cluster, cmd, 1, "", 0, &obuf, &olen, &ostat, &slen) == 0 && obuf) {
        json_t *j = json_loadb(obuf, olen, 0, NULL);
        snprintf(out, outlen, "%s", json_string_value(json_object_get(j, "status")) ?: "");
        json_decref(j);
    }
    rados_buffer_free(obuf);
    rados_buffer_free(ostat);
}

json_t *ceph_pool_status(struct ceph_pool *cp)
{
    struct rados_cluster_stat_t cs;
    struct rados_pool_stat_t ps;
    char h[32];
    int rc = rados_cluster_stat(cp->cluster, &cs);
    if (!rc) rc = rados_ioctx_pool_stat(cp->io, &ps);
    json_t *info = json_pack("{s:s, s:s, s:s, s:s}", "monitors", cp->conf.monitors, "pool", cp->conf.pool,
                             "user", cp->conf.user, "fsid", cp->fsid);
    if (rc) {
        return json_pack("{s:s, s:s, s:I, s:I, s:I, s:[], s:o}", "state", "UNAVAILABLE", "error",
                         strerror(-rc), "size", (json_int_t)0, "allocated", (json_int_t)0, "free", (json_int_t)0,
                         "members", "ceph", info);
    }
    health(cp, h, sizeof h);
    /* the pool's bytes as stored (ps.num_bytes) and the cluster's raw free space; with
     * replication size n the pool can hold about free/n more */
    const char *state = !strcmp(h, "HEALTH_OK") ? "ONLINE" : !strcmp(h, "HEALTH_WARN") ? "DEGRADED" : "FAULTED";
    json_object_set_new(info, "objects", json_integer((json_int_t)ps.num_objects));
    json_object_set_new(info, "health", json_string(h[0] ? h : "UNKNOWN"));
    uint64_t free_b = cs.kb_avail * 1024, used = ps.num_bytes;
    return json_pack("{s:s, s:I, s:I, s:I, s:[], s:o}", "state", state, "size", (json_int_t)(used + free_b),
                     "allocated", (json_int_t)used, "free", (json_int_t)free_b, "members", "ceph", info);
}

/* The pool's record: omap keys "volume/<name>" and "dataset/<name>" of "nasd.config",
 * values {"size":...}. */
int ceph_record(struct ceph_pool *cp, const char *kind, const char *name, uint64_t size)
{
    char key[160], val[96];
    snprintf(key, sizeof key, "%s/%s", kind, name);
    int vlen = snprintf(val, sizeof val, "{\"size\":%llu,\"created\":%lld}", (unsigned long long)size,
                        (long long)time(NULL));
    const char *keys[] = { key };
    const char *vals[] = { val };
    size_t lens[] = { (size_t)vlen };
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_create(op, LIBRADOS_CREATE_IDEMPOTENT, NULL);
    rados_write_op_omap_set(op, keys, vals, lens, 1);
    int rc = rados_write_op_operate(op, cp->io, CEPH_CONFIG_OBJ, NULL, 0);
    rados_release_write_op(op);
    return rc;
}

int ceph_unrecord(struct ceph_pool *cp, const char *kind, const char *name)
{
    char key[160];
    snprintf(key, sizeof key, "%s/%s", kind, name);
    const char *keys[] = { key };
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_omap_rm_keys(op, keys, 1);
    int rc = rados_write_op_operate(op, cp->io, CEPH_CONFIG_OBJ, NULL, 0);
    rados_release_write_op(op);
    return rc == -ENOENT ? 0 : rc;
}

json_t *ceph_pool_list(struct ceph_pool *cp, int datasets)
{
    const char *prefix = datasets ? "dataset/" : "volume/";
    json_t *out = json_array();
    char after[160] = "";
    for (;;) {
        rados_omap_iter_t it = NULL;
        unsigned char more = 0;
        int prval = 0;
        rados_read_op_t op = rados_create_read_op();
        rados_read_op_omap_get_vals2(op, after, prefix, 256, &it, &more, &prval);
        int rc = rados_read_op_operate(op, cp->io, CEPH_CONFIG_OBJ, 0);
        rados_release_read_op(op);
        if (rc || prval) {
            if (rc != -ENOENT && prval != -ENOENT) log_warn("ceph %s: reading %s: %s", cp->name, CEPH_CONFIG_OBJ, strerror(-(rc ? rc : prval)));
            if (it) rados_omap_get_end(it);   /* set up with the op even when the read fails */
            break;
        }
        char *k, *v;
        size_t vlen;
        while (rados_omap_get_next(it, &k, &v, &vlen) == 0 && k) {
            snprintf(after, sizeof after, "%s", k);
            json_t *j = json_loadb(v, vlen, 0, NULL);
            json_array_append_new(out, json_pack("{s:s, s:I, s:b}", "name", k + strlen(prefix), "size",
                                                 (json_int_t)json_integer_value(json_object_get(j, "size")), "lz4", 0));
            json_decref(j);
        }
        rados_omap_get_end(it);
        if (!more) break;
    }
    return out;
}

int ceph_pool_forget(struct ceph_pool *cp)
{
    int rc = rados_remove(cp->io, CEPH_CONFIG_OBJ);
    return rc == -ENOENT ? 0 : rc;
}

#else /* !NASD_CEPH */

int ceph_pool_connect(const struct ceph_conf *c, const char *name, struct ceph_pool **out,
                      char *err, size_t errlen)
{
    snprintf(err, errlen, "this nasd was built without Ceph support (install librbd-dev and librados-dev, rebuild)");
    return -ENOTSUP;
}
void ceph_pool_close(struct ceph_pool *cp) {}
json_t *ceph_pool_status(struct ceph_pool *cp) { return NULL; }
json_t *ceph_pool_list(struct ceph_pool *cp, int datasets) { return json_array(); }
int ceph_pool_forget(struct ceph_pool *cp) { return -ENOTSUP; }

#endif
