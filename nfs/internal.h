#pragma once
/* Internal structures of the NFS service shared by its source files. */
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include "nfs/conn_limit.h"
#include "nfs/drc.h"
#include "nfs/fh.h"
#include "nfs/nfs.h"
#include "nfs/rpc.h"
#include "nfs/xdr.h"

#define NFS_MAX_IO (1024 * 1024)            /* rtmax / wtmax */
#define NFS_MAX_RECORD (NFS_MAX_IO + 64 * 1024)
#define NFS_REPLY_CAP (NFS_MAX_IO + 64 * 1024)
#define NFS_OBJ_CACHE_MAX 4096              /* cached fds per export */

/* A filesystem object resolved from a handle; cached per export. Its fds are
 * backend objects of fs (storage/vfs.h), reached only through fs->vfs. */
struct nfs_obj {
    struct nasd_fh key;
    struct nasd_fsroot *fs;  /* the export's; outlives the object (requests hold the export) */
    int fd;                  /* open_handle(O_PATH) */
    int io_fd;               /* lazily opened for read/write, -1 */
    int io_rw;               /* io_fd is writable */
    int old_io_fd;           /* replaced read-only fd, closed on free */
    atomic_int refs;         /* the cache holds one while the object is cached */
    int cached;
    ino_t ino;
    struct nfs_obj *hnext, *inext, *lru_prev, *lru_next;
};

struct nfs_export {
    atomic_int refs;
    struct nfs_export_cfg cfg;
    struct nasd_fsroot *fs;
    struct nasd_io_stats *stats;
    uint32_t gen;
    dev_t dev;
    ino_t root_ino;
    struct nasd_fh root_key;
    uint8_t root_fh[NFS_FH_MAX];
    size_t root_fh_len;
    pthread_mutex_t cache_lock;
    struct nfs_obj **buckets;   /* by handle */
    struct nfs_obj **ibuckets;  /* by inode number, to drop fds of removed files */
    unsigned nbuckets, count;
    struct nfs_obj lru;      /* sentinel: lru.lru_next is most recent */
    pthread_mutex_t size_locks[64]; /* serialize size changes for quota accounting */
};

/* A MOUNT table entry (mount_table.c): in a hash chain and in the age list. */
struct nfs_mount_entry {
    struct nfs_mount_entry *hnext, *prev, *next;
    uint64_t hash;
    char host[64];
    char *path;              /* stored right after the entry, same allocation */
};
#define NFS_MOUNTS_MAX 4096
#define NFS_MOUNTS_BUCKETS 1024

struct nfs_req;

struct nfs_server {
    struct nfs_server_cfg cfg;
    struct nfs_fh_secret secret;
    uint8_t write_verf[8];
    pthread_rwlock_t exports_lock;
    struct nfs_export **exports;
    unsigned nexports, exports_cap;
    int listen_fd[3];        /* nfs, mount, portmap (-1 if none) */
    int port[3];
    int epfd, stop_fd;
    pthread_t *workers;
    int nworkers;
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    struct nfs_req *qhead, *qtail;
    int qlen;                /* calls in the queue */
    int qidle;               /* workers waiting on qcond */
    int nspare;              /* spare workers running (nfs_server_stop waits for them) */
    pthread_cond_t spare_gone;
    int stopping;
    int leading;             /* a worker runs the network loop (net_lead in server.c) */
    int net_failed;          /* epoll failed: nobody leads again */
    pthread_mutex_t mnt_lock;
    struct nfs_mount_entry **mnt_buckets; /* NULL until the first MNT */
    struct nfs_mount_entry mnt_list;       /* sentinel: next is the oldest */
    unsigned mnt_count;
    struct nfs_conn *conns;
    struct nfs_conn_limits limits;  /* network thread only */
    unsigned max_conns, max_per_addr;
    uint64_t idle_ns;
    uint64_t accept_resume_ns;      /* accepting paused (EMFILE) until then; 0: not paused */
    uint64_t next_sweep_ns;
    _Atomic size_t out_total;       /* reply bytes queued on all connections */
    struct nfs_drc *drc;     /* duplicate request cache (NULL: disabled) */
};

