/* iSCSI load generator for bench-iscsi (iscsi-perf only reads): libiscsi async READ/WRITE
 * at a fixed queue depth, sequential or random, for a time; prints IOPS, MB/s and latency.
 *   iscsi_wbench [-w] [-r] [-q QD] [-b BYTES] [-t SECS] [-f] iscsi://host:port/iqn/lun
 *   -w write (default read), -r random offsets, -f FUA on every write.
 * Output, one line: "iops N mbps N p50_us N p99_us N errors N". */
#define _GNU_SOURCE
#include "selftest/libiscsi.h" /* libiscsi, not nasd's iscsi/iscsi.h */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LAT_BUCKETS 200000 /* 1 us each; anything slower lands in the last */

struct req { struct bench *b; uint64_t start_ns; uint8_t *buf; };
struct bench {
    struct iscsi_context *iscsi;
    int lun, write, random, fua;
    uint32_t block;
    uint64_t nblocks, io_blocks, next_lba, done, errors, end_ns, inflight;
    uint32_t *lat;
    uint64_t rng;
};

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t next_lba(struct bench *b)
{
    uint64_t slots = b->nblocks / b->io_blocks;
    uint64_t slot;
    if (b->random) {
        b->rng ^= b->rng << 13; b->rng ^= b->rng >> 7; b->rng ^= b->rng << 17;
        slot = b->rng % slots;
    } else {
        slot = b->next_lba++ % slots;
    }
    return slot * b->io_blocks;
}

static int submit(struct bench *b, struct req *q);

static void io_cb(struct iscsi_context *iscsi, int status, void *command_data, void *private_data)
{
    struct req *q = private_data;
    struct bench *b = q->b;
    if (command_data) scsi_free_scsi_task(command_data);
    b->inflight--;
    if (status != SCSI_STATUS_GOOD) b->errors++;
    uint64_t t = now_ns();
    uint64_t us = (t - q->start_ns) / 1000;
    b->lat[us < LAT_BUCKETS ? us : LAT_BUCKETS - 1]++;
    b->done++;
    if (t < b->end_ns && submit(b, q) == 0) return;
}

static int submit(struct bench *b, struct req *q)
{
    uint64_t lba = next_lba(b);
    size_t len = b->io_blocks * b->block;
    q->start_ns = now_ns();
    struct scsi_task *t = b->write
        ? iscsi_write16_task(b->iscsi, b->lun, lba, q->buf, len, b->block, 0, 0, b->fua, 0, 0, io_cb, q)
        : iscsi_read16_task(b->iscsi, b->lun, lba, len, b->block, 0, 0, 0, 0, 0, io_cb, q);
    if (!t) return -1;
    b->inflight++;
    return 0;
}

static uint64_t percentile(const uint32_t *lat, uint64_t total, double p)
{
    uint64_t want = (uint64_t)(total * p), seen = 0;
    for (uint64_t i = 0; i < LAT_BUCKETS; i++) {
        seen += lat[i];
        if (seen > want) return i;
    }
    return LAT_BUCKETS;
}

int main(int argc, char **argv)
{
    struct bench b = { .rng = 0x9E3779B97F4A7C15ull };
    int qd = 32, secs = 10, o;
    uint64_t bytes = 4096;
    while ((o = getopt(argc, argv, "wrfq:b:t:")) != -1) {
        switch (o) {
        case 'w': b.write = 1; break;
        case 'r': b.random = 1; break;
        case 'f': b.fua = 1; break;
        case 'q': qd = atoi(optarg); break;
        case 'b': bytes = strtoull(optarg, NULL, 0); break;
        case 't': secs = atoi(optarg); break;
        default: goto usage;
        }
    }
    if (optind != argc - 1 || qd < 1 || qd > 1024 || secs < 1 || !bytes) {
usage:
        fprintf(stderr, "usage: iscsi_wbench [-w] [-r] [-f] [-q QD] [-b BYTES] [-t SECS] iscsi://host:port/iqn/lun\n");
        return 2;
    }
    b.iscsi = iscsi_create_context("iqn.2026-12.io.nasd:bench");
    struct iscsi_url *url = iscsi_parse_full_url(b.iscsi, argv[optind]);
    if (!url) { fprintf(stderr, "bad URL: %s\n", iscsi_get_error(b.iscsi)); return 1; }
    iscsi_set_targetname(b.iscsi, url->target);
    iscsi_set_session_type(b.iscsi, ISCSI_SESSION_NORMAL);
    iscsi_set_header_digest(b.iscsi, ISCSI_HEADER_DIGEST_NONE);
    if (iscsi_full_connect_sync(b.iscsi, url->portal, url->lun)) {
        fprintf(stderr, "login failed: %s\n", iscsi_get_error(b.iscsi));
        return 1;
    }
    b.lun = url->lun;
    struct scsi_task *t = iscsi_readcapacity16_sync(b.iscsi, b.lun);
    struct scsi_readcapacity16 *rc16 = t && t->status == SCSI_STATUS_GOOD ? scsi_datain_unmarshall(t) : NULL;
    if (!rc16 || !rc16->block_length) { fprintf(stderr, "READ CAPACITY(16) failed\n"); return 1; }
    b.block = rc16->block_length;
    b.nblocks = rc16->returned_lba + 1;
    scsi_free_scsi_task(t);
    if (bytes % b.block) { fprintf(stderr, "-b must be a multiple of the %u byte block\n", b.block); return 1; }
    b.io_blocks = bytes / b.block;
    if (b.io_blocks > b.nblocks) { fprintf(stderr, "-b exceeds the LUN\n"); return 1; }
    b.lat = calloc(LAT_BUCKETS, sizeof *b.lat);
    struct req *reqs = calloc((size_t)qd, sizeof *reqs);
    if (!b.lat || !reqs) return 1;
    uint64_t start = now_ns();
    b.end_ns = start + (uint64_t)secs * 1000000000ull;
    for (int i = 0; i < qd; i++) {
        reqs[i].b = &b;
        reqs[i].buf = malloc(bytes);
        if (!reqs[i].buf) return 1;
        for (uint64_t j = 0; j < bytes; j++) reqs[i].buf[j] = (uint8_t)(j * 131 + i * 7 + 1);
        if (submit(&b, &reqs[i])) { fprintf(stderr, "submit: %s\n", iscsi_get_error(b.iscsi)); return 1; }
    }
    while (b.inflight) {
        struct pollfd pfd = { .fd = iscsi_get_fd(b.iscsi), .events = iscsi_which_events(b.iscsi) };
        if (poll(&pfd, 1, 1000) < 0 && errno != EINTR) break;
        if (iscsi_service(b.iscsi, pfd.revents) < 0) { fprintf(stderr, "%s\n", iscsi_get_error(b.iscsi)); return 1; }
    }
    double el = (double)(now_ns() - start) / 1e9;
    printf("iops %.0f mbps %.1f p50_us %" PRIu64 " p99_us %" PRIu64 " errors %" PRIu64 "\n",
           b.done / el, b.done * (double)bytes / el / 1e6, percentile(b.lat, b.done, 0.5),
           percentile(b.lat, b.done, 0.99), b.errors);
    iscsi_logout_sync(b.iscsi);
    iscsi_destroy_context(b.iscsi);
    return b.errors ? 1 : 0;
}
