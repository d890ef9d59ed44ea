/* NFSv3 directory procedures: LOOKUP CREATE MKDIR SYMLINK MKNOD REMOVE RMDIR
 * RENAME LINK. Names are resolved with the backend's *at() calls relative to the
 * directory object the handle resolved to; nothing ever follows a symlink. */
#define _GNU_SOURCE
#include "nfs/nfs3.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/sysmacros.h>

enum { UNCHECKED = 0, GUARDED = 1, EXCLUSIVE = 2 };

struct dirop { struct nfs3_fh fh; char name[1025]; };

static void get_dirop(struct xdr_dec *d, struct dirop *op)
{
    nfs3_get_fh(d, &op->fh);
    nfs3_get_name(d, op->name);
}

static int is_dot(const char *n) { return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])); }

/* Resolves a directory handle; non-directories give NOTDIR. */
static uint32_t resolve_dir(struct nfs_ctx *c, const struct nfs3_fh *fh, struct nfs3_obj *d)
{
    uint32_t st = nfs3_resolve(c, fh, d);
    if (!st && !S_ISDIR(d->st.st_mode)) st = NFS3ERR_NOTDIR;
    return st;
}

/* Replies with dir wcc only (the failure body shared by most procedures). */
static void fail_wcc(struct nfs_ctx *c, uint32_t st, struct nfs3_obj *d)
{
    struct stat post;
    int have = d->o && nfs_vfs_fstat(c->exp->fs, d->o->fd, &post) == 0;
    nfs3_put_status(c, st);
    nfs3_put_wcc(c, d->o ? &d->st : NULL, have ? &post : NULL);
    nfs3_release(d);
}

/* Common checks for procedures that add a name to a directory. */
static uint32_t check_new_name(struct nfs_ctx *c, const char *name)
{
    if (c->exp->cfg.read_only) return NFS3ERR_ROFS;
    uint32_t st = nfs3_check_name(name);
    if (st) return st;
    return is_dot(name) ? NFS3ERR_EXIST : NFS3_OK;
}

/* Success reply for CREATE/MKDIR/SYMLINK/MKNOD: handle + attrs + dir wcc. */
static void reply_created(struct nfs_ctx *c, struct nfs3_obj *d, const struct nasd_fh *k,
                          const struct stat *st)
{
    struct stat post;
    int have = nfs_vfs_fstat(c->exp->fs, d->o->fd, &post) == 0;
    nfs3_put_status(c, NFS3_OK);
    nfs3_put_post_op_fh(c, k);
    nfs3_put_post_op(c, st);
    nfs3_put_wcc(c, &d->st, have ? &post : NULL);
    nfs3_release(d);
}

int nfs3_lookup(struct nfs_ctx *c)
{
    struct dirop op;
    get_dirop(c->args, &op);
    if (c->args->err) return -1;
    struct nfs3_obj d;
    uint32_t st = resolve_dir(c, &op.fh, &d);
    if (!st) st = nfs3_check_name(op.name);
    if (st == NFS3ERR_ACCES && !op.name[0]) st = NFS3ERR_NOENT;
    if (st) { nfs3_put_status(c, st); nfs3_put_post_op(c, d.o ? &d.st : NULL); nfs3_release(&d); return 0; }
    struct nasd_fh k;
    struct stat ost;
    int r = 0;
    int self = !strcmp(op.name, ".") || (!strcmp(op.name, "..") && nfs3_is_root(c, &d.st));
    struct nasd_fsroot *fs = c->exp->fs;
    nfs_creds_user(c);
    if (self) {
        ost = d.st;
        r = fs->vfs->handle(fs, d.o->fd, "", AT_EMPTY_PATH, &k);
    } else if ((r = fs->vfs->fstatat(fs, d.o->fd, op.name, &ost, AT_SYMLINK_NOFOLLOW)) < 0) {
        ;
    } else if (ost.st_dev != c->exp->dev) {
        r = -EACCES;            /* another filesystem mounted inside the export */
    } else {
        r = fs->vfs->handle(fs, d.o->fd, op.name, 0, &k);
    }
    if (r) { nfs3_put_status(c, nfs3_errno(r)); nfs3_put_post_op(c, &d.st); nfs3_release(&d); return 0; }
    nfs3_put_status(c, NFS3_OK);
    uint8_t fh[NFS_FH_MAX];
    size_t n = nfs_export_make_fh(c->srv, c->exp, &k, fh);
    xdr_put_opaque(c->res, fh, (uint32_t)n);
    nfs3_put_post_op(c, &ost);
    nfs3_put_post_op(c, &d.st);
    nfs3_release(&d);
    return 0;
}

