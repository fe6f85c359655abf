/* transformer.c -- PositionalEncoding, PositionWiseFFN, AddNorm, the blocks, the encoder-decoder
 * (d2l 11.6 and 11.7). */
#include "zoo/models/transformer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

zoo_transformer_cfg zoo_transformer_defaults(int src_vocab, int tgt_vocab) {
    return (zoo_transformer_cfg){.src_vocab = src_vocab, .tgt_vocab = tgt_vocab, .hiddens = 32,
                                 .ffn_hiddens = 64, .heads = 4, .layers = 2, .dropout = 0.1,
                                 .max_len = 1000, .d2l_step_positions = false};
}

/* ---- positional encoding ---- */

int zoo_pos_encoding_init(zoo_pos_encoding *pe, int hiddens, double dropout, int max_len) {
    memset(pe, 0, sizeof *pe);
    if (hiddens < 1 || max_len < 1)
        return ag_error("positional encoding: hiddens %d and max_len %d must be >= 1", hiddens, max_len);
    if (nn_dropout_init(&pe->dropout, dropout)) return -1;
    pe->P = malloc(sizeof *pe->P * (size_t)max_len * hiddens);
    if (!pe->P) return ag_error("positional encoding: out of memory");
    pe->hiddens = hiddens;
    pe->max_len = max_len;
    for (int i = 0; i < max_len; i++) {
        for (int j = 0; 2 * j < hiddens; j++) {
            double x = i / pow(10000.0, 2.0 * j / hiddens);
            pe->P[(size_t)i * hiddens + 2 * j] = (ag_real)sin(x);
            if (2 * j + 1 < hiddens) pe->P[(size_t)i * hiddens + 2 * j + 1] = (ag_real)cos(x);
        }
    }
    return 0;
}

void zoo_pos_encoding_free(zoo_pos_encoding *pe) {
    free(pe->P);
    pe->P = NULL;
}

ag_tensor *zoo_pos_encoding_forward(const zoo_pos_encoding *pe, const nn_ctx *c, ag_tensor *x,
                                    int offset) {
    if (!x) return NULL;
    int T = x->shape[1], H = x->shape[2];
    if (H != pe->hiddens || offset < 0 || offset + T > pe->max_len) {
        ag_error("positional encoding: positions [%d, %d) of width %d exceed the table "
                     "(%d x %d)", offset, offset + T, H, pe->max_len, pe->hiddens);
        return NULL;
    }
    ag_tensor *p = ag_tensor_from(c->tape, AG_SHAPE(T, H), pe->P + (size_t)offset * H);
    return nn_dropout_forward(&pe->dropout, c, ag_add(c->tape, x, p));
}

/* ---- position-wise FFN and add & norm ---- */

int zoo_ffn_init(zoo_ffn *f, nn_params *ps, const char *prefix, int in, int hiddens, int out) {
    char p[NN_NAME_MAX];
    return nn_linear_init(&f->dense1, ps, nn_join(p, sizeof p, prefix, "dense1"), in, hiddens, true) ||
                   nn_linear_init(&f->dense2, ps, nn_join(p, sizeof p, prefix, "dense2"), hiddens, out, true)
               ? -1
               : 0;
}

ag_tensor *zoo_ffn_forward(const zoo_ffn *f, const nn_ctx *c, ag_tensor *x) {
    return nn_linear_forward(&f->dense2, c, ag_relu(c->tape, nn_linear_forward(&f->dense1, c, x)));
}

int zoo_addnorm_init(zoo_addnorm *a, nn_params *ps, const char *prefix, int ndim,
                     const int *shape, double dropout) {
    char p[NN_NAME_MAX];
    if (nn_dropout_init(&a->dropout, dropout)) return -1;
    return nn_layer_norm_init(&a->ln, ps, nn_join(p, sizeof p, prefix, "ln"), ndim, shape,
                              NN_LAYER_NORM_EPS);
}

/* LayerNorm(dropout(y) + x): one fused op, nn_layer_norm_add_forward. */
ag_tensor *zoo_addnorm_forward(const zoo_addnorm *a, const nn_ctx *c, ag_tensor *x, ag_tensor *y) {
    return nn_layer_norm_add_forward(&a->ln, &a->dropout, c, x, y);
}

/* ---- blocks ---- */

int zoo_encoder_block_init(zoo_encoder_block *b, nn_params *ps, const char *prefix, int hiddens,
                           int norm_ndim, const int *norm_shape, int ffn_hiddens, int heads,
                           double dropout) {
    char p[NN_NAME_MAX];
    return zoo_mha_init(&b->attention, ps, nn_join(p, sizeof p, prefix, "attention"), hiddens,
                        hiddens, hiddens, hiddens, heads, dropout, false) ||
                   zoo_addnorm_init(&b->addnorm1, ps, nn_join(p, sizeof p, prefix, "addnorm1"),
                                    norm_ndim, norm_shape, dropout) ||
                   zoo_ffn_init(&b->ffn, ps, nn_join(p, sizeof p, prefix, "ffn"), hiddens,
                                ffn_hiddens, hiddens) ||
                   zoo_addnorm_init(&b->addnorm2, ps, nn_join(p, sizeof p, prefix, "addnorm2"),
                                    norm_ndim, norm_shape, dropout)
               ? -1
               : 0;
}

