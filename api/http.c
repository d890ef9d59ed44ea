/* libmicrohttpd front end: /api/v1 (JSON), /metrics (text) and the static web UI. */
#define _GNU_SOURCE
#include "api/api.h"
#include "api/auth.h"
#include "util/log.h"
#include "util/net.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct http_server {
    struct MHD_Daemon *d;
    struct appliance *app;
};

struct req {
    char *body;
    size_t len;
    int too_big;
};

static http_text_fn metrics_fn;
void http_set_metrics(http_text_fn fn) { metrics_fn = fn; }

static int queue(struct MHD_Connection *conn, int status, const char *ctype, char *data, size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    int rc = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static int queue_json(struct MHD_Connection *conn, int status, json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : strdup("");
    size_t n = strlen(s);
    char *withnl = realloc(s, n + 2);
    withnl[n] = '\n';
    withnl[n + 1] = 0;
    return queue(conn, status, "application/json", withnl, n + 1);
}

static int queue_error(struct MHD_Connection *conn, int status, const char *code, const char *msg)
{
    struct api_reply r = { 0 };
    api_error(&r, status, code, "%s", msg);
    int rc = queue_json(conn, r.status, r.json);
    json_decref(r.json);
    return rc;
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
    int rc = MHD_queue_response(conn, 200, resp);
    MHD_destroy_response(resp);
    return rc;
}

static int handle_api(struct http_server *h, struct MHD_Connection *conn, const char *method,
                      const char *path, struct req *rq)
{
    struct api_call c = { .app = h->app, .method = method, .query = query_arg, .conn = conn };
    struct api_reply r = { 0 };
    if (rq->len) {
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
    int rc;
    if (r.text) rc = queue(conn, r.status, r.content_type ? r.content_type : "text/plain", r.text, strlen(r.text));
    else rc = queue_json(conn, r.status, r.json);
    json_decref(r.json);
    char epath[NASD_LOG_ESC_SIZE(128)];
    nasd_log_escape(path, strnlen(path, 128), epath, sizeof epath);
    if (r.status >= 500) log_warn("%s /api/v1/%s -> %d", method, epath, r.status);
    else log_debug("%s /api/v1/%s -> %d", method, epath, r.status);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **ptr)
{
    struct http_server *h = cls;
    struct req *rq = *ptr;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        *ptr = rq;
        return MHD_YES;
    }
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
    if (rq->too_big) return queue_error(conn, 413, "body_too_large", "request body exceeds the limit");
    if (h->app->cfg.auth && (!strncmp(url, "/api/", 5) || !strcmp(url, "/metrics")) &&
        !auth_check_header(&h->app->db, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"))) {
        struct api_reply r = { 0 };
        api_error(&r, 401, "unauthorized", "an API token is required: Authorization: Bearer <token>");
        char *s = json_dumps(r.json, JSON_COMPACT);
        json_decref(r.json);
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(resp, "Content-Type", "application/json");
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"nasd\"");
        int rc = MHD_queue_response(conn, 401, resp);
        MHD_destroy_response(resp);
        return rc;
    }
    if (!strncmp(url, "/api/v1/", 8)) return handle_api(h, conn, method, url + 8, rq);
    if (!strcmp(url, "/api/v1") || !strncmp(url, "/api/", 5))
        return queue_error(conn, 404, "not_found", "API lives under /api/v1/");
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return queue_error(conn, 405, "method_not_allowed", "only GET here");
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
    if (rq) { free(rq->body); free(rq); }
    *ptr = NULL;
}

struct http_server *http_start(struct appliance *a, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    /* a host is required: the UI should not land on every interface by accident */
    if (a->cfg.listen[0] == ':' || nasd_parse_hostport(a->cfg.listen, &ss, &sl)) { snprintf(err, errlen, "listen: expected host:port, got %s", a->cfg.listen); return NULL; }
    struct http_server *h = calloc(1, sizeof *h);
    h->app = a;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    /* One polling thread: handlers serialise on the DB and the appliance anyway. */
    /* sin_port and sin6_port share their offset */
    h->d = MHD_start_daemon(flags, ntohs(((struct sockaddr_in *)&ss)->sin_port), NULL, NULL, on_request, h,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_CONNECTION_LIMIT, 256u,
                            MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s: %s", a->cfg.listen, strerror(errno));
        free(h);
        return NULL;
    }
    return h;
}

void http_stop(struct http_server *h)
{
    if (!h) return;
    MHD_stop_daemon(h->d);
    free(h);
}
