/* The pool's write-back budget: by default the host's dirty page limits
 * (vm.dirty_background_* / vm.dirty_*, of RAM or the cgroup limit, at most 4 GiB), a set
 * budget is never exceeded, the limits count every pool of the process, dirty data
 * nobody flushes is committed within about 5 s, a FAULTED pool's stuck data neither
 * counts against the others nor is retried every few seconds, sectors kept over the
 * read cache's size are freed while writes go on once all pools hold too many, and the
 * memory of freed sectors goes back to the system. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "storage/pool/vpool_impl.h"   /* vc_dirty_all, vc_entries_all, prof */
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "tests/unit/test_vpool_util.h"

#define MB (1ull << 20)

static struct vpool *pool(struct tdir *t, const char *name, uint64_t cache_bytes, uint64_t dirty_bytes)
{
    tdir_make(t, 3);
    struct vpool_member_spec ms[3];
    for (int i = 0; i < 3; i++) ms[i] = (struct vpool_member_spec){ t->member[i], 128 * MB };
    struct vpool_opts o = { .cache_bytes = cache_bytes, .dirty_bytes = dirty_bytes };
    struct vpool *p;
    char err[256] = "";
    ck_assert_msg(vpool_create(name, VPOOL_RAIDZ1, ms, 3, &o, &p, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(vpool_vol_create(p, "v", 160 * MB, 0), 0);
    return p;
}

/* in 4 KiB writes: larger ones on raidz1 go to the members directly, not the cache */
static void write_4k(nasd_bdev *b, uint64_t off, uint64_t len, uint64_t seed)
{
    uint8_t buf[4096];
    for (uint64_t o = off; o < off + len; o += 4096) {
        fill_block(buf, o, seed);
        ck_assert_int_eq(nasd_bdev_write(b, buf, o, 4096, 0), 0);
    }
}

static uint64_t dirty(struct vpool *p)
{
    struct vpool_status st;
    vpool_get_status(p, &st);
    return st.dirty;
}

static uint64_t vm(const char *knob)
{
    char path[128];
    unsigned long long v = 0;
    snprintf(path, sizeof path, "/proc/sys/vm/%s", knob);
    FILE *f = fopen(path, "r");
    if (f) { if (fscanf(f, "%llu", &v) != 1) v = 0; fclose(f); }
    return v;
}

static uint64_t host(const char *bytes, const char *ratio)
{
    if (vm(bytes)) return vm(bytes);
    uint64_t mem = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    unsigned long long lim;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (f) { if (fscanf(f, "%llu", &lim) == 1 && lim < mem) mem = lim; fclose(f); }
    return mem / 100 * vm(ratio);
}

START_TEST(t_default_is_host)
{
    struct tdir t;
    struct vpool *p = pool(&t, "d", 0, 0);
    struct vpool_status st;
    vpool_get_status(p, &st);
    uint64_t soft = host("dirty_background_bytes", "dirty_background_ratio"), hard = host("dirty_bytes", "dirty_ratio");
    if (hard > (4ull << 30)) hard = 4ull << 30;
    if (soft >= hard) soft = hard / 2;
    printf("write-back: flusher from %llu MiB, writers wait at %llu MiB\n", (unsigned long long)(st.dirty_soft >> 20),
           (unsigned long long)(st.dirty_max >> 20));
    ck_assert_uint_eq(st.dirty_soft / 4096, soft / 4096);
    ck_assert_uint_eq(st.dirty_max / 4096, hard / 4096);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* 4 KiB random writes, never flushed: the dirty data stays within the budget (a
 * writer over it commits before it returns) and everything reads back after import */
START_TEST(t_budget_bound)
{
    struct tdir t;
    struct vpool *p = pool(&t, "b", 0, 8 * MB);
    nasd_bdev *b = open_vol(p, "v", 4096);
    uint64_t x = 3 * 7919 + 1, most = 0;   /* check_pattern_random's sequence for seed 3 */
    uint8_t buf[4096];
    for (int i = 0; i < 12000; i++) {
        uint64_t off = rnd_off(&x, 0, 160 * MB);
        fill_block(buf, off, 3);
        ck_assert_int_eq(nasd_bdev_write(b, buf, off, 4096, 0), 0);
        uint64_t d = dirty(p);
        if (d > most) most = d;
    }
    printf("budget 8 MiB: at most %llu KiB dirty over 12000 writes of 4 KiB\n", (unsigned long long)(most >> 10));
    ck_assert_uint_le(most, 8 * MB + 4096);
    ck_assert_uint_ge(most, 4 * MB);   /* and it was used: the flusher starts at half */
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, 3, -1);
    b = open_vol(p, "v", 4096);
    check_pattern_random(b, 0, 160 * MB, 12000, 3);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* The limits count every pool: a pool under its own soft limit commits once the
 * process's total is over it and it holds a share (16 MiB) of that. */
START_TEST(t_budget_shared)
{
    struct tdir ta, tb;
    struct vpool *a = pool(&ta, "a", 0, 128 * MB), *bp = pool(&tb, "bb", 0, 128 * MB);   /* soft: 64 MiB */
    nasd_bdev *va = open_vol(a, "v", 4096), *vb = open_vol(bp, "v", 4096);
    write_4k(vb, 0, 40 * MB, 5);
    usleep(1500000);
    ck_assert_uint_eq(dirty(bp), 40 * MB);   /* alone: under its soft limit, kept */
    ck_assert_int_eq(nasd_bdev_flush(vb), 0);
    ck_assert_uint_eq(dirty(bp), 0);
    write_4k(va, 0, 40 * MB, 6);
    write_4k(vb, 0, 40 * MB, 7);
    for (int i = 0; i < 40 && dirty(bp) >= 40 * MB; i++) usleep(50000);
    printf("shared budget: a holds %llu MiB, b %llu MiB\n", (unsigned long long)(dirty(a) >> 20),
           (unsigned long long)(dirty(bp) >> 20));
    ck_assert_uint_lt(dirty(bp), 40 * MB);
    ck_assert_uint_eq(dirty(a), 40 * MB);   /* its data is its own writers' business */
    check_pattern(vb, 0, 40 * MB, 7);
    check_pattern(va, 0, 40 * MB, 6);
    nasd_bdev_put(va);
    nasd_bdev_put(vb);
    vpool_close(a);
    vpool_close(bp);
    tdir_remove(&ta);
    tdir_remove(&tb);
}
END_TEST

/* Written and never flushed: committed within about 5 s, not before 3, and then it
 * outlives the process: a child writes, waits for the commit and exits as kill -9
 * would leave it (no close, no flush); the pool imported afterwards has the data. */
START_TEST(t_expire)
{
    struct tdir t;
    tdir_make(&t, 3);
    fflush(stdout);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct tdir c;
        struct vpool *p = pool(&c, "e", 0, 64 * MB);   /* its own directory: copied below */
        nasd_bdev *b = open_vol(p, "v", 4096);
        write_4k(b, 0, 1 * MB, 8);
        double waited = 0;
        bool was_dirty = dirty(p) == 1 * MB;
        while (dirty(p) && waited < 10) { usleep(100000); waited += 0.1; }
        printf("unflushed 1 MiB committed after %.1f s\n", waited);
        fflush(stdout);
        for (int i = 0; i < 3; i++)   /* hand the members to the parent, then die without a close */
            if (rename(c.member[i], t.member[i])) _exit(3);
        rmdir(c.dir);
        /* ticks of 1 s; slow builds (TSan) commit later */
        _exit(!was_dirty ? 4 : dirty(p) ? 5 : waited < 3 || waited > 8.5 ? 6 : 0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
    struct vpool *p = import_pool(&t, 3, -1);
    nasd_bdev *b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 1 * MB, 8);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* every member write fails from now on (ENOSPC): the member files' descriptors now
 * point at /dev/full */
static void fail_members(struct tdir *t, int n)
{
    int full = open("/dev/full", O_WRONLY);
    ck_assert_int_ge(full, 0);
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int hit = 0;
    while ((de = readdir(d))) {
        char lnk[64], tgt[512];
        snprintf(lnk, sizeof lnk, "/proc/self/fd/%s", de->d_name);
        ssize_t l = readlink(lnk, tgt, sizeof tgt - 1);
        if (l <= 0) continue;
        tgt[l] = 0;
        for (int i = 0; i < n; i++)
            if (!strcmp(tgt, t->member[i])) { ck_assert_int_ge(dup2(full, atoi(de->d_name)), 0); hit++; }
    }
    closedir(d);
    close(full);
    ck_assert_int_ge(hit, n);
}

/* A pool whose commits fail (all members gone bad) holds its dirty data: it leaves the
 * process's count within a tick of the pool going FAULTED, and the timer does not
 * retry while it is FAULTED. */
START_TEST(t_faulted)
{
    struct tdir t;
    struct vpool *p = pool(&t, "f", 0, 64 * MB);
    nasd_bdev *b = open_vol(p, "v", 4096);
    write_4k(b, 0, 4 * MB, 9);
    ck_assert_uint_eq(vc_dirty_all(), 4 * MB / 4096);
    fail_members(&t, 3);
    struct vpool_status st;
    double waited = 0;
    for (; waited < 10; waited += 0.1) {   /* the timer's commit fails and faults the members */
        vpool_get_status(p, &st);
        if (st.state == VPOOL_FAULTED && vc_dirty_all() == 0) break;
        usleep(100000);
    }
    printf("faulted after %.1f s, its %llu KiB dirty out of the count\n", waited, (unsigned long long)(st.dirty >> 10));
    ck_assert_int_eq(st.state, VPOOL_FAULTED);
    ck_assert_uint_eq(st.dirty, 4 * MB);
    ck_assert_uint_eq(vc_dirty_all(), 0);
    uint64_t commits = atomic_load(&p->prof.commits);
    usleep(6500000);
    ck_assert_uint_eq(atomic_load(&p->prof.commits), commits);
    nasd_bdev_put(b);
    vpool_close(p);
    ck_assert_uint_eq(vc_dirty_all(), 0);
    tdir_remove(&t);
}
END_TEST

/* Sectors kept over the read cache's size after a commit go once all pools' cached
 * sectors pass the soft limit, even while a writer keeps the pool busy. */
START_TEST(t_kept_bounded)
{
    struct tdir t;
    struct vpool *p = pool(&t, "k", 4 * MB, 32 * MB);   /* soft: 16 MiB */
    nasd_bdev *b = open_vol(p, "v", 4096);
    write_4k(b, 0, 28 * MB, 10);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    uint64_t kept = vc_entries_all();
    ck_assert_uint_ge(kept, 24 * MB / 4096);   /* kept for reuse */
    for (int i = 0; i < 30 && vc_entries_all() > 16 * MB / 4096; i++) {
        write_4k(b, 0, 4096, 11);   /* never idle for a tick */
        usleep(100000);
    }
    printf("kept over the cache: %llu KiB after the flush, %llu KiB while writing on\n",
           (unsigned long long)kept * 4, (unsigned long long)vc_entries_all() * 4);
    ck_assert_uint_le(vc_entries_all(), 16 * MB / 4096);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

static uint64_t rss_bytes(void)
{
    unsigned long long size = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) { if (fscanf(f, "%llu %llu", &size, &res) != 2) res = 0; fclose(f); }
    return res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static nasd_bdev *wr_vol;
static void *writer_64m(void *seed)
{
    write_4k(wr_vol, 0, 64 * MB, (uint64_t)(uintptr_t)seed);
    return NULL;
}

/* Sector buffers come from the cache's own mappings (a worker thread's glibc arena
 * grew by an mprotect per sector): once kept sectors are freed and the pool stays idle
 * (5 ticks), their memory goes back to the system, and buffers taken again read and
 * write correctly. */
START_TEST(t_buffers_returned)
{
    struct tdir t;
    struct vpool *p = pool(&t, "r", 4 * MB, 256 * MB);
    wr_vol = open_vol(p, "v", 4096);
    for (int round = 1; round <= 2; round++) {
        pthread_t th;   /* from a thread, as the daemon's I/O threads write */
        pthread_create(&th, NULL, writer_64m, (void *)(uintptr_t)round);
        pthread_join(th, NULL);
        ck_assert_int_eq(nasd_bdev_flush(wr_vol), 0);
        check_pattern(wr_vol, 0, 64 * MB, (uint64_t)round);
        uint64_t before = rss_bytes(), after = before;
        for (int i = 0; i < 100 && after + 48 * MB > before; i++) {   /* the flusher's idle ticks */
            usleep(100000);
            after = rss_bytes();
        }
        printf("round %d: RSS %llu MiB after the flush, %llu MiB after the idle ticks\n", round,
               (unsigned long long)(before / MB), (unsigned long long)(after / MB));
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)   /* their shadow pages stay */
        ck_assert_msg(after + 48 * MB <= before, "RSS %llu -> %llu", (unsigned long long)before,
                      (unsigned long long)after);
#endif
    }
    check_pattern(wr_vol, 0, 64 * MB, 2);
    nasd_bdev_put(wr_vol);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* Buffers get their pages in runs (populate in vpool_cache.c), new ones and released
 * ones taken again: data reads back, and the count of free buffers with pages stays
 * exact (what the write-back limit weighs), within one run per shard while in use and
 * back to where it was after a release. Another cache keeps the count above zero, so a
 * drift either way shows. */
static void cache_round(struct vp_cache *c, uint64_t n, uint8_t seed)
{
    uint8_t buf[4096], got[4096];
    for (uint64_t k = 0; k < n; k++) { memset(buf, seed + (uint8_t)k, sizeof buf); vc_put_dirty(c, k * 7, buf); }
    for (uint64_t k = 0; k < n; k++) {
        memset(buf, seed + (uint8_t)k, sizeof buf);
        ck_assert(vc_lookup(c, k * 7, got));
        ck_assert(memcmp(buf, got, sizeof buf) == 0);
    }
    struct vp_wsect *w;
    size_t nw = vc_collect_dirty(c, &w);
    ck_assert_uint_eq(nw, n);
    vc_release(c, w, nw, true, false);   /* committed, not kept: every buffer is free again */
    free(w);
}

START_TEST(t_cache_buffers_counted)
{
    const int64_t n = 4096, slack = 256 * 15;   /* shards x a run's untaken rest */
    struct vp_cache *other = vc_new(1u << 20, 1u << 20), *c = vc_new(1u << 20, 1u << 20);
    ck_assert(other && c);
    cache_round(other, 1000, 1);
    vc_trim(other, false);
    int64_t u0 = (int64_t)vc_unreleased_all(), e0 = (int64_t)vc_entries_all();
    ck_assert_int_ge(u0, 500);
    for (int round = 0; round < 2; round++) {   /* new buffers, then released ones again */
        cache_round(c, (uint64_t)n, (uint8_t)(round * 50));
        vc_trim(c, false);   /* clean entries over the cache's size leave: their buffers are free */
        int64_t ec = (int64_t)vc_entries_all() - e0;
        int64_t extra = (int64_t)vc_unreleased_all() - u0 - (n - ec);   /* populated, never taken */
        ck_assert_msg(ec < n && extra >= 0 && extra <= slack, "round %d: %lld entries kept, %lld extra free buffers",
                      round, (long long)ec, (long long)extra);
        vc_trim(c, true);
        ck_assert_int_eq((int64_t)vc_unreleased_all(), u0);
    }
    vc_free(c);
    vc_free(other);
}
END_TEST

/* A reader that missed and read the disk caches what it read only if no newer data can
 * have reached the disk meanwhile: not over a dirty entry, and not after a commit made
 * that entry clean and it was evicted (a cache of 1 MiB: trim evicts every clean entry
 * over it: 16 per shard). Each step with the data a stale insert would leave. */
START_TEST(t_cache_no_stale_insert)
{
    struct vp_cache *c = vc_new(1u << 20, 1u << 20);
    ck_assert(c);
    uint8_t old[4096], neu[4096], got[4096];
    memset(old, 0xaa, sizeof old);
    memset(neu, 0x55, sizeof neu);
    /* a write while the reader reads: its entry wins */
    uint64_t e = vc_epoch(c);
    ck_assert(!vc_lookup(c, 7, got));
    vc_put_dirty(c, 7, neu);
    vc_put_clean(c, 7, old, e);
    ck_assert(vc_lookup(c, 7, got) && memcmp(got, neu, sizeof got) == 0);
    /* the write committed and its entry evicted before the reader inserts */
    for (uint64_t k = 0; k < 16384; k++) vc_put_dirty(c, 1000 + k, neu);   /* 4x the cache's size */
    e = vc_epoch(c);
    ck_assert(!vc_lookup(c, 9, got));
    vc_put_dirty(c, 9, neu);
    struct vp_wsect *w;
    size_t nw = vc_collect_dirty(c, &w);
    ck_assert_uint_eq(nw, 16386);
    vc_release(c, w, nw, true, false);
    free(w);
    vc_trim(c, false);
    vc_put_clean(c, 9, old, e);
    ck_assert_msg(!vc_lookup(c, 9, got) || memcmp(got, old, sizeof got) != 0, "stale disk copy cached");
    /* nothing changed since the miss: cached */
    e = vc_epoch(c);
    ck_assert(!vc_lookup(c, 11, got));
    vc_put_clean(c, 11, old, e);
    ck_assert(vc_lookup(c, 11, got) && memcmp(got, old, sizeof got) == 0);
    vc_free(c);
}
END_TEST

int main(void)
{
    nasd_log_level = LOG_WARN;
    Suite *s = suite_create("vpool_writeback");
    TCase *tc = tcase_create("wb");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t_default_is_host);
    tcase_add_test(tc, t_budget_bound);
    tcase_add_test(tc, t_budget_shared);
    tcase_add_test(tc, t_expire);
    tcase_add_test(tc, t_faulted);
    tcase_add_test(tc, t_kept_bounded);
    tcase_add_test(tc, t_buffers_returned);
    tcase_add_test(tc, t_cache_buffers_counted);
    tcase_add_test(tc, t_cache_no_stale_insert);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
