/* Power-loss simulator for tests (inert unless vp_sim_attach() was called).
 * It remembers, per member, the content each 4 KiB block had at the last sync. When
 * the "machine dies", every later member write and sync fails; afterwards
 * vp_sim_rollback() lets each block that was written but not synced keep either its
 * newest or its last synced content, chosen at random - what a disk with a volatile
 * write cache may do on power loss. Crash-ordering bugs then show up as lost or
 * torn acknowledged data, which a kill -9 (page cache survives) cannot reveal. */
#include "storage/pool/vpool_impl.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sim_blk { uint64_t off; uint8_t *old; };
struct sim_member { pthread_mutex_t mu; struct sim_blk *b; size_t n, cap; };
struct vp_sim {
    _Atomic int dead;
    _Atomic uint32_t dead_members;
    _Atomic long budget;          /* member writes left before the machine dies; < 0: no limit */
    _Atomic int mtarget;          /* vp_sim_kill_member_after: this member, -1 = none ... */
    _Atomic long mbudget;         /* ... dies at its (mbudget+1)th write */
    _Atomic long sbudget;         /* whole-member syncs left before the machine dies; < 0: no limit */
    struct sim_member m[VP_MAXM];
};

struct vp_sim *vp_sim_attach(struct vpool *p)
{
    struct vp_sim *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    for (int i = 0; i < VP_MAXM; i++) pthread_mutex_init(&s->m[i].mu, NULL);
    atomic_init(&s->budget, -1);
    atomic_init(&s->mtarget, -1);
    atomic_init(&s->sbudget, -1);
    p->sim = s;
    return s;
}

void vp_sim_kill(struct vp_sim *s) { atomic_store(&s->dead, 1); }

void vp_sim_kill_after(struct vp_sim *s, long writes) { atomic_store(&s->budget, writes); }
bool vp_sim_died(struct vp_sim *s) { return atomic_load(&s->dead); }

/* One disk dies: every read, write and sync of member m fails with EIO. */
void vp_sim_kill_member(struct vp_sim *s, int m) { atomic_fetch_or(&s->dead_members, 1u << m); }
void vp_sim_kill_at_sync(struct vp_sim *s, long syncs) { atomic_store(&s->sbudget, syncs); }
void vp_sim_kill_member_after(struct vp_sim *s, int m, long writes)
{
    atomic_store(&s->mbudget, writes);
    atomic_store(&s->mtarget, m);
}

int vp_sim_before_read(struct vpool *p, int m)
{
    return p->sim && (atomic_load(&p->sim->dead_members) & (1u << m)) ? -EIO : 0;
}

static bool known(struct sim_member *sm, uint64_t off)
{
    for (size_t i = 0; i < sm->n; i++) if (sm->b[i].off == off) return true;   /* small sets in tests */
    return false;
}

/* Before a write of len bytes at off: -EIO once dead, else remember synced content. */
int vp_sim_before_write(struct vpool *p, int m, uint64_t off, uint64_t len)
{
    struct vp_sim *s = p->sim;
    if (!s) return 0;
    if (atomic_load(&s->dead) || (atomic_load(&s->dead_members) & (1u << m))) return -EIO;
    if (atomic_load(&s->mtarget) == m && atomic_fetch_sub(&s->mbudget, 1) <= 0) {
        vp_sim_kill_member(s, m);
        return -EIO;
    }
    if (atomic_load(&s->budget) >= 0 && atomic_fetch_sub(&s->budget, 1) <= 0) {
        atomic_store(&s->dead, 1);
        return -EIO;
    }
    struct sim_member *sm = &s->m[m];
    pthread_mutex_lock(&sm->mu);
    for (uint64_t o = off & ~(uint64_t)(VP_SECTOR - 1); o < off + len; o += VP_SECTOR) {
        if (known(sm, o)) continue;
        if (sm->n == sm->cap) {
            size_t nc = sm->cap ? sm->cap * 2 : 1024;
            sm->b = realloc(sm->b, nc * sizeof *sm->b);
            sm->cap = nc;
        }
        uint8_t *old = calloc(1, VP_SECTOR);
        if (pread(p->m[m].fd, old, VP_SECTOR, (off_t)o) < 0) memset(old, 0, VP_SECTOR);
        sm->b[sm->n++] = (struct sim_blk){ o, old };
    }
    pthread_mutex_unlock(&sm->mu);
    return 0;
}

/* After a successful sync of [off, off+len) (len 0 = whole member). */
int vp_sim_synced(struct vpool *p, int m, uint64_t off, uint64_t len)
{
    struct vp_sim *s = p->sim;
    if (!s) return 0;
    if (atomic_load(&s->dead) || (atomic_load(&s->dead_members) & (1u << m))) return -EIO;
    if (!len && atomic_load(&s->sbudget) >= 0 && atomic_fetch_sub(&s->sbudget, 1) <= 0) {
        atomic_store(&s->dead, 1);   /* the power fails during this sync: its blocks stay unsynced */
        return -EIO;
    }
    struct sim_member *sm = &s->m[m];
    pthread_mutex_lock(&sm->mu);
    for (size_t i = 0; i < sm->n;) {
        if (!len || (sm->b[i].off >= off && sm->b[i].off < off + len)) {
            free(sm->b[i].old);
            sm->b[i] = sm->b[--sm->n];
        } else i++;
    }
    pthread_mutex_unlock(&sm->mu);
    return 0;
}

/* After the pool object is gone: keep or undo each unsynced block at random (seed
 * VP_SIM_UNDO_ALL: undo every one). */
int vp_sim_rollback(struct vp_sim *s, const char *const *paths, int n, uint64_t seed, uint64_t *undone)
{
    uint64_t x = seed | 1;
    bool all = seed == VP_SIM_UNDO_ALL;
    *undone = 0;
    for (int m = 0; m < n; m++) {
        struct sim_member *sm = &s->m[m];
        int fd = paths[m] ? open(paths[m], O_WRONLY) : -1;
        for (size_t i = 0; i < sm->n; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            if (fd >= 0 && ((x & 1) || all) && pwrite(fd, sm->b[i].old, VP_SECTOR, (off_t)sm->b[i].off) == VP_SECTOR) (*undone)++;
            free(sm->b[i].old);
        }
        free(sm->b);
        if (fd >= 0) close(fd);
    }
    free(s);
    return 0;
}
