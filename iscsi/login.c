/* Login phase (RFC 7143 6, 11.12-13): security negotiation (None / CHAP one-way and
 * mutual), operational parameter negotiation, discovery sessions; Text Request
 * (SendTargets) in full feature phase. */
#define _GNU_SOURCE
#include "iscsi/iscsi_int.h"
#include "util/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

enum { ST_SUCCESS = 0x0000, ST_INITIATOR_ERROR = 0x0200, ST_AUTH_FAILED = 0x0201,
       ST_FORBIDDEN = 0x0202, ST_NOT_FOUND = 0x0203, ST_REMOVED = 0x0204,
       ST_UNSUPPORTED_VERSION = 0x0205, ST_MISSING_PARAM = 0x0207, ST_NO_SESSION = 0x020a,
       ST_INVALID_DURING_LOGIN = 0x020b, ST_TARGET_ERROR = 0x0300, ST_SERVICE_UNAVAILABLE = 0x0301 };

struct login_rsp {
    struct text_out keys;
    uint16_t status;
    bool transit;
    uint8_t csg, nsg;
};

static uint32_t clamp_num(const char *v, uint64_t lo, uint64_t hi, bool *ok)
{
    uint64_t n;
    if (text_parse_number(v, &n) || n < lo || n > hi) { *ok = false; return 0; }
    return (uint32_t)n;
}

static const char *yesno(bool b) { return b ? "Yes" : "No"; }

static int parse_bool(const char *v)
{
    if (!strcmp(v, "Yes")) return 1;
    if (!strcmp(v, "No")) return 0;
    return -1;
}

/* Operational keys (RFC 7143 13). Unknown keys get NotUnderstood. Returns false on
 * an unacceptable value. */
