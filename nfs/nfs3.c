/* NFSv3 dispatch and shared helpers: handle resolution, attribute encoding,
 * sattr3 decoding/application, errno mapping. */
#define _GNU_SOURCE
#include "nfs/nfs3.h"
#include "util/log.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

void nfs3_get_fh(struct xdr_dec *d, struct nfs3_fh *fh)
{
    fh->data = xdr_get_opaque(d, &fh->len, NFS_FH_MAX);
}

static void get_settime(struct xdr_dec *d, int *how, struct timespec *ts)
{
    *how = (int)xdr_get_u32(d);
    if (*how == 2) {
        ts->tv_sec = xdr_get_u32(d);
        ts->tv_nsec = xdr_get_u32(d);
        if (ts->tv_nsec >= 1000000000) d->err = 1;
    } else if (*how > 2) {
        d->err = 1;
    }
}

void nfs3_get_sattr(struct xdr_dec *d, struct nfs3_sattr *sa)
{
    memset(sa, 0, sizeof *sa);
    if ((sa->set_mode = xdr_get_bool(d))) sa->mode = xdr_get_u32(d);
    if ((sa->set_uid = xdr_get_bool(d))) sa->uid = xdr_get_u32(d);
    if ((sa->set_gid = xdr_get_bool(d))) sa->gid = xdr_get_u32(d);
    if ((sa->set_size = xdr_get_bool(d))) sa->size = xdr_get_u64(d);
    get_settime(d, &sa->atime_how, &sa->atime);
    get_settime(d, &sa->mtime_how, &sa->mtime);
}

void nfs3_get_name(struct xdr_dec *d, char *out)
{
    xdr_get_string(d, out, 1025, 1024);
}

uint32_t nfs3_check_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || strchr(name, '/')) return NFS3ERR_ACCES;
    if (n > NFS3_NAME_MAX) return NFS3ERR_NAMETOOLONG;
    return NFS3_OK;
}

uint32_t nfs3_errno(int err)
{
    if (err < 0) err = -err;
    switch (err) {
    case 0: return NFS3_OK;
    case EPERM: return NFS3ERR_PERM;
    case ENOENT: return NFS3ERR_NOENT;
    case ENXIO: return NFS3ERR_NXIO;
    case EACCES: return NFS3ERR_ACCES;
    case EEXIST: return NFS3ERR_EXIST;
    case EXDEV: return NFS3ERR_XDEV;
    case ENODEV: return NFS3ERR_NODEV;
    case ENOTDIR: return NFS3ERR_NOTDIR;
    case EISDIR: return NFS3ERR_ISDIR;
    case EINVAL: return NFS3ERR_INVAL;
    case EFBIG: return NFS3ERR_FBIG;
    case ENOSPC: return NFS3ERR_NOSPC;
    case EROFS: return NFS3ERR_ROFS;
    case EMLINK: return NFS3ERR_MLINK;
    case ENAMETOOLONG: return NFS3ERR_NAMETOOLONG;
    case ENOTEMPTY: return NFS3ERR_NOTEMPTY;
    case EDQUOT: return NFS3ERR_DQUOT;
    case ESTALE: return NFS3ERR_STALE;
    case ELOOP: return NFS3ERR_INVAL;   /* O_NOFOLLOW hit a symlink */
    case EOPNOTSUPP: return NFS3ERR_NOTSUPP;
    case EAGAIN: return NFS3ERR_JUKEBOX;
    case EBADF: return NFS3ERR_INVAL;
    default: return NFS3ERR_IO;
    }
}

int nfs3_is_root(const struct nfs_ctx *c, const struct stat *st)
{
    return st->st_ino == c->exp->root_ino && st->st_dev == c->exp->dev;
}

uint32_t nfs3_resolve(struct nfs_ctx *c, const struct nfs3_fh *fh, struct nfs3_obj *out)
{
    out->o = NULL;
    struct nfs_fh_parsed p;
    int de = nfs_fh_decode(&c->srv->secret, fh->data, fh->len, &p);
    if (de) return de == -2 ? NFS3ERR_STALE : NFS3ERR_BADHANDLE;
    if (!c->exp) {
        struct nfs_export *e = nfs_export_find_id(c->srv, p.export_id);
        if (!e) return NFS3ERR_STALE;
        c->exp = e;
        if (e->gen != p.gen) return NFS3ERR_STALE;
        if (!nfs_export_allows(e, &c->conn->peer)) {
            log_debug("nfs: client %s not allowed on export %s", c->conn->peer_str, e->cfg.path);
            return NFS3ERR_ACCES;
        }
        nfs_ctx_set_creds(c, e);
    } else if (c->exp->cfg.export_id != p.export_id || c->exp->gen != p.gen) {
        return NFS3ERR_XDEV;
    }
    int r = nfs_obj_get(c->exp, c->w, &p.k, &out->o);
    if (r) return nfs3_errno(r);
    if (nfs_vfs_fstat(c->exp->fs, out->o->fd, &out->st) < 0 || out->st.st_nlink == 0) {
        nfs_obj_evict(c->exp, out->o);
        nfs_obj_put(out->o);
        out->o = NULL;
        return NFS3ERR_STALE;
    }
    return NFS3_OK;
}

