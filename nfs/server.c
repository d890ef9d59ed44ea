/* NFS service lifecycle, network loop and worker pool (leader/follower).
 * One worker at a time, the leader, runs the epoll loop: it reassembles RPC records,
 * keeps the first call it read for itself, queues the rest, hands the loop to an idle
 * worker and runs its call. Quick metadata calls, and a READ or WRITE while nothing else
 * is about, it runs without handing the loop over, and it polls briefly before it sleeps:
 * a client with one call in flight costs no thread wakeup and no hand-off on the server
 * side. Workers decode, execute and send replies
 * directly (one send per reply, under a per-connection lock), so many calls per
 * connection are in flight at once. */
#define _GNU_SOURCE
#include "nfs/internal.h"
#include "util/log.h"
#include "util/wait_hook.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NFS_ACCEPT_BACKOFF_MS 100
/* The leader polls the network this long before it sleeps in epoll_wait: the next call of
 * a client with one call at a time then finds it awake, instead of waiting for a thread,
 * and on a VM for a halted vCPU, to be woken. 4 A/B pairs on 2 cores: QD1 GETATTR, LOOKUP,
 * CREATE, WRITE 32 KiB and READ 128 KiB p50 5-9 us (10-18 %) lower with 50 us. It yields
 * the CPU on every empty poll, so a runnable thread is not held back by it. */
#define NFS_LEADER_SPIN_NS 50000ull

enum { TAG_CONN = 0, TAG_LISTEN = 1, TAG_STOP = 2 };
struct ep_tag { int kind; int idx; };
static struct ep_tag listen_tags[3] = { { TAG_LISTEN, 0 }, { TAG_LISTEN, 1 }, { TAG_LISTEN, 2 } };
static struct ep_tag stop_tag = { TAG_STOP, 0 };

/* ---- request dispatch (worker side) ---- */

/* Non-idempotent NFSv3 procedures whose retransmissions must not run twice:
 * SETATTR WRITE CREATE MKDIR SYMLINK MKNOD REMOVE RMDIR RENAME LINK. */
static int drc_wants(const struct rpc_call *c)
{
    return c->prog == PROG_NFS && c->vers == 3 && (c->proc == 2 || (c->proc >= 7 && c->proc <= 15));
}

/* 1: the call was answered from the cache or dropped as a duplicate in progress. */
static int drc_check(struct nfs_worker *w, struct nfs_conn *conn, const struct nfs_ctx *c,
                     const struct xdr_dec *args, uint32_t *slot)
{
    struct nfs_drc_key k;
    nfs_drc_key_init(&k, &conn->peer, c->call.xid, c->call.prog, c->call.vers, c->call.proc,
                     args->p, (size_t)(args->end - args->p));
    size_t len = 0;
    switch (nfs_drc_begin(w->srv->drc, &k, w->rbuf + 4, &len, slot)) {
    case NFS_DRC_REPLAY:
        log_debug("nfs: %s retransmitted xid %08x (proc %u): cached reply", conn->peer_str,
                  c->call.xid, c->call.proc);
        nfs_worker_reply(w, conn, w->rbuf, len + 4);
        return 1;
    case NFS_DRC_IN_PROGRESS:
        log_debug("nfs: %s retransmitted xid %08x (proc %u) still in progress: dropped",
                  conn->peer_str, c->call.xid, c->call.proc);
        return 1;
    case NFS_DRC_UNTRACKED:
        *slot = UINT32_MAX;
        return 0;
    case NFS_DRC_NEW:
        return 0;
    }
    return 0;
}

