/* Storage manager: each pool is a vpool over its member disks; volumes live in the
 * pool; datasets are directories under <state>/pools/<name>/datasets/. */
#define _GNU_SOURCE
#include "storage/manager/storage_impl.h"
#include "storage/manager/member_probe.h"
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_owner.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIN_MEMBER (64ull << 20)

/* what every pool the manager creates, opens or imports gets from the daemon's settings */
static struct vpool_opts pool_opts(const struct storage *st)
{
    return (struct vpool_opts){ .cache_bytes = st->cache_bytes, .dirty_bytes = st->dirty_bytes };
}

struct storage *storage_new(const char *state_dir, uint64_t cache_bytes, uint64_t dirty_bytes)
{
    struct storage *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    snprintf(st->state_dir, sizeof st->state_dir, "%s", state_dir);
    st->cache_bytes = cache_bytes;
    st->dirty_bytes = dirty_bytes;
    pthread_mutex_init(&st->lock, NULL);
    pthread_condattr_t ca;   /* destroy's waits: not longer or shorter when the wall clock jumps */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&st->pool_cv, &ca);
    pthread_condattr_destroy(&ca);
    heartbeat_start(st);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/pools", state_dir);
    mkdir(state_dir, 0755);
    mkdir(p, 0755);
    return st;
}

/* Waits (storage.lock held) at most secs seconds until no more than own references (the
 * caller's) use p; whether that happened. */
static bool refs_drain(struct storage *st, struct pool *p, int own, int secs)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += secs;
    while (p->refs > own && pthread_cond_timedwait(&st->pool_cv, &st->lock, &dl) != ETIMEDOUT) {}
    return p->refs <= own;
}

void storage_free(struct storage *st)
{
    if (!st) return;
    heartbeat_stop(st);
    bool left = false;
    while (st->pools) {
        struct pool *p = st->pools;
        st->pools = p->next;
        pthread_mutex_lock(&st->lock);
        p->closing = 1;
        bool idle = refs_drain(st, p, 0, 5);
        pthread_mutex_unlock(&st->lock);
        if (!idle) {   /* a call that outlived the shutdown's own waits (a stuck send) */
            log_warn("pool %s: still in use at shutdown; left open, to be recovered at the next import as after a crash",
                     p->name);
            left = true;
            continue;
        }
        datasets_close_all(p);         /* commits their filesystems */
        if (p->vp) {
            vpool_close(p->vp);        /* flushes buffered writes */
            pool_owner_mark(p, VPOOL_OWNER_EXPORTED);
        }
        members_unlock(p->lock_fd, VPOOL_MAX_MEMBERS);
        ceph_pool_close(p->ceph);
        free(p);
    }
    if (left) return;   /* that call still drops its reference here */
    pthread_mutex_destroy(&st->lock);
    pthread_cond_destroy(&st->pool_cv);
    free(st);
}

static struct pool *lookup_locked(struct storage *st, const char *name)
{
    struct pool *p = st->pools;
    while (p && strcmp(p->name, name)) p = p->next;
    return p;
}

struct pool *find_pool(struct storage *st, const char *name)
{
    pthread_mutex_lock(&st->lock);
    struct pool *p = lookup_locked(st, name);
    pthread_mutex_unlock(&st->lock);
    return p;
}

struct pool *pool_hold(struct storage *st, struct pool_ref *r, const char *name)
{
    if (r->p) return r->p;
    pthread_mutex_lock(&st->lock);
    struct pool *p = lookup_locked(st, name);
    if (p && p->closing) p = NULL;
    if (p) {
        p->refs++;
        *r = (struct pool_ref){ st, p };
    }
    pthread_mutex_unlock(&st->lock);
    return p;
}

void pool_ref_drop(struct pool_ref *r)
{
    if (!r->p) return;
    pthread_mutex_lock(&r->st->lock);
    if (--r->p->refs == 0 || r->p->closing) pthread_cond_broadcast(&r->st->pool_cv);
    pthread_mutex_unlock(&r->st->lock);
    r->p = NULL;
}

struct vpool *engine(struct storage *st, struct pool_ref *r, const char *name, char *err, size_t errlen)
{
    struct pool *p = pool_hold(st, r, name);
    if (!p) { snprintf(err, errlen, "pool %s not found", name); return NULL; }
    if (p->is_ceph) { snprintf(err, errlen, "pool %s is on a Ceph cluster: this is for local pools only", name); return NULL; }
    if (!p->vp) snprintf(err, errlen, "pool %s is not available: %s", name, p->import_error);
    return p->vp;
}

void pool_dir(struct storage *st, const char *pool, const char *sub, const char *name,
                     char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/pools/%s%s%s%s%s", st->state_dir, pool, sub ? "/" : "", sub ? sub : "",
             name ? "/" : "", name ? name : "");
}

/* fds: the member locks taken for the paths given by the caller (lock_paths, in any order);
 * they move into the pool, matched to its members by path, the rest are released. */
static struct pool *add_pool(struct storage *st, const char *name, struct vpool *vp, const char *const *paths, int n,
                             const char *const *lock_paths, int *fds, int nfds)
{
    struct pool *p = calloc(1, sizeof *p);
    if (!p) { members_unlock(fds, nfds); return NULL; }
    snprintf(p->name, sizeof p->name, "%s", name);
    p->vp = vp;
    p->nmembers = n;
    for (int i = 0; i < VPOOL_MAX_MEMBERS; i++) p->lock_fd[i] = -1;
    for (int i = 0; i < n && i < VPOOL_MAX_MEMBERS; i++) snprintf(p->members[i], sizeof p->members[i], "%s", paths[i]);
    for (int j = 0; vp && j < nfds; j++)
        for (int i = 0; fds[j] >= 0 && i < n && i < VPOOL_MAX_MEMBERS; i++)
            if (p->lock_fd[i] < 0 && !strcmp(paths[i], lock_paths[j])) { p->lock_fd[i] = fds[j]; fds[j] = -1; }
    members_unlock(fds, nfds);   /* unavailable pools and stale duplicates hold nothing */
    if (vp) {
        struct vpool_status s;
        vpool_get_status(vp, &s);
        memcpy(p->uuid, s.uuid, 16);
        pool_owner_mark(p, VPOOL_OWNER_ACTIVE);
    }
    char d[PATH_MAX];
    pool_dir(st, name, NULL, NULL, d, sizeof d);
    mkdir(d, 0755);
    pool_dir(st, name, "datasets", NULL, d, sizeof d);
    mkdir(d, 0755);
    pthread_mutex_lock(&st->lock);
    p->next = st->pools;
    st->pools = p;
    pthread_mutex_unlock(&st->lock);
    return p;
}

const char *storage_layout_canonical(const char *layout)
{
    const struct vpool_layout_spec *f = vpool_layout_find(layout);
    return f ? f->name : NULL;
}

int storage_pool_create(struct storage *st, const char *name, const char *layout,
                        const struct storage_member *m, int n, char *err, size_t errlen)
{
    if (find_pool(st, name)) { snprintf(err, errlen, "pool %s exists", name); return -EEXIST; }
    const struct vpool_layout_spec *f = vpool_layout_find(layout);
    if (!f) { snprintf(err, errlen, "%s", STORAGE_LAYOUT_HELP); return -EINVAL; }
    enum vpool_layout l = f->layout;
    int log = f->log;
    int need = l == VPOOL_STRIPE ? 1 : l == VPOOL_MIRROR ? 2 : 3;
    if (n < need || n > VPOOL_MAX_MEMBERS) {
        snprintf(err, errlen, "layout %s needs %d..%d member disks", layout, need, VPOOL_MAX_MEMBERS);
        return -EINVAL;
    }
    struct vpool_member_spec spec[VPOOL_MAX_MEMBERS];
    const char *paths[VPOOL_MAX_MEMBERS];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            if (!strcmp(m[i].path, m[j].path)) { snprintf(err, errlen, "member %s listed twice", m[i].path); return -EINVAL; }
        struct stat s;
        int exists = stat(m[i].path, &s) == 0;
        if (m[i].create && exists) { snprintf(err, errlen, "member %s already exists (omit \"create\" to use it)", m[i].path); return -EEXIST; }
        if (m[i].create && m[i].size < MIN_MEMBER) { snprintf(err, errlen, "member %s: size must be at least 64M", m[i].path); return -EINVAL; }
        if (!m[i].create && !exists) { snprintf(err, errlen, "member %s does not exist (set \"create\": true and a size)", m[i].path); return -ENOENT; }
        if (!m[i].create && !S_ISREG(s.st_mode) && !S_ISBLK(s.st_mode)) { snprintf(err, errlen, "member %s is not a file or block device", m[i].path); return -EINVAL; }
        if (!m[i].create && S_ISREG(s.st_mode) && (uint64_t)s.st_size < MIN_MEMBER) { snprintf(err, errlen, "member %s is smaller than 64M", m[i].path); return -EINVAL; }
        spec[i].path = paths[i] = m[i].path;
        spec[i].create_size = m[i].create ? m[i].size : 0;
        spec[i].wipe = m[i].wipe && !m[i].create ? member_wipe : NULL;
    }
    int fds[VPOOL_MAX_MEMBERS], create[VPOOL_MAX_MEMBERS];
    for (int i = 0; i < n; i++) create[i] = m[i].create;
    int rc = members_lock(paths, create, n, 1, fds, err, errlen);
    if (rc) {
        for (int i = 0; i < n; i++) if (m[i].create) unlink(m[i].path);
        return rc;
    }
    struct vpool_opts o = pool_opts(st);
    o.log = log;
    struct vpool *vp;
    rc = vpool_create(name, l, spec, n, &o, &vp, err, errlen);
    if (rc) {
        members_unlock(fds, n);
        for (int i = 0; i < n; i++) if (m[i].create) unlink(m[i].path);
        return rc;
    }
    if (!add_pool(st, name, vp, paths, n, paths, fds, n)) { vpool_destroy(vp); return -ENOMEM; }
    return 0;
}

