/* Self-test over NFSv3: libnfs mount of the export, everything confined to a temp
 * directory ".nasd-selftest-<job>" in the export root. nasd creates that directory
 * locally, owned by the uid/gid the server maps our requests to (so root_squash
 * and all_squash exports work), and removes it afterwards. Block patterns use one
 * data file in it; the metadata pattern creates/stats/removes files in it. */
#define _GNU_SOURCE
#include "selftest/engine.h"
#include "util/log.h"
#include "util/stats.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <nfsc/libnfs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NFS_TIMEOUT_MS 15000
#define NFS_FILE_SIZE (64ull << 20)

struct nfs_ctx {
    struct nfs_context *nfs;
    struct nfsfh *fh;
    int closing;
    char err[256];
};

struct nfs_req {
    struct nfs_ctx *c;
    struct st_slot *s;
};

static const char *ctx_err(void *p)
{
    struct nfs_ctx *c = p;
    return c->err[0] ? c->err : nfs_get_error(c->nfs);
}

static int wait_events(void *p, int timeout_ms)
{
    struct nfs_ctx *c = p;
    struct pollfd pfd = { .fd = nfs_get_fd(c->nfs), .events = nfs_which_events(c->nfs) };
    int n = poll(&pfd, 1, timeout_ms);
    if (n < 0 && errno != EINTR) return -1;
    if (nfs_service(c->nfs, n > 0 ? pfd.revents : 0) < 0) return -1;
    return 0;
}

static void io_cb(int err, struct nfs_context *nfs, void *data, void *private_data)
{
    struct nfs_req *q = private_data;
    struct st_slot *s = q->s;
    int closing = q->c->closing, rc = 0;
    if (!closing) {
        if (err < 0) {
            rc = err;
            /* libnfs 4 passes no message in data for failed WRITEs; the context has it (NFS3ERR_*) */
            const char *why = nfs_get_error(nfs);
            snprintf(q->c->err, sizeof q->c->err, "%s", why && *why ? why : strerror(-err));
        } else if ((uint32_t)err != s->len) {
            rc = -EIO; /* short read/write */
        } else if (!s->write) {
            memcpy(s->buf, data, s->len);
        }
    }
    free(q);
    if (!closing) st_slot_done(s, rc);
}

static int submit(void *p, struct st_slot *s)
{
    struct nfs_ctx *c = p;
    struct nfs_req *q = malloc(sizeof *q);
    if (!q) return -ENOMEM;
    q->c = c;
    q->s = s;
    int rc = s->write ? nfs_pwrite_async(c->nfs, c->fh, s->off, s->len, s->buf, io_cb, q)
                      : nfs_pread_async(c->nfs, c->fh, s->off, s->len, io_cb, q);
    if (rc) free(q);
    return rc ? -EIO : 0;
}

static int flush(void *p)
{
    struct nfs_ctx *c = p;
    return nfs_fsync(c->nfs, c->fh);
}

/* --- metadata pattern: per slot create -> stat -> remove, repeat --- */

struct md_slot {
    struct nfs_ctx *c;
    struct st_run *r;
    const char *dir;
    int idx, busy, stage;
    uint64_t n, t0;
    char path[1200];
};

static int md_issue(struct md_slot *m);

static void md_cb(int err, struct nfs_context *nfs, void *data, void *private_data)
{
    struct md_slot *m = private_data;
    if (m->c->closing) return;
    uint64_t lat = nasd_now_ns() - m->t0;
    m->busy = 0;
    st_measure_op(m->r, lat, 0, err >= 0);
    if (err < 0) {
        const char *why = nfs_get_error(nfs);
        snprintf(m->c->err, sizeof m->c->err, "%s", why && *why ? why : data ? (const char *)data : strerror(-err));
        st_note_error(m->r, err, m->c->err);
        m->stage = 0; /* start over with a new name; an orphan is caught by the final listing */
        m->n++;
        return;
    }
    if (m->stage == 0) {
        nfs_close(nfs, data); /* v3 close is local (no dirty pages) */
        m->stage = 1;
    } else if (m->stage == 1) {
        const struct nfs_stat_64 *st = data;
        m->r->verified++;
        if (!S_ISREG(st->nfs_mode) || st->nfs_size != 0)
            st_note_bad(m->r, "%s: stat shows mode %llo size %llu", m->path, (unsigned long long)st->nfs_mode,
                        (unsigned long long)st->nfs_size);
        m->stage = 2;
    } else {
        m->stage = 0;
        m->n++;
    }
}

static int md_issue(struct md_slot *m)
{
    if (m->stage == 0) snprintf(m->path, sizeof m->path, "%s/m%d_%llu", m->dir, m->idx, (unsigned long long)m->n);
    m->t0 = nasd_now_ns();
    int rc = m->stage == 0 ? nfs_create_async(m->c->nfs, m->path, O_EXCL, 0600, md_cb, m)
           : m->stage == 1 ? nfs_stat64_async(m->c->nfs, m->path, md_cb, m)
                           : nfs_unlink_async(m->c->nfs, m->path, md_cb, m);
    if (!rc) m->busy = 1;
    return rc;
}

static int run_metadata(struct st_run *r, struct nfs_ctx *c, const char *dir)
{
    struct md_slot *slots = calloc(r->qd, sizeof *slots);
    if (!slots) { snprintf(r->error, sizeof r->error, "out of memory"); return -1; }
    for (int i = 0; i < r->qd; i++) slots[i] = (struct md_slot){ .c = c, .r = r, .dir = dir, .idx = i };
    st_set_progress(r, 0.1);
    st_measure_start(r);
    uint64_t deadline = r->run_start_ns + (uint64_t)r->seconds * 1000000000ull;
    int rc = 0, inflight;
    /* a file that was created finishes its stat and remove even after the deadline */
    do {
        int issuing = nasd_now_ns() < deadline && !st_cancelled(r) && !rc;
        inflight = 0;
        for (int i = 0; i < r->qd; i++) {
            struct md_slot *m = &slots[i];
            if (!m->busy && (issuing || m->stage != 0) && !rc && md_issue(m)) {
                snprintf(r->error, sizeof r->error, "cannot queue an NFS request: %s", nfs_get_error(c->nfs));
                rc = -1;
            }
            inflight += m->busy;
        }
        if (!inflight) break;
        if (wait_events(c, 100) < 0) {
            snprintf(r->error, sizeof r->error, "connection lost: %s", nfs_get_error(c->nfs));
            rc = -1;
            break;
        }
        st_measure_tick(r, nasd_now_ns());
    } while (1);
    st_measure_end(r);
    if (!rc && st_cancelled(r)) { snprintf(r->error, sizeof r->error, "cancelled"); rc = -1; }
    if (!rc && !r->ops) { snprintf(r->error, sizeof r->error, "no request succeeded: %s", c->err); rc = -1; }
    c->closing = rc != 0; /* slots are freed below */
    free(slots);
    if (rc) return rc;
    /* everything created was removed: the directory must be empty again */
    struct nfsdir *d = NULL;
    if (nfs_opendir(c->nfs, dir, &d)) {
        snprintf(r->error, sizeof r->error, "listing %s: %s", dir, nfs_get_error(c->nfs));
        return -1;
    }
    struct nfsdirent *e;
    while ((e = nfs_readdir(c->nfs, d)))
        if (strcmp(e->name, ".") && strcmp(e->name, "..")) st_note_bad(r, "leftover file %s/%s", dir, e->name);
    nfs_closedir(c->nfs, d);
    st_set_progress(r, 1.0);
    return 0;
}

/* --- temp directory, created and removed in the dataset through its file backend --- */

static int local_tmpdir(struct st_run *r, const char *name)
{
    struct nasd_fsroot *fs = r->tgt.fs;
    nasd_vfs_set_cred(NULL);
    int rc = fs->vfs->mkdirat(fs, fs->root_fd, name, 0700);
    int fd = rc < 0 ? rc : fs->vfs->openat(fs, fs->root_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
    if (fd >= 0) {
        rc = fs->vfs->chown(fs, fd, r->tgt.uid, r->tgt.gid);
        fs->vfs->close(fs, fd);
    } else {
        rc = fd;
    }
    if (rc < 0) snprintf(r->error, sizeof r->error, "creating %s in %s: %s", name, fs->name, strerror(-rc));
    return rc < 0 ? -1 : 0;
}

struct name_list { char (*names)[256]; size_t n, cap; };

static int collect_name(void *arg, const char *name, uint64_t ino, unsigned char d_type, uint64_t next)
{
    struct name_list *l = arg;
    if (!strcmp(name, ".") || !strcmp(name, "..")) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        void *nn = realloc(l->names, cap * sizeof *l->names);
        if (!nn) return 1;
        l->names = nn;
        l->cap = cap;
    }
    snprintf(l->names[l->n++], sizeof l->names[0], "%s", name);
    return 0;
}

