/* optim_steps.h -- the determinism run shared by test_optim.c and test_groups.c: three steps of
 * an optimizer over a store with fixed gradients, the values kept to compare two runs' bits. */
#ifndef TG_TEST_OPTIM_STEPS_H
#define TG_TEST_OPTIM_STEPS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"
#include "tests/tg_test.h"

/* Three optim_step's of o over ps; before step s the gradient of element e of parameter i is
 * sin(e + s + di * i). Then out[k] = a malloc'd copy of the store's values (the caller frees it),
 * for k == 1 asserts that out[0] and out[1] hold the same bits, and frees o and ps. */
static inline void three_steps_kept(optim *o, nn_params *ps, double di, ag_real **out, int k) {
    for (int s = 0; s < 3; s++) {
        ag_real *g = nn_params_grads(ps);
        for (size_t i = 0; i < nn_params_count(ps); i++) {
            ag_tensor *p = nn_params_at(ps, i);
            for (ptrdiff_t e = 0; e < p->numel; e++)
                g[nn_params_offset(ps, i) + (size_t)e] =
                    (ag_real)sin((double)e + s + di * (double)i);
        }
        optim_step(o);
    }
    size_t n = nn_params_flat_size(ps);
    out[k] = malloc(n * sizeof(ag_real));
    memcpy(out[k], nn_params_values(ps), n * sizeof(ag_real));
    if (k == 1) CU_ASSERT_EQUAL(memcmp(out[0], out[1], n * sizeof(ag_real)), 0);
    optim_free(o);
    nn_params_free(ps);
}

#endif
