/* libmicrohttpd front end: /api/v1 (JSON), /metrics (text) and the static web UI. */
#define _GNU_SOURCE
#include "api/api.h"
#include "api/auth.h"
#include "api/http_guard.h"
#include "api/http_host.h"
#include "util/log.h"
#include "util/net.h"
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/statvfs.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

struct http_server {
    struct MHD_Daemon *d;
    struct appliance *app;
    struct http_guard *guard;
    int loopback;              /* bound to a loopback address: only loopback Host names */
    atomic_int spools;         /* snapshot streams being uploaded now */
};

/* Per IP: a browser opens about 6; the rest of the 256 stay for other clients. */
#define HTTP_MAX_CONNS 256
#define HTTP_MAX_CONNS_PER_IP 32
#define HTTP_IDLE_TIMEOUT_S 30
#define HTTP_MAX_API_PATH 1000   /* handlers split paths in 1 KiB buffers */
#define HTTP_MAX_SPOOLS 16       /* snapshot streams uploading at once (as many as receives may run; message below) */
#define HTTP_SPOOL_RESERVE (256ull << 20)   /* free space a spool leaves on its file system */

struct req {
    char *body;
    size_t len;
    int too_big;
    int answered;              /* refused from the headers alone */
    int fd;                    /* binary upload (snapshot stream) spooled to an unlinked file, else -1 */
    uint64_t spool_left;       /* bytes more the spool takes (spool_limit) */
    int stream_too_big;
    int spool_disk;            /* spool_left is what the spool's file system can hold: a cut stream gets 507 */
    int spooling;              /* counted in http_server.spools */
    /* a reply's long work (api_reply.work) on its own thread, the connection suspended */
    struct api_reply pending;
    atomic_int work_done;
    char path[HTTP_MAX_API_PATH + 1], method[16];
};

/* works running, waited for by http_stop (libmicrohttpd must not stop with a connection
 * suspended) */
static pthread_mutex_t works_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t works_cv = PTHREAD_COND_INITIALIZER;
static int works;

static http_text_fn metrics_fn;
void http_set_metrics(http_text_fn fn) { metrics_fn = fn; }

/* On every response. Images may be data: URLs (the UI's empty favicon); scripts and
 * styles only from here (the UI sets styles through CSSOM, which CSP allows). */
static void common_headers(struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                            "base-uri 'none'; form-action 'self'");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
}

static int queue_allow(struct MHD_Connection *conn, int status, const char *ctype, char *data, size_t len,
                       const char *allow)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (ctype) MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    if (allow && *allow) MHD_add_response_header(resp, "Allow", allow);
    if (status == 401) MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"nasd\"");
    common_headers(resp);
    int rc = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static int queue(struct MHD_Connection *conn, int status, const char *ctype, char *data, size_t len)
{
    return queue_allow(conn, status, ctype, data, len, NULL);
}

static int queue_json_allow(struct MHD_Connection *conn, int status, json_t *j, const char *allow)
{
    if (!j) return queue_allow(conn, status, NULL, strdup(""), 0, allow); /* 204 and friends */
    char *s = json_dumps(j, JSON_COMPACT);
    size_t n = strlen(s);
    char *withnl = realloc(s, n + 2);
    withnl[n] = '\n';
    withnl[n + 1] = 0;
    return queue_allow(conn, status, "application/json", withnl, n + 1, allow);
}

static int queue_error_allow(struct MHD_Connection *conn, int status, const char *code, const char *msg,
                             const char *allow)
{
    struct api_reply r = { 0 };
    api_error(&r, status, code, "%s", msg);
    int rc = queue_json_allow(conn, r.status, r.json, allow);
    json_decref(r.json);
    return rc;
}

static int queue_error(struct MHD_Connection *conn, int status, const char *code, const char *msg)
{
    return queue_error_allow(conn, status, code, msg, NULL);
}

static const char *query_arg(void *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
}

static const char *mime_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (!dot) return "application/octet-stream";
    static const char *map[][2] = {
        { ".html", "text/html; charset=utf-8" }, { ".js", "text/javascript; charset=utf-8" },
        { ".mjs", "text/javascript; charset=utf-8" }, { ".css", "text/css; charset=utf-8" },
        { ".json", "application/json" }, { ".svg", "image/svg+xml" }, { ".png", "image/png" },
        { ".ico", "image/x-icon" }, { ".txt", "text/plain; charset=utf-8" },
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (!strcmp(dot, map[i][0])) return map[i][1];
    return "application/octet-stream";
}

