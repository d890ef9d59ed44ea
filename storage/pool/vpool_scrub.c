/* Background work: scrub (verify + repair every live row) and resilver (rebuild the
 * chunks of members being resilvered, either every live row or only the rows of
 * allocation units written while the member was offline; for format 3 the physical
 * rows the log wrote meanwhile). One thread at a time. */
#include "storage/pool/vpool_impl.h"
#include "util/log.h"
#include <string.h>
#include <time.h>

enum { BG_SCRUB = 1, BG_RESILVER = 2, BG_RESILVER_CHANGED = 3 };

void vp_note_degraded_write(struct vpool *p, uint64_t sect)
{
    for (int m = 0; m < p->n; m++) {
        if (atomic_load(&p->m[m].state) == VPOOL_M_OFFLINE) {
            /* atomic bytes: a resilver of another member may be reading them */
            __atomic_store_n(&p->changed_au[sect / VP_AU_SECT], 1, __ATOMIC_RELAXED);
            __atomic_store_n(&p->changed_any, 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

static bool row_changed(struct vpool *p, uint64_t row)
{
    for (int c = 0; c < p->ndata; c++) {
        uint64_t au = vp_row_sect0(p, row, c) / VP_AU_SECT;
        if (au < vp_phys_aus(p) && __atomic_load_n(&p->changed_au[au], __ATOMIC_RELAXED)) return true;
    }
    return false;
}

static void *bg_main(void *arg)
{
    struct vpool *p = arg;
    int kind = p->bg_kind;
    uint32_t mask = p->resilver_mask;
    uint64_t rep = 0, unrep = 0;
    int rc = 0;
    atomic_store(&p->bg_total, p->rows);
    uint64_t rows = kind == BG_RESILVER_CHANGED && !__atomic_load_n(&p->changed_any, __ATOMIC_RELAXED) ? 0 : p->rows;   /* nothing written meanwhile */
    for (uint64_t row = 0; row < rows && !rc; row++) {
        if (atomic_load(&p->bg_stop)) { rc = -ECANCELED; break; }
        atomic_store(&p->bg_done, row);
        if (!vp_row_live(p, row)) continue;
        if (kind == BG_SCRUB) rc = vp_scrub_row(p, row, &rep, &unrep);
        else if (kind == BG_RESILVER || row_changed(p, row)) {
            rc = vp_rebuild_row(p, row, mask);
            atomic_fetch_add(&p->bg_rebuilt, 1);
        }
    }
    atomic_store(&p->bg_done, p->rows);
    if (kind == BG_SCRUB) {
        atomic_store(&p->scrub_repaired, rep);
        atomic_store(&p->scrub_unrepairable, unrep);
        atomic_fetch_add(&p->repaired, rep);
        atomic_fetch_add(&p->unrepairable, unrep);
        atomic_store(&p->scrub_finished, (uint64_t)time(NULL));
        atomic_store(&p->scrub_running, 0);
        log_info("vpool %s: scrub %s: %llu repaired, %llu unrepairable", p->name, rc ? "stopped" : "finished",
                 (unsigned long long)rep, (unsigned long long)unrep);
        return NULL;
    }
    if (!rc) {
        vp_commit_lock(p);
        rc = vp_meta_write(p, true, mask);   /* the rebuilt members get every metadata page */
        for (int m = 0; m < p->n && !rc; m++)
            if ((mask & (1u << m)) && atomic_load(&p->m[m].state) == VPOOL_M_RESILVERING)
                atomic_store(&p->m[m].state, VPOOL_M_ONLINE);
        if (!rc) rc = vp_checkpoint(p);
        pthread_mutex_unlock(&p->commit_lock);
    }
    if (rc) log_warn("vpool %s: resilver %s: %s", p->name, rc == -ECANCELED ? "interrupted" : "failed", strerror(-rc));
    else log_info("vpool %s: resilver finished, pool %s", p->name, vpool_state_name(vp_pool_state(p)));
    atomic_store(&p->resilver_running, 0);
    return NULL;
}

static void bg_join_locked(struct vpool *p)
{
    if (!p->bg_active) return;
    pthread_join(p->bg_thread, NULL);
    p->bg_active = false;
}

void vp_bg_stop(struct vpool *p)
{
    pthread_mutex_lock(&p->bg_lock);
    atomic_store(&p->bg_stop, 1);
    bg_join_locked(p);
    atomic_store(&p->bg_stop, 0);
    pthread_mutex_unlock(&p->bg_lock);
}

void vpool_wait_background(struct vpool *p)
{
    pthread_mutex_lock(&p->bg_lock);
    bg_join_locked(p);
    pthread_mutex_unlock(&p->bg_lock);
}

int vp_bg_start(struct vpool *p, int kind, uint32_t mask)
{
    pthread_mutex_lock(&p->bg_lock);
    if (atomic_load(&p->scrub_running) || atomic_load(&p->resilver_running)) {
        pthread_mutex_unlock(&p->bg_lock);
        return -EBUSY;
    }
    bg_join_locked(p);
    if (kind != BG_SCRUB) {
        uint32_t all = 0;
        for (int m = 0; m < p->n; m++) if (atomic_load(&p->m[m].state) == VPOOL_M_RESILVERING) all |= 1u << m;
        if (all & ~mask) kind = BG_RESILVER;   /* another rebuild was interrupted: do it all */
        mask |= all;
        if (p->layout == VPOOL_RAIDZ1 && __builtin_popcount(mask) > 1) {
            log_err("vpool %s: cannot rebuild %d raidz1 members at once", p->name, __builtin_popcount(mask));
            pthread_mutex_unlock(&p->bg_lock);
            return -EIO;
        }
        atomic_store(&p->resilver_running, 1);
    } else {
        atomic_store(&p->scrub_running, 1);
        atomic_store(&p->scrub_started, (uint64_t)time(NULL));
        atomic_store(&p->scrub_finished, 0);
        atomic_store(&p->scrub_repaired, 0);
        atomic_store(&p->scrub_unrepairable, 0);
    }
    if (kind != BG_SCRUB) atomic_store(&p->bg_rebuilt, 0);
    p->bg_kind = kind;
    p->resilver_mask = mask;
    atomic_store(&p->bg_done, 0);
    atomic_store(&p->bg_total, p->rows);
    atomic_store(&p->bg_stop, 0);
    int rc = pthread_create(&p->bg_thread, NULL, bg_main, p);
    if (rc) {
        atomic_store(&p->scrub_running, 0);
        atomic_store(&p->resilver_running, 0);
    } else p->bg_active = true;
    pthread_mutex_unlock(&p->bg_lock);
    return -rc;
}

int vpool_scrub_start(struct vpool *p)
{
    if (atomic_load(&p->closed)) return -ENXIO;
    return vp_bg_start(p, BG_SCRUB, 0);
}
