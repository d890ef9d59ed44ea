/* Dataset rollback against the filesystem object's other holders (NFS calls that began
 * before the export was removed, self-tests): the rollback waits until they let go, so
 * the old object never writes over the rolled-back blocks; it gives up with -EBUSY and
 * leaves the object open when one holds on; a dataset snapshot's read-only view names
 * the snapshot's guid, so a new snapshot of the same name is another filesystem to NFS. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>
#include "tests/unit/storage_test_util.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void make_file(struct nasd_fsroot *f, const char *name)
{
    int fd = f->vfs->openat(f, f->root_fd, name, O_CREAT | O_RDWR | O_EXCL, 0644);
    ck_assert_msg(fd > 0, "create %s: %d", name, fd);
    ck_assert_int_eq(f->vfs->pwrite(f, fd, name, strlen(name), 0), (ssize_t)strlen(name));
    ck_assert_int_eq(f->vfs->fsync(f, fd, 0), 0);
    f->vfs->close(f, fd);
}

static bool has_file(struct nasd_fsroot *f, const char *name)
{
    struct stat st;
    return f->vfs->fstatat(f, f->root_fd, name, &st, 0) == 0;
}

struct rb { struct storage *st; int rc; double done; char err[256]; };
static void *rollback_job(void *arg)
{
    struct rb *r = arg;
    r->rc = storage_snap_rollback(r->st, "tank", "d", 1, "s1", r->err, sizeof r->err);
    r->done = now_s();
    return NULL;
}

/* dataset d with file "before" in snapshot s1 and "after" since; *held: an extra reference */
static struct storage *dataset_with_snapshot(struct nasd_fsroot **held)
{
    struct storage *st = with_pool();
    char err[256] = "";
    int e = 0;
    ck_assert_int_eq(storage_dataset_create(st, "tank", "d", 0, err, sizeof err), 0);
    struct nasd_fsroot *f = storage_dataset_open(st, "tank", "d", 7, 0, &e);
    ck_assert_ptr_nonnull(f);
    make_file(f, "before");
    ck_assert_msg(storage_snap_create(st, "tank", "d", 1, "s1", err, sizeof err) == 0, "%s", err);
    make_file(f, "after");
    *held = f;
    return st;
}

START_TEST(rollback_waits_for_holders)
{
    struct nasd_fsroot *f;
    struct storage *st = dataset_with_snapshot(&f);
    struct rb r = { st, 1, 0, "" };
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, rollback_job, &r), 0);
    usleep(300 * 1000);
    ck_assert_msg(r.done == 0, "rollback ran while the filesystem object was still held");
    int e = 0;
    ck_assert_ptr_null(storage_dataset_open(st, "tank", "d", 7, 0, &e));   /* no new holder meanwhile */
    ck_assert_int_eq(e, -EAGAIN);
    make_file(f, "late");   /* the call that was running goes on, then lets go */
    double released = now_s();
    nasd_fsroot_put(f);
    pthread_join(th, NULL);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    ck_assert(r.done >= released);
    f = storage_dataset_open(st, "tank", "d", 7, 0, &e);
    ck_assert_ptr_nonnull(f);
    ck_assert(has_file(f, "before"));
    ck_assert(!has_file(f, "after"));
    ck_assert(!has_file(f, "late"));   /* committed by the old object before the rollback */
    make_file(f, "new");
    nasd_fsroot_put(f);
    storage_free(st);
    /* after a restart: the rolled-back filesystem with the one file written since */
    st = storage_new(dir, 0, 0);
    struct storage_member m = { .size = 256ull << 20 };
    snprintf(m.path, sizeof m.path, "%s/m0.img", dir);
    char err[256] = "";
    ck_assert_msg(storage_pool_open(st, "tank", "stripe", &m, 1, err, sizeof err) == 0, "%s", err);
    f = storage_dataset_open(st, "tank", "d", 7, 0, &e);
    ck_assert_msg(f != NULL, "reopen: %d", e);
    ck_assert(has_file(f, "before") && has_file(f, "new") && !has_file(f, "late") && !has_file(f, "after"));
    nasd_fsroot_put(f);
    storage_free(st);
}
END_TEST

START_TEST(rollback_busy_keeps_the_dataset)
{
    struct nasd_fsroot *f;
    struct storage *st = dataset_with_snapshot(&f);
    char err[256] = "";
    double t0 = now_s();
    ck_assert_int_eq(storage_snap_rollback(st, "tank", "d", 1, "s1", err, sizeof err), -EBUSY);
    ck_assert_msg(strstr(err, "busy"), "%s", err);
    ck_assert(now_s() - t0 >= 4.5);
    int e = 0;
    struct nasd_fsroot *again = storage_dataset_open(st, "tank", "d", 7, 0, &e);
    ck_assert_ptr_eq(again, f);   /* still the one shared object, unchanged */
    ck_assert(has_file(f, "after"));
    nasd_fsroot_put(again);
    nasd_fsroot_put(f);
    ck_assert_msg(storage_snap_rollback(st, "tank", "d", 1, "s1", err, sizeof err) == 0, "%s", err);
    f = storage_dataset_open(st, "tank", "d", 7, 0, &e);
    ck_assert(has_file(f, "before") && !has_file(f, "after"));
    nasd_fsroot_put(f);
    storage_free(st);
}
END_TEST

START_TEST(snapshot_view_names_its_guid)
{
    struct nasd_fsroot *f;
    struct storage *st = dataset_with_snapshot(&f);
    nasd_fsroot_put(f);
    char err[256] = "", first[4096];
    int e = 0;
    struct nasd_fsroot *v = storage_snap_open_dataset(st, "tank", "d", "s1", 9, &e);
    ck_assert_msg(v != NULL, "open s1: %d", e);
    snprintf(first, sizeof first, "%s", v->path);
    nasd_fsroot_put(v);
    ck_assert_msg(storage_snap_destroy(st, "tank", "d", 1, "s1", err, sizeof err) == 0, "%s", err);
    ck_assert_msg(storage_snap_create(st, "tank", "d", 1, "s1", err, sizeof err) == 0, "%s", err);
    v = storage_snap_open_dataset(st, "tank", "d", "s1", 9, &e);
    ck_assert_ptr_nonnull(v);
    ck_assert_msg(strcmp(first, v->path), "same path for two snapshots s1: %s", first);
    ck_assert(has_file(v, "after"));
    nasd_fsroot_put(v);
    ck_assert_ptr_null(storage_snap_open_dataset(st, "tank", "d", "nope", 9, &e));
    storage_free(st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("storage_snap_holders");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, rollback_waits_for_holders);
    tcase_add_test(tc, rollback_busy_keeps_the_dataset);
    tcase_add_test(tc, snapshot_view_names_its_guid);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
