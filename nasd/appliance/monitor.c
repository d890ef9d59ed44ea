/* The export monitor: 1 Hz sampler thread, per-export rings, REST JSON views. */
#define _GNU_SOURCE
#include "nasd/appliance/monitor.h"
#include "nasd/appliance/appliance.h"
#include "util/log.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct mon_export {
    char type[8];
    int64_t id;
    char name[64];
    int seen;
    int have_prev;
    struct mon_counters prev;       /* last snapshot (per-second rates) */
    uint64_t prev_ns;
    int have_min_base;
    struct mon_counters min_base;   /* snapshot at the start of the current minute */
    uint64_t min_base_ns;
    int64_t min_t;
    int have_last;
    struct mon_sample last;
    struct mon_ring sec, min;
    struct mon_export *next;
};

struct monitor {
    struct appliance *a;
    nasd_db db;
    int has_db;
    pthread_mutex_t lock;           /* the export list and rings */
    struct mon_export *list;
    pthread_mutex_t thr_lock;
    pthread_cond_t thr_cv;
    pthread_t thr;
    int thr_running, stopping;
    int64_t last_prune;
};

static const char *type_name(enum export_type t) { return t == EXPORT_ISCSI ? "iscsi" : "nfs"; }

struct mon_snap *monitor_snapshot(struct appliance *a, int *n)
{
    pthread_mutex_lock(&a->lock);
    int cnt = 0;
    for (struct export_rt *e = a->exports; e; e = e->next) cnt++;
    struct mon_snap *s = calloc(cnt ? cnt : 1, sizeof *s);
    int i = 0;
    for (struct export_rt *e = s ? a->exports : NULL; e; e = e->next, i++) {
        snprintf(s[i].type, sizeof s[i].type, "%s", type_name(e->type));
        s[i].id = e->id;
        snprintf(s[i].name, sizeof s[i].name, "%s", e->name);
        s[i].active = e->active;
        mon_counters_read(e->stats, &s[i].c);
    }
    pthread_mutex_unlock(&a->lock);
    *n = s ? cnt : 0;
    return s;
}

static struct mon_export *find(struct monitor *m, const char *type, int64_t id)
{
    for (struct mon_export *x = m->list; x; x = x->next)
        if (x->id == id && !strcmp(x->type, type)) return x;
    return NULL;
}

static struct mon_export *add(struct monitor *m, const struct mon_snap *s, int64_t wall)
{
    struct mon_export *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    if (mon_ring_init(&x->sec, MON_SEC_RING) || mon_ring_init(&x->min, MON_MIN_RING)) {
        mon_ring_free(&x->sec);
        free(x);
        return NULL;
    }
    snprintf(x->type, sizeof x->type, "%s", s->type);
    x->id = s->id;
    if (m->has_db) mon_db_load(&m->db, x->type, x->id, wall - MON_MIN_RING * 60, &x->min);
    x->next = m->list;
    m->list = x;
    return x;
}

static void free_export(struct mon_export *x)
{
    mon_ring_free(&x->sec);
    mon_ring_free(&x->min);
    free(x);
}

/* A minute sample replaces one with the same timestamp (e.g. reloaded after a restart). */
static void push_minute(struct mon_ring *r, const struct mon_sample *s)
{
    if (r->n) {
        struct mon_sample *last = (struct mon_sample *)mon_ring_at(r, r->n - 1);
        if (last->t == s->t) { *last = *s; return; }
    }
    mon_ring_push(r, s);
}

struct pending_save { char type[8]; int64_t id; struct mon_sample s; };

static void update_export(struct mon_export *x, const struct mon_snap *s, int64_t wall, uint64_t mono_ns,
                          struct pending_save *save, int *nsave)
{
    struct mon_counters d;
    snprintf(x->name, sizeof x->name, "%s", s->name);
    if (x->have_prev && mono_ns > x->prev_ns) {
        if (mon_counters_delta(&x->prev, &s->c, &d) == 0) {
            mon_rates(&d, mono_ns - x->prev_ns, wall, &x->last);
            x->have_last = 1;
            mon_ring_push(&x->sec, &x->last);
        } else {
            x->have_min_base = 0; /* stats object was replaced: start over */
        }
    }
    x->prev = s->c;
    x->prev_ns = mono_ns;
    x->have_prev = 1;

