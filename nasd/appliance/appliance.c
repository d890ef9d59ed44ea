/* Runtime glue between the configuration DB, the storage manager and the services. */
#define _GNU_SOURCE
#include "nasd/appliance/appliance.h"
#include "nasd/appliance/snap_tasks.h"
#include "iscsi/iscsi.h"
#include "util/flock.h"
#include "util/log.h"
#include "nfs/nfs.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct export_rt *rt_find(struct appliance *a, enum export_type t, int64_t id, int create)
{
    for (struct export_rt *e = a->exports; e; e = e->next)
        if (e->type == t && e->id == id) return e;
    if (!create) return NULL;
    struct export_rt *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->type = t;
    e->id = id;
    e->stats = nasd_stats_new();
    e->next = a->exports;
    a->exports = e;
    return e;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static int apply_iscsi(struct appliance *a, struct export_rt *e, json_t *row, char *err, size_t errlen)
{
    if (!a->iscsi) { snprintf(err, errlen, "iSCSI service is not running"); return -ENOTCONN; }
    struct iscsi_target_cfg *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    snprintf(c->iqn, sizeof c->iqn, "%s", jstr(row, "iqn"));
    snprintf(c->alias, sizeof c->alias, "%s", jstr(row, "alias"));
    snprintf(c->chap_user, sizeof c->chap_user, "%s", jstr(row, "chap_user"));
    snprintf(c->chap_secret, sizeof c->chap_secret, "%s", jstr(row, "chap_secret"));
    snprintf(c->mutual_user, sizeof c->mutual_user, "%s", jstr(row, "mutual_user"));
    snprintf(c->mutual_secret, sizeof c->mutual_secret, "%s", jstr(row, "mutual_secret"));
    c->immediate_data = json_integer_value(json_object_get(row, "immediate_data")) != 0;
    json_t *inits = json_object_get(row, "initiators"), *v;
    size_t i;
    json_array_foreach(inits, i, v) {
        if (c->ninitiators < ISCSI_MAX_ACL && json_is_string(v))
            snprintf(c->initiators[c->ninitiators++], sizeof c->initiators[0], "%s", json_string_value(v));
    }
    json_t *luns = db_rows(&a->db,
        "SELECT l.lun, v.name AS volume, l.snapshot, v.block_size, p.name AS pool FROM iscsi_luns l "
        "JOIN volumes v ON v.id=l.volume_id JOIN pools p ON p.id=v.pool_id WHERE l.export_id=? ORDER BY l.lun",
        "i", e->id);
    int rc = 0;
    json_array_foreach(luns, i, v) {
        if (c->nluns >= ISCSI_MAX_LUNS) break;
        int berr = 0;
        uint32_t bs = (uint32_t)json_integer_value(json_object_get(v, "block_size"));
        const char *snap = json_string_value(json_object_get(v, "snapshot"));   /* read-only LUN */
        nasd_bdev *b = snap ? storage_snap_open_volume(a->storage, jstr(v, "pool"), jstr(v, "volume"), snap, bs, &berr)
                            : storage_volume_open(a->storage, jstr(v, "pool"), jstr(v, "volume"), bs, &berr);
        if (!b) {
            snprintf(err, errlen, "cannot open volume %s/%s: %s", jstr(v, "pool"), jstr(v, "volume"), strerror(-berr));
            rc = berr;
            break;
        }
        c->luns[c->nluns].lun = json_integer_value(json_object_get(v, "lun"));
        c->luns[c->nluns++].bdev = b;
    }
    json_decref(luns);
    c->stats = e->stats;
    if (!rc) {
        rc = iscsi_server_set_target(a->iscsi, c);
        if (rc) snprintf(err, errlen, "iSCSI target %s: %s", c->iqn, strerror(-rc));
    }
    for (unsigned l = 0; l < c->nluns; l++) nasd_bdev_put(c->luns[l].bdev);
    free(c);
    return rc;
}

static int apply_nfs(struct appliance *a, struct export_rt *e, json_t *row, char *err, size_t errlen)
{
    if (!a->nfs) { snprintf(err, errlen, "NFS service is not running"); return -ENOTCONN; }
    json_t *ds = db_row(&a->db, "SELECT d.id, d.name, d.quota, p.name AS pool FROM datasets d "
                        "JOIN pools p ON p.id=d.pool_id WHERE d.id=?", "i",
                        (int64_t)json_integer_value(json_object_get(row, "dataset_id")));
    if (!ds) { snprintf(err, errlen, "dataset of export not found"); return -ENOENT; }
    struct nfs_export_cfg *c = calloc(1, sizeof *c);
    int ferr = 0, rc = 0;
    c->export_id = (uint32_t)e->id;
    snprintf(c->path, sizeof c->path, "%s", jstr(row, "path"));
    c->read_only = json_integer_value(json_object_get(row, "read_only"));
    c->root_squash = json_integer_value(json_object_get(row, "root_squash"));
    c->all_squash = json_integer_value(json_object_get(row, "all_squash"));
    c->anonuid = json_integer_value(json_object_get(row, "anonuid"));
    c->anongid = json_integer_value(json_object_get(row, "anongid"));
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(row, "clients"), i, v) {
        if (c->nnets < NFS_MAX_CLIENT_NETS && json_is_string(v) &&
            nfs_parse_client_net(json_string_value(v), &c->nets[c->nnets]) == 0)
            c->nnets++;
    }
    const char *snap = json_string_value(json_object_get(row, "snapshot"));
    uint64_t dsid = (uint64_t)json_integer_value(json_object_get(ds, "id"));
    if (snap) {   /* a read-only view of a dataset snapshot: its own filesystem id */
        c->read_only = 1;
        c->fs = storage_snap_open_dataset(a->storage, jstr(ds, "pool"), jstr(ds, "name"), snap,
                                          dsid | (uint64_t)e->id << 32 | 1ull << 63, &ferr);
    } else
        c->fs = storage_dataset_open(a->storage, jstr(ds, "pool"), jstr(ds, "name"), dsid,
                                     (uint64_t)json_integer_value(json_object_get(ds, "quota")), &ferr);
    if (!c->fs) {
        snprintf(err, errlen, "cannot open dataset %s/%s: %s", jstr(ds, "pool"), jstr(ds, "name"), strerror(-ferr));
        rc = ferr;
    } else {
        c->stats = e->stats;
        rc = nfs_server_set_export(a->nfs, c);
        if (rc) snprintf(err, errlen, "NFS export %s: %s", c->path, strerror(-rc));
        nasd_fsroot_put(c->fs);
    }
    json_decref(ds);
    free(c);
    return rc;
}

