/* Minimal HTTP/1.1 client (see http_client.h): numeric or named host, Connection: close,
 * Content-Length bodies sent with sendfile, response read until the server closes;
 * non-blocking, with deadlines and a cancel flag. */
#define _GNU_SOURCE
#include "util/http_client.h"
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

/* Every wait is a poll of at most SLICE_MS, so that a cancel (shutdown) is seen soon, and
 * ends at a deadline: timeout_s per address to connect, timeout_s without progress while
 * sending, and timeout_s for the whole response (a peer answering one byte at a time). */
#define SLICE_MS 200

struct io { int fd; double deadline; const atomic_int *cancel; };

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* 0 once fd is ready for ev; -ETIMEDOUT past the deadline, -ECANCELED on cancel */
static int wait_for(const struct io *io, short ev)
{
    for (;;) {
        if (io->cancel && atomic_load(io->cancel)) return -ECANCELED;
        double left = io->deadline - now_s();
        if (left <= 0) return -ETIMEDOUT;
        struct pollfd pf = { .fd = io->fd, .events = ev };
        int r = poll(&pf, 1, left * 1000 < SLICE_MS ? (int)(left * 1000) + 1 : SLICE_MS);
        if (r > 0) return 0;
        if (r < 0 && errno != EINTR) return -errno;
    }
}

static int connect_to(const char *host, const char *port, struct io *io, int timeout_s)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
    if (getaddrinfo(host, port, &hints, &res)) return NASD_HTTP_ERESOLVE;
    int fd = -1, err = -ECONNREFUSED;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) { err = -errno; continue; }
        io->fd = fd;
        io->deadline = now_s() + timeout_s;   /* each address its own: the next may answer */
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 ? -errno : 0, soerr = 0;
        socklen_t sl = sizeof soerr;
        if (rc == -EINPROGRESS && (rc = wait_for(io, POLLOUT)) == 0 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0)
            rc = -soerr;
        if (rc) { err = rc; close(fd); fd = -1; }
        if (rc == -ECANCELED) break;
    }
    freeaddrinfo(res);
    return fd >= 0 ? fd : err;
}

static int send_all(struct io *io, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(io->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) { int rc = wait_for(io, POLLOUT); if (rc) return rc; continue; }
        if (w <= 0) return w < 0 ? -errno : -EPIPE;
        p += w; n -= (size_t)w;
    }
    return 0;
}

int nasd_http_request(const char *method, const char *url, const char *token, const char *ctype, int body_fd,
                      uint64_t body_len, char *resp, size_t resp_max, int timeout_s, const atomic_int *cancel)
{
    if (strncmp(url, "http://", 7)) return -EPROTONOSUPPORT;
    const char *h = url + 7, *path = strchr(h, '/');
    if (!path) path = h + strlen(h);
    char host[256], port[16] = "80";
    size_t hl = (size_t)(path - h);
    if (!hl || hl >= sizeof host) return -EINVAL;
    memcpy(host, h, hl);
    host[hl] = 0;
    char *colon = host[0] == '[' ? strstr(host, "]:") : strrchr(host, ':');
    if (colon) {
        snprintf(port, sizeof port, "%s", colon + (host[0] == '[' ? 2 : 1));
        *colon = 0;
    }
    char *hp = host[0] == '[' ? host + 1 : host;
    if (hp != host && hp[strlen(hp) - 1] == ']') hp[strlen(hp) - 1] = 0;
    /* connect (each address) and send: timeout_s without progress (a large body may take
     * longer in all) */
    struct io io = { -1, 0, cancel };
    int fd = connect_to(hp, port, &io, timeout_s);
    if (fd < 0) return fd;
    char hdr[2048];
    int n = snprintf(hdr, sizeof hdr, "%s %s HTTP/1.1\r\nHost: %.*s\r\nConnection: close\r\nContent-Length: %llu\r\n"
                     "%s%s%s%s%s%s\r\n", method, *path ? path : "/", (int)hl, h, (unsigned long long)(body_fd >= 0 ? body_len : 0),
                     token && *token ? "Authorization: Bearer " : "", token && *token ? token : "", token && *token ? "\r\n" : "",
                     ctype ? "Content-Type: " : "", ctype ? ctype : "", ctype ? "\r\n" : "");
    int rc = n < (int)sizeof hdr ? send_all(&io, hdr, (size_t)n) : -E2BIG;
    for (off_t off = 0; !rc && body_fd >= 0 && (uint64_t)off < body_len;) {
        ssize_t w = sendfile(fd, body_fd, &off, body_len - (uint64_t)off > (1u << 30) ? 1u << 30 : body_len - (uint64_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) { rc = wait_for(&io, POLLOUT); continue; }
        if (w <= 0) rc = w < 0 ? -errno : -EIO;
        else io.deadline = now_s() + timeout_s;
    }
    /* the response: all of it within timeout_s of the request's end */
    io.deadline = now_s() + timeout_s;
    size_t got = 0;
    char *buf = malloc(65536);
    if (!rc && !buf) rc = -ENOMEM;
    while (!rc && got < 65535) {
        ssize_t r = recv(fd, buf + got, 65535 - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) { rc = wait_for(&io, POLLIN); continue; }
        if (r < 0) { rc = -errno; break; }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    int status = 0;
    if (!rc) {
        buf[got] = 0;
        if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) rc = -EBADMSG;
        char *body = strstr(buf, "\r\n\r\n");
        if (resp && resp_max) snprintf(resp, resp_max, "%s", body ? body + 4 : "");
    }
    free(buf);
    return rc ? rc : status;
}

const char *nasd_http_strerror(int rc)
{
    return rc == NASD_HTTP_ERESOLVE ? "host name not resolved" : strerror(-rc);
}
