/* /api/v1/snapshot-tasks and /api/v1/replication-tasks: periodic snapshots with
 * retention, and periodic incremental replication to another nasd (run by
 * nasd/appliance/snap_tasks.c). POST .../{id}/run makes a task due now. */
#include "api/api.h"
#include "api/validate.h"
#include "nasd/appliance/snap_tasks.h"
#include "util/log.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "every": seconds, or "<n>s|m|h|d". -1 fills r. */
static int get_every(struct api_call *c, struct api_reply *r, int64_t *out)
{
    json_t *v = json_object_get(c->body, "every");
    if (!v) return 0;
    int64_t n = -1;
    if (json_is_integer(v)) n = json_integer_value(v);
    else if (json_is_string(v)) {
        char *end;
        const char *s = json_string_value(v);
        long long x = strtoll(s, &end, 10);
        int mul = !*end ? 1 : !strcmp(end, "s") ? 1 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600 : !strcmp(end, "d") ? 86400 : 0;
        if (end != s && mul && x > 0 && x < 100000000) n = x * mul;
    }
    if (n < 10 || n > 366 * 86400) {
        api_error(r, 400, "invalid_field", "every must be 10s..366d (seconds, or like \"15m\", \"1h\", \"1d\")");
        return -1;
    }
    *out = n;
    return 0;
}

/* "volume": "pool/name" or "dataset": "pool/name" -> kind, pool, name (must exist). */
static int get_source(struct api_call *c, struct api_reply *r, const char **kind, char *pool, char *name)
{
    const char *vol = NULL, *ds = NULL;
    if (api_get_str(c, r, "volume", 0, &vol) || api_get_str(c, r, "dataset", 0, &ds)) return -1;
    if (!vol == !ds) { api_error(r, 400, "invalid_field", "give either \"volume\" or \"dataset\" as \"pool/name\""); return -1; }
    const char *key = vol ? vol : ds, *slash = strchr(key, '/');
    if (!slash || slash == key || strlen(slash + 1) >= 64 || (size_t)(slash - key) >= 64) {
        api_error(r, 400, "invalid_field", "%s must be \"pool/name\"", vol ? "volume" : "dataset");
        return -1;
    }
    if (api_lookup_pool_obj(c, r, vol ? "volumes" : "datasets", key) < 0) return -1;
    snprintf(pool, 64, "%.*s", (int)(slash - key), key);
    snprintf(name, 64, "%s", slash + 1);
    *kind = vol ? "volume" : "dataset";
    return 0;
}

static json_t *fix_bools(json_t *row)
{
    if (!row) return NULL;
    json_object_set_new(row, "enabled", json_boolean(json_integer_value(json_object_get(row, "enabled"))));
    json_t *tok = json_object_get(row, "target_token");
    if (tok) {
        json_object_set_new(row, "target_token_set", json_boolean(json_string_length(tok) > 0));
        json_object_del(row, "target_token");
    }
    return row;
}

static json_t *rows_fixed(json_t *rows)
{
    size_t i;
    json_t *v;
    json_array_foreach(rows, i, v) fix_bools(v);
    return rows;
}

/* ---------------- snapshot tasks ---------------- */

static void st_list(struct api_call *c, struct api_reply *r)
{
    api_ok(r, 200, rows_fixed(db_rows(&c->app->db, "SELECT * FROM snapshot_tasks ORDER BY id", "")));
}

static int64_t st_lookup(struct api_call *c, struct api_reply *r)
{
    return api_lookup(c, r, "snapshot task", "SELECT id FROM snapshot_tasks WHERE id=?", "SELECT -1 WHERE ?=0");
}

static void st_get(struct api_call *c, struct api_reply *r)
{
    int64_t id = st_lookup(c, r);
    if (id >= 0) api_ok(r, 200, fix_bools(db_row(&c->app->db, "SELECT * FROM snapshot_tasks WHERE id=?", "i", id)));
}

