#pragma once
/* Monitoring and self-test REST resources (api/stats.c, api/selftest.c). The daemon
 * attaches the monitor and the self-test manager, then registers the resources. */
#include "api/api.h"
#include "selftest/selftest.h"

struct monitor;

extern const struct api_resource api_stats, api_jobs;

void api_stats_attach(struct monitor *m);
/* Prometheus text exposition for GET /metrics (an http_text_fn). */
char *api_metrics_text(struct appliance *a, const char **content_type);

/* Called through pointers so that binaries linking api/ without selftest/ (narrow
 * component builds, REST unit tests) still link; the daemon passes the selftest_* functions. */
struct api_selftest_backend {
    struct selftest_mgr *mgr;
    int (*submit)(struct selftest_mgr *m, const struct selftest_req *q, int64_t *job_id, char *err, size_t errlen);
    json_t *(*job)(struct selftest_mgr *m, int64_t id);
    json_t *(*jobs)(struct selftest_mgr *m, int limit);
};
void api_selftest_attach(const struct api_selftest_backend *b);
/* POST /exports/{iscsi|nfs}/{id|name}/selftest: the .action of the export resources. */
void api_iscsi_export_action(struct api_call *c, struct api_reply *r);
void api_nfs_export_action(struct api_call *c, struct api_reply *r);
