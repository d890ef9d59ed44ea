/* RAM cache of 4 KiB logical sectors keyed by pool sector: clean entries form an LRU
 * read cache, dirty entries are the write-back buffer (never evicted until a commit
 * marks them clean). Sharded so concurrent I/O threads rarely share a lock. The sector
 * buffers come from each shard's own 1 MiB mappings (see buf_get). */
#include "storage/pool/vpool_impl.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define VC_SHARDS 256

struct vc_ent {
    uint64_t key, dgen;
    struct vc_ent *hnext;
    struct vc_ent *prev, *next;   /* in lru (clean) or dirty list */
    bool dirty;
    bool busy;                    /* data is lent to a commit: writers replace, never overwrite it */
    uint8_t *data;
};
struct vc_list { struct vc_ent head; };

struct vc_shard {
    pthread_mutex_t mu;
    struct vc_ent **ht;
    size_t nbuckets, n, cap;      /* cap: clean entries (the read cache's share) */
    size_t nd;                    /* dirty entries of n: never evicted, not held against cap */
    struct vc_list lru, dirty;
    uint64_t dgen;
    uint8_t **fl;                 /* free sector buffers; those below nrel have no pages */
    size_t nfl, nrel;
    uint8_t **slabs;              /* the mappings (VC_SLAB bytes each); fl has room for all */
    size_t nslabs;
} __attribute__((aligned(64)));

struct vp_cache {
    /* one byte per key, set while the key is in the table (changed under its shard
     * lock): a miss, the common case for random reads, costs no lock at all */
    _Atomic uint8_t *present;
    uint64_t nkeys;
    /* admission filter: a clean sector read from disk is cached on its second miss
     * within a while, so one-off random reads and scans do not churn the cache */
    _Atomic uint64_t *ghost;
    size_t nghost;
    struct vc_shard sh[VC_SHARDS];
    _Atomic uint64_t ndirty;
    _Atomic bool counted;         /* its dirty sectors count in dirty_all (not while the pool is FAULTED) */
    /* bumped by every drop and by a commit before its sectors turn clean: a reader that
     * saw a miss only caches what it read from disk if nothing changed meanwhile. A dirty
     * write does not bump it (a locked add after each 4 KiB copy was a tenth of a
     * sequential write's time): its entry holds the slot, so a reader's stale disk copy
     * cannot go in until a commit makes the entry clean, evictable, and bumps first. */
    _Atomic uint64_t epoch __attribute__((aligned(64)));
};

uint64_t vc_epoch(struct vp_cache *c) { return atomic_load(&c->epoch); }

/* dirty sectors, all entries and the free buffers whose pages were not given back
 * (unrel_all) of every pool in the process: the write-back budget is the host's.
 * Signed: vc_count_dirty's switch may race a change by a sector or two. */
static _Atomic int64_t dirty_all, ent_all, unrel_all;

static void dirty_add(struct vp_cache *c, struct vc_shard *s, int64_t d)
{
    s->nd += (size_t)d;
    atomic_fetch_add(&c->ndirty, (uint64_t)d);
    if (atomic_load_explicit(&c->counted, memory_order_relaxed)) atomic_fetch_add(&dirty_all, d);
}

void vc_count_dirty(struct vp_cache *c, bool on)
{
    if (atomic_exchange(&c->counted, on) == on) return;
    int64_t n = (int64_t)atomic_load(&c->ndirty);
    atomic_fetch_add(&dirty_all, on ? n : -n);
}

uint64_t vc_dirty_all(void) { int64_t v = atomic_load(&dirty_all); return v > 0 ? (uint64_t)v : 0; }
uint64_t vc_entries_all(void) { int64_t v = atomic_load(&ent_all); return v > 0 ? (uint64_t)v : 0; }
uint64_t vc_unreleased_all(void) { int64_t v = atomic_load(&unrel_all); return v > 0 ? (uint64_t)v : 0; }


static inline uint64_t vc_hash(uint64_t k) { k *= 0x9E3779B97F4A7C15ull; return k ^ (k >> 29); }
static inline struct vc_shard *vc_shard_of(struct vp_cache *c, uint64_t key) { return &c->sh[vc_hash(key) % VC_SHARDS]; }

