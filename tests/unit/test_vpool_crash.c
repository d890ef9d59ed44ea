/* Simulated power loss (storage/pool/vpool_sim.c): writers log acknowledged writes, then
 * the "machine dies" at a random moment and every member block written since its
 * last sync randomly keeps its new or its old content. The pool must import, every
 * acknowledged write must be there, and raidz1/mirror must also read everything back
 * with a member missing (parity and copies consistent: no write hole). */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <xxhash.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"
#include "tests/unit/test_vpool_util.h"

#define NSLOT 4096           /* 16 MiB volume of 4 KiB slots */
#define NTHR 2
#define MAGIC 0x4b4c425453455456ull

struct blk { uint64_t magic, slot, seq; uint8_t fill[4096 - 32]; uint64_t csum; };

static uint64_t acked[NSLOT], intent[NSLOT];   /* per slot: last acked write / unmap issued */
static char kind[NSLOT];
static _Atomic uint64_t seqno;
static _Atomic int stop;
static nasd_bdev *vol;
/* 1: most requests are runs of 65..200 writes then a flush, so that commits journal
 * checksums only (intents) and write the data in place once. 2: most are single
 * writes of 48..256 slots (192 KiB..1 MiB), which go in place without the cache
 * (vpool_direct.c), with or without a flush after them. 3: as 2 with 8..16 slots
 * (32..64 KiB: direct on a stripe only). */
static int big_batches;
static int use_log;                      /* format 3 pools (log writes, vpool_xlog.c) */
static uint64_t member_size = MEMBER_SIZE;
static int prefill;                      /* all slots written before the writers start */

static void make_block(struct blk *b, uint64_t slot, uint64_t seq)
{
    b->magic = MAGIC; b->slot = slot; b->seq = seq;
    memset(b->fill, (int)(seq & 0xff), sizeof b->fill);
    b->csum = XXH3_64bits(b, 4096 - 8);
}

static void *writer(void *arg)
{
    int t = (int)(intptr_t)arg;
    uint64_t x = 0x2545F4914F6CDD1Dull * (uint64_t)(t + 1) ^ (uint64_t)time(NULL);
    struct blk *b = aligned_alloc(4096, 256 * sizeof *b);
    while (!atomic_load(&stop)) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint64_t slot = (x >> 16) % (NSLOT / NTHR) * NTHR + t, r = x % 10, slots[256], seqs[256];
        int n = 0, rc = 0;
        if (big_batches >= 2 && r < 8) {   /* one large write into this thread's half */
            int cnt = big_batches == 3 ? 8 + (int)((x >> 40) % 9) : 48 + (int)((x >> 40) % 209);
            uint64_t half = NSLOT / NTHR, first = t * half + (x >> 20) % (half - (uint64_t)cnt);
            for (int i = 0; i < cnt; i++) {
                slots[i] = first + (uint64_t)i;
                seqs[i] = atomic_fetch_add(&seqno, 1);
                make_block(&b[i], slots[i], seqs[i]);
            }
            rc = nasd_bdev_write(vol, b, first * 4096, (size_t)cnt * 4096, (r & 1) ? NASD_IO_FUA : 0);
            if (!rc && !(r & 1) && (x >> 50) % 2) rc = nasd_bdev_flush(vol);
            else if (!rc && !(r & 1)) { for (int i = 0; i < cnt; i++) kind[slots[i]] = kind[slots[i]] ? kind[slots[i]] : 'W'; continue; }
            if (!rc) for (int i = 0; i < cnt; i++) { acked[slots[i]] = seqs[i]; kind[slots[i]] = 'A'; }
            if (rc) break;
            continue;
        }
        if (big_batches >= 2) slot = (slot / NTHR) % (NSLOT / NTHR) + t * (NSLOT / NTHR);   /* own half */
        if (r < 8) {   /* 1..8 writes to consecutive own slots, FUA on the last or a flush */
            int cnt = big_batches ? 65 + (int)((x >> 40) % 136) : 1 + (int)((x >> 40) % 8);
            if (big_batches) r &= ~1u;   /* ends with a flush */
            for (int i = 0; i < cnt && slot + (uint64_t)i * NTHR < NSLOT && !rc; i++, n++) {
                slots[n] = slot + (uint64_t)i * NTHR;
                seqs[n] = atomic_fetch_add(&seqno, 1);
                make_block(&b[n], slots[n], seqs[n]);
                rc = nasd_bdev_write(vol, &b[n], slots[n] * 4096, 4096, (r & 1) && i == cnt - 1 ? NASD_IO_FUA : 0);
            }
            if (!rc && !(r & 1)) rc = nasd_bdev_flush(vol);
            if (!rc && !(r & 1 && n < cnt)) for (int i = 0; i < n; i++) { acked[slots[i]] = seqs[i]; kind[slots[i]] = 'A'; }
            if (!rc && (r & 1) && n < cnt) rc = nasd_bdev_flush(vol);   /* ran past the end: flush anyway */
        } else {
            uint64_t s = atomic_fetch_add(&seqno, 1);
            intent[slot] = s;
            rc = nasd_bdev_unmap(vol, slot * 4096, 4096);
            if (!rc) rc = nasd_bdev_flush(vol);
            if (!rc) { acked[slot] = s; kind[slot] = 'U'; }
        }
        if (rc) break;   /* the machine died */
    }
    free(b);
    return NULL;
}

