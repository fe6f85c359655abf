/* transformer.c -- PositionalEncoding, PositionWiseFFN, AddNorm, the blocks, the encoder-decoder
 * (d2l 11.6 and 11.7). */
#include "zoo/models/transformer.h"

#include "autograd/ag_op.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

const zoo_transformer_cfg zoo_transformer_default_cfg = {.hiddens = 32,
                                                         .ffn_hiddens = 64,
                                                         .heads = 4,
                                                         .layers = 2,
                                                         .dropout = 0.1,
                                                         .max_len = 1000,
                                                         .d2l_step_positions = false};

zoo_transformer_cfg zoo_transformer_defaults(int src_vocab, int tgt_vocab) {
    zoo_transformer_cfg c = zoo_transformer_default_cfg;
    c.src_vocab = src_vocab;
    c.tgt_vocab = tgt_vocab;
    return c;
}

/* ---- positional encoding ---- */

int zoo_pos_encoding_init(zoo_pos_encoding *pe, int hiddens, double dropout, int max_len) {
    memset(pe, 0, sizeof *pe);
    if (hiddens < 1 || max_len < 1)
        return ag_error("positional encoding: hiddens %d and max_len %d must be >= 1", hiddens,
                        max_len);
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
                 "(%d x %d)",
                 offset, offset + T, H, pe->max_len, pe->hiddens);
        return NULL;
    }
    ag_tensor *p = ag_tensor_from(c->tape, AG_SHAPE(T, H), pe->P + (size_t)offset * H);
    return nn_dropout_forward(&pe->dropout, c, ag_add(c->tape, x, p));
}

/* ---- position-wise FFN and add & norm ---- */

int zoo_ffn_init(zoo_ffn *f, nn_params *ps, const char *prefix, int in, int hiddens, int out) {
    char p[NN_NAME_MAX];
    return nn_linear_init(&f->dense1, ps, nn_join(p, sizeof p, prefix, "dense1"), in, hiddens,
                          true) ||
                   nn_linear_init(&f->dense2, ps, nn_join(p, sizeof p, prefix, "dense2"), hiddens,
                                  out, true)
               ? -1
               : 0;
}

ag_tensor *zoo_ffn_forward(const zoo_ffn *f, const nn_ctx *c, ag_tensor *x) {
    return nn_linear_forward(&f->dense2, c, ag_relu(c->tape, nn_linear_forward(&f->dense1, c, x)));
}

int zoo_addnorm_init(zoo_addnorm *a, nn_params *ps, const char *prefix, int ndim, const int *shape,
                     double dropout) {
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
    ag_tensor *y = zoo_addnorm_forward(
        &b->addnorm1, c, x, zoo_mha_forward(&b->attention, c, x, x, x, valid_lens, 1, weights));
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
                                     ag_tensor *keys, ag_tensor *enc_out, const int32_t *enc_valid,
                                     ag_tensor **self_weights, ag_tensor **cross_weights) {
    if (!x) return NULL;
    const int32_t *self_lens = NULL;
    if (!keys) {
        keys = x;
        self_lens = causal_lens(c->tape, x->shape[0], x->shape[1]);
        if (!self_lens) return NULL;
    }
    ag_tensor *y = zoo_addnorm_forward(&b->addnorm1, c, x,
                                       zoo_mha_forward(&b->attention1, c, x, keys, keys, self_lens,
                                                       self_lens ? 2 : 0, self_weights));
    ag_tensor *z = zoo_addnorm_forward(
        &b->addnorm2, c, y,
        zoo_mha_forward(&b->attention2, c, y, enc_out, enc_out, enc_valid, 1, cross_weights));
    return zoo_addnorm_forward(&b->addnorm3, c, z, zoo_ffn_forward(&b->ffn, c, z));
}

/* ---- the model ---- */

static const zoo_model_ops tf_ops;