ag_tensor *zoo_encoder_block_forward(const zoo_encoder_block *b, const nn_ctx *c, ag_tensor *x,
                                     const int32_t *valid_lens, ag_tensor **weights) {
    ag_tensor *y = zoo_addnorm_forward(&b->addnorm1, c, x,
                                       zoo_mha_forward(&b->attention, c, x, x, x, valid_lens, 1, weights));
    return zoo_addnorm_forward(&b->addnorm2, c, y, zoo_ffn_forward(&b->ffn, c, y));
}

int zoo_decoder_block_init(zoo_decoder_block *b, nn_params *ps, const char *prefix, int hiddens,
                           int norm_ndim, const int *norm_shape, int ffn_hiddens, int heads,
                           double dropout) {
    char p[NN_NAME_MAX];
    return zoo_mha_init(&b->attention1, ps, nn_join(p, sizeof p, prefix, "attention1"), hiddens,
                        hiddens, hiddens, hiddens, heads, dropout, false) ||
                   zoo_addnorm_init(&b->addnorm1, ps, nn_join(p, sizeof p, prefix, "addnorm1"),
                                    norm_ndim, norm_shape, dropout) ||
                   zoo_mha_init(&b->attention2, ps, nn_join(p, sizeof p, prefix, "attention2"),
                                hiddens, hiddens, hiddens, hiddens, heads, dropout, false) ||
                   zoo_addnorm_init(&b->addnorm2, ps, nn_join(p, sizeof p, prefix, "addnorm2"),
                                    norm_ndim, norm_shape, dropout) ||
                   zoo_ffn_init(&b->ffn, ps, nn_join(p, sizeof p, prefix, "ffn"), hiddens,
                                ffn_hiddens, hiddens) ||
                   zoo_addnorm_init(&b->addnorm3, ps, nn_join(p, sizeof p, prefix, "addnorm3"),
                                    norm_ndim, norm_shape, dropout)
               ? -1
               : 0;
}

/* The causal valid lengths of a full pass: query t of every row sees keys 0..t. */
static const int32_t *causal_lens(ag_tape *t, int B, int T) {
    int32_t *v = ag_tape_alloc(t, sizeof *v * (size_t)B * T);
    if (v)
        for (int b = 0; b < B; b++)
            for (int q = 0; q < T; q++) v[(size_t)b * T + q] = q + 1;
    return v;
}

ag_tensor *zoo_decoder_block_forward(const zoo_decoder_block *b, const nn_ctx *c, ag_tensor *x,
                                     ag_tensor *keys, ag_tensor *enc_out,
                                     const int32_t *enc_valid, ag_tensor **self_weights,
                                     ag_tensor **cross_weights) {
    if (!x) return NULL;
    const int32_t *self_lens = NULL;
    if (!keys) {
        keys = x;
        self_lens = causal_lens(c->tape, x->shape[0], x->shape[1]);
        if (!self_lens) return NULL;
    }
    ag_tensor *y = zoo_addnorm_forward(
        &b->addnorm1, c, x, zoo_mha_forward(&b->attention1, c, x, keys, keys, self_lens, self_lens ? 2 : 0,
                                          self_weights));
    ag_tensor *z = zoo_addnorm_forward(
        &b->addnorm2, c, y, zoo_mha_forward(&b->attention2, c, y, enc_out, enc_out, enc_valid, 1, cross_weights));
    return zoo_addnorm_forward(&b->addnorm3, c, z, zoo_ffn_forward(&b->ffn, c, z));
}

/* ---- the model ---- */