int storage_pool_open(struct storage *st, const char *name, const char *layout,
                      const struct storage_member *m, int n, char *err, size_t errlen)
{
    const char *paths[VPOOL_MAX_MEMBERS];
    for (int i = 0; i < n && i < VPOOL_MAX_MEMBERS; i++) paths[i] = m[i].path;
    struct vpool_opts o = pool_opts(st);
    struct vpool *vp = NULL;
    int fds[VPOOL_MAX_MEMBERS];
    int rc = members_lock(paths, NULL, n, 0, fds, err, errlen);   /* restore: locks only */
    if (!rc) rc = members_check_owner(paths, n, err, errlen);
    if (!rc) rc = vpool_import(paths, n, &o, &vp, err, errlen);
    if (rc) members_unlock(fds, n);
    /* kept even if unavailable, to show it */
    struct pool *p = add_pool(st, name, rc ? NULL : vp, paths, n, paths, fds, n);
    if (p && rc) snprintf(p->import_error, sizeof p->import_error, "%s", err);
    return rc;
}

int storage_pool_import(struct storage *st, const char *name, const char *const *paths, int n,
                        const char **layout, char *err, size_t errlen)
{
    return storage_pool_import_force(st, name, paths, n, 0, layout, err, errlen);
}

/* The open pool whose UUID a member's label carries (a copy of its disks), else NULL. */
static struct pool *open_pool_of_members(struct storage *st, const char *const *paths, int n)
{
    struct pool *hit = NULL;
    for (int i = 0; i < n && !hit; i++) {
        struct vpool_peek pk;
        if (vpool_peek(paths[i], &pk) || !pk.has_label) continue;
        pthread_mutex_lock(&st->lock);
        for (struct pool *p = st->pools; p && !hit; p = p->next) {
            struct vpool_status s;
            if (!p->vp) continue;
            vpool_get_status(p->vp, &s);
            if (!memcmp(s.uuid, pk.uuid, sizeof s.uuid)) hit = p;
        }
        pthread_mutex_unlock(&st->lock);
    }
    return hit;
}

