/* Parallel member I/O: one persistent worker thread per member slot, started on first
 * use and stopped when the pool is freed. A direct 1 MiB write used to create and join
 * three threads per request (one per member but the caller's), a fixed cost of the
 * same order as the request's own writes into the page cache. */
#include "storage/pool/vpool_impl.h"
#include <stdlib.h>

struct vp_worker {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct vp_job job;
    int state;                /* 0 idle, 1 job posted, 2 job done */
    bool stop, on;
};
struct vp_par { pthread_mutex_t use; struct vp_worker w[VP_MAXM]; };

static void *worker_main(void *arg)
{
    struct vp_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->state != 1 && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop) break;
        struct vp_job j = w->job;
        pthread_mutex_unlock(&w->mu);
        j.fn(j.arg);
        pthread_mutex_lock(&w->mu);
        w->state = 2;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static struct vp_par *par_get(struct vp_par **slot)
{
    struct vp_par *par = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (par) return par;
    par = calloc(1, sizeof *par);
    if (!par) return NULL;
    pthread_mutex_init(&par->use, NULL);
    for (int i = 0; i < VP_MAXM; i++) { pthread_mutex_init(&par->w[i].mu, NULL); pthread_cond_init(&par->w[i].cv, NULL); }
    struct vp_par *none = NULL;
    if (!__atomic_compare_exchange_n(slot, &none, par, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        free(par);
        return none;
    }
    return par;
}

static void run_locked(struct vp_par *par, const struct vp_job *jobs, int n);

void vp_par_run(struct vpool *p, const struct vp_job *jobs, int n)
{
    struct vp_par *par = n > 1 ? par_get(&p->par) : NULL;
    if (!par) { for (int i = 0; i < n; i++) jobs[i].fn(jobs[i].arg); return; }
    pthread_mutex_lock(&par->use);
    run_locked(par, jobs, n);
}

/* Workers of their own (p->rpar), not p->par's: a read's job may wait for a row lock
 * (repair) that a commit holds while it waits for p->par. */
bool vp_par_try_read(struct vpool *p, const struct vp_job *jobs, int n)
{
    struct vp_par *par = par_get(&p->rpar);
    if (!par || pthread_mutex_trylock(&par->use)) return false;
    run_locked(par, jobs, n);
    return true;
}

/* par->use held; releases it */
static void run_locked(struct vp_par *par, const struct vp_job *jobs, int n)
{
    bool posted[VP_MAXM] = {0};
    for (int i = 1; i < n && i < VP_MAXM; i++) {
        struct vp_worker *w = &par->w[i];
        if (!w->on) w->on = pthread_create(&w->th, NULL, worker_main, w) == 0;
        if (!w->on) continue;
        pthread_mutex_lock(&w->mu);
        w->job = jobs[i];
        w->state = 1;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        posted[i] = true;
    }
    jobs[0].fn(jobs[0].arg);
    for (int i = 1; i < n; i++) {
        if (!posted[i]) { jobs[i].fn(jobs[i].arg); continue; }
        struct vp_worker *w = &par->w[i];
        pthread_mutex_lock(&w->mu);
        while (w->state != 2) pthread_cond_wait(&w->cv, &w->mu);
        w->state = 0;
        pthread_mutex_unlock(&w->mu);
    }
    pthread_mutex_unlock(&par->use);
}

static void stop_one(struct vp_par *par)
{
    if (!par) return;
    for (int i = 0; i < VP_MAXM; i++) {
        struct vp_worker *w = &par->w[i];
        if (!w->on) continue;
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->th, NULL);
    }
    free(par);
}

void vp_par_stop(struct vpool *p)
{
    stop_one(p->par);
    stop_one(p->rpar);
    p->par = p->rpar = NULL;
}
