/* Unit tests of the iSCSI target's pure layers: BHS helpers, CRC32C digests, LUN
 * encoding, text keys and negotiation, CDB decoding and sense data. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "iscsi/iscsi_int.h"
#include "tests/unit/check_main.h"

/* ---- wire helpers ---- */

START_TEST(test_be_helpers)
{
    uint8_t b[8];
    put_be16(b, 0x1234); ck_assert_uint_eq(get_be16(b), 0x1234);
    put_be24(b, 0xabcdef); ck_assert_uint_eq(get_be24(b), 0xabcdef);
    ck_assert_uint_eq(b[0], 0xab);
    put_be32(b, 0xdeadbeef); ck_assert_uint_eq(get_be32(b), 0xdeadbeef);
    put_be64(b, 0x0102030405060708ull); ck_assert_uint_eq(get_be64(b), 0x0102030405060708ull);
    ck_assert_uint_eq(b[7], 8);
    ck_assert(sn_lt(0xfffffff0u, 5));          /* serial arithmetic wraps */
    ck_assert(!sn_lt(5, 0xfffffff0u));
    ck_assert(sn_le(7, 7));
}
END_TEST

START_TEST(test_bhs_lengths)
{
    uint8_t bhs[ISCSI_BHS_LEN] = { 0 };
    bhs[0] = BHS_I | OP_SCSI_CMD;
    bhs[4] = 2;                                /* 8 bytes of AHS */
    put_be24(bhs + 5, 13);
    ck_assert_uint_eq(bhs_opcode(bhs), OP_SCSI_CMD);
    ck_assert(bhs_immediate(bhs));
    ck_assert_uint_eq(bhs_ahs_len(bhs), 8);
    ck_assert_uint_eq(bhs_data_len(bhs), 13);
    ck_assert_uint_eq(pdu_rest_len(bhs, false, false), 8 + 13 + 3);
    ck_assert_uint_eq(pdu_rest_len(bhs, true, true), 8 + 4 + 13 + 3 + 4);
    put_be24(bhs + 5, 0);
    ck_assert_uint_eq(pdu_rest_len(bhs, true, true), 8 + 4);   /* no data digest without data */
    put_be24(bhs + 5, 0xffffff);
    ck_assert_uint_eq(pdu_rest_len(bhs, false, false), 8 + 0xffffff + 1);
}
END_TEST

START_TEST(test_lun_encoding)
{
    uint8_t f[8];
    lun_encode(f, 0); ck_assert_uint_eq(lun_decode(f), 0);
    lun_encode(f, 5); ck_assert_uint_eq(f[1], 5); ck_assert_uint_eq(lun_decode(f), 5);
    lun_encode(f, 300); ck_assert_uint_eq(f[0], 0x41); ck_assert_uint_eq(lun_decode(f), 300);
    memset(f, 0, 8); f[0] = 0x80;              /* logical unit addressing: unsupported */
    ck_assert_uint_eq(lun_decode(f), UINT64_MAX);
    f[0] = 0x01;                               /* peripheral addressing, bus 1 */
    ck_assert_uint_eq(lun_decode(f), UINT64_MAX);
}
END_TEST

/* RFC 3720 appendix B.4 test vectors, as bytes on the wire */
START_TEST(test_crc32c_vectors)
{
    uint8_t buf[48], wire[4];
    uint32_t crc;
    memset(buf, 0, 32);
    crc = iscsi_crc32c(buf, 32, 0); memcpy(wire, &crc, 4);
    ck_assert(!memcmp(wire, "\xaa\x36\x91\x8a", 4));
    memset(buf, 0xff, 32);
    crc = iscsi_crc32c(buf, 32, 0); memcpy(wire, &crc, 4);
    ck_assert(!memcmp(wire, "\x43\xab\xa8\x62", 4));
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
    crc = iscsi_crc32c(buf, 32, 0); memcpy(wire, &crc, 4);
    ck_assert(!memcmp(wire, "\x4e\x79\xdd\x46", 4));
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
    crc = iscsi_crc32c(buf, 32, 0); memcpy(wire, &crc, 4);
    ck_assert(!memcmp(wire, "\x5c\xdb\x3f\x11", 4));
    /* chaining pieces equals one pass */
    ck_assert_uint_eq(iscsi_crc32c(buf + 10, 22, iscsi_crc32c(buf, 10, 0)), iscsi_crc32c(buf, 32, 0));
}
END_TEST

/* ---- text keys ---- */

static int parse(const char *src, size_t len, struct text_list *l, char *store)
{
    memcpy(store, src, len);
    store[len] = '\0';
    return text_parse(store, len, l);
}

