/* test_bahdanau.c -- the Bahdanau GRU seq2seq (float32): parameter names and shapes as the
 * PyTorch state_dict, d2l's shape examples, the attention masks, the precomputed keys against
 * AdditiveAttention, step decoding against the teacher-forced pass, determinism, overfitting a
 * few pairs, greedy against beam 1, and the attention record of the heatmaps. */
#include "tests/tg_test.h"
#include "tests/zoo/zoo_test.h"
#include "zoo/models/bahdanau.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a small model ---- */

/* The tiny model: 6 embeddings, 8 hiddens (zt_tiny_model). */
static zoo_bahdanau *tiny_new(int layers, double dropout) {
    zoo_bahdanau_cfg cfg = zoo_bahdanau_default_cfg;
    cfg.embed = 6;
    cfg.hiddens = 8;
    cfg.layers = layers;
    cfg.dropout = dropout;
    return (zoo_bahdanau *)zt_tiny_model(&zoo_bahdanau_kind, &cfg);
}


/* ---- names, shapes ---- */

static void test_parameter_names(void) {
    nn_params *ps = nn_params_new();
    zoo_bahdanau bm;
    zoo_bahdanau_cfg cfg = zoo_bahdanau_defaults(10, 11);
    cfg.embed = 8;
    cfg.hiddens = 16;
    CU_ASSERT_EQUAL_FATAL(zoo_bahdanau_init(&bm, ps, &cfg), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 1), 0);
    /* PyTorch's state_dict order of d2l's EncoderDecoder(Seq2SeqEncoder, Seq2SeqAttentionDecoder) */
    static const zt_param want[] = {
        {"encoder.embedding.weight", 10, 8},
        {"encoder.rnn.weight_ih_l0", 48, 8},
        {"encoder.rnn.weight_hh_l0", 48, 16},
        {"encoder.rnn.bias_ih_l0", 48, 0},
        {"encoder.rnn.bias_hh_l0", 48, 0},
        {"encoder.rnn.weight_ih_l1", 48, 16},
        {"encoder.rnn.weight_hh_l1", 48, 16},
        {"encoder.rnn.bias_ih_l1", 48, 0},
        {"encoder.rnn.bias_hh_l1", 48, 0},
        {"decoder.attention.W_k.weight", 16, 16},
        {"decoder.attention.W_q.weight", 16, 16},
        {"decoder.attention.w_v.weight", 1, 16},
        {"decoder.embedding.weight", 11, 8},
        {"decoder.rnn.weight_ih_l0", 48, 24},
        {"decoder.rnn.weight_hh_l0", 48, 16},
        {"decoder.rnn.bias_ih_l0", 48, 0},
        {"decoder.rnn.bias_hh_l0", 48, 0},
        {"decoder.rnn.weight_ih_l1", 48, 16},
        {"decoder.rnn.weight_hh_l1", 48, 16},
        {"decoder.rnn.bias_ih_l1", 48, 0},
        {"decoder.rnn.bias_hh_l1", 48, 0},
        {"decoder.dense.weight", 11, 16},
        {"decoder.dense.bias", 11, 0},
    };
    zt_check_params(ps, want, sizeof want / sizeof want[0]);
    nn_params_free(ps);
}

