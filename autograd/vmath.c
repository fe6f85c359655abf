/* vmath.c -- exp over arrays (the element functions and their accuracy: autograd/ag_op.h). */
#include "autograd/ag_internal.h"

void ag_vexp(const ag_real *restrict x, ag_real *restrict y, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) y[i] = ag_exp1(x[i]);
}

void ag_vexp_inplace(ag_real *x, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) x[i] = ag_exp1(x[i]);
}
