#pragma once
/* Self-test data blocks: a header (magic, job id, offset, sequence, length, checksum)
 * followed by pseudo-random bytes derived from the header, so a misplaced, stale,
 * torn or corrupted block is told apart from the one that was written. */
#include <stddef.h>
#include <stdint.h>

#define ST_HDR_SIZE 48
#define ST_HDR_MAGIC 0x314b545344534e41ull /* "ANSDSTK1" little-endian */

enum st_verify {
    ST_BLOCK_OK = 0,
    ST_BLOCK_BAD_MAGIC,     /* not a self-test block (e.g. zeros, old data) */
    ST_BLOCK_BAD_CHECKSUM,  /* torn or corrupted */
    ST_BLOCK_WRONG_JOB,
    ST_BLOCK_WRONG_OFFSET,  /* written elsewhere: misdirected I/O */
    ST_BLOCK_WRONG_SEQ,     /* stale: an older write of this block */
    ST_BLOCK_BAD_LENGTH,
};

/* len >= ST_HDR_SIZE. */
void st_block_fill(void *buf, size_t len, uint64_t job_id, uint64_t offset, uint64_t seq);
/* expect_seq == UINT64_MAX accepts any sequence. */
enum st_verify st_block_verify(const void *buf, size_t len, uint64_t job_id, uint64_t offset, uint64_t expect_seq);
const char *st_verify_str(enum st_verify v);