int storage_pool_import_force(struct storage *st, const char *name, const char *const *paths, int n, int force,
                              const char **layout, char *err, size_t errlen)
{
    if (find_pool(st, name)) { snprintf(err, errlen, "pool %s exists", name); return -EEXIST; }
    if (n < 1 || n > VPOOL_MAX_MEMBERS) { snprintf(err, errlen, "1..%d member paths", VPOOL_MAX_MEMBERS); return -EINVAL; }
    struct vpool_opts o = pool_opts(st);
    struct vpool *vp;
    int fds[VPOOL_MAX_MEMBERS];
    /* another host's heartbeat first: what tells the user the pool is live elsewhere */
    int rc = force ? 0 : members_check_owner(paths, n, err, errlen);
    if (rc) return rc;
    /* a copy of an open pool's disks (dd, a snapshot of the VM disk) carries its volume
     * identities: exported beside it, a multipath initiator would take the two as one */
    struct pool *twin = open_pool_of_members(st, paths, n);
    if (twin) {
        snprintf(err, errlen, "these disks carry the identity of pool %s, which is open here: a copy of it cannot be "
                 "imported beside it", twin->name);
        return -EEXIST;
    }
    rc = members_lock(paths, NULL, n, 1, fds, err, errlen);
    if (!rc) rc = vpool_import(paths, n, &o, &vp, err, errlen);
    if (rc) { members_unlock(fds, n); return rc; }
    struct vpool_status s;
    vpool_get_status(vp, &s);
    *layout = vpool_layout_label(s.layout, s.log);
    const char *ordered[VPOOL_MAX_MEMBERS];
    for (int i = 0; i < s.nmembers; i++) ordered[i] = s.members[i].path; /* label order, not argument order */
    if (!add_pool(st, name, vp, ordered, s.nmembers, paths, fds, n)) { vpool_close(vp); return -ENOMEM; }
    return 0;
}

int rm_tree(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return unlinkat(dirfd, name, 0) == 0 || errno == ENOENT ? 0 : -errno;
    DIR *d = fdopendir(fd);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        rm_tree(fd, e->d_name);
    }
    if (d) closedir(d); else close(fd);
    return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 ? 0 : -errno;
}

/* A destroy that deleted nothing: the pool serves again. */
static void destroy_undone(struct storage *st, struct pool *p)
{
    pthread_mutex_lock(&st->lock);
    p->hb_off = 0;
    p->closing = 0;
    pthread_mutex_unlock(&st->lock);
}

int storage_pool_destroy(struct storage *st, const char *name, char *err, size_t errlen)
{
    POOL_REF(r);
    struct pool *p = pool_hold(st, &r, name);
    if (!p) { snprintf(err, errlen, "pool %s not found", name); return -ENOENT; }
    /* no new storage call on it (a snapshot task, a send, a self-test opening a dataset),
     * and none still running */
    pthread_mutex_lock(&st->lock);
    p->closing = 1;
    bool idle = refs_drain(st, p, 1, 2);
    pthread_mutex_unlock(&st->lock);
    int rc = idle ? datasets_busy(st, p, NULL, err, errlen) : -EBUSY;
    if (!idle) snprintf(err, errlen, "pool %s is in use (a snapshot task or a send is running); nothing was deleted", name);
    if (rc) {
        destroy_undone(st, p);
        return rc;
    }
    pthread_mutex_lock(&st->lock);
    datasets_close_all(p);   /* only the storage's references: reopened on demand if the destroy fails */
    p->hb_off = 1;           /* no heartbeat may overwrite the "destroyed" mark below */
    pthread_mutex_unlock(&st->lock);
    if (p->ceph) {
        json_t *v = ceph_pool_list(p->ceph, 0), *d = ceph_pool_list(p->ceph, 1);
        if (!json_array_size(v) && !json_array_size(d)) ceph_pool_forget(p->ceph); /* no gateway needs it */
        json_decref(v);
        json_decref(d);
        ceph_pool_close(p->ceph);
    }
    if (p->vp) {
        rc = vpool_destroy(p->vp);
        for (int i = 0; rc == -EBUSY && i < 100; i++) {  /* iSCSI commands of a just-removed export */
            usleep(20000);
            rc = vpool_destroy(p->vp);
        }
        if (rc) {
            destroy_undone(st, p);
            snprintf(err, errlen, "pool %s: %s; nothing was deleted", name,
                     rc == -EBUSY ? "a volume is still open (an iSCSI export?)" : strerror(-rc));
            return rc;
        }
        /* a later pool create may reuse these without "force": their data was given up here */
        for (int i = 0; i < p->nmembers; i++) vpool_mark_destroyed(p->members[i]);
    }
    members_unlock(p->lock_fd, VPOOL_MAX_MEMBERS);
    pthread_mutex_lock(&st->lock);
    struct pool **pp = &st->pools;
    while (*pp != p) pp = &(*pp)->next;
    *pp = p->next;
    pthread_mutex_unlock(&st->lock);
    r.p = NULL;   /* freed below: nothing to drop */
    char d[PATH_MAX];
    pool_dir(st, name, NULL, NULL, d, sizeof d);
    rm_tree(AT_FDCWD, d);
    free(p);
    return 0;
}

