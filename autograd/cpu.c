/* cpu.c -- the CPU's features, read once (ag_cpu.h). */
#define _GNU_SOURCE /* syscall */
#include "autograd/ag_cpu.h"

#include <stdatomic.h>

#if AG_CPU_X86_KERNELS
#include <cpuid.h>
#endif
#if AG_CPU_X86_KERNELS && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define READ (1u << 31) /* set once the CPU was read: 0 means "not yet" */

static _Atomic unsigned features;

#if AG_CPU_X86_KERNELS
/* AMX-TILE (CPUID leaf 7: EDX bit 24) and Linux's permission: it enables the 8 KB of tile data
 * per process on request (5.16 and later), until then a tile instruction faults. Asks for it,
 * then checks that it was granted. */
static bool amx_tiles(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 24 & 1)) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
    enum { GET_XCOMP_PERM = 0x1022, REQ_XCOMP_PERM = 0x1023, XTILEDATA = 18 };
    unsigned long granted = 0;
    return syscall(SYS_arch_prctl, REQ_XCOMP_PERM, XTILEDATA) == 0 &&
           syscall(SYS_arch_prctl, GET_XCOMP_PERM, &granted) == 0 && (granted >> XTILEDATA & 1);
#else
    return false;
#endif
}

/* The AMX features the tiles can run here: AMX-BF16 (EDX bit 22) and AMX-INT8 (bit 25), none
 * without the tiles' permission. */
static unsigned amx_features(void) {
    unsigned a, b, c, d, f = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !amx_tiles()) return 0;
    if (d >> 22 & 1) f |= AG_CPU_AMX_BF16;
    if (d >> 25 & 1) f |= AG_CPU_AMX_INT8;
    return f;
}
#endif

static unsigned read_cpu(void) {
    unsigned f = READ;
#if AG_CPU_X86_KERNELS
    /* libgcc reads CPUID (and XGETBV: the AVX-512 state must be enabled by the OS) in a
     * constructor; the call makes sure of it, and is idempotent. */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) f |= AG_CPU_AVX2;
    if (__builtin_cpu_supports("avx512f")) f |= AG_CPU_AVX512F;
    if (__builtin_cpu_supports("avx512bw")) f |= AG_CPU_AVX512BW;
    if (__builtin_cpu_supports("avx512vnni")) f |= AG_CPU_AVX512VNNI;
    if (__builtin_cpu_supports("avx512bf16")) f |= AG_CPU_AVX512BF16;
    if ((f & AG_CPU_AVX512BF16) && __builtin_cpu_is("amd")) f |= AG_CPU_BF16_DOT_FULL_RATE;
#endif
    return f;
}

bool ag_cpu_has(unsigned want) {
    unsigned f = atomic_load_explicit(&features, memory_order_relaxed);
    if (!f) { /* threads racing here all read the same answer */
        f = read_cpu();
        atomic_store_explicit(&features, f, memory_order_relaxed);
    }
    /* AMX is asked apart: only a process that would use tiles asks Linux for them */
    const unsigned amx_bits = AG_CPU_AMX_BF16 | AG_CPU_AMX_INT8;
    if (want & amx_bits) {
        static _Atomic int amx = -1; /* -1: not yet; else the AMX features granted */
        int a = atomic_load_explicit(&amx, memory_order_relaxed);
#if AG_CPU_X86_KERNELS
        if (a < 0) atomic_store_explicit(&amx, a = (int)amx_features(), memory_order_relaxed);
#else
        a = 0;
#endif
        if ((want & amx_bits & ~(unsigned)a) != 0) return false;
        want &= ~amx_bits;
    }
    return (f & want) == want;
}
