/* vpool_bench: throughput of raidz1 pools of 4 member files (raidz1: log-structured;
 * raidz1-inplace) vs the same 4 files used raw (striped, 64 KiB chunks, pread/pwrite),
 * twice: through the OS page cache, and with O_DIRECT members (raw files opened O_DIRECT
 * too) where the disk is the limit.
 * The pool adds checksums, parity, journal and its own RAM cache.
 *   vpool_bench [-d DIR] [-s MEMBER_MiB] [-t SECONDS] [-j THREADS] [-w WORKSET_MiB]
 *               [-T TESTMASK] [-D 0|1|2] [-S 0|1] [-B MiB] [-b MiB] [-W 0|1] [-v] [-P]
 * Sequential: 1 MiB requests; random: 4 KiB requests over the working set, THREADS
 * synchronous threads (queue depth = THREADS). Writes end with a flush / fdatasync,
 * included in the timing. "sync write 4K QD1": one thread, every 4 KiB random write
 * durable before the next (pool: FUA; raw: pwrite + fdatasync), mean latency.
 * The read tests take turns between the pool and raw reads (striped as above) of the
 * pool's own member files, and a read's ratio is against raw's turns.
 * -D: 0 page cache only, 1 O_DIRECT only, 2 both (default). -S 1 (default): page cache
 * rows again with 1 and with 32 snapshots of the filled volume present (every unit
 * shared, so the first write to each copies it). -v: commit profile. -W 0: member files
 * start sparse instead of written whole (prewrite(); -W 1 needs 4 x the member size of
 * disk space, twice that for the snapshot sets).
 * Write-back: the page-cache sets give the pool the engine's default budget (the host's
 * dirty page limits, as raw's writes get in the page cache) unless -B; the O_DIRECT set
 * one of -b MiB (default 32, the engine's before it followed the host: a 32nd of the
 * working set, so that there the disks are the limit, not RAM).
 * -C (make bench-vpool-snap): only what snapshots cost, see snap_cost_of(); 4 threads
 * unless -j, members of 1 GiB unless -s, working set at most a quarter of a member. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"   /* vp_debug_prof for -v */
#include "storage/pool/vpool_snap.h"

#define NM 4
#define CHUNK (64u << 10)

static char dir[512] = "/tmp";
static uint64_t member_mb = 512, workset_mb = 1024;
static double secs = 3;
static int nthreads = 8, pool_only;
static unsigned test_mask = 0x1f;
static int direct_sets = 2;
static int prewrite_files = 1;   /* -W 0: member files start sparse (prewrite()) */
static int snap_rows = 1;   /* -S 0: skip the rows with snapshots present */
static int log_rows = 1;    /* -L 0: skip the raidz1 column (log-structured, format 3), -L 2: only it */
static int verbose;
static uint64_t dirty_mb, direct_dirty_mb = 32;   /* pool write-back budgets, 0 = engine default */
static struct vpool *cur_pool;   /* -v: commit profile per test */
static struct vp_prof prof_last; /* -v: the counters after the previous test of cur_pool */
static int nsnaps;              /* snapshots taken after the fill */
static uint64_t seed;           /* -C: mixed into the random offsets, from the clock per run */

struct target {
    int fds[NM];          /* raw */
    const uint8_t *maps[NM];   /* raw read through mappings of the files (maps[0] set), as the pool's small reads */
    nasd_bdev *b;         /* pool */
};
static struct target tg;
/* Reads of the pool alternate with raw reads of its member files (ALT_SLICES turns each):
 * the development VM's throughput drifts by 15 % and more between runs a minute apart, so
 * a raw figure measured before the pool's fill compared noise as much as code. */
#define ALT_SLICES 6
static struct target alt_raw = { .fds = { -1, -1, -1, -1 } };   /* fds >= 0: the members, read raw */
#define NTESTS 5
struct result { double mbs[NTESTS], iops[NTESTS]; };
static struct result alt_res;   /* raw's turns: seq read [1], rand read [3] */
/* page cache sets: a third turn reads raw through read-only mappings of the files (the
 * pool copies small reads out of such mappings: this shows what that alone gives) */
