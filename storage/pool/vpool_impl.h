#pragma once
/* Internal structures of the pool engine (storage/vpool_*.c). Not a public API.
 *
 * Geometry: the unit of everything is a 4 KiB sector. Members are split into 64 KiB
 * chunks; "row" r is chunk r on every member. A pool sector s lives in pool chunk
 * s/16 at offset w = s%16:
 *   stripe: row = chunk/n, column = chunk%n (member = column)
 *   mirror: row = chunk, every member holds a copy
 *   raidz1: row = chunk/(n-1), parity member = row%n, data column c on member
 *           (row%n + 1 + c) % n. Parity group = the sectors at (row, w) of all members.
 * Volumes are mapped in 1 MiB allocation units (AU = 16 chunks); checksums are per
 * 4 KiB sector so a 4K random read touches exactly one sector on one member.
 *
 * Member on-disk layout: label A @0, label B @128K, journal @256K, metadata copy A,
 * metadata copy B, data area (64 KiB aligned). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/uio.h>
#include <time.h>
#include "storage/pool/vpool.h"
#include "util/wait_hook.h"

#define VP_SECTOR      4096u
#define VP_CHUNK_SECT  16u
#define VP_CHUNK       (VP_SECTOR * VP_CHUNK_SECT)
#define VP_AU_SECT     256u
#define VP_AU_BYTES    (VP_SECTOR * VP_AU_SECT)
#define VP_MAXM        VPOOL_MAX_MEMBERS
#define VP_MAX_VOLS    248
#define VP_ROW_LOCKS   1024
#define VP_DIRECT_MIN  (32u << 10)   /* stripe writes from this size go in place (vpool_direct.c) */
#define VP_IOV_MAX     1024   /* iovecs per member write (Linux IOV_MAX) */

#define VP_LABEL_A     0ull
#define VP_LABEL_B     (128ull << 10)
#define VP_JOURNAL_OFF (256ull << 10)

/* checksum table values: 0 = never written (reads as zeros), MARK = sector belongs
 * to a compressed chunk and holds no data of its own. Real checksums avoid both. */
#define VP_CSUM_ZERO   0u
#define VP_CSUM_MARK   0xffffffffu

/* metadata pages: 32 byte header + payload */
#define VP_MP_PAYLOAD   (VP_SECTOR - 32)
#define VP_CSUM_PER_PG  (VP_MP_PAYLOAD / 4)      /* 1016 */
#define VP_AU_PER_PG    (VP_MP_PAYLOAD / 16)     /* 254 */
#define VP_VOL_PER_PG   (VP_MP_PAYLOAD / 128)    /* 31 */
#define VP_VOLTAB_PAGES (VP_MAX_VOLS / VP_VOL_PER_PG)
#define VP_SNAP_PER_PG  (VP_MP_PAYLOAD / 128)    /* 31 */
#define VP_SNAPTAB_PAGES 132
#define VP_META_REGIONS 16384   /* metadata regions (a bit each in the label) */
#define VP_MAX_SNAPS    4092                     /* VP_SNAPTAB_PAGES * VP_SNAP_PER_PG */
#define VP_GEN_LIVE     UINT32_MAX               /* "generation" of a volume's live map */
#define VP_FMT_DEFAULT   2   /* on-disk format (label version) 2: AU birth/death + snapshot table */
#define VP_FMT_LOG       3   /* 3: log-structured raidz1 (vpool_xlate.c) */

struct vp_cache;
struct vp_par;
struct vp_job { void *(*fn)(void *); void *arg; };

/* where commit time goes (for bench-vpool -v): wall ns and bytes */
struct vp_prof {
    _Atomic uint64_t commits, jnl_ns, apply_ns, sync_ns, jnl_bytes, jnl_data_bytes, inplace_bytes;
    _Atomic uint64_t checkpoints, meta_bytes, ckpt_ns;   /* vp_checkpoint: count, pages written, time */
};
static inline uint64_t vp_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

struct vp_member {
    char path[1024];
    int fd;
    _Atomic int state;            /* enum vpool_member_state */
    uint8_t guid[16];
    uint64_t size;                /* bytes of the backing file/device */
    bool direct;                  /* fd has O_DIRECT: unaligned buffers go through a bounce buffer */
    _Atomic uint64_t rd_err, wr_err, ck_err;
    uint8_t *_Atomic map;         /* read-only mapping for small reads (vpool_map.c), NULL: pread */
    uint8_t *map_base;            /* its range, kept reserved while readers may use it */
    uint64_t map_len;
};

/* AU owner: vol_id 0 = free. Snapshots (vpool_snap.c): an AU is born in generation
 * birth and dies (is replaced or unmapped while a snapshot still holds it) in death
 * (0 = alive). Snapshot generation g of volume vol_id holds it iff birth <= g < death. */
struct vp_au { uint32_t vol_id, vol_ext, birth, death; };
static inline bool vp_au_held(const struct vp_au *a, uint32_t g)
{
    return a->birth <= g && (a->death == 0 || g < a->death);
}

struct vp_snap {                  /* a frozen point of a volume (vol_id); slot index in snaps[] */
    uint32_t vol_id, gen;
    uint64_t ctime, size;
    uint8_t uuid[16];
    char name[64];
    atomic_int open_count;        /* read-only bdevs over it */
};

struct vp_vol {
    uint32_t id;                  /* 1-based, index+1 in vols[] */
    char name[64];
    uint64_t size;
    uint32_t flags;
    uint8_t uuid[16];
    /* volume AU index -> pool AU + 1 (0 = unallocated). Entries are read lock-free;
     * the array is replaced on resize under alloc_lock, old arrays live until the
     * volume is freed so a racing reader never touches freed memory. */
    uint32_t *map;
    uint64_t map_len;
    uint64_t mapped;              /* entries of map that are set (alloc_lock) */
    struct vp_oldmap { struct vp_oldmap *next; uint32_t *map; } *old_maps;
    atomic_int open_count;
    pthread_mutex_t bdev_lock;    /* open bdevs list, for live size updates */
    struct vp_vbdev *bdevs;
    /* snapshots: writers hold snap_lock shared; snapshot create and rollback exclusive */
    pthread_rwlock_t snap_lock;
    uint32_t last_snap;           /* newest snapshot generation of this volume, 0 = none */
    uint32_t origin_id, origin_gen;   /* clone: the snapshot it was cloned from */
    uint32_t *origin_map;         /* clone: that snapshot's map (immutable), origin_len entries */
    uint64_t origin_len;
    struct vp_snap *view_of;      /* transient read-only view of this snapshot (not in vols[]) */
};
static inline uint32_t vp_map_get(struct vp_vol *v, uint64_t vext)
{
    /* length first: a grown length is only published after the grown array */
    uint64_t len = __atomic_load_n(&v->map_len, __ATOMIC_ACQUIRE);
    uint32_t *m = __atomic_load_n(&v->map, __ATOMIC_ACQUIRE);
    return vext < len ? __atomic_load_n(&m[vext], __ATOMIC_ACQUIRE) : 0;
}

