/* Self-test jobs: validation against the export, one thread per job, results and
 * timelines in SQLite (selftest_jobs), live progress for running jobs. */
#define _GNU_SOURCE
#include "selftest/engine.h"
#include "iscsi/iscsi.h"
#include "util/log.h"
#include "nfs/nfs.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_INITIATOR "iqn.2026-12.io.nasd:selftest"

struct st_job {
    int64_t id;
    struct selftest_req req;
    pthread_mutex_t lock;       /* progress + timeline, shared with the REST thread */
    double progress;
    json_t *timeline;
    atomic_int cancel;
    int finished;               /* thread finished; under mgr->lock */
    int reported;               /* its end is (about to be) in the DB: not counted as running; mgr->lock */
    pthread_t thr;
    struct st_run run;
    struct selftest_mgr *m;
    struct st_job *next;
};

struct selftest_mgr {
    struct appliance *a;
    nasd_db db;
    pthread_mutex_t lock;       /* the job list */
    pthread_cond_t changed;
    struct st_job *jobs;
};

static const char *type_str(enum export_type t) { return t == EXPORT_ISCSI ? "iscsi" : "nfs"; }

struct selftest_mgr *selftest_new(struct appliance *a, nasd_db *db)
{
    struct selftest_mgr *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->a = a;
    m->db = *db;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->changed, NULL);
    db_exec(&m->db, NULL, "UPDATE selftest_jobs SET status='failed', finished=?, "
            "error='interrupted: nasd stopped while the job was running' WHERE status='running'", "i",
            (int64_t)time(NULL));
    return m;
}

struct selftest_mgr *selftest_start(struct appliance *a, char *err, size_t errlen)
{
    nasd_db db = { 0 };
    /* own connection: job threads write while REST handlers hold transactions on the shared one */
    if (db_open(&db, a->cfg.db_path, err, errlen)) return NULL;
    struct selftest_mgr *m = selftest_new(a, &db);
    if (!m) { db_close(&db); snprintf(err, errlen, "out of memory"); }
    return m;
}

static void free_job(struct st_job *j)
{
    nasd_fsroot_put(j->run.tgt.fs);
    json_decref(j->timeline);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

/* Joins and frees finished jobs; caller holds m->lock. */
static void reap(struct selftest_mgr *m)
{
    for (struct st_job **pp = &m->jobs; *pp;) {
        struct st_job *j = *pp;
        if (!j->finished) { pp = &j->next; continue; }
        *pp = j->next;
        pthread_join(j->thr, NULL);
        free_job(j);
    }
}

void selftest_stop(struct selftest_mgr *m)
{
    if (!m) return;
    pthread_mutex_lock(&m->lock);
    for (struct st_job *j = m->jobs; j; j = j->next) atomic_store(&j->cancel, 1);
    while (m->jobs) {
        struct st_job *j = m->jobs;
        m->jobs = j->next;
        pthread_mutex_unlock(&m->lock); /* the job thread takes m->lock when it finishes */
        pthread_join(j->thr, NULL);
        free_job(j);
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    db_close(&m->db);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->changed);
    free(m);
}

static json_t *result_json(const struct st_run *r)
{
    double secs = r->run_end_ns > r->run_start_ns ? (double)(r->run_end_ns - r->run_start_ns) / 1e9 : 0;
    const char *integrity = r->bad ? "failed" : r->verified ? "ok" : "not_checked";
    json_t *o = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:s, s:I, s:I, s:I, s:i, s:f}",
        "iops", secs > 0 ? (double)r->ops / secs : 0.0, "mbps", secs > 0 ? (double)r->bytes / 1e6 / secs : 0.0,
        "lat_avg_us", st_lat_avg_us(&r->lat), "lat_p50_us", st_lat_quantile_us(&r->lat, 0.5),
        "lat_p99_us", st_lat_quantile_us(&r->lat, 0.99), "lat_max_us", (double)r->lat.max_ns / 1000.0,
        "ops", (json_int_t)r->ops, "bytes", (json_int_t)r->bytes, "integrity", integrity,
        "bad_blocks", (json_int_t)r->bad, "verified_blocks", (json_int_t)r->verified,
        "errors", (json_int_t)r->errors, "io_size", (int)r->io_size, "duration_s", secs);
    if (r->first_bad[0]) json_object_set_new(o, "first_bad", json_string(r->first_bad));
    return o;
}

