/* Persistent reservations (SPC-4 5.12, PERSISTENT RESERVE IN/OUT) and the
 * reservation conflict check applied to every command. State lives in the LU and
 * is keyed by I_T nexus ("initiator,i,0xISID"). Not persisted across restarts. */
#include "iscsi/scsi.h"
#include "iscsi/pdu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PR_WE = 1, PR_EA = 3, PR_WERO = 5, PR_EARO = 6, PR_WEAR = 7, PR_EAAR = 8 };

static bool type_valid(uint8_t t)
{
    return t == PR_WE || t == PR_EA || t == PR_WERO || t == PR_EARO || t == PR_WEAR || t == PR_EAAR;
}
static bool all_registrants(uint8_t t) { return t == PR_WEAR || t == PR_EAAR; }

static int find_reg(const struct iscsi_lu *lu, const char *nexus)
{
    for (unsigned i = 0; i < lu->nregs; i++)
        if (!strcmp(lu->regs[i].nexus, nexus)) return (int)i;
    return -1;
}

static bool is_holder(const struct iscsi_lu *lu, const char *nexus)
{
    if (!lu->pr_held) return false;
    if (all_registrants(lu->pr_type)) return find_reg(lu, nexus) >= 0;
    return !strcmp(lu->pr_holder, nexus);
}

static void update_flags(struct iscsi_lu *lu)
{
    lu->any_rsv = lu->res6_held || lu->pr_held || lu->nregs;
}

static void remove_reg(struct iscsi_lu *lu, unsigned i)
{
    bool was_holder = lu->pr_held && !all_registrants(lu->pr_type) && !strcmp(lu->pr_holder, lu->regs[i].nexus);
    lu->regs[i] = lu->regs[--lu->nregs];
    if (was_holder) lu->pr_held = false;
    if (lu->pr_held && all_registrants(lu->pr_type) && lu->nregs == 0) lu->pr_held = false;
}

static bool is_write_op(uint8_t op)
{
    switch (op) {
    case 0x0a: case 0x2a: case 0xaa: case 0x8a: case 0x2e: case 0xae: case 0x8e:
    case 0x41: case 0x93: case 0x89: case 0x42: case 0x35: case 0x91: case 0x8b:
    case 0x15: case 0x55:
        return true;
    }
    return false;
}

static bool is_read_op(uint8_t op)
{
    switch (op) {
    case 0x08: case 0x28: case 0xa8: case 0x88: case 0x2f: case 0xaf: case 0x8f:
    case 0x34: case 0x90:
        return true;
    }
    return false;
}

bool pr_conflict(struct scsi_cmd *c)
{
    struct iscsi_lu *lu = c->lu;
    if (!__atomic_load_n(&lu->any_rsv, __ATOMIC_ACQUIRE)) return false;
    uint8_t op = c->cdb[0];
    bool conflict = false;
    pthread_mutex_lock(&lu->lock);
    if (lu->res6_held && strcmp(lu->res6_holder, c->nexus)) {
        /* SPC-2 reservation: everything but a few inquiry-type commands conflicts */
        conflict = !(op == 0x12 || op == 0xa0 || op == 0x03 || op == 0x17 || op == 0x25 || op == 0x9e || op == 0xa3);
    } else if (lu->pr_held && !is_holder(lu, c->nexus)) {
        bool registered = find_reg(lu, c->nexus) >= 0;
        bool w = is_write_op(op), r = is_read_op(op);
        switch (lu->pr_type) {
        case PR_WE: conflict = w; break;
        case PR_EA: conflict = w || r; break;
        case PR_WERO: case PR_WEAR: conflict = w && !registered; break;
        case PR_EARO: case PR_EAAR: conflict = (w || r) && !registered; break;
        }
    }
    pthread_mutex_unlock(&lu->lock);
    if (conflict) c->status = SAM_RESERVATION_CONFLICT;
    return conflict;
}

static void invalid_cdb(struct scsi_cmd *c, uint16_t byte, int bit)
{
    scsi_set_sense_field(c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB, true, byte, bit);
}

/* TransportID for iSCSI (format 00b): initiator name, NUL padded to 4 bytes. */
static uint32_t transport_id(const char *initiator, uint8_t *p)
{
    uint32_t l = (uint32_t)strlen(initiator) + 1;
    uint32_t len = (l + 3) & ~3u;
    if (len < 20) len = 20;
    memset(p, 0, 4 + len);
    p[0] = 0x05;
    put_be16(p + 2, (uint16_t)len);
    memcpy(p + 4, initiator, l - 1);
    return 4 + len;
}

