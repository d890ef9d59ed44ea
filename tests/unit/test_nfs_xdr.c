/* NFS service building blocks: XDR bounds, RPC call parsing, record marking,
 * file handle MAC, client network (CIDR) matching. */
#include "tests/unit/check_main.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <arpa/inet.h>
#include "nfs/fh.h"
#include "nfs/internal.h"
#include "nfs/rpc.h"
#include "nfs/xdr.h"

static size_t be32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; return 4; }

START_TEST(xdr_truncated)
{
    uint8_t b[6] = { 0, 0, 0, 7, 1, 2 };
    struct xdr_dec d;
    xdr_dec_init(&d, b, sizeof b);
    ck_assert_uint_eq(xdr_get_u32(&d), 7);
    ck_assert_int_eq(d.err, 0);
    ck_assert_uint_eq(xdr_get_u32(&d), 0);   /* only 2 bytes left */
    ck_assert_int_eq(d.err, 1);
    xdr_dec_init(&d, b, 4);
    (void)xdr_get_u64(&d);
    ck_assert_int_eq(d.err, 1);
    xdr_dec_init(&d, b, 0);
    ck_assert_int_eq(xdr_get_bool(&d), 0);
    ck_assert_int_eq(d.err, 1);
}
END_TEST

START_TEST(xdr_opaque_bounds)
{
    uint8_t b[64] = { 0 };
    struct xdr_dec d;
    uint32_t len;
    /* length larger than the buffer */
    be32(b, 100);
    xdr_dec_init(&d, b, 64);
    ck_assert_ptr_null(xdr_get_opaque(&d, &len, 1000));
    ck_assert_int_eq(d.err, 1);
    /* length larger than the protocol maximum */
    be32(b, 8);
    xdr_dec_init(&d, b, 64);
    ck_assert_ptr_null(xdr_get_opaque(&d, &len, 4));
    ck_assert_int_eq(d.err, 1);
    /* 0xffffffff must not wrap the padding computation */
    be32(b, 0xffffffffu);
    xdr_dec_init(&d, b, 64);
    ck_assert_ptr_null(xdr_get_opaque(&d, &len, 0xffffffffu));
    ck_assert_int_eq(d.err, 1);
    /* padding must be present: 5 bytes need 8 */
    be32(b, 5);
    memcpy(b + 4, "hello", 5);
    xdr_dec_init(&d, b, 4 + 5);
    ck_assert_ptr_null(xdr_get_opaque(&d, &len, 100));
    xdr_dec_init(&d, b, 4 + 8);
    const uint8_t *p = xdr_get_opaque(&d, &len, 100);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(len, 5);
    ck_assert_int_eq(memcmp(p, "hello", 5), 0);
    ck_assert_uint_eq(xdr_dec_left(&d), 0);
}
END_TEST

START_TEST(xdr_strings)
{
    uint8_t b[32] = { 0 };
    char out[8];
    struct xdr_dec d;
    be32(b, 3);
    memcpy(b + 4, "a\0b", 3);       /* embedded NUL rejected */
    xdr_dec_init(&d, b, 8);
    xdr_get_string(&d, out, sizeof out, 100);
    ck_assert_int_eq(d.err, 1);
    be32(b, 8);                     /* does not fit the output buffer */
    memcpy(b + 4, "abcdefgh", 8);
    xdr_dec_init(&d, b, 12);
    xdr_get_string(&d, out, sizeof out, 100);
    ck_assert_int_eq(d.err, 1);
    be32(b, 7);
    xdr_dec_init(&d, b, 12);
    xdr_get_string(&d, out, sizeof out, 100);
    ck_assert_int_eq(d.err, 0);
    ck_assert_str_eq(out, "abcdefg");
}
END_TEST

START_TEST(xdr_encode_overflow)
{
    uint8_t b[10];
    struct xdr_enc e;
    xdr_enc_init(&e, b, sizeof b);
    xdr_put_u32(&e, 1);
    xdr_put_u32(&e, 2);
    ck_assert_int_eq(e.err, 0);
    xdr_put_u32(&e, 3);
    ck_assert_int_eq(e.err, 1);
    ck_assert_uint_eq(e.len, 8);
    xdr_enc_init(&e, b, sizeof b);
    xdr_put_opaque(&e, "abcde", 5);  /* 4 + 8 > 10 */
    ck_assert_int_eq(e.err, 1);
}
END_TEST