size_t nfs_server_handle_record(struct nfs_worker *w, struct nfs_conn *conn, const uint8_t *rec, size_t len,
                                uint64_t t_arrive)
{
    struct nfs_server *s = w->srv;
    struct xdr_dec d;
    xdr_dec_init(&d, rec, len);
    struct xdr_enc e;
    xdr_enc_init(&e, w->rbuf + 4, NFS_REPLY_CAP);
    struct nfs_ctx c = { .srv = s, .w = w, .conn = conn, .args = &d, .res = &e, .kind = NASD_OP_OTHER };
    uint32_t drc_slot = UINT32_MAX;
    enum rpc_parse_result pr = rpc_parse_call(&d, &c.call);
    switch (pr) {
    case RPC_PARSE_DROP:
        log_debug("nfs: %s sent an undecodable RPC message; closing", conn->peer_str);
        nfs_conn_kill(conn);
        return 0;
    case RPC_PARSE_RPC_MISMATCH: rpc_put_rpc_mismatch(&e, c.call.xid); break;
    case RPC_PARSE_BADCRED: rpc_put_auth_error(&e, c.call.xid, AUTH_BADCRED); break;
    case RPC_PARSE_WEAKAUTH: rpc_put_auth_error(&e, c.call.xid, AUTH_TOOWEAK); break;
    case RPC_PARSE_OK:
        /* NFS and MOUNT only on their own ports, which admit only the clients of an export */
        if (conn->portmap_only && c.call.prog != PROG_PORTMAP) {
            rpc_put_accepted(&e, c.call.xid, RPC_PROG_UNAVAIL);
            break;
        }
        if (s->drc && drc_wants(&c.call) && drc_check(w, conn, &c, &d, &drc_slot)) return 0;
        if (c.call.prog == PROG_NFS) nfs3_dispatch(&c);
        else if (c.call.prog == PROG_MOUNT) nfs_mount_dispatch(&c);
        else if (c.call.prog == PROG_PORTMAP) nfs_portmap_dispatch(&c);
        else rpc_put_accepted(&e, c.call.xid, RPC_PROG_UNAVAIL);
        break;
    }
    if (e.err) { /* reply did not fit: should not happen with our limits */
        xdr_enc_init(&e, w->rbuf + 4, NFS_REPLY_CAP);
        rpc_put_accepted(&e, c.call.xid, RPC_SYSTEM_ERR);
        if (drc_slot != UINT32_MAX) nfs_drc_done(s->drc, drc_slot, NULL, 0);
        drc_slot = UINT32_MAX;
    }
    /* cached before sending so that a retransmission racing the reply is answered too */
    if (drc_slot != UINT32_MAX) nfs_drc_done(s->drc, drc_slot, w->rbuf + 4, e.len);
    nfs_worker_reply(w, conn, w->rbuf, e.len + 4);
    /* A call is charged the worker's CPU since its previous call ended: the call itself plus
     * the socket reads and queueing that brought it here. One CPU clock read per call, not
     * two (CLOCK_THREAD_CPUTIME_ID is a syscall, ~10 % of a 4K read at QD32); sampling
     * 1 in 8 instead charged exports over 100 % of the process CPU (51_). */
    uint64_t cpu = nasd_thread_cpu_ns();
    if (c.exp) {
        nasd_stats_record(c.exp->stats, c.kind, c.bytes, nasd_now_ns() - t_arrive, cpu - w->cpu_mark,
                          c.status != 0);
        nfs_export_put(c.exp);
    }
    w->cpu_mark = cpu;
    return e.len;
}

static void request_done(struct nfs_req *r)
{
    struct nfs_conn *conn = r->conn;
    free(r->rec);
    free(r);
    atomic_fetch_sub(&conn->inflight, 1);
    nfs_conn_maybe_resume(conn);
    nfs_conn_put(conn);
}

static void run_request(struct nfs_worker *w, struct nfs_req *r)
{
    if (!atomic_load(&r->conn->dead)) nfs_server_handle_record(w, r->conn, r->rec, r->len, r->t_arrive);
    request_done(r);
}

/* Runs a list of one connection's calls, their replies corked into one send. */
static void run_batch(struct nfs_worker *w, struct nfs_req *r)
{
    struct nfs_conn *conn = r->conn;
    w->corking = 1;
    for (struct nfs_req *q = r; q; q = q->next)
        if (!atomic_load(&conn->dead)) nfs_server_handle_record(w, conn, q->rec, q->len, q->t_arrive);
    w->corking = 0;
    nfs_cork_flush(w, conn);
    while (r) {
        struct nfs_req *next = r->next;
        request_done(r);
        r = next;
    }
}

static struct nfs_req *net_lead(struct nfs_server *s, struct nfs_worker *w);

