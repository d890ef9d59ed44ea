/* NFSv3 procedures on a single object: GETATTR SETATTR ACCESS READLINK READ
 * WRITE COMMIT FSSTAT FSINFO PATHCONF. */
#define _GNU_SOURCE
#include "nfs/nfs3.h"
#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

enum { UNSTABLE = 0, DATA_SYNC = 1, FILE_SYNC = 2 };

/* Decode a lone file-handle argument and resolve it (GETATTR, ACCESS, FSSTAT, FSINFO,
 * PATHCONF start this way). -1 on garbage arguments, else 0 with *st set. */
static int resolve_fh_arg(struct nfs_ctx *c, struct nfs3_obj *o, uint32_t *st)
{
    struct nfs3_fh fh;
    nfs3_get_fh(c->args, &fh);
    if (c->args->err) return -1;
    *st = nfs3_resolve(c, &fh, o);
    return 0;
}

int nfs3_getattr(struct nfs_ctx *c)
{
    struct nfs3_obj o;
    uint32_t st;
    if (resolve_fh_arg(c, &o, &st)) return -1;
    nfs3_put_status(c, st);
    if (st == NFS3_OK) nfs3_put_fattr(c, &o.st);
    nfs3_release(&o);
    return 0;
}

int nfs3_setattr(struct nfs_ctx *c)
{
    struct nfs3_fh fh;
    struct nfs3_sattr sa;
    nfs3_get_fh(c->args, &fh);
    nfs3_get_sattr(c->args, &sa);
    int guard = xdr_get_bool(c->args);
    uint32_t gsec = 0, gnsec = 0;
    if (guard) { gsec = xdr_get_u32(c->args); gnsec = xdr_get_u32(c->args); }
    if (c->args->err) return -1;
    struct nfs3_obj o;
    uint32_t st = nfs3_resolve(c, &fh, &o);
    if (st) { nfs3_put_status(c, st); nfs3_put_wcc(c, NULL, NULL); return 0; }
    struct stat post;
    if (c->exp->cfg.read_only) st = NFS3ERR_ROFS;
    else if (guard && ((uint32_t)o.st.st_ctim.tv_sec != gsec || (uint32_t)o.st.st_ctim.tv_nsec != gnsec))
        st = NFS3ERR_NOT_SYNC;
    else st = nfs3_apply_sattr(c, o.o->fd, 1, o.o, &o.st, &sa);
    int have_post = nfs_vfs_fstat(c->exp->fs, o.o->fd, &post) == 0;
    nfs3_put_status(c, st);
    nfs3_put_wcc(c, &o.st, have_post ? &post : NULL);
    nfs3_release(&o);
    return 0;
}

enum { ACC_READ = 1, ACC_LOOKUP = 2, ACC_MODIFY = 4, ACC_EXTEND = 8, ACC_DELETE = 0x10, ACC_EXECUTE = 0x20 };

int nfs3_access(struct nfs_ctx *c)
{
    struct nfs3_fh fh;
    nfs3_get_fh(c->args, &fh);
    uint32_t want = xdr_get_u32(c->args);
    if (c->args->err) return -1;
    struct nfs3_obj o;
    uint32_t st = nfs3_resolve(c, &fh, &o);
    nfs3_put_status(c, st);
    if (st) { nfs3_put_post_op(c, NULL); return 0; }
    uint32_t got = 0;
    int isdir = S_ISDIR(o.st.st_mode);
    if (nfs_may(c, &o.st, 4, 0)) got |= ACC_READ;
    if (nfs_may(c, &o.st, 2, 0)) got |= ACC_MODIFY | ACC_EXTEND | (isdir ? ACC_DELETE : 0);
    if (nfs_may(c, &o.st, 1, 0)) got |= isdir ? ACC_LOOKUP : ACC_EXECUTE;
    if (c->exp->cfg.read_only) got &= ~(uint32_t)(ACC_MODIFY | ACC_EXTEND | ACC_DELETE);
    nfs3_put_post_op(c, &o.st);
    xdr_put_u32(c->res, got & want);
    nfs3_release(&o);
    return 0;
}