static void unserve(struct appliance *a, struct export_rt *e)
{
    if (!e->active) return;
    if (e->type == EXPORT_ISCSI && a->iscsi) {
        json_t *row = db_row(&a->db, "SELECT iqn FROM iscsi_exports WHERE id=?", "i", e->id);
        if (row) iscsi_server_remove_target(a->iscsi, jstr(row, "iqn"));
        json_decref(row);
    } else if (e->type == EXPORT_NFS && a->nfs) {
        nfs_server_remove_export(a->nfs, (uint32_t)e->id);
    }
    e->active = 0;
}

int appliance_apply_export(struct appliance *a, enum export_type t, int64_t id, char *err, size_t errlen)
{
    const char *sql = t == EXPORT_ISCSI ? "SELECT * FROM iscsi_exports WHERE id=?" : "SELECT * FROM nfs_exports WHERE id=?";
    json_t *row = db_row(&a->db, sql, "i", id);
    if (!row) { snprintf(err, errlen, "export %lld not found", (long long)id); return -ENOENT; }
    pthread_mutex_lock(&a->lock);
    struct export_rt *e = rt_find(a, t, id, 1);
    int rc = 0;
    snprintf(e->name, sizeof e->name, "%s", jstr(row, "name"));
    if (!json_integer_value(json_object_get(row, "enabled"))) {
        unserve(a, e);
    } else {
        rc = t == EXPORT_ISCSI ? apply_iscsi(a, e, row, err, errlen) : apply_nfs(a, e, row, err, errlen);
        e->active = rc == 0;
    }
    pthread_mutex_unlock(&a->lock);
    json_decref(row);
    return rc;
}

