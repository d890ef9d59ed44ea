/* iSCSI server: listener, network threads (one epoll loop per core, each owning its
 * connections), backend worker pool, and the live target registry. */
#define _GNU_SOURCE
#include "iscsi/iscsi_int.h"
#include "util/net.h"
#include "util/log.h"
#include <xxhash.h>
#include <sys/random.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- targets ---- */

static void tgt_free(struct iscsi_tgt *t)
{
    for (unsigned i = 0; i < t->nlus; i++) iscsi_lu_destroy(&t->lus[i]);
    free(t->lus);
    nasd_stats_put(t->stats);
    free(t);
}

void tgt_put(struct iscsi_tgt *t)
{
    if (t && atomic_fetch_sub(&t->refs, 1) == 1) tgt_free(t);
}

struct iscsi_lu *tgt_find_lu(struct iscsi_tgt *t, uint64_t lun)
{
    for (unsigned i = 0; i < t->nlus; i++)
        if (t->lus[i].lun == lun) return &t->lus[i];
    return NULL;
}

bool tgt_acl_allows(const struct iscsi_tgt *t, const char *initiator)
{
    if (!t->cfg.ninitiators) return true;
    for (unsigned i = 0; i < t->cfg.ninitiators && i < ISCSI_MAX_ACL; i++)
        if (!strcmp(t->cfg.initiators[i], initiator)) return true;
    return false;
}

struct iscsi_tgt *server_find_target(struct iscsi_server *s, const char *iqn)
{
    struct iscsi_tgt *r = NULL;
    pthread_rwlock_rdlock(&s->tgt_lock);
    for (unsigned i = 0; i < s->ntgts; i++)
        if (!strcmp(s->tgts[i]->cfg.iqn, iqn)) { r = s->tgts[i]; atomic_fetch_add(&r->refs, 1); break; }
    pthread_rwlock_unlock(&s->tgt_lock);
    return r;
}

static bool creds_equal(const char *u1, const char *s1, const char *u2, const char *s2)
{
    return !strcmp(u1, u2) && !strcmp(s1, s2);
}

void server_send_targets(struct iscsi_server *s, struct iscsi_conn *c, const char *which, struct text_out *o)
{
    pthread_rwlock_rdlock(&s->tgt_lock);
    for (unsigned i = 0; i < s->ntgts; i++) {
        struct iscsi_tgt *t = s->tgts[i];
        if (strcmp(which, "All") && strcmp(which, t->cfg.iqn)) continue;
        if (!tgt_acl_allows(t, c->initiator)) continue;
        /* only targets this client could log in to */
        if (t->cfg.chap_user[0] && !c->disc_all &&
            !(c->chap == CHAP_OK && creds_equal(c->auth.user, c->auth.secret, t->cfg.chap_user, t->cfg.chap_secret)))
            continue;
        text_add(o, "TargetName", "%s", t->cfg.iqn);
        text_add(o, "TargetAddress", "%s,%d", c->local_addr, ISCSI_TPGT);
    }
    pthread_rwlock_unlock(&s->tgt_lock);
}

void iscsi_server_set_discovery_auth(struct iscsi_server *s, const struct iscsi_chap *a)
{
    pthread_rwlock_wrlock(&s->tgt_lock);
    s->disc_auth = *a;
    s->disc_auth.user[63] = s->disc_auth.secret[63] = s->disc_auth.muser[63] = s->disc_auth.msecret[63] = '\0';
    pthread_rwlock_unlock(&s->tgt_lock);
    log_info("iscsi: discovery authentication %s", a->user[0] ? (a->muser[0] ? "mutual CHAP" : "CHAP") : "off");
}

bool server_discovery_auth_required(struct iscsi_server *s)
{
    pthread_rwlock_rdlock(&s->tgt_lock);
    bool r = s->disc_auth.user[0];
    pthread_rwlock_unlock(&s->tgt_lock);
    return r;
}

bool server_any_chap(struct iscsi_server *s)
{
    pthread_rwlock_rdlock(&s->tgt_lock);
    bool r = s->disc_auth.user[0];
    for (unsigned i = 0; i < s->ntgts && !r; i++) r = s->tgts[i]->cfg.chap_user[0];
    pthread_rwlock_unlock(&s->tgt_lock);
    return r;
}

