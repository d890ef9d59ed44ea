/* Per-request credentials: squashing, per-thread fsuid/fsgid/groups (what the
 * kernel checks for posix datasets) mirrored into the vfs thread credential (what
 * userspace backends check), and the permission checks done here for I/O on
 * shared cached fds. */
#define _GNU_SOURCE
#include "nfs/internal.h"
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

void nfs_ctx_set_creds(struct nfs_ctx *c, const struct nfs_export *e)
{
    const struct rpc_cred *rc = &c->call.cred;
    uint32_t anu = e->cfg.anonuid, ang = e->cfg.anongid;
    if (e->cfg.all_squash || rc->flavor == AUTH_NONE) {
        c->uid = anu;
        c->gid = ang;
        c->ngids = 0;
        return;
    }
    c->uid = rc->uid;
    c->gid = rc->gid;
    c->ngids = 0;
    for (uint32_t i = 0; i < rc->ngids && i < RPC_MAX_GIDS; i++) c->gids[c->ngids++] = rc->gids[i];
    if (e->cfg.root_squash) {
        if (c->uid == 0) c->uid = anu;
        if (c->gid == 0) c->gid = ang;
        for (uint32_t i = 0; i < c->ngids; i++) if (c->gids[i] == 0) c->gids[i] = ang;
    }
}

/* The raw syscalls act on the calling thread only (glibc's setgroups would
 * broadcast to every thread of the process). */
static void set_thread_creds(struct nfs_worker *w, uint32_t uid, uint32_t gid, uint32_t ngroups,
                             const uint32_t *groups)
{
    if (w->creds_valid && w->fsuid == uid && w->fsgid == gid && w->ngroups == ngroups &&
        !memcmp(w->groups, groups, ngroups * sizeof *groups))
        return;
    if (!w->creds_valid || w->fsuid != uid) {
        /* switch through root so capabilities come back when going to uid 0 */
        syscall(SYS_setfsuid, uid);
    }
    if (!w->creds_valid || w->ngroups != ngroups || memcmp(w->groups, groups, ngroups * sizeof *groups)) {
        gid_t g[RPC_MAX_GIDS + 1];
        for (uint32_t i = 0; i < ngroups; i++) g[i] = groups[i];
        syscall(SYS_setgroups, (int)ngroups, g);
    }
    if (!w->creds_valid || w->fsgid != gid) syscall(SYS_setfsgid, gid);
    w->fsuid = uid;
    w->fsgid = gid;
    w->ngroups = ngroups;
    memcpy(w->groups, groups, ngroups * sizeof *groups);
    w->creds_valid = 1;
}

/* Only fsuid matters for capabilities (open_by_handle_at); groups stay as they are. */
void nfs_creds_root(struct nfs_worker *w)
{
    nasd_vfs_set_cred(NULL);
    if (w->creds_valid && w->fsuid == 0) return;
    syscall(SYS_setfsuid, 0);
    w->fsuid = 0;
}

void nfs_creds_user(struct nfs_ctx *c)
{
    struct nasd_vfs_cred vc = { .uid = c->uid, .gid = c->gid, .ngroups = 0 };
    for (uint32_t i = 0; i < c->ngids && i < NASD_VFS_MAX_GROUPS; i++) vc.groups[vc.ngroups++] = c->gids[i];
    nasd_vfs_set_cred(&vc);
    set_thread_creds(c->w, c->uid, c->gid, c->ngids, c->gids);
}

static int in_groups(const struct nfs_ctx *c, uint32_t gid)
{
    if (c->gid == gid) return 1;
    for (uint32_t i = 0; i < c->ngids; i++) if (c->gids[i] == gid) return 1;
    return 0;
}

/* want: 4 read, 2 write, 1 execute/search. owner_override: the owner may read and
 * write regardless of mode bits (NFS clients check at open time, the server must
 * not fail I/O on files created read-only or chmod'ed after open). */
int nfs_may(const struct nfs_ctx *c, const struct stat *st, int want, int owner_override)
{
    if (c->uid == 0) {
        if (!(want & 1)) return 1;
        return S_ISDIR(st->st_mode) || (st->st_mode & 0111);
    }
    if (owner_override && c->uid == st->st_uid && !(want & 1)) return 1;
    unsigned bits;
    if (c->uid == st->st_uid) bits = (st->st_mode >> 6) & 7;
    else if (in_groups(c, st->st_gid)) bits = (st->st_mode >> 3) & 7;
    else bits = st->st_mode & 7;
    return (bits & (unsigned)want) == (unsigned)want;
}