/* journal record (also the in-RAM pending metadata delta) */
/* ALLOC: a32 volume, a AU, b = vext | birth << 32. LIFE: a AU, a32 its death generation.
 * VP_REC_INTENT: new checksum of a sector written in place without its data in the
 * journal (see vpool_intent.c) */
/* VP_REC_REGION: region a (VP_REGION_SECT pool sectors) may hold direct writes whose
 * checksums are not journaled yet (see vpool_direct.c) */
enum { VP_REC_WRITE = 1, VP_REC_CSUM, VP_REC_ZERO, VP_REC_ALLOC, VP_REC_FREE, VP_REC_LIFE, VP_REC_INTENT = 7,
       VP_REC_REGION = 8, VP_REC_SYNCED = 9, VP_REC_LOC = 10 };
/* VP_REC_LOC (format 3): pool sector a now lives at physical sector b (low 32 bits),
 * checksum a32; replay keeps it only if the data there matches. A snapshot copy's
 * record also names its source (high 32 bits: source pool sector + 1): if the copy's
 * data did not reach the disk, replay writes the source's data there instead, so the
 * copy needs no member sync before its records (the source, held by the snapshot, does
 * not change and its locations stay until the next checkpoint). */
/* VP_REC_SYNCED: every batch up to seq a is in place and synced (its intents' data is
 * what the members hold), written before a direct write may overwrite such data */
#define VP_REGION_SECT 4096u      /* 16 MiB of pool sectors per write-intent region */
#define VP_DLIST_MAX   16384u
#define VP_COW_PEND_MAX (1u << 20) /* pending records (24 MiB) past which a snapshot copy commits first */
struct vp_rec { uint32_t type, a32; uint64_t a, b; };
static inline uint64_t vp_loc_phys(const struct vp_rec *r) { return r->b & 0xffffffffu; }
static inline uint64_t vp_loc_src1(const struct vp_rec *r) { return r->b >> 32; }   /* source + 1, 0 = none */

/* one sector to be written by a commit */
/* one sector to be written by a commit; intent: journal only its checksum */
struct vp_wsect { uint64_t sect; uint32_t csum; uint32_t intent; uint8_t *data; uint64_t dgen; };

struct vpool {
    char name[64];
    uint8_t uuid[16];
    enum vpool_layout layout;
    int n;                        /* members */
    int ndata;                    /* data columns per row (raidz: n-1, stripe: n, mirror: 1) */
    struct vp_member m[VP_MAXM];

    /* geometry (identical on all members) */
    uint64_t member_size, jnl_size, meta_off[2], meta_pages, data_off, rows, n_au, n_sect;

    /* metadata in RAM */
    uint32_t *csum;               /* n_sect entries (mmap: pages appear when touched) */
    struct vp_au *au;             /* n_au entries */
    _Atomic uint8_t *meta_dirty;  /* meta_pages flags */
    /* Metadata regions (meta_rpp pages each) written at least once; the others are empty
     * and never read or written: creating a pool writes only its volume and snapshot tables.
     * meta_rpp 0 (pools made before): every page was written at creation. commit_lock. */
    uint32_t meta_rpp;
    uint8_t meta_init[VP_META_REGIONS / 8];
    struct vp_vol *vols[VP_MAX_VOLS];
    /* slots whose volume was destroyed since the last checkpoint: records since then may
     * still name its id, so a new volume takes one only after a checkpoint (commit_lock) */
    bool vol_gone[VP_MAX_VOLS];
    pthread_rwlock_t vol_lock;    /* protects vols[] array and vol sizes/maps (realloc on resize) */
    struct vp_snap *snaps[VP_MAX_SNAPS];   /* changed under vol_lock (write) + commit_lock */
    uint32_t snap_cur;            /* generation new AUs are born in (alloc_lock) */
    uint32_t fmt;                 /* on-disk format = label version (1: no snapshots) */
    pthread_mutex_t snap_mu;      /* serialises snapshot/clone/rollback/volume destroy */

    pthread_mutex_t alloc_lock;
    uint64_t au_cursor, au_used;  /* au_cursor: every unit below it is in use */
    uint64_t thick_unalloc;       /* AUs thick volumes may still claim (alloc_lock) */

    pthread_mutex_t pend_lock;    /* metadata deltas not yet in the journal */
    struct vp_rec *pend;
    size_t npend, pend_cap;

    /* commit / journal / checkpoint: serialised by commit_lock */
    pthread_mutex_t commit_lock;
    uint64_t gen, seq, jpos;
    _Atomic uint64_t write_gen, durable_gen;
    _Atomic int need_checkpoint;  /* a member changed state */
    _Atomic int unsynced;         /* intent-only data written in place (format 3: log data or records) since the last member sync */
    bool unsynced_direct;         /* ... only by direct writes, all in dlist (commit_lock) */
    /* sectors journaled with their data since the last checkpoint (bit per sector,
     * commit_lock): replay rewrites that data in place, so until the checkpoint such a
     * sector is journaled with its data again, never as an intent replay would clobber */
    uint64_t *jbits;
    bool jbits_any;
    /* write-intent regions logged since the last checkpoint (bit per region, commit_lock) */
    uint64_t *rbits;
    uint64_t nregions;
    /* sectors written by direct writes since the last checkpoint whose checksums no
     * durable commit has journaled yet (bit per sector; commit_lock). Up to
     * VP_DLIST_MAX are also listed: a durable commit journals them as intents, and
     * with more it checkpoints instead (cheaper than one record per sector). */
    uint64_t *dbits, *dlist;
    size_t dlist_n;
    bool dlist_over;
    uint64_t synced_seq;          /* journal batches up to this are synced in place (commit_lock) */
    /* pend holds the switch of a snapshot copy-on-write whose copy is in place but not
     * synced: the next commit syncs the members before journaling pend (commit_lock) */
    bool cow_unsynced;
    /* pend holds a FREE: that unit is not free on disk yet, so nothing may be written
     * into it before the FREE is journaled (import would take the data as the old
     * owner's: write-intent regions accept what they find). commit_lock */
    bool frees_pending;
    bool synced_unlogged;         /* ... and no VP_REC_SYNCED says so yet */

