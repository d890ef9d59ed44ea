/* Engine dataset backend: namespace operations (lookup, create, link, unlink, stat,
 * handles). Every operation reads the directory inode afresh after changing entries:
 * ext2fs_link/expand_dir write the directory inode themselves. */
#define _GNU_SOURCE
#include "storage/fs/vfs_ext2_int.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

int e2_check_name(const char *name)
{
    if (!name[0]) return -ENOENT;
    if (!strcmp(name, ".") || !strcmp(name, "..")) return -EEXIST;
    if (strchr(name, '/')) return -EINVAL;
    if (strlen(name) > E2_NAME_MAX) return -ENAMETOOLONG;
    return 0;
}

int e2_lookup(struct e2 *e, ext2_ino_t dir, const char *name, ext2_ino_t *ino)
{
    if (!name[0]) return -ENOENT;
    if (strchr(name, '/')) return -EINVAL;
    if (strlen(name) > E2_NAME_MAX) return -ENAMETOOLONG;
    return e2_dir_lookup(e, dir, name, ino);
}

int e2_ft_of_mode(unsigned mode)
{
    switch (mode & LINUX_S_IFMT) {
    case LINUX_S_IFREG: return EXT2_FT_REG_FILE;
    case LINUX_S_IFDIR: return EXT2_FT_DIR;
    case LINUX_S_IFCHR: return EXT2_FT_CHRDEV;
    case LINUX_S_IFBLK: return EXT2_FT_BLKDEV;
    case LINUX_S_IFIFO: return EXT2_FT_FIFO;
    case LINUX_S_IFSOCK: return EXT2_FT_SOCK;
    case LINUX_S_IFLNK: return EXT2_FT_SYMLINK;
    default: return EXT2_FT_UNKNOWN;
    }
}

/* The directory changed: mtime/ctime now, links += nlink_delta. */
static int dir_changed(struct e2 *e, ext2_ino_t dir, int nlink_delta)
{
    struct ext2_inode_large d;
    memset(&d, 0, sizeof d);
    errcode_t err = ext2fs_read_inode_full(e->fs, dir, (struct ext2_inode *)&d, sizeof d);
    if (err) return e2_errno(err);
    d.i_links_count = (uint16_t)(d.i_links_count + nlink_delta);
    e2_touch(&d, false, true, true);
    return e2_iput(e, dir, &d);
}

static void init_extents(struct e2 *e, struct ext2_inode_large *in)
{
    if (!ext2fs_has_feature_extents(e->fs->super)) return;
    in->i_flags |= EXT4_EXTENTS_FL;
    struct ext3_extent_header *eh = (struct ext3_extent_header *)in->i_block;
    eh->eh_magic = EXT3_EXT_MAGIC;
    eh->eh_depth = 0;
    eh->eh_entries = 0;
    eh->eh_max = (sizeof in->i_block - sizeof *eh) / sizeof(struct ext3_extent);
}

/* One block mapped at logical 0 (extent tree of depth 0, or the first direct pointer). */
static void map_first_block(struct e2 *e, struct ext2_inode_large *in, blk64_t blk)
{
    if (ext2fs_has_feature_extents(e->fs->super)) {
        init_extents(e, in);
        struct ext3_extent_header *eh = (struct ext3_extent_header *)in->i_block;
        struct ext3_extent *ex = (struct ext3_extent *)(eh + 1);
        eh->eh_entries = 1;
        ex->ee_block = 0;
        ex->ee_len = 1;
        ex->ee_start_hi = (uint16_t)(blk >> 32);
        ex->ee_start = (uint32_t)blk;
    } else {
        in->i_block[0] = (uint32_t)blk;
    }
    ext2fs_iblk_set(e->fs, (struct ext2_inode *)in, 1);
}

static void encode_rdev(struct ext2_inode_large *in, dev_t dev)
{
    unsigned ma = major(dev), mi = minor(dev);
    if (ma < 256 && mi < 256) {
        in->i_block[0] = (ma << 8) | mi;
        in->i_block[1] = 0;
    } else {
        in->i_block[0] = 0;
        in->i_block[1] = (mi & 0xff) | (ma << 8) | ((mi & ~0xffu) << 12);
        in->i_block[2] = 0;
    }
}

