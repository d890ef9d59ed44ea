/* Per-thread credentials for storage/vfs.h backends that check permissions in
 * userspace. The posix backend ignores them (the kernel checks fsuid/fsgid/groups). */
#include "storage/vfs.h"

static const struct nasd_vfs_cred root_cred;   /* uid 0, gid 0, no groups */
static _Thread_local struct nasd_vfs_cred thread_cred;
static _Thread_local int thread_cred_set;

void nasd_vfs_set_cred(const struct nasd_vfs_cred *c)
{
    if (!c) { thread_cred_set = 0; return; }
    thread_cred = *c;
    if (thread_cred.ngroups > NASD_VFS_MAX_GROUPS) thread_cred.ngroups = NASD_VFS_MAX_GROUPS;
    thread_cred_set = 1;
}

const struct nasd_vfs_cred *nasd_vfs_get_cred(void)
{
    return thread_cred_set ? &thread_cred : &root_cred;
}