START_TEST(test_text_parse)
{
    char store[512];
    struct text_list l;
    static const char ok[] = "InitiatorName=iqn.x\0SessionType=Normal\0Empty=\0";
    ck_assert_int_eq(parse(ok, sizeof ok - 1, &l, store), 0);
    ck_assert_uint_eq(l.n, 3);
    ck_assert_str_eq(text_get(&l, "InitiatorName"), "iqn.x");
    ck_assert_str_eq(text_get(&l, "Empty"), "");
    ck_assert_ptr_null(text_get(&l, "TargetName"));
    static const char nonul[] = "A=1\0B=2";    /* last pair without NUL */
    ck_assert_int_eq(parse(nonul, sizeof nonul - 1, &l, store), 0);
    ck_assert_str_eq(text_get(&l, "B"), "2");
    static const char noeq[] = "A=1\0garbage\0";
    ck_assert_int_eq(parse(noeq, sizeof noeq - 1, &l, store), -1);
    static const char dup[] = "A=1\0A=2\0";
    ck_assert_int_eq(parse(dup, sizeof dup - 1, &l, store), -1);
    static const char nokey[] = "=1\0";
    ck_assert_int_eq(parse(nokey, sizeof nokey - 1, &l, store), -1);
    char longkey[200];
    memset(longkey, 'k', 100); strcpy(longkey + 100, "=v");
    ck_assert_int_eq(parse(longkey, strlen(longkey) + 1, &l, store), -1);
    char many[TEXT_MAX_PAIRS * 8 + 64];
    size_t n = 0;
    for (int i = 0; i <= TEXT_MAX_PAIRS; i++) n += (size_t)sprintf(many + n, "K%d=v", i) + 1;
    char *big = malloc(n + 1);
    ck_assert_int_eq(parse(many, n, &l, big), -1);
    free(big);
}
END_TEST

START_TEST(test_text_values)
{
    uint64_t v;
    ck_assert_int_eq(text_parse_number("262144", &v), 0); ck_assert_uint_eq(v, 262144);
    ck_assert_int_eq(text_parse_number("0x10", &v), 0); ck_assert_uint_eq(v, 16);
    ck_assert_int_eq(text_parse_number("12a", &v), -1);
    ck_assert_int_eq(text_parse_number("", &v), -1);
    ck_assert_int_eq(text_parse_number("99999999999999999999999", &v), -1);
    ck_assert(text_list_has("CRC32C,None", "None"));
    ck_assert(!text_list_has("CRC32C,Nonee", "None"));
    uint8_t b[16];
    ck_assert_int_eq(text_decode_binary("0x0aff10", b, sizeof b), 3);
    ck_assert_uint_eq(b[0], 0x0a); ck_assert_uint_eq(b[2], 0x10);
    ck_assert_int_eq(text_decode_binary("0xfff", b, sizeof b), 2);      /* odd length */
    ck_assert_uint_eq(b[0], 0x0f); ck_assert_uint_eq(b[1], 0xff);
    ck_assert_int_eq(text_decode_binary("0bAAEC", b, sizeof b), 3);    /* base64 of 00 01 02 */
    ck_assert_uint_eq(b[1], 1); ck_assert_uint_eq(b[2], 2);
    ck_assert_int_eq(text_decode_binary("0xzz", b, sizeof b), -1);
    ck_assert_int_eq(text_decode_binary("abc", b, sizeof b), -1);
    ck_assert_int_eq(text_decode_binary("0x00112233445566778899aabbccddeeff00", b, sizeof b), -1);
    char hex[40];
    uint8_t in[3] = { 0x01, 0xab, 0xff };
    text_encode_hex(in, 3, hex);
    ck_assert_str_eq(hex, "0x01abff");
}
END_TEST

static const char *answer(struct text_out *o, const char *key)
{
    static char buf[1024];
    memcpy(buf, o->buf, o->len);
    buf[o->len] = '\0';
    struct text_list l;
    ck_assert_int_eq(text_parse(buf, o->len, &l), 0);
    return text_get(&l, key);
}

