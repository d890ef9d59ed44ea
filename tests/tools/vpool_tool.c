/* vpool_tool: drive the pool engine from scripts (crash test, manual checks).
 *   vpool_tool create DIR LAYOUT N MEMBER_MB VOL_MB [lz4]   members DIR/m0..m{N-1}, volume "v"
 *   vpool_tool writer DIR N THREADS SEQ_BASE                 writes until killed; prints one
 *        line per acknowledged-durable write: "A slot seq" (write) or "U slot seq" (unmap),
 *        and "I slot seq" before issuing an unmap (after it, zeros are a valid outcome)
 *   vpool_tool verify DIR N [SKIP_MEMBER] < LOG              checks every acknowledged write
 *   vpool_tool status DIR N
 * Blocks are 4 KiB, self-describing (slot, seq, checksum); each writer thread owns the
 * slots slot % THREADS == thread, so per slot the highest acknowledged seq must be on
 * disk (or a later one that was written but not yet acknowledged). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include "util/log.h"
#include "storage/pool/vpool.h"
#include "storage/pool/vpool_impl.h"

#define BLK 4096
#define MAGIC 0x4b4c425453455456ull

struct blk { uint64_t magic, slot, seq; uint8_t fill[BLK - 32]; uint64_t csum; };
_Static_assert(sizeof(struct blk) == BLK, "block size");

static char dir[512];
static int nmem;
static nasd_bdev *vol;
static uint64_t nslots;
static int nthreads;
static _Atomic uint64_t seqno;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static void member_path(char *out, size_t len, int i) { snprintf(out, len, "%s/m%d", dir, i); }

static void make_block(struct blk *b, uint64_t slot, uint64_t seq)
{
    b->magic = MAGIC; b->slot = slot; b->seq = seq;
    uint64_t x = seq * 0x9E3779B97F4A7C15ull + slot;
    for (size_t i = 0; i < sizeof b->fill; i++) { x = x * 6364136223846793005ull + 1; b->fill[i] = (uint8_t)(x >> 56); }
    b->csum = XXH3_64bits(b, BLK - 8);
}

static struct vpool *import(int skip)
{
    char paths[16][600];
    const char *pp[16];
    int k = 0;
    for (int i = 0; i < nmem; i++) {
        if (i == skip) continue;
        member_path(paths[k], sizeof paths[k], i);
        pp[k] = paths[k];
        k++;
    }
    struct vpool *p = NULL;
    char err[512];
    if (vpool_import(pp, k, NULL, &p, err, sizeof err)) { fprintf(stderr, "import: %s\n", err); exit(2); }
    return p;
}

static uint64_t rnd(uint64_t *x) { *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17; return *x; }

static void ack(char kind, const uint64_t *slots, const uint64_t *seqs, int n)
{
    pthread_mutex_lock(&out_mu);
    for (int i = 0; i < n; i++) printf("%c %llu %llu\n", kind, (unsigned long long)slots[i], (unsigned long long)seqs[i]);
    pthread_mutex_unlock(&out_mu);
}

static uint64_t pick_slot(uint64_t *x, int t)
{
    return (rnd(x) % (nslots / nthreads)) * nthreads + t;
}

static void die_io(const char *what, int rc) { fprintf(stderr, "writer: %s failed: %d\n", what, rc); exit(3); }

static void *writer_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    uint64_t x = 88172645463325252ull ^ ((uint64_t)getpid() << 16) ^ (uint64_t)t;
    static __thread struct blk b[16];
    for (;;) {
        uint64_t r = rnd(&x) % 10, slots[16], seqs[16];
        if (r < 4) {            /* one FUA write */
            slots[0] = pick_slot(&x, t);
            seqs[0] = atomic_fetch_add(&seqno, 1);
            make_block(&b[0], slots[0], seqs[0]);
            int rc = nasd_bdev_write(vol, &b[0], slots[0] * BLK, BLK, NASD_IO_FUA);
            if (rc) die_io("FUA write", rc);
            ack('A', slots, seqs, 1);
        } else if (r < 9) {     /* a few buffered writes (some multi-block), then flush */
            int n = 0, k = 1 + (int)(rnd(&x) % 4);
            for (int i = 0; i < k && n < 16; i++) {
                uint64_t s = pick_slot(&x, t);
                int run = (int)(rnd(&x) % 4) + 1;   /* consecutive slots of this thread */
                uint64_t first = n;
                for (int j = 0; j < run && n < 16 && s + (uint64_t)j * nthreads < nslots; j++) {
                    slots[n] = s + (uint64_t)j * nthreads;
                    seqs[n] = atomic_fetch_add(&seqno, 1);
                    make_block(&b[n], slots[n], seqs[n]);
                    n++;
                }
                for (uint64_t j = first; j < (uint64_t)n; j++) {
                    int rc = nasd_bdev_write(vol, &b[j], slots[j] * BLK, BLK, 0);
                    if (rc) die_io("write", rc);
                }
            }
            int rc = nasd_bdev_flush(vol);
            if (rc) die_io("flush", rc);
            ack('A', slots, seqs, n);
        } else {                /* unmap one slot, flush */
            slots[0] = pick_slot(&x, t);
            seqs[0] = atomic_fetch_add(&seqno, 1);
            ack('I', slots, seqs, 1);   /* intent: from here on zeros are a valid outcome */
            int rc = nasd_bdev_unmap(vol, slots[0] * BLK, BLK);
            if (!rc) rc = nasd_bdev_flush(vol);
            if (rc) die_io("unmap", rc);
            ack('U', slots, seqs, 1);
        }
    }
    return NULL;
}

