/* SCSI command flow over iSCSI: command PDU -> (immediate/unsolicited/R2T data-out)
 * -> execute inline or on a worker -> Data-In with phase-collapsed status or a SCSI
 * Response. Also task management. Runs on the connection's network thread. */
#include "iscsi/iscsi_int.h"
#include "util/log.h"
#include <stdlib.h>
#include <string.h>

bool conn_check_cmdsn(struct iscsi_conn *c, const uint8_t *bhs);

enum { TMF_COMPLETE = 0, TMF_NO_TASK = 1, TMF_NO_LUN = 2, TMF_REASSIGN_UNSUPPORTED = 4,
       TMF_NOT_SUPPORTED = 5, TMF_REJECTED = 255 };
static int send_tmf_rsp(struct iscsi_conn *c, uint32_t itt, uint8_t resp);

static unsigned hslot(uint32_t itt) { return (itt ^ (itt >> 8) ^ (itt >> 16)) % ISCSI_TASK_HASH; }

static struct iscsi_task *task_find(struct iscsi_conn *c, uint32_t itt)
{
    for (struct iscsi_task *t = c->tasks[hslot(itt)]; t; t = t->hnext)
        if (t->itt == itt) return t;
    return NULL;
}

static void task_unhash(struct iscsi_task *t)
{
    if (!t->in_hash) return;
    struct iscsi_conn *c = t->conn;
    struct iscsi_task **pp = &c->tasks[hslot(t->itt)];
    while (*pp && *pp != t) pp = &(*pp)->hnext;
    if (*pp) *pp = t->hnext;
    t->in_hash = false;
    c->ntasks--;
}

/* Data-out buffers held, per connection and in all (a client can make the target hold
 * a command's buffer by never sending its last Data-Out). */
static void dout_account(struct iscsi_conn *c, int64_t delta)
{
    c->dout_bytes += (uint64_t)delta;
    atomic_fetch_add(&c->nt->srv->dout_total, (uint64_t)delta);
    atomic_fetch_add(&c->dpeer->bytes, (uint64_t)delta);
}

/* Whether want more bytes of data-out buffers fit: the connection's and its address's
 * caps, and the global one, which an address holding little may exceed (up to twice):
 * clients that hold the global pool do not stop another from writing. */
static bool dout_fits(struct iscsi_conn *c, uint64_t want)
{
    struct iscsi_server *s = c->nt->srv;
    uint64_t addr = atomic_load(&c->dpeer->bytes) + want, all = atomic_load(&s->dout_total) + want;
    if (c->dout_bytes + want > ISCSI_MAX_DOUT_BYTES || addr > ISCSI_MAX_DOUT_ADDR) return false;
    return all <= ISCSI_MAX_DOUT_GLOBAL || (addr <= ISCSI_DOUT_SHARE && all <= 2 * ISCSI_MAX_DOUT_GLOBAL);
}

static void task_free(struct iscsi_task *t)
{
    task_unhash(t);
    if (t->dout) dout_account(t->conn, -(int64_t)t->out_len);
    free(t->dout);
    free(t->sc.din);
    free(t);
}

static uint64_t cpu_now(void) { return nasd_thread_cpu_ns(); }
_Thread_local uint64_t iscsi_task_cpu_measured;
/* CPU since the task's mark, also counted per thread so the network loop can charge
 * the rest of an event (socket I/O, PDU parsing) to the export without counting twice. */
static uint64_t cpu_since_mark(struct iscsi_task *t)
{
    uint64_t d = cpu_now() - t->cpu_mark;
    iscsi_task_cpu_measured += d;
    return d;
}
static void cpu_pause(struct iscsi_task *t) { t->cpu_ns += cpu_since_mark(t); }

/* ---- responses ---- */