static bool chap_ok(const char *user, const char *secret, const char *cn, uint8_t id, const uint8_t chal[16],
                    const uint8_t resp[16])
{
    if (!user[0] || strcmp(user, cn)) return false;
    return chap_response_ok(id, secret, chal, 16, resp);
}

bool server_discovery_creds(struct iscsi_server *s, const char *user, uint8_t id, const uint8_t chal[16],
                            const uint8_t resp[16], struct iscsi_chap *out, bool *all)
{
    bool ok = false;
    *all = false;
    pthread_rwlock_rdlock(&s->tgt_lock);
    if (chap_ok(s->disc_auth.user, s->disc_auth.secret, user, id, chal, resp)) {
        *out = s->disc_auth;
        *all = ok = true;
    }
    for (unsigned i = 0; i < s->ntgts && !ok; i++) {
        const struct iscsi_target_cfg *t = &s->tgts[i]->cfg;
        if (chap_ok(t->chap_user, t->chap_secret, user, id, chal, resp)) {
            snprintf(out->user, sizeof out->user, "%s", t->chap_user);
            snprintf(out->secret, sizeof out->secret, "%s", t->chap_secret);
            snprintf(out->muser, sizeof out->muser, "%s", t->mutual_user);
            snprintf(out->msecret, sizeof out->msecret, "%s", t->mutual_secret);
            ok = true;
        }
    }
    pthread_rwlock_unlock(&s->tgt_lock);
    return ok;
}

static void kick(struct net_thread *nt)
{
    uint64_t one = 1;
    if (write(nt->evfd, &one, sizeof one) < 0) { /* counter full: already pending */ }
}

static void kick_all_targets(struct iscsi_server *s)
{
    for (unsigned i = 0; i < s->nnet; i++) {
        atomic_store(&s->nt[i].kick_targets, true);
        kick(&s->nt[i]);
    }
}

static bool iqn_valid(const char *iqn)
{
    size_t l = strnlen(iqn, 224);
    if (l == 0 || l >= 224) return false;
    for (size_t i = 0; i < l; i++) {
        char ch = iqn[i];
        if (ch <= ' ' || ch == ',' || (unsigned char)ch >= 0x7f) return false;
    }
    return true;
}

int iscsi_server_set_target(struct iscsi_server *s, const struct iscsi_target_cfg *cfg)
{
    if (!s || !cfg || !iqn_valid(cfg->iqn) || cfg->nluns > ISCSI_MAX_LUNS || cfg->ninitiators > ISCSI_MAX_ACL)
        return -EINVAL;
    struct iscsi_tgt *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    t->cfg = *cfg;
    t->cfg.iqn[sizeof t->cfg.iqn - 1] = '\0';
    t->cfg.alias[sizeof t->cfg.alias - 1] = '\0';
    t->cfg.chap_user[63] = t->cfg.chap_secret[63] = t->cfg.mutual_user[63] = t->cfg.mutual_secret[63] = '\0';
    for (unsigned i = 0; i < ISCSI_MAX_ACL; i++) t->cfg.initiators[i][223] = '\0';
    t->lus = calloc(cfg->nluns ? cfg->nluns : 1, sizeof *t->lus);
    if (!t->lus) { free(t); return -ENOMEM; }
    for (unsigned i = 0; i < cfg->nluns; i++) {
        const struct iscsi_lun_cfg *l = &cfg->luns[i];
        if (!l->bdev || !l->bdev->block_size || l->bdev->size < l->bdev->block_size || l->lun > 16383 ||
            tgt_find_lu(t, l->lun) || iscsi_lu_init(&t->lus[t->nlus], l->lun, l->bdev)) {
            tgt_free(t);
            return -EINVAL;
        }
        t->nlus++;
    }
    t->stats = nasd_stats_get(cfg->stats);
    atomic_init(&t->refs, 1);
    atomic_init(&t->removed, false);

    struct iscsi_tgt *old = NULL;
    pthread_rwlock_wrlock(&s->tgt_lock);
    unsigned i;
    for (i = 0; i < s->ntgts; i++) if (!strcmp(s->tgts[i]->cfg.iqn, t->cfg.iqn)) break;
    if (i < s->ntgts) {
        old = s->tgts[i];
        s->tgts[i] = t;
    } else {
        struct iscsi_tgt **n = realloc(s->tgts, (s->ntgts + 1) * sizeof *n);
        if (!n) { pthread_rwlock_unlock(&s->tgt_lock); tgt_free(t); return -ENOMEM; }
        s->tgts = n;
        s->tgts[s->ntgts++] = t;
    }
    pthread_rwlock_unlock(&s->tgt_lock);
    if (old) {
        atomic_store(&old->removed, true);
        tgt_put(old);
        kick_all_targets(s);
    }
    log_info("iscsi: target %s %s (%u LUNs)", t->cfg.iqn, old ? "replaced" : "added", t->nlus);
    return 0;
}

