/* /api/v1/{volumes|datasets}/{pool}/{name}/snapshots[/{snap}[/rollback|clone|send]] and
 * .../receive: snapshots live in the pool (listed from it, so they survive an import
 * into a fresh database); clones and received copies get a volume/dataset row. */
#define _GNU_SOURCE
#include "api/api.h"
#include "api/validate.h"
#include "util/log.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct target {
    int is_ds;
    char pool[64], name[64];
    int64_t id;          /* volumes/datasets row */
    const char *snap;    /* path segment, or NULL */
};

static void snap_error(struct api_reply *r, int rc, const char *msg)
{
    switch (-rc) {
    case ENOTEMPTY: api_error(r, 409, "newer_snapshots", "%s", msg); break;
    case ESTALE: api_error(r, 409, "base_mismatch", "%s", msg); break;
    case EBADMSG: case EPIPE: api_error(r, 400, "bad_stream", "%s", msg); break;
    case EROFS: api_error(r, 409, "read_only", "%s", msg); break;
    case EOPNOTSUPP: api_error(r, 409, "not_supported", "%s", msg); break;
    default: api_errno(r, rc, msg);
    }
}

static const char *table(const struct target *t) { return t->is_ds ? "datasets" : "volumes"; }

/* Live exports of the object (not of its snapshots), or of one snapshot. */
static int64_t exports_of(struct appliance *a, const struct target *t, const char *snap)
{
    if (t->is_ds)
        return snap ? db_int(&a->db, 0, "SELECT count(*) FROM nfs_exports WHERE dataset_id=? AND snapshot=?", "is", t->id, snap)
                    : db_int(&a->db, 0, "SELECT count(*) FROM nfs_exports WHERE dataset_id=? AND snapshot IS NULL", "i", t->id);
    return snap ? db_int(&a->db, 0, "SELECT count(*) FROM iscsi_luns WHERE volume_id=? AND snapshot=?", "is", t->id, snap)
                : db_int(&a->db, 0, "SELECT count(*) FROM iscsi_luns WHERE volume_id=? AND snapshot IS NULL", "i", t->id);
}

static json_t *decorate(struct appliance *a, const struct target *t, json_t *s)
{
    const char *n = json_string_value(json_object_get(s, "name"));
    json_object_set_new(s, t->is_ds ? "dataset" : "volume", json_sprintf("%s/%s", t->pool, t->name));
    json_object_set_new(s, "exports", json_integer(exports_of(a, t, n)));
    return s;
}

static void list(struct api_call *c, struct target *t, struct api_reply *r)
{
    int e = 0;
    json_t *arr = storage_snap_list(c->app->storage, t->pool, t->name, t->is_ds, &e);
    if (!arr) { snap_error(r, e, "cannot list snapshots"); return; }
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) decorate(c->app, t, v);
    api_ok(r, 200, arr);
}

static void get_one(struct api_call *c, struct target *t, struct api_reply *r, int status)
{
    int e = 0;
    json_t *s = storage_snap_get(c->app->storage, t->pool, t->name, t->is_ds, t->snap, &e);
    if (!s) { api_error(r, 404, "not_found", "snapshot %s/%s@%s not found", t->pool, t->name, t->snap); return; }
    api_ok(r, status, decorate(c->app, t, s));
}

static void create(struct api_call *c, struct target *t, struct api_reply *r)
{
    static const char *const allowed[] = { "name", NULL };
    const char *name = NULL;
    char err[512];
    if (api_body_object(c, r, allowed) || api_get_name(c, r, "name", 1, &name)) return;
    int rc = storage_snap_create(c->app->storage, t->pool, t->name, t->is_ds, name, err, sizeof err);
    if (rc) { snap_error(r, rc, err); return; }
    log_info("snapshot %s/%s@%s created", t->pool, t->name, name);
    t->snap = name;
    get_one(c, t, r, 201);
}

static void del(struct api_call *c, struct target *t, struct api_reply *r)
{
    char err[512];
    if (exports_of(c->app, t, t->snap)) {
        api_error(r, 409, "in_use", "snapshot %s@%s is exported; remove the export first", t->name, t->snap);
        return;
    }
    int rc = storage_snap_destroy(c->app->storage, t->pool, t->name, t->is_ds, t->snap, err, sizeof err);
    if (rc) { snap_error(r, rc, err); return; }
    log_info("snapshot %s/%s@%s destroyed", t->pool, t->name, t->snap);
    api_ok(r, 204, NULL);
}