static int serve_static(struct http_server *h, struct MHD_Connection *conn, const char *url)
{
    if (strstr(url, "..") || strchr(url, '\\') || strlen(url) > 512)
        return queue_error(conn, 400, "bad_path", "invalid path");
    char path[2048];
    snprintf(path, sizeof path, "%s%s%s", h->app->cfg.web_dir, url,
             url[strlen(url) - 1] == '/' ? "index.html" : "");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0) close(fd);
        return queue_error(conn, 404, "not_found", "no such page");
    }
    struct MHD_Response *resp = MHD_create_response_from_fd(st.st_size, fd);
    MHD_add_response_header(resp, "Content-Type", mime_of(path));
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    common_headers(resp);
    int rc = MHD_queue_response(conn, 200, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* %HH in the URL and its arguments, except where the byte would be a control character
 * or '/': "%00" decoded cut a name short in the C string (DELETE .../s1%00x removed s1),
 * and "%2F" would split a name in two. Those stay as written, and a '%' in an API path
 * is refused below (no name holds one). */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls; (void)conn;
    char *w = s;
    for (const char *r = s; *r;) {
        unsigned v;
        if (r[0] == '%' && isxdigit((unsigned char)r[1]) && isxdigit((unsigned char)r[2]) &&
            sscanf(r + 1, "%2x", &v) == 1 && v >= 0x20 && v != 0x7f && v != '/') {
            *w++ = (char)v;
            r += 3;
        } else *w++ = *r++;
    }
    *w = 0;
    return (size_t)(w - s);
}

/* API paths name pools, volumes, snapshots...: printable ASCII without '%' */
static bool api_path_ok(const char *p)
{
    for (; *p; p++) if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f || *p == '%') return false;
    return true;
}

static int queue_reply(struct MHD_Connection *conn, struct api_reply *r, const char *method, const char *path);

struct work { struct MHD_Connection *conn; struct req *rq; };
static void *work_main(void *arg)
{
    struct work *w = arg;
    w->rq->pending.work(w->rq->pending.work_arg);
    atomic_store(&w->rq->work_done, 1);
    MHD_resume_connection(w->conn);   /* on_request is called again: it queues the reply */
    pthread_mutex_lock(&works_mu);
    if (--works == 0) pthread_cond_broadcast(&works_cv);
    pthread_mutex_unlock(&works_mu);
    free(w);
    return NULL;
}

static int start_work(struct http_server *h, struct MHD_Connection *conn, struct req *rq, struct api_reply *r,
                      const char *method, const char *path)
{
    struct work *w = malloc(sizeof *w);
    rq->pending = *r;
    snprintf(rq->method, sizeof rq->method, "%s", method);
    snprintf(rq->path, sizeof rq->path, "%s", path);
    if (w) {   /* suspended first: the thread may end (and resume it) at once */
        *w = (struct work){ conn, rq };
        pthread_mutex_lock(&works_mu);
        works++;
        pthread_mutex_unlock(&works_mu);
        MHD_suspend_connection(conn);
        pthread_t th;
        if (pthread_create(&th, NULL, work_main, w) == 0) { pthread_detach(th); return MHD_YES; }
        MHD_resume_connection(conn);
        pthread_mutex_lock(&works_mu);
        works--;
        pthread_mutex_unlock(&works_mu);
        free(w);
    }
    rq->pending.work = NULL;   /* no thread: the work runs here, as it did before */
    r->work(r->work_arg);
    r->work = NULL;
    r->finish(h->app, r->work_arg, r);
    return queue_reply(conn, r, method, path);
}

