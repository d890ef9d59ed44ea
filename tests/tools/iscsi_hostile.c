/* Hostile iSCSI initiators for the #11 regression tests: one mode per attack.
 *   verify PORT IQN              VERIFY/WRITE SAME/COMPARE AND WRITE with missing or short data-out
 *   reinstate PORT IQN ROUNDS    session reinstatement while the old session is busy sending
 *   pump PORT IQN SECS N         N sessions sending NOPs, logging in again when dropped
 *   flushclose PORT ROUNDS       queued output the client never reads, then a TCP reset
 *   readflood PORT IQN HOLD      128 READ(16) of 8 MiB, replies not read for HOLD s, then all read
 *   nopflood PORT SECS           discovery session, NOP-Out pings for SECS s, replies never read
 *   loginflood PORT SECS         login continuation PDUs for SECS s, replies never read
 *   conns PORT N SRC             N idle connections from address SRC; prints how many the target kept
 *   chap PORT IQN USER:SECRET MUSER:MSECRET   mutual CHAP: short, reflected and good challenges
 *   logname PORT IQN             InitiatorName with a newline and escapes (the log must escape it)
 *   doutflood PORT IQN N HOLD    N sessions, each 8 WRITE(16) of 8 MiB with all data but the last
 *                                burst sent, held HOLD s (the target holds the buffers)
 *   stress PORT IQN SECS N       N threads (from 127.0.0.2-51) mixing garbage, unread READs, resets,
 *                                reinstatements, discovery; prints what they did
 * Prints one PASS/FAIL line per check; exit 0 when all pass. */
#include "tests/tools/iscsi_wire.h"
#include "iscsi/scsi.h"
#include <nettle/md5.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

static const char *iqn;
static int failures;
static const char *INI = "iqn.2026-12.test:hostile";

static void result(const char *name, bool ok)
{
    printf("%-62s %s\n", name, ok ? "PASS" : "FAIL");
    fflush(stdout);
    if (!ok) failures++;
}

static bool connect_login(struct wconn *w, const char *target, const uint8_t *isid)
{
    int fd = w_dial_from(NULL);
    if (fd < 0) return false;
    w_init(w, fd);
    if (w_login(w, INI, target, isid) != 0) { close(fd); return false; }
    return true;
}

static bool alive(void)
{
    struct wconn w;
    static const uint8_t isid[6] = { 0x80, 0, 0, 0, 0x77, 0x77 };
    if (!connect_login(&w, iqn, isid)) return false;
    bool ok = w_ping(&w);
    close(w.fd);
    return ok;
}

static int run_cmd(struct wconn *w, const uint8_t *cdb, uint8_t flags, uint32_t edtl, uint8_t *sk)
{
    return w_run_cmd(w, cdb, flags, edtl, NULL, sk);
}

/* expect CHECK CONDITION / ILLEGAL REQUEST and a session that still answers */
static void expect_illegal(struct wconn *w, const char *name, const uint8_t *cdb, uint8_t flags, uint32_t edtl)
{
    uint8_t sk = 0;
    int st = run_cmd(w, cdb, flags, edtl, &sk);
    result(name, st == SAM_CHECK_CONDITION && sk == SK_ILLEGAL_REQUEST && w_ping(w));
}

