/* row_ceiling: what a redirect-on-write raidz1 write path could reach on this machine,
 * measured before building it (issue #12, rand write 4K >= 0.5x raw). Not the engine.
 *   row_ceiling [-d DIR] [-s MEMBER_MiB] [-t SECONDS] [-j THREADS]
 * All runs use 4 member files filled through the raw stripe (as bench-vpool fills its raw
 * files), a 1 GiB working set, THREADS synchronous writers of random 4 KiB blocks, and end
 * with an fdatasync of every file inside the timing:
 *  - raw: pwrite into the files striped in 64 KiB chunks (bench-vpool's raw stripe);
 *  - in place: the system calls an in-place raidz1 write cannot avoid, nothing else: read
 *    the two other data columns of the block's parity group, XOR, write block and parity;
 *  - log: each write gets its XXH3 checksum and is copied into the open segment (16
 *    raidz1 rows of 4 members, 3 data chunks + a rotating parity chunk per row). A full
 *    segment gets its parity (ISA-L xor_gen), goes out as one 1 MiB pwrite per member
 *    into a circular log over the member files, then its writes' remap entries (block ->
 *    log sector) are published and their 16-byte records appended to a journal file.
 * No reads, no durability per write: the write path's own cost, which the in-place
 * engine (two random page-cache writes and two reads per 4 KiB) cannot get under.
 *  - log + cleaner (-u LIST): the same log over only as many segments as give the working
 *    set utilisation u of the log space, starting full of the working set. Segments are
 *    reused only when empty; a cleaner thread keeps a few free by re-logging the live
 *    sectors of the emptiest segment (greedy: it reads the segment, one 1 MiB pread per
 *    member, and appends what is still current; a copy overtaken by a newer write is
 *    dropped when its segment is written). Writers wait when the free segments run low.
 *    This is the price of a log that is never written home: it prints the write
 *    amplification (sectors logged / sectors written by the writers). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <isa-l/raid.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define NM 4
#define SECT 4096u
#define CHUNK (64u << 10)
#define ROWS 16u                              /* rows per segment */
#define SEG_SLOTS (ROWS * (NM - 1) * (CHUNK / SECT))   /* 768 data sectors */
#define SEG_MEMBER (ROWS * CHUNK)             /* 1 MiB per member per segment */
#define NBUF 4                                /* segments filling or being written */

static char dir[512] = "/tmp";
static uint64_t member_mb = 512, span = 1024ull << 20;
static double secs = 3;
static int nthreads = 8;
static int fds[NM], jfd;
static atomic_int stop_flag;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

struct rec { uint64_t block; uint32_t csum, slot, from, pad; };   /* from: cleaner copy of loc from */
struct seg {
    uint8_t *m[NM];                           /* per member: ROWS chunks, written as they are */
    struct rec rec[SEG_SLOTS];
    atomic_uint done;                         /* slots whose copy finished */
    uint64_t index;                           /* position in the circular log */
};
static struct seg segs[NBUF];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv_free = PTHREAD_COND_INITIALIZER, cv_full = PTHREAD_COND_INITIALIZER;
static uint64_t next_slot;                    /* global slot counter: segment = next_slot / SEG_SLOTS */
static uint64_t flushed_segs;                 /* segments written (their buffers free again) */
static _Atomic uint32_t *remap;               /* block -> log location + 1 (segment * SEG_SLOTS + slot) */
static double flusher_busy;

/* log + cleaner: segment positions and what they hold (mu) */
#define RESERVE (NBUF + 2)                    /* free segments kept for the cleaner's own appends */
#define CLEAN_AT (RESERVE + 6)                /* the cleaner works while fewer are free */
static bool cleaning;                         /* this run reuses segments (else circular) */
static uint32_t cap_segs;                     /* log space in segments */
static int32_t *seg_live;                     /* current sectors per segment; -1 free */
static bool *seg_cleaning;                    /* picked by the cleaner, not released yet */
static struct held { uint32_t seg; uint64_t until; } *held;   /* victims whose copies are below slot until */
static uint32_t nheld;
static uint64_t (*seg_block)[SEG_SLOTS];      /* block logged in each slot */
static uint32_t *free_segs, nfree;
static uint64_t cleaned_sectors, cleaned_segs, user_sectors;
static pthread_cond_t cv_clean = PTHREAD_COND_INITIALIZER;

static uint64_t xs(uint64_t *x) { *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17; return *x; }