int nfs3_create(struct nfs_ctx *c)
{
    struct dirop op;
    struct nfs3_sattr sa;
    uint8_t verf[8] = { 0 };
    get_dirop(c->args, &op);
    uint32_t how = xdr_get_u32(c->args);
    if (how == EXCLUSIVE) {
        const uint8_t *v = xdr_get_fixed(c->args, 8);
        if (v) memcpy(verf, v, 8);
        memset(&sa, 0, sizeof sa);
    } else {
        nfs3_get_sattr(c->args, &sa);
    }
    if (c->args->err || how > EXCLUSIVE) return -1;
    struct nfs3_obj d;
    uint32_t st = resolve_dir(c, &op.fh, &d);
    if (!st) st = check_new_name(c, op.name);
    if (st) { fail_wcc(c, st, &d); return 0; }

    struct nasd_fsroot *fs = c->exp->fs;
    nfs_creds_user(c);
    mode_t mode = sa.set_mode ? (sa.mode & 07777) : 0644;
    int acc = sa.set_size ? O_RDWR : O_RDONLY;
    int base = O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
    int created = 1;
    int fd = fs->vfs->openat(fs, d.o->fd, op.name, base | acc | O_CREAT | O_EXCL, mode);
    if (fd == -EEXIST && how != GUARDED) {
        /* existing file: no access is needed unless UNCHECKED asks to truncate */
        created = 0;
        fd = fs->vfs->openat(fs, d.o->fd, op.name,
                             (how == UNCHECKED && sa.set_size) ? base | O_WRONLY : O_PATH | base, 0);
    }
    if (fd < 0) { fail_wcc(c, nfs3_errno(fd), &d); return 0; }
    struct stat fst;
    int e;
    if ((e = nfs_vfs_fstat(fs, fd, &fst)) < 0) st = nfs3_errno(e);
    else if (!S_ISREG(fst.st_mode)) st = created ? NFS3ERR_IO : NFS3ERR_EXIST;
    else if (how == EXCLUSIVE && !created) {
        /* retransmitted EXCLUSIVE create: same verifier stored in the times */
        if ((uint32_t)fst.st_atim.tv_sec != ((uint32_t)verf[0] << 24 | verf[1] << 16 | verf[2] << 8 | verf[3]) ||
            (uint32_t)fst.st_mtim.tv_sec != ((uint32_t)verf[4] << 24 | verf[5] << 16 | verf[6] << 8 | verf[7]))
            st = NFS3ERR_EXIST;
    } else if (how == EXCLUSIVE) {
        struct timespec ts[2] = {
            { .tv_sec = (uint32_t)verf[0] << 24 | verf[1] << 16 | verf[2] << 8 | verf[3] },
            { .tv_sec = (uint32_t)verf[4] << 24 | verf[5] << 16 | verf[6] << 8 | verf[7] } };
        if ((e = fs->vfs->utimens(fs, fd, ts)) < 0) st = nfs3_errno(e);
    } else {
        if (created && (fst.st_mode & 07777) != mode && (e = fs->vfs->chmod(fs, fd, mode)) < 0) st = nfs3_errno(e);
        struct nfs3_sattr rest = sa;
        rest.set_mode = 0;
        if (!created) {          /* UNCHECKED on an existing file: only truncation applies */
            memset(&rest, 0, sizeof rest);
            rest.set_size = sa.set_size;
            rest.size = sa.size;
        }
        if (!st) st = nfs3_apply_sattr(c, fd, 0, NULL, &fst, &rest);
    }
    struct nasd_fh k;
    int r = st ? 0 : fs->vfs->handle(fs, fd, "", AT_EMPTY_PATH, &k);
    if (!st && r) st = nfs3_errno(r);
    int changed = how == EXCLUSIVE ? created : (sa.set_uid || sa.set_gid || sa.set_size || sa.atime_how ||
                                                   sa.mtime_how || (created && (fst.st_mode & 07777) != mode));
    if (!st && changed) nfs_vfs_fstat(fs, fd, &fst);
    fs->vfs->close(fs, fd);
    if (st) {
        if (created) fs->vfs->unlinkat(fs, d.o->fd, op.name, 0);
        fail_wcc(c, st, &d);
        return 0;
    }
    reply_created(c, &d, &k, &fst);
    return 0;
}