static char first_bad[160];   /* for the assertion: CI shows only the end of the output */

static int verify(struct vpool *p)
{
    int err, bad = 0;
    first_bad[0] = 0;
    nasd_bdev *v = vpool_vol_open(p, "v", 4096, &err);
    ck_assert_ptr_nonnull(v);
    struct blk b;
    for (uint64_t s = 0; s < NSLOT; s++) {
        if (!kind[s]) continue;
        ck_assert_int_eq(nasd_bdev_read(v, &b, s * 4096, 4096), 0);
        bool zero = is_zero((uint8_t *)&b, 4096);
        const char *why = NULL;
        if (zero) { if (kind[s] == 'A' && intent[s] < acked[s]) why = "acknowledged write lost"; }
        else if (b.magic != MAGIC || b.slot != s || b.csum != XXH3_64bits(&b, 4096 - 8)) why = "torn block";
        else if (b.seq < acked[s]) why = "older than acknowledged";
        if (why && !bad)
            snprintf(first_bad, sizeof first_bad, "slot %llu: %s (kind %c, acked %llu, unmap %llu, found %llu)",
                     (unsigned long long)s, why, kind[s], (unsigned long long)acked[s],
                     (unsigned long long)intent[s], zero ? 0ull : (unsigned long long)b.seq);
        if (why && bad++ < 5)
            fprintf(stderr, "slot %llu: %s (kind %c, acked %llu, unmap %llu, found %llu)\n", (unsigned long long)s, why,
                    kind[s], (unsigned long long)acked[s], (unsigned long long)intent[s], zero ? 0ull : (unsigned long long)b.seq);
    }
    nasd_bdev_put(v);
    return bad;
}

