/* Replay of intent-only writes. Most commits journal only the new checksums of their
 * sectors (VP_REC_INTENT, no data) and then write data and parity in place, so after a
 * crash each such sector holds its old or its new content (4 KiB writes are atomic)
 * and raidz1 parity may match neither. Import collects the candidate checksums of
 * every sector (its value before the first intent and every intent since), keeps the
 * one the data on disk matches, and then recomputes the parity of every touched parity
 * group (and equalises mirror copies). A later journaled write or unmap of a sector
 * supersedes its earlier intents. */
#include "storage/pool/vpool_impl.h"
#include "util/log.h"
#include <stdlib.h>
#include <string.h>

enum { IK_INTENT, IK_OVERRIDE };
struct ient { uint64_t s, bseq; uint32_t order, prev, now; uint32_t kind; };
struct vp_intents { struct ient *e; size_t n, cap, nintent; uint32_t order; uint64_t bseq, synced; };

struct vp_intents *vp_intents_new(void) { return calloc(1, sizeof(struct vp_intents)); }

static int push(struct vp_intents *t, struct ient x)
{
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 1024;
        struct ient *ne = realloc(t->e, nc * sizeof *ne);
        if (!ne) return -ENOMEM;
        t->e = ne; t->cap = nc;
    }
    x.order = t->order++;
    x.bseq = t->bseq;
    t->e[t->n++] = x;
    return 0;
}

int vp_intents_add(struct vp_intents *t, uint64_t s, uint32_t prev, uint32_t now)
{
    t->nintent++;
    return push(t, (struct ient){ .s = s, .prev = prev, .now = now, .kind = IK_INTENT });
}

void vp_intents_batch(struct vp_intents *t, uint64_t seq) { t->bseq = seq; }
void vp_intents_synced(struct vp_intents *t, uint64_t upto) { if (upto > t->synced) t->synced = upto; }

int vp_intents_override(struct vp_intents *t, uint64_t s, uint64_t cnt)
{
    if (!t->nintent) return 0;   /* nothing earlier to supersede */
    for (uint64_t i = 0; i < cnt; i++) {
        int rc = push(t, (struct ient){ .s = s + i, .kind = IK_OVERRIDE });
        if (rc) return rc;
    }
    return 0;
}

