/* Pool engine: layouts, persistence, checksum repair, degraded operation, resilver. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"
#include "tests/unit/test_vpool_util.h"
#include <xxhash.h>

static void layout_roundtrip(enum vpool_layout l, int n)
{
    struct tdir t;
    tdir_make(&t, n + 1);
    struct vpool *p;
    create_pool(&t, l, n, &p);
    ck_assert_int_eq(vpool_vol_create(p, "v1", 40ull << 20, 0), 0);
    ck_assert_int_eq(vpool_vol_create(p, "v1", 1 << 20, 0), -EEXIST);
    nasd_bdev *b = open_vol(p, "v1", 4096);
    ck_assert_uint_eq(b->size, 40ull << 20);
    write_pattern(b, 0, 10ull << 20, 1, 1);           /* sequential 10 MiB, flushed */
    write_pattern_random(b, 20ull << 20, 16ull << 20, 500, 2);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    check_pattern(b, 0, 10ull << 20, 1);
    uint8_t z[4096];
    ck_assert_int_eq(nasd_bdev_read(b, z, 12ull << 20, sizeof z), 0);
    ck_assert(is_zero(z, sizeof z));                 /* never written: zeros */
    nasd_bdev_put(b);
    vpool_close(p);

    p = import_pool(&t, n, -1);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    ck_assert_int_eq(st.layout, l);
    ck_assert_str_eq(st.name, "tank");
    char names[4][64];
    uint64_t sizes[4];
    ck_assert_int_eq(vpool_vol_list(p, names, sizes, 4), 1);
    ck_assert_str_eq(names[0], "v1");
    b = open_vol(p, "v1", 512);
    check_pattern(b, 0, 10ull << 20, 1);
    check_pattern_random(b, 20ull << 20, 16ull << 20, 500, 2);
    ck_assert_int_eq(vpool_vol_destroy(p, "v1"), -EBUSY);
    nasd_bdev_put(b);
    ck_assert_int_eq(vpool_vol_destroy(p, "v1"), 0);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.allocated, 0);
    vpool_close(p);
    tdir_remove(&t);
}

START_TEST(t_stripe) { layout_roundtrip(VPOOL_STRIPE, 3); }
END_TEST
START_TEST(t_mirror) { layout_roundtrip(VPOOL_MIRROR, 2); }
END_TEST
START_TEST(t_mirror3) { layout_roundtrip(VPOOL_MIRROR, 3); }
END_TEST
START_TEST(t_raidz1) { layout_roundtrip(VPOOL_RAIDZ1, 4); }
END_TEST
START_TEST(t_raidz1_3) { layout_roundtrip(VPOOL_RAIDZ1, 3); }
END_TEST

/* corrupt the data sector behind volume offset off on disk */
static void corrupt_at(struct vpool *p, struct tdir *t, const char *vol, uint64_t off)
{
    int m; uint64_t moff;
    ck_assert_int_eq(vp_debug_locate(p, vol, off, &m, &moff, NULL), 0);
    int fd = open(t->member[m], O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t junk[4096];
    memset(junk, 0xA5, sizeof junk);
    ck_assert_int_eq(pwrite(fd, junk, sizeof junk, (off_t)moff), (ssize_t)sizeof junk);
    close(fd);
}

static void corrupt_repair(enum vpool_layout l, int n)
{
    struct tdir t;
    tdir_make(&t, n);
    struct vpool *p = pool_with_data(&t, l, n, 8ull << 20, 4ull << 20, 7);
    vpool_close(p);
    p = import_pool(&t, n, -1);
    /* one sector corrupted before a read (repaired by the read), others by scrub */
    corrupt_at(p, &t, "v", 4096 * 3);
    corrupt_at(p, &t, "v", 1 << 20);
    corrupt_at(p, &t, "v", (2 << 20) + 8192);
    nasd_bdev *b = open_vol(p, "v", 4096);
    uint8_t buf[4096], want[4096];
    ck_assert_int_eq(nasd_bdev_read(b, buf, 4096 * 3, 4096), 0);
    fill_block(want, 4096 * 3, 7);
    ck_assert(memcmp(buf, want, 4096) == 0);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.repaired, 1);
    ck_assert_int_eq(vpool_scrub_start(p), 0);
    vpool_wait_background(p);
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.scrub_running, 0);
    ck_assert_uint_eq(st.scrub_repaired, 2);
    ck_assert_uint_eq(st.scrub_unrepairable, 0);
    ck_assert(st.scrub_finished >= st.scrub_started && st.scrub_started > 0);
    uint64_t ck = 0;
    for (int i = 0; i < n; i++) ck += st.members[i].checksum_errors;
    ck_assert_uint_eq(ck, 3);
    /* a second scrub finds nothing */
    ck_assert_int_eq(vpool_scrub_start(p), 0);
    vpool_wait_background(p);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.scrub_repaired, 0);
    check_pattern(b, 0, 4ull << 20, 7);
    nasd_bdev_put(b);
    vpool_close(p);
    /* and the repair is on disk: reading directly after re-import needs no repair */
    p = import_pool(&t, n, -1);
    b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 4ull << 20, 7);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.repaired, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}