/* builds a call header; flavor/creds configurable */
static size_t make_call(uint8_t *b, uint32_t rpcvers, uint32_t flavor, uint32_t ngids)
{
    size_t n = 0;
    n += be32(b + n, 0x1234);   /* xid */
    n += be32(b + n, 0);        /* CALL */
    n += be32(b + n, rpcvers);
    n += be32(b + n, 100003);
    n += be32(b + n, 3);
    n += be32(b + n, 1);
    n += be32(b + n, flavor);
    size_t lenpos = n;
    n += 4;
    size_t body = n;
    if (flavor == AUTH_SYS) {
        n += be32(b + n, 0);    /* stamp */
        n += be32(b + n, 4);
        memcpy(b + n, "host", 4); n += 4;
        n += be32(b + n, 1000);
        n += be32(b + n, 100);
        n += be32(b + n, ngids);
        for (uint32_t i = 0; i < ngids; i++) n += be32(b + n, i);
    }
    be32(b + lenpos, (uint32_t)(n - body));
    n += be32(b + n, 0);        /* verifier */
    n += be32(b + n, 0);
    return n;
}

START_TEST(rpc_call_parsing)
{
    uint8_t b[512];
    struct rpc_call c;
    struct xdr_dec d;
    size_t n = make_call(b, 2, AUTH_SYS, 3);
    xdr_dec_init(&d, b, n);
    ck_assert_int_eq(rpc_parse_call(&d, &c), RPC_PARSE_OK);
    ck_assert_uint_eq(c.xid, 0x1234);
    ck_assert_uint_eq(c.cred.uid, 1000);
    ck_assert_uint_eq(c.cred.gid, 100);
    ck_assert_uint_eq(c.cred.ngids, 3);
    /* every truncation of a valid call is rejected, never read past the end */
    for (size_t cut = 0; cut < n; cut++) {
        xdr_dec_init(&d, b, cut);
        ck_assert_int_ne(rpc_parse_call(&d, &c), RPC_PARSE_OK);
    }
    n = make_call(b, 3, AUTH_SYS, 0);
    xdr_dec_init(&d, b, n);
    ck_assert_int_eq(rpc_parse_call(&d, &c), RPC_PARSE_RPC_MISMATCH);
    n = make_call(b, 2, AUTH_SYS, 17);          /* more than 16 gids */
    xdr_dec_init(&d, b, n);
    ck_assert_int_eq(rpc_parse_call(&d, &c), RPC_PARSE_BADCRED);
    n = make_call(b, 2, 6 /* RPCSEC_GSS */, 0);
    xdr_dec_init(&d, b, n);
    ck_assert_int_eq(rpc_parse_call(&d, &c), RPC_PARSE_WEAKAUTH);
    n = make_call(b, 2, AUTH_NONE, 0);
    xdr_dec_init(&d, b, n);
    ck_assert_int_eq(rpc_parse_call(&d, &c), RPC_PARSE_OK);
    be32(b + 4, 1);                              /* a REPLY is not a call */
    xdr_dec_init(&d, b, n);
    ck_assert_int_eq(rpc_parse_call(&d, &c), RPC_PARSE_DROP);
}
END_TEST

struct recs { int n; size_t len[8]; uint8_t first[8]; };
static int collect(void *arg, uint8_t *rec, size_t len)
{
    struct recs *r = arg;
    if (r->n < 8) { r->len[r->n] = len; r->first[r->n] = len ? rec[0] : 0; }
    r->n++;
    free(rec);
    return 0;
}

