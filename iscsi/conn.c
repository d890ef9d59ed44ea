/* Connection I/O: PDU framing and digests, transmit queue (writev batching),
 * dispatch of full-feature PDUs (NOP, TMF, logout, text). SCSI command flow is in
 * task.c. Everything here runs on the connection's network thread. */
#define _GNU_SOURCE
#include "iscsi/iscsi_int.h"
#include "util/log.h"
#include "util/net.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

/* Receive buffer: starts small (many idle sessions stay cheap) and grows up to the
 * largest legal PDU plus room for batching. */
#define RX_INITIAL (64u << 10)
#define RX_MAX (ISCSI_BHS_LEN + ISCSI_MAX_AHS + 4 + ISCSI_OUR_MRDSL + 8 + 65536)
#define LOGIN_TIMEOUT_NS (15ull * 1000000000ull)

int task_scsi_cmd(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t dlen);
int task_data_out(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t dlen);
int task_tmf(struct iscsi_conn *c, const uint8_t *bhs);
void task_free_all(struct iscsi_conn *c);

static void local_addr(struct iscsi_conn *c)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "127.0.0.1";
    int port = 3260;
    if (getsockname(c->fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
            port = ntohs(a->sin6_port);
            snprintf(c->local_addr, sizeof c->local_addr, "[%s]:%d", ip, port);
            return;
        }
    }
    snprintf(c->local_addr, sizeof c->local_addr, "%s:%d", ip, port);
}

/* The initiator's address as 16 bytes (IPv4 mapped into IPv6) and as text. */
static void peer_addr(struct iscsi_conn *c)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    memset(c->peer, 0, sizeof c->peer);
    snprintf(c->peer_str, sizeof c->peer_str, "?");
    if (getpeername(c->fd, (struct sockaddr *)&ss, &sl)) return;
    nasd_peer_key(&ss, c->peer);   /* IPv6 counts by its /64 */
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, c->peer_str, sizeof c->peer_str);
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, c->peer_str, sizeof c->peer_str);
}

void conn_new(struct net_thread *nt, int fd)
{
    struct iscsi_conn *c = calloc(1, sizeof *c);
    if (!c) { close(fd); return; }
    c->rx = malloc(RX_INITIAL);
    if (!c->rx) { free(c); close(fd); return; }
    c->kind = KIND_CONN;
    c->nt = nt;
    c->fd = fd;
    c->rx_cap = RX_INITIAL;
    c->born_ns = nasd_now_ns();
    atomic_init(&c->refs, 1);
    c->mrdsl_tx = 8192;
    c->first_burst = 65536;
    c->max_burst = 262144;
    c->max_r2t = 1;
    c->immediate_data = true;
    c->initial_r2t = true;
    c->next_ttt = 1;
    c->stat_sn = 1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);   /* reap vanished initiators */
    local_addr(c);
    peer_addr(c);
    if (server_conn_admit(nt->srv, c)) { free(c->rx); free(c); close(fd); return; }
    if (!(c->dpeer = server_dout_peer_get(nt->srv, c->peer))) {
        server_conn_release(nt->srv, c);
        free(c->rx); free(c); close(fd); return;
    }
    c->ev_mask = EPOLLIN;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
    if (epoll_ctl(nt->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        server_conn_release(nt->srv, c);
        server_dout_peer_put(nt->srv, c->dpeer);
        free(c->rx); free(c); close(fd); return;
    }
    c->next = nt->conns;
    if (nt->conns) nt->conns->prev = c;
    nt->conns = c;
    log_debug("iscsi: new connection fd %d on thread %d", fd, nt->idx);
}

static void tx_release(struct tx_buf *b)
{
    free(b->free_ptr);
    free(b);
}

void conn_put(struct iscsi_conn *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    server_session_unregister(c->nt->srv, c);
    server_dout_peer_put(c->nt->srv, c->dpeer);
    for (struct tx_buf *b = c->tx_head, *n; b; b = n) { n = b->next; tx_release(b); }
    if (c->tgt) tgt_put(c->tgt);
    free(c->login_acc);
    free(c->rx);
    free(c);
}

