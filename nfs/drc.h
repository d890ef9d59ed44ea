#pragma once
/* Duplicate request cache for non-idempotent NFSv3 calls. A client that
 * retransmits (timeout, reconnect) must not see REMOVE/CREATE/RENAME... executed
 * twice: a retransmission of a completed call gets the cached reply, one of a
 * call still executing is dropped (the original reply answers it).
 * Bounded (LRU over completed entries), one mutex, O(1) per call. */
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NFS_DRC_DEFAULT_ENTRIES 4096
#define NFS_DRC_REPLY_MAX 512   /* the replies of cached procedures are ~100-320 bytes */

struct nfs_drc_key {
    uint8_t addr[16];           /* client address (IPv4 as v4-mapped), not the port */
    uint32_t xid, prog, vers, proc;
    uint64_t sum;               /* hash of the arguments' first bytes and their length */
};

enum nfs_drc_verdict {
    NFS_DRC_NEW,          /* execute, then call nfs_drc_done(slot) */
    NFS_DRC_UNTRACKED,    /* execute; cache full of in-progress calls, nothing to do after */
    NFS_DRC_REPLAY,       /* send the reply copied into out */
    NFS_DRC_IN_PROGRESS,  /* drop the call */
};

struct nfs_drc;
struct nfs_drc *nfs_drc_new(unsigned max_entries);
void nfs_drc_free(struct nfs_drc *d);
/* Fills k from the peer, call header and argument bytes. */
void nfs_drc_key_init(struct nfs_drc_key *k, const struct sockaddr_storage *peer, uint32_t xid,
                      uint32_t prog, uint32_t vers, uint32_t proc, const uint8_t *args, size_t args_len);
/* out must hold NFS_DRC_REPLY_MAX bytes; *out_len set on REPLAY; *slot on NEW. */
enum nfs_drc_verdict nfs_drc_begin(struct nfs_drc *d, const struct nfs_drc_key *k, uint8_t *out,
                                   size_t *out_len, uint32_t *slot);
/* Completes a NEW call: caches the reply (or forgets the call if reply is NULL or too large). */
void nfs_drc_done(struct nfs_drc *d, uint32_t slot, const uint8_t *reply, size_t len);
/* Counters for tests and logs. */
struct nfs_drc_stats { uint64_t replays, dropped_in_progress, evictions; unsigned entries; };
void nfs_drc_get_stats(struct nfs_drc *d, struct nfs_drc_stats *out);