static int cmd_create(char **a, int n)
{
    if (n < 5) return 64;
    const struct vpool_layout_spec *spec = vpool_layout_find(a[1]);   /* the API's names */
    if (!spec) { fprintf(stderr, "unknown layout %s\n", a[1]); return 64; }
    enum vpool_layout l = spec->layout;
    struct vpool_opts o = { .log = spec->log };
    struct vpool_member_spec ms[16];
    char paths[16][600];
    for (int i = 0; i < nmem; i++) {
        member_path(paths[i], sizeof paths[i], i);
        ms[i] = (struct vpool_member_spec){ paths[i], strtoull(a[3], NULL, 0) << 20 };
    }
    struct vpool *p;
    char err[512];
    if (vpool_create("crash", l, ms, nmem, &o, &p, err, sizeof err)) { fprintf(stderr, "create: %s\n", err); return 2; }
    int rc = vpool_vol_create(p, "v", strtoull(a[4], NULL, 0) << 20, n > 5 && !strcmp(a[5], "lz4") ? VPOOL_VOL_LZ4 : 0);
    vpool_close(p);
    return rc ? 2 : 0;
}

static int cmd_writer(char **a, int n)
{
    if (n < 4) return 64;
    nthreads = atoi(a[2]);
    if (nthreads < 1 || nthreads > 16) return 64;
    atomic_store(&seqno, strtoull(a[3], NULL, 0));
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct vpool *p = import(-1);
    int err;
    vol = vpool_vol_open(p, "v", 4096, &err);
    if (!vol) { fprintf(stderr, "open: %d\n", err); return 2; }
    nslots = vol->size / BLK;
    pthread_t th[16];
    for (int i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, writer_thread, (void *)(intptr_t)i);
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    return 0;
}

