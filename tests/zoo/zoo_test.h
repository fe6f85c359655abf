/* zoo_test.h -- what the zoo's CUnit tests share (header only, static inline; float32 builds).
 *
 * Four toy pairs and d2l's training step on them (test_bahdanau.c, test_encdec.c):
 *
 *     zoo_model *m = zoo_model_new(kind, &cfg, ZT_SV, ZT_TV, 11);
 *     double first, last;
 *     zt_overfit(m, t, 200, &first, &last);             // Adam 0.01, clip 1, seed 8
 *     int32_t out[ZT_NP * ZT_TT]; int out_len[ZT_NP];
 *     zt_greedy(m, t, out, out_len);                     // the four sources at once
 *     zt_check_targets(out, out_len);                    // each row its target
 *     zt_beam_agrees(m, t, b, 1, out, out_len);          // pair b alone, beam 1: greedy's row
 *
 * A tiny model of a kind: (zoo_bahdanau *)zt_tiny_model(&zoo_bahdanau_kind, &cfg), and its
 * batch: ZT_BATCH_SRC, ZT_BATCH_SRC_LEN, ZT_BATCH_DEC_IN.
 * Parameters against a table: zt_check_params(ps, want, n) (zt_param: name, rows, cols).
 *
 * The trainer's small corpus and Transformer (test_trainer.c, test_trainer_loop.c; test_dist.c
 * may join):
 *
 *     ds_fra *d = zt_corpus(4);                          // 8 pairs, batches of 4
 *     zoo_trainer *tr = zt_trainer_new(d, 0.2, 0.01, 5); // dropout, lr, seed
 */
#ifndef TG_ZOO_TEST_H
#define TG_ZOO_TEST_H

#include <stdio.h>

#include "datasets/fra_eng.h"
#include "optim/optim.h"
#include "tests/tg_test.h"
#include "zoo/app/decode.h"
#include "zoo/app/trainer.h"
#include "zoo/models/transformer.h"

/* ---- parameters ---- */

/* A parameter as a store should hold it: its name, rows and columns (cols 0: a vector). */
typedef struct zt_param {
    const char *name;
    int rows, cols;
} zt_param;

/* ps holds exactly the n parameters of want, in that order, with those names and shapes. */
static inline void zt_check_params(const nn_params *ps, const zt_param *want, size_t n) {
    CU_ASSERT_EQUAL_FATAL(nn_params_count(ps), n);
    for (size_t i = 0; i < n; i++) {
        const ag_tensor *p = nn_params_at(ps, i);
        CU_ASSERT_STRING_EQUAL(p->name, want[i].name);
        CU_ASSERT_EQUAL(p->ndim, want[i].cols ? 2 : 1);
        CU_ASSERT_EQUAL(p->shape[0], want[i].rows);
        if (want[i].cols) CU_ASSERT_EQUAL(p->shape[1], want[i].cols);
    }
}

/* ---- tiny models ---- */

/* The tests' tiny models: zoo_model_new(k, cfg) over 13 source and 11 target words, seed 99
 * (asserted built). A zoo_model * of a kind is that kind's model struct (its base first: the
 * models' headers), so a test casts it; zoo_model_free frees it. */
static inline zoo_model *zt_tiny_model(const zoo_model_kind *k, const void *cfg) {
    zoo_model *m = zoo_model_new(k, cfg, 13, 11, 99);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    return m;
}

/* The tiny models' batch: sources of 5 steps (padding 1), the first two of valid lengths 4 and
 * 2 (ZT_BATCH_SRC_LEN; a third for the tests that select rows), and the decoder inputs of two
 * targets of 4 steps. */
static const int32_t ZT_BATCH_SRC[3 * 5] = {4, 5, 6, 3, 1, 7, 3, 1, 1, 1, 9, 8, 3, 1, 1};
static const int32_t ZT_BATCH_SRC_LEN[2] = {4, 2};
static const int32_t ZT_BATCH_DEC_IN[2 * 4] = {2, 8, 9, 10, 2, 5, 4, 3};

