/* Per-address connection counts: a small chained hash of 16-byte client keys
 * (nasd_peer_key: IPv4 as v4-mapped IPv6, IPv6 by its /64). */
#include "nfs/conn_limit.h"
#include "util/net.h"
#include <stdlib.h>
#include <string.h>

struct nfs_addr_count {
    struct nfs_addr_count *next;
    uint8_t a[16];
    unsigned n;
};

static unsigned bucket(const uint8_t a[16])
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < 16; i++) h = (h ^ a[i]) * 16777619u;
    return h % 256;
}

static struct nfs_addr_count **find(struct nfs_conn_limits *l, const uint8_t a[16])
{
    struct nfs_addr_count **pp = &l->buckets[bucket(a)];
    while (*pp && memcmp((*pp)->a, a, 16)) pp = &(*pp)->next;
    return pp;
}

int nfs_conn_limit_take(struct nfs_conn_limits *l, const struct sockaddr_storage *peer,
                        unsigned max_total, unsigned max_per_addr)
{
    uint8_t a[16];
    nasd_peer_key(peer, a);
    if (l->total >= max_total) return -1;
    struct nfs_addr_count **pp = find(l, a);
    if (*pp && (*pp)->n >= max_per_addr) return -1;
    if (!*pp) {
        *pp = calloc(1, sizeof **pp);
        if (!*pp) return -1;
        memcpy((*pp)->a, a, 16);
    }
    (*pp)->n++;
    l->total++;
    return 0;
}

void nfs_conn_limit_release(struct nfs_conn_limits *l, const struct sockaddr_storage *peer)
{
    uint8_t a[16];
    nasd_peer_key(peer, a);
    struct nfs_addr_count **pp = find(l, a);
    if (!*pp) return;
    l->total--;
    if (--(*pp)->n == 0) {
        struct nfs_addr_count *e = *pp;
        *pp = e->next;
        free(e);
    }
}

unsigned nfs_conn_limit_of(const struct nfs_conn_limits *l, const struct sockaddr_storage *peer)
{
    uint8_t a[16];
    nasd_peer_key(peer, a);
    struct nfs_addr_count **pp = find((struct nfs_conn_limits *)l, a);
    return *pp ? (*pp)->n : 0;
}

void nfs_conn_limit_clear(struct nfs_conn_limits *l)
{
    for (int i = 0; i < 256; i++)
        while (l->buckets[i]) {
            struct nfs_addr_count *e = l->buckets[i];
            l->buckets[i] = e->next;
            free(e);
        }
    l->total = 0;
}
