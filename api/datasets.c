/* /api/v1/datasets — filesystems in a pool with a quota and optional lz4, exported over NFS. */
#define _GNU_SOURCE
#include "api/api.h"
#include "util/log.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define DATASET_SELECT "SELECT d.id, p.name AS pool, d.name, p.name || '/' || d.name AS full_name, d.quota, " \
                       "d.compression, d.comment, d.created FROM datasets d JOIN pools p ON p.id=d.pool_id "

/* The dataset's shared filesystem object (new reference), or NULL. */
static struct nasd_fsroot *open_ds(struct appliance *a, json_t *row, int *err)
{
    return storage_dataset_open(a->storage, json_string_value(json_object_get(row, "pool")),
                                json_string_value(json_object_get(row, "name")),
                                (uint64_t)json_integer_value(json_object_get(row, "id")),
                                (uint64_t)json_integer_value(json_object_get(row, "quota")), err);
}

static json_t *decorate(struct appliance *a, json_t *row)
{
    const char *pool = json_string_value(json_object_get(row, "pool"));
    const char *name = json_string_value(json_object_get(row, "name"));
    char path[4096];
    storage_dataset_path(a->storage, pool, name, path, sizeof path);
    json_object_set_new(row, "path", json_string(path));
    int err = 0;
    struct nasd_fsroot *f = open_ds(a, row, &err);
    struct stat st;
    if (f && f->vfs->fstatat(f, f->root_fd, "", &st, AT_EMPTY_PATH) == 0) {
        char mode[8];
        snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
        json_object_set_new(row, "mode", json_string(mode));
        json_object_set_new(row, "uid", json_integer(st.st_uid));
        json_object_set_new(row, "gid", json_integer(st.st_gid));
    }
    struct statvfs vfs;
    if (f && f->vfs->statvfs(f, &vfs) == 0) {
        json_object_set_new(row, "files", json_integer((json_int_t)(vfs.f_files - vfs.f_ffree)));
        /* what can still be written: the filesystem's (pool-bounded) free space, and the quota */
        uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize, quota = atomic_load(&f->quota);
        int64_t used = atomic_load(&f->used);
        if (quota) avail = (uint64_t)used >= quota ? 0 : avail < quota - (uint64_t)used ? avail : quota - (uint64_t)used;
        json_object_set_new(row, "available", json_integer((json_int_t)avail));
    }
    /* what quota counts: blocks allocated to files, like du (not sparse files' sizes) */
    json_object_set_new(row, "used", json_integer(f ? atomic_load(&f->used) : 0));
    /* pool space mapped for it, filesystem metadata and journal included; lz4 saves
     * below this, as holes in the member disks */
    json_object_set_new(row, "allocated", json_integer((json_int_t)storage_dataset_allocated(a->storage, pool, name)));
    if (!f) json_object_set_new(row, "error", json_string(err == -EBUSY ? "held by another gateway" : strerror(-err)));
    nasd_fsroot_put(f);
    storage_dataset_idle(a->storage, pool, name);   /* a ceph dataset's lock stays only with its exports */
    json_object_set_new(row, "exports", json_integer(db_int(&a->db, 0, "SELECT count(*) FROM nfs_exports WHERE dataset_id=?",
                                                             "i", (int64_t)json_integer_value(json_object_get(row, "id")))));
    return row;
}

static json_t *get_by_id(struct appliance *a, int64_t id)
{
    json_t *row = db_row(&a->db, DATASET_SELECT "WHERE d.id=?", "i", id);
    return row ? decorate(a, row) : NULL;
}

static void list(struct api_call *c, struct api_reply *r)
{
    api_ok(r, 200, api_pool_obj_list(c, DATASET_SELECT, decorate));
}

static void get(struct api_call *c, struct api_reply *r)
{
    int64_t id = api_lookup_pool_obj(c, r, "datasets", c->key);
    if (id >= 0) api_ok(r, 200, get_by_id(c->app, id));
}