static struct target alt_map = { .fds = { -1, -1, -1, -1 } };
static struct result alt_map_res;
static uint64_t span;     /* bytes addressed by the test */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int sync_mode;    /* 1: every write durable before returning (FUA / fdatasync) */

static int raw_io(int wr, void *buf, uint64_t off, size_t len)
{
    while (len) {
        uint64_t chunk = off / CHUNK, in = off % CHUNK;
        size_t n = CHUNK - in < len ? CHUNK - in : len;
        int fd = tg.fds[chunk % NM];
        off_t o = (off_t)((chunk / NM) * CHUNK + in);
        ssize_t r = n;
        if (!wr && tg.maps[0]) memcpy(buf, tg.maps[chunk % NM] + o, n);
        else r = wr ? pwrite(fd, buf, n, o) : pread(fd, buf, n, o);
        if (r != (ssize_t)n) return -EIO;
        if (wr && sync_mode && fdatasync(fd)) return -EIO;
        buf = (char *)buf + n; off += n; len -= n;
    }
    return 0;
}

static int do_io(int wr, void *buf, uint64_t off, size_t len)
{
    if (!tg.b) return raw_io(wr, buf, off, len);
    return wr ? nasd_bdev_write(tg.b, buf, off, len, sync_mode ? NASD_IO_FUA : 0) : nasd_bdev_read(tg.b, buf, off, len);
}

static int do_flush(void)
{
    if (tg.b) return nasd_bdev_flush(tg.b);
    for (int i = 0; i < NM; i++) if (fdatasync(tg.fds[i])) return -errno;
    return 0;
}

struct job { int wr, rnd, id; size_t bs; _Atomic uint64_t *next; uint64_t ops; int err; };
static volatile int stop_flag;

static void *worker(void *arg)
{
    struct job *j = arg;
    uint8_t *buf;
    if (posix_memalign((void **)&buf, 4096, j->bs)) { j->err = -ENOMEM; return NULL; }
    for (size_t i = 0; i < j->bs; i++) buf[i] = (uint8_t)(i * 31 + j->id);
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(j->id + 1) ^ seed;
    if (!x) x = 1;   /* xorshift stays at 0 */
    while (!stop_flag) {
        uint64_t off;
        if (j->rnd) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; off = (x % (span / j->bs)) * j->bs; }
        else {
            off = atomic_fetch_add(j->next, j->bs);
            if (off + j->bs > span) { atomic_store(j->next, 0); continue; }
        }
        if (j->wr) memcpy(buf, &x, sizeof x);   /* not a constant pattern */
        int rc = do_io(j->wr, buf, off, j->bs);
        if (rc) { j->err = rc; break; }
        j->ops++;
    }
    free(buf);
    return NULL;
}

/* -v: the host's dirty page cache in MB (what a final fdatasync may have to write) */
static double host_dirty_mb(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Dirty: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb / 1024;
}

/* -v: minor page faults of the process so far (fresh memory costs 10 us a page on some VMs) */
static long minflt(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? 0 : ru.ru_minflt;
}

/* The workers on tg for dur seconds; requests done. Sequential streams go on at *next. */
static uint64_t workers(int wr, int rnd, size_t bs, double dur, _Atomic uint64_t *next)
{
    pthread_t th[64];
    struct job jobs[64];
    int nt = rnd ? nthreads : 1;   /* sequential: one stream */
    stop_flag = 0;
    for (int i = 0; i < nt; i++) {
        jobs[i] = (struct job){ .wr = wr, .rnd = rnd, .id = i, .bs = bs, .next = next };
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    usleep((useconds_t)(dur * 1e6));
    stop_flag = 1;
    uint64_t ops = 0;
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        ops += jobs[i].ops;
        if (jobs[i].err) { fprintf(stderr, "I/O error %d\n", jobs[i].err); exit(1); }
    }
    return ops;
}

/* Reads: ALT_SLICES turns of raw (alt_raw) then the pool (tg), secs in all as for the other
 * tests (a longer pause in the pool's writes would let it return its cache's memory before
 * the random writes that follow), other random offsets each turn; the pool's figures
 * returned, raw's in alt_res (at the test's index). */
