/* READDIR and READDIRPLUS. Cookies are the kernel's d_off values, so a listing
 * resumes with one lseek. "." and ".." are listed; ".." of the export root is the
 * root itself. */
#define _GNU_SOURCE
#include "nfs/nfs3.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

#define DENTS_BUF 32768

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
    int dfd = -1;
    if (!st) {
        nfs_creds_user(c);
        dfd = openat(d.o->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) st = nfs3_errno(errno);
        else if (cookie && lseek(dfd, (off_t)cookie, SEEK_SET) < 0) st = NFS3ERR_BAD_COOKIE;
    }
    if (st) {
        nfs3_put_status(c, st);
        nfs3_put_post_op(c, d.o ? &d.st : NULL);
        if (dfd >= 0) close(dfd);
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
    size_t limit = start + maxcount;   /* reply bytes for this procedure */
    size_t dirbytes = 0;
    int nent = 0, eof = 0, full = 0;
    int is_root = nfs3_is_root(c, &d.st);
    static _Thread_local uint8_t dents[DENTS_BUF];
    while (!full) {
        long n = syscall(SYS_getdents64, dfd, dents, sizeof dents);
        if (n < 0) { st = nfs3_errno(errno); break; }
        if (n == 0) { eof = 1; break; }
        for (long pos = 0; pos < n;) {
            struct linux_dirent64 *de = (struct linux_dirent64 *)(dents + pos);
            pos += de->d_reclen;
            size_t nlen = strlen(de->d_name);
            size_t pad = (nlen + 3) & ~(size_t)3;
            size_t need = 4 + 8 + 4 + pad + 8 + (plus ? 4 + 84 + 4 + 4 + NFS_FH_MAX : 0);
            size_t dneed = 8 + 4 + pad + 8;
            if (c->res->len + need + 8 > limit || dirbytes + dneed > dircount) { full = 1; break; }
            int dotdot = !strcmp(de->d_name, "..");
            uint64_t fileid = de->d_ino;
            struct stat est;
            struct nfs_fh_key k;
            int have_attr = 0, have_fh = 0;
            if (dotdot && is_root) {
                fileid = d.st.st_ino;
                est = d.st;
                have_attr = 1;
                k = c->exp->root_key;
                have_fh = plus;
            } else if (plus) {
                have_attr = fstatat(dfd, de->d_name, &est, AT_SYMLINK_NOFOLLOW) == 0;
                if (have_attr && est.st_dev == c->exp->dev)
                    have_fh = nfs_fh_from_name(dfd, de->d_name, 0, &k) == 0;
                else have_attr = 0;
            }
            xdr_put_u32(c->res, 1);
            xdr_put_u64(c->res, fileid);
            xdr_put_opaque(c->res, de->d_name, (uint32_t)nlen);
            xdr_put_u64(c->res, (uint64_t)de->d_off);
            if (plus) {
                nfs3_put_post_op(c, have_attr ? &est : NULL);
                nfs3_put_post_op_fh(c, have_fh ? &k : NULL);
            }
            dirbytes += dneed;
            nent++;
        }
    }
    close(dfd);
    if (!st && nent == 0 && !eof) st = NFS3ERR_TOOSMALL;
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
