/* gc_harness.h -- what the gradient-check tests share (header only, static inline).
 *
 * In any build: one suite's main that prints the table of the checks it ran
 * (tests/gradcheck_table.h; nothing in a float32 build, which runs none):
 *
 *     int main(void) { return gc_main("nn_lstm", tests, "nn: LSTM cell and layer (float64, ...)"); }
 *     CU_ASSERT(gc_max_diff(out, ref) < TOL);              // a tensor against a naive loop's doubles
 *
 * In float64 (TG_DOUBLE: the programs linking nn64, zoo64): leaves of random values and checks
 * that must pass,
 *
 *     gc_leaves(in, 3, (const gc_shape[]){{2, {3, 4}}, ...}, &rng);   // N(0, 1) leaves
 *     gc_fill(in, 3, &rng);                                  // or fill leaves made elsewhere
 *     ag_gradcheck_result r = gc_expect(name, fn, 3, in, user, NULL);  // asserts r.ok
 *     gc_expect_some(name, fn, 3, in, user, NULL);  // also: checked > 0, <= 1/4 kinks skipped
 *     gc_free(in, 3);
 *     gc_variant(buf, sizeof buf, "lstm_cell", composite);   // "lstm_cell (composite)"
 *     gc_expect_variants(name, fn, 3, shapes, seed, &u, &u.composite);  // fused, then composite
 *
 * and the harness of a module checked w.r.t. its inputs and every parameter:
 *
 *     gc_harness h = {.ps = nn_params_new()};
 *     zoo_mha m; zoo_mha_init(&m, h.ps, "mha", ...);     // register the module's parameters
 *     gc_add_data(&h, AG_SHAPE(2, 3, 4), &rng);            // data inputs first
 *     gc_check(&h, "multi-head attention", run, &m, false); // finalizes the store (its parameters
 *                                                          // follow the data), checks, frees
 */
#ifndef TG_GC_HARNESS_H
#define TG_GC_HARNESS_H

#include <math.h>
#include <stdio.h>

#include "nn/nn.h"
#include "tests/gradcheck_table.h"
#include "tests/tg_test.h"

/* tg_test_main of one suite, then the table of its gradient checks under title (tg_gc_print).
 * Returns tg_test_main's exit status. */
static inline int gc_main(const char *suite, const CU_TestInfo *tests, const char *title) {
    int rc = tg_test_main(suite, tests);
    tg_gc_print(title);
    return rc;
}

/* The largest |a[i] - ref[i]| over a's elements (a reference computed in double: a naive loop).
 * 0 for an empty a. */
static inline double gc_max_diff(const ag_tensor *a, const double *ref) {
    double m = 0;
    for (ptrdiff_t i = 0; i < a->numel; i++) m = fmax(m, fabs(ag_get(a, i) - ref[i]));
    return m;
}

#ifdef TG_DOUBLE

/* ---- leaves and checks ---- */

/* The shape of an input: nd dimensions d[0..nd). */
typedef struct gc_shape {
    int nd, d[4];
} gc_shape;

/* Fills the leaves in[0..n) with N(0, 1) draws from r, one leaf after the other. */
static inline void gc_fill(ag_tensor *const *in, int n, ag_rng *r) {
    for (int k = 0; k < n; k++)
        for (ptrdiff_t e = 0; e < in[k]->numel; e++) in[k]->data[e] = ag_rng_normal(r);
}

/* in[0..n): new leaves of the given shapes that require a gradient, gc_fill'ed from r. */
static inline void gc_leaves(ag_tensor **in, int n, const gc_shape *shapes, ag_rng *r) {
    for (int k = 0; k < n; k++) in[k] = ag_leaf_new(shapes[k].nd, shapes[k].d, true);
    gc_fill(in, n, r);
}

/* buf = "name (fused)", or "name (composite)" when composite: the rows of a fused kernel and of
 * its composite of primitives. Returns buf. */
static inline const char *gc_variant(char *buf, size_t size, const char *name, int composite) {
    snprintf(buf, size, "%s (%s)", name, composite ? "composite" : "fused");
    return buf;
}

/* Frees the leaves in[0..n). */
static inline void gc_free(ag_tensor *const *in, int n) {
    for (int k = 0; k < n; k++) ag_leaf_free(in[k]);
}

