/* test_zoo_modules.c -- docs/spec.md's examples for the attention modules and the Transformer,
 * masks, causality, and incremental decoding against the full causal pass (float32). */
#include "tests/tg_test.h"
#include "tests/zoo/zoo_test.h"
#include "zoo/models/transformer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static ag_rng rng;

static ag_tensor *filled(ag_tape *t, int nd, const int *shape, double v) {
    ag_tensor *x = ag_tensor_new(t, nd, shape);
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)v;
    return x;
}
static ag_tensor *randn(ag_tape *t, int nd, const int *shape) {
    ag_tensor *x = ag_tensor_new(t, nd, shape);
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)ag_rng_normal(&rng);
    return x;
}
/* values = 0..39 as (1, 10, 4) repeated to (2, 10, 4) */
static ag_tensor *d2l_values(ag_tape *t) {
    ag_tensor *v = ag_tensor_new(t, AG_SHAPE(2, 10, 4));
    for (int i = 0; i < 80; i++) v->data[i] = (ag_real)(i % 40);
    return v;
}
static void expect_d2l_output(const ag_tensor *y) {
    CU_ASSERT_EQUAL_FATAL(y->numel, 8);
    const ag_real want[8] = {2, 3, 4, 5, 10, 11, 12, 13};
    for (int i = 0; i < 8; i++) CU_ASSERT_DOUBLE_EQUAL(y->data[i], want[i], 1e-4);
}

static void test_dot_attention_example(void) {
    ag_tape *t = ag_tape_new();
    ag_rng_seed(&rng, 1);
    nn_ctx c = {.tape = t, .training = false};
    zoo_dot_attention a;
    CU_ASSERT_EQUAL(zoo_dot_attention_init(&a, 0.5), 0);
    ag_tensor *w;
    ag_tensor *y = zoo_dot_attention_forward(&a, &c, randn(t, AG_SHAPE(2, 1, 2)),
                                             filled(t, AG_SHAPE(2, 10, 2), 1), d2l_values(t),
                                             (const int32_t[]){2, 6}, 1, &w);
    CU_ASSERT_EQUAL(y->shape[0], 2);
    CU_ASSERT_EQUAL(y->shape[1], 1);
    CU_ASSERT_EQUAL(y->shape[2], 4);
    expect_d2l_output(y);
    CU_ASSERT_DOUBLE_EQUAL(w->data[1], 0.5, 1e-6); /* uniform over 2 valid keys */
    CU_ASSERT_EQUAL(w->data[2], 0);                /* padded keys get weight 0 */
    CU_ASSERT_EQUAL(w->data[10 + 6], 0);
    ag_tape_free(t);
}

static void test_additive_attention_example(void) {
    ag_tape *t = ag_tape_new();
    ag_rng_seed(&rng, 2);
    nn_params *ps = nn_params_new();
    zoo_additive_attention a;
    CU_ASSERT_EQUAL(zoo_additive_attention_init(&a, ps, "attention", 2, 20, 8, 0.1), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 7), 0);
    CU_ASSERT_STRING_EQUAL(nn_params_at(ps, 0)->name, "attention.W_k.weight");
    CU_ASSERT_STRING_EQUAL(nn_params_at(ps, 2)->name, "attention.w_v.weight");
    CU_ASSERT_EQUAL(nn_params_at(ps, 2)->shape[0], 1);
    nn_ctx c = {.tape = t, .training = false};
    ag_tensor *y = zoo_additive_attention_forward(&a, &c, randn(t, AG_SHAPE(2, 1, 20)),
                                                  filled(t, AG_SHAPE(2, 10, 2), 1), d2l_values(t),
                                                  (const int32_t[]){2, 6}, 1, NULL);
    expect_d2l_output(y);
    ag_tape_free(t);
    nn_params_free(ps);
}

