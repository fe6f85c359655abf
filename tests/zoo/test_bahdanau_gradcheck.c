/* test_bahdanau_gradcheck.c -- float64 gradient checks through the Bahdanau seq2seq at tiny
 * sizes (vocab 7, embed 3, hidden 4, 2 GRU layers, source 4 steps with padding): the encoder,
 * the step attention with precomputed keys, one decoder step, and the whole teacher-forced
 * model with d2l's masked loss (eval, and training with a reseeded dropout), w.r.t. the data
 * inputs and every parameter. */
#include "tests/gc_harness.h"
#include "zoo/models/bahdanau.h"
#include "zoo/app/trainer.h"

#include <stdio.h>
#include <string.h>

enum { V = 7, E = 3, H = 4, L = 2, B = 2, TS = 4, T = 3 };

/* valid lengths 3 and 2 of 4 steps: the second row's third position is masked, the fourth
 * position (padding in both rows) is left out of the attention */
static const int32_t SRC[B * TS] = {4, 5, 3, 1, 6, 3, 1, 1};
static const int32_t SRC_LEN[B] = {3, 2};

/* ---- encoder: outputs (TS, B, H) and final state (L, B, H), checked together ---- */

static ag_tensor *run_encoder(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)x;
    nn_ctx c = gc_eval_ctx(t);
    ag_tensor *state;
    ag_tensor *out = zoo_seq2seq_encoder_forward(u, &c, SRC, B, TS, &state);
    return ag_concat(t, 2, (ag_tensor *[]){out, state}, 0); /* (TS + L, B, H) */
}

static void test_encoder(void) {
    gc_harness h = {.ps = nn_params_new()};
    zoo_seq2seq_encoder enc;
    CU_ASSERT_EQUAL_FATAL(zoo_seq2seq_encoder_init(&enc, h.ps, "encoder", V, E, H, L, 0.2), 0);
    gc_check(&h, "seq2seq encoder (outputs and state)", run_encoder, &enc, false);
}

/* ---- the decoder fed with encoder outputs and state given as data ---- */

/* x[0] = encoder outputs (TS, B, H), x[1] = encoder state (L, B, H) */
static zoo_bahdanau_state *state_from(zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                      ag_tensor *const *x) {
    return zoo_seq2seq_attn_decoder_init_state(d, c, x[0], x[1], SRC_LEN);
}

/* The step attention with the precomputed keys: x[2] = the query (B, H). */
static ag_tensor *run_attend(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = gc_eval_ctx(t);
    return zoo_seq2seq_attn_decoder_attend(u, &c, state_from(u, &c, x), x[2], NULL);
}

/* Two decoder steps (the second from the state the first left), logits of both. */
static ag_tensor *run_steps(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = gc_eval_ctx(t);
    zoo_bahdanau_state *s = state_from(u, &c, x);
    ag_tensor *y0 = zoo_seq2seq_attn_decoder_step(u, &c, s, (const int32_t[]){2, 2}, B, NULL);
    ag_tensor *y1 = zoo_seq2seq_attn_decoder_step(u, &c, s, (const int32_t[]){5, 6}, B, NULL);
    return ag_concat(t, 2, (ag_tensor *[]){y0, y1}, 1); /* (B, 2, V) */
}

static void decoder_harness(gc_harness *h, zoo_seq2seq_attn_decoder *d, bool query) {
    ag_rng r;
    ag_rng_seed(&r, 4);
    h->ps = nn_params_new();
    CU_ASSERT_EQUAL_FATAL(zoo_seq2seq_attn_decoder_init(d, h->ps, "decoder", V, E, H, L, 0.2), 0);
    gc_add_data(h, AG_SHAPE(TS, B, H), &r);
    gc_add_data(h, AG_SHAPE(L, B, H), &r);
    if (query) gc_add_data(h, AG_SHAPE(B, H), &r);
}

static void test_attend(void) {
    gc_harness h = {0};
    zoo_seq2seq_attn_decoder d;
    decoder_harness(&h, &d, true);
    gc_check(&h, "step attention with precomputed keys, masked", run_attend, &d, false);
}

static void test_decoder_steps(void) {
    gc_harness h = {0};
    zoo_seq2seq_attn_decoder d;
    decoder_harness(&h, &d, false);
    gc_check(&h, "two decoder steps from the encoder's outputs and state", run_steps, &d, false);
}

/* ---- the whole model with d2l's loss ---- */

static const int32_t DEC_IN[B * T] = {2, 4, 5, 2, 6, 3}, LABELS[B * T] = {4, 5, 3, 6, 3, 1};
static const int32_t LABEL_LEN[B] = {3, 2};

typedef struct whole {
    zoo_bahdanau bm;
    bool training;
} whole;

/* sum over the batch of MaskedSoftmaxCELoss(decode(encode(src), dec_in), labels) */
static ag_tensor *run_model(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)x;
    whole *w = u;
    ag_rng r;
    ag_rng_seed(&r, 77); /* the same dropout masks at every evaluation */
    nn_ctx c = {.tape = t, .training = w->training, .rng = &r};
    zoo_bahdanau_state *s = zoo_bahdanau_encode(&w->bm, &c, SRC, SRC_LEN, B, TS);
    ag_tensor *loss =
        nn_masked_ce(&c, zoo_bahdanau_decode(&w->bm, &c, s, DEC_IN, B, T), LABELS, LABEL_LEN, 0);
    return ag_sum(t, loss, AG_ALL, false);
}

static void test_model_loss(void) {
    for (int training = 0; training < 2; training++) {
        gc_harness h = {.ps = nn_params_new()};
        whole w = {.training = training};
        zoo_bahdanau_cfg cfg = zoo_bahdanau_defaults(V, V + 1);
        cfg.embed = E;
        cfg.hiddens = H;
        cfg.layers = L;
        cfg.dropout = 0.2;
        CU_ASSERT_EQUAL_FATAL(zoo_bahdanau_init(&w.bm, h.ps, &cfg), 0);
        gc_check(&h,
                 training ? "whole model with the masked loss, training (dropout)"
                          : "whole model with the masked loss, eval",
                 run_model, &w, false);
    }
}

static CU_TestInfo tests[] = {
    {"encoder", test_encoder},
    {"step attention (precomputed keys)", test_attend},
    {"decoder steps", test_decoder_steps},
    {"whole model with its loss (eval and training)", test_model_loss},
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main(
        "bahdanau gradcheck", tests,
        "zoo: the Bahdanau seq2seq, GRU and LSTM (float64, tests/zoo/test_bahdanau_gradcheck.c)");
}