static int mode_verify(void)
{
    struct wconn w;
    uint8_t cdb[16], sk;
    if (!connect_login(&w, iqn, NULL)) { result("login", false); return 1; }
    w_cdb10(cdb, 0x2f, 0x02, 0, 8);
    expect_illegal(&w, "VERIFY(10) BYTCHK=1 without Data-Out", cdb, 0, 0);
    w_cdb16(cdb, 0x8f, 0x02, 0, 8);
    expect_illegal(&w, "VERIFY(16) BYTCHK=1 with EDTL 512 of 4096", cdb, CMD_W, 512);
    w_cdb10(cdb, 0x2f, 0x06, 0, 8);
    expect_illegal(&w, "VERIFY(10) BYTCHK=3 without Data-Out", cdb, 0, 0);
    memset(cdb, 0, 16); cdb[0] = 0xaf; cdb[1] = 0x02; put_be32(cdb + 6, 64);
    expect_illegal(&w, "VERIFY(12) BYTCHK=1 with EDTL 4096 of 32768", cdb, CMD_W, 4096);
    w_cdb10(cdb, 0x41, 0, 0, 8);
    expect_illegal(&w, "WRITE SAME(10) without Data-Out", cdb, 0, 0);
    w_cdb16(cdb, 0x93, 0, 0, 8);
    expect_illegal(&w, "WRITE SAME(16) with EDTL 100 of 512", cdb, CMD_W, 100);
    memset(cdb, 0, 16); cdb[0] = 0x89; cdb[13] = 2;
    expect_illegal(&w, "COMPARE AND WRITE with EDTL 512 of 2048", cdb, CMD_W, 512);
    /* well-formed: the LUN file is sparse, so zeros compare equal */
    w_cdb10(cdb, 0x2f, 0x02, 0, 2);
    result("VERIFY(10) BYTCHK=1 with all data -> GOOD", run_cmd(&w, cdb, CMD_W, 1024, &sk) == SAM_GOOD);
    w_cdb10(cdb, 0x2a, 0, 0, 8);
    result("WRITE(10) with EDTL 512 of 4096 -> GOOD (residual overflow)", run_cmd(&w, cdb, CMD_W, 512, &sk) == SAM_GOOD);
    close(w.fd);
    result("target still serving", alive());
    return failures != 0;
}

/* ---- busy sessions: reinstatement and target removal ---- */

struct pumper { int fd; atomic_bool stop; pthread_t th; atomic_long sent; };

/* NOP-Outs that want no reply (ITT and TTT reserved): pure receive load on the target. */
static void *pump_main(void *arg)
{
    struct pumper *p = arg;
    uint8_t buf[ISCSI_BHS_LEN * 64];
    memset(buf, 0, sizeof buf);
    for (int i = 0; i < 64; i++) {
        uint8_t *b = buf + i * ISCSI_BHS_LEN;
        b[0] = OP_NOP_OUT | BHS_I; b[1] = BHS_F;
        put_be32(b + 16, ISCSI_RSVD_TAG);
        put_be32(b + 20, ISCSI_RSVD_TAG);
    }
    while (!atomic_load(&p->stop)) {
        if (!w_send_all(p->fd, buf, sizeof buf)) break;
        atomic_fetch_add(&p->sent, 1);
    }
    return NULL;
}

/* The old session sends a PDU right after the new login was answered: the network
 * thread, kept busy by two other sessions that flood it, then finds the wake-up that
 * drops the old session and the old session's data in one epoll batch. */
static int mode_reinstate(int rounds)
{
    int bad = 0;
    static const uint8_t isid[6] = { 0x80, 0, 0, 0, 0x12, 0x34 };
    struct pumper bg[2] = { { 0 } };
    for (int i = 0; i < 2; i++) {
        struct wconn w;
        uint8_t bisid[6] = { 0x80, 0, 0, 2, 0, (uint8_t)i };
        if (!connect_login(&w, iqn, bisid)) { result("background sessions", false); return 1; }
        bg[i].fd = w.fd;
        pthread_create(&bg[i].th, NULL, pump_main, &bg[i]);
    }
    for (int r = 0; r < rounds; r++) {
        struct wconn a, b;
        if (!connect_login(&a, iqn, isid)) { bad++; continue; }
        bool ok = connect_login(&b, iqn, isid);                   /* takes over the I_T nexus */
        uint8_t bhs[ISCSI_BHS_LEN];
        w_cmd_bhs(&a, bhs, OP_NOP_OUT | BHS_I);
        for (int k = 0; k < 4; k++) { w_send_pdu(&a, bhs, "x", 1); put_be32(bhs + 16, a.itt++); }
        ok = ok && w_ping(&b);
        if (!ok) bad++;
        if (!w_expect_drop(a.fd, 5000)) bad++;
        close(a.fd);
        if (ok) close(b.fd);
    }
    for (int i = 0; i < 2; i++) {
        atomic_store(&bg[i].stop, true);
        shutdown(bg[i].fd, SHUT_RDWR);
        pthread_join(bg[i].th, NULL);
        close(bg[i].fd);
    }
    char name[96];
    snprintf(name, sizeof name, "%d reinstatements while the old session sends", rounds);
    result(name, bad == 0);
    result("target still serving", alive());
    return failures != 0;
}