    pthread_mutex_t row_lock[VP_ROW_LOCKS];
    pthread_mutex_t part_lock[64];   /* sub-4K read-modify-write of one logical sector */

    struct vp_cache *cache;
    struct vp_par *par;           /* member I/O workers (vpool_par.c) */
    struct vp_par *rpar;          /* workers that verify half of a large read */
    bool direct_io;               /* members opened O_DIRECT: the cache is the only read cache */
    /* held shared by a write while it puts its sectors in the cache, exclusive by a
     * commit while it collects them: a commit takes whole requests (whole parity rows
     * for large writes), never a random part of one in progress */
    pthread_rwlock_t put_lock;
    uint8_t *parena;              /* commit_lock: parity scratch of vp_apply_writes / vp_xl_write, kept */
    size_t parena_cap;            /* bytes */
    uint8_t *rarena;              /* commit_lock: columns read ahead by vp_apply_writes, the log cleaner's copies, kept */
    size_t rarena_cap;
    uint64_t dirty_max;           /* sectors: writers commit themselves above this */
    uint64_t dirty_soft;          /* sectors: the background flusher starts above this */
    uint64_t dirty_since_ns;      /* flusher: when it first saw dirty data after commit no. dirty_since_commit */
    uint64_t dirty_since_commit;
    uint64_t idle_gen;            /* flusher: write_gen at its last tick */
    unsigned idle_ticks;          /* flusher: ticks in a row that saw no write */
    unsigned flush_fails, flush_skip;   /* flusher: failed timed commits in a row, ticks to wait */

    /* background flusher: commits dirty data early so writers rarely wait */
    pthread_t flusher;
    bool flusher_on;
    pthread_mutex_t flush_mu;
    pthread_cond_t flush_cv;
    bool flush_stop, flush_kick;
    _Atomic int flush_pending;

    /* background scrub / resilver */
    pthread_mutex_t bg_lock;
    pthread_t bg_thread;
    bool bg_active;               /* thread exists (joinable) */
    _Atomic int bg_stop;
    int bg_kind;                  /* 1 scrub, 2 resilver */
    _Atomic int scrub_running, resilver_running;
    _Atomic uint64_t bg_done, bg_total;
    _Atomic uint64_t bg_rebuilt;   /* rows rebuilt by the last (or running) resilver */
    _Atomic uint64_t scrub_repaired, scrub_unrepairable, scrub_started, scrub_finished;
    uint32_t resilver_mask;       /* members to rebuild */
    uint8_t *changed_au;          /* physical AUs written while some member was offline */
    int changed_any;              /* any changed_au set since the last offline */

    _Atomic uint64_t repaired, unrepairable;
    struct vp_prof prof;
    struct vp_sim *sim;           /* power-loss simulation (tests only), NULL normally */
    struct vp_xl *xl;             /* format 3: the translation layer (vpool_xlate.c), else NULL */
    _Atomic int closed;
    atomic_int refs;
};

/* ---- geometry helpers ---- */
/* metadata layout of the pool's format */
static inline uint64_t vp_au_per_pg(const struct vpool *p) { return p->fmt >= 2 ? VP_AU_PER_PG : VP_MP_PAYLOAD / 8; }
static inline uint64_t vp_snaptab_pages(const struct vpool *p) { return p->fmt >= 2 ? VP_SNAPTAB_PAGES : 0; }
static inline bool vp_is_log(const struct vpool *p) { return p->fmt >= VP_FMT_LOG; }

static inline uint64_t vp_row_of(const struct vpool *p, uint64_t sect, int *col)
{
    uint64_t chunk = sect / VP_CHUNK_SECT;
    switch (p->layout) {
    case VPOOL_STRIPE: *col = (int)(chunk % p->n); return chunk / p->n;
    case VPOOL_MIRROR: *col = 0; return chunk;
    default:           *col = (int)(chunk % (p->n - 1)); return chunk / (p->n - 1);
    }
}
static inline int vp_parity_member(const struct vpool *p, uint64_t row) { return (int)(row % p->n); }
static inline int vp_col_member(const struct vpool *p, uint64_t row, int col)
{
    if (p->layout == VPOOL_RAIDZ1) return (int)((row % p->n + 1 + col) % p->n);
    return col;
}
/* inverse: member + row -> data column, -1 for the parity column */
static inline int vp_member_col(const struct vpool *p, uint64_t row, int m)
{
    if (p->layout != VPOOL_RAIDZ1) return m;
    int pm = vp_parity_member(p, row);
    if (m == pm) return -1;
    return (int)((m - pm - 1 + p->n) % p->n);
}
/* units of changed_au: the physical data area in AUs (format 3 has more than n_au) */
static inline uint64_t vp_phys_aus(const struct vpool *p) { return p->rows * p->ndata / (VP_AU_SECT / VP_CHUNK_SECT); }
static inline uint64_t vp_row_sect0(const struct vpool *p, uint64_t row, int col)
{
    if (p->layout == VPOOL_MIRROR) return row * VP_CHUNK_SECT;
    return (row * p->ndata + col) * VP_CHUNK_SECT;
}
static inline uint64_t vp_moff(const struct vpool *p, uint64_t row, unsigned w)
{
    return p->data_off + (row * VP_CHUNK_SECT + w) * (uint64_t)VP_SECTOR;
}
static inline pthread_mutex_t *vp_rowlock(struct vpool *p, uint64_t row)
{
    return &p->row_lock[(row * 0x9E3779B97F4A7C15ull >> 40) % VP_ROW_LOCKS];
}
static inline bool vp_readable(struct vpool *p, int m) { return atomic_load(&p->m[m].state) == VPOOL_M_ONLINE; }
static inline bool vp_writable(struct vpool *p, int m)
{
    int s = atomic_load(&p->m[m].state);
    return s == VPOOL_M_ONLINE || s == VPOOL_M_RESILVERING;
}
static inline bool vp_all_online(struct vpool *p)
{
    for (int m = 0; m < p->n; m++) if (atomic_load(&p->m[m].state) != VPOOL_M_ONLINE) return false;
    return true;
}
static inline uint32_t vp_csum_get(struct vpool *p, uint64_t s) { return __atomic_load_n(&p->csum[s], __ATOMIC_ACQUIRE); }
static inline bool vp_has_data(uint32_t cs) { return cs != VP_CSUM_ZERO && cs != VP_CSUM_MARK; }
/* words at any address: callers' buffers (a degraded read rebuilds into the reader's) need
 * not be 8-byte aligned (UBSan in test_vpool_crash: a 4-aligned buffer) */
