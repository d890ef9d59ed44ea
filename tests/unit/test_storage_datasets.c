/* Storage manager datasets: engine datasets are hidden thin volumes with their own
 * filesystem, shared as one object, listed for import with their lz4 flag, destroyed
 * with their space; directory datasets made by older versions still open (posix). */
#define _GNU_SOURCE
#include "tests/unit/check_main.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tests/unit/storage_test_util.h"

static int64_t pool_int(struct storage *st, const char *key)
{
    json_t *s = storage_pool_status(st, "tank");
    int64_t v = json_integer_value(json_object_get(s, key));
    json_decref(s);
    return v;
}

START_TEST(engine_datasets)
{
    struct storage *st = with_pool();
    char err[256] = "", name[80];
    memset(name, 'n', 63);
    name[63] = 0;
    ck_assert_int_eq(storage_dataset_create(st, "tank", name, 0, err, sizeof err), -EINVAL);
    ck_assert_int_eq(storage_dataset_create(st, "nope", "a", 0, err, sizeof err), -ENOENT);
    ck_assert_int_eq(storage_dataset_create(st, "tank", "a", 0, err, sizeof err), 0);
    ck_assert_int_eq(storage_dataset_create(st, "tank", "z", 1, err, sizeof err), 0);
    ck_assert_int_eq(storage_dataset_create(st, "tank", "a", 0, err, sizeof err), -EEXIST);
    ck_assert_int_eq(storage_volume_create(st, "tank", "v", 16 << 20, 0, err, sizeof err), 0);

    json_t *vols = storage_pool_volumes(st, "tank"), *dss = storage_pool_datasets(st, "tank");
    ck_assert_int_eq(json_array_size(vols), 1);                       /* datasets are hidden */
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(vols, 0), "name")), "v");
    ck_assert_int_eq(json_array_size(dss), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *d = json_array_get(dss, i);
        int z = !strcmp(json_string_value(json_object_get(d, "name")), "z");
        ck_assert_int_eq(json_is_true(json_object_get(d, "lz4")), z);
    }
    json_decref(vols);
    json_decref(dss);

    int e = 0;
    struct nasd_fsroot *f1 = storage_dataset_open(st, "tank", "a", 7, 1000000, &e);
    struct nasd_fsroot *f2 = storage_dataset_open(st, "tank", "a", 7, 2000000, &e);
    ck_assert_ptr_nonnull(f1);
    ck_assert_ptr_eq(f1, f2);                                         /* one shared object */
    ck_assert_ptr_ne(f1->vfs, &nasd_vfs_posix);
    ck_assert_uint_eq(atomic_load(&f1->quota), 2000000);
    int fd = f1->vfs->openat(f1, f1->root_fd, "file", O_CREAT | O_RDWR | O_EXCL, 0644);
    ck_assert_int_gt(fd, 0);
    size_t n = 8u << 20;
    char *buf = malloc(n);
    memset(buf, 0x42, n);
    int64_t before = pool_int(st, "allocated");
    ck_assert_int_eq(f1->vfs->pwrite(f1, fd, buf, n, 0), (ssize_t)n);
    ck_assert_int_eq(f1->vfs->fsync(f1, fd, 0), 0);
    ck_assert_int_ge(storage_dataset_allocated(st, "tank", "a"), (int64_t)n);
    ck_assert_int_ge(pool_int(st, "allocated") - before, (int64_t)n);
    f1->vfs->close(f1, fd);
    free(buf);
    nasd_fsroot_put(f1);
    nasd_fsroot_put(f2);

    /* destroy gives the pool its space back */
    int64_t full = pool_int(st, "allocated");
    ck_assert_int_eq(storage_dataset_destroy(st, "tank", "a", err, sizeof err), 0);
    ck_assert_int_le(pool_int(st, "allocated"), full - (int64_t)n);
    ck_assert_ptr_null(storage_dataset_open(st, "tank", "a", 7, 0, &e));
    storage_free(st);
}
END_TEST

/* #10.3: a destroy that cannot release the storage fails and changes nothing. */
START_TEST(busy_destroy_changes_nothing)
{
    struct storage *st = with_pool();
    char err[256] = "";
    int e = 0;
    ck_assert_int_eq(storage_dataset_create(st, "tank", "held", 0, err, sizeof err), 0);
    struct nasd_fsroot *fs = storage_dataset_open(st, "tank", "held", 7, 0, &e);
    ck_assert_ptr_nonnull(fs);
    ck_assert_int_eq(storage_dataset_destroy(st, "tank", "held", err, sizeof err), -EBUSY);
    ck_assert_msg(strstr(err, "in use"), "%s", err);
    ck_assert_int_eq(storage_pool_destroy(st, "tank", err, sizeof err), -EBUSY);
    /* still the same shared object, still in the pool */
    struct nasd_fsroot *again = storage_dataset_open(st, "tank", "held", 7, 0, &e);
    ck_assert_ptr_eq(again, fs);
    nasd_fsroot_put(again);
    json_t *dss = storage_pool_datasets(st, "tank");
    ck_assert_int_eq(json_array_size(dss), 1);
    json_decref(dss);
    nasd_fsroot_put(fs);
    ck_assert_int_eq(storage_dataset_destroy(st, "tank", "held", err, sizeof err), 0);
    ck_assert_int_eq(storage_pool_destroy(st, "tank", err, sizeof err), 0);
    storage_free(st);
}
END_TEST

START_TEST(legacy_directory_dataset)
{
    struct storage *st = with_pool();
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/pools/tank/datasets/old", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/pools/tank/datasets/old/f", dir);
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    ck_assert_int_eq(write(fd, "hello", 5), 5);
    close(fd);
    int e = 0;
    struct nasd_fsroot *f = storage_dataset_open(st, "tank", "old", 9, 0, &e);
    ck_assert_msg(f != NULL, "open: %d", e);
    ck_assert_ptr_eq(f->vfs, &nasd_vfs_posix);
    ck_assert_int_eq(atomic_load(&f->used), 4096);
    storage_dataset_path(st, "tank", "old", path, sizeof path);
    ck_assert_ptr_nonnull(strstr(path, "/pools/tank/datasets/old"));
    nasd_fsroot_put(f);
    ck_assert_int_eq(storage_dataset_destroy(st, "tank", "old", err, sizeof err), 0);
    ck_assert_int_eq(access(path, F_OK), -1);
    storage_free(st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("storage_datasets");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, engine_datasets);
    tcase_add_test(tc, legacy_directory_dataset);
    tcase_add_test(tc, busy_destroy_changes_nothing);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
