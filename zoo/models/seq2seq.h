/* zoo/models/seq2seq.h -- the encoder-decoder interface that one trainer, one decoder, the plots
 * and the checkpoints share, whatever the model (Transformer, Bahdanau GRU).
 *
 * A model kind (zoo_model_kind) describes a family: its name, its typed config (a C struct, the
 * constant struct of its defaults, and the table of its fields: names, types, ranges, help; the
 * CLI flags, the checkpoint metadata "config.<name>" and --help all come from this table), its
 * trainer defaults, and a constructor. A model (zoo_model) is an instance: its
 * parameter store and a table of functions (zoo_model_ops):
 *
 *     state  = ops->encode(m, &c, src, src_len, B, Ts, trace)   (on the tape)
 *     logits = ops->decode(m, &c, state, dec_in, B, T)          teacher-forced, (B, T, V)
 *     h      = ops->decode_features(m, &c, state, dec_in, B, T, &out)   the same before the
 *                                                 output layer `out`: (B, T, H)
 *     logits = ops->step(m, &c, state, tokens, B, trace)        one token, (B, 1, V), advances state
 *
 * decode never changes the state; step gives decode's outputs for the same prefix. A model is
 * never changed by a forward: trace (or NULL) is where the attention weights go.
 */
#ifndef TG_ZOO_SEQ2SEQ_H
#define TG_ZOO_SEQ2SEQ_H

#include "attention.h"
#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- models ---- */

typedef struct zoo_model zoo_model;

typedef enum zoo_attn_kind {
    ZOO_ATTN_ENC_SELF,
    ZOO_ATTN_DEC_SELF,
    ZOO_ATTN_DEC_CROSS
} zoo_attn_kind;

/* A model's functions. The state encode returns lives on c->tape (freed by its reset) and has
 * B rows, one per source.
 *
 * Incremental decoding is for inference: select and reserve report an error when the tape
 * records gradients for the parameters, and so does a step that writes into the state's buffers
 * in place (the Transformer's always; no gradient could flow through them). step feeds one token
 * per row and returns that position's logits, the same as decode's for the same prefix; it
 * costs O(1) tokens of work per layer (plus attending to the prefix), caching what later steps
 * need. select reorders the rows: afterwards the state holds n rows, row i being the old row
 * rows[i] (rows may repeat: beam expansion; fewer rows: finished sentences dropped), and a step
 * gives what it gives on a state built from those rows directly. reserve makes room for `rows`
 * rows and `steps` more tokens at once.
 *
 * Memory. step and select allocate what they keep on c->tape when the state lacks room (more
 * rows or positions than reserved), and otherwise only scratch. So a decoding loop that frees
 * each step's intermediates (ag_tape_rewind) reserves first, marks the tape, and rewinds after
 * each step, select included:
 *     state = encode(...); reserve(state, max_rows, max_steps); mark = ag_tape_mark(t);
 *     loop { y = step(state, ...); read y; ag_tape_rewind(t, mark); select(state, ...); } */
typedef struct zoo_model_ops {
    void *(*encode)(const zoo_model *m, const nn_ctx *c, const int32_t *src, const int32_t *src_len,
                    int B, int Ts, const zoo_attn_trace *trace);
    ag_tensor *(*decode)(const zoo_model *m, const nn_ctx *c, void *state, const int32_t *dec_in,
                         int B, int T);
    /* decode up to the output layer: the decoder's features (B, T, H) on the tape, and in *out
     * the output layer (the model's; valid as long as the model), so that decode is exactly
     * nn_linear_forward(*out, c, features). A trainer uses it to fuse the output layer with
     * its loss (nn_linear_ce_forward) instead of making the (B, T, V) logits. NULL in a model
     * that does not provide it: then use decode. */
    ag_tensor *(*decode_features)(const zoo_model *m, const nn_ctx *c, void *state,
                                  const int32_t *dec_in, int B, int T, const nn_linear **out);
    ag_tensor *(*step)(const zoo_model *m, const nn_ctx *c, void *state, const int32_t *tokens,
                       int B, const zoo_attn_trace *trace);
    /* rows (n,) in [0, B), n >= 1. Returns 0 or -1 (reported). */
    int (*select)(const zoo_model *m, const nn_ctx *c, void *state, const int32_t *rows, int n);
    /* Returns 0 or -1 (reported). */
    int (*reserve)(const zoo_model *m, const nn_ctx *c, void *state, int rows, int steps);
    /* true when a row's encoding and decoding do not depend on its source past its valid
     * length (the Transformer: every attention masks those keys), so decoding and the trainer's
     * token batches may cut a batch's sources to their longest valid length; false (the
     * default) when they do (d2l's RNN encoders run their recurrence over the padding too). */
    bool pad_free;
    /* Heads of the attention of this kind (0: the model has none). */
    int (*attn_heads)(const zoo_model *m, zoo_attn_kind kind);
    /* NULL, or the model's tied weights: the names PyTorch's state_dict of the model has
     * beside its parameters' own (it saves a tied tensor under every name), each with the
     * parameter it denotes. Fills names[i], params[i] and returns how many (at most max). */
    int (*tied)(const zoo_model *m, const char **names, ag_tensor **params, int max);
    void (*free)(zoo_model *m);
} zoo_model_ops;

