/* test_encdec.c -- the plain RNN encoder-decoder (float32), LSTM and GRU: d2l's shape checks
 * (docs/spec.md section 7), parameter names as the PyTorch state_dict, step decoding against
 * the teacher-forced pass, select against a state built from the rows directly, a state of the
 * wrong cell refused, the cell's config field, overfitting a few pairs with greedy and beam
 * search, and a checkpoint round trip under the PyTorch names. */
#include "tests/tg_test.h"
#include "tests/zoo/zoo_test.h"
#include "zoo/app/model_io.h"
#include "zoo/models/encdec.h"
#include "zoo/models/seq2seq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const zoo_cell CELLS[2] = {ZOO_CELL_LSTM, ZOO_CELL_GRU};

static bool has_shape(const ag_tensor *x, int a, int b, int c) {
    return x && x->ndim == 3 && x->shape[0] == a && x->shape[1] == b && x->shape[2] == c;
}

/* d2l: Seq2SeqEncoder(V 10, embed 8, H 16, 2 layers) on zeros (4, 7) -> outputs (7, 4, 16),
 * state (2, 4, 16) (two of them for an LSTM); the decoder's output (4, 7, 10). */
static void test_d2l_shapes(void) {
    for (int ci = 0; ci < 2; ci++) {
        nn_params *ps = nn_params_new();
        zoo_seq2seq_encoder enc;
        zoo_seq2seq_decoder dec;
        CU_ASSERT_EQUAL(
            zoo_seq2seq_encoder_init_cell(&enc, ps, "encoder", CELLS[ci], 10, 8, 16, 2, 0), 0);
        CU_ASSERT_EQUAL(zoo_seq2seq_decoder_init(&dec, ps, "decoder", CELLS[ci], 10, 8, 16, 2, 0),
                        0);
        CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 5), 0);
        ag_tape *t = ag_tape_new();
        nn_ctx c = {.tape = t, .training = false};
        int32_t X[4 * 7] = {0};
        ag_tensor *h, *cs;
        ag_tensor *out = zoo_seq2seq_encoder_run(&enc, &c, X, 4, 7, &h, &cs);
        CU_ASSERT_TRUE(has_shape(out, 7, 4, 16));
        CU_ASSERT_TRUE(has_shape(h, 2, 4, 16));
        if (CELLS[ci] == ZOO_CELL_LSTM) {
            CU_ASSERT_TRUE(has_shape(cs, 2, 4, 16));
        } else {
            CU_ASSERT_PTR_NULL(cs);
        }
        /* the last output step is the last layer's final h */
        for (int i = 0; i < 4 * 16; i++) CU_ASSERT_EQUAL(out->data[6 * 64 + i], h->data[64 + i]);
        zoo_encdec_state *s = zoo_seq2seq_decoder_init_state(&dec, &c, h, cs);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ag_tensor *y = zoo_seq2seq_decoder_forward(&dec, &c, s, X, 4, 7);
        CU_ASSERT_TRUE(has_shape(y, 4, 7, 10));
        /* the state after decoding: step through the 7 tokens, two (2, 4, 16) tensors again */
        for (int i = 0; i < 7; i++)
            CU_ASSERT_PTR_NOT_NULL(zoo_seq2seq_decoder_step(&dec, &c, s, X, 4));
        if (CELLS[ci] == ZOO_CELL_LSTM) {
            CU_ASSERT_TRUE(has_shape(nn_lstm_state_join(&dec.rnn.lstm, &c, s->h), 2, 4, 16));
            CU_ASSERT_TRUE(has_shape(nn_lstm_state_join(&dec.rnn.lstm, &c, s->c), 2, 4, 16));
        }
        /* the encoder's plain forward keeps its GRU-only contract */
        ag_set_error_handler(tg_capture, NULL);
        ag_tensor *st;
        if (CELLS[ci] == ZOO_CELL_LSTM) {
            TG_EXPECT_NULL(zoo_seq2seq_encoder_forward(&enc, &c, X, 4, 7, &st),
                           "zoo_seq2seq_encoder_run");
        } else {
            CU_ASSERT_PTR_NOT_NULL(zoo_seq2seq_encoder_forward(&enc, &c, X, 4, 7, &st));
        }
        ag_set_error_handler(NULL, NULL);
        ag_tape_free(t);
        nn_params_free(ps);
    }
}

/* ---- names ---- */

