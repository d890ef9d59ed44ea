/* NFSv3 benchmark over the libnfs raw async API (one TCP connection, QD outstanding
 * RPCs):
 *  - metadata: DIRS directories x FILES empty files created (CREATE), then removed
 *    (REMOVE); ops/s for each phase
 *  - 4 KiB random READs at QD on a SIZE file for SECONDS
 *   nfs_bench --server H --export /path --nfsport P --mountport M [--dirs 100]
 *             [--files 1000] [--qd 32] [--seconds 10] [--size 1073741824] [--label name]
 * Prints "RESULT <label> <metric> <value>" lines. */
#include <errno.h>
#include <getopt.h>
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

int main(int argc, char **argv)
{
    const char *server = "127.0.0.1", *export = "/export";
    int nfsport = 2049, mountport = 20048, ndirs = 100, nfiles = 1000, qd = 32, seconds = 10;
    uint64_t size = 1ull << 30;
    static const struct option opts[] = {
        { "server", 1, 0, 's' }, { "export", 1, 0, 'e' }, { "nfsport", 1, 0, 'n' }, { "mountport", 1, 0, 'm' },
        { "dirs", 1, 0, 'd' }, { "files", 1, 0, 'f' }, { "qd", 1, 0, 'q' }, { "seconds", 1, 0, 't' },
        { "size", 1, 0, 'z' }, { "label", 1, 0, 'l' }, { 0, 0, 0, 0 } };
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
        default: fprintf(stderr, "see the header of bench/nfs_bench.c for usage\n"); return 2;
        }
    }
    if (qd < 1 || ndirs < 1 || nfiles < 0 || size < 4096) return 2;

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
    struct fh *dirs = calloc((size_t)ndirs, sizeof *dirs);
    char name[64];
    for (int d = 0; d < ndirs; d++) {
        snprintf(name, sizeof name, "d%03d", d);
        dirs[d] = do_mkdir(&top, name);
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
        do_simple(1, &top, name);
    }

    /* data file: written through NFS so both servers see identical work */
    CREATE3args ca;
    memset(&ca, 0, sizeof ca);
    ca.where.dir = fh3(&top);
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

    do_simple(0, &top, "data.bin");
    do_simple(1, &root, top_name);
    free(buf);
    free(dirs);
    rpc_destroy_context(rpc);
    return errors_seen ? 1 : 0;
}
