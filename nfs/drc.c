/* Duplicate request cache: a fixed array of entries, chained hash buckets by
 * index, a free list and an LRU list of completed entries. In-progress entries
 * are never evicted (their slot is owned by the executing worker). */
#include "nfs/drc.h"
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define NIL UINT32_MAX
#define DRC_SUM_BYTES 128       /* argument prefix hashed into the key */

enum { ST_FREE = 0, ST_BUSY, ST_DONE };

struct drc_entry {
    struct nfs_drc_key key;
    uint32_t hnext;             /* bucket chain, or free list when ST_FREE */
    uint32_t lru_prev, lru_next;
    uint16_t len;
    uint8_t state;
    uint8_t reply[NFS_DRC_REPLY_MAX];
};

struct nfs_drc {
    pthread_mutex_t lock;
    struct drc_entry *ents;
    uint32_t *buckets;
    uint32_t nents, mask, free_head;
    uint32_t lru_head, lru_tail;    /* head = most recently used */
    unsigned used;
    struct nfs_drc_stats st;
};

struct nfs_drc *nfs_drc_new(unsigned max_entries)
{
    if (max_entries == 0 || max_entries > (1u << 24)) return NULL;
    struct nfs_drc *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    uint32_t nb = 1;
    while (nb < 2 * max_entries) nb <<= 1;
    d->ents = calloc(max_entries, sizeof *d->ents);
    d->buckets = malloc(nb * sizeof *d->buckets);
    if (!d->ents || !d->buckets) { nfs_drc_free(d); return NULL; }
    for (uint32_t i = 0; i < nb; i++) d->buckets[i] = NIL;
    for (uint32_t i = 0; i < max_entries; i++) d->ents[i].hnext = i + 1 < max_entries ? i + 1 : NIL;
    d->nents = max_entries;
    d->mask = nb - 1;
    d->free_head = 0;
    d->lru_head = d->lru_tail = NIL;
    pthread_mutex_init(&d->lock, NULL);
    return d;
}

void nfs_drc_free(struct nfs_drc *d)
{
    if (!d) return;
    if (d->ents && d->buckets) pthread_mutex_destroy(&d->lock);
    free(d->ents);
    free(d->buckets);
    free(d);
}

void nfs_drc_key_init(struct nfs_drc_key *k, const struct sockaddr_storage *peer, uint32_t xid,
                      uint32_t prog, uint32_t vers, uint32_t proc, const uint8_t *args, size_t args_len)
{
    memset(k, 0, sizeof *k);
    if (peer->ss_family == AF_INET) {
        k->addr[10] = k->addr[11] = 0xff;
        memcpy(k->addr + 12, &((const struct sockaddr_in *)peer)->sin_addr, 4);
    } else if (peer->ss_family == AF_INET6) {
        memcpy(k->addr, &((const struct sockaddr_in6 *)peer)->sin6_addr, 16);
    }
    k->xid = xid;
    k->prog = prog;
    k->vers = vers;
    k->proc = proc;
    k->sum = XXH3_64bits_withSeed(args, args_len < DRC_SUM_BYTES ? args_len : DRC_SUM_BYTES, args_len);
}

static uint32_t bucket_of(const struct nfs_drc *d, const struct nfs_drc_key *k)
{
    return (uint32_t)XXH3_64bits(k, sizeof *k) & d->mask;
}

static void lru_unlink(struct nfs_drc *d, uint32_t i)
{
    struct drc_entry *e = &d->ents[i];
    if (e->lru_prev != NIL) d->ents[e->lru_prev].lru_next = e->lru_next; else d->lru_head = e->lru_next;
    if (e->lru_next != NIL) d->ents[e->lru_next].lru_prev = e->lru_prev; else d->lru_tail = e->lru_prev;
    e->lru_prev = e->lru_next = NIL;
}

static void lru_push_front(struct nfs_drc *d, uint32_t i)
{
    struct drc_entry *e = &d->ents[i];
    e->lru_prev = NIL;
    e->lru_next = d->lru_head;
    if (d->lru_head != NIL) d->ents[d->lru_head].lru_prev = i; else d->lru_tail = i;
    d->lru_head = i;
}

static void hash_unlink(struct nfs_drc *d, uint32_t i)
{
    uint32_t *pp = &d->buckets[bucket_of(d, &d->ents[i].key)];
    while (*pp != NIL && *pp != i) pp = &d->ents[*pp].hnext;
    if (*pp == i) *pp = d->ents[i].hnext;
}

static void release_locked(struct nfs_drc *d, uint32_t i)
{
    hash_unlink(d, i);
    d->ents[i].state = ST_FREE;
    d->ents[i].hnext = d->free_head;
    d->free_head = i;
    d->used--;
}

enum nfs_drc_verdict nfs_drc_begin(struct nfs_drc *d, const struct nfs_drc_key *k, uint8_t *out,
                                   size_t *out_len, uint32_t *slot)
{
    uint32_t b = bucket_of(d, k);
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = d->buckets[b]; i != NIL; i = d->ents[i].hnext) {
        struct drc_entry *e = &d->ents[i];
        if (memcmp(&e->key, k, sizeof *k)) continue;
        enum nfs_drc_verdict v;
        if (e->state == ST_BUSY) {
            d->st.dropped_in_progress++;
            v = NFS_DRC_IN_PROGRESS;
        } else {
            memcpy(out, e->reply, e->len);
            *out_len = e->len;
            lru_unlink(d, i);
            lru_push_front(d, i);
            d->st.replays++;
            v = NFS_DRC_REPLAY;
        }
        pthread_mutex_unlock(&d->lock);
        return v;
    }
    uint32_t i = d->free_head;
    if (i != NIL) {
        d->free_head = d->ents[i].hnext;
    } else if (d->lru_tail != NIL) {      /* evict the least recently used completed call */
        i = d->lru_tail;
        lru_unlink(d, i);
        hash_unlink(d, i);
        d->used--;
        d->st.evictions++;
    } else {
        pthread_mutex_unlock(&d->lock);
        return NFS_DRC_UNTRACKED;
    }
    struct drc_entry *e = &d->ents[i];
    e->key = *k;
    e->state = ST_BUSY;
    e->len = 0;
    e->lru_prev = e->lru_next = NIL;
    e->hnext = d->buckets[b];
    d->buckets[b] = i;
    d->used++;
    pthread_mutex_unlock(&d->lock);
    *slot = i;
    return NFS_DRC_NEW;
}

void nfs_drc_done(struct nfs_drc *d, uint32_t slot, const uint8_t *reply, size_t len)
{
    if (slot >= d->nents) return;
    struct drc_entry *e = &d->ents[slot];
    int keep = reply && len <= NFS_DRC_REPLY_MAX;
    if (keep) {              /* the slot is ours while BUSY: copy without the lock */
        memcpy(e->reply, reply, len);
        e->len = (uint16_t)len;
    }
    pthread_mutex_lock(&d->lock);
    if (e->state == ST_BUSY) {
        if (keep) {
            e->state = ST_DONE;
            lru_push_front(d, slot);
        } else {
            release_locked(d, slot);
        }
    }
    pthread_mutex_unlock(&d->lock);
}

void nfs_drc_get_stats(struct nfs_drc *d, struct nfs_drc_stats *out)
{
    pthread_mutex_lock(&d->lock);
    *out = d->st;
    out->entries = d->used;
    pthread_mutex_unlock(&d->lock);
}
