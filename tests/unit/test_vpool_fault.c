/* Member faulting (#10.7b): a member cut short under the running pool gives read
 * errors, not zeros, and is faulted (pool DEGRADED, data still right); checksum errors
 * past the limit fault a member too; error counters persist across close/import;
 * vpool_clear() resets them and resilvers a faulted member back online. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"   /* vp_debug_locate */
#include "tests/unit/test_vpool_util.h"

static struct vpool *make(struct tdir *t, int n, uint64_t data, uint64_t seed, const struct vpool_opts *o)
{
    struct vpool_member_spec ms[4];
    for (int i = 0; i < n; i++) ms[i] = (struct vpool_member_spec){ t->member[i], MEMBER_SIZE };
    struct vpool *p;
    char err[256] = "";
    ck_assert_msg(vpool_create("flt", VPOOL_RAIDZ1, ms, n, o, &p, err, sizeof err) == 0, "create: %s", err);
    ck_assert_int_eq(vpool_vol_create(p, "v", 32ull << 20, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    write_pattern(b, 0, data, seed, 1);
    nasd_bdev_put(b);
    return p;
}

static struct vpool *reopen(struct tdir *t, int n, const struct vpool_opts *o)
{
    const char *paths[4];
    for (int i = 0; i < n; i++) paths[i] = t->member[i];
    struct vpool *p;
    char err[256] = "";
    ck_assert_msg(vpool_import(paths, n, o, &p, err, sizeof err) == 0, "import: %s", err);
    return p;
}

/* A small cache, so that reads go to the members. */
static const struct vpool_opts small = { .cache_bytes = 4ull << 20, .dirty_bytes = 2ull << 20 };

/* A pool of 4 holding pattern 3 in its first 16 MiB, reopened (nothing cached), member 2
 * then cut to nothing under it: the disk "returns only zeros" no more, it ends. */
static struct vpool *reopened_with_member_cut(struct tdir *t)
{
    tdir_make(t, 4);
    struct vpool *p = make(t, 4, 16ull << 20, 3, &small);
    vpool_close(p);
    p = reopen(t, 4, &small);
    ck_assert_int_eq(truncate(t->member[2], 0), 0);
    return p;
}

START_TEST(t_truncated_member_faults)
{
    struct tdir t;
    struct vpool *p = reopened_with_member_cut(&t);
    nasd_bdev *b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 16ull << 20, 3);              /* rebuilt from parity */
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.members[2].state, VPOOL_M_FAULTED);
    ck_assert_int_eq(st.state, VPOOL_DEGRADED);
    ck_assert_uint_ge(st.members[2].read_errors, 16);
    ck_assert_uint_eq(st.unrepairable, 0);
    write_pattern(b, 16ull << 20, 4ull << 20, 4, 1);  /* writes go on, degraded */

    ck_assert_int_eq(vpool_clear(p), 0);              /* resilver puts it back */
    vpool_wait_background(p);
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    ck_assert_int_eq(st.members[2].state, VPOOL_M_ONLINE);
    ck_assert_uint_eq(st.members[2].read_errors, 0);
    nasd_bdev_put(b);
    vpool_close(p);

    /* the rebuilt member carries the data on its own: import without member 0 */
    const char *less[3] = { t.member[1], t.member[2], t.member[3] };
    char err[256] = "";
    ck_assert_msg(vpool_import(less, 3, &small, &p, err, sizeof err) == 0, "import: %s", err);
    b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 16ull << 20, 3);
    check_pattern(b, 16ull << 20, 4ull << 20, 4);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

START_TEST(t_counters_persist_and_clear)
{
    struct tdir t;
    tdir_make(&t, 4);
    struct vpool *p = make(&t, 4, 16ull << 20, 5, &small);
    vpool_close(p);
    p = reopen(&t, 4, &small);
    /* zero a little of member 1's data area: a few checksum errors, below the limit */
    struct vpool_status st;
    int fd = open(t.member[1], O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint64_t off = 0;
    int m = -1;
    nasd_bdev *b = open_vol(p, "v", 4096);
    int hits = 0;
    for (uint64_t v = 0; v < (16ull << 20) && hits < 5; v += 4096) {
        uint64_t ps;
        ck_assert_int_eq(vp_debug_locate(p, "v", v, &m, &off, &ps), 0);
        if (m != 1) continue;
        static const uint8_t z[4096];
        ck_assert_int_eq(pwrite(fd, z, sizeof z, (off_t)off), (ssize_t)sizeof z);
        hits++;
    }
    close(fd);
    check_pattern(b, 0, 16ull << 20, 5);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.members[1].checksum_errors, 5);
    ck_assert_int_eq(st.members[1].state, VPOOL_M_ONLINE);
    nasd_bdev_put(b);
    vpool_close(p);
    p = reopen(&t, 4, &small);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.members[1].checksum_errors, 5);   /* kept in the labels */
    ck_assert_int_eq(vpool_clear(p), 0);
    vpool_close(p);
    p = reopen(&t, 4, &small);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.members[1].checksum_errors, 0);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* A member that silently returns zeros everywhere is faulted after 64 checksum errors;
 * the last redundancy is never faulted that way. */
