/* Hostile iSCSI initiators against what sessions share: the data-out buffer pool, a
 * LU's registrant table, and writes that a task management function says are gone.
 *   doutstarve PORT IQN TIMEOUT  initiators on 127.0.0.2 and .3 hold WRITEs whose Data-Out never
 *                                comes (the whole global pool); 127.0.0.1 must still write, and
 *                                the holders are dropped after TIMEOUT s
 *   pausedhold PORT IQN TIMEOUT  one holder that also leaves its READ replies unread, so the target
 *                                stops reading it: dropped after TIMEOUT s all the same
 *   prregs PORT IQN N            N logins (new ISIDs) each REGISTER a key: at most 256 take
 *   res6loss PORT IQN            a login of a RESERVE(6) holder's nexus that never completes
 *                                leaves the reservation in place
 *   abortrace PORT IQN ROUNDS    6 WRITEs of 8 MiB ('X') on workers, LOGICAL UNIT RESET as they
 *                                run, then 'Y' into their last blocks: those must stay 'Y'
 *   reinstrace PORT IQN ROUNDS   the same with a login that reinstates the session instead
 * Prints one PASS/FAIL line per check; exit 0 when all pass. */
#define _GNU_SOURCE   /* POLLRDHUP */
#include "tests/tools/iscsi_wire.h"
#include "iscsi/scsi.h"
#include <signal.h>

static const char *iqn;
static int failures;

static void result(const char *name, bool ok)
{
    printf("%-62s %s\n", name, ok ? "PASS" : "FAIL");
    fflush(stdout);
    if (!ok) failures++;
}

/* Logs in; "service unavailable" (0x0301: a reinstated session's commands still run) is
 * tried again, as initiators do. */
static bool login_from(struct wconn *w, const char *src, const char *ini, const uint8_t isid[6])
{
    for (int tries = 0; tries < 50; tries++) {
        int fd = w_dial_from(src);
        if (fd < 0) return false;
        w_init(w, fd);
        int st = w_login(w, ini, iqn, isid);
        if (st == 0) return true;
        close(fd);
        if (st != 0x0301) return false;
        usleep(100000);
    }
    return false;
}

/* ---- data-out pool ---- */

static int mode_doutstarve(int timeout_s)
{
    enum { SESS = 2, CMDS = 8 };
    static const uint32_t len = 8u << 20;            /* 2 addresses x 2 x 8 x 8 MiB = 256 MiB */
    struct wconn hold[2 * SESS];
    int n = 0;
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < SESS; i++) {
            uint8_t isid[6] = { 0x80, 0, 0, 9, (uint8_t)a, (uint8_t)i };
            struct wconn *w = &hold[n];
            if (!login_from(w, a ? "127.0.0.3" : "127.0.0.2", "iqn.2026-12.test:holder", isid)) continue;
            n++;
            for (int k = 0; k < CMDS; k++) {
                uint8_t cdb[16], bhs[ISCSI_BHS_LEN];
                w_cdb16(cdb, 0x8a, 0, (uint64_t)k * (len / 512), len / 512);
                w_scsi_bhs(w, bhs, cdb, CMD_W, len);
                w_send_pdu(w, bhs, NULL, 0);           /* R2Ts are never answered */
            }
        }
    result("holders logged in (4 sessions from 2 addresses)", n == 2 * SESS);
    usleep(300000);
    struct wconn v;
    uint8_t isid[6] = { 0x80, 0, 0, 9, 9, 9 }, cdb[16], sk = 0, blk[4096];
    memset(blk, 'v', sizeof blk);
    int st = -1;
    if (login_from(&v, NULL, "iqn.2026-12.test:victim", isid)) {
        w_cdb10(cdb, 0x2a, 0, 1u << 20, 8);
        st = w_run_cmd(&v, cdb, CMD_W, sizeof blk, blk, &sk);
        close(v.fd);
    }
    printf("a 4 KiB WRITE from another address while the pool is held: status 0x%02x\n", st & 0xff);
    result("another initiator writes while the data-out pool is held", st == SAM_GOOD);
    int dropped = 0;
    for (int i = 0; i < n; i++) dropped += w_expect_drop(hold[i].fd, (timeout_s + 5) * 1000);
    result("holders dropped once their Data-Out is overdue", dropped == n);
    for (int i = 0; i < n; i++) close(hold[i].fd);
    return failures != 0;
}