typedef struct zoo_model_kind {
    const char *name;        /* "transformer": checkpoint metadata tapegrad.model */
    const char *program;     /* "transformer_nmt" */
    const zoo_field *config; /* the fields of the config a user sets (see config.h) */
    int n_config;
    /* config[n_first ..] came after the first checkpoints of the model (0: none did): a
     * checkpoint without one of them was made with its default, which loading then takes */
    int n_first;
    size_t config_size;   /* sizeof the config struct */
    const void *defaults; /* the config's defaults (docs/spec.md) */
    int epochs;           /* trainer defaults (docs/spec.md) */
    double lr;
    /* Builds and registers a model in a new store, not finalized; cfg points to a config of
     * this kind. NULL with ag_last_error(). */
    zoo_model *(*create)(const void *cfg, int src_vocab, int tgt_vocab);
    /* Refuses sequences of num_steps tokens a model of config cfg cannot run (the Transformer's
     * positional-encoding table is --max-len long), or NULL when any length runs. Returns 0,
     * or -1 with ag_last_error() naming both values. */
    int (*check_steps)(const void *cfg, int num_steps);
    /* NULL, or true when a model of config cfg needs one vocabulary for both languages (the
     * Transformer with --share-embeddings): a run then needs a joint subword vocabulary. */
    bool (*one_vocab)(const void *cfg);
} zoo_model_kind;

/* A model's own struct begins with its zoo_model (zoo_transformer, zoo_bahdanau, zoo_encdec:
 * one file each), so the functions of its ops table, the model's own, take it back with a
 * cast. */
struct zoo_model {
    const zoo_model_ops *ops;
    const zoo_model_kind *kind;
    const void *cfg; /* its config (kind->config_size bytes), owned by the model */
    nn_params *ps;
    int src_vocab, tgt_vocab;
    int layers, dec_layers; /* attention layers in the encoder and in the decoder (traces' sizes) */
    /* NULL, or the weights prepared once for inference (zoo_decode_quantize, zoo/app/decode.h)
     * that decoding uses instead of packing them at each call; freed with the model */
    nn_packs *packs;
};

extern const zoo_model_kind zoo_transformer_kind;
extern const zoo_model_kind zoo_bahdanau_kind;

/* Creates a model of `kind` from cfg (a config of that kind; NULL: its defaults) and
 * finalizes its store from seed. NULL with ag_last_error(). */
zoo_model *zoo_model_new(const zoo_model_kind *kind, const void *cfg, int src_vocab, int tgt_vocab,
                         uint64_t seed);
/* zoo_model_new with every parameter zero (nn_params_finalize_zero): for a model whose
 * values all come next from a checkpoint. NULL with ag_last_error(). */
zoo_model *zoo_model_new_zero(const zoo_model_kind *kind, const void *cfg, int src_vocab,
                              int tgt_vocab);
void zoo_model_free(zoo_model *m);

/* Sets the field `name` of cfg (a config of kind k) from text, strictly (config.h). Returns 0,
 * or -1 with ag_last_error() naming "--name", what it expects and the text, or an unknown name. */
int zoo_config_set(const zoo_model_kind *k, void *cfg, const char *name, const char *text);

#ifdef __cplusplus
}
#endif

#endif
