/* SCSI dispatch and SBC-3 block commands: CDB decoding, range checks, data movement. */
#include "iscsi/scsi.h"
#include "iscsi/pdu.h"
#include "util/log.h"
#include <stdlib.h>
#include <string.h>

/* Commands above this size go to a worker thread instead of running inline. */
#define INLINE_MAX_BYTES (128u << 10)

static uint64_t lu_blocks(const struct iscsi_lu *lu) { return lu->bdev->size / lu->bdev->block_size; }

void scsi_set_sense(struct scsi_cmd *c, uint8_t key, uint16_t asc)
{
    c->status = SAM_CHECK_CONDITION;
    c->sense_len = (uint8_t)scsi_build_sense(c->sense, key, asc);
}

int scsi_build_sense(uint8_t *buf, uint8_t key, uint16_t asc)
{
    memset(buf, 0, 18);
    buf[0] = 0x70;          /* current error, fixed format */
    buf[2] = key & 0x0f;
    buf[7] = 10;            /* additional sense length */
    buf[12] = asc >> 8;
    buf[13] = asc & 0xff;
    return 18;
}

/* Sense-key specific field pointer (SPC-4 4.5.2.4.2). */
void scsi_set_sense_field(struct scsi_cmd *c, uint8_t key, uint16_t asc, bool cdb, uint16_t field, int bit)
{
    scsi_set_sense(c, key, asc);
    c->sense[15] = 0x80 | (cdb ? 0x40 : 0) | (bit >= 0 ? 0x08 | (bit & 7) : 0);
    put_be16(c->sense + 16, field);
}

void scsi_set_sense_info(struct scsi_cmd *c, uint8_t key, uint16_t asc, uint32_t info)
{
    scsi_set_sense(c, key, asc);
    c->sense[0] |= 0x80;    /* VALID: information field set */
    put_be32(c->sense + 3, info);
}

static void invalid_cdb(struct scsi_cmd *c, uint16_t byte, int bit)
{
    scsi_set_sense_field(c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB, true, byte, bit);
}

void scsi_din_copy(struct scsi_cmd *c, const void *data, uint32_t len, uint32_t alloc)
{
    uint32_t n = len < alloc ? len : alloc;
    c->din_full = n;
    if (n > c->din_max) n = c->din_max;
    free(c->din);
    c->din = NULL;
    c->din_len = 0;
    if (!n) return;
    c->din = malloc(n);
    if (!c->din) { scsi_set_sense(c, SK_HARDWARE_ERROR, ASC_INTERNAL_FAILURE); return; }
    memcpy(c->din, data, n);
    c->din_len = n;
}

/* ---- CDB decoding for block-addressed commands ---- */

static bool decode_lba_len(const uint8_t *cdb, uint64_t *lba, uint32_t *n)
{
    switch (cdb[0]) {
    case 0x08: case 0x0a:                                   /* READ/WRITE(6) */
        *lba = get_be24(cdb + 1) & 0x1fffff;
        *n = cdb[4] ? cdb[4] : 256;
        return true;
    case 0x28: case 0x2a: case 0x2e: case 0x2f: case 0x34: case 0x35: case 0x41:
        *lba = get_be32(cdb + 2);
        *n = get_be16(cdb + 7);
        return true;
    case 0xa8: case 0xaa: case 0xae: case 0xaf:
        *lba = get_be32(cdb + 2);
        *n = get_be32(cdb + 6);
        return true;
    case 0x88: case 0x8a: case 0x8b: case 0x8e: case 0x8f: case 0x90: case 0x91: case 0x93:
        *lba = get_be64(cdb + 2);
        *n = get_be32(cdb + 10);
        return true;
    case 0x89:                                              /* COMPARE AND WRITE */
        *lba = get_be64(cdb + 2);
        *n = cdb[13];
        return true;
    }
    return false;
}

static bool range_ok(struct scsi_cmd *c)
{
    uint64_t total = lu_blocks(c->lu);
    if (c->lba > total || c->nblocks > total - c->lba) {
        scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
        return false;
    }
    return true;
}

static bool xfer_ok(struct scsi_cmd *c, uint64_t bytes, int len_byte)
{
    if (bytes > SCSI_MAX_XFER) { invalid_cdb(c, (uint16_t)len_byte, -1); return false; }
    return true;
}

