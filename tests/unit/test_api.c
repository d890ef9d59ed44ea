/* REST handlers in-process (no HTTP): validation, status codes, JSON shapes, DB effects.
 * Services are disabled, so export creation must fail cleanly with 503 and leave no row. */
#include "api/api.h"
#include "tests/unit/check_main.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct appliance app;
static char dir[] = "/tmp/nasd-test-api-XXXXXX";

static void setup(void)
{
    struct nasd_config cfg;
    char err[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    config_defaults(&cfg);
    snprintf(cfg.state_dir, sizeof cfg.state_dir, "%s", dir);
    snprintf(cfg.db_path, sizeof cfg.db_path, "%s/nasd.db", dir);
    cfg.iscsi_portal[0] = 0;
    cfg.nfs_bind[0] = 0;
    ck_assert_msg(appliance_start(&app, &cfg, err, sizeof err) == 0, "%s", err);
}

static void teardown(void)
{
    char cmd[256];
    appliance_stop(&app);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    strcpy(dir, "/tmp/nasd-test-api-XXXXXX");
}

/* Call METHOD /api/v1/PATH with a JSON body given as a format string; returns status, *out gets the reply. */
static int call(json_t **out, const char *method, const char *path, const char *body_fmt, ...)
{
    char body[2048] = "";
    if (body_fmt) {
        va_list ap;
        va_start(ap, body_fmt);
        vsnprintf(body, sizeof body, body_fmt, ap);
        va_end(ap);
    }
    struct api_call c = { .app = &app, .method = method };
    struct api_reply r = { 0 };
    if (body_fmt) {
        c.body = json_loads(body, 0, NULL);
        ck_assert_msg(c.body != NULL, "test body is not JSON: %s", body);
    }
    api_dispatch(&c, path, &r);
    json_decref(c.body);
    if (out) *out = r.json;
    else json_decref(r.json);
    return r.status;
}

static const char *errcode(json_t *j)
{
    return json_string_value(json_object_get(json_object_get(j, "error"), "code"));
}

static int make_pool(const char *name, const char *layout, int n)
{
    char members[1024] = "";
    for (int i = 0; i < n; i++) {
        char m[256];
        snprintf(m, sizeof m, "%s{\"path\":\"%s/%s-d%d.img\",\"size\":\"128M\",\"create\":true}", i ? "," : "", dir, name, i);
        strcat(members, m);
    }
    return call(NULL, "POST", "pools", "{\"name\":\"%s\",\"layout\":\"%s\",\"members\":[%s]}", name, layout, members);
}

START_TEST(pools)
{
    json_t *j;
    ck_assert_int_eq(make_pool("tank", "raidz1", 3), 201);
    ck_assert_int_eq(call(&j, "GET", "pools/tank", NULL), 200);
    ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "ONLINE");
    ck_assert_str_eq(json_string_value(json_object_get(j, "layout")), "raidz1");
    /* raidz1: n-1 members of data, less the engine's labels, metadata, journal and the
     * log's cleaner reserve */
    json_int_t log_size = json_integer_value(json_object_get(j, "size"));
    ck_assert_int_le(log_size, 2 * (128 << 20));
    ck_assert_int_gt(log_size, 2 * (90 << 20));
    ck_assert_int_eq(json_array_size(json_object_get(j, "members")), 3);
    json_decref(j);
    /* the in-place raidz1 by its own name, and the log's old name still taken */
    ck_assert_int_eq(make_pool("inplace", "raidz1-inplace", 3), 201);
    ck_assert_int_eq(call(&j, "GET", "pools/inplace", NULL), 200);
    ck_assert_str_eq(json_string_value(json_object_get(j, "layout")), "raidz1-inplace");
    ck_assert_int_gt(json_integer_value(json_object_get(j, "size")), log_size);   /* no cleaner reserve */
    json_decref(j);
    ck_assert_int_eq(make_pool("oldname", "raidz1-log", 3), 201);
    ck_assert_int_eq(call(&j, "GET", "pools/oldname", NULL), 200);
    ck_assert_str_eq(json_string_value(json_object_get(j, "layout")), "raidz1");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "size")), log_size);   /* the same layout */
    json_decref(j);
    ck_assert_int_eq(call(NULL, "DELETE", "pools/inplace", NULL), 204);
    ck_assert_int_eq(call(NULL, "DELETE", "pools/oldname", NULL), 204);
    ck_assert_int_eq(call(&j, "GET", "pools/1", NULL), 200); /* by id too */
    json_decref(j);
    ck_assert_int_eq(make_pool("tank", "stripe", 1), 409);
    ck_assert_int_eq(make_pool("m", "mirror", 1), 400);   /* mirror needs 2 */
    ck_assert_int_eq(make_pool("z", "raidz1", 2), 400);   /* raidz1 needs 3 */
    ck_assert_int_eq(make_pool("z", "raidz1-inplace", 2), 400);
    ck_assert_int_eq(make_pool("r", "raid5", 3), 400);
    ck_assert_int_eq(make_pool("bad/name", "stripe", 1), 400);
    ck_assert_int_eq(call(&j, "POST", "pools", "{\"name\":\"x\",\"members\":[\"relative.img\"]}"), 400);
    json_decref(j);
    ck_assert_int_eq(call(&j, "POST", "pools", "{\"name\":\"x\",\"members\":[\"/nonexistent/disk\"]}"), 404);
    json_decref(j);
    ck_assert_int_eq(call(&j, "POST", "pools", "{\"name\":\"x\",\"members\":[],\"bogus\":1}"), 400);
    ck_assert_str_eq(errcode(j), "unknown_field");
    json_decref(j);
    ck_assert_int_eq(call(&j, "POST", "pools", "[1,2]"), 400);
    json_decref(j);
    ck_assert_int_eq(call(&j, "GET", "pools", NULL), 200);
    ck_assert_int_eq(json_array_size(j), 1);
    json_decref(j);
    ck_assert_int_eq(call(&j, "PATCH", "pools/tank", "{\"comment\":\"hello\"}"), 200);
    ck_assert_str_eq(json_string_value(json_object_get(j, "comment")), "hello");
    json_decref(j);
    ck_assert_int_eq(call(NULL, "GET", "pools/nope", NULL), 404);
    ck_assert_int_eq(call(NULL, "DELETE", "pools/tank", NULL), 204);
    ck_assert_int_eq(call(NULL, "GET", "pools/tank", NULL), 404);
}
END_TEST