int zoo_transformer_init(zoo_transformer *tf, nn_params *ps, const zoo_transformer_cfg *cfg) {
    memset(tf, 0, sizeof *tf);
    tf->cfg = *cfg;
    tf->base = (zoo_model){.ops = &tf_ops,
                           .kind = &zoo_transformer_kind,
                           .cfg = &tf->cfg,
                           .ps = ps,
                           .src_vocab = cfg->src_vocab,
                           .tgt_vocab = cfg->tgt_vocab,
                           .layers = cfg->layers,
                           .dec_layers = cfg->dec_layers ? cfg->dec_layers : cfg->layers};
    const zoo_transformer_cfg *k = cfg;
    const int D = tf->base.dec_layers;
    if (k->src_vocab < 1 || k->tgt_vocab < 1 || k->hiddens < 1 || k->ffn_hiddens < 1 ||
        k->heads < 1 || k->layers < 1 || k->dec_layers < 0 || k->hiddens % k->heads)
        return nn_params_fail(ps,
                              "transformer: bad config (vocab %d/%d, hiddens %d, ffn %d, "
                              "heads %d, layers %d, dec_layers %d): sizes must be >= 1 "
                              "(dec_layers >= 0) and hiddens a multiple of heads",
                              k->src_vocab, k->tgt_vocab, k->hiddens, k->ffn_hiddens, k->heads,
                              k->layers, k->dec_layers);
    if (k->share_embeddings && k->src_vocab != k->tgt_vocab)
        return nn_params_fail(ps,
                              "transformer: shared embeddings need one vocabulary for both "
                              "languages, got %d source and %d target tokens",
                              k->src_vocab, k->tgt_vocab);
    if (zoo_pos_encoding_init(&tf->pos, k->hiddens, k->dropout, k->max_len))
        return nn_params_fail(ps, "%s", ag_last_error());
    tf->enc = calloc((size_t)k->layers, sizeof *tf->enc);
    tf->dec = calloc((size_t)D, sizeof *tf->dec);
    if (!tf->enc || !tf->dec) return nn_params_fail(ps, "transformer: out of memory");
    char p[NN_NAME_MAX];
    const int norm[1] = {k->hiddens};
    if (nn_embedding_init(&tf->enc_embedding, ps, "encoder.embedding", k->src_vocab, k->hiddens) ||
        (k->embed_std > 0 &&
         nn_params_set_init(ps, tf->enc_embedding.weight, nn_init_normal(0, k->embed_std))))
        return -1;
    for (int i = 0; i < k->layers; i++)
        if (zoo_encoder_block_init(&tf->enc[i], ps,
                                   nn_join(p, sizeof p, "encoder.blks", "block%d", i), k->hiddens,
                                   1, norm, k->ffn_hiddens, k->heads, k->dropout))
            return -1;
    if (k->share_embeddings)
        tf->dec_embedding = tf->enc_embedding;
    else if (nn_embedding_init(&tf->dec_embedding, ps, "decoder.embedding", k->tgt_vocab,
                               k->hiddens) ||
             (k->embed_std > 0 &&
              nn_params_set_init(ps, tf->dec_embedding.weight, nn_init_normal(0, k->embed_std))))
        return -1;
    for (int i = 0; i < D; i++)
        if (zoo_decoder_block_init(&tf->dec[i], ps,
                                   nn_join(p, sizeof p, "decoder.blks", "block%d", i), k->hiddens,
                                   1, norm, k->ffn_hiddens, k->heads, k->dropout))
            return -1;
    return k->share_embeddings
               ? nn_linear_init_tied(&tf->dense, ps, "decoder.dense", tf->enc_embedding.weight,
                                     true)
               : nn_linear_init(&tf->dense, ps, "decoder.dense", k->hiddens, k->tgt_vocab, true);
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
    return zoo_pos_encoding_forward(&tf->pos, c,
                                    ag_scale(c->tape, x, sqrt((double)tf->cfg.hiddens)), offset);
}

/* Inference compaction: y's values copied into `held` (made before the mark, y's size), then
 * everything made since the mark dropped, y included. Returns held, or NULL. */
static ag_tensor *settle(ag_tape *t, ag_tape_pos mark, ag_tensor *held, ag_tensor *y) {
    y = ag_contiguous(t, y);
    if (!y || !held) return NULL;
    memcpy(held->data, y->data, sizeof(ag_real) * (size_t)held->numel);
    return ag_tape_rewind(t, mark) ? NULL : held;
}

