/* The "ceph" object of POST /pools and POST /pools/{name}/import for pools on a Ceph
 * cluster: validation, storage in ceph_pools (the key like the CHAP secrets: kept,
 * never returned), and the connection settings shown in pool replies. */
#include "api/api_ceph.h"
#include "api/validate.h"
#include <ctype.h>
#include <stdio.h>
#include <string.h>

static int printable(const char *s)
{
    for (; *s; s++) if (!isprint((unsigned char)*s)) return 0;
    return 1;
}

/* mon_host syntax, checked here rather than by librados (a nasd built without it must
 * answer the same): addresses separated by ",; ", each optionally in [] and with a
 * v1:/v2: prefix; a piece may not start like an option ("-rf"). IPv6 in [] passes. */
static int monitors_ok(const char *m)
{
    int n = 0;
    for (const char *p = m; *p;) {
        size_t len = strcspn(p, ",; []");
        if (len) {
            const char *t = p;
            if (len > 3 && (!strncmp(t, "v1:", 3) || !strncmp(t, "v2:", 3))) { t += 3; len -= 3; }
            if (*t == '-' || *t == '.' || *t == '_') return 0;
            for (size_t i = 0; i < len; i++)
                if (!isalnum((unsigned char)t[i]) && !strchr(":.-_", t[i])) return 0;
            n++;
        }
        p += len;
        if (*p) p++;
    }
    return n > 0;
}

int api_ceph_conf_parse(json_t *o, struct ceph_conf *c, struct api_reply *r)
{
    static const char *const allowed[] = { "monitors", "pool", "user", "keyring", "key", "conf", NULL };
    memset(c, 0, sizeof *c);
    if (!json_is_object(o)) {
        api_error(r, 400, "missing_field", "backend \"ceph\" needs \"ceph\":{\"monitors\",\"pool\",\"user\",\"key\" or \"keyring\"}");
        return -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        int ok = 0;
        for (int i = 0; allowed[i]; i++) ok |= !strcmp(k, allowed[i]);
        if (!ok) { api_error(r, 400, "unknown_field", "ceph: unknown field \"%s\"", k); return -1; }
        if (!json_is_string(v)) { api_error(r, 400, "invalid_field", "ceph.%s must be a string", k); return -1; }
        if (!printable(json_string_value(v))) { api_error(r, 400, "invalid_field", "ceph.%s has control characters", k); return -1; }
    }
    struct { const char *f; char *dst; size_t len; } fields[] = {
        { "monitors", c->monitors, sizeof c->monitors }, { "pool", c->pool, sizeof c->pool },
        { "user", c->user, sizeof c->user }, { "keyring", c->keyring, sizeof c->keyring },
        { "key", c->key, sizeof c->key }, { "conf", c->conf, sizeof c->conf },
    };
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const char *s = json_string_value(json_object_get(o, fields[i].f));
        if (!s) continue;
        if (strlen(s) >= fields[i].len) { api_error(r, 400, "invalid_field", "ceph.%s longer than %zu", fields[i].f, fields[i].len - 1); return -1; }
        snprintf(fields[i].dst, fields[i].len, "%s", s);
    }
    char err[256];
    if (!c->pool[0]) { api_error(r, 400, "missing_field", "ceph.pool (the RADOS pool) is required"); return -1; }
    if (valid_name(c->pool, err, sizeof err)) { api_error(r, 400, "invalid_field", "ceph.pool: %s", err); return -1; }
    if (!c->user[0]) snprintf(c->user, sizeof c->user, "admin");
    if (valid_name(c->user, err, sizeof err) || !strncmp(c->user, "client.", 7)) {
        api_error(r, 400, "invalid_field", "ceph.user: the cephx id without \"client.\" (%s)", c->user);
        return -1;
    }
    if (!c->monitors[0] && !c->conf[0]) { api_error(r, 400, "missing_field", "ceph.monitors (or ceph.conf) is required"); return -1; }
    if (!monitors_ok(c->monitors)) {
        api_error(r, 400, "invalid_field", "ceph.monitors: addresses like 10.0.0.1:6789 or [v2:10.0.0.1:3300,v1:10.0.0.1:6789]");
        return -1;
    }
    if (!c->key[0] && !c->keyring[0] && !c->conf[0]) { api_error(r, 400, "missing_field", "ceph.key or ceph.keyring is required"); return -1; }
    for (const char *p = c->key; *p; p++) {
        if (!isalnum((unsigned char)*p) && !strchr("+/=", *p)) { api_error(r, 400, "invalid_field", "ceph.key must be a base64 cephx secret"); return -1; }
    }
    if (c->keyring[0] && valid_abs_path(c->keyring, err, sizeof err)) { api_error(r, 400, "invalid_field", "ceph.keyring: %s", err); return -1; }
    if (c->conf[0] && valid_abs_path(c->conf, err, sizeof err)) { api_error(r, 400, "invalid_field", "ceph.conf: %s", err); return -1; }
    return 0;
}

int api_ceph_conf_save(nasd_db *db, int64_t pool_id, const struct ceph_conf *c)
{
    return db_exec(db, NULL, "INSERT INTO ceph_pools(pool_id, monitors, conf, rados_pool, user, keyring, secret) "
                   "VALUES(?,?,?,?,?,?,?)", "issssss", pool_id, c->monitors, c->conf, c->pool, c->user, c->keyring, c->key);
}

void api_ceph_pool_json(nasd_db *db, int64_t pool_id, json_t *row)
{
    struct ceph_conf c;
    int is_ceph = !appliance_ceph_conf(db, pool_id, &c);
    json_object_set_new(row, "backend", json_string(is_ceph ? "ceph" : "local"));
    if (!is_ceph) return;
    json_t *info = json_object_get(row, "ceph");
    if (!json_is_object(info)) { info = json_object(); json_object_set_new(row, "ceph", info); }
    json_object_set_new(info, "monitors", json_string(c.monitors));
    json_object_set_new(info, "pool", json_string(c.pool));
    json_object_set_new(info, "user", json_string(c.user));
    json_object_set_new(info, "keyring", json_string(c.keyring));
    json_object_set_new(info, "conf", json_string(c.conf));
    json_object_set_new(info, "key_set", json_boolean(c.key[0] != 0));
}
