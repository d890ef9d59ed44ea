/* Small member reads of checksummed data through a read-only shared mapping of each
 * member (page-cache members only; vp_mread_checked). A 4 KiB pread costs a system call and a page-cache lookup; a copy from a
 * mapping whose page table entry is present costs neither (random 4 KiB reads of a pool
 * whose members are in the page cache are mostly that cost). The mapping shares the page
 * cache with the descriptor, so member writes (pwrite) are seen at once.
 * A member that cannot be read (I/O error, file cut short) raises SIGBUS inside the copy:
 * the handler returns the copying thread to vp_map_read, which reports it as a read error,
 * so the caller goes the pread way (error counting, repair) as before. */
#include "storage/pool/vpool_impl.h"
#include "util/log.h"
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Page tables cost 8 bytes per 4 KiB mapped and touched, kept until unmapped: all
 * mappings of the process together stay under 16 x RAM, or the cgroup's memory limit
 * when lower (at most 1/32 of it in page tables); members beyond that use pread. */
#define VP_MAP_RAM_FACTOR 16

static _Atomic uint64_t mapped_all;
/* set while this thread copies from a mapping, with the range it copies from; volatile and
 * fenced, or the compiler drops the stores before the copy as dead */
static __thread sigjmp_buf *volatile copy_jb;
static __thread const uint8_t *volatile copy_lo, *volatile copy_hi;
static __thread int8_t bus_usable;   /* 0: not checked yet, 1: SIGBUS reaches this thread, -1: blocked here */
static struct sigaction prev_bus;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;
static bool bus_ok;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    sigjmp_buf *jb = copy_jb;
    const uint8_t *a = si ? (const uint8_t *)si->si_addr : NULL;
    /* ours only if the kernel raised it for the range being copied (not a sent SIGBUS,
     * not a fault on the destination) */
    if (jb && si && si->si_code > 0 && a >= copy_lo && a < copy_hi) {
        copy_jb = NULL;
        siglongjmp(*jb, 1);
    }
    /* not a member copy: what handled SIGBUS before us takes over (the daemon's crash
     * report, else the default: a core). A fault happens again when the handler returns;
     * a sent signal is sent again. Calling the old handler from here instead would loop
     * if it re-raises, as the crash report does. */
    sigaction(SIGBUS, &prev_bus, NULL);
    if (!si || si->si_code <= 0) raise(sig);
    (void)uc;
}

static void install_bus(void)
{
    /* SA_NODEFER: the jump out of the handler leaves SIGBUS unblocked (sigsetjmp does not
     * save the mask: that would cost a system call per copy) */
    struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK };
    sigemptyset(&sa.sa_mask);
    bus_ok = sigaction(SIGBUS, &sa, &prev_bus) == 0;
    if (!bus_ok) log_warn("vpool: no SIGBUS handler (%s): members are read with pread", strerror(errno));
}

static uint64_t map_budget(void) { return vp_memory_bytes() * VP_MAP_RAM_FACTOR; }

/* A mapping readers may still use becomes anonymous zeros (a racing copy then fails its
 * checksum and goes the slow way); its range stays reserved until teardown. */
static void map_retire(struct vpool *p, struct vp_member *mb)
{
    if (!atomic_exchange(&mb->map, NULL)) return;
    if (mmap(mb->map_base, mb->map_len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) ==
        MAP_FAILED)
        log_warn("vpool %s: %s: stale mapping kept (%s)", p->name, mb->path, strerror(errno));
}

/* Maps member m (its first member_size bytes) unless it is O_DIRECT, missing, or over the
 * budget. A member whose file changed (replace) is mapped again at the same address
 * (MAP_FIXED): a racing reader sees the old file's pages or the new one's, as a racing
 * pread sees the old or the new file behind the descriptor number dup2 kept. */
void vp_map_member(struct vpool *p, int m)
{
    struct vp_member *mb = &p->m[m];
    uint64_t len = p->member_size;
    pthread_once(&bus_once, install_bus);
    if (mb->fd < 0 || mb->direct || !len || !bus_ok) { map_retire(p, mb); return; }
    if (mb->map_base) {
        if (mmap(mb->map_base, mb->map_len, PROT_READ, MAP_SHARED | MAP_FIXED, mb->fd, 0) == MAP_FAILED) {
            log_warn("vpool %s: cannot map %s (%s): read with pread", p->name, mb->path, strerror(errno));
            map_retire(p, mb);   /* the old file's pages must not be read any more */
            return;
        }
        madvise(mb->map_base, mb->map_len, MADV_RANDOM);
        atomic_store_explicit(&mb->map, mb->map_base, memory_order_release);
        return;
    }
    if (atomic_fetch_add(&mapped_all, len) + len > map_budget()) { atomic_fetch_sub(&mapped_all, len); return; }
    void *a = mmap(NULL, len, PROT_READ, MAP_SHARED, mb->fd, 0);
    if (a == MAP_FAILED) {
        atomic_fetch_sub(&mapped_all, len);
        log_warn("vpool %s: cannot map %s (%s): read with pread", p->name, mb->path, strerror(errno));
        return;
    }
    /* no read-around: a small random read from a disk reads only its own page */
    madvise(a, len, MADV_RANDOM);
    mb->map_base = a;
    mb->map_len = len;
    atomic_store_explicit(&mb->map, a, memory_order_release);
}

/* Pool teardown, when no reader runs any more. */
void vp_unmap_member(struct vpool *p, int m)
{
    struct vp_member *mb = &p->m[m];
    atomic_store(&mb->map, NULL);
    if (!mb->map_base) return;
    munmap(mb->map_base, mb->map_len);
    atomic_fetch_sub(&mapped_all, mb->map_len);
    mb->map_base = NULL;
    mb->map_len = 0;
}

/* SIGBUS must reach this thread for a copy to be safe: where it is blocked (a thread of
 * some library, a sanitizer's wrapper) a fault would end the process. Checked once per
 * thread; after a fault it is unblocked again, as SA_NODEFER is not honoured everywhere
 * (ThreadSanitizer leaves it blocked). */
static bool bus_reaches_thread(void)
{
    if (!bus_usable) {
        sigset_t cur;
        bus_usable = pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0 && !sigismember(&cur, SIGBUS) ? 1 : -1;
    }
    return bus_usable > 0;
}

/* Copies len bytes at member offset off from the mapping: 0, or -EIO when the member
 * faulted (SIGBUS) in the copy; -ENOENT when there is no mapping to read from. */
int vp_map_read(struct vp_member *mb, void *buf, size_t len, uint64_t off)
{
    uint8_t *a = atomic_load_explicit(&mb->map, memory_order_acquire);
    if (!a || off + len > mb->map_len || off + len < off || !bus_reaches_thread()) return -ENOENT;
    sigjmp_buf jb;
    if (sigsetjmp(jb, 0)) {   /* copy_jb was cleared by the handler */
        sigset_t bus;
        sigemptyset(&bus);
        sigaddset(&bus, SIGBUS);
        pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
        return -EIO;
    }
    copy_lo = a + off;
    copy_hi = a + off + len;
    copy_jb = &jb;
    atomic_signal_fence(memory_order_seq_cst);
    memcpy(buf, a + off, len);
    atomic_signal_fence(memory_order_seq_cst);
    copy_jb = NULL;
    return 0;
}
