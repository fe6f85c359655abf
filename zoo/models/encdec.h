/* zoo/models/encdec.h -- the plain RNN encoder-decoder, no attention (docs/spec.md section 7;
 * d2l 1.0 section 10.7 "Sequence-to-sequence learning", 9.7 in d2l 0.17): d2l's Seq2SeqEncoder
 * and Seq2SeqDecoder with an LSTM (the seed's version) or a GRU (the book's), and the RNN both
 * share with the Bahdanau model (zoo/models/bahdanau.h), whose cell is chosen the same way.
 *
 *     zoo_encdec_cfg cfg = zoo_encdec_defaults(src_vocab, tgt_vocab);   // cell LSTM
 *     zoo_encdec ed;
 *     zoo_encdec_init(&ed, ps, &cfg);      // registers encoder.* and decoder.* in ps
 *     nn_params_finalize(ps, seed);
 *     zoo_encdec_state *s = zoo_encdec_encode(&ed, &c, src, B, Ts);
 *     ag_tensor *logits = zoo_encdec_decode(&ed, &c, s, dec_in, B, T);    // (B, T, V)
 *
 * Shapes: batch B, source steps Ts, target steps T, embedding E, hidden H, RNN layers L,
 * vocabularies Vs (source) and V (target).
 *
 * Encoder (d2l's Seq2SeqEncoder): x = embedding(src) (B, Ts, E) taken as (Ts, B, E); outputs,
 * state = RNN(x): outputs (Ts, B, H); state h (L, B, H), and for an LSTM also c (L, B, H). As
 * d2l, the encoder ignores the valid lengths: padding runs through the RNN and the state handed
 * on is the one after the last of the Ts positions.
 *
 * Decoder (d2l's Seq2SeqDecoder), initial state = the encoder's final state:
 *   LSTM (the seed's):  x_t = e_t (B, E);                  (h, c) = LSTM step(x_t, (h, c))
 *   GRU (the book's):   x_t = concat(e_t, context) (B, E + H), context = the encoder's final
 *                       top-layer state h0[L-1] (B, H), the same at every step (embedding
 *                       FIRST, the opposite of the Bahdanau decoder);  h = GRU step(x_t, h)
 * and logits = dense(out) (B, T, V), out_t = the last layer's h. The teacher-forced pass runs
 * the RNN over the whole sequence at once (one input projection per layer).
 * The RNNs' inter-layer dropout is the config's; there is no other dropout.
 *
 * Parameter names (the PyTorch state_dict of the d2l model, in its order):
 *     encoder.embedding.weight                     (Vs, E)
 *     encoder.rnn.weight_ih_l{k}                   (G H, E for k = 0 else H)   G = 4 (LSTM), 3 (GRU)
 *     encoder.rnn.weight_hh_l{k} (G H, H), bias_ih_l{k} (G H), bias_hh_l{k} (G H)   k = 0..L-1
 *     decoder.embedding.weight                     (V, E)
 *     decoder.rnn.weight_ih_l{k}                   (G H, E for an LSTM, E + H for a GRU, at k = 0)
 *     decoder.rnn.* ... as above
 *     decoder.dense.weight (V, H), decoder.dense.bias (V)
 *
 * Ownership and errors as bahdanau.h: module structs point into the store; states, tensors
 * live on the forward's tape; a forward returns NULL after an error (reported through ag's
 * error handler; a NULL input gives NULL silently).
 */
#ifndef TG_ZOO_ENCDEC_H
#define TG_ZOO_ENCDEC_H

#include "../../nn/nn.h"
#include "config.h"
#include "seq2seq.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the recurrent cell ---- */

/* The recurrent cell, the value of a ZOO_CHOICE "cell" field, named by zoo_cell_names. */
typedef enum zoo_cell { ZOO_CELL_GRU = 0, ZOO_CELL_LSTM = 1 } zoo_cell;
extern const char *const zoo_cell_names[]; /* {"gru", "lstm", NULL} */

#define ZOO_RNN_MAX_LAYERS                                                                         \
    (NN_GRU_MAX_LAYERS < NN_LSTM_MAX_LAYERS ? NN_GRU_MAX_LAYERS : NN_LSTM_MAX_LAYERS)

/* "gru" or "lstm" ("?" for another value). */
const char *zoo_cell_name(zoo_cell cell);

/* ids (B, T) batch-major -> (T, B) time-major on the tape (NULL when out of memory): gathering
 * embedding rows in this order gives embedding(ids).permute(1, 0, 2) directly, contiguous. */
const int32_t *zoo_time_major(ag_tape *t, const int32_t *ids, int B, int T);

/* A multi-layer GRU or LSTM (nn/gru.h, nn/lstm.h): the state of a GRU is h, of an LSTM h and
 * c, each (L, B, H) whole or L pieces (B, H) in steps; a GRU's c is always NULL. */
