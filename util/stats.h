#pragma once
/* Per-export I/O counters, written lock-free by the protocol services and read by
 * the monitor (REST /stats, /metrics). One object per export, refcounted so a
 * service may finish in-flight requests after the export is deleted. */
#include <stdatomic.h>
#include <stdint.h>

enum nasd_op_kind { NASD_OP_READ = 0, NASD_OP_WRITE, NASD_OP_OTHER, NASD_OP_KINDS };
#define NASD_LAT_BUCKETS 32 /* bucket i counts latencies in [2^i, 2^(i+1)) microseconds */

struct nasd_io_stats {
    atomic_int refs;
    _Atomic uint64_t ops[NASD_OP_KINDS];
    _Atomic uint64_t bytes[NASD_OP_KINDS];
    _Atomic uint64_t errors;
    _Atomic uint64_t lat_ns_sum;
    _Atomic uint64_t cpu_ns;          /* thread CPU time spent serving this export */
    _Atomic uint64_t lat_hist[NASD_LAT_BUCKETS];
};

struct nasd_io_stats *nasd_stats_new(void);
struct nasd_io_stats *nasd_stats_get(struct nasd_io_stats *s);
void nasd_stats_put(struct nasd_io_stats *s);

/* Record one request. lat_ns: wall time from arrival to reply; cpu_ns: thread CPU
 * time the service spent on it (see nasd_thread_cpu_ns). s may be NULL. */
void nasd_stats_record(struct nasd_io_stats *s, enum nasd_op_kind kind, uint64_t bytes,
                       uint64_t lat_ns, uint64_t cpu_ns, int error);

/* Charge CPU time that no single request owns (a connection's socket I/O) to s. */
void nasd_stats_add_cpu(struct nasd_io_stats *s, uint64_t cpu_ns);

uint64_t nasd_now_ns(void);        /* CLOCK_MONOTONIC */
uint64_t nasd_thread_cpu_ns(void); /* CLOCK_THREAD_CPUTIME_ID */