static dev_t decode_rdev(const struct ext2_inode_large *in)
{
    uint32_t v = in->i_block[0];
    if (v) return makedev((v >> 8) & 0xff, v & 0xff);
    v = in->i_block[1];
    return makedev((v & 0xfff00) >> 8, (v & 0xff) | ((v >> 12) & 0xfff00));
}

/* Writes one block of content for a new directory or long symlink and maps it. */
static int give_block(struct e2 *e, ext2_ino_t ino, struct ext2_inode_large *in, ext2_ino_t parent,
                      const char *target, size_t tlen)
{
    ext2_filsys fs = e->fs;
    blk64_t goal = ext2fs_find_inode_goal(fs, ino, (struct ext2_inode *)in, 0), blk;
    errcode_t err = ext2fs_new_block2(fs, goal, NULL, &blk);
    if (err) return e2_errno(err);
    char *buf = NULL;
    if (target) {
        err = ext2fs_get_memzero(fs->blocksize, &buf);
        if (!err) {
            memcpy(buf, target, tlen);
            err = io_channel_write_blk64(fs->io, blk, 1, buf);
        }
    } else {
        err = ext2fs_new_dir_block(fs, ino, parent, &buf);
        if (!err) err = ext2fs_write_dir_block4(fs, blk, buf, 0, ino);
    }
    if (buf) ext2fs_free_mem(&buf);
    if (err) return e2_errno(err);
    ext2fs_block_alloc_stats2(fs, blk, +1);
    map_first_block(e, in, blk);
    return 0;
}

/* Fills a fresh inode for the caller's credentials under directory d. */
static void init_inode(struct e2 *e, struct ext2_inode_large *in, const struct ext2_inode_large *d,
                       unsigned mode)
{
    const struct nasd_vfs_cred *c = nasd_vfs_get_cred();
    memset(in, 0, sizeof *in);
    uint32_t gid = c->gid;
    if (d->i_mode & S_ISGID) {
        gid = e2_gid(d);
        if (LINUX_S_ISDIR(mode)) mode |= S_ISGID;
    } else if (LINUX_S_ISDIR(mode)) {
        mode &= ~S_ISGID;
    }
    /* like inode_init_owner: a setgid non-directory in a group the creator is not in */
    if (!LINUX_S_ISDIR(mode) && (mode & S_ISGID) && (mode & S_IXGRP) && !e2_in_group(gid) && !e2_is_root())
        mode &= ~S_ISGID;
    in->i_mode = (uint16_t)mode;
    e2_set_uid(in, c->uid);
    e2_set_gid(in, gid);
    in->i_links_count = LINUX_S_ISDIR(mode) ? 2 : 1;
    in->i_extra_isize = sizeof(struct ext2_inode_large) - EXT2_GOOD_OLD_INODE_SIZE;
    in->i_generation = e2_new_generation(e);
    struct timespec now;
    e2_now(&now);
    e2_set_time(&in->i_atime, &in->i_atime_extra, &now);
    e2_set_time(&in->i_mtime, &in->i_mtime_extra, &now);
    e2_set_time(&in->i_ctime, &in->i_ctime_extra, &now);
    e2_set_time(&in->i_crtime, &in->i_crtime_extra, &now);
}

/* Creates name in dirfd: mode holds the type. Checks permission and existence.
 * On success *out_ino is the new inode. Partial failures are rolled back. */
