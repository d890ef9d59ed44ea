/* Sends malformed ONC RPC traffic to an NFS server and checks that each case
 * gets the right clean error reply (or a connection close) and that the server
 * keeps answering afterwards.
 *   nfs_malformed HOST NFSPORT MOUNTPORT
 * Exit 0 if all cases behaved. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *host;
static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { failures++; fprintf(stderr, "FAIL line %d: ", __LINE__); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)

struct buf { uint8_t b[8192]; size_t n; };
static void put32(struct buf *b, uint32_t v)
{
    b->b[b->n++] = v >> 24; b->b[b->n++] = v >> 16; b->b[b->n++] = v >> 8; b->b[b->n++] = v;
}
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, host, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { close(fd); return -1; }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int send_all(int fd, const void *p, size_t n)
{
    const uint8_t *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int recv_all(int fd, void *p, size_t n, int timeout_ms)
{
    uint8_t *c = p;
    while (n) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (poll(&pf, 1, timeout_ms) <= 0) return -2;   /* timeout */
        ssize_t r = recv(fd, c, n, 0);
        if (r <= 0) return -1;                          /* closed */
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Sends one record (single fragment). */
static int send_record(int fd, const struct buf *b)
{
    uint8_t m[4];
    uint32_t v = 0x80000000u | (uint32_t)b->n;
    m[0] = v >> 24; m[1] = v >> 16; m[2] = v >> 8; m[3] = v;
    return send_all(fd, m, 4) || send_all(fd, b->b, b->n) ? -1 : 0;
}

struct reply { int closed, timeout; uint32_t xid, reply_stat, stat, lo, hi; uint8_t body[512]; size_t bodylen; };

static void read_reply(int fd, struct reply *r)
{
    memset(r, 0, sizeof *r);
    uint8_t m[4];
    int e = recv_all(fd, m, 4, 3000);
    if (e) { r->closed = e == -1; r->timeout = e == -2; return; }
    uint32_t len = get32(m) & 0x7fffffff;
    static uint8_t rec[2 * 1024 * 1024];
    if (len > sizeof rec || recv_all(fd, rec, len, 3000)) { r->closed = 1; return; }
    if (len < 12) { r->closed = 1; return; }
    r->xid = get32(rec);
    r->reply_stat = get32(rec + 8);
    if (r->reply_stat == 0) {              /* accepted: verifier then accept_stat */
        uint32_t vlen = get32(rec + 16);
        size_t off = 20 + ((vlen + 3) & ~3u);
        r->stat = get32(rec + off);
        off += 4;
        if (r->stat == 2 && len >= off + 8) { r->lo = get32(rec + off); r->hi = get32(rec + off + 4); }
        r->bodylen = len - off < sizeof r->body ? len - off : sizeof r->body;
        memcpy(r->body, rec + off, r->bodylen);
    } else {                               /* denied: reject_stat */
        r->stat = get32(rec + 12);
        if (len >= 24) { r->lo = get32(rec + 16); r->hi = get32(rec + 20); }
    }
}

static void call_hdr(struct buf *b, uint32_t xid, uint32_t rpcvers, uint32_t prog, uint32_t vers, uint32_t proc,
                     uint32_t flavor)
{
    b->n = 0;
    put32(b, xid);
    put32(b, 0);
    put32(b, rpcvers);
    put32(b, prog);
    put32(b, vers);
    put32(b, proc);
    put32(b, flavor);
    if (flavor == 1) {                     /* AUTH_SYS root */
        put32(b, 20); put32(b, 0); put32(b, 0); put32(b, 0); put32(b, 0); put32(b, 0);
    } else {
        put32(b, 0);
    }
    put32(b, 0);
    put32(b, 0);
}

/* One call on a fresh connection; returns the reply. */
static void one_call(int port, const struct buf *b, struct reply *r)
{
    int fd = dial(port);
    if (fd < 0) { memset(r, 0, sizeof *r); r->closed = 1; CHECK(0, "connect to %d", port); return; }
    send_record(fd, b);
    read_reply(fd, r);
    close(fd);
}