START_TEST(t_repair_raidz1) { corrupt_repair(VPOOL_RAIDZ1, 4); }
END_TEST
START_TEST(t_repair_mirror) { corrupt_repair(VPOOL_MIRROR, 2); }
END_TEST

/* One read over several chunks (vp_read_span: a preadv per stretch of a member) returns
 * every sector verified: three corrupt sectors in three chunks of one read are rebuilt,
 * sectors never written read as zeros (in an allocated unit and in an unallocated one),
 * a rewrite (elsewhere on a log) reads as rewritten, and with a member gone the read
 * rebuilds its chunks. */
static void span_check(nasd_bdev *b)
{
    static uint8_t buf[4 << 20];
    uint8_t want[4096];
    memset(buf, 0xee, sizeof buf);
    ck_assert_int_eq(nasd_bdev_read(b, buf, 0, sizeof buf), 0);
    for (uint64_t k = 0; k < sizeof buf; k += 4096) {
        bool re = k >= (1 << 20) + 131072 && k < (1 << 20) + 131072 + 8192;
        if (k >= (3 << 20) + (128 << 10)) memset(want, 0, sizeof want);
        else fill_block(want, k, re ? 10 : 9);
        ck_assert_msg(!memcmp(buf + k, want, sizeof want), "sector at %llu differs", (unsigned long long)k);
    }
}

static void span_read(enum vpool_layout l, int n, int log)
{
    struct tdir t;
    tdir_make(&t, n);
    struct vpool_member_spec ms[8];
    for (int i = 0; i < n; i++) ms[i] = (struct vpool_member_spec){ t.member[i], MEMBER_SIZE };
    struct vpool_opts o = { .log = log };
    struct vpool *p;
    char err[256] = "";
    ck_assert_msg(vpool_create("tank", l, ms, n, &o, &p, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(vpool_vol_create(p, "v", 8ull << 20, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    write_pattern(b, 0, (3 << 20) + (128 << 10), 9, 1);
    write_pattern(b, (1 << 20) + 131072, 8192, 10, 1);
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, n, -1);   /* nothing cached */
    corrupt_at(p, &t, "v", 4096 * 5);
    corrupt_at(p, &t, "v", 65536 * 2 + 4096);   /* even chunks: the ones a mirror reads from member 0 */
    corrupt_at(p, &t, "v", (1 << 20) + 131072 + 4096);
    b = open_vol(p, "v", 4096);
    span_check(b);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.repaired, 3);
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, n, 0);
    b = open_vol(p, "v", 4096);
    span_check(b);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}

START_TEST(t_span_raidz1) { span_read(VPOOL_RAIDZ1, 4, 0); }
END_TEST
START_TEST(t_span_mirror) { span_read(VPOOL_MIRROR, 2, 0); }
END_TEST
START_TEST(t_span_log) { span_read(VPOOL_RAIDZ1, 4, 1); }
END_TEST

START_TEST(t_stripe_corrupt_unrepairable)
{
    struct tdir t;
    tdir_make(&t, 2);
    struct vpool *p = pool_with_data(&t, VPOOL_STRIPE, 2, 4ull << 20, 1ull << 20, 3);
    vpool_close(p);
    p = import_pool(&t, 2, -1);                       /* cold cache */
    nasd_bdev *b = open_vol(p, "v", 4096);
    corrupt_at(p, &t, "v", 8192);
    uint8_t buf[4096];
    ck_assert_int_eq(nasd_bdev_read(b, buf, 8192, 4096), -EIO);   /* detected, never silent */
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.unrepairable, 1);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

START_TEST(t_raidz1_missing_member_replace)
{
    struct tdir t;
    tdir_make(&t, 5);
    struct vpool *p = pool_with_data(&t, VPOOL_RAIDZ1, 4, 32ull << 20, 12ull << 20, 11);
    vpool_close(p);
    unlink(t.member[2]);                               /* the disk is gone */

    p = import_pool(&t, 4, 2);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_DEGRADED);
    ck_assert_int_eq(st.members[2].state, VPOOL_M_MISSING);
    nasd_bdev *b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 12ull << 20, 11);
    write_pattern(b, 12ull << 20, 4ull << 20, 12, 1);  /* degraded writes */
    write_pattern_random(b, 16ull << 20, 16ull << 20, 300, 13);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    check_pattern(b, 12ull << 20, 4ull << 20, 12);
    check_pattern_random(b, 16ull << 20, 16ull << 20, 300, 13);

    ck_assert_int_eq(vpool_member_replace(p, 2, t.member[4], MEMBER_SIZE, NULL), 0);
    vpool_wait_background(p);
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    ck_assert_int_eq(st.members[2].state, VPOOL_M_ONLINE);
    ck_assert_str_eq(st.members[2].path, t.member[4]);
    ck_assert_int_eq(st.resilver_running, 0);
    check_pattern_random(b, 16ull << 20, 16ull << 20, 300, 13);
    nasd_bdev_put(b);
    vpool_close(p);

    /* the rebuilt member really holds the data: lose a different member now */
    const char *paths[] = { t.member[0], t.member[1], t.member[4] };
    char err[256];
    ck_assert_int_eq(vpool_import(paths, 3, NULL, &p, err, sizeof err), 0);
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_DEGRADED);
    b = open_vol(p, "v", 4096);
    check_pattern_random(b, 16ull << 20, 16ull << 20, 300, 13);
    check_pattern(b, 12ull << 20, 4ull << 20, 12);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

