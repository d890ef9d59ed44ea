/* Monitor: counter deltas -> rates, histogram percentiles, rings, minute persistence. */
#include "tests/unit/check_main.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "nasd/appliance/appliance.h"
#include "nasd/appliance/monitor.h"

START_TEST(rates_from_deltas)
{
    struct mon_counters prev = { 0 }, cur = { 0 }, d;
    prev.ops[NASD_OP_READ] = 100;
    cur.ops[NASD_OP_READ] = 300;          /* 200 reads */
    cur.ops[NASD_OP_WRITE] = 50;
    cur.ops[NASD_OP_OTHER] = 10;
    prev.bytes[NASD_OP_READ] = 4096;
    cur.bytes[NASD_OP_READ] = 4096 + 200 * 4096;
    cur.bytes[NASD_OP_WRITE] = 50 * 8192;
    prev.cpu_ns = 1000;
    cur.cpu_ns = 1000 + 500000000;        /* 0.5 s CPU over 2 s = 25 % */
    cur.errors = 3;
    cur.lat_hist[4] = 260;                /* [16, 32) us */
    ck_assert_int_eq(mon_counters_delta(&prev, &cur, &d), 0);
    struct mon_sample s;
    mon_rates(&d, 2000000000ull, 1234, &s);
    ck_assert_int_eq(s.t, 1234);
    ck_assert(fabs(s.read_iops - 100.0) < 1e-9);
    ck_assert(fabs(s.write_iops - 25.0) < 1e-9);
    ck_assert(fabs(s.other_iops - 5.0) < 1e-9);
    ck_assert(fabs(s.read_bps - 100.0 * 4096) < 1e-6);
    ck_assert(fabs(s.write_bps - 25.0 * 8192) < 1e-6);
    ck_assert(fabs(s.cpu_pct - 25.0) < 1e-9);
    ck_assert(fabs(s.lat_p50_us - 24.0) < 1e-9);
    ck_assert_uint_eq(s.errors, 3);
    /* a counter that went backwards means the stats object was replaced */
    cur.ops[NASD_OP_READ] = 50;
    ck_assert_int_eq(mon_counters_delta(&prev, &cur, &d), -1);
}
END_TEST

START_TEST(percentile_from_histogram)
{
    uint64_t h[NASD_LAT_BUCKETS] = { 0 };
    ck_assert(mon_hist_quantile_us(h, 0.5) == 0);
    h[3] = 1;                             /* one sample in [8, 16) */
    ck_assert(fabs(mon_hist_quantile_us(h, 0.5) - 12.0) < 1e-9);
    memset(h, 0, sizeof h);
    h[0] = 50;                            /* [0, 2) */
    h[10] = 50;                           /* [1024, 2048) */
    ck_assert(fabs(mon_hist_quantile_us(h, 0.50) - 2.0) < 1e-9);
    ck_assert(fabs(mon_hist_quantile_us(h, 0.99) - (1024 + 1024 * 0.98)) < 1e-9);
    ck_assert(fabs(mon_hist_quantile_us(h, 1.0) - 2048.0) < 1e-9);

    /* through the real recorder: 99 requests of 100 us and one of 10 ms */
    struct nasd_io_stats *st = nasd_stats_new();
    for (int i = 0; i < 99; i++) nasd_stats_record(st, NASD_OP_READ, 4096, 100000, 1000, 0);
    nasd_stats_record(st, NASD_OP_WRITE, 4096, 10000000, 1000, 1);
    struct mon_counters c;
    mon_counters_read(st, &c);
    ck_assert_uint_eq(c.ops[NASD_OP_READ], 99);
    ck_assert_uint_eq(c.errors, 1);
    double p50 = mon_hist_quantile_us(c.lat_hist, 0.5), p99 = mon_hist_quantile_us(c.lat_hist, 0.995);
    ck_assert_msg(p50 >= 64 && p50 < 128, "p50 %f", p50);
    ck_assert_msg(p99 >= 8192 && p99 < 16384, "p99.5 %f", p99);
    nasd_stats_put(st);
}
END_TEST

START_TEST(ring_wraps)
{
    struct mon_ring r;
    ck_assert_int_eq(mon_ring_init(&r, 5), 0);
    ck_assert_ptr_null(mon_ring_at(&r, 0));
    for (int i = 0; i < 3; i++) mon_ring_push(&r, &(struct mon_sample){ .t = i });
    ck_assert_int_eq(r.n, 3);
    ck_assert_int_eq(mon_ring_at(&r, 0)->t, 0);
    for (int i = 3; i < 12; i++) mon_ring_push(&r, &(struct mon_sample){ .t = i });
    ck_assert_int_eq(r.n, 5);
    for (int i = 0; i < 5; i++) ck_assert_int_eq(mon_ring_at(&r, i)->t, 7 + i);
    ck_assert_ptr_null(mon_ring_at(&r, 5));
    mon_ring_free(&r);
}
END_TEST

static struct export_rt *add_export(struct appliance *a, enum export_type t, int64_t id, const char *name)
{
    struct export_rt *e = calloc(1, sizeof *e);
    e->type = t;
    e->id = id;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->active = 1;
    e->stats = nasd_stats_new();
    e->next = a->exports;
    a->exports = e;
    return e;
}

static void free_exports(struct appliance *a)
{
    while (a->exports) {
        struct export_rt *e = a->exports;
        a->exports = e->next;
        nasd_stats_put(e->stats);
        free(e);
    }
}

