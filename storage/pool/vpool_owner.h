#pragma once
/* Who a member disk belongs to, read without opening the pool: its label (pool name,
 * uuid) and the owner sector beside it (host, pid, heartbeat; "destroyed" after a pool
 * destroy). Used to refuse overwriting data and to refuse importing a pool that a live
 * nasd elsewhere still has open (as ZFS's multihost protection does). */
#include <stdint.h>

#define VPOOL_OWNER_NONE      0   /* no owner sector (pool from an older nasd, or never opened) */
#define VPOOL_OWNER_ACTIVE    1   /* open: the owner rewrites the heartbeat every second */
#define VPOOL_OWNER_EXPORTED  2   /* closed cleanly (daemon stopped) */
#define VPOOL_OWNER_DESTROYED 3   /* pool destroyed by nasd: labels wiped, data abandoned */

struct vpool_peek {
    char path[1024];
    int has_label;              /* a valid nasd pool label */
    char name[64];
    uint8_t uuid[16];
    int layout, nmembers, member_idx;
    int log;                    /* format 3: the log-structured raidz1 */
    int owner_state;            /* VPOOL_OWNER_* */
    uint64_t owner_hostid, owner_seq, owner_time_ms;
    uint32_t owner_pid;
    char owner_host[64];
};

/* 0 and *out filled (has_label may be 0), or -errno when the path cannot be read. */
int vpool_peek(const char *path, struct vpool_peek *out);
/* 1 when the owner sector shows a nasd on another host that still has the pool open: its
 * heartbeat advances within three heartbeat intervals (this waits for that). On this host
 * the member flock decides (util/flock.h), so an owner here never counts as live. */
int vpool_owner_live(const struct vpool_peek *pk);
#define VPOOL_HEARTBEAT_MS 1000
/* Writes the owner sector of a member: state, this host and pid, heartbeat seq.
 * durable: fdatasync; else only this sector is written out (heartbeats must not flush
 * the engine's dirty data with it). */
int vpool_owner_write(int fd, const uint8_t uuid[16], int state, uint64_t seq, int durable);
/* After vpool_destroy: marks the member's owner sector "destroyed" (its data is abandoned). */
int vpool_mark_destroyed(const char *path);
/* Zeroes both labels and the owner sector: the member no longer names any pool. */
int vpool_wipe_member_labels(const char *path);
/* This machine's host id (from /etc/machine-id, else gethostid(); NASD_HOSTID overrides it,
 * for tests that play two hosts on one machine). */
uint64_t vpool_hostid(void);
