/* zoo/models/bahdanau.h -- d2l's GRU encoder-decoder with Bahdanau attention (docs/spec.md
 * section 4; d2l 1.0 section 10.7 "Sequence-to-sequence learning" for the encoder and 11.4 "The
 * Bahdanau attention mechanism" for the decoder; 9.7 and 10.4 in d2l 0.17), built from nn
 * layers.
 *
 *     zoo_bahdanau_cfg cfg = zoo_bahdanau_defaults(src_vocab, tgt_vocab);
 *     zoo_bahdanau bm;
 *     zoo_bahdanau_init(&bm, ps, &cfg);    // registers encoder.* and decoder.* in ps
 *     nn_params_finalize(ps, seed);
 *     zoo_bahdanau_state *s = zoo_bahdanau_encode(&bm, &c, src, src_len, B, Ts);
 *     ag_tensor *logits = zoo_bahdanau_decode(&bm, &c, s, dec_in, B, T);    // (B, T, V)
 *
 * Shapes: batch B, source steps Ts, target steps T, embedding E, hidden H, GRU layers L,
 * vocabularies Vs (source) and V (target).
 *
 * The cell (cfg.cell, docs/spec.md section 7): a GRU (d2l's, the default) or an LSTM (the seed's
 * attention seq2seq) in both the encoder and the decoder; with an LSTM the state is (h, c), the
 * attention's query is still the last layer's hidden state h, and the names are the same with
 * weights of 4H rows instead of 3H (an LSTM's "GRU state" below is its h and c).
 *
 * Encoder (d2l's Seq2SeqEncoder): x = embedding(src) (B, Ts, E) taken as (Ts, B, E); outputs,
 * state = GRU(x) with outputs (Ts, B, H) and state (L, B, H). As d2l, the encoder ignores the
 * valid lengths: the padded positions run through the GRU too (the attention masks them later).
 *
 * Decoder (d2l's Seq2SeqAttentionDecoder). Its state: the encoder outputs as (B, Ts, H), the
 * GRU state (initially the encoder's final state) and the source valid lengths. Step t, for
 * the embedded input token e_t (B, E):
 *     query   q   = h[L-1]                      the last layer's hidden state (B, H)
 *     scores  s_j = w_v . tanh(W_q q + W_k enc_out_j)         j < Ts, masked for j >= valid
 *     weights a   = masked_softmax(s)            (B, 1, Ts), -1e6 on padded positions
 *     context     = dropout(a) enc_out           (B, H)
 *     x_t         = concat(context, e_t)         (B, H + E)  (context FIRST, as d2l)
 *     h           = GRU step(x_t, h)             all L layers, out_t = h[L-1]
 * and finally logits = dense(out) (B, T, V). W_k enc_out does not depend on t: it is computed
 * once per sequence when the state is made (zoo_bahdanau_state.keys), a pure refactoring of
 * AdditiveAttention's math (zoo_additive_attention_forward computes the same numbers); so is
 * leaving out the source positions that are padding in every row of the batch (their weights
 * are exactly 0; see zoo_seq2seq_attn_decoder_init_state).
 *
 * Parameter names are those of the PyTorch state_dict of the d2l model (docs/spec.md section 6),
 * registered in its order:
 *     encoder.embedding.weight                     (Vs, E)
 *     encoder.rnn.weight_ih_l{k}                   (3H, E for k = 0 else H)
 *     encoder.rnn.weight_hh_l{k} (3H, H), bias_ih_l{k} (3H), bias_hh_l{k} (3H)   k = 0..L-1
 *     decoder.attention.W_k.weight (H, H), W_q.weight (H, H), w_v.weight (1, H)
 *     decoder.embedding.weight                     (V, E)
 *     decoder.rnn.weight_ih_l{k}                   (3H, E + H for k = 0 else H), ... as above
 *     decoder.dense.weight (V, H), decoder.dense.bias (V)
 *
 * Ownership: the module structs hold pointers into the parameter store (valid as long as the
 * store) and need no free. Every tensor, state and weight list returned lives on the forward's
 * tape and is freed by ag_tape_reset. Every forward returns NULL after an error (reported
 * through ag's error handler; a NULL input gives NULL silently).
 */
#ifndef TG_ZOO_BAHDANAU_H
#define TG_ZOO_BAHDANAU_H

#include "encdec.h" /* the shared encoder zoo_seq2seq_encoder and zoo_rnn */
#include "seq2seq.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zoo_bahdanau_cfg {
    int src_vocab, tgt_vocab;
    int embed;      /* E (32) */
    int hiddens;    /* H (32) */
    int layers;     /* GRU layers L of the encoder and of the decoder (2) */
    double dropout; /* between GRU layers and on the attention weights (0.1) */
    int cell;       /* zoo_cell of both RNNs (ZOO_CELL_GRU) */
} zoo_bahdanau_cfg;