int nfs3_readlink(struct nfs_ctx *c)
{
    struct nfs3_obj o;
    uint32_t st;
    if (resolve_fh_arg(c, &o, &st)) return -1;
    if (st) { nfs3_put_status(c, st); nfs3_put_post_op(c, NULL); return 0; }
    char buf[NFS3_PATH_MAX + 1];
    int n = -1;
    struct nasd_fsroot *fs = c->exp->fs;
    if (!S_ISLNK(o.st.st_mode)) st = NFS3ERR_INVAL;
    else if ((n = fs->vfs->readlink(fs, o.o->fd, buf, sizeof buf - 1)) < 0) st = nfs3_errno(n);
    nfs3_put_status(c, st);
    nfs3_put_post_op(c, &o.st);
    if (!st) xdr_put_opaque(c->res, buf, (uint32_t)n);
    nfs3_release(&o);
    return 0;
}

static uint32_t check_regular(const struct stat *st)
{
    if (S_ISREG(st->st_mode)) return NFS3_OK;
    return S_ISDIR(st->st_mode) ? NFS3ERR_ISDIR : NFS3ERR_INVAL;
}

int nfs3_read(struct nfs_ctx *c)
{
    struct nfs3_fh fh;
    nfs3_get_fh(c->args, &fh);
    uint64_t off = xdr_get_u64(c->args);
    uint32_t count = xdr_get_u32(c->args);
    if (c->args->err) return -1;
    struct nfs3_obj o;
    uint32_t st = nfs3_resolve(c, &fh, &o);
    if (st) { nfs3_put_status(c, st); nfs3_put_post_op(c, NULL); return 0; }
    if (!(st = check_regular(&o.st)) && !nfs_may(c, &o.st, 4, 1) && !nfs_may(c, &o.st, 1, 0))
        st = NFS3ERR_ACCES;
    int fd = -1;
    if (!st && (fd = nfs_obj_io_fd(c->exp, c->w, o.o, 0)) < 0) st = nfs3_errno(fd);
    if (st) { nfs3_put_status(c, st); nfs3_put_post_op(c, &o.st); nfs3_release(&o); return 0; }
    if (count > NFS_MAX_IO) count = NFS_MAX_IO;
    nfs3_put_status(c, NFS3_OK);
    nfs3_put_post_op(c, &o.st);
    size_t hdr_at = c->res->len;
    xdr_put_u32(c->res, 0);     /* count */
    xdr_put_u32(c->res, 0);     /* eof */
    xdr_put_u32(c->res, 0);     /* data length */
    uint8_t *data = xdr_reserve(c->res, count);
    if (!data) return 0;        /* encoder error -> SYSTEM_ERR */
    ssize_t n = 0;
    struct nasd_fsroot *fs = c->exp->fs;
    if (off < (uint64_t)INT64_MAX) n = fs->vfs->pread(fs, fd, data, count, off);
    if (n < 0) {
        /* an I/O error after the header was laid out: rebuild the reply */
        c->res->len = 0;
        rpc_put_accepted(c->res, c->call.xid, RPC_SUCCESS);
        nfs3_put_status(c, nfs3_errno((int)n));
        nfs3_put_post_op(c, &o.st);
        nfs3_release(&o);
        return 0;
    }
    int eof = (uint64_t)n < count || off + (uint64_t)n >= (uint64_t)o.st.st_size;
    uint8_t *h = c->res->buf + hdr_at;
    uint32_t vals[3] = { (uint32_t)n, (uint32_t)eof, (uint32_t)n };
    for (int i = 0; i < 3; i++) {
        h[4 * i] = vals[i] >> 24; h[4 * i + 1] = vals[i] >> 16; h[4 * i + 2] = vals[i] >> 8; h[4 * i + 3] = vals[i];
    }
    size_t padded = ((size_t)n + 3) & ~(size_t)3;
    memset(data + n, 0, padded - (size_t)n);
    c->res->len = (size_t)(data - c->res->buf) + padded;
    c->bytes = (uint64_t)n;
    nfs3_release(&o);
    return 0;
}

/* Bytes a write may newly allocate, for the quota reservation: its 4 KiB blocks, or
 * nothing for an overwrite inside a file with no holes. */
