/* Pool labels, geometry and member I/O with error accounting. */
#include "storage/pool/vpool_impl.h"
#include "util/log.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

#define VP_READ_ERR_LIMIT 16

void vp_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---------------- member I/O ---------------- */

void vp_member_fault(struct vpool *p, int m, const char *why)
{
    int old = atomic_exchange(&p->m[m].state, VPOOL_M_FAULTED);
    if (old != VPOOL_M_FAULTED) {
        log_warn("vpool %s: member %d (%s) faulted: %s", p->name, m, p->m[m].path, why);
        atomic_store(&p->need_checkpoint, 1);
    }
}

static bool aligned4k(uintptr_t x) { return x % VP_SECTOR == 0; }

void vp_set_direct(struct vpool *p, int m)
{
    struct vp_member *mb = &p->m[m];
    int fl = mb->fd >= 0 ? fcntl(mb->fd, F_GETFL) : -1;
    mb->direct = fl >= 0 && fcntl(mb->fd, F_SETFL, fl | O_DIRECT) == 0;
    if (mb->direct) p->direct_io = true;
    if (!mb->direct) log_warn("vpool %s: %s: O_DIRECT not available, using the page cache", p->name, mb->path);
}

const struct iovec *vp_iov_for_direct(const struct iovec *iov, int *cnt, size_t len, struct iovec *one, void **bounce)
{
    *bounce = NULL;
    bool ok = aligned4k(len);
    for (int i = 0; i < *cnt && ok; i++) ok = aligned4k((uintptr_t)iov[i].iov_base) && aligned4k(iov[i].iov_len);
    if (ok || posix_memalign(bounce, VP_SECTOR, (len + VP_SECTOR - 1) / VP_SECTOR * VP_SECTOR)) return iov;
    size_t o = 0;
    for (int i = 0; i < *cnt; i++) { memcpy((char *)*bounce + o, iov[i].iov_base, iov[i].iov_len); o += iov[i].iov_len; }
    *one = (struct iovec){ *bounce, len };
    *cnt = 1;
    return one;
}

void vp_member_ck_err(struct vpool *p, int m)
{
    if (atomic_fetch_add(&p->m[m].ck_err, 1) + 1 < VP_CKSUM_FAULT_LIMIT) return;
    /* one decision at a time: two readers repairing on two raidz1 members at once must
     * not both see the other online and fault both (rare: only past the limit) */
    static pthread_mutex_t decide = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&decide);
    if (atomic_load(&p->m[m].state) == VPOOL_M_ONLINE) {
        int bad = 0;
        for (int i = 0; i < p->n; i++) bad += i != m && !vp_readable(p, i);
        bool last = p->layout == VPOOL_STRIPE || (p->layout == VPOOL_RAIDZ1 && bad >= 1) ||
                    (p->layout == VPOOL_MIRROR && bad >= p->n - 1);
        if (!last) vp_member_fault(p, m, "too many checksum errors");
    }
    pthread_mutex_unlock(&decide);
}

int vp_mread(struct vpool *p, int m, void *buf, size_t len, uint64_t off)
{
    struct vp_member *mb = &p->m[m];
    if (mb->direct && (!aligned4k((uintptr_t)buf) || !aligned4k(len))) {
        void *b = NULL;
        size_t l = (len + VP_SECTOR - 1) / VP_SECTOR * VP_SECTOR;
        if (posix_memalign(&b, VP_SECTOR, l)) return -ENOMEM;
        int rc = vp_mread(p, m, b, l, off);
        if (!rc) memcpy(buf, b, len);
        free(b);
        return rc;
    }
    char *b = buf;
    while (len) {
        ssize_t r = p->sim && vp_sim_before_read(p, m) ? (errno = EIO, -1) : pread(mb->fd, b, len, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            if (atomic_fetch_add(&mb->rd_err, 1) + 1 >= VP_READ_ERR_LIMIT) vp_member_fault(p, m, strerror(e));
            return -EIO;
        }
        if (r == 0) {   /* the file shrank under us (members are never shorter than the pool needs) */
            if (atomic_fetch_add(&mb->rd_err, 1) + 1 >= VP_READ_ERR_LIMIT) vp_member_fault(p, m, "read past the end");
            return -EIO;
        }
        b += r; off += r; len -= r;
    }
    return 0;
}

