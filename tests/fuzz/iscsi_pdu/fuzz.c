/* Fuzz harness: the iSCSI wire decoders (iscsi/pdu.h) and the operational key
 * negotiation: the first byte picks the input's use, the rest is a BHS, a text key list
 * or a key value; nothing may read past the input or fail on any value. */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "iscsi/iscsi_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint8_t sel = data[0];
    data++; size--;
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    switch (sel % 4) {
    case 0: {                                        /* BHS fields */
        if (size < ISCSI_BHS_LEN) break;
        (void)pdu_rest_len(data, sel & 0x10, sel & 0x20);
        (void)lun_decode(data + 8);
        uint8_t f[8];
        lun_encode(f, lun_decode(data + 8) & 0x3fff);
        (void)iscsi_crc32c(data, size, get_be32(data + 16));
        break;
    }
    case 1: {                                        /* key list, then every value decoder */
        struct text_list kl;
        if (text_parse(buf, size, &kl)) break;
        struct text_out o = { 0 };
        for (unsigned i = 0; i < kl.n; i++) {
            uint64_t n;
            uint8_t bin[1024];
            char hex[2 * 64 + 3];
            (void)text_parse_number(kl.p[i].value, &n);
            int bl = text_decode_binary(kl.p[i].value, bin, sizeof bin);
            if (bl > 0) text_encode_hex(bin, bl < 64 ? (size_t)bl : 64, hex);
            (void)text_list_has(kl.p[i].value, "CRC32C");
            (void)text_get(&kl, kl.p[i].key);
            text_add(&o, kl.p[i].key, "%s", kl.p[i].value);
        }
        text_free(&o);
        break;
    }
    case 2: {                                        /* login negotiation on a fresh connection */
        struct text_list kl;
        if (text_parse(buf, size, &kl)) break;
        struct iscsi_conn *c = calloc(1, sizeof *c);
        if (!c) break;
        c->mrdsl_tx = 8192;
        struct text_out o = { 0 };
        for (unsigned i = 0; i < kl.n; i++) (void)login_negotiate_key(c, kl.p[i].key, kl.p[i].value, &o);
        text_free(&o);
        free(c);
        break;
    }
    case 3: {                                        /* a single value, unterminated lists */
        uint64_t n;
        uint8_t bin[16];
        (void)text_parse_number(buf, &n);
        (void)text_decode_binary(buf, bin, sizeof bin);
        (void)text_list_has(buf, "None");
        break;
    }
    }
    free(buf);
    return 0;
}