START_TEST(record_marking)
{
    uint8_t s[256];
    size_t n = 0;
    /* record 1: one fragment of 10 bytes; record 2: fragments of 3 + 5 bytes */
    n += be32(s + n, RM_LAST_FRAG | 10);
    memset(s + n, 'A', 10); n += 10;
    n += be32(s + n, 3);
    memset(s + n, 'B', 3); n += 3;
    n += be32(s + n, RM_LAST_FRAG | 5);
    memset(s + n, 'C', 5); n += 5;
    for (size_t step = 1; step <= n; step++) {   /* any split of the stream */
        struct rm_reasm r;
        struct recs got = { 0 };
        rm_init(&r, 1024);
        for (size_t off = 0; off < n; off += step) {
            size_t k = n - off < step ? n - off : step;
            ck_assert_int_eq(rm_feed(&r, s + off, k, collect, &got), 0);
        }
        ck_assert_int_eq(got.n, 2);
        ck_assert_uint_eq(got.len[0], 10);
        ck_assert_uint_eq(got.first[0], 'A');
        ck_assert_uint_eq(got.len[1], 8);
        ck_assert_uint_eq(got.first[1], 'B');
        rm_free(&r);
    }
    /* oversized fragment and oversized multi-fragment record */
    struct rm_reasm r;
    struct recs got = { 0 };
    rm_init(&r, 1024);
    be32(s, RM_LAST_FRAG | 0x7fffffff);
    ck_assert_int_eq(rm_feed(&r, s, 4, collect, &got), -EMSGSIZE);
    rm_free(&r);
    rm_init(&r, 1024);
    be32(s, 1000);
    ck_assert_int_eq(rm_feed(&r, s, 4, collect, &got), 0);
    static uint8_t junk[1000];
    ck_assert_int_eq(rm_feed(&r, junk, sizeof junk, collect, &got), 0);
    be32(s, RM_LAST_FRAG | 100);
    ck_assert_int_eq(rm_feed(&r, s, 4, collect, &got), -EMSGSIZE);
    ck_assert_int_eq(got.n, 0);
    rm_free(&r);
}
END_TEST

static void test_secret(struct nfs_fh_secret *s, uint8_t v)
{
    for (size_t i = 0; i < sizeof s->s; i++) s->s[i] = (uint8_t)(i * 31 + v);
    nfs_fh_secret_prepare(s);
}

START_TEST(fh_mac)
{
    struct nfs_fh_secret sec, other;
    test_secret(&sec, 1);
    test_secret(&other, 2);
    struct nfs_fh_key k = { .type = 1, .len = 8, .bytes = { 1, 2, 3, 4, 5, 6, 7, 8 } };
    uint8_t fh[NFS_FH_MAX];
    size_t n = nfs_fh_encode(&sec, 77, 0xabcdef, &k, fh);
    ck_assert_uint_le(n, NFS_FH_MAX);
    struct nfs_fh_parsed p;
    ck_assert_int_eq(nfs_fh_decode(&sec, fh, n, &p), 0);
    ck_assert_uint_eq(p.export_id, 77);
    ck_assert_uint_eq(p.gen, 0xabcdef);
    ck_assert_uint_eq(p.k.len, 8);
    ck_assert_int_eq(memcmp(p.k.bytes, k.bytes, 8), 0);
    /* any single-bit change anywhere is rejected */
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            fh[i] ^= (uint8_t)(1 << bit);
            ck_assert_int_eq(nfs_fh_decode(&sec, fh, n, &p), -1);
            fh[i] ^= (uint8_t)(1 << bit);
        }
    }
    ck_assert_int_eq(nfs_fh_decode(&other, fh, n, &p), -1);   /* another server's secret */
    ck_assert_int_eq(nfs_fh_decode(&sec, fh, n - 1, &p), -1);
    ck_assert_int_eq(nfs_fh_decode(&sec, fh, 0, &p), -1);
    uint8_t big[NFS_FH_MAX + 8] = { 0 };
    memcpy(big, fh, n);
    ck_assert_int_eq(nfs_fh_decode(&sec, big, sizeof big, &p), -1);
    /* a maximal kernel handle still fits in 64 bytes */
    k.len = NFS_FH_KMAX;
    n = nfs_fh_encode(&sec, 1, 1, &k, fh);
    ck_assert_uint_eq(n, NFS_FH_MAX);
    ck_assert_int_eq(nfs_fh_decode(&sec, fh, n, &p), 0);
    /* the MAC is HMAC-SHA-256 over header + backend handle, cut to 8 bytes */
    uint8_t want[SHA256_DIGEST_SIZE];
    struct hmac_sha256_ctx h;
    hmac_sha256_set_key(&h, sizeof sec.s, sec.s);
    hmac_sha256_update(&h, n - 8, fh);
    hmac_sha256_digest(&h, sizeof want, want);
    ck_assert_int_eq(memcmp(fh + n - 8, want, 8), 0);
    /* a handle of the old format (version 1) is stale, not bad */
    fh[2] = 1;
    ck_assert_int_eq(nfs_fh_decode(&sec, fh, n, &p), -2);
}
END_TEST