/* The live NFS exports of a dataset stop while its filesystem is swapped underneath. */
static json_t *nfs_exports_of(struct appliance *a, const struct target *t)
{
    return db_rows(&a->db, "SELECT id FROM nfs_exports WHERE dataset_id=? AND snapshot IS NULL", "i", t->id);
}

/* The object's row as the pool has it after a receive or a rollback: its size (a volume)
 * and compression. */
static void sync_row(struct appliance *a, const struct target *t)
{
    json_t *list = t->is_ds ? storage_pool_datasets(a->storage, t->pool) : storage_pool_volumes(a->storage, t->pool);
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        if (strcmp(json_string_value(json_object_get(v, "name")), t->name)) continue;
        const char *comp = json_is_true(json_object_get(v, "lz4")) ? "lz4" : "off";
        if (t->is_ds) db_exec(&a->db, NULL, "UPDATE datasets SET compression=? WHERE id=?", "si", comp, t->id);
        else db_exec(&a->db, NULL, "UPDATE volumes SET size=?, compression=? WHERE id=?", "isi",
                     (int64_t)json_integer_value(json_object_get(v, "size")), comp, t->id);
        break;
    }
    json_decref(list);
}

static void rollback(struct api_call *c, struct target *t, struct api_reply *r)
{
    static const char *const allowed[] = { "force", NULL };
    int force = 0;
    char err[512];
    if (api_body_object(c, r, allowed) || api_get_bool(c, r, "force", &force)) return;
    struct appliance *a = c->app;
    if (!force && exports_of(a, t, NULL)) {
        api_error(r, 409, "in_use", "%s/%s is exported; clients would see data change under them "
                  "(remove the export, or pass \"force\": true)", t->pool, t->name);
        return;
    }
    /* what the rollback would refuse, refused before the exports stop (clients keep them) */
    int e = 0;
    json_t *list = storage_snap_list(a->storage, t->pool, t->name, t->is_ds, &e);
    size_t n = json_array_size(list);
    const char *newest = n ? json_string_value(json_object_get(json_array_get(list, n - 1), "name")) : NULL;
    int known = 0;
    for (size_t k = 0; k < n; k++) known |= !strcmp(json_string_value(json_object_get(json_array_get(list, k), "name")), t->snap);
    if (!list) snap_error(r, e, "cannot list the snapshots");
    else if (!known) api_error(r, 404, "not_found", "snapshot %s/%s@%s not found", t->pool, t->name, t->snap);
    else if (strcmp(newest, t->snap))
        api_error(r, 409, "newer_snapshots", "rollback %s/%s@%s: newer snapshots exist (%s is the newest); delete them first",
                  t->pool, t->name, t->snap, newest);
    json_decref(list);
    if (r->status) return;
    json_t *ex = t->is_ds ? nfs_exports_of(a, t) : NULL;
    size_t i;
    json_t *v;
    json_array_foreach(ex, i, v) appliance_remove_export(a, EXPORT_NFS, json_integer_value(json_object_get(v, "id")));
    int rc = storage_snap_rollback(a->storage, t->pool, t->name, t->is_ds, t->snap, err, sizeof err);
    json_array_foreach(ex, i, v) {
        char e2[256];
        if (appliance_apply_export(a, EXPORT_NFS, json_integer_value(json_object_get(v, "id")), e2, sizeof e2))
            log_warn("re-applying NFS export after rollback: %s", e2);
    }
    json_decref(ex);
    if (rc) { snap_error(r, rc, err); return; }
    sync_row(a, t);   /* the snapshot's size again */
    log_info("%s %s/%s rolled back to %s%s", t->is_ds ? "dataset" : "volume", t->pool, t->name, t->snap,
             force ? " (forced)" : "");
    get_one(c, t, r, 200);
}

