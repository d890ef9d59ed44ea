/* Self-test over iSCSI: a libiscsi session to the export's target (first LUN),
 * async READ/WRITE at the job's queue depth; the block driver decides what to issue. */
#define _GNU_SOURCE
#include "selftest/engine.h"
#include "util/log.h"
#include <selftest/libiscsi.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ISCSI_TIMEOUT_S 15

struct iscsi_ctx {
    struct iscsi_context *iscsi;
    int lun;
    uint32_t block;
    int closing;   /* completions delivered while closing must not touch the (freed) slots */
    char err[256];
};

/* Outlives the slot: destroying the context completes in-flight tasks as cancelled. */
struct iscsi_req {
    struct iscsi_ctx *c;
    struct st_slot *s;
};

static const char *ctx_err(void *p)
{
    struct iscsi_ctx *c = p;
    return c->err[0] ? c->err : iscsi_get_error(c->iscsi);
}

static void io_cb(struct iscsi_context *iscsi, int status, void *command_data, void *private_data)
{
    struct iscsi_req *q = private_data;
    struct scsi_task *task = command_data;
    struct st_slot *s = q->s;
    int rc = 0;
    if (!q->c->closing) {
        if (status != SCSI_STATUS_GOOD) {
            rc = status == SCSI_STATUS_CANCELLED ? -ECANCELED : status == SCSI_STATUS_TIMEOUT ? -ETIMEDOUT : -EIO;
            if (status == SCSI_STATUS_CHECK_CONDITION && task)
                snprintf(q->c->err, sizeof q->c->err, "%s at offset %llu: %s", s->write ? "WRITE" : "READ",
                         (unsigned long long)s->off, iscsi_get_error(iscsi));
        } else if (!s->write) {
            if (!task || task->datain.size < (int)s->len) rc = -EIO;
            else memcpy(s->buf, task->datain.data, s->len);
        }
    }
    if (task) scsi_free_scsi_task(task);
    int closing = q->c->closing;
    free(q);
    if (!closing) st_slot_done(s, rc);
}

static int submit(void *p, struct st_slot *s)
{
    struct iscsi_ctx *c = p;
    struct iscsi_req *q = malloc(sizeof *q);
    if (!q) return -ENOMEM;
    q->c = c;
    q->s = s;
    uint64_t lba = s->off / c->block;
    struct scsi_task *t;
    if (s->write)
        t = lba <= 0xffffffffull
            ? iscsi_write10_task(c->iscsi, c->lun, (uint32_t)lba, s->buf, s->len, c->block, 0, 0, 0, 0, 0, io_cb, q)
            : iscsi_write16_task(c->iscsi, c->lun, lba, s->buf, s->len, c->block, 0, 0, 0, 0, 0, io_cb, q);
    else
        t = lba <= 0xffffffffull
            ? iscsi_read10_task(c->iscsi, c->lun, (uint32_t)lba, s->len, c->block, 0, 0, 0, 0, 0, io_cb, q)
            : iscsi_read16_task(c->iscsi, c->lun, lba, s->len, c->block, 0, 0, 0, 0, 0, io_cb, q);
    if (!t) { free(q); return -EIO; }
    return 0;
}

static int wait_events(void *p, int timeout_ms)
{
    struct iscsi_ctx *c = p;
    struct pollfd pfd = { .fd = iscsi_get_fd(c->iscsi), .events = iscsi_which_events(c->iscsi) };
    int n = pfd.events ? poll(&pfd, 1, timeout_ms) : (poll(NULL, 0, timeout_ms), 0);
    if (n < 0 && errno != EINTR) return -1;
    /* revents 0 still runs libiscsi's timeout processing */
    if (iscsi_service(c->iscsi, n > 0 ? pfd.revents : 0) < 0) return -1;
    return 0;
}

static int flush(void *p)
{
    struct iscsi_ctx *c = p;
    struct scsi_task *t = iscsi_synchronizecache10_sync(c->iscsi, c->lun, 0, 0, 0, 0);
    int rc = t && t->status == SCSI_STATUS_GOOD ? 0 : -EIO;
    if (t) scsi_free_scsi_task(t);
    return rc;
}

static int read_capacity(struct iscsi_ctx *c, uint64_t *size, char *err, size_t errlen)
{
    struct scsi_task *t = iscsi_readcapacity16_sync(c->iscsi, c->lun);
    if (!t || t->status != SCSI_STATUS_GOOD) {
        snprintf(err, errlen, "READ CAPACITY(16) failed: %s", iscsi_get_error(c->iscsi));
        if (t) scsi_free_scsi_task(t);
        return -1;
    }
    struct scsi_readcapacity16 *rc16 = scsi_datain_unmarshall(t);
    if (!rc16 || !rc16->block_length) {
        snprintf(err, errlen, "READ CAPACITY(16): cannot parse the reply");
        scsi_free_scsi_task(t);
        return -1;
    }
    c->block = rc16->block_length;
    *size = (rc16->returned_lba + 1) * rc16->block_length;
    scsi_free_scsi_task(t);
    return 0;
}

int st_run_iscsi(struct st_run *r)
{
    struct st_target *tg = &r->tgt;
    struct iscsi_ctx c = { .lun = tg->lun };
    c.iscsi = iscsi_create_context(tg->initiator);
    if (!c.iscsi) { snprintf(r->error, sizeof r->error, "cannot create an iSCSI context"); return -1; }
    iscsi_set_targetname(c.iscsi, tg->iqn);
    iscsi_set_session_type(c.iscsi, ISCSI_SESSION_NORMAL);
    iscsi_set_header_digest(c.iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
    iscsi_set_timeout(c.iscsi, ISCSI_TIMEOUT_S);
    iscsi_set_noautoreconnect(c.iscsi, 1);
    if (tg->chap_user[0]) iscsi_set_initiator_username_pwd(c.iscsi, tg->chap_user, tg->chap_secret);
    if (tg->mutual_user[0]) iscsi_set_target_username_pwd(c.iscsi, tg->mutual_user, tg->mutual_secret);
    int rc = -1;
    uint64_t size = 0;
    if (iscsi_full_connect_sync(c.iscsi, tg->portal, tg->lun)) {
        snprintf(r->error, sizeof r->error, "login to %s at %s failed: %s", tg->iqn, tg->portal, iscsi_get_error(c.iscsi));
        goto out;
    }
    log_info("self-test %lld: logged in to %s (LUN %d) at %s", (long long)r->job_id, tg->iqn, tg->lun, tg->portal);
    if (read_capacity(&c, &size, r->error, sizeof r->error)) goto out;
    struct st_io io = { .ctx = &c, .granularity = c.block, .size = size, .preserve = 1, .submit = submit,
                        .wait = wait_events, .flush = flush, .errmsg = ctx_err };
    rc = st_run_blocks(r, &io);
    c.closing = 1; /* the slots are gone; anything still in flight completes into the void */
    iscsi_logout_sync(c.iscsi);
out:
    c.closing = 1;
    iscsi_destroy_context(c.iscsi);
    return rc;
}
