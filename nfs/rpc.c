/* ONC RPC call header parsing and reply header encoding. */
#include "nfs/rpc.h"

static int parse_auth_sys(const uint8_t *body, uint32_t len, struct rpc_cred *c)
{
    struct xdr_dec d;
    xdr_dec_init(&d, body, len);
    (void)xdr_get_u32(&d);              /* stamp */
    uint32_t mlen;
    (void)xdr_get_opaque(&d, &mlen, 255); /* machine name */
    c->uid = xdr_get_u32(&d);
    c->gid = xdr_get_u32(&d);
    uint32_t n = xdr_get_u32(&d);
    if (d.err || n > RPC_MAX_GIDS) return -1;
    for (uint32_t i = 0; i < n; i++) c->gids[i] = xdr_get_u32(&d);
    c->ngids = n;
    return d.err || xdr_dec_left(&d) ? -1 : 0;
}

enum rpc_parse_result rpc_parse_call(struct xdr_dec *d, struct rpc_call *c)
{
    memset(c, 0, sizeof *c);
    c->xid = xdr_get_u32(d);
    uint32_t type = xdr_get_u32(d);
    if (d->err || type != RPC_CALL) return RPC_PARSE_DROP;
    uint32_t rpcvers = xdr_get_u32(d);
    if (d->err) return RPC_PARSE_DROP;
    if (rpcvers != RPC_VERSION) return RPC_PARSE_RPC_MISMATCH;
    c->prog = xdr_get_u32(d);
    c->vers = xdr_get_u32(d);
    c->proc = xdr_get_u32(d);
    c->cred.flavor = xdr_get_u32(d);
    uint32_t clen;
    const uint8_t *cbody = xdr_get_opaque(d, &clen, RPC_MAX_AUTH);
    uint32_t vflavor = xdr_get_u32(d), vlen;
    (void)vflavor;
    (void)xdr_get_opaque(d, &vlen, RPC_MAX_AUTH);
    if (d->err) return RPC_PARSE_BADCRED;
    if (c->cred.flavor == AUTH_SYS) {
        if (parse_auth_sys(cbody, clen, &c->cred) < 0) return RPC_PARSE_BADCRED;
    } else if (c->cred.flavor == AUTH_NONE) {
        c->cred.uid = c->cred.gid = 65534;
    } else {
        return RPC_PARSE_WEAKAUTH;
    }
    return RPC_PARSE_OK;
}

void rpc_put_accepted(struct xdr_enc *e, uint32_t xid, enum rpc_accept_stat stat)
{
    xdr_put_u32(e, xid);
    xdr_put_u32(e, RPC_REPLY);
    xdr_put_u32(e, 0);          /* MSG_ACCEPTED */
    xdr_put_u32(e, AUTH_NONE);  /* verifier */
    xdr_put_u32(e, 0);
    xdr_put_u32(e, stat);
}

void rpc_put_prog_mismatch(struct xdr_enc *e, uint32_t xid, uint32_t low, uint32_t high)
{
    rpc_put_accepted(e, xid, RPC_PROG_MISMATCH);
    xdr_put_u32(e, low);
    xdr_put_u32(e, high);
}

void rpc_put_rpc_mismatch(struct xdr_enc *e, uint32_t xid)
{
    xdr_put_u32(e, xid);
    xdr_put_u32(e, RPC_REPLY);
    xdr_put_u32(e, 1);          /* MSG_DENIED */
    xdr_put_u32(e, 0);          /* RPC_MISMATCH */
    xdr_put_u32(e, RPC_VERSION);
    xdr_put_u32(e, RPC_VERSION);
}

void rpc_put_auth_error(struct xdr_enc *e, uint32_t xid, enum rpc_auth_stat why)
{
    xdr_put_u32(e, xid);
    xdr_put_u32(e, RPC_REPLY);
    xdr_put_u32(e, 1);          /* MSG_DENIED */
    xdr_put_u32(e, 1);          /* AUTH_ERROR */
    xdr_put_u32(e, why);
}