int iscsi_server_remove_target(struct iscsi_server *s, const char *iqn)
{
    struct iscsi_tgt *old = NULL;
    pthread_rwlock_wrlock(&s->tgt_lock);
    for (unsigned i = 0; i < s->ntgts; i++) {
        if (!strcmp(s->tgts[i]->cfg.iqn, iqn)) {
            old = s->tgts[i];
            s->tgts[i] = s->tgts[--s->ntgts];
            break;
        }
    }
    pthread_rwlock_unlock(&s->tgt_lock);
    if (!old) return -ENOENT;
    atomic_store(&old->removed, true);
    tgt_put(old);
    kick_all_targets(s);
    log_info("iscsi: target %s removed", iqn);
    return 0;
}

/* ---- session registry ---- */

/* A login that reinstates an I_T nexus (the same target name: an export edit makes a new
 * target object) drops the old session (workers and its thread run none of its commands
 * from now on, its reservations by RESERVE(6) end) and goes ahead only once none of them
 * is still running: the new session's writes must not be overtaken by an old one. A
 * session stays registered until its last command is back (conn_put), so a login after
 * a lost connection waits for that one's commands too. No waiting here, on a network
 * thread: -EBUSY, and the initiator logs in again. */
int server_session_register(struct iscsi_server *s, struct iscsi_conn *c)
{
    bool busy = false, matched = false;
    pthread_mutex_lock(&s->sess_lock);
    for (struct iscsi_conn *o = s->sessions; o; o = o->snext) {
        if (o == c || strcmp(o->tgt->cfg.iqn, c->tgt->cfg.iqn) || strcmp(o->nexus, c->nexus)) continue;
        matched = true;
        atomic_store(&o->fenced, true);   /* a live session, or one whose connection was lost */
        if (!atomic_load(&o->reinstated)) {
            atomic_store(&o->reinstated, true);
            atomic_store(&o->nt->kick_targets, true);
            kick(o->nt);
        }
        busy |= atomic_load(&o->executing) > 0;
    }
    if (!busy) {
        c->sprev = NULL;
        c->snext = s->sessions;
        if (s->sessions) s->sessions->sprev = c;
        s->sessions = c;
        c->registered = true;
    }
    pthread_mutex_unlock(&s->sess_lock);
    /* once nothing of the old session runs (a RESERVE(6) of it past the fence has landed by
     * now) and before the new session can take one under the same nexus */
    if (matched && !busy)
        for (unsigned i = 0; i < c->tgt->nlus; i++) iscsi_lu_release_nexus(&c->tgt->lus[i], c->nexus);
    if (busy) log_info("iscsi: %s: the old session's commands still run; login answered 'service unavailable'", c->ini_log);
    return busy ? -EBUSY : 0;
}

void server_session_unregister(struct iscsi_server *s, struct iscsi_conn *c)
{
    pthread_mutex_lock(&s->sess_lock);
    if (c->registered) {
        if (c->sprev) c->sprev->snext = c->snext; else s->sessions = c->snext;
        if (c->snext) c->snext->sprev = c->sprev;
        c->registered = false;
    }
    pthread_mutex_unlock(&s->sess_lock);
}

/* ---- connection caps ---- */

void iscsi_server_set_limits(struct iscsi_server *s, const struct iscsi_limits *l)
{
    pthread_mutex_lock(&s->cap_lock);
    s->limits = *l;
    pthread_mutex_unlock(&s->cap_lock);
}

static struct peer_count *peer_find(struct iscsi_server *s, const uint8_t *addr)
{
    for (unsigned i = 0; i < s->npeers; i++)
        if (!memcmp(s->peers[i].addr, addr, 16)) return &s->peers[i];
    return NULL;
}

