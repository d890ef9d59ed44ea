/* Host header checks against DNS rebinding (api/http_host.c). */
#include "api/http_host.h"
#include "tests/unit/check_main.h"
#include <check.h>

START_TEST(loopback_listen_takes_loopback_names_only)
{
    const char *ok[] = { "localhost", "LOCALHOST:8080", "127.0.0.1", "127.0.0.1:8080", "127.9.9.9", "[::1]", "[::1]:80", NULL };
    const char *no[] = { "evil.example", "evil.example:8080", "127.0.0.1.evil", "localhost.", "10.0.0.1", "[::2]",
                         "[::1", "[::1]x", "", NULL };
    for (int i = 0; ok[i]; i++) ck_assert_msg(http_host_allowed(ok[i], 1, 0, ""), "%s refused", ok[i]);
    for (int i = 0; no[i]; i++) ck_assert_msg(!http_host_allowed(no[i], 1, 0, ""), "%s allowed", no[i]);
    ck_assert(!http_host_allowed("evil.example", 1, 1, ""));   /* auth does not widen loopback */
    ck_assert(http_host_allowed(NULL, 1, 0, ""));              /* no Host: not a browser */
}
END_TEST

/* a rebound name is refused unless auth is on or the admin listed it */
START_TEST(other_listen_without_auth_takes_addresses_and_api_hosts)
{
    const char *hosts = "nas.lan, Filer.example.com";
    const char *ok[] = { "192.0.2.10", "192.0.2.10:8080", "[2001:db8::1]:8080", "nas.lan", "NAS.LAN:8080",
                         "filer.example.com", NULL };
    const char *no[] = { "evil.example", "nas.lan.evil", "nas", "lan", "example.com", "[2001:db8::1", NULL };
    for (int i = 0; ok[i]; i++) ck_assert_msg(http_host_allowed(ok[i], 0, 0, hosts), "%s refused", ok[i]);
    for (int i = 0; no[i]; i++) ck_assert_msg(!http_host_allowed(no[i], 0, 0, hosts), "%s allowed", no[i]);
    ck_assert(!http_host_allowed("nas.lan", 0, 0, ""));
    ck_assert(http_host_allowed("evil.example", 0, 1, ""));   /* with auth a rebound page has no token */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_host");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, loopback_listen_takes_loopback_names_only);
    tcase_add_test(tc, other_listen_without_auth_takes_addresses_and_api_hosts);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
