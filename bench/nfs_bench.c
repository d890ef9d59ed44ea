/* NFSv3 benchmark over the libnfs raw async API (one TCP connection, QD outstanding
 * RPCs):
 *  - meta: DIRS directories x FILES empty files created (CREATE), then removed
 *    (REMOVE); ops/s for each phase
 *  - data: a SIZE file written in 1 MiB WRITEs at QD 8, then 4 KiB random READs at QD
 *    for SECONDS
 *  - qd1: one request at a time, per-op latency p50/p99 of GETATTR, LOOKUP, CREATE,
 *    WRITE 32 KiB, READ 128 KiB and COMMIT (after a 32 KiB WRITE), QD1_OPS each
 *  - mc: CLIENTS processes, each with its own connection, one request at a time doing
 *    CREATE, LOOKUP, GETATTR, SETATTR, REMOVE in one shared directory (1000 names in it)
 *    for MC_SECONDS; total ops/s, once per entry of the comma-separated CLIENTS list
 *   nfs_bench --server H --export /path --nfsport P --mountport M [--dirs 100]
 *             [--files 1000] [--qd 32] [--seconds 10] [--size 1073741824] [--label name]
 *             [--phases meta,data,qd1,mc] [--qd1-ops 2000] [--clients 4,16] [--mc-seconds 8]
 * Prints "RESULT <label> <metric> <value>" lines. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <sys/wait.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-nfs.h>

struct fh { uint32_t len; char b[64]; };

static struct rpc_context *rpc;
static int inflight, errors_seen;
static const char *label = "server";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "nfs_bench: %s: %s\n", what, rpc ? rpc_get_error(rpc) : "");
    exit(1);
}

static void pump_until(int *done)
{
    while (!*done) {
        struct pollfd p = { .fd = rpc_get_fd(rpc), .events = rpc_which_events(rpc) };
        if (poll(&p, 1, 10000) <= 0) die("server not responding");
        if (rpc_service(rpc, p.revents) < 0) die("rpc_service");
    }
}

/* pump until fewer than `limit` calls are in flight */
static void pump_inflight(int limit)
{
    while (inflight >= limit && inflight > 0) {
        struct pollfd p = { .fd = rpc_get_fd(rpc), .events = rpc_which_events(rpc) };
        if (poll(&p, 1, 10000) <= 0) die("server not responding");
        if (rpc_service(rpc, p.revents) < 0) die("rpc_service");
    }
}

struct wait { int done, status; uint32_t st; struct fh fh; };

static void connect_cb(struct rpc_context *r, int status, void *data, void *priv)
{
    (void)r; (void)data;
    struct wait *w = priv;
    w->done = 1;
    w->status = status;
}

static void mnt_cb(struct rpc_context *r, int status, void *data, void *priv)
{
    (void)r;
    struct wait *w = priv;
    w->done = 1;
    w->status = status;
    if (status != RPC_STATUS_SUCCESS) return;
    mountres3 *m = data;
    w->st = m->fhs_status;
    if (!m->fhs_status && m->mountres3_u.mountinfo.fhandle.fhandle3_len <= 64) {
        w->fh.len = m->mountres3_u.mountinfo.fhandle.fhandle3_len;
        memcpy(w->fh.b, m->mountres3_u.mountinfo.fhandle.fhandle3_val, w->fh.len);
    }
}

static void copy_post_fh(struct wait *w, const post_op_fh3 *p)
{
    if (p->handle_follows && p->post_op_fh3_u.handle.data.data_len <= 64) {
        w->fh.len = p->post_op_fh3_u.handle.data.data_len;
        memcpy(w->fh.b, p->post_op_fh3_u.handle.data.data_val, w->fh.len);
    }
}

static void mkdir_cb(struct rpc_context *r, int status, void *data, void *priv)
{
    (void)r;
    struct wait *w = priv;
    w->done = 1;
    w->status = status;
    if (status != RPC_STATUS_SUCCESS) return;
    MKDIR3res *m = data;
    w->st = m->status;
    if (!m->status) copy_post_fh(w, &m->MKDIR3res_u.resok.obj);
}

static void create_wait_cb(struct rpc_context *r, int status, void *data, void *priv)
{
    (void)r;
    struct wait *w = priv;
    w->done = 1;
    w->status = status;
    if (status != RPC_STATUS_SUCCESS) return;
    CREATE3res *m = data;
    w->st = m->status;
    if (!m->status) copy_post_fh(w, &m->CREATE3res_u.resok.obj);
}