static double run_alternating(int rnd, size_t bs, double *iops)
{
    struct target pool = tg;
    _Atomic uint64_t next[3] = { 0, 0, 0 };
    uint64_t ops[3] = { 0, 0, 0 }, seed0 = seed;
    double el[3] = { 0, 0, 0 };
    int nw = rnd && alt_map.maps[0] ? 3 : 2;   /* only rand read shows it */
    for (int turn = 0; turn < ALT_SLICES; turn++)
        for (int w = 0; w < nw; w++) {
            tg = w == 1 ? pool : w ? alt_map : alt_raw;
            seed = seed0 ^ (uint64_t)turn * 0xD1B54A32D192ED03ull;
            double t0 = now();
            ops[w] += workers(0, rnd, bs, secs / (2 * ALT_SLICES), &next[w]);
            el[w] += now() - t0;
        }
    tg = pool;
    seed = seed0;
    alt_res.iops[1 + 2 * rnd] = ops[0] / el[0];
    alt_res.mbs[1 + 2 * rnd] = ops[0] * (double)bs / el[0] / 1e6;
    if (nw == 3) {
        alt_map_res.iops[1 + 2 * rnd] = ops[2] / el[2];
        alt_map_res.mbs[1 + 2 * rnd] = ops[2] * (double)bs / el[2] / 1e6;
    }
    *iops = ops[1] / el[1];
    return ops[1] * (double)bs / el[1] / 1e6;
}

/* returns MB/s; *iops out */
static double run(int wr, int rnd, size_t bs, double *iops)
{
    if (!wr && tg.b && alt_raw.fds[0] >= 0) return run_alternating(rnd, bs, iops);
    _Atomic uint64_t next = 0;
    long flt0 = minflt();
    double t0 = now();
    uint64_t ops = workers(wr, rnd, bs, secs, &next);
    double tf = now(), dirty0 = verbose && wr ? host_dirty_mb() : 0;
    struct vp_prof f0 = {0}, f1 = {0};
    if (verbose && cur_pool) vp_debug_prof(cur_pool, &f0);
    if (wr && do_flush()) { fprintf(stderr, "flush failed\n"); exit(1); }
    double el = now() - t0;
    if (verbose && cur_pool) vp_debug_prof(cur_pool, &f1);
    if (verbose && wr) printf("  [%s %s %s %zu: final flush %.0f ms of %.2f s (apply %.0f ms, sync %.0f ms, member writes "
                              "%.0f MB); host dirty %.0f MB before it, %.0f after; %ld page faults]\n",
                              cur_pool ? "pool" : "raw", wr ? "write" : "read", rnd ? "rand" : "seq", bs,
                              (now() - tf) * 1e3, el, (f1.apply_ns - f0.apply_ns) / 1e6, (f1.sync_ns - f0.sync_ns) / 1e6,
                              (f1.inplace_bytes - f0.inplace_bytes) / 1e6, dirty0, host_dirty_mb(), minflt() - flt0);
    if (verbose && cur_pool) {
        struct vp_prof pr, last = prof_last;
        vp_debug_prof(cur_pool, &pr);
        printf("  [%s %s %zu: %.2fs, %llu commits, journal %.0f ms / %.1f MB (data %.1f MB), apply %.0f ms, sync %.0f ms, "
               "member writes %.1f MB (metadata %.1f MB), requests %.1f MB; %llu checkpoints, %.0f ms]\n",
               wr ? "write" : "read", rnd ? "rand" : "seq", bs, el,
               (unsigned long long)(pr.commits - last.commits), (pr.jnl_ns - last.jnl_ns) / 1e6,
               (pr.jnl_bytes - last.jnl_bytes) / 1e6, (pr.jnl_data_bytes - last.jnl_data_bytes) / 1e6,
               (pr.apply_ns - last.apply_ns) / 1e6, (pr.sync_ns - last.sync_ns) / 1e6,
               (pr.inplace_bytes - last.inplace_bytes) / 1e6, (pr.meta_bytes - last.meta_bytes) / 1e6,
               ops * (double)bs / 1e6, (unsigned long long)(pr.checkpoints - last.checkpoints),
               (pr.ckpt_ns - last.ckpt_ns) / 1e6);
        prof_last = pr;
    }
    *iops = ops / el;
    return ops * (double)bs / el / 1e6;
}