void appliance_remove_export(struct appliance *a, enum export_type t, int64_t id)
{
    pthread_mutex_lock(&a->lock);
    struct export_rt **pp = &a->exports;
    while (*pp && !((*pp)->type == t && (*pp)->id == id)) pp = &(*pp)->next;
    struct export_rt *e = *pp;
    if (e) {
        unserve(a, e);
        *pp = e->next;
        nasd_stats_put(e->stats);
        free(e);
    }
    pthread_mutex_unlock(&a->lock);
}

void appliance_dataset_changed(struct appliance *a, int64_t dataset_id)
{
    json_t *rows = db_rows(&a->db, "SELECT id FROM nfs_exports WHERE dataset_id=?", "i", dataset_id);
    size_t i;
    json_t *v;
    char err[256];
    json_array_foreach(rows, i, v) {
        if (appliance_apply_export(a, EXPORT_NFS, json_integer_value(json_object_get(v, "id")), err, sizeof err))
            log_warn("re-applying NFS export: %s", err);
    }
    json_decref(rows);
}

int appliance_export_active(struct appliance *a, enum export_type t, int64_t id)
{
    pthread_mutex_lock(&a->lock);
    struct export_rt *e = rt_find(a, t, id, 0);
    int active = e && e->active;
    pthread_mutex_unlock(&a->lock);
    return active;
}

int appliance_ceph_conf(nasd_db *db, int64_t pool_id, struct ceph_conf *c)
{
    json_t *row = db_row(db, "SELECT monitors, conf, rados_pool, user, keyring, secret FROM ceph_pools WHERE pool_id=?",
                         "i", pool_id);
    if (!row) return -1;
    memset(c, 0, sizeof *c);
    snprintf(c->monitors, sizeof c->monitors, "%s", jstr(row, "monitors"));
    snprintf(c->conf, sizeof c->conf, "%s", jstr(row, "conf"));
    snprintf(c->pool, sizeof c->pool, "%s", jstr(row, "rados_pool"));
    snprintf(c->user, sizeof c->user, "%s", jstr(row, "user"));
    snprintf(c->keyring, sizeof c->keyring, "%s", jstr(row, "keyring"));
    snprintf(c->key, sizeof c->key, "%s", jstr(row, "secret"));
    json_decref(row);
    return 0;
}

int appliance_open_pool(struct appliance *a, int64_t pool_id, char *err, size_t errlen)
{
    struct ceph_conf cc;
    if (appliance_ceph_conf(&a->db, pool_id, &cc) == 0) {   /* kept even when the cluster is down */
        json_t *p = db_row(&a->db, "SELECT name FROM pools WHERE id=?", "i", pool_id);
        int rc = p ? storage_ceph_pool_add(a->storage, jstr(p, "name"), &cc, 0, err, errlen) : -ENOENT;
        json_decref(p);
        return rc;
    }
    json_t *p = db_row(&a->db, "SELECT name, layout FROM pools WHERE id=?", "i", pool_id);
    json_t *ms = db_rows(&a->db, "SELECT path, size FROM pool_members WHERE pool_id=? ORDER BY idx", "i", pool_id);
    int rc = -ENOENT;
    if (p && ms) {
        struct storage_member m[16] = { 0 };
        int n = 0;
        size_t i;
        json_t *v;
        json_array_foreach(ms, i, v) {
            if (n == 16) break;
            snprintf(m[n].path, sizeof m[n].path, "%s", jstr(v, "path"));
            m[n++].size = json_integer_value(json_object_get(v, "size"));
        }
        rc = storage_pool_open(a->storage, jstr(p, "name"), jstr(p, "layout"), m, n, err, errlen);
    }
    json_decref(p);
    json_decref(ms);
    return rc;
}

