#pragma once
/* Helpers of the snapshot tests (test_vpool_snap, test_vpool_snap_page): volumes compared
 * with an image in RAM, pools in place or log-structured, and power-loss rounds. */
#include <check.h>
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"
#include "storage/pool/vpool_snap.h"
#include "tests/unit/test_vpool_util.h"

#define VSIZE (16ull << 20)
#define MB (1ull << 20)

static inline void img_write(nasd_bdev *b, uint8_t *img, uint64_t off, size_t len, uint64_t seed)
{
    uint8_t *buf = malloc(len);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + off + 1;
    for (size_t i = 0; i < len; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; buf[i] = (uint8_t)x; }
    ck_assert_int_eq(nasd_bdev_write(b, buf, off, len, 0), 0);
    memcpy(img + off, buf, len);
    free(buf);
}

static inline void img_check(nasd_bdev *b, const uint8_t *img, uint64_t size, const char *what)
{
    uint8_t *buf = malloc(size);
    ck_assert_int_eq(nasd_bdev_read(b, buf, 0, size), 0);
    for (uint64_t i = 0; i < size; i += 4096)
        ck_assert_msg(!memcmp(buf + i, img + i, 4096), "%s: mismatch at %llu", what, (unsigned long long)i);
    free(buf);
}

static inline void check_snap(struct vpool *p, const char *vol, const char *snap, const uint8_t *img, uint64_t size)
{
    int e = 0;
    nasd_bdev *s = vpool_snap_open(p, vol, snap, 4096, &e);
    ck_assert_msg(s != NULL, "open %s@%s: %d", vol, snap, e);
    img_check(s, img, size, snap);
    uint8_t z[4096] = {0};
    ck_assert_int_eq(nasd_bdev_write(s, z, 0, 4096, 0), -EROFS);
    nasd_bdev_put(s);
}

static inline uint64_t pool_alloc(struct vpool *p)
{
    struct vpool_status st;
    vpool_get_status(p, &st);
    return st.allocated;
}

static int use_log;   /* raidz1 pools of a test are log-structured (format 3) */

static inline struct vpool *mkpool(struct tdir *t, enum vpool_layout l, int n, const char *const **paths)
{
    static const char *pp[4];
    struct vpool_member_spec ms[4];
    tdir_make(t, n);
    for (int i = 0; i < n; i++) { ms[i] = (struct vpool_member_spec){ t->member[i], MEMBER_SIZE }; pp[i] = t->member[i]; }
    struct vpool *p;
    char err[256];
    struct vpool_opts o = { .cache_bytes = 8ull << 20, .dirty_bytes = 4ull << 20, .log = use_log && l == VPOOL_RAIDZ1 };
    ck_assert_msg(vpool_create("sp", l, ms, n, &o, &p, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(p->fmt == VP_FMT_LOG, o.log);
    if (paths) *paths = pp;
    return p;
}

/* Runs op and checks that it wrote that many table pages (both copies on each of n
 * members) and made no checkpoint. */
#define PAGES_ONLY(p, n, pages, op) do {                                              \
        struct vp_prof b_, a_;                                                        \
        vp_debug_prof(p, &b_);                                                        \
        ck_assert_int_eq(op, 0);                                                      \
        vp_debug_prof(p, &a_);                                                        \
        ck_assert_uint_eq(a_.meta_bytes - b_.meta_bytes, (uint64_t)(pages) * 2 * (n) * 4096); \
        ck_assert_uint_eq(a_.checkpoints, b_.checkpoints);                            \
    } while (0)

/* Closes p and imports it again from paths (mkpool's cache sizes). */
static inline struct vpool *reimport(struct vpool *p, const char *const *paths, int n)
{
    vpool_close(p);
    char err[256];
    struct vpool_opts o = { .cache_bytes = 8ull << 20, .dirty_bytes = 4ull << 20 };
    ck_assert_msg(vpool_import(paths, n, &o, &p, err, sizeof err) == 0, "import: %s", err);
    return p;
}

/* A crash round's start: raidz1 of 3, volume v of 8 MiB holding A (6 MiB of data), snapshot s0. */
static inline struct vpool *crash_round_pool(struct tdir *t, const char *const **paths, nasd_bdev **b, uint8_t *A)
{
    struct vpool *p = mkpool(t, VPOOL_RAIDZ1, 3, paths);
    ck_assert_int_eq(vpool_vol_create(p, "v", 8 * MB, 0), 0);
    *b = open_vol(p, "v", 4096);
    memset(A, 0, 8 * MB);
    img_write(*b, A, 0, 6 * MB, 1);
    ck_assert_int_eq(nasd_bdev_flush(*b), 0);
    ck_assert_int_eq(vpool_snap_create(p, "v", "s0"), 0);
    return p;
}

/* Power loss now: the pool closed as it stands (b, if any, put first), the members' writes since
 * their last sync undone (count in *undone; seed: a random part of them, see
 * vp_sim_rollback), and the pool imported again. */
static inline struct vpool *power_loss_import_seed(struct vpool *p, struct vp_sim *sim, const char *const *paths,
                                                   nasd_bdev *b, uint64_t seed, uint64_t *undone)
{
    vp_sim_kill(sim);
    if (b) nasd_bdev_put(b);
    vpool_close(p);
    vp_sim_rollback(sim, paths, 3, seed, undone);
    char err[256];
    ck_assert_msg(vpool_import(paths, 3, NULL, &p, err, sizeof err) == 0, "import: %s", err);
    return p;
}

static inline struct vpool *power_loss_import(struct vpool *p, struct vp_sim *sim, const char *const *paths, nasd_bdev *b,
                                              uint64_t *undone)
{
    return power_loss_import_seed(p, sim, paths, b, VP_SIM_UNDO_ALL, undone);
}

