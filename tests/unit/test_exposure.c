/* Start-up exposure warnings: open exports and REST auth off are reported only when a
 * service listens beyond loopback. */
#include "nasd/appliance/exposure.h"
#include "tests/unit/check_main.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char seen[8][512];
static int nseen;
static void collect(void *arg, const char *msg)
{
    if (nseen < 8) snprintf(seen[nseen++], sizeof seen[0], "%s", msg);
}

static int check(struct nasd_config *c, nasd_db *db)
{
    nseen = 0;
    return nasd_exposure_check(c, db, collect, NULL);
}

START_TEST(exposure)
{
    char path[] = "/tmp/nasd-exposure-XXXXXX", err[256];
    close(mkstemp(path));
    nasd_db db;
    ck_assert_msg(db_open(&db, path, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO pools(id, name, layout, created) VALUES(1,'tank','stripe',0)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO datasets(id, pool_id, name, created) VALUES(1,1,'a',0),(2,1,'b',0)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO nfs_exports(name, dataset_id, path, clients_json, created) VALUES"
                             "('open',1,'/tank/a','[]',0),('closed',2,'/tank/b','[\"10.0.0.0/8\"]',0)", ""), 0);
    ck_assert_int_eq(db_exec(&db, NULL, "INSERT INTO iscsi_exports(name, iqn, chap_user, initiators_json, created) VALUES"
                             "('t1','iqn.x:1','','[]',0),('t2','iqn.x:2','alice','[]',0),"
                             "('t3','iqn.x:3','','[\"iqn.y\"]',0)", ""), 0);
    struct nasd_config c;
    config_defaults(&c);
    snprintf(c.listen, sizeof c.listen, "127.0.0.1:8080");
    snprintf(c.iscsi_portal, sizeof c.iscsi_portal, "127.0.0.1:3260");
    snprintf(c.nfs_bind, sizeof c.nfs_bind, "127.0.0.1");
    ck_assert_int_eq(check(&c, &db), 0);                     /* all on loopback */
    snprintf(c.nfs_bind, sizeof c.nfs_bind, "0.0.0.0");
    ck_assert_int_eq(check(&c, &db), 2);                     /* auth off + NFS export "open" */
    ck_assert_ptr_nonnull(strstr(seen[0], "auth is off"));
    ck_assert_ptr_nonnull(strstr(seen[1], "NFS export open "));
    c.auth = 1;
    snprintf(c.iscsi_portal, sizeof c.iscsi_portal, "0.0.0.0:3260");
    ck_assert_int_eq(check(&c, &db), 2);                     /* iSCSI t1 (no CHAP, no list) + NFS open */
    ck_assert_ptr_nonnull(strstr(seen[0], "iSCSI export t1 "));
    c.nfs_bind[0] = 0;                                       /* NFS off */
    snprintf(c.iscsi_portal, sizeof c.iscsi_portal, "[::1]:3260");
    c.auth = 0;
    snprintf(c.listen, sizeof c.listen, "[::]:8080");
    ck_assert_int_eq(check(&c, &db), 1);                     /* the API itself on every address */
    ck_assert_ptr_nonnull(strstr(seen[0], "the API"));
    db_close(&db);
    unlink(path);
    char p[64];
    snprintf(p, sizeof p, "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", path);
    unlink(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("exposure");
    TCase *tc = tcase_create("exposure");
    tcase_add_test(tc, exposure);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
