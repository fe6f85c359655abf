/* precision.c -- the engine's precision switch (ag_set_precision: float32 products, or bf16
 * products with float32 sums, gemm_bf16.c) and bf16 rounding (ag_bf16_round, ag_op.h). */
#include "autograd/ag_internal.h"

#include <stdint.h>
#include <string.h>

/* ---- the precision switch ---- */

static int precision = AG_FP32; /* read by ops, set between steps */

int ag_set_precision(ag_precision p) {
    if (p != AG_FP32 && p != AG_BF16)
        return ag_error("ag_set_precision: unknown precision %d (expected AG_FP32 or AG_BF16)",
                        (int)p);
#ifdef TG_DOUBLE
    if (p == AG_BF16)
        return ag_error("ag_set_precision: AG_BF16 exists only in the float32 engine (this is "
                        "the float64 one, for gradient checks)");
#endif
    precision = p;
    return 0;
}

ag_precision ag_get_precision(void) { return (ag_precision)precision; }

/* ---- bf16 rounding ---- */

uint16_t ag_bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u); /* 0, denormal: +-0 */
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* nearest, ties to even */
}

float ag_bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