typedef uint64_t vp_u64_any __attribute__((aligned(1), may_alias));
static inline void vp_xor_into(uint8_t *dst, const uint8_t *src, size_t len)
{
    vp_u64_any *d = (vp_u64_any *)dst;
    const vp_u64_any *s = (const vp_u64_any *)src;
    for (size_t i = 0; i < len / 8; i++) d[i] ^= s[i];
}
static inline bool vp_all_zero(const uint8_t *b, size_t len)   /* len a multiple of 8 */
{
    const vp_u64_any *w = (const vp_u64_any *)b;
    for (size_t i = 0; i < len / 8; i++) if (w[i]) return false;
    return true;
}
/* bit i of a bitmap of uint64_t words (jbits, dbits, rbits) */
static inline bool vp_bit(const uint64_t *b, uint64_t i) { return b[i / 64] >> (i % 64) & 1; }
static inline void vp_bit_set(uint64_t *b, uint64_t i) { b[i / 64] |= 1ull << (i % 64); }
uint32_t vp_csum_of(const void *sector);
static inline bool vp_sect_ok(uint32_t cs, const uint8_t *data) { return vp_csum_of(data) == cs; }
int  vp_cmp_u64(const void *a, const void *b);   /* qsort of uint64_t (vpool_intent.c) */
void vp_csum_set(struct vpool *p, uint64_t s, uint32_t v);   /* marks the metadata page dirty */
void vp_loc_dirty(struct vpool *p, uint64_t s);   /* format 3: s's location page */
void vp_csum_clear_only(struct vpool *p, uint64_t s);   /* no location drop: alloc_lock only */
void vp_au_set(struct vpool *p, uint64_t au, uint32_t vol_id, uint32_t vol_ext);   /* birth/death 0 */
void vp_au_set_life(struct vpool *p, uint64_t au, uint32_t birth, uint32_t death);
void vp_snaptab_dirty(struct vpool *p, unsigned slot);
/* Writes the snapshot table page holding slot now, both copies on every member (a new
 * snapshot: the journal since the last checkpoint replays on top of it at import). These
 * three checkpoint when a member failed the write (need_checkpoint); commit_lock held. */
int  vp_snaptab_write(struct vpool *p, unsigned slot);
int  vp_voltab_write(struct vpool *p, unsigned slot);   /* the same for the volume table */
int  vp_vol_shrink(struct vpool *p, struct vp_vol *v, uint64_t size);   /* rollback: commit_lock held (vpool_vol.c) */
/* A destroyed volume: its volume table page, then the snapshot table pages of the slots
 * held[] names (its snapshots, out of the table); fails only if the volume page or that
 * checkpoint did. */
int  vp_vol_gone_write(struct vpool *p, unsigned vslot, struct vp_snap *const *held);
/* A free volume slot (vol_lock held for writing), -1 if none; *ckpt: it is one of
 * vol_gone, so the caller checkpoints before the new volume's page. */
int  vp_vol_slot(struct vpool *p, bool *ckpt);
void vp_set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The commit lock may be held through member syncs: an NFS leader waiting for it hands
 * its network loop over first (util/wait_hook.h). */
static inline void vp_commit_lock(struct vpool *p) { nasd_lock_handing_off(&p->commit_lock); }

/* ---- member I/O (vpool_label.c) ---- */
int  vp_mread(struct vpool *p, int m, void *buf, size_t len, uint64_t off);  /* counts errors, may fault member */
/* ---- member mappings for small reads (vpool_map.c) ---- */
#define VP_MAP_READ_MAX (2 * VP_SECTOR)   /* larger reads: pread (one call, the kernel's readahead) */
void vp_map_member(struct vpool *p, int m);
void vp_unmap_member(struct vpool *p, int m);
int  vp_map_read(struct vp_member *mb, void *buf, size_t len, uint64_t off);
/* vp_mread for data whose every sector the caller checks against its checksum: small
 * reads come from the mapping, where a page cut off by a truncation inside it reads as
 * zeros instead of an error (the checksum then catches it). Parity, journal and label
 * reads, which nothing checks that way, go through vp_mread. */
int  vp_mread_checked(struct vpool *p, int m, void *buf, size_t len, uint64_t off);
uint64_t vp_memory_bytes(void);   /* RAM, or the cgroup's limit when lower (vpool_core.c) */
/* XORs the sector at member offset off of every member not in the skip mask into acc (tmp:
 * a sector of scratch); false if one of them cannot be read */
static inline bool vp_xor_members(struct vpool *p, uint64_t off, uint32_t skip, uint8_t *acc, uint8_t *tmp)
{
    for (int m = 0; m < p->n; m++) {
        if (skip >> m & 1) continue;
        if (!vp_readable(p, m) || vp_mread(p, m, tmp, VP_SECTOR, off) < 0) return false;
        vp_xor_into(acc, tmp, VP_SECTOR);
    }
    return true;
}
int  vp_mwrite(struct vpool *p, int m, const void *buf, size_t len, uint64_t off);
int  vp_mwritev(struct vpool *p, int m, const struct iovec *iov, int cnt, uint64_t off);  /* cnt <= VP_IOV_MAX */
void vp_member_fault(struct vpool *p, int m, const char *why);
/* one more checksum error on member m; past VP_CKSUM_FAULT_LIMIT the member is faulted
 * unless that would fault the pool (its data is then still the best there is) */