int zoo_transformer_init(zoo_transformer *tf, nn_params *ps, const zoo_transformer_cfg *cfg) {
    memset(tf, 0, sizeof *tf);
    tf->cfg = *cfg;
    const zoo_transformer_cfg *k = cfg;
    if (k->src_vocab < 1 || k->tgt_vocab < 1 || k->hiddens < 1 || k->ffn_hiddens < 1 ||
        k->heads < 1 || k->layers < 1 || k->hiddens % k->heads)
        return nn_params_fail(ps, "transformer: bad config (vocab %d/%d, hiddens %d, ffn %d, "
                                  "heads %d, layers %d): sizes must be >= 1 and hiddens a "
                                  "multiple of heads", k->src_vocab, k->tgt_vocab, k->hiddens,
                              k->ffn_hiddens, k->heads, k->layers);
    if (zoo_pos_encoding_init(&tf->pos, k->hiddens, k->dropout, k->max_len)) return nn_params_fail(ps, "%s", ag_last_error());
    tf->enc = calloc((size_t)k->layers, sizeof *tf->enc);
    tf->dec = calloc((size_t)k->layers, sizeof *tf->dec);
    if (!tf->enc || !tf->dec) return nn_params_fail(ps, "transformer: out of memory");
    char p[NN_NAME_MAX];
    const int norm[1] = {k->hiddens};
    if (nn_embedding_init(&tf->enc_embedding, ps, "encoder.embedding", k->src_vocab, k->hiddens)) return -1;
    for (int i = 0; i < k->layers; i++)
        if (zoo_encoder_block_init(&tf->enc[i], ps, nn_join(p, sizeof p, "encoder.blks", "block%d", i),
                                   k->hiddens, 1, norm, k->ffn_hiddens, k->heads, k->dropout))
            return -1;
    if (nn_embedding_init(&tf->dec_embedding, ps, "decoder.embedding", k->tgt_vocab, k->hiddens)) return -1;
    for (int i = 0; i < k->layers; i++)
        if (zoo_decoder_block_init(&tf->dec[i], ps, nn_join(p, sizeof p, "decoder.blks", "block%d", i),
                                   k->hiddens, 1, norm, k->ffn_hiddens, k->heads, k->dropout))
            return -1;
    return nn_linear_init(&tf->dense, ps, "decoder.dense", k->hiddens, k->tgt_vocab, true);
}

void zoo_transformer_free(zoo_transformer *tf) {
    zoo_pos_encoding_free(&tf->pos);
    free(tf->enc);
    free(tf->dec);
    tf->enc = NULL;
    tf->dec = NULL;
}

/* pos_encoding(embedding(ids) * sqrt(H)) for ids (B, T) starting at position offset. */
static ag_tensor *embed(const zoo_transformer *tf, const nn_embedding *e, const nn_ctx *c,
                        const int32_t *ids, int B, int T, int offset) {
    ag_tensor *x = nn_embedding_forward(e, c, ids, AG_SHAPE(B, T));
    return zoo_pos_encoding_forward(&tf->pos, c, ag_scale(c->tape, x, sqrt((double)tf->cfg.hiddens)), offset);
}

zoo_tf_state *zoo_transformer_encode(const zoo_transformer *tf, const nn_ctx *c, const int32_t *src,
                                     const int32_t *src_len, int B, int Ts,
                                     const zoo_attn_trace *trace) {
    zoo_tf_state *s = ag_tape_alloc(c->tape, sizeof *s);
    int32_t *lens = ag_tape_alloc(c->tape, sizeof *lens * (size_t)B);
    ag_tensor **cache = ag_tape_alloc(c->tape, sizeof *cache * (size_t)tf->cfg.layers);
    if (!s || !lens || !cache) return NULL;
    memcpy(lens, src_len, sizeof *lens * (size_t)B);
    memset(cache, 0, sizeof *cache * (size_t)tf->cfg.layers);
    ag_tensor *x = embed(tf, &tf->enc_embedding, c, src, B, Ts, 0);
    for (int i = 0; i < tf->cfg.layers; i++)
        x = zoo_encoder_block_forward(&tf->enc[i], c, x, lens,
                                      trace && trace->enc_self ? &trace->enc_self[i] : NULL);
    if (!x) return NULL;
    *s = (zoo_tf_state){.enc_out = x, .enc_valid = lens, .cache = cache, .steps = 0};
    return s;
}

ag_tensor *zoo_transformer_decode(const zoo_transformer *tf, const nn_ctx *c, zoo_tf_state *s,
                                  const int32_t *dec_in, int B, int T) {
    if (!s) return NULL;
    ag_tensor *x = embed(tf, &tf->dec_embedding, c, dec_in, B, T, 0);
    for (int i = 0; i < tf->cfg.layers; i++)
        x = zoo_decoder_block_forward(&tf->dec[i], c, x, NULL, s->enc_out, s->enc_valid, NULL, NULL);
    return nn_linear_forward(&tf->dense, c, x);
}

ag_tensor *zoo_transformer_step(const zoo_transformer *tf, const nn_ctx *c, zoo_tf_state *s,
                                const int32_t *tokens, int B, const zoo_attn_trace *trace) {
    if (!s) return NULL;
    int pos = tf->cfg.d2l_step_positions ? 0 : s->steps;
    ag_tensor *x = embed(tf, &tf->dec_embedding, c, tokens, B, 1, pos);
    for (int i = 0; i < tf->cfg.layers && x; i++) {
        ag_tensor *keys = s->cache[i] ? ag_concat(c->tape, 2, (ag_tensor *[]){s->cache[i], x}, 1) : x;
        s->cache[i] = keys;
        x = zoo_decoder_block_forward(&tf->dec[i], c, x, keys, s->enc_out, s->enc_valid,
                                      trace && trace->dec_self ? &trace->dec_self[i] : NULL,
                                      trace && trace->dec_cross ? &trace->dec_cross[i] : NULL);
    }
    s->steps++;
    return nn_linear_forward(&tf->dense, c, x);
}
