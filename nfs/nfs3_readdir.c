/* READDIR and READDIRPLUS over the backend's readdir. Cookies are the backend's
 * (the kernel's d_off values for posix datasets). "." and ".." are listed; ".."
 * of the export root is the root itself. */
#define _GNU_SOURCE
#include "nfs/nfs3.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>

/* State of one reply being filled by the dirent callback. */
struct rd_fill {
    struct nfs_ctx *c;
    struct nfs3_obj *d;
    int plus, is_root;
    size_t limit;            /* reply bytes for this procedure */
    uint32_t dircount;
    size_t dirbytes;
    int nent, full;
};

static int rd_entry(void *arg, const char *name, uint64_t ino, unsigned char d_type, uint64_t next_cookie)
{
    struct rd_fill *f = arg;
    struct nfs_ctx *c = f->c;
    struct nasd_fsroot *fs = c->exp->fs;
    size_t nlen = strlen(name);
    size_t pad = (nlen + 3) & ~(size_t)3;
    size_t need = 4 + 8 + 4 + pad + 8 + (f->plus ? 4 + 84 + 4 + 4 + NFS_FH_MAX : 0);
    size_t dneed = 8 + 4 + pad + 8;
    if (c->res->len + need + 8 > f->limit || f->dirbytes + dneed > f->dircount) { f->full = 1; return 1; }
    int dotdot = !strcmp(name, "..");
    uint64_t fileid = ino;
    struct stat est;
    struct nasd_fh k;
    int have_attr = 0, have_fh = 0;
    if (dotdot && f->is_root) {
        fileid = f->d->st.st_ino;
        est = f->d->st;
        have_attr = 1;
        k = c->exp->root_key;
        have_fh = f->plus;
    } else if (f->plus) {
        have_attr = fs->vfs->fstatat(fs, f->d->o->fd, name, &est, AT_SYMLINK_NOFOLLOW) == 0;
        if (have_attr && est.st_dev == c->exp->dev)
            have_fh = fs->vfs->handle(fs, f->d->o->fd, name, 0, &k) == 0;
        else have_attr = 0;
    }
    xdr_put_u32(c->res, 1);
    xdr_put_u64(c->res, fileid);
    xdr_put_opaque(c->res, name, (uint32_t)nlen);
    xdr_put_u64(c->res, next_cookie);
    if (f->plus) {
        nfs3_put_post_op(c, have_attr ? &est : NULL);
        nfs3_put_post_op_fh(c, have_fh ? &k : NULL);
    }
    f->dirbytes += dneed;
    f->nent++;
    return 0;
}

static int readdir_common(struct nfs_ctx *c, int plus)
{
    struct nfs3_fh fh;
    nfs3_get_fh(c->args, &fh);
    uint64_t cookie = xdr_get_u64(c->args);
    (void)xdr_get_fixed(c->args, 8);
    uint32_t dircount = plus ? xdr_get_u32(c->args) : 0;
    uint32_t maxcount = xdr_get_u32(c->args);
    if (c->args->err) return -1;
    struct nfs3_obj d;
    uint32_t st = nfs3_resolve(c, &fh, &d);
    if (!st && !S_ISDIR(d.st.st_mode)) st = NFS3ERR_NOTDIR;
    /* the backend does not check: listing needs read permission on the directory */
    if (!st && !nfs_may(c, &d.st, 4, 0)) st = NFS3ERR_ACCES;
    if (st) {
        nfs3_put_status(c, st);
        nfs3_put_post_op(c, d.o ? &d.st : NULL);
        nfs3_release(&d);
        return 0;
    }
    if (maxcount > NFS_MAX_IO) maxcount = NFS_MAX_IO;
    if (dircount == 0 || dircount > maxcount) dircount = maxcount;
    size_t start = c->res->len;
    nfs3_put_status(c, NFS3_OK);
    nfs3_put_post_op(c, &d.st);
    uint8_t verf[8] = { 0 };
    xdr_put_fixed(c->res, verf, 8);
    struct rd_fill f = { .c = c, .d = &d, .plus = plus, .is_root = nfs3_is_root(c, &d.st),
                         .limit = start + maxcount, .dircount = dircount };
    struct nasd_fsroot *fs = c->exp->fs;
    nfs_creds_user(c);
    int r = fs->vfs->readdir(fs, d.o->fd, cookie, rd_entry, &f);
    int eof = r >= 0 && !f.full;
    if (r == -EINVAL && cookie) st = NFS3ERR_BAD_COOKIE;
    else if (r < 0) st = nfs3_errno(r);
    else if (f.nent == 0 && !eof) st = NFS3ERR_TOOSMALL;
    if (st) {
        c->res->len = start;
        nfs3_put_status(c, st);
        nfs3_put_post_op(c, &d.st);
    } else {
        xdr_put_u32(c->res, 0);
        xdr_put_u32(c->res, (uint32_t)eof);
    }
    nfs3_release(&d);
    return 0;
}

int nfs3_readdir(struct nfs_ctx *c) { return readdir_common(c, 0); }
int nfs3_readdirplus(struct nfs_ctx *c) { return readdir_common(c, 1); }
