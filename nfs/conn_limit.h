#pragma once
/* Connection counts per client address for the NFS service's caps (network thread only). */
#include <stdint.h>
#include <sys/socket.h>

struct nfs_addr_count;
struct nfs_conn_limits {
    struct nfs_addr_count *buckets[256];
    unsigned total;
};

/* Counts a new connection from peer; 0, or -1 (nothing counted) if the total would pass
 * max_total or this address's count would pass max_per_addr. */
int nfs_conn_limit_take(struct nfs_conn_limits *l, const struct sockaddr_storage *peer,
                        unsigned max_total, unsigned max_per_addr);
void nfs_conn_limit_release(struct nfs_conn_limits *l, const struct sockaddr_storage *peer);
unsigned nfs_conn_limit_of(const struct nfs_conn_limits *l, const struct sockaddr_storage *peer);
void nfs_conn_limit_clear(struct nfs_conn_limits *l);