void nfs3_release(struct nfs3_obj *o)
{
    nfs_obj_put(o->o);
    o->o = NULL;
}

void nfs3_put_status(struct nfs_ctx *c, uint32_t st)
{
    c->status = (int)st;
    xdr_put_u32(c->res, st);
}

static uint32_t ftype_of(mode_t m)
{
    switch (m & S_IFMT) {
    case S_IFREG: return NF3REG;
    case S_IFDIR: return NF3DIR;
    case S_IFBLK: return NF3BLK;
    case S_IFCHR: return NF3CHR;
    case S_IFLNK: return NF3LNK;
    case S_IFSOCK: return NF3SOCK;
    default: return NF3FIFO;
    }
}

void nfs3_put_fattr(struct nfs_ctx *c, const struct stat *st)
{
    uint8_t *p = xdr_reserve(c->res, 84);
    if (!p) return;
    struct xdr_enc e;
    xdr_enc_init(&e, p, 84);
    xdr_put_u32(&e, ftype_of(st->st_mode));
    xdr_put_u32(&e, st->st_mode & 07777);
    xdr_put_u32(&e, (uint32_t)st->st_nlink);
    xdr_put_u32(&e, st->st_uid);
    xdr_put_u32(&e, st->st_gid);
    xdr_put_u64(&e, (uint64_t)st->st_size);
    xdr_put_u64(&e, (uint64_t)st->st_blocks * 512);
    xdr_put_u32(&e, major(st->st_rdev));
    xdr_put_u32(&e, minor(st->st_rdev));
    xdr_put_u64(&e, c->exp ? c->exp->fs->fsid : 0);
    xdr_put_u64(&e, st->st_ino);
    xdr_put_u32(&e, (uint32_t)st->st_atim.tv_sec);
    xdr_put_u32(&e, (uint32_t)st->st_atim.tv_nsec);
    xdr_put_u32(&e, (uint32_t)st->st_mtim.tv_sec);
    xdr_put_u32(&e, (uint32_t)st->st_mtim.tv_nsec);
    xdr_put_u32(&e, (uint32_t)st->st_ctim.tv_sec);
    xdr_put_u32(&e, (uint32_t)st->st_ctim.tv_nsec);
}

void nfs3_put_post_op(struct nfs_ctx *c, const struct stat *st)
{
    xdr_put_u32(c->res, st != NULL);
    if (st) nfs3_put_fattr(c, st);
}

void nfs3_put_wcc(struct nfs_ctx *c, const struct stat *pre, const struct stat *post)
{
    xdr_put_u32(c->res, pre != NULL);
    if (pre) {
        xdr_put_u64(c->res, (uint64_t)pre->st_size);
        xdr_put_u32(c->res, (uint32_t)pre->st_mtim.tv_sec);
        xdr_put_u32(c->res, (uint32_t)pre->st_mtim.tv_nsec);
        xdr_put_u32(c->res, (uint32_t)pre->st_ctim.tv_sec);
        xdr_put_u32(c->res, (uint32_t)pre->st_ctim.tv_nsec);
    }
    nfs3_put_post_op(c, post);
}

void nfs3_put_post_op_fh(struct nfs_ctx *c, const struct nasd_fh *k)
{
    xdr_put_u32(c->res, k != NULL);
    if (!k) return;
    uint8_t fh[NFS_FH_MAX];
    size_t n = nfs_export_make_fh(c->srv, c->exp, k, fh);
    xdr_put_opaque(c->res, fh, (uint32_t)n);
}

pthread_mutex_t *nfs3_size_lock(struct nfs_export *e, ino_t ino)
{
    return &e->size_locks[ino % 64];
}