bool vc_admit(struct vp_cache *c, uint64_t key)
{
    _Atomic uint64_t *g = &c->ghost[(vc_hash(key) >> 24) & (c->nghost - 1)];
    if (atomic_load_explicit(g, memory_order_relaxed) == key + 1) return true;
    atomic_store_explicit(g, key + 1, memory_order_relaxed);
    return false;
}

/* Sector buffers: malloc'ed one by one, a writer thread's glibc arena grew its heap
 * with an mprotect per buffer (a 1 GiB write of new sectors from a worker thread took
 * 262,144 of them: log pool seq write with snapshots 0.04x of the raw files). Carved
 * from 1 MiB mappings instead, 4 KiB aligned, and kept per shard (under its lock). */
#define VC_SLAB (1u << 20)
#define VC_SLAB_BUFS (VC_SLAB / VP_SECTOR)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14; older kernels refuse it and fault as before */
#endif
#define VC_POPULATE 16

/* The buffer about to be taken (fl[nfl]) has no pages: give them to it and to the next
 * free buffers next to it in one call. A page fault per first write to a buffer cost
 * 10 us on a VM that gives freed memory back to its host, 2.8 s per GiB; populating in
 * runs 1.5 s. Runs of VC_POPULATE keep what 256 shards hold unused small. */
static void populate(struct vc_shard *s)
{
    size_t top = s->nfl, j = top;
    uint8_t *lo = s->fl[top];
    /* new slabs are stacked with addresses rising downwards, released buffers falling */
    ptrdiff_t step = top && s->fl[top - 1] == lo + VP_SECTOR ? VP_SECTOR : -(ptrdiff_t)VP_SECTOR;
    while (j > 0 && top - j + 1 < VC_POPULATE && s->fl[j - 1] == s->fl[j] + step) j--;
    if (step < 0) lo = s->fl[j];
    if (madvise(lo, (top - j + 1) * VP_SECTOR, MADV_POPULATE_WRITE)) { s->nrel = top; return; }   /* faults as before */
    s->nrel = j;   /* fl[j..top-1] stay free, now with pages */
    atomic_fetch_add(&unrel_all, (int64_t)(top - j));
}

static uint8_t *buf_get(struct vc_shard *s)
{
    if (!s->nfl) {
        uint8_t **fl = realloc(s->fl, (s->nslabs + 1) * VC_SLAB_BUFS * sizeof *fl);
        if (!fl) return NULL;
        s->fl = fl;
        uint8_t **sl = realloc(s->slabs, (s->nslabs + 1) * sizeof *sl);
        if (!sl) return NULL;
        s->slabs = sl;
        uint8_t *m = mmap(NULL, VC_SLAB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return NULL;
        s->slabs[s->nslabs++] = m;
        for (size_t i = VC_SLAB_BUFS; i-- > 0;) s->fl[s->nfl++] = m + i * VP_SECTOR;   /* lowest first out */
        s->nrel = s->nfl;   /* never touched: not resident */
    }
    s->nfl--;
    if (s->nrel > s->nfl) populate(s);
    else atomic_fetch_sub(&unrel_all, 1);
    return s->fl[s->nfl];
}

static void buf_put(struct vc_shard *s, uint8_t *b) { s->fl[s->nfl++] = b; atomic_fetch_add(&unrel_all, 1); }

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(uint8_t *const *)a, y = (uintptr_t)*(uint8_t *const *)b;
    return x < y ? -1 : x > y;
}

/* The free buffers' pages go back to the system (they read as zeros when taken again):
 * the freed ones sorted, one madvise per run of neighbours. */
static void buf_release(struct vc_shard *s)
{
    if (s->nfl == s->nrel) return;
    qsort(s->fl + s->nrel, s->nfl - s->nrel, sizeof *s->fl, cmp_ptr);
    for (size_t i = s->nrel, j; i < s->nfl; i = j) {
        for (j = i + 1; j < s->nfl && s->fl[j] == s->fl[j - 1] + VP_SECTOR; j++) {}
        madvise(s->fl[i], (j - i) * VP_SECTOR, MADV_DONTNEED);
    }
    atomic_fetch_sub(&unrel_all, (int64_t)(s->nfl - s->nrel));
    s->nrel = s->nfl;
}

