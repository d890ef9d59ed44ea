/* /api/v1/exports/nfs — NFSv3 exports of datasets. */
#include "api/exports_common.h"
#include "api/monitoring.h"
#include "api/validate.h"
#include "util/log.h"
#include "nfs/nfs.h"
#include <stdio.h>
#include <string.h>
#include <time.h>

static json_t *export_json(struct appliance *a, int64_t id)
{
    json_t *row = db_row(&a->db, "SELECT e.id, e.name, e.dataset_id, p.name || '/' || d.name AS dataset, e.snapshot, e.path, "
                         "e.clients_json, e.read_only, e.root_squash, e.all_squash, e.anonuid, e.anongid, e.enabled, "
                         "e.created FROM nfs_exports e JOIN datasets d ON d.id=e.dataset_id JOIN pools p ON p.id=d.pool_id "
                         "WHERE e.id=?", "i", id);
    if (!row) return NULL;
    static const char *bools[] = { "read_only", "root_squash", "all_squash", "enabled" };
    for (int i = 0; i < 4; i++)
        json_object_set_new(row, bools[i], json_boolean(json_integer_value(json_object_get(row, bools[i]))));
    json_object_set_new(row, "active", json_boolean(appliance_export_active(a, EXPORT_NFS, id)));
    return row;
}

static void list(struct api_call *c, struct api_reply *r)
{
    api_ok(r, 200, export_list(c->app, "SELECT id FROM nfs_exports ORDER BY path", export_json));
}

static int64_t lookup(struct api_call *c, struct api_reply *r)
{
    return api_lookup(c, r, "NFS export", "SELECT id FROM nfs_exports WHERE id=?", "SELECT id FROM nfs_exports WHERE name=?");
}

static void get(struct api_call *c, struct api_reply *r)
{
    int64_t id = lookup(c, r);
    if (id >= 0) api_ok(r, 200, export_json(c->app, id));
}

static int check_client(const char *s, char *err, size_t len)
{
    struct nfs_client_net n;
    if (nfs_parse_client_net(s, &n) == 0) return 0;
    snprintf(err, len, "\"%s\" is not an address or CIDR network", s);
    return -1;
}

struct nfs_opts { int ro, root_squash, all_squash; int64_t anonuid, anongid; int enabled; json_t *clients; };

static int get_opts(struct api_call *c, struct api_reply *r, struct nfs_opts *o)
{
    if (api_get_bool(c, r, "read_only", &o->ro) || api_get_bool(c, r, "root_squash", &o->root_squash) ||
        api_get_bool(c, r, "all_squash", &o->all_squash) || api_get_bool(c, r, "enabled", &o->enabled) ||
        api_get_int(c, r, "anonuid", 0, 4294967294LL, &o->anonuid) ||
        api_get_int(c, r, "anongid", 0, 4294967294LL, &o->anongid))
        return -1;
    json_t *cl = json_object_get(c->body, "clients");
    if (cl) {
        if (export_string_list(cl, "clients", NFS_MAX_CLIENT_NETS, check_client, r)) return -1;
        o->clients = cl;
    }
    return 0;
}

