#pragma once
/* iSCSI wire format (RFC 7143): BHS field access, digests, text key lists. Pure
 * functions with no connection state, so they are unit-testable on their own. */
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define ISCSI_BHS_LEN 48
#define ISCSI_MAX_AHS 1020            /* TotalAHSLength is one byte of 4-byte words */
#define ISCSI_RSVD_TAG 0xffffffffu

/* initiator opcodes */
enum {
    OP_NOP_OUT = 0x00, OP_SCSI_CMD = 0x01, OP_TMF_REQ = 0x02, OP_LOGIN_REQ = 0x03,
    OP_TEXT_REQ = 0x04, OP_DATA_OUT = 0x05, OP_LOGOUT_REQ = 0x06, OP_SNACK = 0x10,
};
/* target opcodes */
enum {
    OP_NOP_IN = 0x20, OP_SCSI_RSP = 0x21, OP_TMF_RSP = 0x22, OP_LOGIN_RSP = 0x23,
    OP_TEXT_RSP = 0x24, OP_DATA_IN = 0x25, OP_LOGOUT_RSP = 0x26, OP_R2T = 0x31,
    OP_ASYNC = 0x32, OP_REJECT = 0x3f,
};

#define BHS_I 0x40          /* byte 0: immediate delivery */
#define BHS_F 0x80          /* byte 1: final */
#define CMD_R 0x40
#define CMD_W 0x20
#define LOGIN_T 0x80
#define LOGIN_C 0x40
#define DIN_O 0x04
#define DIN_U 0x02
#define DIN_S 0x01

/* Reject reasons */
enum { REJ_DIGEST = 0x02, REJ_SNACK = 0x03, REJ_PROTOCOL = 0x04, REJ_NOT_SUPPORTED = 0x05,
       REJ_IMMEDIATE = 0x06, REJ_TASK_IN_PROGRESS = 0x07, REJ_INVALID_DATA_ACK = 0x08,
       REJ_INVALID_FIELD = 0x09, REJ_LONG_OP = 0x0a, REJ_WAITING_LOGOUT = 0x0c };

static inline uint16_t get_be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t get_be24(const uint8_t *p) { return (uint32_t)p[0] << 16 | p[1] << 8 | p[2]; }
static inline uint32_t get_be32(const uint8_t *p)
{ return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static inline uint64_t get_be64(const uint8_t *p) { return (uint64_t)get_be32(p) << 32 | get_be32(p + 4); }
static inline void put_be16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v; }
static inline void put_be24(uint8_t *p, uint32_t v) { p[0] = v >> 16; p[1] = v >> 8; p[2] = v; }
static inline void put_be32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }
static inline void put_be64(uint8_t *p, uint64_t v) { put_be32(p, v >> 32); put_be32(p + 4, (uint32_t)v); }

/* serial number arithmetic (RFC 1982, 32 bit) */
static inline bool sn_lt(uint32_t a, uint32_t b) { return a != b && (int32_t)(a - b) < 0; }
static inline bool sn_le(uint32_t a, uint32_t b) { return a == b || (int32_t)(a - b) < 0; }

static inline uint8_t bhs_opcode(const uint8_t *bhs) { return bhs[0] & 0x3f; }
static inline bool bhs_immediate(const uint8_t *bhs) { return bhs[0] & BHS_I; }
static inline uint32_t bhs_ahs_len(const uint8_t *bhs) { return (uint32_t)bhs[4] * 4; }
static inline uint32_t bhs_data_len(const uint8_t *bhs) { return get_be24(bhs + 5); }
static inline uint32_t bhs_itt(const uint8_t *bhs) { return get_be32(bhs + 16); }
static inline uint32_t pad4(uint32_t n) { return (4 - (n & 3)) & 3; }

/* Total bytes of the PDU that follow the BHS (AHS, digests, data, padding). */
static inline uint64_t pdu_rest_len(const uint8_t *bhs, bool hdigest, bool ddigest)
{
    uint32_t dl = bhs_data_len(bhs);
    return bhs_ahs_len(bhs) + (hdigest ? 4 : 0) + dl + pad4(dl) + (ddigest && dl ? 4 : 0);
}

/* LUN field <-> LUN number (peripheral and flat addressing; others -> UINT64_MAX) */
uint64_t lun_decode(const uint8_t *f);
void lun_encode(uint8_t *f, uint64_t lun);

/* CRC32C as sent on the wire (RFC 7143 digests), continuing from prev (0 to start). */
uint32_t iscsi_crc32c(const void *buf, size_t len, uint32_t prev);

/* Text keys: "key=value\0" pairs. */
#define TEXT_MAX_PAIRS 64
#define TEXT_MAX_KEY 63
#define TEXT_MAX_VALUE 8192
struct text_pair { const char *key, *value; };
struct text_list { unsigned n; struct text_pair p[TEXT_MAX_PAIRS]; };
/* Parses buf[0..len) in place (NULs inserted); buf[len] must be a NUL. Returns 0, or -1 if malformed (missing '=',
 * over-long key/value, too many pairs, duplicate key). A trailing partial pair without
 * its NUL is accepted (some initiators omit the last NUL). */
int text_parse(char *buf, size_t len, struct text_list *out);
const char *text_get(const struct text_list *l, const char *key);

/* Growable output buffer for text responses. */
struct text_out { char *buf; size_t len, cap; bool oom; };
void text_add(struct text_out *o, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void text_free(struct text_out *o);

/* Helpers for negotiation values */
int text_parse_number(const char *v, uint64_t *out);      /* decimal or 0x hex; 0 or -1 */
bool text_list_has(const char *list, const char *item);   /* comma separated */
/* Hex/base64 binary values ("0x..." or "0b..."); returns bytes decoded or -1. */
int text_decode_binary(const char *v, uint8_t *out, size_t max);
void text_encode_hex(const uint8_t *in, size_t n, char *out); /* out: 2n+3 bytes, "0x.." */
