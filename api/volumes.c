/* /api/v1/volumes — block devices, exported over iSCSI. */
#include "api/api.h"
#include "util/log.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define VOLUME_SELECT "SELECT v.id, p.name AS pool, v.name, p.name || '/' || v.name AS full_name, v.size, " \
                      "v.block_size, v.compression, v.comment, v.created FROM volumes v JOIN pools p ON p.id=v.pool_id "

static json_t *decorate(struct appliance *a, json_t *row)
{
    json_object_set_new(row, "used", json_integer(storage_volume_used(a->storage,
        json_string_value(json_object_get(row, "pool")), json_string_value(json_object_get(row, "name")))));
    json_object_set_new(row, "exports", json_integer(db_int(&a->db, 0, "SELECT count(*) FROM iscsi_luns WHERE volume_id=?",
                                                             "i", (int64_t)json_integer_value(json_object_get(row, "id")))));
    return row;
}

static json_t *get_by_id(struct appliance *a, int64_t id)
{
    json_t *row = db_row(&a->db, VOLUME_SELECT "WHERE v.id=?", "i", id);
    return row ? decorate(a, row) : NULL;
}

static void list(struct api_call *c, struct api_reply *r)
{
    api_ok(r, 200, api_pool_obj_list(c, VOLUME_SELECT, decorate));
}

static void get(struct api_call *c, struct api_reply *r)
{
    int64_t id = api_lookup_pool_obj(c, r, "volumes", c->key);
    if (id >= 0) api_ok(r, 200, get_by_id(c->app, id));
}

static void create(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "pool", "name", "size", "block_size", "compression", "comment", NULL };
    const char *pool = NULL, *name = NULL, *comp = "off", *comment = "";
    uint64_t size = 0;
    int64_t bs = 512;
    if (api_body_object(c, r, allowed) || api_get_name(c, r, "pool", 1, &pool) || api_get_name(c, r, "name", 1, &name) ||
        api_get_size(c, r, "size", 1, &size) || api_get_int(c, r, "block_size", 512, 4096, &bs) ||
        api_get_str(c, r, "compression", 0, &comp) || api_get_str(c, r, "comment", 0, &comment))
        return;
    if (bs != 512 && bs != 4096) { api_error(r, 400, "invalid_field", "block_size must be 512 or 4096"); return; }
    if (strcmp(comp, "off") && strcmp(comp, "lz4")) { api_error(r, 400, "invalid_field", "compression must be \"off\" or \"lz4\""); return; }
    if (size % 4096) { api_error(r, 400, "invalid_field", "size must be a multiple of 4096 bytes"); return; }
    if (size < (1u << 20)) { api_error(r, 400, "invalid_field", "size must be at least 1M"); return; }
    struct appliance *a = c->app;
    int64_t pool_id = db_int(&a->db, -1, "SELECT id FROM pools WHERE name=?", "s", pool);
    if (pool_id < 0) { api_error(r, 404, "not_found", "pool \"%s\" not found", pool); return; }
    if (db_int(&a->db, -1, "SELECT id FROM volumes WHERE pool_id=? AND name=?", "is", pool_id, name) >= 0) {
        api_error(r, 409, "exists", "volume %s/%s exists", pool, name);
        return;
    }
    char err[512];
    int rc = storage_volume_create(a->storage, pool, name, size, !strcmp(comp, "lz4"), err, sizeof err);
    if (rc) { api_errno(r, rc, err); return; }
    int64_t id;
    if (db_exec(&a->db, &id, "INSERT INTO volumes(pool_id, name, size, block_size, compression, comment, created) "
                "VALUES(?,?,?,?,?,?,?)", "isiissi", pool_id, name, (int64_t)size, bs, comp, comment, (int64_t)time(NULL))) {
        storage_volume_destroy(a->storage, pool, name, err, sizeof err);
        api_error(r, 500, "db", "%s", db_errmsg(&a->db));
        return;
    }
    log_info("volume %s/%s created (%llu bytes)", pool, name, (unsigned long long)size);
    api_ok(r, 201, get_by_id(a, id));
}