static int64_t write_may_allocate(const struct stat *pre, uint64_t off, uint32_t count)
{
    uint64_t end = off + count, size = (uint64_t)pre->st_size;
    if (!count) return 0;
    if (end <= size && (uint64_t)pre->st_blocks * 512 >= ((size + 4095) & ~4095ull)) return 0;
    return (int64_t)(((end + 4095) & ~4095ull) - (off & ~4095ull));
}

int nfs3_write(struct nfs_ctx *c)
{
    struct nfs3_fh fh;
    nfs3_get_fh(c->args, &fh);
    uint64_t off = xdr_get_u64(c->args);
    uint32_t count = xdr_get_u32(c->args);
    uint32_t stable = xdr_get_u32(c->args);
    uint32_t dlen;
    const uint8_t *data = xdr_get_opaque(c->args, &dlen, NFS_MAX_IO);
    if (c->args->err || stable > FILE_SYNC) return -1;
    if (count > dlen) count = dlen;
    struct nfs3_obj o;
    uint32_t st = nfs3_resolve(c, &fh, &o);
    if (st) { nfs3_put_status(c, st); nfs3_put_wcc(c, NULL, NULL); return 0; }
    int fd = -1;
    if (c->exp->cfg.read_only) st = NFS3ERR_ROFS;
    else if ((st = check_regular(&o.st))) ;
    else if (!nfs_may(c, &o.st, 2, 1)) st = NFS3ERR_ACCES;
    else if (off > (uint64_t)INT64_MAX - count) st = NFS3ERR_FBIG;
    else if ((fd = nfs_obj_io_fd(c->exp, c->w, o.o, 1)) < 0) st = nfs3_errno(fd);
    if (st) { nfs3_put_status(c, st); nfs3_put_wcc(c, &o.st, &o.st); nfs3_release(&o); return 0; }
    /* the write as the caller: a non-owner's write clears setuid/setgid (the kernel's
     * file_remove_privs on posix datasets, the ext2 backend's own check), root's keeps them */
    nfs_creds_user(c);

    struct nasd_fsroot *fs = c->exp->fs;
    pthread_mutex_t *lk = nfs3_size_lock(c->exp, o.st.st_ino);
    pthread_mutex_lock(lk);
    struct stat pre, post;
    ssize_t n = -1;
    int e, have_post = 0;
    int64_t reserved = 0;
    if ((e = nfs_vfs_fstat(fs, fd, &pre)) < 0) st = nfs3_errno(e);
    else if ((reserved = write_may_allocate(&pre, off, count)) && nasd_fsroot_charge(fs, reserved)) {
        st = NFS3ERR_DQUOT;
        reserved = 0;
    }
    if (!st) {
        n = fs->vfs->pwrite(fs, fd, data, count, off);
        if (n < 0) st = nfs3_errno((int)n);
    }
    if (!st || reserved) {   /* settle the reservation with what was allocated */
        have_post = nfs_vfs_fstat(fs, fd, &post) == 0;
        nasd_fsroot_charge_force(fs, (have_post ? nasd_fsroot_usage_st(&post) - nasd_fsroot_usage_st(&pre) : 0) -
                                         reserved);
    }
    pthread_mutex_unlock(lk);
    if (!st && stable != UNSTABLE && (e = fs->vfs->fsync(fs, fd, stable == DATA_SYNC)) < 0) st = nfs3_errno(e);
    if (!have_post) have_post = nfs_vfs_fstat(fs, fd, &post) == 0;
    nfs3_put_status(c, st);
    nfs3_put_wcc(c, &pre, have_post ? &post : NULL);
    if (!st) {
        xdr_put_u32(c->res, (uint32_t)n);
        xdr_put_u32(c->res, stable);
        xdr_put_fixed(c->res, c->srv->write_verf, 8);
        c->bytes = (uint64_t)n;
    }
    nfs3_release(&o);
    return 0;
}