/* ---- four toy pairs ---- */

/* pairs, source and target steps, source and target vocabulary sizes */
enum { ZT_NP = 4, ZT_TS = 6, ZT_TT = 6, ZT_SV = 12, ZT_TV = 12 };
/* sources and targets over words w4..w11 ("a".."h" of ZT_WORDS); the last pair reverses the
 * first; padding 1, <eos> 3 */
static const int32_t ZT_SRC[ZT_NP * ZT_TS] = {4, 5, 3, 1, 1, 1, 6, 3, 1, 1, 1, 1,
                                              7, 8, 9, 3, 1, 1, 5, 4, 3, 1, 1, 1};
static const int32_t ZT_SRC_LEN[ZT_NP] = {3, 2, 4, 3};
static const int32_t ZT_TGT[ZT_NP * ZT_TT] = {6,  7, 3, 1, 1, 1, 8, 9, 10, 3, 1, 1,
                                              11, 3, 1, 1, 1, 1, 7, 6, 3,  1, 1, 1};
static const int32_t ZT_TGT_LEN[ZT_NP] = {3, 4, 2, 3};
/* the vocabulary of the pairs (ds_vocab_parse) */
static const char ZT_WORDS[] = "<unk>\n<pad>\n<bos>\n<eos>\na\nb\nc\nd\ne\nf\ng\nh\n";

/* d2l's training step on the four pairs: teacher forcing, the masked loss summed over the batch,
 * backward, one optimizer step, the tape reset. Returns the loss per valid target token. */