bool login_negotiate_key(struct iscsi_conn *c, const char *k, const char *v, struct text_out *o)
{
    bool ok = true;
    if (!strcmp(k, "HeaderDigest") || !strcmp(k, "DataDigest")) {
        const char *pick = NULL;
        for (const char *p = v; p && *p; ) {                  /* first supported in their order */
            const char *comma = strchr(p, ',');
            size_t l = comma ? (size_t)(comma - p) : strlen(p);
            if (l == 6 && !strncmp(p, "CRC32C", 6)) { pick = "CRC32C"; break; }
            if (l == 4 && !strncmp(p, "None", 4)) { pick = "None"; break; }
            p = comma ? comma + 1 : NULL;
        }
        if (!pick) { text_add(o, k, "Reject"); return true; }
        if (k[0] == 'H') c->neg_hdigest = pick[0] == 'C'; else c->neg_ddigest = pick[0] == 'C';
        text_add(o, k, "%s", pick);
    } else if (!strcmp(k, "MaxConnections")) {
        clamp_num(v, 1, 65535, &ok);
        text_add(o, k, "1");
    } else if (!strcmp(k, "InitialR2T")) {
        if (parse_bool(v) < 0) return false;
        /* OR; we answer Yes: unsolicited Data-Out never comes. With ImmediateData=No too,
         * a command is a single PDU until the target asks for data, which is what
         * initiators' abort/DataSN handling (iscsi-test-cu) assumes. */
        c->initial_r2t = true;
        text_add(o, k, "%s", yesno(c->initial_r2t));
    } else if (!strcmp(k, "ImmediateData")) {
        if (parse_bool(v) < 0) return false;
        /* AND with ours: No unless the target enables it */
        c->immediate_data = parse_bool(v) == 1 && c->tgt && c->tgt->cfg.immediate_data;
        text_add(o, k, "%s", yesno(c->immediate_data));
    } else if (!strcmp(k, "MaxRecvDataSegmentLength")) {
        c->mrdsl_tx = clamp_num(v, 512, 16777215, &ok);
        if (!c->opt_sent_mrdsl) { text_add(o, k, "%u", ISCSI_OUR_MRDSL); c->opt_sent_mrdsl = true; }
    } else if (!strcmp(k, "MaxBurstLength")) {
        uint32_t n = clamp_num(v, 512, 16777215, &ok);
        c->max_burst = n < ISCSI_OUR_MAX_BURST ? n : ISCSI_OUR_MAX_BURST;
        /* below a FirstBurstLength agreed in an earlier PDU: the initiator broke 13.14 */
        if (c->neg_first_burst && c->first_burst > c->max_burst) return false;
        if (c->first_burst > c->max_burst) c->first_burst = c->max_burst;   /* the default 64 KiB too */
        text_add(o, k, "%u", c->max_burst);
    } else if (!strcmp(k, "FirstBurstLength")) {
        uint32_t n = clamp_num(v, 512, 16777215, &ok);
        c->first_burst = n < ISCSI_OUR_FIRST_BURST ? n : ISCSI_OUR_FIRST_BURST;
        if (c->first_burst > c->max_burst) c->first_burst = c->max_burst;   /* RFC 7143 13.14 */
        c->neg_first_burst = true;
        text_add(o, k, "%u", c->first_burst);
    } else if (!strcmp(k, "DefaultTime2Wait")) {
        uint32_t n = clamp_num(v, 0, 3600, &ok);
        text_add(o, k, "%u", n > 2 ? n : 2);
    } else if (!strcmp(k, "DefaultTime2Retain")) {
        uint32_t n = clamp_num(v, 0, 3600, &ok);
        text_add(o, k, "%u", n < 20 ? n : 20);
    } else if (!strcmp(k, "MaxOutstandingR2T")) {
        clamp_num(v, 1, 65535, &ok);
        c->max_r2t = 1;                                       /* one R2T at a time per task */
        text_add(o, k, "1");
    } else if (!strcmp(k, "DataPDUInOrder") || !strcmp(k, "DataSequenceInOrder")) {
        if (parse_bool(v) < 0) return false;
        text_add(o, k, "Yes");                                /* OR with our Yes */
    } else if (!strcmp(k, "ErrorRecoveryLevel")) {
        clamp_num(v, 0, 2, &ok);
        text_add(o, k, "0");
    } else if (!strcmp(k, "IFMarker") || !strcmp(k, "OFMarker")) {
        text_add(o, k, "No");
    } else if (!strcmp(k, "IFMarkInt") || !strcmp(k, "OFMarkInt")) {
        text_add(o, k, "Irrelevant");
    } else if (!strcmp(k, "TaskReporting")) {
        text_add(o, k, "RFC3720");
    } else if (!strcmp(k, "InitiatorAlias") || !strcmp(k, "InitiatorName") ||
               !strcmp(k, "TargetName") || !strcmp(k, "SessionType") || !strcmp(k, "AuthMethod") ||
               !strncmp(k, "CHAP_", 5)) {
        /* handled elsewhere or declarative */
    } else {
        text_add(o, k, "NotUnderstood");
    }
    return ok;
}

/* First login PDU: who is logging in to what. Returns a login status. */
static uint16_t login_identify(struct iscsi_conn *c, const struct text_list *kl, struct login_rsp *r)
{
    const char *iname = text_get(kl, "InitiatorName");
    const char *stype = text_get(kl, "SessionType");
    const char *tname = text_get(kl, "TargetName");
    if (!iname || !*iname || strlen(iname) >= sizeof c->initiator) return ST_MISSING_PARAM;
    snprintf(c->initiator, sizeof c->initiator, "%s", iname);
    nasd_log_escape(iname, strlen(iname), c->ini_log, sizeof c->ini_log);
    snprintf(c->nexus, sizeof c->nexus, "%s,i,0x%02x%02x%02x%02x%02x%02x", iname,
             c->isid[0], c->isid[1], c->isid[2], c->isid[3], c->isid[4], c->isid[5]);
    if (stype && !strcmp(stype, "Discovery")) {
        c->discovery = true;
        c->disc_required = server_discovery_auth_required(c->nt->srv);
        return ST_SUCCESS;
    }
    if (stype && strcmp(stype, "Normal")) return ST_INITIATOR_ERROR;
    if (!tname || !*tname) return ST_MISSING_PARAM;
    c->tgt = server_find_target(c->nt->srv, tname);
    if (!c->tgt) return ST_NOT_FOUND;
    for (unsigned i = 0; i < c->tgt->nlus; i++) c->lu_gen[i] = atomic_load(&c->tgt->lus[i].reset_gen);
    if (!tgt_acl_allows(c->tgt, iname)) {
        log_info("iscsi: initiator %s not allowed on %s", c->ini_log, c->tgt->cfg.iqn);
        return ST_FORBIDDEN;
    }
    text_add(&r->keys, "TargetPortalGroupTag", "%d", ISCSI_TPGT);
    if (c->tgt->cfg.alias[0]) text_add(&r->keys, "TargetAlias", "%s", c->tgt->cfg.alias);
    return ST_SUCCESS;
}