static int mode_pump(int secs, int n)
{
    struct pumper *p = calloc((size_t)n, sizeof *p);
    uint64_t end = w_now_ms() + (uint64_t)secs * 1000;
    long logins = 0;
    while (w_now_ms() < end) {
        for (int i = 0; i < n; i++) {
            if (p[i].fd > 0 && !atomic_load(&p[i].stop)) continue;
            if (p[i].fd > 0) { pthread_join(p[i].th, NULL); close(p[i].fd); p[i].fd = 0; }
            struct wconn w;
            uint8_t isid[6] = { 0x80, 0, 0, 1, 0, (uint8_t)i };
            if (!connect_login(&w, iqn, isid)) continue;   /* target may be removed just now */
            logins++;
            p[i].fd = w.fd;
            atomic_store(&p[i].stop, false);
            pthread_create(&p[i].th, NULL, pump_main, &p[i]);
        }
        usleep(20000);
        for (int i = 0; i < n; i++) {       /* a pumper whose send failed was dropped */
            struct pollfd pfd = { .fd = p[i].fd, .events = POLLIN };
            if (p[i].fd > 0 && poll(&pfd, 1, 0) > 0) { atomic_store(&p[i].stop, true); shutdown(p[i].fd, SHUT_RDWR); }
        }
    }
    for (int i = 0; i < n; i++)
        if (p[i].fd > 0) { atomic_store(&p[i].stop, true); shutdown(p[i].fd, SHUT_RDWR); pthread_join(p[i].th, NULL); close(p[i].fd); }
    printf("pump: %ld logins\n", logins);
    free(p);
    return 0;
}

/* ---- output the client never reads ---- */

static int mode_flushclose(int rounds)
{
    int bad = 0;
    static uint8_t payload[8192];
    memset(payload, 0x5a, sizeof payload);
    for (int r = 0; r < rounds; r++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int small = 4096;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(w_port) };
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { bad++; close(fd); continue; }
        struct wconn w;
        w_init(&w, fd);
        if (r & 1) {                 /* before login: continuation PDUs each get an answer */
            uint8_t bhs[ISCSI_BHS_LEN];
            fcntl(fd, F_SETFL, O_NONBLOCK);
            for (int i = 0; i < 300; i++) {
                w_login_bhs(&w, bhs, w_isid_default, LOGIN_C | (1 << 2));
                put_be24(bhs + 5, 0);
                if (send(fd, bhs, ISCSI_BHS_LEN, MSG_NOSIGNAL) != ISCSI_BHS_LEN) break;
            }
        } else {                     /* discovery session: NOP pings echo 8 KiB each */
            if (w_login(&w, INI, NULL, NULL) != 0) { bad++; close(fd); continue; }
            struct timeval tv = { 0, 200000 };          /* stop once the target stops reading */
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            int i = 0;
            for (; i < 1500; i++) {                     /* 12 MB: more than the socket buffers */
                uint8_t bhs[ISCSI_BHS_LEN];
                w_cmd_bhs(&w, bhs, OP_NOP_OUT | BHS_I);
                if (!w_send_pdu(&w, bhs, payload, sizeof payload)) break;
            }
            if (getenv("HOSTILE_DEBUG")) fprintf(stderr, "round %d: %d pings\n", r, i);
        }
        usleep(20000);               /* let the target queue its answers */
        w_reset(fd);
    }
    char name[96];
    snprintf(name, sizeof name, "%d resets with unread output queued", rounds);
    result(name, bad == 0);
    return failures != 0;
}

static bool send_dropped;          /* the last send_for ended on a send error */