static uint32_t be32_at(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

/* NFSv3 calls that read metadata only (NULL GETATTR LOOKUP ACCESS READLINK FSSTAT FSINFO
 * PATHCONF): short enough that the leader runs them without handing the network loop
 * to another worker first, which saves a thread wakeup per call. */
static int64_t nfs3_proc_of(const struct nfs_req *r)   /* -1: not an NFSv3 call */
{
    if (r->len < 24 || be32_at(r->rec + 4) != 0 || be32_at(r->rec + 12) != PROG_NFS || be32_at(r->rec + 16) != 3)
        return -1;
    return be32_at(r->rec + 20);
}

/* The XDR opaque at *off in r (4-byte length, padded body): *off past it; 0 if it ends
 * beyond the record or is longer than max. */
static int skip_opaque(const struct nfs_req *r, size_t *off, uint32_t max)
{
    if (*off + 4 > r->len) return 0;
    uint32_t n = be32_at(r->rec + *off);
    if (n > max) return 0;
    *off += 4 + ((size_t)n + 3) / 4 * 4;
    return *off <= r->len;
}

/* An NFSv3 WRITE whose stable_how is UNSTABLE (no sync of its own); 0 when not sure. */
static int write_is_unstable(const struct nfs_req *r)
{
    size_t off = 24 + 4;   /* call header, then the credential's flavor */
    if (!skip_opaque(r, &off, 400)) return 0;
    off += 4;              /* the verifier's flavor */
    if (!skip_opaque(r, &off, 400) || !skip_opaque(r, &off, 64)) return 0;   /* verifier, file handle */
    off += 8 + 4;          /* offset, count */
    return off + 4 <= r->len && be32_at(r->rec + off) == 0;
}

static int proc_is_quick(int64_t proc)
{
    return (proc >= 0 && proc <= 1) || (proc >= 3 && proc <= 5) || (proc >= 18 && proc <= 20);
}

/* Calls the leader runs itself and then goes on leading: the quick ones, and READ and
 * WRITE while no other call is queued or running (a client with one call at a time).
 * Waking a follower to take the network loop, only for it to sleep in epoll_wait again,
 * cost a 32 KiB WRITE 10-20 % of its latency on 2 cores (4 A/B pairs: p50 55-67 vs 63-76
 * us). A call arriving meanwhile waits at most for this one READ or WRITE. */
static int leader_runs(struct nfs_server *s, const struct nfs_req *r)
{
    int64_t proc = nfs3_proc_of(r);
    if (proc_is_quick(proc)) return 1;
    if (proc != 6 && !(proc == 7 && write_is_unstable(r))) return 0;   /* a stable WRITE syncs the disk */
    pthread_mutex_lock(&s->qlock);
    int alone = !s->qhead && s->qidle == s->nworkers - 1;
    pthread_mutex_unlock(&s->qlock);
    return alone;
}

/* Calls that may share a worker and a send with the calls next to them: the quick ones
 * and READ (page-cache speed; a slow call would hold back the replies corked before it). */
static int call_is_batchable(const struct nfs_req *r)
{
    int64_t proc = nfs3_proc_of(r);
    return proc_is_quick(proc) || proc == 6;
}

/* Takes the queue head and, when the queue holds more calls than there are workers to
 * share them, the batchable calls of the same connection behind it; caller holds qlock. */
static struct nfs_req *queue_take(struct nfs_server *s)
{
    struct nfs_req *r = s->qhead, *last = r;
    int n = 1, max = s->qlen / s->nworkers;
    if (max > NFS_BATCH_MAX) max = NFS_BATCH_MAX;
    if (max > 1 && call_is_batchable(r))
        while (n < max && last->next && last->next->conn == r->conn && call_is_batchable(last->next)) {
            last = last->next;
            n++;
        }
    s->qhead = last->next;
    if (!s->qhead) s->qtail = NULL;
    s->qlen -= n;
    last->next = NULL;
    return r;
}

static void *worker_main(void *arg);

/* A worker with its buffers; NULL when out of memory. */
static struct nfs_worker *worker_new(struct nfs_server *s)
{
    struct nfs_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->rbuf = malloc(NFS_REPLY_CAP + 4); w->netbuf = malloc(NFS_NET_BUF); w->cork = malloc(NFS_CORK_BYTES);
    w->srv = s;
    if (w->rbuf && w->netbuf && w->cork) return w;
    free(w->rbuf); free(w->netbuf); free(w->cork); free(w);
    return NULL;
}

static void worker_free(struct nfs_worker *w)
{
    free(w->netbuf);
    free(w->rbuf);
    free(w->cork);
    free(w);
}

/* A spare worker to lead while every other one waits in a call; 0 if none could start. */
static int spare_start(struct nfs_server *s)
{
    struct nfs_worker *w = worker_new(s);
    pthread_t t;
    pthread_attr_t at;
    int ok = w && pthread_attr_init(&at) == 0;
    if (ok) {
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        w->spare = 1;
        ok = pthread_create(&t, &at, worker_main, w) == 0;
        pthread_attr_destroy(&at);
    }
    if (!ok && w) worker_free(w);
    return ok;
}

/* The wait hook while the leader runs a call: the call is about to wait for a lock or a
 * sync (a dataset's lock held through a slow COMMIT, say), so the network loop goes to an
 * idle worker, or a spare when none is idle, rather than stop every connection meanwhile. */
static void leader_hand_off(void *arg)
{
    struct nfs_worker *w = arg;
    struct nfs_server *s = w->srv;
    pthread_mutex_lock(&s->qlock);
    s->leading = 0;
    w->handed_off = 1;
    int wake = s->qidle > 0, spare = !wake && !s->stopping && s->nspare < NFS_MAX_SPARE_WORKERS;
    if (spare) s->nspare++;
    pthread_mutex_unlock(&s->qlock);
    if (wake) pthread_cond_signal(&s->qcond);
    else if (spare && !spare_start(s)) {
        pthread_mutex_lock(&s->qlock);   /* the first worker done leads, as before */
        s->nspare--;
        pthread_cond_broadcast(&s->spare_gone);
        pthread_mutex_unlock(&s->qlock);
    }
}

/* Runs r on the leader; 1 if it handed the network loop over meanwhile. */
static int run_leading(struct nfs_worker *w, struct nfs_req *r)
{
    nasd_wait_hook = (struct nasd_wait_hook){ leader_hand_off, w };
    run_request(w, r);
    nasd_wait_hook.fn = NULL;
    return w->handed_off;
}

/* Queued calls first; else lead the network loop if nobody does; else sleep. */
static void *worker_main(void *arg)
{
    struct nfs_worker *w = arg;
    struct nfs_server *s = w->srv;
    w->cpu_mark = nasd_thread_cpu_ns();
    pthread_mutex_lock(&s->qlock);
    for (;;) {
        struct nfs_req *r = s->qhead;
        if (r) {
            r = queue_take(s);
            pthread_mutex_unlock(&s->qlock);
            if (r->next) run_batch(w, r); else run_request(w, r);
            pthread_mutex_lock(&s->qlock);
            continue;
        }
        if (s->stopping) break;
        if (!s->leading && !s->net_failed) {
            s->leading = 1;
            pthread_mutex_unlock(&s->qlock);
            w->handed_off = 0;
            while ((r = net_lead(s, w)) && leader_runs(s, r) && !run_leading(w, r)) {}
            if (w->handed_off) r = NULL;   /* it ran; another worker leads, or will */
            else {
                pthread_mutex_lock(&s->qlock);
                s->leading = 0;
                int wake = s->qidle > 0;
                pthread_mutex_unlock(&s->qlock);
                if (wake) pthread_cond_signal(&s->qcond);   /* the next leader (outside the lock: it takes it) */
            }
            if (r) run_request(w, r);
            pthread_mutex_lock(&s->qlock);
            continue;
        }
        s->qidle++;
        if (w->spare) {   /* a spare ends once idle for a while */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += NFS_SPARE_IDLE_S;
            int rc = pthread_cond_timedwait(&s->qcond, &s->qlock, &until);
            s->qidle--;
            if (rc == ETIMEDOUT && !s->qhead) break;
            continue;
        }
        pthread_cond_wait(&s->qcond, &s->qlock);
        s->qidle--;
    }
    if (w->spare) {
        s->nspare--;
        pthread_cond_broadcast(&s->spare_gone);
    }
    pthread_mutex_unlock(&s->qlock);
    worker_free(w);
    return NULL;
}

/* ---- network loop (the leader only) ---- */

struct batch { struct nfs_conn *conn; struct nfs_req *head, *tail; int n; uint64_t now; };

static int on_record(void *arg, uint8_t *rec, size_t len)
{
    struct batch *b = arg;
    struct nfs_req *r = malloc(sizeof *r);
    if (!r) { free(rec); return -ENOMEM; }
    r->next = NULL;
    r->conn = b->conn;
    r->rec = rec;
    r->len = len;
    r->t_arrive = b->now;
    atomic_fetch_add(&b->conn->refs, 1);
    atomic_fetch_add(&b->conn->inflight, 1);
    if (b->tail) b->tail->next = r; else b->head = r;
    b->tail = r;
    b->n++;
    /* its fill: the rest waits in the stash and the socket (read while a reader's calls
     * run, a flood of small calls queued 95k at a time and starved every other client) */
    return atomic_load(&b->conn->inflight) >= CONN_MAX_INFLIGHT ? RM_PAUSE : 0;
}

static void queue_batch(struct nfs_server *s, struct batch *b)
{
    if (!b->n) return;
    pthread_mutex_lock(&s->qlock);
    if (s->qtail) s->qtail->next = b->head; else s->qhead = b->head;
    s->qtail = b->tail;
    s->qlen += b->n;
    int wake = b->n < s->qidle ? b->n : s->qidle;
    for (int i = 0; i < wake; i++) pthread_cond_signal(&s->qcond);
    pthread_mutex_unlock(&s->qlock);
}

static void conn_close(struct nfs_server *s, struct nfs_conn *c)
{
    nfs_conn_limit_release(&s->limits, &c->peer);
    if (c->cprev) c->cprev->cnext = c->cnext; else s->conns = c->cnext;
    if (c->cnext) c->cnext->cprev = c->cprev;
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    nfs_conn_kill(c);
    nfs_conn_put(c);
}

/* Reads what the connection sent; complete calls are queued, except that the first one
 * goes to *keep if that is still empty (the leader runs it itself). */
static void conn_readable(struct nfs_server *s, struct nfs_conn *c, uint8_t *buf, size_t bufsz,
                          struct nfs_req **keep)
{
    struct batch b = { .conn = c, .now = nasd_now_ns() };
    int closing = 0, had_stash = c->stash_len > 0;
    size_t used = 0;
    if (c->stash_len && atomic_load(&c->inflight) < CONN_MAX_INFLIGHT) {
        int e = rm_feed_some(&c->rm, c->stash + c->stash_off, c->stash_len, on_record, &b, &used);
        if (e < 0) closing = e;
        c->stash_off += used;
        c->stash_len -= used;
        if (!c->stash_len) {
            free(c->stash);
            c->stash = NULL;
            c->stash_off = 0;
        }
    }
    for (int round = 0; round < 16 && !closing && !c->stash_len && atomic_load(&c->inflight) < CONN_MAX_INFLIGHT; round++) {
        ssize_t n = recv(c->fd, buf, bufsz, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) { closing = 1; break; }
        atomic_store(&c->last_io_ns, b.now);
        int e = rm_feed_some(&c->rm, buf, (size_t)n, on_record, &b, &used);
        if (e < 0) { closing = e; break; }
        if (used < (size_t)n) {   /* the connection's fill of calls: the rest is parsed later */
            if (!(c->stash = malloc((size_t)n - used))) { closing = -ENOMEM; break; }
            memcpy(c->stash, buf + used, (size_t)n - used);
            c->stash_len = (size_t)n - used;
            break;
        }
        if ((size_t)n < bufsz) break;
    }
    atomic_store(&c->has_stash, c->stash_len > 0);
    if (closing < 0)
        log_warn("nfs: %s: bad record marking (%s); closing", c->peer_str,
                 closing == -EMSGSIZE ? "record too large" : strerror(-closing));
    if (!*keep && b.head) {
        *keep = b.head;
        b.head = b.head->next;
        if (!b.head) b.tail = NULL;
        (*keep)->next = NULL;
        b.n--;
    }
    queue_batch(s, &b);
    if (closing || atomic_load(&c->dead)) { conn_close(s, c); return; }
    if (had_stash || c->stash_len || atomic_load(&c->inflight) >= CONN_MAX_INFLIGHT ||
        atomic_load(&c->out_queued) >= OUT_PAUSE_BYTES) {
        pthread_mutex_lock(&c->send_lock);
        if (c->stash_len || atomic_load(&c->inflight) >= CONN_MAX_INFLIGHT || nfs_out_pending(c) >= OUT_PAUSE_BYTES) {
            atomic_store(&c->paused, 1);
            /* workers that finished before the store did not see the flag */
            if (nfs_conn_may_resume(c)) atomic_store(&c->paused, 0);
        }
        nfs_conn_update_events_locked(c);
        pthread_mutex_unlock(&c->send_lock);
    }
}

static void listeners_enable(struct nfs_server *s, int on)
{
    for (int i = 0; i < 3; i++) {
        if (s->listen_fd[i] < 0) continue;
        struct epoll_event ev = { .events = on ? EPOLLIN : 0, .data.ptr = &listen_tags[i] };
        epoll_ctl(s->epfd, EPOLL_CTL_MOD, s->listen_fd[i], &ev);
    }
}

static void peer_string(const struct sockaddr_storage *ss, char *out, size_t outlen)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (ss->ss_family == AF_INET) inet_ntop(AF_INET, &((struct sockaddr_in *)ss)->sin_addr, host, sizeof host);
    else if (ss->ss_family == AF_INET6) inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ss)->sin6_addr, host, sizeof host);
    snprintf(out, outlen, "%s", host);
}

