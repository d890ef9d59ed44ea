/* /api/v1/pools */
#include "api/api.h"
#include "api/api_ceph.h"
#include "api/validate.h"
#include "storage/manager/member_probe.h"
#include "util/log.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static json_t *pool_json(struct appliance *a, json_t *row)
{
    int64_t id = json_integer_value(json_object_get(row, "id"));
    json_t *st = storage_pool_status(a->storage, json_string_value(json_object_get(row, "name")));
    if (st) {
        json_object_update(row, st);
        json_decref(st);
    } else {
        json_object_set_new(row, "state", json_string("UNAVAILABLE"));
    }
    api_ceph_pool_json(&a->db, id, row);
    json_object_set_new(row, "datasets", json_integer(db_int(&a->db, 0, "SELECT count(*) FROM datasets WHERE pool_id=?", "i", id)));
    json_object_set_new(row, "volumes", json_integer(db_int(&a->db, 0, "SELECT count(*) FROM volumes WHERE pool_id=?", "i", id)));
    return row;
}

static void list(struct api_call *c, struct api_reply *r)
{
    json_t *rows = db_rows(&c->app->db, "SELECT id, name, layout, comment, created FROM pools ORDER BY name", "");
    size_t i;
    json_t *v;
    json_array_foreach(rows, i, v) pool_json(c->app, v);
    api_ok(r, 200, rows);
}

static int64_t lookup(struct api_call *c, struct api_reply *r)
{
    return api_lookup(c, r, "pool", "SELECT id FROM pools WHERE id=?", "SELECT id FROM pools WHERE name=?");
}

static json_t *get_by_id(struct appliance *a, int64_t id)
{
    json_t *row = db_row(&a->db, "SELECT id, name, layout, comment, created FROM pools WHERE id=?", "i", id);
    return row ? pool_json(a, row) : NULL;
}

static void get(struct api_call *c, struct api_reply *r)
{
    int64_t id = lookup(c, r);
    if (id >= 0) api_ok(r, 200, get_by_id(c->app, id));
}

/* members: ["/path", ...] or [{"path":..., "size":"1G", "create":true}, ...] */
static int parse_members(json_t *arr, struct storage_member *m, int max, struct api_reply *r)
{
    if (!json_is_array(arr) || !json_array_size(arr)) {
        api_error(r, 400, "invalid_field", "members must be a non-empty array of paths or {path,size,create}");
        return -1;
    }
    if ((int)json_array_size(arr) > max) { api_error(r, 400, "invalid_field", "at most %d members", max); return -1; }
    size_t i;
    json_t *v;
    char err[256];
    json_array_foreach(arr, i, v) {
        memset(&m[i], 0, sizeof m[i]);
        const char *path = json_string_value(json_is_object(v) ? json_object_get(v, "path") : v);
        if (!path) { api_error(r, 400, "invalid_field", "members[%zu]: path is required", i); return -1; }
        if (valid_abs_path(path, err, sizeof err)) { api_error(r, 400, "invalid_field", "members[%zu]: %s", i, err); return -1; }
        snprintf(m[i].path, sizeof m[i].path, "%s", path);
        if (json_is_object(v)) {
            const char *k;
            json_t *f;
            json_object_foreach(v, k, f) {
                if (strcmp(k, "path") && strcmp(k, "size") && strcmp(k, "create")) {
                    api_error(r, 400, "unknown_field", "members[%zu]: unknown field \"%s\"", i, k);
                    return -1;
                }
            }
            json_t *cr = json_object_get(v, "create");
            if (cr && !json_is_boolean(cr)) { api_error(r, 400, "invalid_field", "members[%zu].create must be boolean", i); return -1; }
            m[i].create = json_is_true(cr);
            json_t *sz = json_object_get(v, "size");
            if (sz && parse_size(sz, &m[i].size, err, sizeof err)) {
                api_error(r, 400, "invalid_field", "members[%zu].size: %s", i, err);
                return -1;
            }
            if (m[i].create && !sz) { api_error(r, 400, "missing_field", "members[%zu]: create needs a size", i); return -1; }
        }
    }
    return (int)json_array_size(arr);
}

