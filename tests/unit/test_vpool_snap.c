/* Pool engine snapshots: copy-on-write (aligned, unaligned, sub-sector, lz4, unmap),
 * used/referenced accounting, clones, rollback, persistence across import, scrub and
 * resilver with snapshots, and power loss at every member write of snapshot
 * create/delete/rollback (vpool_sim). Each volume is compared with an in-RAM image.
 * The raidz1 tests run twice: in place, and log-structured (format 3). */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <xxhash.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"
#include "storage/pool/vpool_snap.h"
#include "tests/unit/test_vpool_util.h"

#include "tests/unit/test_vpool_snap_util.h"

START_TEST(t_cow_clone_rollback)
{
    use_log = _i;
    struct tdir t;
    const char *const *paths;
    struct vpool *p = mkpool(&t, VPOOL_RAIDZ1, 4, &paths);
    ck_assert_int_eq(vpool_vol_create(p, "v", VSIZE, 0), 0);
    uint8_t *A = calloc(1, VSIZE), *B, *C;
    nasd_bdev *b = open_vol(p, "v", 512);
    img_write(b, A, 0, 10 * MB, 1);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    uint64_t a0 = pool_alloc(p);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s1"), 0);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s1"), -EEXIST);
    ck_assert_int_eq(vpool_snap_create(p, "v", "bad/name"), -EINVAL);
    ck_assert_uint_eq(pool_alloc(p), a0);                      /* no data copied */
    B = malloc(VSIZE); memcpy(B, A, VSIZE);
    img_write(b, B, 2 * MB, MB, 2);                            /* whole AU */
    img_write(b, B, 4 * MB + 100, 3000, 3);                    /* sub-sector, unaligned */
    img_write(b, B, 5 * MB - 8192, 16384, 4);                  /* straddles two AUs */
    img_write(b, B, 12 * MB, 4096, 5);                         /* never written before */
    ck_assert_int_eq(nasd_bdev_unmap(b, 7 * MB, MB), 0);       /* whole shared AU */
    memset(B + 7 * MB, 0, MB);
    ck_assert_int_eq(nasd_bdev_unmap(b, 8 * MB + 4096, 8192), 0);   /* part of a shared AU */
    memset(B + 8 * MB + 4096, 0, 8192);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    img_check(b, B, VSIZE, "volume after writes");
    check_snap(p, "v", "s1", A, VSIZE);
    /* copied: AUs 2, 4, 5, 8 (7 only dropped by the volume); new: 12 */
    ck_assert_uint_eq(pool_alloc(p), a0 + 5 * MB);
    struct vpool_snap_info si[4];
    ck_assert_int_eq(vpool_snap_list(p, "v", si, 4), 1);
    ck_assert_str_eq(si[0].name, "s1");
    ck_assert_uint_eq(si[0].used, 5 * MB);                     /* AUs 2, 4, 5, 7, 8 */
    ck_assert_uint_eq(si[0].referenced, 10 * MB);

    ck_assert_int_eq(vpool_snap_create(p, "v", "s2"), 0);
    ck_assert_int_eq(vpool_snap_clone(p, "v", "s1", "c"), 0);
    nasd_bdev *cb = open_vol(p, "c", 4096);
    img_check(cb, A, VSIZE, "fresh clone");
    C = malloc(VSIZE); memcpy(C, A, VSIZE);
    img_write(cb, C, 0, 3 * MB, 6);
    img_write(cb, C, 15 * MB, 4096, 7);
    ck_assert_int_eq(nasd_bdev_unmap(cb, 9 * MB, MB), 0);      /* must not uncover the origin */
    memset(C + 9 * MB, 0, MB);
    ck_assert_int_eq(nasd_bdev_flush(cb), 0);
    img_check(cb, C, VSIZE, "clone");
    img_check(b, B, VSIZE, "volume after clone writes");
    check_snap(p, "v", "s1", A, VSIZE);
    ck_assert_int_eq(vpool_snap_destroy(p, "v", "s1"), -EBUSY);   /* the clone reads it */
    char ov[64], os[64];
    ck_assert_int_eq(vpool_vol_origin(p, "c", ov, os), 0);
    ck_assert_str_eq(ov, "v"); ck_assert_str_eq(os, "s1");
    ck_assert_int_eq(vpool_vol_destroy(p, "v"), -EBUSY);

    nasd_bdev_put(cb); nasd_bdev_put(b);
    p = reimport(p, paths, 4);                                 /* everything from disk */
    b = open_vol(p, "v", 512); cb = open_vol(p, "c", 4096);
    img_check(b, B, VSIZE, "volume after import");
    img_check(cb, C, VSIZE, "clone after import");
    check_snap(p, "v", "s1", A, VSIZE);
    check_snap(p, "v", "s2", B, VSIZE);
    ck_assert_int_eq(vpool_snap_destroy(p, "v", "s1"), -EBUSY);

    /* scrub with snapshot-only units present: a damaged sector (of the volume's first
     * unit) is repaired, nothing is unrepairable */
    int m; uint64_t moff;
    ck_assert_int_eq(vp_debug_locate(p, "v", 0, &m, &moff, NULL), 0);
    int fd = open(paths[m], O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t junk[4096];
    memset(junk, 0xA5, sizeof junk);
    ck_assert_int_eq(pwrite(fd, junk, sizeof junk, (off_t)moff), (ssize_t)sizeof junk);
    close(fd);
    ck_assert_int_eq(vpool_scrub_start(p), 0);
    vpool_wait_background(p);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_ge(st.scrub_repaired, 1);
    ck_assert_uint_eq(st.scrub_unrepairable, 0);

    ck_assert_int_eq(vpool_snap_rollback(p, "v", "s1"), -ENOTEMPTY);
    nasd_bdev_put(cb);
    ck_assert_int_eq(vpool_vol_destroy(p, "c"), 0);
    uint64_t before = pool_alloc(p);
    ck_assert_int_eq(vpool_snap_destroy(p, "v", "s1"), 0);
    ck_assert_uint_eq(pool_alloc(p), before - 5 * MB);         /* what only s1 held */
    check_snap(p, "v", "s2", B, VSIZE);
    img_write(b, B, 0, 6 * MB, 8);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    uint8_t *S2 = malloc(VSIZE);
    {   /* s2 = the volume before the last write */
        nasd_bdev *s = vpool_snap_open(p, "v", "s2", 4096, &(int){0});
        ck_assert_int_eq(nasd_bdev_read(s, S2, 0, VSIZE), 0);
        ck_assert_int_eq(vpool_snap_destroy(p, "v", "s2"), -EBUSY);   /* open */
        nasd_bdev_put(s);
    }
    ck_assert_int_eq(vpool_snap_rollback(p, "v", "s2"), 0);
    img_check(b, S2, VSIZE, "rolled back");
    memcpy(B, S2, VSIZE);
    img_write(b, B, MB, 4096, 9);                              /* s2 still intact after more writes */
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    check_snap(p, "v", "s2", S2, VSIZE);
    nasd_bdev_put(b);
    p = reimport(p, paths, 4);
    b = open_vol(p, "v", 512);
    img_check(b, B, VSIZE, "after rollback and import");
    nasd_bdev_put(b);
    ck_assert_int_eq(vpool_vol_destroy(p, "v"), 0);
    ck_assert_uint_eq(pool_alloc(p), 0);
    vpool_close(p);
    tdir_remove(&t);
    free(A); free(B); free(C); free(S2);
}
END_TEST

