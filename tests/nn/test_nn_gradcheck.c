/* test_nn_gradcheck.c -- the fused kernels of the nn layers against central differences, in
 * float64 (links nn64): every row is checked twice, through the fused nn forward and through
 * its composite of ag primitives (the reference), on the same inputs.
 *
 * One row per case, as tests/autograd/test_gradcheck.c: the function, its inputs' shapes. The
 * function picks the fused forward or the composite from its user pointer; the two have one
 * signature. Dropout streams are reseeded at every call (the same mask each evaluation).
 */
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/gc_harness.h"
#include "tests/tg_test.h"

#ifndef TG_DOUBLE
#error "the gradient checks run in float64: link nn64"
#endif

typedef struct nn_gc_case {
    const char *name;
    ag_gradcheck_fn fn;
    int n_in;
    gc_shape in[3];
} nn_gc_case;

#define X0 x[0]
#define X1 x[1]
#define X2 x[2]
/* The forward under test: the fused one, or its composite when *(const bool *)u. */
#define PICK(fused, composite) (*(const bool *)u ? (composite) : (fused))

/* Attention: 2 heads, masks per row (one of length 0), eval; k and v of different widths. */
static ag_tensor *f_attention(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    nn_attention a = {.heads = 2};
    return PICK(nn_attention_forward, nn_attention_composite)(&a, &c, X0, X1, X2,
                                                              (const int32_t[]){3, 0}, 1, NULL);
}
/* Masks per query, dropout in training, a non-contiguous q. */
static ag_tensor *f_attention_2d(ag_tape *t, ag_tensor *const *x, void *u) {
    ag_rng rng;
    ag_rng_seed(&rng, 11);
    nn_ctx c = {.tape = t, .training = true, .rng = &rng};
    nn_attention a = {.heads = 2, .dropout = {0.3}};
    ag_tensor *q = ag_transpose(t, X0, 0, 1); /* (3, 2, 4) stored (2, 3, 4): a strided view */
    return PICK(nn_attention_forward, nn_attention_composite)(
        &a, &c, q, X1, X2, (const int32_t[]){1, 4, 2, 3, 4, 1}, 2, NULL);
}

/* LayerNorm over the last axis, weight and bias. */
static ag_tensor *f_layer_norm(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    nn_layer_norm ln = {.weight = X1, .bias = X2, .ndim = 1, .shape = {X1->shape[0]}, .eps = 1e-5};
    return PICK(nn_layer_norm_forward, nn_layer_norm_composite)(&ln, &c, X0);
}
/* Two normalised axes, weight and bias. */
static ag_tensor *f_layer_norm2(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    nn_layer_norm ln = {
        .weight = X1, .bias = X2, .ndim = 2, .shape = {X1->shape[0], X1->shape[1]}, .eps = 1e-5};
    return PICK(nn_layer_norm_forward, nn_layer_norm_composite)(&ln, &c, X0);
}
/* No affine part, a transposed (strided) input. */
static ag_tensor *f_layer_norm_plain(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    nn_layer_norm ln = {.ndim = 1, .shape = {X0->shape[0]}, .eps = 1e-5};
    return PICK(nn_layer_norm_forward, nn_layer_norm_composite)(&ln, &c, ag_transpose(t, X0, 0, 1));
}

/* AddNorm over the last axis with gamma and no beta, eval. */
static ag_tensor *f_add_layer_norm(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    nn_layer_norm ln = {.weight = X2, .ndim = 1, .shape = {X2->shape[0]}, .eps = 1e-5};
    nn_dropout drop = {0.4}; /* not applied: eval */
    return PICK(nn_layer_norm_add_forward, nn_layer_norm_add_composite)(&ln, &drop, &c, X0, X1);
}
/* Dropout in training, two normalised axes, no affine part. */
static ag_tensor *f_add_layer_norm_drop(ag_tape *t, ag_tensor *const *x, void *u) {
    ag_rng rng;
    ag_rng_seed(&rng, 13);
    nn_ctx c = {.tape = t, .training = true, .rng = &rng};
    nn_layer_norm ln = {.ndim = 2, .shape = {X0->shape[1], X0->shape[2]}, .eps = 1e-5};
    nn_dropout drop = {0.4};
    return PICK(nn_layer_norm_add_forward, nn_layer_norm_add_composite)(&ln, &drop, &c, X0, X1);
}

