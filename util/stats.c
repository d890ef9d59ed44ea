/* Per-export I/O counters and latency histograms (lock-free, read by the monitor). */
#include "util/stats.h"
#include <stdlib.h>
#include <time.h>

struct nasd_io_stats *nasd_stats_new(void)
{
    struct nasd_io_stats *s = calloc(1, sizeof *s);
    if (s) atomic_init(&s->refs, 1);
    return s;
}

struct nasd_io_stats *nasd_stats_get(struct nasd_io_stats *s)
{
    if (s) atomic_fetch_add(&s->refs, 1);
    return s;
}

void nasd_stats_put(struct nasd_io_stats *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) free(s);
}

static int lat_bucket(uint64_t lat_ns)
{
    uint64_t us = lat_ns / 1000;
    int b = 0;
    while (us > 1 && b < NASD_LAT_BUCKETS - 1) { us >>= 1; b++; }
    return b;
}

void nasd_stats_record(struct nasd_io_stats *s, enum nasd_op_kind kind, uint64_t bytes,
                       uint64_t lat_ns, uint64_t cpu_ns, int error)
{
    if (!s) return;
    atomic_fetch_add_explicit(&s->ops[kind], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->bytes[kind], bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->lat_ns_sum, lat_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->cpu_ns, cpu_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->lat_hist[lat_bucket(lat_ns)], 1, memory_order_relaxed);
    if (error) atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
}

void nasd_stats_add_cpu(struct nasd_io_stats *s, uint64_t cpu_ns)
{
    if (s) atomic_fetch_add_explicit(&s->cpu_ns, cpu_ns, memory_order_relaxed);
}

static uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

uint64_t nasd_now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
uint64_t nasd_thread_cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }
