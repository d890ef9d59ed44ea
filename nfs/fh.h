#pragma once
/* Opaque NFSv3 file handles (<= 64 bytes):
 *   "NX" | version | klen | export_id | export generation | handle type |
 *   backend handle (klen <= 40 bytes, struct nasd_fh from the vfs) | 64-bit MAC
 * The MAC (HMAC-SHA-256 truncated to 64 bits, keyed with a secret persisted in the
 * state dir) makes handles unforgeable by clients, so the backend's open_handle only
 * ever sees handles we minted by walking down from an export root. Version 1 handles
 * (keyed XXH3, which is not a MAC) are answered as stale: clients look them up again. */
#include <stddef.h>
#include <stdint.h>
#include <nettle/hmac.h>
#include "storage/vfs.h"

#define NFS_FH_MAX 64
#define NFS_FH_KMAX NASD_FH_KMAX
#define NFS_FH_SECRET_LEN 192

/* The backend part of a handle is struct nasd_fh (also the fd-cache key); the
 * old name stays for code that still spells it that way. */
#define nfs_fh_key nasd_fh

struct nfs_fh_parsed {
    uint32_t export_id, gen;
    struct nasd_fh k;
};

struct nfs_fh_secret {
    uint8_t s[NFS_FH_SECRET_LEN];
    struct hmac_sha256_ctx mac; /* keyed from s by nfs_fh_secret_prepare */
};

/* Loads state_dir/nfs-fh-secret or creates it (0600). Empty state_dir: ephemeral
 * secret (handles then do not survive restarts). 0 or -errno. */
int nfs_fh_secret_load(const char *state_dir, struct nfs_fh_secret *out);
/* Keys the MAC from out->s (load does it; for secrets filled in by hand). */
void nfs_fh_secret_prepare(struct nfs_fh_secret *out);
/* Encodes into out (NFS_FH_MAX bytes); returns the length. */
size_t nfs_fh_encode(const struct nfs_fh_secret *sec, uint32_t export_id, uint32_t gen,
                     const struct nasd_fh *k, uint8_t *out);
/* 0 if well-formed and the MAC verifies; -2 for a well-formed handle of an older format
 * (stale, not bad); -1 otherwise. */
int nfs_fh_decode(const struct nfs_fh_secret *sec, const uint8_t *fh, size_t len,
                  struct nfs_fh_parsed *out);
