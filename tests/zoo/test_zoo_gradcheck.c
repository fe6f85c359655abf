/* test_zoo_gradcheck.c -- float64 gradient checks through every zoo block at tiny sizes
 * (d = 4, 2 heads, T = 3), masks included, w.r.t. the inputs and every parameter. */
#include "tests/gc_harness.h"
#include "zoo/models/transformer.h"

#include <stdio.h>
#include <string.h>

/* ---- attention ---- */

static ag_tensor *run_additive(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = gc_eval_ctx(t);
    return zoo_additive_attention_forward(u, &c, x[0], x[1], x[2], (const int32_t[]){2, 4, 1, 3}, 2,
                                          NULL);
}

static void test_additive(void) {
    ag_rng r;
    ag_rng_seed(&r, 1);
    gc_harness h = {.ps = nn_params_new()};
    zoo_additive_attention a;
    zoo_additive_attention_init(&a, h.ps, "att", 5, 3, 4, 0.1);
    gc_add_data(&h, AG_SHAPE(2, 2, 3), &r);
    gc_add_data(&h, AG_SHAPE(2, 4, 5), &r);
    gc_add_data(&h, AG_SHAPE(2, 4, 3), &r);
    gc_check(&h, "additive attention, per-query masks", run_additive, &a, false);
}

static ag_tensor *run_mha(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = gc_eval_ctx(t);
    return zoo_mha_forward(u, &c, x[0], x[1], x[1], (const int32_t[]){3, 1}, 1, NULL);
}

static void test_mha(void) {
    ag_rng r;
    ag_rng_seed(&r, 2);
    gc_harness h = {.ps = nn_params_new()};
    zoo_mha m;
    zoo_mha_init(&m, h.ps, "mha", 4, 4, 4, 4, 2, 0.1, true);
    gc_add_data(&h, AG_SHAPE(2, 3, 4), &r);
    gc_add_data(&h, AG_SHAPE(2, 3, 4), &r);
    gc_check(&h, "multi-head attention, masked, with biases", run_mha, &m, false);
}

/* ---- blocks ---- */

static ag_tensor *run_encoder_block(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = gc_eval_ctx(t);
    return zoo_encoder_block_forward(u, &c, x[0], (const int32_t[]){2, 3}, NULL);
}

static void test_encoder_block(void) {
    ag_rng r;
    ag_rng_seed(&r, 3);
    gc_harness h = {.ps = nn_params_new()};
    zoo_encoder_block b;
    zoo_encoder_block_init(&b, h.ps, "blk", 4, 1, (const int[]){4}, 6, 2, 0.1);
    gc_add_data(&h, AG_SHAPE(2, 3, 4), &r);
    gc_check(&h, "encoder block", run_encoder_block, &b, true);
}

static ag_tensor *run_decoder_block(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = gc_eval_ctx(t);
    return zoo_decoder_block_forward(u, &c, x[0], NULL, x[1], (const int32_t[]){1, 2}, NULL, NULL);
}

static ag_tensor *run_decoder_block_cached(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = gc_eval_ctx(t);
    return zoo_decoder_block_forward(u, &c, x[0], ag_concat(t, 2, (ag_tensor *[]){x[2], x[0]}, 1),
                                     x[1], (const int32_t[]){1, 2}, NULL, NULL);
}

static void test_decoder_block(void) {
    for (int cached = 0; cached < 2; cached++) {
        ag_rng r;
        ag_rng_seed(&r, 4);
        gc_harness h = {.ps = nn_params_new()};
        zoo_decoder_block b;
        zoo_decoder_block_init(&b, h.ps, "blk", 4, 1, (const int[]){4}, 6, 2, 0.1);
        gc_add_data(&h, AG_SHAPE(2, cached ? 1 : 3, 4), &r); /* x */
        gc_add_data(&h, AG_SHAPE(2, 2, 4), &r);              /* encoder outputs */
        if (cached) gc_add_data(&h, AG_SHAPE(2, 2, 4), &r);  /* the cache */
        gc_check(&h, cached ? "decoder block, cached step" : "decoder block, causal pass",
                 cached ? run_decoder_block_cached : run_decoder_block, &b, true);
    }
}

