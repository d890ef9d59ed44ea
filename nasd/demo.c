/* Demo appliance: a raidz1 pool (log-structured: the layout built for random writes and snapshots)
 * of four 1 GiB sparse files on an empty DB. */
#include "api/api.h"
#include "util/log.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int appliance_create_demo(struct appliance *a, char *err, size_t errlen)
{
    char dir[PATH_MAX], abs[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/disks", a->cfg.state_dir);
    mkdir(dir, 0755);
    if (!realpath(dir, abs)) { snprintf(err, errlen, "%s: cannot resolve", dir); return -1; }
    json_t *members = json_array();
    for (int i = 0; i < 4; i++) {
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/disk%d.img", abs, i);
        struct stat st;
        json_array_append_new(members, stat(p, &st) == 0 ? json_string(p)
                                                         : json_pack("{s:s, s:s, s:b}", "path", p, "size", "1G", "create", 1));
    }
    json_t *body = json_pack("{s:s, s:s, s:o, s:s}", "name", "tank", "layout", "raidz1", "members", members,
                             "comment", "demo pool of four 1 GiB sparse files");
    struct api_reply r = { 0 };
    api_pool_create(a, body, &r);
    json_decref(body);
    int rc = r.status == 201 ? 0 : -1;
    if (rc) snprintf(err, errlen, "%s", json_string_value(json_object_get(json_object_get(r.json, "error"), "message")));
    else log_info("demo pool \"tank\" created on %s", abs);
    json_decref(r.json);
    return rc;
}
