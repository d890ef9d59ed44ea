/* Sends malformed / hostile iSCSI traffic to a target and checks that each bad
 * connection is dropped cleanly (or the PDU rejected) while the target keeps
 * serving: usage iscsi_malformed PORT TARGET-IQN. Exit 0 when every case passes. */
#include "tests/tools/iscsi_wire.h"

static const char *iqn;
static int failures;
static bool hd, dd;             /* digests active on the current connection */
static uint32_t cmdsn, itt = 0x100;

static void result(const char *name, bool ok)
{
    printf("%-58s %s\n", name, ok ? "PASS" : "FAIL");
    if (!ok) failures++;
}

static int dial(void)
{
    int fd = w_dial_from(NULL);
    if (fd < 0) { perror("connect"); exit(2); }
    hd = dd = false;
    return fd;
}

/* Sends BHS (+digest) + data (+pad, +digest) as the current connection expects. */
static bool send_pdu(int fd, uint8_t *bhs, const void *data, uint32_t dlen)
{
    uint8_t buf[ISCSI_BHS_LEN + 4];
    put_be24(bhs + 5, dlen);
    memcpy(buf, bhs, ISCSI_BHS_LEN);
    size_t hl = ISCSI_BHS_LEN;
    if (hd) { uint32_t crc = iscsi_crc32c(bhs, ISCSI_BHS_LEN, 0); memcpy(buf + hl, &crc, 4); hl += 4; }
    if (!w_send_all(fd, buf, hl)) return false;
    if (!dlen) return true;
    uint8_t pad[8] = { 0 };
    uint32_t pl = pad4(dlen);
    if (!w_send_all(fd, data, dlen)) return false;
    if (dd) {
        uint32_t crc = iscsi_crc32c(data, dlen, 0);
        if (pl) crc = iscsi_crc32c(pad, pl, crc);
        memcpy(pad + pl, &crc, 4);
        pl += 4;
    }
    return !pl || w_send_all(fd, pad, pl);
}

/* Receives one PDU; data (if any) into data[max]; returns data length or -1. */
static int recv_pdu(int fd, uint8_t *bhs, uint8_t *data, size_t max, int timeout_ms)
{
    if (!w_recv_all(fd, bhs, ISCSI_BHS_LEN, timeout_ms)) return -1;
    uint8_t tmp[8];
    if (hd) {
        if (!w_recv_all(fd, tmp, 4, timeout_ms)) return -1;
        uint32_t crc = iscsi_crc32c(bhs, ISCSI_BHS_LEN, 0);
        if (memcmp(&crc, tmp, 4)) { fprintf(stderr, "bad header digest from target\n"); return -1; }
    }
    uint32_t dl = bhs_data_len(bhs), total = dl + pad4(dl) + (dd && dl ? 4 : 0);
    if (total > max) return -1;
    if (total && !w_recv_all(fd, data, total, timeout_ms)) return -1;
    if (dd && dl) {
        uint32_t crc = iscsi_crc32c(data, dl + pad4(dl), 0);
        if (memcmp(&crc, data + dl + pad4(dl), 4)) { fprintf(stderr, "bad data digest from target\n"); return -1; }
    }
    return (int)dl;
}

static void login_bhs(uint8_t *bhs)
{
    memset(bhs, 0, ISCSI_BHS_LEN);
    bhs[0] = BHS_I | OP_LOGIN_REQ;
    bhs[1] = LOGIN_T | (1 << 2) | 3;              /* operational -> full feature */
    bhs[8] = 0x80; bhs[13] = 0x42;                /* ISID */
    put_be32(bhs + 16, itt++);
    put_be32(bhs + 24, cmdsn);
}

/* Full login (operational stage only). Returns true when in full feature phase. */
static bool login(int fd, const char *target, bool digests, uint16_t *status)
{
    uint8_t bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN], data[8192];
    char keys[1024];
    int n = snprintf(keys, sizeof keys,
                     "InitiatorName=iqn.2026-12.test:malformed%cTargetName=%s%cSessionType=Normal%c"
                     "HeaderDigest=%s%cDataDigest=%s%cMaxRecvDataSegmentLength=65536%c",
                     0, target, 0, 0, digests ? "CRC32C" : "None", 0, digests ? "CRC32C" : "None", 0, 0);
    cmdsn = 1;
    login_bhs(bhs);
    if (!send_pdu(fd, bhs, keys, (uint32_t)n)) return false;
    if (recv_pdu(fd, rsp, data, sizeof data, 3000) < 0) return false;
    if (status) *status = get_be16(rsp + 36);
    if (bhs_opcode(rsp) != OP_LOGIN_RSP || get_be16(rsp + 36) || !(rsp[1] & LOGIN_T)) return false;
    hd = dd = digests;
    return true;
}

