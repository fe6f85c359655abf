/* zoo/seq2seq.h -- the encoder-decoder interface that one trainer, one predictor, the plots and
 * the checkpoints share, whatever the model (Transformer, Bahdanau GRU).
 *
 * A model kind (zoo_model_kind) describes a family: its name, its hyperparameters (names,
 * defaults, help; the CLI flags, the checkpoint metadata and --help all come from this one
 * table), its trainer defaults, and a constructor. A model (zoo_model) is an instance: its
 * parameter store and a table of functions (zoo_model_ops):
 *
 *     state  = ops->encode(m, &c, src, src_len, B, Ts, trace)   (on the tape)
 *     logits = ops->decode(m, &c, state, dec_in, B, T)          teacher-forced, (B, T, V)
 *     logits = ops->step(m, &c, state, tokens, B, trace)        one token, (B, 1, V), advances state
 *
 * decode never changes the state; step gives decode's outputs for the same prefix. A model is
 * never changed by a forward: trace (or NULL) is where the attention weights go.
 */
#ifndef TG_ZOO_SEQ2SEQ_H
#define TG_ZOO_SEQ2SEQ_H

#include "zoo/models/attention.h"

/* ---- hyperparameters ---- */

#define ZOO_MAX_HPARAMS 12

typedef struct zoo_hparam {
    const char *name;  /* CLI flag without "--" and checkpoint key "config.<name>" */
    double value;
    bool integer;
    double min, max;   /* accepted range, inclusive */
    const char *help;
} zoo_hparam;

typedef struct zoo_hparams {
    int n;
    zoo_hparam p[ZOO_MAX_HPARAMS];
} zoo_hparams;

/* The value of hyperparameter `name` (NAN if absent). */
double zoo_hp(const zoo_hparams *h, const char *name);
/* Sets `name` from text. Returns 0, or -1 with ag_last_error() naming the flag, the text and
 * the expected range ("--heads: expected an integer in [1, 64], got 'x'"). */
int zoo_hp_set(zoo_hparams *h, const char *name, const char *text);
/* The entry called name, or NULL. */
zoo_hparam *zoo_hp_find(zoo_hparams *h, const char *name);

/* ---- models ---- */

typedef struct zoo_model zoo_model;

typedef enum zoo_attn_kind { ZOO_ATTN_ENC_SELF, ZOO_ATTN_DEC_SELF, ZOO_ATTN_DEC_CROSS } zoo_attn_kind;

typedef struct zoo_model_ops {
    void *(*encode)(const zoo_model *m, const nn_ctx *c, const int32_t *src,
                    const int32_t *src_len, int B, int Ts, const zoo_attn_trace *trace);
    ag_tensor *(*decode)(const zoo_model *m, const nn_ctx *c, void *state, const int32_t *dec_in,
                         int B, int T);
    ag_tensor *(*step)(const zoo_model *m, const nn_ctx *c, void *state, const int32_t *tokens,
                       int B, const zoo_attn_trace *trace);
    /* Heads of the attention of this kind (0: the model has none). */
    int (*attn_heads)(const zoo_model *m, zoo_attn_kind kind);
    void (*free)(zoo_model *m);
} zoo_model_ops;

typedef struct zoo_model_kind {
    const char *name;         /* "transformer": checkpoint metadata tapegrad.model */
    const char *program;      /* "transformer_nmt" */
    zoo_hparams hparams;      /* defaults */
    int epochs;               /* trainer defaults (SPEC.md) */
    double lr;
    /* Builds and registers a model in a new store, not finalized. NULL with ag_last_error(). */
    zoo_model *(*create)(const zoo_hparams *h, int src_vocab, int tgt_vocab);
} zoo_model_kind;

struct zoo_model {
    const zoo_model_ops *ops;
    const zoo_model_kind *kind;
    zoo_hparams hp;
    nn_params *ps;
    int src_vocab, tgt_vocab, layers;
};

extern const zoo_model_kind zoo_transformer_kind;
extern const zoo_model_kind zoo_bahdanau_kind;

/* Creates a model of `kind` and finalizes its store from seed. NULL with ag_last_error(). */
zoo_model *zoo_model_new(const zoo_model_kind *kind, const zoo_hparams *h, int src_vocab,
                         int tgt_vocab, uint64_t seed);
void zoo_model_free(zoo_model *m);

#endif