static void record_stats(struct iscsi_task *t)
{
    struct iscsi_conn *c = t->conn;
    if (!c->tgt || !c->tgt->stats) return;
    t->cpu_ns += cpu_since_mark(t);
    nasd_stats_record(c->tgt->stats, t->sc.kind, t->sc.io_bytes, nasd_now_ns() - t->t_arrive,
                      t->cpu_ns, t->sc.status != SAM_GOOD);
}

static void send_scsi_response(struct iscsi_conn *c, struct iscsi_task *t, uint8_t rflags, uint32_t resid, uint32_t expdatasn)
{
    struct tx_buf *b = tx_new(c, OP_SCSI_RSP);
    if (!b) return;
    b->hdr[1] = BHS_F | rflags;
    b->hdr[3] = t->sc.status;
    put_be32(b->hdr + 16, t->itt);
    conn_fill_sn(c, b->hdr, true);
    put_be32(b->hdr + 36, expdatasn);
    put_be32(b->hdr + 44, resid);
    if (t->sc.sense_len) {
        put_be16(b->inl, t->sc.sense_len);
        memcpy(b->inl + 2, t->sc.sense, t->sc.sense_len);
        tx_set_data(c, b, b->inl, 2u + t->sc.sense_len, NULL);
    }
    tx_queue(c, b);
}

/* An aborted task came back from its worker: once none is out, the held TMF responses
 * go (the initiator may then rewrite what the aborted commands were writing). */
static void abort_returned(struct iscsi_conn *c)
{
    if (--c->aborting || c->dead) return;
    for (unsigned i = 0; i < c->ntmf_wait; i++) {
        send_tmf_rsp(c, c->tmf_wait[i].itt, c->tmf_wait[i].resp);
        if (c->tmf_wait[i].close_after) c->close_after_flush = true;
    }
    c->ntmf_wait = 0;
}

/* Sends the result of a finished task and frees it. */
static void task_respond(struct iscsi_task *t)
{
    struct iscsi_conn *c = t->conn;
    struct scsi_cmd *sc = &t->sc;
    if (t->aborted || c->dead) {
        bool waited = t->abort_waits;
        task_free(t);
        if (waited) abort_returned(c);
        return;
    }
    task_unhash(t);
    uint8_t rflags = 0;
    uint32_t resid = 0;
    if (t->res_flags) {
        rflags = t->res_flags; resid = t->res_count;
    } else if (sc->status == SAM_GOOD && sc->dir == DIR_IN) {
        if (sc->din_full > t->edtl) { rflags = DIN_O; resid = sc->din_full - t->edtl; }
        else if (sc->din_full < t->edtl) { rflags = DIN_U; resid = t->edtl - sc->din_full; }
    } else if (sc->status == SAM_GOOD && sc->dir == DIR_NONE && t->edtl) {
        rflags = DIN_U; resid = t->edtl;
    }
    uint32_t datasn = 0;
    if (sc->din_len) {
        uint32_t off = 0, seq = 0;
        uint8_t *din = sc->din;
        sc->din = NULL;                                  /* owned by the last Data-In now */
        while (off < sc->din_len) {
            uint32_t n = sc->din_len - off;
            if (n > c->mrdsl_tx) n = c->mrdsl_tx;
            if (seq + n > c->max_burst) n = c->max_burst - seq;
            bool last = off + n == sc->din_len;
            struct tx_buf *b = tx_new(c, OP_DATA_IN);
            if (!b) { if (last) free(din); break; }
            seq += n;
            uint8_t fl = 0;
            if (last || seq == c->max_burst) { fl |= BHS_F; seq = 0; }
            bool status_here = last && sc->status == SAM_GOOD && !sc->sense_len;
            if (status_here) { fl |= DIN_S | rflags; b->hdr[3] = sc->status; }
            b->hdr[1] = fl;
            memcpy(b->hdr + 8, t->lun_field, 8);
            put_be32(b->hdr + 16, t->itt);
            put_be32(b->hdr + 20, ISCSI_RSVD_TAG);
            conn_fill_sn(c, b->hdr, status_here);
            if (!status_here) put_be32(b->hdr + 24, 0);
            put_be32(b->hdr + 36, datasn++);
            put_be32(b->hdr + 40, off);
            if (status_here) put_be32(b->hdr + 44, resid);
            tx_set_data(c, b, din + off, n, last ? din : NULL);
            tx_queue(c, b);
            off += n;
            if (last && status_here) { record_stats(t); task_free(t); return; }
        }
    }
    send_scsi_response(c, t, rflags, resid, sc->dir == DIR_IN ? datasn : t->r2tsn);
    record_stats(t);
    task_free(t);
}