START_TEST(t_checksum_limit_faults)
{
    struct tdir t;
    tdir_make(&t, 4);
    struct vpool *p = make(&t, 4, 16ull << 20, 6, &small);
    vpool_close(p);
    p = reopen(&t, 4, &small);
    int fd = open(t.member[3], O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1 << 20, MEMBER_SIZE), 0);
    close(fd);
    nasd_bdev *b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 16ull << 20, 6);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.members[3].state, VPOOL_M_FAULTED);
    ck_assert_int_eq(st.state, VPOOL_DEGRADED);
    ck_assert_uint_ge(st.members[3].checksum_errors, 64);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* Every 4 KiB of [0, len) read on its own (small reads come out of the members' mappings)
 * and compared with pattern seed. */
static void check_by_sector(nasd_bdev *b, uint64_t len, uint64_t seed)
{
    static uint8_t got[4096], want[4096];
    for (uint64_t pos = 0; pos < len; pos += 4096) {
        ck_assert_int_eq(nasd_bdev_read(b, got, pos, 4096), 0);
        fill_block(want, pos, seed);
        ck_assert_msg(memcmp(got, want, 4096) == 0, "data mismatch at %llu", (unsigned long long)pos);
    }
}

/* A member replaced while present: small reads come from the new file (its mapping is
 * replaced with the descriptor), never from the old one, here cut to nothing after the
 * resilver; both layouts. */
START_TEST(t_replace_present_member_reads_new_file)
{
    for (int lg = 0; lg < 2; lg++) {
        struct tdir t;
        tdir_make(&t, 5);
        struct vpool_opts o = small;
        o.log = lg;
        struct vpool *p = make(&t, 4, 16ull << 20, 8, &o);
        nasd_bdev *b = open_vol(p, "v", 4096);
        check_by_sector(b, 16ull << 20, 8);   /* the old file's pages mapped and read */
        ck_assert_int_eq(vpool_member_replace(p, 1, t.member[4], MEMBER_SIZE, NULL), 0);
        vpool_wait_background(p);
        ck_assert_int_eq(truncate(t.member[1], 0), 0);
        check_by_sector(b, 16ull << 20, 8);
        struct vpool_status st;
        vpool_get_status(p, &st);
        ck_assert_int_eq(st.state, VPOOL_ONLINE);
        ck_assert_uint_eq(st.members[1].read_errors, 0);
        ck_assert_uint_eq(st.members[1].checksum_errors, 0);
        ck_assert_uint_eq(st.repaired, 0);
        nasd_bdev_put(b);
        vpool_close(p);
        tdir_remove(&t);
    }
}
END_TEST

static void crash_like(int sig) { (void)sig; raise(SIGBUS); }   /* as util/crash.c: re-raises */

/* The pool's SIGBUS handler catches only its own copies: any other SIGBUS still ends the
 * process by that signal, through a handler installed before (one that re-raises, as
 * the daemon's crash report does) or the default, and does not loop. */
START_TEST(t_foreign_sigbus_still_fatal)
{
    for (int with_prev = 0; with_prev < 2; with_prev++) {
        struct tdir t;
        tdir_make(&t, 4);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            alarm(10);   /* a loop in the handlers ends by SIGALRM: the check below fails */
            if (with_prev) {
                struct sigaction sa = { .sa_handler = crash_like, .sa_flags = SA_RESETHAND };
                sigemptyset(&sa.sa_mask);
                sigaction(SIGBUS, &sa, NULL);
            }
            struct vpool *p = make(&t, 4, 1ull << 20, 9, &small);   /* maps its members */
            char path[600];
            snprintf(path, sizeof path, "%s.x", t.member[0]);
            int fd = open(path, O_RDWR | O_CREAT, 0600);
            if (fd < 0 || ftruncate(fd, 1 << 20)) _exit(2);
            volatile uint8_t *m = mmap(NULL, 1 << 20, PROT_READ, MAP_SHARED, fd, 0);
            if (m == MAP_FAILED || ftruncate(fd, 0)) _exit(2);
            unlink(path);
            (void)m[4096];   /* past the end: SIGBUS outside any pool copy */
            (void)p;
            _exit(0);
        }
        int st = 0;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        tdir_remove(&t);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
        /* a sanitizer's handler was there first: it reports and exits */
        ck_assert_msg((WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS) || (WIFEXITED(st) && WEXITSTATUS(st) != 0),
                      "with_prev %d: status 0x%x", with_prev, st);
#else
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS, "with_prev %d: status 0x%x", with_prev, st);
#endif
    }
}
END_TEST

struct blocked_read { nasd_bdev *b; };
static void *read_with_sigbus_blocked(void *arg)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    check_by_sector(((struct blocked_read *)arg)->b, 16ull << 20, 3);
    return NULL;
}

/* A thread that blocks SIGBUS (as library threads may) reads from a member cut short: a
 * fault in a mapped copy there would end the process (the kernel kills on a blocked
 * synchronous SIGBUS), so such a thread reads with pread, gets errors, and the data
 * comes back rebuilt from parity. */
START_TEST(t_sigbus_blocked_thread_reads_safely)
{
    struct tdir t;
    struct vpool *p = reopened_with_member_cut(&t);
    nasd_bdev *b = open_vol(p, "v", 4096);
    struct blocked_read br = { b };
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, read_with_sigbus_blocked, &br), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_ge(st.members[2].read_errors, 1);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

int main(void)
{
    nasd_log_level = LOG_ERR;
    Suite *s = suite_create("vpool_fault");
    TCase *tc = tcase_create("fault");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, t_truncated_member_faults);
    tcase_add_test(tc, t_counters_persist_and_clear);
    tcase_add_test(tc, t_checksum_limit_faults);
    tcase_add_test(tc, t_replace_present_member_reads_new_file);
    tcase_add_test(tc, t_foreign_sigbus_still_fatal);
    tcase_add_test(tc, t_sigbus_blocked_thread_reads_safely);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
