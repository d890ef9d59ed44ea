#pragma once
/* Internal structures of the iSCSI target: server, network threads, connections
 * (one connection per session, MaxConnections=1), tasks and targets. */
#include "iscsi/iscsi.h"
#include "iscsi/pdu.h"
#include "iscsi/scsi.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define ISCSI_OUR_MRDSL 262144u        /* what we accept per PDU data segment */
#define ISCSI_OUR_MAX_BURST (1u << 20)
#define ISCSI_OUR_FIRST_BURST 65536u   /* immediate data per command (RFC 7143 default; 256 KiB made 1 MiB writes 0.65x) */
#define ISCSI_CMD_WINDOW 256u
#define ISCSI_LOGIN_MAX_TEXT 65536u
#define ISCSI_TASK_HASH 256u
#define ISCSI_MAX_TASKS (2 * ISCSI_CMD_WINDOW)   /* incl. immediate commands */
#define ISCSI_MAX_DOUT_BYTES (64ull << 20)        /* per connection, waiting for data */
#define ISCSI_MAX_DOUT_GLOBAL (256ull << 20)      /* all connections together */
#define ISCSI_MAX_DOUT_ADDR (128ull << 20)        /* all connections of one initiator address */
#define ISCSI_DOUT_SHARE (8ull << 20)             /* an address holding less may go over the global */
#define ISCSI_DOUT_PEER_BUCKETS 256u              /* per-address sums: a hash table of the addresses */
#define ISCSI_TPGT 1
/* Flow control: a connection whose queued output (plus data-in of commands still on a
 * worker) is above TX_HIGH is not read from until it drains below TX_LOW, like LIO/tgt;
 * while all connections together hold more than TX_GLOBAL, the ones holding more than
 * TX_SHARE, or about to run a READ of more than TX_SHARE, pause too. */
#define ISCSI_TX_HIGH (16u << 20)
#define ISCSI_TX_LOW (8u << 20)
#define ISCSI_TX_GLOBAL (128ull << 20)
#define ISCSI_TX_SHARE (1u << 20)
#define ISCSI_LOGIN_MAX_PDUS 64u       /* login PDUs per connection (continuations, stages) */

struct iscsi_tgt {
    atomic_int refs;
    atomic_bool removed;
    struct iscsi_target_cfg cfg;       /* bdev pointers are not used from here */
    unsigned nlus;
    struct iscsi_lu *lus;
    struct nasd_io_stats *stats;
};

void tgt_put(struct iscsi_tgt *t);
struct iscsi_lu *tgt_find_lu(struct iscsi_tgt *t, uint64_t lun);

struct iscsi_conn;

enum task_state { TS_WAIT_UNSOL = 1, TS_WAIT_R2T, TS_EXEC, TS_DONE };

struct iscsi_task {
    struct iscsi_conn *conn;
    struct iscsi_task *hnext;          /* ITT hash chain */
    struct iscsi_task *qnext;          /* worker / completion queue */
    enum task_state state;
    atomic_bool aborted;               /* the worker reads it */
    bool in_hash;
    bool abort_waits;                  /* aborted on a worker: counted in conn->aborting */
    uint8_t lun_field[8];
    uint32_t itt, cmdsn, edtl;
    uint8_t flags;                     /* SCSI Command byte 1 */
    uint8_t cdb[16];
    struct scsi_cmd sc;
    uint8_t *dout;                     /* data-out buffer (sc.dout_need bytes) */
    uint32_t out_len;                  /* data-out bytes to receive (EDTL when W is set) */
    uint32_t recv;                     /* next expected data-out offset */
    uint32_t seq_end;                  /* end offset of current unsolicited/R2T sequence */
    uint32_t exp_datasn, r2tsn, ttt;
    uint32_t tmf_itt;                  /* ABORT TASK answered when the R2T data arrives */
    bool tmf_waits;                    /* that ABORT TASK is still unanswered */
    uint8_t res_flags;                 /* DIN_O / DIN_U override for error paths */
    uint32_t res_count;
    uint64_t t_arrive, cpu_ns, cpu_mark;
    uint64_t dout_ns;                  /* when data-out last arrived (or its buffer was taken) */
    uint32_t din_hold;                 /* counted in conn->din_pending while on a worker */
};