/* Finishes MKDIR/SYMLINK/MKNOD: fix mode lost to umask, apply other attributes,
 * fetch attributes and handle of the new name. Works on an O_PATH|O_NOFOLLOW fd
 * so a name swapped for a symlink meanwhile can never redirect us. */
static uint32_t finish_new(struct nfs_ctx *c, struct nfs3_obj *d, const char *name, const struct nfs3_sattr *sa,
                           mode_t mode, struct nasd_fh *k, struct stat *st)
{
    struct nasd_fsroot *fs = c->exp->fs;
    int fd = fs->vfs->openat(fs, d->o->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) return nfs3_errno(fd);
    uint32_t r = NFS3_OK;
    int e;
    if ((e = nfs_vfs_fstat(fs, fd, st)) < 0) r = nfs3_errno(e);
    struct nfs3_sattr rest = *sa;
    rest.set_mode = !S_ISLNK(st->st_mode) && (st->st_mode & 07777) != mode;
    rest.mode = mode;
    rest.set_size = 0;
    if (!r && (rest.set_mode || rest.set_uid || rest.set_gid || rest.atime_how || rest.mtime_how))
        r = nfs3_apply_sattr(c, fd, 1, NULL, st, &rest);
    if (!r && (e = fs->vfs->handle(fs, fd, "", AT_EMPTY_PATH, k)) < 0) r = nfs3_errno(e);
    if (!r && (e = nfs_vfs_fstat(fs, fd, st)) < 0) r = nfs3_errno(e);
    fs->vfs->close(fs, fd);
    return r;
}

int nfs3_mkdir(struct nfs_ctx *c)
{
    struct dirop op;
    struct nfs3_sattr sa;
    get_dirop(c->args, &op);
    nfs3_get_sattr(c->args, &sa);
    if (c->args->err) return -1;
    struct nfs3_obj d;
    uint32_t st = resolve_dir(c, &op.fh, &d);
    if (!st) st = check_new_name(c, op.name);
    if (st) { fail_wcc(c, st, &d); return 0; }
    struct nasd_fsroot *fs = c->exp->fs;
    nfs_creds_user(c);
    mode_t mode = sa.set_mode ? (sa.mode & 07777) : 0755;
    int e = fs->vfs->mkdirat(fs, d.o->fd, op.name, mode);
    if (e < 0) { fail_wcc(c, nfs3_errno(e), &d); return 0; }
    struct nasd_fh k;
    struct stat nst;
    st = finish_new(c, &d, op.name, &sa, mode, &k, &nst);
    if (st) { fs->vfs->unlinkat(fs, d.o->fd, op.name, AT_REMOVEDIR); fail_wcc(c, st, &d); return 0; }
    reply_created(c, &d, &k, &nst);
    return 0;
}

int nfs3_symlink(struct nfs_ctx *c)
{
    struct dirop op;
    struct nfs3_sattr sa;
    char target[NFS3_PATH_MAX + 1];
    get_dirop(c->args, &op);
    nfs3_get_sattr(c->args, &sa);
    xdr_get_string(c->args, target, sizeof target, NFS3_PATH_MAX);
    if (c->args->err) return -1;
    struct nfs3_obj d;
    uint32_t st = resolve_dir(c, &op.fh, &d);
    if (!st) st = check_new_name(c, op.name);
    if (!st && !target[0]) st = NFS3ERR_INVAL;
    if (st) { fail_wcc(c, st, &d); return 0; }
    struct nasd_fsroot *fs = c->exp->fs;
    nfs_creds_user(c);
    int e = fs->vfs->symlinkat(fs, target, d.o->fd, op.name);
    if (e < 0) { fail_wcc(c, nfs3_errno(e), &d); return 0; }
    struct nasd_fh k;
    struct stat nst;
    sa.set_mode = 0;
    st = finish_new(c, &d, op.name, &sa, 0777, &k, &nst);
    if (st) { fs->vfs->unlinkat(fs, d.o->fd, op.name, 0); fail_wcc(c, st, &d); return 0; }
    reply_created(c, &d, &k, &nst);
    return 0;
}