static const char *names[NTESTS] = { "seq write 1M", "seq read 1M", "rand write 4K", "rand read 4K", "sync write 4K QD1" };

static void run_all(struct result *r)
{
    /* fill the working set first so reads are of real data */
    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, 1 << 20)) exit(1);   /* O_DIRECT needs aligned buffers */
    memset(buf, 0x5a, 1 << 20);
    for (uint64_t off = 0; off < span; off += 1 << 20)
        if (do_io(1, buf, off, 1 << 20)) { fprintf(stderr, "fill failed\n"); exit(1); }
    do_flush();
    free(buf);
    for (int i = 0; i < nsnaps; i++) {   /* they all hold the filled data: the first write to a unit copies it */
        char nm[32];
        snprintf(nm, sizeof nm, "s%d", i);
        if (vpool_snap_create(cur_pool, "v", nm)) { fprintf(stderr, "snapshot %s failed\n", nm); exit(1); }
    }
    if (verbose && cur_pool) vp_debug_prof(cur_pool, &prof_last);   /* -v: the tests' own counters */
    memset(r, 0, sizeof *r);
    if (test_mask & 1) r->mbs[0] = run(1, 0, 1 << 20, &r->iops[0]);
    if (test_mask & 2) r->mbs[1] = run(0, 0, 1 << 20, &r->iops[1]);
    if (test_mask & 4) r->mbs[2] = run(1, 1, 4096, &r->iops[2]);
    if (test_mask & 8) r->mbs[3] = run(0, 1, 4096, &r->iops[3]);
    if (test_mask & 16) {
        int saved = nthreads;
        nthreads = 1;
        sync_mode = 1;
        r->mbs[4] = run(1, 1, 4096, &r->iops[4]);
        sync_mode = 0;
        nthreads = saved;
    }
}

/* Creates the member files for a set, of size bytes, and (unless -W 0) writes them whole
 * in 64 KiB writes, the chunk of both layouts, then syncs them: raw and the pool start
 * with every page of their files written and resident, so that neither pays for new
 * page-cache pages during a test (the log's writes spread over the whole members, raw's
 * land where its fill wrote). O_DIRECT sets: dropped from the page cache after the sync.
 * The README's bench-vpool section has the measurements behind it. Exits on failure. */
static void prewrite(char paths[][600], uint64_t size, int direct)
{
    uint8_t *buf = calloc(1, CHUNK);
    if (!buf) exit(1);
    for (int i = 0; i < NM; i++) {
        unlink(paths[i]);
        int fd = open(paths[i], O_RDWR | O_CREAT, 0600), e = 0;
        const char *what = "open";
        for (uint64_t o = 0; fd >= 0 && o < size && prewrite_files && !e; o += CHUNK) {
            ssize_t w = pwrite(fd, buf, CHUNK, (off_t)o);
            if (w != (ssize_t)CHUNK) { e = w < 0 ? errno : ENOSPC; what = "write"; }
        }
        if (fd < 0) e = errno;
        else if (!e && ftruncate(fd, (off_t)size)) { e = errno; what = "truncate"; }
        else if (!e && prewrite_files && fdatasync(fd)) { e = errno; what = "sync"; }
        else if (!e && direct) { e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); what = "fadvise"; }
        if (fd >= 0) close(fd);
        if (e) {
            fprintf(stderr, "member file %s: %s: %s\n", paths[i], what, strerror(e));
            for (int k = 0; k <= i; k++) unlink(paths[k]);
            exit(1);
        }
    }
    free(buf);
}

/* Opens the NM member files with flags into fds; 1 on failure (reported). */
static int open_members(char paths[][600], int flags, int *fds)
{
    for (int i = 0; i < NM; i++)
        if ((fds[i] = open(paths[i], flags)) < 0) { perror(paths[i]); return 1; }
    return 0;
}