static void *tf_encode(const zoo_model *m, const nn_ctx *c, const int32_t *src,
                       const int32_t *src_len, int B, int Ts, const zoo_attn_trace *trace) {
    const zoo_transformer *tf = (const zoo_transformer *)m;
    zoo_tf_state *s = ag_tape_alloc(c->tape, sizeof *s);
    int32_t *lens = ag_tape_alloc(c->tape, sizeof *lens * (size_t)B);
    int32_t *src_row = ag_tape_alloc(c->tape, sizeof *src_row * (size_t)B);
    if (!s || !lens || !src_row) return NULL;
    memcpy(lens, src_len, sizeof *lens * (size_t)B);
    for (int b = 0; b < B; b++) src_row[b] = b;
    /* Inference without a trace: each block's intermediates are dropped once its output is
     * made (settle), so a big batch holds one block's at a time, not the whole encoder's. */
    const bool compact = !trace && !ag_op_wants_grad(c->tape, 1, &tf->dense.weight);
    ag_tensor *held = compact ? ag_tensor_new(c->tape, AG_SHAPE(B, Ts, tf->cfg.hiddens)) : NULL;
    const ag_tape_pos mark = ag_tape_mark(c->tape);
    ag_tensor *x = embed(tf, &tf->enc_embedding, c, src, B, Ts, 0);
    if (compact) x = settle(c->tape, mark, held, x);
    for (int i = 0; i < tf->cfg.layers; i++) {
        x = zoo_encoder_block_forward(&tf->enc[i], c, x, lens,
                                      trace && trace->enc_self ? &trace->enc_self[i] : NULL);
        if (compact) x = settle(c->tape, mark, held, x);
    }
    if (!x) return NULL;
    *s = (zoo_tf_state){
        .enc_out = x, .enc_valid = lens, .src_row = src_row, .B = B, .Ts = Ts, .rows_cap = B};
    return s;
}

static ag_tensor *tf_decode_features(const zoo_model *m, const nn_ctx *c, void *state,
                                     const int32_t *dec_in, int B, int T, const nn_linear **out) {
    const zoo_transformer *tf = (const zoo_transformer *)m;
    const zoo_tf_state *s = state;
    if (out) *out = &tf->dense;
    if (!s) return NULL;
    if (B != s->B)
        return ag_report(c->tape, "transformer decode: batch %d, the state has %d rows", B, s->B);
    ag_tensor *x = embed(tf, &tf->dec_embedding, c, dec_in, B, T, 0);
    for (int i = 0; i < tf->base.dec_layers; i++)
        x = zoo_decoder_block_forward(&tf->dec[i], c, x, NULL, s->enc_out, s->enc_valid, NULL,
                                      NULL);
    return x;
}

static ag_tensor *tf_decode(const zoo_model *m, const nn_ctx *c, void *state, const int32_t *dec_in,
                            int B, int T) {
    const nn_linear *dense;
    ag_tensor *x = tf_decode_features(m, c, state, dec_in, B, T, &dense);
    return nn_linear_forward(dense, c, x);
}

zoo_tf_state *zoo_transformer_encode(const zoo_transformer *tf, const nn_ctx *c, const int32_t *src,
                                     const int32_t *src_len, int B, int Ts,
                                     const zoo_attn_trace *trace) {
    return tf_encode(&tf->base, c, src, src_len, B, Ts, trace);
}

ag_tensor *zoo_transformer_decode(const zoo_transformer *tf, const nn_ctx *c, zoo_tf_state *s,
                                  const int32_t *dec_in, int B, int T) {
    return tf_decode(&tf->base, c, s, dec_in, B, T);
}

/* ---- incremental decoding ---- */

/* True (reported) when c would record gradients for the model's parameters. */
static bool records(const zoo_transformer *tf, const nn_ctx *c, const char *what) {
    if (!ag_op_wants_grad(c->tape, 1, &tf->dense.weight)) return false;
    ag_report(c->tape, "transformer %s: inference only, turn the tape's recording off", what);
    return true;
}

/* s->enc_out := a leaf over the rows of buffer enc (s->B of them). */
static void set_enc_rows(zoo_tf_state *s, ag_real *enc) {
    ag_leaf_init(&s->enc_rows, enc, NULL, AG_SHAPE(s->B, s->Ts, s->enc_out->shape[2]));
    s->enc_out = &s->enc_rows;
}

