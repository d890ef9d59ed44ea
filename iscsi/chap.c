/* CHAP (RFC 1994) response: MD5(identifier || secret || challenge), via nettle. */
#include "iscsi/iscsi_int.h"
#include <nettle/md5.h>
#include <nettle/memops.h>
#include <string.h>

void chap_md5_response(uint8_t id, const char *secret, const uint8_t *chal, size_t clen, uint8_t out[16])
{
    struct md5_ctx ctx;
    md5_init(&ctx);
    md5_update(&ctx, 1, &id);
    md5_update(&ctx, strlen(secret), (const uint8_t *)secret);
    md5_update(&ctx, clen, chal);
    md5_digest(&ctx, MD5_DIGEST_SIZE, out);
}

bool chap_response_ok(uint8_t id, const char *secret, const uint8_t *chal, size_t clen, const uint8_t got[16])
{
    uint8_t want[16];
    chap_md5_response(id, secret, chal, clen, want);
    return memeql_sec(want, got, 16);
}
