/* Periodic snapshot tasks (take "<prefix>-YYYYmmdd-HHMMSS", keep the newest N of them)
 * and replication tasks (snapshot, send the changes since the last replicated one to
 * another nasd over HTTP, keep the newest N replicated snapshots there), run by one
 * background thread with its own database connection. */
#define _GNU_SOURCE
#include "nasd/appliance/snap_tasks.h"
#include "util/http_client.h"
#include "util/log.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REPL_PREFIX "repl"   /* a replication task's snapshots: "repl<id>-<time>" */

struct snap_tasks {
    struct appliance *a;
    nasd_db db;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, kick;
    atomic_int cancel;   /* stop: requests to a replication target end now */
};

static const char *js(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static void stamp(char *out, size_t len, const char *prefix)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", &tm);
    snprintf(out, len, "%s-%s", prefix, ts);
}

static bool listed(json_t *list, const char *snap)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) if (!strcmp(js(v, "name"), snap)) return true;
    return false;
}

/* Whether snap is a name take() gives: "<prefix>-YYYYmmdd-HHMMSS", maybe "-<n>" after it.
 * Retention deletes only those: never a snapshot an admin named "<prefix>-keep", nor
 * another task's whose prefix starts with this one ("repl1" vs "repl12"). */
static bool taken_by(const char *snap, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (strncmp(snap, prefix, pl) || snap[pl] != '-') return false;
    const char *t = snap + pl + 1;   /* 8 digits, '-', 6 digits */
    for (int i = 0; i < 15; i++)
        if (i == 8 ? t[i] != '-' : !isdigit((unsigned char)t[i])) return false;
    t += 15;
    if (!*t) return true;
    if (*t != '-' || !isdigit((unsigned char)t[1])) return false;
    for (t++; isdigit((unsigned char)*t); t++) {}
    return !*t;
}

/* Takes prefix-<time> on the object, with a numbered suffix if that name exists here
 * or in avoid (the target's snapshots: a name pruned here may still live there). */
static int take(struct storage *st, int is_ds, const char *pool, const char *name, const char *prefix,
                json_t *avoid, char *snap, size_t len, char *err, size_t errlen)
{
    char base[80];
    stamp(base, sizeof base, prefix);
    int rc = -EEXIST;
    for (int i = 0; rc == -EEXIST && i < 100; i++) {
        if (i) snprintf(snap, len, "%s-%d", base, i); else snprintf(snap, len, "%s", base);
        rc = listed(avoid, snap) ? -EEXIST : storage_snap_create(st, pool, name, is_ds, snap, err, errlen);
    }
    return rc;
}

/* Deletes the oldest snapshots the task took beyond keep; skips busy ones. */
static void prune(struct storage *st, int is_ds, const char *pool, const char *name, const char *prefix, int64_t keep)
{
    int e = 0;
    json_t *list = storage_snap_list(st, pool, name, is_ds, &e);
    size_t n = 0, i;
    json_t *v;
    json_array_foreach(list, i, v) n += taken_by(js(v, "name"), prefix);
    json_array_foreach(list, i, v) {   /* oldest first */
        const char *s = js(v, "name");
        if ((int64_t)n <= keep) break;
        if (!taken_by(s, prefix)) continue;
        char err[256];
        if (storage_snap_destroy(st, pool, name, is_ds, s, err, sizeof err) == 0) n--;
        else log_info("snapshot task: keeping %s: %s", s, err);
    }
    json_decref(list);
}

static void run_snapshot_task(struct snap_tasks *t, json_t *task)
{
    int64_t id = json_integer_value(json_object_get(task, "id"));
    int is_ds = !strcmp(js(task, "kind"), "dataset");
    char snap[128], err[512] = "";
    int rc = take(t->a->storage, is_ds, js(task, "pool"), js(task, "name"), js(task, "prefix"), NULL, snap,
                  sizeof snap, err, sizeof err);
    if (!rc) prune(t->a->storage, is_ds, js(task, "pool"), js(task, "name"), js(task, "prefix"),
                   json_integer_value(json_object_get(task, "keep")));
    if (rc) log_warn("snapshot task %lld: %s", (long long)id, err);
    else log_info("snapshot task %lld: took %s/%s@%s", (long long)id, js(task, "pool"), js(task, "name"), snap);
    db_exec(&t->db, NULL, "UPDATE snapshot_tasks SET last_run=?, last_error=? WHERE id=?", "isi", (int64_t)time(NULL),
            rc ? err : NULL, id);
}

