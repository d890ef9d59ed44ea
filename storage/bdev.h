#pragma once
/* The narrow block backend: the only way the iSCSI target (and self-tests) touch
 * volume data. Byte offsets; every call is thread-safe; returns 0 or -errno.
 * Writes without NASD_IO_FUA may sit in a write-back cache until flush(). */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>

#define NASD_IO_FUA 1

typedef struct nasd_bdev nasd_bdev;

struct nasd_bdev_ops {
    int (*read)(nasd_bdev *b, void *buf, uint64_t off, size_t len);
    int (*write)(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags);
    int (*flush)(nasd_bdev *b);
    int (*unmap)(nasd_bdev *b, uint64_t off, uint64_t len);          /* may be NULL */
    /* Optional (GET LBA STATUS): is [off, off+len) mapped? *run = bytes from off with
     * the same state. NULL means "always mapped". */
    int (*mapped)(nasd_bdev *b, uint64_t off, uint64_t len, int *is_mapped, uint64_t *run);
    void (*destroy)(nasd_bdev *b);
    /* Optional: bytes of backing space the device can still allocate (thin devices in a
     * shared pool). NULL: everything not yet written is available. */
    uint64_t (*avail)(nasd_bdev *b);
    /* Optional (WRITE SAME): repeat the plen-byte pattern over [off, off+len). */
    int (*write_same)(nasd_bdev *b, const void *pattern, size_t plen, uint64_t off, uint64_t len);
    /* Optional (COMPARE AND WRITE), atomic for every client of a shared device (several
     * gateways): if [off, off+len) equals cmp, write data; else -EILSEQ with *miscompare =
     * the offset of the first differing byte. NULL or -EOPNOTSUPP (e.g. for that length):
     * the caller locks, reads, compares and writes. */
    int (*compare_and_write)(nasd_bdev *b, const void *cmp, const void *data, uint64_t off, size_t len,
                             uint64_t *miscompare);
};

struct nasd_bdev {
    const struct nasd_bdev_ops *ops;
    void *priv;
    uint64_t size;        /* bytes, multiple of block_size */
    uint32_t block_size;  /* logical block size: 512 or 4096 */
    uint8_t uuid[16];     /* stable identity (NAA designator, unit serial) */
    char name[128];       /* "pool/volume" */
    uint8_t remote;       /* every request waits on the network (RBD): the iSCSI target runs them
                           * all on worker threads, never inline on a connection's thread */
    atomic_int refs;
    int read_only;        /* writes fail -EROFS (snapshots); reported as write-protected */
};

static inline nasd_bdev *nasd_bdev_get(nasd_bdev *b)
{
    if (b) atomic_fetch_add(&b->refs, 1);
    return b;
}
static inline void nasd_bdev_put(nasd_bdev *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) b->ops->destroy(b);
}
static inline int nasd_bdev_read(nasd_bdev *b, void *buf, uint64_t off, size_t len)
{ return b->ops->read(b, buf, off, len); }
static inline int nasd_bdev_write(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags)
{ return b->ops->write(b, buf, off, len, flags); }
static inline int nasd_bdev_flush(nasd_bdev *b) { return b->ops->flush(b); }
static inline int nasd_bdev_unmap(nasd_bdev *b, uint64_t off, uint64_t len)
{ return b->ops->unmap ? b->ops->unmap(b, off, len) : -EOPNOTSUPP; }

/* A bdev over a plain (sparse) file or block device; unmap punches holes.
 * size 0 = use the file's size. Returns NULL with *err = -errno. */
nasd_bdev *nasd_file_bdev_open(const char *path, uint64_t size, uint32_t block_size,
                               const char *name, int *err);

/* A RAM overlay over base (which it never writes): writes are kept in memory (at most
 * 256 MiB) and read back over base. For mounting read-only snapshots. */
nasd_bdev *nasd_overlay_bdev(nasd_bdev *base, int *err);
