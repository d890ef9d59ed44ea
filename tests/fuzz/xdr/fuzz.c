/* Fuzz harness: the XDR decoders and encoders (nfs/xdr.h), the RPC call header parser,
 * record-mark reassembly, the file-handle decoder and the MOUNT path normaliser over
 * arbitrary bytes. A decode must never read past the buffer and an encode never write
 * past its capacity, whatever lengths the input claims. The first byte picks the target. */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "nfs/fh.h"
#include "nfs/internal.h"
#include "nfs/rpc.h"
#include "nfs/xdr.h"

static void decoders(const uint8_t *data, size_t size)
{
    struct xdr_dec d;
    char s[256];
    uint32_t n;
    xdr_dec_init(&d, data, size);
    while (!d.err && xdr_dec_left(&d)) {
        switch (xdr_get_u32(&d) % 5) {
        case 0: (void)xdr_get_u64(&d); break;
        case 1: (void)xdr_get_bool(&d); break;
        case 2: (void)xdr_get_opaque(&d, &n, 1024); break;
        case 3: xdr_get_string(&d, s, sizeof s, sizeof s - 1); break;
        case 4: (void)xdr_get_fixed(&d, xdr_get_u32(&d) & 0xffff); break;
        }
    }
}

/* Encodes pieces of the input into a buffer whose capacity the input also picks; the
 * buffer is exactly that large on the heap, so ASan sees any write past it. */
static void encoders(const uint8_t *data, size_t size)
{
    if (size < 2) return;
    size_t cap = data[0] | (size_t)(data[1] & 3) << 8;
    uint8_t *buf = malloc(cap ? cap : 1);
    struct xdr_enc e;
    xdr_enc_init(&e, buf, cap);
    for (size_t i = 2; i + 1 < size && !e.err; i += 2) {
        size_t len = data[i + 1] % (size - i);
        switch (data[i] % 5) {
        case 0: xdr_put_u32(&e, data[i + 1]); break;
        case 1: xdr_put_u64(&e, data[i + 1]); break;
        case 2: xdr_put_fixed(&e, data + i, len); break;
        case 3: xdr_put_opaque(&e, data + i, (uint32_t)len); break;
        case 4: {
            char s[256];
            memcpy(s, data + i, len < 255 ? len : 255);
            s[len < 255 ? len : 255] = 0;
            xdr_put_string(&e, s);
            break;
        }
        }
    }
    if (!e.err && e.len > cap) abort();
    free(buf);
}

static void rpc_header(const uint8_t *data, size_t size)
{
    struct xdr_dec d;
    struct rpc_call c;
    xdr_dec_init(&d, data, size);
    if (rpc_parse_call(&d, &c) == RPC_PARSE_OK && c.cred.ngids > RPC_MAX_GIDS) abort();
}

static int count_record(void *arg, uint8_t *rec, size_t len)
{
    (*(size_t *)arg) += len;
    free(rec);
    return 0;
}

static void records(const uint8_t *data, size_t size)
{
    struct rm_reasm r;
    size_t total = 0;
    rm_init(&r, 4096);
    for (size_t i = 0; i < size;) {            /* feed in uneven pieces, as TCP would */
        size_t n = 1 + data[i] % 61;
        if (n > size - i) n = size - i;
        if (rm_feed(&r, data + i, n, count_record, &total) < 0) break;
        i += n;
    }
    rm_free(&r);
    if (total > size) abort();
}

static void handles(const uint8_t *data, size_t size)
{
    static struct nfs_fh_secret sec;
    static int ready;
    if (!ready) { memset(sec.s, 7, sizeof sec.s); nfs_fh_secret_prepare(&sec); ready = 1; }
    struct nfs_fh_parsed p;
    if (nfs_fh_decode(&sec, data, size, &p) == 0 && p.k.len > NFS_FH_KMAX) abort();
}

static void mount_paths(const uint8_t *data, size_t size)
{
    char in[1100], out[1025];
    size_t n = size < sizeof in - 1 ? size : sizeof in - 1;
    memcpy(in, data, n);
    in[n] = 0;
    if (nfs_mount_path_normalize(in, out, sizeof out) == 0 && (out[0] != '/' || strstr(out, "//") ||
                                                             strstr(out, "/./") || strstr(out, "/../")))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    switch (data[0] % 6) {
    case 0: decoders(p, n); break;
    case 1: encoders(p, n); break;
    case 2: rpc_header(p, n); break;
    case 3: records(p, n); break;
    case 4: handles(p, n); break;
    case 5: mount_paths(p, n); break;
    }
    return 0;
}
