/* transformer_model.c -- the Transformer as a zoo_model: its hyperparameters (flags, checkpoint
 * config) and the encoder-decoder interface over zoo/models/transformer.h. */
#include <stddef.h>
#include <stdlib.h>

#include "zoo/models/seq2seq.h"
#include "zoo/models/transformer.h"

typedef struct tf_model {
    zoo_model base; /* first: a zoo_model * is a tf_model * */
    zoo_transformer tf;
} tf_model;

static const zoo_transformer *tf_of(const zoo_model *m) { return &((const tf_model *)m)->tf; }

static void *tf_encode(const zoo_model *m, const nn_ctx *c, const int32_t *src,
                       const int32_t *src_len, int B, int Ts, const zoo_attn_trace *trace) {
    return zoo_transformer_encode(tf_of(m), c, src, src_len, B, Ts, trace);
}
static ag_tensor *tf_decode(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *dec_in,
                            int B, int T) {
    return zoo_transformer_decode(tf_of(m), c, s, dec_in, B, T);
}
static ag_tensor *tf_decode_features(const zoo_model *m, const nn_ctx *c, void *s,
                                     const int32_t *dec_in, int B, int T, const nn_linear **out) {
    *out = &tf_of(m)->dense;
    return zoo_transformer_decode_features(tf_of(m), c, s, dec_in, B, T);
}
static ag_tensor *tf_step(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *tokens,
                          int B, const zoo_attn_trace *trace) {
    return zoo_transformer_step(tf_of(m), c, s, tokens, B, trace);
}
static int tf_select(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *rows, int n) {
    return zoo_transformer_select(tf_of(m), c, s, rows, n);
}
static int tf_reserve(const zoo_model *m, const nn_ctx *c, void *s, int rows, int steps) {
    return zoo_transformer_reserve(tf_of(m), c, s, rows, steps);
}
static int tf_attn_heads(const zoo_model *m, zoo_attn_kind kind) {
    (void)kind; /* all three kinds exist, with cfg.heads heads */
    return ((const tf_model *)m)->tf.cfg.heads;
}
static void tf_free(zoo_model *m) {
    zoo_transformer_free(&((tf_model *)m)->tf);
    nn_params_free(m->ps);
    free(m);
}

static const zoo_model_ops tf_ops = {.encode = tf_encode,
                                     .decode = tf_decode,
                                     .decode_features = tf_decode_features,
                                     .step = tf_step,
                                     .select = tf_select,
                                     .reserve = tf_reserve,
                                     .attn_heads = tf_attn_heads,
                                     .free = tf_free};

static zoo_model *tf_create(const void *config, int src_vocab, int tgt_vocab) {
    tf_model *m = calloc(1, sizeof *m);
    nn_params *ps = nn_params_new();
    if (!m || !ps) {
        free(m);
        nn_params_free(ps);
        ag_error("transformer: out of memory");
        return NULL;
    }
    zoo_transformer_cfg cfg = *(const zoo_transformer_cfg *)config;
    cfg.src_vocab = src_vocab;
    cfg.tgt_vocab = tgt_vocab;
    m->base = (zoo_model){.ops = &tf_ops,
                          .kind = &zoo_transformer_kind,
                          .cfg = &m->tf.cfg,
                          .ps = ps,
                          .src_vocab = src_vocab,
                          .tgt_vocab = tgt_vocab,
                          .layers = cfg.layers};
    if (zoo_transformer_init(&m->tf, ps, &cfg)) {
        tf_free(&m->base);
        return NULL;
    }
    return &m->base;
}

static int tf_check_steps(const void *config, int num_steps) {
    const zoo_transformer_cfg *cfg = config;
    if (num_steps > cfg->max_len)
        return ag_error(
            "--num-steps %d is longer than the positional-encoding table (--max-len %d)", num_steps,
            cfg->max_len);
    return 0;
}

#define F(field) offsetof(zoo_transformer_cfg, field)
static const zoo_field tf_fields[] = {
    {"hiddens", ZOO_INT, F(hiddens), 1, 4096, "model width d_model", NULL},
    {"ffn-hiddens", ZOO_INT, F(ffn_hiddens), 1, 65536, "hidden width of the position-wise FFN", NULL},
    {"heads", ZOO_INT, F(heads), 1, 256, "attention heads (must divide --hiddens)", NULL},
    {"layers", ZOO_INT, F(layers), 1, 64, "blocks in the encoder and in the decoder", NULL},
    {"dropout", ZOO_REAL, F(dropout), 0, 0.99, "dropout probability", NULL},
    {"max-len", ZOO_INT, F(max_len), 1, 100000, "positional-encoding table length", NULL},
    {"d2l-step-positions", ZOO_BOOL, F(d2l_step_positions), 0, 1,
     "1: decode steps add P[0] at every step, as d2l's predict (0: true positions)", NULL},
    {"embed-std", ZOO_REAL, F(embed_std), 0, 100,
     "embeddings drawn from N(0, std^2) (0: N(0, 1), PyTorch's nn.Embedding)", NULL},
};
#undef F

const zoo_model_kind zoo_transformer_kind = {
    .name = "transformer",
    .program = "transformer_nmt",
    .config = tf_fields,
    .n_config = sizeof tf_fields / sizeof *tf_fields,
    .n_first = 7, /* --embed-std came later */
    .config_size = sizeof(zoo_transformer_cfg),
    .defaults = &zoo_transformer_default_cfg,
    .epochs = 200,
    .lr = 0.005,
    .create = tf_create,
    .check_steps = tf_check_steps,
};
