/* test_rnn_gradcheck.c -- the LSTM's and GRU's options and valid lengths (nn/rnn.h) against
 * central differences, in float64 (links nn64): the sequence ops (mask on a strided input,
 * reverse with lengths and without, last), and the whole layer of each kind w.r.t. its input,
 * h0 (c0) and every parameter: batch-first, bidirectional, 2 layers with lengths, and with
 * dropout 0.3 in training. Values, exact equivalences and refusals: test_rnn.c. */
#include <stdio.h>

#include "nn/nn.h"
#include "tests/gc_harness.h"
#include "tests/nn/rnn_test.h"
#include "tests/tg_test.h"

#ifndef TG_DOUBLE
#error "the gradient checks run in float64: link nn64"
#endif

static ag_tensor *flat(ag_tape *t, ag_tensor *x) { return ag_reshape(t, x, AG_SHAPE(-1)); }

static const int32_t gc_len[3] = {3, 1, 2};

static ag_tensor *f_seq_mask(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)u;
    return nn_seq_mask(t, ag_transpose(t, x[0], 0, 1), gc_len); /* a strided input */
}
static ag_tensor *f_seq_reverse(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)u;
    return ag_concat(
        t, 2, (ag_tensor *[]){nn_seq_reverse(t, x[0], gc_len), nn_seq_reverse(t, x[0], NULL)}, 0);
}
static ag_tensor *f_seq_last(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)u;
    return nn_seq_last(t, x[0], gc_len);
}

/* The whole layer: x, h0 (c0) and every parameter; [out; h_n (; c_n)] flattened. */
typedef struct layer_case {
    const model *m;
    const int32_t *len;
    bool training;
} layer_case;
static ag_tensor *f_layer(ag_tape *t, ag_tensor *const *x, void *u) {
    const layer_case *k = u;
    ag_rng rng;
    nn_ctx c = gc_masks_ctx(t, k->training, &rng);
    ag_tensor *hn, *cn,
        *out = fwd(k->m, &c, x[0], k->len, x[1], k->m->lstm ? x[2] : NULL, &hn, &cn);
    if (!out) return NULL;
    ag_tensor *parts[3] = {flat(t, out), flat(t, hn), cn ? flat(t, cn) : NULL};
    return ag_concat(t, cn ? 3 : 2, parts, 0);
}

static void report(ag_gradcheck_result r) {
    if (!r.ok) fprintf(stderr, "\n  %s\n", r.msg);
    CU_ASSERT_TRUE(r.ok);
    CU_ASSERT_TRUE(r.checked > 0);
    CU_ASSERT_EQUAL(r.skipped, 0);
}

static void test_gradcheck_seq_ops(void) {
    const struct {
        const char *name;
        ag_gradcheck_fn fn;
        int d0, d1;
    } cases[] = {{"seq_mask, lengths (3, 1, 2), strided x", f_seq_mask, 3, 3},
                 {"seq_reverse, lengths (3, 1, 2) and none", f_seq_reverse, 3, 3},
                 {"seq_last, lengths (3, 1, 2)", f_seq_last, 3, 3}};
    for (int k = 0; k < 3; k++) {
        ag_rng rng;
        ag_rng_seed(&rng, 40 + k);
        ag_tensor *x = ag_leaf_new(AG_SHAPE(cases[k].d0, cases[k].d1, 2), true);
        for (ptrdiff_t e = 0; e < x->numel; e++) x->data[e] = ag_rng_normal(&rng);
        report(tg_gradcheck(cases[k].name, cases[k].fn, 1, &x, NULL, NULL));
        ag_leaf_free(x);
    }
}

static void test_gradcheck_layers(void) {
    enum { T = 3, B = 3, E = 2, H = 3 };
    const struct {
        const char *name;
        int NL;
        bool bf, bi, lengths, drop;
    } cases[] = {
        {"batch-first, 1 layer", 1, true, false, false, false},
        {"bidirectional, 1 layer", 1, false, true, false, false},
        {"2 layers bidirectional, lengths (3, 1, 2)", 2, false, true, true, false},
        {"2 layers bidirectional batch-first, lengths, dropout 0.3 in training", 2, true, true,
         true, true},
    };
    for (int kind = 0; kind < 2; kind++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            model m;
            const int NL = cases[i].NL, D = cases[i].bi ? 2 : 1;
            model_init(&m, kind == 0, E, H, NL, cases[i].drop ? 0.3 : 0, cases[i].bf, cases[i].bi,
                       23 + i);
            const int ns = kind == 0 ? 2 : 1, np = (int)nn_params_count(m.ps);
            ag_tensor *in[3 + 32] = {
                ag_leaf_new(AG_SHAPE(cases[i].bf ? B : T, cases[i].bf ? T : B, E), true),
                ag_leaf_new(AG_SHAPE(NL * D, B, H), true),
                ag_leaf_new(AG_SHAPE(NL * D, B, H), true)};
            ag_rng rng;
            ag_rng_seed(&rng, 31 + i);
            for (int k = 0; k < 3; k++)
                for (ptrdiff_t e = 0; e < in[k]->numel; e++) in[k]->data[e] = ag_rng_normal(&rng);
            ag_tensor *args[3 + 32];
            int n = 0;
            for (int k = 0; k <= ns; k++) args[n++] = in[k];
            for (int p = 0; p < np; p++) args[n++] = nn_params_at(m.ps, (size_t)p);
            layer_case lc = {&m, cases[i].lengths ? gc_len : NULL, cases[i].drop};
            char name[160];
            snprintf(name, sizeof name, "%s layer, %s", kind == 0 ? "lstm" : "gru", cases[i].name);
            report(tg_gradcheck(name, f_layer, n, args, &lc, NULL));
            for (int k = 0; k < 3; k++) ag_leaf_free(in[k]);
            nn_params_free(m.ps);
        }
}

static CU_TestInfo tests[] = {
    {"gradcheck: the sequence ops", test_gradcheck_seq_ops},
    {"gradcheck: LSTM and GRU with options and lengths", test_gradcheck_layers},
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main(
        "nn_rnn_gradcheck", tests,
        "nn: LSTM and GRU options and valid lengths (float64, tests/nn/test_rnn_gradcheck.c)");
}