/* A rollback to a snapshot taken before the volume grew gives it the snapshot's size
 * back: the bdev, the list, a thick volume's reservation, and after an import too. */
START_TEST(t_rollback_restores_size)
{
    use_log = _i;
    struct tdir t;
    const char *const *paths;
    struct vpool *p = mkpool(&t, VPOOL_RAIDZ1, 4, &paths);
    uint64_t half = VSIZE / 2, unalloc0 = p->thick_unalloc;
    ck_assert_int_eq(vpool_vol_create(p, "v", half, 0), 0);
    uint8_t *A = calloc(1, VSIZE);
    nasd_bdev *b = open_vol(p, "v", 512);
    img_write(b, A, 0, half, 1);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s1"), 0);
    uint64_t unalloc1 = p->thick_unalloc;
    ck_assert_int_eq(vpool_vol_resize(p, "v", VSIZE), 0);
    ck_assert_uint_eq(b->size, VSIZE);
    uint8_t *G = calloc(1, VSIZE);
    img_write(b, G, half, MB, 2);                               /* in the grown part */
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    ck_assert_int_eq(vpool_snap_rollback(p, "v", "s1"), 0);
    ck_assert_uint_eq(b->size, half);
    ck_assert_uint_eq(p->thick_unalloc, unalloc1);
    char names[4][64];
    uint64_t sizes[4];
    ck_assert_int_eq(vpool_vol_list(p, names, sizes, 4), 1);
    ck_assert_uint_eq(sizes[0], half);
    img_check(b, A, half, "rolled back");
    nasd_bdev_put(b);
    p = reimport(p, paths, 4);
    ck_assert_int_eq(vpool_vol_list(p, names, sizes, 4), 1);
    ck_assert_uint_eq(sizes[0], half);
    b = open_vol(p, "v", 512);
    ck_assert_uint_eq(b->size, half);
    img_check(b, A, half, "rolled back, after import");
    ck_assert_int_eq(vpool_vol_resize(p, "v", VSIZE), 0);       /* grown again: zeros, not the old data */
    ck_assert_uint_eq(b->size, VSIZE);
    img_check(b, A, VSIZE, "grown again");
    nasd_bdev_put(b);
    ck_assert_int_eq(vpool_snap_destroy(p, "v", "s1"), 0);
    ck_assert_int_eq(vpool_vol_destroy(p, "v"), 0);
    ck_assert_uint_eq(pool_alloc(p), 0);
    ck_assert_uint_eq(p->thick_unalloc, unalloc0);
    vpool_close(p);
    tdir_remove(&t);
    free(A); free(G);
}
END_TEST

