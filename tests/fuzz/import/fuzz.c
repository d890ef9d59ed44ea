/* Fuzz harness: vpool_import (storage/pool) of damaged or crafted member disks. An in-place
 * raidz1 pool of 3 small members is written (journaled and in-place writes, an unmap, a
 * snapshot and its copy-on-write) and its member files are kept as a crash image, taken
 * while the pool is open, after a flush, so that import replays journal batches. Each
 * input patches that image and imports it; the import must fail cleanly or give a pool
 * whose every volume reads back (errors allowed, no crash), which is then scrubbed.
 * Input: byte 0 flags, then patches {member u8, offset u32, length u8, bytes}. The top 2
 * bits of the offset pick the area (labels and owner sector, the journal batches, metadata
 * copy A, or anywhere before the data), the rest is taken modulo its length. Flags: bit 0 fixes
 * the checksums of labels, metadata pages and journal batches after patching (so the
 * fuzzer reaches the checks behind them), bit 1 imports without member 0. FUZZ_LOG=1 in
 * the environment prints the pool's log and each import's result. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include "util/log.h"
#include "storage/pool/vpool_impl.h"
#include "storage/pool/vpool_snap.h"

#define NMEM 3
#define MSIZE (16ull << 20)
#define BLK (64u << 10)

static char paths[NMEM][96];
static uint8_t *image[NMEM];         /* the crash image of each member */
static uint8_t *nonzero[NMEM];       /* per BLK of it: holds data (the rest stays a hole) */
static uint64_t meta_end, jnl_size, jnl_used, meta_pages, meta_off[2];
static uint8_t uuid[16];

/* Length of the journal batch at journal offset pos of member image m, 0 where none is.
 * Header: {magic, pool[16], seq @24, nrec, hdr_pages @36, data_pages @40, pad, csum @48}. */
static uint64_t batch_len(const uint8_t *m, uint64_t pos)
{
    if (pos + VP_SECTOR > jnl_size) return 0;
    const uint8_t *b = m + VP_JOURNAL_OFF + pos;
    uint64_t len = ((uint64_t)*(const uint32_t *)(b + 36) + *(const uint32_t *)(b + 40)) * VP_SECTOR;
    return *(const uint64_t *)b == 0x4c4e524a4c505644ull && len <= jnl_size - pos ? len : 0;
}

static void die(const char *what) { fprintf(stderr, "import fuzz setup: %s\n", what); abort(); }

static void write_some(struct vpool *p)
{
    int err;
    nasd_bdev *v = vpool_vol_open(p, "v", 4096, &err), *w;
    uint8_t *b = aligned_alloc(4096, 256 << 10);
    if (!v || !b) die("open v");
    for (size_t i = 0; i < (256 << 10); i++) b[i] = (uint8_t)(i * 7 + i / 4096);
    if (nasd_bdev_write(v, b, 0, 256 << 10, 0) || nasd_bdev_flush(v)) die("write");           /* in place */
    if (nasd_bdev_write(v, b, 1 << 20, 8192, NASD_IO_FUA)) die("fua");                     /* journaled data */
    if (nasd_bdev_unmap(v, 4096, 4096) || nasd_bdev_flush(v)) die("unmap");
    nasd_bdev_put(v);
    if (vpool_snap_create(p, "v", "s1")) die("snapshot");
    v = vpool_vol_open(p, "v", 4096, &err);
    if (!v || nasd_bdev_write(v, b, 8192, 4096, 0) || nasd_bdev_flush(v)) die("cow write");  /* copy-on-write */
    nasd_bdev_put(v);
    w = vpool_vol_open(p, "w", 4096, &err);
    if (!w || nasd_bdev_write(w, b, 0, 64 << 10, NASD_IO_FUA)) die("write w");
    nasd_bdev_put(w);
    free(b);
}