void pr_in(struct scsi_cmd *c)
{
    struct iscsi_lu *lu = c->lu;
    uint8_t sa = c->cdb[1] & 0x1f;
    uint32_t alloc = get_be16(c->cdb + 7);
    if (sa > 3) { invalid_cdb(c, 1, 4); return; }
    pthread_mutex_lock(&lu->lock);
    size_t cap = 8 + (size_t)lu->nregs * (24 + 4 + 256) + 64;
    uint8_t *d = calloc(1, cap);
    if (!d) { pthread_mutex_unlock(&lu->lock); scsi_set_sense(c, SK_HARDWARE_ERROR, ASC_INTERNAL_FAILURE); return; }
    uint32_t n = 8;
    put_be32(d, lu->pr_generation);
    switch (sa) {
    case 0:                                                  /* READ KEYS */
        for (unsigned i = 0; i < lu->nregs; i++, n += 8) put_be64(d + n, lu->regs[i].key);
        put_be32(d + 4, n - 8);
        break;
    case 1:                                                  /* READ RESERVATION */
        if (lu->pr_held) {
            uint64_t key = 0;
            if (!all_registrants(lu->pr_type)) {
                int h = find_reg(lu, lu->pr_holder);
                if (h >= 0) key = lu->regs[h].key;
            }
            put_be64(d + 8, key);
            d[8 + 13] = lu->pr_type & 0x0f;                  /* scope LU_SCOPE(0) | type */
            n += 16;
        }
        put_be32(d + 4, n - 8);
        break;
    case 2:                                                  /* REPORT CAPABILITIES */
        memset(d, 0, 8);
        put_be16(d, 8);
        d[2] = 0x10;                                         /* CRH */
        d[3] = 0x80;                                         /* TMV: type mask valid */
        d[4] = 0x80 | 0x40 | 0x20 | 0x08 | 0x02;             /* WEAR EARO WERO EA WE */
        d[5] = 0x01;                                         /* EAAR */
        n = 8;
        break;
    case 3:                                                  /* READ FULL STATUS */
        for (unsigned i = 0; i < lu->nregs; i++) {
            uint8_t *e = d + n;
            put_be64(e, lu->regs[i].key);
            if (is_holder(lu, lu->regs[i].nexus)) { e[12] = 0x01; e[13] = lu->pr_type & 0x0f; }
            put_be16(e + 18, 1);                             /* relative target port */
            uint32_t tl = transport_id(lu->regs[i].initiator, e + 24);
            put_be32(e + 20, tl);
            n += 24 + tl;
        }
        put_be32(d + 4, n - 8);
        break;
    }
    pthread_mutex_unlock(&lu->lock);
    scsi_din_copy(c, d, n, alloc);
    free(d);
}

