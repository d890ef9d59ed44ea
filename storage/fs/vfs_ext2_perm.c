/* Engine dataset backend: permission checks in userspace for the calling thread's
 * credentials (nasd_vfs_get_cred), following Linux: uid 0 bypasses read/write/search
 * (CAP_DAC_OVERRIDE) and ownership rules (CAP_FOWNER/CAP_CHOWN/CAP_FSETID); everybody else
 * gets the owner, group or other bits. Also the attribute changes whose rules are all about
 * permissions: chown, chmod, utimens. */
#define _GNU_SOURCE
#include "storage/fs/vfs_ext2_int.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

bool e2_is_root(void) { return nasd_vfs_get_cred()->uid == 0; }

bool e2_in_group(uint32_t gid)
{
    const struct nasd_vfs_cred *c = nasd_vfs_get_cred();
    if (c->gid == gid) return true;
    for (uint32_t i = 0; i < c->ngroups && i < NASD_VFS_MAX_GROUPS; i++)
        if (c->groups[i] == gid) return true;
    return false;
}

bool e2_is_owner(const struct ext2_inode_large *in)
{
    return nasd_vfs_get_cred()->uid == e2_uid(in);
}

int e2_may(const struct ext2_inode_large *in, int mask)
{
    const struct nasd_vfs_cred *c = nasd_vfs_get_cred();
    unsigned mode = in->i_mode;
    if (c->uid == 0) {
        /* exec on a non-directory still needs some x bit */
        if (!(mask & E2_MAY_EXEC) || LINUX_S_ISDIR(mode) || (mode & 0111)) return 0;
        return -EACCES;
    }
    unsigned bits;
    if (c->uid == e2_uid(in)) bits = (mode >> 6) & 7;
    else if (e2_in_group(e2_gid(in))) bits = (mode >> 3) & 7;
    else bits = mode & 7;
    return ((int)bits & mask) == mask ? 0 : -EACCES;
}

/* Removing or renaming victim out of dir, after w+x on dir was checked: sticky directories
 * let only the owner of the entry or of the directory (or root) do it. */
int e2_may_delete(const struct ext2_inode_large *dir, const struct ext2_inode_large *victim)
{
    if (!(dir->i_mode & S_ISVTX) || e2_is_root()) return 0;
    uint32_t uid = nasd_vfs_get_cred()->uid;
    return uid == e2_uid(dir) || uid == e2_uid(victim) ? 0 : -EPERM;
}

/* fs.protected_hardlinks=1 (Debian's default): a non-owner may only link a regular file
 * that is neither setuid nor executable-setgid and that they can read and write. */
int e2_may_hardlink(const struct ext2_inode_large *in)
{
    if (e2_is_root() || e2_is_owner(in)) return 0;
    unsigned mode = in->i_mode;
    if (!LINUX_S_ISREG(mode) || (mode & S_ISUID) || ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)))
        return -EPERM;
    return e2_may(in, E2_MAY_READ | E2_MAY_WRITE) ? -EPERM : 0;
}

int e2_chown(struct nasd_fsroot *f, int fd, uid_t uid, gid_t gid)
{
    struct e2 *e = E2(f);
    struct ext2_inode_large in;
    e2_lock(e);
    int rc = e2_iget(e, fd, &in);
    if (rc) goto out;
    bool root = e2_is_root();
    uint32_t cur_uid = e2_uid(&in), cur_gid = e2_gid(&in);
    /* uid: only root changes it (a no-op "change" to the same uid is allowed to the owner) */
    if (uid != (uid_t)-1 && uid != cur_uid && !root) { rc = -EPERM; goto out; }
    if (uid != (uid_t)-1 && !root && !e2_is_owner(&in)) { rc = -EPERM; goto out; }
    /* gid: root, or the owner to a group they belong to */
    if (gid != (gid_t)-1 && !root && !(e2_is_owner(&in) && (gid == cur_gid || e2_in_group(gid)))) {
        rc = -EPERM;
        goto out;
    }
    if (uid != (uid_t)-1) e2_set_uid(&in, uid);
    if (gid != (gid_t)-1) e2_set_gid(&in, gid);
    if (!LINUX_S_ISDIR(in.i_mode)) {   /* like notify_change(ATTR_KILL_SUID|ATTR_KILL_SGID) */
        in.i_mode &= ~S_ISUID;
        if (in.i_mode & S_IXGRP) in.i_mode &= ~S_ISGID;
    }
    e2_touch(&in, false, false, true);
    rc = e2_iput(e, (ext2_ino_t)fd, &in);
out:
    e2_unlock(e);
    return rc;
}

int e2_chmod(struct nasd_fsroot *f, int fd, mode_t mode)
{
    struct e2 *e = E2(f);
    struct ext2_inode_large in;
    e2_lock(e);
    int rc = e2_iget(e, fd, &in);
    if (rc) goto out;
    if (!e2_is_root() && !e2_is_owner(&in)) { rc = -EPERM; goto out; }
    mode &= 07777;
    if (!e2_is_root() && !e2_in_group(e2_gid(&in))) mode &= ~S_ISGID;
    in.i_mode = (uint16_t)((in.i_mode & LINUX_S_IFMT) | mode);
    e2_touch(&in, false, false, true);
    rc = e2_iput(e, (ext2_ino_t)fd, &in);
out:
    e2_unlock(e);
    return rc;
}

int e2_utimens(struct nasd_fsroot *f, int fd, const struct timespec ts[2])
{
    static const struct timespec both_now[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };
    if (!ts) ts = both_now;
    for (int i = 0; i < 2; i++)
        if (ts[i].tv_nsec != UTIME_NOW && ts[i].tv_nsec != UTIME_OMIT &&
            (ts[i].tv_nsec < 0 || ts[i].tv_nsec >= 1000000000L))
            return -EINVAL;
    struct e2 *e = E2(f);
    struct ext2_inode_large in;
    e2_lock(e);
    int rc = e2_iget(e, fd, &in);
    if (rc) goto out;
    if (ts[0].tv_nsec == UTIME_OMIT && ts[1].tv_nsec == UTIME_OMIT) goto out;   /* nothing, not even ctime */
    bool only_now = (ts[0].tv_nsec == UTIME_NOW || ts[0].tv_nsec == UTIME_OMIT) &&
                    (ts[1].tv_nsec == UTIME_NOW || ts[1].tv_nsec == UTIME_OMIT);
    if (!e2_is_root() && !e2_is_owner(&in)) {
        if (!only_now) { rc = -EPERM; goto out; }
        rc = e2_may(&in, E2_MAY_WRITE);
        if (rc) goto out;
    }
    struct timespec now;
    e2_now(&now);
    const struct timespec *a = ts[0].tv_nsec == UTIME_NOW ? &now : &ts[0];
    const struct timespec *m = ts[1].tv_nsec == UTIME_NOW ? &now : &ts[1];
    if (ts[0].tv_nsec != UTIME_OMIT) e2_set_time(&in.i_atime, &in.i_atime_extra, a);
    if (ts[1].tv_nsec != UTIME_OMIT) e2_set_time(&in.i_mtime, &in.i_mtime_extra, m);
    e2_set_time(&in.i_ctime, &in.i_ctime_extra, &now);
    rc = e2_iput(e, (ext2_ino_t)fd, &in);
out:
    e2_unlock(e);
    return rc;
}