/* A row for a volume/dataset that now exists in the pool (clone, receive). */
static int64_t add_row(struct appliance *a, const struct target *t, const char *name, uint64_t size, const char *comment,
                       struct api_reply *r)
{
    int64_t pool_id = db_int(&a->db, -1, "SELECT id FROM pools WHERE name=?", "s", t->pool), id = -1;
    json_t *o = db_row(&a->db, t->is_ds ? "SELECT compression, quota FROM datasets WHERE id=?"
                                        : "SELECT compression, block_size FROM volumes WHERE id=?", "i", t->id);
    const char *comp = o ? json_string_value(json_object_get(o, "compression")) : "off";
    int rc = t->is_ds
        ? db_exec(&a->db, &id, "INSERT INTO datasets(pool_id, name, quota, compression, comment, created) VALUES(?,?,?,?,?,?)",
                  "isissi", pool_id, name, (int64_t)(o ? json_integer_value(json_object_get(o, "quota")) : 0), comp ? comp : "off",
                  comment, (int64_t)time(NULL))
        : db_exec(&a->db, &id, "INSERT INTO volumes(pool_id, name, size, block_size, compression, comment, created) "
                  "VALUES(?,?,?,?,?,?,?)", "isiissi", pool_id, name, (int64_t)size,
                  (int64_t)(o ? json_integer_value(json_object_get(o, "block_size")) : 512), comp ? comp : "off", comment,
                  (int64_t)time(NULL));
    json_decref(o);
    if (rc) { api_error(r, 500, "db", "%s", db_errmsg(&a->db)); return -1; }
    return id;
}

static void snap_clone(struct api_call *c, struct target *t, struct api_reply *r)
{
    static const char *const allowed[] = { "name", "comment", NULL };
    const char *name = NULL, *comment = "";
    char err[512];
    if (api_body_object(c, r, allowed) || api_get_name(c, r, "name", 1, &name) || api_get_str(c, r, "comment", 0, &comment))
        return;
    struct appliance *a = c->app;
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT t.id FROM %s t JOIN pools p ON p.id=t.pool_id WHERE p.name=? AND t.name=?", table(t));
    if (db_int(&a->db, -1, sql, "ss", t->pool, name) >= 0) {
        api_error(r, 409, "exists", "%s %s/%s exists", t->is_ds ? "dataset" : "volume", t->pool, name);
        return;
    }
    int e = 0;
    json_t *s = storage_snap_get(a->storage, t->pool, t->name, t->is_ds, t->snap, &e);
    if (!s) { api_error(r, 404, "not_found", "snapshot %s/%s@%s not found", t->pool, t->name, t->snap); return; }
    uint64_t size = (uint64_t)json_integer_value(json_object_get(s, "size"));
    json_decref(s);
    int rc = storage_snap_clone(a->storage, t->pool, t->name, t->is_ds, t->snap, name, err, sizeof err);
    if (rc) { snap_error(r, rc, err); return; }
    int64_t id = add_row(a, t, name, size, comment, r);
    if (id < 0) return;
    log_info("%s/%s cloned from %s@%s", t->pool, name, t->name, t->snap);
    api_ok(r, 201, json_pack("{s:I, s:s, s:s, s:s, s:s}", "id", (json_int_t)id, "pool", t->pool, "name", name,
                             "origin", t->name, "origin_snapshot", t->snap));
}

/* The stream is produced by a thread into a pipe the HTTP server reads: nothing is
 * spooled, and the server thread is not held while the units are read. An error after
 * the start cuts the stream, which the receiver detects (no valid trailer). */
struct sender { struct storage *st; int is_ds, fd; char pool[64], name[64], snap[64], from[64]; };
static atomic_int senders;   /* running sender threads: the daemon waits for them at stop */

void api_snapshots_drain(void)
{
    for (int i = 0; i < 1000 && atomic_load(&senders); i++) usleep(10000);
}

static void *sender_main(void *arg)
{
    struct sender *s = arg;
    char err[512];
    if (storage_snap_send(s->st, s->pool, s->name, s->is_ds, s->snap, s->from[0] ? s->from : NULL, s->fd, err, sizeof err))
        log_warn("send %s/%s@%s: %s", s->pool, s->name, s->snap, err);
    close(s->fd);
    free(s);
    atomic_fetch_sub(&senders, 1);
    return NULL;
}