static int nfs_port, mount_port;

static void expect_accept(const char *what, const struct buf *b, int port, uint32_t stat)
{
    struct reply r;
    int before = failures;
    one_call(port, b, &r);
    CHECK(!r.closed && !r.timeout && r.reply_stat == 0 && r.stat == stat, "%s: closed=%d timeout=%d reply_stat=%u stat=%u, want accept_stat %u",
          what, r.closed, r.timeout, r.reply_stat, r.stat, stat);
    if (failures == before) printf("ok  %-44s accept_stat=%u\n", what, r.stat);
}

static void expect_closed_or_error(const char *what, const void *data, size_t n)
{
    int fd = dial(nfs_port);
    send_all(fd, data, n);
    shutdown(fd, SHUT_WR);
    struct reply r;
    read_reply(fd, &r);
    CHECK(r.closed || (r.reply_stat <= 1 && !r.timeout), "%s: no clean reply or close (timeout=%d)", what, r.timeout);
    printf("ok  %-44s %s\n", what, r.closed ? "connection closed" : "error reply");
    close(fd);
}

static void check_alive(const char *after)
{
    struct buf b;
    call_hdr(&b, 4242, 2, 100003, 3, 0, 1);
    struct reply r;
    one_call(nfs_port, &b, &r);
    CHECK(!r.closed && r.xid == 4242 && r.stat == 0, "server not answering NULL after %s", after);
}

