#pragma once
/* Built-in NFSv3 + MOUNT v3 service (RFC 1813, ONC RPC over TCP, RFC 5531). The
 * daemon core configures it only through these calls; storage is reached only
 * through struct nasd_fsroot. */
#include <stddef.h>
#include <stdint.h>
#include "util/stats.h"
#include "storage/fsroot.h"

#define NFS_MAX_CLIENT_NETS 32

struct nfs_client_net {
    int family;          /* AF_INET or AF_INET6 */
    uint8_t addr[16];    /* network address, bytes in network order */
    int prefix;          /* CIDR prefix length */
};

struct nfs_export_cfg {
    uint32_t export_id;       /* stable id (DB row id); goes into file handles */
    char path[1024];          /* path clients mount, e.g. "/tank/share" */
    struct nasd_fsroot *fs;   /* the service takes its own reference */
    unsigned nnets;           /* 0: any client */
    struct nfs_client_net nets[NFS_MAX_CLIENT_NETS];
    int read_only;
    int root_squash;          /* uid 0 -> anonuid/anongid */
    int all_squash;           /* every uid -> anonuid/anongid */
    uint32_t anonuid, anongid;
    struct nasd_io_stats *stats; /* may be NULL; service takes a ref */
};

struct nfs_server_cfg {
    char bind_addr[64];   /* "127.0.0.1", "0.0.0.0" */
    int nfs_port;         /* 2049 in production; tests use high ports; 0 = ephemeral */
    int mount_port;       /* 20048; 0 = ephemeral */
    int portmap_port;     /* built-in RPCBIND v2 (111 in production); -1 = none */
    int workers;          /* 0 = default (NFS_DEFAULT_WORKERS) */
    char state_dir[1024]; /* where the service may keep persistent state (handles) */
    int held;             /* bound but refusing connections until nfs_server_listen (exports first) */
    /* Descriptor caps (0 = the NFS_DEFAULT_* below): connections in all, per client
     * address, and seconds a connection with nothing in flight may stay silent. */
    unsigned max_conns, max_conns_per_addr, idle_timeout_s;
};
#define NFS_DEFAULT_MAX_CONNS 1024
#define NFS_DEFAULT_MAX_CONNS_PER_ADDR 128
#define NFS_DEFAULT_IDLE_TIMEOUT_S 360   /* as knfsd ages out idle transports */

struct nfs_server;
struct nfs_server *nfs_server_start(const struct nfs_server_cfg *cfg, char *err, size_t errlen);
int nfs_server_set_export(struct nfs_server *s, const struct nfs_export_cfg *cfg); /* add/replace by export_id */
int nfs_server_remove_export(struct nfs_server *s, uint32_t export_id);          /* -ENOENT if unknown */
int nfs_server_listen(struct nfs_server *s, char *err, size_t errlen);
void nfs_server_stop(struct nfs_server *s);
int nfs_server_nfs_port(struct nfs_server *s);
int nfs_server_mount_port(struct nfs_server *s);
/* Parse "10.0.0.0/8", "127.0.0.1", "::1/128". 0 or -EINVAL. */
int nfs_parse_client_net(const char *s, struct nfs_client_net *out);