json_t *storage_pool_status(struct storage *st, const char *name)
{
    POOL_REF(r);
    struct pool *p = pool_hold(st, &r, name);
    if (!p) return NULL;
    if (p->is_ceph) {
        char err[256];
        int is_ceph;
        struct ceph_pool *cp = ceph_of(st, &r, name, &is_ceph, err, sizeof err);
        if (cp) return ceph_pool_status(cp);
        return json_pack("{s:s, s:s, s:I, s:I, s:I, s:[]}", "state", "FAULTED", "error", p->import_error,
                         "size", (json_int_t)0, "allocated", (json_int_t)0, "free", (json_int_t)0, "members");
    }
    json_t *members = json_array();
    if (!p->vp) {
        for (int i = 0; i < p->nmembers; i++)
            json_array_append_new(members, json_pack("{s:s, s:s}", "path", p->members[i], "state", "UNAVAILABLE"));
        return json_pack("{s:s, s:s, s:I, s:I, s:I, s:o}", "state", "FAULTED", "error", p->import_error,
                         "size", (json_int_t)0, "allocated", (json_int_t)0, "free", (json_int_t)0, "members", members);
    }
    struct vpool_status s;
    vpool_get_status(p->vp, &s);
    for (int i = 0; i < s.nmembers; i++) {
        struct vpool_member_status *m = &s.members[i];
        json_array_append_new(members, json_pack("{s:i, s:s, s:I, s:s, s:I, s:I, s:I}", "index", i, "path", m->path,
            "size", (json_int_t)m->size, "state", vpool_member_state_name(m->state),
            "read_errors", (json_int_t)m->read_errors, "write_errors", (json_int_t)m->write_errors,
            "checksum_errors", (json_int_t)m->checksum_errors));
    }
    return json_pack("{s:s, s:I, s:I, s:I, s:o, s:{s:b, s:f, s:I, s:I, s:I, s:I}, s:{s:b, s:f, s:I, s:I}, s:I, s:I, s:I}",
        "state", vpool_state_name(s.state), "size", (json_int_t)s.size, "allocated", (json_int_t)s.allocated,
        "free", (json_int_t)s.free, "members", members,
        "scrub", "running", s.scrub_running, "progress", s.scrub_progress, "repaired", (json_int_t)s.scrub_repaired,
        "unrepairable", (json_int_t)s.scrub_unrepairable, "started", (json_int_t)s.scrub_started,
        "finished", (json_int_t)s.scrub_finished,
        "resilver", "running", s.resilver_running, "progress", s.resilver_progress, "rows", (json_int_t)s.resilver_rows,
        "rebuilt_bytes", (json_int_t)s.resilver_bytes,
        "repaired", (json_int_t)s.repaired, "unrepairable", (json_int_t)s.unrepairable,
        "dirty_bytes", (json_int_t)s.dirty);   /* written, not yet committed (no flush asked for it) */
}

int storage_pool_scrub(struct storage *st, const char *name, char *err, size_t errlen)
{
    POOL_REF(r);
    struct vpool *vp = engine(st, &r, name, err, errlen);
    if (!vp) return -ENOENT;
    int rc = vpool_scrub_start(vp);
    if (rc == -EBUSY) snprintf(err, errlen, "a scrub or resilver is already running on %s", name);
    else if (rc) snprintf(err, errlen, "scrub %s: %s", name, strerror(-rc));
    return rc;
}

int storage_pool_clear(struct storage *st, const char *name, char *err, size_t errlen)
{
    POOL_REF(r);
    struct vpool *vp = engine(st, &r, name, err, errlen);
    if (!vp) return -ENOENT;
    int rc = vpool_clear(vp);
    if (rc == -EBUSY) snprintf(err, errlen, "a scrub or resilver is running on %s", name);
    else if (rc) snprintf(err, errlen, "clear %s: %s", name, strerror(-rc));
    return rc;
}