int server_conn_admit(struct iscsi_server *s, struct iscsi_conn *c)
{
    const char *why = NULL;
    pthread_mutex_lock(&s->cap_lock);
    struct peer_count *p = peer_find(s, c->peer);
    if (s->nconns >= s->limits.max_conns) why = "connection limit";
    else if (s->nprelogin >= s->limits.max_prelogin) why = "limit of connections not logged in";
    else if (p && p->n >= s->limits.max_per_addr) why = "per-address connection limit";
    else if (!p) {
        if (s->npeers == s->peers_cap) {
            unsigned ncap = s->peers_cap ? 2 * s->peers_cap : 64;
            struct peer_count *np = realloc(s->peers, ncap * sizeof *np);
            if (!np) why = "out of memory";
            else { s->peers = np; s->peers_cap = ncap; }
        }
        if (!why) { p = &s->peers[s->npeers++]; memcpy(p->addr, c->peer, 16); p->n = 0; }
    }
    if (!why) {
        p->n++;
        s->nconns++;
        s->nprelogin++;
        c->counted_prelogin = true;
        c->admitted = true;
    }
    unsigned n = s->nconns;
    pthread_mutex_unlock(&s->cap_lock);
    if (why) log_warn("iscsi: refusing connection from %s: %s (%u connections)", c->peer_str, why, n);
    return why ? -1 : 0;
}

void server_conn_logged_in(struct iscsi_server *s, struct iscsi_conn *c)
{
    pthread_mutex_lock(&s->cap_lock);
    if (c->counted_prelogin) { s->nprelogin--; c->counted_prelogin = false; }
    pthread_mutex_unlock(&s->cap_lock);
}

void server_conn_release(struct iscsi_server *s, struct iscsi_conn *c)
{
    if (!c->admitted) return;
    pthread_mutex_lock(&s->cap_lock);
    c->admitted = false;
    s->nconns--;
    if (c->counted_prelogin) { s->nprelogin--; c->counted_prelogin = false; }
    struct peer_count *p = peer_find(s, c->peer);
    if (p && --p->n == 0) *p = s->peers[--s->npeers];
    pthread_mutex_unlock(&s->cap_lock);
}

static unsigned dout_bucket(struct iscsi_server *s, const uint8_t addr[16])
{
    return (unsigned)(XXH3_64bits_withSeed(addr, 16, s->dout_seed) % ISCSI_DOUT_PEER_BUCKETS);
}

struct dout_peer *server_dout_peer_get(struct iscsi_server *s, const uint8_t addr[16])
{
    pthread_mutex_lock(&s->cap_lock);
    struct dout_peer **b = &s->dout_peers[dout_bucket(s, addr)], *p = *b;
    while (p && memcmp(p->addr, addr, 16)) p = p->next;
    if (!p && (p = calloc(1, sizeof *p))) {
        memcpy(p->addr, addr, 16);
        p->next = *b;
        *b = p;
    }
    if (p) p->refs++;
    pthread_mutex_unlock(&s->cap_lock);
    return p;
}

void server_dout_peer_put(struct iscsi_server *s, struct dout_peer *p)
{
    if (!p) return;
    pthread_mutex_lock(&s->cap_lock);
    if (--p->refs == 0) {
        struct dout_peer **pp = &s->dout_peers[dout_bucket(s, p->addr)];
        while (*pp != p) pp = &(*pp)->next;
        *pp = p->next;
        free(p);
    }
    pthread_mutex_unlock(&s->cap_lock);
}

void server_chap_sent(struct iscsi_server *s, const uint8_t chal[16])
{
    pthread_mutex_lock(&s->cap_lock);
    memcpy(s->sent_chal[s->sent_chal_next++ % 64], chal, 16);
    pthread_mutex_unlock(&s->cap_lock);
}

bool server_chap_was_sent(struct iscsi_server *s, const uint8_t *chal, size_t len)
{
    bool hit = false;
    if (len != 16) return false;
    pthread_mutex_lock(&s->cap_lock);
    for (unsigned i = 0; i < 64 && i < s->sent_chal_next && !hit; i++) hit = !memcmp(s->sent_chal[i], chal, 16);
    pthread_mutex_unlock(&s->cap_lock);
    return hit;
}

/* ---- worker pool ---- */

void worker_submit(struct iscsi_server *s, struct iscsi_task *t)
{
    t->qnext = NULL;
    pthread_mutex_lock(&s->wq_lock);
    if (s->wq_tail) s->wq_tail->qnext = t; else s->wq_head = t;
    s->wq_tail = t;
    pthread_cond_signal(&s->wq_cond);
    pthread_mutex_unlock(&s->wq_lock);
}