/* The model kind: defaults, its flags, a model built from them, a bad config refused. */
static void test_model_kind(void) {
    const zoo_model_kind *k = &zoo_bahdanau_kind;
    CU_ASSERT_STRING_EQUAL(k->name, "bahdanau");
    CU_ASSERT_STRING_EQUAL(k->program, "bahdanau_nmt");
    CU_ASSERT_EQUAL(k->epochs, 250);
    CU_ASSERT_DOUBLE_EQUAL(k->lr, 0.005, 1e-12);
    const zoo_bahdanau_cfg *def = k->defaults;
    CU_ASSERT_EQUAL(def->embed, 32);
    CU_ASSERT_EQUAL(def->hiddens, 32);
    CU_ASSERT_EQUAL(def->layers, 2);
    CU_ASSERT_DOUBLE_EQUAL(def->dropout, 0.1, 1e-12);
    zoo_model *m = zoo_model_new(k, NULL, 20, 30, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(m->layers, 0);     /* attention layers: none in the encoder, */
    CU_ASSERT_EQUAL(m->dec_layers, 1); /* the one cross-attention in the decoder */
    CU_ASSERT_EQUAL(m->ops->attn_heads(m, ZOO_ATTN_DEC_CROSS), 1);
    CU_ASSERT_EQUAL(m->ops->attn_heads(m, ZOO_ATTN_ENC_SELF), 0);
    CU_ASSERT_EQUAL(m->ops->attn_heads(m, ZOO_ATTN_DEC_SELF), 0);
    ag_tensor *w = nn_params_find(m->ps, "decoder.rnn.weight_ih_l0");
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(w->shape[1], 64); /* embed + hiddens */
    CU_ASSERT_EQUAL(nn_params_find(m->ps, "decoder.dense.weight")->shape[0], 30);
    CU_ASSERT_EQUAL(nn_params_find(m->ps, "encoder.embedding.weight")->shape[0], 20);
    zoo_model_free(m);

    zoo_bahdanau_cfg h = *def;
    CU_ASSERT_EQUAL(zoo_config_set(k, &h, "layers", "9"), -1); /* more than NN_GRU_MAX_LAYERS */
    TG_ERROR_HAS("--layers");
    CU_ASSERT_EQUAL(zoo_config_set(k, &h, "embed-size", "7"), 0);
    CU_ASSERT_EQUAL(zoo_config_set(k, &h, "layers", "1"), 0);
    m = zoo_model_new(k, &h, 5, 6, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(nn_params_count(m->ps), 1 + 4 + 3 + 1 + 4 + 2);
    CU_ASSERT_EQUAL(nn_params_find(m->ps, "decoder.embedding.weight")->shape[1], 7);
    zoo_model_free(m);

    nn_params *ps = nn_params_new();
    zoo_bahdanau bm;
    zoo_bahdanau_cfg cfg = zoo_bahdanau_defaults(5, 0); /* empty target vocabulary */
    CU_ASSERT_EQUAL(zoo_bahdanau_init(&bm, ps, &cfg), -1);
    TG_EXPECT_ERROR(nn_params_finalize(ps, 1), "bahdanau: bad config");
    nn_params_free(ps);
}

/* d2l's examples: Seq2SeqEncoder(10, 8, 16, 2) on zeros (4, 7) -> (7, 4, 16) and (2, 4, 16);
 * the decoder with the same sizes -> (4, 7, 10), state enc_outputs (4, 7, 16). */
static void test_d2l_shapes(void) {
    nn_params *ps = nn_params_new();
    zoo_seq2seq_encoder enc;
    zoo_seq2seq_attn_decoder dec;
    CU_ASSERT_EQUAL(zoo_seq2seq_encoder_init(&enc, ps, "encoder", 10, 8, 16, 2, 0), 0);
    CU_ASSERT_EQUAL(zoo_seq2seq_attn_decoder_init(&dec, ps, "decoder", 10, 8, 16, 2, 0), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 5), 0);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = false};
    int32_t X[4 * 7] = {0};
    ag_tensor *state;
    ag_tensor *out = zoo_seq2seq_encoder_forward(&enc, &c, X, 4, 7, &state);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(state);
    CU_ASSERT_EQUAL(out->ndim, 3);
    CU_ASSERT_EQUAL(out->shape[0], 7);
    CU_ASSERT_EQUAL(out->shape[1], 4);
    CU_ASSERT_EQUAL(out->shape[2], 16);
    CU_ASSERT_EQUAL(state->ndim, 3);
    CU_ASSERT_EQUAL(state->shape[0], 2);
    CU_ASSERT_EQUAL(state->shape[1], 4);
    CU_ASSERT_EQUAL(state->shape[2], 16);
    /* the last output step is the last layer's final state */
    for (int i = 0; i < 4 * 16; i++) CU_ASSERT_EQUAL(out->data[6 * 64 + i], state->data[64 + i]);

    zoo_bahdanau_state *s = zoo_seq2seq_attn_decoder_init_state(&dec, &c, out, state, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->enc_out->shape[0], 4);
    CU_ASSERT_EQUAL(s->enc_out->shape[1], 7);
    CU_ASSERT_EQUAL(s->enc_out->shape[2], 16);
    CU_ASSERT_EQUAL(s->enc_out->data[(1 * 7 + 3) * 16 + 5],
                    out->data[(3 * 4 + 1) * 16 + 5]); /* permuted */
    CU_ASSERT_EQUAL(s->h0[1]->shape[0], 4);
    CU_ASSERT_EQUAL(s->h0[1]->shape[1], 16);
    ag_tensor *weights[7] = {0};
    ag_tensor *y = zoo_seq2seq_attn_decoder_forward(&dec, &c, s, X, 4, 7, weights);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(y->ndim, 3);
    CU_ASSERT_EQUAL(y->shape[0], 4);
    CU_ASSERT_EQUAL(y->shape[1], 7);
    CU_ASSERT_EQUAL(y->shape[2], 10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(weights[6]);
    CU_ASSERT_EQUAL(weights[6]->shape[0], 4);
    CU_ASSERT_EQUAL(weights[6]->shape[1], 1);
    CU_ASSERT_EQUAL(weights[6]->shape[2], 7);

    /* usage errors: NULL and a message, no crash */
    ag_set_error_handler(tg_capture, NULL);
    CU_ASSERT_PTR_NULL(
        zoo_seq2seq_attn_decoder_forward(&dec, &c, s, X, 3, 7, NULL)); /* batch 3 != 4 */
    TG_ERROR_HAS("expected the state's batch 4");
    ag_tensor *bad = ag_tensor_new(t, AG_SHAPE(7, 4, 15));
    TG_EXPECT_NULL(zoo_seq2seq_attn_decoder_init_state(&dec, &c, bad, state, NULL),
                   "expected (Ts, B, 16)");
    ag_set_error_handler(NULL, NULL);
    ag_tape_free(t);
    nn_params_free(ps);
}

/* ---- attention ---- */

/* The step attention with precomputed keys over the Tk = 4 attended positions is
 * AdditiveAttention's forward over all Ts = 5 encoder outputs; the 5th weight is 0. */
static void test_attend_equals_additive_attention(void) {
    zoo_bahdanau *m = tiny_new(2, 0);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = false};
    zoo_bahdanau_state *s = zoo_bahdanau_encode(m, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5);
    ag_tensor *enc = zoo_seq2seq_encoder_forward(&m->encoder, &c, ZT_BATCH_SRC, 2, 5, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(enc);
    CU_ASSERT_EQUAL(s->Ts, 5);
    CU_ASSERT_EQUAL(s->Tk, 4); /* the longest valid length: position 4 is padding in both rows */
    CU_ASSERT_EQUAL(s->enc_out->shape[1], 4);
    ag_tensor *all = ag_contiguous(t, ag_transpose(t, enc, 0, 1)); /* (2, 5, 8) as d2l */
    ag_rng r;
    ag_rng_seed(&r, 3);
    ag_tensor *q = ag_tensor_new(t, AG_SHAPE(2, 8));
    for (int i = 0; i < 16; i++) q->data[i] = (ag_real)ag_rng_normal(&r);
    ag_tensor *w;
    ag_tensor *ctx = zoo_seq2seq_attn_decoder_attend(&m->decoder, &c, s, q, &w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_EQUAL(ctx->ndim, 2);
    CU_ASSERT_EQUAL(w->shape[2], 4);
    ag_real w_fast[2 * 4], c_fast[2 * 8];
    memcpy(w_fast, w->data, sizeof w_fast);
    memcpy(c_fast, ctx->data, sizeof c_fast);
    zoo_additive_attention *a = &m->decoder.attention;
    ag_tensor *ref_w;
    ag_tensor *ref = zoo_additive_attention_forward(a, &c, ag_reshape(t, q, AG_SHAPE(2, 1, 8)), all,
                                                    all, ZT_BATCH_SRC_LEN, 1, &ref_w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    double err = 0;
    for (int i = 0; i < 16; i++) err = fmax(err, fabs(ref->data[i] - c_fast[i]));
    for (int b = 0; b < 2; b++) {
        for (int k = 0; k < 4; k++)
            err = fmax(err, fabs(ref_w->data[b * 5 + k] - w_fast[b * 4 + k]));
        CU_ASSERT_EQUAL(ref_w->data[b * 5 + 4], 0);
    }
    CU_ASSERT_TRUE(err < 1e-6);

    /* a row of valid length 0 is uniform over all Ts positions (d2l's -1e6): nothing dropped */
    zoo_bahdanau_state *s0 =
        zoo_bahdanau_encode(m, &c, ZT_BATCH_SRC, (const int32_t[]){2, 0}, 2, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s0);
    CU_ASSERT_EQUAL(s0->Tk, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zoo_seq2seq_attn_decoder_attend(&m->decoder, &c, s0, q, &w));
    for (int k = 0; k < 5; k++) CU_ASSERT_DOUBLE_EQUAL(w->data[5 + k], 0.2, 1e-6);
    ag_tape_free(t);
    zoo_model_free(&m->base);
}

/* Every step's weights: zero on the padded source positions, summing to one over the rest. */
static void test_attention_masks(void) {
    zoo_bahdanau *m = tiny_new(2, 0.1);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = false};
    zoo_bahdanau_state *s = zoo_bahdanau_encode(m, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5);
    ag_tensor *weights[4] = {0};
    CU_ASSERT_PTR_NOT_NULL_FATAL(
        zoo_seq2seq_attn_decoder_forward(&m->decoder, &c, s, ZT_BATCH_DEC_IN, 2, 4, weights));
    for (int i = 0; i < 4; i++) {
        const ag_tensor *w = weights[i];
        CU_ASSERT_PTR_NOT_NULL_FATAL(w);
        const int Tk = w->shape[2];
        CU_ASSERT_EQUAL(Tk, 4); /* the positions >= 4 are padding in every row: left out */
        for (int b = 0; b < 2; b++) {
            double sum = 0;
            for (int k = 0; k < Tk; k++) {
                ag_real v = w->data[b * Tk + k];
                if (k >= ZT_BATCH_SRC_LEN[b]) {
                    CU_ASSERT_EQUAL(v, 0);
                } else {
                    CU_ASSERT_TRUE(v > 0);
                }
                sum += v;
            }
            CU_ASSERT_DOUBLE_EQUAL(sum, 1.0, 1e-5);
        }
    }
    /* the weights differ between steps: the query (the decoder state) moves */
    bool differs = false;
    for (int k = 0; k < 8; k++) differs |= weights[0]->data[k] != weights[3]->data[k];
    CU_ASSERT_TRUE(differs);
    ag_tape_free(t);
    zoo_model_free(&m->base);
}

/* ---- decoding ---- */

/* A sequence of steps gives decode()'s logits and weights; decode leaves the state alone. */
static void test_steps_equal_decode(void) {
    zoo_bahdanau *m = tiny_new(2, 0.1);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = false};
    zoo_bahdanau_state *s = zoo_bahdanau_encode(m, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    zoo_bahdanau_state before = *s;
    ag_tensor *full_w[4] = {0};
    ag_tensor *full =
        zoo_seq2seq_attn_decoder_forward(&m->decoder, &c, s, ZT_BATCH_DEC_IN, 2, 4, full_w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full);
    CU_ASSERT_EQUAL(memcmp(&before, s, sizeof before), 0); /* decode changed nothing */
    const int V = 11;
    double err = 0, werr = 0;
    for (int step = 0; step < 4; step++) {
        int32_t tok[2] = {ZT_BATCH_DEC_IN[step], ZT_BATCH_DEC_IN[4 + step]};
        ag_tensor *w = NULL;
        zoo_attn_trace tr = {.dec_cross = &w};
        ag_tensor *y = m->base.ops->step(&m->base, &c, s, tok, 2, &tr);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_EQUAL(y->ndim, 3);
        CU_ASSERT_EQUAL(y->shape[0], 2);
        CU_ASSERT_EQUAL(y->shape[1], 1);
        CU_ASSERT_EQUAL(y->shape[2], V);
        for (int b = 0; b < 2; b++)
            for (int v = 0; v < V; v++)
                err = fmax(err, fabs(y->data[b * V + v] - full->data[(b * 4 + step) * V + v]));
        CU_ASSERT_PTR_NOT_NULL_FATAL(w);
        CU_ASSERT_EQUAL_FATAL(w->numel, full_w[step]->numel);
        for (ptrdiff_t k = 0; k < w->numel; k++)
            werr = fmax(werr, fabs(w->data[k] - full_w[step]->data[k]));
    }
    CU_ASSERT_TRUE(err < 1e-5);
    CU_ASSERT_TRUE(werr < 1e-6);
    CU_ASSERT_EQUAL(s->steps, 4);
    CU_ASSERT_PTR_EQUAL(s->h0[0], before.h0[0]);
    CU_ASSERT_PTR_NOT_EQUAL(s->h[0], before.h[0]); /* steps advanced the state */
    /* decode after the steps still starts from the encoder's state */
    ag_tensor *again = zoo_bahdanau_decode(m, &c, s, ZT_BATCH_DEC_IN, 2, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(again);
    CU_ASSERT_EQUAL(memcmp(again->data, full->data, sizeof(ag_real) * 2 * 4 * V), 0);
    /* a prefix decodes like the start of the whole (what beam search relies on) */
    int32_t prefix[2 * 2] = {ZT_BATCH_DEC_IN[0], ZT_BATCH_DEC_IN[1], ZT_BATCH_DEC_IN[4],
                             ZT_BATCH_DEC_IN[5]};
    ag_tensor *p = zoo_bahdanau_decode(m, &c, s, prefix, 2, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    err = 0;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2 * V; i++)
            err = fmax(err, fabs(p->data[b * 2 * V + i] - full->data[b * 4 * V + i]));
    CU_ASSERT_TRUE(err < 1e-6);
    ag_tape_free(t);
    zoo_model_free(&m->base);
}

/* Training mode: dropout draws from the context's RNG; same seed same bits, and dropout is
 * really on (another seed, other logits; eval mode, the same logits every time). */
static void test_training_forward_is_deterministic(void) {
    zoo_bahdanau *m = tiny_new(2, 0.3);
    ag_tape *t = ag_tape_new();
    enum { N = 2 * 4 * 11 };
    ag_real runs[3][N];
    const uint64_t seeds[3] = {5, 5, 6};
    for (int run = 0; run < 3; run++) {
        ag_rng r;
        ag_rng_seed(&r, seeds[run]);
        nn_ctx c = {.tape = t, .training = true, .rng = &r};
        ag_tensor *y = zoo_bahdanau_decode(
            m, &c, zoo_bahdanau_encode(m, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5),
            ZT_BATCH_DEC_IN, 2, 4);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        memcpy(runs[run], y->data, sizeof runs[run]);
        ag_tape_reset(t);
    }
    CU_ASSERT_EQUAL(memcmp(runs[0], runs[1], sizeof runs[0]), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(runs[0], runs[2], sizeof runs[0]), 0);
    ag_tape_free(t);
    zoo_model_free(&m->base);
}

/* ---- training a handful of pairs ---- */

static zoo_model *toy_model(zoo_cell cell) {
    zoo_bahdanau_cfg h = zoo_bahdanau_default_cfg;
    h.cell = cell;
    h.embed = 16;
    h.hiddens = 32;
    h.dropout = 0.1;
    return zoo_model_new(&zoo_bahdanau_kind, &h, ZT_SV, ZT_TV, 11);
}

/* Overfits four pairs with Adam; then greedy decoding reproduces every target, beam search of
 * width 1 (one source at a time) agrees with greedy (four at once), and the attention record
 * has the one cross-attention map, its rows distributions over the valid source positions. */
static void test_overfit_greedy_beam_attention(void) {
    zoo_model *m = toy_model(ZOO_CELL_GRU);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    ag_tape *t = ag_tape_new();
    double first, last;
    zt_overfit(m, t, 200, &first, &last);
    printf("\n    loss per token: %.4f at step 1, %.5f at step 200 ", first, last);
    CU_ASSERT_TRUE(first > 2.0); /* about ln(12) at the start */
    CU_ASSERT_TRUE(last < 0.05);

    int32_t out[ZT_NP * ZT_TT];
    int out_len[ZT_NP];
    zt_greedy(m, t, out, out_len);
    zt_check_targets(out, out_len);
    for (int b = 0; b < ZT_NP; b++) {
        zt_beam_agrees(m, t, b, 1, out, out_len);
        int32_t beam_out[ZT_TT];
        CU_ASSERT_EQUAL(zt_beam(m, t, b, 3, beam_out), out_len[b]); /* memorised: found too */
    }

    ds_vocab *v = NULL;
    CU_ASSERT_EQUAL_FATAL(ds_vocab_parse(ZT_WORDS, sizeof ZT_WORDS - 1, "words", &v), 0);
    char *text = NULL;
    zoo_attn_record rec;
    CU_ASSERT_EQUAL_FATAL(zoo_translate_attention(m, t, v, v, "b a", ZT_TS, &text, &rec), 0);
    CU_ASSERT_STRING_EQUAL(text, "d c"); /* the fourth pair: a b -> c d reversed */
    CU_ASSERT_EQUAL(rec.enc_self.layers, 0);
    CU_ASSERT_EQUAL(rec.dec_self.layers, 0);
    CU_ASSERT_EQUAL(rec.dec_cross.layers, 1);
    CU_ASSERT_EQUAL(rec.dec_cross.heads, 1);
    CU_ASSERT_EQUAL(rec.dec_cross.cols, ZT_TS);
    CU_ASSERT_EQUAL(rec.steps, 3); /* d, c, <eos> */
    for (int row = 0; row < rec.steps; row++) {
        double sum = 0;
        for (int k = 0; k < ZT_TS; k++) {
            float w = rec.dec_cross.w[row * ZT_TS + k];
            if (k >= 3) CU_ASSERT_EQUAL(w, 0); /* "b a <eos>" then padding */
            sum += w;
        }
        CU_ASSERT_DOUBLE_EQUAL(sum, 1.0, 1e-5);
    }
    free(text);
    zoo_attn_record_free(&rec);
    ds_vocab_free(v);
    ag_tape_free(t);
    zoo_model_free(m);
}

/* An untrained model: greedy (four sources at once) and beam 1 (one at a time) follow the same
 * argmax path. */
static void test_greedy_equals_beam1_untrained(void) {
    zoo_model *m = toy_model(ZOO_CELL_GRU);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    ag_tape *t = ag_tape_new();
    int32_t out[ZT_NP * ZT_TT];
    int out_len[ZT_NP];
    zt_greedy(m, t, out, out_len);
    int total = 0;
    for (int b = 0; b < ZT_NP; b++) total += zt_beam_agrees(m, t, b, 1, out, out_len);
    CU_ASSERT_TRUE(total > 0); /* some tokens were compared */
    ag_tape_free(t);
    zoo_model_free(m);
}

/* ---- the LSTM cell (--cell lstm) ---- */

/* The same model with an LSTM: 4H-row weights under the same names, the state (h, c), the
 * query the last layer's h; steps equal decode(), select equals the rows built directly, and
 * training reduces the loss. */
static void test_lstm_cell(void) {
    nn_params *ps = nn_params_new();
    zoo_bahdanau bm;
    zoo_bahdanau_cfg cfg = zoo_bahdanau_defaults(13, 11);
    cfg.embed = 6;
    cfg.hiddens = 8;
    cfg.dropout = 0.1;
    cfg.cell = ZOO_CELL_LSTM;
    CU_ASSERT_EQUAL_FATAL(zoo_bahdanau_init(&bm, ps, &cfg), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 99), 0);
    CU_ASSERT_EQUAL(nn_params_count(ps), 1 + 8 + 3 + 1 + 8 + 2);
    const ag_tensor *w = nn_params_find(ps, "decoder.rnn.weight_ih_l0");
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(w->shape[0], 32); /* 4H */
    CU_ASSERT_EQUAL(w->shape[1], 14); /* E + H */
    CU_ASSERT_EQUAL(nn_params_find(ps, "encoder.rnn.bias_hh_l1")->shape[0], 32);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = false};
    zoo_bahdanau_state *s = zoo_bahdanau_encode(&bm, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_PTR_NOT_NULL(s->c0[1]);
    CU_ASSERT_EQUAL(s->h0[1]->shape[0], 2);
    CU_ASSERT_EQUAL(s->h0[1]->shape[1], 8);
    ag_tensor *full = zoo_bahdanau_decode(&bm, &c, s, ZT_BATCH_DEC_IN, 2, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full);
    CU_ASSERT_EQUAL(full->shape[0], 2);
    CU_ASSERT_EQUAL(full->shape[1], 4);
    CU_ASSERT_EQUAL(full->shape[2], 11);
    double err = 0;
    for (int step = 0; step < 4; step++) {
        int32_t tok[2] = {ZT_BATCH_DEC_IN[step], ZT_BATCH_DEC_IN[4 + step]};
        ag_tensor *y = bm.base.ops->step(&bm.base, &c, s, tok, 2, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        for (int b = 0; b < 2; b++)
            for (int v = 0; v < 11; v++)
                err = fmax(err, fabs(y->data[b * 11 + v] - full->data[(b * 4 + step) * 11 + v]));
    }
    CU_ASSERT_TRUE(err < 1e-5);
    /* select (rows 1, 0, 1) after one step, then a step: as the state of those rows directly */
    ag_tape_reset(t);
    ag_tape_set_recording(t, false);
    s = zoo_bahdanau_encode(&bm, &c, ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, 2, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(
        bm.base.ops->step(&bm.base, &c, s, (const int32_t[]){2, 2}, 2, NULL));
    const int32_t rows[3] = {1, 0, 1};
    CU_ASSERT_EQUAL_FATAL(zoo_seq2seq_attn_decoder_select(&bm.decoder, &c, s, rows, 3), 0);
    ag_tensor *y = bm.base.ops->step(&bm.base, &c, s, (const int32_t[]){5, 6, 7}, 3, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    ag_real got[3 * 11];
    memcpy(got, y->data, sizeof got);
    int32_t src3[3 * 5], len3[3];
    for (int i = 0; i < 3; i++) {
        memcpy(src3 + i * 5, ZT_BATCH_SRC + rows[i] * 5, sizeof(int32_t) * 5);
        len3[i] = ZT_BATCH_SRC_LEN[rows[i]];
    }
    zoo_bahdanau_state *d = zoo_bahdanau_encode(&bm, &c, src3, len3, 3, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(
        bm.base.ops->step(&bm.base, &c, d, (const int32_t[]){2, 2, 2}, 3, NULL));
    ag_tensor *y1 = bm.base.ops->step(&bm.base, &c, d, (const int32_t[]){5, 6, 7}, 3, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y1);
    err = 0;
    for (int i = 0; i < 3 * 11; i++) err = fmax(err, fabs(y1->data[i] - got[i]));
    CU_ASSERT_TRUE(err < 1e-5);
    /* a GRU's state (h alone) is refused by the LSTM decoder, the op and shapes named */
    ag_set_error_handler(tg_capture, NULL);
    ag_tensor *h, *cs;
    ag_tensor *out = zoo_seq2seq_encoder_run(&bm.encoder, &c, ZT_BATCH_SRC, 2, 5, &h, &cs);
    TG_EXPECT_NULL(zoo_seq2seq_attn_decoder_init_state(&bm.decoder, &c, out, h, ZT_BATCH_SRC_LEN),
                   "attention decoder init_state: state h [2, 2, 8] and c (none) given to an LSTM");
    ag_set_error_handler(NULL, NULL);
    ag_tape_free(t);
    nn_params_free(ps);

    /* training reduces the loss: the four pairs of the GRU's test */
    zoo_model *m = toy_model(ZOO_CELL_LSTM);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    t = ag_tape_new();
    double first, last;
    zt_overfit(m, t, 200, &first, &last);
    printf("\n    lstm: loss per token %.4f at step 1, %.5f at step 200 ", first, last);
    CU_ASSERT_TRUE(first > 2.0);
    CU_ASSERT_TRUE(last < 0.05);
    int32_t out_ids[ZT_NP * ZT_TT];
    int out_len[ZT_NP];
    zt_greedy(m, t, out_ids, out_len);
    for (int b = 0; b < ZT_NP; b++) CU_ASSERT_EQUAL(out_len[b], ZT_TGT_LEN[b] - 1);
    ag_tape_free(t);
    zoo_model_free(m);
}

static CU_TestInfo tests[] = {
    {"parameter names, order and shapes as the state_dict", test_parameter_names},
    {"model kind: hyperparameters, heads, bad config", test_model_kind},
    {"d2l's encoder and decoder shapes", test_d2l_shapes},
    {"precomputed keys equal AdditiveAttention", test_attend_equals_additive_attention},
    {"attention weights: masked and normalised", test_attention_masks},
    {"step decoding equals decode(), decode keeps the state", test_steps_equal_decode},
    {"training forward is deterministic", test_training_forward_is_deterministic},
    {"overfit 4 pairs; greedy, beam and attention record", test_overfit_greedy_beam_attention},
    {"greedy equals beam 1 (untrained)", test_greedy_equals_beam1_untrained},
    {"the LSTM cell: names, steps, select, a GRU state refused, training", test_lstm_cell},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("bahdanau", tests); }