/* idx: 0 NFS, 1 MOUNT, 2 portmap. */
static void accept_all(struct nfs_server *s, int idx)
{
    int lfd = s->listen_fd[idx];
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            /* out of descriptors or memory: stop accepting for a moment instead of spinning */
            log_warn("nfs: accept: %s; not accepting for %d ms", strerror(errno), NFS_ACCEPT_BACKOFF_MS);
            listeners_enable(s, 0);
            s->accept_resume_ns = nasd_now_ns() + NFS_ACCEPT_BACKOFF_MS * 1000000ull;
            return;
        }
        char host[64];
        peer_string(&ss, host, sizeof host);
        if (idx < 2 && !nfs_exports_admit(s, &ss)) {
            log_info("nfs: connection from %s refused: no export admits this client", host);
            close(fd);
            continue;
        }
        if (nfs_conn_limit_take(&s->limits, &ss, s->max_conns, s->max_per_addr)) {
            log_warn("nfs: connection from %s refused: %u connections (%u from this address) is the limit",
                     host, s->max_conns, s->max_per_addr);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct nfs_conn *c = calloc(1, sizeof *c);
        if (!c) { nfs_conn_limit_release(&s->limits, &ss); close(fd); continue; }
        c->kind = TAG_CONN;
        c->fd = fd;
        c->srv = s;
        c->peer = ss;
        c->portmap_only = idx == 2;
        atomic_init(&c->refs, 1);
        atomic_init(&c->last_io_ns, nasd_now_ns());
        pthread_mutex_init(&c->send_lock, NULL);
        rm_init(&c->rm, NFS_MAX_RECORD);
        snprintf(c->peer_str, sizeof c->peer_str, "%s", host);
        c->ep_events = EPOLLIN | EPOLLRDHUP;
        struct epoll_event ev = { .events = c->ep_events, .data.ptr = c };
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            nfs_conn_limit_release(&s->limits, &ss);
            nfs_conn_put(c);
            continue;
        }
        c->cnext = s->conns;
        if (s->conns) s->conns->cprev = c;
        s->conns = c;
    }
}