static void *job_thread(void *arg)
{
    struct st_job *j = arg;
    struct st_run *r = &j->run;
    log_info("self-test %lld: %s on %s export %lld, %d s, QD %d", (long long)j->id, st_pattern_name(r->pattern),
             type_str(j->req.type), (long long)j->req.export_id, r->seconds, r->qd);
    int rc = j->req.type == EXPORT_ISCSI ? st_run_iscsi(r) : st_run_nfs(r);
    if (rc && atomic_load(&j->cancel) && !strcmp(r->error, "cancelled"))
        snprintf(r->error, sizeof r->error, "cancelled: nasd is shutting down");
    /* a run whose requests failed or whose data did not verify failed, whatever it measured */
    int cause = st_main_cause(r);
    if (!rc && (r->errors || cause >= 0)) {
        uint64_t failed = 0;
        for (int k = 0; k <= ST_ERR_OTHER; k++) failed += r->err_kind[k];
        snprintf(r->error, sizeof r->error, "%llu of %llu requests failed (%s): %s",
                 (unsigned long long)failed, (unsigned long long)(failed + r->ops + r->verified), st_err_name(cause),
                 r->first_error);
        rc = -1;
    } else if (!rc && r->bad) {
        snprintf(r->error, sizeof r->error, "%llu blocks did not verify: %s", (unsigned long long)r->bad, r->first_bad);
        rc = -1;
    }
    if (rc && cause < 0 && r->bad) cause = -2;
    if (rc && cause == -1) cause = st_err_kind(0, r->error);
    /* no measurement (e.g. the login failed): no result; row_json derives the cause from the error */
    json_t *result = r->run_end_ns ? result_json(r) : json_null();
    if (r->run_end_ns) {
        json_object_set_new(result, "cause", rc ? json_string(cause == -2 ? "INTEGRITY" : st_err_name(cause)) : json_null());
        json_t *kinds = json_object();
        for (int k = 0; k <= ST_ERR_OTHER; k++)
            if (r->err_kind[k]) json_object_set_new(kinds, st_err_name(k), json_integer((json_int_t)r->err_kind[k]));
        json_object_set_new(result, "error_kinds", kinds);
        if (r->first_error[0]) json_object_set_new(result, "first_error", json_string(r->first_error));
    }
    pthread_mutex_lock(&j->lock);
    if (!rc) j->progress = 1.0;
    json_t *timeline = json_deep_copy(j->timeline);
    double progress = j->progress;
    pthread_mutex_unlock(&j->lock);
    const char *status = rc ? "failed" : "done";
    pthread_mutex_lock(&j->m->lock);
    j->reported = 1;   /* a client that saw it end may start another at once */
    pthread_mutex_unlock(&j->m->lock);
    if (db_exec(&j->m->db, NULL, "UPDATE selftest_jobs SET status=?, progress=?, finished=?, result_json=?, "
                "timeline_json=?, error=? WHERE id=?", "sdijjsi", status, progress, (int64_t)time(NULL), result,
                timeline, rc ? r->error : NULL, j->id))
        log_err("self-test %lld: saving the result: %s", (long long)j->id, db_errmsg(&j->m->db));
    if (rc) log_warn("self-test %lld failed: %s", (long long)j->id, r->error);
    else log_info("self-test %lld done: %.0f IOPS, %.1f MB/s, integrity %s",
                  (long long)j->id, json_number_value(json_object_get(result, "iops")),
                  json_number_value(json_object_get(result, "mbps")),
                  json_string_value(json_object_get(result, "integrity")));
    json_decref(result);
    json_decref(timeline);
    /* release the dataset now, not when the job is reaped: a delete right after the job
     * must find it free */
    nasd_fsroot_put(r->tgt.fs);
    r->tgt.fs = NULL;
    pthread_mutex_lock(&j->m->lock);
    j->finished = 1;
    pthread_cond_broadcast(&j->m->changed);
    pthread_mutex_unlock(&j->m->lock);
    return NULL;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* "0.0.0.0:3260" -> "127.0.0.1:3260"; port 0 -> the bound port. */
static void local_portal(struct appliance *a, char *out, size_t len)
{
    const char *p = a->cfg.iscsi_portal, *colon = strrchr(p, ':');
    char host[128];
    snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - p) : (int)strlen(p), p);
    int port = colon ? atoi(colon + 1) : 3260;
    if (port == 0 && a->iscsi) port = iscsi_server_port(a->iscsi);
    if (!strcmp(host, "0.0.0.0") || !host[0]) snprintf(host, sizeof host, "127.0.0.1");
    else if (!strcmp(host, "[::]")) snprintf(host, sizeof host, "[::1]");
    snprintf(out, len, "%s:%d", host, port);
}

