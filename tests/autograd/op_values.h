/* op_values.h -- what the float32 value tests of the ops share (header only): test_pointwise.c,
 * test_reduce_index.c, test_losses.c.
 *
 *     ag_tensor *x = leaf(AG_SHAPE(5), (const ag_real[]){-2, -0.5, 0, 0.5, 3}, true);
 *     backward_sum(t, ag_abs(t, x));      // d sum(y) / d x into x->grad
 *     NEAR(x->grad[0], -1);               // within 2e-6 (1 + |want|)
 *     zero_grad(x);
 */
#ifndef TG_OP_VALUES_H
#define TG_OP_VALUES_H

#include <math.h>
#include <string.h>

#include "autograd/ag_op.h"
#include "tests/tg_test.h"

/* a == b within float32 rounding of a few operations. */
#define NEAR(a, b) CU_ASSERT_DOUBLE_EQUAL((double)(a), (b), 2e-6 * (1 + fabs((double)(b))))

/* A new leaf of that shape holding v[0..numel) (the caller frees it: ag_leaf_free). */
static inline ag_tensor *leaf(int nd, const int *shape, const ag_real *v, bool rg) {
    ag_tensor *x = ag_leaf_new(nd, shape, rg);
    memcpy(x->data, v, (size_t)x->numel * sizeof *v);
    return x;
}

/* Asserts y exists, then accumulates d sum(y) / d x into every input x requiring a gradient. */
static inline void backward_sum(ag_tape *t, ag_tensor *y) {
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, y, AG_ALL, false)), 0);
}

/* Zeroes x's gradient. */
static inline void zero_grad(ag_tensor *x) {
    memset(x->grad, 0, (size_t)x->numel * sizeof *x->grad);
}

#endif