static void st_create(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "volume", "dataset", "every", "keep", "prefix", "enabled", NULL };
    const char *kind, *prefix = "auto";
    char pool[64], name[64];
    int64_t every = 0, keep = 0;
    int enabled = 1;
    if (api_body_object(c, r, allowed) || get_source(c, r, &kind, pool, name) || get_every(c, r, &every) ||
        api_get_int(c, r, "keep", 1, 1000, &keep) || api_get_name(c, r, "prefix", 0, &prefix) ||
        api_get_bool(c, r, "enabled", &enabled))
        return;
    if (!every || !keep) { api_error(r, 400, "missing_field", "\"every\" and \"keep\" are required"); return; }
    if (strlen(prefix) > 40) { api_error(r, 400, "invalid_field", "prefix is limited to 40 characters"); return; }
    /* retention deletes a task's own names, "<prefix>-<time>": a second task with the
     * prefix, or one with a replication task's "repl<id>", would delete those of the other */
    if (snap_tasks_repl_prefix(prefix)) {
        api_error(r, 400, "invalid_field", "prefix \"%s\" is kept for replication tasks", prefix);
        return;
    }
    if (db_int(&c->app->db, 0, "SELECT COUNT(*) FROM snapshot_tasks WHERE kind=? AND pool=? AND name=? AND prefix=?",
               "ssss", kind, pool, name, prefix)) {
        api_error(r, 409, "prefix_in_use", "another snapshot task of %s/%s has prefix \"%s\"", pool, name, prefix);
        return;
    }
    int64_t id;
    if (db_exec(&c->app->db, &id, "INSERT INTO snapshot_tasks(kind, pool, name, interval_s, keep, prefix, enabled, created) "
                "VALUES(?,?,?,?,?,?,?,?)", "sssiisii", kind, pool, name, every, keep, prefix, (int64_t)enabled,
                (int64_t)time(NULL))) {
        api_error(r, 500, "db", "%s", db_errmsg(&c->app->db));
        return;
    }
    snap_tasks_kick(c->app->snap_tasks);
    log_info("snapshot task %lld: %s %s/%s every %llds, keep %lld", (long long)id, kind, pool, name, (long long)every,
             (long long)keep);
    api_ok(r, 201, fix_bools(db_row(&c->app->db, "SELECT * FROM snapshot_tasks WHERE id=?", "i", id)));
}

static void st_patch(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "every", "keep", "enabled", NULL };
    int64_t id = st_lookup(c, r);
    if (id < 0 || api_body_object(c, r, allowed)) return;
    json_t *cur = db_row(&c->app->db, "SELECT * FROM snapshot_tasks WHERE id=?", "i", id);
    int64_t every = json_integer_value(json_object_get(cur, "interval_s")), keep = json_integer_value(json_object_get(cur, "keep"));
    int enabled = (int)json_integer_value(json_object_get(cur, "enabled"));
    json_decref(cur);
    if (get_every(c, r, &every) || api_get_int(c, r, "keep", 1, 1000, &keep) || api_get_bool(c, r, "enabled", &enabled)) return;
    db_exec(&c->app->db, NULL, "UPDATE snapshot_tasks SET interval_s=?, keep=?, enabled=? WHERE id=?", "iiii", every, keep,
            (int64_t)enabled, id);
    snap_tasks_kick(c->app->snap_tasks);
    st_get(c, r);
}

static void st_del(struct api_call *c, struct api_reply *r)
{
    int64_t id = st_lookup(c, r);
    if (id < 0) return;
    db_exec(&c->app->db, NULL, "DELETE FROM snapshot_tasks WHERE id=?", "i", id);
    api_ok(r, 204, NULL);   /* the snapshots it took stay */
}

static void st_action(struct api_call *c, struct api_reply *r)
{
    int64_t id = st_lookup(c, r);
    if (id < 0) return;
    if (strcmp(c->action, "run") || strcmp(c->method, "POST")) { api_error(r, 404, "not_found", "no such action"); return; }
    db_exec(&c->app->db, NULL, "UPDATE snapshot_tasks SET last_run=0 WHERE id=?", "i", id);
    snap_tasks_kick(c->app->snap_tasks);
    api_ok(r, 202, json_pack("{s:I}", "id", (json_int_t)id));
}

const struct api_resource api_snapshot_tasks = {
    .prefix = "snapshot-tasks", .list = st_list, .get = st_get, .create = st_create, .patch = st_patch, .del = st_del,
    .action = st_action,
};

/* ---------------- replication tasks ---------------- */

static void rt_list(struct api_call *c, struct api_reply *r)
{
    api_ok(r, 200, rows_fixed(db_rows(&c->app->db, "SELECT * FROM replication_tasks ORDER BY id", "")));
}

static int64_t rt_lookup(struct api_call *c, struct api_reply *r)
{
    return api_lookup(c, r, "replication task", "SELECT id FROM replication_tasks WHERE id=?", "SELECT -1 WHERE ?=0");
}

static void rt_get(struct api_call *c, struct api_reply *r)
{
    int64_t id = rt_lookup(c, r);
    if (id >= 0) api_ok(r, 200, fix_bools(db_row(&c->app->db, "SELECT * FROM replication_tasks WHERE id=?", "i", id)));
}

/* Both go into the request lines to the target: printable ASCII only, or one could add
 * headers of its own (CR LF) */
static bool printable(const char *s)
{
    for (; *s; s++) if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f) return false;
    return true;
}

static int check_url(const char *u, struct api_reply *r)
{
    if (strncmp(u, "http://", 7) || strlen(u) > 400 || strlen(u) < 8 || strpbrk(u, "\"?#") || !printable(u)) {
        api_error(r, 400, "invalid_field", "target_url must be http://host:port of the other nasd");
        return -1;
    }
    return 0;
}