static void setup(void)
{
    nasd_log_level = getenv("FUZZ_LOG") ? LOG_INFO : -1;   /* damaged pools complain, by design */
    char dir[64];
    snprintf(dir, sizeof dir, "%s/nasd-fuzz-import-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir)) die("mkdtemp");
    struct vpool_member_spec ms[NMEM];
    for (int i = 0; i < NMEM; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/m%d", dir, i);
        ms[i] = (struct vpool_member_spec){ paths[i], MSIZE };
    }
    struct vpool_opts o = { .cache_bytes = 4ull << 20, .dirty_bytes = 2ull << 20 };
    struct vpool *p;
    char err[256];
    if (vpool_create("fz", VPOOL_RAIDZ1, ms, NMEM, &o, &p, err, sizeof err)) die(err);
    if (vpool_vol_create(p, "v", 2ull << 20, VPOOL_VOL_THIN) || vpool_vol_create(p, "w", 1ull << 20, 0)) die("volumes");
    write_some(p);
    meta_end = p->data_off;
    jnl_size = p->jnl_size;
    meta_pages = p->meta_pages;
    meta_off[0] = p->meta_off[0];
    meta_off[1] = p->meta_off[1];
    memcpy(uuid, p->uuid, 16);
    for (int i = 0; i < NMEM; i++) {   /* the crash image: what the files hold now */
        int fd = open(paths[i], O_RDONLY);
        image[i] = malloc(MSIZE);
        nonzero[i] = calloc(MSIZE / BLK, 1);
        if (fd < 0 || !image[i] || !nonzero[i] || pread(fd, image[i], MSIZE, 0) != (ssize_t)MSIZE) die("image");
        close(fd);
        for (uint64_t b = 0; b < MSIZE / BLK; b++)
            for (uint64_t k = 0; k < BLK && !nonzero[i][b]; k += 8)
                nonzero[i][b] = *(uint64_t *)(image[i] + b * BLK + k) != 0;
    }
    for (int i = 0; i < NMEM; i++) {   /* where the batches to replay are: small commits write two members */
        uint64_t used = 0;
        for (uint64_t len; (len = batch_len(image[i], used));) used += len;
        if (used > jnl_used) jnl_used = used;
    }
    if (!jnl_used) die("no journal batch to replay");
    vpool_close(p);
}

/* member files = image (holes where it is zero) */
static void restore(void)
{
    for (int i = 0; i < NMEM; i++) {
        int fd = open(paths[i], O_RDWR | O_CREAT, 0600);
        if (fd < 0 || ftruncate(fd, 0) || ftruncate(fd, (off_t)MSIZE)) die("restore");
        for (uint64_t b = 0; b < MSIZE / BLK; b++)
            if (nonzero[i][b] && pwrite(fd, image[i] + b * BLK, BLK, (off_t)(b * BLK)) != BLK) die("restore write");
        close(fd);
    }
}

static void fix_checksums(uint8_t *m)
{
    for (uint64_t off = VP_LABEL_A; off <= VP_LABEL_B; off += VP_LABEL_B) {
        struct vp_label *l = (struct vp_label *)(m + off);
        if (l->magic != VP_LABEL_MAGIC) continue;
        size_t n = l->hdr_size == VP_LABEL_SIZE_V1 || l->hdr_size == VP_LABEL_SIZE_V2 ? l->hdr_size : sizeof *l;
        l->csum = 0;
        l->csum = XXH3_64bits(l, n);
    }
    for (int c = 0; c < 2; c++)   /* metadata pages: 32 byte header {magic, index, gen, csum, pool} */
        for (uint64_t pg = 0; pg < meta_pages; pg++) {
            uint8_t *b = m + meta_off[c] + pg * VP_SECTOR;
            if (*(uint32_t *)b != 0x4154454du) continue;
            *(uint64_t *)(b + 16) = 0;
            *(uint64_t *)(b + 16) = XXH3_64bits(b, VP_SECTOR);
        }
    for (uint64_t pos = 0, len; (len = batch_len(m, pos)); pos += len) {
        uint8_t *b = m + VP_JOURNAL_OFF + pos;
        *(uint64_t *)(b + 48) = 0;
        *(uint64_t *)(b + 48) = XXH3_64bits_withSeed(b, len, *(uint64_t *)(b + 24));   /* seed: seq */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!image[0]) setup();
    if (!size) return 0;
    uint8_t flags = data[0];
    /* patches go into a scratch copy of the metadata part of each image */
    static uint8_t *scratch[NMEM];
    for (int i = 0; i < NMEM; i++) {
        if (!scratch[i] && !(scratch[i] = malloc(meta_end))) abort();
        memcpy(scratch[i], image[i], meta_end);
    }
    bool touched[NMEM] = { false };
    for (size_t pos = 1; pos + 6 <= size;) {
        int m = data[pos] % NMEM;
        uint32_t off;
        memcpy(&off, data + pos + 1, 4);
        size_t len = data[pos + 5];
        pos += 6;
        if (len > size - pos) len = size - pos;
        uint64_t area[4][2] = { { 0, VP_JOURNAL_OFF }, { VP_JOURNAL_OFF, jnl_used }, { meta_off[0], meta_pages * VP_SECTOR },
                                { 0, meta_end } };
        off = (uint32_t)(area[off >> 30][0] + (off & 0x3fffffffu) % area[off >> 30][1]);
        if (len > meta_end - off) len = meta_end - off;
        memcpy(scratch[m] + off, data + pos, len);
        touched[m] = true;
        pos += len;
    }
    restore();
    for (int i = 0; i < NMEM; i++) {
        if (!touched[i]) continue;
        if (flags & 1) fix_checksums(scratch[i]);
        int fd = open(paths[i], O_RDWR);
        if (fd < 0 || pwrite(fd, scratch[i], meta_end, 0) != (ssize_t)meta_end) die("patch");
        close(fd);
    }
    const char *ps[NMEM];
    int n = 0;
    for (int i = (flags & 2) ? 1 : 0; i < NMEM; i++) ps[n++] = paths[i];
    struct vpool_opts o = { .cache_bytes = 4ull << 20, .dirty_bytes = 2ull << 20 };
    struct vpool *p;
    char err[256];
    int rc = vpool_import(ps, n, &o, &p, err, sizeof err);
    if (getenv("FUZZ_LOG")) fprintf(stderr, "import: %s\n", rc ? err : "ok");   /* FUZZ_LOG=1: for triage */
    if (rc) return 0;
    char names[8][64];
    uint64_t sizes[8];
    int nv = vpool_vol_list(p, names, sizes, 8);
    uint8_t *buf = malloc(1 << 20);
    for (int i = 0; i < nv && buf; i++) {   /* every volume reads back, errors allowed */
        int e;
        nasd_bdev *b = vpool_vol_open(p, names[i], 4096, &e);
        if (!b) continue;
        uint64_t end = b->size < (16ull << 20) ? b->size : 16ull << 20;   /* a crafted size may be huge (thin) */
        for (uint64_t off = 0; off < end; off += 1 << 20)
            (void)nasd_bdev_read(b, buf, off, end - off < (1 << 20) ? (size_t)(end - off) : 1 << 20);
        nasd_bdev_put(b);
    }
    free(buf);
    if (vpool_scrub_start(p) == 0) vpool_wait_background(p);
    vpool_close(p);
    return 0;
}