static void power_loss_round(enum vpool_layout l, int n, unsigned seed, int big)
{
    big_batches = big;
    struct tdir t;
    tdir_make(&t, n);
    struct vpool_member_spec ms[4];
    const char *paths[4];
    for (int i = 0; i < n; i++) { ms[i] = (struct vpool_member_spec){ t.member[i], member_size }; paths[i] = t.member[i]; }
    struct vpool_opts o = { .cache_bytes = 8ull << 20, .dirty_bytes = 4ull << 20, .log = use_log };
    struct vpool *p;
    char err[256];
    ck_assert_int_eq(vpool_create("pl", l, ms, n, &o, &p, err, sizeof err), 0);
    ck_assert_int_eq(vpool_vol_create(p, "v", NSLOT * 4096ull, 0), 0);
    struct vp_sim *sim = vp_sim_attach(p);
    int e;
    vol = vpool_vol_open(p, "v", 4096, &e);
    memset(acked, 0, sizeof acked); memset(intent, 0, sizeof intent); memset(kind, 0, sizeof kind);
    atomic_store(&seqno, 1);
    atomic_store(&stop, 0);
    pthread_t th[NTHR];
    if (prefill) {   /* every slot written and flushed: the writers overwrite a full volume */
        struct blk *pb = aligned_alloc(4096, 64 * sizeof *pb);
        for (uint64_t s0 = 0; s0 < NSLOT; s0 += 64) {
            for (int i = 0; i < 64; i++) make_block(&pb[i], s0 + i, 1);
            ck_assert_int_eq(nasd_bdev_write(vol, pb, s0 * 4096, 64 * 4096, 0), 0);
        }
        ck_assert_int_eq(nasd_bdev_flush(vol), 0);
        for (int s1 = 0; s1 < NSLOT; s1++) { acked[s1] = 1; kind[s1] = 'A'; }
        atomic_store(&seqno, 2);
        free(pb);
    }
    for (int i = 0; i < NTHR; i++) pthread_create(&th[i], NULL, writer, (void *)(intptr_t)i);
    usleep(100000 + (seed % 7) * 60000 + (prefill ? 700000 : 0));
    vp_sim_kill(sim);
    struct vp_xl_stats xs;
    vp_xl_stats(p, &xs);   /* the cleaner's work before the crash */
    atomic_store(&stop, 1);
    for (int i = 0; i < NTHR; i++) pthread_join(th[i], NULL);
    nasd_bdev_put(vol);
    vpool_close(p);                                   /* every write now fails: nothing reaches disk */
    uint64_t undone;
    vp_sim_rollback(sim, paths, n, seed * 2654435761u + 1, &undone);
    uint64_t nack = 0;
    for (int s = 0; s < NSLOT; s++) nack += kind[s] != 0;

    err[0] = 0;
    int irc = vpool_import(paths, n, &o, &p, err, sizeof err);
    ck_assert_msg(irc == 0, "import after power loss: %d %s", irc, err);
    int bad = verify(p);
    struct vpool_status st;
    vpool_get_status(p, &st);
    printf("%s%s: %llu slots acknowledged, %llu unsynced blocks undone, %d bad, unrepairable %llu, "
           "segments cleaned %llu\n", vpool_layout_name(l), use_log ? " (log)" : "", (unsigned long long)nack,
           (unsigned long long)undone, bad, (unsigned long long)st.unrepairable, (unsigned long long)xs.cleaned_segs);
    ck_assert_msg(bad == 0, "%d bad, the first %s", bad, first_bad);
    ck_assert_uint_eq(st.unrepairable, 0);
    vpool_close(p);
    if (l != VPOOL_STRIPE) {                          /* redundancy intact: lose a member now */
        const char *less[4];
        for (int i = 1; i < n; i++) less[i - 1] = paths[i];
        ck_assert_int_eq(vpool_import(less, n - 1, &o, &p, err, sizeof err), 0);
        bad = verify(p);
        ck_assert_msg(bad == 0, "a member less: %d bad, the first %s", bad, first_bad);
        vpool_get_status(p, &st);
        ck_assert_uint_eq(st.unrepairable, 0);
        vpool_close(p);
    }
    tdir_remove(&t);
}

static void log_round(unsigned seed, int big, uint64_t msize)
{
    use_log = 1;
    member_size = msize;
    prefill = msize < MEMBER_SIZE;
    power_loss_round(VPOOL_RAIDZ1, 4, seed, big);
    use_log = prefill = 0;
    member_size = MEMBER_SIZE;
}
START_TEST(t_power_loss_log) { log_round((unsigned)_i + 81, 0, MEMBER_SIZE); }
END_TEST
START_TEST(t_power_loss_log_batches) { log_round((unsigned)_i + 91, 1, MEMBER_SIZE); }
END_TEST
/* 16 MiB members: the 16 MiB volume, written in full first, fills 3/4 of the usable
 * space, so the cleaner works all along */
