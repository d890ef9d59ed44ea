/* Writes or verifies a deterministic pattern on an iSCSI LUN (libiscsi, sync API).
 *   iscsi_pattern write|verify URL SEED SIZE [PER_IO]   (SIZE: MiB, or "<n>b" for n 4 KiB
 *   blocks; PER_IO: 4 KiB blocks per command, 1..64, default 64)
 * Every 4 KiB block holds (seed, lba, counter) words; verify prints the bad blocks.
 * write prints "acked N" (line-buffered) after each batch written with FUA, so a crash
 * test knows which blocks were acknowledged as durable. */
#include <inttypes.h>
#include "selftest/libiscsi.h" /* libiscsi, not nasd's iscsi/iscsi.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(uint8_t *buf, uint64_t seed, uint64_t lba4k)
{
    uint64_t *w = (uint64_t *)buf;
    for (int i = 0; i < 512; i++) w[i] = seed * 0x9E3779B97F4A7C15ull ^ (lba4k << 12 | (uint64_t)i);
}

int main(int argc, char **argv)
{
    int per_io = argc == 6 ? atoi(argv[5]) : 64;
    if (argc < 5 || argc > 6 || (strcmp(argv[1], "write") && strcmp(argv[1], "verify")) || per_io < 1 || per_io > 64) {
        fprintf(stderr, "usage: iscsi_pattern write|verify iscsi://host:port/iqn/lun SEED MIB [PER_IO]\n");
        return 2;
    }
    int writing = !strcmp(argv[1], "write");
    char *unit;
    uint64_t seed = strtoull(argv[3], NULL, 0), blocks = strtoull(argv[4], &unit, 0);
    blocks = *unit == 'b' ? blocks : blocks * 256;
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct iscsi_context *ctx = iscsi_create_context("iqn.2026-12.io.nasd:test-pattern");
    struct iscsi_url *url = iscsi_parse_full_url(ctx, argv[2]);
    if (!url) { fprintf(stderr, "bad url: %s\n", iscsi_get_error(ctx)); return 2; }
    iscsi_set_session_type(ctx, ISCSI_SESSION_NORMAL);
    iscsi_set_header_digest(ctx, ISCSI_HEADER_DIGEST_NONE);
    iscsi_set_noautoreconnect(ctx, 1); /* a crash test wants the error, not a retry loop */
    iscsi_set_timeout(ctx, 10);
    if (iscsi_full_connect_sync(ctx, url->portal, url->lun)) {
        fprintf(stderr, "connect: %s\n", iscsi_get_error(ctx));
        return 1;
    }
    struct scsi_task *t = iscsi_readcapacity16_sync(ctx, url->lun);
    struct scsi_readcapacity16 *rc16 = t && t->status == SCSI_STATUS_GOOD ? scsi_datain_unmarshall(t) : NULL;
    if (!rc16) { fprintf(stderr, "read capacity failed\n"); return 1; }
    uint32_t bs = rc16->block_length;
    if ((rc16->returned_lba + 1) * bs < blocks * 4096) { fprintf(stderr, "LUN too small\n"); return 1; }
    scsi_free_scsi_task(t);
    uint8_t want[64 * 4096];
    uint64_t bad = 0;
    for (uint64_t b = 0; b < blocks; b += (uint64_t)per_io) {
        int n = blocks - b < (uint64_t)per_io ? (int)(blocks - b) : per_io;
        for (int i = 0; i < n; i++) fill(want + i * 4096, seed, b + i);
        uint64_t lba = b * 4096 / bs;
        uint32_t nlb = n * 4096 / bs;
        if (writing) {
            t = iscsi_write16_sync(ctx, url->lun, lba, want, n * 4096, bs, 0, 0, 1 /*FUA*/, 0, 0);
            if (!t || t->status != SCSI_STATUS_GOOD) { fprintf(stderr, "write at %" PRIu64 ": %s\n", lba, iscsi_get_error(ctx)); return 1; }
            printf("acked %" PRIu64 "\n", b + n);
        } else {
            t = iscsi_read16_sync(ctx, url->lun, lba, nlb * bs, bs, 0, 0, 0, 0, 0);
            if (!t || t->status != SCSI_STATUS_GOOD) { fprintf(stderr, "read at %" PRIu64 ": %s\n", lba, iscsi_get_error(ctx)); return 1; }
            for (int i = 0; i < n; i++)
                if (memcmp(t->datain.data + i * 4096, want + i * 4096, 4096)) {
                    if (bad++ < 10) fprintf(stderr, "block %" PRIu64 " differs\n", b + i);
                }
        }
        scsi_free_scsi_task(t);
    }
    iscsi_logout_sync(ctx);
    iscsi_destroy_url(url);
    iscsi_destroy_context(ctx);
    if (bad) { fprintf(stderr, "%" PRIu64 " of %" PRIu64 " blocks bad\n", bad, blocks); return 1; }
    printf("%s %" PRIu64 " blocks ok\n", writing ? "wrote" : "verified", blocks);
    return 0;
}