#define VP_CKSUM_FAULT_LIMIT 64
void vp_member_ck_err(struct vpool *p, int m);
int  vp_sync_members(struct vpool *p);   /* fdatasync all writable members */
int  vp_msync(struct vpool *p, int m);   /* fdatasync one member, -EIO on failure */
void vp_set_direct(struct vpool *p, int m);   /* O_DIRECT on member m's fd (if the file system allows) */
/* iov as one 4 KiB aligned buffer when an O_DIRECT member needs it: *bounce is set
 * (free it) and *one describes it; else returns the iov unchanged. */
const struct iovec *vp_iov_for_direct(const struct iovec *iov, int *cnt, size_t len, struct iovec *one, void **bounce);

/* ---- power-loss simulation for tests (vpool_sim.c) ---- */
struct vp_sim *vp_sim_attach(struct vpool *p);
void vp_sim_kill(struct vp_sim *s);      /* from now on member writes and syncs fail */
void vp_sim_kill_after(struct vp_sim *s, long writes);   /* dies at the (writes+1)th member write */
bool vp_sim_died(struct vp_sim *s);
void vp_sim_kill_member(struct vp_sim *s, int m);   /* one member fails all I/O with EIO */
void vp_sim_kill_member_after(struct vp_sim *s, int m, long writes);   /* ... from its (writes+1)th write on */
void vp_sim_kill_at_sync(struct vp_sim *s, long syncs);   /* the machine dies in its (syncs+1)th member sync */
int  vp_sim_before_read(struct vpool *p, int m);
int  vp_sim_before_write(struct vpool *p, int m, uint64_t off, uint64_t len);
int  vp_sim_synced(struct vpool *p, int m, uint64_t off, uint64_t len);
/* after the pool is closed: randomly undo unsynced writes (seed VP_SIM_UNDO_ALL: all
 * of them); frees s */
#define VP_SIM_UNDO_ALL 0
int  vp_sim_rollback(struct vp_sim *s, const char *const *paths, int n, uint64_t seed, uint64_t *undone);
enum vpool_state vp_pool_state(struct vpool *p);

/* ---- labels / metadata / checkpoint (vpool_label.c, vpool_meta.c) ---- */
int  vp_geometry(struct vpool *p, uint64_t member_size);
int  vp_write_labels(struct vpool *p, uint32_t only_mask);
int  vp_wipe_labels(struct vpool *p);
#define VP_LABEL_MAGIC   0x314c5056445341ull   /* "ASDVPL1" */
#define VP_LABEL_VERSION 3   /* newest known */
#define VP_LABEL_VERSION_MIN 1   /* 1: 8-byte AU entries, no snapshot table (imported, no snapshots) */
extern int vp_test_create_fmt;   /* tests: format of pools vpool_create makes (0: VP_FMT_DEFAULT) */
extern unsigned vp_test_meta_regions;   /* tests: regions of pools vpool_create makes (0: VP_META_REGIONS) */
extern unsigned vp_test_meta_batch;     /* tests: metadata pages written per batch (0: 16384) */
extern unsigned vp_test_meta_nomem;     /* tests: the next that many checkpoints' page writes fail (ENOMEM) */
struct vp_label {                 /* at the start of a 4 KiB label sector, little endian */
    uint64_t magic;
    uint32_t version, hdr_size;
    uint8_t pool_uuid[16];
    char name[64];
    uint32_t layout, nmembers, member_idx;
    uint32_t meta_rpp;            /* pages per metadata region; 0 (labels before it): all written */
    uint8_t guids[VP_MAXM][16];
    uint8_t mstate[VP_MAXM];
    uint64_t gen, ckpt_seq, member_size, jnl_size, meta_pages, data_off, rows, n_au;
    uint64_t csum;                /* XXH3-64 of this struct (hdr_size bytes) with csum = 0 */
    /* error counters of every member (read, write, checksum) as of this label; labels
     * written before they existed end at errs (hdr_size VP_LABEL_SIZE_V1) */
    uint64_t errs[VP_MAXM][3];
    uint8_t meta_init[VP_META_REGIONS / 8];   /* regions written at least once (vpool_meta.c) */
};
#define VP_LABEL_SIZE_V1 offsetof(struct vp_label, errs)
#define VP_LABEL_SIZE_V2 offsetof(struct vp_label, meta_init)
_Static_assert(sizeof(struct vp_label) <= 4096, "label sector");
int  vp_read_label(int fd, uint64_t off, struct vp_label *l);
void vp_meta_regions_init(struct vpool *p, unsigned regions);   /* create: the tables' regions */
bool vp_meta_regions_valid(const struct vpool *p);
uint64_t vp_meta_sect_per_page(const struct vpool *p);   /* sectors per checksum table page */
bool vp_meta_sects_set(struct vpool *p, uint64_t s);     /* that page may hold non-zeros */
int  vp_meta_alloc(struct vpool *p);
void vp_meta_free(struct vpool *p);
int  vp_meta_write(struct vpool *p, bool all_pages, uint32_t member_mask);
int  vp_meta_load(struct vpool *p, uint32_t good_mask, char *err, size_t errlen);
int  vp_checkpoint(struct vpool *p);           /* commit_lock held */

/* ---- layout: read, repair, apply (vpool_layout.c) ---- */
/* Reads count sectors of one chunk (s..s+count-1 in the same chunk), verified. */
int  vp_read_run(struct vpool *p, uint64_t s, unsigned count, uint8_t *buf);
int  vp_read_run_locked(struct vpool *p, uint64_t s, unsigned count, uint8_t *buf); /* row lock held */
/* Reads count (<= VP_AU_SECT) sectors from s over several chunks, verified: one preadv per
 * gapless stretch of a member (vpool_span.c). Members in the page cache. */
int  vp_read_span(struct vpool *p, uint64_t s, unsigned count, uint8_t *buf);
int  vp_apply_writes(struct vpool *p, struct vp_wsect *w, size_t n);  /* sorted by sect */
/* commit_lock's scratch arenas (p->parena, p->rarena): kept, sector aligned */
int  vp_arena_fit(uint8_t **arena, size_t *cap, size_t need);
void vp_arena_trim(uint8_t **arena, size_t *cap);   /* lets go of one above 64 MiB */
int  vp_rebuild_row(struct vpool *p, uint64_t row, uint32_t target_mask);
int  vp_scrub_row(struct vpool *p, uint64_t row, uint64_t *rep, uint64_t *unrep);
int  vp_resync_row(struct vpool *p, uint64_t row, uint64_t *rep, uint64_t *unrep);   /* errors not counted */
bool vp_row_live(struct vpool *p, uint64_t row);

