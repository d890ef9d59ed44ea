#pragma once
/* Pool engine: pools of member disks (files or block devices) laid out as stripe,
 * N-way mirror or raidz1; thin volumes allocated from the pool and served as
 * nasd_bdev. Every 4 KiB sector is checksummed (XXH3), reads verify and repair from
 * redundancy, a background scrub/resilver walks allocated space.
 *
 * Granularity: 64 KiB stripe unit (chunk) per member, 1 MiB allocation units, and
 * one checksum per 4 KiB sector. A 4K random read therefore reads and verifies
 * exactly one sector on one member (no read amplification); a 4K write updates one
 * data sector plus the parity sector at the same offset (raidz1 parity is per 4 KiB
 * row slice, not per 64 KiB chunk).
 *
 * Crash safety: every commit first makes a journal batch durable on 2 members (all for
 * a mirror). Small durable commits (a FUA write, a flush after a few writes), lz4
 * volumes and degraded pools journal the data itself. Everything else journals only
 * the new checksums (intents) and writes the data once, in place; a flush then
 * fdatasyncs the members. After a crash, import keeps for each such sector the old or
 * new checksum its content matches and recomputes the parity of the touched rows.
 * Metadata (volume table, allocation table, checksum table) is checkpointed twice per
 * member with per-page checksums. A kill -9 or power loss never loses an acknowledged
 * flush/FUA write. Limit (the raid5 write hole): intent-written rows have unverified
 * parity between a crash and the next import, so a member lost in that window can
 * cost sectors of those rows (reported as unrepairable checksum errors, never silent).

 * Cache: a RAM cache of 4 KiB sectors (vpool_opts.cache_bytes); clean sectors read
 * from disk are cached on their second miss. Writes without FUA are buffered there
 * (write-back, vpool_opts.dirty_bytes; by default as much as the kernel lets a file's
 * page cache hold dirty, see vm.dirty_ratio) and committed by flush(), FUA, the
 * background flusher (above half of that, or after 5 s), or the writer itself.
 *
 * All functions return 0 or -errno unless stated otherwise; thread-safe. */
#include <stddef.h>
#include <stdint.h>
#include "storage/bdev.h"

enum vpool_layout { VPOOL_STRIPE, VPOOL_MIRROR, VPOOL_RAIDZ1 };
enum vpool_state  { VPOOL_ONLINE, VPOOL_DEGRADED, VPOOL_FAULTED };
enum vpool_member_state {
    VPOOL_M_ONLINE, VPOOL_M_OFFLINE, VPOOL_M_FAULTED, VPOOL_M_MISSING, VPOOL_M_RESILVERING
};

#define VPOOL_MAX_MEMBERS 16
#define VPOOL_VOL_LZ4     1   /* vpool_vol_create flag: compress 64 KiB units with lz4 */
/* vpool_vol_create flag: no reservation. Other volumes are thick: the units they have
 * not written yet stay reserved, so a thin volume (a dataset) gets -ENOSPC rather than
 * take space a thick volume was promised. */
#define VPOOL_VOL_THIN    2

/* Erases what a member held before (the caller's choice, with force); called once the
 * engine has checked everything else, right before its first write to the member. */
typedef int (*vpool_wipe_fn)(const char *path);

struct vpool_member_spec {
    const char *path;
    uint64_t create_size;   /* >0: create a sparse file of that size if missing */
    vpool_wipe_fn wipe;     /* set: an old nasd label does not refuse the member, wipe erases it */
};
struct vpool_opts {
    uint64_t cache_bytes;   /* RAM read cache, 0 = default 64 MiB */
    /* write-back buffer: 0 = the host's dirty page limits (vm.dirty_background_* /
     * vm.dirty_*, of RAM or the cgroup's limit, at most 4 GiB), counted over every pool of
     * the process; else this, the flusher starting at half of it */
    uint64_t dirty_bytes;
    int direct;             /* 1: member I/O with O_DIRECT (bypasses the OS page cache) */
    int log;                /* create, raidz1 only: log-structured (format 3, no read-modify-write) */
};
struct vpool;

/* err/errlen receive a human readable reason on failure (may be NULL). */
int  vpool_create(const char *name, enum vpool_layout layout, const struct vpool_member_spec *m,
                  int n, const struct vpool_opts *o, struct vpool **out, char *err, size_t errlen);
