#pragma once
/* REST API: routing, replies, and the resource handlers under /api/v1/. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "nasd/appliance/appliance.h"

struct api_call {
    struct appliance *app;
    const char *method;        /* GET POST PATCH DELETE */
    const char *key;           /* resource key after the collection, or NULL */
    const char *action;        /* sub-resource after the key ("selftest", "scrub"), or NULL */
    json_t *body;              /* parsed JSON body (POST/PATCH), else NULL */
    const char *(*query)(void *conn, const char *name); /* query argument or NULL */
    void *conn;
    int upload_fd;             /* application/octet-stream body spooled to this file, else -1 */
};

struct api_reply {
    int status;
    json_t *json;              /* JSON body (owned) */
    char *text;                /* or a text body (malloc'd), with content_type */
    const char *content_type;
    int has_fd, fd;            /* or fd_len bytes of file fd (given away; UINT64_MAX: a pipe, to EOF) */
    uint64_t fd_len;
    char allow[48];            /* methods for an Allow header (405, OPTIONS), or "" */
    /* long work (a receive): work(work_arg) runs on a thread of its own while this
     * connection waits and the REST thread serves others; then finish, on the REST thread,
     * fills the reply (and frees work_arg) */
    void (*work)(void *arg);
    void (*finish)(struct appliance *a, void *arg, struct api_reply *r);
    void *work_arg;
};

/* A collection under /api/v1/. Handlers return nothing; they fill the reply. A NULL
 * handler means the method is not allowed (405). */
struct api_resource {
    const char *prefix;        /* "pools", "exports/iscsi" */
    int key_has_slash;         /* datasets/volumes are addressed as pool/name */
    void (*list)(struct api_call *c, struct api_reply *r);
    void (*get)(struct api_call *c, struct api_reply *r);
    void (*create)(struct api_call *c, struct api_reply *r);
    void (*patch)(struct api_call *c, struct api_reply *r);
    void (*del)(struct api_call *c, struct api_reply *r);
    void (*action)(struct api_call *c, struct api_reply *r); /* POST/GET key/action */
};

extern const struct api_resource api_pools, api_datasets, api_volumes, api_iscsi_exports,
    api_nfs_exports, api_system, api_tokens, api_snapshot_tasks, api_replication_tasks;
/* iSCSI discovery CHAP settings (api/exports_iscsi.c) for /system/settings: adds the
 * fields to a GET answer; applies a PATCH's fields (0, or -1 with the error in r). */
void api_iscsi_discovery_json(struct appliance *a, json_t *out);
int api_iscsi_discovery_patch(struct api_call *c, struct api_reply *r);

/* Register an extra collection (stats, jobs) before http_start. */
void api_register(const struct api_resource *res);
/* volumes|datasets/{pool}/{name}/snapshots[/...] and .../receive (api/snapshots.c):
 * returns 1 if path is one of those (r filled), else 0. */
int api_snapshots_dispatch(struct api_call *c, const char *path, struct api_reply *r);
/* DELETE of a volume/dataset: 409 has_snapshots (returns -1) while it has snapshots,
 * unless the request says ?force=true. Once it is gone, its snapshot and replication
 * tasks go too. */
int api_snapshots_before_delete(struct api_call *c, struct api_reply *r, const char *pool, const char *name, int is_ds);
void api_snapshots_deleted(struct appliance *a, const char *pool, const char *name, int is_ds);
/* A receive into that volume/dataset runs now: other changes to it get 409 (REST thread). */
bool api_receiving(const char *pool, const char *name, int is_ds);
/* The same for row id of table ("volumes"/"datasets"), with the 409 in r; no query while
 * no receive runs. */
bool api_receiving_row(struct appliance *a, const char *table, int64_t id, struct api_reply *r);
/* Waits (at most 10 s) for snapshot streams still being produced; after the HTTP stop. */
void api_snapshots_drain(void);
/* Route an /api/v1/... request (path without the prefix). */
void api_dispatch(struct api_call *c, const char *path, struct api_reply *r);

/* Fill r with {"error":{"code":code,"message":...}}. */
void api_error(struct api_reply *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Map a -errno from storage/services to a status + error code. */
void api_errno(struct api_reply *r, int neg_errno, const char *msg);
void api_ok(struct api_reply *r, int status, json_t *body);

/* Body checks: the body is an object whose keys are all in allowed (NULL-terminated).
 * On failure fills r with 400 and returns -1. */
int api_body_object(struct api_call *c, struct api_reply *r, const char *const *allowed);
/* Typed field getters; missing optional fields leave *out unchanged. -1 filled r with 400. */
int api_get_str(struct api_call *c, struct api_reply *r, const char *field, int required, const char **out);
int api_get_bool(struct api_call *c, struct api_reply *r, const char *field, int *out);
int api_get_int(struct api_call *c, struct api_reply *r, const char *field, int64_t lo, int64_t hi, int64_t *out);
int api_get_size(struct api_call *c, struct api_reply *r, const char *field, int required, uint64_t *out);
int api_get_name(struct api_call *c, struct api_reply *r, const char *field, int required, const char **out);

/* Key lookup: digits -> id column, else name column(s). Returns the row id or -1
 * with 404 in r. */
int64_t api_lookup(struct api_call *c, struct api_reply *r, const char *what, const char *sql_by_id,
                   const char *sql_by_name);
/* Datasets/volumes: "pool/name" or id -> row id, or -1 with 404. */
int64_t api_lookup_pool_obj(struct api_call *c, struct api_reply *r, const char *table, const char *key);

/* GET list of datasets/volumes: select_sql (joined with pools as p, exposing full_name)
 * filtered by ?pool=, each row passed through decorate. */
json_t *api_pool_obj_list(struct api_call *c, const char *select_sql, json_t *(*decorate)(struct appliance *, json_t *));
/* Create a pool from a JSON spec (shared by POST /pools and the demo). */
void api_pool_create(struct appliance *a, json_t *body, struct api_reply *r);

/* HTTP server (libmicrohttpd) serving /api/v1, /metrics and the static UI. */
struct http_server;
struct http_server *http_start(struct appliance *a, char *err, size_t errlen);
void http_stop(struct http_server *h);
/* Extra plain-text endpoint (e.g. /metrics) registered by the monitor. */
typedef char *(*http_text_fn)(struct appliance *a, const char **content_type);
void http_set_metrics(http_text_fn fn);
