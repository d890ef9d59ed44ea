/* Self-test engine: block header encode/verify, latency accumulator, and the block
 * driver against an in-memory back end that can lose or corrupt writes. */
#include "tests/unit/check_main.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "selftest/engine.h"
#include "selftest/integrity.h"
#include "selftest/latency.h"

START_TEST(header_roundtrip)
{
    uint8_t b[4096], c[4096];
    st_block_fill(b, sizeof b, 42, 8192, 7);
    ck_assert_int_eq(st_block_verify(b, sizeof b, 42, 8192, 7), ST_BLOCK_OK);
    ck_assert_int_eq(st_block_verify(b, sizeof b, 42, 8192, UINT64_MAX), ST_BLOCK_OK);
    ck_assert_int_eq(st_block_verify(b, sizeof b, 43, 8192, 7), ST_BLOCK_WRONG_JOB);
    ck_assert_int_eq(st_block_verify(b, sizeof b, 42, 4096, 7), ST_BLOCK_WRONG_OFFSET);
    ck_assert_int_eq(st_block_verify(b, sizeof b, 42, 8192, 8), ST_BLOCK_WRONG_SEQ);
    ck_assert_int_eq(st_block_verify(b, 2048, 42, 8192, 7), ST_BLOCK_BAD_LENGTH);
    /* any flipped bit in header or body is caught */
    for (size_t i = 0; i < sizeof b; i += 97) {
        memcpy(c, b, sizeof b);
        c[i] ^= 0x10;
        ck_assert_msg(st_block_verify(c, sizeof c, 42, 8192, 7) != ST_BLOCK_OK, "flip at %zu undetected", i);
    }
    memset(c, 0, sizeof c);
    ck_assert_int_eq(st_block_verify(c, sizeof c, 42, 8192, 7), ST_BLOCK_BAD_MAGIC);
    /* blocks of different offsets/sequences differ in the body too */
    st_block_fill(c, sizeof c, 42, 8192, 8);
    ck_assert(memcmp(b + ST_HDR_SIZE, c + ST_HDR_SIZE, sizeof b - ST_HDR_SIZE) != 0);
    /* 512-byte blocks, little-endian header fields */
    uint8_t s[512];
    st_block_fill(s, sizeof s, 1, 512, 1);
    ck_assert_int_eq(s[0], 'A');
    ck_assert_int_eq(s[16], 0x00);
    ck_assert_int_eq(s[17], 0x02); /* offset 512 */
    ck_assert_int_eq(st_block_verify(s, sizeof s, 1, 512, 1), ST_BLOCK_OK);
}
END_TEST

START_TEST(latency_accumulator)
{
    struct st_lat l;
    st_lat_reset(&l);
    ck_assert(st_lat_quantile_us(&l, 0.5) == 0);
    ck_assert(st_lat_avg_us(&l) == 0);
    /* 1..1000 us uniformly */
    for (int i = 1; i <= 1000; i++) st_lat_add(&l, (uint64_t)i * 1000);
    ck_assert_uint_eq(l.count, 1000);
    ck_assert(fabs(st_lat_avg_us(&l) - 500.5) < 1e-9);
    double p50 = st_lat_quantile_us(&l, 0.5), p99 = st_lat_quantile_us(&l, 0.99);
    ck_assert_msg(fabs(p50 - 500) / 500 < 0.04, "p50 %f", p50);
    ck_assert_msg(fabs(p99 - 990) / 990 < 0.04, "p99 %f", p99);
    ck_assert(st_lat_quantile_us(&l, 1.0) <= 1000.0);
    ck_assert(st_lat_quantile_us(&l, 0.0) >= 1.0);
    /* small values are exact, huge ones do not overflow the buckets */
    st_lat_reset(&l);
    for (int i = 0; i < 10; i++) st_lat_add(&l, 37);
    ck_assert(fabs(st_lat_quantile_us(&l, 0.5) - 0.037) < 1e-9);
    st_lat_add(&l, UINT64_MAX / 2);
    ck_assert(st_lat_quantile_us(&l, 1.0) > 1e12);
}
END_TEST

/* --- in-memory back end: completions are delivered on the next wait() --- */

struct membe {
    uint8_t *disk;
    uint64_t size;
    struct st_slot **pending;
    int npending, cap;
    int drop_every;     /* lose every n-th write (0: never) */
    int corrupt_reads;  /* flip a byte in every read after the timed phase started */
    uint64_t writes, reads;
};

static int mem_submit(void *p, struct st_slot *s)
{
    struct membe *m = p;
    if (s->off + s->len > m->size) return -EINVAL;
    if (m->npending == m->cap) return -EAGAIN;
    m->pending[m->npending++] = s;
    return 0;
}

static int mem_wait(void *p, int timeout_ms)
{
    struct membe *m = p;
    int n = m->npending;
    struct st_slot *done[512];
    memcpy(done, m->pending, n * sizeof *done);
    m->npending = 0;
    for (int i = 0; i < n; i++) {
        struct st_slot *s = done[i];
        if (s->write) {
            m->writes++;
            if (!(m->drop_every && m->writes % m->drop_every == 0)) memcpy(m->disk + s->off, s->buf, s->len);
        } else {
            m->reads++;
            memcpy(s->buf, m->disk + s->off, s->len);
            if (m->corrupt_reads && s->measure) s->buf[100] ^= 1;
        }
        st_slot_done(s, 0);
    }
    return 0;
}