static void member(char *out, size_t len, int i) { snprintf(out, len, "%s/vpool-bench-m%d", dir, i); }

/* alt_map: the member files (already open in alt_raw) mapped read-only, as the pool maps
 * its members for small reads */
static void map_members(uint64_t len)
{
    for (int i = 0; i < NM; i++) {
        void *a = mmap(NULL, len, PROT_READ, MAP_SHARED, alt_raw.fds[i], 0);
        if (a == MAP_FAILED) { perror("mmap"); exit(1); }
        madvise(a, len, MADV_RANDOM);
        alt_map.maps[i] = a;
        alt_map.fds[i] = alt_raw.fds[i];
    }
}

static void unmap_members(uint64_t len)
{
    for (int i = 0; i < NM; i++) {
        if (alt_map.maps[i]) munmap((void *)alt_map.maps[i], len);
        alt_map.maps[i] = NULL;
        alt_map.fds[i] = -1;
    }
}

/* A raidz1 pool over the member files with volume "v" of span bytes, opened as tg.b; NULL on failure. */
static struct vpool *pool_open(const char *name, char paths[][600], uint64_t msize, const struct vpool_opts *o,
                               int vol_flags)
{
    struct vpool_member_spec ms[NM];
    for (int i = 0; i < NM; i++) ms[i] = (struct vpool_member_spec){ paths[i], msize };
    struct vpool *p;
    char err[256];
    if (vpool_create(name, VPOOL_RAIDZ1, ms, NM, o, &p, err, sizeof err)) { fprintf(stderr, "%s\n", err); return NULL; }
    if (vpool_vol_create(p, "v", span, vol_flags)) { fprintf(stderr, "vol create failed\n"); return NULL; }
    int e;
    tg.b = vpool_vol_open(p, "v", 4096, &e);
    if (!tg.b) { fprintf(stderr, "vol open: %d\n", e); return NULL; }
    cur_pool = p;
    memset(&prof_last, 0, sizeof prof_last);   /* a new pool's counters start at 0 */
    return p;
}

static void pool_close(struct vpool *p, char paths[][600])
{
    nasd_bdev_put(tg.b);
    tg.b = NULL;
    cur_pool = NULL;
    vpool_close(p);
    for (int i = 0; i < NM; i++) unlink(paths[i]);
}

/* One row set: raw files, then a raidz1 pool over the same files (its reads alternate
 * with raw reads of its member files). */