static void status_cb(struct rpc_context *r, int status, void *data, void *priv)
{
    (void)r;
    struct wait *w = priv;
    w->done = 1;
    w->status = status;
    if (status == RPC_STATUS_SUCCESS) w->st = *(uint32_t *)data; /* every *3res starts with status */
}

static nfs_fh3 fh3(const struct fh *f)
{
    nfs_fh3 h;
    h.data.data_len = f->len;
    h.data.data_val = (char *)f->b;
    return h;
}

static sattr3 mode_attr(uint32_t mode)
{
    sattr3 a;
    memset(&a, 0, sizeof a);
    a.mode.set_it = 1;
    a.mode.set_mode3_u.mode = mode;
    return a;
}

static struct fh do_mkdir(const struct fh *dir, const char *name)
{
    MKDIR3args a;
    memset(&a, 0, sizeof a);
    a.where.dir = fh3(dir);
    a.where.name = (char *)name;
    a.attributes = mode_attr(0755);
    struct wait w = { 0 };
    if (rpc_nfs3_mkdir_async(rpc, mkdir_cb, &a, &w)) die("mkdir");
    pump_until(&w.done);
    if (w.status || w.st || !w.fh.len) { fprintf(stderr, "mkdir %s: status %u\n", name, w.st); exit(1); }
    return w.fh;
}

static void do_simple(int rmdir, const struct fh *dir, const char *name)
{
    struct wait w = { 0 };
    int r;
    if (rmdir) {
        RMDIR3args a = { .object = { .dir = fh3(dir), .name = (char *)name } };
        r = rpc_nfs3_rmdir_async(rpc, status_cb, &a, &w);
    } else {
        REMOVE3args a = { .object = { .dir = fh3(dir), .name = (char *)name } };
        r = rpc_nfs3_remove_async(rpc, status_cb, &a, &w);
    }
    if (r) die("remove");
    pump_until(&w.done);
}

/* ---- metadata phase ---- */
static void meta_cb(struct rpc_context *r, int status, void *data, void *priv)
{
    (void)r; (void)priv;
    inflight--;
    if (status != RPC_STATUS_SUCCESS || *(uint32_t *)data != 0) errors_seen++;
}

static double meta_phase(int remove, struct fh *dirs, int ndirs, int nfiles, int qd)
{
    errors_seen = 0;
    double t0 = now_s();
    char name[32];
    /* spread consecutive calls over directories like parallel clients would */
    for (int f = 0; f < nfiles; f++) {
        for (int d = 0; d < ndirs; d++) {
            pump_inflight(qd);
            snprintf(name, sizeof name, "f%05d", f);
            int r;
            if (remove) {
                REMOVE3args a = { .object = { .dir = fh3(&dirs[d]), .name = name } };
                r = rpc_nfs3_remove_async(rpc, meta_cb, &a, NULL);
            } else {
                CREATE3args a;
                memset(&a, 0, sizeof a);
                a.where.dir = fh3(&dirs[d]);
                a.where.name = name;
                a.how.mode = GUARDED;
                a.how.createhow3_u.obj_attributes = mode_attr(0644);
                r = rpc_nfs3_create_async(rpc, meta_cb, &a, NULL);
            }
            if (r) die("queue");
            inflight++;
        }
    }
    pump_inflight(1);
    double dt = now_s() - t0;
    if (errors_seen) {   /* a rate over failed calls would be a false figure */
        fprintf(stderr, "nfs_bench: %d %s errors; no result\n", errors_seen, remove ? "remove" : "create");
        exit(1);
    }
    return dt;
}

/* ---- data phase ---- */
static void write_cb(struct rpc_context *r, int status, void *data, void *priv)
{
    (void)r; (void)priv;
    inflight--;
    if (status != RPC_STATUS_SUCCESS || ((WRITE3res *)data)->status) errors_seen++;
}

