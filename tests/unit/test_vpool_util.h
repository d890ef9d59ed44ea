#pragma once
/* Helpers shared by the vpool unit tests: temp member files and self-describing
 * data patterns (each 4 KiB block's content is a function of its offset and a seed). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "storage/pool/vpool.h"

#define MEMBER_SIZE (64ull << 20)

/* Test pools are small, so with the default count each metadata region would be one page,
 * and a checkpoint one batch: 32 regions make the first write of a region (vpool_meta.c)
 * write several pages, and batches of 5 pages split checkpoints, under every power-loss
 * test too. test_vpool_meta tests the defaults. */
extern unsigned vp_test_meta_regions, vp_test_meta_batch;
__attribute__((constructor)) static void vpool_test_meta(void) { vp_test_meta_regions = 32; vp_test_meta_batch = 5; }

struct tdir { char dir[256]; char member[8][300]; int n; };

static inline void tdir_make(struct tdir *t, int n)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char d[256];
    memset(t, 0, sizeof *t);
    snprintf(d, sizeof d, "%s/vpool-test-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(d));
    memcpy(t->dir, d, sizeof d);
    t->n = n;
    for (int i = 0; i < n; i++) snprintf(t->member[i], sizeof t->member[i], "%s/m%d", d, i);
}

static inline void tdir_remove(struct tdir *t)
{
    for (int i = 0; i < 8; i++) if (t->member[i][0]) unlink(t->member[i]);
    rmdir(t->dir);
}

static inline nasd_bdev *open_vol(struct vpool *p, const char *name, uint32_t bs)
{
    int err = 0;
    nasd_bdev *b = vpool_vol_open(p, name, bs, &err);
    ck_assert_msg(b != NULL, "open %s: %d", name, err);
    return b;
}

static inline void fill_block(uint8_t *buf, uint64_t off, uint64_t seed)
{
    uint64_t x = off * 0x9E3779B97F4A7C15ull ^ (seed + 1) * 0xD1B54A32D192ED03ull;
    for (int i = 0; i < 4096; i += 8) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        memcpy(buf + i, &x, 8);
    }
}

static inline int is_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) if (b[i]) return 0;
    return 1;
}

static inline void write_pattern(nasd_bdev *b, uint64_t off, uint64_t len, uint64_t seed, int flush)
{
    static __thread uint8_t buf[256 << 10];
    for (uint64_t pos = off; pos < off + len;) {
        uint64_t n = off + len - pos < sizeof buf ? off + len - pos : sizeof buf;
        for (uint64_t k = 0; k < n; k += 4096) fill_block(buf + k, pos + k, seed);
        int rc = nasd_bdev_write(b, buf, pos, n, 0);
        ck_assert_msg(rc == 0, "write at %llu: %d", (unsigned long long)pos, rc);
        pos += n;
    }
    if (flush) ck_assert_int_eq(nasd_bdev_flush(b), 0);
}

static inline void check_pattern(nasd_bdev *b, uint64_t off, uint64_t len, uint64_t seed)
{
    static __thread uint8_t buf[256 << 10], want[4096];
    for (uint64_t pos = off; pos < off + len;) {
        uint64_t n = off + len - pos < sizeof buf ? off + len - pos : sizeof buf;
        int rc = nasd_bdev_read(b, buf, pos, n);
        ck_assert_msg(rc == 0, "read at %llu: %d", (unsigned long long)pos, rc);
        for (uint64_t k = 0; k < n; k += 4096) {
            fill_block(want, pos + k, seed);
            ck_assert_msg(memcmp(buf + k, want, 4096) == 0, "data mismatch at %llu", (unsigned long long)(pos + k));
        }
        pos += n;
    }
}

static inline uint64_t rnd_off(uint64_t *x, uint64_t base, uint64_t span)
{
    *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
    return base + (*x % (span / 4096)) * 4096;
}

static inline void write_pattern_random(nasd_bdev *b, uint64_t base, uint64_t span, int count, uint64_t seed)
{
    uint64_t x = seed * 7919 + 1;
    uint8_t buf[4096];
    for (int i = 0; i < count; i++) {
        uint64_t off = rnd_off(&x, base, span);
        fill_block(buf, off, seed);
        ck_assert_int_eq(nasd_bdev_write(b, buf, off, 4096, 0), 0);
    }
}

static inline void check_pattern_random(nasd_bdev *b, uint64_t base, uint64_t span, int count, uint64_t seed)
{
    uint64_t x = seed * 7919 + 1;
    uint8_t buf[4096], want[4096];
    for (int i = 0; i < count; i++) {
        uint64_t off = rnd_off(&x, base, span);
        fill_block(want, off, seed);
        ck_assert_int_eq(nasd_bdev_read(b, buf, off, 4096), 0);
        ck_assert_msg(memcmp(buf, want, 4096) == 0, "random block mismatch at %llu", (unsigned long long)off);
    }
}

/* Pools of the first n members of t ("tank"), as test_vpool and test_vpool_place use them. */
static inline void create_pool(struct tdir *t, enum vpool_layout l, int n, struct vpool **p)
{
    struct vpool_member_spec ms[8];
    for (int i = 0; i < n; i++) ms[i] = (struct vpool_member_spec){ t->member[i], MEMBER_SIZE };
    char err[256] = "";
    int rc = vpool_create("tank", l, ms, n, NULL, p, err, sizeof err);
    ck_assert_msg(rc == 0, "create: %d %s", rc, err);
}

/* A pool with volume "v" whose first data_len bytes hold pattern seed, flushed. */
static inline struct vpool *pool_with_data(struct tdir *t, enum vpool_layout l, int n, uint64_t vol_size,
                                           uint64_t data_len, uint64_t seed)
{
    struct vpool *p;
    create_pool(t, l, n, &p);
    ck_assert_int_eq(vpool_vol_create(p, "v", vol_size, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    write_pattern(b, 0, data_len, seed, 1);
    nasd_bdev_put(b);
    return p;
}

static inline struct vpool *import_pool(struct tdir *t, int n, int skip)
{
    const char *paths[8];
    int k = 0;
    for (int i = 0; i < n; i++) if (i != skip) paths[k++] = t->member[i];
    char err[256] = "";
    struct vpool *p = NULL;
    int rc = vpool_import(paths, k, NULL, &p, err, sizeof err);
    ck_assert_msg(rc == 0, "import: %d %s", rc, err);
    return p;
}