static void test_mha_shape(void) {
    ag_tape *t = ag_tape_new();
    nn_params *ps = nn_params_new();
    zoo_mha m;
    CU_ASSERT_EQUAL(zoo_mha_init(&m, ps, "mha", 100, 100, 100, 100, 5, 0.5, false), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 7), 0);
    CU_ASSERT_EQUAL(nn_params_count(ps), 4);
    nn_ctx c = {.tape = t, .training = false};
    ag_tensor *w;
    ag_tensor *y = zoo_mha_forward(
        &m, &c, filled(t, AG_SHAPE(2, 4, 100), 1), filled(t, AG_SHAPE(2, 6, 100), 1),
        filled(t, AG_SHAPE(2, 6, 100), 1), (const int32_t[]){3, 2}, 1, &w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(y->ndim, 3);
    CU_ASSERT_EQUAL(y->shape[0], 2);
    CU_ASSERT_EQUAL(y->shape[1], 4);
    CU_ASSERT_EQUAL(y->shape[2], 100);
    /* per head: rows b*5+h; batch 1 heads see 2 keys */
    CU_ASSERT_EQUAL(w->shape[0], 10);
    CU_ASSERT_DOUBLE_EQUAL(w->data[(size_t)7 * 4 * 6 + 1], 0.5, 1e-6);
    CU_ASSERT_EQUAL(w->data[(size_t)7 * 4 * 6 + 2], 0);
    CU_ASSERT_DOUBLE_EQUAL(w->data[(size_t)4 * 4 * 6 + 2], 1.0 / 3, 1e-6);
    ag_tape_free(t);
    nn_params_free(ps);
}

static void test_ffn_and_blocks_shapes(void) {
    ag_tape *t = ag_tape_new();
    nn_params *ps = nn_params_new();
    zoo_ffn f;
    zoo_encoder_block eb;
    zoo_decoder_block db;
    CU_ASSERT_EQUAL(zoo_ffn_init(&f, ps, "ffn", 4, 4, 8), 0);
    const int norm[2] = {100, 24};
    CU_ASSERT_EQUAL(zoo_encoder_block_init(&eb, ps, "enc", 24, 2, norm, 48, 8, 0.5), 0);
    CU_ASSERT_EQUAL(zoo_decoder_block_init(&db, ps, "dec", 24, 2, norm, 48, 8, 0.5), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 3), 0);
    nn_ctx c = {.tape = t, .training = false};
    ag_tensor *y = zoo_ffn_forward(&f, &c, filled(t, AG_SHAPE(2, 3, 4), 1));
    CU_ASSERT_EQUAL(y->shape[2], 8);
    for (int i = 0; i < 48; i++) CU_ASSERT_EQUAL(y->data[i], y->data[i % 8]); /* positions equal */
    ag_tensor *x = filled(t, AG_SHAPE(2, 100, 24), 1);
    const int32_t vl[2] = {3, 2};
    ag_tensor *e = zoo_encoder_block_forward(&eb, &c, x, vl, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->shape[0], 2);
    CU_ASSERT_EQUAL(e->shape[1], 100);
    CU_ASSERT_EQUAL(e->shape[2], 24);
    ag_tensor *d = zoo_decoder_block_forward(&db, &c, x, NULL, e, vl, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->shape[1], 100);
    CU_ASSERT_EQUAL(d->shape[2], 24);
    ag_tape_free(t);
    nn_params_free(ps);
}