int vp_mread_checked(struct vpool *p, int m, void *buf, size_t len, uint64_t off)
{
    struct vp_member *mb = &p->m[m];
    if (len <= VP_MAP_READ_MAX && !p->sim) {
        int rc = vp_map_read(mb, buf, len, off);
        if (rc != -ENOENT) {
            if (rc && atomic_fetch_add(&mb->rd_err, 1) + 1 >= VP_READ_ERR_LIMIT) vp_member_fault(p, m, "read error (mapped)");
            return rc;
        }
    }
    return vp_mread(p, m, buf, len, off);
}

int vp_mwritev(struct vpool *p, int m, const struct iovec *iov, int cnt, uint64_t off)
{
    struct vp_member *mb = &p->m[m];
    struct iovec local[VP_IOV_MAX], one;
    void *bounce = NULL;
    if (cnt > VP_IOV_MAX) return -EINVAL;
    if (mb->direct) {
        size_t len = 0;
        for (int i = 0; i < cnt; i++) len += iov[i].iov_len;
        iov = vp_iov_for_direct(iov, &cnt, len, &one, &bounce);
    }
    memcpy(local, iov, cnt * sizeof *iov);
    struct iovec *v = local;
    if (p->sim) {
        uint64_t len = 0;
        for (int i = 0; i < cnt; i++) len += iov[i].iov_len;
        if (vp_sim_before_write(p, m, off, len)) {
            free(bounce);
            atomic_fetch_add(&mb->wr_err, 1);
            vp_member_fault(p, m, "simulated power loss");
            return -EIO;
        }
    }
    while (cnt) {
        ssize_t r = pwritev(mb->fd, v, cnt, (off_t)off);
        if (r > 0) atomic_fetch_add_explicit(&p->prof.inplace_bytes, (uint64_t)r, memory_order_relaxed);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(bounce);
            atomic_fetch_add(&mb->wr_err, 1);
            vp_member_fault(p, m, r < 0 ? strerror(errno) : "short write");
            return -EIO;
        }
        off += r;
        while (cnt && (size_t)r >= v->iov_len) { r -= v->iov_len; v++; cnt--; }
        if (cnt) { v->iov_base = (char *)v->iov_base + r; v->iov_len -= r; }
    }
    free(bounce);
    return 0;
}

int vp_mwrite(struct vpool *p, int m, const void *buf, size_t len, uint64_t off)
{
    struct iovec v = { (void *)buf, len };
    return vp_mwritev(p, m, &v, 1, off);
}

int vp_msync(struct vpool *p, int m)
{
    nasd_before_wait();   /* a device sync: an NFS leader hands its loop over */
    if (fdatasync(p->m[m].fd) < 0 || vp_sim_synced(p, m, 0, 0) < 0) {
        atomic_fetch_add(&p->m[m].wr_err, 1);
        vp_member_fault(p, m, "fdatasync failed");
        return -EIO;
    }
    return 0;
}

struct sync_job { struct vpool *p; int m, rc; };
static void *sync_one(void *arg)
{
    struct sync_job *j = arg;
    j->rc = vp_msync(j->p, j->m);
    return NULL;
}

/* In parallel: a flush waits for the slowest member, not for the sum of them. */
int vp_sync_members(struct vpool *p)
{
    struct sync_job sj[VP_MAXM];
    struct vp_job jobs[VP_MAXM] = {{0}};
    int nj = 0, ok = 0;
    for (int i = 0; i < p->n; i++)
        if (vp_writable(p, i)) { sj[nj] = (struct sync_job){ p, i, -EIO }; jobs[nj] = (struct vp_job){ sync_one, &sj[nj] }; nj++; }
    nasd_before_wait();   /* the syncs may run on other threads: this one waits for them */
    vp_par_run(p, jobs, nj);
    for (int i = 0; i < nj; i++) ok += sj[i].rc == 0;
    return ok ? 0 : -EIO;
}

enum vpool_state vp_pool_state(struct vpool *p)
{
    int bad = 0;
    for (int i = 0; i < p->n; i++) bad += !vp_readable(p, i);
    if (!bad) return VPOOL_ONLINE;
    switch (p->layout) {
    case VPOOL_STRIPE: return VPOOL_FAULTED;
    case VPOOL_MIRROR: return bad < p->n ? VPOOL_DEGRADED : VPOOL_FAULTED;
    default:           return bad == 1 ? VPOOL_DEGRADED : VPOOL_FAULTED;
    }
}

/* ---------------- geometry ---------------- */

