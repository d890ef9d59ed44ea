/* Export table (live add/replace/remove), client network checks and the
 * per-export cache of open fds resolved from file handles. */
#define _GNU_SOURCE
#include "nfs/internal.h"
#include "util/log.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int nfs_parse_client_net(const char *s, struct nfs_client_net *out)
{
    char buf[128];
    if (!s || strlen(s) >= sizeof buf) return -EINVAL;
    snprintf(buf, sizeof buf, "%s", s);
    memset(out, 0, sizeof *out);
    char *slash = strchr(buf, '/');
    int prefix = -1;
    if (slash) {
        *slash = 0;
        char *end;
        long p = strtol(slash + 1, &end, 10);
        if (!slash[1] || *end || p < 0) return -EINVAL;
        prefix = (int)p;
    }
    if (inet_pton(AF_INET, buf, out->addr) == 1) {
        out->family = AF_INET;
        if (prefix < 0) prefix = 32;
        if (prefix > 32) return -EINVAL;
    } else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
        out->family = AF_INET6;
        if (prefix < 0) prefix = 128;
        if (prefix > 128) return -EINVAL;
    } else {
        return -EINVAL;
    }
    out->prefix = prefix;
    return 0;
}

static int prefix_equal(const uint8_t *a, const uint8_t *b, int bits)
{
    int full = bits / 8, rest = bits % 8;
    if (memcmp(a, b, full)) return 0;
    if (!rest) return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[full] & mask) == (b[full] & mask);
}

int nfs_net_match(const struct nfs_client_net *n, const struct sockaddr_storage *peer)
{
    uint8_t addr[16];
    int fam = peer->ss_family;
    if (fam == AF_INET) {
        memcpy(addr, &((const struct sockaddr_in *)peer)->sin_addr, 4);
    } else if (fam == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)peer)->sin6_addr;
        if (n->family == AF_INET && IN6_IS_ADDR_V4MAPPED(a6)) {
            memcpy(addr, a6->s6_addr + 12, 4);
            fam = AF_INET;
        } else {
            memcpy(addr, a6->s6_addr, 16);
        }
    } else {
        return 0;
    }
    if (fam != n->family) return 0;
    return prefix_equal(addr, n->addr, n->prefix);
}

int nfs_export_allows(const struct nfs_export *e, const struct sockaddr_storage *peer)
{
    if (e->cfg.nnets == 0) return 1;
    for (unsigned i = 0; i < e->cfg.nnets && i < NFS_MAX_CLIENT_NETS; i++)
        if (nfs_net_match(&e->cfg.nets[i], peer)) return 1;
    return 0;
}

int nfs_exports_admit(struct nfs_server *s, const struct sockaddr_storage *peer)
{
    int ok = 0;
    pthread_rwlock_rdlock(&s->exports_lock);
    for (unsigned i = 0; i < s->nexports && !ok; i++) ok = nfs_export_allows(s->exports[i], peer);
    pthread_rwlock_unlock(&s->exports_lock);
    return ok;
}

/* ---- object cache ---- */

static unsigned key_hash(const struct nasd_fh *k)
{
    return (unsigned)XXH3_64bits_withSeed(k->bytes, k->len, (uint32_t)k->type);
}

static int key_eq(const struct nasd_fh *a, const struct nasd_fh *b)
{
    return a->type == b->type && a->len == b->len && !memcmp(a->bytes, b->bytes, a->len);
}

static void obj_free(struct nfs_obj *o)
{
    struct nasd_fsroot *fs = o->fs;
    if (o->fd >= 0) fs->vfs->close(fs, o->fd);
    if (o->io_fd >= 0) fs->vfs->close(fs, o->io_fd);
    if (o->old_io_fd >= 0) fs->vfs->close(fs, o->old_io_fd);
    free(o);
}

void nfs_obj_put(struct nfs_obj *o)
{
    if (o && atomic_fetch_sub(&o->refs, 1) == 1) obj_free(o);
}

static void lru_unlink(struct nfs_obj *o)
{
    o->lru_prev->lru_next = o->lru_next;
    o->lru_next->lru_prev = o->lru_prev;
}

static void lru_push_front(struct nfs_export *e, struct nfs_obj *o)
{
    o->lru_next = e->lru.lru_next;
    o->lru_prev = &e->lru;
    e->lru.lru_next->lru_prev = o;
    e->lru.lru_next = o;
}