START_TEST(t_raidz1_zeroed_member_live)
{
    struct tdir t;
    tdir_make(&t, 4);
    struct vpool *p = pool_with_data(&t, VPOOL_RAIDZ1, 4, 16ull << 20, 8ull << 20, 21);
    vpool_close(p);
    p = import_pool(&t, 4, -1);                       /* cold cache */
    nasd_bdev *b = open_vol(p, "v", 4096);
    /* wipe member 1's data area while the pool is open: every read from it fails its
     * checksum and is rebuilt from parity */
    int fd = open(t.member[1], O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, MEMBER_SIZE), 0);
    close(fd);
    check_pattern(b, 0, 8ull << 20, 21);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_gt(st.repaired, 0);
    ck_assert_uint_eq(st.unrepairable, 0);
    ck_assert_uint_gt(st.members[1].checksum_errors, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    /* labels were wiped too but close rewrote them; import must work with all 4 */
    p = import_pool(&t, 4, -1);
    ck_assert_int_eq(vpool_scrub_start(p), 0);
    vpool_wait_background(p);
    b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 8ull << 20, 21);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

START_TEST(t_mirror_missing)
{
    struct tdir t;
    tdir_make(&t, 2);
    struct vpool *p = pool_with_data(&t, VPOOL_MIRROR, 2, 8ull << 20, 6ull << 20, 31);
    vpool_close(p);
    p = import_pool(&t, 2, 0);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_DEGRADED);
    nasd_bdev *b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 6ull << 20, 31);
    write_pattern(b, 6ull << 20, 1ull << 20, 32, 1);
    nasd_bdev_put(b);
    vpool_close(p);
    /* both again: member 0 is stale and gets resilvered automatically */
    p = import_pool(&t, 2, -1);
    vpool_wait_background(p);
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    vpool_close(p);
    p = import_pool(&t, 2, 1);   /* only the resilvered one */
    b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 6ull << 20, 31);
    check_pattern(b, 6ull << 20, 1ull << 20, 32);
    nasd_bdev_put(b);
    vpool_close(p);
    /* a stripe cannot lose a member */
    tdir_remove(&t);
}
END_TEST

