/* ag_cpu.h -- what the CPU this process runs on can do: the one place where tapegrad's
 * libraries ask it, to choose their CPU-specific kernels at run time (library `ag_base`).
 *
 *     if (ag_cpu_has(AG_CPU_AVX512F | AG_CPU_AVX512VNNI)) run the VNNI kernel; else portable.
 *
 * A kernel file compiles its CPU-specific code under `#if AG_CPU_X86_KERNELS` (with the
 * instructions named in a target attribute, never in the build's flags) and keeps a portable
 * path that runs on any CPU. */
#ifndef TG_AG_CPU_H
#define TG_AG_CPU_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 where this compiler builds the AVX-512 kernels (x86-64 with clang or GCC 11 and later: the
 * target attribute, the AVX512-VNNI and AVX512-BF16 intrinsics, __builtin_cpu_supports), else
 * 0. Where it is 0, ag_cpu_has answers false for every feature. */
#if defined(__x86_64__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 11))
#define AG_CPU_X86_KERNELS 1
#else
#define AG_CPU_X86_KERNELS 0
#endif

/* The features a kernel may need, ORed together in ag_cpu_has's argument. */
enum {
    AG_CPU_AVX512F = 1 << 0,
    AG_CPU_AVX512BW = 1 << 1,
    AG_CPU_AVX512VNNI = 1 << 2,
    AG_CPU_AVX512BF16 = 1 << 3,
    /* AMX tiles with bf16 products (AMX-TILE and AMX-BF16), and Linux's permission for this
     * process to use them: asked once, at the first call of ag_cpu_has that asks for this
     * feature (arch_prctl ARCH_REQ_XCOMP_PERM for the tile data; granted per process, for all
     * its threads), so that a process that never would use tiles never asks. */
    AG_CPU_AMX_BF16 = 1 << 4,
    /* AMX tiles with int8 products (AMX-TILE and AMX-INT8), and the same permission. */
    AG_CPU_AMX_INT8 = 1 << 5,
    AG_CPU_AVX2 = 1 << 6,
    /* AVX512-BF16 whose dot product (vdpbf16ps) issues at float32's FMA rate, so that it does
     * twice float32's multiply-adds a cycle: AMD's cores (Zen 4 measured, docs/benchmarks.md).
     * Intel's cores run it at half that rate (Emerald Rapids measured: 0.49 of vfmadd231ps's
     * multiply-adds a second), there bf16 gains only on AMX. Read from CPUID's vendor. */
    AG_CPU_BF16_DOT_FULL_RATE = 1 << 7,
};

/* True when the CPU runs every feature in `features` (an OR of AG_CPU_*; 0: true) with the
 * operating system saving their registers, and this build can compile kernels for them
 * (AG_CPU_X86_KERNELS); false otherwise. The CPU is read once, at the first call, and the
 * answer cached: any thread may call it at any time, as often as it likes (an atomic load). It
 * does not look at the environment variables that force a portable kernel: each kernel's
 * chooser does that. */
bool ag_cpu_has(unsigned features);

#ifdef __cplusplus
}
#endif

#endif
