/* zoo/models/transformer.h -- d2l's Transformer (docs/spec.md section 3), built from nn layers.
 *
 *     zoo_transformer_cfg cfg = zoo_transformer_defaults(src_vocab, tgt_vocab);
 *     zoo_transformer tf;
 *     zoo_transformer_init(&tf, ps, &cfg);   // registers encoder.* and decoder.* in ps
 *     nn_params_finalize(ps, seed);
 *     zoo_tf_state *s = zoo_transformer_encode(&tf, &c, src, src_len, B, Ts);
 *     ag_tensor *logits = zoo_transformer_decode(&tf, &c, s, dec_in, B, T);   // (B, T, V)
 *
 * Parameter names are those of the PyTorch state_dict of the d2l model (docs/spec.md section 6),
 * registered in its order.
 *
 * Decoding. zoo_transformer_decode is the teacher-forced pass over a whole target with the
 * causal mask (query t sees keys 0..t), in training and in eval alike (d2l drops the mask in
 * eval, which is right only for its one-token-at-a-time prediction). The step (base.ops->step)
 * decodes one token per call (inference only): each decoder block's self-attention
 * (zoo_mha_step) projects the new token's key and value once with its own W_k, W_v, appends
 * them to the block's nn_kv_cache and attends to the cache without a mask (no later position
 * is in it); the cross-attention's cache is filled once per state from the encoder outputs
 * through its own projections (zoo_mha_cache_append). A step thus costs O(1) tokens of projections and FFN per block and
 * O(t) in the attention, where the old cache of block inputs re-projected the whole prefix at
 * every step (O(t^2) in all). Its outputs equal the full pass's for the same prefix.
 * Positions: a step adds the positional encoding of the token's true position. d2l adds P[0] at
 * every step (its decoder sees one token per call); set cfg.d2l_step_positions to reproduce that
 * for one-to-one comparison with the book's predictions.
 */
#ifndef TG_ZOO_TRANSFORMER_H
#define TG_ZOO_TRANSFORMER_H

#include "seq2seq.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zoo_transformer_cfg {
    int src_vocab, tgt_vocab;
    int hiddens;             /* d_model (32) */
    int ffn_hiddens;         /* (64) */
    int heads;               /* (4) */
    int layers;              /* blocks in the encoder, and in the decoder unless dec_layers (2) */
    double dropout;          /* (0.1) */
    int max_len;             /* positional-encoding table length (1000) */
    bool d2l_step_positions; /* step decoding adds P[0] at every step, as d2l (false) */
    double embed_std;        /* embeddings ~ N(0, embed_std^2); 0: N(0, 1), PyTorch's (0) */
    /* one matrix (V, hiddens) for the encoder's embedding, the decoder's and the output
     * layer's weight (fairseq's --share-all-embeddings; Press and Wolf, 2017): needs
     * src_vocab == tgt_vocab, one vocabulary for both languages. It is registered as
     * encoder.embedding.weight; decoder.embedding.weight and decoder.dense.weight are the same
     * tensor, absent from the store (false) */
    bool share_embeddings;
    /* blocks in the decoder; 0: layers, as d2l (0). A deep encoder and a shallow decoder cost
     * about the same to train and decode faster (Kasai et al., 2021) */
    int dec_layers;
} zoo_transformer_cfg;

/* docs/spec.md section 3's default configuration (vocabulary sizes 0), the one place it is written;
 * zoo_transformer_defaults gives it with the vocabulary sizes set. */
extern const zoo_transformer_cfg zoo_transformer_default_cfg;
zoo_transformer_cfg zoo_transformer_defaults(int src_vocab, int tgt_vocab);

/* ---- building blocks ---- */

typedef struct zoo_pos_encoding {
    nn_dropout dropout;
    ag_real *P; /* (max_len, hiddens): P[i, 2j] = sin(i / 10000^(2j/H)), P[i, 2j+1] = cos */
    int hiddens, max_len;
} zoo_pos_encoding;