START_TEST(t_offline_online)
{
    struct tdir t;
    tdir_make(&t, 3);
    struct vpool *p;
    create_pool(&t, VPOOL_RAIDZ1, 3, &p);
    ck_assert_int_eq(vpool_vol_create(p, "v", 16ull << 20, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    write_pattern(b, 0, 8ull << 20, 41, 1);
    ck_assert_int_eq(vpool_member_offline(p, 0), 0);
    ck_assert_int_eq(vpool_member_offline(p, 1), -EBUSY);   /* would fault the pool */
    write_pattern(b, 2ull << 20, 2ull << 20, 42, 1);
    ck_assert_int_eq(vpool_member_online(p, 0), 0);
    vpool_wait_background(p);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    /* prove member 0 got the new data: take member 2 away */
    ck_assert_int_eq(vpool_member_offline(p, 2), 0);
    check_pattern(b, 2ull << 20, 2ull << 20, 42);
    check_pattern(b, 0, 2ull << 20, 41);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.unrepairable, 0);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* A 3-way mirror: member 0 back online resilvers what changed while it was away; an
 * offline of member 1 meanwhile must not make that resilver forget the changed rows
 * (member 0 alone then serves everything). */
START_TEST(t_offline_during_resilver)
{
    struct tdir t;
    tdir_make(&t, 3);
    struct vpool *p = pool_with_data(&t, VPOOL_MIRROR, 3, 32ull << 20, 32ull << 20, 61);
    nasd_bdev *b = open_vol(p, "v", 4096);
    ck_assert_int_eq(vpool_member_offline(p, 0), 0);
    write_pattern(b, 0, 32ull << 20, 62, 1);
    ck_assert_int_eq(vpool_member_online(p, 0), 0);
    int rc = vpool_member_offline(p, 1);   /* refused while the resilver runs, or harmless */
    ck_assert(rc == 0 || rc == -EBUSY);
    vpool_wait_background(p);
    if (rc == 0) ck_assert_int_eq(vpool_member_online(p, 1), 0);
    vpool_wait_background(p);
    ck_assert_int_eq(vpool_member_offline(p, 1), 0);
    ck_assert_int_eq(vpool_member_offline(p, 2), 0);   /* member 0 alone */
    check_pattern(b, 0, 32ull << 20, 62);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.unrepairable, 0);
    /* two absences that overlap: member 1 away for writes 63 and 64, member 2 for 64 only;
     * member 1 back must get both */
    ck_assert_int_eq(vpool_member_online(p, 1), 0);
    ck_assert_int_eq(vpool_member_online(p, 2), 0);
    vpool_wait_background(p);
    ck_assert_int_eq(vpool_member_offline(p, 1), 0);
    write_pattern(b, 0, 16ull << 20, 63, 1);
    ck_assert_int_eq(vpool_member_offline(p, 2), 0);
    write_pattern(b, 16ull << 20, 16ull << 20, 64, 1);
    ck_assert_int_eq(vpool_member_online(p, 1), 0);
    vpool_wait_background(p);
    ck_assert_int_eq(vpool_member_offline(p, 0), 0);   /* member 1 alone */
    check_pattern(b, 0, 16ull << 20, 63);
    check_pattern(b, 16ull << 20, 16ull << 20, 64);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

START_TEST(t_unmap_frees)
{
    struct tdir t;
    tdir_make(&t, 3);
    struct vpool *p;
    create_pool(&t, VPOOL_RAIDZ1, 3, &p);
    ck_assert_int_eq(vpool_vol_create(p, "v", 16ull << 20, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 512);
    write_pattern(b, 0, 8ull << 20, 51, 1);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.allocated, 8ull << 20);
    int mapped; uint64_t run;
    ck_assert_int_eq(b->ops->mapped(b, 0, 16ull << 20, &mapped, &run), 0);
    ck_assert(mapped && run == 8ull << 20);
    ck_assert_int_eq(nasd_bdev_unmap(b, 1ull << 20, 3ull << 20), 0);   /* whole AUs */
    ck_assert_int_eq(nasd_bdev_unmap(b, 5ull << 20, 8192 + 512), 0);  /* sectors + a 512B tail */
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.allocated, 5ull << 20);
    ck_assert_int_eq(b->ops->mapped(b, 1ull << 20, 1ull << 20, &mapped, &run), 0);
    ck_assert(!mapped && run == 1ull << 20);
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, 3, -1);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.allocated, 5ull << 20);
    b = open_vol(p, "v", 512);
    uint8_t buf[1 << 16];
    for (uint64_t off = 1ull << 20; off < 4ull << 20; off += sizeof buf) {
        ck_assert_int_eq(nasd_bdev_read(b, buf, off, sizeof buf), 0);
        ck_assert(is_zero(buf, sizeof buf));
    }
    ck_assert_int_eq(nasd_bdev_read(b, buf, 5ull << 20, 8192 + 512), 0);
    ck_assert(is_zero(buf, 8192 + 512));
    check_pattern(b, 0, 1ull << 20, 51);
    check_pattern(b, 4ull << 20, 1ull << 20, 51);
    check_pattern(b, (5ull << 20) + 12288, 4096, 51);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

