/* SPC-4 primary commands: INQUIRY (+VPD), MODE SENSE, REPORT LUNS, REQUEST SENSE,
 * RESERVE/RELEASE(6); logical unit lifetime. */
#include "iscsi/scsi.h"
#include "iscsi/pdu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VENDOR  "NASD    "
#define PRODUCT "iSCSI volume    "
#define REVISION "0001"

int iscsi_lu_init(struct iscsi_lu *lu, uint64_t lun, nasd_bdev *bdev)
{
    memset(lu, 0, sizeof *lu);
    lu->lun = lun;
    lu->bdev = nasd_bdev_get(bdev);
    return pthread_mutex_init(&lu->lock, NULL) ? -ENOMEM : 0;
}

void iscsi_lu_destroy(struct iscsi_lu *lu)
{
    nasd_bdev_put(lu->bdev);
    free(lu->regs);
    pthread_mutex_destroy(&lu->lock);
}

void iscsi_lu_release_nexus(struct iscsi_lu *lu, const char *nexus)
{
    pthread_mutex_lock(&lu->lock);
    if (lu->res6_held && (!nexus || !strcmp(lu->res6_holder, nexus))) lu->res6_held = false;
    lu->any_rsv = lu->res6_held || lu->pr_held;
    pthread_mutex_unlock(&lu->lock);
}

static void invalid_cdb(struct scsi_cmd *c, uint16_t byte, int bit)
{
    scsi_set_sense_field(c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_CDB, true, byte, bit);
}

static void serial_hex(const struct iscsi_lu *lu, char *out /* 33 */)
{
    for (int i = 0; i < 16; i++) sprintf(out + 2 * i, "%02x", lu->bdev->uuid[i]);
}

static uint32_t vpd_device_id(struct scsi_cmd *c, uint8_t *d)
{
    const struct iscsi_lu *lu = c->lu;
    uint32_t n = 4;
    /* NAA IEEE Registered Extended (6h) from the volume uuid */
    d[n] = 0x01; d[n + 1] = 0x03; d[n + 3] = 16;
    memcpy(d + n + 4, lu->bdev->uuid, 16);
    d[n + 4] = 0x60 | (lu->bdev->uuid[0] & 0x0f);
    n += 20;
    /* T10 vendor id */
    char serial[33];
    serial_hex(lu, serial);
    d[n] = 0x02; d[n + 1] = 0x01; d[n + 3] = 8 + 32;
    memcpy(d + n + 4, VENDOR, 8);
    memcpy(d + n + 12, serial, 32);
    n += 4 + 40;
    /* relative target port and target port group */
    d[n] = 0x51; d[n + 1] = 0x94; d[n + 3] = 4; put_be16(d + n + 6, 1); n += 8;
    d[n] = 0x51; d[n + 1] = 0x95; d[n + 3] = 4; put_be16(d + n + 6, c->tpgt); n += 8;
    /* SCSI name strings: target port and target device */
    if (c->target_name) {
        char name[300];
        int l = snprintf(name, sizeof name, "%s,t,0x%04x", c->target_name, c->tpgt);
        uint32_t len = (uint32_t)(l + 1 + 3) & ~3u;
        d[n] = 0x53; d[n + 1] = 0x98; d[n + 3] = (uint8_t)len;
        memset(d + n + 4, 0, len); memcpy(d + n + 4, name, l);
        n += 4 + len;
        l = (int)strlen(c->target_name);
        len = (uint32_t)(l + 1 + 3) & ~3u;
        d[n] = 0x53; d[n + 1] = 0xa8; d[n + 3] = (uint8_t)len;
        memset(d + n + 4, 0, len); memcpy(d + n + 4, c->target_name, l);
        n += 4 + len;
    }
    return n;
}

void spc_inquiry(struct scsi_cmd *c)
{
    const uint8_t *cdb = c->cdb;
    uint32_t alloc = get_be16(cdb + 3);
    uint8_t d[1024] = { 0 };
    uint32_t n;
    bool evpd = cdb[1] & 1;
    if (cdb[1] & 0xfe) { invalid_cdb(c, 1, 1); return; }
    if (!evpd) {
        if (cdb[2]) { invalid_cdb(c, 2, -1); return; }
        d[0] = c->lu ? 0x00 : 0x7f;       /* direct access block device / no LU */
        d[2] = 0x06;                      /* SPC-4 */
        d[3] = 0x12;                      /* HiSup, response format 2 */
        d[7] = 0x02;                      /* CmdQue */
        memcpy(d + 8, VENDOR, 8);
        memcpy(d + 16, PRODUCT, 16);
        memcpy(d + 32, REVISION, 4);
        put_be16(d + 58, 0x00a0);         /* SAM-5 */
        put_be16(d + 60, 0x0960);         /* iSCSI */
        put_be16(d + 62, 0x0460);         /* SPC-4 */
        put_be16(d + 64, 0x04c0);         /* SBC-3 */
        n = 66;
        d[4] = (uint8_t)(n - 5);
        scsi_din_copy(c, d, n, alloc);
        return;
    }
    if (!c->lu) { invalid_cdb(c, 2, -1); return; }
    nasd_bdev *b = c->lu->bdev;
    uint32_t bs = b->block_size;
    bool thin = b->ops->unmap != NULL;
    d[1] = cdb[2];
    switch (cdb[2]) {
    case 0x00: {
        static const uint8_t pages[] = { 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2 };
        memcpy(d + 4, pages, sizeof pages);
        n = 4 + sizeof pages;
        break;
    }
    case 0x80: {
        char serial[33];
        serial_hex(c->lu, serial);
        memcpy(d + 4, serial, 32);
        n = 36;
        break;
    }
    case 0x83:
        n = vpd_device_id(c, d);
        break;
    case 0xb0:
        n = 0x40;
        d[4] = 0x01;                                         /* WSNZ */
        d[5] = SCSI_MAX_CAW_BLOCKS;
        put_be16(d + 6, bs < 4096 ? 4096 / bs : 1);          /* optimal granularity */
        put_be32(d + 8, SCSI_MAX_XFER / bs);                 /* maximum transfer length */
        put_be32(d + 12, (128u << 10) / bs);                 /* optimal transfer length */
        put_be32(d + 16, SCSI_MAX_XFER / bs);                /* maximum prefetch length */
        if (thin) {
            put_be32(d + 20, 0xffffffffu);                   /* max unmap LBA count */
            put_be32(d + 24, SCSI_MAX_UNMAP_DESC);
            put_be32(d + 28, bs < 4096 ? 4096 / bs : 1);     /* optimal unmap granularity */
        }
        put_be64(d + 36, SCSI_MAX_XFER / bs);                /* maximum write same length */
        break;
    case 0xb1:
        n = 0x40;
        put_be16(d + 4, 1);                                  /* non-rotating medium */
        break;
    case 0xb2:
        n = 8;
        if (thin) { d[5] = 0x80 | 0x40 | 0x20 | 0x04; d[6] = 0x02; } /* LBPU LBPWS LBPWS10 LBPRZ, thin */
        break;
    default:
        invalid_cdb(c, 2, -1);
        return;
    }
    put_be16(d + 2, (uint16_t)(n - 4));
    scsi_din_copy(c, d, n, alloc);
}

/* Mode pages: returns bytes written at p for page `pc`, 0 if unknown. */
static uint32_t mode_page(uint8_t page, uint8_t pcf, uint8_t *p)
{
    bool changeable = pcf == 1;
    switch (page) {
    case 0x08:                                               /* caching */
        p[0] = 0x08; p[1] = 0x12;
        if (!changeable) p[2] = 0x04;                        /* WCE: write-back cache */
        return 20;
    case 0x0a:                                               /* control */
        p[0] = 0x0a; p[1] = 0x0a;
        if (!changeable) {
            p[3] = 0x10;                                     /* unrestricted reordering */
            put_be16(p + 8, 0xffff);                         /* busy timeout: unlimited */
        }
        return 12;
    case 0x1c:                                               /* informational exceptions */
        p[0] = 0x1c; p[1] = 0x0a;
        return 12;
    }
    return 0;
}

void spc_mode_sense(struct scsi_cmd *c)
{
    const uint8_t *cdb = c->cdb;
    bool ten = cdb[0] == 0x5a;
    bool dbd = cdb[1] & 0x08, llbaa = ten && (cdb[1] & 0x10);
    uint8_t pcf = cdb[2] >> 6, page = cdb[2] & 0x3f, sub = cdb[3];
    uint32_t alloc = ten ? get_be16(cdb + 7) : cdb[4];
    if (pcf == 3) { scsi_set_sense_field(c, SK_ILLEGAL_REQUEST, ASC_SAVING_NOT_SUPPORTED, true, 2, 7); return; }
    if (sub && !(sub == 0xff)) { invalid_cdb(c, 3, -1); return; }
    uint8_t d[512] = { 0 };
    uint32_t hdr = ten ? 8 : 4, n = hdr;
    nasd_bdev *b = c->lu->bdev;
    uint64_t blocks = b->size / b->block_size;
    if (!dbd) {
        if (llbaa) {
            put_be64(d + n, blocks);
            put_be32(d + n + 12, b->block_size);
            n += 16;
        } else {
            put_be24(d + n + 1, blocks > 0xffffff ? 0xffffff : (uint32_t)blocks);
            put_be24(d + n + 5, b->block_size);
            n += 8;
        }
    }
    uint32_t bdlen = n - hdr;
    if (page == 0x3f) {
        n += mode_page(0x08, pcf, d + n);
        n += mode_page(0x0a, pcf, d + n);
        n += mode_page(0x1c, pcf, d + n);
    } else {
        uint32_t l = mode_page(page, pcf, d + n);
        if (!l) { invalid_cdb(c, 2, 5); return; }
        n += l;
    }
    if (ten) {
        put_be16(d, (uint16_t)(n - 2));
        d[3] = 0x10 | (c->lu->bdev->read_only ? 0x80 : 0);  /* DPOFUA, WP */
        if (llbaa && !dbd) d[4] = 0x01;                      /* LONGLBA */
        put_be16(d + 6, (uint16_t)bdlen);
    } else {
        d[0] = (uint8_t)(n - 1);
        d[2] = 0x10 | (c->lu->bdev->read_only ? 0x80 : 0);
        d[3] = (uint8_t)bdlen;
    }
    scsi_din_copy(c, d, n, alloc);
}

void spc_report_luns(struct scsi_cmd *c)
{
    const uint8_t *cdb = c->cdb;
    uint32_t alloc = get_be32(cdb + 6);
    if (cdb[2] > 2) { invalid_cdb(c, 2, -1); return; }
    if (alloc < 16) { invalid_cdb(c, 6, -1); return; }
    uint32_t n = 8 + 8 * c->nlus;
    uint8_t *d = calloc(1, n);
    if (!d) { scsi_set_sense(c, SK_HARDWARE_ERROR, ASC_INTERNAL_FAILURE); return; }
    put_be32(d, 8 * c->nlus);
    for (unsigned i = 0; i < c->nlus; i++) lun_encode(d + 8 + 8 * i, c->all_lus[i].lun);
    scsi_din_copy(c, d, n, alloc);
    free(d);
}

void spc_request_sense(struct scsi_cmd *c)
{
    const uint8_t *cdb = c->cdb;
    bool desc = cdb[1] & 1;
    uint8_t d[18] = { 0 };
    uint32_t n;
    uint16_t asc = c->lu ? ASC_NO_ADDITIONAL : ASC_LUN_NOT_SUPPORTED;
    uint8_t key = c->lu ? SK_NO_SENSE : SK_ILLEGAL_REQUEST;
    if (desc) {
        d[0] = 0x72; d[1] = key; d[2] = asc >> 8; d[3] = asc & 0xff;
        n = 8;
    } else {
        n = (uint32_t)scsi_build_sense(d, key, asc);
    }
    scsi_din_copy(c, d, n, cdb[4]);
}

void spc_reserve6(struct scsi_cmd *c, bool reserve)
{
    struct iscsi_lu *lu = c->lu;
    pthread_mutex_lock(&lu->lock);
    if (reserve) {
        if ((lu->res6_held && strcmp(lu->res6_holder, c->nexus)) || lu->nregs || lu->pr_held) {
            c->status = SAM_RESERVATION_CONFLICT;
        } else {
            lu->res6_held = true;
            snprintf(lu->res6_holder, sizeof lu->res6_holder, "%s", c->nexus);
        }
    } else if (lu->res6_held && !strcmp(lu->res6_holder, c->nexus)) {
        lu->res6_held = false;
    } else if (lu->nregs || lu->pr_held) {
        c->status = SAM_RESERVATION_CONFLICT;
    }
    lu->any_rsv = lu->res6_held || lu->pr_held || lu->nregs;
    pthread_mutex_unlock(&lu->lock);
}
