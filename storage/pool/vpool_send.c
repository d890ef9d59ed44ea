/* Send/receive streams of volume snapshots (format in vpool_snap.h): the sender walks
 * the snapshot's unit map (or compares two maps for an incremental stream) and reads
 * through a read-only snapshot bdev; the receiver verifies every record before it
 * writes it and undoes everything (destroy or rollback) when the stream goes wrong. */
#include "storage/pool/vpool_impl.h"
#include "storage/pool/vpool_snap.h"
#include "util/log.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define SND_MAGIC   0x31444e5344534e41ull   /* "ANSDSND1" */
#define SND_VERSION 1
#define REC_MAGIC   0x54494e55u             /* "UNIT" */
#define END_MAGIC   0x21444e45u             /* "END!" */
enum { K_DATA = 1, K_ZERO = 2 };

struct snd_hdr {
    uint64_t magic;
    uint32_t version, flags;          /* flags: VPOOL_VOL_* of the source volume */
    uint64_t size;                    /* volume size at the snapshot */
    uint64_t ctime;
    char snap[64], from[64];          /* from[0] == 0: full stream */
    uint8_t snap_uuid[16], from_uuid[16];
    uint64_t csum;                    /* XXH3-64 of the header with csum = 0 */
};
struct snd_rec { uint32_t magic, kind; uint64_t unit; uint32_t len, pad; uint64_t csum; };   /* + len data bytes */
struct snd_end { uint32_t magic, pad; uint64_t units, stream; uint64_t csum; };

struct out { vpool_sink fn; void *ctx; XXH3_state_t *st; };

static int emit(struct out *o, const void *b, size_t n)
{
    XXH3_64bits_update(o->st, b, n);
    return o->fn(o->ctx, b, n);
}

static int find_snap(struct vpool *p, const char *vol, const char *name, struct vp_vol **v, struct vp_snap **s)
{
    *v = NULL; *s = NULL;
    for (int i = 0; i < VP_MAX_VOLS && !*v; i++) if (p->vols[i] && !strcmp(p->vols[i]->name, vol)) *v = p->vols[i];
    for (int i = 0; *v && i < VP_MAX_SNAPS && !*s; i++)
        if (p->snaps[i] && p->snaps[i]->vol_id == (*v)->id && !strcmp(p->snaps[i]->name, name)) *s = p->snaps[i];
    return *s ? 0 : -ENOENT;
}

int vpool_send(struct vpool *p, const char *vol, const char *snap, const char *from, vpool_sink fn, void *ctx)
{
    struct snd_hdr h = { .magic = SND_MAGIC, .version = SND_VERSION };
    struct vp_vol *v;
    struct vp_snap *s, *f = NULL;
    uint32_t *m = NULL, *fm = NULL;
    uint64_t len = 0;
    pthread_mutex_lock(&p->snap_mu);   /* the snapshots stay while their maps are built */
    pthread_rwlock_rdlock(&p->vol_lock);
    int rc = find_snap(p, vol, snap, &v, &s);
    if (!rc && from && (rc = find_snap(p, vol, from, &v, &f)) == 0 && f->gen >= s->gen) rc = -EINVAL;
    if (!rc) {
        h.flags = v->flags; h.size = s->size; h.ctime = s->ctime;
        snprintf(h.snap, sizeof h.snap, "%s", s->name);
        memcpy(h.snap_uuid, s->uuid, 16);
        if (f) { snprintf(h.from, sizeof h.from, "%s", f->name); memcpy(h.from_uuid, f->uuid, 16); }
        len = (s->size + VP_AU_BYTES - 1) / VP_AU_BYTES;
        m = vp_snap_build_map(p, v->id, s->gen, len);
        if (f) fm = vp_snap_build_map(p, v->id, f->gen, len);
        if (!m || (f && !fm)) rc = -ENOMEM;
    }
    pthread_rwlock_unlock(&p->vol_lock);
    pthread_mutex_unlock(&p->snap_mu);
    int e = 0;
    nasd_bdev *b = rc ? NULL : vpool_snap_open(p, vol, snap, 4096, &e);
    if (!rc && !b) rc = e;
    uint8_t *buf = NULL;
    struct out o = { fn, ctx, XXH3_createState() };
    if (!rc && (!o.st || posix_memalign((void **)&buf, 64, VP_AU_BYTES))) rc = -ENOMEM;
    if (!rc) {
        XXH3_64bits_reset(o.st);
        h.csum = XXH3_64bits(&h, sizeof h);
        rc = emit(&o, &h, sizeof h);
    }
    uint64_t units = 0;
    for (uint64_t u = 0; u < len && !rc; u++) {
        if (fm && fm[u] == m[u]) continue;   /* unchanged between the two snapshots */
        if (!fm && !m[u]) continue;
        struct snd_rec r = { .magic = REC_MAGIC, .kind = m[u] ? K_DATA : K_ZERO, .unit = u };
        uint64_t off = u * VP_AU_BYTES;
        if (r.kind == K_DATA) {
            r.len = (uint32_t)(h.size - off < VP_AU_BYTES ? h.size - off : VP_AU_BYTES);
            if ((rc = nasd_bdev_read(b, buf, off, r.len))) break;
        }
        XXH3_state_t *rs = XXH3_createState();
        if (!rs) { rc = -ENOMEM; break; }
        XXH3_64bits_reset(rs);
        XXH3_64bits_update(rs, &r, sizeof r);
        XXH3_64bits_update(rs, buf, r.len);
        r.csum = XXH3_64bits_digest(rs);
        XXH3_freeState(rs);
        rc = emit(&o, &r, sizeof r);
        if (!rc && r.len) rc = emit(&o, buf, r.len);
        units++;
    }
    if (!rc) {
        struct snd_end t = { .magic = END_MAGIC, .units = units, .stream = XXH3_64bits_digest(o.st) };
        t.csum = XXH3_64bits(&t, sizeof t);
        rc = fn(ctx, &t, sizeof t);
    }
    if (b) nasd_bdev_put(b);
    if (o.st) XXH3_freeState(o.st);
    free(buf); free(m); free(fm);
    return rc;
}