static double jnum(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

START_TEST(monitor_ticks_and_persists)
{
    char dir[] = "/tmp/test_monitor.XXXXXX", path[256], err[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/nasd.db", dir);
    nasd_db db;
    ck_assert_int_eq(db_open(&db, path, err, sizeof err), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO pools(id,name,layout,created) VALUES(1,'p','stripe',0)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO datasets(id,pool_id,name,created) VALUES(1,1,'d',0)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO nfs_exports(id,name,dataset_id,path,created) "
                                        "VALUES(7,'share',1,'/p/d',0)", ""), 0);

    struct appliance a;
    memset(&a, 0, sizeof a);
    pthread_mutex_init(&a.lock, NULL);
    struct export_rt *e = add_export(&a, EXPORT_NFS, 7, "share");
    struct monitor *m = monitor_new(&a, &db);
    int64_t now = time(NULL);
    int64_t wall = now - now % 60 - 180;  /* three minutes ago, on a minute boundary */
    uint64_t mono = 1000000000ull;
    monitor_tick(m, wall, mono);
    /* 60 seconds of 10 reads/s at 1 ms each, then one more tick in the next minute */
    for (int s = 1; s <= 60; s++) {
        for (int i = 0; i < 10; i++) nasd_stats_record(e->stats, NASD_OP_READ, 4096, 1000000, 2000000, 0);
        monitor_tick(m, wall + s, mono + (uint64_t)s * 1000000000ull);
    }
    json_t *st = monitor_stats_json(m);
    json_t *x = json_array_get(json_object_get(st, "exports"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(x, "name")), "share");
    ck_assert(fabs(jnum(x, "read_iops") - 10.0) < 1e-6);
    ck_assert(fabs(jnum(x, "read_bps") - 40960.0) < 1e-6);
    ck_assert(fabs(jnum(x, "cpu_pct") - 2.0) < 1e-6);
    ck_assert(jnum(x, "lat_p50_us") >= 512 && jnum(x, "lat_p50_us") < 1024);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(x, "totals"), "read_ops")), 600);
    json_decref(st);

    json_t *h = monitor_history_json(m, "nfs", 7, 300);
    ck_assert_int_eq(json_integer_value(json_object_get(h, "resolution")), 1);
    ck_assert_int_eq(json_array_size(json_object_get(h, "samples")), 60);
    json_decref(h);
    h = monitor_history_json(m, "nfs", 7, 3600);
    ck_assert_int_eq(json_integer_value(json_object_get(h, "resolution")), 60);
    ck_assert_int_eq(json_array_size(json_object_get(h, "samples")), 1);
    json_t *s0 = json_array_get(json_object_get(h, "samples"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(s0, "t")), wall);
    ck_assert(fabs(jnum(s0, "read_iops") - 10.0) < 1e-6);
    json_decref(h);
    ck_assert_ptr_null(monitor_history_json(m, "iscsi", 7, 300));
    monitor_free(m);

    /* a new monitor on the same DB file reloads the minute sample */
    ck_assert_int_eq(db_open(&db, path, err, sizeof err), 0);
    m = monitor_new(&a, &db);
    monitor_tick(m, wall + 61, mono + 61000000000ull);
    h = monitor_history_json(m, "nfs", 7, 86400);
    ck_assert_int_eq(json_array_size(json_object_get(h, "samples")), 1);
    s0 = json_array_get(json_object_get(h, "samples"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(s0, "t")), wall);
    ck_assert(fabs(jnum(s0, "read_iops") - 10.0) < 1e-6);
    ck_assert(fabs(jnum(s0, "cpu_pct") - 2.0) < 1e-6);
    json_decref(h);

    /* pruning drops old samples and those of deleted exports */
    mon_db_prune(&db, wall + 1);
    ck_assert_int_eq(db_int(&db, -1, "SELECT count(*) FROM stats_minute", ""), 0);
    monitor_free(m);

    /* export removed from the appliance -> dropped from the monitor */
    ck_assert_int_eq(db_open(&db, path, err, sizeof err), 0);
    m = monitor_new(&a, &db);
    monitor_tick(m, wall, mono);
    free_exports(&a);
    monitor_tick(m, wall + 1, mono + 1000000000ull);
    st = monitor_stats_json(m);
    ck_assert_int_eq(json_array_size(json_object_get(st, "exports")), 0);
    json_decref(st);
    monitor_free(m);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(thread_starts_and_stops)
{
    struct appliance a;
    memset(&a, 0, sizeof a);
    pthread_mutex_init(&a.lock, NULL);
    struct export_rt *e = add_export(&a, EXPORT_ISCSI, 1, "t1");
    struct monitor *m = monitor_new(&a, NULL);
    ck_assert_int_eq(monitor_start_thread(m), 0);
    for (int i = 0; i < 25; i++) {
        nasd_stats_record(e->stats, NASD_OP_WRITE, 512, 50000, 1000, 0);
        usleep(100000);
    }
    json_t *h = monitor_history_json(m, "iscsi", 1, 300);
    ck_assert_int_ge(json_array_size(json_object_get(h, "samples")), 1);
    json_decref(h);
    monitor_free(m);
    free_exports(&a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("monitor");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, rates_from_deltas);
    tcase_add_test(tc, percentile_from_histogram);
    tcase_add_test(tc, ring_wraps);
    tcase_add_test(tc, monitor_ticks_and_persists);
    tcase_add_test(tc, thread_starts_and_stops);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