/* "off" or "lz4" (the engine compresses the dataset's volume); fixed at creation. */
static int get_compression(struct api_call *c, struct api_reply *r, const char **out)
{
    if (api_get_str(c, r, "compression", 0, out)) return -1;
    if (*out && strcmp(*out, "off") && strcmp(*out, "lz4")) {
        api_error(r, 400, "invalid_field", "compression must be \"off\" or \"lz4\"");
        return -1;
    }
    return 0;
}

/* quota: a size, or 0 / "none" for no quota */
static int get_quota(struct api_call *c, struct api_reply *r, int64_t *out)
{
    json_t *q = json_object_get(c->body, "quota");
    if (!q) return 0;
    if ((json_is_integer(q) && json_integer_value(q) == 0) || json_is_null(q) ||
        (json_is_string(q) && !strcmp(json_string_value(q), "none"))) {
        *out = 0;
        return 0;
    }
    uint64_t v;
    if (api_get_size(c, r, "quota", 0, &v)) return -1;
    *out = (int64_t)v;
    return 0;
}

/* Root directory owner and mode: "mode":"0775", "uid":1000, "gid":1000. Applied to the
 * directory itself (the filesystem is the record). -1 fills r. */
static int get_ownership(struct api_call *c, struct api_reply *r, int64_t *mode, int64_t *uid, int64_t *gid)
{
    const char *m = NULL;
    if (api_get_str(c, r, "mode", 0, &m) || api_get_int(c, r, "uid", 0, 4294967294LL, uid) ||
        api_get_int(c, r, "gid", 0, 4294967294LL, gid))
        return -1;
    if (m) {
        char *end;
        long v = strtol(m, &end, 8);
        if (!*m || *end || v < 0 || v > 07777) { api_error(r, 400, "invalid_field", "mode must be octal like \"0755\""); return -1; }
        *mode = v;
    }
    return 0;
}

static int apply_ownership(struct appliance *a, int64_t id, int64_t mode, int64_t uid, int64_t gid, struct api_reply *r)
{
    if (mode < 0 && uid < 0 && gid < 0) return 0;
    json_t *row = db_row(&a->db, DATASET_SELECT "WHERE d.id=?", "i", id);
    int rc = 0;
    struct nasd_fsroot *f = open_ds(a, row, &rc);
    json_decref(row);
    nasd_vfs_set_cred(NULL);     /* as root, like chmod/chown on the appliance console */
    if (f && mode >= 0) rc = f->vfs->chmod(f, f->root_fd, (mode_t)mode);
    if (f && !rc && (uid >= 0 || gid >= 0))
        rc = f->vfs->chown(f, f->root_fd, uid >= 0 ? (uid_t)uid : (uid_t)-1, gid >= 0 ? (gid_t)gid : (gid_t)-1);
    if (f && !rc) rc = f->vfs->fsync(f, f->root_fd, 0);
    nasd_fsroot_put(f);
    if (rc) {
        api_error(r, 500, "internal", "cannot set owner/mode of the dataset: %s", strerror(-rc));
        return -1;
    }
    return 0;
}

static void create(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "pool", "name", "quota", "compression", "comment", "mode", "uid", "gid", NULL };
    const char *pool = NULL, *name = NULL, *comp = "off", *comment = "";
    int64_t quota = 0, mode = -1, uid = -1, gid = -1;
    if (api_body_object(c, r, allowed) || api_get_name(c, r, "pool", 1, &pool) || api_get_name(c, r, "name", 1, &name) ||
        get_quota(c, r, &quota) || get_compression(c, r, &comp) || api_get_str(c, r, "comment", 0, &comment) ||
        get_ownership(c, r, &mode, &uid, &gid))
        return;
    struct appliance *a = c->app;
    int64_t pool_id = db_int(&a->db, -1, "SELECT id FROM pools WHERE name=?", "s", pool);
    if (pool_id < 0) { api_error(r, 404, "not_found", "pool \"%s\" not found", pool); return; }
    if (db_int(&a->db, -1, "SELECT id FROM datasets WHERE pool_id=? AND name=?", "is", pool_id, name) >= 0) {
        api_error(r, 409, "exists", "dataset %s/%s exists", pool, name);
        return;
    }
    char err[512];
    int rc = storage_dataset_create(a->storage, pool, name, !strcmp(comp, "lz4"), err, sizeof err);
    if (rc) { api_errno(r, rc, err); return; }
    int64_t id;
    if (db_exec(&a->db, &id, "INSERT INTO datasets(pool_id, name, quota, compression, comment, created) "
                "VALUES(?,?,?,?,?,?)", "isissi", pool_id, name, quota, comp, comment, (int64_t)time(NULL))) {
        api_error(r, 500, "db", "%s", db_errmsg(&a->db));
        return;
    }
    if (apply_ownership(a, id, mode, uid, gid, r)) return;
    log_info("dataset %s/%s created", pool, name);
    api_ok(r, 201, get_by_id(a, id));
}