/* ---- the whole model with d2l's loss ---- */

static ag_tensor *run_transformer(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)x;
    nn_ctx c = gc_eval_ctx(t);
    static const int32_t src[2 * 3] = {4, 5, 3, 6, 3, 1}, src_len[2] = {3, 2};
    static const int32_t dec_in[2 * 3] = {2, 7, 8, 2, 5, 3}, labels[2 * 3] = {7, 8, 3, 5, 3, 1};
    static const ag_real mask[2 * 3] = {1, 1, 1, 1, 1, 0};
    ag_tensor *logits = zoo_transformer_decode(
        u, &c, zoo_transformer_encode(u, &c, src, src_len, 2, 3, NULL), dec_in, 2, 3);
    ag_tensor *l =
        ag_mean(t, ag_softmax_ce(t, logits, labels, mask), 1, false); /* d2l: mean over T */
    return ag_sum(t, l, AG_ALL, false);
}

/* d = 4, FFN 6, 2 heads */
static zoo_transformer_cfg tiny(int src_vocab, int tgt_vocab, int layers) {
    zoo_transformer_cfg cfg = zoo_transformer_defaults(src_vocab, tgt_vocab);
    cfg.hiddens = 4;
    cfg.ffn_hiddens = 6;
    cfg.heads = 2;
    cfg.layers = layers;
    return cfg;
}

static void test_transformer_loss(void) {
    gc_harness h = {.ps = nn_params_new()};
    zoo_transformer tf;
    zoo_transformer_cfg cfg = tiny(9, 10, 2);
    CU_ASSERT_EQUAL_FATAL(zoo_transformer_init(&tf, h.ps, &cfg), 0);
    gc_check(&h, "transformer with the masked cross-entropy", run_transformer, &tf, true);
    zoo_transformer_free(&tf);
}

/* One matrix for both embeddings and the output layer: its gradient sums the three uses, the
 * output layer's through the fused cross-entropy (the trainer's loss) on a shared vocabulary. */
static ag_tensor *run_tied(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)x;
    const zoo_model *m = u;
    nn_ctx c = gc_eval_ctx(t);
    static const int32_t src[2 * 3] = {4, 5, 3, 6, 3, 1}, src_len[2] = {3, 2};
    static const int32_t dec_in[2 * 3] = {2, 7, 8, 2, 5, 3}, labels[2 * 3] = {7, 8, 3, 5, 3, 1};
    static const int32_t tgt_len[2] = {3, 2};
    const nn_linear *out = NULL;
    ag_tensor *h = m->ops->decode_features(
        m, &c, m->ops->encode(m, &c, src, src_len, 2, 3, NULL), dec_in, 2, 3, &out);
    return nn_seq_ce_loss_fused(out, &c, h, labels, tgt_len, 3, 0.1);
}

static void test_transformer_tied(void) {
    gc_harness h = {.ps = nn_params_new()};
    zoo_transformer tf;
    zoo_transformer_cfg cfg = tiny(10, 10, 1);
    cfg.embed_std = 0.5;
    cfg.share_embeddings = true;
    CU_ASSERT_EQUAL_FATAL(zoo_transformer_init(&tf, h.ps, &cfg), 0);
    CU_ASSERT_PTR_EQUAL(tf.dense.weight, tf.enc_embedding.weight);
    CU_ASSERT_PTR_EQUAL(tf.dec_embedding.weight, tf.enc_embedding.weight);
    gc_check(&h, "transformer, shared embeddings and output layer, fused loss", run_tied, &tf.base,
             true);
    zoo_transformer_free(&tf);
}

static CU_TestInfo tests[] = {
    {"additive attention", test_additive},
    {"multi-head attention", test_mha},
    {"encoder block", test_encoder_block},
    {"decoder block (causal pass and cached step)", test_decoder_block},
    {"whole transformer with its loss", test_transformer_loss},
    {"transformer with shared embeddings", test_transformer_tied},
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main("zoo gradcheck", tests,
                   "zoo: attention modules, Transformer blocks and model (float64, "
                   "tests/zoo/test_zoo_gradcheck.c)");
}
