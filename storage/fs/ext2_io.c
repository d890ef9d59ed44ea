/* libext2fs io_manager over a txb. Channels are found by name ("txb:<id>") in a small
 * registry, so a stale or forged name fails cleanly instead of dereferencing a pointer.
 * io_channel flush = txb_commit: every ext2fs_flush()/ext2fs_close() is one atomic commit. */
#include "storage/fs/txblock.h"
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reg_entry {
    struct reg_entry *next;
    unsigned id;
    struct txb *t;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reg_entry *reg_head;
static unsigned reg_next_id = 1;

void txb_io_name(struct txb *t, char *buf, size_t len)
{
    unsigned id = 0;
    pthread_mutex_lock(&reg_lock);
    for (struct reg_entry *e = reg_head; e; e = e->next)
        if (e->t == t) { id = e->id; break; }
    if (!id) {
        struct reg_entry *e = malloc(sizeof *e);
        if (e) {
            e->id = id = reg_next_id++;
            e->t = t;
            e->next = reg_head;
            reg_head = e;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    snprintf(buf, len, "txb:%u", id);   /* id 0 never resolves (allocation failed) */
}

void txb_io_forget(struct txb *t)
{
    pthread_mutex_lock(&reg_lock);
    for (struct reg_entry **pp = &reg_head; *pp; pp = &(*pp)->next)
        if ((*pp)->t == t) {
            struct reg_entry *e = *pp;
            *pp = e->next;
            free(e);
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

static struct txb *reg_lookup(const char *name)
{
    unsigned id;
    char tail;
    if (!name || sscanf(name, "txb:%u%c", &id, &tail) != 1 || !id) return NULL;
    struct txb *t = NULL;
    pthread_mutex_lock(&reg_lock);
    for (struct reg_entry *e = reg_head; e; e = e->next)
        if (e->id == id) { t = e->t; break; }
    pthread_mutex_unlock(&reg_lock);
    return t;
}

struct chan_priv {
    struct txb *t;
    int rw;
    struct struct_io_stats stats;
};

static errcode_t err_of(int rc)
{
    return rc < 0 ? (errcode_t)-rc : (errcode_t)rc;
}

static errcode_t txbio_open(const char *name, int flags, io_channel *channel)
{
    struct txb *t = reg_lookup(name);
    if (!t) return EXT2_ET_BAD_DEVICE_NAME;
    io_channel ch = calloc(1, sizeof *ch);
    struct chan_priv *p = calloc(1, sizeof *p);
    char *nm = strdup(name);
    if (!ch || !p || !nm) { free(ch); free(p); free(nm); return EXT2_ET_NO_MEMORY; }
    p->t = t;
    p->rw = !!(flags & IO_FLAG_RW);
    p->stats.num_fields = 2;
    ch->magic = EXT2_ET_MAGIC_IO_CHANNEL;
    ch->manager = nasd_txb_io_manager;
    ch->name = nm;
    ch->block_size = 1024;   /* io_channel default until set_blksize */
    ch->refcount = 1;
    ch->private_data = p;
    ch->align = 0;
    *channel = ch;
    return 0;
}

static errcode_t txbio_close(io_channel ch)
{
    if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL) return EXT2_ET_MAGIC_IO_CHANNEL;
    if (--ch->refcount > 0) return 0;
    free(ch->private_data);
    free(ch->name);
    free(ch);
    return 0;   /* the txb belongs to its owner, who closes it */
}

static errcode_t txbio_set_blksize(io_channel ch, int blksize)
{
    if (blksize <= 0) return EXT2_ET_INVALID_ARGUMENT;
    ch->block_size = blksize;
    return 0;
}

/* count > 0: blocks of channel->block_size; count < 0: -count bytes. */
static errcode_t span_of(io_channel ch, unsigned long long block, int count, uint64_t *off, size_t *len)
{
    uint64_t bytes = count < 0 ? (uint64_t)-(int64_t)count : (uint64_t)count * (uint64_t)ch->block_size;
    if (block > UINT64_MAX / (uint64_t)ch->block_size) return EXT2_ET_LLSEEK_FAILED;
    *off = block * (uint64_t)ch->block_size;
    *len = (size_t)bytes;
    return 0;
}

static errcode_t txbio_read_blk64(io_channel ch, unsigned long long block, int count, void *data)
{
    struct chan_priv *p = ch->private_data;
    uint64_t off;
    size_t len;
    errcode_t e = span_of(ch, block, count, &off, &len);
    if (e) return e;
    int rc = txb_read(p->t, off, data, len);
    if (rc) {
        if (ch->read_error)
            return ch->read_error(ch, (unsigned long)block, count, data, len, 0, err_of(rc));
        return rc == -EINVAL ? EXT2_ET_SHORT_READ : err_of(rc);
    }
    p->stats.bytes_read += len;
    return 0;
}

static errcode_t txbio_write_blk64(io_channel ch, unsigned long long block, int count, const void *data)
{
    struct chan_priv *p = ch->private_data;
    if (!p->rw) return EXT2_ET_RO_FILSYS;
    uint64_t off;
    size_t len;
    errcode_t e = span_of(ch, block, count, &off, &len);
    if (e) return e;
    int rc = txb_write(p->t, off, data, len);
    if (rc) {
        if (ch->write_error)
            return ch->write_error(ch, (unsigned long)block, count, data, len, 0, err_of(rc));
        return rc == -EINVAL ? EXT2_ET_SHORT_WRITE : err_of(rc);
    }
    p->stats.bytes_written += len;
    return 0;
}

static errcode_t txbio_read_blk(io_channel ch, unsigned long block, int count, void *data)
{
    return txbio_read_blk64(ch, block, count, data);
}

static errcode_t txbio_write_blk(io_channel ch, unsigned long block, int count, const void *data)
{
    return txbio_write_blk64(ch, block, count, data);
}

static errcode_t txbio_write_byte(io_channel ch, unsigned long offset, int size, const void *data)
{
    struct chan_priv *p = ch->private_data;
    if (!p->rw) return EXT2_ET_RO_FILSYS;
    if (size < 0) return EXT2_ET_INVALID_ARGUMENT;
    int rc = txb_write(p->t, offset, data, (size_t)size);
    if (rc) return rc == -EINVAL ? EXT2_ET_SHORT_WRITE : err_of(rc);
    p->stats.bytes_written += (unsigned)size;
    return 0;
}

static errcode_t txbio_flush(io_channel ch)
{
    struct chan_priv *p = ch->private_data;
    if (!p->rw) return 0;
    int rc = txb_commit(p->t);
    return rc ? err_of(rc) : 0;
}

static errcode_t txbio_discard(io_channel ch, unsigned long long block, unsigned long long count)
{
    struct chan_priv *p = ch->private_data;
    if (!p->rw) return EXT2_ET_RO_FILSYS;
    uint64_t bs = (uint64_t)ch->block_size;
    if (block > UINT64_MAX / bs || count > UINT64_MAX / bs) return EXT2_ET_INVALID_ARGUMENT;
    int rc = txb_discard(p->t, block * bs, count * bs);
    return rc ? err_of(rc) : 0;
}

static errcode_t txbio_set_option(io_channel ch, const char *option, const char *arg)
{
    return EXT2_ET_INVALID_ARGUMENT;
}

static errcode_t txbio_get_stats(io_channel ch, io_stats *stats)
{
    struct chan_priv *p = ch->private_data;
    if (stats) *stats = &p->stats;
    return 0;
}

/* zeroout is left NULL on purpose: libext2fs then writes zero buffers, which go through
 * the journal; a discard would not read back as zeros before the next commit. */
static struct struct_io_manager txb_manager = {
    .magic = EXT2_ET_MAGIC_IO_MANAGER,
    .name = "nasd txblock I/O manager",
    .open = txbio_open,
    .close = txbio_close,
    .set_blksize = txbio_set_blksize,
    .read_blk = txbio_read_blk,
    .write_blk = txbio_write_blk,
    .flush = txbio_flush,
    .write_byte = txbio_write_byte,
    .set_option = txbio_set_option,
    .get_stats = txbio_get_stats,
    .read_blk64 = txbio_read_blk64,
    .write_blk64 = txbio_write_blk64,
    .discard = txbio_discard,
};

io_manager nasd_txb_io_manager = &txb_manager;
