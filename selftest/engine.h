#pragma once
/* Internals shared by the job manager, the block-I/O driver and the protocol
 * back ends (iSCSI, NFS). One job = one thread = one st_run. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <jansson.h>
#include "selftest/latency.h"
#include "selftest/selftest.h"
#include "storage/fsroot.h"

/* Where and how to reach the export; filled at submit from the DB. */
struct st_target {
    enum export_type type;
    /* iSCSI */
    char portal[160], iqn[224], initiator[224];
    char chap_user[64], chap_secret[64], mutual_user[64], mutual_secret[64];
    int lun;
    /* NFS */
    char server[64], export_path[1024];
    struct nasd_fsroot *fs;  /* the dataset, for the temp directory (ref held) */
    int nfs_port, mount_port;
    uint32_t uid, gid;      /* effective ids on the server after squashing */
};

struct st_run {
    int64_t job_id;
    int pattern, seconds, qd, destructive;
    struct st_target tgt;
    atomic_int *cancel;
    /* progress and timeline: written by the job thread, read by REST under lock */
    pthread_mutex_t *lock;
    double *progress;
    json_t *timeline;
    /* measurement of the timed phase */
    struct st_lat lat;
    uint64_t ops, bytes, errors;
    uint64_t run_start_ns, run_end_ns;
    uint64_t tl_next_ns, tl_ops, tl_bytes;
    int tl_sec;
    /* integrity */
    uint64_t verified, bad;
    char first_bad[160];
    uint32_t io_size;
    char error[512];
    /* failed requests by kind (ST_ERR_*), the first one's message */
    uint64_t err_kind[7];
    char first_error[256];
};

/* Why requests failed: what a user can act on. */
enum { ST_ERR_NOSPC, ST_ERR_QUOTA, ST_ERR_EIO, ST_ERR_TIMEOUT, ST_ERR_LOGIN, ST_ERR_CONNECTION, ST_ERR_OTHER };
const char *st_err_name(int kind);
/* Kind of a failed request from its -errno and the client library's message. */
int st_err_kind(int status, const char *msg);
/* Counts one failed request (status -errno, msg may be NULL). */
void st_note_error(struct st_run *r, int status, const char *msg);
/* The kind most requests failed with, or -1 when none failed. */
int st_main_cause(const struct st_run *r);

/* Back-end of the block driver: asynchronous reads/writes at byte offsets. */
struct st_slot {
    int write, busy, measure;
    uint64_t off, seq, t0;
    uint32_t len;
    uint8_t *buf;
    struct st_driver *drv;
};

struct st_io {
    void *ctx;
    uint32_t granularity;   /* offsets and lengths must be multiples (iSCSI block size, NFS 1) */
    uint64_t size;          /* bytes addressable for the test */
    int preserve;           /* save and restore what read patterns overwrite (iSCSI volumes) */
    int (*submit)(void *ctx, struct st_slot *s);     /* 0 queued, else -errno */
    int (*wait)(void *ctx, int timeout_ms);          /* services completions; <0 connection lost */
    int (*flush)(void *ctx);                         /* synchronous; 0 or -errno */
    const char *(*errmsg)(void *ctx);
};

/* Called by back ends on completion; status 0 or -errno; reads have filled s->buf. */
void st_slot_done(struct st_slot *s, int status);

/* The block patterns (4k-randread, 512-seqread, 4k-randwrite) over an st_io. 0 or -1 with r->error. */
int st_run_blocks(struct st_run *r, struct st_io *io);

/* Measurement helpers (also used by the NFS metadata loop). */
void st_measure_start(struct st_run *r);
void st_measure_op(struct st_run *r, uint64_t lat_ns, uint64_t bytes, int ok);
void st_measure_tick(struct st_run *r, uint64_t now_ns);   /* timeline + progress */
void st_measure_end(struct st_run *r);
void st_set_progress(struct st_run *r, double p);
int st_cancelled(struct st_run *r);
void st_note_bad(struct st_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Protocol runners: 0, or -1 with r->error. */
int st_run_iscsi(struct st_run *r);
int st_run_nfs(struct st_run *r);
