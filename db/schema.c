/* Schema migrations: each entry moves the schema from version i to i+1. Never edit
 * a released entry; append a new one. */
#include "db/db.h"
#include "util/log.h"
#include <stdio.h>

static const char *migrations[] = {
    /* 1: initial configuration schema */
    "CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
    "  password_hash TEXT, created INTEGER NOT NULL);"
    "CREATE TABLE api_tokens(id INTEGER PRIMARY KEY,"
    "  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
    "  token_hash TEXT UNIQUE NOT NULL, description TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL);"
    "CREATE TABLE pools(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
    "  layout TEXT NOT NULL CHECK(layout IN ('stripe','mirror','raidz1')),"
    "  comment TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL);"
    "CREATE TABLE pool_members(id INTEGER PRIMARY KEY,"
    "  pool_id INTEGER NOT NULL REFERENCES pools(id) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL, path TEXT UNIQUE NOT NULL, size INTEGER NOT NULL, UNIQUE(pool_id, idx));"
    "CREATE TABLE datasets(id INTEGER PRIMARY KEY,"
    "  pool_id INTEGER NOT NULL REFERENCES pools(id) ON DELETE RESTRICT, name TEXT NOT NULL,"
    "  quota INTEGER NOT NULL DEFAULT 0, compression TEXT NOT NULL DEFAULT 'off',"
    "  comment TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL, UNIQUE(pool_id, name));"
    "CREATE TABLE volumes(id INTEGER PRIMARY KEY,"
    "  pool_id INTEGER NOT NULL REFERENCES pools(id) ON DELETE RESTRICT, name TEXT NOT NULL,"
    "  size INTEGER NOT NULL, block_size INTEGER NOT NULL DEFAULT 512,"
    "  compression TEXT NOT NULL DEFAULT 'off', comment TEXT NOT NULL DEFAULT '',"
    "  created INTEGER NOT NULL, UNIQUE(pool_id, name));"
    "CREATE TABLE iscsi_exports(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
    "  iqn TEXT UNIQUE NOT NULL, alias TEXT NOT NULL DEFAULT '',"
    "  chap_user TEXT NOT NULL DEFAULT '', chap_secret TEXT NOT NULL DEFAULT '',"
    "  mutual_user TEXT NOT NULL DEFAULT '', mutual_secret TEXT NOT NULL DEFAULT '',"
    "  initiators_json TEXT NOT NULL DEFAULT '[]', enabled INTEGER NOT NULL DEFAULT 1,"
    "  created INTEGER NOT NULL);"
    "CREATE TABLE iscsi_luns(export_id INTEGER NOT NULL REFERENCES iscsi_exports(id) ON DELETE CASCADE,"
    "  lun INTEGER NOT NULL, volume_id INTEGER NOT NULL REFERENCES volumes(id) ON DELETE RESTRICT,"
    "  PRIMARY KEY(export_id, lun));"
    "CREATE TABLE nfs_exports(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
    "  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE RESTRICT,"
    "  path TEXT UNIQUE NOT NULL, clients_json TEXT NOT NULL DEFAULT '[]',"
    "  read_only INTEGER NOT NULL DEFAULT 0, root_squash INTEGER NOT NULL DEFAULT 1,"
    "  all_squash INTEGER NOT NULL DEFAULT 0, anonuid INTEGER NOT NULL DEFAULT 65534,"
    "  anongid INTEGER NOT NULL DEFAULT 65534, enabled INTEGER NOT NULL DEFAULT 1,"
    "  created INTEGER NOT NULL);",
    /* 2: monitoring history (per-minute samples, pruned after 7 days) and self-test jobs */
    "CREATE TABLE stats_minute(export_type TEXT NOT NULL, export_id INTEGER NOT NULL, minute INTEGER NOT NULL,"
    "  read_iops REAL NOT NULL, write_iops REAL NOT NULL, other_iops REAL NOT NULL,"
    "  read_bps REAL NOT NULL, write_bps REAL NOT NULL, lat_p50_us REAL NOT NULL, lat_p99_us REAL NOT NULL,"
    "  cpu_pct REAL NOT NULL, errors INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY(export_type, export_id, minute)) WITHOUT ROWID;"
    "CREATE INDEX stats_minute_time ON stats_minute(minute);"
    "CREATE TABLE selftest_jobs(id INTEGER PRIMARY KEY AUTOINCREMENT, export_type TEXT NOT NULL,"
    "  export_id INTEGER NOT NULL, export_name TEXT NOT NULL, pattern TEXT NOT NULL, seconds INTEGER NOT NULL,"
    "  queue_depth INTEGER NOT NULL, destructive INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL,"
    "  progress REAL NOT NULL DEFAULT 0, started INTEGER NOT NULL, finished INTEGER,"
    "  result_json TEXT, timeline_json TEXT NOT NULL DEFAULT '[]', error TEXT);",
    /* 3: read-only exports of snapshots, periodic snapshot and replication tasks */
    "ALTER TABLE iscsi_luns ADD COLUMN snapshot TEXT;"
    "ALTER TABLE nfs_exports ADD COLUMN snapshot TEXT;"
    "CREATE TABLE snapshot_tasks(id INTEGER PRIMARY KEY, kind TEXT NOT NULL, pool TEXT NOT NULL, name TEXT NOT NULL,"
    "  interval_s INTEGER NOT NULL, keep INTEGER NOT NULL, prefix TEXT NOT NULL DEFAULT 'auto',"
    "  enabled INTEGER NOT NULL DEFAULT 1, last_run INTEGER NOT NULL DEFAULT 0, last_error TEXT,"
    "  created INTEGER NOT NULL);"
    "CREATE TABLE replication_tasks(id INTEGER PRIMARY KEY, kind TEXT NOT NULL, pool TEXT NOT NULL, name TEXT NOT NULL,"
    "  target_url TEXT NOT NULL, target_token TEXT NOT NULL DEFAULT '', target_pool TEXT NOT NULL,"
    "  target_name TEXT NOT NULL, interval_s INTEGER NOT NULL, keep INTEGER NOT NULL DEFAULT 2,"
    "  enabled INTEGER NOT NULL DEFAULT 1, last_run INTEGER NOT NULL DEFAULT 0, last_snapshot TEXT,"
    "  last_error TEXT, created INTEGER NOT NULL);",
    /* 4: pools on a Ceph cluster (layout 'ceph'; SQLite cannot change a CHECK in place, so
     * the pools table is rebuilt, with foreign keys off around the migrations) and their
     * connection settings; secret is the cephx key, never returned by the API */
    "CREATE TABLE pools_new(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
    "  layout TEXT NOT NULL CHECK(layout IN ('stripe','mirror','raidz1','ceph')),"
    "  comment TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL);"
    "INSERT INTO pools_new(id, name, layout, comment, created) SELECT id, name, layout, comment, created FROM pools;"
    "DROP TABLE pools;"
    "ALTER TABLE pools_new RENAME TO pools;"
    "CREATE TABLE ceph_pools(pool_id INTEGER PRIMARY KEY REFERENCES pools(id) ON DELETE CASCADE,"
    "  monitors TEXT NOT NULL DEFAULT '', conf TEXT NOT NULL DEFAULT '', rados_pool TEXT NOT NULL,"
    "  user TEXT NOT NULL DEFAULT 'admin', keyring TEXT NOT NULL DEFAULT '', secret TEXT NOT NULL DEFAULT '');",
    /* 5: iSCSI ImmediateData per export (iscsi_target_cfg.immediate_data) */
    "ALTER TABLE iscsi_exports ADD COLUMN immediate_data INTEGER NOT NULL DEFAULT 0;",
    /* 6: layout 'raidz1-log' (log-structured raidz1, pool format 3): the table rebuilt as in 4 */
    "CREATE TABLE pools_new(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
    "  layout TEXT NOT NULL CHECK(layout IN ('stripe','mirror','raidz1','raidz1-log','ceph')),"
    "  comment TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL);"
    "INSERT INTO pools_new(id, name, layout, comment, created) SELECT id, name, layout, comment, created FROM pools;"
    "DROP TABLE pools;"
    "ALTER TABLE pools_new RENAME TO pools;",
    /* 7: "raidz1" names the log-structured layout, the in-place one is "raidz1-inplace"
     * (the pools' formats are in their labels and do not change, only their names here) */
    "CREATE TABLE pools_new(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
    "  layout TEXT NOT NULL CHECK(layout IN ('stripe','mirror','raidz1','raidz1-inplace','ceph')),"
    "  comment TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL);"
    "INSERT INTO pools_new(id, name, layout, comment, created) SELECT id, name,"
    "  CASE layout WHEN 'raidz1' THEN 'raidz1-inplace' WHEN 'raidz1-log' THEN 'raidz1' ELSE layout END,"
    "  comment, created FROM pools;"
    "DROP TABLE pools;"
    "ALTER TABLE pools_new RENAME TO pools;",
};

