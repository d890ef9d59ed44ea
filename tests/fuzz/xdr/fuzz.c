/* Fuzz harness: the XDR decoders (nfs/xdr.h) over arbitrary bytes; a decode must never
 * read past the buffer, whatever lengths the input claims. */
#include <stdint.h>
#include <stddef.h>
#include "nfs/xdr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
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
    return 0;
}