static void patch(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "quota", "compression", "comment", "mode", "uid", "gid", NULL };
    int64_t id = api_lookup_pool_obj(c, r, "datasets", c->key);
    const char *comp = NULL, *comment = NULL;
    int64_t quota = -1, mode = -1, uid = -1, gid = -1;
    if (id < 0 || api_body_object(c, r, allowed) || get_quota(c, r, &quota) || get_compression(c, r, &comp) ||
        api_get_str(c, r, "comment", 0, &comment) || get_ownership(c, r, &mode, &uid, &gid))
        return;
    struct appliance *a = c->app;
    if (comp) {
        json_t *row = db_row(&a->db, "SELECT compression FROM datasets WHERE id=?", "i", id);
        int same = row && !strcmp(json_string_value(json_object_get(row, "compression")), comp);
        json_decref(row);
        if (!same) {
            api_error(r, 409, "immutable", "compression is chosen when the dataset is created");
            return;
        }
    }
    if (apply_ownership(a, id, mode, uid, gid, r)) return;
    if (quota >= 0) db_exec(&a->db, NULL, "UPDATE datasets SET quota=? WHERE id=?", "ii", quota, id);
    if (comp) db_exec(&a->db, NULL, "UPDATE datasets SET compression=? WHERE id=?", "si", comp, id);
    if (comment) db_exec(&a->db, NULL, "UPDATE datasets SET comment=? WHERE id=?", "si", comment, id);
    if (quota >= 0) appliance_dataset_changed(a, id);
    api_ok(r, 200, get_by_id(a, id));
}

static void del(struct api_call *c, struct api_reply *r)
{
    int64_t id = api_lookup_pool_obj(c, r, "datasets", c->key);
    if (id < 0) return;
    struct appliance *a = c->app;
    if (db_int(&a->db, 0, "SELECT count(*) FROM nfs_exports WHERE dataset_id=?", "i", id)) {
        api_error(r, 409, "in_use", "dataset is exported over NFS; delete the export first");
        return;
    }
    json_t *row = db_row(&a->db, DATASET_SELECT "WHERE d.id=?", "i", id);
    char pool[128], name[128], err[512];
    snprintf(pool, sizeof pool, "%s", json_string_value(json_object_get(row, "pool")));
    snprintf(name, sizeof name, "%s", json_string_value(json_object_get(row, "name")));
    json_decref(row);
    if (api_snapshots_before_delete(c, r, pool, name, 1)) return;
    /* storage first: config is only changed once the storage is really gone */
    int rc = storage_dataset_destroy(a->storage, pool, name, err, sizeof err);
    if (rc && rc != -ENOENT) { api_errno(r, rc == -EBUSY ? rc : -EIO, err); return; }
    if (db_exec(&a->db, NULL, "DELETE FROM datasets WHERE id=?", "i", id)) {
        log_err("dataset %s/%s destroyed but still in config: %s", pool, name, db_errmsg(&a->db));
        api_error(r, 500, "db", "dataset destroyed, but removing it from the config failed: %s", db_errmsg(&a->db));
        return;
    }
    api_snapshots_deleted(a, pool, name, 1);
    log_info("dataset %s/%s destroyed", pool, name);
    api_ok(r, 204, NULL);
}

const struct api_resource api_datasets = {
    .prefix = "datasets", .key_has_slash = 1, .list = list, .get = get, .create = create, .patch = patch, .del = del,
};