static void fill(void)
{
    uint8_t *b = aligned_alloc(SECT, 1 << 20);
    memset(b, 0x5a, 1 << 20);
    for (int m = 0; m < NM; m++) {
        char p[600];
        snprintf(p, sizeof p, "%s/row_ceiling.%d", dir, m);
        fds[m] = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fds[m] < 0) { perror(p); exit(1); }
        unlink(p);
        for (uint64_t o = 0; o < member_mb << 20; o += CHUNK)   /* the raw stripe's pieces */
            if (pwrite(fds[m], b, CHUNK, (off_t)o) != CHUNK) { perror("fill"); exit(1); }
        fdatasync(fds[m]);
    }
    char p[600];
    snprintf(p, sizeof p, "%s/row_ceiling.j", dir);
    jfd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
    unlink(p);
    free(b);
}

/* ---- raw: the same files striped ---- */
static void *raw_writer(void *arg)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1), n = 0;
    uint8_t *b = aligned_alloc(SECT, SECT);
    memset(b, 1, SECT);
    while (!atomic_load(&stop_flag)) {
        uint64_t off = xs(&x) % (span / SECT) * SECT, chunk = off / CHUNK;
        memcpy(b, &x, sizeof x);
        if (pwrite(fds[chunk % NM], b, SECT, (off_t)((chunk / NM) * CHUNK + off % CHUNK)) != SECT) exit(1);
        n++;
    }
    free(b);
    return (void *)(uintptr_t)n;
}

/* ---- in place: raidz1 of 4, reconstruct-write of one 4 KiB block ---- */
static void *inplace_writer(void *arg)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1), n = 0;
    uint8_t *b = aligned_alloc(64, 4 * SECT);
    memset(b, 1, 4 * SECT);
    while (!atomic_load(&stop_flag)) {
        uint64_t blk = xs(&x) % (span / SECT), chunk = blk / (CHUNK / SECT), row = chunk / (NM - 1);
        int col = (int)(chunk % (NM - 1)), pm = (int)(row % NM);
        off_t off = (off_t)(row * CHUNK + blk % (CHUNK / SECT) * SECT);
        memcpy(b, &x, sizeof x);
        void *v[NM] = { b, b + SECT, b + 2 * SECT, b + 3 * SECT };   /* new block, other columns, parity */
        for (int c = 0, k = 1; c < NM - 1; c++)
            if (c != col && pread(fds[(pm + 1 + c) % NM], v[k++], SECT, off) != SECT) exit(1);
        xor_gen(NM, SECT, v);
        if (pwrite(fds[(pm + 1 + col) % NM], b, SECT, off) != SECT || pwrite(fds[pm], v[3], SECT, off) != SECT) exit(1);
        n++;
    }
    free(b);
    return (void *)(uintptr_t)n;
}

/* ---- log: full-stripe segments ---- */
static uint8_t *slot_ptr(struct seg *s, uint32_t slot)
{
    uint32_t row = slot / ((NM - 1) * (CHUNK / SECT)), in = slot % ((NM - 1) * (CHUNK / SECT));
    uint32_t col = in / (CHUNK / SECT), w = in % (CHUNK / SECT);
    int m = (int)((row % NM + 1 + col) % NM);
    return s->m[m] + (size_t)row * CHUNK + (size_t)w * SECT;
}

/* Puts one 4 KiB block into the open segment; false when the run is stopping. Writers
 * (from 0) leave RESERVE free segments to the cleaner, whose copies (from = their
 * location + 1) may use them. */
static bool append(uint64_t block, const uint8_t *b, uint32_t from)
{
    uint32_t cs = (uint32_t)XXH3_64bits(b, SECT) | 1;
    pthread_mutex_lock(&mu);
    while ((next_slot / SEG_SLOTS >= flushed_segs + NBUF || (cleaning && !from && nfree < RESERVE)) &&
           !atomic_load(&stop_flag))
        pthread_cond_wait(&cv_free, &mu);
    if (atomic_load(&stop_flag)) { pthread_mutex_unlock(&mu); return false; }
    uint64_t g = next_slot++;
    pthread_mutex_unlock(&mu);
    struct seg *s = &segs[(g / SEG_SLOTS) % NBUF];
    uint32_t slot = (uint32_t)(g % SEG_SLOTS);
    memcpy(slot_ptr(s, slot), b, SECT);
    s->rec[slot] = (struct rec){ block, cs, slot, from, 0 };
    if (atomic_fetch_add(&s->done, 1) + 1 == SEG_SLOTS) {
        pthread_mutex_lock(&mu);
        pthread_cond_broadcast(&cv_full);
        pthread_mutex_unlock(&mu);
    }
    return true;
}