/* Holds 64 MiB of data-out buffers and stops reading its own READ replies, so that the
 * target stops reading it (output flow control): that must not exempt it from the
 * Data-Out timeout. */
static int mode_pausedhold(int timeout_s)
{
    static const uint32_t len = 8u << 20;
    struct wconn w;
    uint8_t isid[6] = { 0x80, 0, 0, 9, 8, 7 }, cdb[16], bhs[ISCSI_BHS_LEN];
    w_rcvbuf = 4096;
    bool in = login_from(&w, NULL, "iqn.2026-12.test:pausedhold", isid);
    w_rcvbuf = 0;
    if (!in) { result("login", false); return 1; }
    for (int k = 0; k < 8; k++) {   /* R2Ts never answered */
        w_cdb16(cdb, 0x8a, 0, (uint64_t)k * (len / 512), len / 512);
        w_scsi_bhs(&w, bhs, cdb, CMD_W, len);
        w_send_pdu(&w, bhs, NULL, 0);
    }
    for (int k = 0; k < 4; k++) {   /* 32 MiB of replies never read */
        w_cdb16(cdb, 0x88, 0, (uint64_t)k * (len / 512), len / 512);
        w_scsi_bhs(&w, bhs, cdb, CMD_R, len);
        w_send_pdu(&w, bhs, NULL, 0);
    }
    sleep(1);
    w_cmd_bhs(&w, bhs, OP_NOP_OUT | BHS_I);   /* read while its output is over the bound: reading pauses */
    w_send_pdu(&w, bhs, NULL, 0);
    struct pollfd p = { .fd = w.fd, .events = POLLRDHUP };
    bool dropped = false;
    for (int i = 0; i < (timeout_s + 5) * 10 && !dropped; i++) {
        dropped = poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
        usleep(100000);
    }
    close(w.fd);
    result("a holder that stops reading its replies is dropped too", dropped);
    return failures != 0;
}

/* A session holds RESERVE(6); a login with its initiator name and ISID that never
 * completes must not end it (its close released the nexus's reservation). */
static int mode_res6loss(void)
{
    static const char *ini = "iqn.2026-12.test:res6";
    uint8_t isid[6] = { 0x80, 0, 0, 6, 6, 6 }, cdb[16] = { 0x16 }, sk = 0;   /* RESERVE(6) */
    struct wconn a, b, o;
    if (!login_from(&a, NULL, ini, isid)) { result("login", false); return 1; }
    int st = w_run_cmd(&a, cdb, 0, 0, NULL, &sk);
    if (st == SAM_CHECK_CONDITION) st = w_run_cmd(&a, cdb, 0, 0, NULL, &sk);   /* a unit attention first */
    if (st != SAM_GOOD) printf("RESERVE(6): status 0x%02x, sense key %d\n", st & 0xff, sk);
    result("RESERVE(6)", st == SAM_GOOD);
    int fd = w_dial_from(NULL);   /* the same nexus: one operational-stage PDU, no transit, then gone */
    w_init(&b, fd);
    char keys[512];
    int n = snprintf(keys, sizeof keys, "InitiatorName=%s%cTargetName=%s%cSessionType=Normal%c", ini, 0, iqn, 0, 0);
    uint8_t bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN], data[8192];
    w_login_bhs(&b, bhs, isid, 1 << 2);
    w_send_pdu(&b, bhs, keys, (uint32_t)n);
    w_recv_pdu(&b, rsp, data, sizeof data, 5000);
    close(fd);
    usleep(300000);
    uint8_t oisid[6] = { 0x80, 0, 0, 6, 6, 7 };
    st = -1;
    if (login_from(&o, NULL, "iqn.2026-12.test:other", oisid)) {
        w_cdb10(cdb, 0x28, 0, 0, 1);
        st = w_run_cmd(&o, cdb, CMD_R, 512, NULL, &sk);
        if (st == SAM_CHECK_CONDITION) st = w_run_cmd(&o, cdb, CMD_R, 512, NULL, &sk);
        close(o.fd);
    }
    result("an unfinished login of the holder's nexus keeps its RESERVE(6)", st == SAM_RESERVATION_CONFLICT);
    memset(cdb, 0, sizeof cdb);
    cdb[0] = 0x17;   /* RELEASE(6) */
    w_run_cmd(&a, cdb, 0, 0, NULL, &sk);
    close(a.fd);
    return failures != 0;
}

