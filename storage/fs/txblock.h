#pragma once
/* Crash-atomic block updates over a nasd_bdev, for filesystems kept in a pool volume.
 *
 * Writes are buffered in RAM (reads see them). txb_commit() makes all of them durable
 * as one unit: it writes the dirty blocks plus a checksummed header into one half of a
 * redo journal at the end of the bdev, flushes, then writes them in place. The halves
 * alternate, so the in-place writes of commit N are made durable by the flush of commit
 * N+1 before commit N's half is reused. txb_open() replays the newest complete
 * transaction, so after a crash the data area reads as of the last commit that returned.
 *
 * If the dirty set outgrows one journal half, txb_write commits early (the only case
 * where a caller's sequence of writes is not atomic; logged).
 * Not thread-safe: the caller serializes all calls on one txb, except txb_read_home,
 * txb_write_home and txb_discard_gen. Returns 0 or -errno. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ext2fs/ext2fs.h>
#include "storage/bdev.h"

#define TXB_BLOCK 4096u
#define TXB_JOURNAL_HALF (8u << 20)            /* bytes per journal half */
#define TXB_JOURNAL_BYTES (2ull * TXB_JOURNAL_HALF + TXB_BLOCK)

struct txb;

/* Takes a reference on b (b->size must exceed TXB_JOURNAL_BYTES + 1 MiB). */
int txb_open(nasd_bdev *b, struct txb **out);
/* Commits, releases the bdev reference. */
void txb_close(struct txb *t);
/* Bytes usable by the filesystem: [0, data_size). Multiple of TXB_BLOCK. */
uint64_t txb_data_size(const struct txb *t);
int txb_read(struct txb *t, uint64_t off, void *buf, size_t len);
/* Whether any block of the range is buffered (then txb_read must serve it). */
bool txb_range_buffered(struct txb *t, uint64_t off, uint64_t len);
/* Reads the bdev directly, skipping the buffered set: the one call that may run
 * concurrently with the others (for data the caller knows is not buffered). */
int txb_read_home(struct txb *t, uint64_t off, void *buf, size_t len);
int txb_write(struct txb *t, uint64_t off, const void *buf, size_t len);
/* File data (ordered mode, like ext4 data=ordered): whole blocks go straight to the
 * bdev, not through the journal, unless they are buffered or were freed since the last
 * commit. The metadata that makes them reachable is committed after them, so a crash
 * never exposes garbage; overwrites of already-committed blocks are then not atomic
 * with the rest of the transaction (durable at the next commit, as usual). */
int txb_write_data(struct txb *t, uint64_t off, const void *buf, size_t len);
/* txb_write_data in two steps, for writing without the caller's serialization: claim
 * (serialized) says whether the range may go straight to the bdev; if so the caller
 * writes it with txb_write_home (unserialized) and must not commit until that returned. */
bool txb_claim_direct(struct txb *t, uint64_t off, uint64_t len);
int txb_write_home(struct txb *t, uint64_t off, const void *buf, size_t len);
/* The range no longer holds data: dropped from the dirty set; unmapped on the bdev
 * (returning space to the pool) after the next commit. Reads of it may return zeros. */
int txb_discard(struct txb *t, uint64_t off, uint64_t len);
/* Counts txb_discard calls (safe concurrently): a txb_read_home that ran while it did
 * not change read no block that was freed (and maybe reused) meanwhile. */
uint64_t txb_discard_gen(struct txb *t);
uint64_t txb_dirty_bytes(const struct txb *t);
int txb_commit(struct txb *t);
/* fn(arg) runs at the start of every commit, early ones inside txb_write included
 * (the dataset waits there for data written without its lock). */
void txb_set_commit_hook(struct txb *t, void (*fn)(void *), void *arg);

/* libext2fs io_manager over a txb: pass the name txb_io_name() gives to
 * ext2fs_open2() / ext2fs_initialize(). io_channel flush = txb_commit. */
extern io_manager nasd_txb_io_manager;
void txb_io_name(struct txb *t, char *buf, size_t len);

/* Tests only: frees t WITHOUT committing or flushing, as if the process died here. */
void txb_abandon(struct txb *t);
/* Internal (txblock.c -> ext2_io.c): t is going away, its io name stops resolving. */
void txb_io_forget(struct txb *t);