static void test_parameter_names(void) {
    for (int ci = 0; ci < 2; ci++) {
        const int G = CELLS[ci] == ZOO_CELL_LSTM ? 4 : 3;
        nn_params *ps = nn_params_new();
        zoo_encdec ed;
        zoo_encdec_cfg cfg = zoo_encdec_defaults(10, 11);
        cfg.cell = CELLS[ci];
        cfg.embed = 8;
        cfg.hiddens = 16;
        CU_ASSERT_EQUAL_FATAL(zoo_encdec_init(&ed, ps, &cfg), 0);
        CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 1), 0);
        const int dec_in0 = CELLS[ci] == ZOO_CELL_LSTM ? 8 : 8 + 16; /* the GRU reads the context */
        const zt_param want[] = {
            {"encoder.embedding.weight", 10, 8},
            {"encoder.rnn.weight_ih_l0", G * 16, 8},
            {"encoder.rnn.weight_hh_l0", G * 16, 16},
            {"encoder.rnn.bias_ih_l0", G * 16, 0},
            {"encoder.rnn.bias_hh_l0", G * 16, 0},
            {"encoder.rnn.weight_ih_l1", G * 16, 16},
            {"encoder.rnn.weight_hh_l1", G * 16, 16},
            {"encoder.rnn.bias_ih_l1", G * 16, 0},
            {"encoder.rnn.bias_hh_l1", G * 16, 0},
            {"decoder.embedding.weight", 11, 8},
            {"decoder.rnn.weight_ih_l0", G * 16, dec_in0},
            {"decoder.rnn.weight_hh_l0", G * 16, 16},
            {"decoder.rnn.bias_ih_l0", G * 16, 0},
            {"decoder.rnn.bias_hh_l0", G * 16, 0},
            {"decoder.rnn.weight_ih_l1", G * 16, 16},
            {"decoder.rnn.weight_hh_l1", G * 16, 16},
            {"decoder.rnn.bias_ih_l1", G * 16, 0},
            {"decoder.rnn.bias_hh_l1", G * 16, 0},
            {"decoder.dense.weight", 11, 16},
            {"decoder.dense.bias", 11, 0},
        };
        zt_check_params(ps, want, sizeof want / sizeof *want);
        nn_params_free(ps);
    }
}

