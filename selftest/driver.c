/* Block patterns over an asynchronous back end (iSCSI LUN or NFS file): keeps
 * queue_depth requests in flight, measures the timed phase, verifies data.
 *
 * Reads:  [save region] -> write region with headers (seq 1) -> read back + verify
 *         -> timed reads inside the region, each verified -> [restore region]
 * Writes: timed random writes in the area, each with a new sequence number (a
 *         block is never written twice at once) -> flush -> read back every
 *         written block and check it carries its last sequence. */
#define _GNU_SOURCE
#include "selftest/engine.h"
#include "selftest/integrity.h"
#include "util/stats.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_REGION (32ull << 20)
#define WRITE_AREA (64ull << 20)
#define SEQ_UNKNOWN UINT32_MAX   /* the last write of this block failed: content undefined */

struct st_driver {
    struct st_run *r;
    struct st_io *io;
    struct st_slot *slots;
    int nslots, inflight;
    int (*next)(struct st_driver *d, struct st_slot *s);   /* 0 issue s, 1 nothing more */
    void (*done)(struct st_driver *d, struct st_slot *s, int status);
    uint64_t cursor, limit;     /* sequential phases: byte offsets */
    uint64_t done_count;
    double prog_lo, prog_hi;    /* progress span of a sequential phase */
    uint8_t *save;
    uint32_t *seqmap;           /* write pattern: last sequence per block, 0 = never written */
    uint8_t *busy_map;
    uint64_t nblocks, next_seq;
    uint64_t region;
    uint64_t rng;
    int failed;
};

static uint64_t rnd(struct st_driver *d)
{
    d->rng ^= d->rng << 13;
    d->rng ^= d->rng >> 7;
    d->rng ^= d->rng << 17;
    return d->rng;
}

static void fail(struct st_driver *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct st_driver *d, const char *fmt, ...)
{
    if (d->failed) return;
    d->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->r->error, sizeof d->r->error, fmt, ap);
    va_end(ap);
}

void st_slot_done(struct st_slot *s, int status)
{
    struct st_driver *d = s->drv;
    uint64_t lat = nasd_now_ns() - s->t0;
    s->busy = 0;
    d->inflight--;
    if (s->measure) st_measure_op(d->r, lat, s->len, status == 0);
    if (status) st_note_error(d->r, status, d->io->errmsg ? d->io->errmsg(d->io->ctx) : NULL);
    d->done(d, s, status);
}

/* Runs one phase until next() has nothing more (or the deadline passes) and all
 * requests completed. measure: account ops and keep the timeline. */
static int run_phase(struct st_driver *d, uint64_t deadline_ns, int measure, int ignore_cancel)
{
    struct st_io *io = d->io;
    int issuing = 1;
    while (!d->failed) {
        uint64_t now = nasd_now_ns();
        if (deadline_ns && now >= deadline_ns) issuing = 0;
        if (!ignore_cancel && st_cancelled(d->r)) {
            issuing = 0;
            fail(d, "cancelled");
        }
        for (int i = 0; issuing && i < d->nslots && d->inflight < d->nslots; i++) {
            struct st_slot *s = &d->slots[i];
            if (s->busy) continue;
            if (d->next(d, s)) { issuing = 0; break; }
            s->measure = measure;
            s->t0 = nasd_now_ns();
            int rc = io->submit(io->ctx, s);
            if (rc) {
                fail(d, "cannot queue %s at offset %llu: %s", s->write ? "write" : "read",
                     (unsigned long long)s->off, io->errmsg(io->ctx));
                issuing = 0;
                break;
            }
            s->busy = 1;
            d->inflight++;
        }
        if (!d->inflight && !issuing) break;
        if (io->wait(io->ctx, 100) < 0) {
            fail(d, "connection lost: %s", io->errmsg(io->ctx));
            return -1; /* the in-flight requests will never complete */
        }
        if (measure) st_measure_tick(d->r, nasd_now_ns());
    }
    /* drain what is still in flight after a failure so buffers are not in use; the
     * back ends time requests out, and ignore completions after they are closed */
    uint64_t give_up = nasd_now_ns() + 30000000000ull;
    while (d->inflight && nasd_now_ns() < give_up && io->wait(io->ctx, 100) >= 0) {}
    return d->failed ? -1 : 0;
}

static void seq_progress(struct st_driver *d)
{
    if (++d->done_count % 64 == 0 && d->limit)
        st_set_progress(d->r, d->prog_lo + (d->prog_hi - d->prog_lo) * (double)d->cursor / (double)d->limit);
}

/* --- sequential phases over [0, region) --- */

static int next_seq_read(struct st_driver *d, struct st_slot *s)
{
    if (d->cursor >= d->limit) return 1;
    s->write = 0;
    s->off = d->cursor;
    s->len = d->r->io_size;
    d->cursor += s->len;
    return 0;
}