static uint32_t apply_size(struct nfs_ctx *c, int fd, int is_path, struct nfs_obj *obj,
                           const struct stat *st, uint64_t size)
{
    if (S_ISDIR(st->st_mode)) return NFS3ERR_ISDIR;
    if (!S_ISREG(st->st_mode)) return NFS3ERR_INVAL;
    if (size > (uint64_t)INT64_MAX) return NFS3ERR_FBIG;
    if (!nfs_may(c, st, 2, 1)) return NFS3ERR_ACCES;
    int iofd = fd;
    if (is_path) {
        iofd = nfs_obj_io_fd(c->exp, c->w, obj, 1);
        nfs_creds_user(c);
        if (iofd < 0) return nfs3_errno(iofd);
    }
    struct nasd_fsroot *fs = c->exp->fs;
    pthread_mutex_t *lk = nfs3_size_lock(c->exp, st->st_ino);
    pthread_mutex_lock(lk);
    struct stat cur, post;
    uint32_t r = NFS3_OK;
    int e;
    /* quota counts allocated blocks: growing leaves a hole (nothing to reserve) and
     * shrinking frees what it frees */
    if ((e = nfs_vfs_fstat(fs, iofd, &cur)) < 0) r = nfs3_errno(e);
    else if ((e = fs->vfs->truncate(fs, iofd, size)) < 0) r = nfs3_errno(e);
    else if (nfs_vfs_fstat(fs, iofd, &post) == 0)
        nasd_fsroot_charge_force(fs, nasd_fsroot_usage_st(&post) - nasd_fsroot_usage_st(&cur));
    pthread_mutex_unlock(lk);
    return r;
}

uint32_t nfs3_apply_sattr(struct nfs_ctx *c, int fd, int is_path, struct nfs_obj *obj,
                          const struct stat *st, const struct nfs3_sattr *sa)
{
    struct nasd_fsroot *fs = c->exp->fs;
    nfs_creds_user(c);
    if (sa->set_uid || sa->set_gid) {
        uid_t u = sa->set_uid ? sa->uid : (uid_t)-1;
        gid_t g = sa->set_gid ? sa->gid : (gid_t)-1;
        int r = fs->vfs->chown(fs, fd, u, g);
        if (r < 0) return nfs3_errno(r);
    }
    if (sa->set_mode && !S_ISLNK(st->st_mode)) {
        int r = fs->vfs->chmod(fs, fd, sa->mode & 07777);
        if (r < 0) return nfs3_errno(r);
    }
    if (sa->set_size) {
        uint32_t r = apply_size(c, fd, is_path, obj, st, sa->size);
        if (r) return r;
    }
    if (sa->atime_how || sa->mtime_how) {
        struct timespec ts[2];
        ts[0].tv_nsec = sa->atime_how == 0 ? UTIME_OMIT : sa->atime_how == 1 ? UTIME_NOW : 0;
        ts[1].tv_nsec = sa->mtime_how == 0 ? UTIME_OMIT : sa->mtime_how == 1 ? UTIME_NOW : 0;
        ts[0].tv_sec = ts[1].tv_sec = 0;
        if (sa->atime_how == 2) ts[0] = sa->atime;
        if (sa->mtime_how == 2) ts[1] = sa->mtime;
        int r = fs->vfs->utimens(fs, fd, ts);
        if (r < 0) return nfs3_errno(r);
    }
    return NFS3_OK;
}

static int nfs3_null(struct nfs_ctx *c) { (void)c; return 0; }

typedef int (*nfs3_proc)(struct nfs_ctx *c);
static const struct { nfs3_proc fn; enum nasd_op_kind kind; } procs[22] = {
    { nfs3_null, NASD_OP_OTHER },     { nfs3_getattr, NASD_OP_OTHER }, { nfs3_setattr, NASD_OP_OTHER },
    { nfs3_lookup, NASD_OP_OTHER },   { nfs3_access, NASD_OP_OTHER },  { nfs3_readlink, NASD_OP_OTHER },
    { nfs3_read, NASD_OP_READ },      { nfs3_write, NASD_OP_WRITE },   { nfs3_create, NASD_OP_OTHER },
    { nfs3_mkdir, NASD_OP_OTHER },    { nfs3_symlink, NASD_OP_OTHER }, { nfs3_mknod, NASD_OP_OTHER },
    { nfs3_remove, NASD_OP_OTHER },   { nfs3_rmdir, NASD_OP_OTHER },   { nfs3_rename, NASD_OP_OTHER },
    { nfs3_link, NASD_OP_OTHER },     { nfs3_readdir, NASD_OP_OTHER }, { nfs3_readdirplus, NASD_OP_OTHER },
    { nfs3_fsstat, NASD_OP_OTHER },   { nfs3_fsinfo, NASD_OP_OTHER },  { nfs3_pathconf, NASD_OP_OTHER },
    { nfs3_commit, NASD_OP_WRITE },
};

void nfs3_dispatch(struct nfs_ctx *c)
{
    uint32_t xid = c->call.xid;
    if (c->call.vers != 3) { rpc_put_prog_mismatch(c->res, xid, 3, 3); return; }
    if (c->call.proc >= sizeof procs / sizeof procs[0]) { rpc_put_accepted(c->res, xid, RPC_PROC_UNAVAIL); return; }
    rpc_put_accepted(c->res, xid, RPC_SUCCESS);
    c->kind = procs[c->call.proc].kind;
    if (procs[c->call.proc].fn(c) < 0) {
        c->res->len = 0;
        c->res->err = 0;
        c->status = -1;
        rpc_put_accepted(c->res, xid, RPC_GARBAGE_ARGS);
    }
}