static int handle_api(struct http_server *h, struct MHD_Connection *conn, const char *method,
                      const char *path, struct req *rq)
{
    /* HEAD is GET without the body (libmicrohttpd drops it) */
    struct api_call c = { .app = h->app, .method = strcmp(method, "HEAD") ? method : "GET", .query = query_arg,
                          .conn = conn, .upload_fd = rq->fd };
    struct api_reply r = { 0 };
    if (rq->fd >= 0) {
        lseek(rq->fd, 0, SEEK_SET);
        c.body = json_object();
    } else if (rq->len) {
        const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
        if (!ct || strncasecmp(ct, "application/json", 16))
            return queue_error(conn, 415, "unsupported_media_type", "request body must be application/json");
        json_error_t je;
        c.body = json_loadb(rq->body, rq->len, 0, &je);
        if (!c.body) {
            char msg[300];
            snprintf(msg, sizeof msg, "malformed JSON at line %d column %d: %s", je.line, je.column, je.text);
            return queue_error(conn, 400, "malformed_json", msg);
        }
    } else if (!strcmp(method, "POST") || !strcmp(method, "PATCH")) {
        c.body = json_object(); /* an empty body is an empty object */
    }
    api_dispatch(&c, path, &r);
    json_decref(c.body);
    if (r.work) return start_work(h, conn, rq, &r, method, path);
    return queue_reply(conn, &r, method, path);
}

/* Queues r (its JSON is freed) and logs the request. */
static int queue_reply(struct MHD_Connection *conn, struct api_reply *r0, const char *method, const char *path)
{
    struct api_reply r = *r0;
    int rc;
    if (r.has_fd) {   /* a snapshot stream spooled to a file */
        struct MHD_Response *resp = r.fd_len == UINT64_MAX ? MHD_create_response_from_pipe(r.fd)
                                                          : MHD_create_response_from_fd(r.fd_len, r.fd);
        MHD_add_response_header(resp, "Content-Type", r.content_type ? r.content_type : "application/octet-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-store");
        common_headers(resp);
        rc = MHD_queue_response(conn, r.status, resp);
        MHD_destroy_response(resp);
    } else if (r.text) rc = queue_allow(conn, r.status, r.content_type ? r.content_type : "text/plain", r.text,
                                        strlen(r.text), r.allow);
    else rc = queue_json_allow(conn, r.status, r.json, r.allow);
    json_decref(r.json);
    char epath[NASD_LOG_ESC_SIZE(128)];
    nasd_log_escape(path, strnlen(path, 128), epath, sizeof epath);
    if (r.status >= 500) log_warn("%s /api/v1/%s -> %d", method, epath, r.status);
    else log_debug("%s /api/v1/%s -> %d", method, epath, r.status);
    return rc;
}

static int state_changing(const char *method)
{
    return strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "OPTIONS");
}

/* A browser's Origin on a state-changing request must be this server (scheme://Host). */
static int origin_ok(struct MHD_Connection *conn)
{
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    if (!origin) return 1;
    const char *sep = strstr(origin, "://");
    return host && sep && !strcasecmp(sep + 3, host);
}

/* Checks made once the headers are in, before any body byte is read: the answer to a
 * request that fails them costs no body upload. Returns -1 if none applies. */
/* POST .../receive with an application/octet-stream body: a snapshot stream, spooled to a
 * file instead of memory (no max_body). A plain HTML form cannot send that type either. */
static int stream_upload(struct MHD_Connection *conn, const char *url, const char *method)
{
    const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
    size_t l = strlen(url);
    return !strcmp(method, "POST") && !strncmp(url, "/api/v1/", 8) && l > 8 && !strcmp(url + l - 8, "/receive") &&
           ct && !strncasecmp(ct, "application/octet-stream", 24);
}

/* The most a snapshot stream for the URL's pool can carry and still be received: a
 * volume at most the pool's size (a dataset STORAGE_RECV_DATASET_FACTOR times it, as
 * storage_snap_receive allows) plus its per-unit records. An unknown pool: max_body
 * (its handler answers 404). */
static uint64_t spool_limit(struct http_server *h, const char *url)
{
    char kind[16], pool[64];
    uint64_t size = 0;
    if (sscanf(url, "/api/v1/%15[^/]/%63[^/]/", kind, pool) == 2) {
        json_t *st = storage_pool_status(h->app->storage, pool);
        size = (uint64_t)json_integer_value(json_object_get(st, "size"));
        json_decref(st);
        if (!strcmp(kind, "datasets")) size *= STORAGE_RECV_DATASET_FACTOR;
    }
    return size ? size + size / 1024 + (1u << 20) : h->app->cfg.max_body;
}

