#pragma once
/* NFSv3 (RFC 1813) shared definitions and helpers for the procedure files. */
#include "nfs/internal.h"

enum nfsstat3 {
    NFS3_OK = 0, NFS3ERR_PERM = 1, NFS3ERR_NOENT = 2, NFS3ERR_IO = 5, NFS3ERR_NXIO = 6,
    NFS3ERR_ACCES = 13, NFS3ERR_EXIST = 17, NFS3ERR_XDEV = 18, NFS3ERR_NODEV = 19,
    NFS3ERR_NOTDIR = 20, NFS3ERR_ISDIR = 21, NFS3ERR_INVAL = 22, NFS3ERR_FBIG = 27,
    NFS3ERR_NOSPC = 28, NFS3ERR_ROFS = 30, NFS3ERR_MLINK = 31, NFS3ERR_NAMETOOLONG = 63,
    NFS3ERR_NOTEMPTY = 66, NFS3ERR_DQUOT = 69, NFS3ERR_STALE = 70, NFS3ERR_REMOTE = 71,
    NFS3ERR_BADHANDLE = 10001, NFS3ERR_NOT_SYNC = 10002, NFS3ERR_BAD_COOKIE = 10003,
    NFS3ERR_NOTSUPP = 10004, NFS3ERR_TOOSMALL = 10005, NFS3ERR_SERVERFAULT = 10006,
    NFS3ERR_BADTYPE = 10007, NFS3ERR_JUKEBOX = 10008,
};

enum ftype3 { NF3REG = 1, NF3DIR, NF3BLK, NF3CHR, NF3LNK, NF3SOCK, NF3FIFO };

#define NFS3_NAME_MAX 255
#define NFS3_PATH_MAX 4095

struct nfs3_fh { const uint8_t *data; uint32_t len; };

struct nfs3_sattr {
    int set_mode, set_uid, set_gid, set_size;
    uint32_t mode, uid, gid;
    uint64_t size;
    int atime_how, mtime_how;        /* 0 don't change, 1 server time, 2 client time */
    struct timespec atime, mtime;
};

/* A resolved handle: cached object + attributes fetched at resolve time. */
struct nfs3_obj {
    struct nfs_obj *o;
    struct stat st;
};

void nfs3_get_fh(struct xdr_dec *d, struct nfs3_fh *fh);
void nfs3_get_sattr(struct xdr_dec *d, struct nfs3_sattr *sa);
/* Reads a filename3 (string, up to 1024 bytes accepted so that long names get
 * NAMETOOLONG rather than GARBAGE_ARGS). */
void nfs3_get_name(struct xdr_dec *d, char *out /* 1025 bytes */);
uint32_t nfs3_check_name(const char *name);

/* Resolves a handle (first call also fixes c->exp, checks the client network and
 * computes credentials). Returns NFS3_OK or an error status. */
uint32_t nfs3_resolve(struct nfs_ctx *c, const struct nfs3_fh *fh, struct nfs3_obj *out);
void nfs3_release(struct nfs3_obj *o);
int nfs3_is_root(const struct nfs_ctx *c, const struct stat *st);

uint32_t nfs3_errno(int err);  /* positive or negative errno */
void nfs3_put_status(struct nfs_ctx *c, uint32_t st);
void nfs3_put_fattr(struct nfs_ctx *c, const struct stat *st);
void nfs3_put_post_op(struct nfs_ctx *c, const struct stat *st); /* NULL: absent */
void nfs3_put_wcc(struct nfs_ctx *c, const struct stat *pre, const struct stat *post);
void nfs3_put_post_op_fh(struct nfs_ctx *c, const struct nasd_fh *k); /* NULL: absent */

/* Applies sattr to an object. fd is a writable open fd (is_path 0) or the O_PATH
 * fd of obj (is_path 1: a size change then goes through obj's io fd). Quota is
 * charged for size changes. Returns an nfsstat3. */
uint32_t nfs3_apply_sattr(struct nfs_ctx *c, int fd, int is_path, struct nfs_obj *obj,
                          const struct stat *st, const struct nfs3_sattr *sa);
/* Charges the quota difference between two file sizes; 0 or -EDQUOT. */
pthread_mutex_t *nfs3_size_lock(struct nfs_export *e, ino_t ino);

/* Procedures (nfs3_file.c, nfs3_dir.c, nfs3_readdir.c). Return -1 for GARBAGE_ARGS
 * (only before any side effect). */
int nfs3_getattr(struct nfs_ctx *c);
int nfs3_setattr(struct nfs_ctx *c);
int nfs3_access(struct nfs_ctx *c);
int nfs3_readlink(struct nfs_ctx *c);
int nfs3_read(struct nfs_ctx *c);
int nfs3_write(struct nfs_ctx *c);
int nfs3_commit(struct nfs_ctx *c);
int nfs3_fsstat(struct nfs_ctx *c);
int nfs3_fsinfo(struct nfs_ctx *c);
int nfs3_pathconf(struct nfs_ctx *c);
int nfs3_lookup(struct nfs_ctx *c);
int nfs3_create(struct nfs_ctx *c);
int nfs3_mkdir(struct nfs_ctx *c);
int nfs3_symlink(struct nfs_ctx *c);
int nfs3_mknod(struct nfs_ctx *c);
int nfs3_remove(struct nfs_ctx *c);
int nfs3_rmdir(struct nfs_ctx *c);
int nfs3_rename(struct nfs_ctx *c);
int nfs3_link(struct nfs_ctx *c);
int nfs3_readdir(struct nfs_ctx *c);
int nfs3_readdirplus(struct nfs_ctx *c);
