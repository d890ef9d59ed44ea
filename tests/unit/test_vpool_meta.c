/* Metadata regions (vpool_meta.c): creating a pool writes its volume and snapshot tables
 * and nothing else; a region is written whole the first time one of its pages changes;
 * regions never written are never read; pools whose labels predate regions read every
 * page, as they did. */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <fcntl.h>
#include <xxhash.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"   /* meta_rpp, meta_init, vp_debug_prof */
#include "storage/pool/vpool_xl.h"     /* the reverse map */
#include "tests/unit/test_vpool_util.h"

#define MB (1ull << 20)

static struct vpool *make(struct tdir *t, int n, uint64_t msize, int log)
{
    tdir_make(t, n);
    struct vpool_member_spec ms[4];
    for (int i = 0; i < n; i++) ms[i] = (struct vpool_member_spec){ t->member[i], msize };
    struct vpool_opts o = { .log = log };
    struct vpool *p;
    char err[256] = "";
    ck_assert_msg(vpool_create("meta", VPOOL_RAIDZ1, ms, n, &o, &p, err, sizeof err) == 0, "create: %s", err);
    return p;
}

static bool region_written(struct vpool *p, uint64_t r) { return p->meta_init[r / 8] >> (r % 8) & 1; }

/* Writes over the pool's data: start, middle and end of a volume of most of the pool. */
static void write_spread(struct vpool *p, uint64_t vsize, uint64_t seed)
{
    ck_assert_int_eq(vpool_vol_create(p, "v", vsize, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    for (int i = 0; i < 3; i++) write_pattern(b, (vsize - 2 * MB) / 2 * i, 2 * MB, seed + i, 1);
    nasd_bdev_put(b);
}

static void check_spread(struct vpool *p, uint64_t vsize, uint64_t seed)
{
    nasd_bdev *b = open_vol(p, "v", 4096);
    for (int i = 0; i < 3; i++) check_pattern(b, (vsize - 2 * MB) / 2 * i, 2 * MB, seed + i);
    nasd_bdev_put(b);
}

/* With the default regions: create writes both copies of the tables' regions on each
 * member, not tables sized for the pool (at 100 GiB members that was 867 MB a member,
 * 5.4 s in place and 10.9 s on the log-structured raidz1, with the REST thread waiting). */
START_TEST(t_create_writes_tables_only)
{
    vp_test_meta_regions = 0;
    vp_test_meta_batch = 0;
    struct tdir t;
    struct vpool *p = make(&t, 4, 512 * MB, _i);
    struct vp_prof pr;
    vp_debug_prof(p, &pr);
    uint64_t tables = VP_VOLTAB_PAGES + VP_SNAPTAB_PAGES, rpp = p->meta_rpp;
    ck_assert_uint_ge(rpp, 1);
    ck_assert_uint_eq(pr.meta_bytes, (tables + rpp - 1) / rpp * rpp * 4096 * 2 * 4);
    ck_assert_uint_gt(p->meta_pages, 2 * tables);   /* there is more than the tables to skip */
    uint64_t vsize = 1024 * MB;
    write_spread(p, vsize, 11);
    vpool_close(p);
    p = import_pool(&t, 4, -1);
    check_spread(p, vsize, 11);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* Junk in every page of a region never written (both copies, every member) does not stop
 * an import: it is not read. Once writes reach it, the whole region is written, junk
 * included, so the next import reads it back intact. */
START_TEST(t_unwritten_regions_not_read)
{
    vp_test_meta_regions = 8;
    struct tdir t;
    struct vpool *p = make(&t, 3, MEMBER_SIZE, _i);
    uint64_t rpp = p->meta_rpp, r = VP_META_REGIONS;
    for (uint64_t i = 0; i * rpp < p->meta_pages; i++) if (!region_written(p, i)) { r = i; break; }
    ck_assert_uint_lt(r, VP_META_REGIONS);
    ck_assert_uint_gt(rpp, 1);
    uint64_t off[2] = { p->meta_off[0], p->meta_off[1] };
    vpool_close(p);
    uint8_t junk[4096];
    for (int m = 0; m < 3; m++) {
        int fd = open(t.member[m], O_WRONLY);
        ck_assert_int_ge(fd, 0);
        for (int c = 0; c < 2; c++)
            for (uint64_t i = r * rpp; i < (r + 1) * rpp; i++) {
                fill_block(junk, i, 99 + c);
                ck_assert_int_eq(pwrite(fd, junk, sizeof junk, (off_t)(off[c] + i * 4096)), 4096);
            }
        close(fd);
    }
    p = import_pool(&t, 3, -1);
    ck_assert(!region_written(p, r));
    struct vpool_status st;
    vpool_get_status(p, &st);
    uint64_t vsize = st.free / MB * MB - 4 * MB;
    ck_assert_int_eq(vpool_vol_create(p, "v", vsize, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    write_pattern(b, 0, vsize, 12, 1);   /* every table page of the pool's data */
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, 3, -1);
    ck_assert(region_written(p, r));
    b = open_vol(p, "v", 4096);
    check_pattern(b, 0, vsize, 12);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* Rewrites both labels of a member as a nasd before regions wrote them: the label
 * without the region bitmap (hdr_size VP_LABEL_SIZE_V2), meta_rpp 0 (it was padding), and
 * junk where the bitmap is now. */
static void label_to_v2(const char *path)
{
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    for (int c = 0; c < 2; c++) {
        uint8_t buf[4096];
        off_t at = c ? (off_t)VP_LABEL_B : (off_t)VP_LABEL_A;
        ck_assert_int_eq(pread(fd, buf, sizeof buf, at), 4096);
        struct vp_label *l = (struct vp_label *)buf;
        l->hdr_size = VP_LABEL_SIZE_V2;
        l->meta_rpp = 0;
        l->csum = 0;
        memset(buf + VP_LABEL_SIZE_V2, 0xA5, sizeof buf - VP_LABEL_SIZE_V2);
        uint64_t cs = XXH3_64bits(buf, VP_LABEL_SIZE_V2);
        l->csum = cs;
        ck_assert_int_eq(pwrite(fd, buf, sizeof buf, at), 4096);
    }
    close(fd);
}

/* A pool made before regions (every page written, labels without the bitmap) imports with
 * every page read, and keeps working and importing. */
START_TEST(t_labels_before_regions)
{
    vp_test_meta_regions = 8;
    struct tdir t;
    struct vpool *p = make(&t, 3, MEMBER_SIZE, _i);
    uint64_t vsize = 16 * MB;
    write_spread(p, vsize, 21);
    pthread_mutex_lock(&p->commit_lock);   /* as creation wrote them before regions */
    p->meta_rpp = 0;
    ck_assert_int_eq(vp_meta_write(p, true, 0), 0);
    ck_assert_int_eq(vp_checkpoint(p), 0);
    pthread_mutex_unlock(&p->commit_lock);
    vpool_close(p);
    for (int m = 0; m < 3; m++) label_to_v2(t.member[m]);
    p = import_pool(&t, 3, -1);
    ck_assert_uint_eq(p->meta_rpp, 0);
    check_spread(p, vsize, 21);
    struct vp_label l;   /* rewritten by the import's checkpoint, still readable by an older nasd */
    int fd = open(t.member[0], O_RDONLY);
    ck_assert_int_eq(vp_read_label(fd, VP_LABEL_A, &l), 0);
    close(fd);
    ck_assert_uint_eq(l.hdr_size, VP_LABEL_SIZE_V2);
    nasd_bdev *b = open_vol(p, "v", 4096);
    write_pattern(b, 4 * MB, 4 * MB, 22, 1);
    nasd_bdev_put(b);
    vpool_close(p);
    p = import_pool(&t, 3, -1);
    b = open_vol(p, "v", 4096);
    check_pattern(b, 4 * MB, 4 * MB, 22);
    check_pattern(b, 0, 2 * MB, 21);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

/* the log-structured raidz1: sectors whose table pages only the journal holds (written after the last
 * checkpoint, in regions never written) are in the reverse map and segment counts after
 * an import, although import skips the table pages that hold nothing. Otherwise their
 * segments would look free and be written over. */
START_TEST(t_log_replay_only_sectors_mapped)
{
    vp_test_meta_regions = 8;
    struct tdir t;
    struct vpool *p = make(&t, 4, MEMBER_SIZE, 1);
    ck_assert_int_eq(vpool_vol_create(p, "v", 24 * MB, 0), 0);
    nasd_bdev *b = open_vol(p, "v", 4096);
    struct vp_prof before, after;
    vp_debug_prof(p, &before);
    write_pattern(b, 0, 24 * MB, 31, 1);
    vp_debug_prof(p, &after);
    ck_assert_uint_eq(after.checkpoints, before.checkpoints);   /* the journal alone holds them */
    struct vp_sim *sim = vp_sim_attach(p);
    vp_sim_kill(sim);
    nasd_bdev_put(b);
    vpool_close(p);
    uint64_t undone;
    vp_sim_rollback(sim, (const char *const[]){ t.member[0], t.member[1], t.member[2], t.member[3] }, 4,
                    VP_SIM_UNDO_ALL, &undone);
    p = import_pool(&t, 4, -1);
    struct vp_xl *x = p->xl;
    uint64_t mapped = 0;
    for (uint64_t s = 0; s < p->n_sect; s++) {
        uint32_t l = x->loc[s];
        if (!l) continue;
        ck_assert_uint_eq(x->rmap[l - 1], s + 1);
        mapped++;
    }
    ck_assert_uint_eq(mapped, 24 * MB / 4096);
    uint64_t live = 0;
    for (uint64_t g = 0; g < x->nseg; g++) live += x->live[g];
    ck_assert_uint_eq(live, mapped);
    b = open_vol(p, "v", 4096);
    check_pattern(b, 0, 24 * MB, 31);
    nasd_bdev_put(b);
    vpool_close(p);
    tdir_remove(&t);
}
END_TEST

int main(void)
{
    nasd_log_level = LOG_ERR;
    Suite *s = suite_create("vpool_meta");
    TCase *tc = tcase_create("meta");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, t_create_writes_tables_only, 0, 2);   /* in place, the log-structured raidz1 */
    tcase_add_loop_test(tc, t_unwritten_regions_not_read, 0, 2);
    tcase_add_loop_test(tc, t_labels_before_regions, 0, 2);
    tcase_add_test(tc, t_log_replay_only_sectors_mapped);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
