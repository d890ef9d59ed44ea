/* nasd_bdev over a file or block device with pread/pwrite; unmap punches holes. */
#define _GNU_SOURCE
#include "storage/bdev.h"
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

struct file_bdev {
    nasd_bdev b;
    int fd;
    int is_blockdev;
};

static int fb_read(nasd_bdev *b, void *buf, uint64_t off, size_t len)
{
    struct file_bdev *f = (struct file_bdev *)b;
    if (off + len > b->size || off + len < off) return -ERANGE;
    while (len) {
        ssize_t n = pread(f->fd, buf, len, off);
        if (n < 0) { if (errno == EINTR) continue; return -errno; }
        if (n == 0) { memset(buf, 0, len); break; } /* past EOF of a short file reads zeros */
        buf = (char *)buf + n; off += n; len -= n;
    }
    return 0;
}

static int fb_write(nasd_bdev *b, const void *buf, uint64_t off, size_t len, int flags)
{
    struct file_bdev *f = (struct file_bdev *)b;
    if (off + len > b->size || off + len < off) return -ERANGE;
    uint64_t o = off; size_t l = len; const char *p = buf;
    while (l) {
        ssize_t n = pwrite(f->fd, p, l, o);
        if (n < 0) { if (errno == EINTR) continue; return -errno; }
        p += n; o += n; l -= n;
    }
    if ((flags & NASD_IO_FUA) && fdatasync(f->fd) < 0) return -errno;
    return 0;
}

static int fb_flush(nasd_bdev *b)
{
    return fdatasync(((struct file_bdev *)b)->fd) < 0 ? -errno : 0;
}

static int fb_unmap(nasd_bdev *b, uint64_t off, uint64_t len)
{
    struct file_bdev *f = (struct file_bdev *)b;
    if (off + len > b->size || off + len < off) return -ERANGE;
    if (f->is_blockdev) {
        uint64_t r[2] = { off, len };
        return ioctl(f->fd, BLKDISCARD, r) < 0 ? -errno : 0;
    }
    if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) < 0) return -errno;
    return 0;
}

static int fb_mapped(nasd_bdev *b, uint64_t off, uint64_t len, int *is_mapped, uint64_t *run)
{
    struct file_bdev *f = (struct file_bdev *)b;
    if (f->is_blockdev) { *is_mapped = 1; *run = len; return 0; }
    off_t data = lseek(f->fd, off, SEEK_DATA);
    if (data < 0 && errno != ENXIO) return -errno;
    if (data < 0 || (uint64_t)data >= off + len) { *is_mapped = 0; *run = len; return 0; }
    if ((uint64_t)data > off) { *is_mapped = 0; *run = data - off; return 0; }
    off_t hole = lseek(f->fd, off, SEEK_HOLE);
    if (hole < 0) return -errno;
    *is_mapped = 1;
    *run = (uint64_t)hole - off < len ? (uint64_t)hole - off : len;
    return 0;
}

static void fb_destroy(nasd_bdev *b)
{
    struct file_bdev *f = (struct file_bdev *)b;
    close(f->fd);
    free(f);
}

static const struct nasd_bdev_ops file_ops = {
    .read = fb_read, .write = fb_write, .flush = fb_flush, .unmap = fb_unmap,
    .mapped = fb_mapped, .destroy = fb_destroy,
};

nasd_bdev *nasd_file_bdev_open(const char *path, uint64_t size, uint32_t block_size,
                               const char *name, int *err)
{
    if (block_size != 512 && block_size != 4096) { *err = -EINVAL; return NULL; }
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) { *err = -errno; return NULL; }
    struct stat st;
    if (fstat(fd, &st) < 0) { *err = -errno; close(fd); return NULL; }
    uint64_t have = st.st_size;
    int blk = S_ISBLK(st.st_mode);
    if (blk && ioctl(fd, BLKGETSIZE64, &have) < 0) { *err = -errno; close(fd); return NULL; }
    if (!size) size = have;
    if (size > have && (blk || ftruncate(fd, size) < 0)) { *err = blk ? -ENOSPC : -errno; close(fd); return NULL; }
    struct file_bdev *f = calloc(1, sizeof *f);
    if (!f) { *err = -ENOMEM; close(fd); return NULL; }
    f->fd = fd;
    f->is_blockdev = blk;
    f->b.ops = &file_ops;
    f->b.size = size / block_size * block_size;
    f->b.block_size = block_size;
    snprintf(f->b.name, sizeof f->b.name, "%s", name ? name : path);
    /* identity derived from the name so it is stable across restarts */
    XXH128_hash_t h = XXH3_128bits(f->b.name, strlen(f->b.name));
    memcpy(f->b.uuid, &h.high64, 8);
    memcpy(f->b.uuid + 8, &h.low64, 8);
    atomic_init(&f->b.refs, 1);
    return &f->b;
}