/* Commands that are accepted without a configured LUN. */
static bool lunless_ok(uint8_t op) { return op == 0x12 || op == 0xa0 || op == 0x03; }

int scsi_prepare(struct scsi_cmd *c)
{
    const uint8_t *cdb = c->cdb;
    uint8_t op = cdb[0];
    c->status = SAM_GOOD;
    c->dir = DIR_NONE;
    c->dout_need = 0;
    c->dout_rule = DOUT_PREFIX;
    c->len_field = 0;
    c->kind = NASD_OP_OTHER;
    c->slow = false;
    c->fua = false;
    if (!c->lu && !lunless_ok(op)) {
        scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_LUN_NOT_SUPPORTED);
        return 1;
    }
    uint32_t bs = c->lu ? c->lu->bdev->block_size : 512;
    if (c->lu && c->ua_gen && op != 0x12 && op != 0xa0 && op != 0x03) {
        uint32_t gen = atomic_load(&c->lu->reset_gen);
        if (*c->ua_gen != gen) {                             /* report a reset once per nexus */
            *c->ua_gen = gen;
            scsi_set_sense(c, SK_UNIT_ATTENTION, ASC_LUN_RESET_OCCURRED);
            return 1;
        }
    }
    if (c->lu && pr_conflict(c)) return 1;

    if (decode_lba_len(cdb, &c->lba, &c->nblocks)) {
        uint64_t bytes = (uint64_t)c->nblocks * bs;
        uint8_t prot = cdb[1] >> 5;
        switch (op) {
        case 0x08: case 0x28: case 0xa8: case 0x88:          /* READ */
            if (op != 0x08 && prot) { invalid_cdb(c, 1, 7); return 1; }
            if (!range_ok(c)) return 1;
            if (!xfer_ok(c, bytes, op == 0x08 ? 4 : 7)) return 1;
            c->dir = DIR_IN; c->kind = NASD_OP_READ;
            c->din_full = (uint32_t)bytes;
            c->slow = bytes > INLINE_MAX_BYTES || c->lu->bdev->remote;
            return 0;
        case 0x0a: case 0x2a: case 0xaa: case 0x8a:          /* WRITE */
        case 0x2e: case 0xae: case 0x8e:                     /* WRITE AND VERIFY */
            if (op != 0x0a && prot) { invalid_cdb(c, 1, 7); return 1; }
            if (!range_ok(c)) return 1;
            if (!xfer_ok(c, bytes, op == 0x0a ? 4 : 7)) return 1;
            c->fua = op != 0x0a && (cdb[1] & 0x08);
            c->dir = DIR_OUT; c->kind = NASD_OP_WRITE;
            c->dout_need = (uint32_t)bytes;
            c->slow = c->fua || bytes > INLINE_MAX_BYTES || c->lu->bdev->remote;
            return 0;
        case 0x2f: case 0xaf: case 0x8f: {                   /* VERIFY */
            if (prot) { invalid_cdb(c, 1, 7); return 1; }
            uint8_t bytchk = (cdb[1] >> 1) & 3;
            if (bytchk == 2) { invalid_cdb(c, 1, 2); return 1; }
            if (!range_ok(c)) return 1;
            if (!xfer_ok(c, bytes, 7)) return 1;
            c->kind = NASD_OP_READ;
            if (bytchk) {                                    /* compares against all of it */
                c->dir = DIR_OUT; c->dout_need = bytchk == 3 ? (c->nblocks ? bs : 0) : (uint32_t)bytes;
                c->dout_rule = DOUT_WHOLE;
                c->len_field = op == 0x2f ? 7 : op == 0xaf ? 6 : 10;
            }
            c->slow = bytes > INLINE_MAX_BYTES || c->lu->bdev->remote;
            return 0;
        }
        case 0x34: case 0x90:                                /* PRE-FETCH */
            if (!range_ok(c)) return 1;
            return 0;
        case 0x35: case 0x91:                                /* SYNCHRONIZE CACHE */
            if (!range_ok(c)) return 1;
            c->slow = true;
            return 0;
        case 0x41: case 0x93: {                              /* WRITE SAME */
            bool ndob = op == 0x93 && (cdb[1] & 0x01);
            if (prot) { invalid_cdb(c, 1, 7); return 1; }
            if (cdb[1] & 0x10) { invalid_cdb(c, 1, 4); return 1; }      /* ANCHOR */
            if (cdb[1] & 0x06) { invalid_cdb(c, 1, 2); return 1; }      /* PBDATA/LBDATA */
            if (c->nblocks == 0) { invalid_cdb(c, op == 0x41 ? 7 : 10, -1); return 1; } /* WSNZ */
            if (c->nblocks > SCSI_MAX_XFER / bs) { invalid_cdb(c, op == 0x41 ? 7 : 10, -1); return 1; }
            if (!range_ok(c)) return 1;
            c->kind = NASD_OP_WRITE;
            if (!ndob) { c->dir = DIR_OUT; c->dout_need = bs; c->dout_rule = DOUT_EXACT; c->len_field = 7; }
            c->slow = true;
            return 0;
        }
        case 0x89:                                           /* COMPARE AND WRITE */
            if (prot) { invalid_cdb(c, 1, 7); return 1; }
            if (c->nblocks > SCSI_MAX_CAW_BLOCKS) { invalid_cdb(c, 13, -1); return 1; }
            if (!range_ok(c)) return 1;
            c->fua = cdb[1] & 0x08;
            c->kind = NASD_OP_WRITE;
            c->dir = DIR_OUT; c->dout_need = 2 * c->nblocks * bs;
            c->dout_rule = DOUT_EXACT; c->len_field = 13;
            c->slow = true;
            return 0;
        case 0x8b:                                           /* ORWRITE(16) */
            if (prot) { invalid_cdb(c, 1, 7); return 1; }
            if (!range_ok(c)) return 1;
            if (!xfer_ok(c, bytes, 10)) return 1;
            c->fua = cdb[1] & 0x08;
            c->kind = NASD_OP_WRITE;
            c->dir = DIR_OUT; c->dout_need = (uint32_t)bytes;
            c->slow = true;
            return 0;
        }
    }

    switch (op) {
    case 0x00: return 0;                                     /* TEST UNIT READY */
    case 0x03: case 0x12: case 0x1a: case 0x5a: case 0xa0: case 0x25:
        c->dir = DIR_IN;
        return 0;
    case 0x9e:                                               /* SERVICE ACTION IN(16) */
        if ((cdb[1] & 0x1f) == 0x10 || (cdb[1] & 0x1f) == 0x12) {
            if ((cdb[1] & 0x1f) == 0x12) {
                c->lba = get_be64(cdb + 2);
                if (c->lba >= lu_blocks(c->lu)) { scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE); return 1; }
            }
            c->dir = DIR_IN;
            return 0;
        }
        invalid_cdb(c, 1, 4);
        return 1;
    case 0xa3:                                               /* MAINTENANCE IN */
        if ((cdb[1] & 0x1f) == 0x0c) { c->dir = DIR_IN; return 0; }   /* REPORT SUPPORTED OPCODES */
        invalid_cdb(c, 1, 4);
        return 1;
    case 0x42: {                                             /* UNMAP */
        if (!c->lu->bdev->ops->unmap) break;
        if (cdb[1] & 0x01) { invalid_cdb(c, 1, 0); return 1; } /* ANCHOR */
        c->dir = DIR_OUT; c->dout_need = get_be16(cdb + 7);
        c->kind = NASD_OP_WRITE; c->slow = true;
        return 0;
    }
    case 0x1b: return 0;                                     /* START STOP UNIT */
    case 0x16: case 0x17: return 0;                          /* RESERVE/RELEASE(6) */
    case 0x5e: c->dir = DIR_IN; return 0;                    /* PERSISTENT RESERVE IN */
    case 0x5f:                                               /* PERSISTENT RESERVE OUT */
        c->dir = DIR_OUT; c->dout_need = get_be32(cdb + 5);
        if (c->dout_need > 4096) { scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH); return 1; }
        return 0;
    }
    scsi_set_sense_field(c, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE, true, 0, -1);
    return 1;
}