static void *log_writer(void *arg)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1), n = 0;
    uint8_t *b = aligned_alloc(SECT, SECT);
    memset(b, 1, SECT);
    while (!atomic_load(&stop_flag)) {
        uint64_t block = xs(&x) % (span / SECT);
        memcpy(b, &x, sizeof x);
        if (!append(block, b, 0)) break;
        n++;
    }
    free(b);
    return (void *)(uintptr_t)n;
}

/* ---- log + cleaner ---- */
static void seg_release(uint32_t pos)   /* mu held: an empty segment is free again */
{
    seg_live[pos] = -1;
    seg_cleaning[pos] = false;
    free_segs[nfree++] = pos;
    pthread_cond_broadcast(&cv_free);
}

/* mu held: a segment lost its last current sector. A cleaner's victim waits until every
 * copy taken from it is written (release_cleaned): reused earlier, a block could land in
 * the same slot again and a stale copy still queued would then pass its check. */
static void seg_empty(uint32_t pos) { if (!seg_cleaning[pos]) seg_release(pos); }

static void release_cleaned(uint64_t written_slots)   /* mu held: slots below this are published */
{
    for (uint32_t i = 0; i < nheld;) {
        if (held[i].until > written_slots) { i++; continue; }
        uint32_t pos = held[i].seg;
        held[i] = held[--nheld];
        if (seg_live[pos] == 0) seg_release(pos);
        else seg_cleaning[pos] = false;   /* the cleaner stopped early: an ordinary segment again */
    }
}

static void *cleaner(void *arg)
{
    (void)arg;
    uint8_t *m[NM];
    for (int i = 0; i < NM; i++)
        if (posix_memalign((void **)&m[i], 64, SEG_MEMBER)) exit(1);
    struct seg rd;
    for (int i = 0; i < NM; i++) rd.m[i] = m[i];
    while (!atomic_load(&stop_flag)) {
        pthread_mutex_lock(&mu);
        while (nfree >= CLEAN_AT && !atomic_load(&stop_flag)) pthread_cond_wait(&cv_clean, &mu);
        int64_t victim = -1;
        for (uint32_t i = 0; i < cap_segs; i++)   /* greedy: fewest current sectors */
            if (seg_live[i] > 0 && !seg_cleaning[i] && (victim < 0 || seg_live[i] < seg_live[victim])) victim = i;
        if (victim >= 0) seg_cleaning[victim] = true;   /* until its copies empty it */
        pthread_mutex_unlock(&mu);
        if (victim < 0 || atomic_load(&stop_flag)) break;
        for (int i = 0; i < NM; i++)
            if (pread(fds[i], m[i], SEG_MEMBER, (off_t)((uint64_t)victim * SEG_MEMBER)) != SEG_MEMBER) exit(1);
        uint64_t moved = 0;
        for (uint32_t slot = 0; slot < SEG_SLOTS; slot++) {
            uint32_t loc = (uint32_t)victim * SEG_SLOTS + slot + 1;
            uint64_t block = seg_block[victim][slot];
            if (atomic_load(&remap[block]) != loc) continue;
            if (!append(block, slot_ptr(&rd, slot), loc)) break;
            moved++;
        }
        pthread_mutex_lock(&mu);
        cleaned_sectors += moved;
        cleaned_segs++;
        held[nheld++] = (struct held){ (uint32_t)victim, next_slot };
        pthread_mutex_unlock(&mu);
    }
    for (int i = 0; i < NM; i++) free(m[i]);
    return NULL;
}

/* a fresh log for a cleaning run: the working set written in order, the rest free */
static void log_reset(uint32_t segs_cap)
{
    cap_segs = segs_cap;
    nfree = nheld = 0;
    next_slot = flushed_segs = 0;
    cleaned_sectors = cleaned_segs = user_sectors = 0;
    for (int i = 0; i < NBUF; i++) atomic_store(&segs[i].done, 0);
    uint64_t nb = span / SECT;
    for (uint32_t pos = 0; pos < cap_segs; pos++) {
        seg_live[pos] = 0;
        seg_cleaning[pos] = false;
        for (uint32_t slot = 0; slot < SEG_SLOTS; slot++) {
            uint64_t block = (uint64_t)pos * SEG_SLOTS + slot;
            if (block < nb) {
                seg_block[pos][slot] = block;
                atomic_store(&remap[block], pos * SEG_SLOTS + slot + 1);
                seg_live[pos]++;
            }
        }
    }
    for (uint32_t pos = cap_segs; pos-- > 0;) if (!seg_live[pos]) seg_release(pos);
}