/* Removes o from the table; caller holds cache_lock. Drops the cache's ref. */
static void cache_remove_locked(struct nfs_export *e, struct nfs_obj *o)
{
    if (!o->cached) return;
    struct nfs_obj **pp = &e->buckets[key_hash(&o->key) & (e->nbuckets - 1)];
    while (*pp && *pp != o) pp = &(*pp)->hnext;
    if (*pp) *pp = o->hnext;
    pp = &e->ibuckets[o->ino & (e->nbuckets - 1)];
    while (*pp && *pp != o) pp = &(*pp)->inext;
    if (*pp) *pp = o->inext;
    lru_unlink(o);
    o->cached = 0;
    e->count--;
    nfs_obj_put(o);
}

void nfs_obj_evict(struct nfs_export *e, struct nfs_obj *o)
{
    pthread_mutex_lock(&e->cache_lock);
    cache_remove_locked(e, o);
    pthread_mutex_unlock(&e->cache_lock);
}

/* A removed file's cached fds would keep its blocks allocated until LRU eviction. */
void nfs_obj_evict_ino(struct nfs_export *e, ino_t ino)
{
    pthread_mutex_lock(&e->cache_lock);
    struct nfs_obj *o = e->ibuckets[ino & (e->nbuckets - 1)];
    while (o) {
        struct nfs_obj *next = o->inext;
        if (o->ino == ino) cache_remove_locked(e, o);
        o = next;
    }
    pthread_mutex_unlock(&e->cache_lock);
}

static struct nfs_obj *cache_find_locked(struct nfs_export *e, const struct nasd_fh *k, unsigned h)
{
    for (struct nfs_obj *o = e->buckets[h & (e->nbuckets - 1)]; o; o = o->hnext)
        if (key_eq(&o->key, k)) return o;
    return NULL;
}

static int open_handle(struct nfs_export *e, const struct nasd_fh *k, int flags)
{
    return e->fs->vfs->open_handle(e->fs, k, flags);
}

int nfs_vfs_fstat(struct nasd_fsroot *fs, int fd, struct stat *st)
{
    return fs->vfs->fstatat(fs, fd, "", st, AT_EMPTY_PATH);
}

/* Runs with root fs credentials (the posix backend's open_by_handle_at needs
 * CAP_DAC_READ_SEARCH). Returns 0 or -errno (-ESTALE for vanished objects). */
int nfs_obj_get(struct nfs_export *e, struct nfs_worker *w, const struct nasd_fh *k,
                struct nfs_obj **out)
{
    unsigned h = key_hash(k);
    pthread_mutex_lock(&e->cache_lock);
    struct nfs_obj *o = cache_find_locked(e, k, h);
    if (o) {
        atomic_fetch_add(&o->refs, 1);
        lru_unlink(o);
        lru_push_front(e, o);
        pthread_mutex_unlock(&e->cache_lock);
        *out = o;
        return 0;
    }
    pthread_mutex_unlock(&e->cache_lock);

    nfs_creds_root(w);
    int fd = open_handle(e, k, O_PATH);
    if (fd < 0) return fd == -ENOENT || fd == -EINVAL || fd == -ESTALE ? -ESTALE : fd;
    struct stat st;
    if (nfs_vfs_fstat(e->fs, fd, &st) < 0) { e->fs->vfs->close(e->fs, fd); return -ESTALE; }
    o = calloc(1, sizeof *o);
    if (!o) { e->fs->vfs->close(e->fs, fd); return -ENOMEM; }
    o->ino = st.st_ino;
    o->key = *k;
    o->fs = e->fs;
    o->fd = fd;
    o->io_fd = o->old_io_fd = -1;
    atomic_init(&o->refs, 2); /* caller + cache */

    pthread_mutex_lock(&e->cache_lock);
    struct nfs_obj *other = cache_find_locked(e, k, h);
    if (other) {             /* lost a race: use the cached one */
        atomic_fetch_add(&other->refs, 1);
        pthread_mutex_unlock(&e->cache_lock);
        obj_free(o);
        *out = other;
        return 0;
    }
    o->hnext = e->buckets[h & (e->nbuckets - 1)];
    e->buckets[h & (e->nbuckets - 1)] = o;
    o->inext = e->ibuckets[o->ino & (e->nbuckets - 1)];
    e->ibuckets[o->ino & (e->nbuckets - 1)] = o;
    o->cached = 1;
    lru_push_front(e, o);
    e->count++;
    while (e->count > NFS_OBJ_CACHE_MAX) cache_remove_locked(e, e->lru.lru_prev);
    pthread_mutex_unlock(&e->cache_lock);
    *out = o;
    return 0;
}