/* The kind: spec 7's defaults, the cell field strict and by name. */
static void test_model_kind(void) {
    const zoo_model_kind *k = &zoo_encdec_kind;
    CU_ASSERT_STRING_EQUAL(k->program, "seq2seq_nmt");
    CU_ASSERT_EQUAL(k->epochs, 300);
    CU_ASSERT_DOUBLE_EQUAL(k->lr, 0.005, 1e-12);
    const zoo_encdec_cfg *def = k->defaults;
    CU_ASSERT_EQUAL(def->cell, ZOO_CELL_LSTM);
    CU_ASSERT_EQUAL(def->embed, 32);
    CU_ASSERT_EQUAL(def->hiddens, 32);
    CU_ASSERT_EQUAL(def->layers, 2);
    CU_ASSERT_DOUBLE_EQUAL(def->dropout, 0.1, 1e-12);
    const zoo_field *f = zoo_field_find(k->config, k->n_config, "cell");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char buf[64];
    CU_ASSERT_STRING_EQUAL(zoo_field_format(f, def, buf, sizeof buf), "lstm");
    CU_ASSERT_STRING_EQUAL(zoo_field_expects(f, buf, sizeof buf), "one of gru, lstm");
    zoo_encdec_cfg h = *def;
    CU_ASSERT_EQUAL(zoo_config_set(k, &h, "cell", "gru"), 0);
    CU_ASSERT_EQUAL(h.cell, ZOO_CELL_GRU);
    CU_ASSERT_STRING_EQUAL(zoo_field_format(f, &h, buf, sizeof buf), "gru");
    CU_ASSERT_DOUBLE_EQUAL(zoo_field_number(f, &h), 0, 0);
    ag_set_error_handler(tg_capture, NULL);
    const char *bad[] = {"GRU", "", "lst", "lstmx", "1", "gru|lstm"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CU_ASSERT_EQUAL(zoo_config_set(k, &h, "cell", bad[i]), -1);
        CU_ASSERT_EQUAL(h.cell, ZOO_CELL_GRU); /* unchanged */
    }
    TG_ERROR_HAS("--cell: expected one of gru, lstm, got 'gru|lstm'");
    ag_set_error_handler(NULL, NULL);
    zoo_model *m = zoo_model_new(k, NULL, 20, 30, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(m->layers, 0);
    CU_ASSERT_EQUAL(m->ops->attn_heads(m, ZOO_ATTN_DEC_CROSS), 0);
    CU_ASSERT_EQUAL(nn_params_find(m->ps, "decoder.rnn.weight_ih_l0")->shape[0],
                    128); /* 4H: LSTM */
    zoo_model_free(m);
    /* a bad config is refused, the store failed */
    nn_params *ps = nn_params_new();
    zoo_encdec ed;
    zoo_encdec_cfg cfg = zoo_encdec_defaults(5, 6);
    cfg.cell = 7;
    ag_set_error_handler(tg_capture, NULL);
    TG_EXPECT_ERROR(zoo_encdec_init(&ed, ps, &cfg), "seq2seq: bad config");
    ag_set_error_handler(NULL, NULL);
    nn_params_free(ps);
}

/* ---- decoding ---- */

/* The tiny model: 2 layers of 8 hiddens over 6 embeddings (zt_tiny_model). */
static zoo_encdec *tiny_new(zoo_cell cell, double dropout) {
    zoo_encdec_cfg cfg = zoo_encdec_default_cfg;
    cfg.cell = cell;
    cfg.embed = 6;
    cfg.hiddens = 8;
    cfg.layers = 2;
    cfg.dropout = dropout;
    return (zoo_encdec *)zt_tiny_model(&zoo_encdec_kind, &cfg);
}

enum { V = 11 };

/* A sequence of steps gives decode()'s logits; decode leaves the state alone. */
static void test_steps_equal_decode(void) {
    for (int ci = 0; ci < 2; ci++) {
        zoo_encdec *m = tiny_new(CELLS[ci], 0.1);
        ag_tape *t = ag_tape_new();
        nn_ctx c = {.tape = t, .training = false};
        zoo_encdec_state *s = zoo_encdec_encode(m, &c, ZT_BATCH_SRC, 2, 5);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        zoo_encdec_state before = *s;
        ag_tensor *full = zoo_encdec_decode(m, &c, s, ZT_BATCH_DEC_IN, 2, 4);
        CU_ASSERT_TRUE_FATAL(has_shape(full, 2, 4, V));
        CU_ASSERT_EQUAL(memcmp(&before, s, sizeof before), 0);
        double err = 0;
        for (int step = 0; step < 4; step++) {
            int32_t tok[2] = {ZT_BATCH_DEC_IN[step], ZT_BATCH_DEC_IN[4 + step]};
            ag_tensor *y = m->base.ops->step(&m->base, &c, s, tok, 2, NULL);
            CU_ASSERT_TRUE_FATAL(has_shape(y, 2, 1, V));
            for (int b = 0; b < 2; b++)
                for (int v = 0; v < V; v++)
                    err = fmax(err, fabs(y->data[b * V + v] - full->data[(b * 4 + step) * V + v]));
        }
        CU_ASSERT_TRUE(err < 1e-5);
        CU_ASSERT_EQUAL(s->steps, 4);
        CU_ASSERT_PTR_NOT_EQUAL(s->h[0], before.h[0]);
        ag_tensor *again = zoo_encdec_decode(m, &c, s, ZT_BATCH_DEC_IN, 2, 4);
        CU_ASSERT_PTR_NOT_NULL_FATAL(again);
        CU_ASSERT_EQUAL(memcmp(again->data, full->data, sizeof(ag_real) * 2 * 4 * V), 0);
        ag_tape_free(t);
        zoo_model_free(&m->base);
    }
}

/* select keeps rows (repeats, reorders, drops) as a state made from those sources directly:
 * the next steps and a decode give the same logits. reserve first, then select. */
static void test_select(void) {
    for (int ci = 0; ci < 2; ci++) {
        zoo_encdec *m = tiny_new(CELLS[ci], 0.1);
        ag_tape *t = ag_tape_new();
        ag_tape_set_recording(t, false);
        nn_ctx c = {.tape = t, .training = false};
        zoo_encdec_state *s = zoo_encdec_encode(m, &c, ZT_BATCH_SRC, 3, 5);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_EQUAL_FATAL(zoo_seq2seq_decoder_reserve(&m->decoder, &c, s, 4), 0);
        const int32_t first[3] = {2, 2, 2}, second[3] = {5, 6, 7};
        CU_ASSERT_PTR_NOT_NULL_FATAL(m->base.ops->step(&m->base, &c, s, first, 3, NULL));
        const int32_t rows[4] = {2, 0, 2, 1};
        CU_ASSERT_EQUAL_FATAL(zoo_seq2seq_decoder_select(&m->decoder, &c, s, rows, 4), 0);
        int32_t tok2[4];
        for (int i = 0; i < 4; i++) tok2[i] = second[rows[i]];
        ag_tensor *y = m->base.ops->step(&m->base, &c, s, tok2, 4, NULL);
        CU_ASSERT_TRUE_FATAL(has_shape(y, 4, 1, V));
        ag_real got[4 * V];
        memcpy(got, y->data, sizeof got);
        ag_tensor *dec = zoo_encdec_decode(m, &c, s, (const int32_t[]){2, 2, 2, 2}, 4, 1);
        CU_ASSERT_TRUE_FATAL(has_shape(dec, 4, 1, V));
        ag_real got_dec[4 * V];
        memcpy(got_dec, dec->data, sizeof got_dec);
        /* the same rows built directly */
        int32_t src4[4 * 5];
        for (int i = 0; i < 4; i++)
            memcpy(src4 + i * 5, ZT_BATCH_SRC + rows[i] * 5, sizeof(int32_t) * 5);
        zoo_encdec_state *d = zoo_encdec_encode(m, &c, src4, 4, 5);
        CU_ASSERT_PTR_NOT_NULL_FATAL(d);
        ag_tensor *y0 = zoo_encdec_decode(m, &c, d, (const int32_t[]){2, 2, 2, 2}, 4, 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y0);
        double err = 0;
        for (int i = 0; i < 4 * V; i++) err = fmax(err, fabs(y0->data[i] - got_dec[i]));
        CU_ASSERT_PTR_NOT_NULL_FATAL(
            m->base.ops->step(&m->base, &c, d, (const int32_t[]){2, 2, 2, 2}, 4, NULL));
        ag_tensor *y1 = m->base.ops->step(&m->base, &c, d, tok2, 4, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y1);
        for (int i = 0; i < 4 * V; i++) err = fmax(err, fabs(y1->data[i] - got[i]));
        CU_ASSERT_TRUE(err < 1e-5);
        /* bad rows are refused */
        ag_set_error_handler(tg_capture, NULL);
        TG_EXPECT_ERROR(zoo_seq2seq_decoder_select(&m->decoder, &c, s, (const int32_t[]){4}, 1),
                        "the state has 4 rows");
        ag_set_error_handler(NULL, NULL);
        ag_tape_free(t);
        zoo_model_free(&m->base);
    }
}

/* An LSTM decoder given a GRU's state (h alone), and a GRU given an LSTM's (h, c): refused,
 * the op and the shapes named. */
static void test_wrong_state(void) {
    nn_params *ps = nn_params_new();
    zoo_seq2seq_decoder lstm, gru;
    CU_ASSERT_EQUAL(zoo_seq2seq_decoder_init(&lstm, ps, "a", ZOO_CELL_LSTM, 10, 8, 16, 2, 0), 0);
    CU_ASSERT_EQUAL(zoo_seq2seq_decoder_init(&gru, ps, "b", ZOO_CELL_GRU, 10, 8, 16, 2, 0), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 5), 0);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = false};
    ag_tensor *h = ag_tensor_new(t, AG_SHAPE(2, 4, 16)), *cs = ag_tensor_new(t, AG_SHAPE(2, 4, 16));
    memset(h->data, 0, sizeof(ag_real) * 128);
    memset(cs->data, 0, sizeof(ag_real) * 128);
    ag_set_error_handler(tg_capture, NULL);
    TG_EXPECT_NULL(zoo_seq2seq_decoder_init_state(&lstm, &c, h, NULL),
                   "seq2seq decoder init_state: state h [2, 4, 16] and c (none) given to an LSTM");
    TG_EXPECT_NULL(
        zoo_seq2seq_decoder_init_state(&gru, &c, h, cs),
        "seq2seq decoder init_state: state h [2, 4, 16] and c [2, 4, 16] given to a GRU");
    /* a c of another shape */
    ag_tensor *c3 = ag_tensor_new(t, AG_SHAPE(2, 3, 16));
    TG_EXPECT_NULL(zoo_seq2seq_decoder_init_state(&lstm, &c, h, c3),
                   "seq2seq decoder init_state: state h [2, 4, 16] and c [2, 3, 16]");
    ag_set_error_handler(NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL(zoo_seq2seq_decoder_init_state(&lstm, &c, h, cs));
    CU_ASSERT_PTR_NOT_NULL(zoo_seq2seq_decoder_init_state(&gru, &c, h, NULL));
    ag_tape_free(t);
    nn_params_free(ps);
}