/* ---------------- receive ---------------- */

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) { va_list ap; va_start(ap, fmt); vsnprintf(err, errlen, fmt, ap); va_end(ap); }
    return rc;
}

/* Newest snapshot of vol: name and uuid; -ENOENT if none. */
static int newest(struct vpool *p, const char *vol, char *name, uint8_t *uuid)
{
    int n = vpool_snap_list(p, vol, NULL, 0);
    if (n <= 0) return n ? n : -ENOENT;
    struct vpool_snap_info *si = calloc(n, sizeof *si);
    if (!si) return -ENOMEM;
    n = vpool_snap_list(p, vol, si, n);
    snprintf(name, 64, "%s", si[n - 1].name);
    memcpy(uuid, si[n - 1].uuid, 16);
    free(si);
    return 0;
}

static bool hdr_ok(struct snd_hdr *h)
{
    uint64_t c = h->csum;
    h->csum = 0;
    bool ok = XXH3_64bits(h, sizeof *h) == c;
    h->csum = c;
    return ok && h->magic == SND_MAGIC && h->version == SND_VERSION && h->size && h->size <= (1ull << 50) &&
           memchr(h->snap, 0, sizeof h->snap) && memchr(h->from, 0, sizeof h->from) && vp_name_ok(h->snap) &&
           !strstr(h->snap, "..") && h->snap[0] != '.' &&   /* what the REST name rule allows */
           (!h->from[0] || vp_name_ok(h->from)) && !(h->flags & ~(uint32_t)(VPOOL_VOL_LZ4 | VPOOL_VOL_THIN));
}

