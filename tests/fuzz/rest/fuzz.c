/* Fuzz harness: the REST dispatcher and its validators (api/), as http.c calls them,
 * over a real appliance (SQLite DB, storage manager, NFS and iSCSI services on loopback
 * ephemeral ports) in a temp dir. Input: method byte, "path[?query]\n", JSON body.
 * Inputs that would touch files outside the sandbox SANDBOX (absolute paths elsewhere,
 * "..") or ask for more than 1 GiB are skipped: the harness runs as root. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "api/api.h"
#include "api/validate.h"
#include "util/log.h"

#define SANDBOX "/tmp/nasd-fuzz-rest/"   /* fixed, so seeds can name member files in it */
static struct appliance app;

/* Errors only (a level the daemon can have: GET /system/settings names it); reset after
 * every input, since PATCH /system/settings may change it. */
static int quiet_level(void) { return getenv("FUZZ_LOG") ? LOG_DEBUG : LOG_ERR; }

static char sandbox_dir[sizeof SANDBOX + 32];
static void cleanup(void)
{
    /* this process's dir, and the member files inputs created at the sandbox's top */
    char cmd[sizeof sandbox_dir + 96];
    snprintf(cmd, sizeof cmd, "rm -rf %s; find " SANDBOX " -maxdepth 1 -type f -delete", sandbox_dir);
    (void)!system(cmd);
}

static int init(void)
{
    nasd_log_level = quiet_level();
    char dir[sizeof SANDBOX + 32];
    snprintf(dir, sizeof dir, "%s%d", SANDBOX, (int)getpid()); /* one per process: -jobs=N works */
    /* no chdir: libFuzzer's corpus paths are relative; the API takes absolute paths only */
    if (system("mkdir -p " SANDBOX) || mkdir(dir, 0700)) return -1;
    snprintf(sandbox_dir, sizeof sandbox_dir, "%s", dir);
    atexit(cleanup);
    struct nasd_config cfg;
    config_defaults(&cfg);
    snprintf(cfg.db_path, sizeof cfg.db_path, "%s/nasd.db", dir);
    snprintf(cfg.state_dir, sizeof cfg.state_dir, "%s/state", dir);
    snprintf(cfg.iscsi_portal, sizeof cfg.iscsi_portal, "127.0.0.1:0");
    snprintf(cfg.nfs_bind, sizeof cfg.nfs_bind, "127.0.0.1");
    cfg.nfs_port = cfg.mount_port = 0;
    cfg.portmap_port = -1;
    cfg.cache_bytes = 4 << 20;
    cfg.dirty_bytes = 2 << 20;
    char err[512];
    if (appliance_start(&app, &cfg, err, sizeof err)) { fprintf(stderr, "fuzz: %s\n", err); return -1; }
    /* something to find: a pool with a dataset, a volume and both exports */
    struct api_reply r = { 0 };
    char spec_text[512];
    snprintf(spec_text, sizeof spec_text, "{\"name\":\"tank\",\"layout\":\"stripe\",\"members\":"
             "[{\"path\":\"%s/m0.img\",\"size\":\"128M\",\"create\":true}]}", dir);
    json_t *spec = json_loads(spec_text, 0, NULL);
    api_pool_create(&app, spec, &r);
    json_decref(spec);
    char *t = r.json ? json_dumps(r.json, 0) : NULL;
    if (r.status != 201) fprintf(stderr, "fuzz: pool tank: %d %s\n", r.status, t ? t : "");
    free(t);
    json_decref(r.json);
    return r.status == 201 ? 0 : -1;
}

static int safe(json_t *v, int depth)
{
    if (depth > 16) return 0;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        uint64_t n;
        char e[64];
        if ((s[0] == '/' && strncmp(s, SANDBOX, sizeof SANDBOX - 1)) || strstr(s, "..") || strchr(s, '~'))
            return 0;
        return parse_size(v, &n, e, sizeof e) || n <= (1u << 30);
    }
    if (json_is_integer(v)) return json_integer_value(v) <= (1 << 30);
    if (json_is_real(v)) return json_real_value(v) <= (1 << 30);
    const char *k;
    json_t *x;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, k, x) if (k[0] == '/' || !safe(x, depth + 1)) return 0;
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x) if (!safe(x, depth + 1)) return 0;
    }
    return 1;
}

static char query_buf[512];
static const char *query(void *conn, const char *name)
{
    static char val[256];
    size_t nl = strlen(name);
    for (char *p = query_buf; p && *p; p = strchr(p, '&'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, name, nl) && p[nl] == '=') {
            snprintf(val, sizeof val, "%.*s", (int)strcspn(p + nl + 1, "&"), p + nl + 1);
            return val;
        }
    }
    return NULL;
}

static void validators(const char *s)
{
    char err[256];
    (void)valid_name(s, err, sizeof err);
    (void)valid_iqn(s, err, sizeof err);
    (void)valid_abs_path(s, err, sizeof err);
    const char *colon = strchr(s, ':');
    if (colon) {
        char user[128];
        snprintf(user, sizeof user, "%.*s", (int)(colon - s), s);
        (void)valid_chap(user, colon + 1, err, sizeof err);
    }
    json_t *j = json_string(s);
    uint64_t n;
    if (j) (void)parse_size(j, &n, err, sizeof err);
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready = -2;
    if (ready == -2) ready = init();
    if (ready) abort();
    static const char *methods[] = { "GET", "POST", "PATCH", "DELETE", "OPTIONS", "PUT" };
    if (size < 2 || size > 8192) return 0;
    const char *m = methods[data[0] % 6];
    const char *p = (const char *)data + 1, *end = (const char *)data + size;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t plen = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (plen > 1000 || memchr(p, 0, plen)) return 0;
    char path[1024];
    memcpy(path, p, plen);
    path[plen] = 0;
    query_buf[0] = 0;
    char *q = strchr(path, '?');
    if (q) { *q = 0; snprintf(query_buf, sizeof query_buf, "%s", q + 1); }
    validators(path);
    if (strstr(path, "..")) return 0;
    struct api_call c = { .app = &app, .method = m, .query = query, .conn = NULL };
    const char *body = nl ? nl + 1 : NULL;
    if (body && body < end) {
        c.body = json_loadb(body, (size_t)(end - body), 0, NULL);
        if (!c.body) return 0;
    } else if (!strcmp(m, "POST") || !strcmp(m, "PATCH")) {
        c.body = json_object();
    }
    if (c.body && !safe(c.body, 0)) { json_decref(c.body); return 0; }
    struct api_reply r = { 0 };
    api_dispatch(&c, path, &r);
    if (r.status < 100 || r.status > 599) abort();
    if (nasd_log_level == LOG_DEBUG) log_debug("fuzz: %s %s -> %d", m, path, r.status);
    char *text = r.json ? json_dumps(r.json, JSON_COMPACT) : NULL; /* every reply serialises */
    free(text);
    json_decref(c.body);
    json_decref(r.json);
    free(r.text);
    nasd_log_level = quiet_level();
    return 0;
}
