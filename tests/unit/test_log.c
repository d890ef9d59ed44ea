/* util/log: escaping of client strings and the rate limit on repeated lines. */
#include "util/log.h"
#include "tests/unit/check_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

START_TEST(escape_controls)
{
    char out[64];
    const char in[] = "a\nb\r\x1b[31m\\\x7f\xff";
    size_t n = nasd_log_escape(in, sizeof in - 1, out, sizeof out);
    ck_assert_str_eq(out, "a\\x0ab\\x0d\\x1b[31m\\\\\\x7f\\xff");
    ck_assert_uint_eq(n, strlen(out));
    /* an embedded NUL is escaped too: the length, not the terminator, counts */
    n = nasd_log_escape("x\0y", 3, out, sizeof out);
    ck_assert_str_eq(out, "x\\x00y");
    for (const char *p = out; *p; p++) ck_assert(*p >= 0x20 && *p < 0x7f);
}
END_TEST

START_TEST(escape_truncates_whole)
{
    char out[6];
    /* "ab" + "\x0a" needs 7 bytes with the NUL: the escape is left out entirely */
    size_t n = nasd_log_escape("ab\ncd", 5, out, sizeof out);
    ck_assert_str_eq(out, "ab");
    ck_assert_uint_eq(n, 2);
    char big[NASD_LOG_ESC_SIZE(4)];
    n = nasd_log_escape("\n\n\n\n", 4, big, sizeof big);
    ck_assert_uint_eq(n, 16);
    ck_assert_uint_eq(nasd_log_escape("abc", 3, out, 1), 0);
    ck_assert_str_eq(out, "");
    ck_assert_uint_eq(nasd_log_escape(NULL, 5, out, sizeof out), 0);
}
END_TEST

/* Logs n lines from one call site with stderr sent to a file; returns the lines written. */
static int log_lines(int n, char *last, size_t lastlen)
{
    char path[] = "/tmp/test_log_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    int saved = dup(2);
    dup2(fd, 2);
    for (int i = 0; i < n; i++) log_warn("accept: flood %d", i);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    char line[512];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        snprintf(last, lastlen, "%s", line);
    }
    fclose(f);
    close(fd);
    unlink(path);
    return lines;
}

START_TEST(repeated_lines_limited)
{
    char last[512] = "";
    int lines = log_lines(100000, last, sizeof last);
    ck_assert_int_ge(lines, 1);
    ck_assert_int_le(lines, 40); /* burst, plus what the rate refills while the loop runs */
    /* after a pause the site logs again and says how many lines it dropped */
    usleep(400 * 1000);
    lines = log_lines(1, last, sizeof last);
    ck_assert_int_eq(lines, 1);
    ck_assert_ptr_nonnull(strstr(last, "similar lines suppressed"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");
    tcase_add_test(tc, escape_controls);
    tcase_add_test(tc, escape_truncates_whole);
    tcase_add_test(tc, repeated_lines_limited);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