int vp_geometry(struct vpool *p, uint64_t member_size)
{
    member_size &= ~(uint64_t)(VP_CHUNK - 1);
    p->ndata = p->layout == VPOOL_STRIPE ? p->n : p->layout == VPOOL_MIRROR ? 1 : p->n - 1;
    if (member_size < (16ull << 20)) return -ENOSPC;
    p->member_size = member_size;
    uint64_t j = member_size / 8;   /* room for several write-back batches between checkpoints */
    if (j < (4ull << 20)) j = 4ull << 20;
    if (j > (256ull << 20)) j = 256ull << 20;
    p->jnl_size = j & ~(uint64_t)(VP_CHUNK - 1);
    uint64_t sect_max = member_size / VP_CHUNK * VP_CHUNK_SECT * p->ndata;
    uint64_t au_max = sect_max / VP_AU_SECT;
    p->meta_pages = VP_VOLTAB_PAGES + vp_snaptab_pages(p) + (au_max + vp_au_per_pg(p) - 1) / vp_au_per_pg(p)
                    + (sect_max + VP_CSUM_PER_PG - 1) / VP_CSUM_PER_PG * (vp_is_log(p) ? 2 : 1);
    p->meta_off[0] = VP_JOURNAL_OFF + p->jnl_size;
    p->meta_off[1] = p->meta_off[0] + p->meta_pages * VP_SECTOR;
    p->data_off = (p->meta_off[1] + p->meta_pages * VP_SECTOR + VP_CHUNK - 1) & ~(uint64_t)(VP_CHUNK - 1);
    if (p->data_off >= member_size) return -ENOSPC;
    p->rows = (member_size - p->data_off) / VP_CHUNK;
    p->n_au = p->rows * p->ndata / (VP_AU_SECT / VP_CHUNK_SECT);
    if (vp_is_log(p)) {   /* whole segments; the cleaner's reserve is not usable */
        uint64_t nseg = p->rows / VP_SEG_ROWS;
        p->n_au = nseg > vp_xl_reserve(nseg) ? (nseg - vp_xl_reserve(nseg)) * p->ndata : 0;
    }
    p->n_sect = p->n_au * VP_AU_SECT;
    return p->n_au ? 0 : -ENOSPC;
}

/* ---------------- labels ---------------- */

static uint64_t label_csum(const struct vp_label *l)
{
    struct vp_label c = *l;
    c.csum = 0;
    return XXH3_64bits(&c, l->hdr_size);   /* one of the sizes vp_read_label accepts */
}

int vp_read_label(int fd, uint64_t off, struct vp_label *l)
{
    uint8_t buf[VP_SECTOR];
    ssize_t r = pread(fd, buf, sizeof buf, (off_t)off);
    if (r != (ssize_t)sizeof buf) return -EIO;
    memcpy(l, buf, sizeof *l);
    if (l->magic != VP_LABEL_MAGIC) return -ENOENT;
    if (l->version < VP_LABEL_VERSION_MIN || l->version > VP_LABEL_VERSION ||
        (l->hdr_size != sizeof *l && l->hdr_size != VP_LABEL_SIZE_V2 && l->hdr_size != VP_LABEL_SIZE_V1))
        return -EPROTO;
    if (label_csum(l) != l->csum) return -EBADMSG;
    if (l->hdr_size < VP_LABEL_SIZE_V2) memset(l->errs, 0, sizeof l->errs);
    if (l->hdr_size < sizeof *l) {   /* before metadata regions: every page was written */
        if (l->meta_rpp) return -EBADMSG;   /* was padding, always 0 */
        memset(l->meta_init, 0, sizeof l->meta_init);
    }
    if (l->nmembers < 1 || l->nmembers > VP_MAXM || l->member_idx >= l->nmembers || l->layout > VPOOL_RAIDZ1)
        return -EBADMSG;
    if ((l->layout == VPOOL_RAIDZ1 && l->nmembers < 3) || (l->layout == VPOOL_MIRROR && l->nmembers < 2))
        return -EBADMSG;
    if (l->version >= VP_FMT_LOG && l->layout != VPOOL_RAIDZ1) return -EBADMSG;
    l->name[sizeof l->name - 1] = 0;
    return 0;
}

