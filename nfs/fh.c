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
#include <xxhash.h>

#define FH_VERSION 1
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

int nfs_fh_secret_load(const char *state_dir, struct nfs_fh_secret *out)
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
        return nfs_fh_secret_load(state_dir, out);
    }
    unlink(tmp);
    return 0;
}

static void put_be32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }
static uint32_t get_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t fh_mac(const struct nfs_fh_secret *sec, const uint8_t *data, size_t len)
{
    return XXH3_64bits_withSecret(data, len, sec->s, sizeof sec->s);
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
    uint64_t mac = fh_mac(sec, out, FH_HDR + k->len);
    put_be32(out + FH_HDR + k->len, (uint32_t)(mac >> 32));
    put_be32(out + FH_HDR + k->len + 4, (uint32_t)mac);
    return FH_HDR + k->len + 8;
}

int nfs_fh_decode(const struct nfs_fh_secret *sec, const uint8_t *fh, size_t len,
                  struct nfs_fh_parsed *out)
{
    if (len < FH_HDR + 8 || len > NFS_FH_MAX) return -1;
    if (fh[0] != 'N' || fh[1] != 'X' || fh[2] != FH_VERSION) return -1;
    uint32_t klen = fh[3];
    if (klen > NFS_FH_KMAX || len != FH_HDR + klen + 8) return -1;
    uint64_t mac = ((uint64_t)get_be32(fh + FH_HDR + klen) << 32) | get_be32(fh + FH_HDR + klen + 4);
    if (mac != fh_mac(sec, fh, FH_HDR + klen)) return -1;
    out->export_id = get_be32(fh + 4);
    out->gen = get_be32(fh + 8);
    out->k.type = (int32_t)get_be32(fh + 12);
    out->k.len = klen;
    memcpy(out->k.bytes, fh + FH_HDR, klen);
    return 0;
}