START_TEST(t_lz4_roundtrip)
{
    struct tdir t;
    tdir_make(&t, 3);
    struct vpool *p;
    create_pool(&t, VPOOL_RAIDZ1, 3, &p);
    ck_assert_int_eq(vpool_vol_create(p, "z", 16ull << 20, VPOOL_VOL_LZ4), 0);
    nasd_bdev *b = open_vol(p, "z", 4096);
    /* compressible text-like data, incompressible pattern data, and partial chunks */
    uint8_t *buf = malloc(4 << 20);
    for (size_t i = 0; i < (4 << 20); i++) buf[i] = "the quick brown fox "[i % 20];
    ck_assert_int_eq(nasd_bdev_write(b, buf, 0, 4 << 20, 0), 0);
    write_pattern(b, 4ull << 20, 1ull << 20, 61, 0);
    ck_assert_int_eq(nasd_bdev_write(b, "HELLO", (6ull << 20) + 100, 5, 0), 0);   /* sub-sector */
    ck_assert_int_eq(nasd_bdev_flush(b), 0);
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, 3, -1);
    b = open_vol(p, "z", 4096);
    uint8_t *rd = malloc(4 << 20);
    ck_assert_int_eq(nasd_bdev_read(b, rd, 0, 4 << 20), 0);
    ck_assert(memcmp(rd, buf, 4 << 20) == 0);
    check_pattern(b, 4ull << 20, 1ull << 20, 61);
    ck_assert_int_eq(nasd_bdev_read(b, rd, 6ull << 20, 4096), 0);
    ck_assert(memcmp(rd + 100, "HELLO", 5) == 0 && rd[99] == 0 && rd[105] == 0);
    /* overwrite one sector inside a compressed chunk */
    memset(buf, 'x', 4096);
    ck_assert_int_eq(nasd_bdev_write(b, buf, 8192, 4096, NASD_IO_FUA), 0);
    ck_assert_int_eq(nasd_bdev_read(b, rd, 0, 65536), 0);
    ck_assert(rd[8192] == 'x' && rd[8192 + 4095] == 'x' && rd[4096] == "the quick brown fox "[4096 % 20]);
    /* compression saved pool sectors: fewer checksummed sectors than written */
    uint64_t used = 0;
    for (uint64_t s = 0; s < p->n_sect; s++) used += p->csum[s] != 0 && p->csum[s] != VP_CSUM_MARK;
    ck_assert_uint_lt(used, (4u << 20) / 4096 / 4 + 256 + 16);
    nasd_bdev_put(b);
    vpool_close(p);
    free(buf); free(rd);
    tdir_remove(&t);
}
END_TEST

START_TEST(t_resize_and_list)
{
    struct tdir t;
    tdir_make(&t, 2);
    struct vpool *p;
    create_pool(&t, VPOOL_MIRROR, 2, &p);
    ck_assert_int_eq(vpool_vol_create(p, "a", 3ull << 20, 0), 0);
    ck_assert_int_eq(vpool_vol_create(p, "b", 1ull << 20, VPOOL_VOL_LZ4), 0);
    ck_assert_int_eq(vpool_vol_create(p, "bad/name", 1ull << 20, 0), -EINVAL);
    nasd_bdev *b = open_vol(p, "a", 4096);
    write_pattern(b, 0, 3ull << 20, 71, 1);
    uint8_t blk[4096];
    ck_assert_int_eq(nasd_bdev_write(b, blk, 3ull << 20, 4096, 0), -ERANGE);
    ck_assert_int_eq(vpool_vol_resize(p, "a", 1ull << 20), -EINVAL);     /* no shrinking */
    ck_assert_int_eq(vpool_vol_resize(p, "a", 9ull << 20), 0);
    ck_assert_uint_eq(b->size, 9ull << 20);                             /* open bdev sees it */
    write_pattern(b, 3ull << 20, 6ull << 20, 72, 1);
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, 2, -1);
    char names[8][64];
    uint64_t sizes[8];
    ck_assert_int_eq(vpool_vol_list(p, names, sizes, 8), 2);
    ck_assert_str_eq(names[0], "a");
    ck_assert_uint_eq(sizes[0], 9ull << 20);
    ck_assert_int_eq(vpool_vol_list(p, names, sizes, 1), 1);
    b = open_vol(p, "a", 4096);
    check_pattern(b, 0, 3ull << 20, 71);
    check_pattern(b, 3ull << 20, 6ull << 20, 72);
    nasd_bdev_put(b);
    int err = 0;
    ck_assert_ptr_null(vpool_vol_open(p, "nope", 4096, &err));
    ck_assert_int_eq(err, -ENOENT);
    ck_assert_ptr_null(vpool_vol_open(p, "a", 1000, &err));
    ck_assert_int_eq(err, -EINVAL);
    ck_assert_int_eq(vpool_destroy(p), 0);
    const char *paths[] = { t.member[0], t.member[1] };
    char e[256];
    ck_assert_int_lt(vpool_import(paths, 2, NULL, &p, e, sizeof e), 0);   /* labels wiped */
    tdir_remove(&t);
}
END_TEST