static void write_segment(struct seg *s, uint64_t index)
{
    uint64_t nsegs = (member_mb << 20) / SEG_MEMBER, pos = index % nsegs;
    if (cleaning) {
        pthread_mutex_lock(&mu);
        if (!nfree) { fprintf(stderr, "row_ceiling: log full\n"); exit(1); }
        pos = free_segs[--nfree];
        seg_live[pos] = 0;
        if (nfree < CLEAN_AT) pthread_cond_signal(&cv_clean);
        pthread_mutex_unlock(&mu);
    }
    for (uint32_t r = 0; r < ROWS; r++) {
        int pm = (int)(r % NM);
        void *v[NM];
        int k = 0;
        for (int c = 0; c < NM - 1; c++) v[k++] = s->m[(pm + 1 + c) % NM] + (size_t)r * CHUNK;
        v[k] = s->m[pm] + (size_t)r * CHUNK;
        xor_gen(NM, CHUNK, v);
    }
    for (int m = 0; m < NM; m++)
        if (pwrite(fds[m], s->m[m], SEG_MEMBER, (off_t)(pos * SEG_MEMBER)) != SEG_MEMBER) exit(1);
    uint32_t base = (uint32_t)(pos * SEG_SLOTS);
    if (!cleaning) {
        for (uint32_t i = 0; i < SEG_SLOTS; i++) atomic_store(&remap[s->rec[i].block], base + s->rec[i].slot + 1);
    } else {   /* publish: the old location's segment loses a sector, a stale cleaner copy is dropped */
        pthread_mutex_lock(&mu);
        for (uint32_t i = 0; i < SEG_SLOTS; i++) {
            const struct rec *r = &s->rec[i];
            uint32_t old = atomic_load(&remap[r->block]);
            if (r->from && old != r->from) continue;
            if (!r->from) user_sectors++;
            atomic_store(&remap[r->block], base + r->slot + 1);
            seg_block[pos][r->slot] = r->block;
            seg_live[pos]++;
            if (old && --seg_live[(old - 1) / SEG_SLOTS] == 0) seg_empty((old - 1) / SEG_SLOTS);
        }
        if (!seg_live[pos]) seg_release((uint32_t)pos);
        release_cleaned((index + 1) * SEG_SLOTS);
        pthread_mutex_unlock(&mu);
    }
    static uint64_t jpos;
    if (pwrite(jfd, s->rec, sizeof s->rec, (off_t)jpos) != (ssize_t)sizeof s->rec) exit(1);
    jpos = (jpos + sizeof s->rec) % (64ull << 20);
}

static void *flusher(void *arg)
{
    (void)arg;
    for (uint64_t idx = 0;; idx++) {
        struct seg *s = &segs[idx % NBUF];
        pthread_mutex_lock(&mu);
        while (atomic_load(&s->done) < SEG_SLOTS && !(atomic_load(&stop_flag) == 2)) pthread_cond_wait(&cv_full, &mu);
        pthread_mutex_unlock(&mu);
        if (atomic_load(&s->done) < SEG_SLOTS) return NULL;   /* stopping: a partial segment stays unwritten */
        double t0 = now();
        write_segment(s, idx);
        flusher_busy += now() - t0;
        atomic_store(&s->done, 0);
        pthread_mutex_lock(&mu);
        flushed_segs++;
        pthread_cond_broadcast(&cv_free);
        pthread_mutex_unlock(&mu);
    }
}

static double run(void *(*fn)(void *), bool with_flusher)
{
    pthread_t th[64], fl, cl;
    atomic_store(&stop_flag, 0);
    double t0 = now();
    if (with_flusher) pthread_create(&fl, NULL, flusher, NULL);
    if (cleaning) pthread_create(&cl, NULL, cleaner, NULL);
    for (int i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, fn, (void *)(uintptr_t)i);
    usleep((useconds_t)(secs * 1e6));
    pthread_mutex_lock(&mu);
    atomic_store(&stop_flag, 1);
    pthread_cond_broadcast(&cv_free);
    pthread_cond_broadcast(&cv_clean);
    pthread_mutex_unlock(&mu);
    if (cleaning) pthread_join(cl, NULL);
    uint64_t ops = 0;
    for (int i = 0; i < nthreads; i++) {
        void *r;
        pthread_join(th[i], &r);
        ops += (uintptr_t)r;
    }
    if (with_flusher) {
        pthread_mutex_lock(&mu);
        atomic_store(&stop_flag, 2);
        pthread_cond_broadcast(&cv_full);
        pthread_mutex_unlock(&mu);
        pthread_join(fl, NULL);
    }
    for (int m = 0; m < NM; m++) fdatasync(fds[m]);
    fdatasync(jfd);
    return ops / (now() - t0);
}