static void cmd_bhs(uint8_t *bhs, uint8_t op)
{
    memset(bhs, 0, ISCSI_BHS_LEN);
    bhs[0] = op;
    bhs[1] = BHS_F;
    put_be32(bhs + 16, itt++);
    put_be32(bhs + 20, ISCSI_RSVD_TAG);
    put_be32(bhs + 24, cmdsn);
}

/* NOP-Out ping with payload; true if echoed correctly (skips other PDUs first). */
static bool ping(int fd)
{
    uint8_t bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN], data[4096];
    const char payload[] = "ping-payload-123";
    cmd_bhs(bhs, OP_NOP_OUT | BHS_I);
    uint32_t tag = get_be32(bhs + 16);
    if (!send_pdu(fd, bhs, payload, sizeof payload)) return false;
    for (int i = 0; i < 8; i++) {
        int dl = recv_pdu(fd, rsp, data, sizeof data, 3000);
        if (dl < 0) return false;
        if (bhs_opcode(rsp) == OP_NOP_IN && get_be32(rsp + 16) == tag)
            return dl == (int)sizeof payload && !memcmp(data, payload, sizeof payload);
    }
    return false;
}

static bool target_alive(void)
{
    int fd = dial();
    bool ok = login(fd, iqn, false, NULL) && ping(fd);
    close(fd);
    return ok;
}

static void case_raw(const char *name, const void *buf, size_t len, bool half_close)
{
    int fd = dial();
    bool ok = w_send_all(fd, buf, len);
    if (half_close) shutdown(fd, SHUT_WR);
    ok = w_expect_drop(fd, 3000) && ok;
    close(fd);
    result(name, ok && target_alive());
}

static void pre_login_cases(void)
{
    uint8_t bhs[ISCSI_BHS_LEN * 2];
    memset(bhs, 0, sizeof bhs);
    bhs[0] = OP_LOGIN_REQ | BHS_I;
    case_raw("truncated BHS then half-close", bhs, 20, true);

    login_bhs(bhs);
    put_be24(bhs + 5, 1000);
    memset(bhs + ISCSI_BHS_LEN, 'x', ISCSI_BHS_LEN);
    case_raw("truncated data segment then half-close", bhs, ISCSI_BHS_LEN * 2, true);

    memset(bhs, 0, ISCSI_BHS_LEN);
    bhs[0] = 0x1e;
    case_raw("garbage opcode before login", bhs, ISCSI_BHS_LEN, false);

    cmd_bhs(bhs, OP_SCSI_CMD);
    bhs[32] = 0x28;
    case_raw("SCSI command before login", bhs, ISCSI_BHS_LEN, false);

    cmd_bhs(bhs, OP_DATA_OUT);
    case_raw("Data-Out before login", bhs, ISCSI_BHS_LEN, false);

    login_bhs(bhs);
    put_be24(bhs + 5, 0xffffff);
    case_raw("login with data segment length 16 MiB", bhs, ISCSI_BHS_LEN, false);

    login_bhs(bhs);
    bhs[4] = 255;                                  /* 1020 bytes of AHS */
    uint8_t big[ISCSI_BHS_LEN + 1020];
    memcpy(big, bhs, ISCSI_BHS_LEN);
    memset(big + ISCSI_BHS_LEN, 0xee, 1020);
    case_raw("login with huge AHS length", big, sizeof big, false);

    uint8_t rnd[4096];
    srand(12345);
    for (size_t i = 0; i < sizeof rnd; i++) rnd[i] = (uint8_t)rand();
    rnd[0] = OP_LOGIN_REQ;                         /* valid-looking start, garbage after */
    case_raw("random bytes", rnd, sizeof rnd, true);

    /* malformed key text: rejected with a login status, then dropped */
    int fd = dial();
    login_bhs(bhs);
    const char bad[] = "InitiatorName-without-equals";
    uint8_t rsp[ISCSI_BHS_LEN], data[8192];
    send_pdu(fd, bhs, bad, sizeof bad);
    bool ok = recv_pdu(fd, rsp, data, sizeof data, 3000) >= 0 && bhs_opcode(rsp) == OP_LOGIN_RSP &&
              rsp[36] == 0x02 && w_expect_drop(fd, 3000);
    close(fd);
    result("malformed login keys -> initiator error + drop", ok);

    fd = dial();
    uint16_t st = 0;
    ok = !login(fd, "iqn.2026-12.test:does-not-exist", false, &st) && st == 0x0203 && w_expect_drop(fd, 3000);
    close(fd);
    result("login to unknown target -> 0x0203 + drop", ok);
}