/* ---- translation layer of format 3 pools (vpool_xlate.c, vpool_xlog.c) ----
 * Pool sectors (what volume maps, checksums and the cache use) each live at a
 * physical sector: phys numbers sectors of the data area with the geometry above
 * (row, column, w), so the parity group of phys is that of a format 2 pool sector.
 * Physical space is cut into segments of VP_SEG_ROWS rows; writes append whole parity
 * groups to the open segment and never overwrite live data. */
#define VP_SEG_ROWS 16u
struct vp_xl;
uint64_t vp_xl_reserve(uint64_t nseg);   /* segments kept back from the usable size */
uint64_t vp_xl_nphys(const struct vpool *p);   /* physical data sectors (locations are 4 bytes) */
int  vp_xl_alloc(struct vpool *p);
void vp_xl_free(struct vpool *p);
uint32_t vp_xl_loc(struct vpool *p, uint64_t s);           /* physical sector + 1, 0 = none */
void vp_xl_loc_load(struct vpool *p, uint64_t s, uint32_t v);   /* metadata load */
void vp_xl_drop(struct vpool *p, uint64_t s);   /* s holds no data any more (vp_csum_set) */
int  vp_xl_rebuild(struct vpool *p);             /* import: reverse map, live counts, segments */
/* Verified reads of pool sectors [s, s+count) of one chunk; xl_held: the caller holds
 * the read lock (vp_xl_rdlock) */
int  vp_xl_read_run(struct vpool *p, uint64_t s, unsigned count, uint8_t *buf, bool xl_held);
void vp_xl_rdlock(struct vpool *p);
void vp_xl_unlock(struct vpool *p);
/* Appends ws (sorted, commit_lock) to the log and publishes them; adds one VP_REC_LOC
 * per data sector to *recs (n *nrecs, capacity grown as needed). */
int  vp_xl_write(struct vpool *p, struct vp_wsect *ws, size_t n, struct vp_rec **recs, size_t *nrecs);
/* Frees space for n more sectors: cleans the emptiest segments and checkpoints. */
int  vp_xl_make_room(struct vpool *p, size_t n);
int  vp_xl_commit(struct vpool *p, bool durable);   /* vp_commit_ex of format 3 */
int  vp_xl_replay_loc(struct vpool *p, const struct vp_rec *r);
int  vp_journal_records_room(struct vpool *p, const struct vp_rec *recs, size_t nr);   /* checkpoint first if needed */
void vp_xl_replay_batch(struct vpool *p);   /* a new batch: forget its predecessor's dropped records */
/* VP_REC_WRITE after the VP_REC_LOC of the same sector in one batch (small durable
 * commits): if that record was dropped, its data is written to the location now */
int  vp_xl_replay_data(struct vpool *p, const struct vp_rec *r, const uint8_t *data);
void vp_xl_checkpointed(struct vpool *p);   /* members synced, tables written: emptied segments are free */
size_t vp_xl_drop_locs(struct vp_rec *recs, size_t n);   /* removes VP_REC_LOC records, returns how many are left */
uint32_t vp_xl_phys_csum(struct vpool *p, uint64_t phys);   /* checksum of what lives at phys, 0 = none */
bool vp_xl_row_live(struct vpool *p, uint64_t row);
/* clean_reread: sectors the cleaner read again sector by sector (a failed read, a checksum
 * that did not match), none on a healthy pool */
struct vp_xl_stats { uint64_t nseg, free, pending, cleaned_segs, moved_sect, written_sect, pad_sect, clean_reread; };
/* whole-unit snapshot copies that wait for their commit (vpool_xcow.c) */
bool vp_xcow_ok(struct vpool *p);   /* a log pool with every member online */
int  vp_xcow_add(struct vpool *p, uint64_t nau, uint64_t old, bool own, uint32_t old_death);
void vp_xcow_freed(struct vpool *p, uint64_t au);
bool vp_xcow_hide_units(struct vpool *p, uint64_t first, uint64_t cnt, struct vp_au *a);
bool vp_xcow_hide_sectors(struct vpool *p, uint64_t first, uint64_t cnt, uint32_t *pairs);

void vp_xl_stats(struct vpool *p, struct vp_xl_stats *st);
/* verified read of one physical sector with repair from parity (vpool_layout.c); takes the
 * row lock. quiet: no repair, error counts or messages, just whether it matches (0) */
int  vp_read_phys(struct vpool *p, uint64_t phys, uint32_t cs, uint8_t *buf, uint64_t s, bool quiet);
int  vp_journal_records(struct vpool *p, const struct vp_rec *recs, size_t n);   /* commit_lock */
/* one batch: recs, then ws (sorted) as VP_REC_WRITE records with their data; commit_lock */
int  vp_journal_small(struct vpool *p, const struct vp_rec *recs, size_t nrec, const struct vp_wsect *ws, size_t nws);
/* member write queue of an apply (vpool_layout.c) */
struct vp_wq_ent { uint64_t off; const uint8_t *buf; size_t len; };
struct vp_wqueue { struct vp_wq_ent *e; size_t n, cap; int err; };
int  vp_wq_add(struct vp_wqueue *q, uint64_t off, const uint8_t *buf, size_t len);   /* -ENOMEM */
int  vp_wq_flush(struct vpool *p, struct vp_wqueue *q);   /* all members' queues, in parallel; frees them */

/* ---- journal / commit (vpool_journal.c) ---- */
void vp_pend_add(struct vpool *p, const struct vp_rec *r);
size_t vp_pend_count(struct vpool *p);   /* records waiting (writers add them under pend_lock only) */
/* a failed commit's records, ahead of those pended meanwhile, in order, for the next try */
void vp_pend_restore(struct vpool *p, const struct vp_rec *recs, size_t n);
/* A commit's start: the cache's dirty sectors (lent, SIZE_MAX: out of memory), then the
 * pending records (taken, the caller frees them). commit_lock held. */