static void test_positional_encoding_values(void) {
    zoo_pos_encoding pe;
    CU_ASSERT_EQUAL_FATAL(zoo_pos_encoding_init(&pe, 32, 0, 1000), 0);
    CU_ASSERT_EQUAL(pe.P[0], 0); /* sin 0 */
    CU_ASSERT_EQUAL(pe.P[1], 1); /* cos 0 */
    CU_ASSERT_DOUBLE_EQUAL(pe.P[32 * 3 + 0], sin(3.0), 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(pe.P[32 * 7 + 5], cos(7 / pow(10000, 4.0 / 32)), 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(pe.P[32 * 999 + 30], sin(999 / pow(10000, 30.0 / 32)), 1e-6);
    zoo_pos_encoding_free(&pe);
}

/* ---- the whole model ---- */

/* The tiny model: 8 hiddens, 12 in the FFN, 2 heads (zt_tiny_model). */
static zoo_transformer_cfg tiny_cfg(int layers, double dropout) {
    zoo_transformer_cfg cfg = zoo_transformer_default_cfg;
    cfg.hiddens = 8;
    cfg.ffn_hiddens = 12;
    cfg.heads = 2;
    cfg.layers = layers;
    cfg.dropout = dropout;
    return cfg;
}

static zoo_transformer *tiny_new(int layers, double dropout) {
    zoo_transformer_cfg cfg = tiny_cfg(layers, dropout);
    return (zoo_transformer *)zt_tiny_model(&zoo_transformer_kind, &cfg);
}


static void test_parameter_names(void) {
    zoo_transformer *m = tiny_new(2, 0.1);
    size_t n = nn_params_count(m->base.ps);
    CU_ASSERT_EQUAL(n, 1 + 2 * (4 + 2 + 4 + 2) + 1 + 2 * (4 + 2 + 4 + 2 + 4 + 2) + 2);
    CU_ASSERT_STRING_EQUAL(nn_params_at(m->base.ps, 0)->name, "encoder.embedding.weight");
    CU_ASSERT_STRING_EQUAL(nn_params_at(m->base.ps, 1)->name,
                           "encoder.blks.block0.attention.W_q.weight");
    CU_ASSERT_STRING_EQUAL(nn_params_at(m->base.ps, 5)->name,
                           "encoder.blks.block0.addnorm1.ln.weight");
    CU_ASSERT_STRING_EQUAL(nn_params_at(m->base.ps, 7)->name,
                           "encoder.blks.block0.ffn.dense1.weight");
    CU_ASSERT_STRING_EQUAL(nn_params_at(m->base.ps, n - 1)->name, "decoder.dense.bias");
    CU_ASSERT_PTR_NOT_NULL(nn_params_find(m->base.ps, "decoder.blks.block1.attention2.W_o.weight"));
    CU_ASSERT_PTR_NOT_NULL(nn_params_find(m->base.ps, "decoder.blks.block1.addnorm3.ln.bias"));
    ag_tensor *w = nn_params_find(m->base.ps, "decoder.dense.weight");
    CU_ASSERT_EQUAL(w->shape[0], 11); /* (out, in) as PyTorch */
    CU_ASSERT_EQUAL(w->shape[1], 8);
    zoo_model_free(&m->base);
}

/* embed_std: the embeddings drawn from N(0, std^2); 0 keeps PyTorch's N(0, 1). */
static void test_embedding_std(void) {
    double stds[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        nn_params *ps = nn_params_new();
        zoo_transformer_cfg cfg = zoo_transformer_defaults(400, 500);
        cfg.embed_std = k ? 0.0625 : 0;
        zoo_transformer tf;
        CU_ASSERT_EQUAL_FATAL(zoo_transformer_init(&tf, ps, &cfg), 0);
        CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 5), 0);
        const ag_tensor *e = nn_params_find(ps, "decoder.embedding.weight");
        double ss = 0;
        for (ptrdiff_t i = 0; i < e->numel; i++) ss += (double)e->data[i] * e->data[i];
        stds[k] = sqrt(ss / (double)e->numel); /* 16,000 draws: within 2% */
        zoo_transformer_free(&tf);
        nn_params_free(ps);
    }
    CU_ASSERT_DOUBLE_EQUAL(stds[0], 1.0, 0.02);
    CU_ASSERT_DOUBLE_EQUAL(stds[1], 0.0625, 0.0625 * 0.02);
}