/* Record a pool the storage manager now holds: its row, its members in label order,
 * and the volumes and datasets its engine already has (an imported pool brings them). One
 * transaction; 0 or the SQLite error. */
static int record_pool(struct appliance *a, const char *name, const char *layout, const char *comment,
                       const struct ceph_conf *cc, int64_t *id)
{
    json_t *st = storage_pool_status(a->storage, name), *vols = storage_pool_volumes(a->storage, name), *v;
    json_t *dss = storage_pool_datasets(a->storage, name);
    size_t i;
    db_begin(&a->db);
    int rc = db_exec(&a->db, id, "INSERT INTO pools(name, layout, comment, created) VALUES(?,?,?,?)", "sssi", name,
                     layout, comment, (int64_t)time(NULL));
    if (!rc && cc) rc = api_ceph_conf_save(&a->db, *id, cc);
    json_array_foreach(json_object_get(st, "members"), i, v) {
        if (!rc) rc = db_exec(&a->db, NULL, "INSERT INTO pool_members(pool_id, idx, path, size) VALUES(?,?,?,?)", "iisi",
                              *id, (int64_t)i, json_string_value(json_object_get(v, "path")),
                              (int64_t)json_integer_value(json_object_get(v, "size")));
    }
    json_array_foreach(vols, i, v) {
        if (!rc) rc = db_exec(&a->db, NULL, "INSERT INTO volumes(pool_id, name, size, compression, created) "
                              "VALUES(?,?,?,?,?)", "isisi", *id, json_string_value(json_object_get(v, "name")),
                              (int64_t)json_integer_value(json_object_get(v, "size")),
                              json_is_true(json_object_get(v, "lz4")) ? "lz4" : "off", (int64_t)time(NULL));
    }
    json_array_foreach(dss, i, v) {
        if (!rc) rc = db_exec(&a->db, NULL, "INSERT INTO datasets(pool_id, name, quota, compression, comment, created) "
                              "VALUES(?,?,0,?,'',?)", "issi", *id, json_string_value(json_object_get(v, "name")),
                              json_is_true(json_object_get(v, "lz4")) ? "lz4" : "off", (int64_t)time(NULL));
    }
    json_decref(st);
    json_decref(vols);
    json_decref(dss);
    if (rc) db_rollback(&a->db);
    else db_commit(&a->db);
    return rc;
}

/* POST /pools {"name","backend":"ceph","ceph":{...}} or POST /pools/{name}/import with
 * the same: attach a pool on a Ceph cluster; import also records the volumes and
 * datasets other gateways made there. */
static void ceph_pool_attach(struct appliance *a, const char *name, json_t *body, const char *comment, int import,
                             struct api_reply *r)
{
    struct ceph_conf cc;
    char err[512];
    if (api_ceph_conf_parse(json_object_get(body, "ceph"), &cc, r)) return;
    if (json_object_get(body, "members") || (json_object_get(body, "layout") &&
        strcmp(json_string_value(json_object_get(body, "layout")) ?: "", "ceph"))) {
        api_error(r, 400, "invalid_field", "a ceph pool has no layout or members (the cluster places the data)");
        return;
    }
    if (db_int(&a->db, -1, "SELECT id FROM pools WHERE name=?", "s", name) >= 0) {
        api_error(r, 409, "exists", "pool \"%s\" exists", name);
        return;
    }
    int rc = storage_ceph_pool_add(a->storage, name, &cc, 1, err, sizeof err);
    if (rc) { api_errno(r, rc == -EEXIST || rc == -EINVAL ? rc : -ENOTCONN, err); return; }
    json_t *vols = import ? NULL : storage_pool_volumes(a->storage, name);
    if (vols && json_array_size(vols)) {
        api_error(r, 409, "in_use", "RADOS pool %s already holds nasd volumes; use POST /pools/%s/import", cc.pool, name);
        json_decref(vols);
        storage_pool_destroy(a->storage, name, err, sizeof err);
        return;
    }
    json_decref(vols);
    int64_t id;
    if (record_pool(a, name, "ceph", comment, &cc, &id)) {
        api_error(r, 500, "db", "cannot record pool: %s", db_errmsg(&a->db));
        storage_pool_destroy(a->storage, name, err, sizeof err);
        return;
    }
    log_info("pool %s %s (ceph pool %s)", name, import ? "imported" : "created", cc.pool);
    api_ok(r, 201, get_by_id(a, id));
}