typedef struct zoo_rnn {
    zoo_cell cell;
    int layers, hidden;
    nn_gru gru;   /* cell GRU */
    nn_lstm lstm; /* cell LSTM */
} zoo_rnn;

/* Registers prefix.weight_ih_l{k} ... (nn_gru_init / nn_lstm_init). Returns 0 or -1. */
int zoo_rnn_init(zoo_rnn *r, nn_params *ps, const char *prefix, zoo_cell cell, int input_size,
                 int hidden, int layers, double dropout);
/* x (T, B, in); h0 (L, B, H) or NULL (zeros), c0 likewise for an LSTM and NULL for a GRU (a GRU
 * given a c0, or an LSTM given h0 without c0, is refused naming the op and the shapes).
 * Returns outputs (T, B, H); *h_out, *c_out (either may be NULL) get the final state (*c_out
 * NULL for a GRU). NULL after an error. */
ag_tensor *zoo_rnn_forward(const zoo_rnn *r, const nn_ctx *c, ag_tensor *x, ag_tensor *h0,
                           ag_tensor *c0, ag_tensor **h_out, ag_tensor **c_out);
/* One step through all layers: x (B, in); h[k] (and cs[k] for an LSTM; cs unused for a GRU)
 * replaced by the new state. Returns the new h[L-1] (B, H), or NULL (state unchanged). */
ag_tensor *zoo_rnn_step(const zoo_rnn *r, const nn_ctx *c, ag_tensor *x, ag_tensor **h,
                        ag_tensor **cs);
/* Splits h (L, B, H) into hp[k] and, for an LSTM, c into cp[k] (B, H). A GRU given a c, or an
 * LSTM given no c, is refused. Returns 0 or -1 (reported). */
int zoo_rnn_state_split(const zoo_rnn *r, const nn_ctx *c, const char *what, ag_tensor *h,
                        ag_tensor *cs, ag_tensor **hp, ag_tensor **cp);

/* ---- encoder (d2l's Seq2SeqEncoder) ---- */

typedef struct zoo_seq2seq_encoder {
    nn_embedding embedding; /* prefix.embedding (vocab, E) */
    zoo_rnn rnn;            /* prefix.rnn: GRU or LSTM(E, H, L, dropout) */
} zoo_seq2seq_encoder;

/* Registers prefix.embedding.weight then prefix.rnn.*, a GRU. Returns 0 or -1. */
int zoo_seq2seq_encoder_init(zoo_seq2seq_encoder *e, nn_params *ps, const char *prefix, int vocab,
                             int embed, int hiddens, int layers, double dropout);
/* The same with the cell given. */
int zoo_seq2seq_encoder_init_cell(zoo_seq2seq_encoder *e, nn_params *ps, const char *prefix,
                                  zoo_cell cell, int vocab, int embed, int hiddens, int layers,
                                  double dropout);
/* src (B, T) ids -> outputs (T, B, H) (the last layer's output at every step); *state (when
 * not NULL) receives the final h (L, B, H). For an LSTM use zoo_seq2seq_encoder_run (its
 * c would be lost: refused). NULL (and *state NULL) after an error. */
ag_tensor *zoo_seq2seq_encoder_forward(const zoo_seq2seq_encoder *e, const nn_ctx *c,
                                       const int32_t *src, int B, int T, ag_tensor **state);
/* Either cell: outputs (T, B, H); *h and *cs (either may be NULL) the final state, *cs NULL
 * for a GRU. NULL after an error. */
ag_tensor *zoo_seq2seq_encoder_run(const zoo_seq2seq_encoder *e, const nn_ctx *c,
                                   const int32_t *src, int B, int T, ag_tensor **h, ag_tensor **cs);

/* ---- decoder (d2l's Seq2SeqDecoder) ---- */

/* The decoder's state, on the tape. */
typedef struct zoo_encdec_state {
    ag_tensor *h0[ZOO_RNN_MAX_LAYERS]; /* the encoder's final state, layer k (B, H) */
    ag_tensor *c0[ZOO_RNN_MAX_LAYERS]; /* its cell state (LSTM; NULL for a GRU) */
    ag_tensor *h[ZOO_RNN_MAX_LAYERS];  /* the decoder's state after `steps` steps */
    ag_tensor *c[ZOO_RNN_MAX_LAYERS];
    ag_tensor *h0_all, *c0_all; /* the encoder's state as given (L, B, H), or NULL
                                         * once the rows moved (the pieces are joined then) */
    int32_t *src_row;           /* (B,) the source (encoded row) of each row */
    int B, steps;
    /* Row buffers for beam search (select, reserve), as zoo_bahdanau_state: once made, the
     * pieces above are leaves over buf: h0[L], c0[L], h[L], c[L] blocks of rows_cap rows. */
    int rows_cap;
    ag_real *buf;
    ag_tensor rows[4 * ZOO_RNN_MAX_LAYERS];
} zoo_encdec_state;

