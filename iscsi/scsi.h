#pragma once
/* SCSI command layer (SPC-4 / SBC-3) of the iSCSI target. Transport independent:
 * a command arrives as CDB + optional data-out, leaves as status + sense + data-in. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "util/stats.h"
#include "storage/bdev.h"

#define SCSI_MAX_XFER (8u << 20)      /* largest data transfer of one command */
#define SCSI_MAX_CAW_BLOCKS 32
#define SCSI_MAX_UNMAP_DESC 256
#define SCSI_MAX_WS_BLOCKS_BYTES (1ull << 30)
#define NEXUS_LEN 256                 /* "initiator-name,i,0x<isid>" */

enum { SAM_GOOD = 0x00, SAM_CHECK_CONDITION = 0x02, SAM_CONDITION_MET = 0x04,
       SAM_BUSY = 0x08, SAM_RESERVATION_CONFLICT = 0x18, SAM_TASK_SET_FULL = 0x28,
       SAM_TASK_ABORTED = 0x40 };
enum { SK_NO_SENSE = 0, SK_NOT_READY = 2, SK_MEDIUM_ERROR = 3, SK_HARDWARE_ERROR = 4,
       SK_ILLEGAL_REQUEST = 5, SK_UNIT_ATTENTION = 6, SK_DATA_PROTECT = 7,
       SK_ABORTED_COMMAND = 0x0b, SK_MISCOMPARE = 0x0e };
/* additional sense code << 8 | qualifier */
enum {
    ASC_INVALID_OPCODE = 0x2000, ASC_LBA_OUT_OF_RANGE = 0x2100, ASC_INVALID_FIELD_CDB = 0x2400,
    ASC_LUN_NOT_SUPPORTED = 0x2500, ASC_INVALID_FIELD_PARAM = 0x2600, ASC_PARAM_LIST_LENGTH = 0x1a00,
    ASC_INVALID_RELEASE_PR = 0x2604, ASC_MISCOMPARE_VERIFY = 0x1d00, ASC_WRITE_PROTECTED = 0x2700,
    ASC_UNRECOVERED_READ = 0x1100, ASC_WRITE_ERROR = 0x0c00, ASC_INTERNAL_FAILURE = 0x4400,
    ASC_INVALID_FIELD_IU = 0x0e03, ASC_SAVING_NOT_SUPPORTED = 0x3900,
    ASC_POWER_ON_RESET = 0x2900, ASC_LUN_RESET_OCCURRED = 0x2903, ASC_RESERVATIONS_PREEMPTED = 0x2a03,
    ASC_RESERVATIONS_RELEASED = 0x2a04, ASC_REGISTRATIONS_PREEMPTED = 0x2a05,
    ASC_INSUFFICIENT_REG_RESOURCES = 0x5504,
    ASC_NO_ADDITIONAL = 0x0000,
};

/* Registrants per LU: every command scans them while a reservation is held, and a new
 * ISID per login made a new one each time (20k slowed other initiators' READs 10x). */
#define PR_MAX_REGS 256

struct pr_reg {
    char nexus[NEXUS_LEN];
    char initiator[224];
    uint64_t key;
};

/* One logical unit; shared by all sessions of its target. */
struct iscsi_lu {
    uint64_t lun;
    nasd_bdev *bdev;
    pthread_mutex_t lock;          /* reservations, COMPARE AND WRITE, unit attentions */
    /* SPC-2 RESERVE(6) */
    bool res6_held;
    char res6_holder[NEXUS_LEN];
    /* persistent reservations */
    uint32_t pr_generation;
    unsigned nregs;
    struct pr_reg *regs;
    bool pr_held;
    uint8_t pr_type;
    char pr_holder[NEXUS_LEN];     /* unused for all-registrants types */
    bool any_rsv;                  /* fast path: no reservation of any kind (read unlocked) */
    _Atomic uint32_t reset_gen;    /* bumped by LUN/target reset: unit attention for every nexus */
};