    int64_t minute = wall - wall % 60;
    if (!x->have_min_base) {
        x->min_base = s->c;
        x->min_base_ns = mono_ns;
        x->min_t = minute;
        x->have_min_base = 1;
    } else if (minute != x->min_t) {
        struct mon_sample ms;
        if (mon_counters_delta(&x->min_base, &s->c, &d) == 0 && mono_ns > x->min_base_ns) {
            mon_rates(&d, mono_ns - x->min_base_ns, x->min_t, &ms);
            push_minute(&x->min, &ms);
            snprintf(save[*nsave].type, sizeof save[*nsave].type, "%s", x->type);
            save[*nsave].id = x->id;
            save[(*nsave)++].s = ms;
        }
        x->min_base = s->c;
        x->min_base_ns = mono_ns;
        x->min_t = minute;
    }
}

void monitor_tick(struct monitor *m, int64_t wall, uint64_t mono_ns)
{
    int n = 0;
    struct mon_snap *snap = monitor_snapshot(m->a, &n);
    if (!snap) return;
    struct pending_save *save = calloc(n ? n : 1, sizeof *save);
    struct mon_export *gone = NULL;
    int nsave = 0;
    pthread_mutex_lock(&m->lock);
    for (struct mon_export *x = m->list; x; x = x->next) x->seen = 0;
    for (int i = 0; i < n; i++) {
        struct mon_export *x = find(m, snap[i].type, snap[i].id);
        if (!x) x = add(m, &snap[i], wall);
        if (!x) continue;
        x->seen = 1;
        if (save) update_export(x, &snap[i], wall, mono_ns, save, &nsave);
    }
    for (struct mon_export **pp = &m->list; *pp;) {
        struct mon_export *x = *pp;
        if (x->seen) { pp = &x->next; continue; }
        *pp = x->next;
        x->next = gone;
        gone = x;
    }
    pthread_mutex_unlock(&m->lock);

    if (m->has_db) {
        if (nsave) db_begin(&m->db);
        for (int i = 0; i < nsave; i++)
            if (mon_db_save(&m->db, save[i].type, save[i].id, &save[i].s))
                log_warn("monitor: saving minute sample: %s", db_errmsg(&m->db));
        if (nsave) db_commit(&m->db);
        for (struct mon_export *x = gone; x; x = x->next) {
            const char *sql = !strcmp(x->type, "iscsi") ? "SELECT id FROM iscsi_exports WHERE id=?"
                                                        : "SELECT id FROM nfs_exports WHERE id=?";
            if (db_int(&m->db, -1, sql, "i", x->id) < 0) mon_db_forget(&m->db, x->type, x->id);
        }
        if (wall - m->last_prune >= 3600) {
            mon_db_prune(&m->db, wall - MON_KEEP_DAYS * 86400);
            m->last_prune = wall;
        }
    }
    while (gone) {
        struct mon_export *x = gone;
        gone = x->next;
        free_export(x);
    }
    free(save);
    free(snap);
}

struct monitor *monitor_new(struct appliance *a, nasd_db *db)
{
    struct monitor *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->a = a;
    if (db && db->h) {
        m->db = *db;
        m->has_db = 1;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->thr_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->thr_cv, &ca);
    pthread_condattr_destroy(&ca);
    return m;
}

static void *sampler(void *arg)
{
    struct monitor *m = arg;
    pthread_mutex_lock(&m->thr_lock);
    while (!m->stopping) {
        pthread_mutex_unlock(&m->thr_lock);
        monitor_tick(m, time(NULL), nasd_now_ns());
        pthread_mutex_lock(&m->thr_lock);
        /* sleep to just past the next whole wall-clock second so samples line up with t;
         * the 10 ms margin keeps an early wake-up from reading the previous second twice */
        struct timespec now, wake;
        clock_gettime(CLOCK_REALTIME, &now);
        clock_gettime(CLOCK_MONOTONIC, &wake);
        long wait_ns = 1000000000L - now.tv_nsec + 10000000L;
        wake.tv_nsec += wait_ns;
        wake.tv_sec += wake.tv_nsec / 1000000000L;
        wake.tv_nsec %= 1000000000L;
        while (!m->stopping && pthread_cond_timedwait(&m->thr_cv, &m->thr_lock, &wake) != ETIMEDOUT) {}
    }
    pthread_mutex_unlock(&m->thr_lock);
    return NULL;
}

int monitor_start_thread(struct monitor *m)
{
    if (pthread_create(&m->thr, NULL, sampler, m)) return -1;
    m->thr_running = 1;
    return 0;
}

void monitor_free(struct monitor *m)
{
    if (!m) return;
    if (m->thr_running) {
        pthread_mutex_lock(&m->thr_lock);
        m->stopping = 1;
        pthread_cond_signal(&m->thr_cv);
        pthread_mutex_unlock(&m->thr_lock);
        pthread_join(m->thr, NULL);
    }
    while (m->list) {
        struct mon_export *x = m->list;
        m->list = x->next;
        free_export(x);
    }
    if (m->has_db) db_close(&m->db);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->thr_lock);
    pthread_cond_destroy(&m->thr_cv);
    free(m);
}

