/* cpu.c -- the CPU's features, read once (ag_cpu.h). */
#include "autograd/ag_cpu.h"

#include <stdatomic.h>

#define READ (1u << 31) /* set once the CPU was read: 0 means "not yet" */

static _Atomic unsigned features;

static unsigned read_cpu(void) {
    unsigned f = READ;
#if AG_CPU_X86_KERNELS
    /* libgcc reads CPUID (and XGETBV: the AVX-512 state must be enabled by the OS) in a
     * constructor; the call makes sure of it, and is idempotent. */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) f |= AG_CPU_AVX512F;
    if (__builtin_cpu_supports("avx512bw")) f |= AG_CPU_AVX512BW;
    if (__builtin_cpu_supports("avx512vnni")) f |= AG_CPU_AVX512VNNI;
    if (__builtin_cpu_supports("avx512bf16")) f |= AG_CPU_AVX512BF16;
#endif
    return f;
}

bool ag_cpu_has(unsigned want) {
    unsigned f = atomic_load_explicit(&features, memory_order_relaxed);
    if (!f) { /* threads racing here all read the same answer */
        f = read_cpu();
        atomic_store_explicit(&features, f, memory_order_relaxed);
    }
    return (f & want) == want;
}