int iscsi_lu_init(struct iscsi_lu *lu, uint64_t lun, nasd_bdev *bdev);
void iscsi_lu_destroy(struct iscsi_lu *lu);
/* Drop RESERVE(6) held by nexus (on logout / connection loss, LUN reset: NULL = any). */
void iscsi_lu_release_nexus(struct iscsi_lu *lu, const char *nexus);

enum scsi_dir { DIR_NONE = 0, DIR_IN, DIR_OUT };
/* DOUT_PREFIX: the executor uses dout_len bytes (a shorter data-out is processed up to
 * that length, reported as a residual); DOUT_WHOLE: it needs all dout_need bytes;
 * DOUT_EXACT: also refuses more (fixed-size payloads). */
enum scsi_dout_rule { DOUT_PREFIX = 0, DOUT_WHOLE, DOUT_EXACT };

struct scsi_cmd {
    /* inputs */
    const uint8_t *cdb;            /* 16 bytes */
    struct iscsi_lu *lu;           /* NULL: LUN not configured */
    const struct iscsi_lu *all_lus;/* for REPORT LUNS */
    unsigned nlus;
    const char *nexus;             /* I_T nexus identity */
    const char *initiator;
    const char *target_name;       /* for VPD 0x83 */
    uint16_t tpgt;
    uint32_t *ua_gen;              /* the nexus' last seen reset_gen of this LU (may be NULL) */
    const uint8_t *dout;
    uint32_t dout_len;
    uint32_t din_max;              /* iSCSI expected transfer length: never produce more */
    /* decoded by scsi_prepare */
    enum scsi_dir dir;
    uint32_t dout_need;            /* bytes of data-out the command wants */
    enum scsi_dout_rule dout_rule; /* what a data-out shorter/longer than dout_need means */
    uint8_t len_field;             /* CDB byte of the transfer length (sense pointer) */
    uint32_t din_full;             /* bytes the command would return without truncation */
    bool slow;                     /* better run on a worker thread */
    enum nasd_op_kind kind;
    uint64_t lba;
    uint32_t nblocks;
    bool fua;
    /* outputs */
    uint8_t status;
    uint8_t sense_len;
    uint8_t sense[32];
    uint8_t *din;                  /* malloc'd, freed by the owner */
    uint32_t din_len;
    uint64_t io_bytes;             /* payload bytes for stats */
};

/* Decodes and validates the CDB. Returns 0 when the command should proceed (dir,
 * dout_need set); 1 when it is already complete (status/sense set, e.g. bad field). */
int scsi_prepare(struct scsi_cmd *c);
/* Runs the command (after all data-out arrived). Thread-safe. */
void scsi_execute(struct scsi_cmd *c);

/* sense helpers */
void scsi_set_sense(struct scsi_cmd *c, uint8_t key, uint16_t asc);
void scsi_set_sense_field(struct scsi_cmd *c, uint8_t key, uint16_t asc, bool cdb, uint16_t field, int bit);
void scsi_set_sense_info(struct scsi_cmd *c, uint8_t key, uint16_t asc, uint32_t info);
/* Fill fixed-format sense (18 bytes) into buf; returns length. */
int scsi_build_sense(uint8_t *buf, uint8_t key, uint16_t asc);

/* internal split: spc.c / sbc.c / pr.c */
void spc_inquiry(struct scsi_cmd *c);
void spc_mode_sense(struct scsi_cmd *c);
void spc_report_luns(struct scsi_cmd *c);
void spc_request_sense(struct scsi_cmd *c);
void spc_reserve6(struct scsi_cmd *c, bool reserve);
void spc_report_opcodes(struct scsi_cmd *c);
void pr_in(struct scsi_cmd *c);
void pr_out(struct scsi_cmd *c);
/* RESERVATION CONFLICT check for a command on c->lu; true = conflict (status set). */
bool pr_conflict(struct scsi_cmd *c);
/* Copy len bytes of a generated response into c->din, truncated to alloc and din_max. */
void scsi_din_copy(struct scsi_cmd *c, const void *data, uint32_t len, uint32_t alloc);
