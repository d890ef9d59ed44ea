/* Self-test block header encode/verify (little-endian on the wire). */
#include "selftest/integrity.h"
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH64_state_t on the stack */
#include <xxhash.h>

/* layout: magic@0 job@8 offset@16 seq@24 len@32 reserved@36 checksum@40 */
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint64_t get64(const uint8_t *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint32_t get32(const uint8_t *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }

static uint64_t checksum(const uint8_t *b, size_t len)
{
    XXH64_state_t st;
    XXH64_reset(&st, 0x5e1f7e57);
    XXH64_update(&st, b, 40);
    XXH64_update(&st, b + ST_HDR_SIZE, len - ST_HDR_SIZE);
    return XXH64_digest(&st);
}

void st_block_fill(void *buf, size_t len, uint64_t job_id, uint64_t offset, uint64_t seq)
{
    uint8_t *b = buf;
    put64(b, ST_HDR_MAGIC);
    put64(b + 8, job_id);
    put64(b + 16, offset);
    put64(b + 24, seq);
    put32(b + 32, (uint32_t)len);
    put32(b + 36, 0);
    /* xorshift64* body seeded by the header: every block differs */
    uint64_t x = (job_id * 0x9e3779b97f4a7c15ull) ^ (offset + 0x632be59bd9b4e019ull) ^ (seq << 17) ^ 1;
    for (size_t i = ST_HDR_SIZE; i < len; i += 8) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        uint64_t v = x * 0x2545f4914f6cdd1dull;
        memcpy(b + i, &v, len - i < 8 ? len - i : 8);
    }
    put64(b + 40, checksum(b, len));
}

enum st_verify st_block_verify(const void *buf, size_t len, uint64_t job_id, uint64_t offset, uint64_t expect_seq)
{
    const uint8_t *b = buf;
    if (len < ST_HDR_SIZE || get64(b) != ST_HDR_MAGIC) return ST_BLOCK_BAD_MAGIC;
    if (get32(b + 32) != len) return ST_BLOCK_BAD_LENGTH;
    if (get64(b + 40) != checksum(b, len)) return ST_BLOCK_BAD_CHECKSUM;
    if (get64(b + 8) != job_id) return ST_BLOCK_WRONG_JOB;
    if (get64(b + 16) != offset) return ST_BLOCK_WRONG_OFFSET;
    if (expect_seq != UINT64_MAX && get64(b + 24) != expect_seq) return ST_BLOCK_WRONG_SEQ;
    return ST_BLOCK_OK;
}

const char *st_verify_str(enum st_verify v)
{
    static const char *s[] = { "ok", "bad magic", "bad checksum", "wrong job", "wrong offset", "stale sequence",
                               "bad length" };
    return v <= ST_BLOCK_BAD_LENGTH ? s[v] : "?";
}