static void label_fill(struct vpool *p, int m, struct vp_label *l)
{
    memset(l, 0, sizeof *l);
    l->magic = VP_LABEL_MAGIC;
    l->version = p->fmt;
    /* pools from before regions keep labels an older nasd still reads */
    l->hdr_size = p->meta_rpp ? sizeof *l : VP_LABEL_SIZE_V2;
    memcpy(l->pool_uuid, p->uuid, 16);
    snprintf(l->name, sizeof l->name, "%s", p->name);
    l->layout = p->layout;
    l->nmembers = p->n;
    l->member_idx = m;
    for (int i = 0; i < p->n; i++) {
        memcpy(l->guids[i], p->m[i].guid, 16);
        l->mstate[i] = (uint8_t)atomic_load(&p->m[i].state);
        l->errs[i][0] = atomic_load(&p->m[i].rd_err);
        l->errs[i][1] = atomic_load(&p->m[i].wr_err);
        l->errs[i][2] = atomic_load(&p->m[i].ck_err);
    }
    l->gen = p->gen;
    l->ckpt_seq = p->seq;
    l->member_size = p->member_size;
    l->jnl_size = p->jnl_size;
    l->meta_pages = p->meta_pages;
    l->data_off = p->data_off;
    l->rows = p->rows;
    l->n_au = p->n_au;
    l->meta_rpp = p->meta_rpp;
    memcpy(l->meta_init, p->meta_init, sizeof l->meta_init);
    l->csum = label_csum(l);
}

/* Writes both labels of every writable member in only_mask (0 = all): A, sync, B, sync,
 * so that one valid label survives a crash at any point. */
int vp_write_labels(struct vpool *p, uint32_t only_mask)
{
    uint8_t buf[VP_SECTOR];
    int wrote = 0;
    for (int copy = 0; copy < 2; copy++) {
        for (int i = 0; i < p->n; i++) {
            if (!vp_writable(p, i) || (only_mask && !(only_mask & (1u << i)))) continue;
            memset(buf, 0, sizeof buf);
            label_fill(p, i, (struct vp_label *)buf);
            vp_mwrite(p, i, buf, sizeof buf, copy ? VP_LABEL_B : VP_LABEL_A);
        }
        for (int i = 0; i < p->n; i++) {
            if (!vp_writable(p, i) || (only_mask && !(only_mask & (1u << i)))) continue;
            if (vp_msync(p, i) == 0 && copy) wrote++;
        }
    }
    return wrote ? 0 : -EIO;
}

int vp_wipe_labels(struct vpool *p)
{
    static const uint8_t z[VP_SECTOR] __attribute__((aligned(VP_SECTOR)));
    for (int i = 0; i < p->n; i++) {
        if (p->m[i].fd < 0) continue;
        if (pwrite(p->m[i].fd, z, sizeof z, VP_LABEL_A) != (ssize_t)sizeof z ||
            pwrite(p->m[i].fd, z, sizeof z, VP_LABEL_B) != (ssize_t)sizeof z)
            log_warn("vpool %s: wiping label of %s: %s", p->name, p->m[i].path, strerror(errno));
        fdatasync(p->m[i].fd);
    }
    return 0;
}

const char *vpool_layout_name(enum vpool_layout l)
{
    return l == VPOOL_STRIPE ? "stripe" : l == VPOOL_MIRROR ? "mirror" : l == VPOOL_RAIDZ1 ? "raidz1" : "?";
}

static const struct vpool_layout_spec layout_specs[] = {
    { "stripe", VPOOL_STRIPE, 0 }, { "mirror", VPOOL_MIRROR, 0 },
    { "raidz1", VPOOL_RAIDZ1, 1 }, { "raidz1-inplace", VPOOL_RAIDZ1, 0 },
};

const struct vpool_layout_spec *vpool_layout_find(const char *name)
{
    if (name && !strcmp(name, "raidz1-log")) name = "raidz1";   /* its name until 2026-12 */
    for (size_t i = 0; name && i < sizeof layout_specs / sizeof *layout_specs; i++)
        if (!strcmp(name, layout_specs[i].name)) return &layout_specs[i];
    return NULL;
}

const char *vpool_layout_label(enum vpool_layout l, int log)
{
    for (size_t i = 0; i < sizeof layout_specs / sizeof *layout_specs; i++)
        if (layout_specs[i].layout == l && layout_specs[i].log == log) return layout_specs[i].name;
    return vpool_layout_name(l);
}

const char *vpool_state_name(enum vpool_state s)
{
    return s == VPOOL_ONLINE ? "ONLINE" : s == VPOOL_DEGRADED ? "DEGRADED" : "FAULTED";
}
const char *vpool_member_state_name(int s)
{
    static const char *n[] = { "ONLINE", "OFFLINE", "FAULTED", "MISSING", "RESILVERING" };
    return s >= 0 && s <= VPOOL_M_RESILVERING ? n[s] : "?";
}
