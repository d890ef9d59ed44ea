/* flock-based ownership locks and finding their holder in /proc/locks. */
#define _GNU_SOURCE
#include "util/flock.h"
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
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
    /* O_NONBLOCK: opening a FIFO must not wait for a writer */
    int fd = open(path, open_flags | O_CLOEXEC | O_NONBLOCK, 0600);   /* lock files and a new DB: private */
    if (fd < 0) return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    int e = errno;
    if (holder && e == EWOULDBLOCK) *holder = nasd_flock_holder(fd);
    close(fd);
    return -e;
}

pid_t nasd_file_opener(int fd, char *comm, size_t commlen)
{
    struct stat me;
    if (fstat(fd, &me)) return 0;
    DIR *proc = opendir("/proc");
    if (!proc) return 0;
    pid_t found = 0, self = getpid();
    struct dirent *e;
    while (!found && (e = readdir(proc))) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0 || pid == self) continue;
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
        DIR *fds = opendir(dir);
        if (!fds) continue;
        struct dirent *f;
        while (!found && (f = readdir(fds))) {
            if (f->d_name[0] == '.') continue;
            struct stat st;
            if (fstatat(dirfd(fds), f->d_name, &st, 0)) continue;
            if (S_ISBLK(me.st_mode) ? S_ISBLK(st.st_mode) && st.st_rdev == me.st_rdev   /* any node of the disk */
                                    : S_ISREG(st.st_mode) && st.st_ino == me.st_ino && st.st_dev == me.st_dev)
                found = pid;
        }
        closedir(fds);
    }
    closedir(proc);
    if (found && comm && commlen) {
        char p[64];
        snprintf(p, sizeof p, "/proc/%d/comm", (int)found);
        FILE *c = fopen(p, "r");
        comm[0] = 0;
        if (c) {
            if (fgets(comm, (int)commlen, c)) comm[strcspn(comm, "\n")] = 0;
            fclose(c);
        }
    }
    return found;
}