/* Closes connections silent for the idle timeout with no call in flight. */
static void sweep_idle(struct nfs_server *s, uint64_t now)
{
    for (struct nfs_conn *c = s->conns, *n; c; c = n) {
        n = c->cnext;
        if (atomic_load(&c->inflight) == 0 && now - atomic_load(&c->last_io_ns) > s->idle_ns) {
            log_debug("nfs: closing idle connection from %s", c->peer_str);
            conn_close(s, c);
        }
    }
}

/* Runs the epoll loop until a call arrived (returned, to be run by the caller) or the
 * server stops (NULL). Only one worker at a time is here, so the connection list, the
 * limits, the timers and the record reassembly need no lock. */
static struct nfs_req *net_lead(struct nfs_server *s, struct nfs_worker *w)
{
    struct epoll_event evs[64];
    struct nfs_req *keep = NULL;
    while (!keep) {
        int n = epoll_wait(s->epfd, evs, 64, 0);
        if (n == 0) {   /* idle: poll a little, then sleep */
            uint64_t until = nasd_now_ns() + NFS_LEADER_SPIN_NS;
            while ((n = epoll_wait(s->epfd, evs, 64, 0)) == 0 && nasd_now_ns() < until) sched_yield();
            if (n == 0) n = epoll_wait(s->epfd, evs, 64, s->accept_resume_ns ? NFS_ACCEPT_BACKOFF_MS : 1000);
            w->cpu_mark = nasd_thread_cpu_ns();   /* the poll is nobody's call */
        }
        if (n < 0 && errno != EINTR) {
            log_err("nfs: epoll_wait: %s", strerror(errno));
            s->net_failed = 1;
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            struct ep_tag *t = evs[i].data.ptr;
            if (t->kind == TAG_STOP) return keep;
            if (t->kind == TAG_LISTEN) { if (!s->accept_resume_ns) accept_all(s, t->idx); continue; }
            struct nfs_conn *c = (struct nfs_conn *)t;
            if (evs[i].events & EPOLLOUT) nfs_conn_flush(c);   /* never frees c */
            if ((evs[i].events & EPOLLIN) || ((evs[i].events & EPOLLOUT) && atomic_load(&c->has_stash) && !atomic_load(&c->paused)))
                conn_readable(s, c, w->netbuf, NFS_NET_BUF, &keep);
            else if (evs[i].events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) conn_close(s, c);
        }
        uint64_t now = nasd_now_ns();   /* timers run after the batch: no event refers to a closed conn */
        if (s->accept_resume_ns && now >= s->accept_resume_ns) {
            s->accept_resume_ns = 0;
            listeners_enable(s, 1);
        }
        if (now >= s->next_sweep_ns) {
            sweep_idle(s, now);
            s->next_sweep_ns = now + 1000000000ull;
        }
    }
    return keep;
}