/* ---- persistent reservation registrants ---- */

static int mode_prregs(int n)
{
    int took = 0, refused = 0, other = 0;
    for (int i = 0; i < n; i++) {
        struct wconn w;
        uint8_t isid[6] = { 0x80, 0, 0, 7, (uint8_t)(i >> 8), (uint8_t)i };
        if (!login_from(&w, NULL, "iqn.2026-12.test:registrar", isid)) { other++; continue; }
        uint8_t cdb[16] = { 0x5f, 0x00 }, param[24] = { 0 }, sk = 0;   /* PR OUT: REGISTER */
        put_be32(cdb + 5, sizeof param);
        put_be64(param + 8, 0x1000 + (uint64_t)i);                      /* service action key */
        int st = w_run_cmd(&w, cdb, CMD_W, sizeof param, param, &sk);
        if (st == SAM_GOOD) took++;
        else if (st == SAM_CHECK_CONDITION && sk == SK_ILLEGAL_REQUEST) refused++;
        else other++;
        close(w.fd);
    }
    printf("prregs: %d registrations taken, %d refused (ILLEGAL REQUEST), %d other\n", took, refused, other);
    result("registrants per LU are capped (256)", took == PR_MAX_REGS && refused == n - PR_MAX_REGS && !other);
    return failures != 0;
}

/* ---- TMF against a write on a worker ---- */

/* Answers the R2Ts of the writes itts[0..n) (len bytes each) from buf until all data is sent. */
static bool send_all_data(struct wconn *w, const uint32_t *itts, int n, uint32_t len, const uint8_t *buf)
{
    uint8_t rsp[ISCSI_BHS_LEN], in[512];
    for (int left = n; left;) {
        if (w_recv_pdu(w, rsp, in, sizeof in, 5000) < 0) return false;
        if (bhs_opcode(rsp) != OP_R2T) continue;
        uint32_t itt = get_be32(rsp + 16), off = get_be32(rsp + 40), blen = get_be32(rsp + 44);
        bool ours = false;
        for (int i = 0; i < n; i++) ours |= itts[i] == itt;
        if (!ours || off + blen > len) return false;
        for (uint32_t o = 0, sn = 0; o < blen; o += 262144, sn++) {
            uint32_t k = blen - o < 262144 ? blen - o : 262144;
            uint8_t d[ISCSI_BHS_LEN] = { OP_DATA_OUT, o + k == blen ? BHS_F : 0 };
            put_be32(d + 16, itt);
            put_be32(d + 20, get_be32(rsp + 20));
            put_be32(d + 36, sn);
            put_be32(d + 40, off + o);
            if (!w_send_pdu(w, d, buf + off + o, k)) return false;
        }
        if (off + blen == len) left--;
    }
    return true;
}

/* Reads one 512-byte block's first byte; -1 on error. */
static int read_byte(struct wconn *w, uint64_t lba)
{
    uint8_t cdb[16], bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN], in[600];
    int got = -1;
    w_cdb10(cdb, 0x28, 0, (uint32_t)lba, 1);
    w_scsi_bhs(w, bhs, cdb, CMD_R, 512);
    if (!w_send_pdu(w, bhs, NULL, 0)) return -1;
    for (;;) {
        int dl = w_recv_pdu(w, rsp, in, sizeof in, 5000);
        if (dl < 0) return -1;
        if (bhs_opcode(rsp) == OP_DATA_IN && dl == 512) got = in[0];
        if ((bhs_opcode(rsp) == OP_DATA_IN && (rsp[1] & DIN_S)) || bhs_opcode(rsp) == OP_SCSI_RSP) return got;
    }
}

/* Six writes of 8 MiB ('X') on workers, then, as they run, a LOGICAL UNIT RESET (or a
 * login that reinstates the session), and 'Y' into the last block of each once the reset
 * is answered (or the new session is in): an aborted write still running then
 * overwrites the 'Y'. */