START_TEST(t_power_loss_log_cleaner) { log_round((unsigned)_i + 101, _i % 2, 16ull << 20); }
END_TEST
START_TEST(t_power_loss_raidz1) { power_loss_round(VPOOL_RAIDZ1, 4, (unsigned)_i + 1, 0); }
END_TEST
START_TEST(t_power_loss_mirror) { power_loss_round(VPOOL_MIRROR, 2, (unsigned)_i + 11, 0); }
END_TEST
START_TEST(t_power_loss_stripe) { power_loss_round(VPOOL_STRIPE, 2, (unsigned)_i + 21, 0); }
END_TEST
/* large flushed batches: data written in place once, only checksums journaled */
START_TEST(t_power_loss_raidz1_intents) { power_loss_round(VPOOL_RAIDZ1, 4, (unsigned)_i + 31, 1); }
END_TEST
START_TEST(t_power_loss_mirror_intents) { power_loss_round(VPOOL_MIRROR, 2, (unsigned)_i + 41, 1); }
START_TEST(t_power_loss_raidz1_direct) { power_loss_round(VPOOL_RAIDZ1, 4, (unsigned)_i + 51, 2); }
START_TEST(t_power_loss_stripe_direct) { power_loss_round(VPOOL_STRIPE, 2, (unsigned)_i + 61, 2); }
END_TEST
START_TEST(t_power_loss_stripe_direct_small) { power_loss_round(VPOOL_STRIPE, 2, (unsigned)_i + 71, 3); }
END_TEST

/* A sector rewritten and flushed many times between checkpoints has as many intents
 * in the journal; replay must find the newest (it kept only the oldest 15, and 100
 * acknowledged sectors came back as zeros after 15 flushed rewrites). */
START_TEST(t_many_rewrites)
{
    static const enum vpool_layout ls[] = { VPOOL_RAIDZ1, VPOOL_MIRROR, VPOOL_STRIPE };
    enum vpool_layout l = ls[_i];
    int n = l == VPOOL_RAIDZ1 ? 4 : 2, e;
    struct tdir t;
    tdir_make(&t, n);
    struct vpool_member_spec ms[4];
    const char *paths[4];
    for (int i = 0; i < n; i++) { ms[i] = (struct vpool_member_spec){ t.member[i], MEMBER_SIZE }; paths[i] = t.member[i]; }
    struct vpool_opts o = { .cache_bytes = 8ull << 20, .dirty_bytes = 4ull << 20 };
    struct vpool *p;
    char err[256];
    ck_assert_int_eq(vpool_create("pl", l, ms, n, &o, &p, err, sizeof err), 0);
    ck_assert_int_eq(vpool_vol_create(p, "v", 16ull << 20, 0), 0);
    struct vp_sim *sim = vp_sim_attach(p);
    nasd_bdev *v = vpool_vol_open(p, "v", 4096, &e);
    uint8_t *b = aligned_alloc(4096, 4096);
    enum { ROUNDS = 40, NS = 100 };   /* over VP_SMALL_DURABLE sectors a flush: intents */
    for (int r = 1; r <= ROUNDS; r++) {
        for (int k = 0; k < NS; k++) {
            fill_block(b, k * 4096ull, (uint64_t)r);
            ck_assert_int_eq(nasd_bdev_write(v, b, k * 4096ull, 4096, 0), 0);
        }
        ck_assert_int_eq(nasd_bdev_flush(v), 0);
    }
    vp_sim_kill(sim);   /* everything is synced: nothing for the rollback to undo */
    nasd_bdev_put(v);
    vpool_close(p);
    uint64_t undone;
    vp_sim_rollback(sim, paths, n, VP_SIM_UNDO_ALL, &undone);
    ck_assert_uint_eq(undone, 0);
    ck_assert_int_eq(vpool_import(paths, n, &o, &p, err, sizeof err), 0);
    v = open_vol(p, "v", 4096);
    check_pattern(v, 0, NS * 4096ull, ROUNDS);
    nasd_bdev_put(v);
    vpool_close(p);
    free(b);
    tdir_remove(&t);
}
END_TEST

/* The direct path is taken for large writes (else the _direct rounds above test the
 * cache path twice): no dirty cache entries, sectors listed for the next durable commit,
 * which journals them; a small write still goes through the cache. */
