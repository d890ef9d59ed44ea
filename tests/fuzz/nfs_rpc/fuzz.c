/* Fuzz harness: a TCP byte stream (record marking + ONC RPC calls for NFSv3, MOUNT and
 * the portmapper) into the NFS service's request handler, as one worker runs it, over an
 * export of an engine dataset (ext2 in a pool volume on a sparse file in a temp dir).
 * File handles are MAC'd, so the fuzzer cannot forge them: the 8 bytes
 * 00 00 00 04 '@' 'F' 'H' n in the input stand for an opaque holding handle n % 16 of the
 * handles seen in replies so far (0: the export root, from MNT). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "nfs/internal.h"
#include "storage/pool/vpool.h"
#include "util/log.h"

static struct nfs_server *srv;
static struct nfs_worker worker;
static int peer_fd = -1;
static uint8_t handles[16][NFS_FH_MAX];
static size_t handle_len[16];
static unsigned nhandles;

static struct nasd_fsroot *open_dataset(const char *dir)
{
    char member[4200], msg[256];
    snprintf(member, sizeof member, "%s/member.img", dir);
    struct vpool_member_spec spec = { .path = member, .create_size = 256ull << 20 };
    struct vpool *vp = NULL;
    if (vpool_create("fuzz", VPOOL_STRIPE, &spec, 1, NULL, &vp, msg, sizeof msg)) {
        fprintf(stderr, "fuzz: pool: %s\n", msg);
        return NULL;
    }
    struct vpool_status st;
    vpool_get_status(vp, &st);
    int rc = vpool_vol_create(vp, "ds", st.size & ~((1ull << 20) - 1), VPOOL_VOL_THIN);
    nasd_bdev *b = rc ? NULL : vpool_vol_open(vp, "ds", 4096, &rc);
    if (b) rc = nasd_ext2_format(b, "ds");
    struct nasd_fsroot *fs = b && !rc ? nasd_fsroot_open_ext2(b, "fuzz/ds", 42, 64ull << 20, &rc) : NULL;
    nasd_bdev_put(b);
    if (fs) fs->vfs->chmod(fs, fs->root_fd, 01777); /* AUTH_SYS users get somewhere too */
    return fs;                                      /* the pool stays open for the process */
}

static char dir[] = "/tmp/nasd-fuzz-nfs-XXXXXX";
static void cleanup(void)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    (void)!system(cmd);
}

static int init(void)
{
    nasd_log_level = getenv("FUZZ_LOG") ? LOG_DEBUG : -1;
    if (!mkdtemp(dir)) return -1;
    atexit(cleanup);
    struct nasd_fsroot *fs = open_dataset(dir);
    if (!fs) return -1;
    struct nfs_server_cfg cfg = { .bind_addr = "127.0.0.1", .portmap_port = 0, .workers = 1 };
    snprintf(cfg.state_dir, sizeof cfg.state_dir, "%s", dir);
    char err[256];
    srv = nfs_server_start(&cfg, err, sizeof err);
    if (!srv) { fprintf(stderr, "fuzz: %s\n", err); return -1; }
    struct nfs_export_cfg e = { .export_id = 1, .fs = fs, .anonuid = 65534, .anongid = 65534 };
    snprintf(e.path, sizeof e.path, "/export");
    if (nfs_server_set_export(srv, &e)) return -1;
    worker.srv = srv;
    worker.rbuf = malloc(NFS_REPLY_CAP + 4);
    return worker.rbuf ? 0 : -1;
}

/* Handles in a reply: opaques of our format ("NX", version, key length that fits). */
static void collect_handles(const uint8_t *p, size_t len)
{
    for (size_t off = 0; off + 4 + 24 <= len; off += 4) {
        uint32_t n = (uint32_t)p[off] << 24 | (uint32_t)p[off + 1] << 16 | (uint32_t)p[off + 2] << 8 | p[off + 3];
        const uint8_t *h = p + off + 4;
        if (n < 24 || n > NFS_FH_MAX || off + 4 + n > len || h[0] != 'N' || h[1] != 'X' || n != 24u + h[3])
            continue;
        unsigned slot = nhandles < 16 ? nhandles++ : 1 + (nhandles++ % 15);
        memcpy(handles[slot], h, n);
        handle_len[slot] = n;
    }
}

/* Copies rec, replacing each handle token by the handle it names. */
static uint8_t *substitute(const uint8_t *rec, size_t len, size_t *outlen)
{
    uint8_t *out = malloc(len * 9 + 16), *o = out; /* a token (8 bytes) becomes at most 4 + 64 */
    if (!out) return NULL;
    for (size_t i = 0; i < len;) {
        if (i + 8 <= len && !memcmp(rec + i, "\0\0\0\4@FH", 7) && nhandles) {
            unsigned n = rec[i + 7] % (nhandles < 16 ? nhandles : 16);
            size_t hl = handle_len[n];
            *o++ = 0; *o++ = 0; *o++ = 0; *o++ = (uint8_t)hl;
            memcpy(o, handles[n], hl);
            o += hl;
            while (hl % 4) { *o++ = 0; hl++; }
            i += 8;
        } else {
            *o++ = rec[i++];
        }
    }
    *outlen = (size_t)(o - out);
    return out;
}

static int on_record(void *arg, uint8_t *rec, size_t len)
{
    struct nfs_conn *c = arg;
    size_t n;
    uint8_t *r = substitute(rec, len, &n);
    free(rec);
    if (!r) return -ENOMEM;
    if (!atomic_load(&c->dead)) {
        size_t rl = nfs_server_handle_record(&worker, c, r, n, nasd_now_ns());
        collect_handles(worker.rbuf + 4, rl);
    }
    free(r);
    char sink[65536];
    while (read(peer_fd, sink, sizeof sink) > 0) {} /* keep the socket from filling */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready = -2;
    if (ready == -2) ready = init();
    if (ready) abort();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv)) abort();
    peer_fd = sv[1];
    struct nfs_conn *c = calloc(1, sizeof *c);
    c->fd = sv[0];
    c->srv = srv;
    struct sockaddr_in *a = (struct sockaddr_in *)&c->peer;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(0x7f000001);
    static uint16_t port;
    a->sin_port = htons(++port | 1024); /* a new client each run: no duplicate-cache hits from earlier runs */
    snprintf(c->peer_str, sizeof c->peer_str, "127.0.0.1");
    atomic_init(&c->refs, 1);
    pthread_mutex_init(&c->send_lock, NULL);
    rm_init(&c->rm, NFS_MAX_RECORD);
    handle_len[0] = srv->exports[0]->root_fh_len; /* handle 0: the root, as MNT gives it */
    memcpy(handles[0], srv->exports[0]->root_fh, handle_len[0]);
    nhandles = 1;
    (void)rm_feed(&c->rm, data, size, on_record, c);
    rm_free(&c->rm);
    free(c->out);
    pthread_mutex_destroy(&c->send_lock);
    free(c);
    close(sv[0]);
    close(sv[1]);
    return 0;
}
