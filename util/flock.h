#pragma once
/* Exclusive advisory locks (flock) that say who holds them: one owner per state
 * directory, database and pool member. flock locks belong to an open file description,
 * so a second open in the same process conflicts as well as another process. */
#include <sys/types.h>

/* Opens path (open_flags, e.g. O_RDWR | O_CREAT) and takes an exclusive lock without
 * waiting. Returns the fd (keep it open to keep the lock), or -errno: -EWOULDBLOCK when
 * someone holds it, with *holder set to their pid when /proc/locks names one (else 0). */
int nasd_flock_open(const char *path, int open_flags, pid_t *holder);
/* The pid holding a flock on the file behind fd (possibly the caller itself), or 0. */
pid_t nasd_flock_holder(int fd);
/* Another process (not the caller) with the file behind fd open, found through
 * /proc/<pid>/fd: its pid (name into comm when given), or 0. */
pid_t nasd_file_opener(int fd, char *comm, size_t commlen);