int vpool_receive(struct vpool *p, const char *vol, int force, const struct vpool_recv_limit *lim, vpool_source in,
                  void *ctx, char *snap_out, char *err, size_t errlen)
{
    struct snd_hdr h;
    int rc = in(ctx, &h, sizeof h);
    if (rc) return fail(err, errlen, rc, "stream ends before its header");
    if (!hdr_ok(&h)) return fail(err, errlen, -EBADMSG, "not a nasd snapshot stream (bad header or checksum)");
    if (!vp_name_ok(vol)) return fail(err, errlen, -EINVAL, "invalid volume name");
    /* before anything is created or grown: a 300-byte stream could otherwise ask for a
     * volume of a PiB (a 4 GiB map, walked by every rollback) */
    if (lim && lim->thin >= 0 && !(h.flags & VPOOL_VOL_THIN) != !lim->thin)
        return fail(err, errlen, -EINVAL, "a stream of a %s cannot be received as a %s",
                    lim->thin ? "volume" : "dataset", lim->thin ? "dataset" : "volume");
    if (lim && h.size > lim->max_size)
        return fail(err, errlen, -ENOSPC, "the stream is of %llu bytes; at most %llu fit here",
                    (unsigned long long)h.size, (unsigned long long)lim->max_size);
    char have[64];
    uint8_t u[16];
    /* this very full stream was received here before (its snapshot is made only after the
     * whole stream checked out), and the daemon was killed before it recorded the volume:
     * the copy is there, made current again */
    if (!h.from[0] && force && vpool_snap_list(p, vol, NULL, 0) == 1 && !newest(p, vol, have, u) &&
        !memcmp(u, h.snap_uuid, 16) && !strcmp(have, h.snap)) {
        if ((rc = vpool_snap_rollback(p, vol, have))) return fail(err, errlen, rc, "rollback of %s: %s", vol, strerror(-rc));
        if (snap_out) snprintf(snap_out, 64, "%s", h.snap);
        log_info("vpool %s: %s@%s was received before", p->name, vol, h.snap);
        return 0;
    }
    XXH3_state_t *st = XXH3_createState();
    uint8_t *buf = NULL;
    if (!st || posix_memalign((void **)&buf, 64, VP_AU_BYTES)) { XXH3_freeState(st); return -ENOMEM; }
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, &h, sizeof h);
    bool created = false, rolled = false;
    char from_name[64] = "", tmp[64] = "";
    const char *target = vol;   /* where the units go */
    int flags = vpool_vol_flags(p, vol);
    if (!h.from[0]) {   /* full stream: a new volume */
        if (flags >= 0) {
            /* a forced replace goes to a volume of its own and takes the name only once the
             * whole stream checked out: a stream cut short leaves the old copy as it was */
            int ns = vpool_snap_list(p, vol, NULL, 0);
            if (!force) rc = fail(err, errlen, -EEXIST, "volume %s exists (force replaces it if it has no snapshots)", vol);
            else if (ns > 0) rc = fail(err, errlen, -EEXIST, "volume %s has snapshots; not replacing it", vol);
            /* a leading '-' no REST name has: the leftover removed below is never a user's */
            else if (snprintf(tmp, sizeof tmp, "-recv-%s", vol) >= (int)sizeof tmp)
                rc = fail(err, errlen, -ENAMETOOLONG, "volume name %s is too long to be replaced", vol);
            else if (vpool_vol_flags(p, tmp) >= 0 && (rc = vpool_vol_destroy(p, tmp)))   /* an earlier try's */
                fail(err, errlen, rc, "cannot remove %s: %s", tmp, strerror(-rc));
            else target = tmp;
        }
        if (!rc && (rc = vpool_vol_create(p, target, h.size, (int)h.flags)))
            fail(err, errlen, rc, "cannot create %s: %s", vol, strerror(-rc));
        created = !rc;
    } else {            /* incremental: on top of the from snapshot, which must be the newest here */
        uint8_t u[16];
        if (flags < 0) rc = fail(err, errlen, -ENOENT, "volume %s does not exist (send a full stream first)", vol);
        else if (newest(p, vol, from_name, u) || memcmp(u, h.from_uuid, 16))
            rc = fail(err, errlen, -ESTALE, "the newest snapshot of %s is not %s of the source", vol, h.from);
        else if ((rc = vpool_snap_rollback(p, vol, from_name)))
            fail(err, errlen, rc, "rollback of %s to %s: %s", vol, from_name, strerror(-rc));
        else {
            rolled = true;
            uint64_t cur = 0;
            char names[VP_MAX_VOLS][64];
            uint64_t sizes[VP_MAX_VOLS];
            int nv = vpool_vol_list(p, names, sizes, VP_MAX_VOLS);
            for (int i = 0; i < nv; i++) if (!strcmp(names[i], vol)) cur = sizes[i];
            if (h.size > cur && (rc = vpool_vol_resize(p, vol, h.size))) fail(err, errlen, rc, "resize: %s", strerror(-rc));
        }
    }
    int e = 0;
    nasd_bdev *b = rc ? NULL : vpool_vol_open(p, target, 4096, &e);
    if (!rc && !b) rc = fail(err, errlen, e, "open %s: %s", vol, strerror(-e));
    uint64_t units = 0;
    while (!rc) {
        struct snd_rec r;
        if ((rc = in(ctx, &r, sizeof r))) { fail(err, errlen, rc, "stream ends after %llu units", (unsigned long long)units); break; }
        if (r.magic == END_MAGIC) {
            struct snd_end t;
            memcpy(&t, &r, sizeof r);
            if ((rc = in(ctx, (uint8_t *)&t + sizeof r, sizeof t - sizeof r))) { fail(err, errlen, rc, "truncated trailer"); break; }
            uint64_t c = t.csum, digest = XXH3_64bits_digest(st);
            t.csum = 0;
            if (XXH3_64bits(&t, sizeof t) != c || t.units != units || t.stream != digest)
                rc = fail(err, errlen, -EBADMSG, "stream checksum or unit count mismatch");
            break;
        }
        /* the unit first: unit * VP_AU_BYTES wraps for a unit of 2^44 or more */
        uint64_t off = r.unit < (h.size + VP_AU_BYTES - 1) / VP_AU_BYTES ? r.unit * VP_AU_BYTES : UINT64_MAX;
        if (r.magic != REC_MAGIC || (r.kind != K_DATA && r.kind != K_ZERO) || off >= h.size ||
            r.len != (r.kind == K_ZERO ? 0 : (h.size - off < VP_AU_BYTES ? h.size - off : VP_AU_BYTES))) {
            rc = fail(err, errlen, -EBADMSG, "malformed record after %llu units", (unsigned long long)units);
            break;
        }
        if (r.len && (rc = in(ctx, buf, r.len))) { fail(err, errlen, rc, "stream ends inside unit %llu", (unsigned long long)r.unit); break; }
        uint64_t c = r.csum;
        r.csum = 0;
        XXH3_state_t *rs = XXH3_createState();
        if (!rs) { rc = -ENOMEM; break; }
        XXH3_64bits_reset(rs);
        XXH3_64bits_update(rs, &r, sizeof r);
        XXH3_64bits_update(rs, buf, r.len);
        uint64_t got = XXH3_64bits_digest(rs);
        XXH3_freeState(rs);
        r.csum = c;
        if (got != c) { rc = fail(err, errlen, -EBADMSG, "checksum mismatch in unit %llu", (unsigned long long)r.unit); break; }
        XXH3_64bits_update(st, &r, sizeof r);
        XXH3_64bits_update(st, buf, r.len);
        uint64_t n = h.size - off < VP_AU_BYTES ? h.size - off : VP_AU_BYTES;
        rc = r.kind == K_DATA ? nasd_bdev_write(b, buf, off, r.len, 0) : nasd_bdev_unmap(b, off, n);
        if (rc) fail(err, errlen, rc, "writing unit %llu: %s", (unsigned long long)r.unit, strerror(-rc));
        units++;
    }
    if (!rc) rc = nasd_bdev_flush(b);
    if (b) nasd_bdev_put(b);
    if (!rc && (rc = vp_snap_create_uuid(p, target, h.snap, h.snap_uuid, h.ctime)))
        fail(err, errlen, rc, "creating snapshot %s: %s", h.snap, strerror(-rc));
    if (!rc && target == tmp) {   /* the copy is whole: the old one goes, the new one takes its name */
        if ((rc = vpool_vol_destroy(p, vol))) fail(err, errlen, rc, "cannot replace %s: %s", vol, strerror(-rc));
        else if ((rc = vpool_vol_rename(p, tmp, vol))) {
            fail(err, errlen, rc, "the received copy stays as %s: %s", tmp, strerror(-rc));
            created = false;   /* the only copy left */
        }
    }
    if (rc && created) vpool_vol_destroy(p, target);                    /* nothing left behind */
    else if (rc && rolled) vpool_snap_rollback(p, vol, from_name);   /* back to the old copy */
    if (!rc && snap_out) snprintf(snap_out, 64, "%s", h.snap);
    if (!rc) log_info("vpool %s: received %s@%s (%llu units%s%s)", p->name, vol, h.snap, (unsigned long long)units,
                      h.from[0] ? " since " : "", h.from);
    XXH3_freeState(st);
    free(buf);
    return rc;
}

