/* vmath.c -- exp over arrays, vectorized (float) or libm's (double).
 *
 * float: exp(x) = 2^n * e^r with n = round(x / ln 2) and r = x - n ln 2 in [-ln2/2, ln2/2]
 * (ln 2 split in two parts, Cody-Waite, so r is exact to float precision); e^r by a degree-7
 * polynomial (Taylor coefficients: truncation error < 6e-9 relative on that interval); 2^n as
 * 2^s 2^(n-s), s = [n > 0], 2^(n-s) built from the float's exponent bits (a normal number for
 * every n in [-126, 128], so neither end overflows or underflows early). Every step is a branch-free select, and the
 * rounding uses the 1.5 * 2^23 trick instead of floorf (which GCC will not vectorize under
 * IEEE trapping rules), so the loop vectorizes.
 * Special cases are selected at the end: NaN stays NaN, x > 88.72 gives +inf, x < -87.33 gives
 * 0 (libm returns subnormals down to -103.97; a softmax cannot tell them from 0).
 * Accuracy against libm's expf: within 2 ulp (tests/autograd/test_ops.c checks it).
 */
#include "autograd/ag_internal.h"

#include <math.h>
#include <string.h>

#ifdef TG_DOUBLE

void ag__vexp(const ag_real *x, ag_real *y, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) y[i] = exp(x[i]);
}

#else

void ag__vexp(const ag_real *restrict x, ag_real *restrict y, ptrdiff_t n) {
    const float log2e = 1.44269504088896341f, ln2_hi = 0.693145751953125f,
                ln2_lo = 1.428606765330187e-06f, hi = 88.7228394f, lo = -87.3365479f,
                round = 12582912.0f; /* 1.5 * 2^23: adding and subtracting it rounds to nearest */
    for (ptrdiff_t i = 0; i < n; i++) {
        float v = x[i];
        float c = v > hi ? hi : v;
        c = c < lo ? lo : c;
        c = c != c ? 0.0f : c;
        float k = (c * log2e + round) - round; /* in [-126, 128] */
        float r = (c - k * ln2_hi) - k * ln2_lo;
        float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
        float s = k > 0 ? 1.0f : 0.0f; /* 2^k = 2^s 2^(k-s): both normal for k in [-126, 128] */
        int32_t bits = ((int32_t)(k - s) + 127) << 23;
        float two_ks;
        memcpy(&two_ks, &bits, sizeof two_ks);
        float e = (p * (1.0f + s)) * two_ks;
        e = v < lo ? 0.0f : e;
        e = v > hi ? INFINITY : e;
        y[i] = v != v ? v : e;
    }
}

#endif