static void send_r2t(struct iscsi_conn *c, struct iscsi_task *t)
{
    uint32_t len = t->out_len - t->recv;
    if (len > c->max_burst) len = c->max_burst;
    t->ttt = c->next_ttt++;
    if (t->ttt == ISCSI_RSVD_TAG) t->ttt = c->next_ttt++;
    t->seq_end = t->recv + len;
    t->exp_datasn = 0;
    t->state = TS_WAIT_R2T;
    struct tx_buf *b = tx_new(c, OP_R2T);
    if (!b) return;
    b->hdr[1] = BHS_F;
    memcpy(b->hdr + 8, t->lun_field, 8);
    put_be32(b->hdr + 16, t->itt);
    put_be32(b->hdr + 20, t->ttt);
    conn_fill_sn(c, b->hdr, false);
    put_be32(b->hdr + 36, t->r2tsn++);
    put_be32(b->hdr + 40, t->recv);
    put_be32(b->hdr + 44, len);
    tx_queue(c, b);
}

static void task_execute(struct iscsi_task *t)
{
    struct iscsi_conn *c = t->conn;
    if (t->sc.dir == DIR_OUT) {
        t->sc.dout = t->dout;
        t->sc.dout_len = t->recv < t->sc.dout_need ? t->recv : t->sc.dout_need;
    }
    t->state = TS_EXEC;
    if (t->sc.slow) {
        cpu_pause(t);
        if (t->sc.dir == DIR_IN) {               /* output to come: counts against the bound */
            t->din_hold = t->sc.din_full < t->sc.din_max ? t->sc.din_full : t->sc.din_max;
            c->din_pending += t->din_hold;
            conn_queued_add(c, t->din_hold);
        }
        atomic_fetch_add(&c->refs, 1);
        worker_submit(c->nt->srv, t);
        return;
    }
    /* counted, then the fence read, as on a worker (server_session_register) */
    atomic_fetch_add(&c->executing, 1);
    if (atomic_load(&c->fenced)) t->aborted = true;   /* a newer login took the nexus: not run */
    else scsi_execute(&t->sc);
    atomic_fetch_sub(&c->executing, 1);
    task_respond(t);
}

/* Worker finished: back on the connection's thread. */
void conn_task_done(struct iscsi_task *t)
{
    struct iscsi_conn *c = t->conn;
    t->cpu_mark = cpu_now();
    c->din_pending -= t->din_hold;
    conn_queued_add(c, -(int64_t)t->din_hold);
    task_respond(t);
    conn_flush(c);
    conn_resume_rx(c);
    conn_put(c);
}

/* Complete without executing (prepare failed or protocol-level error). */
static void task_finish_early(struct iscsi_task *t)
{
    t->sc.din_len = 0;
    task_respond(t);
}