static int mode_abortrace(int rounds, bool reinstate)
{
    enum { N = 6 };   /* 48 MiB: under the connection's 64 MiB of data-out buffers */
    static const uint32_t len = 8u << 20, nblk = (8u << 20) / 512;   /* > 128 KiB: run on workers */
    static const char *ini = "iqn.2026-12.test:aborter";
    uint8_t *x = malloc(len), y[512], cdb[16], sk;
    memset(x, 'X', len);
    memset(y, 'Y', sizeof y);
    struct wconn w;
    uint8_t isid[6] = { 0x80, 0, 0, 8, 0, 1 };
    if (!x || !login_from(&w, NULL, ini, isid)) { result("login", false); return 1; }
    int late = 0, errors = 0;
    for (int r = 0; r < rounds && !errors; r++) {
        uint32_t itts[N];
        for (int i = 0; i < N; i++) {
            uint8_t bhs[ISCSI_BHS_LEN];
            w_cdb16(cdb, 0x8a, 0, (uint64_t)i * nblk, nblk);
            w_scsi_bhs(&w, bhs, cdb, CMD_W, len);
            itts[i] = get_be32(bhs + 16);
            if (!w_send_pdu(&w, bhs, NULL, 0)) errors++;
        }
        if (errors || !send_all_data(&w, itts, N, len, x)) { errors++; break; }
        usleep(200 * (r % 5));                        /* workers pick the writes up meanwhile */
        if (reinstate) {
            struct wconn n;
            if (!login_from(&n, NULL, ini, isid)) { errors++; break; }
            close(w.fd);
            w = n;
        } else {
            uint8_t tmf[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN], in[512];
            w_cmd_bhs(&w, tmf, OP_TMF_REQ | BHS_I);
            tmf[1] = BHS_F | 5;                        /* LOGICAL UNIT RESET, LUN 0 */
            if (!w_send_pdu(&w, tmf, NULL, 0)) { errors++; break; }
            for (;;) {                                 /* the writes' responses may come first */
                if (w_recv_pdu(&w, rsp, in, sizeof in, 10000) < 0) { errors++; break; }
                if (bhs_opcode(rsp) == OP_TMF_RSP) break;
            }
        }
        for (int i = 0; i < N && !errors; i++) {
            w_cdb10(cdb, 0x2a, 0, (uint32_t)((uint64_t)i * nblk + nblk - 1), 1);
            int st = w_run_cmd(&w, cdb, CMD_W, sizeof y, y, &sk);
            if (st == SAM_CHECK_CONDITION) st = w_run_cmd(&w, cdb, CMD_W, sizeof y, y, &sk);   /* a unit attention */
            if (st != SAM_GOOD) errors++;
        }
        usleep(50000);                                 /* time for an aborted write still running */
        for (int i = 0; i < N && !errors; i++) {
            int b = read_byte(&w, (uint64_t)i * nblk + nblk - 1);
            if (b < 0) errors++;
            else late += b != 'Y';
        }
    }
    close(w.fd);
    free(x);
    printf("abortrace (%s): %d rounds of %d writes, %d blocks where an aborted write landed after the newer "
           "one, %d errors\n", reinstate ? "reinstatement" : "LU reset", rounds, N, late, errors);
    result(reinstate ? "no write of a reinstated session lands after the new login"
                     : "no aborted write lands after FUNCTION COMPLETE", !late && !errors);
    return failures != 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc == 4 && !strcmp(argv[1], "res6loss")) { w_port = atoi(argv[2]); iqn = argv[3]; return mode_res6loss(); }
    if (argc != 5) goto usage;
    w_port = atoi(argv[2]);
    iqn = argv[3];
    if (!strcmp(argv[1], "doutstarve")) return mode_doutstarve(atoi(argv[4]));
    if (!strcmp(argv[1], "prregs")) return mode_prregs(atoi(argv[4]));
    if (!strcmp(argv[1], "pausedhold")) return mode_pausedhold(atoi(argv[4]));
    if (!strcmp(argv[1], "abortrace")) return mode_abortrace(atoi(argv[4]), false);
    if (!strcmp(argv[1], "reinstrace")) return mode_abortrace(atoi(argv[4]), true);
usage:
    fprintf(stderr, "usage: see the header of tests/tools/iscsi_shared.c\n");
    return 2;
}