struct tx_buf {
    struct tx_buf *next;
    uint32_t hlen, dlen, tlen;
    const uint8_t *data;
    void *free_ptr;                    /* released once sent */
    uint8_t hdr[ISCSI_BHS_LEN + 4];
    uint8_t trail[8];                  /* pad + data digest */
    uint8_t inl[64];                   /* small payloads (sense data) */
};

struct net_thread;

/* Data-out bytes held by all connections of one initiator address. */
struct dout_peer {
    uint8_t addr[16];
    _Atomic uint64_t bytes;
    unsigned refs;                     /* connections (srv->cap_lock) */
    struct dout_peer *next;
};

enum conn_phase { PH_LOGIN = 0, PH_FFP, PH_CLOSING };
enum chap_state { CHAP_NONE = 0, CHAP_WAIT_A, CHAP_WAIT_R, CHAP_OK };

struct iscsi_conn {
    int kind;                          /* epoll tag: must stay first */
    struct net_thread *nt;
    struct iscsi_conn *next, *prev;    /* per-thread list */
    struct iscsi_conn *snext, *sprev;  /* server session registry (srv->sess_lock) */
    bool registered;
    atomic_bool reinstated;            /* a newer login took over this I_T nexus */
    atomic_bool fenced;                /* reinstated: workers run none of its commands any more */
    atomic_int executing;              /* its commands inside scsi_execute now (worker or inline) */
    unsigned aborting;                 /* aborted tasks still on a worker (their writes may land) */
    struct tmf_wait { uint32_t itt; uint8_t resp; bool close_after; } tmf_wait[32];
    unsigned ntmf_wait;                /* TMF responses held until aborting is 0 */
    int fd;
    atomic_int refs;                   /* the thread's own + one per task on a worker */
    bool dead;                         /* socket closed, waiting for worker refs */
    enum conn_phase phase;
    bool close_after_flush;
    bool want_out;                     /* EPOLLOUT wanted: the socket was full */
    uint32_t ev_mask;                  /* events registered with epoll */
    bool rx_paused;                    /* too much output queued: EPOLLIN off, rx kept */
    bool admitted, counted_prelogin;   /* in srv->nconns / srv->nprelogin */
    uint8_t peer[16];                  /* initiator key for the caps (nasd_peer_key: IPv6 by /64) */
    char peer_str[64];
    size_t tx_bytes;                   /* bytes queued in tx_head.. */
    uint64_t din_pending;              /* data-in of commands running on workers */
    unsigned login_pdus;
    uint64_t born_ns;
    uint64_t dout_bytes;               /* data-out buffers held by pending tasks */
    struct dout_peer *dpeer;           /* its address's data-out sum (held until the last task is gone) */
    uint64_t dout_grace_ns;            /* no Data-Out timeout before this: reading was paused by us */
    uint64_t tx_progress_ns;           /* the socket last took bytes of our output */
    /* receive */
    uint8_t *rx;
    size_t rx_len, rx_cap;
    /* transmit */
    struct tx_buf *tx_head, *tx_tail;
    size_t tx_off;
    /* login / negotiated */
    int login_stage;                   /* current stage (0 security, 1 operational) */
    bool login_started, auth_done, discovery;
    bool opt_sent_mrdsl, tpgt_sent;
    bool neg_first_burst;         /* FirstBurstLength agreed (MaxBurstLength may not go below it) */
    enum chap_state chap;
    uint8_t chap_id, chap_chal[16];
    bool disc_required, disc_all;      /* discovery CHAP required / passed with its own creds */
    struct iscsi_chap auth;            /* the credentials this login was checked against */
    char *login_acc;                   /* accumulated text for C-bit continuations */
    size_t login_acc_len;
    char initiator[224];
    char ini_log[320];                 /* initiator escaped for the log (util/log) */
    char nexus[NEXUS_LEN];
    uint8_t isid[6];
    uint16_t tsih;
    uint32_t login_itt;
    struct iscsi_tgt *tgt;
    uint32_t lu_gen[ISCSI_MAX_LUNS];   /* reset generation seen per LU (unit attentions) */
    bool hdigest, ddigest;             /* active in full feature phase */
    bool neg_hdigest, neg_ddigest;
    uint32_t mrdsl_tx;                 /* initiator's MaxRecvDataSegmentLength */
    uint32_t first_burst, max_burst, max_r2t;
    bool immediate_data, initial_r2t;
    /* sequence numbers */
    uint32_t stat_sn, exp_cmd_sn, max_cmd_sn;
    unsigned ntasks;
    uint32_t next_ttt;
    struct iscsi_task *tasks[ISCSI_TASK_HASH];
    char local_addr[80];               /* for SendTargets: "ip:port" */
};

