/* Whole-unit snapshot copies on format 3 pools that wait for their commit. A write that
 * covers a whole unit a snapshot holds needs nothing of the old unit: it takes a new
 * unit and puts its data in the cache like any write, instead of writing a copy to the
 * log at once (which the next commit then wrote again: twice the data to the disks).
 * - Until a commit has written the new unit's data to the log, a checkpoint writes the
 *   tables as they were before the switch (the new unit free, the old unit's life as
 *   before) and leaves those pages dirty. After that a checkpoint may show it: it syncs
 *   the data before it writes the tables. (Back to hidden if that commit fails.)
 * - That commit journals the new unit's location records right after its ALLOC, each
 *   naming its source sector, so replay falls back to the snapshot's data where the new
 *   data did not reach the disk (vpool_xlate.c copy_back), as for a copy.
 * Members all online only: replay cannot copy back with correct parity otherwise. */
#include "storage/pool/vpool_xl.h"
#include <stdlib.h>
#include <string.h>

bool vp_xcow_ok(struct vpool *p) { return p->xl && vp_all_online(p); }

static int cmp_cow(const void *a, const void *b)
{
    uint32_t x = ((const struct xl_cow *)a)->nau, y = ((const struct xl_cow *)b)->nau;
    return x < y ? -1 : x > y;
}

static struct xl_cow *find(const struct xl_cows *c, uint64_t au)
{
    struct xl_cow k = { .nau = (uint32_t)au };
    return c->n ? bsearch(&k, c->v, c->n, sizeof k, cmp_cow) : NULL;
}

/* commit_lock and alloc_lock held */
int vp_xcow_add(struct vpool *p, uint64_t nau, uint64_t old, bool own, uint32_t old_death)
{
    struct xl_cows *c = &p->xl->cows;
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 64;
        struct xl_cow *m = realloc(c->v, nc * sizeof *m);
        if (!m) return -ENOMEM;
        c->v = m;
        c->cap = nc;
    }
    size_t i = c->n;   /* units are mostly taken in rising order: usually appended */
    while (i && c->v[i - 1].nau > nau) i--;
    memmove(&c->v[i + 1], &c->v[i], (c->n - i) * sizeof *c->v);
    c->v[i] = (struct xl_cow){ .nau = (uint32_t)nau, .old = (uint32_t)old, .old_death = old_death, .own = own };
    c->n++;
    return 0;
}

/* alloc_lock held: au is freed (an unmap of the whole new unit): nothing to hide any more */
void vp_xcow_freed(struct vpool *p, uint64_t au)
{
    struct xl_cows *c = p->xl ? &p->xl->cows : NULL;
    struct xl_cow *e = c ? find(c, au) : NULL;
    if (!e) return;
    memmove(e, e + 1, (size_t)(&c->v[c->n] - (e + 1)) * sizeof *e);
    c->n--;
}

/* page_build, alloc_lock held: entries [first, first+cnt) of the unit table as they were
 * before the waiting copies; true if any was changed */
bool vp_xcow_hide_units(struct vpool *p, uint64_t first, uint64_t cnt, struct vp_au *a)
{
    const struct xl_cows *c = &p->xl->cows;
    bool any = false;
    for (size_t i = 0; i < c->n; i++) {
        const struct xl_cow *e = &c->v[i];
        if (e->nau >= first && e->nau < first + cnt) { memset(&a[e->nau - first], 0, sizeof *a); any = true; }
        if (e->own && e->old >= first && e->old < first + cnt) { a[e->old - first].death = e->old_death; any = true; }
    }
    return any;
}

/* page_build: (checksum, location) pairs of sectors [first, first+cnt); the new units'
 * sectors hold nothing on disk yet */
bool vp_xcow_hide_sectors(struct vpool *p, uint64_t first, uint64_t cnt, uint32_t *pairs)
{
    bool any = false;
    pthread_mutex_lock(&p->alloc_lock);
    for (uint64_t au = first / VP_AU_SECT; au <= (first + cnt - 1) / VP_AU_SECT; au++) {
        if (!find(&p->xl->cows, au)) continue;
        uint64_t lo = au * VP_AU_SECT > first ? au * VP_AU_SECT : first;
        uint64_t hi = (au + 1) * VP_AU_SECT < first + cnt ? (au + 1) * VP_AU_SECT : first + cnt;
        memset(&pairs[2 * (lo - first)], 0, (hi - lo) * 2 * sizeof *pairs);
        any = true;
    }
    pthread_mutex_unlock(&p->alloc_lock);
    return any;
}