int nfs3_mknod(struct nfs_ctx *c)
{
    struct dirop op;
    struct nfs3_sattr sa;
    memset(&sa, 0, sizeof sa);
    get_dirop(c->args, &op);
    uint32_t type = xdr_get_u32(c->args);
    uint32_t maj = 0, min = 0;
    if (type == NF3CHR || type == NF3BLK) {
        nfs3_get_sattr(c->args, &sa);
        maj = xdr_get_u32(c->args);
        min = xdr_get_u32(c->args);
    } else if (type == NF3SOCK || type == NF3FIFO) {
        nfs3_get_sattr(c->args, &sa);
    }
    if (c->args->err) return -1;
    struct nfs3_obj d;
    uint32_t st = resolve_dir(c, &op.fh, &d);
    if (!st) st = check_new_name(c, op.name);
    if (!st && type != NF3CHR && type != NF3BLK && type != NF3SOCK && type != NF3FIFO) st = NFS3ERR_BADTYPE;
    if (st) { fail_wcc(c, st, &d); return 0; }
    mode_t fmt = type == NF3CHR ? S_IFCHR : type == NF3BLK ? S_IFBLK : type == NF3SOCK ? S_IFSOCK : S_IFIFO;
    mode_t mode = sa.set_mode ? (sa.mode & 07777) : 0644;
    struct nasd_fsroot *fs = c->exp->fs;
    nfs_creds_user(c);
    int e = fs->vfs->mknodat(fs, d.o->fd, op.name, fmt | mode, makedev(maj, min));
    if (e < 0) { fail_wcc(c, nfs3_errno(e), &d); return 0; }
    struct nasd_fh k;
    struct stat nst;
    st = finish_new(c, &d, op.name, &sa, mode, &k, &nst);
    if (st) { fs->vfs->unlinkat(fs, d.o->fd, op.name, 0); fail_wcc(c, st, &d); return 0; }
    reply_created(c, &d, &k, &nst);
    return 0;
}

/* Stats name's inode and takes its size lock, which LINK takes too: no link can come
 * between this stat and the unlink or rename-over, so "its last link" is still true
 * when quota gets the blocks back (a LINK racing a REMOVE kept the file and freed its
 * quota). NULL with *err if the name is gone; -EAGAIN if it keeps changing. */
static pthread_mutex_t *stat_locked(struct nfs_ctx *c, int dirfd, const char *name, struct stat *st, int *err)
{
    struct nasd_fsroot *fs = c->exp->fs;
    for (int tries = 0; tries < 4; tries++) {
        int e = fs->vfs->fstatat(fs, dirfd, name, st, AT_SYMLINK_NOFOLLOW);
        if (e < 0) { *err = e; return NULL; }
        ino_t ino = st->st_ino;
        pthread_mutex_t *lk = nfs3_size_lock(c->exp, ino);
        pthread_mutex_lock(lk);
        e = fs->vfs->fstatat(fs, dirfd, name, st, AT_SYMLINK_NOFOLLOW);
        if (e < 0) { pthread_mutex_unlock(lk); *err = e; return NULL; }
        if (st->st_ino == ino) return lk;
        pthread_mutex_unlock(lk);   /* another file took the name meanwhile */
    }
    *err = -EAGAIN;
    return NULL;
}

static int remove_common(struct nfs_ctx *c, int rmdir)
{
    struct dirop op;
    get_dirop(c->args, &op);
    if (c->args->err) return -1;
    struct nfs3_obj d;
    uint32_t st = resolve_dir(c, &op.fh, &d);
    if (!st && c->exp->cfg.read_only) st = NFS3ERR_ROFS;
    if (!st) st = nfs3_check_name(op.name);
    if (!st && is_dot(op.name)) st = rmdir && op.name[1] ? NFS3ERR_NOTEMPTY : NFS3ERR_INVAL;
    if (st) { fail_wcc(c, st, &d); return 0; }
    struct nasd_fsroot *fs = c->exp->fs;
    nfs_creds_user(c);
    struct stat vst;
    int e = 0;
    pthread_mutex_t *lk = stat_locked(c, d.o->fd, op.name, &vst, &e);
    if (!lk) { fail_wcc(c, nfs3_errno(e), &d); return 0; }
    if (!rmdir && S_ISDIR(vst.st_mode)) e = -EISDIR;
    else if (rmdir && !S_ISDIR(vst.st_mode)) e = -ENOTDIR;
    else e = fs->vfs->unlinkat(fs, d.o->fd, op.name, rmdir ? AT_REMOVEDIR : 0);
    if (!e && vst.st_nlink <= 1) nasd_fsroot_charge_force(c->exp->fs, -nasd_fsroot_usage_st(&vst));   /* last link */
    pthread_mutex_unlock(lk);
    if (e < 0) { fail_wcc(c, nfs3_errno(e), &d); return 0; }
    if (vst.st_nlink <= 1 || rmdir) nfs_obj_evict_ino(c->exp, vst.st_ino);
    fail_wcc(c, NFS3_OK, &d);
    return 0;
}