START_TEST(test_negotiation)
{
    struct iscsi_conn c;
    memset(&c, 0, sizeof c);
    struct text_out o = { 0 };
    ck_assert(login_negotiate_key(&c, "HeaderDigest", "CRC32C,None", &o));
    ck_assert_str_eq(answer(&o, "HeaderDigest"), "CRC32C");
    ck_assert(c.neg_hdigest);
    ck_assert(login_negotiate_key(&c, "DataDigest", "None,CRC32C", &o));
    ck_assert_str_eq(answer(&o, "DataDigest"), "None");
    ck_assert(!c.neg_ddigest);
    ck_assert(login_negotiate_key(&c, "MaxBurstLength", "16776192", &o));
    ck_assert_uint_eq(c.max_burst, ISCSI_OUR_MAX_BURST);
    ck_assert(login_negotiate_key(&c, "FirstBurstLength", "4096", &o));
    ck_assert_uint_eq(c.first_burst, 4096);
    ck_assert(login_negotiate_key(&c, "MaxRecvDataSegmentLength", "8192", &o));
    ck_assert_uint_eq(c.mrdsl_tx, 8192);
    ck_assert_str_eq(answer(&o, "MaxRecvDataSegmentLength"), "262144");
    ck_assert(login_negotiate_key(&c, "ImmediateData", "Yes", &o));
    ck_assert_str_eq(answer(&o, "ImmediateData"), "No");
    ck_assert(login_negotiate_key(&c, "InitialR2T", "No", &o));
    ck_assert_str_eq(answer(&o, "InitialR2T"), "Yes");
    ck_assert(login_negotiate_key(&c, "ErrorRecoveryLevel", "2", &o));
    ck_assert_str_eq(answer(&o, "ErrorRecoveryLevel"), "0");
    ck_assert(login_negotiate_key(&c, "X-com.example.Thing", "1", &o));
    ck_assert_str_eq(answer(&o, "X-com.example.Thing"), "NotUnderstood");
    ck_assert(!login_negotiate_key(&c, "MaxBurstLength", "12", &o));      /* below 512 */
    ck_assert(!login_negotiate_key(&c, "MaxRecvDataSegmentLength", "abc", &o));
    ck_assert(!login_negotiate_key(&c, "InitialR2T", "Maybe", &o));
    text_free(&o);
    ck_assert(login_negotiate_key(&c, "HeaderDigest", "MD5", &o));
    ck_assert_str_eq(answer(&o, "HeaderDigest"), "Reject");
    text_free(&o);

    /* a target with immediate_data: Yes when offered (AND), first burst capped at 64 KiB */
    static struct iscsi_tgt tg;
    tg.cfg.immediate_data = true;
    c.tgt = &tg;
    ck_assert(login_negotiate_key(&c, "ImmediateData", "Yes", &o));
    ck_assert_str_eq(answer(&o, "ImmediateData"), "Yes");
    ck_assert(c.immediate_data);
    text_free(&o);
    ck_assert(login_negotiate_key(&c, "ImmediateData", "No", &o));
    ck_assert_str_eq(answer(&o, "ImmediateData"), "No");
    ck_assert(!c.immediate_data);
    ck_assert(login_negotiate_key(&c, "MaxBurstLength", "262144", &o));
    ck_assert(login_negotiate_key(&c, "FirstBurstLength", "262144", &o));
    ck_assert_uint_eq(c.first_burst, 65536);
    /* a later MaxBurstLength below the FirstBurstLength agreed: the initiator broke 13.14 */
    ck_assert(!login_negotiate_key(&c, "MaxBurstLength", "16384", &o));
    c.neg_first_burst = false;
    c.first_burst = 65536;   /* the default, FirstBurstLength not offered: clamped too */
    ck_assert(login_negotiate_key(&c, "MaxBurstLength", "16384", &o));
    ck_assert_uint_eq(c.first_burst, 16384);
    ck_assert(login_negotiate_key(&c, "MaxBurstLength", "16384", &o));   /* never above MaxBurstLength */
    ck_assert(login_negotiate_key(&c, "FirstBurstLength", "65536", &o));
    ck_assert_uint_eq(c.first_burst, 16384);
    text_free(&o);
}
END_TEST

/* ---- SCSI CDB decoding and sense ---- */

static struct iscsi_lu lu;
static char img[64];

static void lu_setup(void)
{
    strcpy(img, "/tmp/test_iscsi_pdu.XXXXXX");
    int fd = mkstemp(img);
    ck_assert_int_ge(fd, 0);
    close(fd);
    int err;
    nasd_bdev *b = nasd_file_bdev_open(img, 1 << 20, 512, "unit/lu", &err);   /* 2048 blocks */
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(iscsi_lu_init(&lu, 0, b), 0);
    nasd_bdev_put(b);
}

static void lu_teardown(void)
{
    iscsi_lu_destroy(&lu);
    unlink(img);
}