static void restore(struct appliance *a)
{
    char err[512];
    json_t *rows = db_rows(&a->db, "SELECT id, name FROM pools ORDER BY id", "");
    size_t i;
    json_t *v;
    json_array_foreach(rows, i, v) {
        if (appliance_open_pool(a, json_integer_value(json_object_get(v, "id")), err, sizeof err))
            log_err("pool %s: %s", jstr(v, "name"), err);
    }
    json_decref(rows);
    for (int t = EXPORT_ISCSI; t <= EXPORT_NFS; t++) {
        rows = db_rows(&a->db, t == EXPORT_ISCSI ? "SELECT id, name FROM iscsi_exports ORDER BY id"
                                                 : "SELECT id, name FROM nfs_exports ORDER BY id", "");
        int n = 0;
        json_array_foreach(rows, i, v) {
            if (appliance_apply_export(a, t, json_integer_value(json_object_get(v, "id")), err, sizeof err))
                log_err("restoring %s export %s: %s", t == EXPORT_ISCSI ? "iSCSI" : "NFS", jstr(v, "name"), err);
            else n++;
        }
        if (json_array_size(rows))
            log_info("restored %d of %zu %s exports", n, json_array_size(rows), t == EXPORT_ISCSI ? "iSCSI" : "NFS");
        json_decref(rows);
    }
}

void appliance_apply_discovery_auth(struct appliance *a)
{
    static const char *keys[4] = { "iscsi_discovery_chap_user", "iscsi_discovery_chap_secret",
                                   "iscsi_discovery_mutual_user", "iscsi_discovery_mutual_secret" };
    struct iscsi_chap d = { 0 };
    char *dst[4] = { d.user, d.secret, d.muser, d.msecret };
    if (!a->iscsi) return;
    for (int i = 0; i < 4; i++) {
        char *v = db_setting_get(&a->db, keys[i]);
        if (v) snprintf(dst[i], 64, "%s", v);
        free(v);
    }
    iscsi_server_set_discovery_auth(a->iscsi, &d);
}

static int start_services(struct appliance *a, char *err, size_t errlen)
{
    if (a->cfg.iscsi_portal[0]) {
        /* 32 workers: a request to a remote volume (RBD) holds one for its round trip */
        a->iscsi = iscsi_server_start_held(a->cfg.iscsi_portal, 32, err, errlen);
        if (!a->iscsi) return -1;
        appliance_apply_discovery_auth(a);
    }
    if (a->cfg.nfs_bind[0]) {
        struct nfs_server_cfg nc = { .nfs_port = a->cfg.nfs_port, .mount_port = a->cfg.mount_port,
                                     .portmap_port = a->cfg.portmap_port, .held = 1 };
        snprintf(nc.bind_addr, sizeof nc.bind_addr, "%s", a->cfg.nfs_bind);
        snprintf(nc.state_dir, sizeof nc.state_dir, "%s/nfs", a->cfg.state_dir);
        mkdir(nc.state_dir, 0700);
        a->nfs = nfs_server_start(&nc, err, errlen);
        if (!a->nfs) return -1;
    }
    return 0;
}

/* After restore: the services start taking connections, every export already in place. */
static int open_services(struct appliance *a, char *err, size_t errlen)
{
    if (a->iscsi) {
        if (iscsi_server_listen(a->iscsi, err, errlen)) return -1;
        log_info("iSCSI target listening on %s", a->cfg.iscsi_portal);
    }
    if (a->nfs) {
        if (nfs_server_listen(a->nfs, err, errlen)) return -1;
        log_info("NFS server on %s: nfs %d, mount %d, portmap %d", a->cfg.nfs_bind, nfs_server_nfs_port(a->nfs),
                 nfs_server_mount_port(a->nfs), a->cfg.portmap_port);
    }
    return 0;
}