START_TEST(t_lz4_and_resilver)
{
    use_log = _i;
    struct tdir t;
    const char *const *paths;
    struct vpool *p = mkpool(&t, VPOOL_MIRROR, 2, &paths);
    ck_assert_int_eq(vpool_vol_create(p, "z", VSIZE, VPOOL_VOL_LZ4), 0);
    uint8_t *A = calloc(1, VSIZE), *B;
    nasd_bdev *b = open_vol(p, "z", 4096);
    for (uint64_t off = 0; off < 8 * MB; off += 8192) memset(A + off, (int)(off >> 13), 8192);   /* compressible */
    ck_assert_int_eq(nasd_bdev_write(b, A, 0, 8 * MB, 0), 0);
    img_write(b, A, 8 * MB, MB, 1);                            /* incompressible */
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    ck_assert_int_eq(vpool_snap_create(p, "z", "s"), 0);
    B = malloc(VSIZE); memcpy(B, A, VSIZE);
    img_write(b, B, 3 * MB + 512, 1000, 2);
    img_write(b, B, 8 * MB + 65536, 65536, 3);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    img_check(b, B, VSIZE, "lz4 volume");
    check_snap(p, "z", "s", A, VSIZE);
    /* resilver with snapshot-only units: member 1 offline, writes, back online */
    ck_assert_int_eq(vpool_member_offline(p, 1), 0);
    img_write(b, B, 12 * MB, MB, 4);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    ck_assert_int_eq(vpool_member_online(p, 1), 0);
    vpool_wait_background(p);
    nasd_bdev_put(b);
    vpool_close(p);
    const char *only1[] = { paths[1] };                        /* the resilvered member alone */
    char err[256];
    ck_assert_msg(vpool_import(only1, 1, NULL, &p, err, sizeof err) == 0, "%s", err);
    b = open_vol(p, "z", 4096);
    img_check(b, B, VSIZE, "resilvered member");
    check_snap(p, "z", "s", A, VSIZE);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
    free(A); free(B);
}
END_TEST

/* Pools of format 1 (before snapshots) still import, read and write; they refuse snapshots. */
START_TEST(t_format1_pool)
{
    struct tdir t;
    const char *const *paths;
    vp_test_create_fmt = 1;
    struct vpool *p = mkpool(&t, VPOOL_RAIDZ1, 3, &paths);
    vp_test_create_fmt = 0;
    ck_assert_int_eq(vpool_vol_create(p, "v", VSIZE, 0), 0);
    uint8_t *A = calloc(1, VSIZE);
    nasd_bdev *b = open_vol(p, "v", 4096);
    img_write(b, A, 0, 9 * MB, 1);
    ck_assert_int_eq(nasd_bdev_unmap(b, 2 * MB, MB), 0);
    memset(A + 2 * MB, 0, MB);
    nasd_bdev_put(b);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s"), -EOPNOTSUPP);
    uint64_t used = pool_alloc(p);
    p = reimport(p, paths, 3);
    ck_assert_uint_eq(p->fmt, 1);
    ck_assert_uint_eq(pool_alloc(p), used);
    b = open_vol(p, "v", 4096);
    img_check(b, A, VSIZE, "format 1 pool after import");
    img_write(b, A, 12 * MB, MB, 2);
    nasd_bdev_put(b);
    p = reimport(p, paths, 3);
    b = open_vol(p, "v", 4096);
    img_check(b, A, VSIZE, "format 1 pool after a second import");
    nasd_bdev_put(b);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s"), -EOPNOTSUPP);
    vpool_close(p);
    tdir_remove(&t);
    free(A);
}
END_TEST

struct mem { uint8_t *b; size_t len, cap, pos; };
static int mem_sink(void *ctx, const void *buf, size_t len)
{
    struct mem *m = ctx;
    if (m->len + len > m->cap) { m->cap = (m->len + len) * 2; m->b = realloc(m->b, m->cap); }
    memcpy(m->b + m->len, buf, len);
    m->len += len;
    return 0;
}
static int mem_source(void *ctx, void *buf, size_t len)
{
    struct mem *m = ctx;
    if (m->pos + len > m->len) return -EPIPE;
    memcpy(buf, m->b + m->pos, len);
    m->pos += len;
    return 0;
}