size_t vp_commit_take(struct vpool *p, struct vp_wsect **ws, struct vp_rec **recs, size_t *nrec);
void vp_journal_fill(struct vpool *p, int fd, const char *path);   /* holes of a member's journal region: zeros */
int  vp_commit(struct vpool *p);              /* commit_lock held; durable */
/* durable=false (write-back under memory pressure): the data goes in place but is
 * only made durable by the next durable commit or checkpoint. commit_lock held. */
int  vp_commit_ex(struct vpool *p, bool durable);
int  vp_writeback(struct vpool *p);           /* takes commit_lock, commits without syncing */
int  vp_flush_to(struct vpool *p, uint64_t target_gen);
int  vp_replay(struct vpool *p, uint64_t from_seq, char *err, size_t errlen);
int  vp_cmp_wsect(const void *a, const void *b);   /* qsort of vp_wsect by pool sector */
/* One journal batch outside vp_commit (snapshot copy-on-write). vp_journal_room first
 * checkpoints if the batch would not fit, so that the caller can change RAM state
 * that must not reach a checkpoint before the batch. commit_lock held. */
int  vp_journal_room(struct vpool *p, size_t nrec, size_t ndata);
int  vp_journal_batch(struct vpool *p, const struct vp_rec *recs, size_t nrec, const struct vp_wsect *ws, size_t nws);
void vp_flusher_start(struct vpool *p);
void vp_flusher_stop(struct vpool *p);
void vp_flusher_kick(struct vpool *p);

/* ---- replay of intent-only writes (vpool_intent.c) ---- */
struct vp_intents;
struct vp_intents *vp_intents_new(void);
int  vp_intents_add(struct vp_intents *t, uint64_t s, uint32_t prev, uint32_t now);
void vp_intents_batch(struct vp_intents *t, uint64_t seq);     /* replay: the batch records come from */
void vp_intents_synced(struct vp_intents *t, uint64_t upto);   /* replay: VP_REC_SYNCED */
int  vp_intents_override(struct vp_intents *t, uint64_t s, uint64_t cnt);
int  vp_intents_resolve(struct vpool *p, struct vp_intents *t);   /* frees t */

/* ---- direct writes of large requests (vpool_direct.c) ---- */
/* Writes [off, off+len) of v (sector aligned, mapped, unshared) in place from buf:
 * -EAGAIN when the request must take the cache path instead. snap_lock held shared. */
int  vp_direct_write(struct vpool *p, struct vp_vol *v, const uint8_t *buf, uint64_t off, size_t len);
bool vp_direct_ok(struct vpool *p, struct vp_vol *v, uint64_t off, size_t len);
/* Import: accept what direct writes left in the regions the journal names, then make
 * their parity match. After vp_intents_resolve. */
int  vp_regions_resolve(struct vpool *p);
void vp_direct_clear(struct vpool *p);   /* checkpoint: every direct write is covered */
/* Durably names the regions of ws[] (sorted) not named since the last checkpoint
 * (direct writes, snapshot copies). commit_lock held. */
int  vp_log_regions(struct vpool *p, const struct vp_wsect *ws, size_t n);
static inline bool vp_in_region(const struct vpool *p, uint64_t s)   /* named by a VP_REC_REGION */
{
    return vp_bit(p->rbits, s / VP_REGION_SECT);
}

/* ---- parallel member I/O (vpool_par.c) ---- */
/* Runs jobs[0] on the calling thread and the others on the pool's workers; returns
 * when all are done. n <= VP_MAXM; jobs must not call vp_par_run themselves. */
void vp_par_run(struct vpool *p, const struct vp_job *jobs, int n);
void vp_par_stop(struct vpool *p);   /* pool free */
/* Reads split over CPUs (vpool_vol.c): the same on workers of their own when these are
 * idle now, else false at once (nothing run). */
bool vp_par_try_read(struct vpool *p, const struct vp_job *jobs, int n);

/* ---- allocation (vpool_alloc.c) ---- */
int  vp_alloc_au(struct vpool *p, struct vp_vol *v, uint64_t vext, uint32_t *au_out);
static inline uint64_t vp_vol_mapped(const struct vp_vol *v) { return v->mapped; } /* alloc_lock */
uint64_t vp_vol_avail(struct vpool *p, struct vp_vol *v);   /* bytes it could still allocate */
void vp_free_au(struct vpool *p, uint64_t au);  /* commit_lock held; zeroes checksums, journals FREE */
/* zeroes the checksums of unit au's sectors (and drops their cache entries); true if any was set */
bool vp_au_clear(struct vpool *p, uint64_t au, bool drop_cache);
int  vp_rebuild_vol_maps(struct vpool *p);
/* alloc_lock held: takes a free AU for v/vext born now, no reservation accounting;
 * -ENOSPC when none is free. */
int  vp_alloc_take(struct vpool *p, struct vp_vol *v, uint64_t vext, uint64_t *au_out);
void vp_alloc_untake(struct vpool *p, uint64_t au);
uint64_t vp_au_count_used(struct vpool *p);

/* ---- cache (vpool_cache.c) ---- */
struct vp_cache *vc_new(uint64_t bytes, uint64_t nkeys);   /* keys: pool sectors < nkeys */
void vc_free(struct vp_cache *c);
bool vc_lookup(struct vp_cache *c, uint64_t key, void *buf);
/* Clean insert of data read from disk; skipped if the key has an entry, or a drop or a
 * commit happened since vc_epoch() was taken (take it before the lookup that missed). */
uint64_t vc_epoch(struct vp_cache *c);
bool vc_admit(struct vp_cache *c, uint64_t key);   /* second miss of key lately? (else remembers it) */
void vc_put_clean(struct vp_cache *c, uint64_t key, const void *buf, uint64_t epoch);
void vc_put_dirty(struct vp_cache *c, uint64_t key, const void *buf);
void vc_drop(struct vp_cache *c, uint64_t key);
uint64_t vc_dirty_count(struct vp_cache *c);
uint64_t vc_dirty_all(void);       /* dirty sectors of every pool in this process */
uint64_t vc_entries_all(void);     /* cached sectors of every pool, dirty or not */
uint64_t vc_unreleased_all(void);  /* free sector buffers of every pool still in memory */
void vc_count_dirty(struct vp_cache *c, bool on);   /* off: c's dirty sectors leave vc_dirty_all() */
/* frees clean entries over the cache size (their buffers are kept for reuse), returns how
 * many; release: the pages of every free buffer go back to the system */