static void done_save(struct st_driver *d, struct st_slot *s, int status)
{
    if (status) fail(d, "saving the test region: read at %llu failed (%s)", (unsigned long long)s->off, strerror(-status));
    else memcpy(d->save + s->off, s->buf, s->len);
    seq_progress(d);
}

static int next_restore(struct st_driver *d, struct st_slot *s)
{
    if (next_seq_read(d, s)) return 1;
    s->write = 1;
    memcpy(s->buf, d->save + s->off, s->len);
    return 0;
}

static void done_restore(struct st_driver *d, struct st_slot *s, int status)
{
    if (status) fail(d, "restoring the test region: write at %llu failed (%s)", (unsigned long long)s->off, strerror(-status));
}

static int next_prep(struct st_driver *d, struct st_slot *s)
{
    if (next_seq_read(d, s)) return 1;
    s->write = 1;
    s->seq = 1;
    st_block_fill(s->buf, s->len, d->r->job_id, s->off, 1);
    return 0;
}

static void done_prep(struct st_driver *d, struct st_slot *s, int status)
{
    if (status) fail(d, "preparing the test region: write at %llu failed (%s)", (unsigned long long)s->off, strerror(-status));
    seq_progress(d);
}

static void check_block(struct st_driver *d, struct st_slot *s, uint64_t seq)
{
    enum st_verify v = st_block_verify(s->buf, s->len, d->r->job_id, s->off, seq);
    d->r->verified++;
    if (v != ST_BLOCK_OK) st_note_bad(d->r, "offset %llu: %s", (unsigned long long)s->off, st_verify_str(v));
}

static void done_verify_region(struct st_driver *d, struct st_slot *s, int status)
{
    if (status) { d->r->errors++; st_note_bad(d->r, "offset %llu: read failed (%s)", (unsigned long long)s->off, strerror(-status)); }
    else check_block(d, s, 1);
    seq_progress(d);
}

/* --- timed reads --- */

static int next_rand_read(struct st_driver *d, struct st_slot *s)
{
    s->write = 0;
    s->len = d->r->io_size;
    s->off = rnd(d) % (d->region / s->len) * s->len;
    return 0;
}

static int next_seq_read_wrap(struct st_driver *d, struct st_slot *s)
{
    if (d->cursor >= d->region) d->cursor = 0;
    s->write = 0;
    s->len = d->r->io_size;
    s->off = d->cursor;
    d->cursor += s->len;
    return 0;
}

static void done_timed_read(struct st_driver *d, struct st_slot *s, int status)
{
    if (!status) check_block(d, s, 1);
}

/* --- timed writes --- */

static int next_rand_write(struct st_driver *d, struct st_slot *s)
{
    uint64_t blk = rnd(d) % d->nblocks;
    while (d->busy_map[blk]) blk = (blk + 1) % d->nblocks; /* nblocks > queue depth, so this ends */
    d->busy_map[blk] = 1;
    s->write = 1;
    s->len = d->r->io_size;
    s->off = blk * s->len;
    s->seq = ++d->next_seq;
    st_block_fill(s->buf, s->len, d->r->job_id, s->off, s->seq);
    return 0;
}

static void done_timed_write(struct st_driver *d, struct st_slot *s, int status)
{
    uint64_t blk = s->off / s->len;
    d->busy_map[blk] = 0;
    d->seqmap[blk] = status ? SEQ_UNKNOWN : (uint32_t)s->seq;
}

static int next_written(struct st_driver *d, struct st_slot *s)
{
    uint64_t blk = d->cursor / d->r->io_size;
    while (blk < d->nblocks && (d->seqmap[blk] == 0 || d->seqmap[blk] == SEQ_UNKNOWN)) blk++;
    d->cursor = blk * d->r->io_size;
    if (blk >= d->nblocks) return 1;
    return next_seq_read(d, s);
}

static void done_verify_written(struct st_driver *d, struct st_slot *s, int status)
{
    if (status) { d->r->errors++; st_note_bad(d->r, "offset %llu: read failed (%s)", (unsigned long long)s->off, strerror(-status)); }
    else check_block(d, s, d->seqmap[s->off / s->len]);
    seq_progress(d);
}

static void phase(struct st_driver *d, int (*next)(struct st_driver *, struct st_slot *),
                  void (*done)(struct st_driver *, struct st_slot *, int), uint64_t limit, double lo, double hi)
{
    d->next = next;
    d->done = done;
    d->cursor = 0;
    d->limit = limit;
    d->done_count = 0;
    d->prog_lo = lo;
    d->prog_hi = hi;
}