static ag_tensor *f_additive_scores(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    nn_linear w_v = {.weight = X2, .in = X2->shape[1], .out = 1};
    return PICK(nn_additive_scores_forward, nn_additive_scores_composite)(&w_v, &c, X0, X1);
}
/* Queries and keys one tensor (self-attention). */
static ag_tensor *f_additive_self(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    nn_linear w_v = {.weight = X1, .in = X1->shape[1], .out = 1};
    return PICK(nn_additive_scores_forward, nn_additive_scores_composite)(&w_v, &c, X0, X0);
}

static ag_tensor *f_gru_cell(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    return PICK(nn_gru_cell_forward, nn_gru_cell_composite)(&c, X0, X1, X2);
}
/* gi and gh one tensor (its gradient gathers both), h a strided view. */
static ag_tensor *f_gru_cell_shared(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    return PICK(nn_gru_cell_forward, nn_gru_cell_composite)(&c, X0, X0, ag_transpose(t, X1, 0, 1));
}

static const nn_gc_case cases[] = {
    {"attention, 2 heads, lens (B,) incl. 0",
     f_attention,
     3,
     {{3, {2, 3, 4}}, {3, {2, 4, 4}}, {3, {2, 4, 6}}}},
    {"attention, lens (B,Tq), dropout, strided q",
     f_attention_2d,
     3,
     {{3, {2, 3, 4}}, {3, {3, 4, 4}}, {3, {3, 4, 2}}}},
    {"layer_norm last axis", f_layer_norm, 3, {{3, {2, 3, 5}}, {1, {5}}, {1, {5}}}},
    {"layer_norm two axes", f_layer_norm2, 3, {{3, {2, 3, 4}}, {2, {3, 4}}, {2, {3, 4}}}},
    {"layer_norm no affine, strided input", f_layer_norm_plain, 1, {{2, {6, 3}}}},
    {"add_layer_norm (gamma, no beta)",
     f_add_layer_norm,
     3,
     {{3, {2, 3, 5}}, {3, {2, 3, 5}}, {1, {5}}}},
    {"add_layer_norm, dropout, two axes, no affine",
     f_add_layer_norm_drop,
     2,
     {{3, {2, 3, 4}}, {3, {2, 3, 4}}}},
    {"additive_scores", f_additive_scores, 3, {{3, {2, 3, 5}}, {3, {2, 4, 5}}, {2, {1, 5}}}},
    {"additive_scores, q = k", f_additive_self, 2, {{3, {2, 3, 4}}, {2, {1, 4}}}},
    {"gru_cell", f_gru_cell, 3, {{2, {3, 12}}, {2, {3, 12}}, {2, {3, 4}}}},
    {"gru_cell, gi = gh, strided h", f_gru_cell_shared, 2, {{2, {2, 9}}, {2, {3, 2}}}},
};

static void test_fused_and_composite(void) {
    static const bool variants[2] = {false, true};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const nn_gc_case *k = &cases[c];
        for (int v = 0; v < 2; v++) {
            ag_rng rng;
            ag_rng_seed(&rng, 1234 + c); /* the same inputs for both variants */
            ag_tensor *in[3] = {NULL, NULL, NULL};
            gc_leaves(in, k->n_in, k->in, &rng);
            char name[160];
            gc_expect_some(gc_variant(name, sizeof name, k->name, v), k->fn, k->n_in, in,
                           (void *)&variants[v], NULL);
            gc_free(in, k->n_in);
        }
    }
}

static CU_TestInfo tests[] = {
    {"fused nn kernels and their composites against central differences", test_fused_and_composite},
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main(
        "nn_gradcheck", tests,
        "nn: fused kernels and their composites (float64, tests/nn/test_nn_gradcheck.c)");
}