static int create_node(struct e2 *e, int dirfd, const char *name, unsigned mode, dev_t rdev,
                       const char *target, ext2_ino_t *out_ino)
{
    ext2_filsys fs = e->fs;
    struct ext2_inode_large d, in;
    int rc = e2_dir_get(e, dirfd, &d);
    if (rc) return rc;
    rc = e2_check_name(name);
    if (rc) return rc;
    rc = e2_may(&d, E2_MAY_WRITE | E2_MAY_EXEC);
    if (rc) return rc;
    ext2_ino_t ino, dir = (ext2_ino_t)dirfd;
    rc = e2_lookup(e, dir, name, &ino);
    if (rc == 0) return -EEXIST;
    if (rc != -ENOENT) return rc;
    bool is_dir = LINUX_S_ISDIR(mode);
    if (is_dir && d.i_links_count >= E2_LINK_MAX) return -EMLINK;

    errcode_t err = e2_new_inode(e, dir, (int)mode, &ino);
    if (err) return e2_errno(err);
    init_inode(e, &in, &d, mode);
    rc = e2_dir_add(e, dir, name, ino, e2_ft_of_mode(mode));
    if (rc) return rc;
    e2_inode_alloc(e, ino, +1, is_dir);
    size_t tlen = target ? strlen(target) : 0;
    if (is_dir) {
        rc = give_block(e, ino, &in, dir, NULL, 0);
        in.i_size = fs->blocksize;
    } else if (LINUX_S_ISLNK(mode)) {
        if (tlen < sizeof in.i_block) memcpy(in.i_block, target, tlen);   /* fast symlink */
        else rc = give_block(e, ino, &in, dir, target, tlen);
        in.i_size = (uint32_t)tlen;
    } else if (LINUX_S_ISREG(mode)) {
        init_extents(e, &in);
    } else if (LINUX_S_ISCHR(mode) || LINUX_S_ISBLK(mode)) {
        encode_rdev(&in, rdev);
    }
    if (!rc) rc = e2_iput(e, ino, &in);
    if (rc) {   /* undo: the name, the inode (its block was never mapped) */
        e2_dir_remove(e, dir, name, ino);
        e2_inode_alloc(e, ino, -1, is_dir);
        return rc;
    }
    rc = dir_changed(e, dir, is_dir ? 1 : 0);
    if (!rc) *out_ino = ino;
    return rc;
}

int e2_make_root(struct e2 *e)
{
    ext2_filsys fs = e->fs;
    struct ext2_inode_large d, in;
    memset(&d, 0, sizeof d);            /* no setgid parent */
    init_inode(e, &in, &d, LINUX_S_IFDIR | 0755);
    e2_set_uid(&in, 0);                 /* root-owned whoever formats */
    e2_set_gid(&in, 0);
    e2_inode_alloc(e, EXT2_ROOT_INO, +1, true);
    int rc = give_block(e, EXT2_ROOT_INO, &in, EXT2_ROOT_INO, NULL, 0);
    in.i_size = fs->blocksize;
    if (!rc) rc = e2_iput(e, EXT2_ROOT_INO, &in);
    return rc;
}

struct empty_ctx { int others; };
static int empty_cb(ext2_ino_t dir, int entry, struct ext2_dir_entry *de, int off, int bs, char *buf,
                    void *priv)
{
    struct empty_ctx *c = priv;
    if (entry == DIRENT_DOT_FILE || entry == DIRENT_DOT_DOT_FILE || !de->inode) return 0;
    c->others++;
    return DIRENT_ABORT;
}

int e2_dir_is_empty(struct e2 *e, ext2_ino_t dir)
{
    struct empty_ctx c = { 0 };
    errcode_t err = ext2fs_dir_iterate2(e->fs, dir, 0, NULL, empty_cb, &c);
    if (err) return e2_errno(err);
    return c.others == 0;
}

int e2_drop_link(struct e2 *e, ext2_ino_t ino, struct ext2_inode_large *in)
{
    bool is_dir = LINUX_S_ISDIR(in->i_mode);
    in->i_links_count = is_dir || in->i_links_count <= 1 ? 0 : in->i_links_count - 1;
    struct timespec now;
    e2_now(&now);
    e2_set_time(&in->i_ctime, &in->i_ctime_extra, &now);
    if (in->i_links_count) return e2_iput(e, ino, in);
    if (ext2fs_inode_has_valid_blocks2(e->fs, (struct ext2_inode *)in)) {
        errcode_t err = ext2fs_punch(e->fs, ino, (struct ext2_inode *)in, NULL, 0, ~0ULL);
        if (err) return e2_errno(err);
    }
    in->i_size = 0;
    in->i_size_high = 0;
    in->i_dtime = (uint32_t)now.tv_sec;
    if (is_dir) e2_dir_forget(e, ino);        /* the inode number may come back as another dir */
    int rc = e2_iput(e, ino, in);
    e2_inode_alloc(e, ino, -1, is_dir);
    return rc;
}