static long long reads_done;
static void read_cb(struct rpc_context *r, int status, void *data, void *priv)
{
    (void)r; (void)priv;
    inflight--;
    if (status != RPC_STATUS_SUCCESS || ((READ3res *)data)->status) errors_seen++;
    else reads_done++;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

/* ---- qd1 phase: one request at a time ---- */
static void lookup_cb(struct rpc_context *r, int status, void *data, void *priv)
{
    (void)r;
    struct wait *w = priv;
    w->done = 1;
    w->status = status;
    if (status != RPC_STATUS_SUCCESS) return;
    LOOKUP3res *m = data;
    w->st = m->status;
    if (!m->status && m->LOOKUP3res_u.resok.object.data.data_len <= 64) {
        w->fh.len = m->LOOKUP3res_u.resok.object.data.data_len;
        memcpy(w->fh.b, m->LOOKUP3res_u.resok.object.data.data_val, w->fh.len);
    }
}

/* Sends one call (queued by the caller with &w as private data), waits for its reply;
 * returns the round trip in microseconds, exits on any error. */
static double finish(struct wait *w, double t0, const char *what)
{
    pump_until(&w->done);
    double us = (now_s() - t0) * 1e6;
    if (w->status || w->st) { fprintf(stderr, "nfs_bench: %s failed (status %d, nfs %u)\n", what, w->status, w->st); exit(1); }
    return us;
}

#define ONE(what, call) ({                 \
        memset(&w, 0, sizeof w);              \
        double t0_ = now_s();                 \
        if (call) die(what);                  \
        finish(&w, t0_, what);                \
    })

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report_lat(const char *op, double *us, int n)
{
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    double p50 = us[n / 2], p99 = us[(int)floor((n - 1) * 0.99)];
    printf("RESULT %s qd1_%s_p50_us %.0f (%d calls, one at a time)\n", label, op, p50, n);
    printf("RESULT %s qd1_%s_p99_us %.0f\n", label, op, p99);
    fflush(stdout);
}

static struct fh create_one(const struct fh *dir, const char *name, int mode, double *us)
{
    struct wait w;
    CREATE3args a;
    memset(&a, 0, sizeof a);
    a.where.dir = fh3(dir);
    a.where.name = (char *)name;
    a.how.mode = mode;
    a.how.createhow3_u.obj_attributes = mode_attr(0644);
    double t = ONE("create", rpc_nfs3_create_async(rpc, create_wait_cb, &a, &w));
    if (us) *us = t;
    if (!w.fh.len) { fprintf(stderr, "nfs_bench: create %s: no handle\n", name); exit(1); }
    return w.fh;
}

static void qd1_phase(const struct fh *top, int n)
{
    struct wait w;
    double *us = malloc((size_t)n * sizeof *us);
    char name[32];
    struct fh dir = do_mkdir(top, "qd1");

    for (int i = 0; i < n; i++) {
        GETATTR3args a = { .object = fh3(&dir) };
        us[i] = ONE("getattr", rpc_nfs3_getattr_async(rpc, status_cb, &a, &w));
    }
    report_lat("getattr", us, n);

    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "q%05d", i);
        create_one(&dir, name, GUARDED, &us[i]);
    }
    report_lat("create", us, n);

    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "q%05d", (int)(next_rand() % (uint64_t)n));
        LOOKUP3args a = { .what = { .dir = fh3(&dir), .name = name } };
        us[i] = ONE("lookup", rpc_nfs3_lookup_async(rpc, lookup_cb, &a, &w));
    }
    report_lat("lookup", us, n);

    struct fh file = create_one(&dir, "qd1.bin", UNCHECKED, NULL);
    size_t wsz = 32 << 10, rsz = 128 << 10;
    char *buf = malloc(rsz);
    for (size_t i = 0; i < rsz; i++) buf[i] = (char)(next_rand() >> 24);
    for (int i = 0; i < n; i++) {   /* sequential, like cp */
        WRITE3args a = { .file = fh3(&file), .offset = (uint64_t)i * wsz, .count = (count3)wsz, .stable = UNSTABLE,
                         .data = { .data_len = (u_int)wsz, .data_val = buf } };
        buf[0] = (char)i;
        us[i] = ONE("write", rpc_nfs3_write_async(rpc, status_cb, &a, &w));
    }
    report_lat("write_32k", us, n);

    uint64_t nread = (uint64_t)n * wsz / rsz;
    for (int i = 0; i < n; i++) {
        READ3args a = { .file = fh3(&file), .offset = (next_rand() % nread) * rsz, .count = (count3)rsz };
        us[i] = ONE("read", rpc_nfs3_read_async(rpc, status_cb, &a, &w));
    }
    report_lat("read_128k", us, n);

    int nc = n;   /* each COMMIT after a 32 KiB UNSTABLE WRITE (not timed); as many as the other ops: p99 of 500 was the 5 slowest disk syncs */
    for (int i = 0; i < nc; i++) {
        WRITE3args a = { .file = fh3(&file), .offset = (uint64_t)(n + i) * wsz, .count = (count3)wsz,
                         .stable = UNSTABLE, .data = { .data_len = (u_int)wsz, .data_val = buf } };
        ONE("write", rpc_nfs3_write_async(rpc, status_cb, &a, &w));
        COMMIT3args c = { .file = fh3(&file), .offset = 0, .count = 0 };
        us[i] = ONE("commit", rpc_nfs3_commit_async(rpc, status_cb, &c, &w));
    }
    report_lat("commit", us, nc);

    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "q%05d", i);
        do_simple(0, &dir, name);
    }
    do_simple(0, &dir, "qd1.bin");
    do_simple(1, top, "qd1");
    free(buf);
    free(us);
}

