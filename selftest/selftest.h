#pragma once
/* Protocol self-tests: a job connects to one export over the real protocol from
 * inside nasd (libiscsi / libnfs), runs a timed I/O pattern at a queue depth,
 * measures IOPS, MB/s and latency, and checks data integrity. Jobs and their
 * results live in SQLite (table selftest_jobs) so they survive restarts. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include "db/db.h"
#include "nasd/appliance/appliance.h"

enum st_pattern { ST_4K_RANDREAD = 0, ST_512_SEQREAD, ST_4K_RANDWRITE, ST_METADATA, ST_PATTERNS };

#define ST_MAX_SECONDS 300
#define ST_MAX_QD 256
#define ST_MAX_RUNNING 4      /* self-tests at once (each up to ST_MAX_QD I/Os and its own threads) */
#define ST_JOBS_LIST_LIMIT 50
#define ST_JOBS_KEEP 1000     /* older jobs are deleted when a new one starts */

static const char *const st_pattern_names[ST_PATTERNS] = { "4k-randread", "512-seqread", "4k-randwrite", "metadata" };
static inline int st_pattern_parse(const char *s) /* -1 if unknown */
{
    for (int i = 0; s && i < ST_PATTERNS; i++)
        if (!strcmp(s, st_pattern_names[i])) return i;
    return -1;
}
static inline const char *st_pattern_name(int p) { return p >= 0 && p < ST_PATTERNS ? st_pattern_names[p] : "?"; }

struct selftest_req {
    enum export_type type;
    int64_t export_id;
    int pattern, seconds, queue_depth, destructive;
};

struct selftest_mgr;

/* db: the manager's own connection (owned, closed on free). Jobs left "running" by
 * a previous process are marked failed. */
struct selftest_mgr *selftest_new(struct appliance *a, nasd_db *db);
/* Opens its own DB connection on a->cfg.db_path. */
struct selftest_mgr *selftest_start(struct appliance *a, char *err, size_t errlen);
/* Cancels running jobs, waits for their threads, frees everything. */
void selftest_stop(struct selftest_mgr *m);

/* Validates the request against the export and starts a job thread.
 * 0 with *job_id, or -errno with a message: -ENOENT export unknown, -EINVAL not
 * applicable / needs {"destructive":true}, -EBUSY a job already runs on the export,
 * -ENOTCONN service or export not running, -EROFS read-only export. */
int selftest_submit(struct selftest_mgr *m, const struct selftest_req *req, int64_t *job_id,
                    char *err, size_t errlen);
/* Job JSON (see notes/api.md), NULL if unknown. */
json_t *selftest_job_json(struct selftest_mgr *m, int64_t id);
/* Newest first, at most limit. */
json_t *selftest_jobs_json(struct selftest_mgr *m, int limit);
/* Block until the job is no longer running (tests); 0, or -1 on timeout. */
int selftest_wait(struct selftest_mgr *m, int64_t id, int timeout_ms);
