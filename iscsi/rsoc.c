/* REPORT SUPPORTED OPERATION CODES (SPC-4 6.35): the table of commands this target
 * implements, with CDB usage bitmaps (bits the device server looks at). */
#include "iscsi/scsi.h"
#include "iscsi/pdu.h"
#include <stdlib.h>
#include <string.h>

struct opinfo {
    uint8_t op;
    bool has_sa;
    uint16_t sa;
    uint8_t len;
    uint8_t usage[16];
};

#define RW10(op, b1) { op, false, 0, 10, { op, b1, 0xff, 0xff, 0xff, 0xff, 0x00, 0xff, 0xff, 0x00 } }
#define RW12(op, b1) { op, false, 0, 12, { op, b1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00 } }
#define RW16(op, b1) { op, false, 0, 16, { op, b1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, \
                                            0xff, 0xff, 0xff, 0xff, 0x00, 0x00 } }
#define SA16(op, sa) { op, true, sa, 16, { op, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, \
                                            0xff, 0xff, 0xff, 0xff, 0x00, 0x00 } }
#define PRIN(sa)  { 0x5e, true, sa, 10, { 0x5e, 0x1f, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00 } }
#define PROUT(sa) { 0x5f, true, sa, 10, { 0x5f, 0x1f, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00 } }

static const struct opinfo ops[] = {
    { 0x00, false, 0, 6, { 0x00, 0, 0, 0, 0, 0 } },                      /* TEST UNIT READY */
    { 0x03, false, 0, 6, { 0x03, 0x01, 0, 0, 0xff, 0 } },                /* REQUEST SENSE */
    { 0x08, false, 0, 6, { 0x08, 0x1f, 0xff, 0xff, 0xff, 0 } },          /* READ(6) */
    { 0x0a, false, 0, 6, { 0x0a, 0x1f, 0xff, 0xff, 0xff, 0 } },          /* WRITE(6) */
    { 0x12, false, 0, 6, { 0x12, 0x01, 0xff, 0xff, 0xff, 0 } },          /* INQUIRY */
    { 0x16, false, 0, 6, { 0x16, 0, 0, 0, 0, 0 } },                      /* RESERVE(6) */
    { 0x17, false, 0, 6, { 0x17, 0, 0, 0, 0, 0 } },                      /* RELEASE(6) */
    { 0x1a, false, 0, 6, { 0x1a, 0x08, 0xff, 0xff, 0xff, 0 } },          /* MODE SENSE(6) */
    { 0x1b, false, 0, 6, { 0x1b, 0, 0, 0, 0, 0 } },                      /* START STOP UNIT */
    { 0x25, false, 0, 10, { 0x25, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x01, 0 } }, /* READ CAPACITY(10) */
    RW10(0x28, 0x18), RW10(0x2a, 0x18),                                  /* READ/WRITE(10): DPO FUA */
    RW10(0x2e, 0x12), RW10(0x2f, 0x16),                                  /* WRITE AND VERIFY, VERIFY */
    RW10(0x34, 0x02), RW10(0x35, 0x02),                                  /* PRE-FETCH, SYNC CACHE */
    RW10(0x41, 0x08),                                                    /* WRITE SAME(10): UNMAP */
    { 0x42, false, 0, 10, { 0x42, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0 } },   /* UNMAP */
    { 0x5a, false, 0, 10, { 0x5a, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0 } }, /* MODE SENSE(10) */
    PRIN(0), PRIN(1), PRIN(2), PRIN(3),
    PROUT(0), PROUT(1), PROUT(2), PROUT(3), PROUT(4), PROUT(5), PROUT(6),
    RW16(0x88, 0x18), RW16(0x8a, 0x18), RW16(0x8b, 0x18), RW16(0x8e, 0x12), RW16(0x8f, 0x16),
    RW16(0x90, 0x02), RW16(0x91, 0x02), RW16(0x93, 0x09),
    { 0x89, false, 0, 16, { 0x89, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                            0, 0, 0, 0xff, 0, 0 } },                     /* COMPARE AND WRITE */
    SA16(0x9e, 0x10), SA16(0x9e, 0x12),                                  /* READ CAPACITY(16), GET LBA STATUS */
    { 0xa0, false, 0, 12, { 0xa0, 0, 0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0 } }, /* REPORT LUNS */
    { 0xa3, true, 0x0c, 12, { 0xa3, 0x1f, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0 } },
    RW12(0xa8, 0x18), RW12(0xaa, 0x18), RW12(0xae, 0x12), RW12(0xaf, 0x16),
};

static bool unmap_op(uint8_t op) { return op == 0x42; }

static bool op_has_sa(uint8_t op)
{
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i].op == op) return ops[i].has_sa;
    return false;
}

static const struct opinfo *find(uint8_t op, uint16_t sa, bool use_sa)
{
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i].op == op && (!use_sa || ops[i].sa == sa)) return &ops[i];
    return NULL;
}

static uint32_t timeouts(uint8_t *p)
{
    memset(p, 0, 12);
    put_be16(p, 0x0a);
    return 12;                       /* nominal/recommended timeouts: 0 = not specified */
}

void spc_report_opcodes(struct scsi_cmd *c)
{
    const uint8_t *cdb = c->cdb;
    bool rctd = cdb[2] & 0x80;
    uint8_t opts = cdb[2] & 0x07, rop = cdb[3];
    uint16_t rsa = get_be16(cdb + 4);
    uint32_t alloc = get_be32(cdb + 6);
    bool thin = c->lu && c->lu->bdev->ops->unmap;
    uint8_t d[8 + sizeof ops / sizeof ops[0] * 20];
    uint32_t n = 0;
    memset(d, 0, sizeof d);
    if (opts == 0) {
        n = 4;
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
            const struct opinfo *o = &ops[i];
            if (unmap_op(o->op) && !thin) continue;
            uint8_t *e = d + n;
            e[0] = o->op;
            put_be16(e + 2, o->sa);
            e[5] = (o->has_sa ? 0x01 : 0) | (rctd ? 0x02 : 0);
            put_be16(e + 6, o->len);
            n += 8;
            if (rctd) n += timeouts(d + n);
        }
        put_be32(d, n - 4);
    } else if (opts == 1 || opts == 2) {
        if ((opts == 1 && op_has_sa(rop)) || (opts == 2 && !op_has_sa(rop))) {
            scsi_set_sense_field(c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB, true, 2, 2);
            return;
        }
        const struct opinfo *o = find(rop, rsa, opts == 2);
        if (o && unmap_op(o->op) && !thin) o = NULL;
        if (!o) {
            d[1] = 0x01;                                 /* not supported */
            n = 4;
        } else {
            d[1] = (rctd ? 0x80 : 0) | 0x03;             /* supported, standard conformant */
            put_be16(d + 2, o->len);
            memcpy(d + 4, o->usage, o->len);
            n = 4 + o->len;
            if (rctd) n += timeouts(d + n);
        }
    } else {
        scsi_set_sense_field(c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB, true, 2, 2);
        return;
    }
    scsi_din_copy(c, d, n, alloc);
}