int nfs3_commit(struct nfs_ctx *c)
{
    struct nfs3_fh fh;
    nfs3_get_fh(c->args, &fh);
    (void)xdr_get_u64(c->args);
    (void)xdr_get_u32(c->args);
    if (c->args->err) return -1;
    struct nfs3_obj o;
    uint32_t st = nfs3_resolve(c, &fh, &o);
    if (st) { nfs3_put_status(c, st); nfs3_put_wcc(c, NULL, NULL); return 0; }
    int fd = -1, e;
    struct nasd_fsroot *fs = c->exp->fs;
    if ((st = check_regular(&o.st))) ;
    else if ((fd = nfs_obj_io_fd(c->exp, c->w, o.o, 0)) < 0) st = nfs3_errno(fd);
    else if ((e = fs->vfs->fsync(fs, fd, 1)) < 0) st = nfs3_errno(e);   /* data + what reads need (size): RFC 1813 3.3.21 */
    nfs3_put_status(c, st);
    nfs3_put_wcc(c, &o.st, &o.st);
    if (!st) xdr_put_fixed(c->res, c->srv->write_verf, 8);
    nfs3_release(&o);
    return 0;
}

int nfs3_fsstat(struct nfs_ctx *c)
{
    struct nfs3_obj o;
    uint32_t st;
    if (resolve_fh_arg(c, &o, &st)) return -1;
    struct statvfs vfs;
    int e;
    if (!st && (e = c->exp->fs->vfs->statvfs(c->exp->fs, &vfs)) < 0) st = nfs3_errno(e);
    nfs3_put_status(c, st);
    nfs3_put_post_op(c, st ? NULL : &o.st);
    if (!st) {
        uint64_t total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
        uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        uint64_t free_ = (uint64_t)vfs.f_bfree * vfs.f_frsize;
        uint64_t quota = atomic_load(&c->exp->fs->quota);
        if (quota) {
            int64_t used = atomic_load(&c->exp->fs->used);
            uint64_t left = used < 0 ? quota : (uint64_t)used >= quota ? 0 : quota - (uint64_t)used;
            total = quota;
            if (left < avail) avail = left;
            if (left < free_) free_ = left;
        }
        xdr_put_u64(c->res, total);
        xdr_put_u64(c->res, free_);
        xdr_put_u64(c->res, avail);
        xdr_put_u64(c->res, vfs.f_files);
        xdr_put_u64(c->res, vfs.f_ffree);
        xdr_put_u64(c->res, vfs.f_favail);
        xdr_put_u32(c->res, 0);     /* invarsec */
    }
    nfs3_release(&o);
    return 0;
}

int nfs3_fsinfo(struct nfs_ctx *c)
{
    struct nfs3_obj o;
    uint32_t st;
    if (resolve_fh_arg(c, &o, &st)) return -1;
    nfs3_put_status(c, st);
    nfs3_put_post_op(c, st ? NULL : &o.st);
    if (!st) {
        xdr_put_u32(c->res, NFS_MAX_IO);  /* rtmax */
        xdr_put_u32(c->res, NFS_MAX_IO);  /* rtpref */
        xdr_put_u32(c->res, 4096);        /* rtmult */
        xdr_put_u32(c->res, NFS_MAX_IO);  /* wtmax */
        xdr_put_u32(c->res, NFS_MAX_IO);  /* wtpref */
        xdr_put_u32(c->res, 4096);        /* wtmult */
        xdr_put_u32(c->res, 64 * 1024);   /* dtpref */
        xdr_put_u64(c->res, (uint64_t)INT64_MAX);
        xdr_put_u32(c->res, 0);           /* time_delta: 1 ns */
        xdr_put_u32(c->res, 1);
        xdr_put_u32(c->res, 0x1 | 0x2 | 0x8 | 0x10); /* LINK SYMLINK HOMOGENEOUS CANSETTIME */
    }
    nfs3_release(&o);
    return 0;
}

int nfs3_pathconf(struct nfs_ctx *c)
{
    struct nfs3_obj o;
    uint32_t st;
    if (resolve_fh_arg(c, &o, &st)) return -1;
    nfs3_put_status(c, st);
    nfs3_put_post_op(c, st ? NULL : &o.st);
    if (!st) {
        xdr_put_u32(c->res, 65000);  /* linkmax */
        xdr_put_u32(c->res, NFS3_NAME_MAX);
        xdr_put_u32(c->res, 1);      /* no_trunc */
        xdr_put_u32(c->res, 1);      /* chown_restricted */
        xdr_put_u32(c->res, 0);      /* case_insensitive */
        xdr_put_u32(c->res, 1);      /* case_preserving */
    }
    nfs3_release(&o);
    return 0;
}