static int mem_flush(void *p) { return 0; }
static const char *mem_err(void *p) { return "mem"; }

struct harness {
    struct membe be;
    struct st_io io;
    struct st_run r;
    pthread_mutex_t lock;
    double progress;
    atomic_int cancel;
};

static void setup(struct harness *h, int pattern, int qd, uint64_t size)
{
    memset(h, 0, sizeof *h);
    h->be.size = size;
    h->be.disk = calloc(1, size);
    h->be.cap = 512;
    h->be.pending = calloc(h->be.cap, sizeof *h->be.pending);
    for (uint64_t i = 0; i < size; i++) h->be.disk[i] = (uint8_t)(i * 31 + 7); /* "user data" */
    h->io = (struct st_io){ .ctx = &h->be, .granularity = 512, .size = size, .preserve = 1, .submit = mem_submit,
                            .wait = mem_wait, .flush = mem_flush, .errmsg = mem_err };
    pthread_mutex_init(&h->lock, NULL);
    h->r = (struct st_run){ .job_id = 99, .pattern = pattern, .seconds = 1, .qd = qd, .cancel = &h->cancel,
                            .lock = &h->lock, .progress = &h->progress, .timeline = json_array() };
}

static void teardown(struct harness *h)
{
    json_decref(h->r.timeline);
    free(h->be.disk);
    free(h->be.pending);
}

START_TEST(driver_reads_verify_and_restore)
{
    struct harness h;
    uint64_t size = 1 << 20;
    setup(&h, ST_4K_RANDREAD, 16, size);
    uint8_t *orig = malloc(size);
    memcpy(orig, h.be.disk, size);
    ck_assert_int_eq(st_run_blocks(&h.r, &h.io), 0);
    ck_assert_uint_gt(h.r.ops, 100);
    ck_assert_uint_eq(h.r.bad, 0);
    ck_assert_uint_ge(h.r.verified, h.r.ops);
    ck_assert_int_ge(json_array_size(h.r.timeline), 1);
    ck_assert(h.progress >= 0.9);
    /* not destructive: the volume's data is back */
    ck_assert(memcmp(orig, h.be.disk, size) == 0);
    teardown(&h);

    /* corrupted reads are counted as bad blocks */
    setup(&h, ST_512_SEQREAD, 4, size);
    h.be.corrupt_reads = 1;
    h.r.destructive = 1;
    ck_assert_int_eq(st_run_blocks(&h.r, &h.io), 0);
    ck_assert_uint_gt(h.r.bad, 0);
    ck_assert_uint_eq(h.r.bad, h.r.ops);
    ck_assert_str_eq(h.r.first_bad + strlen(h.r.first_bad) - strlen("bad checksum"), "bad checksum");
    ck_assert(memcmp(orig, h.be.disk, size) != 0); /* destructive: pattern left in place */
    teardown(&h);
    free(orig);
}
END_TEST

START_TEST(driver_writes_detect_lost_writes)
{
    struct harness h;
    setup(&h, ST_4K_RANDWRITE, 8, 1 << 20);
    ck_assert_int_eq(st_run_blocks(&h.r, &h.io), 0);
    ck_assert_uint_gt(h.r.ops, 100);
    ck_assert_uint_eq(h.r.bad, 0);
    ck_assert_uint_gt(h.r.verified, 0);
    ck_assert_uint_le(h.r.verified, (1 << 20) / 4096);
    teardown(&h);

    /* a lost write leaves the older sequence (or user data) behind */
    setup(&h, ST_4K_RANDWRITE, 8, 1 << 20);
    h.be.drop_every = 10;
    ck_assert_int_eq(st_run_blocks(&h.r, &h.io), 0);
    ck_assert_uint_gt(h.r.bad, 0);
    teardown(&h);

    /* a 4096-byte-block device cannot do 512-byte reads */
    setup(&h, ST_512_SEQREAD, 1, 1 << 20);
    h.io.granularity = 4096;
    ck_assert_int_eq(st_run_blocks(&h.r, &h.io), -1);
    ck_assert_ptr_nonnull(strstr(h.r.error, "block size"));
    teardown(&h);
}
END_TEST

START_TEST(driver_cancel_restores)
{
    struct harness h;
    uint64_t size = 256 << 10;
    setup(&h, ST_4K_RANDREAD, 4, size);
    uint8_t *orig = malloc(size);
    memcpy(orig, h.be.disk, size);
    h.r.seconds = 30;
    atomic_store(&h.cancel, 1);
    ck_assert_int_eq(st_run_blocks(&h.r, &h.io), -1);
    ck_assert_str_eq(h.r.error, "cancelled");
    ck_assert(memcmp(orig, h.be.disk, size) == 0);
    free(orig);
    teardown(&h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("selftest");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, header_roundtrip);
    tcase_add_test(tc, latency_accumulator);
    tcase_add_test(tc, driver_reads_verify_and_restore);
    tcase_add_test(tc, driver_writes_detect_lost_writes);
    tcase_add_test(tc, driver_cancel_restores);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
