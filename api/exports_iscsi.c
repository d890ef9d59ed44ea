/* /api/v1/exports/iscsi — iSCSI targets whose LUNs are volumes. */
#include "api/exports_common.h"
#include "api/monitoring.h"
#include "api/validate.h"
#include "iscsi/iscsi.h"
#include "util/log.h"
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define IQN_PREFIX "iqn.2026-12.io.nasd:"

static json_t *export_json(struct appliance *a, int64_t id)
{
    json_t *row = db_row(&a->db, "SELECT id, name, iqn, alias, chap_user, mutual_user, initiators_json, enabled, immediate_data, created, "
                         "chap_secret != '' AS chap_secret_set, mutual_secret != '' AS mutual_secret_set "
                         "FROM iscsi_exports WHERE id=?", "i", id);
    if (!row) return NULL;
    json_object_set_new(row, "luns", db_rows(&a->db,
        "SELECT l.lun, v.id AS volume_id, p.name || '/' || v.name AS volume, l.snapshot, v.size, v.block_size FROM iscsi_luns l "
        "JOIN volumes v ON v.id=l.volume_id JOIN pools p ON p.id=v.pool_id WHERE l.export_id=? ORDER BY l.lun", "i", id));
    json_object_set_new(row, "enabled", json_boolean(json_integer_value(json_object_get(row, "enabled"))));
    json_object_set_new(row, "immediate_data", json_boolean(json_integer_value(json_object_get(row, "immediate_data"))));
    json_object_set_new(row, "chap_secret_set", json_boolean(json_integer_value(json_object_get(row, "chap_secret_set"))));
    json_object_set_new(row, "mutual_secret_set", json_boolean(json_integer_value(json_object_get(row, "mutual_secret_set"))));
    json_object_set_new(row, "active", json_boolean(appliance_export_active(a, EXPORT_ISCSI, id)));
    json_object_set_new(row, "portal", json_string(a->cfg.iscsi_portal));
    return row;
}

static void list(struct api_call *c, struct api_reply *r)
{
    api_ok(r, 200, export_list(c->app, "SELECT id FROM iscsi_exports ORDER BY name", export_json));
}

static int64_t lookup(struct api_call *c, struct api_reply *r)
{
    return api_lookup(c, r, "iSCSI export", "SELECT id FROM iscsi_exports WHERE id=?",
                      "SELECT id FROM iscsi_exports WHERE name=?");
}

static void get(struct api_call *c, struct api_reply *r)
{
    int64_t id = lookup(c, r);
    if (id >= 0) api_ok(r, 200, export_json(c->app, id));
}

static int check_initiator(const char *s, char *err, size_t len) { return valid_iqn(s, err, len); }

/* luns: [{"lun":0,"volume":"tank/v1"|id[,"snapshot":"s1"]}] ; writes iscsi_luns rows for export id.
 * A snapshot LUN is read-only. */
static int write_luns(struct api_call *c, struct api_reply *r, int64_t id, json_t *luns)
{
    if (!json_is_array(luns) || !json_array_size(luns) || json_array_size(luns) > ISCSI_MAX_LUNS) {
        api_error(r, 400, "invalid_field", "luns must be an array of 1..%d {lun, volume}", ISCSI_MAX_LUNS);
        return -1;
    }
    db_exec(&c->app->db, NULL, "DELETE FROM iscsi_luns WHERE export_id=?", "i", id);
    size_t i;
    json_t *v;
    json_array_foreach(luns, i, v) {
        json_t *vol = json_is_object(v) ? json_object_get(v, "volume") : v;
        json_t *lunv = json_is_object(v) ? json_object_get(v, "lun") : NULL;
        const char *k;
        json_t *f;
        json_object_foreach(json_is_object(v) ? v : NULL, k, f) {
            if (strcmp(k, "lun") && strcmp(k, "volume") && strcmp(k, "snapshot")) {
                api_error(r, 400, "unknown_field", "luns[%zu]: unknown field \"%s\"", i, k);
                return -1;
            }
        }
        int64_t lun = lunv ? json_integer_value(lunv) : (int64_t)i;
        if ((lunv && !json_is_integer(lunv)) || lun < 0 || lun > 16383) {
            api_error(r, 400, "invalid_field", "luns[%zu].lun must be 0..16383", i);
            return -1;
        }
        char key[160];
        if (json_is_integer(vol)) snprintf(key, sizeof key, "%lld", (long long)json_integer_value(vol));
        else if (json_is_string(vol)) snprintf(key, sizeof key, "%s", json_string_value(vol));
        else { api_error(r, 400, "invalid_field", "luns[%zu].volume must be \"pool/volume\" or an id", i); return -1; }
        int64_t vid = api_lookup_pool_obj(c, r, "volumes", key);
        if (vid < 0) return -1;
        json_t *sn = json_is_object(v) ? json_object_get(v, "snapshot") : NULL;
        const char *snap = json_is_string(sn) ? json_string_value(sn) : NULL;
        if (sn && !json_is_null(sn) && !snap) { api_error(r, 400, "invalid_field", "luns[%zu].snapshot must be a name", i); return -1; }
        if (snap) {
            json_t *vr = db_row(&c->app->db, "SELECT p.name AS pool, v.name FROM volumes v JOIN pools p ON p.id=v.pool_id "
                                "WHERE v.id=?", "i", vid);
            int e = 0;
            json_t *si = storage_snap_get(c->app->storage, json_string_value(json_object_get(vr, "pool")),
                                          json_string_value(json_object_get(vr, "name")), 0, snap, &e);
            json_decref(vr);
            if (!si) { api_error(r, 404, "not_found", "luns[%zu]: snapshot %s of %s not found", i, snap, key); return -1; }
            json_decref(si);
        }
        int rc = db_exec(&c->app->db, NULL, "INSERT INTO iscsi_luns(export_id, lun, volume_id, snapshot) VALUES(?,?,?,?)",
                         "iiis", id, lun, vid, snap);
        if (rc) { api_error(r, 409, "exists", "LUN %lld listed twice", (long long)lun); return -1; }
    }
    return 0;
}