START_TEST(t_thin_enospc)
{
    struct tdir t;
    tdir_make(&t, 3);
    struct vpool *p;
    create_pool(&t, VPOOL_STRIPE, 1, &p);
    struct vpool_status st;
    vpool_get_status(p, &st);
    uint64_t cap = st.size;
    ck_assert_int_eq(vpool_vol_create(p, "big", cap * 2, 0), 0);        /* thin: overcommit is allowed */
    nasd_bdev *b = open_vol(p, "big", 4096);
    uint8_t *buf = calloc(1, 1 << 20);
    int rc = 0;
    uint64_t off = 0;
    for (; off < cap * 2 && !rc; off += 1 << 20) rc = nasd_bdev_write(b, buf, off, 1 << 20, 0);
    ck_assert_int_eq(rc, -ENOSPC);
    ck_assert_uint_eq(off - (1 << 20), cap);
    ck_assert_int_eq(nasd_bdev_flush(b), 0);                            /* what fitted is fine */
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.free, 0);
    ck_assert_int_eq(nasd_bdev_unmap(b, 0, 4ull << 20), 0);             /* frees space again */
    ck_assert_int_eq(nasd_bdev_write(b, buf, cap + (1 << 20), 4096, NASD_IO_FUA), 0);
    vpool_get_status(p, &st);
    ck_assert_uint_eq(st.free, 3ull << 20);
    free(buf);
    nasd_bdev_put(b);
    vpool_close(p);
    /* raidz1 with one member's labels destroyed: imports DEGRADED and resilvers */
    tdir_remove(&t);
    tdir_make(&t, 3);
    create_pool(&t, VPOOL_RAIDZ1, 3, &p);
    ck_assert_int_eq(vpool_vol_create(p, "v", 4ull << 20, 0), 0);
    b = open_vol(p, "v", 4096);
    write_pattern(b, 0, 4ull << 20, 81, 1);
    nasd_bdev_put(b);
    vpool_close(p);
    int fd = open(t.member[1], O_RDWR);
    uint8_t junk[4096];
    memset(junk, 0x77, sizeof junk);
    ck_assert_int_eq(pwrite(fd, junk, 4096, VP_LABEL_A), 4096);
    ck_assert_int_eq(pwrite(fd, junk, 4096, VP_LABEL_B), 4096);
    close(fd);
    p = import_pool(&t, 3, -1);
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_DEGRADED);
    ck_assert_int_eq(st.members[1].state, VPOOL_M_MISSING);
    b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 4ull << 20, 81);
    nasd_bdev_put(b);
    ck_assert_int_eq(vpool_member_replace(p, 1, t.member[1], 0, NULL), 0);   /* reuse the same disk */
    vpool_wait_background(p);
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    vpool_close(p);
    p = import_pool(&t, 3, 0);
    b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 4ull << 20, 81);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* Thin volumes (datasets) never take the unwritten space of thick volumes, also
 * after an import and after the thick volume unmaps; destroying it frees it. */