START_TEST(fh_secret_persists)
{
    char dir[] = "/tmp/nfs_secret_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    struct nfs_fh_secret a, b;
    ck_assert_int_eq(nfs_fh_secret_load(dir, &a), 0);
    ck_assert_int_eq(nfs_fh_secret_load(dir, &b), 0);
    ck_assert_int_eq(memcmp(a.s, b.s, sizeof a.s), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/nfs-fh-secret", dir);
    unlink(path);
    rmdir(dir);
}
END_TEST

static struct sockaddr_storage v4(const char *a)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *s = (struct sockaddr_in *)&ss;
    s->sin_family = AF_INET;
    inet_pton(AF_INET, a, &s->sin_addr);
    return ss;
}

static struct sockaddr_storage v6(const char *a)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
    s->sin6_family = AF_INET6;
    inet_pton(AF_INET6, a, &s->sin6_addr);
    return ss;
}

START_TEST(cidr)
{
    struct nfs_client_net n;
    ck_assert_int_eq(nfs_parse_client_net("10.0.0.0/8", &n), 0);
    struct sockaddr_storage a = v4("10.200.3.4"), b = v4("11.0.0.1"), m = v6("::ffff:10.1.2.3");
    ck_assert(nfs_net_match(&n, &a));
    ck_assert(!nfs_net_match(&n, &b));
    ck_assert(nfs_net_match(&n, &m));          /* v4-mapped IPv6 peer */
    ck_assert_int_eq(nfs_parse_client_net("192.168.1.0/23", &n), 0);
    a = v4("192.168.0.255");
    b = v4("192.168.2.0");
    ck_assert(nfs_net_match(&n, &a));
    ck_assert(!nfs_net_match(&n, &b));
    ck_assert_int_eq(nfs_parse_client_net("127.0.0.1", &n), 0);
    ck_assert_int_eq(n.prefix, 32);
    a = v4("127.0.0.1");
    b = v4("127.0.0.2");
    ck_assert(nfs_net_match(&n, &a));
    ck_assert(!nfs_net_match(&n, &b));
    ck_assert_int_eq(nfs_parse_client_net("0.0.0.0/0", &n), 0);
    ck_assert(nfs_net_match(&n, &b));
    ck_assert_int_eq(nfs_parse_client_net("::1/128", &n), 0);
    a = v6("::1");
    b = v6("::2");
    ck_assert(nfs_net_match(&n, &a));
    ck_assert(!nfs_net_match(&n, &b));
    ck_assert_int_eq(nfs_parse_client_net("fd00::/8", &n), 0);
    a = v6("fdff::1");
    ck_assert(nfs_net_match(&n, &a));
    b = v4("10.0.0.1");
    ck_assert(!nfs_net_match(&n, &b));         /* family mismatch */
    ck_assert_int_eq(nfs_parse_client_net("10.0.0.0/33", &n), -EINVAL);
    ck_assert_int_eq(nfs_parse_client_net("::/129", &n), -EINVAL);
    ck_assert_int_eq(nfs_parse_client_net("10.0.0.0/", &n), -EINVAL);
    ck_assert_int_eq(nfs_parse_client_net("10.0.0.0/8x", &n), -EINVAL);
    ck_assert_int_eq(nfs_parse_client_net("host.example", &n), -EINVAL);
    ck_assert_int_eq(nfs_parse_client_net("", &n), -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nfs_xdr");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, xdr_truncated);
    tcase_add_test(tc, xdr_opaque_bounds);
    tcase_add_test(tc, xdr_strings);
    tcase_add_test(tc, xdr_encode_overflow);
    tcase_add_test(tc, rpc_call_parsing);
    tcase_add_test(tc, record_marking);
    tcase_add_test(tc, fh_mac);
    tcase_add_test(tc, fh_secret_persists);
    tcase_add_test(tc, cidr);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