int storage_pool_member(struct storage *st, const char *name, const char *op, int idx, const char *new_path,
                        uint64_t create_size, int wipe, char *err, size_t errlen)
{
    POOL_REF(r);
    struct pool *p = pool_hold(st, &r, name);
    struct vpool *vp = engine(st, &r, name, err, errlen);
    if (!vp) return -ENOENT;
    if (idx < 0 || idx >= p->nmembers) { snprintf(err, errlen, "member index %d out of range 0..%d", idx, p->nmembers - 1); return -EINVAL; }
    int rc;
    if (!strcmp(op, "offline")) rc = vpool_member_offline(vp, idx);
    else if (!strcmp(op, "online")) rc = vpool_member_online(vp, idx);
    else if (!strcmp(op, "replace")) {
        struct stat s;
        if (create_size && stat(new_path, &s) == 0) { snprintf(err, errlen, "%s already exists", new_path); return -EEXIST; }
        if (!create_size && stat(new_path, &s) != 0) { snprintf(err, errlen, "%s does not exist", new_path); return -ENOENT; }
        int fd, cr = create_size > 0;
        rc = members_lock(&new_path, &cr, 1, 1, &fd, err, errlen);
        if (rc) return rc;
        rc = vpool_member_replace(vp, idx, new_path, create_size, wipe ? member_wipe : NULL);
        pthread_mutex_lock(&st->lock);
        if (!rc) {
            snprintf(p->members[idx], sizeof p->members[idx], "%s", new_path);
            members_unlock(&p->lock_fd[idx], 1);   /* the old disk is free now */
            p->lock_fd[idx] = fd;
        } else {
            members_unlock(&fd, 1);
        }
        pthread_mutex_unlock(&st->lock);
    } else {
        snprintf(err, errlen, "unknown member operation %s", op);
        return -EINVAL;
    }
    if (rc) snprintf(err, errlen, "%s member %d of %s: %s", op, idx, name,
                     rc == -EBUSY ? "would leave the pool without redundancy, or a resilver runs" : strerror(-rc));
    return rc;
}

/* [{"name","size"}] of the volumes recorded in the pool itself; datasets (true) or
 * block volumes (false). */
json_t *volume_list(struct vpool *vp, int datasets)
{
    char (*names)[64] = malloc(VP_LIST_MAX * sizeof *names);
    uint64_t *sizes = malloc(VP_LIST_MAX * sizeof *sizes);
    json_t *out = json_array();
    int n = names && sizes ? vpool_vol_list(vp, names, sizes, VP_LIST_MAX) : 0;
    for (int i = 0; i < n; i++) {
        if (is_dataset_volume(names[i]) != !!datasets) continue;
        int flags = vpool_vol_flags(vp, names[i]);
        json_array_append_new(out, json_pack("{s:s, s:I, s:b}", "name", names[i] + (datasets ? 1 : 0),
                                             "size", (json_int_t)sizes[i], "lz4", flags > 0 && (flags & VPOOL_VOL_LZ4)));
    }
    free(names);
    free(sizes);
    return out;
}

json_t *storage_pool_volumes(struct storage *st, const char *name)
{
    POOL_REF(r);
    char err[256];
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, name, &is_ceph, err, sizeof err);
    if (is_ceph) return cp ? ceph_pool_list(cp, 0) : NULL;
    struct vpool *vp = engine(st, &r, name, err, sizeof err);
    return vp ? volume_list(vp, 0) : NULL;
}

/* Volumes are allocated thinly but reserved thickly: the sum of volume sizes (plus
 * what datasets hold) may not exceed the pool, so a full pool never fails a write
 * the initiator was promised (the engine keeps datasets out of the unwritten rest). */
uint64_t unreserved(struct vpool *vp, const char *skip)
{
    struct vpool_status s;
    vpool_get_status(vp, &s);
    json_t *vols = volume_list(vp, 0), *v;
    uint64_t reserved = 0;
    size_t i;
    json_array_foreach(vols, i, v) {
        if (!skip || strcmp(json_string_value(json_object_get(v, "name")), skip))
            reserved += (uint64_t)json_integer_value(json_object_get(v, "size"));
    }
    json_decref(vols);
    /* datasets are thin and share the pool: what they hold now is not available */
    vols = volume_list(vp, 1);
    json_array_foreach(vols, i, v) {
        char vol[80];
        snprintf(vol, sizeof vol, ".%s", json_string_value(json_object_get(v, "name")));
        reserved += vol_allocated(vp, vol);
    }
    json_decref(vols);
    return s.size > reserved ? s.size - reserved : 0;
}

static int reserve(struct vpool *vp, const char *pool, const char *skip, uint64_t size, char *err, size_t errlen)
{
    uint64_t left = unreserved(vp, skip);
    if (size <= left) return 0;
    snprintf(err, errlen, "pool %s has %llu bytes unreserved, %llu requested", pool, (unsigned long long)left,
             (unsigned long long)size);
    return -ENOSPC;
}