struct net_thread {
    int kind;
    struct iscsi_server *srv;
    int idx;
    pthread_t th;
    int epfd, evfd;
    atomic_bool stop, kick_targets;
    pthread_mutex_t lock;              /* protects done_* and new_conns */
    struct iscsi_task *done_head, *done_tail;
    int new_fds[64];
    unsigned nnew;
    struct iscsi_conn *conns;
    struct iscsi_conn *reap;           /* closed, freed after the current epoll batch */
    uint64_t accept_resume_ns;         /* listener taken out of epoll (EMFILE) until then */
    bool global_wait;                  /* a connection paused for the global output bound */
};

struct iscsi_server {
    int listen_fd, port;
    int kind_listen;
    pthread_rwlock_t tgt_lock;
    struct iscsi_tgt **tgts;
    unsigned ntgts;
    unsigned nnet;
    struct net_thread *nt;
    atomic_uint rr;
    atomic_uint next_tsih;
    pthread_mutex_t sess_lock;
    struct iscsi_conn *sessions;       /* normal sessions in full feature phase */
    /* worker pool */
    unsigned nworkers;
    pthread_t *workers;
    pthread_mutex_t wq_lock;
    pthread_cond_t wq_cond;
    struct iscsi_task *wq_head, *wq_tail;
    bool wq_stop;
    struct iscsi_chap disc_auth;       /* tgt_lock */
    /* connection caps (iscsi_server_set_limits) and their accounting */
    pthread_mutex_t cap_lock;
    struct iscsi_limits limits;
    unsigned nconns, nprelogin;
    struct peer_count { uint8_t addr[16]; unsigned n; } *peers;
    unsigned npeers, peers_cap;
    _Atomic uint64_t queued;           /* sum of tx_bytes + din_pending of all connections */
    _Atomic uint64_t dout_total;       /* sum of dout_bytes of all connections */
    struct dout_peer *dout_peers[ISCSI_DOUT_PEER_BUCKETS];   /* the same per initiator address (cap_lock) */
    uint64_t dout_seed;                /* random key of that table's hash */
    /* CHAP challenges recently sent (cap_lock): a mutual-CHAP challenge equal to one of
     * them is a reflection attempt */
    uint8_t sent_chal[64][16];
    unsigned sent_chal_next;
};

enum { KIND_CONN = 1, KIND_EVENT, KIND_LISTEN };

/* server.c */
struct iscsi_tgt *server_find_target(struct iscsi_server *s, const char *iqn); /* ref'd */
/* Appends "TargetName=..\0TargetAddress=..\0" for targets the initiator may see. */
void server_send_targets(struct iscsi_server *s, struct iscsi_conn *c, const char *which, struct text_out *o);
void worker_submit(struct iscsi_server *s, struct iscsi_task *t);
/* Registers c as the session of its I_T nexus; older sessions of the same nexus to the
 * same target are dropped (session reinstatement, RFC 7143 6.3.5). */
/* -EBUSY: the I_T nexus's old session still runs commands (fenced now): answer the login
 * "service unavailable", the initiator tries again. Matches by target name and nexus. */
