/* NFS duplicate request cache: replay of completed calls, drop of calls in
 * progress, key fields, bounded LRU eviction, oversized replies, concurrency. */
#include "tests/unit/check_main.h"
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "nfs/drc.h"

static struct sockaddr_storage addr4(const char *ip)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    inet_pton(AF_INET, ip, &a->sin_addr);
    return ss;
}

static void key(struct nfs_drc_key *k, const char *ip, uint32_t xid, uint32_t proc, const char *args)
{
    struct sockaddr_storage ss = addr4(ip);
    nfs_drc_key_init(k, &ss, xid, 100003, 3, proc, (const uint8_t *)args, strlen(args));
}

START_TEST(replay_and_in_progress)
{
    struct nfs_drc *d = nfs_drc_new(16);
    ck_assert_ptr_nonnull(d);
    struct nfs_drc_key k;
    key(&k, "127.0.0.1", 7, 12, "remove a");
    uint8_t out[NFS_DRC_REPLY_MAX];
    size_t len = 0;
    uint32_t slot, slot2;
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_NEW);
    /* retransmission while the first is executing: dropped */
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot2), NFS_DRC_IN_PROGRESS);
    nfs_drc_done(d, slot, (const uint8_t *)"reply-bytes", 11);
    memset(out, 0, sizeof out);
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot2), NFS_DRC_REPLAY);
    ck_assert_uint_eq(len, 11);
    ck_assert_mem_eq(out, "reply-bytes", 11);
    struct nfs_drc_stats st;
    nfs_drc_get_stats(d, &st);
    ck_assert_uint_eq(st.replays, 1);
    ck_assert_uint_eq(st.dropped_in_progress, 1);
    ck_assert_uint_eq(st.entries, 1);
    nfs_drc_free(d);
}
END_TEST

START_TEST(key_fields_distinguish)
{
    struct nfs_drc *d = nfs_drc_new(16);
    struct nfs_drc_key k;
    uint8_t out[NFS_DRC_REPLY_MAX];
    size_t len;
    uint32_t slot;
    key(&k, "127.0.0.1", 7, 12, "remove a");
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_NEW);
    nfs_drc_done(d, slot, (const uint8_t *)"r", 1);
    key(&k, "127.0.0.1", 8, 12, "remove a");         /* new xid */
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_NEW);
    nfs_drc_done(d, slot, (const uint8_t *)"r", 1);
    key(&k, "127.0.0.2", 7, 12, "remove a");         /* other client */
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_NEW);
    nfs_drc_done(d, slot, (const uint8_t *)"r", 1);
    key(&k, "127.0.0.1", 7, 13, "remove a");         /* other procedure */
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_NEW);
    nfs_drc_done(d, slot, (const uint8_t *)"r", 1);
    key(&k, "127.0.0.1", 7, 12, "remove b");         /* xid reused with other arguments */
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_NEW);
    nfs_drc_done(d, slot, (const uint8_t *)"r", 1);
    key(&k, "127.0.0.1", 7, 12, "remove a");         /* the original still replays */
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_REPLAY);
    nfs_drc_free(d);
}
END_TEST

START_TEST(lru_bound)
{
    struct nfs_drc *d = nfs_drc_new(4);
    struct nfs_drc_key k;
    uint8_t out[NFS_DRC_REPLY_MAX];
    size_t len;
    uint32_t slot;
    for (uint32_t x = 1; x <= 4; x++) {
        key(&k, "10.0.0.1", x, 8, "create");
        ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_NEW);
        nfs_drc_done(d, slot, (const uint8_t *)&x, sizeof x);
    }
    key(&k, "10.0.0.1", 1, 8, "create");              /* touch 1: 2 becomes the oldest */
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_REPLAY);
    key(&k, "10.0.0.1", 5, 8, "create");
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_NEW);
    nfs_drc_done(d, slot, (const uint8_t *)"5", 1);
    struct nfs_drc_stats st;
    nfs_drc_get_stats(d, &st);
    ck_assert_uint_eq(st.entries, 4);
    ck_assert_uint_eq(st.evictions, 1);
    key(&k, "10.0.0.1", 1, 8, "create");
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_REPLAY);
    uint32_t v;
    memcpy(&v, out, sizeof v);
    ck_assert_uint_eq(v, 1);
    key(&k, "10.0.0.1", 3, 8, "create");
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_REPLAY);
    key(&k, "10.0.0.1", 2, 8, "create");              /* evicted: executes again */
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &slot), NFS_DRC_NEW);
    nfs_drc_done(d, slot, NULL, 0);
    nfs_drc_free(d);
}
END_TEST

START_TEST(busy_full_and_oversized)
{
    struct nfs_drc *d = nfs_drc_new(2);
    struct nfs_drc_key k;
    uint8_t out[NFS_DRC_REPLY_MAX];
    size_t len;
    uint32_t s1, s2, s3;
    key(&k, "10.0.0.1", 1, 12, "x");
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &s1), NFS_DRC_NEW);
    key(&k, "10.0.0.1", 2, 12, "x");
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &s2), NFS_DRC_NEW);
    /* both slots executing: in-progress entries are never evicted */
    key(&k, "10.0.0.1", 3, 12, "x");
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &s3), NFS_DRC_UNTRACKED);
    static uint8_t big[NFS_DRC_REPLY_MAX + 1];
    nfs_drc_done(d, s1, big, sizeof big);             /* too large: forgotten */
    key(&k, "10.0.0.1", 1, 12, "x");
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &s1), NFS_DRC_NEW);
    nfs_drc_done(d, s1, big, NFS_DRC_REPLY_MAX);      /* exactly the maximum: kept */
    ck_assert_int_eq(nfs_drc_begin(d, &k, out, &len, &s3), NFS_DRC_REPLAY);
    ck_assert_uint_eq(len, NFS_DRC_REPLY_MAX);
    nfs_drc_done(d, s2, NULL, 0);
    ck_assert_ptr_null(nfs_drc_new(0));
    nfs_drc_free(d);
}
END_TEST

static struct nfs_drc *shared;

static void *hammer(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    uint8_t out[NFS_DRC_REPLY_MAX];
    size_t len;
    uint32_t slot;
    for (uint32_t i = 0; i < 20000; i++) {
        struct nfs_drc_key k;
        char args[32];
        snprintf(args, sizeof args, "t%u", (unsigned)id);
        key(&k, "10.1.1.1", i % 300, 12, args);
        enum nfs_drc_verdict v = nfs_drc_begin(shared, &k, out, &len, &slot);
        if (v == NFS_DRC_NEW) nfs_drc_done(shared, slot, (const uint8_t *)args, strlen(args));
        if (v == NFS_DRC_REPLAY && (len != strlen(args) || memcmp(out, args, len))) return (void *)1;
    }
    return NULL;
}

START_TEST(concurrent)
{
    shared = nfs_drc_new(256);
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, hammer, (void *)i);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
    }
    struct nfs_drc_stats st;
    nfs_drc_get_stats(shared, &st);
    ck_assert_uint_le(st.entries, 256);
    ck_assert_uint_gt(st.evictions, 0);
    nfs_drc_free(shared);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nfs_drc");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, replay_and_in_progress);
    tcase_add_test(tc, key_fields_distinguish);
    tcase_add_test(tc, lru_bound);
    tcase_add_test(tc, busy_full_and_oversized);
    tcase_add_test(tc, concurrent);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