/* ---- execution ---- */

static void io_error(struct scsi_cmd *c, int err, bool write)
{
    log_warn("iscsi: %s %s lba %llu: %s", c->lu->bdev->name, write ? "write" : "read",
             (unsigned long long)c->lba, strerror(-err));
    if (err == -ENOSPC) scsi_set_sense(c, SK_DATA_PROTECT, 0x2707); /* space allocation failed */
    else if (err == -EROFS) scsi_set_sense(c, SK_DATA_PROTECT, 0x2700); /* write protected (a snapshot) */
    else scsi_set_sense(c, SK_MEDIUM_ERROR, write ? ASC_WRITE_ERROR : ASC_UNRECOVERED_READ);
}

static void do_read(struct scsi_cmd *c)
{
    uint32_t bs = c->lu->bdev->block_size;
    uint64_t bytes = (uint64_t)c->nblocks * bs;
    uint32_t n = bytes < c->din_max ? (uint32_t)bytes : c->din_max;  /* never past EDTL */
    c->din_full = (uint32_t)bytes;
    if (!n) return;
    c->din = malloc(n);
    if (!c->din) { scsi_set_sense(c, SK_HARDWARE_ERROR, ASC_INTERNAL_FAILURE); return; }
    int r = nasd_bdev_read(c->lu->bdev, c->din, c->lba * bs, n);
    if (r) { free(c->din); c->din = NULL; io_error(c, r, false); return; }
    c->din_len = n;
    c->io_bytes = n;
}