static int run_set(char paths[][600], uint64_t msize, int direct, int snaps, struct result *rawres)
{
    /* raw striped files */
    struct result raw, pool;
    bool raw_runs = !snaps && !pool_only;
    if (raw_runs) prewrite(paths, msize, direct);
    if (raw_runs && open_members(paths, O_RDWR | (direct ? O_DIRECT : 0), tg.fds)) return 1;
    tg.b = NULL;
    cur_pool = NULL;
    nsnaps = 0;
    if (snaps) raw = *rawres;   /* rows with snapshots: writes compare with the raw run of their set */
    else if (pool_only) memset(&raw, 0, sizeof raw);
    else run_all(&raw);
    if (!snaps && rawres) *rawres = raw;
    for (int i = 0; i < NM && raw_runs; i++) { close(tg.fds[i]); unlink(paths[i]); }
    /* snapshots keep the filled data while the tests rewrite it: members twice as large */
    uint64_t pmsize = snaps ? 2 * msize : msize;

    /* raidz1 pool over the same files, in place; then log-structured */
    unsigned saved_mask = test_mask;
    if (snaps) test_mask &= 0xf;
    struct result lpool = {0}, araw[2] = {{{0}}}, amap[2] = {{{0}}};
    struct vpool_status st = {0}, lst = {0};
    for (int lg = log_rows == 2; lg < 1 + (log_rows != 0); lg++) {
        prewrite(paths, pmsize, direct);
        struct vpool_opts o = { .direct = direct, .log = lg, .dirty_bytes = (direct ? direct_dirty_mb : dirty_mb) << 20 };
        struct vpool *p = pool_open("bench", paths, pmsize, &o, 0);
        if (!p) return 1;
        /* raw reads of the pool's own files */
        if (!pool_only && open_members(paths, O_RDONLY | (direct ? O_DIRECT : 0), alt_raw.fds)) return 1;
        if (!pool_only && !direct) map_members(pmsize);
        nsnaps = snaps;
        memset(&alt_res, 0, sizeof alt_res);
        memset(&alt_map_res, 0, sizeof alt_map_res);
        run_all(lg ? &lpool : &pool);
        araw[lg] = alt_res;
        amap[lg] = alt_map_res;
        unmap_members(pmsize);
        nsnaps = 0;
        vpool_get_status(p, lg ? &lst : &st);
        if (lg && verbose) {
            struct vp_xl_stats xs;
            vp_xl_stats(p, &xs);
            printf("log: %llu of %llu segments free, %llu cleaned, %llu sectors moved, %llu written, %llu padding\n",
                   (unsigned long long)xs.free, (unsigned long long)xs.nseg, (unsigned long long)xs.cleaned_segs,
                   (unsigned long long)xs.moved_sect, (unsigned long long)xs.written_sect, (unsigned long long)xs.pad_sect);
        }
        for (int i = 0; i < NM && !pool_only; i++) { close(alt_raw.fds[i]); alt_raw.fds[i] = -1; }
        pool_close(p, paths);
    }
    bool lcol = log_rows != 0;
    uint64_t wb = direct ? direct_dirty_mb : dirty_mb;
    char wbs[64];
    if (wb) snprintf(wbs, sizeof wbs, "%llu MiB", (unsigned long long)wb);
    else snprintf(wbs, sizeof wbs, "default: flusher from %.1f GiB, writers wait at %.1f GiB",
                  (double)(log_rows == 2 ? lst : st).dirty_soft / (1u << 30),
                  (double)(log_rows == 2 ? lst : st).dirty_max / (1u << 30));   /* a pool that ran */

    if (snaps) printf("%s, %d snapshot%s of the filled volume present (members %llu MiB), pool write-back %s:\n",
                      direct ? "O_DIRECT members" : "page cache", snaps, snaps > 1 ? "s" : "",
                      (unsigned long long)(pmsize >> 20), wbs);
    else printf("%s, pool write-back %s:\n", direct ? "O_DIRECT members (no page cache)" : "page cache", wbs);
    printf("%-18s %12s %12s %12s %12s %7s", "test", "raw MB/s", "raw IOPS", "inplace MB/s", "inplace IOPS", "ratio");
    if (lcol) printf(" %12s %12s %7s", "raidz1 MB/s", "raidz1 IOPS", "ratio");
    printf("\n");
    for (int i = 0; i < NTESTS; i++) {
        if (!(test_mask & (1u << i))) continue;
        /* reads: against the raw reads that alternated with that pool's */
        double b0 = araw[0].mbs[i] > 0 ? araw[0].mbs[i] : raw.mbs[i], b1 = araw[1].mbs[i] > 0 ? araw[1].mbs[i] : raw.mbs[i];
        printf("%-18s %12.1f %12.0f %12.1f %12.0f %7.2f", names[i], raw.mbs[i], raw.iops[i], pool.mbs[i],
               pool.iops[i], b0 > 0 ? pool.mbs[i] / b0 : 0);
        if (lcol) printf(" %12.1f %12.0f %7.2f", lpool.mbs[i], lpool.iops[i], b1 > 0 ? lpool.mbs[i] / b1 : 0);
        if (i == 4)
            printf("   latency raw %.0f us, raidz1-inplace %.0f us, raidz1 %.0f us", raw.iops[i] > 0 ? 1e6 / raw.iops[i] : 0,
                   pool.iops[i] > 0 ? 1e6 / pool.iops[i] : 0, lpool.iops[i] > 0 ? 1e6 / lpool.iops[i] : 0);
        printf("\n");
    }
    for (int i = 1; i < NTESTS && !pool_only; i += 2) {
        if (!(test_mask & (1u << i))) continue;
        printf("  %s ratio against raw read in turns with the pool: ", names[i]);
        for (int lg = 0; lg < 2; lg++)
            if (araw[lg].mbs[i] > 0) printf("%s%.1f MB/s (%.0f IOPS) with %s", lg && araw[0].mbs[i] > 0 ? ", " : "",
                                            araw[lg].mbs[i], araw[lg].iops[i], vpool_layout_label(VPOOL_RAIDZ1, lg));
        printf("\n");
        if (i != 3 || (amap[0].iops[i] <= 0 && amap[1].iops[i] <= 0)) continue;
        printf("  %s raw through a mapping of the files, in the same turns (pool / it):", names[i]);
        for (int lg = 0; lg < 2; lg++)
            if (amap[lg].iops[i] > 0)
                printf("%s %.0f IOPS with %s (%.2f)", lg && amap[0].iops[i] > 0 ? "," : "", amap[lg].iops[i],
                       vpool_layout_label(VPOOL_RAIDZ1, lg), (lg ? lpool : pool).iops[i] / amap[lg].iops[i]);
        printf("\n");
    }
    for (int lg = log_rows == 2; lg < 1 + lcol; lg++) {
        const struct vpool_status *s = lg ? &lst : &st;
        printf("%s pool state %s, checksum errors repaired %llu, unrepairable %llu\n", vpool_layout_label(VPOOL_RAIDZ1, lg),
               vpool_state_name(s->state), (unsigned long long)s->repaired, (unsigned long long)s->unrepairable);
    }
    test_mask = saved_mask;
    return 0;
}

