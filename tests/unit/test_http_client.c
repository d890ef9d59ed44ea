/* The replication HTTP client against a target that answers one byte at a time: the
 * response ends at the deadline (not per byte), and a cancel ends the request at once. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "util/http_client.h"

static int lfd;
static atomic_int drip_stop;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *drip(void *arg)
{
    (void)arg;
    int c = accept(lfd, NULL, NULL);
    const char *line = "HTTP/1.1 200 OK\r\n";
    for (int i = 0; c >= 0 && !atomic_load(&drip_stop) && i < 200; i++) {
        if (send(c, line + i % 17, 1, MSG_NOSIGNAL) != 1) break;
        usleep(200 * 1000);
    }
    if (c >= 0) close(c);
    return NULL;
}

static int listen_any(char *url, size_t len)
{
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(lfd, 4), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    snprintf(url, len, "http://127.0.0.1:%u/x", ntohs(a.sin_port));
    return lfd;
}

START_TEST(slow_response_ends_at_the_deadline)
{
    char url[64], resp[64];
    listen_any(url, sizeof url);
    atomic_store(&drip_stop, 0);
    pthread_t th;
    pthread_create(&th, NULL, drip, NULL);
    double t0 = now_s();
    int rc = nasd_http_request("GET", url, NULL, NULL, -1, 0, resp, sizeof resp, 2, NULL);
    double el = now_s() - t0;
    atomic_store(&drip_stop, 1);
    pthread_join(th, NULL);
    close(lfd);
    ck_assert_int_eq(rc, -ETIMEDOUT);
    ck_assert_msg(el >= 1.9 && el < 3.5, "took %.2f s", el);
}
END_TEST

static atomic_int cancel;
static void *cancel_soon(void *arg) { (void)arg; usleep(300 * 1000); atomic_store(&cancel, 1); return NULL; }

START_TEST(cancel_ends_the_request)
{
    char url[64];
    listen_any(url, sizeof url);
    atomic_store(&drip_stop, 0);
    atomic_store(&cancel, 0);
    pthread_t th, tc;
    pthread_create(&th, NULL, drip, NULL);
    pthread_create(&tc, NULL, cancel_soon, NULL);
    double t0 = now_s();
    int rc = nasd_http_request("GET", url, NULL, NULL, -1, 0, NULL, 0, 30, &cancel);
    double el = now_s() - t0;
    atomic_store(&drip_stop, 1);
    pthread_join(tc, NULL);
    pthread_join(th, NULL);
    close(lfd);
    ck_assert_int_eq(rc, -ECANCELED);
    ck_assert_msg(el < 1.0, "took %.2f s", el);
}
END_TEST

START_TEST(refused_and_answered)
{
    char url[64], resp[64];
    listen_any(url, sizeof url);
    close(lfd);   /* nobody listens there now */
    ck_assert_int_eq(nasd_http_request("GET", url, NULL, NULL, -1, 0, resp, sizeof resp, 2, NULL), -ECONNREFUSED);
}
END_TEST

/* a replication target's mistyped host name reads as such, not as "No route to host" */
START_TEST(unresolved_name_says_so)
{
    int rc = nasd_http_request("GET", "http://no-such-host.invalid:8080/", NULL, NULL, -1, 0, NULL, 0, 2, NULL);
    ck_assert_int_eq(rc, NASD_HTTP_ERESOLVE);
    ck_assert_str_eq(nasd_http_strerror(rc), "host name not resolved");
    ck_assert_str_eq(nasd_http_strerror(-ECONNREFUSED), strerror(ECONNREFUSED));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_client");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, slow_response_ends_at_the_deadline);
    tcase_add_test(tc, cancel_ends_the_request);
    tcase_add_test(tc, refused_and_answered);
    tcase_add_test(tc, unresolved_name_says_so);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
