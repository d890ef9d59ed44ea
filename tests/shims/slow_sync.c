/* LD_PRELOAD shim for tests: a slow disk on demand. While the file named by
 * SLOW_SYNC_FILE exists, every fdatasync/fsync and every pwritev2 with RWF_DSYNC first
 * sleeps SLOW_SYNC_MS milliseconds, so a test can hold a dataset's commit (and the lock
 * it commits under) for a known time without a test hook in the daemon. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static void maybe_sleep(void)
{
    const char *f = getenv("SLOW_SYNC_FILE"), *ms = getenv("SLOW_SYNC_MS");
    struct stat st;
    if (!f || !ms || stat(f, &st) != 0) return;
    long v = atol(ms);
    struct timespec t = { v / 1000, (v % 1000) * 1000000L };
    nanosleep(&t, NULL);
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    maybe_sleep();
    return real(fd);
}

int fsync(int fd)
{
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    maybe_sleep();
    return real(fd);
}

ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    static ssize_t (*real)(int, const struct iovec *, int, off_t, int);
    if (!real) real = (ssize_t (*)(int, const struct iovec *, int, off_t, int))dlsym(RTLD_NEXT, "pwritev2");
    if (flags & RWF_DSYNC) maybe_sleep();
    return real(fd, iov, cnt, off, flags);
}