static void snap_send(struct api_call *c, struct target *t, struct api_reply *r)
{
    const char *from = c->query ? c->query(c->conn, "from") : NULL;
    if (from && !*from) from = NULL;
    int e = 0;
    json_t *list = storage_snap_list(c->app->storage, t->pool, t->name, t->is_ds, &e);
    int at = -1, fat = -1;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {   /* oldest first */
        const char *n = json_string_value(json_object_get(v, "name"));
        if (!strcmp(n, t->snap)) at = (int)i;
        if (from && !strcmp(n, from)) fat = (int)i;
    }
    json_decref(list);
    if (at < 0) { api_error(r, 404, "not_found", "snapshot %s/%s@%s not found", t->pool, t->name, t->snap); return; }
    if (from && fat < 0) { api_error(r, 404, "not_found", "snapshot %s/%s@%s not found", t->pool, t->name, from); return; }
    if (from && fat >= at) { api_error(r, 400, "invalid", "from (%s) must be older than %s", from, t->snap); return; }
    int p[2];
    struct sender *s = calloc(1, sizeof *s);
    if (!s || pipe2(p, O_CLOEXEC) < 0) { free(s); api_error(r, 500, "internal", "%s", strerror(errno)); return; }
    *s = (struct sender){ .st = c->app->storage, .is_ds = t->is_ds, .fd = p[1] };
    snprintf(s->pool, sizeof s->pool, "%s", t->pool);
    snprintf(s->name, sizeof s->name, "%s", t->name);
    snprintf(s->snap, sizeof s->snap, "%s", t->snap);
    snprintf(s->from, sizeof s->from, "%s", from ? from : "");
    pthread_t th;
    pthread_attr_t at_;
    pthread_attr_init(&at_);
    pthread_attr_setdetachstate(&at_, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&senders, 1);
    int rc = pthread_create(&th, &at_, sender_main, s);
    pthread_attr_destroy(&at_);
    if (rc) atomic_fetch_sub(&senders, 1);
    if (rc) { close(p[0]); close(p[1]); free(s); api_error(r, 500, "internal", "%s", strerror(rc)); return; }
    r->status = 200;
    r->has_fd = 1;
    r->fd = p[0];
    r->fd_len = UINT64_MAX;   /* a pipe: until the sender closes it */
    r->content_type = "application/octet-stream";
}

/* ?name=1 or ?name=true */
static int query_true(struct api_call *c, const char *name)
{
    const char *q = c->query ? c->query(c->conn, name) : NULL;
    return q && (!strcmp(q, "1") || !strcmp(q, "true"));
}

/* Receives running (pool, name, kind; REST thread only): their objects take no other
 * change meanwhile (api_receiving). */
#define RECV_MAX 16
static struct target receiving[RECV_MAX];
static int nreceiving;

static int receiving_at(const char *pool, const char *name, int is_ds)
{
    for (int i = 0; i < nreceiving; i++)
        if (receiving[i].is_ds == is_ds && !strcmp(receiving[i].pool, pool) && !strcmp(receiving[i].name, name)) return i;
    return -1;
}

bool api_receiving(const char *pool, const char *name, int is_ds) { return receiving_at(pool, name, is_ds) >= 0; }

bool api_receiving_row(struct appliance *a, const char *table, int64_t id, struct api_reply *r)
{
    if (!nreceiving) return false;
    int is_ds = strcmp(table, "volumes") != 0;
    json_t *row = db_row(&a->db, is_ds ? "SELECT p.name AS pool, t.name FROM datasets t JOIN pools p ON p.id=t.pool_id WHERE t.id=?"
                                       : "SELECT p.name AS pool, t.name FROM volumes t JOIN pools p ON p.id=t.pool_id WHERE t.id=?",
                         "i", id);
    const char *pn = json_string_value(json_object_get(row, "pool")), *on = json_string_value(json_object_get(row, "name"));
    bool busy = pn && on && api_receiving(pn, on, is_ds);
    if (busy) api_error(r, 409, "receiving", "a receive into %s/%s is running", pn, on);
    json_decref(row);
    return busy;
}

struct recv_job {
    struct target t;
    struct storage *st;
    int fd, force, rc;
    bool created;
    char bq[8], err[512], snap[64];
};