size_t vc_trim(struct vp_cache *c, bool release);
/* Over a write-back limit (sectors): this pool's dirty data, or every pool's when this
 * one holds a share of it (so one pool's writers do not commit for another's data). */
#define VP_DIRTY_SHARE 4096
static inline bool vp_dirty_over(struct vpool *p, uint64_t lim)
{
    uint64_t d = vc_dirty_count(p->cache);
    return d > lim || (d >= VP_DIRTY_SHARE && vc_dirty_all() > lim);
}
/* Lends every dirty sector's buffer (no copy) to a commit; SIZE_MAX when out of memory.
 * vc_release gives them back: committed entries whose data did not change meanwhile
 * become clean (keep) or leave the cache. */
size_t vc_collect_dirty(struct vp_cache *c, struct vp_wsect **out);
void vc_release(struct vp_cache *c, const struct vp_wsect *w, size_t n, bool committed, bool keep);

/* ---- background (vpool_scrub.c) ---- */
int  vp_bg_start(struct vpool *p, int kind, uint32_t resilver_mask);
void vp_bg_stop(struct vpool *p);
void vp_note_degraded_write(struct vpool *p, uint64_t sect);

/* ---- volumes (vpool_vol.c) ---- */
/* sectors [ps, ps+cnt) unwritten: checksums cleared (a ZERO record pended), cache dropped */
void vp_zero_csums(struct vpool *p, uint64_t ps, uint64_t cnt);
struct vp_vol *vp_vol_by_id(struct vpool *p, uint32_t id);
void vp_vol_free(struct vp_vol *v);
int  vp_lz4_commit_prepare(struct vpool *p, struct vp_wsect **w, size_t *n, uint8_t **extra);
int  vp_lz4_read_chunk(struct vpool *p, uint64_t ps0, uint8_t *out);   /* 64 KiB logical */
struct vp_vol *vp_vol_of_sect(struct vpool *p, uint64_t s);

void vp_pool_put(struct vpool *p);
/* tests/tools: member and byte offset of the sector behind volume offset off
 * (mirror: member 0's copy). */
int  vp_debug_locate(struct vpool *p, const char *vol, uint64_t off, int *member, uint64_t *moff, uint64_t *psect);

bool vp_name_ok(const char *n);

/* ---- snapshots (vpool_snap.c) ---- */
/* Writer-preferring: a stream of overlapping writes must not starve snapshot create. */
static inline void vp_snap_lock_init(pthread_rwlock_t *l)
{
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(l, &a);
    pthread_rwlockattr_destroy(&a);
}
/* A write to AU au (mapped in v) must copy it first: it belongs to another volume
 * (clone origin) or a snapshot of v holds it. Callers hold v->snap_lock shared, which
 * orders last_snap against snapshot create (exclusive); a unit's owner and birth are set
 * before the map entry that leads here is published (vp_map_get reads it with acquire).
 * Relaxed loads; a "shared" answer is rechecked under commit_lock (cow_locked). */
static inline bool vp_snap_shared(struct vpool *p, struct vp_vol *v, uint64_t au)
{
    uint32_t last = __atomic_load_n(&v->last_snap, __ATOMIC_RELAXED);
    if (!last && !v->origin_id) return false;
    return __atomic_load_n(&p->au[au].vol_id, __ATOMIC_RELAXED) != v->id ||
           __atomic_load_n(&p->au[au].birth, __ATOMIC_RELAXED) <= last;
}
/* Copy-on-write of the AU behind volume extent vext, taking the part of the write
 * [off, off+len) (volume bytes) that falls into it (*used bytes; 0 on lz4 volumes,
 * whose data is then written by the caller as usual). snap_lock held shared. */
int  vp_snap_cow(struct vpool *p, struct vp_vol *v, uint64_t vext, const uint8_t *src, uint64_t off, size_t len,
                 size_t *used);
/* Before a write of [off, off+len) puts anything in the cache (and before any lock a
 * commit waits for): copies every shared AU it touches, the write's data included (the
 * caller then writes it as usual, the same bytes again). snap_lock held shared. */
int  vp_snap_cow_range(struct vpool *p, struct vp_vol *v, const uint8_t *src, uint64_t off, size_t len, size_t *consumed);
/* *consumed: bytes of the write the copies took in (all of it: nothing left to write) */
/* Unmap of whole sectors [vs, vs+cnt) inside extent vext of a shared AU: copies the
 * AU without them (or drops v's reference when it is all of it). commit_lock held. */
int  vp_snap_unmap_shared(struct vpool *p, struct vp_vol *v, uint64_t vext, uint64_t vs, uint64_t cnt);
/* Builds the map of volume vol_id at generation g (VP_GEN_LIVE: its live map),
 * clone origins included, len entries. alloc_lock NOT held. NULL on ENOMEM. */
uint32_t *vp_snap_build_map(struct vpool *p, uint32_t vol_id, uint32_t g, uint64_t len);
/* Import: drop snapshots of missing volumes, free dead AUs no snapshot holds, set
 * snap_cur and last_snap; then clone fallbacks into the live maps. */
void vp_snap_import_fix(struct vpool *p);
int  vp_snap_import_clones(struct vpool *p);
/* Volume destroy (commit_lock and vol_lock write held): -EBUSY if a clone depends on
 * one of its snapshots; detach moves its snapshots out of the table into held[slot]. */
int  vp_snap_vol_busy(struct vpool *p, struct vp_vol *v);
void vp_snap_vol_detach(struct vpool *p, struct vp_vol *v, struct vp_snap **held);
int  vp_snap_create_uuid(struct vpool *p, const char *vol, const char *snap, const uint8_t *uuid, uint64_t ctime);
nasd_bdev *vp_vol_open_view(struct vpool *p, struct vp_vol *view, uint32_t block_size);   /* vpool_vol.c */
void vp_stream_fix(uint8_t *b, size_t len, const uint8_t *from_uuid);   /* fuzzing (vpool_send.c) */
/* tests/tools: a copy of the commit profile counters */
void vp_debug_prof(struct vpool *p, struct vp_prof *out);
uint64_t vp_debug_journal_max_seq(struct vpool *p);   /* tests: highest batch number in the journal region */