/* value of key in a login response's text, or 0 */
static unsigned long rsp_num(const uint8_t *data, int len, const char *key)
{
    size_t kl = strlen(key);
    for (int i = 0; i < len; i += (int)strnlen((const char *)data + i, (size_t)(len - i)) + 1)
        if (!strncmp((const char *)data + i, key, kl) && data[i + kl] == '=')
            return strtoul((const char *)data + i + kl + 1, NULL, 10);
    return 0;
}

/* FirstBurstLength offered before a smaller MaxBurstLength in the same PDU: the answer
 * keeps FirstBurstLength <= MaxBurstLength (RFC 7143 13.14) whatever the key order */
static void burst_order_case(void)
{
    uint8_t bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN], data[8192];
    char keys[1024];
    int n = snprintf(keys, sizeof keys,
                     "InitiatorName=iqn.2026-12.test:malformed%cTargetName=%s%cSessionType=Normal%c"
                     "HeaderDigest=None%cDataDigest=None%cFirstBurstLength=65536%cMaxBurstLength=16384%c",
                     0, iqn, 0, 0, 0, 0, 0, 0);
    int fd = dial();
    cmdsn = 1;
    login_bhs(bhs);
    int dl = send_pdu(fd, bhs, keys, (uint32_t)n) ? recv_pdu(fd, rsp, data, sizeof data, 3000) : -1;
    unsigned long fb = dl > 0 ? rsp_num(data, dl, "FirstBurstLength") : 0;
    unsigned long mb = dl > 0 ? rsp_num(data, dl, "MaxBurstLength") : 0;
    close(fd);
    if (!(mb == 16384 && fb && fb <= mb)) fprintf(stderr, "burst order: FirstBurstLength %lu MaxBurstLength %lu\n", fb, mb);
    result("FirstBurstLength before a smaller MaxBurstLength -> clamped to it", mb == 16384 && fb && fb <= mb);
}

