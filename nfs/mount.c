/* MOUNT v3 (RFC 1813 appendix I) and the built-in portmapper (RPCBIND v2, with
 * GETADDR from v3/v4 for clients that prefer it). */
#define _GNU_SOURCE
#include "nfs/internal.h"
#include "util/log.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MNT3_OK = 0, MNT3ERR_NOENT = 2, MNT3ERR_IO = 5, MNT3ERR_ACCES = 13, MNT3ERR_NOTDIR = 20,
       MNT3ERR_NAMETOOLONG = 63, MNT3ERR_SERVERFAULT = 10006 };
#define MNT_PATH_MAX 1024

static uint32_t mnt_errno(int err)
{
    switch (err) {
    case ENOENT: return MNT3ERR_NOENT;
    case ENOTDIR: return MNT3ERR_NOTDIR;
    case EACCES: case EPERM: case ELOOP: return MNT3ERR_ACCES;
    case ENAMETOOLONG: return MNT3ERR_NAMETOOLONG;
    default: return MNT3ERR_IO;
    }
}

/* Walks rest ("a/b/c") down from the export root like LOOKUP would: no "..",
 * no symlinks, no other filesystem mounted inside; every component a directory.
 * Runs with root fs credentials, as mountd does. Fills k; returns a mountstat3. */