static void do_write(struct scsi_cmd *c)
{
    uint32_t bs = c->lu->bdev->block_size;
    if (!c->dout_len) return;
    int r = nasd_bdev_write(c->lu->bdev, c->dout, c->lba * bs, c->dout_len, c->fua ? NASD_IO_FUA : 0);
    if (r) { io_error(c, r, true); return; }
    c->io_bytes = c->dout_len;
}

static void miscompare(struct scsi_cmd *c, uint32_t off)
{
    scsi_set_sense_info(c, SK_MISCOMPARE, ASC_MISCOMPARE_VERIFY, off);
}

static void do_verify(struct scsi_cmd *c)
{
    uint32_t bs = c->lu->bdev->block_size;
    uint8_t bytchk = (c->cdb[1] >> 1) & 3;
    if (!bytchk || !c->nblocks) return;
    uint64_t bytes = (uint64_t)c->nblocks * bs;
    if (!c->dout || c->dout_len < (bytchk == 3 ? bs : bytes)) {   /* the transport checks this too */
        scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH);
        return;
    }
    uint8_t *buf = malloc(bytes);
    if (!buf) { scsi_set_sense(c, SK_HARDWARE_ERROR, ASC_INTERNAL_FAILURE); return; }
    int r = nasd_bdev_read(c->lu->bdev, buf, c->lba * bs, bytes);
    if (r) { free(buf); io_error(c, r, false); return; }
    c->io_bytes = bytes;
    for (uint64_t i = 0; i < bytes; i++) {
        uint8_t want = bytchk == 3 ? c->dout[i % bs] : c->dout[i];
        if (buf[i] != want) { miscompare(c, (uint32_t)i); break; }
    }
    free(buf);
}

static void do_compare_and_write(struct scsi_cmd *c)
{
    uint32_t bs = c->lu->bdev->block_size;
    uint32_t len = c->nblocks * bs;
    if (!len) return;
    if (!c->dout || c->dout_len < 2 * len) { scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH); return; }
    if (c->lu->bdev->ops->compare_and_write) {  /* atomic in the backend (shared by gateways) */
        uint64_t mis = 0;
        int r = c->lu->bdev->ops->compare_and_write(c->lu->bdev, c->dout, c->dout + len, c->lba * bs, len, &mis);
        if (r != -EOPNOTSUPP) {
            if (r == -EILSEQ) miscompare(c, (uint32_t)mis);
            else if (r) io_error(c, r, true);
            else c->io_bytes = len;
            return;
        }
    }
    uint8_t *buf = malloc(len);
    if (!buf) { scsi_set_sense(c, SK_HARDWARE_ERROR, ASC_INTERNAL_FAILURE); return; }
    pthread_mutex_lock(&c->lu->lock);       /* atomic against other COMPARE AND WRITEs */
    int r = nasd_bdev_read(c->lu->bdev, buf, c->lba * bs, len);
    if (r) { io_error(c, r, false); goto out; }
    for (uint32_t i = 0; i < len; i++)
        if (buf[i] != c->dout[i]) { miscompare(c, i); goto out; }
    r = nasd_bdev_write(c->lu->bdev, c->dout + len, c->lba * bs, len, c->fua ? NASD_IO_FUA : 0);
    if (r) io_error(c, r, true);
    else c->io_bytes = len;
