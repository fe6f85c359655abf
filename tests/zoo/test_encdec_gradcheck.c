/* test_encdec_gradcheck.c -- float64 gradient checks through the plain encoder-decoder at tiny
 * sizes (vocab 7, embed 3, hidden 4, 2 layers, source 4 steps), both cells: decoder steps from
 * a given encoder state, and the whole teacher-forced model with d2l's masked loss (eval, and
 * training with a reseeded dropout), w.r.t. the data inputs and every parameter. The Bahdanau
 * model with an LSTM likewise (test_bahdanau_gradcheck.c checks its GRU). */
#include "tests/gc_harness.h"
#include "zoo/app/trainer.h"
#include "zoo/models/bahdanau.h"
#include "zoo/models/encdec.h"

#include <stdio.h>
#include <string.h>

enum { V = 7, E = 3, H = 4, L = 2, B = 2, TS = 4, T = 3 };

static const int32_t SRC[B * TS] = {4, 5, 3, 1, 6, 3, 1, 1};
static const int32_t SRC_LEN[B] = {3, 2};
static const int32_t DEC_IN[B * T] = {2, 4, 5, 2, 6, 3}, LABELS[B * T] = {4, 5, 3, 6, 3, 1};
static const int32_t LABEL_LEN[B] = {3, 2};

/* ---- decoder steps from a state given as data: x[0] = h (L, B, H), x[1] = c (LSTM) ---- */

static ag_tensor *run_steps(ag_tape *t, ag_tensor *const *x, void *u) {
    zoo_seq2seq_decoder *d = u;
    nn_ctx c = gc_eval_ctx(t);
    zoo_encdec_state *s =
        zoo_seq2seq_decoder_init_state(d, &c, x[0], d->cell == ZOO_CELL_LSTM ? x[1] : NULL);
    ag_tensor *y0 = zoo_seq2seq_decoder_step(d, &c, s, (const int32_t[]){2, 2}, B);
    ag_tensor *y1 = zoo_seq2seq_decoder_step(d, &c, s, (const int32_t[]){5, 6}, B);
    return ag_concat(t, 2, (ag_tensor *[]){y0, y1}, 1);
}

static void test_decoder_steps(void) {
    for (int cell = 0; cell < 2; cell++) {
        gc_harness h = {.ps = nn_params_new()};
        zoo_seq2seq_decoder d;
        ag_rng r;
        ag_rng_seed(&r, 4);
        CU_ASSERT_EQUAL_FATAL(
            zoo_seq2seq_decoder_init(&d, h.ps, "decoder", (zoo_cell)cell, V, E, H, L, 0.2), 0);
        gc_add_data(&h, AG_SHAPE(L, B, H), &r);
        if (cell == ZOO_CELL_LSTM) gc_add_data(&h, AG_SHAPE(L, B, H), &r);
        gc_check(&h,
                 cell == ZOO_CELL_LSTM ? "plain decoder steps, LSTM"
                                       : "plain decoder steps, GRU (context)",
                 run_steps, &d, false);
    }
}

/* ---- the whole models with d2l's loss ---- */

typedef struct whole {
    zoo_encdec ed;
    zoo_bahdanau bm;
    bool bahdanau, training;
} whole;

static ag_tensor *run_model(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)x;
    whole *w = u;
    ag_rng r;
    ag_rng_seed(&r, 77);
    nn_ctx c = {.tape = t, .training = w->training, .rng = &r};
    ag_tensor *y;
    if (w->bahdanau)
        y = zoo_bahdanau_decode(&w->bm, &c, zoo_bahdanau_encode(&w->bm, &c, SRC, SRC_LEN, B, TS),
                                DEC_IN, B, T);
    else y = zoo_encdec_decode(&w->ed, &c, zoo_encdec_encode(&w->ed, &c, SRC, B, TS), DEC_IN, B, T);
    return ag_sum(t, nn_masked_ce(&c, y, LABELS, LABEL_LEN, 0), AG_ALL, false);
}

static void test_model_loss(void) {
    for (int model = 0; model < 3; model++) /* encdec LSTM, encdec GRU, bahdanau LSTM */
        for (int training = 0; training < 2; training++) {
            gc_harness h = {.ps = nn_params_new()};
            whole w = {.training = training, .bahdanau = model == 2};
            if (w.bahdanau) {
                zoo_bahdanau_cfg cfg = zoo_bahdanau_defaults(V, V + 1);
                cfg = (zoo_bahdanau_cfg){.src_vocab = V,
                                         .tgt_vocab = V + 1,
                                         .embed = E,
                                         .hiddens = H,
                                         .layers = L,
                                         .dropout = 0.2,
                                         .cell = ZOO_CELL_LSTM};
                CU_ASSERT_EQUAL_FATAL(zoo_bahdanau_init(&w.bm, h.ps, &cfg), 0);
            } else {
                zoo_encdec_cfg cfg = {.src_vocab = V,
                                      .tgt_vocab = V + 1,
                                      .cell = model == 0 ? ZOO_CELL_LSTM : ZOO_CELL_GRU,
                                      .embed = E,
                                      .hiddens = H,
                                      .layers = L,
                                      .dropout = 0.2};
                CU_ASSERT_EQUAL_FATAL(zoo_encdec_init(&w.ed, h.ps, &cfg), 0);
            }
            char name[96];
            snprintf(name, sizeof name, "%s with the masked loss, %s",
                     model == 0   ? "plain LSTM seq2seq"
                     : model == 1 ? "plain GRU seq2seq"
                                  : "Bahdanau LSTM seq2seq",
                     training ? "training (dropout)" : "eval");
            gc_check(&h, name, run_model, &w, false);
        }
}

static CU_TestInfo tests[] = {
    {"plain decoder steps (both cells)", test_decoder_steps},
    {"whole models with their loss (eval and training)", test_model_loss},
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main("encdec gradcheck", tests,
                   "zoo: the plain encoder-decoder, LSTM and GRU (float64, "
                   "tests/zoo/test_encdec_gradcheck.c)");
}
