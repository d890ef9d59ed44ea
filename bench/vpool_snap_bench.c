/* vpool_snap_bench: what snapshots cost on a raidz1 pool of 4 member files (page cache).
 *   vpool_snap_bench [-d DIR] [-s MEMBER_MiB] [-t SECONDS] [-j THREADS] [-w WORKSET_MiB]
 * Rows: 4 KiB random writes (THREADS synchronous threads) and 1 MiB sequential writes,
 * each with no snapshot, in the seconds right after the first snapshot (every first write
 * to a unit copies 1 MiB), and right after the 32nd; then snapshot create and delete
 * times with the working set full of data. Writes end with a flush, timed. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_snap.h"

#define NM 4
static char dir[512] = "/tmp";
static uint64_t member_mb = 512, workset_mb = 1024, span;
static double secs = 3;
static int nthreads = 4;
static nasd_bdev *vol;
static volatile int stop_flag;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

struct job { int rnd, id; size_t bs; _Atomic uint64_t *next; uint64_t ops; int err; };

static void *worker(void *arg)
{
    struct job *j = arg;
    uint8_t *buf;
    if (posix_memalign((void **)&buf, 4096, j->bs)) { j->err = -ENOMEM; return NULL; }
    for (size_t i = 0; i < j->bs; i++) buf[i] = (uint8_t)(i * 31 + j->id);
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(j->id + 1) ^ (uint64_t)(now() * 1e6);
    while (!stop_flag) {
        uint64_t off;
        if (j->rnd) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; off = (x % (span / j->bs)) * j->bs; }
        else {
            off = atomic_fetch_add(j->next, j->bs);
            if (off + j->bs > span) { atomic_store(j->next, 0); continue; }
        }
        memcpy(buf, &x, sizeof x);
        int rc = nasd_bdev_write(vol, buf, off, j->bs, 0);
        if (rc) { j->err = rc; break; }
        j->ops++;
    }
    free(buf);
    return NULL;
}

static double run(int rnd, size_t bs, double *iops)
{
    pthread_t th[64];
    struct job jobs[64];
    _Atomic uint64_t next = 0;
    int nt = rnd ? nthreads : 1;
    stop_flag = 0;
    double t0 = now();
    for (int i = 0; i < nt; i++) {
        jobs[i] = (struct job){ .rnd = rnd, .id = i, .bs = bs, .next = &next };
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    usleep((useconds_t)(secs * 1e6));
    stop_flag = 1;
    uint64_t ops = 0;
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        ops += jobs[i].ops;
        if (jobs[i].err) { fprintf(stderr, "I/O error %d\n", jobs[i].err); exit(1); }
    }
    if (nasd_bdev_flush(vol)) { fprintf(stderr, "flush failed\n"); exit(1); }
    double el = now() - t0;
    *iops = ops / el;
    return ops * (double)bs / el / 1e6;
}

static double snap(struct vpool *p, const char *name)
{
    double t0 = now();
    if (vpool_snap_create(p, "v", name)) { fprintf(stderr, "snapshot %s failed\n", name); exit(1); }
    return (now() - t0) * 1e3;
}

int main(int argc, char **argv)
{
    int c;
    while ((c = getopt(argc, argv, "d:s:t:j:w:")) != -1) {
        switch (c) {
        case 'd': snprintf(dir, sizeof dir, "%s", optarg); break;
        case 's': member_mb = strtoull(optarg, NULL, 0); break;
        case 't': secs = atof(optarg); break;
        case 'j': nthreads = atoi(optarg); break;
        case 'w': workset_mb = strtoull(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: vpool_snap_bench [-d DIR] [-s MEMBER_MiB] [-t SECONDS] [-j THREADS] [-w WORKSET_MiB]\n");
            return 64;
        }
    }
    if (nthreads < 1 || nthreads > 64 || member_mb < 64) return 64;
    nasd_log_level = LOG_WARN;
    if (workset_mb > member_mb) workset_mb = member_mb;   /* room for one full copy */
    span = workset_mb << 20;
    char paths[NM][600];
    struct vpool_member_spec ms[NM];
    for (int i = 0; i < NM; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/vpool-snap-bench-m%d", dir, i);
        unlink(paths[i]);
        ms[i] = (struct vpool_member_spec){ paths[i], member_mb << 20 };
    }
    struct vpool *p;
    char err[256];
    if (vpool_create("sbench", VPOOL_RAIDZ1, ms, NM, NULL, &p, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    if (vpool_vol_create(p, "v", span, VPOOL_VOL_THIN)) { fprintf(stderr, "vol create failed\n"); return 1; }
    int e;
    vol = vpool_vol_open(p, "v", 4096, &e);
    if (!vol) { fprintf(stderr, "vol open: %d\n", e); return 1; }
    printf("vpool_snap_bench: raidz1 of 4 files of %llu MiB in %s, volume %llu MiB, %d threads, %.0fs per test\n",
           (unsigned long long)member_mb, dir, (unsigned long long)workset_mb, nthreads, secs);
    uint8_t *buf = malloc(1 << 20);
    memset(buf, 0x5a, 1 << 20);
    for (uint64_t off = 0; off < span; off += 1 << 20) if (nasd_bdev_write(vol, buf, off, 1 << 20, 0)) return 1;
    nasd_bdev_flush(vol);
    free(buf);
    double r[3][2], i4[3][2], tc[3] = {0};
    const char *state[3] = { "no snapshot", "after 1st snapshot", "after 32nd snapshot" };
    char nm[32];
    for (int k = 0; k < 3; k++) {
        if (k == 1) tc[1] = snap(p, "s1");
        if (k == 2) {
            for (int n = 2; n <= 31; n++) { snprintf(nm, sizeof nm, "s%d", n); snap(p, nm); }
            tc[2] = snap(p, "s32");
        }
        r[k][0] = run(1, 4096, &i4[k][0]);
        if (k) { snprintf(nm, sizeof nm, "q%d", k); snap(p, nm); }   /* the sequential run copies again */
        r[k][1] = run(0, 1 << 20, &i4[k][1]);
    }
    printf("%-22s %14s %14s %14s\n", "state", "rand write 4K", "seq write 1M", "create (ms)");
    for (int k = 0; k < 3; k++)
        printf("%-22s %9.0f IOPS %9.1f MB/s %14.2f\n", state[k], i4[k][0], r[k][1], tc[k]);
    double t0 = now();
    if (vpool_snap_destroy(p, "v", "s1")) return 1;
    printf("delete of the oldest snapshot: %.2f ms\n", (now() - t0) * 1e3);
    struct vpool_status st;
    vpool_get_status(p, &st);
    printf("pool allocated %llu MiB of %llu, unrepairable %llu\n", (unsigned long long)(st.allocated >> 20),
           (unsigned long long)(st.size >> 20), (unsigned long long)st.unrepairable);
    nasd_bdev_put(vol);
    vpool_close(p);
    for (int i = 0; i < NM; i++) unlink(paths[i]);
    return 0;
}