START_TEST(t_direct_taken)
{
    struct tdir t;
    tdir_make(&t, 4);
    struct vpool_member_spec ms[4];
    for (int i = 0; i < 4; i++) ms[i] = (struct vpool_member_spec){ t.member[i], MEMBER_SIZE };
    struct vpool *p;
    char err[256];
    ck_assert_int_eq(vpool_create("dt", VPOOL_RAIDZ1, ms, 4, NULL, &p, err, sizeof err), 0);
    ck_assert_int_eq(vpool_vol_create(p, "v", 16ull << 20, 0), 0);
    int e;
    nasd_bdev *v = vpool_vol_open(p, "v", 4096, &e);
    uint8_t *buf = aligned_alloc(4096, 1 << 20), *back = aligned_alloc(4096, 1 << 20);
    for (size_t i = 0; i < (1 << 20); i++) buf[i] = (uint8_t)(i * 7 + i / 4096);
    ck_assert_int_eq(nasd_bdev_write(v, buf, 3 << 20, 1 << 20, 0), 0);
    ck_assert_uint_eq(vc_dirty_count(p->cache), 0);
    ck_assert_uint_eq(p->dlist_n, 256);
    ck_assert_int_eq(nasd_bdev_read(v, back, 3 << 20, 1 << 20), 0);
    ck_assert(memcmp(buf, back, 1 << 20) == 0);
    ck_assert_int_eq(nasd_bdev_write(v, buf, 0, 4096, 0), 0);
    ck_assert_uint_eq(vc_dirty_count(p->cache), 1);
    ck_assert_int_eq(nasd_bdev_flush(v), 0);
    ck_assert_uint_eq(p->dlist_n, 0);
    nasd_bdev_put(v);
    vpool_close(p);
    const char *paths[4] = { t.member[0], t.member[1], t.member[2], t.member[3] };
    ck_assert_int_eq(vpool_import(paths, 4, NULL, &p, err, sizeof err), 0);
    v = vpool_vol_open(p, "v", 4096, &e);
    ck_assert_int_eq(nasd_bdev_read(v, back, 3 << 20, 1 << 20), 0);
    ck_assert(memcmp(buf, back, 1 << 20) == 0);
    nasd_bdev_put(v);
    vpool_close(p);
    free(buf); free(back);
    tdir_remove(&t);
}
END_TEST

/* On a stripe (no parity) a 32 KiB write goes in place too, one member or several; a
 * 16 KiB one and the same 32 KiB on raidz1 (not most of a row) stay in the cache.
 * Either way a flush then journals the 8 sectors with their data. */
static void small_direct(enum vpool_layout l, int n, size_t len, bool direct)
{
    struct tdir t;
    tdir_make(&t, n);
    struct vpool_member_spec ms[4];
    for (int i = 0; i < n; i++) ms[i] = (struct vpool_member_spec){ t.member[i], MEMBER_SIZE };
    struct vpool *p;
    char err[256];
    ck_assert_int_eq(vpool_create("sd", l, ms, n, NULL, &p, err, sizeof err), 0);
    ck_assert_int_eq(vpool_vol_create(p, "v", 16ull << 20, 0), 0);
    int e;
    nasd_bdev *v = vpool_vol_open(p, "v", 4096, &e);
    uint8_t *buf = aligned_alloc(4096, len), *back = aligned_alloc(4096, len);
    for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)(i * 13 + i / 4096);
    uint64_t off = (5ull << 20) + 3 * 4096;   /* not chunk-aligned */
    ck_assert_int_eq(nasd_bdev_write(v, buf, off, len, 0), 0);
    ck_assert_uint_eq(vc_dirty_count(p->cache), (direct ? 0 : len / 4096));
    ck_assert_uint_eq(p->dlist_n, (direct ? len / 4096 : 0));
    ck_assert_int_eq(nasd_bdev_read(v, back, off, len), 0);
    ck_assert(memcmp(buf, back, len) == 0);
    ck_assert_int_eq(nasd_bdev_flush(v), 0);
    ck_assert_uint_eq(p->dlist_n, 0);
    /* few sectors: their data is journaled (replay rewrites it), no member sync needed */
    ck_assert(p->jbits_any);
    ck_assert_int_eq(atomic_load(&p->unsynced), 0);
    nasd_bdev_put(v);
    vpool_close(p);
    const char *paths[4] = { t.member[0], t.member[1], t.member[2], t.member[3] };
    ck_assert_int_eq(vpool_import(paths, n, NULL, &p, err, sizeof err), 0);
    v = vpool_vol_open(p, "v", 4096, &e);
    memset(back, 0, len);
    ck_assert_int_eq(nasd_bdev_read(v, back, off, len), 0);
    ck_assert(memcmp(buf, back, len) == 0);
    nasd_bdev_put(v);
    vpool_close(p);
    free(buf); free(back);
    tdir_remove(&t);
}