int db_latest_schema_version(void) { return (int)(sizeof migrations / sizeof *migrations); }

int db_migrate(nasd_db *db, char *err, size_t errlen)
{
    char *msg = NULL;
    if (sqlite3_exec(db->h, "CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);",
                     NULL, NULL, &msg) != SQLITE_OK)
        goto fail;
    int v = db_schema_version(db);
    if (v > db_latest_schema_version()) {
        snprintf(err, errlen, "database schema version %d is newer than this nasd (%d)", v,
                 db_latest_schema_version());
        return -1;
    }
    /* a migration may rebuild a referenced table (the SQLite procedure for changing
     * constraints): references are checked before each commit instead */
    sqlite3_exec(db->h, "PRAGMA foreign_keys=OFF", NULL, NULL, NULL);
    for (; v < db_latest_schema_version(); v++) {
        if (sqlite3_exec(db->h, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK) goto fail;
        if (sqlite3_exec(db->h, migrations[v], NULL, NULL, &msg) != SQLITE_OK ||
            db_int(db, 0, "SELECT count(*) FROM pragma_foreign_key_check", "") != 0) {
            if (!msg) msg = sqlite3_mprintf("foreign key check failed");
            sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
            goto fail;
        }
        db_exec(db, NULL, "DELETE FROM schema_version", "");
        db_exec(db, NULL, "INSERT INTO schema_version(version) VALUES(?)", "i", (int64_t)v + 1);
        if (sqlite3_exec(db->h, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) goto fail;
        log_info("db: migrated schema to version %d", v + 1);
    }
    sqlite3_exec(db->h, "PRAGMA foreign_keys=ON", NULL, NULL, NULL);
    return 0;
fail:
    sqlite3_exec(db->h, "PRAGMA foreign_keys=ON", NULL, NULL, NULL);
    snprintf(err, errlen, "migration failed: %s", msg ? msg : sqlite3_errmsg(db->h));
    sqlite3_free(msg);
    return -1;
}