static bool auth_required(const struct iscsi_conn *c)
{
    return c->discovery ? c->disc_required : c->tgt && c->tgt->cfg.chap_user[0];
}

/* Security stage keys; returns a login status. */
static uint16_t login_security(struct iscsi_conn *c, const struct text_list *kl, struct login_rsp *r)
{
    const struct iscsi_target_cfg *cfg = c->tgt ? &c->tgt->cfg : NULL;
    const char *am = text_get(kl, "AuthMethod");
    if (am) {
        /* a discovery session may use CHAP even when not required: it then lists the
         * targets protected with the credentials it proved */
        bool chap = auth_required(c) ||
                    (c->discovery && text_list_has(am, "CHAP") && server_any_chap(c->nt->srv));
        if (chap) {
            if (!text_list_has(am, "CHAP")) { text_add(&r->keys, "AuthMethod", "Reject"); return ST_AUTH_FAILED; }
            text_add(&r->keys, "AuthMethod", "CHAP");
            c->chap = CHAP_WAIT_A;
        } else if (text_list_has(am, "None")) {
            text_add(&r->keys, "AuthMethod", "None");
            c->auth_done = true;
        } else {
            text_add(&r->keys, "AuthMethod", "Reject");
            return ST_AUTH_FAILED;
        }
    }
    const char *ca = text_get(kl, "CHAP_A");
    if (ca) {
        if (c->chap != CHAP_WAIT_A) return ST_INITIATOR_ERROR;
        if (!text_list_has(ca, "5")) { text_add(&r->keys, "CHAP_A", "Reject"); return ST_AUTH_FAILED; }
        if (getrandom(c->chap_chal, sizeof c->chap_chal, 0) != (ssize_t)sizeof c->chap_chal ||
            getrandom(&c->chap_id, 1, 0) != 1)
            return ST_TARGET_ERROR;
        char hex[2 * sizeof c->chap_chal + 3];
        text_encode_hex(c->chap_chal, sizeof c->chap_chal, hex);
        text_add(&r->keys, "CHAP_A", "5");
        text_add(&r->keys, "CHAP_I", "%u", c->chap_id);
        text_add(&r->keys, "CHAP_C", "%s", hex);
        server_chap_sent(c->nt->srv, c->chap_chal);
        c->chap = CHAP_WAIT_R;
        return ST_SUCCESS;
    }
    const char *cn = text_get(kl, "CHAP_N"), *cr = text_get(kl, "CHAP_R");
    if (cn || cr) {
        if (c->chap != CHAP_WAIT_R || !cn || !cr || (!cfg && !c->discovery)) return ST_AUTH_FAILED;
        uint8_t got[64];
        int gl = text_decode_binary(cr, got, sizeof got);
        bool ok = false;
        if (gl != 16) ok = false;
        else if (c->discovery) ok = server_discovery_creds(c->nt->srv, cn, c->chap_id, c->chap_chal, got, &c->auth, &c->disc_all);
        else {
            ok = !strcmp(cn, cfg->chap_user) &&
                 chap_response_ok(c->chap_id, cfg->chap_secret, c->chap_chal, sizeof c->chap_chal, got);
            if (ok) {
                snprintf(c->auth.user, sizeof c->auth.user, "%s", cfg->chap_user);
                snprintf(c->auth.secret, sizeof c->auth.secret, "%s", cfg->chap_secret);
                snprintf(c->auth.muser, sizeof c->auth.muser, "%s", cfg->mutual_user);
                snprintf(c->auth.msecret, sizeof c->auth.msecret, "%s", cfg->mutual_secret);
            }
        }
        if (!ok) {
            char user[NASD_LOG_ESC_SIZE(64)];
            nasd_log_escape(cn, strnlen(cn, 64), user, sizeof user);
            log_info("iscsi: CHAP authentication failed for %s (user '%s')", c->ini_log, user);
            return ST_AUTH_FAILED;
        }
        const char *mi = text_get(kl, "CHAP_I"), *mc = text_get(kl, "CHAP_C");
        if (mi || mc) {                                      /* initiator wants mutual CHAP */
            uint64_t id;
            uint8_t chal[1024];
            int cl = mc ? text_decode_binary(mc, chal, sizeof chal) : -1;
            if (!mi || text_parse_number(mi, &id) || id > 255 || cl <= 0 || !c->auth.muser[0])
                return ST_AUTH_FAILED;
            /* RFC 7143 12.1.3: a challenge as long as our own (16 bytes, at least as
             * strong as MD5), and never one we sent: answering it would hand the
             * initiator a response it could replay to us (reflection). */
            if (cl < (int)sizeof c->chap_chal) {
                log_info("iscsi: mutual CHAP challenge of %d bytes from %s refused (need 16)", cl, c->ini_log);
                return ST_AUTH_FAILED;
            }
            if ((cl == (int)sizeof c->chap_chal && !memcmp(chal, c->chap_chal, sizeof c->chap_chal)) ||
                server_chap_was_sent(c->nt->srv, chal, (size_t)cl)) {
                log_info("iscsi: mutual CHAP challenge from %s is one the target sent, refused", c->ini_log);
                return ST_AUTH_FAILED;
            }
            uint8_t resp[16];
            char hex[35];
            chap_md5_response((uint8_t)id, c->auth.msecret, chal, (size_t)cl, resp);
            text_encode_hex(resp, 16, hex);
            text_add(&r->keys, "CHAP_N", "%s", c->auth.muser);
            text_add(&r->keys, "CHAP_R", "%s", hex);
        }
        c->chap = CHAP_OK;
        c->auth_done = true;
    }
    return ST_SUCCESS;
}

