/* Shared steps of the iSCSI and NFS export handlers: commit a DB change and apply it to the running services. */
#include "api/exports_common.h"
#include "util/log.h"
#include <stdio.h>

int export_commit_apply(struct appliance *a, enum export_type t, int64_t id, int existed, struct api_reply *r)
{
    char err[512];
    int rc = appliance_apply_export(a, t, id, err, sizeof err);
    if (!rc) {
        db_commit(&a->db);
        return 0;
    }
    db_rollback(&a->db);
    char ignored[256];
    if (existed) appliance_apply_export(a, t, id, ignored, sizeof ignored);
    else appliance_remove_export(a, t, id);
    api_errno(r, rc, err);
    return -1;
}

void export_delete(struct appliance *a, enum export_type t, int64_t id, const char *table, struct api_reply *r)
{
    char sql[128];
    appliance_remove_export(a, t, id);
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE id=?", table);
    if (db_exec(&a->db, NULL, sql, "i", id)) {
        api_error(r, 500, "db", "%s", db_errmsg(&a->db));
        return;
    }
    log_info("%s export %lld deleted", t == EXPORT_ISCSI ? "iSCSI" : "NFS", (long long)id);
    api_ok(r, 204, NULL);
}

int export_string_list(json_t *arr, const char *field, int max, int (*check)(const char *, char *, size_t),
                       struct api_reply *r)
{
    if (!json_is_array(arr)) { api_error(r, 400, "invalid_field", "%s must be an array of strings", field); return -1; }
    if ((int)json_array_size(arr) > max) { api_error(r, 400, "invalid_field", "%s: at most %d entries", field, max); return -1; }
    size_t i;
    json_t *v;
    char err[256];
    json_array_foreach(arr, i, v) {
        if (!json_is_string(v)) { api_error(r, 400, "invalid_field", "%s[%zu] must be a string", field, i); return -1; }
        if (check(json_string_value(v), err, sizeof err)) {
            api_error(r, 400, "invalid_field", "%s[%zu]: %s", field, i, err);
            return -1;
        }
    }
    return 0;
}

json_t *export_list(struct appliance *a, const char *ids_sql, json_t *(*export_json)(struct appliance *, int64_t))
{
    json_t *ids = db_rows(&a->db, ids_sql, "");
    json_t *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v) json_array_append_new(out, export_json(a, json_integer_value(json_object_get(v, "id"))));
    json_decref(ids);
    return out;
}