/* ---- training a handful of pairs ---- */

static zoo_model *toy_model(zoo_cell cell) {
    zoo_encdec_cfg h = zoo_encdec_default_cfg;
    h.cell = cell;
    h.embed = 16;
    h.hiddens = 32;
    return zoo_model_new(&zoo_encdec_kind, &h, ZT_SV, ZT_TV, 11);
}

/* Overfits four pairs; greedy reproduces every target and beam search (widths 1 and 3) agrees;
 * translate_attention works and records no attention. */
static void test_overfit_greedy_beam(void) {
    for (int ci = 0; ci < 2; ci++) {
        zoo_model *m = toy_model(CELLS[ci]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        ag_tape *t = ag_tape_new();
        double first, last;
        zt_overfit(m, t, 200, &first, &last);
        printf("\n    %s: loss per token %.4f at step 1, %.5f at step 200 ",
               zoo_cell_name(CELLS[ci]), first, last);
        CU_ASSERT_TRUE(first > 2.0);
        CU_ASSERT_TRUE(last < 0.05);
        int32_t out[ZT_NP * ZT_TT];
        int out_len[ZT_NP];
        zt_greedy(m, t, out, out_len);
        zt_check_targets(out, out_len);
        for (int b = 0; b < ZT_NP; b++)
            for (int beam = 1; beam <= 3; beam += 2) zt_beam_agrees(m, t, b, beam, out, out_len);
        ag_tape_free(t);
        zoo_model_free(m);
    }
}

/* A model checkpoint (names of the PyTorch state_dict, config with the cell by name) loads back
 * into the same model: the same parameters, the same kind and cell. */
static void test_checkpoint_round_trip(void) {
    for (int ci = 0; ci < 2; ci++) {
        zoo_model *m = toy_model(CELLS[ci]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        ds_vocab *v = NULL;
        CU_ASSERT_EQUAL_FATAL(ds_vocab_parse(ZT_WORDS, sizeof ZT_WORDS - 1, "words", &v), 0);
        nn_ckpt *ck = nn_ckpt_new();
        CU_ASSERT_EQUAL_FATAL(zoo_ckpt_add_model(ck, m, v, v), 0);
        CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "config.cell"), zoo_cell_name(CELLS[ci]));
        CU_ASSERT_PTR_NOT_NULL(nn_ckpt_find(ck, "encoder.rnn.weight_hh_l1"));
        CU_ASSERT_PTR_NOT_NULL(nn_ckpt_find(ck, "decoder.dense.bias"));
        unsigned char *bytes;
        size_t len;
        CU_ASSERT_EQUAL_FATAL(nn_ckpt_save_mem(ck, &bytes, &len), 0);
        nn_ckpt *back = NULL;
        CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_mem(&back, bytes, len, "mem", NULL), 0);
        zoo_model *m2 = NULL;
        ds_vocab *sv = NULL, *tv = NULL;
        CU_ASSERT_EQUAL_FATAL(zoo_ckpt_load_model(back, &zoo_encdec_kind, &m2, &sv, &tv), 0);
        CU_ASSERT_EQUAL(((const zoo_encdec_cfg *)m2->cfg)->cell, CELLS[ci]);
        CU_ASSERT_EQUAL_FATAL(nn_params_count(m2->ps), nn_params_count(m->ps));
        for (size_t i = 0; i < nn_params_count(m->ps); i++) {
            const ag_tensor *a = nn_params_at(m->ps, i), *b = nn_params_at(m2->ps, i);
            CU_ASSERT_STRING_EQUAL(a->name, b->name);
            CU_ASSERT_EQUAL_FATAL(a->numel, b->numel);
            CU_ASSERT_EQUAL(memcmp(a->data, b->data, sizeof(ag_real) * (size_t)a->numel), 0);
        }
        free(bytes);
        ds_vocab_free(sv);
        ds_vocab_free(tv);
        zoo_model_free(m2);
        nn_ckpt_free(back);
        nn_ckpt_free(ck);
        ds_vocab_free(v);
        zoo_model_free(m);
    }
}

static CU_TestInfo tests[] = {
    {"d2l's shapes (both cells)", test_d2l_shapes},
    {"parameter names, order and shapes as the state_dict", test_parameter_names},
    {"model kind: defaults, the cell field", test_model_kind},
    {"step decoding equals decode()", test_steps_equal_decode},
    {"select equals the rows built directly", test_select},
    {"a state of the other cell is refused", test_wrong_state},
    {"overfit 4 pairs; greedy and beam", test_overfit_greedy_beam},
    {"checkpoint round trip", test_checkpoint_round_trip},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("encdec", tests); }
