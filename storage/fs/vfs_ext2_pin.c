/* Engine dataset backend: open fds pin their inode number.
 *
 * fds are inode numbers and the NFS layer keeps them open in its object cache. If a pinned
 * file were deleted and its inode number handed to a new file, the stale fd (and a stale
 * handle hitting the cache) would reach the new file. So while an fd is open, its inode
 * number is not reused: the deleted object stays -ESTALE until the fd is closed. */
#define _GNU_SOURCE
#include "storage/fs/vfs_ext2_int.h"
#include <errno.h>
#include <stdlib.h>

struct e2_pin {
    struct e2_pin *next;
    uint32_t ino, count;
};

static unsigned pin_bucket(uint32_t ino) { return (ino * 2654435761u) >> (32 - E2_PIN_BITS); }

bool e2_pinned(struct e2 *e, ext2_ino_t ino)
{
    for (struct e2_pin *p = e->pins[pin_bucket(ino)]; p; p = p->next)
        if (p->ino == ino) return true;
    return false;
}

void e2_pin(struct e2 *e, ext2_ino_t ino)
{
    if (ino == EXT2_ROOT_INO) return;   /* never freed */
    struct e2_pin **head = &e->pins[pin_bucket(ino)];
    for (struct e2_pin *p = *head; p; p = p->next)
        if (p->ino == ino) { p->count++; return; }
    struct e2_pin *p = malloc(sizeof *p);
    if (!p) return;   /* unpinned: only the reuse protection is lost */
    p->ino = ino;
    p->count = 1;
    p->next = *head;
    *head = p;
    e->npins++;
}

void e2_unpin(struct e2 *e, ext2_ino_t ino)
{
    for (struct e2_pin **pp = &e->pins[pin_bucket(ino)]; *pp; pp = &(*pp)->next) {
        struct e2_pin *p = *pp;
        if (p->ino != ino) continue;
        if (--p->count == 0) {
            *pp = p->next;
            free(p);
            e->npins--;
        }
        return;
    }
}

void e2_pins_free(struct e2 *e)
{
    for (unsigned i = 0; i < (1u << E2_PIN_BITS); i++)
        for (struct e2_pin *p = e->pins[i], *n; p; p = n) { n = p->next; free(p); }
}

/* ext2fs_new_inode, skipping inode numbers still pinned by open fds: they are marked in the
 * in-memory bitmap for the search only (no accounting, nothing written). */
errcode_t e2_new_inode(struct e2 *e, ext2_ino_t dir, int mode, ext2_ino_t *out)
{
    ext2_filsys fs = e->fs;
    ext2_ino_t *skipped = NULL, ino = 0;
    size_t nskip = 0;
    errcode_t err;
    for (;;) {
        err = ext2fs_new_inode(fs, dir, mode, NULL, &ino);
        if (err || !e2_pinned(e, ino)) break;
        if (nskip % 64 == 0) {
            ext2_ino_t *n = realloc(skipped, (nskip + 64) * sizeof *n);
            if (!n) { err = EXT2_ET_NO_MEMORY; break; }
            skipped = n;
        }
        ext2fs_mark_inode_bitmap2(fs->inode_map, ino);
        skipped[nskip++] = ino;
    }
    for (size_t i = 0; i < nskip; i++) ext2fs_unmark_inode_bitmap2(fs->inode_map, skipped[i]);
    free(skipped);
    if (!err) *out = ino;
    return err;
}
