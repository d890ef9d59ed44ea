/* What a would-be pool member already holds, so that pool create and member replace
 * never overwrite data unasked (as zpool create without -f): filesystem and partition
 * signatures via libblkid, a nasd pool label (exported: import it instead; open by a
 * live nasd: never), or non-zero data found by sampling. */
#define _GNU_SOURCE
#include "storage/manager/member_probe.h"
#include "storage/manager/storage_impl.h"
#include "storage/pool/vpool_owner.h"
#include "util/flock.h"
#include <blkid/blkid.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

static void add(json_t *found, const char *path, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(json_t *found, const char *path, const char *kind, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    json_array_append_new(found, json_pack("{s:s, s:s, s:s}", "path", path, "kind", kind, "what", what));
}

/* Filesystem, RAID or partition-table signatures libblkid knows. */
static int probe_blkid(const char *path, json_t *found)
{
    blkid_probe pr = blkid_new_probe_from_filename(path);
    if (!pr) return 0;
    blkid_probe_enable_superblocks(pr, 1);
    blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL | BLKID_SUBLKS_USAGE);
    blkid_probe_enable_partitions(pr, 1);
    int n = 0;
    /* blkid_do_probe steps through every signature (safeprobe stops at an ambiguity) */
    while (blkid_do_probe(pr) == 0) {
        const char *type = NULL, *pttype = NULL, *label = NULL, *usage = NULL;
        blkid_probe_lookup_value(pr, "TYPE", &type, NULL);
        blkid_probe_lookup_value(pr, "PTTYPE", &pttype, NULL);
        blkid_probe_lookup_value(pr, "LABEL", &label, NULL);
        blkid_probe_lookup_value(pr, "USAGE", &usage, NULL);
        if (pttype) {
            add(found, path, "partition_table", "%s partition table", pttype);
            n++;
        } else if (type) {
            add(found, path, usage && !strcmp(usage, "raid") ? "raid" : "filesystem", "%s %s%s%s%s", type,
                usage && !strcmp(usage, "filesystem") ? "filesystem" : usage ? usage : "signature",
                label && *label ? " labelled \"" : "", label && *label ? label : "", label && *label ? "\"" : "");
            n++;
        }
        if (n >= 8) break;
    }
    blkid_free_probe(pr);
    return n;
}

static uint64_t dev_size(int fd)
{
    struct stat s;
    if (fstat(fd, &s)) return 0;
    if (S_ISREG(s.st_mode)) return (uint64_t)s.st_size;
    uint64_t sz = 0;
    if (S_ISBLK(s.st_mode) && ioctl(fd, BLKGETSIZE64, &sz)) sz = 0;
    return sz;
}

/* Offset of the first non-zero byte in [off, off+len), or -1. */
static int64_t nonzero_at(int fd, uint8_t *buf, uint64_t off, size_t len)
{
    ssize_t r = pread(fd, buf, len, (off_t)off);
    for (ssize_t i = 0; i < r; i++)
        if (buf[i]) return (int64_t)(off + (uint64_t)i);
    return -1;
}

/* Samples the first and last MiB, 32 spots spread over the disk, and (files) the first
 * allocated extents: any non-zero byte means data a new pool would overwrite. */
static int64_t probe_data(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    uint64_t size = dev_size(fd);
    size_t blen = 1u << 20;
    uint8_t *buf = malloc(blen);
    int64_t at = -1;
    if (buf && size) {
        uint64_t head = size < blen ? size : blen;
        at = nonzero_at(fd, buf, 0, head);
        if (at < 0 && size > blen) at = nonzero_at(fd, buf, size - blen, blen);
        for (int i = 1; at < 0 && i <= 32; i++) {
            uint64_t off = (size / 33 * (uint64_t)i) & ~65535ull;
            at = nonzero_at(fd, buf, off, 65536);
        }
        off_t d = 0;
        for (int i = 0; at < 0 && i < 16; i++) {  /* allocated extents of a sparse file */
            d = lseek(fd, d, SEEK_DATA);
            if (d < 0 || (uint64_t)d >= size) break;
            at = nonzero_at(fd, buf, (uint64_t)d, 65536);
            d = lseek(fd, d, SEEK_HOLE);
            if (d < 0) break;
        }
    }
    free(buf);
    close(fd);
    return at;
}

