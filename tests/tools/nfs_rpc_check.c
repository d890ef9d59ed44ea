/* Raw ONC RPC checks of NFS server behaviour that libnfs cannot provoke:
 *   nfs_rpc_check HOST NFSPORT MOUNTPORT remove-dup EXPORT NAME
 *     MNT EXPORT, then REMOVE NAME twice with the same xid on one connection
 *     (both NFS3_OK, identical bytes: the second is the cached reply), then with
 *     a new xid (NFS3ERR_NOENT).
 *   nfs_rpc_check HOST NFSPORT MOUNTPORT mnt PATH WANT
 *     MNT PATH must answer mountstat3 WANT (0 = OK, then a handle is required).
 * Exit 0 on success. */
#include <arpa/inet.h>
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

struct buf { uint8_t b[4096]; size_t n; };
static void put32(struct buf *b, uint32_t v)
{
    b->b[b->n++] = v >> 24; b->b[b->n++] = v >> 16; b->b[b->n++] = v >> 8; b->b[b->n++] = v;
}
static void put_opaque(struct buf *b, const void *p, uint32_t n)
{
    put32(b, n);
    memcpy(b->b + b->n, p, n);
    b->n += n;
    while (b->n % 4) b->b[b->n++] = 0;
}
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, host, &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { fprintf(stderr, "connect %d failed\n", port); exit(1); }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void send_record(int fd, const struct buf *b)
{
    uint8_t rec[4 + sizeof b->b];
    uint32_t m = 0x80000000u | (uint32_t)b->n;
    rec[0] = m >> 24; rec[1] = m >> 16; rec[2] = m >> 8; rec[3] = m;
    memcpy(rec + 4, b->b, b->n);
    size_t off = 0, n = b->n + 4;
    while (off < n) {
        ssize_t w = send(fd, rec + off, n - off, MSG_NOSIGNAL);
        if (w <= 0) { fprintf(stderr, "send failed\n"); exit(1); }
        off += (size_t)w;
    }
}

static void recv_exact(int fd, uint8_t *p, size_t n)
{
    while (n) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (poll(&pf, 1, 5000) <= 0) { fprintf(stderr, "timeout waiting for a reply\n"); exit(1); }
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0) { fprintf(stderr, "connection closed\n"); exit(1); }
        p += r;
        n -= (size_t)r;
    }
}

/* Reads one reply record into rec; returns its length. Checks xid and MSG_ACCEPTED/SUCCESS. */
static size_t read_reply(int fd, uint32_t xid, uint8_t *rec, size_t cap, size_t *body)
{
    uint8_t m[4];
    recv_exact(fd, m, 4);
    size_t len = get32(m) & 0x7fffffff;
    if (len > cap || len < 24) { fprintf(stderr, "bad reply length %zu\n", len); exit(1); }
    recv_exact(fd, rec, len);
    if (get32(rec) != xid || get32(rec + 8) != 0 || get32(rec + 20) != 0) {
        fprintf(stderr, "reply xid %08x (want %08x) not accepted/SUCCESS\n", get32(rec), xid);
        exit(1);
    }
    *body = 24;
    return len;
}

static void call_hdr(struct buf *b, uint32_t xid, uint32_t prog, uint32_t vers, uint32_t proc)
{
    b->n = 0;
    put32(b, xid); put32(b, 0); put32(b, 2); put32(b, prog); put32(b, vers); put32(b, proc);
    put32(b, 1);                                   /* AUTH_SYS root */
    put32(b, 20); put32(b, 0); put32(b, 0); put32(b, 0); put32(b, 0); put32(b, 0);
    put32(b, 0); put32(b, 0);                      /* verifier */
}

/* MNT path; returns mountstat3, handle in fh/fhlen on OK. */
static uint32_t do_mnt(int mport, const char *path, uint8_t *fh, uint32_t *fhlen)
{
    int fd = dial(mport);
    struct buf b;
    call_hdr(&b, 0x4d4e5401, 100005, 3, 1);
    put_opaque(&b, path, (uint32_t)strlen(path));
    send_record(fd, &b);
    static uint8_t rec[65536];
    size_t off, len = read_reply(fd, 0x4d4e5401, rec, sizeof rec, &off);
    close(fd);
    if (len < off + 4) { fprintf(stderr, "short MNT reply\n"); exit(1); }
    uint32_t st = get32(rec + off);
    if (st == 0) {
        if (len < off + 8) { fprintf(stderr, "MNT OK without a handle\n"); exit(1); }
        *fhlen = get32(rec + off + 4);
        if (*fhlen == 0 || *fhlen > 64 || len < off + 8 + *fhlen) { fprintf(stderr, "bad handle\n"); exit(1); }
        memcpy(fh, rec + off + 8, *fhlen);
    }
    return st;
}

static int remove_dup(int nport, int mport, const char *export, const char *name)
{
    uint8_t fh[64];
    uint32_t fhlen = 0;
    if (do_mnt(mport, export, fh, &fhlen)) { fprintf(stderr, "MNT %s failed\n", export); return 1; }
    int fd = dial(nport);
    struct buf b;
    call_hdr(&b, 0x0d0d0001, 100003, 3, 12);         /* REMOVE */
    put_opaque(&b, fh, fhlen);
    put_opaque(&b, name, (uint32_t)strlen(name));
    static uint8_t r1[65536], r2[65536], r3[65536];
    size_t off;
    send_record(fd, &b);
    size_t l1 = read_reply(fd, 0x0d0d0001, r1, sizeof r1, &off);
    send_record(fd, &b);                             /* retransmission: same xid, same bytes */
    size_t l2 = read_reply(fd, 0x0d0d0001, r2, sizeof r2, &off);
    b.b[3] = 0x02;                                   /* new xid 0x0d0d0002 */
    send_record(fd, &b);
    (void)read_reply(fd, 0x0d0d0002, r3, sizeof r3, &off);
    close(fd);
    uint32_t s1 = get32(r1 + off), s2 = get32(r2 + off), s3 = get32(r3 + off);
    printf("REMOVE xid 1: %u, same xid again: %u (%s), new xid: %u\n", s1, s2,
           l1 == l2 && !memcmp(r1, r2, l1) ? "identical reply" : "different reply", s3);
    if (s1 != 0 || s2 != 0 || l1 != l2 || memcmp(r1, r2, l1) || s3 != 2) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: nfs_rpc_check HOST NFSPORT MOUNTPORT remove-dup EXPORT NAME | mnt PATH WANT\n");
        return 2;
    }
    host = argv[1];
    int nport = atoi(argv[2]), mport = atoi(argv[3]);
    if (!strcmp(argv[4], "remove-dup") && argc == 7) return remove_dup(nport, mport, argv[5], argv[6]);
    if (!strcmp(argv[4], "mnt") && argc == 7) {
        uint8_t fh[64];
        uint32_t fhlen = 0;
        uint32_t st = do_mnt(mport, argv[5], fh, &fhlen);
        uint32_t want = (uint32_t)strtoul(argv[6], NULL, 10);
        printf("MNT %s: %u (want %u)%s\n", argv[5], st, want, st == 0 ? " with a handle" : "");
        return st == want ? 0 : 1;
    }
    fprintf(stderr, "bad command\n");
    return 2;
}