static void *worker_main(void *arg)
{
    struct iscsi_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->wq_lock);
        while (!s->wq_head && !s->wq_stop) pthread_cond_wait(&s->wq_cond, &s->wq_lock);
        struct iscsi_task *t = s->wq_head;
        if (!t) { pthread_mutex_unlock(&s->wq_lock); return NULL; }
        s->wq_head = t->qnext;
        if (!s->wq_head) s->wq_tail = NULL;
        pthread_mutex_unlock(&s->wq_lock);

        /* counted before the fence is read: a reinstating login that set the fence
         * either sees this command in executing or the command sees the fence */
        atomic_fetch_add(&t->conn->executing, 1);
        if (!t->aborted && !atomic_load(&t->conn->fenced)) {
            uint64_t c0 = nasd_thread_cpu_ns();
            scsi_execute(&t->sc);
            t->cpu_ns += nasd_thread_cpu_ns() - c0;
        } else t->aborted = true;
        atomic_fetch_sub(&t->conn->executing, 1);
        struct net_thread *nt = t->conn->nt;
        t->qnext = NULL;
        pthread_mutex_lock(&nt->lock);
        bool was_empty = !nt->done_head;
        if (nt->done_tail) nt->done_tail->qnext = t; else nt->done_head = t;
        nt->done_tail = t;
        pthread_mutex_unlock(&nt->lock);
        if (was_empty) kick(nt);
    }
}

/* ---- network threads ---- */

static void drain_done(struct net_thread *nt)
{
    pthread_mutex_lock(&nt->lock);
    struct iscsi_task *t = nt->done_head;
    nt->done_head = nt->done_tail = NULL;
    pthread_mutex_unlock(&nt->lock);
    while (t) {
        struct iscsi_task *n = t->qnext;
        conn_task_done(t);
        t = n;
    }
}

static void accept_new(struct net_thread *nt)
{
    struct iscsi_server *s = nt->srv;
    for (;;) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: stop polling the listener for a while instead of
                 * spinning on it (level-triggered) */
                log_warn("iscsi: accept: %s, pausing accepts", strerror(errno));
                epoll_ctl(nt->epfd, EPOLL_CTL_DEL, s->listen_fd, NULL);
                nt->accept_resume_ns = nasd_now_ns() + 200000000ull;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) log_warn("iscsi: accept: %s", strerror(errno));
            return;
        }
        struct net_thread *to = &s->nt[atomic_fetch_add(&s->rr, 1) % s->nnet];
        if (to == nt) { conn_new(nt, fd); continue; }
        pthread_mutex_lock(&to->lock);
        if (to->nnew < sizeof to->new_fds / sizeof to->new_fds[0]) { to->new_fds[to->nnew++] = fd; fd = -1; }
        pthread_mutex_unlock(&to->lock);
        if (fd >= 0) conn_new(nt, fd); else kick(to);
    }
}

static void on_kick(struct net_thread *nt)
{
    uint64_t v;
    if (read(nt->evfd, &v, sizeof v) < 0) { /* spurious */ }
    int fds[64];
    unsigned n;
    pthread_mutex_lock(&nt->lock);
    n = nt->nnew;
    memcpy(fds, nt->new_fds, n * sizeof fds[0]);
    nt->nnew = 0;
    pthread_mutex_unlock(&nt->lock);
    for (unsigned i = 0; i < n; i++) conn_new(nt, fds[i]);
    if (atomic_exchange(&nt->kick_targets, false)) {
        for (struct iscsi_conn *c = nt->conns, *next; c; c = next) {
            next = c->next;
            if (c->tgt && atomic_load(&c->tgt->removed)) {
                log_info("iscsi: dropping session of %s (target removed/replaced)", c->ini_log);
                conn_close(c);
            } else if (atomic_load(&c->reinstated)) {
                log_info("iscsi: dropping session of %s (reinstated by a new login)", c->ini_log);
                conn_close(c);
            }
        }
    }
    drain_done(nt);
}

static int listen_kind = KIND_LISTEN;

/* A connection event, with the network thread's CPU for it charged to the export:
 * what the commands measured themselves is recorded with them, the rest (socket
 * reads and writes, PDU parsing, login) is added here. */
