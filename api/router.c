/* /api/v1 routing, error replies and body field helpers. */
#include "api/api.h"
#include "api/validate.h"
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct api_resource *resources[] = {
    &api_pools, &api_datasets, &api_volumes, &api_iscsi_exports, &api_nfs_exports, &api_system, &api_tokens,
    &api_snapshot_tasks, &api_replication_tasks,
};

/* Extra resources registered at start (stats, jobs) live beside the fixed ones. */
#define MAX_EXTRA 8
static const struct api_resource *extra[MAX_EXTRA];
static int nextra;

void api_register(const struct api_resource *res)
{
    if (nextra < MAX_EXTRA) extra[nextra++] = res;
}

void api_error(struct api_reply *r, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_decref(r->json);
    r->status = status;
    r->json = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
    if (!r->json) {   /* not UTF-8 (a name from a query argument): the message without those bytes */
        for (char *p = msg; *p; p++) if ((unsigned char)*p >= 0x80) *p = '?';
        r->json = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
    }
}

void api_errno(struct api_reply *r, int e, const char *msg)
{
    switch (-e) {
    case ENOENT: api_error(r, 404, "not_found", "%s", msg); break;
    case EEXIST: api_error(r, 409, "exists", "%s", msg); break;
    case EBUSY: api_error(r, 409, "in_use", "%s", msg); break;
    case ENOSPC: api_error(r, 507, "no_space", "%s", msg); break;
    case EINVAL: api_error(r, 400, "invalid", "%s", msg); break;
    case EFBIG: api_error(r, 400, "too_large", "%s", msg); break;
    case ENOTCONN: api_error(r, 503, "service_unavailable", "%s", msg); break;
    default: api_error(r, 500, "internal", "%s", msg); break;
    }
}

void api_ok(struct api_reply *r, int status, json_t *body)
{
    json_decref(r->json);
    r->status = status;
    r->json = body;
}