struct nfs_conn {
    int kind;                /* epoll tag: 0 = connection */
    atomic_int refs;
    int fd;
    struct nfs_server *srv;
    struct sockaddr_storage peer;
    char peer_str[64];
    struct rm_reasm rm;
    uint8_t *stash;             /* read but not parsed: the connection had its fill of calls */
    size_t stash_off, stash_len;/* network thread only */
    atomic_int has_stash;       /* stash_len > 0, for conn_update_events_locked */
    int portmap_only;           /* came in on the portmap port (admitted without an export's list) */
    pthread_mutex_t send_lock;  /* reply output, out_* and epoll event changes */
    atomic_int dead;
    atomic_int inflight;
    atomic_int paused;          /* not reading: too many calls or replies pending */
    uint32_t ep_events;         /* currently registered epoll events */
    uint8_t *out;               /* reply bytes the socket did not take yet */
    size_t out_off, out_len, out_cap;
    _Atomic size_t out_queued;  /* out_len - out_off, readable without the lock */
    struct nfs_conn *cprev, *cnext; /* server list, network thread only */
    _Atomic uint64_t last_io_ns;    /* last bytes in or out, for the idle timeout */
};

struct nfs_req {
    struct nfs_req *next;
    struct nfs_conn *conn;
    uint8_t *rec;
    size_t len;
    uint64_t t_arrive;
};

#define CONN_MAX_INFLIGHT 256      /* a connection's calls in the server; the rest waits in its socket */
#define CONN_RESUME_INFLIGHT 128
#define OUT_PAUSE_BYTES (8u << 20)   /* stop reading calls while this much output is queued */

/* conn_out.c: reply output of a connection (send_lock guards out_* and epoll changes) */
struct nfs_worker;
void nfs_conn_put(struct nfs_conn *c);
void nfs_conn_kill(struct nfs_conn *c);
size_t nfs_out_pending(const struct nfs_conn *c);
void nfs_conn_update_events_locked(struct nfs_conn *c);
int nfs_conn_may_resume(const struct nfs_conn *c);
void nfs_conn_maybe_resume(struct nfs_conn *c);
void nfs_cork_flush(struct nfs_worker *w, struct nfs_conn *c);
void nfs_worker_reply(struct nfs_worker *w, struct nfs_conn *c, uint8_t *buf, size_t len);
void nfs_conn_flush(struct nfs_conn *c);

#define NFS_NET_BUF (256 * 1024)
#define NFS_DEFAULT_WORKERS 4
/* Calls waiting on one busy dataset (a slow COMMIT) each hold a worker: with 4, three of
 * them stopped the whole server, as the network loop needs one more. A leader that hands
 * the loop over with no worker idle starts a spare (up to this many), which ends after
 * NFS_SPARE_IDLE_S idle. Always running 16 grew the daemon by 190 MiB more under 37's
 * hostile load (a malloc arena each). */
#define NFS_MAX_SPARE_WORKERS 60
#define NFS_SPARE_IDLE_S 5
#define NFS_CORK_BYTES (64 * 1024)
#define NFS_BATCH_MAX 8       /* calls of one connection a worker takes at once */
struct nfs_worker {
    struct nfs_server *srv;
    uint8_t *rbuf;           /* 4 bytes record mark + reply */
    uint8_t *netbuf;         /* socket reads while this worker leads the network loop */
    uint64_t cpu_mark;       /* thread CPU clock when its last call ended (one read per call) */
    uint8_t *cork;           /* NFS_CORK_BYTES: replies of a batch of calls, sent together */
    size_t cork_len;
    int corking;             /* in run_batch (server.c) */
    int handed_off;          /* it led, and gave the network loop up inside a call it ran itself */
    int spare;               /* started by a hand-off with no worker idle: ends when idle */
    int creds_valid;
    uint32_t fsuid, fsgid, ngroups;
    uint32_t groups[RPC_MAX_GIDS + 1];
};

