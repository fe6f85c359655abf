/* gc_harness.h -- float64 gradient checks of a zoo module w.r.t. its inputs and every
 * parameter (shared by the zoo's gradient-check tests).
 *
 *     harness h = {.ps = nn_params_new()};
 *     zoo_mha m; zoo_mha_init(&m, h.ps, "mha", ...);   // register the module's parameters
 *     add_data(&h, AG_SHAPE(2, 3, 4), &rng);              // data inputs first
 *     finish(&h);                                         // finalize; parameters become inputs
 *     check(&h, "multi-head attention", run, &m, false);   // frees the inputs and the store
 */
#ifndef TG_GC_HARNESS_H
#define TG_GC_HARNESS_H

#include <stdio.h>

#include "nn/nn.h"
#include "tests/gradcheck_table.h"
#include "tests/tg_test.h"

#ifndef TG_DOUBLE
#error "gradient checks link the float64 twins (zoo64)"
#endif

#define MAX_IN 128

typedef struct harness {
    nn_params *ps;
    ag_tensor *in[MAX_IN];
    int n_data; /* data leaves first, then every parameter */
    int n;
} harness;

static inline void add_data(harness *h, int nd, const int *shape, ag_rng *r) {
    ag_tensor *x = ag_leaf_new(nd, shape, true);
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = ag_rng_normal(r);
    x->name = "input";
    h->in[h->n_data++] = x;
}

static inline void finish(harness *h) {
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(h->ps, 21), 0);
    h->n = h->n_data;
    for (size_t i = 0; i < nn_params_count(h->ps) && h->n < MAX_IN; i++)
        h->in[h->n++] = nn_params_at(h->ps, i);
    CU_ASSERT_EQUAL_FATAL((size_t)(h->n - h->n_data), nn_params_count(h->ps));
}

/* kinks: skip points where one-sided differences disagree (ReLU at 0); at most a quarter. */
static inline void check(harness *h, const char *name, ag_gradcheck_fn fn, void *user, bool kinks) {
    ag_gradcheck_opts o = {.skip_kinks = kinks, .max_elems = 24};
    ag_gradcheck_result r = tg_gradcheck(name, fn, h->n, h->in, user, &o);
    if (!r.ok) fprintf(stderr, "\n  %s\n", r.msg);
    CU_ASSERT_TRUE(r.ok);
    CU_ASSERT_TRUE(r.checked > 0);
    CU_ASSERT_TRUE(r.skipped <= r.checked / 4);
    for (int i = 0; i < h->n_data; i++) ag_leaf_free(h->in[i]);
    nn_params_free(h->ps);
}

static inline nn_ctx eval_ctx(ag_tape *t) { return (nn_ctx){.tape = t, .training = false}; }

#endif
