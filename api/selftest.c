/* POST /api/v1/exports/{iscsi|nfs}/{id|name}/selftest and GET /api/v1/jobs[/id]. */
#include "api/monitoring.h"
#include "selftest/selftest.h"
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct api_selftest_backend be;

void api_selftest_attach(const struct api_selftest_backend *b) { be = *b; }

static int ready(struct api_reply *r)
{
    if (be.mgr) return 1;
    api_error(r, 503, "service_unavailable", "self-tests are not available");
    return 0;
}

static void start_selftest(struct api_call *c, struct api_reply *r, enum export_type type, int64_t export_id)
{
    static const char *const allowed[] = { "pattern", "seconds", "queue_depth", "destructive", NULL };
    const char *pattern = NULL;
    int64_t seconds = 10, qd = 8;
    int destructive = 0;
    if (api_body_object(c, r, allowed) || api_get_str(c, r, "pattern", 1, &pattern) ||
        api_get_int(c, r, "seconds", 1, ST_MAX_SECONDS, &seconds) ||
        api_get_int(c, r, "queue_depth", 1, ST_MAX_QD, &qd) || api_get_bool(c, r, "destructive", &destructive))
        return;
    struct selftest_req q = { .type = type, .export_id = export_id, .pattern = st_pattern_parse(pattern),
                              .seconds = (int)seconds, .queue_depth = (int)qd, .destructive = destructive };
    if (q.pattern < 0) {
        api_error(r, 400, "invalid_field", "pattern must be 4k-randread, 512-seqread, 4k-randwrite or metadata");
        return;
    }
    char err[512];
    int64_t id;
    int rc = be.submit(be.mgr, &q, &id, err, sizeof err);
    switch (-rc) {
    case 0: api_ok(r, 202, be.job(be.mgr, id)); break;
    case EBUSY: api_error(r, 409, "busy", "%s", err); break;
    case EROFS: api_error(r, 409, "read_only", "%s", err); break;
    case ENOTCONN: api_error(r, 409, "not_served", "%s", err); break;
    default: api_errno(r, rc, err); break;
    }
}

static void export_action(struct api_call *c, struct api_reply *r, enum export_type type)
{
    if (strcmp(c->action, "selftest")) { api_error(r, 404, "not_found", "no such export action: %s", c->action); return; }
    if (strcmp(c->method, "POST")) { api_error(r, 405, "method_not_allowed", "use POST to start a self-test"); return; }
    if (!ready(r)) return;
    int64_t id = type == EXPORT_ISCSI
        ? api_lookup(c, r, "iSCSI export", "SELECT id FROM iscsi_exports WHERE id=?", "SELECT id FROM iscsi_exports WHERE name=?")
        : api_lookup(c, r, "NFS export", "SELECT id FROM nfs_exports WHERE id=?", "SELECT id FROM nfs_exports WHERE name=?");
    if (id >= 0) start_selftest(c, r, type, id);
}

void api_iscsi_export_action(struct api_call *c, struct api_reply *r) { export_action(c, r, EXPORT_ISCSI); }
void api_nfs_export_action(struct api_call *c, struct api_reply *r) { export_action(c, r, EXPORT_NFS); }

static void jobs_list(struct api_call *c, struct api_reply *r)
{
    if (ready(r)) api_ok(r, 200, be.jobs(be.mgr, ST_JOBS_LIST_LIMIT));
}

static void jobs_get(struct api_call *c, struct api_reply *r)
{
    if (!ready(r)) return;
    const char *k = c->key;
    int digits = *k && strlen(k) <= 18;
    for (const char *p = k; *p; p++) digits &= isdigit((unsigned char)*p) != 0;
    json_t *j = digits ? be.job(be.mgr, atoll(k)) : NULL;
    if (!j) { api_error(r, 404, "not_found", "job \"%s\" not found", k); return; }
    api_ok(r, 200, j);
}

const struct api_resource api_jobs = { .prefix = "jobs", .list = jobs_list, .get = jobs_get };
