/* Storage manager pool lifetime: snapshot tasks and send streams run storage calls on
 * their own threads while the REST thread may destroy the pool. A destroy waits for the
 * calls in flight, refuses (nothing deleted) while one goes on, and calls after it fail
 * cleanly instead of using a freed pool. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "tests/unit/storage_test_util.h"

/* Pool "tank" with volume "v" holding 4 MiB of data and its snapshot "s1". */
static struct storage *with_snapshot(void)
{
    struct storage *st = with_pool();
    char err[256] = "";
    signal(SIGPIPE, SIG_IGN);   /* a send's reader goes away on purpose */
    ck_assert_msg(storage_volume_create(st, "tank", "v", 32 << 20, 0, err, sizeof err) == 0, "%s", err);
    int e = 0;
    nasd_bdev *b = storage_volume_open(st, "tank", "v", 4096, &e);
    ck_assert_ptr_nonnull(b);
    static uint8_t buf[1 << 20];
    for (int i = 0; i < 4; i++) {
        memset(buf, 'a' + i, sizeof buf);
        ck_assert_int_eq(b->ops->write(b, buf, (uint64_t)i << 20, sizeof buf, 0), 0);
    }
    nasd_bdev_put(b);
    ck_assert_msg(storage_snap_create(st, "tank", "v", 0, "s1", err, sizeof err) == 0, "%s", err);
    return st;
}

struct sender { struct storage *st; int fd, rc; char err[256]; };
static void *send_main(void *arg)
{
    struct sender *s = arg;
    s->rc = storage_snap_send(s->st, "tank", "v", 0, "s1", NULL, s->fd, s->err, sizeof s->err);
    return NULL;
}

START_TEST(destroy_refused_while_a_send_runs)
{
    struct storage *st = with_snapshot();
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    fcntl(pfd[1], F_SETPIPE_SZ, 4096);   /* the stream blocks at once: nobody reads */
    struct sender s = { st, pfd[1], 0, "" };
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, send_main, &s), 0);
    int queued = 0;
    for (int i = 0; i < 5000 && queued <= 0; i++) {   /* the send has started */
        usleep(1000);
        ioctl(pfd[0], FIONREAD, &queued);
    }
    ck_assert_int_gt(queued, 0);

    char err[256] = "";
    ck_assert_int_eq(storage_pool_destroy(st, "tank", err, sizeof err), -EBUSY);
    ck_assert_msg(strstr(err, "in use") && strstr(err, "nothing was deleted"), "%s", err);
    json_t *vols = storage_pool_volumes(st, "tank");   /* still whole and in service */
    ck_assert_int_eq(json_array_size(vols), 1);
    json_decref(vols);

    close(pfd[0]);   /* the receiver is gone: the send ends with an error */
    pthread_join(th, NULL);
    ck_assert_int_ne(s.rc, 0);
    close(pfd[1]);
    ck_assert_msg(storage_pool_destroy(st, "tank", err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_null(storage_pool_volumes(st, "tank"));
    storage_free(st);
}
END_TEST

struct caller { struct storage *st; atomic_int stop; atomic_long calls, after_gone; };
static void *caller_main(void *arg)
{
    struct caller *c = arg;
    while (!atomic_load(&c->stop)) {
        int e = 0;
        json_t *l = storage_snap_list(c->st, "tank", "v", 0, &e);
        uint64_t used = storage_volume_used(c->st, "tank", "v");
        if (!l && e == -ENOENT && !used) c->after_gone++;
        json_decref(l);
        c->calls++;
    }
    return NULL;
}

START_TEST(destroy_under_concurrent_calls)
{
    struct storage *st = with_snapshot();
    struct caller c = { .st = st };
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, caller_main, &c), 0);
    usleep(20000);
    char err[256] = "";
    int rc = storage_pool_destroy(st, "tank", err, sizeof err);
    for (int i = 0; i < 5000 && !atomic_load(&c.after_gone); i++) usleep(1000);   /* its next calls */
    atomic_store(&c.stop, 1);
    pthread_join(th, NULL);
    /* the calls in flight finish first; new ones do not get the pool once destroy starts */
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_gt(c.calls, 0);
    ck_assert_int_gt(c.after_gone, 0);
    storage_free(st);
}
END_TEST

/* A destroy the engine refuses (a volume is open) leaves the pool in service. */
START_TEST(refused_destroy_keeps_the_pool)
{
    struct storage *st = with_snapshot();
    int e = 0;
    nasd_bdev *b = storage_volume_open(st, "tank", "v", 4096, &e);
    ck_assert_ptr_nonnull(b);
    char err[256] = "";
    ck_assert_int_eq(storage_pool_destroy(st, "tank", err, sizeof err), -EBUSY);
    ck_assert_msg(strstr(err, "still open"), "%s", err);
    json_t *vols = storage_pool_volumes(st, "tank");
    ck_assert_int_eq(json_array_size(vols), 1);
    json_decref(vols);
    ck_assert_msg(storage_snap_create(st, "tank", "v", 0, "s2", err, sizeof err) == 0, "%s", err);
    nasd_bdev_put(b);
    ck_assert_msg(storage_pool_destroy(st, "tank", err, sizeof err) == 0, "%s", err);
    storage_free(st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("storage_pool_refs");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, destroy_refused_while_a_send_runs);
    tcase_add_test(tc, destroy_under_concurrent_calls);
    tcase_add_test(tc, refused_destroy_keeps_the_pool);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