/* Changing a later target token leaves the earlier positions' logits unchanged. */
static void test_decoder_is_causal(void) {
    zoo_transformer *m = tiny_new(2, 0);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = false};
    zoo_tf_state *s = zoo_transformer_encode(m, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5, NULL);
    ag_tensor *a = zoo_transformer_decode(m, &c, s, ZT_BATCH_DEC_IN, 2, 4);
    int32_t changed[8];
    memcpy(changed, ZT_BATCH_DEC_IN, sizeof changed);
    changed[2] = 1;
    changed[4 + 3] = 9;
    ag_tensor *b = zoo_transformer_decode(m, &c, s, changed, 2, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    int V = 11;
    for (int k = 0; k < 2 * V; k++) CU_ASSERT_EQUAL(a->data[k], b->data[k]); /* row 0, t 0..1 */
    for (int k = 0; k < 3 * V; k++)
        CU_ASSERT_EQUAL(a->data[4 * V + k], b->data[4 * V + k]); /* row 1, t 0..2 */
    bool differs = false;
    for (int k = 2 * V; k < 3 * V; k++) differs |= a->data[k] != b->data[k];
    CU_ASSERT_TRUE(differs);
    ag_tape_free(t);
    zoo_model_free(&m->base);
}

/* Max |a - b| over n values. */
static double max_err(const ag_real *a, const ag_real *b, int n) {
    double e = 0;
    for (int i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]));
    return e;
}

/* Step-by-step decoding with the key/value caches gives the full causal pass's logits, also
 * past a reallocation of the caches and after a select of the rows; the step is inference
 * only. */