out:
    pthread_mutex_unlock(&c->lu->lock);
    free(buf);
}

/* ORWRITE: new = old | data-out, atomic against COMPARE AND WRITE / ORWRITE. */
static void do_orwrite(struct scsi_cmd *c)
{
    uint32_t bs = c->lu->bdev->block_size;
    uint32_t len = c->dout_len;
    if (!len) return;
    uint8_t *buf = malloc(len);
    if (!buf) { scsi_set_sense(c, SK_HARDWARE_ERROR, ASC_INTERNAL_FAILURE); return; }
    pthread_mutex_lock(&c->lu->lock);
    int r = nasd_bdev_read(c->lu->bdev, buf, c->lba * bs, len);
    if (r) io_error(c, r, false);
    else {
        for (uint32_t i = 0; i < len; i++) buf[i] |= c->dout[i];
        r = nasd_bdev_write(c->lu->bdev, buf, c->lba * bs, len, c->fua ? NASD_IO_FUA : 0);
        if (r) io_error(c, r, true);
        else c->io_bytes = len;
    }
    pthread_mutex_unlock(&c->lu->lock);
    free(buf);
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) if (p[i]) return false;
    return true;
}

static void do_write_same(struct scsi_cmd *c)
{
    nasd_bdev *b = c->lu->bdev;
    uint32_t bs = b->block_size;
    bool ndob = c->cdb[0] == 0x93 && (c->cdb[1] & 0x01);
    bool unmap = c->cdb[1] & 0x08;
    uint64_t off = c->lba * bs, len = (uint64_t)c->nblocks * bs;
    if (!ndob && (!c->dout || c->dout_len < bs)) { scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH); return; }
    bool zero = ndob || all_zero(c->dout, bs);
    if (unmap && zero && b->ops->unmap) {
        int r = nasd_bdev_unmap(b, off, len);
        if (r == 0) return;
        if (r != -EOPNOTSUPP) { io_error(c, r, true); return; }
    }
    if (b->ops->write_same) {
        static const uint8_t zeros[4096];
        int r = b->ops->write_same(b, ndob ? zeros : c->dout, bs, off, len);
        if (r) io_error(c, r, true);
        else c->io_bytes = len;
        return;
    }
    uint32_t chunk_blocks = (1u << 20) / bs;
    if (chunk_blocks > c->nblocks) chunk_blocks = c->nblocks;
    uint8_t *buf = malloc((size_t)chunk_blocks * bs);
    if (!buf) { scsi_set_sense(c, SK_HARDWARE_ERROR, ASC_INTERNAL_FAILURE); return; }
    for (uint32_t i = 0; i < chunk_blocks; i++) {
        if (ndob) memset(buf + (size_t)i * bs, 0, bs);
        else memcpy(buf + (size_t)i * bs, c->dout, bs);
    }
    while (len) {
        uint64_t l = len < (uint64_t)chunk_blocks * bs ? len : (uint64_t)chunk_blocks * bs;
        int r = nasd_bdev_write(b, buf, off, l, 0);
        if (r) { io_error(c, r, true); break; }
        off += l; len -= l;
        c->io_bytes += l;
    }
    free(buf);
}

static void do_unmap(struct scsi_cmd *c)
{
    nasd_bdev *b = c->lu->bdev;
    uint32_t bs = b->block_size;
    if (c->dout_len == 0) return;
    if (c->dout_len < 8) { scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH); return; }
    uint32_t dlen = get_be16(c->dout + 2);
    if (dlen > c->dout_len - 8) dlen = (c->dout_len - 8) & ~15u;
    if (dlen / 16 > SCSI_MAX_UNMAP_DESC) {
        scsi_set_sense_field(c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_PARAM, false, 2, -1);
        return;
    }
    uint64_t total = lu_blocks(c->lu);
    for (uint32_t o = 8; o + 16 <= 8 + dlen; o += 16) {      /* validate everything first */
        uint64_t lba = get_be64(c->dout + o);
        uint32_t n = get_be32(c->dout + o + 8);
        if (lba > total || n > total - lba) { scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE); return; }
    }
    for (uint32_t o = 8; o + 16 <= 8 + dlen; o += 16) {
        uint64_t lba = get_be64(c->dout + o);
        uint32_t n = get_be32(c->dout + o + 8);
        if (!n) continue;
        int r = nasd_bdev_unmap(b, lba * bs, (uint64_t)n * bs);
        if (r) { io_error(c, r, true); return; }
    }
}