START_TEST(t_thick_reservation)
{
    struct tdir t;
    tdir_make(&t, 1);
    struct vpool *p;
    create_pool(&t, VPOOL_STRIPE, 1, &p);
    struct vpool_status st;
    vpool_get_status(p, &st);
    uint64_t cap = st.size, half = cap / 2 / VP_AU_BYTES * VP_AU_BYTES;
    ck_assert_int_eq(vpool_vol_create(p, "vol", half, 0), 0);
    ck_assert_int_eq(vpool_vol_create(p, "ds", cap, VPOOL_VOL_THIN), 0);
    ck_assert_int_eq(vpool_vol_flags(p, "ds"), VPOOL_VOL_THIN);
    nasd_bdev *ds = open_vol(p, "ds", 4096);
    ck_assert_uint_eq(ds->ops->avail(ds), cap - half);
    uint8_t *buf = calloc(1, 1 << 20);
    uint64_t off = 0;
    int rc = 0;
    for (; !rc; off += 1 << 20) rc = nasd_bdev_write(ds, buf, off, 1 << 20, NASD_IO_FUA);
    ck_assert_int_eq(rc, -ENOSPC);
    ck_assert_uint_eq(off - (1 << 20), cap - half);
    ck_assert_uint_eq(ds->ops->avail(ds), 0);
    nasd_bdev *vol = open_vol(p, "vol", 4096);
    write_pattern(vol, 0, half, 7, 1);                 /* every promised byte is there */
    ck_assert_int_eq(nasd_bdev_unmap(vol, 0, 4ull << 20), 0);
    ck_assert_int_eq(nasd_bdev_write(ds, buf, off, 4096, NASD_IO_FUA), -ENOSPC);   /* re-reserved */
    nasd_bdev_put(vol);
    nasd_bdev_put(ds);
    vpool_close(p);
    p = import_pool(&t, 1, -1);
    ds = open_vol(p, "ds", 4096);
    ck_assert_uint_eq(ds->ops->avail(ds), 0);
    ck_assert_int_eq(nasd_bdev_write(ds, buf, off, 4096, NASD_IO_FUA), -ENOSPC);
    ck_assert_int_eq(vpool_vol_destroy(p, "vol"), 0);
    ck_assert_uint_eq(ds->ops->avail(ds), half);
    ck_assert_int_eq(nasd_bdev_write(ds, buf, off, 1 << 20, NASD_IO_FUA), 0);
    free(buf);
    nasd_bdev_put(ds);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

static void expect_import_error(const char *const *paths, int n, const char *needle)
{
    struct vpool *p = NULL;
    char err[512] = "";
    int rc = vpool_import(paths, n, NULL, &p, err, sizeof err);
    ck_assert_msg(rc < 0 && !p, "import unexpectedly succeeded");
    ck_assert_msg(strstr(err, needle), "error '%s' lacks '%s'", err, needle);
}

START_TEST(t_bad_labels)
{
    struct tdir t;
    tdir_make(&t, 3);
    /* not a pool at all */
    int fd = open(t.member[0], O_RDWR | O_CREAT, 0600);
    ck_assert_int_eq(ftruncate(fd, MEMBER_SIZE), 0);
    close(fd);
    const char *one[] = { t.member[0] };
    expect_import_error(one, 1, "no pool label");
    const char *nofile[] = { "/nonexistent/x" };
    expect_import_error(nofile, 1, "No such file");
    unlink(t.member[0]);

    struct vpool *p;
    create_pool(&t, VPOOL_STRIPE, 2, &p);
    vpool_close(p);
    /* garbage in both labels of one stripe member: pool cannot import */
    fd = open(t.member[1], O_RDWR);
    uint8_t junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 7);
    ck_assert_int_eq(pwrite(fd, junk, 4096, VP_LABEL_A), 4096);
    ck_assert_int_eq(pwrite(fd, junk, 4096, VP_LABEL_B), 4096);
    close(fd);
    const char *two[] = { t.member[0], t.member[1] };
    expect_import_error(two, 2, "FAULTED");
    /* a flipped bit in label A only: label B still imports it... after restoring member 1 */
    tdir_remove(&t);
    tdir_make(&t, 3);
    create_pool(&t, VPOOL_MIRROR, 2, &p);
    vpool_close(p);
    fd = open(t.member[0], O_RDWR);
    uint8_t lab[4096];
    ck_assert_int_eq(pread(fd, lab, 4096, VP_LABEL_A), 4096);
    lab[100] ^= 1;
    ck_assert_int_eq(pwrite(fd, lab, 4096, VP_LABEL_A), 4096);
    close(fd);
    p = import_pool(&t, 2, -1);
    struct vpool_status st;
    vpool_get_status(p, &st);
    ck_assert_int_eq(st.state, VPOOL_ONLINE);
    vpool_close(p);
    /* corrupt metadata pages in both copies on every member: clear error */
    for (int m = 0; m < 2; m++) {
        fd = open(t.member[m], O_RDWR);
        struct vp_label l;
        ck_assert_int_eq(vp_read_label(fd, VP_LABEL_B, &l), 0);
        uint64_t metaA = VP_JOURNAL_OFF + l.jnl_size, metaB = metaA + l.meta_pages * 4096;
        ck_assert_int_eq(pwrite(fd, junk, 4096, metaA), 4096);
        ck_assert_int_eq(pwrite(fd, junk, 4096, metaB), 4096);
        close(fd);
    }
    expect_import_error(two, 2, "metadata page 0 is corrupt");
    /* creating over an existing pool member is refused */
    struct vpool_member_spec ms[2] = { { t.member[0], 0 }, { t.member[2], MEMBER_SIZE } };
    char err[256];
    ck_assert_int_eq(vpool_create("x", VPOOL_MIRROR, ms, 2, NULL, &p, err, sizeof err), -EEXIST);
    /* too small */
    struct vpool_member_spec small[3] = { { t.member[2], 1 << 20 }, { t.member[1], 0 }, { t.member[0], 0 } };
    unlink(t.member[2]);
    ck_assert_int_lt(vpool_create("x", VPOOL_STRIPE, small, 1, NULL, &p, err, sizeof err), 0);
    tdir_remove(&t);
}
END_TEST

/* Labels with valid checksums but hostile fields, and random damage to the journal
 * and metadata area: import must fail cleanly or succeed, never crash or hang. */
