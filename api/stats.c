/* GET /api/v1/stats, /api/v1/stats/history and the Prometheus /metrics text. */
#define _GNU_SOURCE
#include "api/monitoring.h"
#include "nasd/appliance/monitor.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct monitor *mon;

void api_stats_attach(struct monitor *m) { mon = m; }

static int monitor_ready(struct api_reply *r)
{
    if (mon) return 1;
    api_error(r, 503, "service_unavailable", "the monitor is not running");
    return 0;
}

static void stats_list(struct api_call *c, struct api_reply *r)
{
    if (monitor_ready(r)) api_ok(r, 200, monitor_stats_json(mon));
}

/* "iscsi:1" or "nfs:share" -> type + id; -1 with 400/404 in r. */
static int parse_export(struct api_call *c, struct api_reply *r, const char *arg, char type[8], int64_t *id)
{
    const char *colon = arg ? strchr(arg, ':') : NULL;
    if (!arg || !colon || colon == arg || !colon[1]) {
        api_error(r, 400, "invalid_query", "export must be \"iscsi:<id|name>\" or \"nfs:<id|name>\"");
        return -1;
    }
    size_t tl = (size_t)(colon - arg);
    if (!((tl == 5 && !strncmp(arg, "iscsi", 5)) || (tl == 3 && !strncmp(arg, "nfs", 3)))) {
        api_error(r, 400, "invalid_query", "export type must be iscsi or nfs");
        return -1;
    }
    snprintf(type, 8, "%.*s", (int)tl, arg);
    const char *key = colon + 1;
    int digits = strlen(key) <= 18;
    for (const char *p = key; *p; p++) digits &= isdigit((unsigned char)*p) != 0;
    int n = 0;
    struct mon_snap *s = monitor_snapshot(c->app, &n);
    *id = -1;
    for (int i = 0; s && i < n; i++) {
        if (strcmp(s[i].type, type)) continue;
        if ((digits && s[i].id == atoll(key)) || !strcmp(s[i].name, key)) { *id = s[i].id; break; }
    }
    free(s);
    if (*id < 0) {
        api_error(r, 404, "not_found", "export %s not found", arg);
        return -1;
    }
    return 0;
}

static void stats_get(struct api_call *c, struct api_reply *r)
{
    if (strcmp(c->key, "history")) { api_error(r, 404, "not_found", "no such stats resource: %s", c->key); return; }
    if (!monitor_ready(r)) return;
    const char *range = c->query(c->conn, "range");
    int secs = 0;
    if (!range || !strcmp(range, "5m")) secs = 300;
    else if (!strcmp(range, "1h")) secs = 3600;
    else if (!strcmp(range, "24h")) secs = 86400;
    else { api_error(r, 400, "invalid_query", "range must be 5m, 1h or 24h"); return; }
    char type[8];
    int64_t id;
    if (parse_export(c, r, c->query(c->conn, "export"), type, &id)) return;
    json_t *h = monitor_history_json(mon, type, id, secs);
    if (!h) { api_error(r, 404, "not_found", "export %s:%lld not found", type, (long long)id); return; }
    api_ok(r, 200, h);
}

const struct api_resource api_stats = { .prefix = "stats", .list = stats_list, .get = stats_get };

/* --- Prometheus text format 0.0.4 --- */

static void label_value(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\') fputs("\\\\", f);
        else if (*s == '"') fputs("\\\"", f);
        else if (*s == '\n') fputs("\\n", f);
        else fputc(*s, f);
    }
}