/* Ceph pool settings are checked before any connection is tried (no cluster here). */
START_TEST(ceph_pool_input)
{
    static const char *const bad[] = {
        "{\"name\":\"c\",\"backend\":\"ceph\"}",
        "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":\"x\"}",
        "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":{\"monitors\":\"127.0.0.1:1\",\"key\":\"AQ==\"}}",
        "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":{\"monitors\":\"127.0.0.1:1\",\"pool\":\"rbd\"}}",
        "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":{\"monitors\":\"127.0.0.1:1;rm -rf\",\"pool\":\"rbd\",\"key\":\"AQ==\"}}",
        "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":{\"monitors\":\"127.0.0.1:1\",\"pool\":\"rbd\",\"key\":\"a b\"}}",
        "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":{\"monitors\":\"127.0.0.1:1\",\"pool\":\"../x\",\"key\":\"AQ==\"}}",
        "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":{\"monitors\":\"127.0.0.1:1\",\"pool\":\"rbd\",\"user\":\"client.admin\",\"key\":\"AQ==\"}}",
        "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":{\"monitors\":\"127.0.0.1:1\",\"pool\":\"rbd\",\"keyring\":\"rel/path\"}}",
        "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":{\"monitors\":1,\"pool\":\"rbd\",\"key\":\"AQ==\"}}",
        "{\"name\":\"c\",\"backend\":\"ceph\",\"members\":[\"/x\"],\"ceph\":{\"monitors\":\"127.0.0.1:1\",\"pool\":\"rbd\",\"key\":\"AQ==\"}}",
        "{\"name\":\"c\",\"backend\":\"zfs\"}",
        "{\"name\":\"c\",\"layout\":\"stripe\",\"members\":[\"/x\"],\"ceph\":{}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *j = NULL;
        ck_assert_msg(call(&j, "POST", "pools", "%s", bad[i]) == 400, "accepted: %s", bad[i]);
        json_decref(j);
    }
    ck_assert_int_eq(call(NULL, "POST", "pools/c/sync", "{}"), 404);
}
END_TEST

START_TEST(datasets_and_volumes)
{
    json_t *j;
    ck_assert_int_eq(make_pool("tank", "mirror", 2), 201);
    ck_assert_int_eq(call(&j, "POST", "datasets", "{\"pool\":\"tank\",\"name\":\"share\",\"quota\":\"1G\"}"), 201);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "quota")), 1 << 30);
    ck_assert_int_gt(json_integer_value(json_object_get(j, "available")), 0);
    ck_assert_int_le(json_integer_value(json_object_get(j, "available")), 1 << 30);
    ck_assert_str_eq(json_string_value(json_object_get(j, "full_name")), "tank/share");
    json_decref(j);
    ck_assert_int_eq(call(NULL, "POST", "datasets", "{\"pool\":\"tank\",\"name\":\"share\"}"), 409);
    ck_assert_int_eq(call(NULL, "POST", "datasets", "{\"pool\":\"nope\",\"name\":\"s\"}"), 404);
    ck_assert_int_eq(call(NULL, "POST", "datasets", "{\"pool\":\"tank\",\"name\":\"s\",\"compression\":\"gzip\"}"), 400);
    ck_assert_int_eq(call(NULL, "POST", "datasets", "{\"pool\":\"tank\",\"name\":\"s\",\"quota\":\"lots\"}"), 400);
    ck_assert_int_eq(call(NULL, "PATCH", "datasets/tank/share", "{\"compression\":\"lz4\"}"), 409); /* fixed at creation */
    ck_assert_int_eq(call(NULL, "PATCH", "datasets/tank/share", "{\"compression\":\"zstd\"}"), 400);
    ck_assert_int_eq(call(&j, "POST", "datasets", "{\"pool\":\"tank\",\"name\":\"z\",\"compression\":\"lz4\"}"), 201);
    ck_assert_str_eq(json_string_value(json_object_get(j, "compression")), "lz4");
    ck_assert_str_eq(json_string_value(json_object_get(j, "mode")), "0755");
    json_decref(j);
    ck_assert_int_eq(call(NULL, "DELETE", "datasets/tank/z", NULL), 204);
    ck_assert_int_eq(call(&j, "PATCH", "datasets/tank/share", "{\"quota\":\"1M\"}"), 200);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "available")), 1 << 20);
    json_decref(j);
    ck_assert_int_eq(call(&j, "PATCH", "datasets/tank/share", "{\"quota\":\"none\",\"compression\":\"off\"}"), 200);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "quota")), 0);
    ck_assert_str_eq(json_string_value(json_object_get(j, "compression")), "off");
    json_decref(j);
    ck_assert_int_eq(call(NULL, "PATCH", "datasets/tank/share", "{\"mode\":\"999\"}"), 400);
    ck_assert_int_eq(call(&j, "PATCH", "datasets/tank/share", "{\"mode\":\"1777\"}"), 200);
    ck_assert_str_eq(json_string_value(json_object_get(j, "mode")), "1777");
    json_decref(j);

    ck_assert_int_eq(call(NULL, "POST", "volumes", "{\"pool\":\"tank\",\"name\":\"v\",\"size\":1000}"), 400);  /* not 4K multiple */
    ck_assert_int_eq(call(NULL, "POST", "volumes", "{\"pool\":\"tank\",\"name\":\"v\",\"size\":\"1T\"}"), 507); /* no space */
    ck_assert_int_eq(call(NULL, "POST", "volumes", "{\"pool\":\"tank\",\"name\":\"v\",\"size\":\"8M\",\"block_size\":1024}"), 400);
    ck_assert_int_eq(call(&j, "POST", "volumes", "{\"pool\":\"tank\",\"name\":\"v\",\"size\":\"8M\",\"block_size\":4096}"), 201);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "size")), 8 << 20);
    json_decref(j);
    ck_assert_int_eq(call(NULL, "PATCH", "volumes/tank/v", "{\"size\":\"4M\"}"), 400); /* no shrinking */
    ck_assert_int_eq(call(&j, "PATCH", "volumes/tank/v", "{\"size\":\"16M\"}"), 200);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "size")), 16 << 20);
    json_decref(j);
    ck_assert_int_eq(call(NULL, "DELETE", "pools/tank", NULL), 409); /* in use */
    ck_assert_int_eq(call(NULL, "DELETE", "volumes/tank/v", NULL), 204);
    ck_assert_int_eq(call(NULL, "DELETE", "datasets/tank/share", NULL), 204);
    ck_assert_int_eq(call(NULL, "DELETE", "pools/tank", NULL), 204);
}
END_TEST