static double snap_ms(struct vpool *p, const char *name)
{
    double t0 = now();
    if (vpool_snap_create(p, "v", name)) { fprintf(stderr, "snapshot %s failed\n", name); exit(1); }
    return (now() - t0) * 1e3;
}

/* -C: 4 KiB random writes (THREADS threads) and 1 MiB sequential writes on a thin raidz1
 * volume, with no snapshot, in the seconds right after the first snapshot (every first
 * write to a unit copies 1 MiB) and right after the 32nd; then snapshot create and delete
 * times with the working set full of data. For raidz1-inplace and raidz1 (log) in the page cache,
 * and raidz1 on O_DIRECT members (-L and -D choose, as for the main sets). */
static int snap_cost_of(int log, int direct)
{
    char paths[NM][600];
    for (int i = 0; i < NM; i++) {   /* sparse, as when the README's -C table was measured */
        snprintf(paths[i], sizeof paths[i], "%s/vpool-snap-bench-m%d", dir, i);
        unlink(paths[i]);
    }
    struct vpool_opts o = { .log = log, .direct = direct, .dirty_bytes = (direct ? direct_dirty_mb : dirty_mb) << 20 };
    struct vpool *p = pool_open("sbench", paths, member_mb << 20, &o, VPOOL_VOL_THIN);
    if (!p) return 1;
    printf("vpool_snap_bench: %s of 4 files of %llu MiB in %s%s, volume %llu MiB, %d threads, %.0fs per test\n",
           vpool_layout_label(VPOOL_RAIDZ1, log), (unsigned long long)member_mb, dir, direct ? " (O_DIRECT)" : "",
           (unsigned long long)workset_mb, nthreads, secs);
    struct result fill;
    test_mask = 0;
    run_all(&fill);   /* fill only */
    double r[3], iops[3][2], tc[3] = {0};
    const char *state[3] = { "no snapshot", "after 1st snapshot", "after 32nd snapshot" };
    char nm[32];
    for (int k = 0; k < 3; k++) {
        if (k == 1) tc[1] = snap_ms(p, "s1");
        if (k == 2) {
            for (int n = 2; n <= 31; n++) { snprintf(nm, sizeof nm, "s%d", n); snap_ms(p, nm); }
            tc[2] = snap_ms(p, "s32");
        }
        seed = (uint64_t)(now() * 1e6);   /* other offsets each run */
        run(1, 1, 4096, &iops[k][0]);
        if (k) { snprintf(nm, sizeof nm, "q%d", k); snap_ms(p, nm); }   /* the sequential run copies again */
        r[k] = run(1, 0, 1 << 20, &iops[k][1]);   /* sequential: seed unused */
    }
    printf("%-22s %14s %14s %14s\n", "state", "rand write 4K", "seq write 1M", "create (ms)");
    for (int k = 0; k < 3; k++)
        printf("%-22s %9.0f IOPS %9.1f MB/s %14.2f\n", state[k], iops[k][0], r[k], tc[k]);
    double t0 = now();
    if (vpool_snap_destroy(p, "v", "s1")) return 1;
    printf("delete of the oldest snapshot: %.2f ms\n", (now() - t0) * 1e3);
    struct vpool_status st;
    vpool_get_status(p, &st);
    printf("pool allocated %llu MiB of %llu, unrepairable %llu\n", (unsigned long long)(st.allocated >> 20),
           (unsigned long long)(st.size >> 20), (unsigned long long)st.unrepairable);
    pool_close(p, paths);
    return 0;
}

