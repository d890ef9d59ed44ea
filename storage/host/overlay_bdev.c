/* A writable RAM overlay over a read-only bdev: writes land in 4 KiB blocks kept in
 * memory, reads see them over the base. Used to mount a snapshot's filesystem, whose
 * open replays a journal (a few blocks), without ever writing the snapshot. */
#include "storage/bdev.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OV_BLK 4096u
#define OV_MAX_BLOCKS 65536u   /* 256 MiB: beyond that writes fail -ENOSPC */

struct ov_ent { uint64_t blk; uint8_t *data; struct ov_ent *next; };
struct overlay {
    nasd_bdev b;
    nasd_bdev *base;
    pthread_mutex_t mu;
    struct ov_ent *tab[4096];
    uint64_t n;
};

static struct ov_ent **slot(struct overlay *o, uint64_t blk)
{
    struct ov_ent **pp = &o->tab[(blk * 0x9E3779B97F4A7C15ull) >> 52];
    while (*pp && (*pp)->blk != blk) pp = &(*pp)->next;
    return pp;
}

static int ov_read(nasd_bdev *b, void *buf, uint64_t off, size_t len)
{
    struct overlay *o = b->priv;
    int rc = nasd_bdev_read(o->base, buf, off, len);
    if (rc) return rc;
    pthread_mutex_lock(&o->mu);
    if (o->n)
        for (uint64_t blk = off / OV_BLK; blk * OV_BLK < off + len; blk++) {
            struct ov_ent *e = *slot(o, blk);
            if (!e) continue;
            uint64_t s = blk * OV_BLK > off ? blk * OV_BLK : off, t = (blk + 1) * OV_BLK < off + len ? (blk + 1) * OV_BLK : off + len;
            memcpy((uint8_t *)buf + (s - off), e->data + (s - blk * OV_BLK), t - s);
        }
    pthread_mutex_unlock(&o->mu);
    return 0;
}

static int ov_write(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags)
{
    (void)flags;
    struct overlay *o = b->priv;
    if (off + len > b->size || off + len < off) return -ERANGE;
    int rc = 0;
    pthread_mutex_lock(&o->mu);
    for (uint64_t blk = off / OV_BLK; blk * OV_BLK < off + len && !rc; blk++) {
        struct ov_ent **pp = slot(o, blk), *e = *pp;
        if (!e) {
            if (o->n >= OV_MAX_BLOCKS) { rc = -ENOSPC; break; }
            e = calloc(1, sizeof *e);
            if (!e || !(e->data = malloc(OV_BLK))) { free(e); rc = -ENOMEM; break; }
            e->blk = blk;
            if ((rc = nasd_bdev_read(o->base, e->data, blk * OV_BLK, OV_BLK))) { free(e->data); free(e); break; }
            *pp = e;
            o->n++;
        }
        uint64_t s = blk * OV_BLK > off ? blk * OV_BLK : off, t = (blk + 1) * OV_BLK < off + len ? (blk + 1) * OV_BLK : off + len;
        memcpy(e->data + (s - blk * OV_BLK), (const uint8_t *)buf + (s - off), t - s);
    }
    pthread_mutex_unlock(&o->mu);
    return rc;
}

static int ov_flush(nasd_bdev *b) { (void)b; return 0; }

static void ov_destroy(nasd_bdev *b)
{
    struct overlay *o = b->priv;
    for (size_t i = 0; i < sizeof o->tab / sizeof *o->tab; i++)
        for (struct ov_ent *e = o->tab[i], *nx; e; e = nx) { nx = e->next; free(e->data); free(e); }
    nasd_bdev_put(o->base);
    pthread_mutex_destroy(&o->mu);
    free(o);
}

static const struct nasd_bdev_ops ov_ops = { .read = ov_read, .write = ov_write, .flush = ov_flush, .destroy = ov_destroy };

nasd_bdev *nasd_overlay_bdev(nasd_bdev *base, int *err)
{
    struct overlay *o = calloc(1, sizeof *o);
    if (!o) { *err = -ENOMEM; return NULL; }
    o->base = nasd_bdev_get(base);
    pthread_mutex_init(&o->mu, NULL);
    o->b.ops = &ov_ops;
    o->b.priv = o;
    o->b.size = base->size;
    o->b.block_size = base->block_size;
    memcpy(o->b.uuid, base->uuid, 16);
    snprintf(o->b.name, sizeof o->b.name, "%s", base->name);
    atomic_init(&o->b.refs, 1);
    return &o->b;
}
