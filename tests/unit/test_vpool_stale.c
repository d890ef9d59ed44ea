/* Readers under concurrent writers never get a sector older than the version
 * acknowledged before their read began: writers stamp every sector with a rising
 * version, readers check each sector they get against [acknowledged, started].
 * Cases: large direct writes on O_DIRECT members with single-sector readers (whose
 * misses the cache keeps: a stale copy went in after such a write, found by a review
 * of 2026-12-05), multi-chunk reads (vpool_span.c) on raidz1 in place (a direct write
 * dropped the cached older version before its own data was on disk: zeros came back
 * in between) and the log-structured raidz1 with the cleaner at work, and small writes on O_DIRECT
 * members. STALE_ONLY=<case> STALE_SECS=<n> to hunt. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <pthread.h>
#include <stdatomic.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"
#include "tests/unit/test_vpool_util.h"

#define NW 2
#define NR 3
enum mode { DIRECT_WRITES, SPANS, SMALL };
static enum mode mode;
static uint64_t nsect;
static _Atomic uint64_t *acked, *started;
static _Atomic int stop, bad;

/* the shared pattern of (sector, version), headed by both so that a reader can name them */
static void stamp(uint8_t *b, uint64_t s, uint64_t ver)
{
    fill_block(b, s * 4096, ver);
    memcpy(b, &s, 8);
    memcpy(b + 8, &ver, 8);
}

/* 0 if b is sector s at a version in [lo, hi] (never written: zeros while lo is 0) */
static int check(const uint8_t *b, uint64_t s, uint64_t lo, uint64_t hi)
{
    uint64_t h[2];
    memcpy(h, b, sizeof h);
    if (!lo && is_zero(b, 4096)) return 0;
    if (h[0] != s || h[1] < lo || h[1] > hi) return 1;
    uint8_t w[4096];
    stamp(w, s, h[1]);
    return memcmp(w, b, 4096) ? 2 : 0;
}

struct warg { nasd_bdev *b; int id; };
static void *writer(void *arg)
{
    struct warg *a = arg;
    uint64_t x = 1234567 + (uint64_t)a->id, ver = (uint64_t)a->id;
    uint8_t *buf = malloc(1u << 20);
    uint64_t units = nsect / VP_AU_SECT;
    while (!atomic_load(&stop)) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint64_t u = (x >> 5) % units;
        u = u - u % NW + (uint64_t)a->id;   /* each writer its own units: versions rise per sector */
        if (u >= units) continue;
        uint64_t n = mode == DIRECT_WRITES ? 48 + (x >> 40) % 17 : mode == SMALL ? 1 + (x >> 40) % 4
                   : (x >> 30) % 4 == 0 ? 256 : 1 + (x >> 40) % 64;
        uint64_t s0 = u * VP_AU_SECT + (n == 256 ? 0 : (x >> 20) % (257 - n));
        ver += NW;
        for (uint64_t k = 0; k < n; k++) { atomic_store(&started[s0 + k], ver); stamp(buf + k * 4096, s0 + k, ver); }
        int rc = nasd_bdev_write(a->b, buf, s0 * 4096, n * 4096, (x >> 50) % 16 == 0 ? NASD_IO_FUA : 0);
        if (rc) {
            fprintf(stderr, "write of %llu sectors at %llu: %d\n", (unsigned long long)n, (unsigned long long)s0, rc);
            atomic_fetch_add(&bad, 1);
        }
        for (uint64_t k = 0; k < n; k++) atomic_store(&acked[s0 + k], ver);
        if (mode != DIRECT_WRITES && (x >> 44) % 8 == 0) nasd_bdev_flush(a->b);
    }
    free(buf);
    return NULL;
}

