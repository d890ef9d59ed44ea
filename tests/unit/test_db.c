/* DB layer: migrations, constraints, row <-> JSON mapping, settings. */
#include "db/db.h"
#include "tests/unit/check_main.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static nasd_db db;
static char path[] = "/tmp/nasd-test-db-XXXXXX";

static void setup(void)
{
    char err[256];
    int fd = mkstemp(path);
    close(fd);
    unlink(path);
    ck_assert_msg(db_open(&db, path, err, sizeof err) == 0, "%s", err);
}

static void teardown(void)
{
    char p[300];
    db_close(&db);
    unlink(path);
    snprintf(p, sizeof p, "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", path);
    unlink(p);
    strcpy(path, "/tmp/nasd-test-db-XXXXXX");
}

START_TEST(migrations_and_pragmas)
{
    ck_assert_int_eq(db_schema_version(&db), db_latest_schema_version());
    json_t *r = db_row(&db, "PRAGMA journal_mode", "");
    ck_assert_str_eq(json_string_value(json_object_get(r, "journal_mode")), "wal");
    json_decref(r);
    ck_assert_int_eq(db_int(&db, -1, "PRAGMA foreign_keys", ""), 1);
    /* reopening does not re-run migrations */
    char err[256];
    db_close(&db);
    ck_assert_int_eq(db_open(&db, path, err, sizeof err), 0);
    ck_assert_int_eq(db_int(&db, -1, "SELECT count(*) FROM schema_version", ""), 1);
}
END_TEST