int main(int argc, char **argv)
{
    int c;
    char ulist[128] = "0.67,0.76,0.9";
    while ((c = getopt(argc, argv, "d:s:t:j:u:")) != -1) {
        switch (c) {
        case 'd': snprintf(dir, sizeof dir, "%s", optarg); break;
        case 's': member_mb = strtoull(optarg, NULL, 0); break;
        case 't': secs = atof(optarg); break;
        case 'j': nthreads = atoi(optarg); break;
        case 'u': snprintf(ulist, sizeof ulist, "%s", optarg); break;
        default: fprintf(stderr, "usage: row_ceiling [-d DIR] [-s MEMBER_MiB] [-t SECONDS] [-j THREADS] [-u U,...]\n"); return 64;
        }
    }
    if (nthreads < 1 || nthreads > 64 || member_mb < 64) return 64;
    if (span > (member_mb << 20) * NM / 2) span = (member_mb << 20) * NM / 2;
    fill();
    remap = calloc(span / SECT, sizeof *remap);
    for (int i = 0; i < NBUF; i++)
        for (int m = 0; m < NM; m++)
            if (posix_memalign((void **)&segs[i].m[m], 64, SEG_MEMBER)) return 1;
    printf("row_ceiling: 4 member files of %llu MiB in %s, working set %llu MiB, %d writers, %.0fs\n",
           (unsigned long long)member_mb, dir, (unsigned long long)(span >> 20), nthreads, secs);
    double raw = run(raw_writer, false);
    double inp = run(inplace_writer, false);
    double lg = run(log_writer, true), lg_busy = flusher_busy;
    /* log + cleaner at each utilisation the member files can hold */
    uint32_t max_segs = (uint32_t)((member_mb << 20) / SEG_MEMBER), wsegs = (uint32_t)((span / SECT + SEG_SLOTS - 1) / SEG_SLOTS);
    seg_live = calloc(max_segs, sizeof *seg_live);
    seg_cleaning = calloc(max_segs, sizeof *seg_cleaning);
    seg_block = calloc(max_segs, sizeof *seg_block);
    free_segs = calloc(max_segs, sizeof *free_segs);
    held = calloc(max_segs, sizeof *held);
    struct { double u, iops, wa; uint64_t segs; } cl[8];
    int ncl = 0;
    for (char *tok = strtok(ulist, ","); tok && ncl < 8; tok = strtok(NULL, ",")) {
        double u = atof(tok);
        uint32_t cap = u > 0 ? (uint32_t)(wsegs / u + 0.5) : 0;
        if (cap < wsegs + CLEAN_AT + 2 || cap > max_segs) {
            printf("  u=%s: not possible here: the log space would be %u segments; from %u to %u fit (-s)\n", tok, cap,
                   wsegs + CLEAN_AT + 2, max_segs);
            continue;
        }
        log_reset(cap);
        cleaning = true;
        cl[ncl].iops = run(log_writer, true);
        cleaning = false;
        uint64_t live = 0;   /* every block is current in exactly one written slot */
        for (uint32_t i = 0; i < cap; i++) live += seg_live[i] > 0 ? (uint64_t)seg_live[i] : 0;
        if (live != span / SECT) { fprintf(stderr, "row_ceiling: %llu current sectors, not %llu\n",
                                           (unsigned long long)live, (unsigned long long)(span / SECT)); return 1; }
        cl[ncl].u = (double)(span / SECT) / ((double)cap * SEG_SLOTS);
        cl[ncl].wa = user_sectors ? (double)(user_sectors + cleaned_sectors) / (double)user_sectors : 0;
        cl[ncl].segs = cleaned_segs;
        ncl++;
    }
    double raw2 = run(raw_writer, false);
    double mean = (raw + raw2) / 2;
    printf("rand write 4K IOPS: raw %.0f (before) / %.0f (after)\n", raw, raw2);
    printf("  in-place raidz1 floor %.0f (%.2fx raw), full-stripe log %.0f (%.2fx raw; its flusher busy %.2f s)\n",
           inp, inp / mean, lg, lg / mean, lg_busy);
    for (int i = 0; i < ncl; i++)
        printf("  log + cleaner, working set %.2f of the log space: %.0f (%.2fx raw), write amplification %.2f, "
               "%llu segments cleaned\n", cl[i].u, cl[i].iops, cl[i].iops / mean, cl[i].wa, (unsigned long long)cl[i].segs);
    return 0;
}
