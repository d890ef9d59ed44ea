/* Engine dataset backend: rename with POSIX semantics. The one step that can fail for
 * lack of space (adding the new entry, which may grow the directory) runs first; the
 * rest rewrites entries in place, so a failed rename leaves the tree as it was. */
#define _GNU_SOURCE
#include "storage/fs/vfs_ext2_int.h"
#include <errno.h>
#include <string.h>

struct set_entry_ctx {
    const char *name;
    size_t len;
    ext2_ino_t ino;
    int ft;
    bool done;
};

static int set_entry_cb(ext2_ino_t dir, int entry, struct ext2_dir_entry *de, int off, int bs, char *buf,
                        void *priv)
{
    struct set_entry_ctx *c = priv;
    if (!de->inode || (size_t)ext2fs_dirent_name_len(de) != c->len || memcmp(de->name, c->name, c->len))
        return 0;
    de->inode = c->ino;
    ext2fs_dirent_set_file_type(de, c->ft);
    c->done = true;
    return DIRENT_CHANGED | DIRENT_ABORT;
}

/* Points the existing entry name of dir at ino (type ft). */
static int set_entry(struct e2 *e, ext2_ino_t dir, const char *name, ext2_ino_t ino, int ft)
{
    struct set_entry_ctx c = { name, strlen(name), ino, ft, false };
    e->dirty = true;
    e2_dir_forget(e, dir);
    errcode_t err = ext2fs_dir_iterate2(e->fs, dir, 0, NULL, set_entry_cb, &c);
    if (err) return e2_errno(err);
    return c.done ? 0 : -EIO;
}

/* -EINVAL when dir is ino or lies below it (a directory cannot move into itself). */
static int check_not_below(struct e2 *e, ext2_ino_t dir, ext2_ino_t ino)
{
    for (int depth = 0; depth < 65536; depth++) {
        if (dir == ino) return -EINVAL;
        if (dir == EXT2_ROOT_INO) return 0;
        ext2_ino_t parent;
        int rc = e2_lookup(e, dir, "..", &parent);
        if (rc) return rc == -ENOENT ? -EIO : rc;
        if (parent == dir) return 0;
        dir = parent;
    }
    return -ELOOP;
}

static int bump_dir(struct e2 *e, ext2_ino_t dir, int nlink_delta)
{
    struct ext2_inode_large d;
    int rc = e2_iget(e, (int)dir, &d);
    if (rc) return rc;
    d.i_links_count = (uint16_t)(d.i_links_count + nlink_delta);
    e2_touch(&d, false, true, true);
    return e2_iput(e, dir, &d);
}

static bool dot_or_dotdot(const char *n) { return !strcmp(n, ".") || !strcmp(n, ".."); }

int e2_renameat(struct nasd_fsroot *f, int olddirfd, const char *oldname, int newdirfd, const char *newname)
{
    if (dot_or_dotdot(oldname) || dot_or_dotdot(newname)) return -EBUSY;
    struct e2 *e = E2(f);
    struct ext2_inode_large od, nd, sin, din;
    ext2_ino_t olddir = (ext2_ino_t)olddirfd, newdir = (ext2_ino_t)newdirfd, sino, dino = 0;
    e2_lock(e);
    int rc = e2_dir_get(e, olddirfd, &od);
    if (!rc) rc = e2_dir_get(e, newdirfd, &nd);
    if (!rc) rc = e2_may(&od, E2_MAY_WRITE | E2_MAY_EXEC);
    if (!rc) rc = e2_may(&nd, E2_MAY_WRITE | E2_MAY_EXEC);
    if (!rc) rc = e2_lookup(e, olddir, oldname, &sino);
    if (!rc) rc = e2_iget(e, (int)sino, &sin);
    if (rc) goto out;
    rc = e2_check_name(newname);
    if (rc) goto out;
    rc = e2_lookup(e, newdir, newname, &dino);
    if (rc == -ENOENT) { dino = 0; rc = 0; }
    else if (!rc) rc = e2_iget(e, (int)dino, &din);
    if (rc) goto out;
    if (dino == sino) goto out;   /* the same file: nothing to do */

    bool s_dir = LINUX_S_ISDIR(sin.i_mode), moving_dir = s_dir && olddir != newdir;
    if ((rc = e2_may_delete(&od, &sin))) goto out;
    if (dino) {
        if ((rc = e2_may_delete(&nd, &din))) goto out;
        bool d_dir = LINUX_S_ISDIR(din.i_mode);
        if (s_dir && !d_dir) { rc = -ENOTDIR; goto out; }
        if (!s_dir && d_dir) { rc = -EISDIR; goto out; }
        if (d_dir) {
            rc = e2_dir_is_empty(e, dino);
            if (rc < 0) goto out;
            if (!rc) { rc = -ENOTEMPTY; goto out; }
            rc = 0;
        }
    }
    if (moving_dir) {
        if ((rc = check_not_below(e, newdir, sino))) goto out;
        if ((rc = e2_may(&sin, E2_MAY_WRITE))) goto out;   /* its ".." changes */
        if (!dino && nd.i_links_count >= E2_LINK_MAX) { rc = -EMLINK; goto out; }
    }
    int ft = e2_ft_of_mode(sin.i_mode);

    /* 1. the new name (the only step that may need space) */
    if (dino) rc = set_entry(e, newdir, newname, sino, ft);
    else rc = e2_dir_add(e, newdir, newname, sino, ft);
    if (rc) goto out;
    /* 2. the old name */
    rc = e2_dir_remove(e, olddir, oldname, sino);
    if (rc) goto out;
    /* 3. a moved directory's ".." */
    if (moving_dir && (rc = set_entry(e, sino, "..", newdir, EXT2_FT_DIR))) goto out;
    /* 4. the replaced object */
    int old_delta = moving_dir ? -1 : 0, new_delta = moving_dir ? 1 : 0;
    if (dino) {
        if (LINUX_S_ISDIR(din.i_mode)) new_delta--;   /* its ".." no longer counts */
        if ((rc = e2_drop_link(e, dino, &din))) goto out;
    }
    /* 5. times and link counts */
    if ((rc = e2_iget(e, (int)sino, &sin))) goto out;
    e2_touch(&sin, false, false, true);
    if ((rc = e2_iput(e, sino, &sin))) goto out;
    if (olddir == newdir) rc = bump_dir(e, olddir, old_delta + new_delta);
    else {
        rc = bump_dir(e, olddir, old_delta);
        if (!rc) rc = bump_dir(e, newdir, new_delta);
    }
out:
    e2_unlock(e);
    return rc;
}