/* Room for `rows` rows in enc_out, enc_valid and src_row: new buffers on c->tape holding their
 * B rows when rows_cap is less. Returns 0 or -1. */
static int ensure_rows(const nn_ctx *c, zoo_tf_state *s, int rows) {
    if (rows <= s->rows_cap) return 0;
    const size_t I = sizeof(int32_t), enc = sizeof(ag_real) * s->Ts * (size_t)s->enc_out->shape[2];
    ag_real *e = nn_rows_move(c->tape, s->enc_out->data, enc, enc, s->B, rows, enc);
    int32_t *lens = nn_rows_move(c->tape, s->enc_valid, I, I, s->B, rows, I);
    int32_t *src = nn_rows_move(c->tape, s->src_row, I, I, s->B, rows, I);
    if (!e || !lens || !src) return -1;
    set_enc_rows(s, e);
    s->enc_valid = lens;
    s->src_row = src;
    s->rows_cap = rows;
    return 0;
}

/* Every decoder block's caches, with room for `rows` rows: its self-attention's (empty, `steps`
 * positions) and its cross-attention's, filled with the encoder outputs through the block's
 * attention2 (its W_k and W_v; the projections are dropped once copied). Returns 0 or -1. */
static int make_caches(const zoo_transformer *tf, const nn_ctx *c, zoo_tf_state *s, int rows,
                       int steps) {
    ag_tape *t = c->tape;
    const int L = tf->base.dec_layers, H = tf->cfg.hiddens;
    nn_kv_cache *self = ag_tape_alloc(t, sizeof *self * 2 * (size_t)L), *cross = self + L;
    if (!self) return -1;
    for (int i = 0; i < L; i++) {
        if (nn_kv_cache_init(&self[i], s->B, H) || nn_kv_cache_reserve(&self[i], t, rows, steps) ||
            nn_kv_cache_init(&cross[i], s->B, H) || nn_kv_cache_reserve(&cross[i], t, rows, s->Ts))
            return -1;
        const ag_tape_pos mark = ag_tape_mark(t);
        if (zoo_mha_cache_append(&tf->dec[i].attention2, c, &cross[i], s->enc_out, s->enc_out) ||
            ag_tape_rewind(t, mark))
            return -1;
    }
    s->self = self;
    s->cross = cross;
    return 0;
}

static int tf_reserve(const zoo_model *m, const nn_ctx *c, void *state, int rows, int steps) {
    const zoo_transformer *tf = (const zoo_transformer *)m;
    zoo_tf_state *s = state;
    if (!s) return -1;
    if (rows < 1 || steps < 0) {
        ag_report(c->tape, "transformer reserve: %d rows and %d steps, expected >= 1 and >= 0",
                  rows, steps);
        return -1;
    }
    if (records(tf, c, "reserve") || ensure_rows(c, s, rows)) return -1;
    if (!s->self) return make_caches(tf, c, s, rows, s->steps + steps);
    for (int i = 0; i < tf->base.dec_layers; i++)
        if (nn_kv_cache_reserve(&s->self[i], c->tape, rows, s->steps + steps) ||
            nn_kv_cache_reserve(&s->cross[i], c->tape, rows, s->Ts))
            return -1;
    return 0;
}

/* The encoder's rows and the cross caches follow the source, moved only where a row's source
 * changes; the self caches follow the row. */