/* Sends buf repeatedly (once if once) while the target accepts within secs; never reads. */
static long send_for(int fd, const uint8_t *buf, size_t len, int secs, long *npdus, size_t pdu, bool once)
{
    uint64_t end = w_now_ms() + (uint64_t)secs * 1000;
    long total = 0;
    size_t off = 0;
    send_dropped = false;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    while (w_now_ms() < end && !(once && total == (long)len)) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EAGAIN) {
            struct pollfd pfd = { .fd = fd, .events = POLLOUT };
            poll(&pfd, 1, 100);
            continue;
        }
        if (n <= 0) { send_dropped = true; break; }
        total += n;
        off = (off + (size_t)n) % len;
    }
    if (npdus) *npdus = total / (long)pdu;
    return total;
}

static int mode_readflood(int hold)
{
    struct wconn w;
    if (!connect_login(&w, iqn, NULL)) { result("login", false); return 1; }
    uint8_t buf[128 * ISCSI_BHS_LEN];
    for (int i = 0; i < 128; i++) {
        uint8_t cdb[16];
        w_cdb16(cdb, 0x88, 0, (uint64_t)i * 16384, 16384);     /* 8 MiB of 512-byte blocks */
        w_scsi_bhs(&w, buf + i * ISCSI_BHS_LEN, cdb, CMD_R, 8u << 20);
    }
    long sent = send_for(w.fd, buf, sizeof buf, 3, NULL, 1, true);
    printf("readflood: sent %ld of %zu bytes, holding %d s\n", sent, sizeof buf, hold);
    fflush(stdout);
    sleep((unsigned)hold);
    /* now read: every command must complete, the target only paused */
    fcntl(w.fd, F_SETFL, 0);
    if (sent < (long)sizeof buf) {                           /* rest of the commands */
        if (!w_send_all(w.fd, buf + sent, sizeof buf - (size_t)sent)) { result("send rest", false); return 1; }
    }
    int done = 0;
    static uint8_t data[300000];
    uint8_t rsp[ISCSI_BHS_LEN];
    while (done < 128) {
        int dl = w_recv_pdu(&w, rsp, data, sizeof data, 10000);
        if (dl < 0) break;
        if ((bhs_opcode(rsp) == OP_DATA_IN && (rsp[1] & DIN_S)) || bhs_opcode(rsp) == OP_SCSI_RSP) done++;
    }
    char name[96];
    snprintf(name, sizeof name, "all 128 READs completed once read (%d)", done);
    result(name, done == 128 && w_ping(&w));
    close(w.fd);
    return failures != 0;
}

static int mode_nopflood(int secs)
{
    struct wconn w;
    int fd = w_dial_from(NULL);
    w_init(&w, fd);
    if (fd < 0 || w_login(&w, INI, NULL, NULL) != 0) { result("discovery login", false); return 1; }
    static uint8_t buf[64 * (ISCSI_BHS_LEN + 4096)];
    for (int i = 0; i < 64; i++) {
        uint8_t *b = buf + i * (ISCSI_BHS_LEN + 4096);
        w_cmd_bhs(&w, b, OP_NOP_OUT | BHS_I);
        put_be24(b + 5, 4096);
        memset(b + ISCSI_BHS_LEN, 'n', 4096);
    }
    long pdus;
    long sent = send_for(fd, buf, sizeof buf, secs, &pdus, ISCSI_BHS_LEN + 4096, false);
    printf("nopflood: sent %ld bytes (%ld pings)%s\n", sent, pdus, send_dropped ? " dropped" : "");
    close(fd);
    return 0;
}

static int mode_loginflood(int secs)
{
    struct wconn w;
    int fd = w_dial_from(NULL);
    w_init(&w, fd);
    static uint8_t buf[256 * ISCSI_BHS_LEN];      /* empty continuations: nothing accumulates */
    for (int i = 0; i < 256; i++) {
        uint8_t *b = buf + i * ISCSI_BHS_LEN;
        w_login_bhs(&w, b, w_isid_default, LOGIN_C | (1 << 2));
    }
    long pdus;
    long sent = send_for(fd, buf, sizeof buf, secs, &pdus, ISCSI_BHS_LEN, false);
    if (!send_dropped) send_dropped = w_expect_drop(fd, 1000);
    printf("loginflood: sent %ld bytes (%ld PDUs)%s\n", sent, pdus, send_dropped ? " dropped" : "");
    close(fd);
    return 0;
}