int task_scsi_cmd(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t dlen)
{
    uint64_t arrive = nasd_now_ns();
    if (!conn_check_cmdsn(c, bhs)) return 0;
    uint32_t itt = bhs_itt(bhs);
    if (itt == ISCSI_RSVD_TAG) return -1;
    struct iscsi_task *old = task_find(c, itt);
    if (old) { log_debug("iscsi: ITT 0x%x already in use", itt); return -1; }
    if (c->ntasks >= ISCSI_MAX_TASKS) { log_debug("iscsi: too many tasks"); return -1; }
    struct iscsi_task *t = calloc(1, sizeof *t);
    if (!t) return -1;
    t->cpu_mark = cpu_now();
    t->t_arrive = arrive;
    t->conn = c;
    t->itt = itt;
    t->flags = bhs[1];
    t->edtl = get_be32(bhs + 20);
    t->cmdsn = get_be32(bhs + 24);
    memcpy(t->lun_field, bhs + 8, 8);
    memcpy(t->cdb, bhs + 32, 16);
    t->in_hash = true;
    t->hnext = c->tasks[hslot(itt)];
    c->tasks[hslot(itt)] = t;
    c->ntasks++;

    struct iscsi_tgt *tg = c->tgt;
    struct scsi_cmd *sc = &t->sc;
    sc->cdb = t->cdb;
    sc->lu = tgt_find_lu(tg, lun_decode(t->lun_field));
    if (sc->lu) sc->ua_gen = &c->lu_gen[sc->lu - tg->lus];
    sc->all_lus = tg->lus;
    sc->nlus = tg->nlus;
    sc->nexus = c->nexus;
    sc->initiator = c->initiator;
    sc->target_name = tg->cfg.iqn;
    sc->tpgt = ISCSI_TPGT;
    sc->din_max = (t->flags & CMD_R) ? t->edtl : 0;

    bool wflag = t->flags & CMD_W;
    if (dlen && (!wflag || !c->immediate_data || dlen > t->edtl || dlen > c->first_burst)) {
        log_debug("iscsi: bad immediate data (%u bytes)", dlen);
        return -1;
    }
    if (scsi_prepare(sc)) { task_finish_early(t); return 0; }

    /* Direction / length consistency between iSCSI and the CDB. Like FCP, a length
     * mismatch is processed normally with data beyond EDTL neither transferred nor
     * used, and reported as residual overflow/underflow. */
    if (sc->dir == DIR_OUT && (t->flags & CMD_R)) {
        scsi_set_sense(sc, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IU);
        task_finish_early(t);
        return 0;
    }
    uint32_t want = 0;                                   /* data-out bytes to receive */
    if (wflag) want = t->edtl;
    /* The one place where the data-out the initiator will send (EDTL, 0 without the W
     * bit) is checked against what the command needs: executors that compare or
     * replicate the payload (VERIFY with BYTCHK, WRITE SAME, COMPARE AND WRITE) never
     * see a shorter buffer. */
    if (sc->dir == DIR_OUT && want != sc->dout_need) {
        if (sc->dout_rule == DOUT_EXACT || (sc->dout_rule == DOUT_WHOLE && want < sc->dout_need)) {
            scsi_set_sense_field(sc, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB, true, sc->len_field, -1);
            task_finish_early(t);
            return 0;
        }
        if (want < sc->dout_need) { t->res_flags = DIN_O; t->res_count = sc->dout_need - want; }
        else { t->res_flags = DIN_U; t->res_count = want - sc->dout_need; }
    }
    if (want > 2 * SCSI_MAX_XFER) {
        scsi_set_sense(sc, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IU);
        task_finish_early(t);
        return 0;
    }
    if (want && !dout_fits(c, want)) {
        sc->status = SAM_TASK_SET_FULL;                  /* retry later */
        t->res_flags = 0;
        task_finish_early(t);
        return 0;
    }
    t->out_len = want;
    if (want) {
        t->dout = malloc(want);
        if (!t->dout) { scsi_set_sense(sc, SK_HARDWARE_ERROR, ASC_INTERNAL_FAILURE); task_finish_early(t); return 0; }
        dout_account(c, want);
        t->dout_ns = nasd_now_ns();
        memcpy(t->dout, data, dlen);
        t->recv = dlen;
        if (!(t->flags & BHS_F)) {
            if (c->initial_r2t) return -1;               /* unsolicited data not allowed */
            uint32_t unsol = c->first_burst < want ? c->first_burst : want;
            if (t->recv >= unsol) return -1;
            t->seq_end = unsol;
            t->exp_datasn = 0;
            t->state = TS_WAIT_UNSOL;
            t->ttt = ISCSI_RSVD_TAG;
            cpu_pause(t);
            return 0;
        }
        if (t->recv < want) { send_r2t(c, t); cpu_pause(t); return 0; }
    }
    task_execute(t);
    return 0;
}