static void test_incremental_equals_full(void) {
    zoo_transformer *m = tiny_new(2, 0.1);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = false};
    zoo_tf_state *s = zoo_transformer_encode(m, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5, NULL);
    ag_tensor *full = zoo_transformer_decode(m, &c, s, ZT_BATCH_DEC_IN, 2, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full);
    /* recording gradients: refused (the caches would cut them) */
    ag_set_error_handler(tg_capture, NULL);
    TG_EXPECT_NULL(m->base.ops->step(&m->base, &c, s, ZT_BATCH_DEC_IN, 2, NULL), "inference only");
    CU_ASSERT_EQUAL(s->steps, 0);
    ag_tape_reset(t);
    ag_tape_set_recording(t, false);
    s = zoo_transformer_encode(m, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5, NULL);
    full = zoo_transformer_decode(m, &c, s, ZT_BATCH_DEC_IN, 2, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full);
    CU_ASSERT_EQUAL_FATAL(m->base.ops->reserve(&m->base, &c, s, 2, 2), 0); /* full after 2 steps */
    int V = 11;
    double err = 0;
    ag_tensor *w = NULL; /* the last step's cross-attention weights of block 1 */
    for (int step = 0; step < 4; step++) {
        int32_t tok[2] = {ZT_BATCH_DEC_IN[step], ZT_BATCH_DEC_IN[4 + step]};
        ag_tensor *cross[2] = {0}, *self[2] = {0};
        zoo_attn_trace tr = {.dec_self = self, .dec_cross = cross};
        ag_tensor *y = m->base.ops->step(&m->base, &c, s, tok, 2, &tr);
        w = cross[1]; /* (2*2, 1, 5) */
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_EQUAL(y->shape[1], 1);
        CU_ASSERT_EQUAL(self[0]->shape[2], step + 1); /* the keys so far */
        for (int b = 0; b < 2; b++)
            err = fmax(err, max_err(y->data + b * V, full->data + (b * 4 + step) * V, V));
    }
    CU_ASSERT_TRUE(err < 1e-5);
    CU_ASSERT_EQUAL(s->steps, 4);
    CU_ASSERT_TRUE(s->self[0].t_cap >= 4 && s->self[0].len == 4);
    /* the cross-attention never looks at padded source positions */
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    for (int h = 0; h < 2; h++) {
        for (int k = 4; k < 5; k++) CU_ASSERT_EQUAL(w->data[(0 * 2 + h) * 5 + k], 0);
        for (int k = 2; k < 5; k++) CU_ASSERT_EQUAL(w->data[(1 * 2 + h) * 5 + k], 0);
    }

    /* select (rows 1, 0, 1) after two steps, two more steps: the logits of the full pass of
     * the rows' prefixes, with the selected sources */
    s = zoo_transformer_encode(m, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5, NULL);
    for (int step = 0; step < 2; step++)
        CU_ASSERT_PTR_NOT_NULL(m->base.ops->step(
            &m->base, &c, s, (const int32_t[]){ZT_BATCH_DEC_IN[step], ZT_BATCH_DEC_IN[4 + step]}, 2,
            NULL));
    const int32_t rows[3] = {1, 0, 1};
    CU_ASSERT_EQUAL_FATAL(m->base.ops->select(&m->base, &c, s, rows, 3), 0);
    CU_ASSERT_EQUAL(s->B, 3);
    /* row 2 continues differently from row 0 */
    const int32_t dec3[3 * 4] = {2, 5, 4, 3, 2, 8, 9, 10, 2, 5, 7, 6};
    int32_t src3[3 * 5], len3[3];
    for (int i = 0; i < 3; i++) {
        memcpy(src3 + i * 5, ZT_BATCH_SRC + rows[i] * 5, sizeof *src3 * 5);
        len3[i] = ZT_BATCH_SRC_LEN[rows[i]];
    }
    ag_tensor *full3 = zoo_transformer_decode(
        m, &c, zoo_transformer_encode(m, &c, src3, len3, 3, 5, NULL), dec3, 3, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full3);
    err = 0;
    for (int step = 2; step < 4; step++) {
        ag_tensor *y = m->base.ops->step(
            &m->base, &c, s, (const int32_t[]){dec3[step], dec3[4 + step], dec3[8 + step]}, 3,
            NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        for (int b = 0; b < 3; b++)
            err = fmax(err, max_err(y->data + b * V, full3->data + (b * 4 + step) * V, V));
    }
    CU_ASSERT_TRUE(err < 1e-5);
    /* the teacher-forced pass on the selected state sees the selected sources */
    ag_tensor *again = zoo_transformer_decode(m, &c, s, dec3, 3, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(again);
    CU_ASSERT_TRUE(max_err(again->data, full3->data, 3 * 4 * V) < 1e-6);
    /* bad rows are named */
    TG_EXPECT_ERROR(m->base.ops->select(&m->base, &c, s, (const int32_t[]){0, 3}, 2), "row 1 is 3");
    ag_set_error_handler(NULL, NULL);
    ag_tape_free(t);
    zoo_model_free(&m->base);
}

/* dec_layers: 3 encoder blocks and 1 decoder block. The blocks the state_dict names, the attention
 * layers the model reports, step decoding equal to the full pass through the one block; 0 is
 * --layers (the same parameters, bit for bit, as dec_layers = layers); a negative count refused. */
static void test_decoder_depth(void) {
    zoo_transformer_cfg cfg = tiny_cfg(3, 0.1);
    cfg.dec_layers = 1;
    zoo_transformer *m = (zoo_transformer *)zt_tiny_model(&zoo_transformer_kind, &cfg);
    const nn_params *ps = m->base.ps;
    CU_ASSERT_EQUAL(nn_params_count(ps), 1 + 3 * (4 + 2 + 4 + 2) + 1 + (4 + 2 + 4 + 2 + 4 + 2) + 2);
    CU_ASSERT_PTR_NOT_NULL(nn_params_find(ps, "encoder.blks.block2.addnorm2.ln.bias"));
    CU_ASSERT_PTR_NOT_NULL(nn_params_find(ps, "decoder.blks.block0.attention2.W_o.weight"));
    CU_ASSERT_PTR_NULL(nn_params_find(ps, "decoder.blks.block1.attention1.W_q.weight"));
    CU_ASSERT_EQUAL(m->base.layers, 3);
    CU_ASSERT_EQUAL(m->base.dec_layers, 1);

    ag_tape *t = ag_tape_new();
    ag_tape_set_recording(t, false);
    nn_ctx c = {.tape = t, .training = false};
    zoo_tf_state *s = zoo_transformer_encode(m, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5, NULL);
    ag_tensor *full = zoo_transformer_decode(m, &c, s, ZT_BATCH_DEC_IN, 2, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full);
    double err = 0;
    for (int step = 0; step < 4; step++) {
        ag_tensor *self[1] = {0}, *cross[1] = {0};
        zoo_attn_trace tr = {.dec_self = self, .dec_cross = cross};
        ag_tensor *y = m->base.ops->step(
            &m->base, &c, s, (const int32_t[]){ZT_BATCH_DEC_IN[step], ZT_BATCH_DEC_IN[4 + step]}, 2,
            &tr);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_PTR_NOT_NULL(self[0]);
        CU_ASSERT_PTR_NOT_NULL(cross[0]);
        for (int b = 0; b < 2; b++)
            err = fmax(err, max_err(y->data + b * 11, full->data + (b * 4 + step) * 11, 11));
    }
    CU_ASSERT_TRUE(err < 1e-5);
    ag_tape_free(t);
    zoo_model_free(&m->base);

    /* 0: as many as the encoder */
    cfg.layers = 2;
    cfg.dec_layers = 0;
    zoo_model *a = zt_tiny_model(&zoo_transformer_kind, &cfg);
    cfg.dec_layers = 2;
    zoo_model *b = zt_tiny_model(&zoo_transformer_kind, &cfg);
    CU_ASSERT_EQUAL(a->dec_layers, 2);
    CU_ASSERT_EQUAL_FATAL(nn_params_count(a->ps), nn_params_count(b->ps));
    for (size_t i = 0; i < nn_params_count(a->ps); i++) {
        const ag_tensor *x = nn_params_at(a->ps, i), *y = nn_params_at(b->ps, i);
        CU_ASSERT_STRING_EQUAL(x->name, y->name);
        CU_ASSERT_EQUAL(memcmp(x->data, y->data, sizeof(ag_real) * (size_t)x->numel), 0);
    }
    zoo_model_free(a);
    zoo_model_free(b);
    cfg.dec_layers = -1;
    TG_EXPECT_NULL(zoo_model_new(&zoo_transformer_kind, &cfg, 13, 11, 99), "dec_layers -1");
}

/* zoo_mha_step over a cache that the layer fills through its own W_k, W_v: position by position,
 * the rows of the causal full pass (zoo_mha_forward); a cross cache filled once from "encoder
 * outputs" (zoo_mha_cache_append) and attended with lengths (zoo_mha_cache_attend):
 * zoo_mha_forward's output over them; a tape recording the weights' gradients is refused. */
static void test_mha_step_over_cache(void) {
    enum { B = 2, T = 5, S = 6, H = 8, HEADS = 2 };
    nn_params *ps = nn_params_new();
    zoo_mha m;
    CU_ASSERT_EQUAL_FATAL(zoo_mha_init(&m, ps, "mha", H, H, H, H, HEADS, 0.1, true), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 3), 0);
    ag_tape *t = ag_tape_new();
    ag_rng_seed(&rng, 9);
    nn_ctx c = {.tape = t, .training = false};
    ag_tensor *x = randn(t, AG_SHAPE(B, T, H)), *enc = randn(t, AG_SHAPE(B, S, H));
    int32_t causal[B * T];
    for (int i = 0; i < B * T; i++) causal[i] = i % T + 1;
    const int32_t lens[B] = {3, 6};
    ag_tensor *full = zoo_mha_forward(&m, &c, x, x, x, causal, 2, NULL);
    ag_tensor *cross_full = zoo_mha_forward(&m, &c, x, enc, enc, lens, 1, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cross_full);
    nn_kv_cache self, cross;
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_init(&self, B, H), 0);
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_init(&cross, B, H), 0);
    ag_set_error_handler(tg_capture, NULL);
    TG_EXPECT_NULL(zoo_mha_step(&m, &c, &self, ag_contiguous(t, ag_narrow(t, x, 1, 0, 1)), NULL),
                   "inference only");
    CU_ASSERT_EQUAL(self.len, 0);
    ag_set_error_handler(NULL, NULL);
    bool prev = ag_tape_set_recording(t, false);
    CU_ASSERT_EQUAL_FATAL(zoo_mha_cache_append(&m, &c, &cross, enc, enc), 0);
    double err = 0, cross_err = 0;
    for (int j = 0; j < T; j++) {
        ag_tensor *xj = ag_contiguous(t, ag_narrow(t, x, 1, j, 1)), *w = NULL;
        ag_tensor *y = zoo_mha_step(&m, &c, &self, xj, &w);
        ag_tensor *z = zoo_mha_cache_attend(&m, &c, &cross, xj, lens, 1, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_PTR_NOT_NULL_FATAL(z);
        CU_ASSERT_PTR_NOT_NULL_FATAL(w);
        CU_ASSERT_EQUAL(w->shape[0], B * HEADS);
        CU_ASSERT_EQUAL(w->shape[2], j + 1); /* the keys so far */
        for (int b = 0; b < B; b++) {
            const size_t at = ((size_t)b * T + j) * H;
            err = fmax(err, max_err(y->data + b * H, full->data + at, H));
            cross_err = fmax(cross_err, max_err(z->data + b * H, cross_full->data + at, H));
        }
    }
    ag_tape_set_recording(t, prev);
    CU_ASSERT_EQUAL(self.len, T);
    CU_ASSERT_EQUAL(cross.len, S);
    CU_ASSERT_TRUE(err < 1e-5);
    CU_ASSERT_TRUE(cross_err < 1e-5);
    ag_tape_free(t);
    nn_params_free(ps);
}