static int mode_conns(int n, const char *src)
{
    int *fds = calloc((size_t)n, sizeof *fds), opened = 0, kept = 0;
    for (int i = 0; i < n; i++) { fds[i] = w_dial_from(src); if (fds[i] >= 0) opened++; }
    usleep(500000);
    for (int i = 0; i < n; i++) {
        if (fds[i] < 0) continue;
        struct pollfd pfd = { .fd = fds[i], .events = POLLIN };
        if (poll(&pfd, 1, 0) == 0) kept++;                  /* no EOF: still open */
    }
    printf("conns: opened %d kept %d\n", opened, kept);
    fflush(stdout);
    if (getenv("CONNS_HOLD")) sleep((unsigned)atoi(getenv("CONNS_HOLD")));
    for (int i = 0; i < n; i++) if (fds[i] >= 0) close(fds[i]);
    free(fds);
    return 0;
}

/* ---- CHAP ---- */

static void md5_chap(uint8_t id, const char *secret, const uint8_t *chal, size_t n, uint8_t out[16])
{
    struct md5_ctx m;
    md5_init(&m);
    md5_update(&m, 1, &id);
    md5_update(&m, strlen(secret), (const uint8_t *)secret);
    md5_update(&m, n, chal);
    md5_digest(&m, 16, out);
}

static const char *key_get(const char *data, int dl, const char *key)
{
    size_t kl = strlen(key);
    for (int o = 0; o < dl; o += (int)strlen(data + o) + 1)
        if (!strncmp(data + o, key, kl) && data[o + kl] == '=') return data + o + kl + 1;
    return NULL;
}

static int hexval(char ch) { return ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10; }

/* Security stage up to the target's challenge. Returns the fd (challenge in chal[16],
 * id in *id) or -1. */
static int chap_start(struct wconn *w, uint8_t chal[16], uint8_t *id)
{
    static char data[8192];
    uint8_t bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN];
    int fd = w_dial_from(NULL);
    if (fd < 0) return -1;
    w_init(w, fd);
    char keys[512];
    int n = snprintf(keys, sizeof keys, "InitiatorName=%s%cTargetName=%s%cSessionType=Normal%cAuthMethod=CHAP%c",
                     INI, 0, iqn, 0, 0, 0);
    w_login_bhs(w, bhs, w_isid_default, 0 << 2);
    if (!w_send_pdu(w, bhs, keys, (uint32_t)n) || w_recv_pdu(w, rsp, (uint8_t *)data, sizeof data - 1, 5000) < 0 ||
        get_be16(rsp + 36)) { close(fd); return -1; }
    w_login_bhs(w, bhs, w_isid_default, 0 << 2);
    int dl;
    if (!w_send_pdu(w, bhs, "CHAP_A=5", 9) || (dl = w_recv_pdu(w, rsp, (uint8_t *)data, sizeof data - 1, 5000)) < 0 ||
        get_be16(rsp + 36)) { close(fd); return -1; }
    const char *c = key_get(data, dl, "CHAP_C"), *i = key_get(data, dl, "CHAP_I");
    if (!c || !i || strlen(c) != 34) { close(fd); return -1; }
    for (int k = 0; k < 16; k++) chal[k] = (uint8_t)(hexval(c[2 + 2 * k]) << 4 | hexval(c[3 + 2 * k]));
    *id = (uint8_t)atoi(i);
    return fd;
}

/* Answers with our response and a mutual challenge; returns the login status, and
 * whether the target's CHAP_R was right for msecret in *good. */
