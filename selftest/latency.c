/* Log-linear latency histogram. Values < 64 ns get exact buckets; above, bucket
 * (e, m) covers [(32+m) << (e-5), (33+m) << (e-5)) for e = floor(log2 v). */
#include "selftest/latency.h"
#include <string.h>

static int bucket_of(uint64_t v)
{
    if (v < 64) return (int)v;
    int e = 63 - __builtin_clzll(v);
    int m = (int)((v >> (e - 5)) & (ST_LAT_SUB - 1));
    return 64 + (e - 6) * ST_LAT_SUB + m;
}

static void bucket_range(int i, double *lo, double *hi)
{
    if (i < 64) { *lo = i; *hi = i + 1; return; }
    int e = (i - 64) / ST_LAT_SUB + 6, m = (i - 64) % ST_LAT_SUB;
    *lo = (double)((uint64_t)(32 + m) << (e - 5));
    *hi = (double)((uint64_t)(33 + m) << (e - 5));
}

void st_lat_reset(struct st_lat *l) { memset(l, 0, sizeof *l); }

void st_lat_add(struct st_lat *l, uint64_t ns)
{
    if (!l->count || ns < l->min_ns) l->min_ns = ns;
    if (ns > l->max_ns) l->max_ns = ns;
    l->count++;
    l->sum_ns += ns;
    l->b[bucket_of(ns)]++;
}

double st_lat_avg_us(const struct st_lat *l) { return l->count ? (double)l->sum_ns / l->count / 1000.0 : 0; }

double st_lat_quantile_us(const struct st_lat *l, double q)
{
    if (!l->count) return 0;
    if (q < 0) q = 0;
    if (q > 1) q = 1;
    double rank = q * (double)l->count, cum = 0;
    for (int i = 0; i < ST_LAT_BUCKETS; i++) {
        if (!l->b[i]) continue;
        if (cum + (double)l->b[i] >= rank) {
            double lo, hi;
            bucket_range(i, &lo, &hi);
            double v = lo + (hi - lo) * (rank - cum) / (double)l->b[i];
            /* never report outside what was observed */
            if (v < (double)l->min_ns) v = (double)l->min_ns;
            if (v > (double)l->max_ns) v = (double)l->max_ns;
            return v / 1000.0;
        }
        cum += (double)l->b[i];
    }
    return (double)l->max_ns / 1000.0;
}