/* ---------- operations ---------- */

int e2_openat(struct nasd_fsroot *f, int dirfd, const char *name, int flags, mode_t mode)
{
    struct e2 *e = E2(f);
    int acc = flags & O_ACCMODE;
    bool path = flags & O_PATH, writing = !path && (acc == O_WRONLY || acc == O_RDWR);
    bool trunc = !path && (flags & O_TRUNC), checked = (flags & O_CREAT) || writing || trunc;
    struct ext2_inode_large d, in;
    ext2_ino_t ino;
    e2_lock(e);
    int rc = e2_dir_get(e, dirfd, &d);
    if (rc) goto out;
    if (checked && (rc = e2_may(&d, E2_MAY_EXEC))) goto out;
    rc = e2_lookup(e, (ext2_ino_t)dirfd, name, &ino);
    if (rc == -ENOENT && (flags & O_CREAT)) {
        rc = create_node(e, dirfd, name, LINUX_S_IFREG | (mode & 07777), 0, NULL, &ino);
        if (!rc) { e2_pin(e, ino); rc = (int)ino; }
        goto out;
    }
    if (rc) goto out;
    if ((flags & O_CREAT) && (flags & O_EXCL)) { rc = -EEXIST; goto out; }
    if ((rc = e2_iget(e, (int)ino, &in))) goto out;
    if (LINUX_S_ISLNK(in.i_mode) && !path) { rc = -ELOOP; goto out; }
    if ((flags & O_DIRECTORY) && !LINUX_S_ISDIR(in.i_mode)) { rc = -ENOTDIR; goto out; }
    if (LINUX_S_ISDIR(in.i_mode) && (writing || trunc || (flags & O_CREAT))) { rc = -EISDIR; goto out; }
    if (checked) {
        int mask = (acc == O_RDONLY ? E2_MAY_READ : acc == O_WRONLY ? E2_MAY_WRITE : E2_MAY_READ | E2_MAY_WRITE);
        if (trunc) mask |= E2_MAY_WRITE;
        if ((rc = e2_may(&in, mask))) goto out;
    }
    if (trunc && LINUX_S_ISREG(in.i_mode)) {
        rc = e2_set_size(e, ino, &in, 0);
        if (rc) goto out;
    }
    e2_pin(e, ino);
    rc = (int)ino;
out:
    e2_unlock(e);
    return rc;
}

/* The object named by (dirfd, name), or dirfd itself for "" with AT_EMPTY_PATH. */
static int resolve(struct e2 *e, int dirfd, const char *name, int flags, bool check,
                   ext2_ino_t *ino, struct ext2_inode_large *in)
{
    if (!name[0] && (flags & AT_EMPTY_PATH)) {
        *ino = (ext2_ino_t)dirfd;
        return e2_iget(e, dirfd, in);
    }
    struct ext2_inode_large d;
    int rc = e2_dir_get(e, dirfd, &d);
    if (!rc && check) rc = e2_may(&d, E2_MAY_EXEC);
    if (!rc) rc = e2_lookup(e, (ext2_ino_t)dirfd, name, ino);
    if (!rc) rc = e2_iget(e, (int)*ino, in);
    return rc;
}

int e2_fstatat(struct nasd_fsroot *f, int dirfd, const char *name, struct stat *st, int flags)
{
    struct e2 *e = E2(f);
    struct ext2_inode_large in;
    ext2_ino_t ino;
    e2_lock(e);
    int rc = resolve(e, dirfd, name, flags, true, &ino, &in);
    if (!rc) {
        memset(st, 0, sizeof *st);
        st->st_dev = e->dev;
        st->st_ino = ino;
        st->st_mode = in.i_mode;
        st->st_nlink = in.i_links_count;
        st->st_uid = e2_uid(&in);
        st->st_gid = e2_gid(&in);
        if (LINUX_S_ISCHR(in.i_mode) || LINUX_S_ISBLK(in.i_mode)) st->st_rdev = decode_rdev(&in);
        st->st_size = (off_t)e2_size(&in);
        st->st_blksize = 4096;
        st->st_blocks = (blkcnt_t)ext2fs_get_stat_i_blocks(e->fs, (struct ext2_inode *)&in);
        e2_get_time(in.i_atime, in.i_atime_extra, &st->st_atim);
        e2_get_time(in.i_mtime, in.i_mtime_extra, &st->st_mtim);
        e2_get_time(in.i_ctime, in.i_ctime_extra, &st->st_ctim);
    }
    e2_unlock(e);
    return rc;
}