int server_session_register(struct iscsi_server *s, struct iscsi_conn *c);
void server_session_unregister(struct iscsi_server *s, struct iscsi_conn *c);
/* The data-out sum of an address, counted once per connection; NULL without memory. */
struct dout_peer *server_dout_peer_get(struct iscsi_server *s, const uint8_t addr[16]);
void server_dout_peer_put(struct iscsi_server *s, struct dout_peer *p);
bool tgt_acl_allows(const struct iscsi_tgt *t, const char *initiator);

/* Caps: admit a new connection from addr (0, or -1 with the reason logged) / release it;
 * conn_logged_in() when it leaves the login phase. */
int server_conn_admit(struct iscsi_server *s, struct iscsi_conn *c);
void server_conn_release(struct iscsi_server *s, struct iscsi_conn *c);
void server_conn_logged_in(struct iscsi_server *s, struct iscsi_conn *c);

/* Discovery CHAP: is it required; does any target or the discovery config use CHAP;
 * the credentials that user+response (to id/chal) prove, *all when they are the
 * discovery credentials. */
bool server_discovery_auth_required(struct iscsi_server *s);
bool server_any_chap(struct iscsi_server *s);
bool server_discovery_creds(struct iscsi_server *s, const char *user, uint8_t id, const uint8_t chal[16],
                            const uint8_t resp[16], struct iscsi_chap *out, bool *all);
/* Remember a CHAP challenge we sent / was this one sent by us recently? */
void server_chap_sent(struct iscsi_server *s, const uint8_t chal[16]);
bool server_chap_was_sent(struct iscsi_server *s, const uint8_t *chal, size_t len);

/* conn.c */
/* Output accounting (tx queue and data-in held by workers), and the check run after a
 * connection's output shrank: resumes reading when it is below the bound. */
void conn_queued_add(struct iscsi_conn *c, int64_t delta);
void conn_resume_rx(struct iscsi_conn *c);
/* Network thread poll while global_wait: resumes its paused connections once the
 * global output is below the bound again. */
void conn_global_poll(struct net_thread *nt);
void conn_new(struct net_thread *nt, int fd);
void conn_on_event(struct iscsi_conn *c, uint32_t events);
void conn_check_timeouts(struct net_thread *nt, bool thread_stalled);
/* Closes the socket; the memory stays valid until conn_reap() (end of the epoll batch,
 * whose later events may still point at c). */
void conn_close(struct iscsi_conn *c);
void conn_reap(struct net_thread *nt);
void conn_put(struct iscsi_conn *c);
void conn_task_done(struct iscsi_task *t);   /* on the conn's thread after a worker ran it */
void conn_flush(struct iscsi_conn *c);
struct tx_buf *tx_new(struct iscsi_conn *c, uint8_t opcode);
void tx_set_data(struct iscsi_conn *c, struct tx_buf *b, const void *data, uint32_t len, void *free_ptr);
void tx_queue(struct iscsi_conn *c, struct tx_buf *b);
void conn_fill_sn(struct iscsi_conn *c, uint8_t *bhs, bool advance_statsn);

/* login.c */
/* Handles one Login Request; returns 0, or -1 to drop the connection now. */
int login_handle(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t dlen);
/* One operational key: updates c, appends the answer to o; false = invalid value. */
bool login_negotiate_key(struct iscsi_conn *c, const char *k, const char *v, struct text_out *o);
/* Full-feature Text Request (SendTargets). */
int text_handle(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t dlen);
/* chap.c */
void chap_md5_response(uint8_t id, const char *secret, const uint8_t *chal, size_t clen, uint8_t out[16]);
/* got is the response to chal for secret (compared in constant time). */
bool chap_response_ok(uint8_t id, const char *secret, const uint8_t *chal, size_t clen, const uint8_t got[16]);

/* Task CPU measured on this thread so far (task.c), see conn_event_charged(). */
extern _Thread_local uint64_t iscsi_task_cpu_measured;
