#pragma once
/* SQLite access: schema migrations, and a small row<->JSON mapping so the REST
 * layer can move rows to and from Jansson objects without per-table code. */
#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>

typedef struct nasd_db {
    sqlite3 *h;
} nasd_db;

/* Open (create) the DB: WAL, foreign keys on, migrations applied. 0 or -1 with err. */
int db_open(nasd_db *db, const char *path, char *err, size_t errlen);
void db_close(nasd_db *db);
int db_schema_version(nasd_db *db);
int db_latest_schema_version(void);

/* Bind format characters for the variadic arguments:
 *   i int64_t, s const char* (NULL -> SQL NULL), j json_t* (stored as JSON text), d double */
/* Run one statement; returns SQLITE_DONE/SQLITE_OK as 0, else the sqlite error code
 * (SQLITE_CONSTRAINT_* for clashes). *last_id gets the rowid of an INSERT if non-NULL. */
int db_exec(nasd_db *db, int64_t *last_id, const char *sql, const char *fmt, ...);
/* Query rows as a JSON array of objects keyed by column name (INTEGER -> integer,
 * REAL -> real, TEXT -> string, NULL -> null). Columns named *_json are parsed as JSON.
 * NULL on SQL error. */
json_t *db_rows(nasd_db *db, const char *sql, const char *fmt, ...);
/* First row or NULL when none (or on error). */
json_t *db_row(nasd_db *db, const char *sql, const char *fmt, ...);
/* Single integer of the first column of the first row; dflt when no row. */
int64_t db_int(nasd_db *db, int64_t dflt, const char *sql, const char *fmt, ...);
const char *db_errmsg(nasd_db *db);

int db_begin(nasd_db *db);
int db_commit(nasd_db *db);
void db_rollback(nasd_db *db);

/* settings table */
char *db_setting_get(nasd_db *db, const char *key);           /* malloc'd or NULL */
int db_setting_set(nasd_db *db, const char *key, const char *value);
