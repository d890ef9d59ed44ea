#pragma once
/* State of the translation layer of format 3 pools, shared by vpool_xlate.c (tables,
 * reads, replay) and vpool_xlog.c (log writes, cleaner, commit). Not a public API. */
#include "storage/pool/vpool_impl.h"

enum { XS_FREE, XS_OPEN, XS_USED, XS_PENDING };   /* PENDING: empty, free at the next checkpoint */

struct xl_cow { uint32_t nau, old, old_death; bool own; size_t at; };
struct xl_cows { struct xl_cow *v; size_t n, cap; };   /* sorted by nau */

struct vp_xl {
    uint32_t *loc;                /* n_sect entries: physical sector + 1, 0 = no data */
    uint32_t *rmap;               /* nphys entries: pool sector + 1 living there, 0 = none */
    uint32_t *live;               /* per segment: sectors living in it */
    uint8_t *state;               /* per segment: XS_* */
    uint64_t nseg, seg_sect, nphys, nfree, npending;
    uint64_t open_seg;            /* the XS_OPEN segment, UINT64_MAX = none */
    uint64_t next_seg;            /* where take_segment looks first */
    unsigned open_row, open_w;    /* next parity group of the open segment */
    bool built;                   /* reverse map and counts valid (after vp_xl_rebuild) */
    uint64_t epoch;               /* checkpoints completed (commit_lock) */
    /* a commit published sectors (locations, checksums) its records do not hold yet: if it
     * fails, the next one syncs before its records as for an lz4 chunk (commit_lock) */
    bool ahead;
    /* held exclusive while locations are published, shared by a read that has to
     * repair and by scrub: they see each sector's location and checksum together */
    pthread_rwlock_t lock;
    uint64_t cleaned_segs, moved_sect, written_sect, pad_sect, clean_reread;
    /* import: physical sectors that replayed records now point to; their parity groups
     * may be torn (written since the last member sync) and are resynced */
    uint64_t *replayed;
    size_t nreplayed, replayed_cap;
    struct vp_rec *dropped;       /* replay: this batch's location records whose data was missing */
    size_t ndropped, dropped_cap;
    /* replay: sectors for a missing member, whose parity is made once every other column
     * has its final content (vp_xl_rebuild) */
    struct xl_defer { uint64_t phys; uint8_t *data; } *deferred;
    size_t ndeferred, deferred_cap;
    /* whole-unit snapshot copies whose data is not in the log yet (vpool_xcow.c);
     * changed under commit_lock and alloc_lock */
    struct xl_cows cows;
};

static inline uint64_t xl_seg_of(const struct vp_xl *x, uint64_t phys) { return phys / x->seg_sect; }
static inline uint32_t xl_rmap_get(const struct vp_xl *x, uint64_t phys) { return __atomic_load_n(&x->rmap[phys], __ATOMIC_RELAXED); }
static inline uint8_t xl_state_get(const struct vp_xl *x, uint64_t seg) { return __atomic_load_n(&x->state[seg], __ATOMIC_RELAXED); }
static inline void xl_state_set(struct vp_xl *x, uint64_t seg, uint8_t st) { __atomic_store_n(&x->state[seg], st, __ATOMIC_RELAXED); }
/* commit_lock held (or import): s now lives at phys / no longer at phys */
void xl_enliven(struct vp_xl *x, uint64_t phys, uint64_t s);
void xl_unlive(struct vp_xl *x, uint64_t phys);
/* vp_xl_commit, once it wrote the cache's data: the waiting copies' records, and the copies
 * themselves handed to *taken (their data is in the log now: a checkpoint may show them) */
int  vp_xcow_records(struct vpool *p, struct vp_rec **recs, size_t *nrec, size_t *nrec0, struct xl_cows *taken);
bool vp_xcow_in(const struct xl_cows *c, uint64_t s);   /* pool sector s is in one of the units */
size_t vp_xcow_strip(const struct xl_cows *c, struct vp_rec *recs, size_t n);
void vp_xcow_put_back(struct vpool *p, struct xl_cows *c);   /* the commit failed before its records were out */