static void export_labels(FILE *f, const struct mon_snap *s)
{
    fprintf(f, "type=\"%s\",export=\"", s->type);
    label_value(f, s->name);
    fputc('"', f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void export_metrics(FILE *f, const struct mon_snap *s, int n)
{
    static const char *ops[] = { "read", "write", "other" };
    family(f, "nasd_export_ops_total", "counter", "Requests served per export and operation kind.");
    for (int i = 0; i < n; i++)
        for (int k = 0; k < NASD_OP_KINDS; k++) {
            fputs("nasd_export_ops_total{", f);
            export_labels(f, &s[i]);
            fprintf(f, ",op=\"%s\"} %llu\n", ops[k], (unsigned long long)s[i].c.ops[k]);
        }
    family(f, "nasd_export_bytes_total", "counter", "Payload bytes moved per export and operation kind.");
    for (int i = 0; i < n; i++)
        for (int k = 0; k < NASD_OP_KINDS; k++) {
            fputs("nasd_export_bytes_total{", f);
            export_labels(f, &s[i]);
            fprintf(f, ",op=\"%s\"} %llu\n", ops[k], (unsigned long long)s[i].c.bytes[k]);
        }
    family(f, "nasd_export_errors_total", "counter", "Requests that failed.");
    for (int i = 0; i < n; i++) {
        fputs("nasd_export_errors_total{", f);
        export_labels(f, &s[i]);
        fprintf(f, "} %llu\n", (unsigned long long)s[i].c.errors);
    }
    family(f, "nasd_export_cpu_seconds_total", "counter", "Service thread CPU time spent on the export.");
    for (int i = 0; i < n; i++) {
        fputs("nasd_export_cpu_seconds_total{", f);
        export_labels(f, &s[i]);
        fprintf(f, "} %.9f\n", (double)s[i].c.cpu_ns / 1e9);
    }
    family(f, "nasd_export_active", "gauge", "1 when the export is being served.");
    for (int i = 0; i < n; i++) {
        fputs("nasd_export_active{", f);
        export_labels(f, &s[i]);
        fprintf(f, "} %d\n", s[i].active ? 1 : 0);
    }
    family(f, "nasd_export_latency_seconds", "histogram", "Request latency from arrival to reply.");
    for (int i = 0; i < n; i++) {
        uint64_t cum = 0;
        /* stats bucket b holds [2^b, 2^(b+1)) us, so its upper bound is 2^(b+1) us; the last is open */
        for (int b = 0; b < NASD_LAT_BUCKETS - 1; b++) {
            cum += s[i].c.lat_hist[b];
            fputs("nasd_export_latency_seconds_bucket{", f);
            export_labels(f, &s[i]);
            fprintf(f, ",le=\"%g\"} %llu\n", (double)(1ull << (b + 1)) / 1e6, (unsigned long long)cum);
        }
        cum += s[i].c.lat_hist[NASD_LAT_BUCKETS - 1];
        fputs("nasd_export_latency_seconds_bucket{", f);
        export_labels(f, &s[i]);
        fprintf(f, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
        fputs("nasd_export_latency_seconds_sum{", f);
        export_labels(f, &s[i]);
        fprintf(f, "} %.9f\n", (double)s[i].c.lat_ns_sum / 1e9);
        fputs("nasd_export_latency_seconds_count{", f);
        export_labels(f, &s[i]);
        fprintf(f, "} %llu\n", (unsigned long long)cum);
    }
}

static void pool_metrics(FILE *f, struct appliance *a)
{
    static const char *states[] = { "ONLINE", "DEGRADED", "FAULTED" };
    json_t *pools = db_rows(&a->db, "SELECT name FROM pools ORDER BY name", "");
    json_t *status = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(pools, i, p) {
        json_t *st = a->storage ? storage_pool_status(a->storage, json_string_value(json_object_get(p, "name"))) : NULL;
        if (!st) st = json_pack("{s:s}", "state", "FAULTED"); /* in the DB but not loaded */
        json_object_set(st, "name", json_object_get(p, "name"));
        json_array_append_new(status, st);
    }
    static const char *gauges[][3] = {
        { "nasd_pool_size_bytes", "size", "Usable pool capacity." },
        { "nasd_pool_allocated_bytes", "allocated", "Bytes allocated in the pool." },
        { "nasd_pool_free_bytes", "free", "Bytes free in the pool." },
        { "nasd_pool_dirty_bytes", "dirty_bytes", "Bytes written to the pool and not yet committed to its members." },
    };
    for (int g = 0; g < 4; g++) {
        family(f, gauges[g][0], "gauge", gauges[g][2]);
        json_array_foreach(status, i, p) {
            fprintf(f, "%s{pool=\"", gauges[g][0]);
            label_value(f, json_string_value(json_object_get(p, "name")));
            fprintf(f, "\"} %lld\n", (long long)json_integer_value(json_object_get(p, gauges[g][1])));
        }
    }
    static const char *merr[][2] = { { "read", "read_errors" }, { "write", "write_errors" },
                                     { "checksum", "checksum_errors" } };
    family(f, "nasd_pool_member_errors", "counter", "I/O and checksum errors per pool member since the last clear.");
    json_array_foreach(status, i, p) {
        size_t k;
        json_t *m;
        json_array_foreach(json_object_get(p, "members"), k, m) {
            for (int e = 0; e < 3; e++) {
                fputs("nasd_pool_member_errors{pool=\"", f);
                label_value(f, json_string_value(json_object_get(p, "name")));
                fprintf(f, "\",member=\"%zu\",kind=\"%s\"} %lld\n", k, merr[e][0],
                        (long long)json_integer_value(json_object_get(m, merr[e][1])));
            }
        }
    }
    family(f, "nasd_pool_member_faulted", "gauge", "1 while a pool member is FAULTED.");
    json_array_foreach(status, i, p) {
        size_t k;
        json_t *m;
        json_array_foreach(json_object_get(p, "members"), k, m) {
            fputs("nasd_pool_member_faulted{pool=\"", f);
            label_value(f, json_string_value(json_object_get(p, "name")));
            const char *ms = json_string_value(json_object_get(m, "state"));
            fprintf(f, "\",member=\"%zu\"} %d\n", k, ms && !strcmp(ms, "FAULTED"));
        }
    }
    family(f, "nasd_pool_state", "gauge", "1 for the pool's current state.");
    json_array_foreach(status, i, p) {
        const char *cur = json_string_value(json_object_get(p, "state"));
        int known = 0;
        for (int s = 0; s < 4; s++) {
            const char *name = s < 3 ? states[s] : cur;
            if (s == 3 && (known || !cur)) break; /* a state beyond the three is shown as itself */
            known |= cur && !strcmp(cur, name);
            fputs("nasd_pool_state{pool=\"", f);
            label_value(f, json_string_value(json_object_get(p, "name")));
            fputs("\",state=\"", f);
            label_value(f, name);
            fprintf(f, "\"} %d\n", cur && !strcmp(cur, name));
        }
    }
    json_decref(status);
    json_decref(pools);
}

char *api_metrics_text(struct appliance *a, const char **content_type)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return strdup("nasd_up 1\n");
    family(f, "nasd_up", "gauge", "1 while nasd is serving.");
    fputs("nasd_up 1\n", f);
    int n = 0;
    struct mon_snap *s = monitor_snapshot(a, &n);
    export_metrics(f, s, n);
    free(s);
    pool_metrics(f, a);
    fclose(f);
    *content_type = "text/plain; version=0.0.4; charset=utf-8";
    return buf;
}