static int chap_finish(struct wconn *w, const uint8_t chal[16], uint8_t id, const char *user, const char *secret,
                       const uint8_t *mchal, size_t mlen, const char *msecret, bool *good)
{
    static char data[8192];
    uint8_t bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN], r[16], want[16];
    char rhex[40], chex[2 * 1024 + 3], keys[3000];
    md5_chap(id, secret, chal, 16, r);
    text_encode_hex(r, 16, rhex);
    text_encode_hex(mchal, mlen, chex);
    int n = snprintf(keys, sizeof keys, "CHAP_N=%s%cCHAP_R=%s%cCHAP_I=77%cCHAP_C=%s%c", user, 0, rhex, 0, 0, chex, 0);
    w_login_bhs(w, bhs, w_isid_default, LOGIN_T | (0 << 2) | 1);
    int dl;
    if (!w_send_pdu(w, bhs, keys, (uint32_t)n) || (dl = w_recv_pdu(w, rsp, (uint8_t *)data, sizeof data - 1, 5000)) < 0)
        return -1;
    *good = false;
    const char *tr = key_get(data, dl, "CHAP_R");
    if (tr && strlen(tr) == 34) {
        md5_chap(77, msecret, mchal, mlen, want);
        text_encode_hex(want, 16, rhex);
        *good = !strcasecmp(rhex + 2, tr + 2);
    }
    return get_be16(rsp + 36);
}

static int mode_chap(const char *cred, const char *mcred)
{
    char user[64], secret[64], muser[64], msecret[64];
    if (sscanf(cred, "%63[^:]:%63s", user, secret) != 2 || sscanf(mcred, "%63[^:]:%63s", muser, msecret) != 2) return 2;
    struct wconn w, w2;
    uint8_t chal[16], chal2[16], id, id2, mine[16];
    bool good;
    for (int i = 0; i < 16; i++) mine[i] = (uint8_t)(0xa5 ^ (i * 37));
    int fd = chap_start(&w, chal, &id);
    result("mutual CHAP with a 16-byte challenge -> logged in, target answer right",
           fd >= 0 && chap_finish(&w, chal, id, user, secret, mine, 16, msecret, &good) == 0 && good);
    if (fd >= 0) close(fd);
    fd = chap_start(&w, chal, &id);
    result("mutual CHAP with a 1-byte challenge -> authentication failure",
           fd >= 0 && chap_finish(&w, chal, id, user, secret, mine, 1, msecret, &good) == 0x0201 && !good);
    if (fd >= 0) close(fd);
    fd = chap_start(&w, chal, &id);
    result("mutual CHAP with an 8-byte challenge -> authentication failure",
           fd >= 0 && chap_finish(&w, chal, id, user, secret, mine, 8, msecret, &good) == 0x0201 && !good);
    if (fd >= 0) close(fd);
    fd = chap_start(&w, chal, &id);
    result("mutual CHAP reflecting the target's challenge -> failure",
           fd >= 0 && chap_finish(&w, chal, id, user, secret, chal, 16, msecret, &good) == 0x0201 && !good);
    if (fd >= 0) close(fd);
    /* the challenge of a second, parallel login */
    fd = chap_start(&w, chal, &id);
    int fd2 = chap_start(&w2, chal2, &id2);
    result("mutual CHAP with the challenge of a parallel login -> failure",
           fd >= 0 && fd2 >= 0 && chap_finish(&w, chal, id, user, secret, chal2, 16, msecret, &good) == 0x0201 && !good);
    if (fd >= 0) close(fd);
    if (fd2 >= 0) close(fd2);
    return failures != 0;
}

static int mode_logname(void)
{
    struct wconn w;
    int fd = w_dial_from(NULL);
    w_init(&w, fd);
    int st = w_login(&w, "iqn.2026-12.test:x\n2026-12-03 00:00:00.000 ERR FORGED-LINE\x1b[2J", iqn, NULL);
    result("login with a newline in InitiatorName gets a status", st >= 0);
    close(fd);
    return failures != 0;
}

/* ---- data-out buffers held ---- */

struct dflood { int idx, held, full, other; };

