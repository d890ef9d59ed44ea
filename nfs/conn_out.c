/* A connection's reply output: the send buffer and its bounds (a client that does not
 * read its replies is dropped), reading paused and resumed by what is queued, and the
 * corked sends of a worker's batch. */
#define _GNU_SOURCE
#include "nfs/internal.h"
#include "util/log.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* A client that sends calls but does not read replies is dropped once this much output
 * is queued for it, or, while all connections together hold OUT_TOTAL_MAX_BYTES, once it
 * has more than OUT_FAIR_BYTES queued (so a client that reads is never the one dropped).
 * Calls already read keep producing replies after reading pauses: up to
 * CONN_MAX_INFLIGHT replies of 1 MiB each. */
#define OUT_MAX_BYTES (64u << 20)
#define OUT_TOTAL_MAX_BYTES (128u << 20)
#define OUT_FAIR_BYTES (2u << 20)

/* Records c's queued output, here and in the server-wide total; caller holds send_lock. */
static void set_queued(struct nfs_conn *c, size_t n)
{
    size_t old = atomic_exchange(&c->out_queued, n);
    if (n >= old) atomic_fetch_add(&c->srv->out_total, n - old);
    else atomic_fetch_sub(&c->srv->out_total, old - n);
}

void nfs_conn_put(struct nfs_conn *c)
{
    if (c && atomic_fetch_sub(&c->refs, 1) == 1) {
        if (c->srv) set_queued(c, 0);
        close(c->fd);
        rm_free(&c->rm);
        free(c->stash);
        free(c->out);
        pthread_mutex_destroy(&c->send_lock);
        free(c);
    }
}

void nfs_conn_kill(struct nfs_conn *c)
{
    if (atomic_exchange(&c->dead, 1)) return;
    shutdown(c->fd, SHUT_RDWR); /* wakes the network thread with EPOLLHUP */
}

size_t nfs_out_pending(const struct nfs_conn *c) { return c->out_len - c->out_off; }

/* Registers the events the connection needs now; caller holds send_lock. */
void nfs_conn_update_events_locked(struct nfs_conn *c)
{
    if (atomic_load(&c->dead)) return;
    /* a stash to parse: EPOLLOUT brings the network loop back to it (no bytes may come) */
    uint32_t ev = (atomic_load(&c->paused) ? 0 : EPOLLIN | EPOLLRDHUP | (atomic_load(&c->has_stash) ? EPOLLOUT : 0)) |
                  (nfs_out_pending(c) ? EPOLLOUT : 0);
    if (ev == c->ep_events) return;
    c->ep_events = ev;
    struct epoll_event e = { .events = ev, .data.ptr = c };
    epoll_ctl(c->srv->epfd, EPOLL_CTL_MOD, c->fd, &e);
}

int nfs_conn_may_resume(const struct nfs_conn *c)
{
    return atomic_load(&c->inflight) < CONN_RESUME_INFLIGHT && nfs_out_pending(c) < OUT_PAUSE_BYTES / 2;
}

/* Resumes reading if the connection was paused and has drained; any thread. */
void nfs_conn_maybe_resume(struct nfs_conn *c)
{
    if (!atomic_load(&c->paused)) return;
    pthread_mutex_lock(&c->send_lock);
    if (atomic_load(&c->paused) && nfs_conn_may_resume(c)) {
        atomic_store(&c->paused, 0);
        nfs_conn_update_events_locked(c);
    }
    pthread_mutex_unlock(&c->send_lock);
}

/* Writes out as much as the socket takes; caller holds send_lock. -1 on error. */
static int send_some(struct nfs_conn *c, const uint8_t *p, size_t len, size_t *off)
{
    while (*off < len) {
        ssize_t n = send(c->fd, p + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) { *off += (size_t)n; atomic_store(&c->last_io_ns, nasd_now_ns()); continue; }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        return -1;
    }
    return 0;
}

/* Never blocks: what the socket does not take is queued and flushed by the
 * network thread on EPOLLOUT, so a client that stops reading only stalls itself. */
