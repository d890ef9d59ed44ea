/* Fuzz harness: the iSCSI connection state machine. Each input is the byte stream an
 * initiator sends (login, text, SCSI commands, Data-Out, TMF, logout, ...), written into
 * one end of a socketpair whose other end is a target connection driven here, on a
 * network thread of our own, until the target closes it. The target has two LUNs on an
 * in-memory block device; slow commands run on the server's real workers. A second
 * target (iqn.2026-12.fuzz:imm, one LUN) accepts immediate data. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>
#include "iscsi/iscsi_int.h"
#include "util/log.h"

#define MEM_SIZE (4u << 20)

static int mem_read(nasd_bdev *b, void *buf, uint64_t off, size_t len)
{
    if (off > b->size || len > b->size - off) return -EIO;
    memcpy(buf, (uint8_t *)b->priv + off, len);
    return 0;
}
static int mem_write(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags)
{
    if (off > b->size || len > b->size - off) return -EIO;
    memcpy((uint8_t *)b->priv + off, buf, len);
    return 0;
}
static int mem_flush(nasd_bdev *b) { return 0; }
static int mem_unmap(nasd_bdev *b, uint64_t off, uint64_t len)
{
    if (off > b->size || len > b->size - off) return -EIO;
    memset((uint8_t *)b->priv + off, 0, len);
    return 0;
}
static void mem_destroy(nasd_bdev *b) { free(b->priv); free(b); }
static const struct nasd_bdev_ops mem_ops = { mem_read, mem_write, mem_flush, mem_unmap, NULL, mem_destroy, NULL };

static nasd_bdev *mem_bdev(const char *name, uint32_t bs)
{
    nasd_bdev *b = calloc(1, sizeof *b);
    b->ops = &mem_ops;
    b->priv = calloc(1, MEM_SIZE);
    b->size = MEM_SIZE;
    b->block_size = bs;
    snprintf(b->name, sizeof b->name, "%s", name);
    b->uuid[0] = (uint8_t)name[0];
    atomic_init(&b->refs, 1);
    return b;
}

static struct iscsi_server *srv;
static struct net_thread nt;

static void setup(void)
{
    char err[256];
    nasd_log_level = getenv("FUZZ_LOG") ? LOG_DEBUG : LOG_ERR;   /* FUZZ_LOG=1: trace an input */
    srv = iscsi_server_start("127.0.0.1:0", 2, err, sizeof err);
    if (!srv) abort();
    static struct iscsi_target_cfg cfg;
    snprintf(cfg.iqn, sizeof cfg.iqn, "iqn.2026-12.fuzz:t");
    cfg.luns[0] = (struct iscsi_lun_cfg){ .lun = 0, .bdev = mem_bdev("fuzz/l0", 512) };
    cfg.luns[1] = (struct iscsi_lun_cfg){ .lun = 1, .bdev = mem_bdev("fuzz/l1", 4096) };
    cfg.nluns = 2;
    if (iscsi_server_set_target(srv, &cfg)) abort();
    nasd_bdev_put(cfg.luns[0].bdev);
    nasd_bdev_put(cfg.luns[1].bdev);
    static struct iscsi_target_cfg imm;
    snprintf(imm.iqn, sizeof imm.iqn, "iqn.2026-12.fuzz:imm");
    imm.luns[0] = (struct iscsi_lun_cfg){ .lun = 0, .bdev = mem_bdev("fuzz/i0", 512) };
    imm.nluns = 1;
    imm.immediate_data = true;
    if (iscsi_server_set_target(srv, &imm)) abort();
    nasd_bdev_put(imm.luns[0].bdev);
    nt.kind = KIND_EVENT;
    nt.srv = srv;
    nt.idx = 99;
    pthread_mutex_init(&nt.lock, NULL);
    nt.epfd = epoll_create1(EPOLL_CLOEXEC);
    nt.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &nt };
    epoll_ctl(nt.epfd, EPOLL_CTL_ADD, nt.evfd, &ev);
}

/* What server.c's drain_done does for its own threads. */
static void drain_done(void)
{
    uint64_t v;
    if (read(nt.evfd, &v, sizeof v) < 0) { /* nothing pending */ }
    pthread_mutex_lock(&nt.lock);
    struct iscsi_task *t = nt.done_head;
    nt.done_head = nt.done_tail = NULL;
    pthread_mutex_unlock(&nt.lock);
    while (t) { struct iscsi_task *n = t->qnext; conn_task_done(t); t = n; }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) { setup(); ready = true; }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv)) return 0;
    conn_new(&nt, sv[1]);
    struct iscsi_conn *c = nt.conns;          /* ours: held until workers gave theirs back */
    if (!c) { close(sv[0]); return 0; }
    atomic_fetch_add(&c->refs, 1);
    size_t off = 0;
    bool shut = false;
    static uint8_t sink[1 << 16];
    /* until the target closed its end, and every command on a worker came back */
    for (int rounds = 0; rounds < 100000; rounds++) {
        if (off < size) {
            ssize_t n = write(sv[0], data + off, size - off);
            if (n > 0) off += (size_t)n;
            else if (n < 0 && errno != EAGAIN) off = size;
        }
        if (off == size && !shut) { shutdown(sv[0], SHUT_WR); shut = true; }
        while (read(sv[0], sink, sizeof sink) > 0) { }            /* the initiator reads */
        struct epoll_event ev[16];
        int n = epoll_wait(nt.epfd, ev, 16, nt.conns ? 10 : 1);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr == &nt) drain_done();
            else conn_on_event(ev[i].data.ptr, ev[i].events);
        }
        conn_reap(&nt);
        if (c->dead && atomic_load(&c->refs) == 1) break;
    }
    if (!c->dead) conn_close(c);                   /* the input kept it busy too long */
    conn_reap(&nt);
    while (atomic_load(&c->refs) > 1) { usleep(100); drain_done(); }
    conn_put(c);
    close(sv[0]);
    return 0;
}