static void *dflood_main(void *arg)
{
    struct dflood *r = arg;
    struct wconn w;
    uint8_t isid[6] = { 0x80, 0, 0, 5, 0, (uint8_t)r->idx };       /* one session each */
    if (!connect_login(&w, iqn, isid)) { r->other = -1; return NULL; }
    static const uint32_t len = 8u << 20;
    for (int i = 0; i < 8; i++) {
        uint8_t cdb[16], bhs[ISCSI_BHS_LEN];
        w_cdb16(cdb, 0x8a, 0, (uint64_t)i * 16384, 16384);
        w_scsi_bhs(&w, bhs, cdb, CMD_W, len);
        if (!w_send_pdu(&w, bhs, NULL, 0)) return NULL;
    }
    uint8_t *data = calloc(1, 262144), rsp[ISCSI_BHS_LEN], in[8192];
    while (r->held + r->full + r->other < 8) {
        int dl = w_recv_pdu(&w, rsp, in, sizeof in, 5000);
        if (dl < 0) break;
        if (bhs_opcode(rsp) == OP_SCSI_RSP) { if (rsp[3] == SAM_TASK_SET_FULL) r->full++; else r->other++; continue; }
        if (bhs_opcode(rsp) != OP_R2T) continue;
        uint32_t off = get_be32(rsp + 40), blen = get_be32(rsp + 44);
        if (off + blen >= len) { r->held++; continue; }          /* never send the last burst */
        for (uint32_t o = 0, sn = 0; o < blen; o += 262144, sn++) {
            uint32_t n = blen - o < 262144 ? blen - o : 262144;
            uint8_t d[ISCSI_BHS_LEN] = { OP_DATA_OUT, o + n == blen ? BHS_F : 0 };
            put_be32(d + 16, get_be32(rsp + 16));
            put_be32(d + 20, get_be32(rsp + 20));
            put_be32(d + 36, sn);
            put_be32(d + 40, off + o);
            if (!w_send_pdu(&w, d, data, n)) goto out;
        }
    }
out:
    free(data);
    return (void *)(intptr_t)w.fd;
}

static int mode_doutflood(int n, int hold)
{
    struct dflood *r = calloc((size_t)n, sizeof *r);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    int *fds = calloc((size_t)n, sizeof *fds);
    for (int i = 0; i < n; i++) { r[i].idx = i; pthread_create(&th[i], NULL, dflood_main, &r[i]); }
    int held = 0, full = 0, other = 0;
    for (int i = 0; i < n; i++) {
        void *fd;
        pthread_join(th[i], &fd);
        fds[i] = (int)(intptr_t)fd;
        held += r[i].held; full += r[i].full; other += r[i].other;
    }
    printf("doutflood: %d sessions: %d writes held (buffers 7/8 full), %d TASK SET FULL, %d other\n", n, held, full, other);
    fflush(stdout);
    sleep((unsigned)hold);
    for (int i = 0; i < n; i++) if (fds[i] > 0) close(fds[i]);
    free(r); free(th); free(fds);
    return 0;
}

/* ---- stress ---- */

static int stress_secs;
static atomic_long st_garbage, st_unread, st_reinst, st_disc, st_partial, st_refused;