typedef struct zoo_seq2seq_decoder {
    nn_embedding embedding; /* prefix.embedding (vocab, E) */
    zoo_rnn rnn;            /* prefix.rnn: LSTM(E, H, L) or GRU(E + H, H, L) */
    nn_linear dense;        /* prefix.dense: H -> vocab, with bias */
    zoo_cell cell;
    int vocab, embed, hiddens, layers;
} zoo_seq2seq_decoder;

/* Registers prefix.embedding.weight, prefix.rnn.*, prefix.dense.{weight,bias}. Returns 0/-1. */
int zoo_seq2seq_decoder_init(zoo_seq2seq_decoder *d, nn_params *ps, const char *prefix,
                             zoo_cell cell, int vocab, int embed, int hiddens, int layers,
                             double dropout);
/* d2l's init_state: the encoder's final state h (L, B, H) and, for an LSTM, c (L, B, H) (NULL
 * for a GRU; the other way round is refused naming the op and the shapes). Returns the state
 * on c->tape (steps 0), or NULL after an error. */
zoo_encdec_state *zoo_seq2seq_decoder_init_state(const zoo_seq2seq_decoder *d, const nn_ctx *c,
                                                 ag_tensor *enc_h, ag_tensor *enc_c);
/* Teacher-forced pass: dec_in (B, T) -> logits (B, T, vocab), from the encoder's state
 * whatever steps were taken; s unchanged. */
ag_tensor *zoo_seq2seq_decoder_forward(const zoo_seq2seq_decoder *d, const nn_ctx *c,
                                       const zoo_encdec_state *s, const int32_t *dec_in, int B,
                                       int T);
/* The same pass up to the output layer: the last layer's outputs (B, T, H); the forward is
 * nn_linear_forward(&d->dense, c, this). */
ag_tensor *zoo_seq2seq_decoder_features(const zoo_seq2seq_decoder *d, const nn_ctx *c,
                                        const zoo_encdec_state *s, const int32_t *dec_in, int B,
                                        int T);
/* One step: tokens (B,) -> logits (B, 1, vocab); advances s. Once the state has its row
 * buffers the new state is copied into them: inference only then. */
ag_tensor *zoo_seq2seq_decoder_step(const zoo_seq2seq_decoder *d, const nn_ctx *c,
                                    zoo_encdec_state *s, const int32_t *tokens, int B);
/* Keeps rows rows[0..n) (as zoo_seq2seq_attn_decoder_select). Inference only. 0 or -1. */
int zoo_seq2seq_decoder_select(const zoo_seq2seq_decoder *d, const nn_ctx *c, zoo_encdec_state *s,
                               const int32_t *rows, int n);
/* Makes the row buffers with room for `rows` rows. Inference only. 0 or -1. */
int zoo_seq2seq_decoder_reserve(const zoo_seq2seq_decoder *d, const nn_ctx *c, zoo_encdec_state *s,
                                int rows);

/* ---- the model ---- */

typedef struct zoo_encdec_cfg {
    int src_vocab, tgt_vocab;
    int cell;       /* zoo_cell of both RNNs (LSTM) */
    int embed;      /* E (32) */
    int hiddens;    /* H (32) */
    int layers;     /* L (2) */
    double dropout; /* between RNN layers (0.1) */
} zoo_encdec_cfg;

/* docs/spec.md section 7's default configuration (vocabulary sizes 0). */
extern const zoo_encdec_cfg zoo_encdec_default_cfg;
zoo_encdec_cfg zoo_encdec_defaults(int src_vocab, int tgt_vocab);

/* The model: a zoo_model (seq2seq.h) whose functions are this file's (base.ops: encode,
 * decode, decode_features, and the decoder's step, select, reserve; no attention: base.layers and
 * dec_layers 0, attn_heads 0); zoo_encdec_kind builds one. */
typedef struct zoo_encdec {
    zoo_model base; /* first: a zoo_model * of this kind is a zoo_encdec * */
    zoo_encdec_cfg cfg;
    zoo_seq2seq_encoder encoder; /* "encoder" */
    zoo_seq2seq_decoder decoder; /* "decoder" */
} zoo_encdec;

/* Registers every parameter (names above) and fills ed->base. Returns 0, or -1 with
 * ag_last_error() (bad config). */
int zoo_encdec_init(zoo_encdec *ed, nn_params *ps, const zoo_encdec_cfg *cfg);
zoo_encdec_state *zoo_encdec_encode(const zoo_encdec *ed, const nn_ctx *c, const int32_t *src,
                                    int B, int Ts);
ag_tensor *zoo_encdec_decode(const zoo_encdec *ed, const nn_ctx *c, const zoo_encdec_state *s,
                             const int32_t *dec_in, int B, int T);

/* The model kind behind seq2seq_nmt. */
extern const zoo_model_kind zoo_encdec_kind;

#ifdef __cplusplus
}
#endif

#endif