/* ---- mc phase: many clients in one directory ---- */
static struct rpc_context *connect_nfs(const char *server, int port)
{
    struct rpc_context *r = rpc_init_context();
    struct wait w = { 0 };
    rpc = r;
    if (rpc_connect_port_async(r, server, port, NFS_PROGRAM, NFS_V3, connect_cb, &w)) die("connect nfs");
    pump_until(&w.done);
    if (w.status) die("connect nfs");
    return r;
}

/* One client: CREATE, LOOKUP, GETATTR, SETATTR, REMOVE of its own names, one call at a
 * time, until `end`. Writes its op count to fd. */
static void mc_client(int id, const char *server, int port, const struct fh *dir, int go_fd, int out_fd,
                      int seconds)
{
    connect_nfs(server, port);
    char c;
    if (read(go_fd, &c, 1) != 1) _exit(1);
    struct wait w;
    char name[32];
    long long ops = 0;
    double end = now_s() + seconds;
    for (int k = 0; now_s() < end; k++) {
        snprintf(name, sizeof name, "m%02d_%d", id, k);
        struct fh f = create_one(dir, name, GUARDED, NULL);
        LOOKUP3args la = { .what = { .dir = fh3(dir), .name = name } };
        ONE("lookup", rpc_nfs3_lookup_async(rpc, lookup_cb, &la, &w));
        GETATTR3args ga = { .object = fh3(&f) };
        ONE("getattr", rpc_nfs3_getattr_async(rpc, status_cb, &ga, &w));
        SETATTR3args sa;
        memset(&sa, 0, sizeof sa);
        sa.object = fh3(&f);
        sa.new_attributes = mode_attr(0600);
        ONE("setattr", rpc_nfs3_setattr_async(rpc, status_cb, &sa, &w));
        REMOVE3args ra = { .object = { .dir = fh3(dir), .name = name } };
        ONE("remove", rpc_nfs3_remove_async(rpc, status_cb, &ra, &w));
        ops += 5;
    }
    if (write(out_fd, &ops, sizeof ops) != sizeof ops) _exit(1);
    _exit(0);
}

static void mc_phase(const char *server, int port, const struct fh *top, const char *clients, int seconds)
{
    struct fh dir = do_mkdir(top, "shared");
    char name[32];
    for (int i = 0; i < 1000; i++) {   /* a populated directory (name index on the engine) */
        snprintf(name, sizeof name, "pre%04d", i);
        pump_inflight(32);
        CREATE3args a;
        memset(&a, 0, sizeof a);
        a.where.dir = fh3(&dir);
        a.where.name = name;
        a.how.mode = GUARDED;
        a.how.createhow3_u.obj_attributes = mode_attr(0644);
        if (rpc_nfs3_create_async(rpc, meta_cb, &a, NULL)) die("create");
        inflight++;
    }
    pump_inflight(1);
    struct rpc_context *main_rpc = rpc;
    for (const char *p = clients; *p;) {
        int n = atoi(p);
        if (n < 1 || n > 256) { fprintf(stderr, "nfs_bench: bad --clients\n"); exit(2); }
        int go[2], res[2];
        if (pipe(go) || pipe(res)) die("pipe");
        fflush(stdout);
        pid_t *pids = calloc((size_t)n, sizeof *pids);
        for (int i = 0; i < n; i++) {
            pids[i] = fork();
            if (pids[i] < 0) die("fork");
            if (!pids[i]) { close(go[1]); close(res[0]); mc_client(i, server, port, &dir, go[0], res[1], seconds); }
        }
        close(go[0]); close(res[1]);
        usleep(300000);   /* let every client connect */
        double t0 = now_s();
        for (int i = 0; i < n; i++) if (write(go[1], "g", 1) != 1) die("pipe");
        long long total = 0, ops;
        int got = 0;
        while (read(res[0], &ops, sizeof ops) == sizeof ops) { total += ops; got++; }
        double dt = now_s() - t0;
        int failed = 0;
        for (int i = 0; i < n; i++) {
            int wst;
            waitpid(pids[i], &wst, 0);
            if (!WIFEXITED(wst) || WEXITSTATUS(wst)) failed++;
        }
        close(go[1]); close(res[0]);
        free(pids);
        if (failed || got != n) { fprintf(stderr, "nfs_bench: %d of %d clients failed\n", failed, n); exit(1); }
        printf("RESULT %s mc%d_meta_ops_s %.0f (%d clients, one call at a time each, %lld ops in %.1f s)\n", label, n,
               total / dt, n, total, dt);
        fflush(stdout);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    rpc = main_rpc;
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "pre%04d", i);
        pump_inflight(32);
        REMOVE3args a = { .object = { .dir = fh3(&dir), .name = name } };
        if (rpc_nfs3_remove_async(rpc, meta_cb, &a, NULL)) die("remove");
        inflight++;
    }
    pump_inflight(1);
    do_simple(1, top, "shared");
}

