/* SQLite connection, binding helpers and row -> JSON mapping. */
#include "db/db.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int db_migrate(nasd_db *db, char *err, size_t errlen);

/* The DB holds CHAP secrets and token hashes: owner only. SQLite gives -wal and -shm the
 * mode of the main file, so that file is created 0600 (or tightened) before SQLite opens
 * it; any -wal/-shm left by an older nasd are tightened too. */
static int db_file_private(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) { snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno)); return -1; }
    struct stat st;
    if (fstat(fd, &st) == 0 && (st.st_mode & 077) && fchmod(fd, st.st_mode & 0700) < 0) {
        snprintf(err, errlen, "cannot make %s private: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    static const char *const sfx[] = { "-wal", "-shm", "-journal" };
    for (int i = 0; i < 3; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        if (stat(p, &st) == 0 && (st.st_mode & 077)) (void)chmod(p, st.st_mode & 0700);
    }
    return 0;
}

int db_open(nasd_db *db, const char *path, char *err, size_t errlen)
{
    db->h = NULL;
    if (strcmp(path, ":memory:") && path[0] && db_file_private(path, err, errlen)) return -1;
    if (sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                        SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", path, db->h ? sqlite3_errmsg(db->h) : "out of memory");
        db_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db->h, 5000);
    char *msg = NULL;
    if (sqlite3_exec(db->h, "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; PRAGMA synchronous=FULL;",
                     NULL, NULL, &msg) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, msg);
        sqlite3_free(msg);
        db_close(db);
        return -1;
    }
    if (db_migrate(db, err, errlen) < 0) { db_close(db); return -1; }
    return 0;
}

void db_close(nasd_db *db)
{
    if (db->h) sqlite3_close_v2(db->h);
    db->h = NULL;
}

const char *db_errmsg(nasd_db *db) { return sqlite3_errmsg(db->h); }

static int bind_args(sqlite3_stmt *st, const char *fmt, va_list ap)
{
    for (int i = 0; fmt && fmt[i]; i++) {
        int rc = SQLITE_OK;
        switch (fmt[i]) {
        case 'i': rc = sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t)); break;
        case 'd': rc = sqlite3_bind_double(st, i + 1, va_arg(ap, double)); break;
        case 's': {
            const char *s = va_arg(ap, const char *);
            rc = s ? sqlite3_bind_text(st, i + 1, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i + 1);
            break;
        }
        case 'j': {
            char *s = json_dumps(va_arg(ap, json_t *), JSON_COMPACT | JSON_ENCODE_ANY);
            rc = s ? sqlite3_bind_text(st, i + 1, s, -1, free) : sqlite3_bind_null(st, i + 1);
            break;
        }
        default: return SQLITE_MISUSE;
        }
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

static sqlite3_stmt *prepare(nasd_db *db, const char *sql, const char *fmt, va_list ap, int *rc)
{
    sqlite3_stmt *st = NULL;
    *rc = sqlite3_prepare_v2(db->h, sql, -1, &st, NULL);
    if (*rc != SQLITE_OK) return NULL;
    *rc = bind_args(st, fmt, ap);
    if (*rc != SQLITE_OK) { sqlite3_finalize(st); return NULL; }
    return st;
}

int db_exec(nasd_db *db, int64_t *last_id, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc;
    sqlite3_stmt *st = prepare(db, sql, fmt, ap, &rc);
    va_end(ap);
    if (!st) return rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {}
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    else rc = sqlite3_extended_errcode(db->h);
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && last_id) *last_id = sqlite3_last_insert_rowid(db->h);
    return rc;
}

static json_t *column_json(sqlite3_stmt *st, int c)
{
    const char *name = sqlite3_column_name(st, c);
    size_t nl = strlen(name);
    switch (sqlite3_column_type(st, c)) {
    case SQLITE_INTEGER: return json_integer(sqlite3_column_int64(st, c));
    case SQLITE_FLOAT: return json_real(sqlite3_column_double(st, c));
    case SQLITE_NULL: return json_null();
    default: {
        const char *t = (const char *)sqlite3_column_text(st, c);
        if (nl > 5 && !strcmp(name + nl - 5, "_json")) {
            json_t *j = json_loads(t, JSON_DECODE_ANY, NULL);
            if (j) return j;
        }
        return json_string(t ? t : "");
    }
    }
}

static json_t *vrows(nasd_db *db, int limit, const char *sql, const char *fmt, va_list ap)
{
    int rc;
    sqlite3_stmt *st = prepare(db, sql, fmt, ap, &rc);
    if (!st) return NULL;
    json_t *arr = json_array();
    while ((limit <= 0 || (int)json_array_size(arr) < limit) && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *o = json_object();
        for (int c = 0; c < sqlite3_column_count(st); c++) {
            const char *name = sqlite3_column_name(st, c);
            size_t nl = strlen(name);
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)(nl > 5 && !strcmp(name + nl - 5, "_json") ? nl - 5 : nl), name);
            json_object_set_new(o, key, column_json(st, c));
        }
        json_array_append_new(arr, o);
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE && rc != SQLITE_OK) { json_decref(arr); arr = NULL; }
    sqlite3_finalize(st);
    return arr;
}

json_t *db_rows(nasd_db *db, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    json_t *r = vrows(db, 0, sql, fmt, ap);
    va_end(ap);
    return r;
}

json_t *db_row(nasd_db *db, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    json_t *r = vrows(db, 1, sql, fmt, ap);
    va_end(ap);
    json_t *row = r && json_array_size(r) ? json_incref(json_array_get(r, 0)) : NULL;
    json_decref(r);
    return row;
}

int64_t db_int(nasd_db *db, int64_t dflt, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc;
    sqlite3_stmt *st = prepare(db, sql, fmt, ap, &rc);
    va_end(ap);
    if (!st) return dflt;
    int64_t v = dflt;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

int db_schema_version(nasd_db *db)
{
    return (int)db_int(db, 0, "SELECT version FROM schema_version", "");
}

int db_begin(nasd_db *db) { return sqlite3_exec(db->h, "BEGIN IMMEDIATE", NULL, NULL, NULL); }
int db_commit(nasd_db *db) { return sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL); }
void db_rollback(nasd_db *db) { sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL); }

char *db_setting_get(nasd_db *db, const char *key)
{
    json_t *r = db_row(db, "SELECT value FROM settings WHERE key=?", "s", key);
    char *v = r ? strdup(json_string_value(json_object_get(r, "value"))) : NULL;
    json_decref(r);
    return v;
}

int db_setting_set(nasd_db *db, const char *key, const char *value)
{
    return db_exec(db, NULL, "INSERT INTO settings(key,value) VALUES(?,?) "
                   "ON CONFLICT(key) DO UPDATE SET value=excluded.value", "ss", key, value);
}