static int chap_check(struct api_reply *r, const char *cu, const char *cs, const char *mu, const char *ms)
{
    char err[256];
    if (valid_chap(cu, cs, err, sizeof err) || valid_chap(mu, ms, err, sizeof err)) {
        api_error(r, 400, "invalid_field", "%s", err);
        return -1;
    }
    if (*mu && !*cu) { api_error(r, 400, "invalid_field", "mutual CHAP needs one-way CHAP too"); return -1; }
    if (*cs && *ms && !strcmp(cs, ms)) {
        api_error(r, 400, "invalid_field", "mutual secret must differ from the target's CHAP secret");
        return -1;
    }
    return 0;
}

static int chap_fields(struct api_call *c, struct api_reply *r, const char **cu, const char **cs, const char **mu,
                       const char **ms)
{
    if (api_get_str(c, r, "chap_user", 0, cu) || api_get_str(c, r, "chap_secret", 0, cs) ||
        api_get_str(c, r, "mutual_user", 0, mu) || api_get_str(c, r, "mutual_secret", 0, ms))
        return -1;
    return chap_check(r, *cu, *cs, *mu, *ms);
}

/* iSCSI discovery CHAP in /system/settings: users shown, secrets never. */
void api_iscsi_discovery_json(struct appliance *a, json_t *out)
{
    char *u = db_setting_get(&a->db, "iscsi_discovery_chap_user"), *m = db_setting_get(&a->db, "iscsi_discovery_mutual_user");
    json_object_set_new(out, "iscsi_discovery_auth", json_string(u && *u ? (m && *m ? "mutual" : "chap") : "none"));
    json_object_set_new(out, "iscsi_discovery_chap_user", json_string(u ? u : ""));
    json_object_set_new(out, "iscsi_discovery_mutual_user", json_string(m ? m : ""));
    free(u);
    free(m);
}

int api_iscsi_discovery_patch(struct api_call *c, struct api_reply *r)
{
    static const char *const keys[4] = { "iscsi_discovery_chap_user", "iscsi_discovery_chap_secret",
                                         "iscsi_discovery_mutual_user", "iscsi_discovery_mutual_secret" };
    int any = 0;
    for (int i = 0; i < 4; i++) any |= json_object_get(c->body, keys[i]) != NULL;
    if (!any) return 0;
    char *cur[4];
    const char *v[4];
    for (int i = 0; i < 4; i++) { cur[i] = db_setting_get(&c->app->db, keys[i]); v[i] = cur[i] ? cur[i] : ""; }
    int rc = -1;
    for (int i = 0; i < 4; i++) if (api_get_str(c, r, keys[i], 0, &v[i])) goto out;
    if (!*v[0] && !*v[2]) v[1] = v[3] = "";                 /* clearing the users clears the secrets */
    if (chap_check(r, v[0], v[1], v[2], v[3])) goto out;
    for (int i = 0; i < 4; i++) db_setting_set(&c->app->db, keys[i], v[i]);
    appliance_apply_discovery_auth(c->app);
    rc = 0;
out:
    for (int i = 0; i < 4; i++) free(cur[i]);
    return rc;
}