/* fd usable for pread/pwrite/fsync/truncate; opened once per object (root creds needed
 * on first use; permission checks are done by the caller with nfs_may). */
int nfs_obj_io_fd(struct nfs_export *e, struct nfs_worker *w, struct nfs_obj *o, int want_write)
{
    pthread_mutex_lock(&e->cache_lock);
    int fd = o->io_fd, rw = o->io_rw;
    pthread_mutex_unlock(&e->cache_lock);
    if (fd >= 0 && (rw || !want_write)) return fd;
    nfs_creds_root(w);
    int nfd = open_handle(e, &o->key, O_RDWR);
    int nrw = 1;
    if (nfd == -EISDIR) { nfd = open_handle(e, &o->key, O_RDONLY | O_DIRECTORY); nrw = 0; }
    else if (nfd < 0 && !want_write) { nfd = open_handle(e, &o->key, O_RDONLY); nrw = 0; }
    if (nfd < 0) return nfd;
    pthread_mutex_lock(&e->cache_lock);
    if (o->io_fd >= 0 && (o->io_rw || !nrw)) {
        int keep = o->io_fd;      /* someone else was faster */
        pthread_mutex_unlock(&e->cache_lock);
        e->fs->vfs->close(e->fs, nfd);
        return keep;
    }
    if (o->io_fd >= 0) {
        /* cannot be in use: only one upgrade */
        if (o->old_io_fd >= 0) e->fs->vfs->close(e->fs, o->old_io_fd);
        o->old_io_fd = o->io_fd;
    }
    o->io_fd = nfd;
    o->io_rw = nrw;
    pthread_mutex_unlock(&e->cache_lock);
    return nfd;
}

size_t nfs_export_make_fh(struct nfs_server *s, const struct nfs_export *e,
                          const struct nasd_fh *k, uint8_t *out)
{
    return nfs_fh_encode(&s->secret, e->cfg.export_id, e->gen, k, out);
}

/* ---- export table ---- */

static void export_free(struct nfs_export *e)
{
    for (unsigned i = 0; i < e->nbuckets; i++) {
        struct nfs_obj *o = e->buckets[i];
        while (o) { struct nfs_obj *n = o->hnext; nfs_obj_put(o); o = n; }
    }
    free(e->buckets);
    free(e->ibuckets);
    pthread_mutex_destroy(&e->cache_lock);
    for (int i = 0; i < 64; i++) pthread_mutex_destroy(&e->size_locks[i]);
    nasd_stats_put(e->stats);
    nasd_fsroot_put(e->fs);
    free(e);
}

void nfs_export_put(struct nfs_export *e)
{
    if (e && atomic_fetch_sub(&e->refs, 1) == 1) export_free(e);
}

static void normalize_path(char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
}

struct nfs_export *nfs_export_find_id(struct nfs_server *s, uint32_t id)
{
    struct nfs_export *r = NULL;
    pthread_rwlock_rdlock(&s->exports_lock);
    for (unsigned i = 0; i < s->nexports; i++)
        if (s->exports[i]->cfg.export_id == id) { r = s->exports[i]; atomic_fetch_add(&r->refs, 1); break; }
    pthread_rwlock_unlock(&s->exports_lock);
    return r;
}

struct nfs_export *nfs_export_find_path(struct nfs_server *s, const char *path)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    normalize_path(p);
    struct nfs_export *r = NULL;
    pthread_rwlock_rdlock(&s->exports_lock);
    for (unsigned i = 0; i < s->nexports; i++)
        if (!strcmp(s->exports[i]->cfg.path, p)) { r = s->exports[i]; atomic_fetch_add(&r->refs, 1); break; }
    pthread_rwlock_unlock(&s->exports_lock);
    return r;
}

struct nfs_export *nfs_export_find_prefix(struct nfs_server *s, const char *path, const char **rest)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    normalize_path(p);
    struct nfs_export *r = NULL;
    size_t best = 0;
    pthread_rwlock_rdlock(&s->exports_lock);
    for (unsigned i = 0; i < s->nexports; i++) {
        const char *ep = s->exports[i]->cfg.path;
        size_t n = strlen(ep);
        if (n == 1 && ep[0] == '/') n = 0;             /* "/" exported: everything is below it */
        if (strncmp(p, ep, n) || (p[n] != '/' && p[n] != 0)) continue;
        if (!r || n > best) { r = s->exports[i]; best = n; }
    }
    if (r) atomic_fetch_add(&r->refs, 1);
    pthread_rwlock_unlock(&s->exports_lock);
    if (r) {
        *rest = path + best;                            /* normalization only trimmed the end */
        while (**rest == '/') (*rest)++;
    }
    return r;
}