static void conn_send_bytes(struct nfs_conn *c, const uint8_t *buf, size_t len)
{
    pthread_mutex_lock(&c->send_lock);
    size_t off = 0;
    if (atomic_load(&c->dead)) goto out;
    if (!nfs_out_pending(c) && send_some(c, buf, len, &off) < 0) { nfs_conn_kill(c); goto out; }
    if (off < len) {
        size_t rest = len - off;
        if (nfs_out_pending(c) + rest > OUT_MAX_BYTES ||
            (atomic_load(&c->srv->out_total) + rest > OUT_TOTAL_MAX_BYTES && nfs_out_pending(c) + rest > OUT_FAIR_BYTES)) {
            log_warn("nfs: client %s not reading replies (%zu bytes queued, %zu on all connections); "
                     "dropping connection", c->peer_str, nfs_out_pending(c), (size_t)atomic_load(&c->srv->out_total));
            nfs_conn_kill(c);
            goto out;
        }
        if (c->out_off && c->out_off == c->out_len) c->out_off = c->out_len = 0;
        if (c->out_len + rest > c->out_cap) {
            if (c->out_off) {               /* compact before growing */
                memmove(c->out, c->out + c->out_off, nfs_out_pending(c));
                c->out_len -= c->out_off;
                c->out_off = 0;
            }
            size_t cap = c->out_cap ? c->out_cap : 65536;
            while (cap < c->out_len + rest) cap *= 2;
            uint8_t *n = realloc(c->out, cap);
            if (!n) { nfs_conn_kill(c); goto out; }
            c->out = n;
            c->out_cap = cap;
        }
        memcpy(c->out + c->out_len, buf + off, rest);
        c->out_len += rest;
        set_queued(c, nfs_out_pending(c));
        nfs_conn_update_events_locked(c);
    }
out:
    pthread_mutex_unlock(&c->send_lock);
}

/* Fills the 4-byte record mark in front of a reply of len bytes (mark included). */
static void put_record_mark(uint8_t *buf, size_t len)
{
    uint32_t mark = RM_LAST_FRAG | (uint32_t)(len - 4);
    buf[0] = mark >> 24; buf[1] = mark >> 16; buf[2] = mark >> 8; buf[3] = mark;
}

void nfs_conn_send_reply(struct nfs_conn *c, uint8_t *buf, size_t len)
{
    put_record_mark(buf, len);
    conn_send_bytes(c, buf, len);
}

/* Sends what the worker's batch has corked. */
void nfs_cork_flush(struct nfs_worker *w, struct nfs_conn *c)
{
    if (w->cork_len) conn_send_bytes(c, w->cork, w->cork_len);
    w->cork_len = 0;
}

/* While a worker runs a batch of one connection's calls, their replies go out in one
 * send: at QD32 a send per 4 KiB READ reply was a third of the service's CPU. */
void nfs_worker_reply(struct nfs_worker *w, struct nfs_conn *c, uint8_t *buf, size_t len)
{
    if (!w->corking) { nfs_conn_send_reply(c, buf, len); return; }
    put_record_mark(buf, len);
    if (w->cork_len + len > NFS_CORK_BYTES) nfs_cork_flush(w, c);
    if (len > NFS_CORK_BYTES / 2) { conn_send_bytes(c, buf, len); return; }
    memcpy(w->cork + w->cork_len, buf, len);
    w->cork_len += len;
}

/* Network thread, on EPOLLOUT. */
void nfs_conn_flush(struct nfs_conn *c)
{
    pthread_mutex_lock(&c->send_lock);
    if (send_some(c, c->out, c->out_len, &c->out_off) < 0) {
        nfs_conn_kill(c);
    } else if (!nfs_out_pending(c)) {
        c->out_off = c->out_len = 0;
        if (c->out_cap > (4u << 20)) { free(c->out); c->out = NULL; c->out_cap = 0; }
    }
    set_queued(c, nfs_out_pending(c));
    if (atomic_load(&c->paused) && nfs_conn_may_resume(c)) atomic_store(&c->paused, 0);
    nfs_conn_update_events_locked(c);
    pthread_mutex_unlock(&c->send_lock);
}
