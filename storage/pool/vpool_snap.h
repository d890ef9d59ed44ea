#pragma once
/* Pool engine snapshots, clones, rollback and send/receive streams (public API).
 *
 * A snapshot freezes a volume's unit map in constant time: every allocation unit
 * records the generation it was born in and the one it died in, and a snapshot is
 * just a generation number. A write to a unit a snapshot still holds copies the unit
 * first (1 MiB copy-on-write, taking the part of the write that covers it); deleting a
 * snapshot frees the units only it held. A clone is a writable volume that reads the
 * units of its origin snapshot until it overwrites them; rollback makes the volume's
 * live map the snapshot's map again. Metadata changes go through the journal and
 * checkpoints like every other pool change, so a crash leaves either the old or the
 * new state (units orphaned by a crash in the middle are freed at import).
 *
 * All functions return 0 or -errno; thread-safe. */
#include <stddef.h>
#include <stdint.h>
#include "storage/bdev.h"
#include "storage/pool/vpool.h"

struct vpool_snap_info {
    char name[64];
    uint32_t gen;             /* creation order within the pool */
    uint64_t ctime;           /* unix time */
    uint64_t size;            /* volume size when taken */
    uint64_t used;            /* bytes only this snapshot holds (freed by deleting it) */
    uint64_t referenced;      /* bytes of data it reads */
    uint8_t uuid[16];
    int clones;               /* volumes cloned from it */
};

int  vpool_snap_create(struct vpool *p, const char *vol, const char *snap);
/* -EBUSY while a clone depends on it or a read-only bdev over it is open. */
int  vpool_snap_destroy(struct vpool *p, const char *vol, const char *snap);
/* Oldest first; returns the number of snapshots (may exceed max, only max written). */
int  vpool_snap_list(struct vpool *p, const char *vol, struct vpool_snap_info *out, int max);
int  vpool_snap_info(struct vpool *p, const char *vol, const char *snap, struct vpool_snap_info *out);
/* Volume := snapshot. -ENOTEMPTY if newer snapshots of the volume exist. Open bdevs of
 * the volume see the old data immediately (callers decide whether that is allowed). */
int  vpool_snap_rollback(struct vpool *p, const char *vol, const char *snap);
/* New writable volume clone sharing the snapshot's units. */
int  vpool_snap_clone(struct vpool *p, const char *vol, const char *snap, const char *clone);
/* Read-only bdev over a snapshot (writes fail -EROFS). Put with nasd_bdev_put. */
nasd_bdev *vpool_snap_open(struct vpool *p, const char *vol, const char *snap, uint32_t block_size, int *err);
/* Clone origin of vol: fills ovol/osnap (64 bytes each) and returns 0; -ENOENT if vol is no clone. */
int  vpool_vol_origin(struct vpool *p, const char *vol, char *ovol, char *osnap);

/* ---- send / receive (vpool_send.c) ----
 * Stream: a header, one record per changed 1 MiB unit (index, kind, data), a trailer;
 * every record carries an XXH3-64 of itself and the trailer one of the whole stream.
 * Full stream: every unit the snapshot maps. Incremental (from != NULL): the units
 * whose mapping differs between snapshot from and snap (same volume). */
typedef int (*vpool_sink)(void *ctx, const void *buf, size_t len);      /* 0 or -errno */
typedef int (*vpool_source)(void *ctx, void *buf, size_t len);          /* exactly len, 0 or -errno */
int  vpool_send(struct vpool *p, const char *vol, const char *snap, const char *from, vpool_sink out, void *ctx);
/* What a receive may make of vol; a stream beyond it is refused (-ENOSPC, or -EINVAL for
 * the wrong kind) before anything changes. max_size: largest volume size; thin: 1 only
 * streams of thin volumes (datasets), 0 only thick ones, -1 either. NULL: the engine's
 * own limits (1 PiB: a volume map of 4 GiB). */
struct vpool_recv_limit { uint64_t max_size; int thin; };
/* Applies a stream to volume vol of this pool and creates the sent snapshot on it
 * (same name and uuid). Full stream: vol must not exist (force: an existing volume
 * without snapshots is replaced). Incremental: vol must have the from snapshot (same
 * uuid) as its newest; vol is rolled back to it first. On any error (bad checksum,
 * short stream, I/O) the volume is left as it was before: a new volume is destroyed,
 * an existing one rolled back to the from snapshot. *snap_out gets the snapshot name. */
int  vpool_receive(struct vpool *p, const char *vol, int force, const struct vpool_recv_limit *lim, vpool_source in,
                   void *ctx, char *snap_out, char *err, size_t errlen);
