#pragma once
/* A minimal raw iSCSI initiator for the hostile-traffic tools: dialing (optionally from a
 * chosen 127.x source address), PDU send/receive with digests, a one-PDU login, SCSI
 * command headers, commands run to completion and NOP pings. Header-only: each tool is one .c file; functions are static inline so a
 * tool that uses only some of them builds without unused-function warnings. */
#include "iscsi/pdu.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct wconn {
    int fd;
    bool hd, dd;
    uint32_t cmdsn, itt, statsn;
};

static int w_port;

static inline uint64_t w_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Connects to 127.0.0.1:w_port from src (NULL: any). Returns fd or -1. */
static int w_rcvbuf;   /* >0: the next dials' receive buffer (a client that reads slowly) */

static inline int w_dial_from(const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (w_rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &w_rcvbuf, sizeof w_rcvbuf);
    if (src) {
        struct sockaddr_in s = { .sin_family = AF_INET };
        inet_pton(AF_INET, src, &s.sin_addr);
        if (bind(fd, (struct sockaddr *)&s, sizeof s) < 0) { close(fd); return -1; }
    }
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(w_port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { close(fd); return -1; }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static inline void w_init(struct wconn *w, int fd)
{
    memset(w, 0, sizeof *w);
    w->fd = fd;
    w->itt = 0x100;
    w->cmdsn = 1;
}

/* Close with a TCP reset instead of a FIN. */
static inline void w_reset(int fd)
{
    struct linger l = { 1, 0 };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

static inline bool w_send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0) return false;
        p += n; len -= (size_t)n;
    }
    return true;
}

static inline bool w_recv_all(int fd, void *buf, size_t len, int timeout_ms)
{
    char *p = buf;
    while (len) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (poll(&pfd, 1, timeout_ms) <= 0) return false;
        ssize_t n = recv(fd, p, len, 0);
        if (n <= 0) return false;
        p += n; len -= (size_t)n;
    }
    return true;
}

/* True when the peer closes within timeout (data before EOF is ignored). */
static inline bool w_expect_drop(int fd, int timeout_ms)
{
    char buf[65536];
    uint64_t end = w_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        uint64_t now = w_now_ms();
        if (now >= end) return false;
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (poll(&pfd, 1, (int)(end - now)) <= 0) return false;
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
        if (n < 0) return false;
    }
}

static inline bool w_send_pdu(struct wconn *w, uint8_t *bhs, const void *data, uint32_t dlen)
{
    uint8_t buf[ISCSI_BHS_LEN + 4];
    put_be24(bhs + 5, dlen);
    memcpy(buf, bhs, ISCSI_BHS_LEN);
    size_t hl = ISCSI_BHS_LEN;
    if (w->hd) { uint32_t crc = iscsi_crc32c(bhs, ISCSI_BHS_LEN, 0); memcpy(buf + hl, &crc, 4); hl += 4; }
    if (!w_send_all(w->fd, buf, hl)) return false;
    if (!dlen) return true;
    uint8_t pad[8] = { 0 };
    uint32_t pl = pad4(dlen);
    if (!w_send_all(w->fd, data, dlen)) return false;
    if (w->dd) {
        uint32_t crc = iscsi_crc32c(data, dlen, 0);
        if (pl) crc = iscsi_crc32c(pad, pl, crc);
        memcpy(pad + pl, &crc, 4);
        pl += 4;
    }
    return !pl || w_send_all(w->fd, pad, pl);
}

/* One PDU; data into data[max]; returns the data length or -1. */
static inline int w_recv_pdu(struct wconn *w, uint8_t *bhs, uint8_t *data, size_t max, int timeout_ms)
{
    if (!w_recv_all(w->fd, bhs, ISCSI_BHS_LEN, timeout_ms)) return -1;
    uint8_t tmp[4];
    if (w->hd && !w_recv_all(w->fd, tmp, 4, timeout_ms)) return -1;
    uint32_t dl = bhs_data_len(bhs), total = dl + pad4(dl) + (w->dd && dl ? 4 : 0);
    if (total > max) return -1;
    if (total && !w_recv_all(w->fd, data, total, timeout_ms)) return -1;
    w->statsn = get_be32(bhs + 24);
    return (int)dl;
}

static inline void w_login_bhs(struct wconn *w, uint8_t *bhs, const uint8_t isid[6], uint8_t flags)
{
    memset(bhs, 0, ISCSI_BHS_LEN);
    bhs[0] = BHS_I | OP_LOGIN_REQ;
    bhs[1] = flags;
    memcpy(bhs + 8, isid, 6);
    put_be32(bhs + 16, w->itt++);
    put_be32(bhs + 24, w->cmdsn);
}

static const uint8_t w_isid_default[6] = { 0x80, 0, 0, 0, 0, 0x42 };

/* One-PDU login straight to full feature phase (no CHAP). target NULL: discovery.
 * Returns the login status (0 = logged in), or -1 on a transport error. */