static void local_cleanup(struct nasd_fsroot *fs, const char *name)
{
    nasd_vfs_set_cred(NULL);
    int dfd = fs->vfs->openat(fs, fs->root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (dfd >= 0) {
        struct name_list l = { 0 };
        fs->vfs->readdir(fs, dfd, 0, collect_name, &l);
        for (size_t i = 0; i < l.n; i++) fs->vfs->unlinkat(fs, dfd, l.names[i], 0);
        free(l.names);
        fs->vfs->close(fs, dfd);
    }
    int rc = fs->vfs->unlinkat(fs, fs->root_fd, name, AT_REMOVEDIR);
    if (rc < 0 && rc != -ENOENT) log_warn("self-test: cannot remove %s: %s", name, strerror(-rc));
}

static int mount_export(struct st_run *r, struct nfs_ctx *c)
{
    char url[1400];
    snprintf(url, sizeof url, "nfs://%s%s?version=3&nfsport=%d&mountport=%d", r->tgt.server, r->tgt.export_path,
             r->tgt.nfs_port, r->tgt.mount_port);
    struct nfs_url *u = nfs_parse_url_dir(c->nfs, url);
    if (!u) {
        snprintf(r->error, sizeof r->error, "bad NFS URL %s: %s", url, nfs_get_error(c->nfs));
        return -1;
    }
    int rc = nfs_mount(c->nfs, u->server, u->path);
    if (rc) snprintf(r->error, sizeof r->error, "mount %s failed: %s", url, nfs_get_error(c->nfs));
    else log_info("self-test %lld: mounted %s", (long long)r->job_id, url);
    nfs_destroy_url(u);
    return rc ? -1 : 0;
}

int st_run_nfs(struct st_run *r)
{
    char name[64], dir[128], file[160];
    snprintf(name, sizeof name, ".nasd-selftest-%lld", (long long)r->job_id);
    snprintf(dir, sizeof dir, "/%s", name);
    snprintf(file, sizeof file, "%s/data", dir);
    int made = 0, rc = -1;
    struct nfs_ctx c = { 0 };
    if (local_tmpdir(r, name)) goto out;
    made = 1;
    c.nfs = nfs_init_context();
    if (!c.nfs) { snprintf(r->error, sizeof r->error, "cannot create an NFS context"); goto out; }
    /* AUTH_SYS as root: the export's squashing maps us to the temp directory's owner */
    nfs_set_uid(c.nfs, 0);
    nfs_set_gid(c.nfs, 0);
    nfs_set_timeout(c.nfs, NFS_TIMEOUT_MS);
    nfs_set_autoreconnect(c.nfs, 0);
    nfs_set_dircache(c.nfs, 0);
    if (mount_export(r, &c)) goto out;
    if (r->pattern == ST_METADATA) {
        rc = run_metadata(r, &c, dir);
    } else {
        if (nfs_create(c.nfs, file, O_RDWR | O_EXCL, 0600, &c.fh)) {
            snprintf(r->error, sizeof r->error, "creating %s: %s", file, nfs_get_error(c.nfs));
            goto out;
        }
        struct st_io io = { .ctx = &c, .granularity = 1, .size = NFS_FILE_SIZE, .submit = submit,
                            .wait = wait_events, .flush = flush, .errmsg = ctx_err };
        rc = st_run_blocks(r, &io);
        c.closing = 1;
        nfs_close(c.nfs, c.fh);
        if (nfs_unlink(c.nfs, file) && !rc) {
            snprintf(r->error, sizeof r->error, "removing %s: %s", file, nfs_get_error(c.nfs));
            rc = -1;
        }
    }
    c.closing = 1;
    nfs_umount(c.nfs);
out:
    if (c.nfs) nfs_destroy_context(c.nfs);
    if (made) local_cleanup(r->tgt.fs, name);
    return rc;
}