int storage_volume_create(struct storage *st, const char *pool, const char *name, uint64_t size, int lz4,
                          char *err, size_t errlen)
{
    POOL_REF(r);
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, pool, &is_ceph, err, errlen);
    if (is_ceph) return !cp ? -ENXIO : lz4 ? (snprintf(err, errlen, "ceph pools do not compress (lz4)"), -EINVAL)
                                           : ceph_volume_create(cp, name, size, err, errlen);
    struct vpool *vp = engine(st, &r, pool, err, errlen);
    if (!vp) return -ENOENT;
    *err = 0;
    int rc = reserve(vp, pool, NULL, size, err, errlen);
    if (!rc) rc = vpool_vol_create(vp, name, size, lz4 ? VPOOL_VOL_LZ4 : 0);
    if (rc == -ENOSPC) {
        if (!*err) snprintf(err, errlen, "pool %s is full", pool);
    } else if (rc) {
        snprintf(err, errlen, "volume %s/%s: %s", pool, name, strerror(-rc));
    }
    return rc;
}

int storage_volume_resize(struct storage *st, const char *pool, const char *name, uint64_t size,
                          char *err, size_t errlen)
{
    POOL_REF(r);
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, pool, &is_ceph, err, errlen);
    if (is_ceph) return cp ? ceph_volume_resize(cp, name, size, err, errlen) : -ENXIO;
    struct vpool *vp = engine(st, &r, pool, err, errlen);
    if (!vp) return -ENOENT;
    int rc = reserve(vp, pool, name, size, err, errlen);
    if (rc) return rc;
    rc = vpool_vol_resize(vp, name, size);
    if (rc) snprintf(err, errlen, "resize %s/%s: %s", pool, name, rc == -ENOSPC ? "not enough free space" : strerror(-rc));
    return rc;
}

int storage_volume_destroy(struct storage *st, const char *pool, const char *name, char *err, size_t errlen)
{
    POOL_REF(r);
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, pool, &is_ceph, err, errlen);
    if (is_ceph) return cp ? ceph_volume_destroy(cp, name, err, errlen) : -ENXIO;
    struct vpool *vp = engine(st, &r, pool, err, errlen);
    if (!vp) return -ENOENT;
    int rc = vpool_vol_destroy(vp, name);
    /* a just-removed export may still be finishing in-flight commands */
    for (int i = 0; rc == -EBUSY && i < 50; i++) {
        usleep(20000);
        rc = vpool_vol_destroy(vp, name);
    }
    if (rc == -ENOENT) rc = 0;
    if (rc) snprintf(err, errlen, "volume %s/%s: %s", pool, name, rc == -EBUSY ? "still in use" : strerror(-rc));
    return rc;
}

nasd_bdev *storage_volume_open(struct storage *st, const char *pool, const char *name,
                               uint32_t block_size, int *errp)
{
    POOL_REF(r);
    char err[256];
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, pool, &is_ceph, err, sizeof err);
    if (is_ceph) {
        if (cp) return ceph_volume_open(cp, name, block_size, errp);
        *errp = -ENXIO;
        return NULL;
    }
    struct vpool *vp = engine(st, &r, pool, err, sizeof err);
    if (!vp) { *errp = -ENOENT; return NULL; }
    return vpool_vol_open(vp, name, block_size, errp);
}

uint64_t vol_allocated(struct vpool *vp, const char *vol)
{
    int e;
    nasd_bdev *b = vpool_vol_open(vp, vol, 4096, &e);
    if (!b) return 0;
    uint64_t used = 0, off = 0;
    while (off < b->size && b->ops->mapped) {
        int mapped;
        uint64_t run = 0;
        if (b->ops->mapped(b, off, b->size - off, &mapped, &run) || !run) break;
        if (mapped) used += run;
        off += run;
    }
    nasd_bdev_put(b);
    return used;
}

uint64_t storage_volume_used(struct storage *st, const char *pool, const char *name)
{
    POOL_REF(r);
    char err[256];
    int is_ceph;
    struct ceph_pool *cp = ceph_of(st, &r, pool, &is_ceph, err, sizeof err);
    if (is_ceph) return cp ? ceph_volume_used(cp, name) : 0;
    struct vpool *vp = engine(st, &r, pool, err, sizeof err);
    return vp ? vol_allocated(vp, name) : 0;
}
