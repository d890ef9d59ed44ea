#pragma once
/* Opaque NFSv3 file handles (<= 64 bytes):
 *   "NX" | version | klen | export_id | export generation | kernel handle type |
 *   kernel handle (klen <= 40 bytes, from name_to_handle_at) | 64-bit keyed MAC
 * The MAC (XXH3-64 keyed with a secret persisted in the state dir) makes handles
 * unforgeable by clients, so open_by_handle_at only ever sees handles we minted by
 * walking down from an export root. */
#include <stddef.h>
#include <stdint.h>

#define NFS_FH_MAX 64
#define NFS_FH_KMAX 40
#define NFS_FH_SECRET_LEN 192

struct nfs_fh_key {            /* the kernel part; also the fd-cache key */
    int32_t type;
    uint32_t len;
    uint8_t bytes[NFS_FH_KMAX];
};

struct nfs_fh_parsed {
    uint32_t export_id, gen;
    struct nfs_fh_key k;
};

struct nfs_fh_secret { uint8_t s[NFS_FH_SECRET_LEN]; };

/* Loads state_dir/nfs-fh-secret or creates it (0600). Empty state_dir: ephemeral
 * secret (handles then do not survive restarts). 0 or -errno. */
int nfs_fh_secret_load(const char *state_dir, struct nfs_fh_secret *out);
/* Encodes into out (NFS_FH_MAX bytes); returns the length. */
size_t nfs_fh_encode(const struct nfs_fh_secret *sec, uint32_t export_id, uint32_t gen,
                     const struct nfs_fh_key *k, uint8_t *out);
/* 0 if well-formed and the MAC verifies, -1 otherwise. */
int nfs_fh_decode(const struct nfs_fh_secret *sec, const uint8_t *fh, size_t len,
                  struct nfs_fh_parsed *out);
/* name_to_handle_at wrapper (never follows symlinks unless flags say so). 0 or -errno. */
int nfs_fh_from_name(int dirfd, const char *name, int flags, struct nfs_fh_key *k);