/* tg_gradcheck (a row of the table) of fn at in[0..n) under o (NULL: ag_gradcheck's defaults);
 * asserts that it passed, its message on stderr otherwise. Returns the result. */
static inline ag_gradcheck_result gc_expect(const char *name, ag_gradcheck_fn fn, int n,
                                            ag_tensor *const *in, void *user,
                                            const ag_gradcheck_opts *o) {
    ag_gradcheck_result r = tg_gradcheck(name, fn, n, in, user, o);
    if (!r.ok) fprintf(stderr, "\n  %s\n", r.msg);
    CU_ASSERT_TRUE(r.ok);
    return r;
}

/* gc_expect, and some elements were checked, at most a quarter of that skipped at kinks. */
static inline ag_gradcheck_result gc_expect_some(const char *name, ag_gradcheck_fn fn, int n,
                                                 ag_tensor *const *in, void *user,
                                                 const ag_gradcheck_opts *o) {
    ag_gradcheck_result r = gc_expect(name, fn, n, in, user, o);
    CU_ASSERT_TRUE(r.checked > 0);
    CU_ASSERT_TRUE(r.skipped <= r.checked / 4);
    return r;
}

/* Both rows of a fused kernel: for *composite = false, then true, new leaves of the given shapes
 * drawn by gc_leaves from a generator seeded with seed (the same values both times), gc_expect
 * of fn under gc_variant(name, composite), asserted to have checked some elements, then freed.
 * user: fn's, holding the flag composite points to. */
static inline void gc_expect_variants(const char *name, ag_gradcheck_fn fn, int n,
                                      const gc_shape *shapes, uint64_t seed, void *user,
                                      bool *composite) {
    for (int v = 0; v < 2; v++) {
        ag_rng rng;
        ag_rng_seed(&rng, seed);
        *composite = v;
        ag_tensor *in[4] = {NULL, NULL, NULL, NULL};
        gc_leaves(in, n, shapes, &rng);
        char buf[160];
        CU_ASSERT_TRUE(
            gc_expect(gc_variant(buf, sizeof buf, name, v), fn, n, in, user, NULL).checked > 0);
        gc_free(in, n);
    }
}

/* ---- a module w.r.t. its inputs and every parameter ---- */

#define GC_MAX_IN 128

typedef struct gc_harness {
    nn_params *ps;
    ag_tensor *in[GC_MAX_IN];
    int n_data; /* data leaves first, then every parameter */
    int n;
} gc_harness;

/* A data input: a leaf of that shape named "input", N(0, 1) draws from r. */
static inline void gc_add_data(gc_harness *h, int nd, const int *shape, ag_rng *r) {
    ag_tensor *x = ag_leaf_new(nd, shape, true);
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = ag_rng_normal(r);
    x->name = "input";
    h->in[h->n_data++] = x;
}

/* Finalizes the store (seed 21); its parameters follow the data inputs (gc_check calls it). */
static inline void gc_finish(gc_harness *h) {
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(h->ps, 21), 0);
    h->n = h->n_data;
    for (size_t i = 0; i < nn_params_count(h->ps) && h->n < GC_MAX_IN; i++)
        h->in[h->n++] = nn_params_at(h->ps, i);
    CU_ASSERT_EQUAL_FATAL((size_t)(h->n - h->n_data), nn_params_count(h->ps));
}

/* gc_finish, then gc_expect_some over every input, at most 24 elements of each; kinks: skip
 * points where one-sided differences disagree (ReLU at 0). Then frees the data inputs and the
 * store. */
static inline void gc_check(gc_harness *h, const char *name, ag_gradcheck_fn fn, void *user,
                            bool kinks) {
    gc_finish(h);
    ag_gradcheck_opts o = {.skip_kinks = kinks, .max_elems = 24};
    gc_expect_some(name, fn, h->n, h->in, user, &o);
    gc_free(h->in, h->n_data);
    nn_params_free(h->ps);
}

static inline nn_ctx gc_eval_ctx(ag_tape *t) { return (nn_ctx){.tape = t, .training = false}; }

/* A context on t whose dropout draws the same masks at every evaluation of a checked function:
 * rng (the caller's) seeded with 17. */
static inline nn_ctx gc_masks_ctx(ag_tape *t, bool training, ag_rng *rng) {
    ag_rng_seed(rng, 17);
    return (nn_ctx){.tape = t, .training = training, .rng = rng};
}

#endif /* TG_DOUBLE */

#endif