int task_data_out(struct iscsi_conn *c, const uint8_t *bhs, const uint8_t *data, uint32_t dlen)
{
    uint32_t itt = bhs_itt(bhs), ttt = get_be32(bhs + 20);
    struct iscsi_task *t = task_find(c, itt);
    if (!t) { log_debug("iscsi: Data-Out for unknown ITT 0x%x ignored", itt); return 0; }
    bool unsol = ttt == ISCSI_RSVD_TAG;
    if (unsol ? t->state != TS_WAIT_UNSOL : (t->state != TS_WAIT_R2T || ttt != t->ttt)) {
        if (t->state == TS_EXEC || t->state == TS_DONE) return 0;   /* stray data after early status */
        log_debug("iscsi: unexpected Data-Out (ttt 0x%x)", ttt);
        return -1;
    }
    uint32_t datasn = get_be32(bhs + 36), boff = get_be32(bhs + 40);
    if (datasn != t->exp_datasn) { log_debug("iscsi: DataSN %u, expected %u", datasn, t->exp_datasn); return -1; }
    if (boff != t->recv || dlen > t->seq_end - t->recv) { log_debug("iscsi: Data-Out offset/length error"); return -1; }
    t->cpu_mark = cpu_now();
    t->dout_ns = nasd_now_ns();
    memcpy(t->dout + t->recv, data, dlen);
    t->recv += dlen;
    t->exp_datasn++;
    if (t->aborted) {                              /* ABORT TASK waiting for this sequence */
        if (!(bhs[1] & BHS_F)) return 0;
        uint32_t tmf_itt = t->tmf_itt;
        task_free(t);
        return send_tmf_rsp(c, tmf_itt, TMF_COMPLETE);
    }
    if (!(bhs[1] & BHS_F)) { cpu_pause(t); return 0; }
    if (t->recv < t->out_len) {
        if (t->recv != t->seq_end && !unsol) return -1;
        send_r2t(c, t);
        cpu_pause(t);
        return 0;
    }
    task_execute(t);
    return 0;
}

void task_free_all(struct iscsi_conn *c)
{
    for (unsigned i = 0; i < ISCSI_TASK_HASH; i++) {
        struct iscsi_task *t = c->tasks[i];
        while (t) {
            struct iscsi_task *n = t->hnext;
            t->in_hash = false;
            c->ntasks--;
            if (t->state == TS_EXEC && t->sc.slow) t->aborted = true;  /* worker frees it */
            else { if (t->dout) dout_account(c, -(int64_t)t->out_len); free(t->dout); free(t->sc.din); free(t); }
            t = n;
        }
        c->tasks[i] = NULL;
    }
}

/* Abort one task: unhash it; a task on a worker is freed when it comes back, and TMF
 * responses wait for that (abort_returned): it may be writing. */
static void task_abort(struct iscsi_task *t)
{
    if (t->tmf_waits) {   /* an ABORT TASK waiting for this task's R2T data: answered now */
        t->tmf_waits = false;
        send_tmf_rsp(t->conn, t->tmf_itt, TMF_COMPLETE);
    }
    if (t->state == TS_EXEC && t->sc.slow) {
        task_unhash(t);
        if (!t->abort_waits) { t->abort_waits = true; t->conn->aborting++; }
        t->aborted = true;
        return;
    }
    task_free(t);
}