static int cmp_ient(const void *a, const void *b)
{
    const struct ient *x = a, *y = b;
    if (x->s != y->s) return x->s < y->s ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

int vp_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int set_index(const uint32_t *c, int n, uint32_t v)
{
    for (int i = n - 1; i >= 0; i--) if (c[i] == v) return i;
    return -1;
}
static bool in_set(const uint32_t *c, int n, uint32_t v) { return set_index(c, n, v) >= 0; }

/* Picks the candidate the data on disk matches (cand[] is oldest first; of mirror
 * copies that differ the newest wins: the other copy may have missed its last sync);
 * returns false if none does. */
static bool resolve_sector(struct vpool *p, uint64_t s, const uint32_t *cand, int nc, uint8_t *buf, uint8_t *tmp)
{
    int col;
    uint64_t row = vp_row_of(p, s, &col);
    uint64_t off = vp_moff(p, row, s % VP_CHUNK_SECT);
    bool zero_ok = in_set(cand, nc, VP_CSUM_ZERO);
    if (p->layout == VPOOL_MIRROR) {
        int good = -1, gi = -1;
        for (int m = 0; m < p->n; m++) {
            if (!vp_readable(p, m) || vp_mread(p, m, tmp, VP_SECTOR, off) < 0) continue;
            int i = set_index(cand, nc, vp_csum_of(tmp));
            if (i > gi && cand[i] != VP_CSUM_ZERO) { gi = i; good = m; memcpy(buf, tmp, VP_SECTOR); }
        }
        if (good < 0) { if (zero_ok) vp_csum_set(p, s, 0); return zero_ok; }
        vp_csum_set(p, s, cand[gi]);
        for (int m = 0; m < p->n; m++) {
            if (m == good || !vp_writable(p, m)) continue;
            if (vp_mread(p, m, tmp, VP_SECTOR, off) < 0 || memcmp(tmp, buf, VP_SECTOR))
                vp_mwrite(p, m, buf, VP_SECTOR, off);
        }
        return true;
    }
    /* raidz1/stripe: the data member's copy, unless parity rebuilds a newer candidate
     * (the data member may have missed the sync that made the newer one durable, and
     * been faulted only in RAM) */
    int dm = vp_col_member(p, row, col), di = -1;
    bool have = vp_readable(p, dm) && vp_mread(p, dm, buf, VP_SECTOR, off) == 0;
    if (have) di = set_index(cand, nc, vp_csum_of(buf));
    if (di >= 0 && cand[di] == VP_CSUM_ZERO) di = -1;
    if (p->layout == VPOOL_RAIDZ1 && di < nc - 1) {
        uint8_t rec[VP_SECTOR] __attribute__((aligned(64)));
        memset(rec, 0, VP_SECTOR);
        int ri = vp_xor_members(p, off, 1u << dm, rec, tmp) ? set_index(cand, nc, vp_csum_of(rec)) : -1;
        if (ri > di && cand[ri] != VP_CSUM_ZERO && vp_writable(p, dm) && vp_mwrite(p, dm, rec, VP_SECTOR, off) == 0) {
            vp_csum_set(p, s, cand[ri]);
            return true;
        }
    }
    if (di >= 0) { vp_csum_set(p, s, cand[di]); return true; }
    /* a direct write after the last journaled one (vpool_direct.c): it is what is there.
     * Not where zero is a candidate: the sector may hold what it had before an unmap */
    if (have && !zero_ok && vp_in_region(p, s) && !vp_all_zero(buf, VP_SECTOR)) { vp_csum_set(p, s, vp_csum_of(buf)); return true; }
    if (zero_ok) vp_csum_set(p, s, 0);
    return zero_ok;
}

/* Parity of group (row, w) = XOR of what the data columns hold now. */
static void resync_parity(struct vpool *p, uint64_t row, unsigned w, uint8_t *acc, uint8_t *tmp)
{
    int pm = vp_parity_member(p, row);
    uint64_t off = vp_moff(p, row, w);
    if (!vp_writable(p, pm)) return;
    memset(acc, 0, VP_SECTOR);
    for (int c = 0; c < p->ndata; c++) {
        int m = vp_col_member(p, row, c);
        if (!vp_readable(p, m) || vp_mread(p, m, tmp, VP_SECTOR, off) < 0) {
            log_warn("vpool %s: row %llu: cannot resync parity after the crash (member %d unavailable)",
                     p->name, (unsigned long long)row, m);
            return;
        }
        vp_xor_into(acc, tmp, VP_SECTOR);
    }
    vp_mwrite(p, pm, acc, VP_SECTOR, off);
}

int vp_intents_resolve(struct vpool *p, struct vp_intents *t)
{
    int rc = 0;
    if (!t) return 0;
    if (!t->nintent) goto out;
    qsort(t->e, t->n, sizeof *t->e, cmp_ient);
    uint8_t *buf = NULL, *tmp = NULL;
    uint64_t *groups = malloc(t->nintent * sizeof *groups);
    if (!groups || posix_memalign((void **)&buf, 64, VP_SECTOR) || posix_memalign((void **)&tmp, 64, VP_SECTOR)) {
        free(groups); free(buf); free(tmp);
        rc = -ENOMEM;
        goto out;
    }
    size_t ng = 0, nres = 0, nbad = 0, ccap = 0;
    uint32_t *cand = NULL;
    for (size_t i = 0; i < t->n;) {
        size_t j = i;
        int nc = 0;
        bool open = false;
        /* every candidate, however often the sector was rewritten since the last
         * checkpoint: the newest is the one a flush made durable (a cap that kept the
         * oldest 15 lost a sector rewritten 15 times: it came back as zeros) */
        for (; j < t->n && t->e[j].s == t->e[i].s; j++) {
            if (t->e[j].kind == IK_OVERRIDE) { nc = 0; open = false; continue; }
            open = true;
            if ((size_t)nc + 2 > ccap) {
                size_t nn = ccap ? ccap * 2 : 64;
                uint32_t *c2 = realloc(cand, nn * sizeof *c2);
                if (!c2) { rc = -ENOMEM; goto done; }
                cand = c2; ccap = nn;
            }
            if (t->e[j].bseq <= t->synced) { nc = 0; cand[nc++] = t->e[j].now; continue; }   /* on disk since */
            /* prev is usually the last now: skip repeats only, the searches go newest first */
            if (!nc || cand[nc - 1] != t->e[j].prev) cand[nc++] = t->e[j].prev;
            if (cand[nc - 1] != t->e[j].now) cand[nc++] = t->e[j].now;
        }
        uint64_t s = t->e[i].s;
        i = j;
        if (!open) continue;
        nres++;
        if (!resolve_sector(p, s, cand, nc, buf, tmp)) {
            nbad++;
            log_warn("vpool %s: sector %llu written around the crash matches none of its checksums",
                     p->name, (unsigned long long)s);
        }
        int col;
        uint64_t row = vp_row_of(p, s, &col);
        groups[ng++] = row * VP_CHUNK_SECT + s % VP_CHUNK_SECT;
    }
    if (p->layout == VPOOL_RAIDZ1) {
        qsort(groups, ng, sizeof *groups, vp_cmp_u64);
        for (size_t k = 0; k < ng; k++)
            if (!k || groups[k] != groups[k - 1])
                resync_parity(p, groups[k] / VP_CHUNK_SECT, (unsigned)(groups[k] % VP_CHUNK_SECT), buf, tmp);
    }
    if (nres) log_info("vpool %s: %zu sectors written in place around the crash checked (%zu unresolved)",
                       p->name, nres, nbad);
done:
    free(cand); free(groups); free(buf); free(tmp);
out:
    free(t->e);
    free(t);
    return rc;
}