int e2_mkdirat(struct nasd_fsroot *f, int dirfd, const char *name, mode_t mode)
{
    struct e2 *e = E2(f);
    ext2_ino_t ino;
    e2_lock(e);
    int rc = create_node(e, dirfd, name, LINUX_S_IFDIR | (mode & 01777), 0, NULL, &ino);
    e2_unlock(e);
    return rc;
}

int e2_mknodat(struct nasd_fsroot *f, int dirfd, const char *name, mode_t mode, dev_t dev)
{
    unsigned type = mode & S_IFMT;
    if (type == 0) type = S_IFREG;
    if (type == S_IFDIR) return -EPERM;
    if (type != S_IFREG && type != S_IFCHR && type != S_IFBLK && type != S_IFIFO && type != S_IFSOCK)
        return -EINVAL;
    if ((type == S_IFCHR || type == S_IFBLK) && !e2_is_root()) return -EPERM;   /* CAP_MKNOD */
    struct e2 *e = E2(f);
    ext2_ino_t ino;
    e2_lock(e);
    int rc = create_node(e, dirfd, name, type | (mode & 07777), dev, NULL, &ino);
    e2_unlock(e);
    return rc;
}

int e2_symlinkat(struct nasd_fsroot *f, const char *target, int dirfd, const char *name)
{
    size_t tlen = strlen(target);
    if (!tlen) return -ENOENT;
    if (tlen > E2_SYMLINK_MAX) return -ENAMETOOLONG;
    struct e2 *e = E2(f);
    ext2_ino_t ino;
    e2_lock(e);
    int rc = create_node(e, dirfd, name, LINUX_S_IFLNK | 0777, 0, target, &ino);
    e2_unlock(e);
    return rc;
}

int e2_readlink(struct nasd_fsroot *f, int fd, char *buf, size_t size)
{
    struct e2 *e = E2(f);
    struct ext2_inode_large in;
    e2_lock(e);
    int rc = e2_iget(e, fd, &in);
    if (rc) goto out;
    if (!LINUX_S_ISLNK(in.i_mode)) { rc = -EINVAL; goto out; }
    uint64_t len = e2_size(&in);
    if (len > E2_SYMLINK_MAX) { rc = -EIO; goto out; }
    char tmp[E2_SYMLINK_MAX + 1];
    if (ext2fs_is_fast_symlink((struct ext2_inode *)&in)) {
        memcpy(tmp, in.i_block, len);
    } else {
        ext2_file_t file;
        unsigned got = 0;
        errcode_t err = ext2fs_file_open2(e->fs, (ext2_ino_t)fd, (struct ext2_inode *)&in, 0, &file);
        if (!err) {
            err = ext2fs_file_read(file, tmp, (unsigned)len, &got);
            ext2fs_file_close(file);
        }
        if (err) { rc = e2_errno(err); goto out; }
        if (got != len) { rc = -EIO; goto out; }
    }
    rc = (int)(len < size ? len : size);
    memcpy(buf, tmp, (size_t)rc);
out:
    e2_unlock(e);
    return rc;
}