static void cmd_init(struct scsi_cmd *c, uint8_t *cdb)
{
    memset(c, 0, sizeof *c);
    c->cdb = cdb;
    c->lu = &lu;
    c->all_lus = &lu;
    c->nlus = 1;
    c->nexus = "iqn.test,i,0x000000000001";
    c->initiator = "iqn.test";
    c->target_name = "iqn.target";
    c->din_max = 65536;
}

static void assert_sense(struct scsi_cmd *c, uint8_t key, uint16_t asc)
{
    ck_assert_uint_eq(c->status, SAM_CHECK_CONDITION);
    ck_assert_uint_ge(c->sense_len, 14);
    ck_assert_uint_eq(c->sense[0] & 0x7f, 0x70);
    ck_assert_uint_eq(c->sense[2] & 0x0f, key);
    ck_assert_uint_eq(c->sense[12], asc >> 8);
    ck_assert_uint_eq(c->sense[13], asc & 0xff);
}

START_TEST(test_cdb_read_write)
{
    uint8_t cdb[16] = { 0x28 };
    struct scsi_cmd c;
    put_be32(cdb + 2, 100); put_be16(cdb + 7, 8);
    cmd_init(&c, cdb);
    ck_assert_int_eq(scsi_prepare(&c), 0);
    ck_assert_int_eq(c.dir, DIR_IN);
    ck_assert_uint_eq(c.lba, 100); ck_assert_uint_eq(c.nblocks, 8);
    ck_assert_uint_eq(c.din_full, 8 * 512);
    ck_assert_int_eq(c.kind, NASD_OP_READ);

    uint8_t w16[16] = { 0x8a, 0x08 };           /* WRITE(16) FUA */
    put_be64(w16 + 2, 2047); put_be32(w16 + 10, 1);
    cmd_init(&c, w16);
    ck_assert_int_eq(scsi_prepare(&c), 0);
    ck_assert_int_eq(c.dir, DIR_OUT);
    ck_assert(c.fua);
    ck_assert_uint_eq(c.dout_need, 512);

    uint8_t r6[6] = { 0x08, 0, 0, 10, 0, 0 };  /* READ(6) length 0 means 256 */
    uint8_t r6c[16] = { 0 };
    memcpy(r6c, r6, 6);
    cmd_init(&c, r6c);
    ck_assert_int_eq(scsi_prepare(&c), 0);
    ck_assert_uint_eq(c.nblocks, 256);
    ck_assert_uint_eq(c.lba, 10);
}
END_TEST

START_TEST(test_cdb_errors)
{
    struct scsi_cmd c;
    uint8_t cdb[16] = { 0x28 };
    put_be32(cdb + 2, 2047); put_be16(cdb + 7, 2);   /* crosses the end */
    cmd_init(&c, cdb);
    ck_assert_int_eq(scsi_prepare(&c), 1);
    assert_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);

    uint8_t r16[16] = { 0x88 };
    put_be64(r16 + 2, UINT64_MAX); put_be32(r16 + 10, 1);  /* overflow of lba + n */
    cmd_init(&c, r16);
    ck_assert_int_eq(scsi_prepare(&c), 1);
    assert_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);

    uint8_t prot[16] = { 0x28, 0x20 };             /* RDPROTECT=1 without protection */
    put_be16(prot + 7, 1);
    cmd_init(&c, prot);
    ck_assert_int_eq(scsi_prepare(&c), 1);
    assert_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB);
    ck_assert_uint_eq(c.sense[15] & 0xc0, 0xc0);   /* SKSV + C/D: field pointer into CDB */
    ck_assert_uint_eq(get_be16(c.sense + 16), 1);

    uint8_t bad[16] = { 0xd7 };
    cmd_init(&c, bad);
    ck_assert_int_eq(scsi_prepare(&c), 1);
    assert_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);

    uint8_t tur[16] = { 0 };
    cmd_init(&c, tur);
    c.lu = NULL;                                    /* no such LUN */
    ck_assert_int_eq(scsi_prepare(&c), 1);
    assert_sense(&c, SK_ILLEGAL_REQUEST, ASC_LUN_NOT_SUPPORTED);

    uint8_t big[16] = { 0x88 };                     /* larger than the transfer limit */
    put_be32(big + 10, SCSI_MAX_XFER / 512 + 1);
    cmd_init(&c, big);
    ck_assert_int_eq(scsi_prepare(&c), 1);
    ck_assert_uint_eq(c.status, SAM_CHECK_CONDITION);

    uint8_t ws[16] = { 0x41 };                      /* WRITE SAME(10), 0 blocks: WSNZ */
    cmd_init(&c, ws);
    ck_assert_int_eq(scsi_prepare(&c), 1);
    assert_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB);
}
END_TEST