/* Training mode: dropout draws from the context's RNG; same seed, same bits. */
static void test_training_forward_is_deterministic(void) {
    zoo_transformer *m = tiny_new(1, 0.3);
    ag_tape *t = ag_tape_new();
    ag_real first[2 * 4 * 11];
    for (int run = 0; run < 2; run++) {
        ag_rng r;
        ag_rng_seed(&r, 5);
        nn_ctx c = {.tape = t, .training = true, .rng = &r};
        ag_tensor *y = zoo_transformer_decode(
            m, &c, zoo_transformer_encode(m, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5, NULL),
            ZT_BATCH_DEC_IN, 2, 4);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        if (run == 0) memcpy(first, y->data, sizeof first);
        else CU_ASSERT_EQUAL(memcmp(first, y->data, sizeof first), 0);
        ag_tape_reset(t);
    }
    ag_tape_free(t);
    zoo_model_free(&m->base);
}

static CU_TestInfo tests[] = {
    {"dot-product attention: d2l's example", test_dot_attention_example},
    {"additive attention: d2l's example", test_additive_attention_example},
    {"multi-head attention: shape and per-head masks", test_mha_shape},
    {"FFN and blocks: spec.md's shapes", test_ffn_and_blocks_shapes},
    {"positional encoding table", test_positional_encoding_values},
    {"transformer parameter names as the state_dict", test_parameter_names},
    {"embeddings: N(0, embed_std^2)", test_embedding_std},
    {"decoder is causal", test_decoder_is_causal},
    {"incremental decoding equals the full pass", test_incremental_equals_full},
    {"a decoder shallower than the encoder (dec_layers)", test_decoder_depth},
    {"multi-head attention step over its own cache equals the full pass", test_mha_step_over_cache},
    {"training forward is deterministic", test_training_forward_is_deterministic},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("zoo modules", tests); }