static int listen_on(const char *addr, int port, int do_listen, int *bound_port, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(port);
        sl = sizeof *a4;
    } else if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(port);
        sl = sizeof *a6;
    } else {
        snprintf(err, errlen, "bad bind address '%s'", addr);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, sl) < 0 || (do_listen && listen(fd, 128) < 0)) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", addr, port, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *bound_port = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
    return fd;
}

static int have_cap_dac_read_search(void)
{
    struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0) return 0;
    return !!(d[0].effective & (1u << CAP_DAC_READ_SEARCH));
}

int nfs_server_listen(struct nfs_server *s, char *err, size_t errlen)
{
    for (int i = 0; i < 3; i++) {
        if (s->listen_fd[i] < 0) continue;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &listen_tags[i] };
        if (listen(s->listen_fd[i], 128) || epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->listen_fd[i], &ev)) {
            snprintf(err, errlen, "nfs: listen on port %d: %s", s->port[i], strerror(errno));
            return -errno;
        }
    }
    return 0;
}

struct nfs_server *nfs_server_start(const struct nfs_server_cfg *cfg, char *err, size_t errlen)
{
    struct nfs_server *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "out of memory"); return NULL; }
    s->cfg = *cfg;
    s->max_conns = cfg->max_conns ? cfg->max_conns : NFS_DEFAULT_MAX_CONNS;
    s->max_per_addr = cfg->max_conns_per_addr ? cfg->max_conns_per_addr : NFS_DEFAULT_MAX_CONNS_PER_ADDR;
    s->idle_ns = (uint64_t)(cfg->idle_timeout_s ? cfg->idle_timeout_s : NFS_DEFAULT_IDLE_TIMEOUT_S) * 1000000000ull;
    s->epfd = s->stop_fd = -1;
    for (int i = 0; i < 3; i++) s->listen_fd[i] = -1;
    pthread_rwlock_init(&s->exports_lock, NULL);
    pthread_mutex_init(&s->qlock, NULL);
    pthread_cond_init(&s->qcond, NULL);
    pthread_cond_init(&s->spare_gone, NULL);
    pthread_mutex_init(&s->mnt_lock, NULL);
    if (!have_cap_dac_read_search())
        log_err("nfs: missing CAP_DAC_READ_SEARCH: file handles of directory datasets cannot be resolved "
                "(open_by_handle_at); run nasd as root");
    int e = nfs_fh_secret_load(cfg->state_dir, &s->secret);
    if (e) { snprintf(err, errlen, "file handle secret in '%s': %s", cfg->state_dir, strerror(-e)); goto fail; }
    if (getrandom(s->write_verf, sizeof s->write_verf, 0) != sizeof s->write_verf) {
        uint64_t t = nasd_now_ns();
        memcpy(s->write_verf, &t, sizeof t);
    }
    const char *addr = cfg->bind_addr[0] ? cfg->bind_addr : "0.0.0.0";
    int ports[3] = { cfg->nfs_port, cfg->mount_port, cfg->portmap_port };
    for (int i = 0; i < 3; i++) {
        if (ports[i] < 0) continue;
        s->listen_fd[i] = listen_on(addr, ports[i], !cfg->held, &s->port[i], err, errlen);
        if (s->listen_fd[i] < 0) goto fail;
    }
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->epfd < 0 || s->stop_fd < 0) { snprintf(err, errlen, "epoll: %s", strerror(errno)); goto fail; }
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &stop_tag };
    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->stop_fd, &ev);
    for (int i = 0; i < 3 && !cfg->held; i++) {
        if (s->listen_fd[i] < 0) continue;
        ev.data.ptr = &listen_tags[i];
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->listen_fd[i], &ev);
    }
    s->drc = nfs_drc_new(NFS_DRC_DEFAULT_ENTRIES);
    if (!s->drc) { snprintf(err, errlen, "out of memory"); goto fail; }
    s->nworkers = cfg->workers > 0 ? cfg->workers : NFS_DEFAULT_WORKERS;
    s->workers = calloc(s->nworkers, sizeof *s->workers);
    if (!s->workers) { snprintf(err, errlen, "out of memory"); goto fail; }
    for (int i = 0; i < s->nworkers; i++) {
        struct nfs_worker *w = worker_new(s);
        if (!w || pthread_create(&s->workers[i], NULL, worker_main, w)) {
            snprintf(err, errlen, "cannot start worker threads");
            if (w) worker_free(w);
            s->nworkers = i;
            goto fail_threads;
        }
    }
    log_info("nfs: serving NFSv3 on %s:%d, MOUNT on %d, portmap on %d, %d workers", addr, s->port[0],
             s->port[1], s->listen_fd[2] >= 0 ? s->port[2] : -1, s->nworkers);
    return s;

