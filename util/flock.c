/* flock-based ownership locks and finding their holder in /proc/locks. */
#define _GNU_SOURCE
#include "util/flock.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

pid_t nasd_flock_holder(int fd)
{
    struct stat st;
    if (fstat(fd, &st)) return 0;
    FILE *f = fopen("/proc/locks", "r");
    if (!f) return 0;
    char line[256];
    pid_t found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        /* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have "->" after the number */
        char kind[16], mode[16], rw[16];
        int pid;
        unsigned maj, min;
        unsigned long ino;
        const char *p = strchr(line, ':');
        if (!p || strstr(line, "->")) continue;
        if (sscanf(p + 1, "%15s %15s %15s %d %x:%x:%lu", kind, mode, rw, &pid, &maj, &min, &ino) != 7) continue;
        if (strcmp(kind, "FLOCK") || pid <= 0) continue;
        if (ino == (unsigned long)st.st_ino && maj == major(st.st_dev) && min == minor(st.st_dev)) found = pid;
    }
    fclose(f);
    return found;
}

int nasd_flock_open(const char *path, int open_flags, pid_t *holder)
{
    if (holder) *holder = 0;
    int fd = open(path, open_flags | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    int e = errno;
    if (holder && e == EWOULDBLOCK) *holder = nasd_flock_holder(fd);
    close(fd);
    return -e;
}