static void *stress_main(void *arg)
{
    long id = (long)arg;
    char src[32];
    snprintf(src, sizeof src, "127.0.0.%ld", 2 + id % 50);
    unsigned seed = (unsigned)id * 7919u + 1;
    uint64_t end = w_now_ms() + (uint64_t)stress_secs * 1000;
    static const uint8_t big_read[16] = { 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0 };  /* 8 MiB */
    while (w_now_ms() < end) {
        int fd = w_dial_from(src);
        if (fd < 0) { atomic_fetch_add(&st_refused, 1); usleep(10000); continue; }
        struct wconn w;
        w_init(&w, fd);
        struct timeval tv = { 2, 0 };
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        uint8_t buf[4096];
        switch (rand_r(&seed) % 5) {
        case 0:                                                   /* garbage, then FIN or RST */
            for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)rand_r(&seed);
            if (rand_r(&seed) & 1) buf[0] = OP_LOGIN_REQ | BHS_I;
            w_send_all(fd, buf, (size_t)(rand_r(&seed) % sizeof buf));
            atomic_fetch_add(&st_garbage, 1);
            if (rand_r(&seed) & 1) w_reset(fd); else close(fd);
            continue;
        case 1: {                                                 /* READs never read, then RST */
            uint8_t isid[6] = { 0x80, 0, 0, 3, (uint8_t)(id >> 8), (uint8_t)id };
            if (w_login(&w, INI, iqn, isid) == 0)
                for (int i = 0; i < 8; i++) {
                    uint8_t bhs[ISCSI_BHS_LEN];
                    w_scsi_bhs(&w, bhs, big_read, CMD_R, 8u << 20);
                    if (!w_send_pdu(&w, bhs, NULL, 0)) break;
                }
            usleep(200000 + (unsigned)(rand_r(&seed) % 500000));
            atomic_fetch_add(&st_unread, 1);
            w_reset(fd);
            continue;
        }
        case 2: {                                                 /* a few shared ISIDs: reinstatements */
            uint8_t isid[6] = { 0x80, 0, 0, 4, 0, (uint8_t)(rand_r(&seed) % 8) };
            if (w_login(&w, INI, iqn, isid) == 0) w_ping(&w);
            atomic_fetch_add(&st_reinst, 1);
            close(fd);
            continue;
        }
        case 3: {                                                 /* discovery + SendTargets */
            if (w_login(&w, INI, NULL, NULL) == 0) {
                uint8_t bhs[ISCSI_BHS_LEN], rsp[ISCSI_BHS_LEN];
                w_cmd_bhs(&w, bhs, OP_TEXT_REQ);
                put_be32(bhs + 24, w.cmdsn++);
                w_send_pdu(&w, bhs, "SendTargets=All", 16);
                w_recv_pdu(&w, rsp, buf, sizeof buf, 2000);
            }
            atomic_fetch_add(&st_disc, 1);
            close(fd);
            continue;
        }
        default:                                                  /* half a BHS, silence, RST */
            w_send_all(fd, "\x03\x87\0\0", 4);
            usleep((unsigned)(rand_r(&seed) % 300000));
            atomic_fetch_add(&st_partial, 1);
            w_reset(fd);
        }
    }
    return NULL;
}

static int mode_stress(int secs, int n)
{
    stress_secs = secs;
    pthread_t *th = calloc((size_t)n, sizeof *th);
    for (long i = 0; i < n; i++) pthread_create(&th[i], NULL, stress_main, (void *)i);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    free(th);
    printf("stress: %d threads %d s: garbage %ld, unread READs %ld, reinstatements %ld, discovery %ld, "
           "partial+reset %ld, refused/failed connects %ld\n", n, secs, atomic_load(&st_garbage), atomic_load(&st_unread),
           atomic_load(&st_reinst), atomic_load(&st_disc), atomic_load(&st_partial), atomic_load(&st_refused));
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc < 3) goto usage;
    const char *m = argv[1];
    w_port = atoi(argv[2]);
    if (!strcmp(m, "verify") && argc == 4) { iqn = argv[3]; return mode_verify(); }
    if (!strcmp(m, "reinstate") && argc == 5) { iqn = argv[3]; return mode_reinstate(atoi(argv[4])); }
    if (!strcmp(m, "pump") && argc == 6) { iqn = argv[3]; return mode_pump(atoi(argv[4]), atoi(argv[5])); }
    if (!strcmp(m, "flushclose") && argc == 4) return mode_flushclose(atoi(argv[3]));
    if (!strcmp(m, "readflood") && argc == 5) { iqn = argv[3]; return mode_readflood(atoi(argv[4])); }
    if (!strcmp(m, "nopflood") && argc == 4) return mode_nopflood(atoi(argv[3]));
    if (!strcmp(m, "loginflood") && argc == 4) return mode_loginflood(atoi(argv[3]));
    if (!strcmp(m, "conns") && argc == 5) return mode_conns(atoi(argv[3]), argv[4]);
    if (!strcmp(m, "chap") && argc == 6) { iqn = argv[3]; return mode_chap(argv[4], argv[5]); }
    if (!strcmp(m, "logname") && argc == 4) { iqn = argv[3]; return mode_logname(); }
    if (!strcmp(m, "doutflood") && argc == 6) { iqn = argv[3]; return mode_doutflood(atoi(argv[4]), atoi(argv[5])); }
    if (!strcmp(m, "stress") && argc == 6) { iqn = argv[3]; return mode_stress(atoi(argv[4]), atoi(argv[5])); }
usage:
    fprintf(stderr, "usage: see the header of tests/tools/iscsi_hostile.c\n");
    return 2;
}