/* Refuses (409, with what was found) to overwrite existing content on the given paths
 * unless force; with force, wipe[i] says which to erase: the storage layer does it once
 * nothing else refuses the operation (a refused one leaves the disks as they were).
 * Members of a pool that is open here or by a live nasd, and block devices the system
 * holds (mounted, md, dm), are refused even with force. 0: go on. */
static int check_existing(struct appliance *a, const char *const *paths, int n, int force, int *wipe,
                          struct api_reply *r)
{
    json_t *found = json_array();
    int worst = MEMBER_FREE;
    for (int i = 0; i < n; i++) {
        int v = member_probe(a->storage, paths[i], found);
        wipe[i] = v == MEMBER_HAS_DATA;
        if (v > worst) worst = v;
    }
    if (worst == MEMBER_FREE || (worst == MEMBER_HAS_DATA && force)) {
        json_decref(found);
        return 0;
    }
    size_t i;
    json_t *f;
    char msg[1024] = "";
    json_array_foreach(found, i, f)
        snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "%s%s: %s", i ? "; " : "",
                 json_string_value(json_object_get(f, "path")), json_string_value(json_object_get(f, "what")));
    if (worst == MEMBER_LIVE) api_error(r, 409, "in_use", "%s", msg);
    else if (worst == MEMBER_UNUSABLE) api_error(r, 400, "invalid", "%s", msg);
    else api_error(r, 409, "existing_data", "existing content would be destroyed: %s; repeat with \"force\": true "
                   "to overwrite it", msg);
    json_object_set_new(r->json, "found", found);
    json_object_set_new(r->json, "force_required", json_boolean(worst == MEMBER_HAS_DATA));
    return -1;
}

/* POST /pools/{name}/sync (ceph pools): records the volumes and datasets other gateways
 * created in the cluster since this one imported the pool, and volume sizes changed there
 * (never removes anything). Replies {"added": [{kind, name}]}. */
static void ceph_pool_sync(struct appliance *a, int64_t id, const char *name, struct api_call *c, struct api_reply *r)
{
    if (strcmp(c->method, "POST")) { api_error(r, 405, "method_not_allowed", "use POST"); return; }
    struct ceph_conf cc;
    if (appliance_ceph_conf(&a->db, id, &cc)) { api_error(r, 400, "invalid", "pool %s is not a ceph pool", name); return; }
    json_t *added = json_array();
    for (int ds = 0; ds < 2; ds++) {
        json_t *list = ds ? storage_pool_datasets(a->storage, name) : storage_pool_volumes(a->storage, name), *v;
        if (!list) { json_decref(added); api_error(r, 503, "service_unavailable", "pool %s: the cluster does not answer", name); return; }
        size_t i;
        json_array_foreach(list, i, v) {
            const char *n = json_string_value(json_object_get(v, "name"));
            int64_t have = db_int(&a->db, -1, ds ? "SELECT id FROM datasets WHERE pool_id=? AND name=?"
                                                 : "SELECT id FROM volumes WHERE pool_id=? AND name=?", "is", id, n);
            if (have >= 0) {   /* grown through another gateway */
                if (!ds) db_exec(&a->db, NULL, "UPDATE volumes SET size=? WHERE id=?", "ii",
                                 (int64_t)json_integer_value(json_object_get(v, "size")), have);
                continue;
            }
            int rc = ds ? db_exec(&a->db, NULL, "INSERT INTO datasets(pool_id, name, quota, compression, comment, created) "
                                  "VALUES(?,?,0,'off','',?)", "isi", id, n, (int64_t)time(NULL))
                        : db_exec(&a->db, NULL, "INSERT INTO volumes(pool_id, name, size, compression, created) "
                                  "VALUES(?,?,?,'off',?)", "isii", id, n,
                                  (int64_t)json_integer_value(json_object_get(v, "size")), (int64_t)time(NULL));
            if (!rc) json_array_append_new(added, json_pack("{s:s, s:s}", "kind", ds ? "dataset" : "volume", "name", n));
        }
        json_decref(list);
    }
    log_info("pool %s: %zu objects from the cluster record added", name, json_array_size(added));
    api_ok(r, 200, json_pack("{s:o}", "added", added));
}