static void read_capacity10(struct scsi_cmd *c)
{
    uint8_t d[8];
    uint64_t last = lu_blocks(c->lu) - 1;
    if (!(c->cdb[8] & 1) && get_be32(c->cdb + 2)) { invalid_cdb(c, 2, -1); return; }
    put_be32(d, last > 0xffffffffull ? 0xffffffffu : (uint32_t)last);
    put_be32(d + 4, c->lu->bdev->block_size);
    scsi_din_copy(c, d, 8, 8);
}

static void read_capacity16(struct scsi_cmd *c)
{
    uint8_t d[32] = { 0 };
    put_be64(d, lu_blocks(c->lu) - 1);
    put_be32(d + 8, c->lu->bdev->block_size);
    if (c->lu->bdev->ops->unmap) d[14] = 0x80 | 0x40;       /* LBPME, LBPRZ */
    scsi_din_copy(c, d, sizeof d, get_be32(c->cdb + 10));
}

static void get_lba_status(struct scsi_cmd *c)
{
    nasd_bdev *b = c->lu->bdev;
    uint32_t bs = b->block_size;
    uint32_t alloc = get_be32(c->cdb + 10);
    uint64_t total = lu_blocks(c->lu), lba = c->lba;
    enum { MAXD = 64 };
    uint8_t d[8 + 16 * MAXD] = { 0 };
    unsigned nd = 0;
    while (lba < total && nd < MAXD && 8 + 16 * (nd + 1) <= alloc + 15) {
        int mapped = 1;
        uint64_t run = (total - lba) * bs;
        if (b->ops->mapped) {
            int r = b->ops->mapped(b, lba * bs, (total - lba) * bs, &mapped, &run);
            if (r) { io_error(c, r, false); return; }
        }
        uint64_t nblk = (run + bs - 1) / bs;
        if (nblk == 0) nblk = 1;
        if (nblk > total - lba) nblk = total - lba;
        if (nblk > 0xffffffffull) nblk = 0xffffffffull;
        uint8_t *e = d + 8 + 16 * nd;
        put_be64(e, lba);
        put_be32(e + 8, (uint32_t)nblk);
        e[12] = mapped ? 0 : 1;
        nd++;
        lba += nblk;
        if (nd >= 1 && 8 + 16 * (nd + 1) > alloc) break;
    }
    put_be32(d, 4 + 16 * nd);
    scsi_din_copy(c, d, 8 + 16 * nd, alloc);
}

void scsi_execute(struct scsi_cmd *c)
{
    const uint8_t *cdb = c->cdb;
    switch (cdb[0]) {
    case 0x00: return;
    case 0x03: spc_request_sense(c); return;
    case 0x12: spc_inquiry(c); return;
    case 0x1a: case 0x5a: spc_mode_sense(c); return;
    case 0xa0: spc_report_luns(c); return;
    case 0xa3: spc_report_opcodes(c); return;
    case 0x16: spc_reserve6(c, true); return;
    case 0x17: spc_reserve6(c, false); return;
    case 0x5e: pr_in(c); return;
    case 0x5f: pr_out(c); return;
    case 0x1b: return;                                 /* START STOP UNIT: always "started" */
    case 0x25: read_capacity10(c); return;
    case 0x9e:
        if ((cdb[1] & 0x1f) == 0x10) read_capacity16(c);
        else get_lba_status(c);
        return;
    case 0x08: case 0x28: case 0xa8: case 0x88: do_read(c); return;
    case 0x0a: case 0x2a: case 0xaa: case 0x8a:
    case 0x2e: case 0xae: case 0x8e: do_write(c); return;
    case 0x2f: case 0xaf: case 0x8f: do_verify(c); return;
    case 0x34: case 0x90: return;                      /* PRE-FETCH: data is in the page cache path */
    case 0x35: case 0x91: {
        int r = nasd_bdev_flush(c->lu->bdev);
        if (r) io_error(c, r, true);
        return;
    }
    case 0x41: case 0x93: do_write_same(c); return;
    case 0x89: do_compare_and_write(c); return;
    case 0x8b: do_orwrite(c); return;
    case 0x42: do_unmap(c); return;
    }
    scsi_set_sense(c, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
}