static int target_iscsi(struct selftest_mgr *m, const struct selftest_req *q, struct st_target *t, char *name,
                        char *err, size_t errlen)
{
    json_t *row = db_row(&m->db, "SELECT * FROM iscsi_exports WHERE id=?", "i", q->export_id);
    if (!row) { snprintf(err, errlen, "iSCSI export %lld not found", (long long)q->export_id); return -ENOENT; }
    snprintf(name, 64, "%s", jstr(row, "name"));
    snprintf(t->iqn, sizeof t->iqn, "%s", jstr(row, "iqn"));
    snprintf(t->chap_user, sizeof t->chap_user, "%s", jstr(row, "chap_user"));
    snprintf(t->chap_secret, sizeof t->chap_secret, "%s", jstr(row, "chap_secret"));
    snprintf(t->mutual_user, sizeof t->mutual_user, "%s", jstr(row, "mutual_user"));
    snprintf(t->mutual_secret, sizeof t->mutual_secret, "%s", jstr(row, "mutual_secret"));
    /* with an initiator ACL, log in as the first allowed initiator */
    json_t *acl = json_array_get(json_object_get(row, "initiators"), 0);
    snprintf(t->initiator, sizeof t->initiator, "%s", json_is_string(acl) ? json_string_value(acl) : DEFAULT_INITIATOR);
    json_decref(row);
    t->lun = (int)db_int(&m->db, -1, "SELECT lun FROM iscsi_luns WHERE export_id=? ORDER BY lun LIMIT 1", "i",
                         q->export_id);
    if (t->lun < 0) { snprintf(err, errlen, "iSCSI export %s has no LUN", name); return -EINVAL; }
    int64_t bs = db_int(&m->db, 512, "SELECT v.block_size FROM iscsi_luns l JOIN volumes v ON v.id=l.volume_id "
                        "WHERE l.export_id=? AND l.lun=?", "ii", q->export_id, (int64_t)t->lun);
    if (q->pattern == ST_512_SEQREAD && bs > 512) {
        snprintf(err, errlen, "LUN %d of %s has %lld-byte blocks; 512-byte reads are not possible", t->lun, name,
                 (long long)bs);
        return -EINVAL;
    }
    if (q->pattern == ST_METADATA) {
        snprintf(err, errlen, "the metadata pattern applies to NFS exports only");
        return -EINVAL;
    }
    if (q->pattern == ST_4K_RANDWRITE && !q->destructive) {
        snprintf(err, errlen, "4k-randwrite overwrites data on the volume of %s; pass \"destructive\": true", name);
        return -EINVAL;
    }
    if (!m->a->iscsi) { snprintf(err, errlen, "the iSCSI service is not running"); return -ENOTCONN; }
    local_portal(m->a, t->portal, sizeof t->portal);
    return 0;
}

static int target_nfs(struct selftest_mgr *m, const struct selftest_req *q, struct st_target *t, char *name,
                      char *err, size_t errlen)
{
    json_t *row = db_row(&m->db, "SELECT e.*, d.name AS ds, d.quota, p.name AS pool FROM nfs_exports e "
                         "JOIN datasets d ON d.id=e.dataset_id JOIN pools p ON p.id=d.pool_id WHERE e.id=?",
                         "i", q->export_id);
    if (!row) { snprintf(err, errlen, "NFS export %lld not found", (long long)q->export_id); return -ENOENT; }
    snprintf(name, 64, "%s", jstr(row, "name"));
    snprintf(t->export_path, sizeof t->export_path, "%s", jstr(row, "path"));
    int ro = json_integer_value(json_object_get(row, "read_only"));
    int squash = json_integer_value(json_object_get(row, "root_squash")) ||
                 json_integer_value(json_object_get(row, "all_squash"));
    t->uid = squash ? (uint32_t)json_integer_value(json_object_get(row, "anonuid")) : 0;
    t->gid = squash ? (uint32_t)json_integer_value(json_object_get(row, "anongid")) : 0;
    int ferr = 0;
    t->fs = storage_dataset_open(m->a->storage, jstr(row, "pool"), jstr(row, "ds"),
                                 (uint64_t)json_integer_value(json_object_get(row, "dataset_id")),
                                 (uint64_t)json_integer_value(json_object_get(row, "quota")), &ferr);
    json_decref(row);
    if (!t->fs) { snprintf(err, errlen, "cannot open the dataset of %s: %s", name, strerror(-ferr)); return ferr; }
    if (ro) { snprintf(err, errlen, "NFS export %s is read-only; self-tests need a temp file", name); return -EROFS; }
    if (!m->a->nfs) { snprintf(err, errlen, "the NFS service is not running"); return -ENOTCONN; }
    const char *bind = m->a->cfg.nfs_bind;
    if (!bind[0] || !strcmp(bind, "0.0.0.0")) bind = "127.0.0.1";
    else if (!strcmp(bind, "::")) bind = "::1";
    snprintf(t->server, sizeof t->server, strchr(bind, ':') ? "[%s]" : "%s", bind);
    t->nfs_port = nfs_server_nfs_port(m->a->nfs);
    t->mount_port = nfs_server_mount_port(m->a->nfs);
    return 0;
}

