/* A per-thread hook run once before the thread waits for a lock another thread holds. The
 * NFS server's network leader sets it while it runs a call itself: waiting there would stop
 * every connection's traffic, so the hook hands the network loop to another worker first.
 * Code with long-held locks (a dataset's, held through a REMOVE of a large file) calls
 * nasd_before_wait() when its trylock fails. */
#ifndef NASD_UTIL_WAIT_HOOK_H
#define NASD_UTIL_WAIT_HOOK_H

#include <stddef.h>

struct nasd_wait_hook {
    void (*fn)(void *arg);
    void *arg;
};
extern __thread struct nasd_wait_hook nasd_wait_hook;

static inline void nasd_before_wait(void)
{
    void (*fn)(void *) = nasd_wait_hook.fn;
    if (!fn) return;
    nasd_wait_hook.fn = NULL;   /* once: the loop is handed over only once */
    fn(nasd_wait_hook.arg);
}

#endif