static void l_init(struct vc_list *l) { l->head.prev = l->head.next = &l->head; }
static void l_del(struct vc_ent *e) { e->prev->next = e->next; e->next->prev = e->prev; }
static void l_push(struct vc_list *l, struct vc_ent *e)
{
    e->next = l->head.next; e->prev = &l->head;
    l->head.next->prev = e; l->head.next = e;
}

struct vp_cache *vc_new(uint64_t bytes, uint64_t nkeys)
{
    struct vp_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->nkeys = nkeys;
    atomic_init(&c->counted, true);
    c->present = mmap(NULL, nkeys, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (c->present == MAP_FAILED) { free(c); return NULL; }
    size_t per = bytes / VP_SECTOR / VC_SHARDS;
    if (per < 16) per = 16;
    c->nghost = 1;
    while (c->nghost < per * VC_SHARDS * 4) c->nghost <<= 1;
    c->ghost = calloc(c->nghost, sizeof *c->ghost);
    if (!c->ghost) { munmap((void *)c->present, nkeys); free(c); return NULL; }
    for (int i = 0; i < VC_SHARDS; i++) {
        struct vc_shard *s = &c->sh[i];
        pthread_mutex_init(&s->mu, NULL);
        s->cap = per;
        s->nbuckets = 1;
        while (s->nbuckets < per * 2) s->nbuckets <<= 1;
        s->ht = calloc(s->nbuckets, sizeof *s->ht);
        if (!s->ht) { vc_free(c); return NULL; }
        l_init(&s->lru); l_init(&s->dirty);
    }
    return c;
}

void vc_free(struct vp_cache *c)
{
    if (!c) return;
    for (int i = 0; i < VC_SHARDS; i++) {
        struct vc_shard *s = &c->sh[i];
        for (size_t b = 0; s->ht && b < s->nbuckets; b++)
            for (struct vc_ent *e = s->ht[b], *nx; e; e = nx) { nx = e->hnext; free(e); }
        free(s->ht);
        for (size_t k = 0; k < s->nslabs; k++) munmap(s->slabs[k], VC_SLAB);
        atomic_fetch_sub(&unrel_all, (int64_t)(s->nfl - s->nrel));
        free(s->slabs);
        free(s->fl);
        pthread_mutex_destroy(&s->mu);
    }
    vc_count_dirty(c, false);
    int64_t n = 0;
    for (int i = 0; i < VC_SHARDS; i++) n += (int64_t)c->sh[i].n;
    atomic_fetch_sub(&ent_all, n);
    free((void *)c->ghost);
    munmap((void *)c->present, c->nkeys);
    free(c);
}

static struct vc_ent **vc_slot(struct vc_shard *s, uint64_t key)
{
    struct vc_ent **pp = &s->ht[(vc_hash(key) >> 16) & (s->nbuckets - 1)];
    while (*pp && (*pp)->key != key) pp = &(*pp)->hnext;
    return pp;
}

static void vc_remove(struct vp_cache *c, struct vc_shard *s, struct vc_ent **pp)
{
    struct vc_ent *e = *pp;
    *pp = e->hnext;
    l_del(e);
    if (e->key < c->nkeys) atomic_store_explicit(&c->present[e->key], 0, memory_order_release);
    if (e->dirty) dirty_add(c, s, -1);
    s->n--;
    atomic_fetch_sub(&ent_all, 1);
    if (!e->busy) buf_put(s, e->data);   /* else the commit holding it gives it back */
    free(e);
}

bool vc_lookup(struct vp_cache *c, uint64_t key, void *buf)
{
    /* A writer sets the byte (under the shard lock) before its write is acknowledged,
     * so a read issued after that acknowledgement cannot miss it here. */
    if (key < c->nkeys && !atomic_load_explicit(&c->present[key], memory_order_acquire)) return false;
    struct vc_shard *s = vc_shard_of(c, key);
    pthread_mutex_lock(&s->mu);
    struct vc_ent *e = *vc_slot(s, key);
    if (e) {
        memcpy(buf, e->data, VP_SECTOR);
        if (!e->dirty) { l_del(e); l_push(&s->lru, e); }
    }
    pthread_mutex_unlock(&s->mu);
    return e != NULL;
}

/* Dirty entries are never evicted, so a shard may hold far more than its share of the
 * read cache (the write-back budget is sized apart from it): the table grows with them. */
static void vc_grow(struct vc_shard *s)
{
    size_t nb = s->nbuckets * 2;
    struct vc_ent **ht = calloc(nb, sizeof *ht);
    if (!ht) return;   /* longer chains, still correct */
    for (size_t b = 0; b < s->nbuckets; b++)
        for (struct vc_ent *e = s->ht[b], *nx; e; e = nx) {
            nx = e->hnext;
            size_t i = (vc_hash(e->key) >> 16) & (nb - 1);
            e->hnext = ht[i];
            ht[i] = e;
        }
    free(s->ht);
    s->ht = ht;
    s->nbuckets = nb;
}

static struct vc_ent *vc_get_or_new(struct vp_cache *c, struct vc_shard *s, uint64_t key)
{
    struct vc_ent **pp = vc_slot(s, key);
    if (*pp) return *pp;
    if (s->n >= s->nbuckets) vc_grow(s);
    while (s->n - s->nd > s->cap && s->lru.head.prev != &s->lru.head)
        vc_remove(c, s, vc_slot(s, s->lru.head.prev->key));
    struct vc_ent *e = NULL;
    if (s->n - s->nd == s->cap && s->lru.head.prev != &s->lru.head) {   /* recycle the LRU victim */
        e = s->lru.head.prev;
        struct vc_ent **vp = vc_slot(s, e->key);
        *vp = e->hnext;
        l_del(e);
        if (e->key < c->nkeys) atomic_store_explicit(&c->present[e->key], 0, memory_order_release);
        s->n--;
        atomic_fetch_sub(&ent_all, 1);
    } else {
        e = calloc(1, sizeof *e);
        if (!e) return NULL;
        if (!(e->data = buf_get(s))) { free(e); return NULL; }
    }
    e->key = key;
    e->dirty = false;
    e->busy = false;
    e->dgen = 0;
    if (key < c->nkeys) atomic_store_explicit(&c->present[key], 1, memory_order_release);
    size_t b = (vc_hash(key) >> 16) & (s->nbuckets - 1);
    e->hnext = s->ht[b];
    s->ht[b] = e;
    l_push(&s->lru, e);
    s->n++;
    atomic_fetch_add(&ent_all, 1);
    return e;
}

void vc_put_clean(struct vp_cache *c, uint64_t key, const void *buf, uint64_t epoch)
{
    struct vc_shard *s = vc_shard_of(c, key);
    if (pthread_mutex_trylock(&s->mu)) return;   /* only a cache: never queue for it */
    if (atomic_load(&c->epoch) == epoch && !*vc_slot(s, key)) {   /* never clobber newer data */
        struct vc_ent *e = vc_get_or_new(c, s, key);
        if (e) memcpy(e->data, buf, VP_SECTOR);
    }
    pthread_mutex_unlock(&s->mu);
}

void vc_put_dirty(struct vp_cache *c, uint64_t key, const void *buf)
{
    struct vc_shard *s = vc_shard_of(c, key);
    pthread_mutex_lock(&s->mu);
    struct vc_ent *e;
    for (;;) {   /* out of memory: waiting is not an option, retry (the entry may go meanwhile) */
        uint8_t *nb = NULL;
        if ((e = vc_get_or_new(c, s, key)) && !e->busy) break;
        /* busy: a commit is writing the old content from this buffer, take a new one */
        if (e && (nb = buf_get(s))) { e->data = nb; e->busy = false; break; }
        pthread_mutex_unlock(&s->mu);
        sched_yield();
        pthread_mutex_lock(&s->mu);
    }
    memcpy(e->data, buf, VP_SECTOR);
    if (key < c->nkeys) atomic_store_explicit(&c->present[key], 1, memory_order_release);   /* may have been hidden */
    e->dgen = ++s->dgen;
    if (!e->dirty) {
        e->dirty = true;
        dirty_add(c, s, 1);
        l_del(e);
        l_push(&s->dirty, e);
    }
    pthread_mutex_unlock(&s->mu);
}

void vc_drop(struct vp_cache *c, uint64_t key)
{
    struct vc_shard *s = vc_shard_of(c, key);
    pthread_mutex_lock(&s->mu);
    struct vc_ent **pp = vc_slot(s, key);
    if (*pp) vc_remove(c, s, pp);
    atomic_fetch_add_explicit(&c->epoch, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
}

uint64_t vc_dirty_count(struct vp_cache *c) { return atomic_load(&c->ndirty); }

/* The write-back budget is far larger than the read cache: committed sectors stay as
 * clean entries over the cache's size, reused by the next writes without allocating
 * (fresh memory costs a page fault per sector). The flusher frees them when its pool was
 * idle for a tick, or while all pools' cached sectors pass the soft limit. */
size_t vc_trim(struct vp_cache *c, bool release)
{
    size_t freed = 0;
    for (int i = 0; i < VC_SHARDS; i++) {
        struct vc_shard *s = &c->sh[i];
        pthread_mutex_lock(&s->mu);
        while (s->n - s->nd > s->cap && s->lru.head.prev != &s->lru.head) {
            vc_remove(c, s, vc_slot(s, s->lru.head.prev->key));
            freed++;
        }
        if (release) buf_release(s);
        pthread_mutex_unlock(&s->mu);
    }
    return freed;
}

/* Lends every dirty sector's buffer to the commit (no copy): *out[i].data is the
 * entry's buffer, marked busy until vc_release. */
size_t vc_collect_dirty(struct vp_cache *c, struct vp_wsect **out)
{
    size_t cap = atomic_load(&c->ndirty) + 64, n = 0;
    *out = malloc(cap * sizeof **out);
    if (!*out) return SIZE_MAX;
    for (int i = 0; i < VC_SHARDS; i++) {
        struct vc_shard *s = &c->sh[i];
        pthread_mutex_lock(&s->mu);
        for (struct vc_ent *e = s->dirty.head.next; e != &s->dirty.head; e = e->next) {
            if (n == cap) {   /* writers raced us: grow (rare) */
                struct vp_wsect *nw = realloc(*out, cap * 2 * sizeof *nw);
                if (!nw) {   /* give back what was lent so far */
                    pthread_mutex_unlock(&s->mu);
                    vc_release(c, *out, n, false, false);
                    free(*out);
                    *out = NULL;
                    return SIZE_MAX;
                }
                *out = nw;
                cap *= 2;
            }
            e->busy = true;
            (*out)[n++] = (struct vp_wsect){ .sect = e->key, .dgen = e->dgen, .data = e->data };
        }
        pthread_mutex_unlock(&s->mu);
    }
    return n;
}

void vc_release(struct vp_cache *c, const struct vp_wsect *w, size_t n, bool committed, bool keep)
{
    /* before any entry turns clean (and so evictable): see epoch */
    if (committed && n) atomic_fetch_add(&c->epoch, 1);
    for (size_t i = 0; i < n; i++) {
        struct vc_shard *s = vc_shard_of(c, w[i].sect);
        pthread_mutex_lock(&s->mu);
        struct vc_ent **pp = vc_slot(s, w[i].sect), *e = *pp;
        if (!e || e->data != w[i].data || !e->busy) {   /* replaced or dropped meanwhile: ours now */
            buf_put(s, w[i].data);
        } else {
            e->busy = false;
            if (committed && e->dirty && e->dgen == w[i].dgen) {
                e->dirty = false;
                dirty_add(c, s, -1);
                l_del(e);
                l_push(&s->lru, e);
                /* !keep: hidden from lookups (the page cache has it), but kept for reuse
                 * by the next write instead of freed and allocated again */
                if (!keep && e->key < c->nkeys) atomic_store_explicit(&c->present[e->key], 0, memory_order_release);
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
}