static inline int w_login(struct wconn *w, const char *initiator, const char *target, const uint8_t isid[6])
{
    uint8_t bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN], data[8192];
    char keys[1024];
    int n;
    if (target)
        n = snprintf(keys, sizeof keys, "InitiatorName=%s%cTargetName=%s%cSessionType=Normal%c"
                     "HeaderDigest=None%cDataDigest=None%cMaxRecvDataSegmentLength=262144%c"
                     "MaxBurstLength=1048576%c", initiator, 0, target, 0, 0, 0, 0, 0, 0);
    else
        n = snprintf(keys, sizeof keys, "InitiatorName=%s%cSessionType=Discovery%c"
                     "HeaderDigest=None%cDataDigest=None%c", initiator, 0, 0, 0, 0);
    w_login_bhs(w, bhs, isid ? isid : w_isid_default, LOGIN_T | (1 << 2) | 3);
    if (!w_send_pdu(w, bhs, keys, (uint32_t)n)) return -1;
    if (w_recv_pdu(w, rsp, data, sizeof data, 5000) < 0 || bhs_opcode(rsp) != OP_LOGIN_RSP) return -1;
    int st = get_be16(rsp + 36);
    if (st == 0 && !(rsp[1] & LOGIN_T)) return -1;
    return st;
}

static inline void w_cmd_bhs(struct wconn *w, uint8_t *bhs, uint8_t op)
{
    memset(bhs, 0, ISCSI_BHS_LEN);
    bhs[0] = op;
    bhs[1] = BHS_F;
    put_be32(bhs + 16, w->itt++);
    put_be32(bhs + 20, ISCSI_RSVD_TAG);
    put_be32(bhs + 24, w->cmdsn);
    put_be32(bhs + 28, w->statsn + 1);
}

/* SCSI command header: cdb (16 bytes), flags (CMD_R/CMD_W), expected data length. */
static inline void w_scsi_bhs(struct wconn *w, uint8_t *bhs, const uint8_t *cdb, uint8_t flags, uint32_t edtl)
{
    w_cmd_bhs(w, bhs, OP_SCSI_CMD);
    bhs[1] |= flags;
    put_be32(bhs + 20, edtl);
    put_be32(bhs + 24, w->cmdsn++);
    memcpy(bhs + 32, cdb, 16);
}

/* NOP-Out ping with payload; true if echoed (other PDUs before it are skipped). */
static inline bool w_ping(struct wconn *w)
{
    uint8_t bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN];
    static uint8_t data[300000];
    const char payload[] = "ping-payload-123";
    w_cmd_bhs(w, bhs, OP_NOP_OUT | BHS_I);
    uint32_t tag = get_be32(bhs + 16);
    if (!w_send_pdu(w, bhs, payload, sizeof payload)) return false;
    for (int i = 0; i < 64; i++) {
        int dl = w_recv_pdu(w, rsp, data, sizeof data, 5000);
        if (dl < 0) return false;
        if (bhs_opcode(rsp) == OP_NOP_IN && get_be32(rsp + 16) == tag)
            return dl == (int)sizeof payload && !memcmp(data, payload, sizeof payload);
    }
    return false;
}

/* Runs one command to completion, answering R2Ts with out's bytes (NULL: zeros). Returns
 * the SCSI status (sense key in *sk), or -1 when the connection failed. */
static inline int w_run_cmd(struct wconn *w, const uint8_t *cdb, uint8_t flags, uint32_t edtl, const uint8_t *out,
                            uint8_t *sk)
{
    uint8_t bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN];
    static uint8_t data[1 << 20];
    w_scsi_bhs(w, bhs, cdb, flags, edtl);
    uint32_t itt = get_be32(bhs + 16);
    if (!w_send_pdu(w, bhs, NULL, 0)) return -1;
    for (;;) {
        int dl = w_recv_pdu(w, rsp, data, sizeof data, 5000);
        if (dl < 0) return -1;
        uint8_t op = bhs_opcode(rsp);
        if (op == OP_R2T && get_be32(rsp + 16) == itt) {
            uint32_t off = get_be32(rsp + 40), len = get_be32(rsp + 44);
            if (len > sizeof data || (out && off + len > edtl)) return -1;
            uint8_t d[ISCSI_BHS_LEN] = { OP_DATA_OUT, BHS_F };
            put_be32(d + 16, itt);
            put_be32(d + 20, get_be32(rsp + 20));
            put_be32(d + 40, off);
            if (out) memcpy(data, out + off, len); else memset(data, 0, len);
            if (!w_send_pdu(w, d, data, len)) return -1;
        } else if (op == OP_SCSI_RSP && get_be32(rsp + 16) == itt) {
            *sk = dl >= 5 ? data[4] & 0x0f : 0;
            return rsp[3];
        } else if (op == OP_DATA_IN && (rsp[1] & DIN_S) && get_be32(rsp + 16) == itt) {
            *sk = 0;
            return rsp[3];
        }
    }
}

static inline void w_cdb10(uint8_t *c, uint8_t op, uint8_t b1, uint32_t lba, uint16_t n)
{
    memset(c, 0, 16);
    c[0] = op; c[1] = b1;
    put_be32(c + 2, lba);
    put_be16(c + 7, n);
}

static inline void w_cdb16(uint8_t *c, uint8_t op, uint8_t b1, uint64_t lba, uint32_t n)
{
    memset(c, 0, 16);
    c[0] = op; c[1] = b1;
    put_be64(c + 2, lba);
    put_be32(c + 10, n);
}