static void create(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "name", "dataset", "snapshot", "path", "clients", "read_only", "root_squash",
                                           "all_squash", "anonuid", "anongid", "enabled", NULL };
    const char *name = NULL, *dataset = NULL, *path = NULL, *snap = NULL;
    struct nfs_opts o = { .root_squash = 1, .anonuid = 65534, .anongid = 65534, .enabled = 1 };
    char err[256], pathbuf[256], namebuf[160];
    if (api_body_object(c, r, allowed) || api_get_name(c, r, "name", 0, &name) ||
        api_get_str(c, r, "dataset", 1, &dataset) || api_get_str(c, r, "path", 0, &path) || get_opts(c, r, &o) ||
        api_get_name(c, r, "snapshot", 0, &snap))
        return;
    struct appliance *a = c->app;
    int64_t ds = api_lookup_pool_obj(c, r, "datasets", dataset);
    if (ds < 0) return;
    json_t *drow = db_row(&a->db, "SELECT p.name AS pool, d.name FROM datasets d JOIN pools p ON p.id=d.pool_id WHERE d.id=?",
                          "i", ds);
    const char *pool = json_string_value(json_object_get(drow, "pool")), *dname = json_string_value(json_object_get(drow, "name"));
    if (snap) {   /* a dataset snapshot, always read-only */
        int e = 0;
        json_t *si = storage_snap_get(a->storage, pool, dname, 1, snap, &e);
        if (!si) {
            api_error(r, 404, "not_found", "snapshot %s of dataset %s not found", snap, dataset);
            json_decref(drow);
            return;
        }
        json_decref(si);
        o.ro = 1;
    }
    if (!path) { snprintf(pathbuf, sizeof pathbuf, "/%s/%s%s%s", pool, dname, snap ? "@" : "", snap ? snap : ""); path = pathbuf; }
    if (!name) { snprintf(namebuf, sizeof namebuf, "%s_%s%s%s", pool, dname, snap ? "_" : "", snap ? snap : ""); name = namebuf; }
    json_decref(drow);
    if (valid_abs_path(path, err, sizeof err) || !strcmp(path, "/")) {
        api_error(r, 400, "invalid_field", "path: %s", strcmp(path, "/") ? err : "\"/\" cannot be exported");
        return;
    }
    if (db_int(&a->db, -1, "SELECT id FROM nfs_exports WHERE name=? OR path=?", "ss", name, path) >= 0) {
        api_error(r, 409, "exists", "an NFS export named %s or at %s exists", name, path);
        return;
    }
    int64_t id;
    db_begin(&a->db);
    json_t *empty = json_array();
    int rc = db_exec(&a->db, &id, "INSERT INTO nfs_exports(name, dataset_id, snapshot, path, clients_json, read_only, "
                     "root_squash, all_squash, anonuid, anongid, enabled, created) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                     "sissjiiiiiii", name, ds, snap, path, o.clients ? o.clients : empty, (int64_t)o.ro, (int64_t)o.root_squash,
                     (int64_t)o.all_squash, o.anonuid, o.anongid, (int64_t)o.enabled, (int64_t)time(NULL));
    json_decref(empty);
    if (rc) {
        db_rollback(&a->db);
        api_error(r, 500, "db", "%s", db_errmsg(&a->db));
        return;
    }
    if (export_commit_apply(a, EXPORT_NFS, id, 0, r)) return;
    log_info("NFS export %s (%s) created", name, path);
    api_ok(r, 201, export_json(a, id));
}

static void patch(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "clients", "read_only", "root_squash", "all_squash", "anonuid", "anongid",
                                           "enabled", NULL };
    int64_t id = lookup(c, r);
    if (id < 0 || api_body_object(c, r, allowed)) return;
    struct appliance *a = c->app;
    json_t *cur = db_row(&a->db, "SELECT * FROM nfs_exports WHERE id=?", "i", id);
    struct nfs_opts o = {
        .ro = json_integer_value(json_object_get(cur, "read_only")),
        .root_squash = json_integer_value(json_object_get(cur, "root_squash")),
        .all_squash = json_integer_value(json_object_get(cur, "all_squash")),
        .anonuid = json_integer_value(json_object_get(cur, "anonuid")),
        .anongid = json_integer_value(json_object_get(cur, "anongid")),
        .enabled = json_integer_value(json_object_get(cur, "enabled")),
        .clients = json_object_get(cur, "clients"),
    };
    if (get_opts(c, r, &o)) { json_decref(cur); return; }
    db_begin(&a->db);
    db_exec(&a->db, NULL, "UPDATE nfs_exports SET clients_json=?, read_only=?, root_squash=?, all_squash=?, anonuid=?, "
            "anongid=?, enabled=? WHERE id=?", "jiiiiiii", o.clients, (int64_t)o.ro, (int64_t)o.root_squash,
            (int64_t)o.all_squash, o.anonuid, o.anongid, (int64_t)o.enabled, id);
    json_decref(cur);
    if (export_commit_apply(a, EXPORT_NFS, id, 1, r)) return;
    api_ok(r, 200, export_json(a, id));
}

static void del(struct api_call *c, struct api_reply *r)
{
    int64_t id = lookup(c, r);
    if (id >= 0) export_delete(c->app, EXPORT_NFS, id, "nfs_exports", r);
}

const struct api_resource api_nfs_exports = {
    .prefix = "exports/nfs", .list = list, .get = get, .create = create, .patch = patch, .del = del,
    .action = api_nfs_export_action, /* POST .../selftest (api/selftest.c) */
};
