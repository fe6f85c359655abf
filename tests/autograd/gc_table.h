/* gc_table.h -- the table driver of the float64 op gradient checks (header only; the programs
 * link ag64): tests/autograd/test_gradcheck.c and test_gradcheck_toolkit.c.
 *
 * One row per case: the function, its inputs' shapes, how they are drawn, the checker's knobs.
 *
 *     FN(f_add, ag_add(t, X0, X1))                 // an ag_gradcheck_fn of the inputs X0..X2
 *     static const gc_case cases[] = {
 *         {"add", f_add, 2, {S2(3, 4), S1(4)}, NORMAL, DEFAULTS},
 *         {"relu", f_relu, 1, {S2(3, 5)}, NORMAL, KINKS},
 *     };
 *     gc_table_run(cases, sizeof cases / sizeof *cases, 1234);  // every row must pass
 *     return gc_table_main("gradcheck", tests, "autograd: ... (float64, tests/...)");
 */
#ifndef TG_GC_TABLE_H
#define TG_GC_TABLE_H

#include "autograd/ag_op.h"
#include "tests/gradcheck_table.h"
#include "tests/tg_test.h"

#include <stdio.h>

#ifndef TG_DOUBLE
#error "the gradient checks run in float64: link ag64"
#endif

typedef struct gc_table_shape {
    int nd, d[4];
} gc_table_shape;
enum { NORMAL, POSITIVE };

typedef struct gc_case {
    const char *name;
    ag_gradcheck_fn fn;
    int n_in;
    gc_table_shape in[3];
    int init; /* NORMAL: N(0,1); POSITIVE: U(0.5, 2) */
    ag_gradcheck_opts opts;
} gc_case;

#define X0 x[0]
#define X1 x[1]
#define X2 x[2]
#define FN(name, expr)                                                                             \
    static ag_tensor *name(ag_tape *t, ag_tensor *const *x, void *u) {                             \
        (void)u;                                                                                   \
        (void)x;                                                                                   \
        return (expr);                                                                             \
    }

#define S1(a)                                                                                      \
    {                                                                                              \
        1, { a }                                                                                   \
    }
#define S2(a, b)                                                                                   \
    {                                                                                              \
        2, { a, b }                                                                                \
    }
#define S3(a, b, c)                                                                                \
    {                                                                                              \
        3, { a, b, c }                                                                             \
    }
#define S4(a, b, c, d)                                                                             \
    {                                                                                              \
        4, { a, b, c, d }                                                                          \
    }
#define KINKS                                                                                      \
    { .skip_kinks = true }
#define DEFAULTS                                                                                   \
    { .eps = 0 }

/* Fills x with draws from rng: N(0, 1) (NORMAL) or U(0.5, 2) (POSITIVE). */
static inline void gc_table_fill(ag_tensor *x, int init, ag_rng *rng) {
    for (ptrdiff_t i = 0; i < x->numel; i++)
        x->data[i] = init == POSITIVE ? 0.5 + 1.5 * ag_rng_uniform(rng) : ag_rng_normal(rng);
}

/* tg_gradcheck (a row of the table) of every case, its inputs drawn in turn from one generator
 * seeded with seed; asserts each passed, checked something and skipped at most a quarter. */
static inline void gc_table_run(const gc_case *cases, size_t n, uint64_t seed) {
    ag_rng rng;
    ag_rng_seed(&rng, seed);
    for (size_t c = 0; c < n; c++) {
        const gc_case *k = &cases[c];
        ag_tensor *in[3] = {NULL, NULL, NULL};
        for (int i = 0; i < k->n_in; i++) {
            in[i] = ag_leaf_new(k->in[i].nd, k->in[i].d, true);
            gc_table_fill(in[i], k->init, &rng);
        }
        ag_gradcheck_result r = tg_gradcheck(k->name, k->fn, k->n_in, in, NULL, &k->opts);
        if (!r.ok) fprintf(stderr, "\n  %s\n", r.msg);
        CU_ASSERT_TRUE(r.ok);
        CU_ASSERT_TRUE(r.checked > 0);
        /* Kinks are rare at random points: a check that skipped most points checked nothing. */
        CU_ASSERT_TRUE(r.skipped <= r.checked / 4);
        for (int i = 0; i < k->n_in; i++) ag_leaf_free(in[i]);
    }
}

/* No error handler, tg_test_main of one suite, then the table of its checks under title.
 * Returns tg_test_main's exit status. */
static inline int gc_table_main(const char *suite, const CU_TestInfo *tests, const char *title) {
    ag_set_error_handler(NULL, NULL);
    int rc = tg_test_main(suite, tests);
    tg_gc_print(title);
    return rc;
}

#endif
