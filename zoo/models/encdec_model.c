/* encdec_model.c -- the plain RNN encoder-decoder (no attention) as a zoo_model: its
 * hyperparameters (flags, checkpoint config) and the encoder-decoder interface over
 * zoo/models/encdec.h. The model has no attention: zoo_model.layers is 0 and attn_heads 0. */
#include <stddef.h>
#include <stdlib.h>

#include "zoo/models/encdec.h"
#include "zoo/models/seq2seq.h"

typedef struct encdec_model {
    zoo_model base; /* first: a zoo_model * is an encdec_model * */
    zoo_encdec ed;
} encdec_model;

static const zoo_encdec *ed_of(const zoo_model *m) { return &((const encdec_model *)m)->ed; }

static void *ed_encode(const zoo_model *m, const nn_ctx *c, const int32_t *src,
                       const int32_t *src_len, int B, int Ts, const zoo_attn_trace *trace) {
    (void)trace;   /* no attention */
    (void)src_len; /* as d2l, the encoder runs over the padding too */
    return zoo_encdec_encode(ed_of(m), c, src, B, Ts);
}
static ag_tensor *ed_decode(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *dec_in,
                            int B, int T) {
    return zoo_encdec_decode(ed_of(m), c, s, dec_in, B, T);
}
static ag_tensor *ed_decode_features(const zoo_model *m, const nn_ctx *c, void *s,
                                     const int32_t *dec_in, int B, int T, const nn_linear **out) {
    *out = &ed_of(m)->decoder.dense;
    return zoo_seq2seq_decoder_features(&ed_of(m)->decoder, c, s, dec_in, B, T);
}
static ag_tensor *ed_step(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *tokens,
                          int B, const zoo_attn_trace *trace) {
    (void)trace;
    return zoo_encdec_step(ed_of(m), c, s, tokens, B);
}
static int ed_select(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *rows, int n) {
    return zoo_seq2seq_decoder_select(&ed_of(m)->decoder, c, s, rows, n);
}
static int ed_reserve(const zoo_model *m, const nn_ctx *c, void *s, int rows, int steps) {
    (void)steps; /* the state does not grow with the steps */
    return zoo_seq2seq_decoder_reserve(&ed_of(m)->decoder, c, s, rows);
}
static int ed_attn_heads(const zoo_model *m, zoo_attn_kind kind) {
    (void)m;
    (void)kind;
    return 0;
}
static void ed_free(zoo_model *m) {
    nn_params_free(m->ps); /* zoo_encdec owns no memory of its own */
    free(m);
}

static const zoo_model_ops ed_ops = {.encode = ed_encode,
                                     .decode = ed_decode,
                                     .decode_features = ed_decode_features,
                                     .step = ed_step,
                                     .select = ed_select,
                                     .reserve = ed_reserve,
                                     .attn_heads = ed_attn_heads,
                                     .free = ed_free};

static zoo_model *ed_create(const void *config, int src_vocab, int tgt_vocab) {
    encdec_model *m = calloc(1, sizeof *m);
    nn_params *ps = nn_params_new();
    if (!m || !ps) {
        free(m);
        nn_params_free(ps);
        ag_error("seq2seq: out of memory");
        return NULL;
    }
    zoo_encdec_cfg cfg = *(const zoo_encdec_cfg *)config;
    cfg.src_vocab = src_vocab;
    cfg.tgt_vocab = tgt_vocab;
    m->base = (zoo_model){.ops = &ed_ops,
                          .kind = &zoo_encdec_kind,
                          .cfg = &m->ed.cfg,
                          .ps = ps,
                          .src_vocab = src_vocab,
                          .tgt_vocab = tgt_vocab,
                          .layers = 0};
    if (zoo_encdec_init(&m->ed, ps, &cfg)) {
        ed_free(&m->base);
        return NULL;
    }
    return &m->base;
}

#define F(field) offsetof(zoo_encdec_cfg, field)
static const zoo_field ed_fields[] = {
    {"embed-size", ZOO_INT, F(embed), 1, 4096, "token embedding size", NULL},
    {"hiddens", ZOO_INT, F(hiddens), 1, 4096, "RNN hidden size", NULL},
    {"layers", ZOO_INT, F(layers), 1, ZOO_RNN_MAX_LAYERS,
     "RNN layers in the encoder and in the decoder", NULL},
    {"dropout", ZOO_REAL, F(dropout), 0, 0.99, "dropout between RNN layers", NULL},
    {"cell", ZOO_CHOICE, F(cell), 0, 0,
     "the recurrent cell of the encoder and the decoder", zoo_cell_names},
};
#undef F

const zoo_model_kind zoo_encdec_kind = {
    .name = "seq2seq",
    .program = "seq2seq_nmt",
    .config = ed_fields,
    .n_config = sizeof ed_fields / sizeof *ed_fields,
    .config_size = sizeof(zoo_encdec_cfg),
    .defaults = &zoo_encdec_default_cfg,
    .epochs = 300,
    .lr = 0.005,
    .create = ed_create,
};