/* Fills the table (malloc'd; zoo_pos_encoding_free). Returns 0 or -1 (ag_last_error). */
int zoo_pos_encoding_init(zoo_pos_encoding *pe, int hiddens, double dropout, int max_len);
void zoo_pos_encoding_free(zoo_pos_encoding *pe);
/* dropout(x + P[offset : offset + T]) for x (B, T, H). */
ag_tensor *zoo_pos_encoding_forward(const zoo_pos_encoding *pe, const nn_ctx *c, ag_tensor *x,
                                    int offset);

typedef struct zoo_ffn {
    nn_linear dense1, dense2;
} zoo_ffn;
/* dense2(relu(dense1(x))) on the last axis: (..., in) -> (..., out). */
int zoo_ffn_init(zoo_ffn *f, nn_params *ps, const char *prefix, int in, int hiddens, int out);
ag_tensor *zoo_ffn_forward(const zoo_ffn *f, const nn_ctx *c, ag_tensor *x);

typedef struct zoo_addnorm {
    nn_dropout dropout;
    nn_layer_norm ln;
} zoo_addnorm;
/* ln(dropout(y) + x), one fused op (ag_add_layer_norm); normalized over the trailing `ndim`
 * dims of the given shape. */
int zoo_addnorm_init(zoo_addnorm *a, nn_params *ps, const char *prefix, int ndim, const int *shape,
                     double dropout);
ag_tensor *zoo_addnorm_forward(const zoo_addnorm *a, const nn_ctx *c, ag_tensor *x, ag_tensor *y);

typedef struct zoo_encoder_block {
    zoo_mha attention;
    zoo_addnorm addnorm1;
    zoo_ffn ffn;
    zoo_addnorm addnorm2;
} zoo_encoder_block;

/* norm_ndim / norm_shape: LayerNorm's normalized_shape ([hiddens] in the model; spec.md's
 * shape example uses [T, hiddens]). */
int zoo_encoder_block_init(zoo_encoder_block *b, nn_params *ps, const char *prefix, int hiddens,
                           int norm_ndim, const int *norm_shape, int ffn_hiddens, int heads,
                           double dropout);
/* x (B, T, H), valid_lens (B,) or NULL -> (B, T, H). weights: NULL, or receives the
 * self-attention weights (B heads, T, T). */
ag_tensor *zoo_encoder_block_forward(const zoo_encoder_block *b, const nn_ctx *c, ag_tensor *x,
                                     const int32_t *valid_lens, ag_tensor **weights);

typedef struct zoo_decoder_block {
    zoo_mha attention1; /* self-attention */
    zoo_addnorm addnorm1;
    zoo_mha attention2; /* attention to the encoder's outputs */
    zoo_addnorm addnorm2;
    zoo_ffn ffn;
    zoo_addnorm addnorm3;
} zoo_decoder_block;

int zoo_decoder_block_init(zoo_decoder_block *b, nn_params *ps, const char *prefix, int hiddens,
                           int norm_ndim, const int *norm_shape, int ffn_hiddens, int heads,
                           double dropout);
/* x (B, T, H). keys NULL: self-attention over x with the causal mask (the full pass); else
 * self-attention over keys (B, Tk, H) without a mask (the cached step). enc_out (B, Ts, H) with
 * enc_valid (B,). -> (B, T, H). self_weights and cross_weights: NULL, or receive the weights
 * of the two attentions. */
ag_tensor *zoo_decoder_block_forward(const zoo_decoder_block *b, const nn_ctx *c, ag_tensor *x,
                                     ag_tensor *keys, ag_tensor *enc_out, const int32_t *enc_valid,
                                     ag_tensor **self_weights, ag_tensor **cross_weights);

/* ---- the model ---- */

/* The model: a zoo_model (seq2seq.h) whose functions are this file's: encode, decode,
 * decode_features, step, select, reserve through base.ops; zoo_transformer_kind builds one. */
