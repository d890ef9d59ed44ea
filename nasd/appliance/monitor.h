#pragma once
/* Export monitor: a 1 Hz sampler that turns the per-export nasd_io_stats counters
 * into per-second rates, keeps a per-second ring (5 min) and a per-minute ring
 * (24 h) per export, and persists minute samples in SQLite (7 days). */
#include <jansson.h>
#include <stdint.h>
#include "db/db.h"
#include "util/stats.h"

struct appliance;

#define MON_SEC_RING 300
#define MON_MIN_RING 1440
#define MON_KEEP_DAYS 7

/* Point-in-time copy of one export's counters. */
struct mon_counters {
    uint64_t ops[NASD_OP_KINDS];
    uint64_t bytes[NASD_OP_KINDS];
    uint64_t errors, lat_ns_sum, cpu_ns;
    uint64_t lat_hist[NASD_LAT_BUCKETS];
};

/* Rates over one interval. */
struct mon_sample {
    int64_t t;              /* unix seconds (minute samples: start of the minute) */
    double read_iops, write_iops, other_iops;
    double read_bps, write_bps;
    double lat_p50_us, lat_p99_us;
    double cpu_pct;         /* percent of one core */
    uint64_t errors;        /* errors in the interval */
};

struct mon_ring {
    struct mon_sample *v;
    int cap, n, head;       /* head: index of the next write */
};

/* --- pure helpers (unit-tested) --- */
void mon_counters_read(const struct nasd_io_stats *s, struct mon_counters *out);
/* 0 when cur >= prev everywhere, -1 when a counter went backwards (object replaced). */
int mon_counters_delta(const struct mon_counters *prev, const struct mon_counters *cur, struct mon_counters *d);
/* Rates from a delta over elapsed_ns (> 0). */
void mon_rates(const struct mon_counters *delta, uint64_t elapsed_ns, int64_t t, struct mon_sample *out);
/* Latency quantile q (0..1) in microseconds from a log2-us histogram, linearly
 * interpolated inside the bucket; 0 when the histogram is empty. */
double mon_hist_quantile_us(const uint64_t hist[NASD_LAT_BUCKETS], double q);

int mon_ring_init(struct mon_ring *r, int cap);
void mon_ring_free(struct mon_ring *r);
void mon_ring_push(struct mon_ring *r, const struct mon_sample *s);
/* i-th sample, oldest first (0 <= i < r->n). */
const struct mon_sample *mon_ring_at(const struct mon_ring *r, int i);

/* --- persistence (nasd/appliance/monitor_db.c) --- */
int mon_db_save(nasd_db *db, const char *type, int64_t id, const struct mon_sample *s);
/* Loads minute samples with t >= since, oldest first, into r. Returns the count. */
int mon_db_load(nasd_db *db, const char *type, int64_t id, int64_t since, struct mon_ring *r);
/* Deletes samples older than `before` and rows of exports that no longer exist. */
void mon_db_prune(nasd_db *db, int64_t before);
void mon_db_forget(nasd_db *db, const char *type, int64_t id);

/* --- the monitor --- */
struct monitor;

/* db: a connection of the monitor's own (the monitor takes ownership and closes it),
 * or NULL for no persistence. */
struct monitor *monitor_new(struct appliance *a, nasd_db *db);
/* One sampling step at the given wall/monotonic time; the thread calls this each
 * second, tests call it directly. */
void monitor_tick(struct monitor *m, int64_t wall, uint64_t mono_ns);
int monitor_start_thread(struct monitor *m);
/* Stops the thread (if any) and frees everything. */
void monitor_free(struct monitor *m);

/* Convenience for the daemon: opens its own DB connection and starts the thread. */
struct monitor *monitor_start(struct appliance *a, char *err, size_t errlen);

/* One export's counters copied out under the appliance lock. */
struct mon_snap {
    char type[8];           /* "iscsi" | "nfs" */
    int64_t id;
    char name[64];
    int active;
    struct mon_counters c;
};
/* Every export of the appliance (live counters); *n gets the count. Caller frees. */
struct mon_snap *monitor_snapshot(struct appliance *a, int *n);

/* JSON for GET /stats: latest per-second rates plus live totals. */
json_t *monitor_stats_json(struct monitor *m);
/* JSON for GET /stats/history; range_s 300 -> per-second ring, else minute ring.
 * NULL when the export is unknown to the monitor. */
json_t *monitor_history_json(struct monitor *m, const char *type, int64_t id, int range_s);
/* Is the export (type "iscsi"/"nfs", id) known to the appliance right now? */
int monitor_export_exists(struct monitor *m, const char *type, int64_t id);