static void conn_event_charged(struct iscsi_conn *c, uint32_t events)
{
    struct nasd_io_stats *st = c->tgt ? nasd_stats_get(c->tgt->stats) : NULL;
    uint64_t cpu0 = st ? nasd_thread_cpu_ns() : 0, measured0 = iscsi_task_cpu_measured;
    conn_on_event(c, events); /* may close c; it is freed after the batch */
    if (!st) return;
    uint64_t spent = nasd_thread_cpu_ns() - cpu0, measured = iscsi_task_cpu_measured - measured0;
    if (spent > measured) nasd_stats_add_cpu(st, spent - measured);
    nasd_stats_put(st);
}

static void *net_main(void *arg)
{
    struct net_thread *nt = arg;
    struct epoll_event ev[64];
    uint64_t last_check = nasd_now_ns();
    while (!atomic_load(&nt->stop)) {
        int n = epoll_wait(nt->epfd, ev, 64, nt->global_wait ? 20 : nt->accept_resume_ns ? 200 : 1000);
        uint64_t now = nasd_now_ns();
        if (nt->accept_resume_ns && now >= nt->accept_resume_ns) {
            nt->accept_resume_ns = 0;
            struct epoll_event lev = { .events = EPOLLIN, .data.ptr = &listen_kind };
            epoll_ctl(nt->epfd, EPOLL_CTL_ADD, nt->srv->listen_fd, &lev);
        }
        if (n < 0) { if (errno == EINTR) continue; log_err("iscsi: epoll_wait: %s", strerror(errno)); break; }
        for (int i = 0; i < n; i++) {
            int kind = *(int *)ev[i].data.ptr;
            if (kind == KIND_LISTEN) accept_new(nt);
            else if (kind == KIND_EVENT) on_kick(nt);
            else conn_event_charged(ev[i].data.ptr, ev[i].events);
        }
        conn_global_poll(nt);
        /* after the events: what they brought counts; a batch over 2 s (an inline command
         * stuck in a stall) did not read anybody's Data-Out meanwhile */
        uint64_t after = nasd_now_ns();
        if (after - last_check > 1000000000ull) { conn_check_timeouts(nt, after - now > 2000000000ull); last_check = after; }
        conn_reap(nt);          /* nothing in ev[] points at a closed connection any more */
    }
    while (nt->conns) conn_close(nt->conns);
    conn_reap(nt);
    return NULL;
}

/* ---- lifetime ---- */

struct iscsi_server *iscsi_server_start(const char *portal, int workers, char *err, size_t errlen)
{
    struct iscsi_server *s = iscsi_server_start_held(portal, workers, err, errlen);
    if (s && iscsi_server_listen(s, err, errlen)) {
        iscsi_server_stop(s);
        return NULL;
    }
    return s;
}

int iscsi_server_listen(struct iscsi_server *s, char *err, size_t errlen)
{
    struct epoll_event lev = { .events = EPOLLIN, .data.ptr = &listen_kind };
    if (listen(s->listen_fd, 128) || epoll_ctl(s->nt[0].epfd, EPOLL_CTL_ADD, s->listen_fd, &lev)) {
        snprintf(err, errlen, "iscsi: listen on port %d: %s", s->port, strerror(errno));
        return -errno;
    }
    log_info("iscsi: listening on port %d (%u network threads, %u workers)", s->port, s->nnet, s->nworkers);
    return 0;
}

/* Bound but not listening: connections are refused (not answered "target not found")
 * until iscsi_server_listen, so targets can be configured first. */