static uint32_t export_generation(const struct nasd_fsroot *fs)
{
    /* Changes when the export id is reused for another dataset, making old handles stale. */
    return (uint32_t)XXH3_64bits_withSeed(fs->path, strlen(fs->path), fs->fsid);
}

int nfs_server_set_export(struct nfs_server *s, const struct nfs_export_cfg *cfg)
{
    if (!s || !cfg || !cfg->fs || cfg->path[0] != '/' || cfg->nnets > NFS_MAX_CLIENT_NETS) return -EINVAL;
    struct nfs_export *e = calloc(1, sizeof *e);
    if (!e) return -ENOMEM;
    e->cfg = *cfg;
    e->cfg.path[sizeof e->cfg.path - 1] = 0;
    normalize_path(e->cfg.path);
    e->fs = nasd_fsroot_get(cfg->fs);
    e->stats = nasd_stats_get(cfg->stats);
    e->cfg.fs = e->fs;
    e->cfg.stats = e->stats;
    atomic_init(&e->refs, 1);
    pthread_mutex_init(&e->cache_lock, NULL);
    for (int i = 0; i < 64; i++) pthread_mutex_init(&e->size_locks[i], NULL);
    e->lru.lru_next = e->lru.lru_prev = &e->lru;
    e->nbuckets = 8192;
    e->buckets = calloc(e->nbuckets, sizeof *e->buckets);
    e->ibuckets = calloc(e->nbuckets, sizeof *e->ibuckets);
    e->gen = export_generation(e->fs);
    struct stat st;
    int err = 0;
    if (!e->buckets || !e->ibuckets) err = -ENOMEM;
    else if ((err = nfs_vfs_fstat(e->fs, e->fs->root_fd, &st)) == 0) {
        e->dev = st.st_dev;
        e->root_ino = st.st_ino;
        err = e->fs->vfs->handle(e->fs, e->fs->root_fd, "", AT_EMPTY_PATH, &e->root_key);
    }
    if (err) {
        log_err("nfs: export %s (%s): cannot get root handle: %s", e->cfg.path, e->fs->path, strerror(-err));
        export_free(e);
        return err;
    }
    e->root_fh_len = nfs_export_make_fh(s, e, &e->root_key, e->root_fh);

    pthread_rwlock_wrlock(&s->exports_lock);
    struct nfs_export *old = NULL;
    unsigned i;
    for (i = 0; i < s->nexports; i++)
        if (s->exports[i]->cfg.export_id == cfg->export_id) break;
    if (i < s->nexports) {
        old = s->exports[i];
        s->exports[i] = e;
    } else {
        if (s->nexports == s->exports_cap) {
            unsigned cap = s->exports_cap ? s->exports_cap * 2 : 8;
            struct nfs_export **n = realloc(s->exports, cap * sizeof *n);
            if (!n) { pthread_rwlock_unlock(&s->exports_lock); export_free(e); return -ENOMEM; }
            s->exports = n;
            s->exports_cap = cap;
        }
        s->exports[s->nexports++] = e;
    }
    pthread_rwlock_unlock(&s->exports_lock);
    nfs_export_put(old);
    log_info("nfs: export %u %s -> %s%s", cfg->export_id, e->cfg.path, e->fs->path,
             cfg->read_only ? " (ro)" : "");
    return 0;
}

int nfs_server_remove_export(struct nfs_server *s, uint32_t export_id)
{
    struct nfs_export *old = NULL;
    pthread_rwlock_wrlock(&s->exports_lock);
    for (unsigned i = 0; i < s->nexports; i++) {
        if (s->exports[i]->cfg.export_id == export_id) {
            old = s->exports[i];
            s->exports[i] = s->exports[--s->nexports];
            break;
        }
    }
    pthread_rwlock_unlock(&s->exports_lock);
    if (!old) return -ENOENT;
    nfs_export_put(old);
    return 0;
}

void nfs_exports_clear(struct nfs_server *s)
{
    pthread_rwlock_wrlock(&s->exports_lock);
    for (unsigned i = 0; i < s->nexports; i++) nfs_export_put(s->exports[i]);
    free(s->exports);
    s->exports = NULL;
    s->nexports = s->exports_cap = 0;
    pthread_rwlock_unlock(&s->exports_lock);
}