void api_pool_create(struct appliance *a, json_t *body, struct api_reply *r)
{
    static const char *const allowed[] = { "name", "layout", "members", "comment", "force", "backend", "ceph", NULL };
    struct api_call c = { .app = a, .body = body };
    const char *name = NULL, *layout = "stripe", *comment = "", *backend = "local";
    int force = 0;
    if (api_body_object(&c, r, allowed) || api_get_name(&c, r, "name", 1, &name) ||
        api_get_str(&c, r, "layout", 0, &layout) || api_get_str(&c, r, "comment", 0, &comment) ||
        api_get_bool(&c, r, "force", &force) || api_get_str(&c, r, "backend", 0, &backend))
        return;
    if (!strcmp(backend, "ceph")) { ceph_pool_attach(a, name, body, comment, 0, r); return; }
    if (strcmp(backend, "local")) { api_error(r, 400, "invalid_field", "backend must be \"local\" or \"ceph\""); return; }
    if (json_object_get(body, "ceph")) { api_error(r, 400, "invalid_field", "\"ceph\" needs \"backend\":\"ceph\""); return; }
    if (!(layout = storage_layout_canonical(layout))) {
        api_error(r, 400, "invalid_field", STORAGE_LAYOUT_HELP);
        return;
    }
    struct storage_member m[16];
    int n = parse_members(json_object_get(body, "members"), m, 16, r);
    if (n < 0) return;
    if (db_int(&a->db, -1, "SELECT id FROM pools WHERE name=?", "s", name) >= 0) {
        api_error(r, 409, "exists", "pool \"%s\" exists", name);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (db_int(&a->db, -1, "SELECT id FROM pool_members WHERE path=?", "s", m[i].path) >= 0) {
            api_error(r, 409, "in_use", "%s is already a member of another pool", m[i].path);
            return;
        }
    }
    const char *existing[16] = { 0 };
    int nexisting = 0, wipe[16] = { 0 }, at[16] = { 0 };
    for (int i = 0; i < n; i++)
        if (!m[i].create) at[nexisting] = i, existing[nexisting++] = m[i].path;
    if (check_existing(a, existing, nexisting, force, wipe, r)) return;
    for (int k = 0; k < nexisting; k++) m[at[k]].wipe = wipe[k];
    char err[512];
    int rc = storage_pool_create(a->storage, name, layout, m, n, err, sizeof err);
    if (rc) { api_errno(r, rc, err); return; }
    for (int i = 0; i < n; i++)
        if (m[i].wipe) log_warn("%s: existing content overwritten (force)", m[i].path);
    int64_t id;
    if (record_pool(a, name, layout, comment, NULL, &id)) {
        api_error(r, 500, "db", "cannot record pool: %s", db_errmsg(&a->db));
        storage_pool_destroy(a->storage, name, err, sizeof err);
        return;
    }
    log_info("pool %s created (%s, %d members)", name, layout, n);
    api_ok(r, 201, get_by_id(a, id));
}

static void create(struct api_call *c, struct api_reply *r) { api_pool_create(c->app, c->body, r); }

static void patch(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "comment", NULL };
    const char *comment = NULL;
    int64_t id = lookup(c, r);
    if (id < 0 || api_body_object(c, r, allowed) || api_get_str(c, r, "comment", 0, &comment)) return;
    if (comment && strlen(comment) > 256) { api_error(r, 400, "invalid_field", "comment longer than 256"); return; }
    if (comment) db_exec(&c->app->db, NULL, "UPDATE pools SET comment=? WHERE id=?", "si", comment, id);
    api_ok(r, 200, get_by_id(c->app, id));
}