START_TEST(test_sense_build)
{
    uint8_t s[18];
    ck_assert_int_eq(scsi_build_sense(s, SK_MEDIUM_ERROR, ASC_UNRECOVERED_READ), 18);
    ck_assert_uint_eq(s[0], 0x70);
    ck_assert_uint_eq(s[2], 3);
    ck_assert_uint_eq(s[7], 10);
    ck_assert_uint_eq(s[12], 0x11);
    ck_assert_uint_eq(s[13], 0x00);
    struct scsi_cmd c;
    memset(&c, 0, sizeof c);
    scsi_set_sense_info(&c, SK_MISCOMPARE, ASC_MISCOMPARE_VERIFY, 0x1234);
    ck_assert_uint_eq(c.sense[0], 0xf0);            /* VALID + current fixed */
    ck_assert_uint_eq(get_be32(c.sense + 3), 0x1234);
    ck_assert_uint_eq(c.sense[2], SK_MISCOMPARE);
}
END_TEST

START_TEST(test_execute_roundtrip)
{
    struct scsi_cmd c;
    uint8_t w[16] = { 0x2a };
    put_be32(w + 2, 5); put_be16(w + 7, 1);
    uint8_t data[512];
    for (int i = 0; i < 512; i++) data[i] = (uint8_t)(i * 7);
    cmd_init(&c, w);
    ck_assert_int_eq(scsi_prepare(&c), 0);
    c.dout = data; c.dout_len = 512;
    scsi_execute(&c);
    ck_assert_uint_eq(c.status, SAM_GOOD);

    uint8_t r[16] = { 0x28 };
    put_be32(r + 2, 5); put_be16(r + 7, 1);
    cmd_init(&c, r);
    c.din_max = 200;                                 /* EDTL shorter than the transfer */
    ck_assert_int_eq(scsi_prepare(&c), 0);
    scsi_execute(&c);
    ck_assert_uint_eq(c.status, SAM_GOOD);
    ck_assert_uint_eq(c.din_len, 200);
    ck_assert_uint_eq(c.din_full, 512);
    ck_assert(!memcmp(c.din, data, 200));
    free(c.din);

    uint8_t inq[16] = { 0x12, 0x01, 0x80, 0, 255 };  /* unit serial VPD */
    cmd_init(&c, inq);
    ck_assert_int_eq(scsi_prepare(&c), 0);
    scsi_execute(&c);
    ck_assert_uint_eq(c.status, SAM_GOOD);
    ck_assert_uint_eq(c.din[1], 0x80);
    ck_assert_uint_eq(get_be16(c.din + 2), 32);
    free(c.din);

    uint8_t rl[16] = { 0xa0 };
    put_be32(rl + 6, 8);                             /* allocation length < 16 is invalid */
    cmd_init(&c, rl);
    ck_assert_int_eq(scsi_prepare(&c), 0);
    scsi_execute(&c);
    assert_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB);

    uint8_t caw[16] = { 0x89 };                      /* COMPARE AND WRITE miscompare */
    put_be64(caw + 2, 5); caw[13] = 1;
    uint8_t cw[1024];
    memcpy(cw, data, 512);
    cw[17] ^= 1;
    memset(cw + 512, 0, 512);
    cmd_init(&c, caw);
    ck_assert_int_eq(scsi_prepare(&c), 0);
    ck_assert_uint_eq(c.dout_need, 1024);
    c.dout = cw; c.dout_len = 1024;
    scsi_execute(&c);
    assert_sense(&c, SK_MISCOMPARE, ASC_MISCOMPARE_VERIFY);
    ck_assert_uint_eq(get_be32(c.sense + 3), 17);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("iscsi_pdu");
    TCase *wire = tcase_create("wire");
    tcase_add_test(wire, test_be_helpers);
    tcase_add_test(wire, test_bhs_lengths);
    tcase_add_test(wire, test_lun_encoding);
    tcase_add_test(wire, test_crc32c_vectors);
    suite_add_tcase(s, wire);
    TCase *text = tcase_create("text");
    tcase_add_test(text, test_text_parse);
    tcase_add_test(text, test_text_values);
    tcase_add_test(text, test_negotiation);
    suite_add_tcase(s, text);
    TCase *scsi = tcase_create("scsi");
    tcase_add_checked_fixture(scsi, lu_setup, lu_teardown);
    tcase_add_test(scsi, test_cdb_read_write);
    tcase_add_test(scsi, test_cdb_errors);
    tcase_add_test(scsi, test_sense_build);
    tcase_add_test(scsi, test_execute_roundtrip);
    suite_add_tcase(s, scsi);
    return run_suite(s);
}
