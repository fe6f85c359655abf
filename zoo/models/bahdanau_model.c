/* bahdanau_model.c -- the Bahdanau GRU (or, --cell lstm, LSTM) seq2seq as a zoo_model: its hyperparameters (flags,
 * checkpoint config) and the encoder-decoder interface over zoo/models/bahdanau.h.
 *
 * Attention for the heatmaps: the model has one attention, the decoder's cross-attention over
 * the encoder outputs, with one head. So zoo_model.layers is 1 here (attention layers, which
 * is what the decoder's trace holds), not the GRU's layers (hyperparameter "layers"). */
#include <stddef.h>
#include <stdlib.h>

#include "zoo/models/bahdanau.h"
#include "zoo/models/seq2seq.h"

typedef struct bahdanau_model {
    zoo_model base; /* first: a zoo_model * is a bahdanau_model * */
    zoo_bahdanau bm;
} bahdanau_model;

static const zoo_bahdanau *bm_of(const zoo_model *m) { return &((const bahdanau_model *)m)->bm; }

static void *bm_encode(const zoo_model *m, const nn_ctx *c, const int32_t *src,
                       const int32_t *src_len, int B, int Ts, const zoo_attn_trace *trace) {
    (void)trace; /* no encoder attention */
    return zoo_bahdanau_encode(bm_of(m), c, src, src_len, B, Ts);
}
static ag_tensor *bm_decode(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *dec_in,
                            int B, int T) {
    return zoo_bahdanau_decode(bm_of(m), c, s, dec_in, B, T);
}
static ag_tensor *bm_decode_features(const zoo_model *m, const nn_ctx *c, void *s,
                                     const int32_t *dec_in, int B, int T, const nn_linear **out) {
    *out = &bm_of(m)->decoder.dense;
    return zoo_seq2seq_attn_decoder_features(&bm_of(m)->decoder, c, s, dec_in, B, T, NULL);
}
static ag_tensor *bm_step(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *tokens,
                          int B, const zoo_attn_trace *trace) {
    return zoo_bahdanau_step(bm_of(m), c, s, tokens, B, trace);
}
static int bm_select(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *rows, int n) {
    return zoo_seq2seq_attn_decoder_select(&bm_of(m)->decoder, c, s, rows, n);
}
static int bm_reserve(const zoo_model *m, const nn_ctx *c, void *s, int rows, int steps) {
    (void)steps; /* the state does not grow with the steps */
    return zoo_seq2seq_attn_decoder_reserve(&bm_of(m)->decoder, c, s, rows);
}
static int bm_attn_heads(const zoo_model *m, zoo_attn_kind kind) {
    (void)m;
    return kind == ZOO_ATTN_DEC_CROSS ? 1 : 0; /* no self-attention anywhere */
}
static void bm_free(zoo_model *m) {
    nn_params_free(m->ps); /* zoo_bahdanau owns no memory of its own */
    free(m);
}

static const zoo_model_ops bm_ops = {.encode = bm_encode,
                                     .decode = bm_decode,
                                     .decode_features = bm_decode_features,
                                     .step = bm_step,
                                     .select = bm_select,
                                     .reserve = bm_reserve,
                                     .attn_heads = bm_attn_heads,
                                     .free = bm_free};

static zoo_model *bm_create(const void *config, int src_vocab, int tgt_vocab) {
    bahdanau_model *m = calloc(1, sizeof *m);
    nn_params *ps = nn_params_new();
    if (!m || !ps) {
        free(m);
        nn_params_free(ps);
        ag_error("bahdanau: out of memory");
        return NULL;
    }
    zoo_bahdanau_cfg cfg = *(const zoo_bahdanau_cfg *)config;
    cfg.src_vocab = src_vocab;
    cfg.tgt_vocab = tgt_vocab;
    m->base = (zoo_model){.ops = &bm_ops,
                          .kind = &zoo_bahdanau_kind,
                          .cfg = &m->bm.cfg,
                          .ps = ps,
                          .src_vocab = src_vocab,
                          .tgt_vocab = tgt_vocab,
                          .layers = 1};
    if (zoo_bahdanau_init(&m->bm, ps, &cfg)) {
        bm_free(&m->base);
        return NULL;
    }
    return &m->base;
}

#define F(field) offsetof(zoo_bahdanau_cfg, field)
static const zoo_field bm_fields[] = {
    {"embed-size", ZOO_INT, F(embed), 1, 4096, "token embedding size", NULL},
    {"hiddens", ZOO_INT, F(hiddens), 1, 4096, "GRU hidden size (also the attention's width)", NULL},
    {"layers", ZOO_INT, F(layers), 1, NN_GRU_MAX_LAYERS,
     "GRU layers in the encoder and in the decoder", NULL},
    {"dropout", ZOO_REAL, F(dropout), 0, 0.99,
     "dropout between GRU layers and on the attention weights", NULL},
    {"cell", ZOO_CHOICE, F(cell), 0, 0,
     "the recurrent cell of the encoder and the decoder", zoo_cell_names},
};
#undef F

const zoo_model_kind zoo_bahdanau_kind = {
    .name = "bahdanau",
    .program = "bahdanau_nmt",
    .config = bm_fields,
    .n_config = sizeof bm_fields / sizeof *bm_fields,
    .n_first = 4, /* the cell came later */
    .config_size = sizeof(zoo_bahdanau_cfg),
    .defaults = &zoo_bahdanau_default_cfg,
    .epochs = 250,
    .lr = 0.005,
    .create = bm_create,
};