int selftest_submit(struct selftest_mgr *m, const struct selftest_req *q, int64_t *job_id, char *err, size_t errlen)
{
    if (q->pattern < 0 || q->pattern >= ST_PATTERNS || q->seconds < 1 || q->seconds > ST_MAX_SECONDS ||
        q->queue_depth < 1 || q->queue_depth > ST_MAX_QD) {
        snprintf(err, errlen, "invalid self-test parameters");
        return -EINVAL;
    }
    struct st_job *j = calloc(1, sizeof *j);
    if (!j) { snprintf(err, errlen, "out of memory"); return -ENOMEM; }
    char name[64] = "";
    int rc = q->type == EXPORT_ISCSI ? target_iscsi(m, q, &j->run.tgt, name, err, errlen)
                                     : target_nfs(m, q, &j->run.tgt, name, err, errlen);
    if (!rc && !appliance_export_active(m->a, q->type, q->export_id)) {
        snprintf(err, errlen, "export %s is not being served (disabled, or it failed to start)", name);
        rc = -ENOTCONN;
    }
    if (rc) { nasd_fsroot_put(j->run.tgt.fs); free(j); return rc; }
    j->req = *q;
    j->m = m;
    j->run.tgt.type = q->type;
    j->timeline = json_array();
    pthread_mutex_init(&j->lock, NULL);
    pthread_mutex_lock(&m->lock);
    reap(m);
    int running = 0;
    for (struct st_job *o = m->jobs; o; o = o->next) running += !o->reported;
    if (running >= ST_MAX_RUNNING) {   /* NFS exports of one dataset would each take one */
        snprintf(err, errlen, "%d self-tests are running, the most at once; wait for one to end", running);
        pthread_mutex_unlock(&m->lock);
        free_job(j);
        return -EBUSY;
    }
    for (struct st_job *o = m->jobs; o; o = o->next) {
        if (o->req.type == q->type && o->req.export_id == q->export_id) {
            snprintf(err, errlen, "self-test %lld is still running on export %s", (long long)o->id, name);
            pthread_mutex_unlock(&m->lock);
            free_job(j);
            return -EBUSY;
        }
    }
    if (db_exec(&m->db, &j->id, "INSERT INTO selftest_jobs(export_type, export_id, export_name, pattern, seconds, "
                "queue_depth, destructive, status, progress, started) VALUES(?,?,?,?,?,?,?,'running',0,?)", "sissiiii",
                type_str(q->type), q->export_id, name, st_pattern_name(q->pattern), (int64_t)q->seconds,
                (int64_t)q->queue_depth, (int64_t)q->destructive, (int64_t)time(NULL))) {
        snprintf(err, errlen, "saving the job: %s", db_errmsg(&m->db));
        pthread_mutex_unlock(&m->lock);
        free_job(j);
        return -EIO;
    }
    /* keep the table bounded: the newest ST_JOBS_KEEP jobs */
    db_exec(&m->db, NULL, "DELETE FROM selftest_jobs WHERE id<=? AND status!='running'", "i", j->id - ST_JOBS_KEEP);
    struct st_run *r = &j->run;
    r->job_id = j->id;
    r->pattern = q->pattern;
    r->seconds = q->seconds;
    r->qd = q->queue_depth;
    r->destructive = q->destructive;
    r->cancel = &j->cancel;
    r->lock = &j->lock;
    r->progress = &j->progress;
    r->timeline = j->timeline;
    if (pthread_create(&j->thr, NULL, job_thread, j)) {
        db_exec(&m->db, NULL, "UPDATE selftest_jobs SET status='failed', error='cannot start a thread' WHERE id=?",
                "i", j->id);
        snprintf(err, errlen, "cannot start the job thread");
        pthread_mutex_unlock(&m->lock);
        free_job(j);
        return -EAGAIN;
    }
    j->next = m->jobs;
    m->jobs = j;
    *job_id = j->id;
    pthread_mutex_unlock(&m->lock);
    return 0;
}

