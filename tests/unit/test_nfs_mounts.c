/* The MOUNT table: one entry per (client, path) whatever the spelling of the path,
 * a hard bound on the number of entries, removal by path and by client. */
#include "nfs/internal.h"
#include "tests/unit/check_main.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct nfs_server *srv(void)
{
    struct nfs_server *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->mnt_lock, NULL);
    return s;
}

static void srv_free(struct nfs_server *s)
{
    nfs_mounts_clear(s);
    pthread_mutex_destroy(&s->mnt_lock);
    free(s);
}

START_TEST(normalize)
{
    char out[64];
    ck_assert_int_eq(nfs_mount_path_normalize("/tank//share/./", out, sizeof out), 0);
    ck_assert_str_eq(out, "/tank/share");
    ck_assert_int_eq(nfs_mount_path_normalize("///", out, sizeof out), 0);
    ck_assert_str_eq(out, "/");
    ck_assert_int_eq(nfs_mount_path_normalize("/tank/share/./..", out, sizeof out), -EACCES);
    ck_assert_int_eq(nfs_mount_path_normalize("/a/..b/c..", out, sizeof out), 0);
    ck_assert_str_eq(out, "/a/..b/c..");
    ck_assert_int_eq(nfs_mount_path_normalize("tank", out, sizeof out), -EINVAL);
    ck_assert_int_eq(nfs_mount_path_normalize("", out, sizeof out), -EINVAL);
    char longp[200];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = 0;
    ck_assert_int_eq(nfs_mount_path_normalize(longp, out, sizeof out), -ENAMETOOLONG);
}
END_TEST

START_TEST(spellings_are_one_entry)
{
    struct nfs_server *s = srv();
    char raw[256], norm[256];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(raw, sizeof raw, "/tank");
        for (int j = 0; j < i % 50; j++) n += snprintf(raw + n, sizeof raw - n, i & 1 ? "/." : "/");
        snprintf(raw + n, sizeof raw - n, "/share%s", i % 3 ? "/" : "");
        ck_assert_int_eq(nfs_mount_path_normalize(raw, norm, sizeof norm), 0);
        nfs_mounts_add(s, "10.0.0.1", norm);
    }
    ck_assert_uint_eq(nfs_mounts_count(s), 1);
    nfs_mounts_add(s, "10.0.0.2", "/tank/share");
    ck_assert_uint_eq(nfs_mounts_count(s), 2);
    nfs_mounts_remove(s, "10.0.0.1", "/tank/share");
    ck_assert_uint_eq(nfs_mounts_count(s), 1);
    srv_free(s);
}
END_TEST

START_TEST(bounded)
{
    struct nfs_server *s = srv();
    char path[64];
    for (int i = 0; i < 3 * NFS_MOUNTS_MAX; i++) {
        snprintf(path, sizeof path, "/tank/share/d%d", i);
        nfs_mounts_add(s, i & 1 ? "10.0.0.1" : "10.0.0.2", path);
        ck_assert_uint_le(nfs_mounts_count(s), NFS_MOUNTS_MAX);
    }
    ck_assert_uint_eq(nfs_mounts_count(s), NFS_MOUNTS_MAX);
    /* the newest entries are kept, the oldest went first */
    unsigned n = 0;
    for (struct nfs_mount_entry *m = s->mnt_list.next; m != &s->mnt_list; m = m->next) n++;
    ck_assert_uint_eq(n, NFS_MOUNTS_MAX);
    snprintf(path, sizeof path, "/tank/share/d%d", 3 * NFS_MOUNTS_MAX - 1);
    ck_assert_str_eq(s->mnt_list.prev->path, path);
    nfs_mounts_remove(s, "10.0.0.1", NULL); /* UMNTALL of one client */
    ck_assert_uint_eq(nfs_mounts_count(s), NFS_MOUNTS_MAX / 2);
    srv_free(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nfs_mounts");
    TCase *tc = tcase_create("mounts");
    tcase_add_test(tc, normalize);
    tcase_add_test(tc, spellings_are_one_entry);
    tcase_add_test(tc, bounded);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