/* on its own thread (api_reply.work): the stream into the pool */
static void recv_work(void *arg)
{
    struct recv_job *j = arg;
    const char *d = getenv("NASD_TEST_RECEIVE_DELAY_MS");   /* tests: a receive that lasts */
    if (d) usleep((useconds_t)atoi(d) * 1000);
    j->rc = storage_snap_receive(j->st, j->t.pool, j->t.name, j->t.is_ds, j->fd, j->force, j->snap, j->err, sizeof j->err);
}

/* back on the REST thread: the object's row and the reply */
static void recv_finish(struct appliance *a, void *arg, struct api_reply *r)
{
    struct recv_job *j = arg;
    struct target *t = &j->t;
    int at = receiving_at(t->pool, t->name, t->is_ds);
    if (at >= 0) receiving[at] = receiving[--nreceiving];
    if (j->rc) snap_error(r, j->rc, *j->err ? j->err : strerror(-j->rc));
    else if (t->id >= 0 || (t->id = add_row(a, t, t->name, 0, "received", r)) >= 0) {
        sync_row(a, t);   /* an incremental may grow it; the engine took the source's flags */
        if (!t->is_ds && *j->bq && j->created)   /* an existing copy keeps its own (its LUNs use it) */
            db_exec(&a->db, NULL, "UPDATE volumes SET block_size=? WHERE id=?", "ii", (int64_t)atoi(j->bq), t->id);
        log_info("received %s/%s@%s", t->pool, t->name, j->snap);
        t->snap = j->snap;
        struct api_call c = { .app = a };
        get_one(&c, t, r, 201);
    }
    free(j);
}

/* Checks what it can at once, then applies the stream on a thread of its own: the REST
 * thread serves other calls meanwhile (a GiB takes seconds). */
static void receive(struct api_call *c, struct target *t, struct api_reply *r)
{
    struct appliance *a = c->app;
    if (c->upload_fd < 0) {
        api_error(r, 415, "unsupported_media_type", "send the stream as application/octet-stream");
        return;
    }
    int force = query_true(c, "force");
    /* a pool volume without a row here is what an interrupted receive left (an import adds
     * rows for all others): replace it (the engine still refuses one with snapshots) */
    if (t->id < 0) force = 1;
    if (t->id >= 0 && exports_of(a, t, NULL)) {
        api_error(r, 409, "in_use", "%s/%s is exported; a replica must not be", t->pool, t->name);
        return;
    }
    /* the source's logical block size (not in the stream): replication passes it */
    const char *bq = c->query ? c->query(c->conn, "block_size") : NULL;
    if (bq && strcmp(bq, "512") && strcmp(bq, "4096")) {
        api_error(r, 400, "invalid_field", "block_size must be 512 or 4096");
        return;
    }
    if (nreceiving == RECV_MAX) { api_error(r, 503, "busy", "%d receives are running; try again", RECV_MAX); return; }
    struct recv_job *j = calloc(1, sizeof *j);
    if (!j) { api_error(r, 500, "internal", "out of memory"); return; }
    *j = (struct recv_job){ .t = *t, .st = a->storage, .fd = c->upload_fd, .force = force, .created = t->id < 0 };
    j->t.snap = NULL;
    if (bq) snprintf(j->bq, sizeof j->bq, "%s", bq);
    receiving[nreceiving++] = j->t;
    r->work = recv_work;
    r->finish = recv_finish;
    r->work_arg = j;
}

int api_snapshots_before_delete(struct api_call *c, struct api_reply *r, const char *pool, const char *name, int is_ds)
{
    struct appliance *a = c->app;
    int e = 0, force = query_true(c, "force");
    json_t *list = storage_snap_list(a->storage, pool, name, is_ds, &e);
    size_t n = json_array_size(list);
    if (n && !force) {
        api_error(r, 409, "has_snapshots", "%s/%s has %zu snapshot%s (the newest: %s); delete them first, or DELETE with "
                  "?force=true to destroy them with it", pool, name, n, n > 1 ? "s" : "",
                  json_string_value(json_object_get(json_array_get(list, n - 1), "name")));
        json_decref(list);
        return -1;
    }
    json_decref(list);
    return 0;
}

