/* groups_fixture.h -- the store, gradients and helpers shared by test_groups.c and
 * test_groups_ckpt.c (where the expected numbers come from: test_groups.c's head). */
#ifndef TG_TEST_GROUPS_FIXTURE_H
#define TG_TEST_GROUPS_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"
#include "tests/tg_test.h"

#define NEAR(a, b) CU_ASSERT_DOUBLE_EQUAL((a), (b), 1e-12 * (1 + fabs((double)(b))))

/* The store of every case: enc.w [1, 2], enc.b [1], dec.w [2, 1]; five values in this order. */
static const double P0[5] = {0.5, -1.0, 0.2, 1.5, -0.5};
/* Gradients of update 1, 2, 3, 4 (same order). */
static const double G[4][5] = {{0.3, -0.2, 0.1, -0.4, 0.25},
                               {-0.1, 0.5, 0.05, 0.2, -0.3},
                               {0.2, 0.1, -0.3, 0.1, 0.4},
                               {0.05, -0.05, 0.2, 0.3, -0.1}};

static inline nn_params *store3(void) {
    nn_params *ps = nn_params_new();
    nn_params_add(ps, "enc", "w", AG_SHAPE(1, 2), nn_init_zeros());
    nn_params_add(ps, "enc", "b", AG_SHAPE(1), nn_init_zeros());
    nn_params_add(ps, "dec", "w", AG_SHAPE(2, 1), nn_init_zeros());
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 0), 0);
    const double *v = P0;
    for (size_t i = 0; i < 3; i++) {
        ag_tensor *p = nn_params_at(ps, i);
        for (ptrdiff_t e = 0; e < p->numel; e++) p->data[e] = *v++;
    }
    return ps;
}

/* Element k (0..4) of the five values, in the data or the gradient. */
static inline ag_real *elem(nn_params *ps, int k, bool grad) {
    static const int param[5] = {0, 0, 1, 2, 2}, at[5] = {0, 1, 0, 0, 1};
    ag_tensor *p = nn_params_at(ps, (size_t)param[k]);
    return (grad ? p->grad : p->data) + at[k];
}

static inline void set_grads(nn_params *ps, const double *g) {
    for (int k = 0; k < 5; k++) *elem(ps, k, true) = g[k];
}

static inline void expect_values(nn_params *ps, const double *want) {
    for (int k = 0; k < 5; k++) NEAR(*elem(ps, k, false), want[k]);
}

static inline optim_group group_of(const optim *o, const char *params) {
    optim_group g = optim_group_like(o);
    g.params = params;
    return g;
}

/* lr multiplier 1 / (done + 1); records the `done` it is given. */
typedef struct lambda_log {
    int64_t seen[8];
    int n;
    int64_t nan_at; /* returns NaN for this `done` */
} lambda_log;

static inline double inverse(int64_t done, void *user) {
    lambda_log *l = user;
    if (l->n < 8) l->seen[l->n++] = done;
    return done == l->nan_at ? NAN : 1.0 / (double)(done + 1);
}

#endif
