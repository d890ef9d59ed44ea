/* One owner per pool member: an exclusive flock on every member while its pool is open
 * (a second pool, in this nasd or another process, is refused and told who holds it),
 * an exclusive claim on a block device (no mount, md or dm on it meanwhile),
 * and the owner sector with a heartbeat for disks shared between hosts (ZFS multihost
 * style): import refuses a pool whose heartbeat still advances elsewhere. */
#define _GNU_SOURCE
#include "storage/manager/storage_impl.h"
#include "storage/pool/vpool_owner.h"
#include "util/flock.h"
#include "util/log.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void members_unlock(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) { close(fds[i]); fds[i] = -1; }
}

int members_lock(const char *const *paths, const int *create, int n, int strict, int *fds, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) fds[i] = -1;
    for (int i = 0; i < n; i++) {
        pid_t holder = 0;
        struct stat sb;
        /* a block device is also claimed: nobody mounts it or builds md/dm on it meanwhile */
        int excl = stat(paths[i], &sb) == 0 && S_ISBLK(sb.st_mode) ? O_EXCL : 0;
        int fd = nasd_flock_open(paths[i], O_RDWR | excl | (create && create[i] ? O_CREAT : 0), &holder);
        if (fd == -ENOENT || fd == -ENXIO) continue;     /* a missing member: the import decides */
        if (fd == -EBUSY && excl) {
            snprintf(err, errlen, "%s is " BLOCK_HELD_WHAT, paths[i]);
            members_unlock(fds, i);
            return -EBUSY;
        }
        if (fd == -EWOULDBLOCK) {
            if (holder == getpid()) snprintf(err, errlen, "%s is in use by another pool of this nasd", paths[i]);
            else if (holder) snprintf(err, errlen, "%s is in use by process %d (another nasd or tool has it open "
                                      "and locked)", paths[i], (int)holder);
            else snprintf(err, errlen, "%s is locked by another process", paths[i]);
            members_unlock(fds, i);
            return -EBUSY;
        }
        if (fd < 0) continue;   /* unreadable: the engine reports it */
        fds[i] = fd;
        char comm[32] = "";
        pid_t user = strict ? nasd_file_opener(fd, comm, sizeof comm) : 0;
        if (user) {
            snprintf(err, errlen, "%s is open in process %d (%s); close it there first", paths[i], (int)user,
                     comm[0] ? comm : "?");
            members_unlock(fds, i + 1);
            return -EBUSY;
        }
    }
    return 0;
}

int members_check_owner(const char *const *paths, int n, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        struct vpool_peek pk;
        if (vpool_peek(paths[i], &pk) || !pk.has_label) continue;
        if (vpool_owner_live(&pk)) {
            snprintf(err, errlen, "pool %s is in use by nasd pid %u on host %s (%s: heartbeat is current); "
                     "import with \"force\": true only if that host is down", pk.name, pk.owner_pid,
                     pk.owner_host[0] ? pk.owner_host : "?", paths[i]);
            return -EBUSY;
        }
    }
    return 0;
}

static void owner_write_all(struct pool *p, int state, int durable)
{
    for (int i = 0; i < p->nmembers && i < VPOOL_MAX_MEMBERS; i++)
        if (p->lock_fd[i] >= 0) vpool_owner_write(p->lock_fd[i], p->uuid, state, p->hb_seq, durable);
}

void pool_owner_mark(struct pool *p, int state)
{
    p->hb_seq++;
    owner_write_all(p, state, 1);
}

static void *heartbeat_main(void *arg)
{
    struct storage *st = arg;
    pthread_mutex_lock(&st->hb_mu);
    while (!st->hb_stop) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += VPOOL_HEARTBEAT_MS / 1000;
        pthread_cond_timedwait(&st->hb_cv, &st->hb_mu, &dl);
        if (st->hb_stop) break;
        pthread_mutex_unlock(&st->hb_mu);
        pthread_mutex_lock(&st->lock);
        for (struct pool *p = st->pools; p; p = p->next) {
            if (!p->vp || p->hb_off) continue;
            p->hb_seq++;
            owner_write_all(p, VPOOL_OWNER_ACTIVE, 0);
        }
        pthread_mutex_unlock(&st->lock);
        pthread_mutex_lock(&st->hb_mu);
    }
    pthread_mutex_unlock(&st->hb_mu);
    return NULL;
}

void heartbeat_start(struct storage *st)
{
    pthread_mutex_init(&st->hb_mu, NULL);
    pthread_cond_init(&st->hb_cv, NULL);
    st->hb_running = pthread_create(&st->hb_thread, NULL, heartbeat_main, st) == 0;
    if (!st->hb_running) log_warn("storage: no heartbeat thread; pools look exported to other hosts");
}

void heartbeat_stop(struct storage *st)
{
    if (st->hb_running) {
        pthread_mutex_lock(&st->hb_mu);
        st->hb_stop = 1;
        pthread_cond_broadcast(&st->hb_cv);
        pthread_mutex_unlock(&st->hb_mu);
        pthread_join(st->hb_thread, NULL);
        st->hb_running = 0;
    }
    pthread_mutex_destroy(&st->hb_mu);
    pthread_cond_destroy(&st->hb_cv);
}