fail_threads:
    pthread_mutex_lock(&s->qlock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->qcond);
    pthread_mutex_unlock(&s->qlock);
    if (write(s->stop_fd, &(uint64_t){ 1 }, sizeof(uint64_t)) < 0) log_warn("nfs: stop eventfd: %s", strerror(errno));
    for (int i = 0; i < s->nworkers; i++) pthread_join(s->workers[i], NULL);
    pthread_mutex_lock(&s->qlock);
    while (s->nspare) pthread_cond_wait(&s->spare_gone, &s->qlock);
    pthread_mutex_unlock(&s->qlock);
fail:
    for (int i = 0; i < 3; i++) if (s->listen_fd[i] >= 0) close(s->listen_fd[i]);
    if (s->epfd >= 0) close(s->epfd);
    if (s->stop_fd >= 0) close(s->stop_fd);
    nfs_drc_free(s->drc);
    free(s->workers);
    free(s);
    return NULL;
}

void nfs_server_stop(struct nfs_server *s)
{
    if (!s) return;
    /* stopping first: a worker that sees the wakeup must not lead again */
    pthread_mutex_lock(&s->qlock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->qcond);
    pthread_mutex_unlock(&s->qlock);
    uint64_t one = 1;
    if (write(s->stop_fd, &one, sizeof one) < 0) log_warn("nfs: stop eventfd: %s", strerror(errno));
    for (int i = 0; i < s->nworkers; i++) pthread_join(s->workers[i], NULL);
    pthread_mutex_lock(&s->qlock);   /* spares end as they see stopping (one may finish a call first) */
    while (s->nspare) pthread_cond_wait(&s->spare_gone, &s->qlock);
    pthread_mutex_unlock(&s->qlock);
    /* Workers drained the queue; drop the network loop's connection refs. */
    while (s->conns) conn_close(s, s->conns);
    nfs_conn_limit_clear(&s->limits);
    for (int i = 0; i < 3; i++) if (s->listen_fd[i] >= 0) close(s->listen_fd[i]);
    close(s->epfd);
    close(s->stop_fd);
    nfs_exports_clear(s);
    nfs_mounts_clear(s);
    nfs_drc_free(s->drc);
    free(s->workers);
    free(s);
}

int nfs_server_nfs_port(struct nfs_server *s) { return s ? s->port[0] : -1; }
int nfs_server_mount_port(struct nfs_server *s) { return s ? s->port[1] : -1; }