/* Fuzzing: rewrites every checksum of a (possibly malformed) stream in place so that
 * a fuzzer gets past them; from_uuid, when given, replaces the header's base guid. */
void vp_stream_fix(uint8_t *b, size_t len, const uint8_t *from_uuid)
{
    if (len < sizeof(struct snd_hdr)) return;
    struct snd_hdr h;
    memcpy(&h, b, sizeof h);
    if (from_uuid && h.from[0]) memcpy(h.from_uuid, from_uuid, 16);
    h.csum = 0;
    h.csum = XXH3_64bits(&h, sizeof h);
    memcpy(b, &h, sizeof h);
    XXH3_state_t *st = XXH3_createState();
    if (!st) return;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, b, sizeof h);
    uint64_t units = 0;
    for (size_t pos = sizeof h; pos + sizeof(struct snd_rec) <= len;) {
        struct snd_rec r;
        memcpy(&r, b + pos, sizeof r);
        if (r.magic == END_MAGIC && pos + sizeof(struct snd_end) <= len) {
            struct snd_end t;
            memcpy(&t, b + pos, sizeof t);
            t.units = units;
            t.stream = XXH3_64bits_digest(st);
            t.csum = 0;
            t.csum = XXH3_64bits(&t, sizeof t);
            memcpy(b + pos, &t, sizeof t);
            break;
        }
        size_t dl = r.kind == K_DATA && r.len <= len - pos - sizeof r ? r.len : 0;
        r.csum = 0;
        XXH3_state_t *rs = XXH3_createState();
        if (!rs) break;
        XXH3_64bits_reset(rs);
        XXH3_64bits_update(rs, &r, sizeof r);
        XXH3_64bits_update(rs, b + pos + sizeof r, dl);
        r.csum = XXH3_64bits_digest(rs);
        XXH3_freeState(rs);
        memcpy(b + pos, &r, sizeof r);
        XXH3_64bits_update(st, b + pos, sizeof r + dl);
        pos += sizeof r + dl;
        units++;
    }
    XXH3_freeState(st);
}