static void reapply_exports(struct appliance *a, int64_t volume_id)
{
    json_t *rows = db_rows(&a->db, "SELECT DISTINCT export_id FROM iscsi_luns WHERE volume_id=?", "i", volume_id);
    size_t i;
    json_t *v;
    char err[256];
    json_array_foreach(rows, i, v) {
        if (appliance_apply_export(a, EXPORT_ISCSI, json_integer_value(json_object_get(v, "export_id")), err, sizeof err))
            log_warn("re-applying iSCSI export: %s", err);
    }
    json_decref(rows);
}

static void patch(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "size", "comment", NULL };
    int64_t id = api_lookup_pool_obj(c, r, "volumes", c->key);
    const char *comment = NULL;
    uint64_t size = 0;
    if (id < 0 || api_body_object(c, r, allowed) || api_get_size(c, r, "size", 0, &size) ||
        api_get_str(c, r, "comment", 0, &comment))
        return;
    struct appliance *a = c->app;
    json_t *row = db_row(&a->db, VOLUME_SELECT "WHERE v.id=?", "i", id);
    uint64_t cur = json_integer_value(json_object_get(row, "size"));
    char pool[128], name[128], err[512];
    snprintf(pool, sizeof pool, "%s", json_string_value(json_object_get(row, "pool")));
    snprintf(name, sizeof name, "%s", json_string_value(json_object_get(row, "name")));
    json_decref(row);
    if (size && size != cur) {
        if (size < cur) { api_error(r, 400, "invalid_field", "volumes can only grow (now %llu bytes)", (unsigned long long)cur); return; }
        if (size % 4096) { api_error(r, 400, "invalid_field", "size must be a multiple of 4096 bytes"); return; }
        int rc = storage_volume_resize(a->storage, pool, name, size, err, sizeof err);
        if (rc) { api_errno(r, rc, err); return; }
        db_exec(&a->db, NULL, "UPDATE volumes SET size=? WHERE id=?", "ii", (int64_t)size, id);
        reapply_exports(a, id); /* initiators see the new capacity */
    }
    if (comment) db_exec(&a->db, NULL, "UPDATE volumes SET comment=? WHERE id=?", "si", comment, id);
    api_ok(r, 200, get_by_id(a, id));
}

static void del(struct api_call *c, struct api_reply *r)
{
    int64_t id = api_lookup_pool_obj(c, r, "volumes", c->key);
    if (id < 0) return;
    struct appliance *a = c->app;
    if (db_int(&a->db, 0, "SELECT count(*) FROM iscsi_luns WHERE volume_id=?", "i", id)) {
        api_error(r, 409, "in_use", "volume is a LUN of an iSCSI export; remove it from the export first");
        return;
    }
    json_t *row = db_row(&a->db, VOLUME_SELECT "WHERE v.id=?", "i", id);
    char pool[128], name[128], err[512];
    snprintf(pool, sizeof pool, "%s", json_string_value(json_object_get(row, "pool")));
    snprintf(name, sizeof name, "%s", json_string_value(json_object_get(row, "name")));
    json_decref(row);
    if (api_snapshots_before_delete(c, r, pool, name, 0)) return;
    /* storage first: config is only changed once the storage is really gone */
    int rc = storage_volume_destroy(a->storage, pool, name, err, sizeof err);
    if (rc && rc != -ENOENT) { api_errno(r, rc == -EBUSY ? rc : -EIO, err); return; }
    if (db_exec(&a->db, NULL, "DELETE FROM volumes WHERE id=?", "i", id)) {
        log_err("volume %s/%s destroyed but still in config: %s", pool, name, db_errmsg(&a->db));
        api_error(r, 500, "db", "volume destroyed, but removing it from the config failed: %s", db_errmsg(&a->db));
        return;
    }
    api_snapshots_deleted(a, pool, name, 0);
    log_info("volume %s/%s destroyed", pool, name);
    api_ok(r, 204, NULL);
}

const struct api_resource api_volumes = {
    .prefix = "volumes", .key_has_slash = 1, .list = list, .get = get, .create = create, .patch = patch, .del = del,
};