static void del(struct api_call *c, struct api_reply *r)
{
    int64_t id = lookup(c, r);
    if (id < 0) return;
    int64_t used = db_int(&c->app->db, 0, "SELECT (SELECT count(*) FROM datasets WHERE pool_id=?1) + "
                          "(SELECT count(*) FROM volumes WHERE pool_id=?1)", "i", id);
    if (used) { api_error(r, 409, "in_use", "pool has %lld datasets/volumes; delete them first", (long long)used); return; }
    json_t *row = db_row(&c->app->db, "SELECT name FROM pools WHERE id=?", "i", id);
    char name[128], err[512];
    snprintf(name, sizeof name, "%s", json_string_value(json_object_get(row, "name")));
    json_decref(row);
    /* storage first: config is only changed once the pool is really closed and wiped */
    int rc = storage_pool_destroy(c->app->storage, name, err, sizeof err);
    if (rc && rc != -ENOENT) { api_errno(r, rc == -EBUSY ? rc : -EIO, err); return; }
    if (db_exec(&c->app->db, NULL, "DELETE FROM pools WHERE id=?", "i", id)) {
        log_err("pool %s destroyed but still in config: %s", name, db_errmsg(&c->app->db));
        api_error(r, 500, "db", "pool destroyed, but removing it from the config failed: %s", db_errmsg(&c->app->db));
        return;
    }
    log_info("pool %s destroyed", name);
    api_ok(r, 204, NULL);
}

/* POST /pools/{name}/import {"members":["/path",...]}: adopt a pool from its disks. */
static void import_pool(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "members", "comment", "force", "backend", "ceph", NULL };
    const char *comment = "", *backend = "local";
    int force = 0;
    char err[512];
    if (valid_name(c->key, err, sizeof err)) { api_error(r, 400, "invalid_field", "name: %s", err); return; }
    if (api_body_object(c, r, allowed) || api_get_str(c, r, "comment", 0, &comment) ||
        api_get_bool(c, r, "force", &force) || api_get_str(c, r, "backend", 0, &backend))
        return;
    struct appliance *a = c->app;
    if (!strcmp(backend, "ceph")) { ceph_pool_attach(a, c->key, c->body, comment, 1, r); return; }
    struct storage_member m[16];
    int n = parse_members(json_object_get(c->body, "members"), m, 16, r);
    if (n < 0) return;
    if (db_int(&a->db, -1, "SELECT id FROM pools WHERE name=?", "s", c->key) >= 0) {
        api_error(r, 409, "exists", "pool \"%s\" exists", c->key);
        return;
    }
    const char *paths[16], *layout = NULL;
    for (int i = 0; i < n; i++) {
        paths[i] = m[i].path;
        if (db_int(&a->db, -1, "SELECT id FROM pool_members WHERE path=?", "s", m[i].path) >= 0) {
            api_error(r, 409, "in_use", "%s is already a member of a pool", m[i].path);
            return;
        }
    }
    int rc = storage_pool_import_force(a->storage, c->key, paths, n, force, &layout, err, sizeof err);
    if (rc) { api_errno(r, rc == -ENOENT || rc == -EBUSY ? rc : -EINVAL, err); return; }
    int64_t id;
    if (record_pool(a, c->key, layout, comment, NULL, &id)) {
        api_error(r, 500, "db", "cannot record pool: %s", db_errmsg(&a->db));
        return;
    }
    log_info("pool %s imported (%s, %d members)", c->key, layout, n);
    api_ok(r, 201, get_by_id(a, id));
}

/* POST /pools/{name}/scrub ; POST /pools/{name}/clear (error counters, faulted members
 * back through a resilver) ; POST /pools/{name}/offline|online {"member":i} ;
 * POST /pools/{name}/replace {"member":i,"path":"/new","size":"1G","create":true} */
