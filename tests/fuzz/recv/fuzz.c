/* Fuzz harness: vpool_receive (storage/pool/vpool_send.c) over arbitrary streams, into a
 * small stripe pool in a temp dir. Byte 0 bit 0 set: the harness rewrites every checksum
 * first (and the base guid of incremental streams), so the fuzzer reaches the record
 * checks and the writes behind them. A receive must fail cleanly or succeed; afterwards
 * the target volume is removed / rolled back to its base. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "util/log.h"
#include "storage/pool/vpool_impl.h"
#include "storage/pool/vpool_snap.h"

static struct vpool *pool;
static uint8_t base_uuid[16];

struct src { const uint8_t *b; size_t len, pos; };
static int source(void *ctx, void *buf, size_t len)
{
    struct src *s = ctx;
    if (len > s->len - s->pos) return -EPIPE;
    memcpy(buf, s->b + s->pos, len);
    s->pos += len;
    return 0;
}

static void setup(void)
{
    nasd_log_level = LOG_ERR;
    char dir[] = "/tmp/nasd-fuzz-recv-XXXXXX", path[64], err[256];
    if (!mkdtemp(dir)) abort();
    snprintf(path, sizeof path, "%s/m0", dir);
    struct vpool_member_spec m = { path, 48ull << 20 };
    struct vpool_opts o = { .cache_bytes = 4ull << 20, .dirty_bytes = 2ull << 20 };
    if (vpool_create("fz", VPOOL_STRIPE, &m, 1, &o, &pool, err, sizeof err)) { fprintf(stderr, "%s\n", err); abort(); }
    unlink(path);   /* the open descriptor keeps it */
    rmdir(dir);
    if (vpool_vol_create(pool, "inc", 2ull << 20, VPOOL_VOL_THIN) || vpool_snap_create(pool, "inc", "base")) abort();
    struct vpool_snap_info si;
    if (vpool_snap_info(pool, "inc", "base", &si)) abort();
    memcpy(base_uuid, si.uuid, 16);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!pool) setup();
    if (!size) return 0;
    uint8_t *b = malloc(size);
    memcpy(b, data + 1, size - 1);
    if (data[0] & 1) vp_stream_fix(b, size - 1, base_uuid);
    struct src s = { b, size - 1, 0 };
    char snap[64], err[256];
    bool inc = size > 1 + 96 && data[0] & 2;
    /* as the daemon receives: at most what the pool could reserve (either kind, so that
     * both paths are reached) */
    struct vpool_status st;
    vpool_get_status(pool, &st);
    struct vpool_recv_limit lim = { st.size, -1 };
    int rc = vpool_receive(pool, inc ? "inc" : "dst", 1, &lim, source, &s, snap, err, sizeof err);
    if (!rc && !inc) vpool_vol_destroy(pool, "dst");
    if (!rc && inc) {   /* back to just the base */
        vpool_snap_destroy(pool, "inc", snap);
        vpool_snap_rollback(pool, "inc", "base");
    }
    if (vpool_vol_flags(pool, "dst") >= 0 && vpool_snap_list(pool, "dst", NULL, 0) == 0) abort();   /* failed full receive left a volume */
    free(b);
    return 0;
}
