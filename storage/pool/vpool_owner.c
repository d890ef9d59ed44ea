/* Member ownership outside the pool engine's data path: reading a member's label
 * without importing it, and the owner sector (64 KiB, between label A and label B,
 * otherwise unused) that records which host/pid has the pool open and a heartbeat. */
#define _GNU_SOURCE
#include "storage/pool/vpool_owner.h"
#include "storage/pool/vpool_impl.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include <xxhash.h>

#define VP_OWNER_OFF   (64ull << 10)
#define VP_OWNER_MAGIC 0x314e574f4453414eull   /* "NASDOWN1" */

struct vp_owner {                 /* at the start of the owner sector, little endian */
    uint64_t magic;
    uint32_t version, state;
    uint8_t pool_uuid[16];
    uint64_t hostid;
    uint32_t pid, pad;
    uint64_t seq, time_ms;
    char host[64];
    uint64_t csum;                /* XXH3-64 of this struct with csum = 0 */
};

static uint64_t owner_csum(const struct vp_owner *o)
{
    struct vp_owner c = *o;
    c.csum = 0;
    return XXH3_64bits(&c, sizeof c);
}

uint64_t vpool_hostid(void)
{
    static uint64_t id;
    if (id) return id;
    const char *env = getenv("NASD_HOSTID");   /* tests: two "hosts" on one machine */
    if (env && *env) return id = strtoull(env, NULL, 0) ? strtoull(env, NULL, 0) : 1;
    char buf[64] = "";
    FILE *f = fopen("/etc/machine-id", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    id = buf[0] ? XXH3_64bits(buf, strlen(buf)) : (uint64_t)(uint32_t)gethostid();
    if (!id) id = 1;
    return id;
}

int vpool_owner_write(int fd, const uint8_t uuid[16], int state, uint64_t seq, int durable)
{
    uint8_t buf[VP_SECTOR] = {0};
    struct vp_owner *o = (struct vp_owner *)buf;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    o->magic = VP_OWNER_MAGIC;
    o->version = 1;
    o->state = (uint32_t)state;
    if (uuid) memcpy(o->pool_uuid, uuid, 16);
    o->hostid = vpool_hostid();
    o->pid = (uint32_t)getpid();
    o->seq = seq;
    o->time_ms = (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
    gethostname(o->host, sizeof o->host - 1);
    o->csum = owner_csum(o);
    if (pwrite(fd, buf, sizeof buf, VP_OWNER_OFF) != (ssize_t)sizeof buf) return -errno ? -errno : -EIO;
    if (durable) return fdatasync(fd) ? -errno : 0;
    return sync_file_range(fd, VP_OWNER_OFF, VP_SECTOR, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                           SYNC_FILE_RANGE_WAIT_AFTER) ? -errno : 0;
}

static int owner_read(int fd, struct vp_owner *o)
{
    uint8_t buf[VP_SECTOR];
    if (pread(fd, buf, sizeof buf, VP_OWNER_OFF) != (ssize_t)sizeof buf) return -EIO;
    memcpy(o, buf, sizeof *o);
    if (o->magic != VP_OWNER_MAGIC || o->version != 1 || owner_csum(o) != o->csum) return -ENOENT;
    o->host[sizeof o->host - 1] = 0;
    return 0;
}

int vpool_peek(const char *path, struct vpool_peek *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path);
    /* O_NONBLOCK: a FIFO named as a member would block the caller (a REST request) until
     * someone writes to it; anything but a file or a block device is refused */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -errno;
    struct stat sb;
    if (fstat(fd, &sb) || !(S_ISREG(sb.st_mode) || S_ISBLK(sb.st_mode))) { close(fd); return -EINVAL; }
    struct vp_label a, b, *l = NULL;
    int ra = vp_read_label(fd, VP_LABEL_A, &a), rb = vp_read_label(fd, VP_LABEL_B, &b);
    if (!ra && (rb || a.gen >= b.gen)) l = &a;
    else if (!rb) l = &b;
    if (l) {
        out->has_label = 1;
        snprintf(out->name, sizeof out->name, "%s", l->name);
        memcpy(out->uuid, l->pool_uuid, 16);
        out->layout = (int)l->layout;
        out->log = l->version >= VP_FMT_LOG;
        out->nmembers = (int)l->nmembers;
        out->member_idx = (int)l->member_idx;
    }
    struct vp_owner o;
    if (owner_read(fd, &o) == 0 && (!l || !memcmp(o.pool_uuid, l->pool_uuid, 16) || o.state == VPOOL_OWNER_DESTROYED)) {
        out->owner_state = (int)o.state;
        out->owner_hostid = o.hostid;
        out->owner_seq = o.seq;
        out->owner_time_ms = o.time_ms;
        out->owner_pid = o.pid;
        snprintf(out->owner_host, sizeof out->owner_host, "%s", o.host);
    }
    close(fd);
    return 0;
}

int vpool_owner_live(const struct vpool_peek *pk)
{
    if (pk->owner_state != VPOOL_OWNER_ACTIVE) return 0;
    /* on this host the member flock is the authority (a live owner holds it; callers take or
     * test it first): an ACTIVE mark here is left by a nasd that was killed, even if its pid
     * has been reused since */
    if (pk->owner_hostid == vpool_hostid()) return 0;
    /* another host: only a changing heartbeat proves it is alive (clocks may differ) */
    for (int i = 0; i < 30; i++) {
        usleep(VPOOL_HEARTBEAT_MS * 100);
        struct vpool_peek again;
        if (vpool_peek(pk->path, &again)) return 0;
        if (again.owner_state != VPOOL_OWNER_ACTIVE) return 0;
        if (again.owner_seq != pk->owner_seq) return 1;
    }
    return 0;
}

int vpool_mark_destroyed(const char *path)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    int rc = vpool_owner_write(fd, NULL, VPOOL_OWNER_DESTROYED, 0, 1);
    close(fd);
    return rc;
}

int vpool_wipe_member_labels(const char *path)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    static const uint8_t z[VP_SECTOR];
    int rc = 0;
    const uint64_t offs[] = { VP_LABEL_A, VP_OWNER_OFF, VP_LABEL_B };
    for (int i = 0; i < 3 && !rc; i++)
        if (pwrite(fd, z, sizeof z, (off_t)offs[i]) != (ssize_t)sizeof z) rc = -errno;
    if (!rc && fdatasync(fd)) rc = -errno;
    close(fd);
    return rc;
}
