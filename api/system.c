/* /api/v1/system — appliance info; /api/v1/system/settings — runtime settings. */
#include "api/api.h"
#include "util/log.h"
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NASD_VERSION "0.1.0"

static const char *level_names[] = { "error", "warn", "info", "debug" };

static void info(struct api_call *c, struct api_reply *r)
{
    struct appliance *a = c->app;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:i, s:{s:s, s:b}, s:{s:s, s:i, s:i, s:i, s:b}}",
        "version", NASD_VERSION, "hostname", host, "started", (json_int_t)a->started,
        "uptime", (json_int_t)(time(NULL) - a->started), "schema_version", db_schema_version(&a->db),
        "iscsi", "portal", a->cfg.iscsi_portal, "running", a->iscsi != NULL,
        "nfs", "bind", a->cfg.nfs_bind, "nfs_port", a->cfg.nfs_port, "mount_port", a->cfg.mount_port,
        "portmap_port", a->cfg.portmap_port, "running", a->nfs != NULL);
    static const char *counts[][2] = { { "pools", "pools" }, { "datasets", "datasets" }, { "volumes", "volumes" },
                                       { "iscsi_exports", "iscsi_exports" }, { "nfs_exports", "nfs_exports" } };
    json_t *cnt = json_object();
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        char sql[96];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", counts[i][1]);
        json_object_set_new(cnt, counts[i][0], json_integer(db_int(&a->db, 0, sql, "")));
    }
    json_object_set_new(j, "counts", cnt);
    api_ok(r, 200, j);
}

static json_t *settings_json(struct appliance *a)
{
    json_t *j = json_pack("{s:s}", "log_level", level_names[nasd_log_level]);
    api_iscsi_discovery_json(a, j);
    return j;
}

static void get(struct api_call *c, struct api_reply *r)
{
    if (strcmp(c->key, "settings")) { api_error(r, 404, "not_found", "no such system resource"); return; }
    api_ok(r, 200, settings_json(c->app));
}

static void patch(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "log_level", "iscsi_discovery_chap_user", "iscsi_discovery_chap_secret",
                                           "iscsi_discovery_mutual_user", "iscsi_discovery_mutual_secret", NULL };
    const char *lvl = NULL;
    if (strcmp(c->key, "settings")) { api_error(r, 404, "not_found", "no such system resource"); return; }
    if (api_body_object(c, r, allowed) || api_get_str(c, r, "log_level", 0, &lvl)) return;
    if (api_iscsi_discovery_patch(c, r)) return;
    if (lvl) {
        int l = nasd_log_level_parse(lvl);
        if (l < 0) { api_error(r, 400, "invalid_field", "log_level must be error, warn, info or debug"); return; }
        nasd_log_level = l;
        db_setting_set(&c->app->db, "log_level", lvl);
    }
    api_ok(r, 200, settings_json(c->app));
}

const struct api_resource api_system = {
    .prefix = "system", .list = info, .get = get, .patch = patch,
};