struct iscsi_server *iscsi_server_start_held(const char *portal, int workers, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (!portal || nasd_parse_hostport(portal, &ss, &sl)) { snprintf(err, errlen, "bad portal '%s'", portal ? portal : ""); return NULL; }
    struct iscsi_server *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "out of memory"); return NULL; }
    s->kind_listen = KIND_LISTEN;
    pthread_rwlock_init(&s->tgt_lock, NULL);
    pthread_mutex_init(&s->wq_lock, NULL);
    pthread_mutex_init(&s->sess_lock, NULL);
    pthread_mutex_init(&s->cap_lock, NULL);
    s->limits = (struct iscsi_limits){ .max_conns = 1024, .max_per_addr = 64, .max_prelogin = 128, .dout_timeout_s = 30 };
    if (getrandom(&s->dout_seed, sizeof s->dout_seed, 0) != sizeof s->dout_seed) s->dout_seed = nasd_now_ns();
    pthread_cond_init(&s->wq_cond, NULL);
    atomic_init(&s->next_tsih, 0);
    s->listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (s->listen_fd < 0 || setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(s->listen_fd, (struct sockaddr *)&ss, sl)) {
        snprintf(err, errlen, "listen on %s: %s", portal, strerror(errno));
        if (s->listen_fd >= 0) close(s->listen_fd);
        free(s);
        return NULL;
    }
    if (getsockname(s->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
        s->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                : ((struct sockaddr_in6 *)&ss)->sin6_port);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    s->nnet = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (unsigned)ncpu;
    s->nworkers = workers > 0 ? (unsigned)workers : 4;
    s->nt = calloc(s->nnet, sizeof *s->nt);
    s->workers = calloc(s->nworkers, sizeof *s->workers);
    if (!s->nt || !s->workers) goto fail;
    for (unsigned i = 0; i < s->nnet; i++) {
        struct net_thread *nt = &s->nt[i];
        nt->kind = KIND_EVENT;
        nt->srv = s;
        nt->idx = (int)i;
        pthread_mutex_init(&nt->lock, NULL);
        nt->epfd = epoll_create1(EPOLL_CLOEXEC);
        nt->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = nt };
        if (nt->epfd < 0 || nt->evfd < 0 || epoll_ctl(nt->epfd, EPOLL_CTL_ADD, nt->evfd, &ev)) goto fail;
    }
    unsigned nw = 0, nn = 0;
    for (; nw < s->nworkers; nw++)
        if (pthread_create(&s->workers[nw], NULL, worker_main, s)) goto fail_threads;
    for (; nn < s->nnet; nn++)
        if (pthread_create(&s->nt[nn].th, NULL, net_main, &s->nt[nn])) goto fail_threads;
    return s;
fail_threads:
    snprintf(err, errlen, "iscsi: cannot start threads: %s", strerror(errno));
    for (unsigned i = 0; i < nn; i++) { atomic_store(&s->nt[i].stop, true); kick(&s->nt[i]); pthread_join(s->nt[i].th, NULL); }
    pthread_mutex_lock(&s->wq_lock);
    s->wq_stop = true;
    pthread_cond_broadcast(&s->wq_cond);
    pthread_mutex_unlock(&s->wq_lock);
    for (unsigned i = 0; i < nw; i++) pthread_join(s->workers[i], NULL);
    goto cleanup;
fail:
    snprintf(err, errlen, "iscsi server setup failed: %s", strerror(errno));
cleanup:
    if (s->nt)
        for (unsigned i = 0; i < s->nnet; i++) {
            if (s->nt[i].epfd > 0) close(s->nt[i].epfd);
            if (s->nt[i].evfd > 0) close(s->nt[i].evfd);
        }
    close(s->listen_fd);
    free(s->nt);
    free(s->workers);
    free(s);
    return NULL;
}

void iscsi_server_stop(struct iscsi_server *s)
{
    if (!s) return;
    for (unsigned i = 0; i < s->nnet; i++) { atomic_store(&s->nt[i].stop, true); kick(&s->nt[i]); }
    for (unsigned i = 0; i < s->nnet; i++) pthread_join(s->nt[i].th, NULL);
    close(s->listen_fd);
    pthread_mutex_lock(&s->wq_lock);
    s->wq_stop = true;
    pthread_cond_broadcast(&s->wq_cond);
    pthread_mutex_unlock(&s->wq_lock);
    for (unsigned i = 0; i < s->nworkers; i++) pthread_join(s->workers[i], NULL);
    for (unsigned i = 0; i < s->nnet; i++) {
        struct net_thread *nt = &s->nt[i];
        drain_done(nt);                        /* connections are dead: frees tasks + conns */
        for (unsigned k = 0; k < nt->nnew; k++) close(nt->new_fds[k]);
        close(nt->epfd);
        close(nt->evfd);
        pthread_mutex_destroy(&nt->lock);
    }
    for (unsigned i = 0; i < s->ntgts; i++) { atomic_store(&s->tgts[i]->removed, true); tgt_put(s->tgts[i]); }
    free(s->tgts);
    free(s->nt);
    free(s->workers);
    pthread_rwlock_destroy(&s->tgt_lock);
    pthread_mutex_destroy(&s->wq_lock);
    pthread_mutex_destroy(&s->sess_lock);
    pthread_mutex_destroy(&s->cap_lock);
    pthread_cond_destroy(&s->wq_cond);
    free(s->peers);
    free(s);
}

int iscsi_server_port(struct iscsi_server *s) { return s ? s->port : -1; }