void pr_out(struct scsi_cmd *c)
{
    struct iscsi_lu *lu = c->lu;
    const uint8_t *cdb = c->cdb;
    uint8_t sa = cdb[1] & 0x1f, scope = cdb[2] >> 4, type = cdb[2] & 0x0f;
    if (sa > 7) { invalid_cdb(c, 1, 4); return; }
    if (sa == 7) { invalid_cdb(c, 1, 4); return; }           /* REGISTER AND MOVE: unsupported */
    if (c->dout_len != 24) { scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH); return; }
    const uint8_t *p = c->dout;
    uint64_t key = get_be64(p), sakey = get_be64(p + 8);
    uint8_t flags = p[20];
    if (flags & 0x08) {                                      /* SPEC_I_PT unsupported */
        scsi_set_sense_field(c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_PARAM, false, 20, 3);
        return;
    }
    if (flags & 0x01) {                                      /* APTPL: cannot persist */
        scsi_set_sense_field(c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_PARAM, false, 20, 0);
        return;
    }
    bool needs_type = sa == 1 || sa == 2 || sa == 4 || sa == 5;
    if (needs_type && scope != 0) { invalid_cdb(c, 2, 7); return; }
    if (needs_type && !type_valid(type)) { invalid_cdb(c, 2, 3); return; }

    pthread_mutex_lock(&lu->lock);
    if (lu->res6_held && strcmp(lu->res6_holder, c->nexus)) { c->status = SAM_RESERVATION_CONFLICT; goto out; }
    int me = find_reg(lu, c->nexus);
    switch (sa) {
    case 0: case 6:                                          /* REGISTER (AND IGNORE EXISTING KEY) */
        if (me < 0) {
            if (sa == 0 && key != 0) { c->status = SAM_RESERVATION_CONFLICT; break; }
            if (sakey == 0) break;
            if (lu->nregs >= PR_MAX_REGS) { scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_INSUFFICIENT_REG_RESOURCES); break; }
            struct pr_reg *nr = realloc(lu->regs, (lu->nregs + 1) * sizeof *nr);
            if (!nr) { scsi_set_sense(c, SK_HARDWARE_ERROR, ASC_INTERNAL_FAILURE); break; }
            lu->regs = nr;
            memset(&nr[lu->nregs], 0, sizeof *nr);
            snprintf(nr[lu->nregs].nexus, NEXUS_LEN, "%s", c->nexus);
            snprintf(nr[lu->nregs].initiator, sizeof nr->initiator, "%s", c->initiator ? c->initiator : "");
            nr[lu->nregs].key = sakey;
            lu->nregs++;
            lu->pr_generation++;
        } else {
            if (sa == 0 && key != lu->regs[me].key) { c->status = SAM_RESERVATION_CONFLICT; break; }
            if (sakey == 0) remove_reg(lu, (unsigned)me);
            else lu->regs[me].key = sakey;
            lu->pr_generation++;
        }
        break;
    case 1:                                                  /* RESERVE */
        if (me < 0 || lu->regs[me].key != key) { c->status = SAM_RESERVATION_CONFLICT; break; }
        if (lu->pr_held) {
            if (!is_holder(lu, c->nexus) || lu->pr_type != type) c->status = SAM_RESERVATION_CONFLICT;
            break;
        }
        lu->pr_held = true;
        lu->pr_type = type;
        snprintf(lu->pr_holder, NEXUS_LEN, "%s", c->nexus);
        break;
    case 2:                                                  /* RELEASE */
        if (me < 0 || lu->regs[me].key != key) { c->status = SAM_RESERVATION_CONFLICT; break; }
        if (!lu->pr_held || !is_holder(lu, c->nexus)) break;
        if (lu->pr_type != type) { scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_INVALID_RELEASE_PR); break; }
        lu->pr_held = false;
        break;
    case 3:                                                  /* CLEAR */
        if (me < 0 || lu->regs[me].key != key) { c->status = SAM_RESERVATION_CONFLICT; break; }
        lu->nregs = 0;
        lu->pr_held = false;
        lu->pr_generation++;
        break;
    case 4: case 5: {                                        /* PREEMPT (AND ABORT) */
        if (me < 0 || lu->regs[me].key != key) { c->status = SAM_RESERVATION_CONFLICT; break; }
        bool holder_key = false;
        if (lu->pr_held) {
            if (all_registrants(lu->pr_type)) holder_key = true;
            else { int h = find_reg(lu, lu->pr_holder); holder_key = h >= 0 && lu->regs[h].key == sakey; }
        }
        if (lu->pr_held && all_registrants(lu->pr_type) && sakey == 0) {
            /* preempt everyone else, take the reservation */
            for (unsigned i = 0; i < lu->nregs; )
                if (strcmp(lu->regs[i].nexus, c->nexus)) lu->regs[i] = lu->regs[--lu->nregs]; else i++;
            lu->pr_type = type;
            snprintf(lu->pr_holder, NEXUS_LEN, "%s", c->nexus);
            lu->pr_generation++;
            break;
        }
        if (sakey == 0) { scsi_set_sense_field(c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_PARAM, false, 8, -1); break; }
        unsigned removed = 0;
        for (unsigned i = 0; i < lu->nregs; ) {
            if (lu->regs[i].key == sakey && strcmp(lu->regs[i].nexus, c->nexus)) {
                lu->regs[i] = lu->regs[--lu->nregs]; removed++;
            } else i++;
        }
        if (lu->pr_held && holder_key && !all_registrants(lu->pr_type)) {
            lu->pr_type = type;
            snprintf(lu->pr_holder, NEXUS_LEN, "%s", c->nexus);
        } else if (!removed && !holder_key) {
            c->status = SAM_RESERVATION_CONFLICT;
            break;
        }
        lu->pr_generation++;
        break;
    }
    }
out:
    update_flags(lu);
    pthread_mutex_unlock(&lu->lock);
}