static int cmd_verify(char **a, int n)
{
    int skip = n > 2 ? atoi(a[2]) : -1;
    struct vpool *p = import(skip);
    int err;
    vol = vpool_vol_open(p, "v", 4096, &err);
    if (!vol) { fprintf(stderr, "open: %d\n", err); return 2; }
    nslots = vol->size / BLK;
    uint64_t *last = calloc(nslots, sizeof *last);
    uint64_t *intent = calloc(nslots, sizeof *intent);   /* last unmap issued (maybe not acked) */
    char *kind = calloc(nslots, 1);
    char line[128], k;
    unsigned long long slot, seq, acks = 0;
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "%c %llu %llu", &k, &slot, &seq) != 3 || slot >= nslots) continue;
        if (k == 'I') { if (seq > intent[slot]) intent[slot] = seq; continue; }
        if (k != 'A' && k != 'U') continue;
        acks++;
        if (seq >= last[slot]) { last[slot] = seq; kind[slot] = k; }
    }
    struct blk b;
    int bad = 0;
    uint64_t checked = 0;
    for (uint64_t s = 0; s < nslots; s++) {
        if (!kind[s]) continue;
        checked++;
        int rc = nasd_bdev_read(vol, &b, s * BLK, BLK);
        bool zero = true;
        for (size_t i = 0; i < BLK && zero; i++) zero = ((uint8_t *)&b)[i] == 0;
        const char *why = NULL;
        if (rc) why = "read error";
        else if (zero) { if (kind[s] == 'A' && intent[s] < last[s]) why = "acknowledged write lost (zeros)"; }
        else if (b.magic != MAGIC || b.slot != s || b.csum != XXH3_64bits(&b, BLK - 8)) why = "torn or foreign block";
        else if (b.seq < last[s]) why = "older than the acknowledged write";
        if (why) {
            int m = -1;
            uint64_t moff = 0, ps = UINT64_MAX;
            vp_debug_locate(p, "v", s * BLK, &m, &moff, &ps);
            if (bad < 10)
                fprintf(stderr, "slot %llu: %s (acked %c seq %llu, found seq %llu; pool sector %lld, csum %08x)\n",
                        (unsigned long long)s, why, kind[s], (unsigned long long)last[s], (unsigned long long)b.seq,
                        ps == UINT64_MAX ? -1ll : (long long)ps, ps == UINT64_MAX ? 0 : p->csum[ps]);
            bad++;
        }
    }
    struct vpool_status st;
    vpool_get_status(p, &st);
    printf("verify: %llu acks, %llu slots checked, %d bad, pool %s, unrepairable %llu\n", acks,
           (unsigned long long)checked, bad, vpool_state_name(st.state), (unsigned long long)st.unrepairable);
    nasd_bdev_put(vol);
    vpool_close(p);
    free(last); free(kind); free(intent);
    return bad || st.unrepairable ? 1 : 0;
}

static int cmd_status(void)
{
    struct vpool *p = import(-1);
    vpool_wait_background(p);
    struct vpool_status st;
    vpool_get_status(p, &st);
    printf("%s %s%s %s size=%llu allocated=%llu\n", st.name, vpool_layout_name(st.layout), st.log ? " (log)" : "",
           vpool_state_name(st.state), (unsigned long long)st.size, (unsigned long long)st.allocated);
    for (int i = 0; i < st.nmembers; i++)
        printf("  %s %s r=%llu w=%llu ck=%llu\n", st.members[i].path, vpool_member_state_name(st.members[i].state),
               (unsigned long long)st.members[i].read_errors, (unsigned long long)st.members[i].write_errors,
               (unsigned long long)st.members[i].checksum_errors);
    vpool_close(p);
    return st.state == VPOOL_ONLINE ? 0 : 1;
}

int main(int argc, char **argv)
{
    nasd_log_level = LOG_WARN;
    if (argc < 4) goto usage;
    snprintf(dir, sizeof dir, "%s", argv[2]);
    nmem = atoi(argv[3]);
    if (!strcmp(argv[1], "create")) {
        nmem = atoi(argv[4]);
        if (nmem < 1 || nmem > 16) goto usage;
        char *a[] = { argv[2], argv[3], argv[4], argc > 5 ? argv[5] : "64", argc > 6 ? argv[6] : "32", argc > 7 ? argv[7] : "" };
        return cmd_create(a, 6);
    }
    if (nmem < 1 || nmem > 16) goto usage;
    if (!strcmp(argv[1], "writer") && argc >= 6) return cmd_writer(argv + 2, argc - 2);
    if (!strcmp(argv[1], "verify")) return cmd_verify(argv + 2, argc - 2);
    if (!strcmp(argv[1], "status")) return cmd_status();
usage:
    fprintf(stderr, "usage: vpool_tool create DIR LAYOUT N [MEMBER_MB VOL_MB [lz4]] | writer DIR N THREADS SEQ_BASE |"
                    " verify DIR N [SKIP] < LOG | status DIR N\n");
    return 64;
}