START_TEST(exports_without_services)
{
    json_t *j;
    ck_assert_int_eq(make_pool("tank", "stripe", 1), 201);
    ck_assert_int_eq(call(NULL, "POST", "volumes", "{\"pool\":\"tank\",\"name\":\"v\",\"size\":\"8M\"}"), 201);
    ck_assert_int_eq(call(NULL, "POST", "datasets", "{\"pool\":\"tank\",\"name\":\"d\"}"), 201);
    ck_assert_int_eq(call(&j, "POST", "exports/iscsi", "{\"name\":\"t1\",\"volume\":\"tank/v\"}"), 503);
    json_decref(j);
    ck_assert_int_eq(call(&j, "GET", "exports/iscsi", NULL), 200);
    ck_assert_int_eq(json_array_size(j), 0); /* rolled back */
    json_decref(j);
    ck_assert_int_eq(call(NULL, "POST", "exports/iscsi", "{\"name\":\"t1\",\"volume\":\"tank/nope\"}"), 404);
    ck_assert_int_eq(call(NULL, "POST", "exports/iscsi", "{\"name\":\"t1\",\"iqn\":\"bogus\",\"volume\":\"tank/v\"}"), 400);
    ck_assert_int_eq(call(NULL, "POST", "exports/iscsi",
                          "{\"name\":\"t1\",\"volume\":\"tank/v\",\"chap_user\":\"u\",\"chap_secret\":\"short\"}"), 400);
    ck_assert_int_eq(call(NULL, "POST", "exports/iscsi", "{\"name\":\"t1\"}"), 400);
    ck_assert_int_eq(call(NULL, "POST", "exports/nfs", "{\"dataset\":\"tank/d\",\"clients\":[\"not-a-net\"]}"), 400);
    ck_assert_int_eq(call(NULL, "POST", "exports/nfs", "{\"dataset\":\"tank/d\",\"path\":\"/a/../b\"}"), 400);
    ck_assert_int_eq(call(NULL, "POST", "exports/nfs", "{\"dataset\":\"tank/d\"}"), 503);
    ck_assert_int_eq(call(&j, "GET", "exports/nfs", NULL), 200);
    ck_assert_int_eq(json_array_size(j), 0);
    json_decref(j);
}
END_TEST

START_TEST(routing)
{
    json_t *j;
    ck_assert_int_eq(call(&j, "GET", "nothing", NULL), 404);
    ck_assert_str_eq(errcode(j), "not_found");
    json_decref(j);
    ck_assert_int_eq(call(&j, "PUT", "pools", NULL), 405);
    json_decref(j);
    ck_assert_int_eq(call(NULL, "DELETE", "pools", NULL), 405);
    ck_assert_int_eq(call(NULL, "GET", "pools/", NULL), 200);
    ck_assert_int_eq(call(NULL, "GET", "pools/a/b/c", NULL), 404);
    ck_assert_int_eq(call(&j, "GET", "system", NULL), 200);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "schema_version")), db_latest_schema_version());
    json_decref(j);
    ck_assert_int_eq(call(NULL, "PATCH", "system/settings", "{\"log_level\":\"loud\"}"), 400);
    ck_assert_int_eq(call(NULL, "PATCH", "system/settings", "{\"log_level\":\"warn\"}"), 200);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, pools);
    tcase_add_test(tc, ceph_pool_input);
    tcase_add_test(tc, datasets_and_volumes);
    tcase_add_test(tc, exports_without_services);
    tcase_add_test(tc, routing);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