START_TEST(t_direct_small_stripe)
{
    small_direct(VPOOL_STRIPE, 1, 32 << 10, true);
    small_direct(VPOOL_STRIPE, 3, 32 << 10, true);
    small_direct(VPOOL_STRIPE, 1, 16 << 10, false);
    small_direct(VPOOL_RAIDZ1, 4, 32 << 10, false);
}
END_TEST

/* A disk dies under load (all its I/O fails with EIO): the pool must fault it, go
 * DEGRADED, keep serving reads and writes, and come back ONLINE after a replace. */
START_TEST(t_member_dies_online)
{
    struct tdir t;
    tdir_make(&t, 5);
    struct vpool_member_spec ms[4];
    for (int i = 0; i < 4; i++) ms[i] = (struct vpool_member_spec){ t.member[i], MEMBER_SIZE };
    struct vpool *p;
    char err[256];
    struct vpool_opts o = { .cache_bytes = 4ull << 20, .dirty_bytes = 2ull << 20 };   /* small: reads must go to the members */
    ck_assert_int_eq(vpool_create("die", VPOOL_RAIDZ1, ms, 4, &o, &p, err, sizeof err), 0);
    ck_assert_int_eq(vpool_vol_create(p, "v", 16ull << 20, 0), 0);
    struct vp_sim *sim = vp_sim_attach(p);
    nasd_bdev *b = open_vol(p, "v", 4096);
    write_pattern(b, 0, 8ull << 20, 5, 1);
    vp_sim_kill_member(sim, 2);
    check_pattern(b, 0, 8ull << 20, 5);                  /* rebuilt from parity */
    write_pattern(b, 8ull << 20, 8ull << 20, 6, 1);      /* writes keep working */
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_DEGRADED);
    ck_assert_int_eq(st.members[2].state, VPOOL_M_FAULTED);
    ck_assert_uint_gt(st.members[2].write_errors + st.members[2].read_errors, 0);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    const char *none[4] = { NULL, NULL, NULL, NULL };
    uint64_t undone;
    vp_sim_rollback(sim, none, 4, 1, &undone);           /* nothing undone: just frees it */
    /* cold re-import without the dead disk: everything readable */
    const char *paths[] = { t.member[0], t.member[1], t.member[3] };
    ck_assert_int_eq(vpool_import(paths, 3, NULL, &p, err, sizeof err), 0);
    b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 8ull << 20, 5);
    check_pattern(b, 8ull << 20, 8ull << 20, 6);
    ck_assert_int_eq(vpool_member_replace(p, 2, t.member[4], MEMBER_SIZE, NULL), 0);
    vpool_wait_background(p);
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

int main(void)
{
    nasd_log_level = LOG_ERR;   /* the dying pool complains a lot, by design */
    Suite *s = suite_create("vpool_crash");
    TCase *tc = tcase_create("power_loss");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, t_many_rewrites, 0, 3);
    tcase_add_loop_test(tc, t_power_loss_raidz1, 0, 6);
    tcase_add_loop_test(tc, t_power_loss_mirror, 0, 3);
    tcase_add_loop_test(tc, t_power_loss_stripe, 0, 2);
    tcase_add_loop_test(tc, t_power_loss_raidz1_intents, 0, 6);
    tcase_add_loop_test(tc, t_power_loss_mirror_intents, 0, 3);
    tcase_add_loop_test(tc, t_power_loss_raidz1_direct, 0, 8);
    tcase_add_loop_test(tc, t_power_loss_stripe_direct, 0, 3);
    tcase_add_test(tc, t_member_dies_online);
    tcase_add_test(tc, t_direct_taken);
    tcase_add_loop_test(tc, t_power_loss_stripe_direct_small, 0, 3);
    tcase_add_test(tc, t_direct_small_stripe);
    tcase_add_loop_test(tc, t_power_loss_log, 0, 4);
    tcase_add_loop_test(tc, t_power_loss_log_batches, 0, 3);
    tcase_add_loop_test(tc, t_power_loss_log_cleaner, 0, 4);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