static uint32_t mnt_resolve_sub(struct nfs_ctx *c, struct nfs_export *e, const char *rest, struct nasd_fh *k)
{
    nfs_creds_root(c->w);
    struct nasd_fsroot *fs = e->fs;
    int cur = fs->root_fd;
    uint32_t st = MNT3_OK;
    while (*rest && !st) {
        const char *slash = strchr(rest, '/');
        size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
        char comp[NAME_MAX + 1];
        if (n > NAME_MAX) { st = MNT3ERR_NAMETOOLONG; break; }
        memcpy(comp, rest, n);
        comp[n] = 0;
        rest += n;
        while (*rest == '/') rest++;
        if (n == 0 || !strcmp(comp, ".")) continue;
        if (!strcmp(comp, "..")) { st = MNT3ERR_ACCES; break; }
        int fd = fs->vfs->openat(fs, cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
        struct stat sb;
        int r;
        if (fd < 0) st = mnt_errno(-fd);
        else if ((r = nfs_vfs_fstat(fs, fd, &sb)) < 0) st = mnt_errno(-r);
        else if (S_ISLNK(sb.st_mode) || sb.st_dev != e->dev) st = MNT3ERR_ACCES;
        else if (!S_ISDIR(sb.st_mode)) st = MNT3ERR_NOTDIR;
        if (cur != fs->root_fd) fs->vfs->close(fs, cur);
        cur = fd;
    }
    if (!st) {
        int r = fs->vfs->handle(fs, cur, "", AT_EMPTY_PATH, k);
        if (r) st = mnt_errno(-r);
    }
    if (cur >= 0 && cur != fs->root_fd) fs->vfs->close(fs, cur);
    return st;
}

static void mnt_mnt(struct nfs_ctx *c)
{
    char raw[MNT_PATH_MAX + 1], path[MNT_PATH_MAX + 1];
    xdr_get_string(c->args, raw, sizeof raw, MNT_PATH_MAX);
    if (c->args->err) { c->res->len = 0; rpc_put_accepted(c->res, c->call.xid, RPC_GARBAGE_ARGS); return; }
    const char *rest = "";
    char epath[NASD_LOG_ESC_SIZE(96)]; /* the client's path as logged: escaped, cut at 96 bytes */
    nasd_log_escape(raw, strnlen(raw, 96), epath, sizeof epath);
    int ne = nfs_mount_path_normalize(raw, path, sizeof path);
    if (ne) {
        log_info("nfs: mount of '%s' by %s refused: %s", epath, c->conn->peer_str,
                 ne == -EACCES ? "\"..\" in the path" : "not an absolute path");
        xdr_put_u32(c->res, ne == -EACCES ? MNT3ERR_ACCES : ne == -ENAMETOOLONG ? MNT3ERR_NAMETOOLONG : MNT3ERR_NOENT);
        return;
    }
    struct nfs_export *e = nfs_export_find_prefix(c->srv, path, &rest);
    if (!e) {
        log_info("nfs: mount of unknown path '%s' by %s", epath, c->conn->peer_str);
        xdr_put_u32(c->res, MNT3ERR_NOENT);
        return;
    }
    if (!nfs_export_allows(e, &c->conn->peer)) {
        log_warn("nfs: mount of %s refused for client %s", epath, c->conn->peer_str);
        xdr_put_u32(c->res, MNT3ERR_ACCES);
        nfs_export_put(e);
        return;
    }
    uint8_t fh[NFS_FH_MAX];
    size_t fh_len = e->root_fh_len;
    memcpy(fh, e->root_fh, fh_len);
    if (*rest) {                       /* a directory inside the export */
        struct nasd_fh k;
        uint32_t st = mnt_resolve_sub(c, e, rest, &k);
        if (st) {
            log_info("nfs: mount of %s by %s refused (mountstat %u)", epath, c->conn->peer_str, st);
            xdr_put_u32(c->res, st);
            nfs_export_put(e);
            return;
        }
        fh_len = nfs_export_make_fh(c->srv, e, &k, fh);
    }
    xdr_put_u32(c->res, MNT3_OK);
    xdr_put_opaque(c->res, fh, (uint32_t)fh_len);
    xdr_put_u32(c->res, 2);            /* auth flavors */
    xdr_put_u32(c->res, AUTH_SYS);
    xdr_put_u32(c->res, AUTH_NONE);
    nfs_mounts_add(c->srv, c->conn->peer_str, path);
    nfs_export_put(e);
}

static void mnt_dump(struct nfs_ctx *c)
{
    pthread_mutex_lock(&c->srv->mnt_lock);
    for (struct nfs_mount_entry *m = c->srv->mnt_buckets ? c->srv->mnt_list.next : NULL;
         m && m != &c->srv->mnt_list; m = m->next) {
        if (c->res->cap - c->res->len < 2048) break;
        xdr_put_u32(c->res, 1);
        xdr_put_string(c->res, m->host);
        xdr_put_string(c->res, m->path);
    }
    pthread_mutex_unlock(&c->srv->mnt_lock);
    xdr_put_u32(c->res, 0);
}

static void put_net(struct xdr_enc *x, const struct nfs_client_net *n)
{
    char a[INET6_ADDRSTRLEN], s[INET6_ADDRSTRLEN + 8];
    inet_ntop(n->family, n->addr, a, sizeof a);
    snprintf(s, sizeof s, "%s/%d", a, n->prefix);
    xdr_put_string(x, s);
}

static void mnt_export(struct nfs_ctx *c)
{
    struct nfs_server *s = c->srv;
    pthread_rwlock_rdlock(&s->exports_lock);
    for (unsigned i = 0; i < s->nexports; i++) {
        const struct nfs_export *e = s->exports[i];
        if (c->res->cap - c->res->len < 4096) break;
        xdr_put_u32(c->res, 1);
        xdr_put_string(c->res, e->cfg.path);
        for (unsigned j = 0; j < e->cfg.nnets; j++) {
            xdr_put_u32(c->res, 1);
            put_net(c->res, &e->cfg.nets[j]);
        }
        xdr_put_u32(c->res, 0);
    }
    pthread_rwlock_unlock(&s->exports_lock);
    xdr_put_u32(c->res, 0);
}

void nfs_mount_dispatch(struct nfs_ctx *c)
{
    uint32_t proc = c->call.proc, xid = c->call.xid;
    if (c->call.vers < 1 || c->call.vers > 3) { rpc_put_prog_mismatch(c->res, xid, 1, 3); return; }
    if (proc > 5 || (proc == 1 && c->call.vers != 3)) { rpc_put_accepted(c->res, xid, RPC_PROC_UNAVAIL); return; }
    rpc_put_accepted(c->res, xid, RPC_SUCCESS);
    char path[MNT_PATH_MAX + 1];
    switch (proc) {
    case 0: break;
    case 1: mnt_mnt(c); break;
    case 2: mnt_dump(c); break;
    case 3: {
        char norm[MNT_PATH_MAX + 1];
        xdr_get_string(c->args, path, sizeof path, MNT_PATH_MAX);
        if (c->args->err) { c->res->len = 0; rpc_put_accepted(c->res, xid, RPC_GARBAGE_ARGS); break; }
        if (!nfs_mount_path_normalize(path, norm, sizeof norm)) nfs_mounts_remove(c->srv, c->conn->peer_str, norm);
        break;
    }
    case 4: nfs_mounts_remove(c->srv, c->conn->peer_str, NULL); break;
    case 5: mnt_export(c); break;
    }
}

/* ---- portmapper ---- */

#define IPPROTO_TCP_NUM 6

static uint32_t pmap_lookup(struct nfs_server *s, uint32_t prog, uint32_t vers, uint32_t prot)
{
    if (prot != IPPROTO_TCP_NUM) return 0;
    if (prog == PROG_NFS && vers == 3) return (uint32_t)s->port[0];
    if (prog == PROG_MOUNT && vers >= 1 && vers <= 3) return (uint32_t)s->port[1];
    if (prog == PROG_PORTMAP && vers >= 2 && vers <= 4 && s->listen_fd[2] >= 0) return (uint32_t)s->port[2];
    return 0;
}

static void pmap_dump(struct nfs_ctx *c)
{
    static const uint32_t maps[][2] = { { PROG_PORTMAP, 2 }, { PROG_NFS, 3 }, { PROG_MOUNT, 1 },
                                        { PROG_MOUNT, 2 }, { PROG_MOUNT, 3 } };
    for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++) {
        uint32_t port = pmap_lookup(c->srv, maps[i][0], maps[i][1], IPPROTO_TCP_NUM);
        if (!port) continue;
        xdr_put_u32(c->res, 1);
        xdr_put_u32(c->res, maps[i][0]);
        xdr_put_u32(c->res, maps[i][1]);
        xdr_put_u32(c->res, IPPROTO_TCP_NUM);
        xdr_put_u32(c->res, port);
    }
    xdr_put_u32(c->res, 0);
}

