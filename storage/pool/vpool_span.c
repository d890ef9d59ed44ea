/* Large reads: a run of pool sectors over several chunks read with one preadv per
 * stretch of a member that the run's pieces fill without a gap, instead of one pread
 * per chunk (16 per MiB). On the development VM a system call costs several times a
 * 64 KiB copy's share of the time, and in place on raidz1 of 4 a member holds 3 data
 * chunks of every 4 rows next to each other. Every sector is verified as in
 * vp_read_run; a chunk with a failed read or a bad sector is read again through
 * vp_read_run, which repairs. */
#include "storage/pool/vpool_impl.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

struct piece { uint64_t off; uint8_t *dst; uint32_t len; uint16_t m, chunk; };

static int cmp_piece(const void *a, const void *b)
{
    const struct piece *x = a, *y = b;
    if (x->m != y->m) return x->m < y->m ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The pieces of the sectors [s, s+n) of one chunk that hold data. */
static size_t chunk_pieces(struct vpool *p, uint64_t s, unsigned n, uint8_t *dst, const uint32_t *cs,
                           uint16_t chunk, struct piece *pc)
{
    size_t np = 0;
    for (unsigned i = 0; i < n;) {
        if (!vp_has_data(cs[i])) { i++; continue; }
        unsigned j = i + 1;
        int col, m;
        uint64_t row, off;
        if (p->xl) {   /* runs consecutive in one physical chunk, as vp_xl_read_run */
            uint32_t l = vp_xl_loc(p, s + i);
            if (!l) return SIZE_MAX;
            while (j < n && vp_has_data(cs[j]) && vp_xl_loc(p, s + j) == l + (j - i) && (l - 1 + j - i) % VP_CHUNK_SECT) j++;
            row = vp_row_of(p, l - 1, &col);
            m = vp_col_member(p, row, col);
            off = vp_moff(p, row, (l - 1) % VP_CHUNK_SECT);
        } else {
            while (j < n && vp_has_data(cs[j])) j++;
            row = vp_row_of(p, s + i, &col);
            m = p->layout == VPOOL_MIRROR ? (int)(row % p->n) : vp_col_member(p, row, col);
            off = vp_moff(p, row, (s + i) % VP_CHUNK_SECT);
        }
        if (!vp_readable(p, m)) return SIZE_MAX;
        pc[np++] = (struct piece){ off, dst + (size_t)i * VP_SECTOR, (j - i) * VP_SECTOR, (uint16_t)m, chunk };
        i = j;
    }
    return np;
}

/* One preadv per gapless stretch of a member; a chunk whose piece did not come back
 * whole is marked in bad (read again by the caller, which counts the error). */
static void read_pieces(struct vpool *p, struct piece *pc, size_t np, uint32_t *bad)
{
    struct iovec iov[64];
    for (size_t i = 0; i < np;) {
        size_t j = i + 1, len = pc[i].len;
        while (j < np && j - i < 64 && pc[j].m == pc[i].m && pc[j].off == pc[i].off + len) len += pc[j++].len;
        for (size_t k = i; k < j; k++) iov[k - i] = (struct iovec){ pc[k].dst, pc[k].len };
        ssize_t r = -1;
        if (!p->sim || !vp_sim_before_read(p, pc[i].m))
            do r = preadv(p->m[pc[i].m].fd, iov, (int)(j - i), (off_t)pc[i].off);
            while (r < 0 && errno == EINTR);
        if (r != (ssize_t)len)
            for (size_t k = i; k < j; k++) bad[pc[k].chunk / 32] |= 1u << pc[k].chunk % 32;
        i = j;
    }
}

int vp_read_span(struct vpool *p, uint64_t s, unsigned count, uint8_t *buf)
{
    if (count > VP_AU_SECT || s + count > p->n_sect) return -EINVAL;
    uint32_t cs[VP_AU_SECT], bad[VP_AU_SECT / VP_CHUNK_SECT / 32 + 1] = { 0 };
    struct piece pc[VP_AU_SECT];
    size_t np = 0;
    uint16_t nch = 0;
    for (unsigned i = 0; i < count; i++) cs[i] = vp_csum_get(p, s + i);
    for (unsigned i = 0; i < count; nch++) {   /* chunk by chunk */
        unsigned n = VP_CHUNK_SECT - (s + i) % VP_CHUNK_SECT;
        if (n > count - i) n = count - i;
        size_t k = chunk_pieces(p, s + i, n, buf + (size_t)i * VP_SECTOR, cs + i, nch, pc + np);
        if (k == SIZE_MAX) bad[nch / 32] |= 1u << nch % 32;
        else np += k;
        i += n;
    }
    qsort(pc, np, sizeof *pc, cmp_piece);
    read_pieces(p, pc, np, bad);
    uint16_t c = 0;
    for (unsigned i = 0; i < count; c++) {
        unsigned n = VP_CHUNK_SECT - (s + i) % VP_CHUNK_SECT;
        if (n > count - i) n = count - i;
        uint8_t *b = buf + (size_t)i * VP_SECTOR;
        bool ok = !(bad[c / 32] & (1u << c % 32));
        for (unsigned k = 0; k < n && ok; k++)
            if (vp_has_data(cs[i + k])) ok = vp_sect_ok(cs[i + k], b + (size_t)k * VP_SECTOR);
            else memset(b + (size_t)k * VP_SECTOR, 0, VP_SECTOR);
        if (!ok) {
            int rc = vp_read_run(p, s + i, n, b);
            if (rc) return rc;
        }
        i += n;
    }
    return 0;
}