void conn_close(struct iscsi_conn *c)
{
    if (c->dead) return;
    c->dead = true;
    c->phase = PH_CLOSING;
    epoll_ctl(c->nt->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    if (c->prev) c->prev->next = c->next; else c->nt->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->next = c->prev = NULL;
    server_conn_release(c->nt->srv, c);   /* the session stays registered until its commands are back */
    for (struct tx_buf *b = c->tx_head, *n; b; b = n) { n = b->next; tx_release(b); }
    c->tx_head = c->tx_tail = NULL;
    conn_queued_add(c, -(int64_t)c->tx_bytes);
    c->tx_bytes = 0;
    task_free_all(c);
    /* I_T nexus loss ends RESERVE(6): only a session's (a failed login with the same name and
     * ISID holds nothing), and not a reinstated one's (its reinstating login did that, the
     * nexus is the new session's now) */
    if (c->registered && !atomic_load(&c->reinstated))
        for (unsigned i = 0; i < c->tgt->nlus; i++) iscsi_lu_release_nexus(&c->tgt->lus[i], c->nexus);
    log_debug("iscsi: connection closed (%s)", c->initiator[0] ? c->ini_log : "no login");
    c->next = c->nt->reap;                           /* the thread's reference, dropped later */
    c->nt->reap = c;
}

void conn_reap(struct net_thread *nt)
{
    while (nt->reap) {
        struct iscsi_conn *c = nt->reap;
        nt->reap = c->next;
        c->next = NULL;
        conn_put(c);
    }
}

/* ---- transmit ---- */

void conn_queued_add(struct iscsi_conn *c, int64_t delta)
{
    atomic_fetch_add(&c->nt->srv->queued, (uint64_t)delta);
}

/* May the PDU at bhs be run now? Not when the connection's own output is over the
 * bound, nor, while all connections together hold more than TX_GLOBAL, when it already
 * has output pending or the PDU is a READ-type command with a large transfer: such a
 * connection waits for the network thread's poll (net_thread.global_wait). */
static bool tx_over(struct iscsi_conn *c, const uint8_t *bhs)
{
    uint64_t own = c->tx_bytes + c->din_pending;
    if (own >= ISCSI_TX_HIGH) return true;
    if (atomic_load(&c->nt->srv->queued) <= ISCSI_TX_GLOBAL) return false;
    bool big = bhs_opcode(bhs) == OP_SCSI_CMD && (bhs[1] & CMD_R) && get_be32(bhs + 20) > ISCSI_TX_SHARE;
    if (own <= ISCSI_TX_SHARE && !big) return false;
    c->nt->global_wait = true;
    return true;
}

static void update_events(struct iscsi_conn *c)
{
    if (c->dead) return;
    uint32_t want = (c->rx_paused ? 0 : EPOLLIN) | (c->want_out ? EPOLLOUT : 0);
    if (want == c->ev_mask) return;
    c->ev_mask = want;
    struct epoll_event ev = { .events = want, .data.ptr = c };
    epoll_ctl(c->nt->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

struct tx_buf *tx_new(struct iscsi_conn *c, uint8_t opcode)
{
    struct tx_buf *b = malloc(sizeof *b);
    if (!b) return NULL;
    b->next = NULL;
    memset(b->hdr, 0, ISCSI_BHS_LEN);
    b->hdr[0] = opcode;
    b->hlen = ISCSI_BHS_LEN;
    b->dlen = b->tlen = 0;
    b->data = NULL;
    b->free_ptr = NULL;
    return b;
}

void tx_set_data(struct iscsi_conn *c, struct tx_buf *b, const void *data, uint32_t len, void *free_ptr)
{
    b->data = data;
    b->dlen = len;
    b->free_ptr = free_ptr;
    put_be24(b->hdr + 5, len);
}

/* Finalises digests/padding and appends to the queue. */
void tx_queue(struct iscsi_conn *c, struct tx_buf *b)
{
    if (c->hdigest) {
        uint32_t crc = iscsi_crc32c(b->hdr, ISCSI_BHS_LEN, 0);
        memcpy(b->hdr + ISCSI_BHS_LEN, &crc, 4);      /* little endian on the wire */
        b->hlen = ISCSI_BHS_LEN + 4;
    }
    uint32_t pad = pad4(b->dlen);
    memset(b->trail, 0, pad);
    b->tlen = pad;
    if (b->dlen && c->ddigest) {
        uint32_t crc = iscsi_crc32c(b->data, b->dlen, 0);
        if (pad) crc = iscsi_crc32c(b->trail, pad, crc);
        memcpy(b->trail + pad, &crc, 4);
        b->tlen += 4;
    }
    if (c->tx_tail) c->tx_tail->next = b; else c->tx_head = b;
    c->tx_tail = b;
    size_t tot = b->hlen + b->dlen + b->tlen;
    c->tx_bytes += tot;
    conn_queued_add(c, (int64_t)tot);
}

/* StatSN / ExpCmdSN / MaxCmdSN at bytes 24..35 of target PDUs. */
void conn_fill_sn(struct iscsi_conn *c, uint8_t *bhs, bool advance_statsn)
{
    uint32_t want = c->exp_cmd_sn - 1 + (ISCSI_CMD_WINDOW > c->ntasks ? ISCSI_CMD_WINDOW - c->ntasks : 0);
    if (sn_lt(c->max_cmd_sn, want)) c->max_cmd_sn = want;   /* never shrink: initiators ignore it */
    put_be32(bhs + 24, advance_statsn ? c->stat_sn++ : c->stat_sn);
    put_be32(bhs + 28, c->exp_cmd_sn);
    put_be32(bhs + 32, c->max_cmd_sn);
}

static void set_epollout(struct iscsi_conn *c, bool on)
{
    c->want_out = on;
    update_events(c);
}

void conn_flush(struct iscsi_conn *c)
{
    while (c->tx_head && !c->dead) {
        struct iovec iov[96];
        int n = 0;
        size_t skip = c->tx_off;
        for (struct tx_buf *b = c->tx_head; b && n < 93; b = b->next) {
            const void *part[3] = { b->hdr, b->data, b->trail };
            size_t len[3] = { b->hlen, b->dlen, b->tlen };
            for (int i = 0; i < 3; i++) {
                if (!len[i]) continue;
                if (skip >= len[i]) { skip -= len[i]; continue; }
                iov[n].iov_base = (char *)part[i] + skip;
                iov[n].iov_len = len[i] - skip;
                skip = 0;
                n++;
            }
        }
        ssize_t w = writev(c->fd, iov, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) { set_epollout(c, true); return; }
            log_debug("iscsi: write: %s", strerror(errno));
            conn_close(c);
            return;
        }
        if (w > 0) c->tx_progress_ns = nasd_now_ns();
        size_t done = (size_t)w + c->tx_off, freed = 0;
        while (c->tx_head) {
            struct tx_buf *b = c->tx_head;
            size_t tot = b->hlen + b->dlen + b->tlen;
            if (done < tot) break;
            done -= tot;
            freed += tot;
            c->tx_head = b->next;
            if (!c->tx_head) c->tx_tail = NULL;
            tx_release(b);
        }
        c->tx_off = done;
        c->tx_bytes -= freed;
        conn_queued_add(c, -(int64_t)freed);
    }
    if (c->dead) return;
    set_epollout(c, false);
    if (!c->tx_head && c->close_after_flush) conn_close(c);
}

/* ---- small PDUs ---- */

static void send_reject(struct iscsi_conn *c, const uint8_t *bhs, uint8_t reason)
{
    struct tx_buf *b = tx_new(c, OP_REJECT);
    if (!b) return;
    uint8_t *copy = malloc(ISCSI_BHS_LEN);
    if (!copy) { free(b); return; }
    memcpy(copy, bhs, ISCSI_BHS_LEN);
    b->hdr[1] = BHS_F;
    b->hdr[2] = reason;
    put_be32(b->hdr + 16, ISCSI_RSVD_TAG);
    conn_fill_sn(c, b->hdr, true);
    tx_set_data(c, b, copy, ISCSI_BHS_LEN, copy);
    tx_queue(c, b);
}

/* CmdSN acceptance for non-immediate commands; false = silently ignore the PDU. */
bool conn_check_cmdsn(struct iscsi_conn *c, const uint8_t *bhs)
{
    if (bhs_immediate(bhs)) return true;
    uint32_t sn = get_be32(bhs + 24);
    if (sn_lt(sn, c->exp_cmd_sn) || sn_lt(c->max_cmd_sn, sn)) {
        log_debug("iscsi: CmdSN %u outside [%u, %u], ignored", sn, c->exp_cmd_sn, c->max_cmd_sn);
        return false;
    }
    c->exp_cmd_sn = sn + 1;
    return true;
}

static int handle_nop_out(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t dlen)
{
    uint32_t itt = bhs_itt(bhs);
    if (itt == ISCSI_RSVD_TAG) {
        if (!bhs_immediate(bhs) && get_be32(bhs + 20) == ISCSI_RSVD_TAG) return 0; /* no reply wanted */
        return 0;                                             /* answer to our NOP-In */
    }
    if (!conn_check_cmdsn(c, bhs)) return 0;
    struct tx_buf *b = tx_new(c, OP_NOP_IN);
    if (!b) return -1;
    b->hdr[1] = BHS_F;
    memcpy(b->hdr + 8, bhs + 8, 8);
    put_be32(b->hdr + 16, itt);
    put_be32(b->hdr + 20, ISCSI_RSVD_TAG);
    conn_fill_sn(c, b->hdr, true);
    if (dlen) {
        uint32_t n = dlen < c->mrdsl_tx ? dlen : c->mrdsl_tx;
        uint8_t *copy = malloc(n);
        if (!copy) { free(b); return -1; }
        memcpy(copy, data, n);
        tx_set_data(c, b, copy, n, copy);
    }
    tx_queue(c, b);
    return 0;
}

static int handle_logout(struct iscsi_conn *c, const uint8_t *bhs)
{
    uint8_t reason = bhs[1] & 0x7f;
    if (!conn_check_cmdsn(c, bhs)) return 0;
    struct tx_buf *b = tx_new(c, OP_LOGOUT_RSP);
    if (!b) return -1;
    b->hdr[1] = BHS_F;
    b->hdr[2] = reason == 2 ? 2 : 0;       /* recovery not supported / closed successfully */
    put_be32(b->hdr + 16, bhs_itt(bhs));
    conn_fill_sn(c, b->hdr, true);
    tx_queue(c, b);
    if (reason != 2) c->close_after_flush = true;
    return 0;
}

/* One complete PDU in the receive buffer. Returns -1 to drop the connection. */
static int dispatch(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t dlen)
{
    uint8_t op = bhs_opcode(bhs);
    log_debug("iscsi: rx op 0x%02x cdb %02x %02x flags 0x%02x itt 0x%x ttt/edtl 0x%x sn %u dlen %u off %u", op, bhs[32], bhs[45], bhs[1],
              bhs_itt(bhs), get_be32(bhs + 20), get_be32(bhs + 24), dlen, get_be32(bhs + 40));
    if (bhs_ahs_len(bhs) && op != OP_SCSI_CMD) { log_debug("iscsi: AHS on opcode 0x%02x", op); return -1; }
    if (atomic_load(&c->fenced)) return -1;   /* reinstated: nothing more of this session (a reset, a release) */
    if (c->phase == PH_LOGIN) {
        if (op != OP_LOGIN_REQ) { log_debug("iscsi: opcode 0x%02x before login", op); return -1; }
        return login_handle(c, bhs, data, dlen);
    }
    if (c->close_after_flush) return 0;       /* logging out: ignore the rest */
    if (c->tgt && atomic_load(&c->tgt->removed)) return -1;
    switch (op) {
    case OP_SCSI_CMD:
        if (c->discovery) { send_reject(c, bhs, REJ_PROTOCOL); return 0; }
        return task_scsi_cmd(c, bhs, data, dlen);
    case OP_DATA_OUT:
        return task_data_out(c, bhs, data, dlen);
    case OP_NOP_OUT:
        return handle_nop_out(c, bhs, data, dlen);
    case OP_TMF_REQ:
        if (c->discovery) { send_reject(c, bhs, REJ_PROTOCOL); return 0; }
        if (!conn_check_cmdsn(c, bhs)) return 0;
        return task_tmf(c, bhs);
    case OP_TEXT_REQ:
        if (!conn_check_cmdsn(c, bhs)) return 0;
        return text_handle(c, bhs, data, dlen);
    case OP_LOGOUT_REQ:
        return handle_logout(c, bhs);
    case OP_LOGIN_REQ:
        log_debug("iscsi: login request in full feature phase");
        return -1;
    case OP_SNACK:
        send_reject(c, bhs, REJ_SNACK);
        return 0;
    default:
        log_debug("iscsi: unsupported opcode 0x%02x", op);
        send_reject(c, bhs, REJ_NOT_SUPPORTED);
        return 0;
    }
}

/* Parses and dispatches every complete PDU in rx. Returns -1 on a fatal error. */
static int process_rx(struct iscsi_conn *c)
{
    size_t off = 0;
    int rc = 0;
    while (c->rx_len - off >= ISCSI_BHS_LEN && !c->dead) {
        uint8_t *bhs = c->rx + off;
        if (tx_over(c, bhs)) { c->rx_paused = true; break; }     /* resumed by conn_resume_rx */
        uint32_t ahs = bhs_ahs_len(bhs), dl = bhs_data_len(bhs);
        bool hd = c->hdigest, dd = c->ddigest;
        if (dl > ISCSI_OUR_MRDSL) { log_debug("iscsi: data segment %u too long", dl); rc = -1; break; }
        uint64_t total = ISCSI_BHS_LEN + pdu_rest_len(bhs, hd, dd);
        if (total > c->rx_cap) {
            if (total > RX_MAX) { rc = -1; break; }
            uint8_t *nrx = realloc(c->rx, RX_MAX);       /* grow once, for big data PDUs */
            if (!nrx) { rc = -1; break; }
            c->rx = nrx;
            c->rx_cap = RX_MAX;
            break;                                      /* bhs moved: re-parse after the read */
        }
        if (c->rx_len - off < total) break;
        uint8_t *p = bhs + ISCSI_BHS_LEN + ahs;
        if (hd) {
            uint32_t want = iscsi_crc32c(bhs, ISCSI_BHS_LEN + ahs, 0), got;
            memcpy(&got, p, 4);
            if (want != got) { log_debug("iscsi: header digest error"); rc = -1; break; }
            p += 4;
        }
        if (dd && dl) {
            uint32_t want = iscsi_crc32c(p, dl + pad4(dl), 0), got;
            memcpy(&got, p + dl + pad4(dl), 4);
            if (want != got) { log_debug("iscsi: data digest error"); rc = -1; break; }
        }
        off += total;
        if (dispatch(c, bhs, p, dl) < 0) { rc = -1; break; }
    }
    if (rc == 0 && off && !c->dead) {
        memmove(c->rx, c->rx + off, c->rx_len - off);
        c->rx_len -= off;
    }
    return rc;
}

/* Periodic check from the network thread: drop connections that never finish login. */
/* The Data-Out timeout (limits read unlocked: a hint). */
static uint64_t dout_limit_ns(const struct iscsi_server *s)
{
    return (uint64_t)s->limits.dout_timeout_s * 1000000000ull;
}

/* A command that holds a data-out buffer but gets no Data-Out for dout_timeout_s. */
static bool dout_stalled(struct iscsi_conn *c, uint64_t now, uint64_t limit_ns)
{
    if (!c->dout_bytes || now < c->dout_grace_ns) return false;
    /* not read because of our output: exempt while that output moves (or is others'), not
     * when the client stops reading its own replies to keep its buffers */
    if (c->rx_paused && (!c->tx_bytes || now - c->tx_progress_ns < limit_ns)) return false;
    for (unsigned i = 0; i < ISCSI_TASK_HASH; i++)
        for (struct iscsi_task *t = c->tasks[i]; t; t = t->hnext)
            if ((t->state == TS_WAIT_R2T || t->state == TS_WAIT_UNSOL) && t->dout && now - t->dout_ns > limit_ns)
                return true;
    return false;
}

void conn_check_timeouts(struct net_thread *nt, bool thread_stalled)
{
    uint64_t now = nasd_now_ns();
    uint64_t dout_limit = dout_limit_ns(nt->srv);
    for (struct iscsi_conn *c = nt->conns, *next; c; c = next) {
        next = c->next;
        /* this thread did not read for a while (a stall in an inline command): their
         * Data-Out may sit in the sockets */
        if (thread_stalled) c->dout_grace_ns = now + dout_limit;
        if (c->phase == PH_LOGIN && now - c->born_ns > LOGIN_TIMEOUT_NS) {
            log_info("iscsi: login timeout, dropping connection");
            conn_close(c);
        } else if (c->phase == PH_FFP && dout_limit && dout_stalled(c, now, dout_limit)) {
            log_warn("iscsi: %s: a command waited %u s for its Data-Out; dropping the connection", c->ini_log,
                     nt->srv->limits.dout_timeout_s);
            conn_close(c);
        }
    }
}

/* Called after output shrank (a flush, a command back from a worker): reads the PDUs
 * left in rx while paused once the connection is below the bound again. */
void conn_resume_rx(struct iscsi_conn *c)
{
    while (!c->dead && c->rx_paused && c->tx_bytes + c->din_pending < ISCSI_TX_LOW) {
        size_t before = c->rx_len;
        c->rx_paused = false;
        /* its Data-Out waited in the socket meanwhile: the clock starts again */
        c->dout_grace_ns = nasd_now_ns() + dout_limit_ns(c->nt->srv);
        if (process_rx(c) < 0) { conn_flush(c); conn_close(c); return; }
        conn_flush(c);
        if (c->rx_len == before) break;            /* still blocked on the same PDU (global) */
    }
    update_events(c);
}

void conn_global_poll(struct net_thread *nt)
{
    if (!nt->global_wait || atomic_load(&nt->srv->queued) > ISCSI_TX_GLOBAL) return;
    nt->global_wait = false;                       /* set again by whoever pauses */
    for (struct iscsi_conn *c = nt->conns, *next; c; c = next) {
        next = c->next;
        if (c->rx_paused) conn_resume_rx(c);      /* may close c only (freed after the batch) */
    }
}

void conn_on_event(struct iscsi_conn *c, uint32_t events)
{
    /* Every step below may close c (a write error in conn_flush, a fatal PDU); the
     * reference keeps it readable until the end of this function. */
    atomic_fetch_add(&c->refs, 1);
    if (events & EPOLLOUT) conn_flush(c);
    if (!c->dead && c->rx_paused) {
        if (events & (EPOLLERR | EPOLLHUP)) conn_close(c);     /* peer gone while paused */
    } else if (!c->dead && (events & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
        ssize_t n = c->rx_len == c->rx_cap ? -2 : read(c->fd, c->rx + c->rx_len, c->rx_cap - c->rx_len);
        if (n == -2 || n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            conn_flush(c);
            conn_close(c);
        } else if (n > 0) {
            c->rx_len += (size_t)n;
            if (process_rx(c) < 0) {
                conn_flush(c);       /* e.g. a login reject that explains the drop */
                conn_close(c);
            } else {
                conn_flush(c);
            }
        }
    }
    conn_resume_rx(c);
    conn_put(c);
}
