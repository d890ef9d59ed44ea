#pragma once
/* ONC RPC v2 message headers (RFC 5531): call parsing, reply encoding. */
#include <stdint.h>
#include "nfs/xdr.h"

#define RPC_VERSION 2
#define RPC_CALL 0
#define RPC_REPLY 1
#define AUTH_NONE 0
#define AUTH_SYS 1
#define RPC_MAX_AUTH 400
#define RPC_MAX_GIDS 16

enum rpc_accept_stat {
    RPC_SUCCESS = 0, RPC_PROG_UNAVAIL = 1, RPC_PROG_MISMATCH = 2, RPC_PROC_UNAVAIL = 3,
    RPC_GARBAGE_ARGS = 4, RPC_SYSTEM_ERR = 5,
};
enum rpc_auth_stat { AUTH_OK = 0, AUTH_BADCRED = 1, AUTH_REJECTEDCRED = 2, AUTH_TOOWEAK = 5 };

#define PROG_PORTMAP 100000
#define PROG_NFS 100003
#define PROG_MOUNT 100005

struct rpc_cred {
    uint32_t flavor;          /* AUTH_NONE or AUTH_SYS */
    uint32_t uid, gid;
    uint32_t ngids;
    uint32_t gids[RPC_MAX_GIDS];
};

struct rpc_call {
    uint32_t xid, prog, vers, proc;
    struct rpc_cred cred;
};

enum rpc_parse_result {
    RPC_PARSE_OK = 0,
    RPC_PARSE_DROP,        /* not even an xid / not a call: drop the record */
    RPC_PARSE_RPC_MISMATCH,/* rpcvers != 2 */
    RPC_PARSE_BADCRED,     /* malformed credential */
    RPC_PARSE_WEAKAUTH,    /* unsupported flavor */
};

/* Parses the call header; on OK, d points at the procedure arguments.
 * For non-DROP failures c->xid is valid so a rejection can be sent. */
enum rpc_parse_result rpc_parse_call(struct xdr_dec *d, struct rpc_call *c);

/* Reply headers. Accepted: xid, REPLY, MSG_ACCEPTED, null verifier, stat. */
void rpc_put_accepted(struct xdr_enc *e, uint32_t xid, enum rpc_accept_stat stat);
void rpc_put_prog_mismatch(struct xdr_enc *e, uint32_t xid, uint32_t low, uint32_t high);
void rpc_put_rpc_mismatch(struct xdr_enc *e, uint32_t xid);
void rpc_put_auth_error(struct xdr_enc *e, uint32_t xid, enum rpc_auth_stat why);