static int tf_select(const zoo_model *m, const nn_ctx *c, void *state, const int32_t *rows, int n) {
    const zoo_transformer *tf = (const zoo_transformer *)m;
    zoo_tf_state *s = state;
    ag_tape *t = c->tape;
    if (!s || records(tf, c, "select") || nn_rows_check(t, "transformer select", rows, n, s->B) ||
        ensure_rows(c, s, n))
        return -1;
    const size_t I = sizeof(int32_t), enc = sizeof(ag_real) * s->Ts * (size_t)s->enc_out->shape[2];
    bool *same = ag_tape_alloc(t, sizeof *same * (size_t)n); /* rows whose source stays */
    if (!same) return -1;
    nn_rows_same_source(s->src_row, s->B, rows, n, same);
    if (nn_rows_gather(t, s->enc_out->data, enc, enc, rows, n, same) ||
        nn_rows_gather(t, s->enc_valid, I, I, rows, n, same) ||
        nn_rows_gather(t, s->src_row, I, I, rows, n, same))
        return -1;
    for (int i = 0; s->self && i < tf->base.dec_layers; i++)
        if (nn_kv_cache_select(&s->self[i], t, rows, n, NULL) ||
            nn_kv_cache_select(&s->cross[i], t, rows, n, same))
            return -1;
    s->B = n;
    set_enc_rows(s, s->enc_out->data);
    return 0;
}

/* One token through decoder block i: x (B, 1, H) -> (B, 1, H). The self-attention appends the
 * token's key and value to the block's cache and attends to all of it; the cross-attention
 * attends to the cached projections of the encoder outputs. The same computation as
 * zoo_decoder_block_forward's for this position. */
static ag_tensor *block_step(const zoo_decoder_block *b, const nn_ctx *c, zoo_tf_state *s, int i,
                             ag_tensor *x, ag_tensor **self_w, ag_tensor **cross_w) {
    ag_tensor *y = zoo_addnorm_forward(&b->addnorm1, c, x,
                                       zoo_mha_step(&b->attention1, c, &s->self[i], x, self_w));
    ag_tensor *z = zoo_addnorm_forward(
        &b->addnorm2, c, y,
        zoo_mha_cache_attend(&b->attention2, c, &s->cross[i], y, s->enc_valid, 1, cross_w));
    return zoo_addnorm_forward(&b->addnorm3, c, z, zoo_ffn_forward(&b->ffn, c, z));
}

/* Room for this step's keys and values, made before the step's tape mark (what is allocated
 * after it is freed with the step's intermediates): the caches at the first step, twice the
 * positions when full. A step that failed halfway appended to some blocks only: undone. */
static int step_room(const zoo_transformer *tf, const nn_ctx *c, zoo_tf_state *s) {
    if (!s->self) return make_caches(tf, c, s, s->B, 16);
    for (int i = 0; i < tf->base.dec_layers; i++) {
        nn_kv_cache *kv = &s->self[i];
        if (nn_kv_cache_truncate(kv, c->tape, s->steps) ||
            (kv->t_cap == s->steps &&
             nn_kv_cache_reserve(kv, c->tape, s->B, kv->t_cap ? 2 * kv->t_cap : 16)))
            return -1;
    }
    return 0;
}

static ag_tensor *tf_step(const zoo_model *m, const nn_ctx *c, void *state, const int32_t *tokens,
                          int B, const zoo_attn_trace *trace) {
    const zoo_transformer *tf = (const zoo_transformer *)m;
    zoo_tf_state *s = state;
    if (!s) return NULL;
    if (B != s->B)
        return ag_report(c->tape, "transformer step: batch %d, the state has %d rows", B, s->B);
    if (records(tf, c, "step") || step_room(tf, c, s)) return NULL;
    /* without a trace, each block's intermediates are dropped once its output is made */
    ag_tensor *held = trace ? NULL : ag_tensor_new(c->tape, AG_SHAPE(B, 1, tf->cfg.hiddens));
    const ag_tape_pos mark = ag_tape_mark(c->tape);
    int pos = tf->cfg.d2l_step_positions ? 0 : s->steps;
    ag_tensor *x = embed(tf, &tf->dec_embedding, c, tokens, B, 1, pos);
    if (!trace) x = settle(c->tape, mark, held, x);
    for (int i = 0; i < tf->base.dec_layers && x; i++) {
        x = block_step(&tf->dec[i], c, s, i, x,
                       trace && trace->dec_self ? &trace->dec_self[i] : NULL,
                       trace && trace->dec_cross ? &trace->dec_cross[i] : NULL);
        if (!trace) x = settle(c->tape, mark, held, x);
    }
    ag_tensor *logits = nn_linear_forward(&tf->dense, c, x);
    if (logits) s->steps++;
    return logits;
}

/* ---- the model (zoo/models/seq2seq.h) ---- */