static void abort_lun(struct iscsi_conn *c, const uint8_t *lun_field, bool all_luns)
{
    for (unsigned i = 0; i < ISCSI_TASK_HASH; i++) {
        struct iscsi_task *t = c->tasks[i];
        while (t) {
            struct iscsi_task *n = t->hnext;
            if (all_luns || !memcmp(t->lun_field, lun_field, 8)) task_abort(t);
            t = n;
        }
    }
}


int task_tmf(struct iscsi_conn *c, const uint8_t *bhs)
{
    uint8_t fn = bhs[1] & 0x7f;
    uint8_t resp = TMF_COMPLETE;
    struct iscsi_tgt *tg = c->tgt;
    struct iscsi_lu *lu = tgt_find_lu(tg, lun_decode(bhs + 8));
    bool close_after = false;
    switch (fn) {
    case 1: {                                                 /* ABORT TASK */
        uint32_t rtt = get_be32(bhs + 20), refsn = get_be32(bhs + 32);
        struct iscsi_task *t = task_find(c, rtt);
        if (t && !memcmp(t->lun_field, bhs + 8, 8) && t->state == TS_WAIT_R2T && !t->aborted) {
            /* An R2T is outstanding: answer once its Data-Out sequence has arrived
             * (RFC 7143 11.5.1), so the initiator never sends data for a dead task. */
            t->aborted = true;
            t->tmf_itt = bhs_itt(bhs);
            t->tmf_waits = true;
            return 0;
        }
        if (t && !memcmp(t->lun_field, bhs + 8, 8)) task_abort(t);
        else if (t) resp = TMF_NO_TASK;
        else resp = TMF_NO_TASK;                 /* already completed (or never seen) */
        (void)refsn;
        break;
    }
    case 2: case 4:                                           /* ABORT / CLEAR TASK SET */
        if (!lu) { resp = TMF_NO_LUN; break; }
        abort_lun(c, bhs + 8, false);
        break;
    case 3:                                                   /* CLEAR ACA: ACA unsupported */
        resp = lu ? TMF_NOT_SUPPORTED : TMF_NO_LUN;
        break;
    case 5:                                                   /* LOGICAL UNIT RESET */
        if (!lu) { resp = TMF_NO_LUN; break; }
        abort_lun(c, bhs + 8, false);
        iscsi_lu_release_nexus(lu, NULL);
        atomic_fetch_add(&lu->reset_gen, 1);
        break;
    case 6: case 7:                                           /* TARGET WARM / COLD RESET */
        abort_lun(c, NULL, true);
        for (unsigned i = 0; i < tg->nlus; i++) {
            iscsi_lu_release_nexus(&tg->lus[i], NULL);
            atomic_fetch_add(&tg->lus[i].reset_gen, 1);
        }
        close_after = fn == 7;
        break;
    case 8:                                                   /* TASK REASSIGN (ERL 0) */
        resp = TMF_REASSIGN_UNSUPPORTED;
        break;
    default:
        resp = TMF_REJECTED;
    }
    if (c->aborting) {   /* an aborted command still runs on a worker: answer when it is back */
        if (c->ntmf_wait == sizeof c->tmf_wait / sizeof c->tmf_wait[0]) return -1;
        c->tmf_wait[c->ntmf_wait++] = (struct tmf_wait){ bhs_itt(bhs), resp, close_after };
        return 0;
    }
    if (send_tmf_rsp(c, bhs_itt(bhs), resp)) return -1;
    if (close_after) c->close_after_flush = true;
    return 0;
}

static int send_tmf_rsp(struct iscsi_conn *c, uint32_t itt, uint8_t resp)
{
    struct tx_buf *b = tx_new(c, OP_TMF_RSP);
    if (!b) return -1;
    b->hdr[1] = BHS_F;
    b->hdr[2] = resp;
    put_be32(b->hdr + 16, itt);
    conn_fill_sn(c, b->hdr, true);
    tx_queue(c, b);
    return 0;
}