/* One daemon per state directory and database: a second nasd on either would import the
 * same pools and replay their journals under the first one's feet. */
static int take_lock(const char *path, const char *shown, const char *what, int *fdp, char *err, size_t errlen)
{
    pid_t holder = 0;
    int fd = nasd_flock_open(path, O_RDWR | O_CREAT, &holder);
    if (fd == -EWOULDBLOCK) {
        if (!holder) {   /* /proc/locks unreadable: the pid the holder wrote into the lock file */
            FILE *f = fopen(path, "r");
            int pid = 0;
            if (f && fscanf(f, "%d", &pid) == 1 && pid > 0 && strstr(what, "state")) holder = pid;
            if (f) fclose(f);
        }
        if (holder) snprintf(err, errlen, "%s %s is in use by another nasd (pid %d); one daemon per %s", what, shown,
                             (int)holder, what);
        else snprintf(err, errlen, "%s %s is locked by another process; one daemon per %s", what, shown, what);
        return -1;
    }
    if (fd < 0) { snprintf(err, errlen, "cannot lock %s %s: %s", what, shown, strerror(-fd)); return -1; }
    *fdp = fd;
    return 0;
}

int appliance_start(struct appliance *a, const struct nasd_config *cfg, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->state_lock_fd = a->db_lock_fd = -1;
    a->cfg = *cfg;
    a->started = time(NULL);
    pthread_mutex_init(&a->lock, NULL);
    if (mkdir(cfg->state_dir, 0755) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "state dir %s: %s", cfg->state_dir, strerror(errno));
        return -1;
    }
    char abs[1024];
    if (realpath(cfg->state_dir, abs)) snprintf(a->cfg.state_dir, sizeof a->cfg.state_dir, "%s", abs);
    char lock[1100];
    snprintf(lock, sizeof lock, "%s/nasd.lock", a->cfg.state_dir);
    if (take_lock(lock, a->cfg.state_dir, "state directory", &a->state_lock_fd, err, errlen)) return -1;
    if (ftruncate(a->state_lock_fd, 0) == 0) dprintf(a->state_lock_fd, "%d\n", (int)getpid());
    /* the DB file itself (SQLite uses POSIX locks, which flock does not interfere with);
     * this fd stays open until after db_close, so SQLite's own locks are never dropped */
    if (take_lock(cfg->db_path, cfg->db_path, "database", &a->db_lock_fd, err, errlen)) return -1;
    if (db_open(&a->db, cfg->db_path, err, errlen)) return -1;
    a->storage = storage_new(a->cfg.state_dir, a->cfg.cache_bytes, a->cfg.dirty_bytes);
    if (!a->storage) { snprintf(err, errlen, "out of memory"); return -1; }
    /* ports are bound first (a taken port fails the start at once) but connections are
     * refused until pools and exports are restored: never "target not found" / NOENT */
    if (start_services(a, err, errlen)) return -1;
    restore(a);
    if (open_services(a, err, errlen)) return -1;
    a->snap_tasks = snap_tasks_start(a);
    return 0;
}

void appliance_stop(struct appliance *a)
{
    snap_tasks_stop(a->snap_tasks);
    a->snap_tasks = NULL;
    if (a->iscsi) iscsi_server_stop(a->iscsi);
    if (a->nfs) nfs_server_stop(a->nfs);
    a->iscsi = NULL;
    a->nfs = NULL;
    while (a->exports) {
        struct export_rt *e = a->exports;
        a->exports = e->next;
        nasd_stats_put(e->stats);
        free(e);
    }
    storage_free(a->storage);
    a->storage = NULL;
    db_close(&a->db);
    if (a->db_lock_fd >= 0) close(a->db_lock_fd);
    if (a->state_lock_fd >= 0) close(a->state_lock_fd);
    a->db_lock_fd = a->state_lock_fd = -1;
}