/* Per-request context for MOUNT/NFS procedures. */
struct nfs_ctx {
    struct nfs_server *srv;
    struct nfs_worker *w;
    struct nfs_conn *conn;
    struct rpc_call call;
    struct xdr_dec *args;
    struct xdr_enc *res;
    struct nfs_export *exp;  /* export of the first resolved handle (ref held) */
    uint32_t uid, gid, ngids;  /* credentials after squashing */
    uint32_t gids[RPC_MAX_GIDS];
    enum nasd_op_kind kind;
    uint64_t bytes;
    int status;              /* NFS status for stats (0 = ok) */
};

/* export.c */
struct nfs_export *nfs_export_find_id(struct nfs_server *s, uint32_t id);   /* ref'd */
struct nfs_export *nfs_export_find_path(struct nfs_server *s, const char *path);
/* Export whose path is path or its longest ancestor; *rest: the remaining
 * components (no leading '/'; may be ""). ref'd, NULL if none. */
struct nfs_export *nfs_export_find_prefix(struct nfs_server *s, const char *path, const char **rest);
void nfs_export_put(struct nfs_export *e);
int nfs_export_allows(const struct nfs_export *e, const struct sockaddr_storage *peer);
/* 1 if some export admits peer (checked when it connects to NFS or MOUNT). */
int nfs_exports_admit(struct nfs_server *s, const struct sockaddr_storage *peer);
int nfs_net_match(const struct nfs_client_net *n, const struct sockaddr_storage *peer);
void nfs_exports_clear(struct nfs_server *s);
int nfs_obj_get(struct nfs_export *e, struct nfs_worker *w, const struct nasd_fh *k,
                struct nfs_obj **out);
void nfs_obj_put(struct nfs_obj *o);
void nfs_obj_evict(struct nfs_export *e, struct nfs_obj *o);
void nfs_obj_evict_ino(struct nfs_export *e, ino_t ino);
int nfs_obj_io_fd(struct nfs_export *e, struct nfs_worker *w, struct nfs_obj *o, int want_write);
size_t nfs_export_make_fh(struct nfs_server *s, const struct nfs_export *e,
                          const struct nasd_fh *k, uint8_t *out);
/* Attributes of the object fd itself (fstat through the backend). 0 or -errno. */
int nfs_vfs_fstat(struct nasd_fsroot *fs, int fd, struct stat *st);

/* creds.c */
void nfs_creds_root(struct nfs_worker *w);
void nfs_creds_user(struct nfs_ctx *c);
void nfs_ctx_set_creds(struct nfs_ctx *c, const struct nfs_export *e);
int nfs_may(const struct nfs_ctx *c, const struct stat *st, int want, int owner_override);

/* server.c */
void nfs_conn_send_reply(struct nfs_conn *conn, uint8_t *buf, size_t len);
/* Decodes, runs and answers one RPC record on conn (what a worker does for each call);
 * returns the reply length in w->rbuf + 4 (0 when nothing was sent). */
size_t nfs_server_handle_record(struct nfs_worker *w, struct nfs_conn *conn, const uint8_t *rec, size_t len,
                                uint64_t t_arrive);

/* mount.c */
void nfs_mount_dispatch(struct nfs_ctx *c);
void nfs_portmap_dispatch(struct nfs_ctx *c);

/* mount_table.c */
/* "/a//b/./c/" -> "/a/b/c"; -EACCES for a ".." component, -EINVAL if not absolute. */
int nfs_mount_path_normalize(const char *in, char *out, size_t outlen);
void nfs_mounts_add(struct nfs_server *s, const char *host, const char *path);
void nfs_mounts_remove(struct nfs_server *s, const char *host, const char *path); /* path NULL: all of host */
unsigned nfs_mounts_count(struct nfs_server *s);
void nfs_mounts_clear(struct nfs_server *s);

/* nfs3.c */
void nfs3_dispatch(struct nfs_ctx *c);