START_TEST(t_fuzz_headers)
{
    struct tdir t;
    tdir_make(&t, 3);
    struct vpool *p = pool_with_data(&t, VPOOL_RAIDZ1, 3, 8ull << 20, 2ull << 20, 91);
    /* the header area (labels, journal with batches not yet checkpointed, metadata)
     * is saved before the clean close: each round starts from that crash image */
    struct vp_label l0;
    int fd0 = open(t.member[0], O_RDONLY);
    ck_assert_int_eq(vp_read_label(fd0, VP_LABEL_A, &l0), 0);
    close(fd0);
    size_t hdr = l0.data_off;
    uint8_t *orig[3];
    for (int m = 0; m < 3; m++) {
        orig[m] = malloc(hdr);
        int fd = open(t.member[m], O_RDONLY);
        ck_assert_int_eq(pread(fd, orig[m], hdr, 0), (ssize_t)hdr);
        close(fd);
    }
    vpool_close(p);
    const char *paths[] = { t.member[0], t.member[1], t.member[2] };
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int ok = 0, failed = 0;
    for (int it = 0; it < 150; it++) {
        for (int m = 0; m < 3; m++) {
            int fd = open(t.member[m], O_WRONLY);
            ck_assert_int_eq(pwrite(fd, orig[m], hdr, 0), (ssize_t)hdr);
            close(fd);
        }
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        int m = (int)(x % 3), fd = open(t.member[m], O_RDWR);
        if (it % 2 == 0) {       /* hostile but correctly checksummed label */
            struct vp_label l;
            ck_assert_int_eq(vp_read_label(fd, VP_LABEL_A, &l), 0);
            uint8_t *raw = (uint8_t *)&l;
            for (int k = 0; k < 1 + (int)(x >> 60); k++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                size_t pos = (x >> 8) % (sizeof l - 8);
                raw[pos] = (uint8_t)(x >> 32);
            }
            l.gen = l0.gen + 1 + (x & 1);                 /* make it the one that counts */
            l.csum = 0;
            l.csum = XXH3_64bits(&l, sizeof l);
            uint8_t sec[4096] = {0};
            memcpy(sec, &l, sizeof l);
            ck_assert_int_eq(pwrite(fd, sec, 4096, VP_LABEL_A), 4096);
            ck_assert_int_eq(pwrite(fd, sec, 4096, VP_LABEL_B), 4096);
        } else {                 /* random bytes somewhere in the journal or metadata */
            uint8_t junk[512];
            for (size_t k = 0; k < sizeof junk; k++) junk[k] = (uint8_t)(x >> (k % 56));
            uint64_t off = VP_JOURNAL_OFF + (x >> 20) % (hdr - VP_JOURNAL_OFF - sizeof junk);
            ck_assert_int_eq(pwrite(fd, junk, sizeof junk, (off_t)off), (ssize_t)sizeof junk);
        }
        close(fd);
        char err[512] = "";
        struct vpool *q = NULL;
        int rc = vpool_import(paths, 3, NULL, &q, err, sizeof err);
        if (rc == 0) {
            ck_assert_ptr_nonnull(q);
            vpool_wait_background(q);
            vpool_close(q);
            ok++;
        } else {
            ck_assert_ptr_null(q);
            ck_assert_msg(err[0], "import failed (%d) without a message", rc);
            failed++;
        }
    }
    printf("fuzz: %d imports succeeded, %d refused cleanly\n", ok, failed);
    for (int m = 0; m < 3; m++) free(orig[m]);
    tdir_remove(&t);
}
END_TEST

Suite *vpool_suite(void)
{
    Suite *s = suite_create("vpool");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, t_stripe);
    tcase_add_test(tc, t_mirror);
    tcase_add_test(tc, t_mirror3);
    tcase_add_test(tc, t_raidz1);
    tcase_add_test(tc, t_raidz1_3);
    tcase_add_test(tc, t_repair_raidz1);
    tcase_add_test(tc, t_repair_mirror);
    tcase_add_test(tc, t_span_raidz1);
    tcase_add_test(tc, t_span_mirror);
    tcase_add_test(tc, t_span_log);
    tcase_add_test(tc, t_stripe_corrupt_unrepairable);
    tcase_add_test(tc, t_raidz1_missing_member_replace);
    tcase_add_test(tc, t_raidz1_zeroed_member_live);
    tcase_add_test(tc, t_mirror_missing);
    tcase_add_test(tc, t_offline_online);
    tcase_add_test(tc, t_offline_during_resilver);
    tcase_add_test(tc, t_unmap_frees);
    tcase_add_test(tc, t_lz4_roundtrip);
    tcase_add_test(tc, t_resize_and_list);
    tcase_add_test(tc, t_thin_enospc);
    tcase_add_test(tc, t_thick_reservation);
    tcase_add_test(tc, t_fuzz_headers);
    tcase_add_test(tc, t_bad_labels);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    nasd_log_level = LOG_WARN;   /* keep the test output readable */
    return run_suite(vpool_suite());
}