static void full_feature_cases(void)
{
    uint8_t bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN];
    static uint8_t data[300000];

    int fd = dial();
    bool ok = login(fd, iqn, true, NULL) && ping(fd);
    result("login with CRC32C header+data digests, NOP ping", ok);
    /* READ(10) of one block with digests: Data-In with phase-collapsed GOOD status */
    cmd_bhs(bhs, OP_SCSI_CMD);
    bhs[1] |= CMD_R;
    put_be32(bhs + 20, 512);
    put_be32(bhs + 24, cmdsn++);
    bhs[32] = 0x28; bhs[40] = 1;
    ok = send_pdu(fd, bhs, NULL, 0) && recv_pdu(fd, rsp, data, sizeof data, 3000) == 512 &&
         bhs_opcode(rsp) == OP_DATA_IN && (rsp[1] & DIN_S) && rsp[3] == 0;
    result("READ(10) with digests -> Data-In + status", ok);
    cmd_bhs(bhs, 0x1c);                            /* unassigned opcode */
    ok = send_pdu(fd, bhs, NULL, 0) && recv_pdu(fd, rsp, data, sizeof data, 3000) >= 0 &&
         bhs_opcode(rsp) == OP_REJECT && ping(fd);
    result("unknown opcode in full feature phase -> Reject, session lives", ok);
    cmd_bhs(bhs, OP_DATA_OUT);
    put_be32(bhs + 16, 0xdeadbeef);
    ok = send_pdu(fd, bhs, "abcd", 4) && ping(fd);
    result("Data-Out for unknown ITT ignored", ok);
    cmd_bhs(bhs, OP_NOP_OUT | BHS_I);
    uint8_t raw[ISCSI_BHS_LEN + 4];
    memcpy(raw, bhs, ISCSI_BHS_LEN);
    memset(raw + ISCSI_BHS_LEN, 0x55, 4);           /* wrong header digest */
    ok = w_send_all(fd, raw, sizeof raw) && w_expect_drop(fd, 3000);
    close(fd);
    result("bad header digest -> drop", ok && target_alive());

    fd = dial();
    login(fd, iqn, false, NULL);
    cmd_bhs(bhs, OP_NOP_OUT | BHS_I);
    put_be24(bhs + 5, 262145);                     /* over our MaxRecvDataSegmentLength */
    ok = w_send_all(fd, bhs, ISCSI_BHS_LEN) && w_expect_drop(fd, 3000);
    close(fd);
    result("data segment above MaxRecvDataSegmentLength -> drop", ok && target_alive());

    fd = dial();
    login(fd, iqn, false, NULL);
    cmd_bhs(bhs, OP_SCSI_CMD);                     /* WRITE(10) 1 block: wait for R2T */
    bhs[1] |= CMD_W;
    put_be32(bhs + 20, 512);
    put_be32(bhs + 24, cmdsn++);
    bhs[32] = 0x2a; bhs[40] = 1;
    uint32_t witt = get_be32(bhs + 16);
    ok = send_pdu(fd, bhs, NULL, 0) && recv_pdu(fd, rsp, data, sizeof data, 3000) >= 0 && bhs_opcode(rsp) == OP_R2T;
    uint32_t ttt = get_be32(rsp + 20);
    memset(bhs, 0, ISCSI_BHS_LEN);
    bhs[0] = OP_DATA_OUT; bhs[1] = BHS_F;
    put_be32(bhs + 16, witt);
    put_be32(bhs + 20, ttt);
    put_be32(bhs + 40, 4096);                      /* offset outside the burst */
    ok = ok && send_pdu(fd, bhs, data, 512) && w_expect_drop(fd, 3000);
    close(fd);
    result("Data-Out with bad buffer offset -> drop", ok && target_alive());

    fd = dial();
    login(fd, iqn, false, NULL);
    login_bhs(bhs);
    ok = send_pdu(fd, bhs, "InitiatorName=x", 16) && w_expect_drop(fd, 3000);
    close(fd);
    result("Login PDU in full feature phase -> drop", ok && target_alive());

    /* fuzz: random headers after login, then half-close; target must always close */
    srand(4242);
    int bad = 0;
    static const uint8_t ops[] = { OP_NOP_OUT, OP_SCSI_CMD, OP_TMF_REQ, OP_LOGIN_REQ, OP_TEXT_REQ,
                                   OP_DATA_OUT, OP_LOGOUT_REQ, OP_SNACK, 0x1f, 0x3f };
    for (int i = 0; i < 300; i++) {
        fd = dial();
        if (!login(fd, iqn, i & 1, NULL)) { bad++; close(fd); continue; }
        for (size_t k = 0; k < ISCSI_BHS_LEN; k++) bhs[k] = (uint8_t)rand();
        bhs[0] = ops[rand() % sizeof ops] | (rand() & 1 ? BHS_I : 0);
        bhs[4] = rand() % 4 ? 0 : (uint8_t)rand();
        uint32_t dl = (uint32_t)rand() % 3 ? (uint32_t)rand() % 9000 : (uint32_t)rand() & 0xffffff;
        put_be32(bhs + 24, rand() % 2 ? cmdsn : (uint32_t)rand());
        for (uint32_t k = 0; k < dl && k < sizeof data; k++) data[k] = (uint8_t)rand();
        if (dl <= 65536) send_pdu(fd, bhs, data, dl);
        else { put_be24(bhs + 5, dl); w_send_all(fd, bhs, ISCSI_BHS_LEN); }
        shutdown(fd, SHUT_WR);
        if (!w_expect_drop(fd, 5000)) bad++;
        close(fd);
    }
    result("300 random PDUs after login: every connection closed", bad == 0);
    result("target still serving after fuzzing", target_alive());
}

/* --hold: log in, print "held", ping until the target drops the session.
 * Exit 0 if it was dropped within `secs` seconds. */
static int hold(int secs)
{
    int fd = dial();
    if (!login(fd, iqn, false, NULL)) { fprintf(stderr, "hold: login failed\n"); return 2; }
    printf("held\n");
    fflush(stdout);
    for (int i = 0; i < secs * 10; i++) {
        if (!ping(fd)) { printf("dropped\n"); close(fd); return 0; }
        usleep(100000);
    }
    close(fd);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--idle")) {      /* silent connection: login timeout */
        w_port = atoi(argv[2]);
        int fd = dial();
        bool ok = w_expect_drop(fd, 25000);
        close(fd);
        result("silent connection dropped by the login timeout", ok);
        return ok ? 0 : 1;
    }
    if (argc == 4 && !strcmp(argv[1], "--login")) {     /* one login + ping, same ISID as --hold */
        w_port = atoi(argv[2]);
        iqn = argv[3];
        return target_alive() ? 0 : 1;
    }
    if (argc == 4 && !strcmp(argv[1], "--hold")) {
        w_port = atoi(argv[2]);
        iqn = argv[3];
        return hold(20);
    }
    if (argc != 3) { fprintf(stderr, "usage: iscsi_malformed [--hold|--idle|--login] PORT TARGET-IQN\n"); return 2; }
    w_port = atoi(argv[1]);
    iqn = argv[2];
    result("baseline login + NOP ping", target_alive());
    pre_login_cases();
    burst_order_case();
    full_feature_cases();
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