/* Reopens the database, which runs the migrations from the version it records. */
static void reopen_migrated(void)
{
    char err[256];
    db_close(&db);
    ck_assert_msg(db_open(&db, path, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(db_schema_version(&db), db_latest_schema_version());
}

/* Migration 4 rebuilds the pools table (layout 'ceph'): rows of a version-3 database, and the
 * references of members and volumes to their pool, must come through. Migration 5 gives an
 * existing iSCSI export immediate_data 0. */
START_TEST(pools_rebuild_keeps_rows)
{
    ck_assert_int_eq(db_exec(&db, NULL, "DROP TABLE ceph_pools", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "ALTER TABLE iscsi_exports DROP COLUMN immediate_data", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO iscsi_exports(name, iqn, created) VALUES('t','iqn.x:t',1)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "UPDATE schema_version SET version=3", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO pools(id, name, layout, created) VALUES(7,'tank','mirror',1)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO pool_members(pool_id, idx, path, size) VALUES(7,0,'/d0',1)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO volumes(pool_id, name, size, created) VALUES(7,'v',1,1)", ""), 0);
    reopen_migrated();
    ck_assert_int_eq(db_int(&db, -1, "PRAGMA foreign_keys", ""), 1);
    ck_assert_int_eq(db_int(&db, -1, "SELECT immediate_data FROM iscsi_exports WHERE name='t'", ""), 0);
    ck_assert_int_eq(db_int(&db, -1, "SELECT count(*) FROM pools p JOIN pool_members m ON m.pool_id=p.id "
                            "JOIN volumes v ON v.pool_id=p.id WHERE p.name='tank' AND p.layout='mirror'", ""), 1);
    /* the references still work: a pool with volumes cannot go, members cascade */
    ck_assert_int_ne(db_exec(&db, NULL, "DELETE FROM pools WHERE id=7", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "DELETE FROM volumes WHERE pool_id=7", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO pools(id, name, layout, created) VALUES(8,'c','ceph',1)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO ceph_pools(pool_id, rados_pool) VALUES(8,'rbd')", ""), 0);
    ck_assert_int_ne(db_exec(&db, NULL, "INSERT INTO pools(name, layout, created) VALUES('x','zfs',1)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "DELETE FROM pools WHERE id IN (7, 8)", ""), 0);
    ck_assert_int_eq(db_int(&db, -1, "SELECT count(*) FROM pool_members", ""), 0);
    ck_assert_int_eq(db_int(&db, -1, "SELECT count(*) FROM ceph_pools", ""), 0);
}
END_TEST

/* Migration 7 renames layouts: a version-6 "raidz1" pool (in place) becomes "raidz1-inplace",
 * a "raidz1-log" pool becomes "raidz1"; the other layouts stay. */
START_TEST(layout_names_migrated)
{
    /* the version-6 pools table, whose CHECK still allows 'raidz1-log' */
    ck_assert_int_eq(db_exec(&db, NULL, "PRAGMA foreign_keys=OFF", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "CREATE TABLE pools_old(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
                             " layout TEXT NOT NULL CHECK(layout IN ('stripe','mirror','raidz1','raidz1-log','ceph')),"
                             " comment TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "DROP TABLE pools", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "ALTER TABLE pools_old RENAME TO pools", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO pools(id, name, layout, created) VALUES(1,'old','raidz1',1),"
                             "(2,'log','raidz1-log',1),(3,'m','mirror',1)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO volumes(pool_id, name, size, created) VALUES(2,'v',1,1)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "UPDATE schema_version SET version=6", ""), 0);
    reopen_migrated();
    ck_assert_int_eq(db_int(&db, -1, "SELECT count(*) FROM pools WHERE id=1 AND layout='raidz1-inplace'", ""), 1);
    ck_assert_int_eq(db_int(&db, -1, "SELECT count(*) FROM pools WHERE id=2 AND layout='raidz1'", ""), 1);
    ck_assert_int_eq(db_int(&db, -1, "SELECT count(*) FROM pools WHERE id=3 AND layout='mirror'", ""), 1);
    ck_assert_int_eq(db_int(&db, -1, "SELECT count(*) FROM volumes v JOIN pools p ON p.id=v.pool_id "
                            "WHERE p.name='log'", ""), 1);
    /* the old name is no longer a layout the table takes */
    ck_assert_int_ne(db_exec(&db, NULL, "INSERT INTO pools(name, layout, created) VALUES('x','raidz1-log',1)", ""), 0);
}
END_TEST

START_TEST(newer_schema_refused)
{
    char err[256];
    db_exec(&db, NULL, "UPDATE schema_version SET version=999", "");
    db_close(&db);
    ck_assert_int_eq(db_open(&db, path, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "newer"));
    ck_assert_ptr_null(db.h);
    /* leave a usable handle for teardown */
    sqlite3_open(path, &db.h);
}
END_TEST

START_TEST(rows_as_json)
{
    int64_t id;
    ck_assert_int_eq(db_exec(&db, &id, "INSERT INTO pools(name, layout, created) VALUES(?,?,?)", "ssi", "tank", "raidz1",
                             (int64_t)42), 0);
    ck_assert_int_gt(id, 0);
    json_t *inits = json_pack("[s,s]", "iqn.2026-12.a:b", "iqn.2026-12.c:d");
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO iscsi_exports(name, iqn, initiators_json, created) VALUES(?,?,?,?)",
                             "ssji", "t1", "iqn.2026-12.io.nasd:t1", inits, (int64_t)1), 0);
    json_decref(inits);
    json_t *rows = db_rows(&db, "SELECT id, name, layout, created, NULL AS missing, 1.5 AS half FROM pools", "");
    ck_assert_int_eq(json_array_size(rows), 1);
    json_t *p = json_array_get(rows, 0);
    ck_assert_str_eq(json_string_value(json_object_get(p, "name")), "tank");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "created")), 42);
    ck_assert(json_is_null(json_object_get(p, "missing")));
    ck_assert(json_real_value(json_object_get(p, "half")) == 1.5);
    json_decref(rows);
    json_t *e = db_row(&db, "SELECT initiators_json FROM iscsi_exports", "");
    json_t *arr = json_object_get(e, "initiators"); /* _json suffix dropped and parsed */
    ck_assert(json_is_array(arr));
    ck_assert_str_eq(json_string_value(json_array_get(arr, 1)), "iqn.2026-12.c:d");
    json_decref(e);
    ck_assert_ptr_null(db_row(&db, "SELECT * FROM pools WHERE name=?", "s", "nope"));
    ck_assert_ptr_null(db_rows(&db, "SELECT * FROM no_such_table", ""));
}
END_TEST

START_TEST(constraints)
{
    int64_t pid, vid;
    ck_assert_int_eq(db_exec(&db, &pid, "INSERT INTO pools(name, layout, created) VALUES('tank','mirror',1)", ""), 0);
    /* unique name */
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO pools(name, layout, created) VALUES('tank','mirror',1)", "") & 0xff,
                     SQLITE_CONSTRAINT);
    /* layout check */
    ck_assert_int_ne(db_exec(&db, NULL, "INSERT INTO pools(name, layout, created) VALUES('x','raid5',1)", ""), 0);
    ck_assert_int_eq(db_exec(&db, &vid, "INSERT INTO volumes(pool_id, name, size, created) VALUES(?,'v',1048576,1)", "i", pid), 0);
    /* foreign keys: a pool with volumes cannot go; a volume used as a LUN cannot go */
    ck_assert_int_ne(db_exec(&db, NULL, "DELETE FROM pools WHERE id=?", "i", pid), 0);
    int64_t eid;
    ck_assert_int_eq(db_exec(&db, &eid, "INSERT INTO iscsi_exports(name, iqn, created) VALUES('t','iqn.2026-12.x:t',1)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO iscsi_luns(export_id, lun, volume_id) VALUES(?,0,?)", "ii", eid, vid), 0);
    ck_assert_int_ne(db_exec(&db, NULL, "DELETE FROM volumes WHERE id=?", "i", vid), 0);
    ck_assert_int_ne(db_exec(&db, NULL, "INSERT INTO iscsi_luns(export_id, lun, volume_id) VALUES(?,1,999)", "i", eid), 0);
    /* deleting the export cascades to its LUNs, then the volume may go */
    ck_assert_int_eq(db_exec(&db, NULL, "DELETE FROM iscsi_exports WHERE id=?", "i", eid), 0);
    ck_assert_int_eq(db_int(&db, -1, "SELECT count(*) FROM iscsi_luns", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "DELETE FROM volumes WHERE id=?", "i", vid), 0);
}
END_TEST

START_TEST(transactions_and_settings)
{
    db_begin(&db);
    db_exec(&db, NULL, "INSERT INTO pools(name, layout, created) VALUES('t','stripe',1)", "");
    db_rollback(&db);
    ck_assert_int_eq(db_int(&db, -1, "SELECT count(*) FROM pools", ""), 0);
    ck_assert_ptr_null(db_setting_get(&db, "k"));
    ck_assert_int_eq(db_setting_set(&db, "k", "v1"), 0);
    ck_assert_int_eq(db_setting_set(&db, "k", "v2"), 0);
    char *v = db_setting_get(&db, "k");
    ck_assert_str_eq(v, "v2");
    free(v);
}
END_TEST

static unsigned mode_of(const char *suffix)
{
    char p[300];
    struct stat st;
    snprintf(p, sizeof p, "%s%s", path, suffix);
    ck_assert_msg(stat(p, &st) == 0, "%s missing", p);
    return st.st_mode & 0777;
}

/* The DB holds secrets: it and its -wal/-shm are owner-only whatever the umask, and
 * an existing world-readable DB is tightened on open. */
START_TEST(private_files)
{
    char err[256];
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO settings(key, value) VALUES('x', 'y')", ""), 0);
    ck_assert_uint_eq(mode_of(""), 0600);
    ck_assert_uint_eq(mode_of("-wal"), 0600);
    ck_assert_uint_eq(mode_of("-shm"), 0600);
    db_close(&db);
    chmod(path, 0644);
    mode_t old = umask(0);
    ck_assert_msg(db_open(&db, path, err, sizeof err) == 0, "%s", err);
    umask(old);
    ck_assert_uint_eq(mode_of(""), 0600);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("db");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, migrations_and_pragmas);
    tcase_add_test(tc, layout_names_migrated);
    tcase_add_test(tc, newer_schema_refused);
    tcase_add_test(tc, pools_rebuild_keeps_rows);
    tcase_add_test(tc, rows_as_json);
    tcase_add_test(tc, constraints);
    tcase_add_test(tc, transactions_and_settings);
    tcase_add_test(tc, private_files);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