static void action(struct api_call *c, struct api_reply *r)
{
    if (!strcmp(c->action, "import") && !strcmp(c->method, "POST")) { import_pool(c, r); return; }
    int64_t id = lookup(c, r);
    if (id < 0) return;
    struct appliance *a = c->app;
    json_t *row = db_row(&a->db, "SELECT name FROM pools WHERE id=?", "i", id);
    char name[128], err[512];
    snprintf(name, sizeof name, "%s", json_string_value(json_object_get(row, "name")));
    json_decref(row);
    int rc;
    if (!strcmp(c->action, "sync")) { ceph_pool_sync(a, id, name, c, r); return; }
    if (!strcmp(c->action, "scrub")) {
        if (!strcmp(c->method, "GET")) {
            json_t *st = storage_pool_status(a->storage, name);
            api_ok(r, 200, json_pack("{s:O, s:O}", "scrub", json_object_get(st, "scrub"), "resilver",
                                     json_object_get(st, "resilver")));
            json_decref(st);
            return;
        }
        rc = storage_pool_scrub(a->storage, name, err, sizeof err);
        if (rc) { api_errno(r, rc, err); return; }
        log_info("pool %s: scrub started", name);
        api_ok(r, 202, get_by_id(a, id));
        return;
    }
    if (!strcmp(c->action, "clear")) {
        if (strcmp(c->method, "POST")) { api_error(r, 405, "method_not_allowed", "use POST"); return; }
        rc = storage_pool_clear(a->storage, name, err, sizeof err);
        if (rc) { api_errno(r, rc, err); return; }
        log_info("pool %s: errors cleared", name);
        api_ok(r, 200, get_by_id(a, id));
        return;
    }
    if (strcmp(c->action, "offline") && strcmp(c->action, "online") && strcmp(c->action, "replace")) {
        api_error(r, 404, "not_found", "no pool action \"%s\" (scrub, clear, offline, online, replace, import, sync)", c->action);
        return;
    }
    if (strcmp(c->method, "POST")) { api_error(r, 405, "method_not_allowed", "use POST"); return; }
    static const char *const allowed[] = { "member", "path", "size", "create", "force", NULL };
    int64_t idx = -1;
    const char *path = NULL;
    uint64_t size = 0;
    int create = 0, force = 0, wipe = 0;
    if (api_body_object(c, r, allowed) || api_get_int(c, r, "member", 0, 15, &idx) ||
        api_get_str(c, r, "path", 0, &path) || api_get_size(c, r, "size", 0, &size) ||
        api_get_bool(c, r, "create", &create) || api_get_bool(c, r, "force", &force))
        return;
    if (idx < 0) { api_error(r, 400, "missing_field", "field \"member\" (member index) is required"); return; }
    if (!strcmp(c->action, "replace")) {
        if (!path || valid_abs_path(path, err, sizeof err)) {
            api_error(r, 400, "invalid_field", "path: %s", path ? err : "required for replace");
            return;
        }
        if (create && size < (64u << 20)) { api_error(r, 400, "invalid_field", "create needs a size of at least 64M"); return; }
        if (db_int(&a->db, -1, "SELECT id FROM pool_members WHERE path=?", "s", path) >= 0) {
            api_error(r, 409, "in_use", "%s is already a pool member", path);
            return;
        }
        struct stat sb;
        if (!create && stat(path, &sb) == 0 && check_existing(a, &path, 1, force, &wipe, r)) return;
    }
    rc = storage_pool_member(a->storage, name, c->action, (int)idx, path, create ? size : 0, wipe, err, sizeof err);
    if (rc) { api_errno(r, rc == -EBUSY ? -EBUSY : rc, err); return; }
    if (wipe) log_warn("%s: existing content overwritten (force)", path);
    if (!strcmp(c->action, "replace"))
        db_exec(&a->db, NULL, "UPDATE pool_members SET path=? WHERE pool_id=? AND idx=?", "sii", path, id, idx);
    log_info("pool %s: member %lld %s", name, (long long)idx, c->action);
    api_ok(r, 200, get_by_id(a, id));
}

const struct api_resource api_pools = {
    .prefix = "pools", .list = list, .get = get, .create = create, .patch = patch, .del = del, .action = action,
};