struct monitor *monitor_start(struct appliance *a, char *err, size_t errlen)
{
    nasd_db db = { 0 };
    /* its own connection: the REST handlers' transactions on the shared one must not swallow our writes */
    if (db_open(&db, a->cfg.db_path, err, errlen)) return NULL;
    struct monitor *m = monitor_new(a, &db);
    if (!m) { db_close(&db); snprintf(err, errlen, "out of memory"); return NULL; }
    mon_db_prune(&m->db, time(NULL) - MON_KEEP_DAYS * 86400);
    m->last_prune = time(NULL);
    if (monitor_start_thread(m)) {
        monitor_free(m);
        snprintf(err, errlen, "cannot start the monitor thread");
        return NULL;
    }
    return m;
}

static json_t *sample_json(const struct mon_sample *s, int with_t)
{
    json_t *o = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "read_iops", s->read_iops,
                          "write_iops", s->write_iops, "other_iops", s->other_iops, "read_bps", s->read_bps,
                          "write_bps", s->write_bps, "lat_p50_us", s->lat_p50_us, "lat_p99_us", s->lat_p99_us,
                          "cpu_pct", s->cpu_pct);
    if (with_t) json_object_set_new(o, "t", json_integer(s->t));
    return o;
}

json_t *monitor_stats_json(struct monitor *m)
{
    int n = 0;
    struct mon_snap *snap = monitor_snapshot(m->a, &n);
    json_t *arr = json_array();
    pthread_mutex_lock(&m->lock);
    for (int i = 0; snap && i < n; i++) {
        struct mon_export *x = find(m, snap[i].type, snap[i].id);
        struct mon_sample zero = { 0 };
        const struct mon_sample *s = x && x->have_last ? &x->last : &zero;
        json_t *o = sample_json(s, 0);
        const struct mon_counters *c = &snap[i].c;
        json_object_set_new(o, "type", json_string(snap[i].type));
        json_object_set_new(o, "id", json_integer(snap[i].id));
        json_object_set_new(o, "name", json_string(snap[i].name));
        json_object_set_new(o, "active", json_boolean(snap[i].active));
        json_object_set_new(o, "errors", json_integer((json_int_t)s->errors));
        json_object_set_new(o, "totals", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
            "read_ops", (json_int_t)c->ops[NASD_OP_READ], "write_ops", (json_int_t)c->ops[NASD_OP_WRITE],
            "other_ops", (json_int_t)c->ops[NASD_OP_OTHER], "read_bytes", (json_int_t)c->bytes[NASD_OP_READ],
            "write_bytes", (json_int_t)c->bytes[NASD_OP_WRITE], "cpu_ns", (json_int_t)c->cpu_ns,
            "errors", (json_int_t)c->errors));
        json_array_append_new(arr, o);
    }
    pthread_mutex_unlock(&m->lock);
    free(snap);
    return json_pack("{s:I, s:o}", "time", (json_int_t)time(NULL), "exports", arr);
}

int monitor_export_exists(struct monitor *m, const char *type, int64_t id)
{
    int found = 0;
    pthread_mutex_lock(&m->a->lock);
    for (struct export_rt *e = m->a->exports; e; e = e->next)
        if (e->id == id && !strcmp(type_name(e->type), type)) found = 1;
    pthread_mutex_unlock(&m->a->lock);
    return found;
}

json_t *monitor_history_json(struct monitor *m, const char *type, int64_t id, int range_s)
{
    if (!monitor_export_exists(m, type, id)) return NULL;
    int per_second = range_s <= MON_SEC_RING;
    json_t *samples = json_array();
    int64_t since = time(NULL) - range_s;
    pthread_mutex_lock(&m->lock);
    struct mon_export *x = find(m, type, id);
    if (x) {
        const struct mon_ring *r = per_second ? &x->sec : &x->min;
        for (int i = 0; i < r->n; i++) {
            const struct mon_sample *s = mon_ring_at(r, i);
            if (s->t >= since) json_array_append_new(samples, sample_json(s, 1));
        }
    }
    pthread_mutex_unlock(&m->lock);
    char key[48];
    snprintf(key, sizeof key, "%s:%lld", type, (long long)id);
    return json_pack("{s:s, s:i, s:i, s:o}", "export", key, "resolution", per_second ? 1 : 60, "range", range_s,
                     "samples", samples);
}
