/* Minute samples in SQLite (table stats_minute, schema migration 2). */
#include "nasd/appliance/monitor.h"

int mon_db_save(nasd_db *db, const char *type, int64_t id, const struct mon_sample *s)
{
    return db_exec(db, NULL,
        "INSERT OR REPLACE INTO stats_minute(export_type, export_id, minute, read_iops, write_iops, other_iops, "
        "read_bps, write_bps, lat_p50_us, lat_p99_us, cpu_pct, errors) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
        "siiddddddddi", type, id, s->t, s->read_iops, s->write_iops, s->other_iops, s->read_bps, s->write_bps,
        s->lat_p50_us, s->lat_p99_us, s->cpu_pct, (int64_t)s->errors);
}

static double num(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

int mon_db_load(nasd_db *db, const char *type, int64_t id, int64_t since, struct mon_ring *r)
{
    json_t *rows = db_rows(db, "SELECT * FROM (SELECT * FROM stats_minute WHERE export_type=? AND export_id=? "
                           "AND minute>=? ORDER BY minute DESC LIMIT ?) ORDER BY minute",
                           "siii", type, id, since, (int64_t)r->cap);
    size_t i;
    json_t *v;
    json_array_foreach(rows, i, v) {
        struct mon_sample s = {
            .t = json_integer_value(json_object_get(v, "minute")),
            .read_iops = num(v, "read_iops"), .write_iops = num(v, "write_iops"), .other_iops = num(v, "other_iops"),
            .read_bps = num(v, "read_bps"), .write_bps = num(v, "write_bps"),
            .lat_p50_us = num(v, "lat_p50_us"), .lat_p99_us = num(v, "lat_p99_us"), .cpu_pct = num(v, "cpu_pct"),
            .errors = (uint64_t)json_integer_value(json_object_get(v, "errors")),
        };
        mon_ring_push(r, &s);
    }
    int n = rows ? (int)json_array_size(rows) : 0;
    json_decref(rows);
    return n;
}

void mon_db_prune(nasd_db *db, int64_t before)
{
    db_exec(db, NULL, "DELETE FROM stats_minute WHERE minute<?", "i", before);
    /* ids can be reused after a delete: drop the history of exports that are gone */
    db_exec(db, NULL, "DELETE FROM stats_minute WHERE (export_type='iscsi' AND export_id NOT IN "
            "(SELECT id FROM iscsi_exports)) OR (export_type='nfs' AND export_id NOT IN (SELECT id FROM nfs_exports))", "");
}

void mon_db_forget(nasd_db *db, const char *type, int64_t id)
{
    db_exec(db, NULL, "DELETE FROM stats_minute WHERE export_type=? AND export_id=?", "si", type, id);
}