static int tf_attn_heads(const zoo_model *m, zoo_attn_kind kind) {
    (void)kind; /* all three kinds exist, with cfg.heads heads */
    return ((const zoo_transformer *)m)->cfg.heads;
}

static void tf_free(zoo_model *m) {
    zoo_transformer_free((zoo_transformer *)m);
    nn_params_free(m->ps);
    free(m);
}

/* The shared matrix under its other two names (cfg.share_embeddings). */
static int tf_tied(const zoo_model *m, const char **names, ag_tensor **params, int max) {
    const zoo_transformer *tf = (const zoo_transformer *)m;
    static const char *const other[] = {"decoder.embedding.weight", "decoder.dense.weight"};
    int n = tf->cfg.share_embeddings ? (max < 2 ? max : 2) : 0;
    for (int i = 0; i < n; i++) {
        names[i] = other[i];
        params[i] = tf->enc_embedding.weight;
    }
    return n;
}

static bool tf_one_vocab(const void *config) {
    return ((const zoo_transformer_cfg *)config)->share_embeddings;
}

static const zoo_model_ops tf_ops = {.encode = tf_encode,
                                     .decode = tf_decode,
                                     .decode_features = tf_decode_features,
                                     .step = tf_step,
                                     .select = tf_select,
                                     .reserve = tf_reserve,
                                     .pad_free = true,
                                     .attn_heads = tf_attn_heads,
                                     .tied = tf_tied,
                                     .free = tf_free};

static zoo_model *tf_create(const void *config, int src_vocab, int tgt_vocab) {
    zoo_transformer *tf = calloc(1, sizeof *tf);
    nn_params *ps = nn_params_new();
    if (!tf || !ps) {
        free(tf);
        nn_params_free(ps);
        ag_error("transformer: out of memory");
        return NULL;
    }
    zoo_transformer_cfg cfg = *(const zoo_transformer_cfg *)config;
    cfg.src_vocab = src_vocab;
    cfg.tgt_vocab = tgt_vocab;
    if (zoo_transformer_init(tf, ps, &cfg)) {
        tf_free(&tf->base);
        return NULL;
    }
    return &tf->base;
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
    {"ffn-hiddens", ZOO_INT, F(ffn_hiddens), 1, 65536, "hidden width of the position-wise FFN",
     NULL},
    {"heads", ZOO_INT, F(heads), 1, 256, "attention heads (must divide --hiddens)", NULL},
    {"layers", ZOO_INT, F(layers), 1, 64,
     "blocks in the encoder, and in the decoder unless --dec-layers", NULL},
    {"dropout", ZOO_REAL, F(dropout), 0, 0.99, "dropout probability", NULL},
    {"max-len", ZOO_INT, F(max_len), 1, 100000, "positional-encoding table length", NULL},
    {"d2l-step-positions", ZOO_BOOL, F(d2l_step_positions), 0, 1,
     "1: decode steps add P[0] at every step, as d2l's predict (0: true positions)", NULL},
    {"embed-std", ZOO_REAL, F(embed_std), 0, 100,
     "embeddings drawn from N(0, std^2) (0: N(0, 1), PyTorch's nn.Embedding)", NULL},
    {"share-embeddings", ZOO_BOOL, F(share_embeddings), 0, 1,
     "1: one matrix for both embeddings and the output layer (needs --vocab subword "
     "--vocab-share joint; --embed-std about 1 / sqrt(--hiddens))",
     NULL},
    {"dec-layers", ZOO_INT, F(dec_layers), 0, 64,
     "blocks in the decoder (0: --layers; fewer decode faster)", NULL},
};
#undef F

const zoo_model_kind zoo_transformer_kind = {
    .name = "transformer",
    .program = "transformer_nmt",
    .config = tf_fields,
    .n_config = sizeof tf_fields / sizeof *tf_fields,
    .n_first = 7, /* --embed-std, --share-embeddings and --dec-layers came later */
    .config_size = sizeof(zoo_transformer_cfg),
    .defaults = &zoo_transformer_default_cfg,
    .epochs = 200,
    .lr = 0.005,
    .create = tf_create,
    .check_steps = tf_check_steps,
    .one_vocab = tf_one_vocab,
};