static int tmp_fd(struct appliance *a)
{
    int fd = open(a->cfg.state_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    return fd >= 0 ? fd : open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

/* The target's snapshots of the copy, oldest first; NULL if it cannot be listed. */
static json_t *target_list(json_t *task, const char *base_url, const atomic_int *cancel)
{
    char *resp = malloc(65536);
    if (!resp) return NULL;
    int st = nasd_http_request("GET", base_url, js(task, "target_token"), NULL, -1, 0, resp, 65536, 30, cancel);
    json_t *list = st == 200 ? json_loads(resp, 0, NULL) : NULL;
    free(resp);
    return json_is_array(list) ? list : (json_decref(list), NULL);
}

/* Keeps the newest keep snapshots "repl<id>-..." on the target. */
static void prune_target(json_t *task, const char *base_url, const char *prefix, int64_t keep, const atomic_int *cancel)
{
    json_t *list = target_list(task, base_url, cancel);
    size_t n = 0, i;
    json_t *v;
    json_array_foreach(list, i, v) n += taken_by(js(v, "name"), prefix);
    json_array_foreach(list, i, v) {
        if ((int64_t)n <= keep) break;
        if (!taken_by(js(v, "name"), prefix)) continue;
        char url[1024];
        snprintf(url, sizeof url, "%s/%s", base_url, js(v, "name"));
        if (nasd_http_request("DELETE", url, js(task, "target_token"), NULL, -1, 0, NULL, 0, 30, cancel) == 204) n--;
    }
    json_decref(list);
}

/* The base of the next increment (its snapshot info), NULL for a full stream: the
 * target's newest snapshot if this side has it too (same name and guid), which also covers
 * a run whose answer never came but whose stream landed; else the last one recorded.
 * This side's snapshots of the task newer than that base never reached the target: gone. */
static json_t *base_of(struct storage *st, int is_ds, const char *pool, const char *name, const char *prefix,
                       json_t *there, const char *last)
{
    int e = 0;
    size_t nt = json_array_size(there);
    json_t *newest = nt ? json_array_get(there, nt - 1) : NULL;   /* oldest first */
    json_t *base = newest && taken_by(js(newest, "name"), prefix)
                   ? storage_snap_get(st, pool, name, is_ds, js(newest, "name"), &e) : NULL;
    if (base && strcmp(js(base, "guid"), js(newest, "guid"))) { json_decref(base); base = NULL; }
    if (base) {
        json_t *mine = storage_snap_list(st, pool, name, is_ds, &e);
        size_t i;
        json_t *v;
        bool after = false;
        json_array_foreach(mine, i, v) {
            char err[256];
            if (after && taken_by(js(v, "name"), prefix)) storage_snap_destroy(st, pool, name, is_ds, js(v, "name"), err, sizeof err);
            if (!strcmp(js(v, "name"), js(base, "name"))) after = true;
        }
        json_decref(mine);
        return base;
    }
    return *last ? storage_snap_get(st, pool, name, is_ds, last, &e) : NULL;
}

static void run_replication_task(struct snap_tasks *t, json_t *task)
{
    struct storage *st = t->a->storage;
    int64_t id = json_integer_value(json_object_get(task, "id"));
    int is_ds = !strcmp(js(task, "kind"), "dataset");
    const char *pool = js(task, "pool"), *name = js(task, "name"), *last = js(task, "last_snapshot");
    char prefix[32], snap[128] = "", err[512] = "", url[1024], base_url[1024];
    snprintf(prefix, sizeof prefix, REPL_PREFIX "%lld", (long long)id);
    char tu[512];
    snprintf(tu, sizeof tu, "%s", js(task, "target_url"));
    for (size_t l = strlen(tu); l && tu[l - 1] == '/'; l--) tu[l - 1] = 0;
    snprintf(base_url, sizeof base_url, "%s/api/v1/%s/%s/%s/snapshots", tu, is_ds ? "datasets" : "volumes",
             js(task, "target_pool"), js(task, "target_name"));
    /* a volume's replica keeps its logical block size (the stream does not carry it) */
    int64_t bs = is_ds ? 0 : db_int(&t->db, 0, "SELECT v.block_size FROM volumes v JOIN pools p ON p.id=v.pool_id "
                                             "WHERE p.name=? AND v.name=?", "ss", pool, name);
    char bsq[32] = "";
    if (bs) snprintf(bsq, sizeof bsq, "?block_size=%lld", (long long)bs);
    snprintf(url, sizeof url, "%s/api/v1/%s/%s/%s/receive%s", tu, is_ds ? "datasets" : "volumes",
             js(task, "target_pool"), js(task, "target_name"), bsq);
    json_t *there = target_list(task, base_url, &t->cancel);
    json_t *have = base_of(st, is_ds, pool, name, prefix, there, last);
    const char *from = have ? js(have, "name") : NULL;
    int rc = take(st, is_ds, pool, name, prefix, there, snap, sizeof snap, err, sizeof err);
    json_decref(there);
    bool made = !rc;
    int fd = rc ? -1 : tmp_fd(t->a);
    if (!rc && fd < 0) { rc = -errno; snprintf(err, sizeof err, "no temporary file: %s", strerror(errno)); }
    if (!rc) rc = storage_snap_send(st, pool, name, is_ds, snap, from, fd, err, sizeof err);
    struct stat sb;
    if (!rc && fstat(fd, &sb) < 0) rc = -errno;
    bool maybe_there = false;
    if (!rc) {
        char resp[1024];
        int status = nasd_http_request("POST", url, js(task, "target_token"), "application/octet-stream", fd,
                                       (uint64_t)sb.st_size, resp, sizeof resp, 300, &t->cancel);
        /* no answer, but the target was reached (a stop, the deadline, a cut connection): it
         * may have applied the stream, so snap stays; the next run's base_of says whether it
         * landed (and drops it if not) */
        maybe_there = status < 0 && status != -ECONNREFUSED && status != -EHOSTUNREACH && status != -ENETUNREACH &&
                      status != NASD_HTTP_ERESOLVE && status != -EINVAL && status != -EPROTONOSUPPORT;
        if (status != 201) {
            rc = status < 0 ? status : -EIO;
            snprintf(err, sizeof err, "target %s: %s%s", url, status < 0 ? nasd_http_strerror(status) : "", status < 0 ? "" : resp);
        }
    }
    if (fd >= 0) close(fd);
    if (!rc) {   /* snap is the base from now on: older replicated snapshots here can go */
        prune(st, is_ds, pool, name, prefix, 1);
        prune_target(task, base_url, prefix, json_integer_value(json_object_get(task, "keep")), &t->cancel);
        log_info("replication task %lld: %s/%s@%s sent to %s (%s)", (long long)id, pool, name, snap, url,
                 from ? "incremental" : "full");
    } else {
        char e2[256];
        if (made && !maybe_there) storage_snap_destroy(st, pool, name, is_ds, snap, e2, sizeof e2);   /* next try from the same base */
        log_warn("replication task %lld: %s", (long long)id, err);
    }
    json_decref(have);
    if (rc == -ECANCELED) return;   /* stopped: it runs again at the next start, not an interval later */
    db_exec(&t->db, NULL, "UPDATE replication_tasks SET last_run=?, last_error=?, last_snapshot=? WHERE id=?", "issi",
            (int64_t)time(NULL), rc ? err : NULL, rc ? (*last ? last : NULL) : snap, id);
}

static void *runner(void *arg)
{
    struct snap_tasks *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        if (!t->kick) pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        t->kick = false;
        if (t->stop) break;
        pthread_mutex_unlock(&t->mu);
        int64_t now = (int64_t)time(NULL);
        json_t *due = db_rows(&t->db, "SELECT * FROM snapshot_tasks WHERE enabled=1 AND (last_run=0 OR last_run+interval_s<=?)",
                              "i", now);
        size_t i;
        json_t *v;
        json_array_foreach(due, i, v) if (!atomic_load(&t->cancel)) run_snapshot_task(t, v);
        json_decref(due);
        due = db_rows(&t->db, "SELECT * FROM replication_tasks WHERE enabled=1 AND (last_run=0 OR last_run+interval_s<=?)",
                      "i", now);
        json_array_foreach(due, i, v) if (!atomic_load(&t->cancel)) run_replication_task(t, v);
        json_decref(due);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

struct snap_tasks *snap_tasks_start(struct appliance *a)
{
    struct snap_tasks *t = calloc(1, sizeof *t);
    char err[256];
    if (!t) return NULL;
    t->a = a;
    if (db_open(&t->db, a->cfg.db_path, err, sizeof err)) {
        log_err("snapshot tasks: %s", err);
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->th, NULL, runner, t)) {
        db_close(&t->db);
        free(t);
        return NULL;
    }
    return t;
}

bool snap_tasks_repl_prefix(const char *prefix)
{
    size_t l = strlen(REPL_PREFIX);
    return !strncmp(prefix, REPL_PREFIX, l) && prefix[l] && strspn(prefix + l, "0123456789") == strlen(prefix + l);
}

void snap_tasks_kick(struct snap_tasks *t)
{
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    t->kick = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void snap_tasks_stop(struct snap_tasks *t)
{
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    atomic_store(&t->cancel, 1);
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->th, NULL);
    db_close(&t->db);
    free(t);
}