static void meta_bench(const struct fh *top, int ndirs, int nfiles, int qd)
{
    struct fh *dirs = calloc((size_t)ndirs, sizeof *dirs);
    char name[64];
    for (int d = 0; d < ndirs; d++) {
        snprintf(name, sizeof name, "d%03d", d);
        dirs[d] = do_mkdir(top, name);
    }
    long long nops = (long long)ndirs * nfiles;
    double tc = meta_phase(0, dirs, ndirs, nfiles, qd);
    printf("RESULT %s create_ops_s %.0f (%lld creates in %.2f s)\n", label, nops / tc, nops, tc);
    fflush(stdout);
    double tr = meta_phase(1, dirs, ndirs, nfiles, qd);
    printf("RESULT %s remove_ops_s %.0f (%lld removes in %.2f s)\n", label, nops / tr, nops, tr);
    fflush(stdout);
    for (int d = 0; d < ndirs; d++) {
        snprintf(name, sizeof name, "d%03d", d);
        do_simple(1, top, name);
    }
    free(dirs);
}

/* data phase: a written file, then random reads; 0 or 1 on errors */
static int data_bench(const struct fh *top, uint64_t size, int qd, int seconds)
{
    struct wait w;
    /* data file: written through NFS so both servers see identical work */
    CREATE3args ca;
    memset(&ca, 0, sizeof ca);
    ca.where.dir = fh3(top);
    ca.where.name = "data.bin";
    ca.how.mode = UNCHECKED;
    ca.how.createhow3_u.obj_attributes = mode_attr(0644);
    memset(&w, 0, sizeof w);
    if (rpc_nfs3_create_async(rpc, create_wait_cb, &ca, &w)) die("create data");
    pump_until(&w.done);
    if (w.status || w.st || !w.fh.len) { fprintf(stderr, "nfs_bench: create data.bin failed (%u)\n", w.st); return 1; }
    struct fh data = w.fh;
    size_t chunk = 1 << 20;
    char *buf = malloc(chunk);
    for (size_t i = 0; i < chunk; i++) buf[i] = (char)(next_rand() >> 32);
    errors_seen = 0;
    double t0 = now_s();
    for (uint64_t off = 0; off < size; off += chunk) {
        pump_inflight(8);
        WRITE3args wa;
        memset(&wa, 0, sizeof wa);
        wa.file = fh3(&data);
        wa.offset = off;
        wa.count = (count3)(size - off < chunk ? size - off : chunk);
        wa.stable = UNSTABLE;
        wa.data.data_len = wa.count;
        wa.data.data_val = buf;
        buf[0] = (char)(off >> 20);     /* make chunks differ */
        if (rpc_nfs3_write_async(rpc, write_cb, &wa, NULL)) die("write");
        inflight++;
    }
    pump_inflight(1);
    COMMIT3args cm = { .file = fh3(&data), .offset = 0, .count = 0 };
    memset(&w, 0, sizeof w);
    if (rpc_nfs3_commit_async(rpc, status_cb, &cm, &w)) die("commit");
    pump_until(&w.done);
    double tw = now_s() - t0;
    if (errors_seen || w.st) { fprintf(stderr, "nfs_bench: %d write errors, commit %u\n", errors_seen, w.st); return 1; }
    printf("RESULT %s write_1m_qd8_mb_s %.0f (%.2f s)\n", label, size / tw / 1e6, tw);
    fflush(stdout);

    uint64_t blocks = size / 4096;
    reads_done = 0;
    errors_seen = 0;
    t0 = now_s();
    double end = t0 + seconds;
    while (now_s() < end) {
        while (inflight < qd) {
            READ3args ra = { .file = fh3(&data), .offset = (next_rand() % blocks) * 4096, .count = 4096 };
            if (rpc_nfs3_read_async(rpc, read_cb, &ra, NULL)) die("read");
            inflight++;
        }
        pump_inflight(qd);
    }
    pump_inflight(1);
    double trd = now_s() - t0;
    if (errors_seen) fprintf(stderr, "nfs_bench: %d read errors\n", errors_seen);
    printf("RESULT %s randread_4k_qd%d_ops_s %.0f (%lld reads in %.2f s)\n", label, qd, reads_done / trd, reads_done,
           trd);

    do_simple(0, top, "data.bin");
    free(buf);
    return errors_seen ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *server = "127.0.0.1", *export = "/export";
    int nfsport = 2049, mountport = 20048, ndirs = 100, nfiles = 1000, qd = 32, seconds = 10;
    uint64_t size = 1ull << 30;
    const char *phases = "meta,data,qd1,mc", *clients = "4,16";
    int qd1_ops = 2000, mc_seconds = 8;
    static const struct option opts[] = {
        { "server", 1, 0, 's' }, { "export", 1, 0, 'e' }, { "nfsport", 1, 0, 'n' }, { "mountport", 1, 0, 'm' },
        { "dirs", 1, 0, 'd' }, { "files", 1, 0, 'f' }, { "qd", 1, 0, 'q' }, { "seconds", 1, 0, 't' },
        { "size", 1, 0, 'z' }, { "label", 1, 0, 'l' },
        { "phases", 1, 0, 'p' }, { "qd1-ops", 1, 0, 'o' }, { "clients", 1, 0, 'c' }, { "mc-seconds", 1, 0, 'M' },
        { 0, 0, 0, 0 } };
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's': server = optarg; break;
        case 'e': export = optarg; break;
        case 'n': nfsport = atoi(optarg); break;
        case 'm': mountport = atoi(optarg); break;
        case 'd': ndirs = atoi(optarg); break;
        case 'f': nfiles = atoi(optarg); break;
        case 'q': qd = atoi(optarg); break;
        case 't': seconds = atoi(optarg); break;
        case 'z': size = strtoull(optarg, NULL, 0); break;
        case 'l': label = optarg; break;
        case 'p': phases = optarg; break;
        case 'o': qd1_ops = atoi(optarg); break;
        case 'c': clients = optarg; break;
        case 'M': mc_seconds = atoi(optarg); break;
        default: fprintf(stderr, "see the header of bench/nfs_bench.c for usage\n"); return 2;
        }
    }
    if (qd < 1 || ndirs < 1 || nfiles < 0 || size < 4096 || qd1_ops < 1 || mc_seconds < 1) return 2;

    /* MOUNT for the root handle */
    rpc = rpc_init_context();
    struct wait w = { 0 };
    if (rpc_connect_port_async(rpc, server, mountport, MOUNT_PROGRAM, MOUNT_V3, connect_cb, &w)) die("connect mount");
    pump_until(&w.done);
    if (w.status) die("connect mount");
    memset(&w, 0, sizeof w);
    if (rpc_mount3_mnt_async(rpc, mnt_cb, (char *)export, &w)) die("mnt");
    pump_until(&w.done);
    if (w.status || w.st) { fprintf(stderr, "nfs_bench: MNT %s failed (%u)\n", export, w.st); return 1; }
    struct fh root = w.fh;
    rpc_destroy_context(rpc);

    rpc = rpc_init_context();
    memset(&w, 0, sizeof w);
    if (rpc_connect_port_async(rpc, server, nfsport, NFS_PROGRAM, NFS_V3, connect_cb, &w)) die("connect nfs");
    pump_until(&w.done);
    if (w.status) die("connect nfs");

    char top_name[64];
    snprintf(top_name, sizeof top_name, "nfsbench.%d", (int)getpid());
    struct fh top = do_mkdir(&root, top_name);
    if (strstr(phases, "meta")) meta_bench(&top, ndirs, nfiles, qd);
    if (strstr(phases, "data") && data_bench(&top, size, qd, seconds)) return 1;
    if (strstr(phases, "qd1")) qd1_phase(&top, qd1_ops);
    if (strstr(phases, "mc")) mc_phase(server, nfsport, &top, clients, mc_seconds);
    do_simple(1, &root, top_name);
    rpc_destroy_context(rpc);
    return 0;
}
