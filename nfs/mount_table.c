/* The MOUNT table (what DUMP lists): (client, normalised path) pairs in a hash table,
 * bounded by NFS_MOUNTS_MAX with the oldest entry dropped first, so that no spelling
 * of a path and no number of MNT calls can grow it without bound. */
#include "nfs/internal.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int nfs_mount_path_normalize(const char *in, char *out, size_t outlen)
{
    if (in[0] != '/' || outlen < 2) return -EINVAL;
    size_t o = 0;
    const char *p = in;
    while (*p) {
        while (*p == '/') p++;
        const char *s = p;
        while (*p && *p != '/') p++;
        size_t n = (size_t)(p - s);
        if (n == 0 || (n == 1 && s[0] == '.')) continue;
        if (n == 2 && s[0] == '.' && s[1] == '.') return -EACCES; /* never climb out of an export */
        if (o + 1 + n + 1 > outlen) return -ENAMETOOLONG;
        out[o++] = '/';
        memcpy(out + o, s, n);
        o += n;
    }
    if (!o) out[o++] = '/';
    out[o] = 0;
    return 0;
}

static uint64_t entry_hash(const char *host, const char *path)
{
    return XXH3_64bits_withSeed(path, strlen(path), XXH3_64bits(host, strlen(host)));
}

static int table_init(struct nfs_server *s)
{
    if (s->mnt_buckets) return 0;
    s->mnt_buckets = calloc(NFS_MOUNTS_BUCKETS, sizeof *s->mnt_buckets);
    if (!s->mnt_buckets) return -1;
    s->mnt_list.prev = s->mnt_list.next = &s->mnt_list;
    return 0;
}

static void entry_unlink(struct nfs_server *s, struct nfs_mount_entry *m)
{
    struct nfs_mount_entry **pp = &s->mnt_buckets[m->hash % NFS_MOUNTS_BUCKETS];
    while (*pp != m) pp = &(*pp)->hnext;
    *pp = m->hnext;
    m->prev->next = m->next;
    m->next->prev = m->prev;
    s->mnt_count--;
    free(m);
}

void nfs_mounts_add(struct nfs_server *s, const char *host, const char *path)
{
    uint64_t h = entry_hash(host, path);
    pthread_mutex_lock(&s->mnt_lock);
    if (table_init(s)) goto out;
    for (struct nfs_mount_entry *m = s->mnt_buckets[h % NFS_MOUNTS_BUCKETS]; m; m = m->hnext)
        if (m->hash == h && !strcmp(m->host, host) && !strcmp(m->path, path)) goto out;
    if (s->mnt_count >= NFS_MOUNTS_MAX) entry_unlink(s, s->mnt_list.next); /* the oldest */
    size_t plen = strlen(path);
    struct nfs_mount_entry *m = calloc(1, sizeof *m + plen + 1);
    if (!m) goto out;
    snprintf(m->host, sizeof m->host, "%s", host);
    m->path = (char *)(m + 1);
    memcpy(m->path, path, plen + 1);
    m->hash = h;
    m->hnext = s->mnt_buckets[h % NFS_MOUNTS_BUCKETS];
    s->mnt_buckets[h % NFS_MOUNTS_BUCKETS] = m;
    m->prev = s->mnt_list.prev;           /* newest at the tail */
    m->next = &s->mnt_list;
    s->mnt_list.prev->next = m;
    s->mnt_list.prev = m;
    s->mnt_count++;
out:
    pthread_mutex_unlock(&s->mnt_lock);
}

void nfs_mounts_remove(struct nfs_server *s, const char *host, const char *path)
{
    pthread_mutex_lock(&s->mnt_lock);
    if (!s->mnt_buckets) goto out;
    if (path) {
        uint64_t h = entry_hash(host, path);
        for (struct nfs_mount_entry *m = s->mnt_buckets[h % NFS_MOUNTS_BUCKETS]; m; m = m->hnext)
            if (m->hash == h && !strcmp(m->host, host) && !strcmp(m->path, path)) { entry_unlink(s, m); break; }
    } else {                               /* UMNTALL: every entry of host */
        for (struct nfs_mount_entry *m = s->mnt_list.next, *n; m != &s->mnt_list; m = n) {
            n = m->next;
            if (!strcmp(m->host, host)) entry_unlink(s, m);
        }
    }
out:
    pthread_mutex_unlock(&s->mnt_lock);
}

unsigned nfs_mounts_count(struct nfs_server *s)
{
    pthread_mutex_lock(&s->mnt_lock);
    unsigned n = s->mnt_count;
    pthread_mutex_unlock(&s->mnt_lock);
    return n;
}

void nfs_mounts_clear(struct nfs_server *s)
{
    pthread_mutex_lock(&s->mnt_lock);
    if (s->mnt_buckets) {
        while (s->mnt_list.next != &s->mnt_list) entry_unlink(s, s->mnt_list.next);
        free(s->mnt_buckets);
        s->mnt_buckets = NULL;
    }
    pthread_mutex_unlock(&s->mnt_lock);
}
