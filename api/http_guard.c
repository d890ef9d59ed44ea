/* Per-connection request deadlines for the REST server, enforced by a watchdog thread
 * that shuts the socket down (libmicrohttpd then closes the connection itself). */
#include "api/http_guard.h"
#include "util/log.h"
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

enum { PH_HEADERS, PH_BODY, PH_HANDLED };

struct gconn {
    struct gconn *prev, *next;
    int fd;
    int phase;
    double since;           /* start of the current phase */
    int killed;
};

struct http_guard {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct gconn head;      /* sentinel */
    int stop;
    pthread_t thread;
};

static struct http_guard *the_guard; /* phase calls find it without a daemon handle */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *watch(void *arg)
{
    struct http_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&g->cond, &g->lock, &ts);
        double now = now_s();
        unsigned killed = 0;
        for (struct gconn *c = g->head.next; c != &g->head; c = c->next) {
            double limit = c->phase == PH_HEADERS ? HTTP_HEADER_DEADLINE_S
                         : c->phase == PH_BODY ? HTTP_BODY_DEADLINE_S : 0;
            if (!limit || c->killed || now - c->since < limit) continue;
            shutdown(c->fd, SHUT_RDWR); /* MHD still owns the fd; it closes on the error */
            c->killed = 1;
            killed++;
        }
        if (killed)
            log_info("http: closed %u connection(s) past the request deadline (%d s headers, %d s body)",
                     killed, HTTP_HEADER_DEADLINE_S, HTTP_BODY_DEADLINE_S);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

struct http_guard *http_guard_start(void)
{
    struct http_guard *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->head.prev = g->head.next = &g->head;
    if (pthread_create(&g->thread, NULL, watch, g)) { free(g); return NULL; }
    the_guard = g;
    return g;
}

void http_guard_stop(struct http_guard *g)
{
    if (!g) return;
    pthread_mutex_lock(&g->lock);
    g->stop = 1;
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    while (g->head.next != &g->head) { /* MHD has stopped: no more notifications */
        struct gconn *c = g->head.next;
        g->head.next = c->next;
        free(c);
    }
    if (the_guard == g) the_guard = NULL;
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
    free(g);
}

void http_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    struct http_guard *g = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct gconn *c = ci ? calloc(1, sizeof *c) : NULL;
        *socket_context = c;
        if (!c) return;
        c->fd = ci->connect_fd;
        c->phase = PH_HEADERS;
        c->since = now_s();
        pthread_mutex_lock(&g->lock);
        c->next = g->head.next;
        c->prev = &g->head;
        g->head.next->prev = c;
        g->head.next = c;
        pthread_mutex_unlock(&g->lock);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct gconn *c = *socket_context;
        if (!c) return;
        pthread_mutex_lock(&g->lock); /* MHD closes the fd after this returns */
        c->prev->next = c->next;
        c->next->prev = c->prev;
        pthread_mutex_unlock(&g->lock);
        free(c);
        *socket_context = NULL;
    }
}

static void set_phase(struct MHD_Connection *conn, int phase)
{
    struct http_guard *g = the_guard;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!g || !ci || !ci->socket_context) return;
    struct gconn *c = ci->socket_context;
    pthread_mutex_lock(&g->lock);
    if (c->phase != phase) {
        c->phase = phase;
        c->since = now_s();
    }
    pthread_mutex_unlock(&g->lock);
}

void http_guard_headers_done(struct MHD_Connection *conn) { set_phase(conn, PH_BODY); }
void http_guard_body_done(struct MHD_Connection *conn) { set_phase(conn, PH_HANDLED); }
void http_guard_request_done(struct MHD_Connection *conn) { set_phase(conn, PH_HEADERS); }