static int run_reads(struct st_driver *d)
{
    struct st_run *r = d->r;
    int saved = 0, rc = 0;
    d->region = (d->io->size < READ_REGION ? d->io->size : READ_REGION) / r->io_size * r->io_size;
    if (d->io->preserve && !r->destructive) {
        d->save = malloc(d->region);
        if (!d->save) { fail(d, "out of memory"); return -1; }
        phase(d, next_seq_read, done_save, d->region, 0, 0.03);
        if (run_phase(d, 0, 0, 0)) return -1;
        saved = 1;
    }
    phase(d, next_prep, done_prep, d->region, 0.03, 0.07);
    rc = run_phase(d, 0, 0, 0);
    if (!rc) {
        phase(d, next_seq_read, done_verify_region, d->region, 0.07, 0.1);
        rc = run_phase(d, 0, 0, 0);
    }
    if (!rc) {
        phase(d, r->pattern == ST_512_SEQREAD ? next_seq_read_wrap : next_rand_read, done_timed_read, 0, 0, 0);
        st_measure_start(r);
        rc = run_phase(d, r->run_start_ns + (uint64_t)r->seconds * 1000000000ull, 1, 0);
        st_measure_end(r);
        if (!rc && !r->ops) fail(d, "no read succeeded: %s", d->io->errmsg(d->io->ctx)), rc = -1;
    }
    if (saved && !(d->failed && !strncmp(r->error, "connection lost", 15))) {
        /* put the volume's data back even after a failure or cancel */
        int was_failed = d->failed;
        d->failed = 0;
        phase(d, next_restore, done_restore, d->region, 0.9, 1.0);
        int rrc = run_phase(d, 0, 0, 1);
        if (!rrc && d->io->flush) d->io->flush(d->io->ctx);
        if (was_failed) d->failed = 1;
        if (rrc) rc = -1;
    }
    return rc;
}

static int run_writes(struct st_driver *d)
{
    struct st_run *r = d->r;
    uint64_t area = (d->io->size < WRITE_AREA ? d->io->size : WRITE_AREA) / r->io_size * r->io_size;
    d->nblocks = area / r->io_size;
    if (d->nblocks <= (uint64_t)r->qd) { fail(d, "export too small for queue depth %d", r->qd); return -1; }
    d->seqmap = calloc(d->nblocks, sizeof *d->seqmap);
    d->busy_map = calloc(d->nblocks, 1);
    if (!d->seqmap || !d->busy_map) { fail(d, "out of memory"); return -1; }
    st_set_progress(r, 0.1);
    phase(d, next_rand_write, done_timed_write, 0, 0, 0);
    st_measure_start(r);
    int rc = run_phase(d, r->run_start_ns + (uint64_t)r->seconds * 1000000000ull, 1, 0);
    st_measure_end(r);
    if (!rc && !r->ops) fail(d, "no write succeeded: %s", d->io->errmsg(d->io->ctx)), rc = -1;
    if (rc) return rc;
    if (d->io->flush && (rc = d->io->flush(d->io->ctx))) {
        fail(d, "flush failed: %s", strerror(-rc));
        return -1;
    }
    phase(d, next_written, done_verify_written, area, 0.9, 1.0);
    return run_phase(d, 0, 0, 0);
}

int st_run_blocks(struct st_run *r, struct st_io *io)
{
    r->io_size = r->pattern == ST_512_SEQREAD ? 512 : 4096;
    if (io->granularity > r->io_size || r->io_size % io->granularity) {
        snprintf(r->error, sizeof r->error, "block size %u does not allow %u-byte I/O", io->granularity, r->io_size);
        return -1;
    }
    if (io->size < (uint64_t)r->io_size * 2) {
        snprintf(r->error, sizeof r->error, "export too small (%llu bytes)", (unsigned long long)io->size);
        return -1;
    }
    struct st_driver d = { .r = r, .io = io, .nslots = r->qd };
    d.rng = (uint64_t)r->job_id * 0x9e3779b97f4a7c15ull ^ nasd_now_ns() ^ 1;
    d.slots = calloc(d.nslots, sizeof *d.slots);
    int rc = -1;
    if (!d.slots) { snprintf(r->error, sizeof r->error, "out of memory"); goto out; }
    for (int i = 0; i < d.nslots; i++) {
        d.slots[i].drv = &d;
        d.slots[i].buf = aligned_alloc(4096, 4096);
        if (!d.slots[i].buf) { snprintf(r->error, sizeof r->error, "out of memory"); goto out; }
    }
    rc = r->pattern == ST_4K_RANDWRITE ? run_writes(&d) : run_reads(&d);
out:
    for (int i = 0; d.slots && i < d.nslots; i++) free(d.slots[i].buf);
    free(d.slots);
    free(d.save);
    free(d.seqmap);
    free(d.busy_map);
    return rc;
}