int e2_unlinkat(struct nasd_fsroot *f, int dirfd, const char *name, int flags)
{
    bool rmdir = flags & AT_REMOVEDIR;
    if (!strcmp(name, ".")) return rmdir ? -EINVAL : -EISDIR;
    if (!strcmp(name, "..")) return rmdir ? -ENOTEMPTY : -EISDIR;
    struct e2 *e = E2(f);
    struct ext2_inode_large d, in;
    ext2_ino_t ino, dir = (ext2_ino_t)dirfd;
    e2_lock(e);
    int rc = e2_dir_get(e, dirfd, &d);
    if (!rc) rc = e2_may(&d, E2_MAY_WRITE | E2_MAY_EXEC);
    if (!rc) rc = e2_lookup(e, dir, name, &ino);
    if (!rc) rc = e2_iget(e, (int)ino, &in);
    if (!rc) rc = e2_may_delete(&d, &in);
    if (rc) goto out;
    bool is_dir = LINUX_S_ISDIR(in.i_mode);
    if (rmdir && !is_dir) { rc = -ENOTDIR; goto out; }
    if (!rmdir && is_dir) { rc = -EISDIR; goto out; }
    if (is_dir) {
        if (ino == EXT2_ROOT_INO) { rc = -EBUSY; goto out; }
        rc = e2_dir_is_empty(e, ino);
        if (rc < 0) goto out;
        if (!rc) { rc = -ENOTEMPTY; goto out; }
    }
    if ((rc = e2_dir_remove(e, dir, name, ino))) goto out;
    rc = e2_drop_link(e, ino, &in);
    if (!rc) rc = dir_changed(e, dir, is_dir ? -1 : 0);
out:
    e2_unlock(e);
    return rc;
}

int e2_link(struct nasd_fsroot *f, int fd, int dirfd, const char *name)
{
    struct e2 *e = E2(f);
    struct ext2_inode_large d, in;
    ext2_ino_t other;
    e2_lock(e);
    int rc = e2_iget(e, fd, &in);
    if (rc) goto out;
    if (LINUX_S_ISDIR(in.i_mode)) { rc = -EPERM; goto out; }
    if ((rc = e2_dir_get(e, dirfd, &d))) goto out;
    if ((rc = e2_check_name(name))) goto out;
    if ((rc = e2_may(&d, E2_MAY_WRITE | E2_MAY_EXEC))) goto out;
    rc = e2_lookup(e, (ext2_ino_t)dirfd, name, &other);
    if (rc == 0) { rc = -EEXIST; goto out; }
    if (rc != -ENOENT) goto out;
    if ((rc = e2_may_hardlink(&in))) goto out;
    if (in.i_links_count >= E2_LINK_MAX) { rc = -EMLINK; goto out; }
    if ((rc = e2_dir_add(e, (ext2_ino_t)dirfd, name, (ext2_ino_t)fd, e2_ft_of_mode(in.i_mode)))) goto out;
    in.i_links_count++;
    e2_touch(&in, false, false, true);
    rc = e2_iput(e, (ext2_ino_t)fd, &in);
    if (!rc) rc = dir_changed(e, (ext2_ino_t)dirfd, 0);
out:
    e2_unlock(e);
    return rc;
}

int e2_handle(struct nasd_fsroot *f, int dirfd, const char *name, int flags, struct nasd_fh *out)
{
    struct e2 *e = E2(f);
    struct ext2_inode_large in;
    ext2_ino_t ino;
    e2_lock(e);
    int rc = resolve(e, dirfd, name, flags, false, &ino, &in);
    e2_unlock(e);
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    out->type = E2_FH_TYPE;
    out->len = E2_FH_LEN;
    uint32_t v[2] = { ino, in.i_generation };
    memcpy(out->bytes, v, sizeof v);
    return 0;
}

int e2_open_handle(struct nasd_fsroot *f, const struct nasd_fh *h, int flags)
{
    if (h->type != E2_FH_TYPE || h->len != E2_FH_LEN) return -ESTALE;
    uint32_t v[2];
    memcpy(v, h->bytes, sizeof v);
    if (v[0] > INT32_MAX) return -ESTALE;
    struct e2 *e = E2(f);
    struct ext2_inode_large in;
    e2_lock(e);
    int rc = e2_iget(e, (int)v[0], &in);
    if (!rc && in.i_generation != v[1]) rc = -ESTALE;
    if (!rc && (flags & O_DIRECTORY) && !LINUX_S_ISDIR(in.i_mode)) rc = -ENOTDIR;
    int acc = flags & O_ACCMODE;
    if (!rc && !(flags & O_PATH) && (acc == O_WRONLY || acc == O_RDWR) && LINUX_S_ISDIR(in.i_mode)) rc = -EISDIR;
    if (!rc) e2_pin(e, v[0]);
    e2_unlock(e);
    return rc ? rc : (int)v[0];
}