/* Opens a pool from its member paths alone. Missing or unreadable members are
 * tolerated as far as the layout's redundancy allows (pool is then DEGRADED);
 * members that missed writes (older generation) are resilvered automatically. */
int  vpool_import(const char *const *paths, int n, const struct vpool_opts *o, struct vpool **out,
                  char *err, size_t errlen);
/* Flushes everything and checkpoints. Member files are released when the last
 * volume bdev obtained from this pool is put; I/O on such bdevs then fails -ENXIO. */
void vpool_close(struct vpool *p);
int  vpool_destroy(struct vpool *p);        /* -EBUSY while a volume bdev is open; wipes labels, closes */

struct vpool_member_status {
    char path[1024];
    int state;              /* enum vpool_member_state */
    uint64_t size, read_errors, write_errors, checksum_errors;
};
struct vpool_status {
    char name[64];
    uint8_t uuid[16];
    enum vpool_layout layout;
    enum vpool_state state;
    uint64_t size, allocated, free;   /* bytes of volume-usable capacity */
    int log;                          /* log-structured raidz1 (format 3) */
    int nmembers;
    struct vpool_member_status members[16];
    int scrub_running;
    double scrub_progress;            /* 0..1 */
    uint64_t scrub_repaired, scrub_unrepairable, scrub_started, scrub_finished; /* unix time */
    int resilver_running;
    double resilver_progress;
    uint64_t resilver_rows;           /* rows rebuilt by the last (or running) resilver */
    uint64_t resilver_bytes;          /* what they are on each member rebuilt */
    uint64_t repaired, unrepairable;  /* all repairs since open (reads + scrub + resilver) */
    uint64_t dirty, dirty_soft, dirty_max;   /* bytes: written, not committed; write-back limits */
};
int  vpool_get_status(struct vpool *p, struct vpool_status *st);

int  vpool_vol_create(struct vpool *p, const char *name, uint64_t size, int flags);
/* Each call returns a new reference (put it with nasd_bdev_put). block_size 512 or 4096. */
nasd_bdev *vpool_vol_open(struct vpool *p, const char *name, uint32_t block_size, int *err);
int  vpool_vol_destroy(struct vpool *p, const char *name);   /* -EBUSY while a bdev is open */
int  vpool_vol_resize(struct vpool *p, const char *name, uint64_t new_size); /* grow only */
int  vpool_vol_rename(struct vpool *p, const char *from, const char *to);   /* -EEXIST if to is taken */
/* Returns the number of volumes written (at most max). sizes may be NULL. */
/* VPOOL_VOL_* flags the volume was created with, or -ENOENT. */
int  vpool_vol_flags(struct vpool *p, const char *name);
int  vpool_vol_list(struct vpool *p, char names[][64], uint64_t *sizes, int max);

int  vpool_scrub_start(struct vpool *p);     /* background thread; -EBUSY if scrub/resilver runs */
int  vpool_member_offline(struct vpool *p, int idx);
int  vpool_member_online(struct vpool *p, int idx);   /* resilvers what changed while offline */
int  vpool_member_replace(struct vpool *p, int idx, const char *new_path, uint64_t create_size, vpool_wipe_fn wipe);
/* Resets every member's error counters (persisted) and resilvers faulted members that
 * are still present back online. A member is faulted after VP_READ_ERR_LIMIT read
 * errors (a read past its end counts: a shrunken file is not zeros), a failed write or
 * sync, or 64 checksum errors while the pool has redundancy left. */
int  vpool_clear(struct vpool *p);
/* Waits until the background scrub/resilver (if any) finishes. For tests and tools. */
void vpool_wait_background(struct vpool *p);
/* Makes all volumes' buffered writes durable (as flush() on every volume). */
int  vpool_sync(struct vpool *p);

const char *vpool_layout_name(enum vpool_layout l);
/* The names pools are created with (REST, UI, tools): "raidz1" is the log-structured raidz1
 * (format 3, vpool_opts.log), "raidz1-inplace" the in-place one. find: NULL if unknown,
 * else the canonical entry ("raidz1-log", the old name of "raidz1", gives "raidz1"'s). */
struct vpool_layout_spec { const char *name; enum vpool_layout layout; int log; };
const struct vpool_layout_spec *vpool_layout_find(const char *name);
const char *vpool_layout_label(enum vpool_layout l, int log);   /* the canonical name */
const char *vpool_state_name(enum vpool_state s);
const char *vpool_member_state_name(int s);