static int snap_cost(void)
{
    int rc = 0;
    if (log_rows != 2 && direct_sets != 1) rc |= snap_cost_of(0, 0);
    if (log_rows != 0 && direct_sets != 1) rc |= snap_cost_of(1, 0);
    if (log_rows != 0 && direct_sets != 0) rc |= snap_cost_of(1, 1);
    return rc;
}

int main(int argc, char **argv)
{
    int c, snap_mode = 0, threads_set = 0, member_set = 0;
    while ((c = getopt(argc, argv, "d:s:t:j:w:PT:vD:S:CL:B:b:W:")) != -1) {
        switch (c) {
        case 'd': snprintf(dir, sizeof dir, "%s", optarg); break;
        case 's': member_mb = strtoull(optarg, NULL, 0); member_set = 1; break;
        case 't': secs = atof(optarg); break;
        case 'j': nthreads = atoi(optarg); threads_set = 1; break;
        case 'w': workset_mb = strtoull(optarg, NULL, 0); break;
        case 'P': pool_only = 1; break;   /* skip the raw run (profiling) */
        case 'v': verbose = 1; break;
        case 'D': direct_sets = atoi(optarg); break;
        case 'S': snap_rows = atoi(optarg); break;
        case 'W': prewrite_files = atoi(optarg); break;
        case 'T': test_mask = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'C': snap_mode = 1; break;
        case 'L': log_rows = atoi(optarg); break;
        case 'B': dirty_mb = strtoull(optarg, NULL, 0); break;
        case 'b': direct_dirty_mb = strtoull(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: vpool_bench [-d DIR] [-s MEMBER_MiB] [-t SECONDS] [-j THREADS] [-w WORKSET_MiB]\n");
            return 64;
        }
    }
    if (nthreads < 1 || nthreads > 64 || member_mb < 64) return 64;
    nasd_log_level = LOG_WARN;
    if (snap_mode) {
        if (!threads_set) nthreads = 4;
        if (!member_set) member_mb = 1024;
        /* room for the fill and four rounds of copies (each 2nd run after a snapshot
         * rewrites, so copies, every unit): 5 x the working set in 3 members' data, and
         * the log's cleaner its reserve */
        if (workset_mb > member_mb / 4) workset_mb = member_mb / 4;
        span = workset_mb << 20;
        return snap_cost();
    }
    char paths[NM][600];
    for (int i = 0; i < NM; i++) member(paths[i], sizeof paths[i], i);
    uint64_t msize = member_mb << 20;
    if (workset_mb > member_mb * 2) workset_mb = member_mb * 2;
    span = workset_mb << 20;
    printf("vpool_bench: 4 member files of %llu MiB in %s, working set %llu MiB, %d threads for random I/O, %.0fs per test\n",
           (unsigned long long)member_mb, dir, (unsigned long long)workset_mb, nthreads, secs);

    int rc = 0;
    struct result raw;
    if (direct_sets != 1) {
        rc |= run_set(paths, msize, 0, 0, &raw);
        if (snap_rows) { rc |= run_set(paths, msize, 0, 1, &raw); rc |= run_set(paths, msize, 0, 32, &raw); }
    }
    if (direct_sets >= 1) rc |= run_set(paths, msize, 1, 0, &raw);
    return rc;
}