/* Their location records (from vp_xl_write, *nrec0 on) are taken out, and each unit's
 * records go right after its ALLOC, before the old unit's LIFE (one batch, as a copy's:
 * journal next_batch): a ZERO of the whole unit, then a location record per sector with
 * data now (a cleaner may have moved some). Those describe all of the unit, so a ZERO of
 * its sectors queued after the ALLOC is left out: replayed after them it would drop a
 * later write's location (a partial unmap after a failed commit had published the unit).
 * *nrec0 then counts them too. */
int vp_xcow_records(struct vpool *p, struct vp_rec **recs, size_t *nrec, size_t *nrec0, struct xl_cows *taken)
{
    struct xl_cows *c = &p->xl->cows;
    *taken = (struct xl_cows){ 0 };
    if (!c->n) return 0;
    struct vp_rec *out = malloc((*nrec + c->n * (size_t)(VP_AU_SECT + 1)) * sizeof *out);
    if (!out) return -ENOMEM;
    size_t n = 0, n0 = 0;
    for (size_t i = 0; i < c->n; i++) c->v[i].at = SIZE_MAX;
    for (size_t i = 0; i < *nrec0; i++) {   /* a unit freed and taken again: its last ALLOC */
        struct xl_cow *e = (*recs)[i].type == VP_REC_ALLOC ? find(c, (*recs)[i].a) : NULL;
        if (e) e->at = i;
    }
    for (size_t i = 0; i < *nrec; i++) {
        const struct vp_rec *r = &(*recs)[i];
        if (i == *nrec0) n0 = n;
        if (i >= *nrec0 && r->type == VP_REC_LOC && find(c, r->a / VP_AU_SECT)) continue;
        const struct xl_cow *z = i < *nrec0 && r->type == VP_REC_ZERO ? find(c, r->a / VP_AU_SECT) : NULL;
        if (z && z->at != SIZE_MAX && z->at < i) continue;
        out[n++] = *r;
        const struct xl_cow *e = r->type == VP_REC_ALLOC && i < *nrec0 ? find(c, r->a) : NULL;
        if (e && e->at != i) e = NULL;
        if (e) out[n++] = (struct vp_rec){ .type = VP_REC_ZERO, .a = (uint64_t)e->nau * VP_AU_SECT, .b = VP_AU_SECT };
        for (unsigned k = 0; e && k < VP_AU_SECT; k++) {
            uint64_t s = (uint64_t)e->nau * VP_AU_SECT + k;
            uint32_t cs = vp_csum_get(p, s), l = vp_xl_loc(p, s);
            if (!vp_has_data(cs) || !l) continue;   /* unmapped since */
            out[n++] = (struct vp_rec){ .type = VP_REC_LOC, .a = s, .a32 = cs,
                                        .b = (l - 1) | ((uint64_t)e->old * VP_AU_SECT + k + 1) << 32 };
        }
    }
    if (*nrec0 >= *nrec) n0 = n;
    free(*recs);
    *recs = out;
    *nrec = n;
    *nrec0 = n0;
    pthread_mutex_lock(&p->alloc_lock);
    *taken = *c;
    *c = (struct xl_cows){ 0 };
    pthread_mutex_unlock(&p->alloc_lock);
    return 0;
}

bool vp_xcow_in(const struct xl_cows *c, uint64_t s) { return find(c, s / VP_AU_SECT) != NULL; }

/* the next try makes the units' location records again; returns how many records are left */
size_t vp_xcow_strip(const struct xl_cows *c, struct vp_rec *recs, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!(recs[i].type == VP_REC_LOC && vp_xcow_in(c, recs[i].a))) recs[k++] = recs[i];
    return k;
}

/* commit_lock held: nothing was added since vp_xcow_records took them */
void vp_xcow_put_back(struct vpool *p, struct xl_cows *c)
{
    pthread_mutex_lock(&p->alloc_lock);
    free(p->xl->cows.v);
    p->xl->cows = *c;
    pthread_mutex_unlock(&p->alloc_lock);
    *c = (struct xl_cows){ 0 };
}
