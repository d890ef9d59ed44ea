/* util/net.c: listen address parsing and the per-client limit key (IPv6 by /64). */
#include "util/net.h"
#include "tests/unit/check_main.h"
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <string.h>

static void key_of(const char *addr, uint8_t key[16])
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr) == 1) ss.ss_family = AF_INET;
    else {
        ck_assert_int_eq(inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr), 1);
        ss.ss_family = AF_INET6;
    }
    nasd_peer_key(&ss, key);
}

static int same_key(const char *a, const char *b)
{
    uint8_t ka[16], kb[16];
    key_of(a, ka);
    key_of(b, kb);
    return !memcmp(ka, kb, 16);
}

/* One host holds a whole /64 (privacy addresses): a cap per full address would be none. */
START_TEST(ipv6_counts_by_its_64)
{
    ck_assert(same_key("2001:db8:1:2::1", "2001:db8:1:2:abcd:ef01:2345:6789"));
    ck_assert(same_key("fe80::1", "fe80::2"));
    ck_assert(!same_key("2001:db8:1:2::1", "2001:db8:1:3::1"));
    ck_assert(!same_key("2001:db8:1:2::1", "2001:db9:1:2::1"));
}
END_TEST

/* IPv4, also as v4-mapped IPv6 on a dual-stack socket, keeps every address apart */
START_TEST(ipv4_and_v4_mapped_count_per_address)
{
    ck_assert(same_key("192.0.2.1", "::ffff:192.0.2.1"));
    ck_assert(!same_key("192.0.2.1", "192.0.2.2"));
    ck_assert(!same_key("::ffff:192.0.2.1", "::ffff:192.0.2.2"));
    ck_assert(!same_key("192.0.2.1", "::1"));
}
END_TEST

START_TEST(hostport_parsing)
{
    struct sockaddr_storage ss;
    socklen_t len;
    ck_assert_int_eq(nasd_parse_hostport("127.0.0.1:3260", &ss, &len), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET);
    ck_assert_int_eq(nasd_parse_hostport("[::1]:3260", &ss, &len), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET6);
    ck_assert_int_eq(nasd_parse_hostport(":8080", &ss, &len), 0);
    ck_assert_int_eq(nasd_parse_hostport("[::1:3260", &ss, &len), -1);
    ck_assert_int_eq(nasd_parse_hostport("host.example:80", &ss, &len), -1);   /* numeric only */
    ck_assert_int_eq(nasd_parse_hostport("127.0.0.1:", &ss, &len), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("net");
    TCase *tc = tcase_create("net");
    tcase_add_test(tc, ipv6_counts_by_its_64);
    tcase_add_test(tc, ipv4_and_v4_mapped_count_per_address);
    tcase_add_test(tc, hostport_parsing);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