void api_snapshots_deleted(struct appliance *a, const char *pool, const char *name, int is_ds)
{
    const char *kind = is_ds ? "dataset" : "volume";
    db_exec(&a->db, NULL, "DELETE FROM snapshot_tasks WHERE kind=? AND pool=? AND name=?", "sss", kind, pool, name);
    db_exec(&a->db, NULL, "DELETE FROM replication_tasks WHERE kind=? AND pool=? AND name=?", "sss", kind, pool, name);
}

int api_snapshots_dispatch(struct api_call *c, const char *path, struct api_reply *r)
{
    char buf[1024], *seg[8];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", path);
    size_t l = strlen(buf);
    while (l && buf[l - 1] == '/') buf[--l] = 0;
    for (char *s = buf, *save = NULL, *tok; n < 8 && (tok = strtok_r(s, "/", &save)); s = NULL) seg[n++] = tok;
    if (n < 4 || (strcmp(seg[0], "volumes") && strcmp(seg[0], "datasets")) ||
        (strcmp(seg[3], "snapshots") && strcmp(seg[3], "receive")))
        return 0;
    struct target t = { .is_ds = !strcmp(seg[0], "datasets"), .id = -1 };
    if (strlen(seg[1]) >= sizeof t.pool || strlen(seg[2]) >= sizeof t.name) {
        api_error(r, 404, "not_found", "no such %s", seg[0]);
        return 1;
    }
    snprintf(t.pool, sizeof t.pool, "%s", seg[1]);
    snprintf(t.name, sizeof t.name, "%s", seg[2]);
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT t.id FROM %s t JOIN pools p ON p.id=t.pool_id WHERE p.name=? AND t.name=?", table(&t));
    t.id = db_int(&c->app->db, -1, sql, "ss", t.pool, t.name);
    const char *m = c->method;
    bool is_recv = !strcmp(seg[3], "receive");
    if (is_recv && n == 4 && !strcmp(m, "POST")) {
        char err[256];
        if (db_int(&c->app->db, -1, "SELECT id FROM pools WHERE name=?", "s", t.pool) < 0)
            api_error(r, 404, "not_found", "pool \"%s\" not found", t.pool);
        else if (valid_name(t.name, err, sizeof err)) api_error(r, 400, "invalid_field", "name: %s", err);
        else if (api_receiving(t.pool, t.name, t.is_ds))
            api_error(r, 409, "receiving", "a receive into %s/%s is running", t.pool, t.name);
        else receive(c, &t, r);
        return 1;
    }
    if (t.id < 0) { api_error(r, 404, "not_found", "%s %s/%s not found", t.is_ds ? "dataset" : "volume", t.pool, t.name); return 1; }
    if (strcmp(m, "GET") && api_receiving(t.pool, t.name, t.is_ds)) {
        api_error(r, 409, "receiving", "a receive into %s/%s is running", t.pool, t.name);
        return 1;
    }
    if (is_recv || n > 6) { api_error(r, 404, "not_found", "no such API path"); return 1; }
    t.snap = n >= 5 ? seg[4] : NULL;
    const char *act = n == 6 ? seg[5] : NULL;
    void (*h)(struct api_call *, struct target *, struct api_reply *) = NULL;
    if (!t.snap) h = !strcmp(m, "GET") ? list : !strcmp(m, "POST") ? create : NULL;
    else if (!act) h = !strcmp(m, "GET") ? NULL : !strcmp(m, "DELETE") ? del : NULL;
    else if (!strcmp(act, "rollback")) h = !strcmp(m, "POST") ? rollback : NULL;
    else if (!strcmp(act, "clone")) h = !strcmp(m, "POST") ? snap_clone : NULL;
    else if (!strcmp(act, "send")) h = !strcmp(m, "GET") ? snap_send : NULL;
    else { api_error(r, 404, "not_found", "no such snapshot action \"%s\"", act); return 1; }
    if (t.snap && !act && !strcmp(m, "GET")) { get_one(c, &t, r, 200); return 1; }
    if (!h) { api_error(r, 405, "method_not_allowed", "%s not allowed on /api/v1/%s", m, path); return 1; }
    h(c, &t, r);
    return 1;
}