/* A block device the kernel holds: an exclusive open fails while it, or a partition of
 * it, is mounted or used by md, dm or LVM (nasd's own pools hold theirs so too). */
static bool block_held(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) || !S_ISBLK(sb.st_mode)) return false;
    int fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) close(fd);
    return fd < 0 && errno == EBUSY;
}

int member_probe(struct storage *st, const char *path, json_t *found)
{
    struct vpool_peek pk;
    int rc = vpool_peek(path, &pk);
    if (rc == -ENOENT) return MEMBER_FREE;  /* nothing to lose; pool create says it is missing */
    if (rc) {
        add(found, path, "unreadable", "cannot read %s: %s", path, strerror(-rc));
        return MEMBER_UNUSABLE;
    }
    pid_t holder = 0;
    int lfd = nasd_flock_open(path, O_RDONLY, &holder);
    if (lfd >= 0) close(lfd);
    if (lfd == -EWOULDBLOCK) {
        if (holder == getpid()) add(found, path, "in_use", "in use by a pool of this nasd");
        else add(found, path, "in_use", "open and locked by process %d (another nasd?)", (int)holder);
        return MEMBER_LIVE;
    }
    if (block_held(path)) {
        add(found, path, "in_use", BLOCK_HELD_WHAT);
        return MEMBER_LIVE;
    }
    int verdict = MEMBER_FREE;
    if (pk.has_label) {
        POOL_REF(r);
        struct pool *p = pool_hold(st, &r, pk.name);
        struct vpool_status s;
        int here = p && p->vp && vpool_get_status(p->vp, &s) == 0 && !memcmp(s.uuid, pk.uuid, 16);
        if (here) {
            add(found, path, "nasd_pool", "member %d of pool \"%s\", which is open in this nasd", pk.member_idx, pk.name);
            return MEMBER_LIVE;
        }
        if (vpool_owner_live(&pk)) {
            add(found, path, "nasd_pool", "member %d of pool \"%s\", open by nasd pid %u on host %s", pk.member_idx,
                pk.name, pk.owner_pid, pk.owner_host[0] ? pk.owner_host : "?");
            return MEMBER_LIVE;
        }
        add(found, path, "nasd_pool", "member %d of %d of the exported nasd pool \"%s\" (%s); import it with "
            "POST /api/v1/pools/%s/import instead", pk.member_idx, pk.nmembers, pk.name,
            vpool_layout_label(pk.layout, pk.log), pk.name);
        json_object_set_new(json_array_get(found, json_array_size(found) - 1), "import", json_string(pk.name));
        verdict = MEMBER_HAS_DATA;
    }
    if (probe_blkid(path, found)) verdict = MEMBER_HAS_DATA;
    /* a destroyed nasd pool's data was given up by its owner: no need to ask again */
    if (verdict == MEMBER_FREE && pk.owner_state != VPOOL_OWNER_DESTROYED) {
        int64_t at = probe_data(path);
        if (at >= 0) {
            add(found, path, "data", "non-zero data (first seen at byte %lld) and no known filesystem", (long long)at);
            verdict = MEMBER_HAS_DATA;
        }
    }
    return verdict;
}

int member_wipe(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -errno;
    blkid_probe pr = blkid_new_probe();
    int rc = 0;
    if (pr && blkid_probe_set_device(pr, fd, 0, 0) == 0) {
        blkid_probe_enable_superblocks(pr, 1);
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_MAGIC);
        blkid_probe_enable_partitions(pr, 1);
        blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
        while (blkid_do_probe(pr) == 0)
            if (blkid_do_wipe(pr, 0)) { rc = -EIO; break; }
    }
    if (pr) blkid_free_probe(pr);
    fsync(fd);
    close(fd);
    int w = vpool_wipe_member_labels(path);
    return rc ? rc : w;
}
