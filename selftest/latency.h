#pragma once
/* Latency accumulator: log-linear histogram (32 sub-buckets per power of two, so
 * quantiles are within ~3%), plus count/sum/min/max. Not thread-safe. */
#include <stdint.h>

#define ST_LAT_SUB 32
#define ST_LAT_BUCKETS (64 + 58 * ST_LAT_SUB)

struct st_lat {
    uint64_t count, sum_ns, min_ns, max_ns;
    uint64_t b[ST_LAT_BUCKETS];
};

void st_lat_reset(struct st_lat *l);
void st_lat_add(struct st_lat *l, uint64_t ns);
double st_lat_avg_us(const struct st_lat *l);
/* Quantile q in 0..1, microseconds, interpolated inside the bucket; 0 when empty. */
double st_lat_quantile_us(const struct st_lat *l, double q);