static int check_token(const char *t, struct api_reply *r)
{
    if (strlen(t) > 200 || !printable(t)) {
        api_error(r, 400, "invalid_field", "target_token must be up to 200 printable ASCII characters");
        return -1;
    }
    return 0;
}

static void rt_create(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "volume", "dataset", "target_url", "target_token", "target_pool", "target_name",
                                           "every", "keep", "enabled", NULL };
    const char *kind, *url = NULL, *token = "", *tpool = NULL, *tname = NULL;
    char pool[64], name[64];
    int64_t every = 0, keep = 2;
    int enabled = 1;
    if (api_body_object(c, r, allowed) || get_source(c, r, &kind, pool, name) ||
        api_get_str(c, r, "target_url", 1, &url) || api_get_str(c, r, "target_token", 0, &token) ||
        api_get_name(c, r, "target_pool", 1, &tpool) || api_get_name(c, r, "target_name", 0, &tname) ||
        get_every(c, r, &every) || api_get_int(c, r, "keep", 1, 1000, &keep) || api_get_bool(c, r, "enabled", &enabled) ||
        check_url(url, r) || check_token(token, r))
        return;
    if (!every) { api_error(r, 400, "missing_field", "\"every\" is required"); return; }
    int64_t id;
    if (db_exec(&c->app->db, &id, "INSERT INTO replication_tasks(kind, pool, name, target_url, target_token, target_pool, "
                "target_name, interval_s, keep, enabled, created) VALUES(?,?,?,?,?,?,?,?,?,?,?)", "sssssssiiii", kind, pool,
                name, url, token, tpool, tname ? tname : name, every, keep, (int64_t)enabled, (int64_t)time(NULL))) {
        api_error(r, 500, "db", "%s", db_errmsg(&c->app->db));
        return;
    }
    snap_tasks_kick(c->app->snap_tasks);
    log_info("replication task %lld: %s %s/%s to %s every %llds", (long long)id, kind, pool, name, url, (long long)every);
    api_ok(r, 201, fix_bools(db_row(&c->app->db, "SELECT * FROM replication_tasks WHERE id=?", "i", id)));
}

static void rt_patch(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "every", "keep", "enabled", "target_url", "target_token", NULL };
    int64_t id = rt_lookup(c, r);
    if (id < 0 || api_body_object(c, r, allowed)) return;
    json_t *cur = db_row(&c->app->db, "SELECT * FROM replication_tasks WHERE id=?", "i", id);
    int64_t every = json_integer_value(json_object_get(cur, "interval_s")), keep = json_integer_value(json_object_get(cur, "keep"));
    int enabled = (int)json_integer_value(json_object_get(cur, "enabled"));
    const char *url = NULL, *token = NULL;
    if (get_every(c, r, &every) || api_get_int(c, r, "keep", 1, 1000, &keep) || api_get_bool(c, r, "enabled", &enabled) ||
        api_get_str(c, r, "target_url", 0, &url) || api_get_str(c, r, "target_token", 0, &token) || (url && check_url(url, r)) ||
        (token && check_token(token, r))) {
        json_decref(cur);
        return;
    }
    if (url && !token && strcmp(url, json_string_value(json_object_get(cur, "target_url")) ?: "")) {
        /* the stored token is the old target's: it does not go to another host */
        api_error(r, 400, "missing_field", "a new target_url needs its \"target_token\"");
        json_decref(cur);
        return;
    }
    db_exec(&c->app->db, NULL, "UPDATE replication_tasks SET interval_s=?, keep=?, enabled=?, target_url=?, target_token=? "
            "WHERE id=?", "iiissi", every, keep, (int64_t)enabled, url ? url : json_string_value(json_object_get(cur, "target_url")),
            token ? token : json_string_value(json_object_get(cur, "target_token")), id);
    json_decref(cur);
    snap_tasks_kick(c->app->snap_tasks);
    rt_get(c, r);
}

static void rt_del(struct api_call *c, struct api_reply *r)
{
    int64_t id = rt_lookup(c, r);
    if (id < 0) return;
    db_exec(&c->app->db, NULL, "DELETE FROM replication_tasks WHERE id=?", "i", id);
    api_ok(r, 204, NULL);
}

static void rt_action(struct api_call *c, struct api_reply *r)
{
    int64_t id = rt_lookup(c, r);
    if (id < 0) return;
    if (strcmp(c->action, "run") || strcmp(c->method, "POST")) { api_error(r, 404, "not_found", "no such action"); return; }
    db_exec(&c->app->db, NULL, "UPDATE replication_tasks SET last_run=0 WHERE id=?", "i", id);
    snap_tasks_kick(c->app->snap_tasks);
    api_ok(r, 202, json_pack("{s:I}", "id", (json_int_t)id));
}

const struct api_resource api_replication_tasks = {
    .prefix = "replication-tasks", .list = rt_list, .get = rt_get, .create = rt_create, .patch = rt_patch, .del = rt_del,
    .action = rt_action,
};