static int early_checks(struct http_server *h, struct MHD_Connection *conn, const char *url, const char *method)
{
    int api = !strncmp(url, "/api/", 5), metrics = !strcmp(url, "/metrics");
    if (!http_host_allowed(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host"), h->loopback, h->app->cfg.auth,
                           h->app->cfg.api_hosts))
        return queue_error(conn, 403, "forbidden_host", h->loopback ? "this server answers only to loopback host names"
                           : "without auth this server answers only to IP addresses and the names in api_hosts");
    if (!strcmp(method, "OPTIONS") && !api)
        return queue_allow(conn, 204, NULL, strdup(""), 0, "GET, HEAD, OPTIONS");
    /* OPTIONS too: it answered which objects exist (no CORS here, so no preflight needs it) */
    if (h->app->cfg.auth && (api || metrics) &&
        !auth_check_header(&h->app->db, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization")))
        return queue_error(conn, 401, "unauthorized", "an API token is required: Authorization: Bearer <token>");
    if (state_changing(method) && !origin_ok(conn))
        return queue_error(conn, 403, "forbidden_origin", "cross-origin request refused");
    if (!strncmp(url, "/api/v1/", 8)) {   /* before a body is read: no upload for a path that is refused */
        if (strlen(url + 8) > HTTP_MAX_API_PATH) return queue_error(conn, 414, "uri_too_long", "the URL path is too long");
        if (!api_path_ok(url + 8))
            return queue_error(conn, 400, "bad_path", "the URL path holds characters no name can have "
                               "(control characters, %00, %2F, non-ASCII)");
    }
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > h->app->cfg.max_body && !stream_upload(conn, url, method))
        return queue_error(conn, 413, "body_too_large", "request body exceeds the limit");
    if (api && (!strcmp(method, "POST") || !strcmp(method, "PATCH"))) {
        /* a plain HTML form cannot send either: no cross-site POST, even with an empty body */
        const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
        int json = ct && !strncasecmp(ct, "application/json", 16);
        if (!json && !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Requested-With") &&
            !stream_upload(conn, url, method))
            return queue_error(conn, 415, "unsupported_media_type",
                               "request must be Content-Type: application/json (or carry X-Requested-With)");
    }
    return -1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **ptr)
{
    struct http_server *h = cls;
    struct req *rq = *ptr;
    if (rq && rq->pending.work) {   /* called again after the long work's resume */
        if (!atomic_load(&rq->work_done)) return MHD_YES;
        struct api_reply r = rq->pending;
        r.work = NULL;
        rq->pending.work = NULL;
        r.finish(h->app, r.work_arg, &r);
        return queue_reply(conn, &r, rq->method, rq->path);
    }
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        rq->fd = -1;
        *ptr = rq;
        http_guard_headers_done(conn);
        int rc = early_checks(h, conn, url, method);
        if (rc >= 0) { rq->answered = 1; return rc; }
        if (stream_upload(conn, url, method)) {   /* authorised already: spool it, up to its pool's size */
            if (atomic_fetch_add(&h->spools, 1) >= HTTP_MAX_SPOOLS) {
                atomic_fetch_sub(&h->spools, 1);
                rq->answered = 1;
                return queue_error(conn, 503, "busy", "16 snapshot streams are being received; try again later");
            }
            rq->spooling = 1;
            if ((rq->fd = open(h->app->cfg.state_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0)
                rq->fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
            if (rq->fd < 0) return MHD_NO;
            rq->spool_left = spool_limit(h, url);
            /* and what its file system can hold beside everything else on it */
            struct statvfs sv;
            uint64_t room = fstatvfs(rq->fd, &sv) ? UINT64_MAX : (uint64_t)sv.f_bavail * sv.f_frsize;
            room = room > HTTP_SPOOL_RESERVE ? room - HTTP_SPOOL_RESERVE : 0;
            if (room < rq->spool_left) { rq->spool_left = room; rq->spool_disk = 1; }
            /* a stream may take minutes: no body deadline, only the idle timeout (a byte every 30 s) */
            http_guard_body_done(conn);
        }
        return MHD_YES;
    }
    if (*upload_size && rq->fd >= 0 && !rq->answered) {
        if (*upload_size > rq->spool_left) {   /* no more disk for it: the rest is dropped */
            close(rq->fd); rq->fd = -1; rq->too_big = rq->stream_too_big = 1;
        } else rq->spool_left -= *upload_size;
        for (const char *p = upload; rq->fd >= 0 && p < upload + *upload_size;) {
            ssize_t n = write(rq->fd, p, upload + *upload_size - p);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) { close(rq->fd); rq->fd = -1; rq->too_big = 1; break; }
            p += n;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (rq->answered) { *upload_size = 0; return MHD_YES; } /* rest of a refused body: dropped */
    if (*upload_size) {
        if (rq->len + *upload_size > h->app->cfg.max_body) {
            rq->too_big = 1;
        } else if (!rq->too_big) {
            char *nb = realloc(rq->body, rq->len + *upload_size + 1);
            if (!nb) return MHD_NO;
            rq->body = nb;
            memcpy(rq->body + rq->len, upload, *upload_size);
            rq->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    http_guard_body_done(conn);
    if (rq->stream_too_big && rq->spool_disk)
        return queue_error(conn, 507, "insufficient_storage", "no room to take the stream in: the file system of "
                           "the state directory is full");
    if (rq->stream_too_big)
        return queue_error(conn, 413, "body_too_large", "the stream is larger than its pool could receive");
    if (rq->too_big) return queue_error(conn, 413, "body_too_large", "request body exceeds the limit");
    if (!strncmp(url, "/api/v1/", 8)) return handle_api(h, conn, method, url + 8, rq);
    if (!strcmp(url, "/api/v1") || !strncmp(url, "/api/", 5))
        return queue_error(conn, 404, "not_found", "API lives under /api/v1/");
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return queue_error_allow(conn, 405, "method_not_allowed", "only GET here", "GET, HEAD, OPTIONS");
    if (!strcmp(url, "/metrics")) {
        if (!metrics_fn) return queue_error(conn, 404, "not_found", "metrics not enabled");
        const char *ct = "text/plain; version=0.0.4";
        char *t = metrics_fn(h->app, &ct);
        return queue(conn, 200, ct, t, strlen(t));
    }
    return serve_static(h, conn, url);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **ptr, enum MHD_RequestTerminationCode toe)
{
    struct req *rq = *ptr;
    if (rq && rq->pending.work) {   /* the client left while its work ran: finish it all the same */
        struct api_reply r = rq->pending;
        r.finish(((struct http_server *)cls)->app, r.work_arg, &r);
        json_decref(r.json);
        free(r.text);
    }
    if (rq && rq->spooling) atomic_fetch_sub(&((struct http_server *)cls)->spools, 1);
    if (rq) { if (rq->fd >= 0) close(rq->fd); free(rq->body); free(rq); }
    *ptr = NULL;
    http_guard_request_done(conn);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n') msg[--n] = 0;
    log_warn("http: %s", msg); /* rate-limited like every log line: EMFILE cannot flood */
}

static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return 0;
}

struct http_server *http_start(struct appliance *a, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    /* a host is required: the UI should not land on every interface by accident */
    if (a->cfg.listen[0] == ':' || nasd_parse_hostport(a->cfg.listen, &ss, &sl)) { snprintf(err, errlen, "listen: expected host:port, got %s", a->cfg.listen); return NULL; }
    struct http_server *h = calloc(1, sizeof *h);
    h->app = a;
    h->loopback = is_loopback(&ss);
    h->guard = http_guard_start();
    if (!h->guard) { snprintf(err, errlen, "cannot start the HTTP watchdog"); free(h); return NULL; }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    /* One polling thread: handlers serialise on the DB and the appliance anyway. */
    /* sin_port and sin6_port share their offset */
    h->d = MHD_start_daemon(flags, ntohs(((struct sockaddr_in *)&ss)->sin_port), NULL, NULL, on_request, h,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, /* first, or MHD logs before it */
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, http_guard_notify, h->guard,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNS_PER_IP,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT_S,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s: %s", a->cfg.listen, strerror(errno));
        http_guard_stop(h->guard);
        free(h);
        return NULL;
    }
    return h;
}

void http_stop(struct http_server *h)
{
    if (!h) return;
    pthread_mutex_lock(&works_mu);   /* each resumes its connection when it ends */
    while (works) pthread_cond_wait(&works_cv, &works_mu);
    pthread_mutex_unlock(&works_mu);
    MHD_stop_daemon(h->d);
    api_snapshots_drain();   /* their readers are gone: they end at the next write */
    http_guard_stop(h->guard);
    free(h);
}