static void send_login_rsp(struct iscsi_conn *c, const uint8_t *req, struct login_rsp *r)
{
    struct tx_buf *b = tx_new(c, OP_LOGIN_RSP);
    if (!b) return;
    b->hdr[1] = (r->transit ? LOGIN_T : 0) | (uint8_t)(r->csg << 2) | (r->transit ? r->nsg : 0);
    memcpy(b->hdr + 8, req + 8, 6);                           /* ISID */
    put_be16(b->hdr + 14, r->status == ST_SUCCESS ? c->tsih : 0);
    put_be32(b->hdr + 16, bhs_itt(req));
    conn_fill_sn(c, b->hdr, true);
    b->hdr[36] = r->status >> 8;
    b->hdr[37] = r->status & 0xff;
    if (r->status == ST_SUCCESS && r->keys.len) {
        if (r->keys.len > c->mrdsl_tx && r->keys.len > 8192) log_warn("iscsi: long login response");
        tx_set_data(c, b, r->keys.buf, (uint32_t)r->keys.len, r->keys.buf);
        r->keys.buf = NULL;
    }
    tx_queue(c, b);
}

static int login_fail(struct iscsi_conn *c, const uint8_t *req, struct login_rsp *r, uint16_t status)
{
    r->status = status;
    r->transit = false;
    send_login_rsp(c, req, r);
    text_free(&r->keys);
    c->close_after_flush = true;
    log_debug("iscsi: login failed, status 0x%04x", status);
    return 0;
}