/* DB row -> API object; a running job gets live progress and timeline. */
static json_t *row_json(struct selftest_mgr *m, json_t *row)
{
    int64_t id = json_integer_value(json_object_get(row, "id"));
    char key[48];
    snprintf(key, sizeof key, "%s:%lld", jstr(row, "export_type"), (long long)json_integer_value(json_object_get(row, "export_id")));
    json_t *o = json_pack("{s:I, s:s, s:O, s:O, s:O, s:O, s:b, s:O, s:O, s:O, s:O, s:O, s:O, s:O}",
        "id", (json_int_t)id, "export", key, "export_name", json_object_get(row, "export_name"),
        "pattern", json_object_get(row, "pattern"), "seconds", json_object_get(row, "seconds"),
        "queue_depth", json_object_get(row, "queue_depth"),
        "destructive", (int)json_integer_value(json_object_get(row, "destructive")),
        "status", json_object_get(row, "status"), "progress", json_object_get(row, "progress"),
        "started", json_object_get(row, "started"), "finished", json_object_get(row, "finished"),
        "result", json_object_get(row, "result"), "timeline", json_object_get(row, "timeline"),
        "error", json_object_get(row, "error"));
    if (!o) return NULL;
    json_object_set_new(o, "progress", json_real(json_number_value(json_object_get(row, "progress"))));
    /* state (= status), cause of a failure (NOSPC, QUOTA, EIO, TIMEOUT, LOGIN, CONNECTION,
     * INTEGRITY, ERROR) and failed requests, at the top for the UI */
    json_t *res = json_object_get(row, "result");
    const char *st = jstr(row, "status"), *cause = json_string_value(json_object_get(res, "cause"));
    if (!cause && !strcmp(st, "failed")) cause = st_err_name(st_err_kind(0, jstr(row, "error")));
    json_object_set_new(o, "state", json_string(st));
    json_object_set_new(o, "cause", cause ? json_string(cause) : json_null());
    json_object_set_new(o, "errors", json_integer(json_integer_value(json_object_get(res, "errors"))));
    pthread_mutex_lock(&m->lock);
    for (struct st_job *j = m->jobs; j; j = j->next) {
        if (j->id != id || j->finished) continue;
        pthread_mutex_lock(&j->lock);
        json_object_set_new(o, "progress", json_real(j->progress));
        json_object_set_new(o, "timeline", json_deep_copy(j->timeline));
        pthread_mutex_unlock(&j->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return o;
}

json_t *selftest_job_json(struct selftest_mgr *m, int64_t id)
{
    json_t *row = db_row(&m->db, "SELECT * FROM selftest_jobs WHERE id=?", "i", id);
    json_t *o = row ? row_json(m, row) : NULL;
    json_decref(row);
    return o;
}

json_t *selftest_jobs_json(struct selftest_mgr *m, int limit)
{
    json_t *rows = db_rows(&m->db, "SELECT * FROM selftest_jobs ORDER BY id DESC LIMIT ?", "i", (int64_t)limit);
    json_t *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(rows, i, v) {
        json_t *o = row_json(m, v);
        if (o) json_array_append_new(out, o);
    }
    json_decref(rows);
    return out;
}

int selftest_wait(struct selftest_mgr *m, int64_t id, int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) { dl.tv_sec++; dl.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    for (;;) {
        int running = 0;
        for (struct st_job *j = m->jobs; j; j = j->next)
            if (j->id == id && !j->finished) running = 1;
        if (!running) break;
        if (pthread_cond_timedwait(&m->changed, &m->lock, &dl) == ETIMEDOUT) { rc = -1; break; }
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}