START_TEST(t_send_receive)
{
    use_log = _i;
    struct tdir ta, tb;
    struct vpool *pa = mkpool(&ta, VPOOL_RAIDZ1, 3, NULL), *pb = mkpool(&tb, VPOOL_STRIPE, 1, NULL);
    uint64_t size = 9 * MB + 8192;   /* last unit partial */
    ck_assert_int_eq(vpool_vol_create(pa, "src", size, 0), 0);
    uint8_t *A = calloc(1, size), *B;
    nasd_bdev *b = open_vol(pa, "src", 4096);
    img_write(b, A, 0, 4 * MB, 1);
    img_write(b, A, 9 * MB, 8192, 2);
    ck_assert_int_eq(vpool_snap_create(pa, "src", "s1"), 0);
    B = malloc(size); memcpy(B, A, size);
    img_write(b, B, MB + 4096, 4096, 3);
    img_write(b, B, 6 * MB, MB, 4);
    ck_assert_int_eq(nasd_bdev_unmap(b, 3 * MB, MB), 0);
    memset(B + 3 * MB, 0, MB);
    ck_assert_int_eq(vpool_snap_create(pa, "src", "s2"), 0);
    nasd_bdev_put(b);

    struct mem full = {0}, inc = {0};
    ck_assert_int_eq(vpool_send(pa, "src", "s1", NULL, mem_sink, &full), 0);
    ck_assert_int_eq(vpool_send(pa, "src", "s2", "s1", mem_sink, &inc), 0);
    ck_assert_int_eq(vpool_send(pa, "src", "s1", "s2", mem_sink, &(struct mem){0}), -EINVAL);
    ck_assert_uint_lt(inc.len, 3 * MB);            /* units 1, 3 (zero) and 6 only */
    char snap[64], err[256];
    /* a truncated full stream leaves nothing behind */
    struct mem cut = full; cut.len = full.len / 2; cut.pos = 0;
    ck_assert_int_ne(vpool_receive(pb, "dst", 0, NULL, mem_source, &cut, snap, err, sizeof err), 0);
    ck_assert_int_eq(vpool_vol_flags(pb, "dst"), -ENOENT);
    full.pos = 0;
    ck_assert_msg(vpool_receive(pb, "dst", 0, NULL, mem_source, &full, snap, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(snap, "s1");
    check_snap(pb, "dst", "s1", A, size);
    /* limits (the REST layer's reservations): a stream of a larger volume, or of the other
     * kind, changes nothing; one that fits is received */
    struct vpool_recv_limit small = { size - 4096, -1 }, thin = { size, 1 }, exact = { size, 0 };
    full.pos = 0;
    ck_assert_int_eq(vpool_receive(pb, "lim", 0, &small, mem_source, &full, snap, err, sizeof err), -ENOSPC);
    ck_assert_msg(strstr(err, "fit here") != NULL, "%s", err);
    full.pos = 0;
    ck_assert_int_eq(vpool_receive(pb, "lim", 0, &thin, mem_source, &full, snap, err, sizeof err), -EINVAL);
    ck_assert_int_eq(vpool_vol_flags(pb, "lim"), -ENOENT);
    full.pos = 0;
    ck_assert_msg(vpool_receive(pb, "lim", 0, &exact, mem_source, &full, snap, err, sizeof err) == 0, "%s", err);
    check_snap(pb, "lim", "s1", A, size);
    /* the same stream again: refused, or with force (the daemon lost its record of the
     * volume in a kill -9 after the receive) taken as done, the copy unchanged */
    full.pos = 0;
    ck_assert_int_eq(vpool_receive(pb, "dst", 0, NULL, mem_source, &full, snap, err, sizeof err), -EEXIST);
    full.pos = 0;
    snap[0] = 0;
    ck_assert_msg(vpool_receive(pb, "dst", 1, NULL, mem_source, &full, snap, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(snap, "s1");
    ck_assert_int_eq(vpool_snap_list(pb, "dst", NULL, 0), 1);
    check_snap(pb, "dst", "s1", A, size);
    /* incremental with a flipped data byte: refused, the copy stays at s1 */
    struct mem bad = { malloc(inc.len), inc.len, inc.len, 0 };
    memcpy(bad.b, inc.b, inc.len);
    bad.b[inc.len / 2] ^= 1;
    ck_assert_int_eq(vpool_receive(pb, "dst", 0, NULL, mem_source, &bad, snap, err, sizeof err), -EBADMSG);
    b = open_vol(pb, "dst", 4096);
    img_check(b, A, size, "after the bad stream");
    ck_assert_int_eq(vpool_snap_list(pb, "dst", NULL, 0), 1);
    img_write(b, A, 0, 4096, 9);   /* local change: discarded by the next receive */
    nasd_bdev_put(b);
    inc.pos = 0;
    ck_assert_msg(vpool_receive(pb, "dst", 0, NULL, mem_source, &inc, snap, err, sizeof err) == 0, "%s", err);
    b = open_vol(pb, "dst", 4096);
    img_check(b, B, size, "after the incremental stream");
    nasd_bdev_put(b);
    check_snap(pb, "dst", "s2", B, size);
    inc.pos = 0;   /* too large for the limit: refused before the rollback to s1 */
    ck_assert_int_eq(vpool_receive(pb, "dst", 0, &small, mem_source, &inc, snap, err, sizeof err), -ENOSPC);
    check_snap(pb, "dst", "s2", B, size);
    ck_assert_int_eq(vpool_snap_list(pb, "dst", NULL, 0), 2);
    struct vpool_snap_info sa, sb;
    ck_assert_int_eq(vpool_snap_info(pa, "src", "s2", &sa), 0);
    ck_assert_int_eq(vpool_snap_info(pb, "dst", "s2", &sb), 0);
    ck_assert(!memcmp(sa.uuid, sb.uuid, 16));
    {   /* a stream naming its snapshot ".." (checksums fixed up): refused */
        struct mem dd = { malloc(full.len), full.len, full.len, 0 };
        memcpy(dd.b, full.b, full.len);
        memcpy(dd.b + 32, "..", 3);   /* snap[] of the header */
        vp_stream_fix(dd.b, dd.len, NULL);
        ck_assert_int_eq(vpool_receive(pb, "dots", 0, NULL, mem_source, &dd, snap, err, sizeof err), -EBADMSG);
        ck_assert_int_eq(vpool_vol_flags(pb, "dots"), -ENOENT);
        free(dd.b);
    }
    inc.pos = 0;   /* the same increment again: its base is no longer the newest */
    ck_assert_int_eq(vpool_receive(pb, "dst", 0, NULL, mem_source, &inc, snap, err, sizeof err), -ESTALE);
    full.pos = 0;
    ck_assert_int_eq(vpool_receive(pb, "dst", 1, NULL, mem_source, &full, snap, err, sizeof err), -EEXIST);
    vpool_close(pa); vpool_close(pb);
    tdir_remove(&ta); tdir_remove(&tb);
    free(A); free(B); free(full.b); free(inc.b); free(bad.b);
}
END_TEST

/* Writers race snapshot creates and deletes: every snapshot must hold, per block, a
 * write no older than the last one acknowledged before the create began and no newer
 * than the first one started after it returned. Two writers write 4 KiB blocks of the
 * first 2 MiB, a third whole 1 MiB units of the next 2 MiB (on the log-structured raidz1 such a copy
 * waits in the cache for its commit, vpool_xcow.c). */
#define MT_SLOTS 512        /* 2 MiB: a few AUs, so copies and writes collide a lot */
#define MT_ALL (MT_SLOTS + 512)
#define MT_LOG 200000
struct mt_blk { uint64_t magic, slot, seq; uint8_t fill[4096 - 32]; uint64_t csum; };
struct mt_ev { uint32_t slot; uint64_t seq, t0, t1; };
static _Atomic uint64_t mt_ticket, mt_seq;
static _Atomic int mt_stop;
static struct mt_ev *mt_log[3];
static size_t mt_n[3];
static nasd_bdev *mt_vol;

static void mt_make(struct mt_blk *b, uint64_t slot, uint64_t seq)
{
    b->magic = 0x5441534e5f544d53ull; b->slot = slot; b->seq = seq;
    memset(b->fill, (int)seq, sizeof b->fill);
    b->csum = XXH3_64bits(b, 4096 - 8);
}

static void *mt_writer(void *arg)
{
    int t = (int)(intptr_t)arg;
    struct mt_blk *b = aligned_alloc(4096, sizeof *b);
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 3);
    while (!atomic_load(&mt_stop) && mt_n[t] < MT_LOG) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint64_t slot = (x >> 20) % (MT_SLOTS / 2) * 2 + (uint64_t)t;
        struct mt_ev *e = &mt_log[t][mt_n[t]];
        e->slot = (uint32_t)slot;
        e->seq = atomic_fetch_add(&mt_seq, 1) + 1;
        mt_make(b, slot, e->seq);
        e->t0 = atomic_fetch_add(&mt_ticket, 1);
        ck_assert_int_eq(nasd_bdev_write(mt_vol, b, slot * 4096, 4096, (x & 7) == 0 ? NASD_IO_FUA : 0), 0);
        e->t1 = atomic_fetch_add(&mt_ticket, 1);
        mt_n[t]++;
    }
    free(b);
    return NULL;
}

static void *mt_unit_writer(void *arg)
{
    (void)arg;
    uint8_t *u = aligned_alloc(4096, 1 << 20);
    for (uint64_t k = 0; !atomic_load(&mt_stop) && mt_n[2] + 256 <= MT_LOG; k++) {
        uint64_t first = MT_SLOTS + (k % 2) * 256, seq = atomic_fetch_add(&mt_seq, 1) + 1;
        for (unsigned i = 0; i < 256; i++) mt_make((struct mt_blk *)(u + (size_t)i * 4096), first + i, seq);
        uint64_t t0 = atomic_fetch_add(&mt_ticket, 1);
        ck_assert_int_eq(nasd_bdev_write(mt_vol, u, first * 4096, 1 << 20, 0), 0);
        uint64_t t1 = atomic_fetch_add(&mt_ticket, 1);
        for (unsigned i = 0; i < 256; i++) mt_log[2][mt_n[2]++] = (struct mt_ev){ (uint32_t)(first + i), seq, t0, t1 };
        usleep(2000);
    }
    free(u);
    return NULL;
}

START_TEST(t_snapshots_under_writes)
{
    use_log = _i;
    struct tdir t;
    struct vpool *p = mkpool(&t, VPOOL_RAIDZ1, 3, NULL);
    ck_assert_int_eq(vpool_vol_create(p, "v", MT_ALL * 4096ull, 0), 0);
    mt_vol = open_vol(p, "v", 4096);
    for (int i = 0; i < 3; i++) { mt_log[i] = malloc(MT_LOG * sizeof **mt_log); mt_n[i] = 0; }
    atomic_store(&mt_stop, 0);
    pthread_t th[3];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, mt_writer, (void *)(intptr_t)i);
    pthread_create(&th[2], NULL, mt_unit_writer, NULL);
    enum { NS = 12 };
    uint64_t tb[NS], te[NS];
    bool alive[NS];
    char nm[32];
    for (int i = 0; i < NS; i++) {
        usleep(25000);
        snprintf(nm, sizeof nm, "m%d", i);
        tb[i] = atomic_fetch_add(&mt_ticket, 1);
        ck_assert_int_eq(vpool_snap_create(p, "v", nm), 0);
        te[i] = atomic_fetch_add(&mt_ticket, 1);
        alive[i] = true;
        if (i >= 3 && i % 2) {   /* drop an older one while writes go on */
            snprintf(nm, sizeof nm, "m%d", i - 2);
            ck_assert_int_eq(vpool_snap_destroy(p, "v", nm), 0);
            alive[i - 2] = false;
        }
    }
    atomic_store(&mt_stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    ck_assert_int_eq(nasd_bdev_flush(mt_vol), 0);
    uint8_t *img = malloc(MT_ALL * 4096ull);
    int checked = 0;
    for (int k = 0; k <= NS; k++) {   /* k == NS: the live volume after everything */
        if (k < NS && !alive[k]) continue;
        nasd_bdev *b = mt_vol;
        if (k < NS) { snprintf(nm, sizeof nm, "m%d", k); b = vpool_snap_open(p, "v", nm, 4096, &(int){0}); }
        ck_assert_ptr_nonnull(b);
        ck_assert_int_eq(nasd_bdev_read(b, img, 0, MT_ALL * 4096ull), 0);
        uint64_t lo[MT_ALL] = {0}, hi[MT_ALL];
        for (int s = 0; s < MT_ALL; s++) hi[s] = UINT64_MAX;
        uint64_t b0 = k < NS ? tb[k] : UINT64_MAX, e0 = k < NS ? te[k] : UINT64_MAX;
        for (int w = 0; w < 3; w++)
            for (size_t j = 0; j < mt_n[w]; j++) {
                struct mt_ev *e = &mt_log[w][j];
                if (e->t1 < b0 && e->seq > lo[e->slot]) lo[e->slot] = e->seq;
                if (e->t0 > e0 && e->seq < hi[e->slot]) hi[e->slot] = e->seq;
            }
        for (int s = 0; s < MT_ALL; s++) {
            struct mt_blk *blk = (struct mt_blk *)(img + (size_t)s * 4096);
            if (is_zero((uint8_t *)blk, 4096)) { ck_assert_msg(lo[s] == 0, "snap %d slot %d: zero, acked %llu", k, s, (unsigned long long)lo[s]); continue; }
            ck_assert_msg(blk->csum == XXH3_64bits(blk, 4096 - 8) && blk->slot == (uint64_t)s, "snap %d slot %d torn", k, s);
            ck_assert_msg(blk->seq >= lo[s] && blk->seq < hi[s], "snap %d slot %d: seq %llu outside [%llu, %llu)", k, s,
                          (unsigned long long)blk->seq, (unsigned long long)lo[s], (unsigned long long)hi[s]);
        }
        if (k < NS) nasd_bdev_put(b);
        checked++;
    }
    printf("under writes: %zu + %zu writes of 4 KiB, %zu of 1 MiB, %d snapshots checked\n", mt_n[0], mt_n[1],
           mt_n[2] / 256, checked - 1);
    nasd_bdev_put(mt_vol);
    vpool_close(p);
    tdir_remove(&t);
    free(img); free(mt_log[0]); free(mt_log[1]); free(mt_log[2]);
}
END_TEST

/* Power loss at member write k of an operation, for every k until it completes. */
enum op { OP_CREATE, OP_DELETE, OP_ROLLBACK, OP_CLONE };

static void crash_positions(enum op op)
{
    uint8_t *A = calloc(1, 8 * MB), *B;
    int k = 0;
    for (;; k++) {
        struct tdir t;
        const char *const *paths;
        nasd_bdev *b;
        struct vpool *p = crash_round_pool(&t, &paths, &b, A);
        B = malloc(8 * MB); memcpy(B, A, 8 * MB);
        img_write(b, B, MB, 2 * MB, 2);
        ck_assert_int_eq(nasd_bdev_flush(b), 0);
        struct vp_sim *sim = vp_sim_attach(p);
        vp_sim_kill_after(sim, k);
        int rc = op == OP_CREATE ? vpool_snap_create(p, "v", "s1") : op == OP_DELETE ? vpool_snap_destroy(p, "v", "s0")
               : op == OP_CLONE ? vpool_snap_clone(p, "v", "s0", "c") : vpool_snap_rollback(p, "v", "s0");
        bool died = vp_sim_died(sim);
        ck_assert_msg(rc == 0 || died, "op %d failed without a crash: %d", op, rc);
        nasd_bdev_put(b);
        vpool_close(p);
        uint64_t undone;
        vp_sim_rollback(sim, paths, 3, (uint64_t)k * 7 + op, &undone);
        char err[256];
        ck_assert_msg(vpool_import(paths, 3, NULL, &p, err, sizeof err) == 0, "k=%d: %s", k, err);
        struct vpool_snap_info si[4];
        int n = vpool_snap_list(p, "v", si, 4);
        bool has_s0 = false, has_s1 = false;
        for (int i = 0; i < n; i++) { has_s0 |= !strcmp(si[i].name, "s0"); has_s1 |= !strcmp(si[i].name, "s1"); }
        if (rc == 0 && op == OP_CREATE) ck_assert(has_s1);
        if (rc == 0 && op == OP_DELETE) ck_assert(!has_s0);
        if (op == OP_CLONE) {   /* there or not, never half: a clone reads s0 and is writable on its own */
            int fl = vpool_vol_flags(p, "c");
            ck_assert(rc != 0 || fl >= 0);
            if (fl >= 0) {
                nasd_bdev *cb = open_vol(p, "c", 4096);
                img_check(cb, A, 8 * MB, "clone after the crash");
                nasd_bdev_put(cb);
                ck_assert_int_eq(vpool_snap_destroy(p, "v", "s0"), -EBUSY);
                ck_assert_int_eq(vpool_vol_destroy(p, "c"), 0);
            }
        }
        if (op != OP_DELETE) ck_assert(has_s0);
        b = open_vol(p, "v", 4096);
        uint8_t *cur = malloc(8 * MB);
        ck_assert_int_eq(nasd_bdev_read(b, cur, 0, 8 * MB), 0);
        bool is_a = !memcmp(cur, A, 8 * MB), is_b = !memcmp(cur, B, 8 * MB);
        if (op == OP_ROLLBACK) {
            ck_assert_msg(rc ? is_a || is_b : is_a, "k=%d: rollback left a mixed volume", k);
            if (!is_a) {   /* interrupted: a retry completes it */
                ck_assert_int_eq(vpool_snap_rollback(p, "v", "s0"), 0);
                img_check(b, A, 8 * MB, "rollback retried");
            }
        } else ck_assert_msg(is_b, "k=%d: volume changed", k);
        free(cur);
        if (has_s0) check_snap(p, "v", "s0", A, 8 * MB);
        if (has_s1) check_snap(p, "v", "s1", B, 8 * MB);
        /* nothing leaked: the volume (6 MiB) plus what snapshots alone hold */
        uint64_t want = 6 * MB + (has_s0 && (op != OP_ROLLBACK || !is_a) ? 2 * MB : 0);
        if (op == OP_ROLLBACK) want = 6 * MB;   /* after the (retried) rollback s0 == volume */
        ck_assert_msg(pool_alloc(p) == want, "k=%d: allocated %llu, want %llu", k,
                      (unsigned long long)pool_alloc(p), (unsigned long long)want);
        nasd_bdev_put(b);
        vpool_close(p);
        tdir_remove(&t);
        free(B);
        if (!died) break;
    }
    printf("op %d: crashed at each of %d member writes\n", op, k);
    /* rollback: one journal batch, two copies; create and clone: their table page, two
     * copies on 3 members (no checkpoint); delete: that page and the frees' journal batch */
    ck_assert_int_ge(k, op == OP_ROLLBACK ? 2 : op == OP_DELETE ? 8 : 6);
    free(A);
}

/* Power loss at every member write of the first writes after a snapshot: a 4 KiB FUA
 * write (copies its 1 MiB unit), a 4 KiB write without FUA (copies its unit; the switch
 * waits for the next commit), a second 4 KiB write into that copied unit (cached: the
 * commit writes it over the copy), and a whole-unit 1 MiB write plus a flush. Every
 * 4 KiB is old or new (a copy never leaves a sector unreadable); acknowledged writes are
 * new; the snapshot and the untouched rest read as before; nothing leaks (one more MiB
 * per unit copied, at most the three written). */
START_TEST(t_crash_cow)
{
    use_log = _i;
    uint8_t *A = calloc(1, 8 * MB), *B = malloc(8 * MB), *cur = malloc(8 * MB);
    int k = 0;
    for (;; k++) {
        struct tdir t;
        const char *const *paths;
        nasd_bdev *b;
        struct vpool *p = crash_round_pool(&t, &paths, &b, A);
        memcpy(B, A, 8 * MB);
        uint64_t x = 77;
        for (size_t i = MB + 8192; i < MB + 12288; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; B[i] = (uint8_t)x; }
        for (size_t i = 3 * MB; i < 4 * MB; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; B[i] = (uint8_t)x; }
        for (size_t i = 5 * MB + 4096; i < 5 * MB + 8192; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; B[i] = (uint8_t)x; }
        for (size_t i = 5 * MB + 16384; i < 5 * MB + 20480; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; B[i] = (uint8_t)x; }
        struct vp_sim *sim = vp_sim_attach(p);
        vp_sim_kill_after(sim, k);
        int rc1 = nasd_bdev_write(b, B + MB + 8192, MB + 8192, 4096, NASD_IO_FUA);
        int rc2 = rc1 ? rc1 : nasd_bdev_write(b, B + 5 * MB + 4096, 5 * MB + 4096, 4096, 0);
        if (!rc2) rc2 = nasd_bdev_write(b, B + 5 * MB + 16384, 5 * MB + 16384, 4096, 0);
        if (!rc2) rc2 = nasd_bdev_write(b, B + 3 * MB, 3 * MB, MB, 0);
        int rc3 = rc2 ? rc2 : nasd_bdev_flush(b);
        bool died = vp_sim_died(sim);
        ck_assert_msg(rc3 == 0 || died, "k=%d: failed without a crash: %d %d %d", k, rc1, rc2, rc3);
        nasd_bdev_put(b);
        vpool_close(p);
        uint64_t undone;
        vp_sim_rollback(sim, paths, 3, (uint64_t)k * 13 + 5, &undone);
        char err[256];
        ck_assert_msg(vpool_import(paths, 3, NULL, &p, err, sizeof err) == 0, "k=%d: %s", k, err);
        b = open_vol(p, "v", 4096);
        int rrc = nasd_bdev_read(b, cur, 0, 8 * MB);
        ck_assert_msg(rrc == 0, "k=%d: read after the crash: %d", k, rrc);
        int moved = 0;
        for (uint64_t u = 0; u < 8; u++) {
            bool old = !memcmp(cur + u * MB, A + u * MB, MB), new_ = !memcmp(cur + u * MB, B + u * MB, MB);
            for (uint64_t o = u * MB; o < (u + 1) * MB; o += 4096)
                ck_assert_msg(!memcmp(cur + o, A + o, 4096) || !memcmp(cur + o, B + o, 4096),
                              "k=%d: at %llu neither old nor new", k, (unsigned long long)o);
            if (u == 1 && rc1 == 0) ck_assert_msg(new_, "k=%d: acknowledged FUA write lost", k);
            if ((u == 3 || u == 5) && rc3 == 0) ck_assert_msg(new_, "k=%d: flushed write lost", k);
            moved += !old;
        }
        check_snap(p, "v", "s0", A, 8 * MB);
        struct vpool_status st;
        vpool_get_status(p, &st);
        ck_assert_uint_eq(st.unrepairable, 0);
        /* a unit copied whose written sectors all went back to the old data is moved too */
        uint64_t al = pool_alloc(p);
        ck_assert_msg(al % MB == 0 && al >= 6 * MB + (uint64_t)moved * MB && al <= 9 * MB,
                      "k=%d: allocated %llu, %d units read as moved", k, (unsigned long long)al, moved);
        nasd_bdev_put(b);
        vpool_close(p);
        tdir_remove(&t);
        if (!died) break;
    }
    printf("cow: crashed at each of %d member writes\n", k);
    ck_assert_int_ge(k, 8);
    free(A); free(B); free(cur);
}
END_TEST

/* A commit that does not sync (the write-back flusher's) journals the switch to a copied
 * unit together with a later write into the copy; the power then fails with every block
 * written since the last sync undone. Every 4 KiB reads as before the snapshot's first
 * writes (none was acknowledged): the copy's sectors fall back to the snapshot's data,
 * not to no data at all. */
START_TEST(t_crash_cow_unsynced)
{
    use_log = _i;
    uint8_t *A = calloc(1, 8 * MB), *cur = malloc(8 * MB), *w = malloc(4096);
    struct tdir t;
    const char *const *paths;
    nasd_bdev *b;
    struct vpool *p = crash_round_pool(&t, &paths, &b, A);
    struct vp_sim *sim = vp_sim_attach(p);
    memset(w, 0x5a, 4096);
    ck_assert_int_eq(nasd_bdev_write(b, w, 5 * MB + 4096, 4096, 0), 0);    /* copies unit 5 */
    ck_assert_int_eq(nasd_bdev_write(b, w, 5 * MB + 16384, 4096, 0), 0);   /* into the copy */
    ck_assert_int_eq(nasd_bdev_write(b, w, 2 * MB, 4096, 0), 0);           /* copies unit 2 */
    pthread_mutex_lock(&p->commit_lock);
    ck_assert_int_eq(vp_commit_ex(p, false), 0);
    pthread_mutex_unlock(&p->commit_lock);
    uint64_t undone;
    p = power_loss_import(p, sim, paths, b, &undone);
    b = open_vol(p, "v", 4096);
    ck_assert_int_eq(nasd_bdev_read(b, cur, 0, 8 * MB), 0);
    for (uint64_t o = 0; o < 8 * MB; o += 4096)
        ck_assert_msg(!memcmp(cur + o, A + o, 4096) || (!memcmp(cur + o, w, 4096) &&
                      (o == 5 * MB + 4096 || o == 5 * MB + 16384 || o == 2 * MB)),
                      "at %llu neither old nor new (%llu blocks undone)", (unsigned long long)o, (unsigned long long)undone);
    check_snap(p, "v", "s0", A, 8 * MB);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
    free(A); free(cur); free(w);
}
END_TEST

START_TEST(t_crash_create) { use_log = _i; crash_positions(OP_CREATE); }
END_TEST
START_TEST(t_crash_delete) { use_log = _i; crash_positions(OP_DELETE); }
END_TEST
START_TEST(t_crash_rollback) { use_log = _i; crash_positions(OP_ROLLBACK); }
END_TEST
START_TEST(t_crash_clone) { use_log = _i; crash_positions(OP_CLONE); }
END_TEST

int main(void)
{
    nasd_log_level = LOG_ERR;
    Suite *s = suite_create("vpool_snap");
    TCase *tc = tcase_create("snap");
    tcase_set_timeout(tc, 300);
    /* loop 1 of each: the same on a log-structured raidz1 */
    tcase_add_loop_test(tc, t_cow_clone_rollback, 0, 2);
    tcase_add_loop_test(tc, t_rollback_restores_size, 0, 2);
    tcase_add_loop_test(tc, t_lz4_and_resilver, 0, 2);
    tcase_add_loop_test(tc, t_send_receive, 0, 2);
    tcase_add_test(tc, t_format1_pool);
    tcase_add_loop_test(tc, t_snapshots_under_writes, 0, 2);
    tcase_add_loop_test(tc, t_crash_create, 0, 2);
    tcase_add_loop_test(tc, t_crash_cow, 0, 2);
    tcase_add_loop_test(tc, t_crash_cow_unsynced, 0, 2);
    tcase_add_loop_test(tc, t_crash_delete, 0, 2);
    tcase_add_loop_test(tc, t_crash_rollback, 0, 2);
    tcase_add_loop_test(tc, t_crash_clone, 0, 2);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
