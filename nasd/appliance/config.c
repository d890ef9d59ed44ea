/* Configuration file (key = value) and command-line flags into struct nasd_config. */
#include "nasd/appliance/config.h"
#include "util/log.h"
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void config_defaults(struct nasd_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->listen, sizeof c->listen, "127.0.0.1:8080");
    snprintf(c->db_path, sizeof c->db_path, "var/nasd.db");
    snprintf(c->state_dir, sizeof c->state_dir, "var");
    snprintf(c->web_dir, sizeof c->web_dir, "web");
    snprintf(c->iscsi_portal, sizeof c->iscsi_portal, "0.0.0.0:3260");
    snprintf(c->nfs_bind, sizeof c->nfs_bind, "0.0.0.0");
    c->nfs_port = 2049;
    c->mount_port = 20048;
    c->portmap_port = 111;
    c->log_level = LOG_INFO;
    c->max_body = 1 << 20;
}

static int parse_int(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

static int parse_bool(const char *v)
{
    if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) return 1;
    if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) return 0;
    return -1;
}

int config_set(struct nasd_config *c, const char *key, const char *v, char *err, size_t errlen)
{
    long n;
    struct { const char *key; char *dst; size_t len; } strs[] = {
        { "listen", c->listen, sizeof c->listen },
        { "db", c->db_path, sizeof c->db_path },
        { "state_dir", c->state_dir, sizeof c->state_dir },
        { "web_dir", c->web_dir, sizeof c->web_dir },
        { "iscsi_portal", c->iscsi_portal, sizeof c->iscsi_portal },
        { "nfs_bind", c->nfs_bind, sizeof c->nfs_bind },
        { "api_hosts", c->api_hosts, sizeof c->api_hosts },
    };
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
        if (strcmp(key, strs[i].key)) continue;
        if (strlen(v) >= strs[i].len) { snprintf(err, errlen, "%s: value too long", key); return -1; }
        snprintf(strs[i].dst, strs[i].len, "%s", v);
        return 0;
    }
    struct { const char *key; int *dst; long lo; } ports[] = {
        { "nfs_port", &c->nfs_port, 0 }, { "mount_port", &c->mount_port, 0 }, { "portmap_port", &c->portmap_port, -1 },
    };
    for (size_t i = 0; i < sizeof ports / sizeof *ports; i++) {
        if (strcmp(key, ports[i].key)) continue;
        if (parse_int(v, ports[i].lo, 65535, &n)) { snprintf(err, errlen, "%s: not a port: %s", key, v); return -1; }
        *ports[i].dst = (int)n;
        return 0;
    }
    struct { const char *key; int *dst; } bools[] = { { "demo", &c->demo }, { "auth", &c->auth } };
    for (size_t i = 0; i < sizeof bools / sizeof *bools; i++) {
        if (strcmp(key, bools[i].key)) continue;
        int b = parse_bool(v);
        if (b < 0) { snprintf(err, errlen, "%s: expected true/false, got %s", key, v); return -1; }
        *bools[i].dst = b;
        return 0;
    }
    if (!strcmp(key, "log_level")) {
        int l = nasd_log_level_parse(v);
        if (l < 0) { snprintf(err, errlen, "log_level: expected error|warn|info|debug, got %s", v); return -1; }
        c->log_level = l;
        return 0;
    }
    if (!strcmp(key, "max_body")) {
        if (parse_int(v, 1024, 64 << 20, &n)) { snprintf(err, errlen, "max_body: 1024..67108864 bytes"); return -1; }
        c->max_body = n;
        return 0;
    }
    if (!strcmp(key, "pool_cache_mb")) {
        if (parse_int(v, 0, 1 << 20, &n)) { snprintf(err, errlen, "pool_cache_mb: 0..1048576"); return -1; }
        c->cache_bytes = (unsigned long long)n << 20;
        return 0;
    }
    if (!strcmp(key, "pool_dirty_mb")) {
        if (parse_int(v, 0, 1 << 20, &n)) { snprintf(err, errlen, "pool_dirty_mb: 0..1048576"); return -1; }
        c->dirty_bytes = (unsigned long long)n << 20;
        return 0;
    }
    snprintf(err, errlen, "unknown setting \"%s\"", key);
    return -1;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

int config_load_file(struct nasd_config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    char line[2048], e[256];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *s = trim(line);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) { snprintf(err, errlen, "%s:%d: expected key = value", path, lineno); rc = -1; break; }
        *eq = 0;
        if (config_set(c, trim(s), trim(eq + 1), e, sizeof e)) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, e);
            rc = -1;
            break;
        }
    }
    fclose(f);
    return rc;
}