static void *reader(void *arg)
{
    nasd_bdev *b = arg;
    uint64_t x = (uintptr_t)arg ^ (uint64_t)pthread_self(), lo[1024];
    uint8_t *buf = malloc(4u << 20);
    while (!atomic_load(&stop)) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        /* DIRECT_WRITES: single sectors of a hot set, missed twice and so cached */
        uint64_t n = mode == DIRECT_WRITES ? 1 : mode == SMALL ? 1 + (x >> 40) % 32 : 1 + (x >> 40) % 1024;
        uint64_t s0 = mode == DIRECT_WRITES ? (x >> 3) % (nsect / VP_AU_SECT) * VP_AU_SECT + (x >> 20) % 64
                                            : (x >> 3) % (nsect - n);
        for (uint64_t k = 0; k < n; k++) lo[k] = atomic_load(&acked[s0 + k]);
        int rc = nasd_bdev_read(b, buf, s0 * 4096, n * 4096);
        if (rc) {
            fprintf(stderr, "read of %llu sectors at %llu: %d\n", (unsigned long long)n, (unsigned long long)s0, rc);
            atomic_fetch_add(&bad, 1);
            continue;
        }
        for (uint64_t k = 0; k < n; k++)
            if (check(buf + k * 4096, s0 + k, lo[k], atomic_load(&started[s0 + k]))) {
                uint64_t h[2];
                memcpy(h, buf + k * 4096, sizeof h);
                if (atomic_load(&bad) < 3)
                    fprintf(stderr, "sector %llu: got version %llu, %llu was acknowledged before the read\n",
                        (unsigned long long)(s0 + k), (unsigned long long)h[1], (unsigned long long)lo[k]);
                atomic_fetch_add(&bad, 1);
                break;
            }
    }
    free(buf);
    return NULL;
}

static void run(int log, int direct, uint64_t vol, uint64_t cache)
{
    nsect = vol / 4096;
    acked = calloc(nsect, sizeof *acked);
    started = calloc(nsect, sizeof *started);
    atomic_store(&stop, 0);
    atomic_store(&bad, 0);
    struct tdir t;
    tdir_make(&t, 4);
    struct vpool_member_spec ms[4];
    for (int i = 0; i < 4; i++) ms[i] = (struct vpool_member_spec){ t.member[i], 48ull << 20 };
    struct vpool_opts o = { .cache_bytes = cache, .dirty_bytes = cache / 2, .log = log, .direct = direct };
    struct vpool *p;
    char err[256];
    ck_assert_msg(vpool_create("st", VPOOL_RAIDZ1, ms, 4, &o, &p, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(vpool_vol_create(p, "v", vol, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    pthread_t w[NW], r[NR];
    struct warg wa[NW];
    for (int i = 0; i < NW; i++) { wa[i] = (struct warg){ b, i }; pthread_create(&w[i], NULL, writer, &wa[i]); }
    for (int i = 0; i < NR; i++) pthread_create(&r[i], NULL, reader, b);
    sleep(getenv("STALE_SECS") ? (unsigned)atoi(getenv("STALE_SECS")) : 2);   /* longer when hunting */
    atomic_store(&stop, 1);
    for (int i = 0; i < NW; i++) pthread_join(w[i], NULL);
    for (int i = 0; i < NR; i++) pthread_join(r[i], NULL);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
    free((void *)acked);
    free((void *)started);
    int nb = atomic_load(&bad);
    ck_assert_msg(nb == 0, "%d reads returned a sector older than acknowledged (or failed)", nb);
}

START_TEST(t_direct_writes) { mode = DIRECT_WRITES; run(0, 1, 64ull << 20, 8ull << 20); }
END_TEST
START_TEST(t_spans_inplace) { mode = SPANS; run(0, 0, 96ull << 20, 8ull << 20); }
END_TEST
START_TEST(t_spans_log) { mode = SPANS; run(1, 0, 96ull << 20, 8ull << 20); }
END_TEST
START_TEST(t_small_direct_log) { mode = SMALL; run(1, 1, 8ull << 20, 4ull << 20); }
END_TEST

int main(void)
{
    nasd_log_level = LOG_ERR;
    Suite *s = suite_create("vpool_stale");
    TCase *tc = tcase_create("stale");
    tcase_set_timeout(tc, 120);
    const char *only = getenv("STALE_ONLY");   /* one case, when hunting */
    if (!only || !strcmp(only, "direct_writes")) tcase_add_test(tc, t_direct_writes);
    if (!only || !strcmp(only, "spans_inplace")) tcase_add_test(tc, t_spans_inplace);
    if (!only || !strcmp(only, "spans_log")) tcase_add_test(tc, t_spans_log);
    if (!only || !strcmp(only, "small_direct_log")) tcase_add_test(tc, t_small_direct_log);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
