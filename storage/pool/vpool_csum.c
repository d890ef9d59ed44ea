/* Sector checksums (XXH3-64 folded to 32 bits). The system libxxhash is built for
 * baseline SSE2 (about 7.6 GB/s on 4 KiB here); the same XXH3 inlined with AVX2 runs
 * about 4x faster, which matters because every read verifies every sector. Values are
 * identical whichever variant runs (XXH3 output does not depend on the vector unit). */
#include "storage/pool/vpool_impl.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)   /* clang: no "#pragma GCC target" */
/* the inlined copy is compiled for AVX2 only; the library's symbol stays the fallback */
#pragma GCC push_options
#pragma GCC target("avx2")
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>
#pragma GCC pop_options
static uint64_t hash_avx2(const void *s) __attribute__((target("avx2")));
static uint64_t hash_avx2(const void *s) { return XXH3_64bits(s, VP_SECTOR); }
/* atomic: the first sectors may be hashed by several threads at once (same value stored) */
static _Atomic int use_avx2 = -1;
#undef XXH3_64bits
unsigned long long XXH3_64bits(const void *data, size_t len);   /* libxxhash, baseline */
#else
#include <xxhash.h>
#endif

static inline uint64_t sector_hash(const void *s)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)   /* clang: no "#pragma GCC target" */
    int avx2 = atomic_load_explicit(&use_avx2, memory_order_relaxed);
    if (__builtin_expect(avx2 < 0, 0)) {
        avx2 = __builtin_cpu_supports("avx2");
        atomic_store_explicit(&use_avx2, avx2, memory_order_relaxed);
    }
    if (avx2) return hash_avx2(s);
#endif
    return XXH3_64bits(s, VP_SECTOR);
}

uint32_t vp_csum_of(const void *sector)
{
    uint64_t h = sector_hash(sector);
    uint32_t v = (uint32_t)(h ^ (h >> 32));
    if (v == VP_CSUM_ZERO || v == VP_CSUM_MARK) v = 2;
    return v;
}
