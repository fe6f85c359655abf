/* transformer_model.c -- the Transformer as a zoo_model: its hyperparameters (flags, checkpoint
 * config) and the encoder-decoder interface over zoo/transformer.h. */
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
static ag_tensor *tf_decode(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *dec_in, int B,
                            int T) {
    return zoo_transformer_decode(tf_of(m), c, s, dec_in, B, T);
}
static ag_tensor *tf_step(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *tokens, int B,
                          const zoo_attn_trace *trace) {
    return zoo_transformer_step(tf_of(m), c, s, tokens, B, trace);
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

static const zoo_model_ops tf_ops = {tf_encode, tf_decode, tf_step, tf_attn_heads, tf_free};

static zoo_model *tf_create(const zoo_hparams *h, int src_vocab, int tgt_vocab) {
    tf_model *m = calloc(1, sizeof *m);
    nn_params *ps = nn_params_new();
    if (!m || !ps) {
        free(m);
        nn_params_free(ps);
        ag_error("transformer: out of memory");
        return NULL;
    }
    zoo_transformer_cfg cfg = zoo_transformer_defaults(src_vocab, tgt_vocab);
    cfg.hiddens = (int)zoo_hp(h, "hiddens");
    cfg.ffn_hiddens = (int)zoo_hp(h, "ffn-hiddens");
    cfg.heads = (int)zoo_hp(h, "heads");
    cfg.layers = (int)zoo_hp(h, "layers");
    cfg.dropout = zoo_hp(h, "dropout");
    cfg.max_len = (int)zoo_hp(h, "max-len");
    cfg.d2l_step_positions = zoo_hp(h, "d2l-step-positions") != 0;
    m->base = (zoo_model){.ops = &tf_ops, .kind = &zoo_transformer_kind, .hp = *h, .ps = ps,
                          .src_vocab = src_vocab, .tgt_vocab = tgt_vocab, .layers = cfg.layers};
    if (zoo_transformer_init(&m->tf, ps, &cfg)) {
        tf_free(&m->base);
        return NULL;
    }
    return &m->base;
}

const zoo_model_kind zoo_transformer_kind = {
    .name = "transformer",
    .program = "transformer_nmt",
    .hparams = {7,
                {{"hiddens", 32, true, 1, 4096, "model width d_model"},
                 {"ffn-hiddens", 64, true, 1, 65536, "hidden width of the position-wise FFN"},
                 {"heads", 4, true, 1, 256, "attention heads (must divide --hiddens)"},
                 {"layers", 2, true, 1, 64, "blocks in the encoder and in the decoder"},
                 {"dropout", 0.1, false, 0, 0.99, "dropout probability"},
                 {"max-len", 1000, true, 1, 100000, "positional-encoding table length"},
                 {"d2l-step-positions", 0, true, 0, 1,
                  "1: decode steps add P[0] at every step, as d2l's predict (0: true positions)"}}},
    .epochs = 200,
    .lr = 0.005,
    .create = tf_create,
};