int login_handle(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t dlen)
{
    struct login_rsp r = { 0 };
    bool transit = bhs[1] & LOGIN_T, cont = bhs[1] & LOGIN_C;
    uint8_t csg = (bhs[1] >> 2) & 3, nsg = bhs[1] & 3;
    r.csg = csg; r.nsg = nsg;
    if (c->close_after_flush) return 0;
    if (++c->login_pdus > ISCSI_LOGIN_MAX_PDUS) {           /* each one is answered: bound it */
        log_info("iscsi: more than %u login PDUs from %s, dropping", ISCSI_LOGIN_MAX_PDUS, c->peer_str);
        return login_fail(c, bhs, &r, ST_INITIATOR_ERROR);
    }
    if (!c->login_started) {
        c->login_started = true;
        memcpy(c->isid, bhs + 8, 6);
        c->login_itt = bhs_itt(bhs);
        c->exp_cmd_sn = get_be32(bhs + 24);
        c->max_cmd_sn = c->exp_cmd_sn - 1 + ISCSI_CMD_WINDOW;
        c->stat_sn = get_be32(bhs + 28);      /* ExpStatSN is a fine starting point */
        c->login_stage = csg;
        if (bhs[3] > 0) return login_fail(c, bhs, &r, ST_UNSUPPORTED_VERSION);  /* version-min */
        if (get_be16(bhs + 14) != 0) return login_fail(c, bhs, &r, ST_NO_SESSION);
    } else if (memcmp(c->isid, bhs + 8, 6)) {
        return login_fail(c, bhs, &r, ST_INITIATOR_ERROR);
    }
    if (csg == 2 || csg == 3 || csg < c->login_stage) return login_fail(c, bhs, &r, ST_INITIATOR_ERROR);
    if (transit && (nsg == 2 || nsg <= csg)) return login_fail(c, bhs, &r, ST_INITIATOR_ERROR);
    if (transit && cont) return login_fail(c, bhs, &r, ST_INITIATOR_ERROR);
    c->login_stage = csg;

    /* accumulate continued text */
    if (c->login_acc_len + dlen > ISCSI_LOGIN_MAX_TEXT) return login_fail(c, bhs, &r, ST_INITIATOR_ERROR);
    char *acc = realloc(c->login_acc, c->login_acc_len + dlen + 1);
    if (!acc) return login_fail(c, bhs, &r, ST_TARGET_ERROR);
    c->login_acc = acc;
    memcpy(acc + c->login_acc_len, data, dlen);
    c->login_acc_len += dlen;
    acc[c->login_acc_len] = '\0';
    if (cont) { send_login_rsp(c, bhs, &r); return 0; }     /* empty response, wait for more */

    struct text_list kl;
    int perr = text_parse(acc, c->login_acc_len, &kl);
    c->login_acc_len = 0;
    if (perr) return login_fail(c, bhs, &r, ST_INITIATOR_ERROR);

    if (nasd_log_level >= LOG_DEBUG)
        for (unsigned i = 0; i < kl.n; i++) {
            char k[NASD_LOG_ESC_SIZE(64)], v[512];
            nasd_log_escape(kl.p[i].key, strlen(kl.p[i].key), k, sizeof k);
            nasd_log_escape(kl.p[i].value, strlen(kl.p[i].value), v, sizeof v);
            log_debug("iscsi: login key %s=%s", k, v);
        }
    uint16_t st;
    if (!c->initiator[0]) {
        st = login_identify(c, &kl, &r);
        if (st) return login_fail(c, bhs, &r, st);
    }
    if (c->tgt && atomic_load(&c->tgt->removed)) return login_fail(c, bhs, &r, ST_REMOVED);

    if (csg == 0) {
        st = login_security(c, &kl, &r);
        if (st) return login_fail(c, bhs, &r, st);
    } else {
        if (!c->auth_done && auth_required(c)) return login_fail(c, bhs, &r, ST_AUTH_FAILED);
        c->auth_done = true;
        if (!c->opt_sent_mrdsl) { text_add(&r.keys, "MaxRecvDataSegmentLength", "%u", ISCSI_OUR_MRDSL); c->opt_sent_mrdsl = true; }
        /* MaxBurstLength first: FirstBurstLength is clamped to it whatever the key order */
        for (int pass = 0; pass < 2; pass++)
            for (unsigned i = 0; i < kl.n; i++)
                if ((strcmp(kl.p[i].key, "MaxBurstLength") == 0) == (pass == 0) &&
                    !login_negotiate_key(c, kl.p[i].key, kl.p[i].value, &r.keys))
                    return login_fail(c, bhs, &r, ST_INITIATOR_ERROR);
    }
    if (r.keys.oom) return login_fail(c, bhs, &r, ST_TARGET_ERROR);

    /* stage transition: only once authentication is complete */
    r.transit = transit && (csg != 0 || c->auth_done);
    if (transit && csg == 0 && !c->auth_done && c->chap == CHAP_NONE && !auth_required(c)) {
        c->auth_done = true;                  /* no AuthMethod offered and none needed */
        r.transit = true;
    }
    if (r.transit && nsg == 3 && !c->discovery && server_session_register(c->nt->srv, c))
        return login_fail(c, bhs, &r, ST_SERVICE_UNAVAILABLE);
    if (r.transit && nsg == 3) {
        c->tsih = (uint16_t)(atomic_fetch_add(&c->nt->srv->next_tsih, 1) % 65535 + 1);
    }
    send_login_rsp(c, bhs, &r);
    text_free(&r.keys);
    if (r.transit) {
        c->login_stage = nsg;
        if (nsg == 3) {
            c->phase = PH_FFP;
            server_conn_logged_in(c->nt->srv, c);
            c->hdigest = c->neg_hdigest;      /* digests start with the next PDU */
            c->ddigest = c->neg_ddigest;
            free(c->login_acc);
            c->login_acc = NULL;
            log_info("iscsi: %s session from %s%s%s (digests %s/%s, immediate data %s)",
                     c->discovery ? "discovery" : "normal", c->ini_log, c->tgt ? " to " : "",
                     c->tgt ? c->tgt->cfg.iqn : "", c->hdigest ? "crc32c" : "none", c->ddigest ? "crc32c" : "none",
                     c->immediate_data ? "yes" : "no");
        }
    }
    return 0;
}

