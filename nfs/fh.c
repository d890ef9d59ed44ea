/* File handle encoding, MAC verification and the persisted MAC secret. */
#define _GNU_SOURCE
#include "nfs/fh.h"
#include "util/log.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>

#define FH_VERSION 2      /* 1: XXH3-keyed handles of older nasd */
#define FH_HDR 16

static int read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += r;
    }
    return 0;
}

static int random_bytes(void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom((char *)buf + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -errno;
        got += r;
    }
    return 0;
}

void nfs_fh_secret_prepare(struct nfs_fh_secret *out)
{
    hmac_sha256_set_key(&out->mac, sizeof out->s, out->s);
}

static int secret_load(const char *state_dir, struct nfs_fh_secret *out);

int nfs_fh_secret_load(const char *state_dir, struct nfs_fh_secret *out)
{
    int e = secret_load(state_dir, out);
    if (!e) nfs_fh_secret_prepare(out);
    return e;
}

static int secret_load(const char *state_dir, struct nfs_fh_secret *out)
{
    if (!state_dir || !state_dir[0]) {
        log_warn("nfs: no state dir; file handles will not survive a restart");
        return random_bytes(out->s, sizeof out->s);
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/nfs-fh-secret", state_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        int r = read_full(fd, out->s, sizeof out->s);
        close(fd);
        if (r == 0) return 0;
        log_err("nfs: %s is truncated; refusing to replace it", path);
        return -EINVAL;
    }
    if (errno != ENOENT) return -errno;
    int e = random_bytes(out->s, sizeof out->s);
    if (e) return e;
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    ssize_t w = write(fd, out->s, sizeof out->s);
    if (w != (ssize_t)sizeof out->s || fsync(fd) < 0) { close(fd); unlink(tmp); return -EIO; }
    close(fd);
    /* link() fails if another instance created it meanwhile: then use theirs. */
    if (link(tmp, path) < 0) {
        unlink(tmp);
        if (errno != EEXIST) return -errno;
        return secret_load(state_dir, out);
    }
    unlink(tmp);
    return 0;
}

static void put_be32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }
static uint32_t get_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* The keyed context is copied, so each MAC costs the message blocks and the outer hash only. */
static void fh_mac(const struct nfs_fh_secret *sec, const uint8_t *data, size_t len, uint8_t out[8])
{
    struct hmac_sha256_ctx c = sec->mac;
    hmac_sha256_update(&c, len, data);
    hmac_sha256_digest(&c, 8, out);
}

size_t nfs_fh_encode(const struct nfs_fh_secret *sec, uint32_t export_id, uint32_t gen,
                     const struct nasd_fh *k, uint8_t *out)
{
    out[0] = 'N';
    out[1] = 'X';
    out[2] = FH_VERSION;
    out[3] = (uint8_t)k->len;
    put_be32(out + 4, export_id);
    put_be32(out + 8, gen);
    put_be32(out + 12, (uint32_t)k->type);
    memcpy(out + FH_HDR, k->bytes, k->len);
    fh_mac(sec, out, FH_HDR + k->len, out + FH_HDR + k->len);
    return FH_HDR + k->len + 8;
}

int nfs_fh_decode(const struct nfs_fh_secret *sec, const uint8_t *fh, size_t len,
                  struct nfs_fh_parsed *out)
{
    if (len < FH_HDR + 8 || len > NFS_FH_MAX) return -1;
    if (fh[0] != 'N' || fh[1] != 'X') return -1;
    uint32_t klen = fh[3];
    if (klen > NFS_FH_KMAX || len != FH_HDR + klen + 8) return -1;
    if (fh[2] == 1) return -2;
    if (fh[2] != FH_VERSION) return -1;
    uint8_t mac[8];
    fh_mac(sec, fh, FH_HDR + klen, mac);
    if (!memeql_sec(mac, fh + FH_HDR + klen, 8)) return -1;
    out->export_id = get_be32(fh + 4);
    out->gen = get_be32(fh + 8);
    out->k.type = (int32_t)get_be32(fh + 12);
    out->k.len = klen;
    memcpy(out->k.bytes, fh + FH_HDR, klen);
    return 0;
}