/* docs/spec.md section 4's default configuration (vocabulary sizes 0), the one place it is written;
 * zoo_bahdanau_defaults gives it with the vocabulary sizes set. */
extern const zoo_bahdanau_cfg zoo_bahdanau_default_cfg;
zoo_bahdanau_cfg zoo_bahdanau_defaults(int src_vocab, int tgt_vocab);

/* ---- encoder: zoo_seq2seq_encoder (zoo/models/encdec.h), shared with the plain model ---- */

/* ---- decoder ---- */

/* What the decoder needs from the encoder, and where step decoding is; lives on the tape. */
typedef struct zoo_bahdanau_state {
    ag_tensor *enc_out;                /* (B, Tk, H): the encoder outputs, batch first */
    ag_tensor *keys;                   /* (B, Tk, H) = enc_out W_k^T, computed once */
    int32_t *enc_valid;                /* (B,) source valid lengths on the tape, or NULL */
    int32_t *src_row;                  /* (B,) the source (encoded row) of each row */
    ag_tensor *h0[ZOO_RNN_MAX_LAYERS]; /* the encoder's final state, layer k (B, H) */
    ag_tensor *h[ZOO_RNN_MAX_LAYERS];  /* the decoder's state after `steps` steps (B, H) */
    ag_tensor *c0[ZOO_RNN_MAX_LAYERS]; /* LSTM: the cell states likewise (NULL for a GRU) */
    ag_tensor *c[ZOO_RNN_MAX_LAYERS];
    int B, Ts; /* batch, source steps */
    int Tk;    /* attended source positions (see init_state), <= Ts */
    int steps; /* tokens decoded by the step function */
    /* Rows for beam search (select, reserve): once made, the tensors above are leaves over
     * buf, (2, rows_cap, Tk, H) for enc_out and keys then (2, L, rows_cap, H) for h0 and h,
     * (then c0 and c for an LSTM), and enc_valid has room for rows_cap rows; a step copies the
     * new h (and c) into buf. */
    int rows_cap; /* 0: not made */
    ag_real *buf;
    ag_tensor rows[2 + 4 * ZOO_RNN_MAX_LAYERS]; /* the leaves: enc_out, keys, h0[L], h[L], c0, c */
} zoo_bahdanau_state;

typedef struct zoo_seq2seq_attn_decoder {
    zoo_additive_attention attention; /* prefix.attention: AdditiveAttention(H, H, H, dropout) */
    nn_embedding embedding;           /* prefix.embedding (vocab, E) */
    zoo_rnn rnn;                      /* prefix.rnn: GRU or LSTM(E + H, H, L, dropout) */
    nn_linear dense;                  /* prefix.dense: H -> vocab, with bias */
    int vocab, embed, hiddens, layers;
    zoo_cell cell;
} zoo_seq2seq_attn_decoder;

/* Registers prefix.attention.{W_k,W_q,w_v}.weight, prefix.embedding.weight, prefix.rnn.*,
 * prefix.dense.{weight,bias} (PyTorch's order); a GRU. Returns 0 or -1 (ag_last_error). */
int zoo_seq2seq_attn_decoder_init(zoo_seq2seq_attn_decoder *d, nn_params *ps, const char *prefix,
                                  int vocab, int embed, int hiddens, int layers, double dropout);
/* The same with the cell given. */
int zoo_seq2seq_attn_decoder_init_cell(zoo_seq2seq_attn_decoder *d, nn_params *ps,
                                       const char *prefix, zoo_cell cell, int vocab, int embed,
                                       int hiddens, int layers, double dropout);

/* d2l's init_state: enc_outputs (Ts, B, H) and enc_state (L, B, H) from the encoder, enc_valid
 * (B,) (copied), or NULL for no mask (d2l's `init_state(encoder(X), None)`). Returns the state
 * on c->tape (enc_out permuted to batch first, the keys projected, h = h0 = the encoder state's
 * layers, steps 0), or NULL after an error.
 * Only the first Tk = max_b enc_valid[b] source positions are attended (Tk = Ts without
 * lengths or when a row has length 0): later positions are masked in every row, so their
 * weight exp(-1e6 - max) is exactly 0 and they change neither the context nor a gradient;
 * skipping them saves the features, the tanh and the scores of the padding (the d2l batches
 * pad sources of about 4 valid tokens to 10). The weights kept are then (B, 1, Tk); the
 * positions Tk..Ts-1 have weight 0. */
zoo_bahdanau_state *zoo_seq2seq_attn_decoder_init_state(const zoo_seq2seq_attn_decoder *d,
                                                        const nn_ctx *c, ag_tensor *enc_outputs,
                                                        ag_tensor *enc_state,
                                                        const int32_t *enc_valid);
/* The same for either cell: enc_h (L, B, H) and, for an LSTM, enc_c (L, B, H) (NULL for a GRU;
 * a GRU given a c, or an LSTM given none, is refused naming the op and the shapes). */