static void create(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "name", "iqn", "alias", "luns", "volume", "chap_user", "chap_secret",
                                           "mutual_user", "mutual_secret", "initiators", "enabled", "immediate_data", NULL };
    const char *name = NULL, *iqn = NULL, *alias = "", *cu = "", *cs = "", *mu = "", *ms = "";
    int enabled = 1, imm = 0;
    char err[256], iqnbuf[256];
    if (api_body_object(c, r, allowed) || api_get_name(c, r, "name", 1, &name) || api_get_str(c, r, "iqn", 0, &iqn) ||
        api_get_str(c, r, "alias", 0, &alias) || chap_fields(c, r, &cu, &cs, &mu, &ms) ||
        api_get_bool(c, r, "enabled", &enabled) || api_get_bool(c, r, "immediate_data", &imm))
        return;
    if (!iqn) {
        snprintf(iqnbuf, sizeof iqnbuf, IQN_PREFIX "%s", name);
        for (char *p = iqnbuf; *p; p++) *p = *p == '_' ? '-' : tolower((unsigned char)*p);
        iqn = iqnbuf;
    }
    if (valid_iqn(iqn, err, sizeof err)) { api_error(r, 400, "invalid_field", "iqn: %s", err); return; }
    if (strlen(alias) > 63) { api_error(r, 400, "invalid_field", "alias longer than 63"); return; }
    json_t *inits = json_object_get(c->body, "initiators");
    if (inits && export_string_list(inits, "initiators", ISCSI_MAX_ACL, check_initiator, r)) return;
    json_t *luns = json_object_get(c->body, "luns"), *tmp = NULL;
    if (!luns && json_object_get(c->body, "volume")) luns = tmp = json_pack("[{s:O}]", "volume", json_object_get(c->body, "volume"));
    if (!luns) { api_error(r, 400, "missing_field", "field \"luns\" (or \"volume\") is required"); return; }
    struct appliance *a = c->app;
    if (db_int(&a->db, -1, "SELECT id FROM iscsi_exports WHERE name=? OR iqn=?", "ss", name, iqn) >= 0) {
        api_error(r, 409, "exists", "an iSCSI export named %s or with IQN %s exists", name, iqn);
        json_decref(tmp);
        return;
    }
    int64_t id;
    db_begin(&a->db);
    json_t *empty = json_array();
    int rc = db_exec(&a->db, &id, "INSERT INTO iscsi_exports(name, iqn, alias, chap_user, chap_secret, mutual_user, "
                     "mutual_secret, initiators_json, enabled, immediate_data, created) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                     "sssssssjiii", name, iqn, alias, cu, cs, mu, ms, inits ? inits : empty, (int64_t)enabled,
                     (int64_t)imm, (int64_t)time(NULL));
    json_decref(empty);
    if (rc) { db_rollback(&a->db); api_error(r, 500, "db", "%s", db_errmsg(&a->db)); json_decref(tmp); return; }
    if (write_luns(c, r, id, luns)) { db_rollback(&a->db); json_decref(tmp); return; }
    json_decref(tmp);
    if (export_commit_apply(a, EXPORT_ISCSI, id, 0, r)) return;
    log_info("iSCSI export %s (%s) created", name, iqn);
    api_ok(r, 201, export_json(a, id));
}

static void patch(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "alias", "luns", "chap_user", "chap_secret", "mutual_user", "mutual_secret",
                                           "initiators", "enabled", "immediate_data", NULL };
    int64_t id = lookup(c, r);
    if (id < 0 || api_body_object(c, r, allowed)) return;
    struct appliance *a = c->app;
    json_t *cur = db_row(&a->db, "SELECT * FROM iscsi_exports WHERE id=?", "i", id);
    const char *alias = json_string_value(json_object_get(cur, "alias"));
    const char *cu = json_string_value(json_object_get(cur, "chap_user"));
    const char *cs = json_string_value(json_object_get(cur, "chap_secret"));
    const char *mu = json_string_value(json_object_get(cur, "mutual_user"));
    const char *ms = json_string_value(json_object_get(cur, "mutual_secret"));
    int enabled = json_integer_value(json_object_get(cur, "enabled"));
    int imm = json_integer_value(json_object_get(cur, "immediate_data"));
    json_t *inits = json_object_get(c->body, "initiators");
    if (api_get_str(c, r, "alias", 0, &alias) || chap_fields(c, r, &cu, &cs, &mu, &ms) ||
        api_get_bool(c, r, "enabled", &enabled) || api_get_bool(c, r, "immediate_data", &imm) ||
        (inits && export_string_list(inits, "initiators", ISCSI_MAX_ACL, check_initiator, r))) {
        json_decref(cur);
        return;
    }
    if (!inits) inits = json_object_get(cur, "initiators");
    db_begin(&a->db);
    db_exec(&a->db, NULL, "UPDATE iscsi_exports SET alias=?, chap_user=?, chap_secret=?, mutual_user=?, mutual_secret=?, "
            "initiators_json=?, enabled=?, immediate_data=? WHERE id=?", "sssssjiii", alias, cu, cs, mu, ms, inits,
            (int64_t)enabled, (int64_t)imm, id);
    json_decref(cur);
    json_t *luns = json_object_get(c->body, "luns");
    if (luns && write_luns(c, r, id, luns)) { db_rollback(&a->db); return; }
    if (export_commit_apply(a, EXPORT_ISCSI, id, 1, r)) return;
    api_ok(r, 200, export_json(a, id));
}

static void del(struct api_call *c, struct api_reply *r)
{
    int64_t id = lookup(c, r);
    if (id >= 0) export_delete(c->app, EXPORT_ISCSI, id, "iscsi_exports", r);
}

const struct api_resource api_iscsi_exports = {
    .prefix = "exports/iscsi", .list = list, .get = get, .create = create, .patch = patch, .del = del,
    .action = api_iscsi_export_action, /* POST .../selftest (api/selftest.c) */
};