typedef struct zoo_transformer {
    zoo_model base; /* first: a zoo_model * of this kind is a zoo_transformer * */
    zoo_transformer_cfg cfg;
    nn_embedding enc_embedding, dec_embedding;
    zoo_pos_encoding pos;
    zoo_encoder_block *enc; /* cfg.layers */
    zoo_decoder_block *dec; /* base.dec_layers (cfg.dec_layers, or cfg.layers when that is 0) */
    nn_linear dense; /* hiddens -> tgt_vocab */
} zoo_transformer;

/* Registers every parameter in ps (names as docs/spec.md section 6) and fills tf->base (its
 * functions, tf->cfg, ps). Returns 0, or -1 with ag_last_error() (bad config: sizes < 1,
 * hiddens not a multiple of heads or odd). Free with zoo_transformer_free (the parameters
 * belong to ps; a model made by zoo_model_new is freed by zoo_model_free). */
int zoo_transformer_init(zoo_transformer *tf, nn_params *ps, const zoo_transformer_cfg *cfg);
void zoo_transformer_free(zoo_transformer *tf);

/* What the decoder needs from the encoder, and the step decoding's caches; lives on the tape
 * (every buffer too). Decoder block i keeps two nn_kv_cache (nn/kv_cache.h) of width hiddens,
 * filled through its own attention layers (zoo_mha_cache_append, zoo_mha_step): self[i], the
 * keys and values of its self-attention over the tokens so far (W_k x_j, W_v x_j for its inputs
 * x_j, j < steps), and cross[i], those of its cross-attention over the encoder outputs (Ts
 * positions), projected once. */
typedef struct zoo_tf_state {
    ag_tensor *enc_out;        /* (B, Ts, H) */
    int32_t *enc_valid;        /* (B,) copied to the tape */
    int32_t *src_row;          /* (B,) the source (encoded row) of each row */
    nn_kv_cache *self, *cross; /* one per decoder block; NULL until the first step or reserve */
    int B, Ts;                 /* rows, source positions */
    int steps;                 /* tokens decoded by the step */
    int rows_cap;              /* rows enc_out, enc_valid and src_row hold */
    ag_tensor enc_rows;        /* enc_out once select or reserve moved its rows: a leaf over them */
} zoo_tf_state;

/* The model's encode and decode (base.ops) for a typed caller. */

/* src (B, Ts) ids, src_len (B,). Returns the state on c->tape, or NULL after an error. trace
 * (or NULL) receives the encoder's self-attention weights. Without a trace and without
 * gradients recorded (inference), each block's intermediates are freed once its output is made
 * (ag_tape_rewind to a mark taken inside: what the caller made before stays), so the peak is
 * one block's intermediates, not the encoder's. */
zoo_tf_state *zoo_transformer_encode(const zoo_transformer *tf, const nn_ctx *c, const int32_t *src,
                                     const int32_t *src_len, int B, int Ts,
                                     const zoo_attn_trace *trace);
/* Teacher-forced causal pass: dec_in (B, T) -> logits (B, T, tgt_vocab). Leaves s unchanged.
 * (base.ops->decode_features gives the same up to the output layer tf->dense.) */
ag_tensor *zoo_transformer_decode(const zoo_transformer *tf, const nn_ctx *c, zoo_tf_state *s,
                                  const int32_t *dec_in, int B, int T);

/* Incremental decoding (base.ops->step, select, reserve; inference only, each reports an error
 * when c->tape records gradients for the parameters). step: tokens (B,) -> logits (B, 1,
 * tgt_vocab); every block appends the token's key and value to its self cache (the caches
 * grow to twice the positions on c->tape when full) and advances s->steps; trace (or NULL)
 * receives the weights of both attentions of every block (dec_self (B heads, 1, steps + 1));
 * without one, each block's intermediates are freed once its output is made, as in encode.
 * select keeps rows (repeats allowed) in the encoder's rows and every cache; what depends only
 * on the source is moved only where a row's source changes. reserve makes room for `rows` rows
 * and `steps` more tokens and fills the cross caches if not done yet. */

#ifdef __cplusplus
}
#endif

#endif