zoo_bahdanau_state *zoo_seq2seq_attn_decoder_init_rnn_state(const zoo_seq2seq_attn_decoder *d,
                                                            const nn_ctx *c, ag_tensor *enc_outputs,
                                                            ag_tensor *enc_h, ag_tensor *enc_c,
                                                            const int32_t *enc_valid);

/* The attention of one step with the state's precomputed keys: query (B, H) -> context (B, H)
 * = dropout(a) enc_out with a = masked_softmax(w_v tanh(W_q query + keys)) (B, 1, Tk), which
 * goes to *weights_out when weights_out is not NULL.
 * Equals zoo_additive_attention_forward(&d->attention, c, query as (B, 1, H), E, E, enc_valid,
 * 1) reshaped to (B, H), E the encoder outputs as (B, Ts, H) (its weights: a, then zeros). */
ag_tensor *zoo_seq2seq_attn_decoder_attend(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                           const zoo_bahdanau_state *s, ag_tensor *query,
                                           ag_tensor **weights_out);

/* Teacher-forced pass: dec_in (B, T) -> logits (B, T, vocab), starting from the encoder's
 * state s->h0 whatever steps were taken; leaves s unchanged. weights: NULL, or an array of T
 * that receives each step's attention weights (B, 1, Tk) (d2l's _attention_weights). */
ag_tensor *zoo_seq2seq_attn_decoder_forward(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                            const zoo_bahdanau_state *s, const int32_t *dec_in,
                                            int B, int T, ag_tensor **weights);
/* The same pass up to the output layer: the last layer's outputs (B, T, H); the forward is
 * nn_linear_forward(&d->dense, c, this). */
ag_tensor *zoo_seq2seq_attn_decoder_features(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                             const zoo_bahdanau_state *s, const int32_t *dec_in,
                                             int B, int T, ag_tensor **weights);

/* One step: tokens (B,) -> logits (B, 1, vocab); advances s->h and s->steps (s->h unchanged on
 * error). weights: NULL, or receives the step's attention weights (B, 1, Tk). Once the state
 * has its row buffers (select, reserve), the new h is copied into them: inference only then
 * (an error when c->tape records gradients). */
ag_tensor *zoo_seq2seq_attn_decoder_step(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                         zoo_bahdanau_state *s, const int32_t *tokens, int B,
                                         ag_tensor **weights);
/* Keeps the rows rows[0..n) (each in [0, B), n >= 1, repeats allowed) in that order: encoder
 * outputs, keys, lengths, h0 and h of every layer, gathered in place in the state's row buffers
 * (made on c->tape, or remade bigger, when they lack room); what depends only on the source is
 * moved only where a row's source changes. Inference only. Returns 0 or -1 (reported). */
int zoo_seq2seq_attn_decoder_select(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                    zoo_bahdanau_state *s, const int32_t *rows, int n);
/* Makes the row buffers with room for `rows` rows (the state's size does not depend on the
 * steps). Inference only. Returns 0 or -1 (reported). */
int zoo_seq2seq_attn_decoder_reserve(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                     zoo_bahdanau_state *s, int rows);

/* ---- the model ---- */

/* The model: a zoo_model (seq2seq.h) whose functions are this file's (base.ops: encode,
 * decode, decode_features, and the decoder's step, select, reserve; attention for the heatmaps:
 * one layer, the decoder's cross-attention, one head, so base.layers is 1 whatever the RNN's
 * layers); zoo_bahdanau_kind builds one. */
typedef struct zoo_bahdanau {
    zoo_model base; /* first: a zoo_model * of this kind is a zoo_bahdanau * */
    zoo_bahdanau_cfg cfg;
    zoo_seq2seq_encoder encoder;      /* "encoder" */
    zoo_seq2seq_attn_decoder decoder; /* "decoder" */
} zoo_bahdanau;

/* Registers every parameter in ps (names above) and fills bm->base. Returns 0, or -1 with ag_last_error() (bad
 * config: a size < 1, layers > ZOO_RNN_MAX_LAYERS, dropout outside [0, 1), an unknown cell). */
int zoo_bahdanau_init(zoo_bahdanau *bm, nn_params *ps, const zoo_bahdanau_cfg *cfg);

/* src (B, Ts) ids, src_len (B,) valid lengths (used by the attention only). Returns the
 * decoder's initial state on c->tape, or NULL after an error. */
zoo_bahdanau_state *zoo_bahdanau_encode(const zoo_bahdanau *bm, const nn_ctx *c, const int32_t *src,
                                        const int32_t *src_len, int B, int Ts);
/* zoo_seq2seq_attn_decoder_forward on the model's decoder (base.ops->decode). */
ag_tensor *zoo_bahdanau_decode(const zoo_bahdanau *bm, const nn_ctx *c, const zoo_bahdanau_state *s,
                               const int32_t *dec_in, int B, int T);
#ifdef __cplusplus
}
#endif

#endif