static inline double zt_train_step(zoo_model *m, optim *opt, ag_tape *t, ag_rng *r) {
    int32_t dec_in[ZT_NP * ZT_TT];
    zoo_teacher_inputs(ZT_TGT, ZT_NP, ZT_TT, DS_BOS, dec_in);
    nn_ctx c = {.tape = t, .training = true, .rng = r};
    void *s = m->ops->encode(m, &c, ZT_SRC, ZT_SRC_LEN, ZT_NP, ZT_TS, NULL);
    ag_tensor *l = ag_sum(
        t, nn_masked_ce(&c, m->ops->decode(m, &c, s, dec_in, ZT_NP, ZT_TT), ZT_TGT, ZT_TGT_LEN, 0),
        AG_ALL, false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    double loss = l->data[0] * ZT_TT / (3 + 4 + 2 + 3);
    CU_ASSERT_EQUAL_FATAL(ag_backward(t, l), 0);
    CU_ASSERT_EQUAL(optim_step(opt), 0);
    ag_tape_reset(t);
    return loss;
}

/* `steps` training steps of m on the four pairs with Adam (lr 0.01, the gradient norm clipped to
 * 1), the dropout RNG seeded 8; *first and *last: the loss per token at the first and last. */
static inline void zt_overfit(zoo_model *m, ag_tape *t, int steps, double *first, double *last) {
    optim_cfg oc = optim_adam(0.01);
    oc.clip_norm = 1;
    optim *opt = optim_new(m->ps, oc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(opt);
    ag_rng r;
    ag_rng_seed(&r, 8);
    *first = *last = zt_train_step(m, opt, t, &r);
    for (int i = 1; i < steps; i++) *last = zt_train_step(m, opt, t, &r);
    optim_free(opt);
}

/* Greedy decoding of the four sources at once (at most ZT_TT steps): out[ZT_NP * ZT_TT],
 * out_len[ZT_NP]. */
static inline void zt_greedy(zoo_model *m, ag_tape *t, int32_t *out, int *out_len) {
    CU_ASSERT_EQUAL_FATAL(
        zoo_greedy(m, t, ZT_SRC, ZT_SRC_LEN, ZT_NP, ZT_TS, DS_BOS, DS_EOS, ZT_TT, out, out_len), 0);
}

/* zt_greedy's rows are the pairs' targets without their <eos>: the lengths and the tokens. */
static inline void zt_check_targets(const int32_t *out, const int *out_len) {
    for (int b = 0; b < ZT_NP; b++) {
        CU_ASSERT_EQUAL(out_len[b], ZT_TGT_LEN[b] - 1);
        for (int i = 0; i < out_len[b] && i < ZT_TGT_LEN[b]; i++)
            CU_ASSERT_EQUAL(out[b * ZT_TT + i], ZT_TGT[b * ZT_TT + i]);
    }
}

/* Beam search of `width` (no length penalty) on the source of pair b alone: its tokens into
 * out[ZT_TT]; returns how many. */
static inline int zt_beam(zoo_model *m, ag_tape *t, int b, int width, int32_t *out) {
    int n = -1;
    CU_ASSERT_EQUAL_FATAL(zoo_beam_search(m, t, ZT_SRC + b * ZT_TS, &ZT_SRC_LEN[b], 1, ZT_TS,
                                          DS_BOS, DS_EOS, ZT_TT, width, 0, out, &n),
                          0);
    return n;
}

/* zt_beam gives row b of zt_greedy's out / out_len: the same length and tokens. Returns the
 * length. */
static inline int zt_beam_agrees(zoo_model *m, ag_tape *t, int b, int width, const int32_t *out,
                                 const int *out_len) {
    int32_t beam_out[ZT_TT];
    int n = zt_beam(m, t, b, width, beam_out);
    CU_ASSERT_EQUAL(n, out_len[b]);
    for (int i = 0; i < n && i < out_len[b]; i++) CU_ASSERT_EQUAL(beam_out[i], out[b * ZT_TT + i]);
    return n;
}

/* ---- the trainer's small corpus and Transformer ---- */

/* Eight English-French pairs read from memory with options o (ds_fra_load_mem). NULL (the
 * message printed) on failure; the caller frees. */
static inline ds_fra *zt_corpus_with(const ds_fra_options *o) {
    static const char corpus[] = "go .\tva !\n"
                                 "hi .\tsalut .\n"
                                 "run !\tcours !\n"
                                 "i lost .\tj'ai perdu .\n"
                                 "he's calm .\til est calme .\n"
                                 "i'm home .\tje suis chez moi .\n"
                                 "we won .\tnous avons gagne .\n"
                                 "be nice .\tsois gentil .\n";
    ds_fra *d = NULL;
    if (ds_fra_load_mem(corpus, sizeof corpus - 1, "corpus", o, &d))
        fprintf(stderr, "%s\n", ag_last_error());
    return d;
}

/* The eight pairs, every word kept (min_freq 1), shuffled with seed 3, batches of batch_size. */
static inline ds_fra *zt_corpus(int batch_size) {
    ds_fra_options o = ds_fra_defaults();
    o.min_freq = 1;
    o.batch_size = batch_size;
    o.seed = 3;
    return zt_corpus_with(&o);
}

/* The trainer's tiny Transformer: 16 hiddens, 32 in the FFN, 2 heads, 1 layer. */
static inline zoo_transformer_cfg zt_tiny_transformer(double dropout) {
    zoo_transformer_cfg h = zoo_transformer_default_cfg;
    h.hiddens = 16;
    h.ffn_hiddens = 32;
    h.heads = 2;
    h.layers = 1;
    h.dropout = dropout;
    return h;
}

/* A trainer of zt_tiny_transformer(dropout) over d's vocabularies, its parameters drawn with
 * seed, learning rate lr, the gradient norm clipped to 1, dropout drawn with seed + 1. NULL on
 * failure; the caller frees it (zoo_trainer_free, which frees the model). */
static inline zoo_trainer *zt_trainer_new(const ds_fra *d, double dropout, double lr,
                                          uint64_t seed) {
    zoo_transformer_cfg h = zt_tiny_transformer(dropout);
    zoo_model *m = zoo_model_new(&zoo_transformer_kind, &h, ds_vocab_size(ds_fra_vocab(d, DS_SRC)),
                                 ds_vocab_size(ds_fra_vocab(d, DS_TGT)), seed);
    return m ? zoo_trainer_new(m, lr, 1.0, seed + 1) : NULL;
}

#endif