int nfs3_remove(struct nfs_ctx *c) { return remove_common(c, 0); }
int nfs3_rmdir(struct nfs_ctx *c) { return remove_common(c, 1); }

int nfs3_rename(struct nfs_ctx *c)
{
    struct dirop from, to;
    get_dirop(c->args, &from);
    get_dirop(c->args, &to);
    if (c->args->err) return -1;
    struct nfs3_obj fd_, td;
    td.o = NULL;
    uint32_t st = resolve_dir(c, &from.fh, &fd_);
    if (!st) st = resolve_dir(c, &to.fh, &td);
    if (!st && c->exp->cfg.read_only) st = NFS3ERR_ROFS;
    if (!st) st = nfs3_check_name(from.name);
    if (!st) st = nfs3_check_name(to.name);
    if (!st && (is_dot(from.name) || is_dot(to.name))) st = NFS3ERR_INVAL;
    struct nasd_fsroot *fs = c->exp ? c->exp->fs : NULL;
    struct stat sst, tst;
    int have_t = 0, e;
    pthread_mutex_t *lk = NULL;   /* the replaced target's, as in REMOVE */
    if (!st) {
        nfs_creds_user(c);
        if ((e = fs->vfs->fstatat(fs, fd_.o->fd, from.name, &sst, AT_SYMLINK_NOFOLLOW)) < 0) st = nfs3_errno(e);
        else have_t = (lk = stat_locked(c, td.o->fd, to.name, &tst, &e)) != NULL;
        if (!st && !have_t && e == -EAGAIN) st = NFS3ERR_JUKEBOX;
    }
    if (!st && (e = fs->vfs->renameat(fs, fd_.o->fd, from.name, td.o->fd, to.name)) < 0) st = nfs3_errno(e);
    int replaced = !st && have_t && (tst.st_ino != sst.st_ino || tst.st_dev != sst.st_dev);
    if (replaced && tst.st_nlink <= 1) nasd_fsroot_charge_force(c->exp->fs, -nasd_fsroot_usage_st(&tst));
    if (lk) pthread_mutex_unlock(lk);
    if (replaced && (tst.st_nlink <= 1 || S_ISDIR(tst.st_mode))) nfs_obj_evict_ino(c->exp, tst.st_ino);
    struct stat fpost, tpost;
    int hf = fd_.o && nfs_vfs_fstat(fs, fd_.o->fd, &fpost) == 0;
    int ht = td.o && nfs_vfs_fstat(fs, td.o->fd, &tpost) == 0;
    nfs3_put_status(c, st);
    nfs3_put_wcc(c, fd_.o ? &fd_.st : NULL, hf ? &fpost : NULL);
    nfs3_put_wcc(c, td.o ? &td.st : NULL, ht ? &tpost : NULL);
    nfs3_release(&fd_);
    nfs3_release(&td);
    return 0;
}

int nfs3_link(struct nfs_ctx *c)
{
    struct nfs3_fh ffh;
    struct dirop to;
    nfs3_get_fh(c->args, &ffh);
    get_dirop(c->args, &to);
    if (c->args->err) return -1;
    struct nfs3_obj f, d;
    d.o = NULL;
    uint32_t st = nfs3_resolve(c, &ffh, &f);
    if (!st) st = resolve_dir(c, &to.fh, &d);
    if (!st) st = check_new_name(c, to.name);
    if (!st && S_ISDIR(f.st.st_mode)) st = NFS3ERR_ISDIR;
    /* a new link allocates nothing (quota counts blocks, like du) */
    struct nasd_fsroot *fs = c->exp ? c->exp->fs : NULL;
    if (!st) {
        nfs_creds_user(c);
        pthread_mutex_t *lk = nfs3_size_lock(c->exp, f.st.st_ino);   /* see stat_locked */
        pthread_mutex_lock(lk);
        int e = fs->vfs->link(fs, f.o->fd, d.o->fd, to.name);
        pthread_mutex_unlock(lk);
        if (e < 0) st = nfs3_errno(e);
    }
    struct stat fpost, dpost;
    int hf = f.o && nfs_vfs_fstat(fs, f.o->fd, &fpost) == 0;
    int hd = d.o && nfs_vfs_fstat(fs, d.o->fd, &dpost) == 0;
    nfs3_put_status(c, st);
    nfs3_put_post_op(c, hf ? &fpost : NULL);
    nfs3_put_wcc(c, d.o ? &d.st : NULL, hd ? &dpost : NULL);
    nfs3_release(&f);
    nfs3_release(&d);
    return 0;
}
