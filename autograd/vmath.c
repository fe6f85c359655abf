/* vmath.c -- exp over arrays (the element functions and their accuracy: autograd/ag_op.h). */
#include "autograd/ag_internal.h"

/* A portable build (TG_NATIVE=OFF, x86-64 GCC: CMake defines TG_MULTIVERSION) compiles the hot
 * loops below three times, for the x86-64 baseline, AVX2 and AVX-512 (x86-64-v4: its masks let
 * GCC vectorize exp's clamps, which it will not do without them under IEEE traps), and the
 * loader picks one from the CPU (GCC's target_clones, glibc's ifunc). Same code, same bits: ISO
 * C mode contracts no a * b + c into an FMA. */
#if defined(TG_MULTIVERSION) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TG_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define TG_CLONES
#endif

TG_CLONES void ag_vexp(const ag_real *restrict x, ag_real *restrict y, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) y[i] = ag_exp1(x[i]);
}

TG_CLONES void ag_vexp_inplace(ag_real *x, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) x[i] = ag_exp1(x[i]);
}
