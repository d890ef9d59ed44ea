/* Pure monitor arithmetic: counter snapshots, deltas, rates, percentiles, rings. */
#include "nasd/appliance/monitor.h"
#include <stdlib.h>
#include <string.h>

void mon_counters_read(const struct nasd_io_stats *s, struct mon_counters *out)
{
    memset(out, 0, sizeof *out);
    if (!s) return;
    for (int k = 0; k < NASD_OP_KINDS; k++) {
        out->ops[k] = atomic_load_explicit(&s->ops[k], memory_order_relaxed);
        out->bytes[k] = atomic_load_explicit(&s->bytes[k], memory_order_relaxed);
    }
    out->errors = atomic_load_explicit(&s->errors, memory_order_relaxed);
    out->lat_ns_sum = atomic_load_explicit(&s->lat_ns_sum, memory_order_relaxed);
    out->cpu_ns = atomic_load_explicit(&s->cpu_ns, memory_order_relaxed);
    for (int b = 0; b < NASD_LAT_BUCKETS; b++)
        out->lat_hist[b] = atomic_load_explicit(&s->lat_hist[b], memory_order_relaxed);
}

static int sub(uint64_t cur, uint64_t prev, uint64_t *out)
{
    if (cur < prev) return -1;
    *out = cur - prev;
    return 0;
}

int mon_counters_delta(const struct mon_counters *prev, const struct mon_counters *cur, struct mon_counters *d)
{
    int bad = 0;
    memset(d, 0, sizeof *d);
    for (int k = 0; k < NASD_OP_KINDS; k++) {
        bad |= sub(cur->ops[k], prev->ops[k], &d->ops[k]);
        bad |= sub(cur->bytes[k], prev->bytes[k], &d->bytes[k]);
    }
    bad |= sub(cur->errors, prev->errors, &d->errors);
    bad |= sub(cur->lat_ns_sum, prev->lat_ns_sum, &d->lat_ns_sum);
    bad |= sub(cur->cpu_ns, prev->cpu_ns, &d->cpu_ns);
    for (int b = 0; b < NASD_LAT_BUCKETS; b++) bad |= sub(cur->lat_hist[b], prev->lat_hist[b], &d->lat_hist[b]);
    if (bad) memset(d, 0, sizeof *d);
    return bad ? -1 : 0;
}

double mon_hist_quantile_us(const uint64_t hist[NASD_LAT_BUCKETS], double q)
{
    uint64_t total = 0;
    for (int b = 0; b < NASD_LAT_BUCKETS; b++) total += hist[b];
    if (!total) return 0;
    if (q < 0) q = 0;
    if (q > 1) q = 1;
    double rank = q * (double)total, cum = 0;
    for (int b = 0; b < NASD_LAT_BUCKETS; b++) {
        if (!hist[b]) continue;
        if (cum + (double)hist[b] >= rank) {
            /* bucket 0 holds [0, 2) us (stats.c folds 0 and 1 us into it), bucket b>0 [2^b, 2^(b+1)) */
            double lo = b == 0 ? 0 : (double)(1ull << b), hi = (double)(1ull << (b + 1));
            double frac = (rank - cum) / (double)hist[b];
            return lo + (hi - lo) * frac;
        }
        cum += (double)hist[b];
    }
    return (double)(1ull << NASD_LAT_BUCKETS); /* unreachable: rank <= total */
}

void mon_rates(const struct mon_counters *d, uint64_t elapsed_ns, int64_t t, struct mon_sample *out)
{
    memset(out, 0, sizeof *out);
    out->t = t;
    if (!elapsed_ns) return;
    double secs = (double)elapsed_ns / 1e9;
    out->read_iops = (double)d->ops[NASD_OP_READ] / secs;
    out->write_iops = (double)d->ops[NASD_OP_WRITE] / secs;
    out->other_iops = (double)d->ops[NASD_OP_OTHER] / secs;
    out->read_bps = (double)d->bytes[NASD_OP_READ] / secs;
    out->write_bps = (double)d->bytes[NASD_OP_WRITE] / secs;
    out->lat_p50_us = mon_hist_quantile_us(d->lat_hist, 0.50);
    out->lat_p99_us = mon_hist_quantile_us(d->lat_hist, 0.99);
    out->cpu_pct = (double)d->cpu_ns / (double)elapsed_ns * 100.0;
    out->errors = d->errors;
}

int mon_ring_init(struct mon_ring *r, int cap)
{
    r->v = calloc((size_t)cap, sizeof *r->v);
    r->cap = r->v ? cap : 0;
    r->n = r->head = 0;
    return r->v ? 0 : -1;
}

void mon_ring_free(struct mon_ring *r)
{
    free(r->v);
    memset(r, 0, sizeof *r);
}

void mon_ring_push(struct mon_ring *r, const struct mon_sample *s)
{
    if (!r->cap) return;
    r->v[r->head] = *s;
    r->head = (r->head + 1) % r->cap;
    if (r->n < r->cap) r->n++;
}

const struct mon_sample *mon_ring_at(const struct mon_ring *r, int i)
{
    if (i < 0 || i >= r->n) return NULL;
    int start = (r->head - r->n + r->cap) % r->cap;
    return &r->v[(start + i) % r->cap];
}
