/* Input validation rules of the REST API. */
#include "api/validate.h"
#include "tests/unit/check_main.h"
#include <stdlib.h>
#include <string.h>

static char err[256];

START_TEST(names)
{
    ck_assert_int_eq(valid_name("tank", err, sizeof err), 0);
    ck_assert_int_eq(valid_name("a_b.c:d-e9", err, sizeof err), 0);
    ck_assert_int_eq(valid_name("", err, sizeof err), -1);
    ck_assert_int_eq(valid_name(NULL, err, sizeof err), -1);
    ck_assert_int_eq(valid_name("a/b", err, sizeof err), -1);
    ck_assert_int_eq(valid_name("a..b", err, sizeof err), -1);
    ck_assert_int_eq(valid_name(".hidden", err, sizeof err), -1);
    ck_assert_int_eq(valid_name("-opt", err, sizeof err), -1);
    ck_assert_int_eq(valid_name("sp ace", err, sizeof err), -1);
    ck_assert_int_eq(valid_name("uni\xc3\xa9", err, sizeof err), -1);
    char longname[80];
    memset(longname, 'a', 64);
    longname[64] = 0;
    ck_assert_int_eq(valid_name(longname, err, sizeof err), -1);
    longname[63] = 0; /* pool labels hold 63 characters */
    ck_assert_int_eq(valid_name(longname, err, sizeof err), 0);
}
END_TEST

static int size_of(json_t *v, uint64_t *out)
{
    int rc = parse_size(v, out, err, sizeof err);
    json_decref(v);
    return rc;
}

START_TEST(sizes)
{
    uint64_t v;
    ck_assert_int_eq(size_of(json_string("10G"), &v), 0);
    ck_assert_uint_eq(v, 10ull << 30);
    ck_assert_int_eq(size_of(json_string("512"), &v), 0);
    ck_assert_uint_eq(v, 512);
    ck_assert_int_eq(size_of(json_string("64KiB"), &v), 0);
    ck_assert_uint_eq(v, 64 << 10);
    ck_assert_int_eq(size_of(json_string("100MB"), &v), 0);
    ck_assert_uint_eq(v, 100ull << 20);
    ck_assert_int_eq(size_of(json_string("1.5T"), &v), 0);
    ck_assert_uint_eq(v, 3ull << 39);
    ck_assert_int_eq(size_of(json_string("2p"), &v), 0);
    ck_assert_uint_eq(v, 2ull << 50);
    ck_assert_int_eq(size_of(json_integer(4096), &v), 0);
    ck_assert_uint_eq(v, 4096);
    ck_assert_int_eq(size_of(json_integer(0), &v), -1);
    ck_assert_int_eq(size_of(json_integer(-5), &v), -1);
    ck_assert_int_eq(size_of(json_string("10X"), &v), -1);
    ck_assert_int_eq(size_of(json_string("G"), &v), -1);
    ck_assert_int_eq(size_of(json_string("-1G"), &v), -1);
    ck_assert_int_eq(size_of(json_string("10GG"), &v), -1);
    ck_assert_int_eq(size_of(json_string("99999999P"), &v), -1);
    ck_assert_int_eq(size_of(json_string("nan"), &v), -1);
    ck_assert_int_eq(size_of(json_true(), &v), -1);
}
END_TEST

START_TEST(iqns)
{
    ck_assert_int_eq(valid_iqn("iqn.2026-12.io.nasd:t1", err, sizeof err), 0);
    ck_assert_int_eq(valid_iqn("iqn.2001-04.com.example", err, sizeof err), 0);
    ck_assert_int_eq(valid_iqn("eui.0123456789abcdef", err, sizeof err), 0);
    ck_assert_int_eq(valid_iqn("naa.0123456789abcdef0123456789abcdef", err, sizeof err), 0);
    ck_assert_int_eq(valid_iqn("iqn.2026-12.io.nasd:UPPER", err, sizeof err), -1);
    ck_assert_int_eq(valid_iqn("iqn.26-12.io", err, sizeof err), -1);
    ck_assert_int_eq(valid_iqn("eui.0123", err, sizeof err), -1);
    ck_assert_int_eq(valid_iqn("target1", err, sizeof err), -1);
    ck_assert_int_eq(valid_iqn("iqn.2026-12.io.nasd:a b", err, sizeof err), -1);
}
END_TEST

START_TEST(paths)
{
    ck_assert_int_eq(valid_abs_path("/tank/share", err, sizeof err), 0);
    ck_assert_int_eq(valid_abs_path("/var/disk0.img", err, sizeof err), 0);
    ck_assert_int_eq(valid_abs_path("relative/x", err, sizeof err), -1);
    ck_assert_int_eq(valid_abs_path("/a/../etc", err, sizeof err), -1);
    ck_assert_int_eq(valid_abs_path("/a/./b", err, sizeof err), -1);
    ck_assert_int_eq(valid_abs_path("/a//b", err, sizeof err), -1);
    ck_assert_int_eq(valid_abs_path("/a/..", err, sizeof err), -1);
    ck_assert_int_eq(valid_abs_path("/a/b\n", err, sizeof err), -1);
    ck_assert_int_eq(valid_abs_path("/a/..b", err, sizeof err), 0); /* a name, not a component */
}
END_TEST

START_TEST(chap)
{
    ck_assert_int_eq(valid_chap("", "", err, sizeof err), 0);
    ck_assert_int_eq(valid_chap("user", "secret123456", err, sizeof err), 0);
    ck_assert_int_eq(valid_chap("user", "short", err, sizeof err), -1);
    ck_assert_int_eq(valid_chap("", "secret123456", err, sizeof err), -1);
    ck_assert_int_eq(valid_chap("user", "secret12345678901", err, sizeof err), -1);
    ck_assert_int_eq(valid_chap("us er", "secret123456", err, sizeof err), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("validate");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, names);
    tcase_add_test(tc, sizes);
    tcase_add_test(tc, iqns);
    tcase_add_test(tc, paths);
    tcase_add_test(tc, chap);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
