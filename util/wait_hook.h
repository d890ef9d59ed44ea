/* A per-thread hook run once before the thread waits for a lock another thread holds. The
 * NFS server's network leader sets it while it runs a call itself: waiting there would stop
 * every connection's traffic, so the hook hands the network loop to another worker first.
 * Code with long-held locks (a dataset's, a pool's commit lock held through a member
 * sync) takes them with nasd_lock_handing_off. */
#ifndef NASD_UTIL_WAIT_HOOK_H
#define NASD_UTIL_WAIT_HOOK_H

#include <pthread.h>
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

/* pthread_mutex_lock for locks that may be held long (a dataset's, a pool's commit lock):
 * a thread with a wait hook hands its duty over before it waits. One trylock otherwise. */
static inline void nasd_lock_handing_off(pthread_mutex_t *m)
{
    if (pthread_mutex_trylock(m) == 0) return;
    nasd_before_wait();
    pthread_mutex_lock(m);
}

#endif