int api_body_object(struct api_call *c, struct api_reply *r, const char *const *allowed)
{
    if (!json_is_object(c->body)) {
        api_error(r, 400, "invalid_body", "request body must be a JSON object");
        return -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach(c->body, k, v) {
        int ok = 0;
        for (int i = 0; allowed[i]; i++)
            if (!strcmp(k, allowed[i])) ok = 1;
        if (!ok) {
            api_error(r, 400, "unknown_field", "unknown field \"%s\"", k);
            return -1;
        }
    }
    return 0;
}

int api_get_str(struct api_call *c, struct api_reply *r, const char *f, int required, const char **out)
{
    json_t *v = json_object_get(c->body, f);
    if (!v) {
        if (!required) return 0;
        api_error(r, 400, "missing_field", "field \"%s\" is required", f);
        return -1;
    }
    if (!json_is_string(v)) { api_error(r, 400, "invalid_field", "field \"%s\" must be a string", f); return -1; }
    *out = json_string_value(v);
    return 0;
}

int api_get_bool(struct api_call *c, struct api_reply *r, const char *f, int *out)
{
    json_t *v = json_object_get(c->body, f);
    if (!v) return 0;
    if (!json_is_boolean(v)) { api_error(r, 400, "invalid_field", "field \"%s\" must be true or false", f); return -1; }
    *out = json_is_true(v);
    return 0;
}

int api_get_int(struct api_call *c, struct api_reply *r, const char *f, int64_t lo, int64_t hi, int64_t *out)
{
    json_t *v = json_object_get(c->body, f);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        api_error(r, 400, "invalid_field", "field \"%s\" must be an integer in %lld..%lld", f, (long long)lo,
                  (long long)hi);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

int api_get_size(struct api_call *c, struct api_reply *r, const char *f, int required, uint64_t *out)
{
    json_t *v = json_object_get(c->body, f);
    char err[256];
    if (!v) {
        if (!required) return 0;
        api_error(r, 400, "missing_field", "field \"%s\" is required", f);
        return -1;
    }
    if (parse_size(v, out, err, sizeof err)) { api_error(r, 400, "invalid_field", "%s: %s", f, err); return -1; }
    return 0;
}

int api_get_name(struct api_call *c, struct api_reply *r, const char *f, int required, const char **out)
{
    const char *s = NULL;
    char err[256];
    if (api_get_str(c, r, f, required, &s)) return -1;
    if (!s) return 0;
    if (valid_name(s, err, sizeof err)) { api_error(r, 400, "invalid_field", "%s: %s", f, err); return -1; }
    *out = s;
    return 0;
}

static int is_id(const char *s)
{
    if (!*s || strlen(s) > 18) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

int64_t api_lookup(struct api_call *c, struct api_reply *r, const char *what, const char *sql_by_id,
                   const char *sql_by_name)
{
    int64_t id = is_id(c->key) ? db_int(&c->app->db, -1, sql_by_id, "i", (int64_t)atoll(c->key))
                               : db_int(&c->app->db, -1, sql_by_name, "s", c->key);
    if (id < 0) api_error(r, 404, "not_found", "%s \"%s\" not found", what, c->key);
    return id;
}

int64_t api_lookup_pool_obj(struct api_call *c, struct api_reply *r, const char *table, const char *key)
{
    char sql[256];
    int64_t id = -1;
    const char *slash = strchr(key, '/');
    if (is_id(key)) {
        snprintf(sql, sizeof sql, "SELECT id FROM %s WHERE id=?", table);
        id = db_int(&c->app->db, -1, sql, "i", (int64_t)atoll(key));
    } else if (slash) {
        char pool[128];
        snprintf(pool, sizeof pool, "%.*s", (int)(slash - key), key);
        snprintf(sql, sizeof sql, "SELECT t.id FROM %s t JOIN pools p ON p.id=t.pool_id WHERE p.name=? AND t.name=?", table);
        id = db_int(&c->app->db, -1, sql, "ss", pool, slash + 1);
    }
    if (id < 0) api_error(r, 404, "not_found", "%.*s \"%s\" not found", (int)strlen(table) - 1, table, key);
    else if (strcmp(c->method, "GET") && api_receiving_row(c->app, table, id, r)) id = -1;   /* a change waits for its receive */
    return id;
}

json_t *api_pool_obj_list(struct api_call *c, const char *select_sql, json_t *(*decorate)(struct appliance *, json_t *))
{
    char sql[1024];
    const char *pool = c->query ? c->query(c->conn, "pool") : NULL;
    snprintf(sql, sizeof sql, "%s%s ORDER BY full_name", select_sql, pool ? "WHERE p.name=?" : "");
    json_t *rows = pool ? db_rows(&c->app->db, sql, "s", pool) : db_rows(&c->app->db, sql, "");
    size_t i;
    json_t *v;
    json_array_foreach(rows, i, v) decorate(c->app, v);
    return rows;
}

void api_dispatch(struct api_call *c, const char *path, struct api_reply *r)
{
    if (api_snapshots_dispatch(c, path, r)) return;
    const struct api_resource *res = NULL;
    size_t plen = 0;
    for (int i = 0; i < (int)(sizeof resources / sizeof *resources) + nextra; i++) {
        const struct api_resource *x = i < (int)(sizeof resources / sizeof *resources)
            ? resources[i] : extra[i - sizeof resources / sizeof *resources];
        size_t n = strlen(x->prefix);
        if (!strncmp(path, x->prefix, n) && (path[n] == 0 || path[n] == '/') && n > plen) {
            res = x;
            plen = n;
        }
    }
    if (!res) { api_error(r, 404, "not_found", "no such API resource: /api/v1/%s", path); return; }
    char rest[1024];
    snprintf(rest, sizeof rest, "%s", path[plen] ? path + plen + 1 : "");
    size_t n = strlen(rest);
    while (n && rest[n - 1] == '/') rest[--n] = 0; /* tolerate a trailing slash */
    c->key = NULL;
    c->action = NULL;
    if (*rest) {
        c->key = rest;
        char *slash = strchr(rest, '/');
        if (slash && !res->key_has_slash) { *slash = 0; c->action = slash + 1; }
        if (c->action && strchr(c->action, '/')) { api_error(r, 404, "not_found", "no such API path"); return; }
    }
    void (*h)(struct api_call *, struct api_reply *) = NULL;
    const char *m = c->method;
    /* what this path offers, for Allow on 405 and OPTIONS */
    int get, post = 0, patch = 0, del = 0; /* HEAD arrives here as GET (http.c) */
    if (c->action) { get = !!res->action; post = !!res->action; }
    else if (!c->key) { get = !!res->list; post = !!res->create; }
    else { get = !!res->get; patch = !!res->patch; del = !!res->del; }
    snprintf(r->allow, sizeof r->allow, "%s%s%s%sOPTIONS", get ? "GET, HEAD, " : "", post ? "POST, " : "",
             patch ? "PATCH, " : "", del ? "DELETE, " : "");
    if (!strcmp(m, "OPTIONS")) { api_ok(r, 204, NULL); return; }
    if (c->action) h = (!strcmp(m, "GET") || !strcmp(m, "POST")) ? res->action : NULL;
    else if (!c->key) h = !strcmp(m, "GET") ? res->list : !strcmp(m, "POST") ? res->create : NULL;
    else h = !strcmp(m, "GET") ? res->get : !strcmp(m, "PATCH") ? res->patch : !strcmp(m, "DELETE") ? res->del : NULL;
    if (!h) { api_error(r, 405, "method_not_allowed", "%s not allowed on /api/v1/%s", m, path); return; }
    h(c, r);
    if (!r->status) api_error(r, 500, "internal", "handler gave no reply");
}