/* RPCBIND v3/v4 GETADDR: universal address "a.b.c.d.p1.p2" of this server. */
static void rpcb_getaddr(struct nfs_ctx *c)
{
    char netid[64], addr[128], owner[256];
    uint32_t prog = xdr_get_u32(c->args), vers = xdr_get_u32(c->args);
    xdr_get_string(c->args, netid, sizeof netid, 63);
    xdr_get_string(c->args, addr, sizeof addr, 127);
    xdr_get_string(c->args, owner, sizeof owner, 255);
    if (c->args->err) { c->res->len = 0; rpc_put_accepted(c->res, c->call.xid, RPC_GARBAGE_ARGS); return; }
    uint32_t port = strncmp(netid, "tcp", 3) ? 0 : pmap_lookup(c->srv, prog, vers, IPPROTO_TCP_NUM);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "", ua[INET6_ADDRSTRLEN + 16] = "";
    if (port && getsockname(c->conn->fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof host);
        else inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof host);
        snprintf(ua, sizeof ua, "%s.%u.%u", host, port >> 8, port & 0xff);
    }
    xdr_put_string(c->res, ua);
}

void nfs_portmap_dispatch(struct nfs_ctx *c)
{
    uint32_t xid = c->call.xid, proc = c->call.proc, vers = c->call.vers;
    if (vers < 2 || vers > 4) { rpc_put_prog_mismatch(c->res, xid, 2, 4); return; }
    if (vers > 2) {
        if (proc == 0) rpc_put_accepted(c->res, xid, RPC_SUCCESS);
        else if (proc == 3) { rpc_put_accepted(c->res, xid, RPC_SUCCESS); rpcb_getaddr(c); }
        else rpc_put_accepted(c->res, xid, RPC_PROC_UNAVAIL);
        return;
    }
    if (proc > 4) { rpc_put_accepted(c->res, xid, RPC_PROC_UNAVAIL); return; }
    uint32_t a[4] = { 0 };
    if (proc >= 1 && proc <= 3) {
        for (int i = 0; i < 4; i++) a[i] = xdr_get_u32(c->args);
        if (c->args->err) { rpc_put_accepted(c->res, xid, RPC_GARBAGE_ARGS); return; }
    }
    rpc_put_accepted(c->res, xid, RPC_SUCCESS);
    switch (proc) {
    case 0: break;
    case 1: case 2: xdr_put_u32(c->res, 0); break;   /* SET/UNSET: registrations are fixed */
    case 3: xdr_put_u32(c->res, pmap_lookup(c->srv, a[0], a[1], a[2])); break;
    case 4: pmap_dump(c); break;
    }
}