static void send_text_rsp(struct iscsi_conn *c, const uint8_t *req, struct text_out *o)
{
    struct tx_buf *b = tx_new(c, OP_TEXT_RSP);
    if (!b) return;
    b->hdr[1] = BHS_F;
    put_be32(b->hdr + 16, bhs_itt(req));
    put_be32(b->hdr + 20, ISCSI_RSVD_TAG);
    conn_fill_sn(c, b->hdr, true);
    if (o->len) {
        size_t len = o->len;
        if (len > c->mrdsl_tx) {                              /* cut at a pair boundary */
            len = c->mrdsl_tx;
            while (len && o->buf[len - 1]) len--;
            log_warn("iscsi: text response truncated to %zu bytes", len);
        }
        tx_set_data(c, b, o->buf, (uint32_t)len, o->buf);
        o->buf = NULL;
    }
    tx_queue(c, b);
}

int text_handle(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t dlen)
{
    struct text_out o = { 0 };
    if (bhs[1] & LOGIN_C || get_be32(bhs + 20) != ISCSI_RSVD_TAG) {
        send_text_rsp(c, bhs, &o);                            /* no continuation support */
        return 0;
    }
    char *buf = malloc(dlen + 1);
    if (!buf) return -1;
    memcpy(buf, data, dlen);
    buf[dlen] = '\0';
    struct text_list kl;
    if (text_parse(buf, dlen, &kl)) { free(buf); return -1; }
    for (unsigned i = 0; i < kl.n; i++) {
        const char *k = kl.p[i].key, *v = kl.p[i].value;
        if (!strcmp(k, "SendTargets")) {
            if (!c->discovery && strcmp(v, "") && c->tgt && strcmp(v, c->tgt->cfg.iqn)) continue;
            if (c->discovery) server_send_targets(c->nt->srv, c, v, &o);
            else if (c->tgt) {
                text_add(&o, "TargetName", "%s", c->tgt->cfg.iqn);
                text_add(&o, "TargetAddress", "%s,%d", c->local_addr, ISCSI_TPGT);
            }
        } else {
            text_add(&o, k, "NotUnderstood");
        }
    }
    free(buf);
    send_text_rsp(c, bhs, &o);
    text_free(&o);
    return 0;
}