int main(int argc, char **argv)
{
    if (argc < 4) { fprintf(stderr, "usage: nfs_malformed HOST NFSPORT MOUNTPORT\n"); return 2; }
    host = argv[1];
    nfs_port = atoi(argv[2]);
    mount_port = atoi(argv[3]);
    struct buf b;
    struct reply r;

    call_hdr(&b, 1, 2, 100003, 3, 0, 1);
    expect_accept("NFS NULL", &b, nfs_port, 0);
    call_hdr(&b, 2, 2, 123456, 1, 0, 1);
    expect_accept("unknown program -> PROG_UNAVAIL", &b, nfs_port, 1);
    call_hdr(&b, 3, 2, 100003, 4, 0, 1);
    one_call(nfs_port, &b, &r);
    CHECK(r.reply_stat == 0 && r.stat == 2 && r.lo == 3 && r.hi == 3, "NFSv4 -> PROG_MISMATCH 3..3 (got %u %u..%u)",
          r.stat, r.lo, r.hi);
    printf("ok  %-44s low=%u high=%u\n", "NFS v4 -> PROG_MISMATCH", r.lo, r.hi);
    call_hdr(&b, 4, 2, 100003, 3, 99, 1);
    expect_accept("NFS proc 99 -> PROC_UNAVAIL", &b, nfs_port, 3);
    call_hdr(&b, 5, 3, 100003, 3, 0, 1);
    one_call(nfs_port, &b, &r);
    CHECK(r.reply_stat == 1 && r.stat == 0 && r.lo == 2 && r.hi == 2, "rpcvers 3 -> RPC_MISMATCH (got %u/%u)",
          r.reply_stat, r.stat);
    printf("ok  %-44s MSG_DENIED RPC_MISMATCH\n", "RPC version 3 -> RPC_MISMATCH");
    call_hdr(&b, 6, 2, 100003, 3, 0, 6 /* RPCSEC_GSS */);
    one_call(nfs_port, &b, &r);
    CHECK(r.reply_stat == 1 && r.stat == 1, "RPCSEC_GSS -> AUTH_ERROR (got %u/%u)", r.reply_stat, r.stat);
    printf("ok  %-44s MSG_DENIED AUTH_ERROR\n", "unsupported auth flavor");

    call_hdr(&b, 7, 2, 100003, 3, 1, 1);         /* GETATTR without a handle */
    expect_accept("GETATTR truncated args -> GARBAGE_ARGS", &b, nfs_port, 4);
    call_hdr(&b, 8, 2, 100003, 3, 1, 1);
    put32(&b, 1000);                             /* handle longer than 64 */
    for (int i = 0; i < 250; i++) put32(&b, 0);
    expect_accept("GETATTR 1000-byte handle -> GARBAGE_ARGS", &b, nfs_port, 4);
    call_hdr(&b, 9, 2, 100003, 3, 3, 1);         /* LOOKUP: empty handle, huge name length */
    put32(&b, 0);
    put32(&b, 0xffffffffu);
    expect_accept("LOOKUP name length 2^32-1 -> GARBAGE_ARGS", &b, nfs_port, 4);
    call_hdr(&b, 10, 2, 100003, 3, 7, 1);        /* WRITE: data length beyond the record */
    put32(&b, 0); put32(&b, 0); put32(&b, 0); put32(&b, 100); put32(&b, 0); put32(&b, 100000);
    expect_accept("WRITE data past end of record -> GARBAGE_ARGS", &b, nfs_port, 4);
    call_hdr(&b, 11, 2, 100003, 3, 1, 1);        /* GETATTR with a forged 32-byte handle */
    put32(&b, 32);
    for (int i = 0; i < 8; i++) put32(&b, 0x4e580100u + (uint32_t)i);
    one_call(nfs_port, &b, &r);
    CHECK(r.reply_stat == 0 && r.stat == 0 && r.bodylen >= 4 && (get32(r.body) == 10001 || get32(r.body) == 70),
          "forged handle -> NFS3ERR_BADHANDLE/STALE (got %u)", r.bodylen >= 4 ? get32(r.body) : 0);
    printf("ok  %-44s nfsstat=%u\n", "forged handle", get32(r.body));
    call_hdr(&b, 12, 2, 100005, 3, 1, 1);        /* MNT path longer than MNTPATHLEN */
    put32(&b, 5000);
    for (int i = 0; i < 1250; i++) put32(&b, 0x41414141u);
    expect_accept("MNT 5000-byte path -> GARBAGE_ARGS", &b, mount_port, 4);
    call_hdr(&b, 13, 2, 100005, 3, 1, 1);
    put32(&b, 8);
    memcpy(b.b + b.n, "/nothere", 8); b.n += 8;
    one_call(mount_port, &b, &r);
    CHECK(r.reply_stat == 0 && r.stat == 0 && r.bodylen >= 4 && get32(r.body) == 2, "MNT of unknown path -> MNT3ERR_NOENT");
    printf("ok  %-44s mountstat=%u\n", "MNT unknown export", get32(r.body));
    check_alive("argument errors");

    /* multi-fragment call: NULL split in three fragments */
    call_hdr(&b, 14, 2, 100003, 3, 0, 1);
    {
        int fd = dial(nfs_port);
        size_t cuts[4] = { 0, 5, 17, b.n };
        for (int i = 0; i < 3; i++) {
            uint32_t len = (uint32_t)(cuts[i + 1] - cuts[i]) | (i == 2 ? 0x80000000u : 0);
            uint8_t m[4] = { len >> 24, len >> 16, len >> 8, len };
            send_all(fd, m, 4);
            send_all(fd, b.b + cuts[i], cuts[i + 1] - cuts[i]);
        }
        read_reply(fd, &r);
        CHECK(!r.closed && r.xid == 14 && r.stat == 0, "multi-fragment NULL");
        printf("ok  %-44s\n", "multi-fragment record");
        close(fd);
    }
    /* pipelining: 64 calls in one write, 64 replies */
    {
        int fd = dial(nfs_port);
        static uint8_t all[64 * 128];
        size_t n = 0;
        for (uint32_t i = 0; i < 64; i++) {
            call_hdr(&b, 1000 + i, 2, 100003, 3, 0, 1);
            uint32_t len = 0x80000000u | (uint32_t)b.n;
            all[n++] = len >> 24; all[n++] = len >> 16; all[n++] = len >> 8; all[n++] = len;
            memcpy(all + n, b.b, b.n);
            n += b.n;
        }
        send_all(fd, all, n);
        uint64_t seen = 0;
        int got = 0;
        for (int i = 0; i < 64; i++) {
            read_reply(fd, &r);
            if (r.closed || r.timeout) break;
            if (r.xid >= 1000 && r.xid < 1064) { seen |= 1ull << (r.xid - 1000); got++; }
        }
        CHECK(got == 64 && seen == ~0ull, "pipelined: %d/64 replies", got);
        printf("ok  %-44s %d replies\n", "64 pipelined calls", got);
        close(fd);
    }

    /* stream-level garbage */
    uint8_t huge[4] = { 0xff, 0xff, 0xff, 0xff };      /* 2 GiB last fragment */
    expect_closed_or_error("oversized fragment length", huge, 4);
    uint8_t big2[4] = { 0x00, 0x40, 0x00, 0x00 };      /* 4 MiB non-last fragment */
    expect_closed_or_error("oversized non-last fragment", big2, 4);
    uint8_t garbage[104];
    garbage[0] = 0x80; garbage[1] = 0; garbage[2] = 0; garbage[3] = 100;
    for (int i = 4; i < 104; i++) garbage[i] = (uint8_t)(i * 37 + 11);
    expect_closed_or_error("garbage record", garbage, sizeof garbage);
    uint8_t tiny[6] = { 0x80, 0, 0, 2, 1, 2 };         /* record shorter than an xid */
    expect_closed_or_error("2-byte record", tiny, sizeof tiny);
    call_hdr(&b, 15, 2, 100003, 3, 0, 1);
    b.b[7] = 1;                                         /* msg_type REPLY */
    {
        uint8_t m[4 + sizeof b.b];
        uint32_t len = 0x80000000u | (uint32_t)b.n;
        m[0] = len >> 24; m[1] = len >> 16; m[2] = len >> 8; m[3] = len;
        memcpy(m + 4, b.b, b.n);
        expect_closed_or_error("REPLY sent to the server", m, 4 + b.n);
    }
    {   /* truncated call: header promises 200 bytes, 20 arrive, then close */
        int fd = dial(nfs_port);
        uint8_t m[24] = { 0x80, 0, 0, 200 };
        send_all(fd, m, sizeof m);
        close(fd);
        printf("ok  %-44s\n", "truncated call then close");
    }
    {   /* many connections opened and dropped mid-record */
        for (int i = 0; i < 50; i++) {
            int fd = dial(nfs_port);
            uint8_t m[3] = { 0x80, 0, 0 };
            send_all(fd, m, sizeof m);
            close(fd);
        }
        printf("ok  %-44s\n", "50 connections dropped mid-header");
    }
    check_alive("stream garbage");

    {   /* a client that sends calls but never reads replies must only stall itself */
        int fd = dial(nfs_port);
        int rcv = 4096;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
        static uint8_t batch[256 * 128];
        size_t n = 0;
        for (uint32_t i = 0; i < 256; i++) {
            call_hdr(&b, 5000 + i, 2, 100003, 3, 0, 1);
            uint32_t len = 0x80000000u | (uint32_t)b.n;
            batch[n++] = len >> 24; batch[n++] = len >> 16; batch[n++] = len >> 8; batch[n++] = len;
            memcpy(batch + n, b.b, b.n);
            n += b.n;
        }
        size_t sent = 0;
        for (int round = 0; round < 4000; round++) {
            ssize_t w = send(fd, batch, n, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w <= 0) break;
            sent += (size_t)w;
        }
        check_alive("a client that does not read its replies");
        printf("ok  %-44s %zu bytes of calls unread\n", "non-reading client does not stall others", sent);
        close(fd);
    }
    printf("%s (%d failures)\n", failures ? "FAILED" : "all malformed cases handled", failures);
    return failures ? 1 : 0;
}
