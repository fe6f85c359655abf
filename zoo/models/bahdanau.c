/* bahdanau.c -- d2l's Seq2SeqEncoder and Seq2SeqAttentionDecoder (d2l 1.0 sections 10.7 and
 * 11.4); math, shapes and names in zoo/models/bahdanau.h. */
#include "zoo/models/bahdanau.h"

#include "autograd/ag_op.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

const zoo_bahdanau_cfg zoo_bahdanau_default_cfg = {
    .embed = 32, .hiddens = 32, .layers = 2, .dropout = 0.1, .cell = ZOO_CELL_GRU};

zoo_bahdanau_cfg zoo_bahdanau_defaults(int src_vocab, int tgt_vocab) {
    zoo_bahdanau_cfg c = zoo_bahdanau_default_cfg;
    c.src_vocab = src_vocab;
    c.tgt_vocab = tgt_vocab;
    return c;
}

/* ---- decoder ---- */

int zoo_seq2seq_attn_decoder_init(zoo_seq2seq_attn_decoder *d, nn_params *ps, const char *prefix,
                                  int vocab, int embed, int hiddens, int layers, double dropout) {
    return zoo_seq2seq_attn_decoder_init_cell(d, ps, prefix, ZOO_CELL_GRU, vocab, embed, hiddens,
                                              layers, dropout);
}

int zoo_seq2seq_attn_decoder_init_cell(zoo_seq2seq_attn_decoder *d, nn_params *ps,
                                       const char *prefix, zoo_cell cell, int vocab, int embed,
                                       int hiddens, int layers, double dropout) {
    char p[NN_NAME_MAX];
    memset(d, 0, sizeof *d);
    d->cell = cell;
    d->vocab = vocab;
    d->embed = embed;
    d->hiddens = hiddens;
    d->layers = layers;
    if (zoo_additive_attention_init(&d->attention, ps, nn_join(p, sizeof p, prefix, "attention"),
                                    hiddens, hiddens, hiddens, dropout) ||
        nn_embedding_init(&d->embedding, ps, nn_join(p, sizeof p, prefix, "embedding"), vocab,
                          embed) ||
        zoo_rnn_init(&d->rnn, ps, nn_join(p, sizeof p, prefix, "rnn"), cell, embed + hiddens,
                     hiddens, layers, dropout))
        return -1;
    return nn_linear_init(&d->dense, ps, nn_join(p, sizeof p, prefix, "dense"), hiddens, vocab,
                          true);
}

zoo_bahdanau_state *zoo_seq2seq_attn_decoder_init_state(const zoo_seq2seq_attn_decoder *d,
                                                        const nn_ctx *c, ag_tensor *enc_outputs,
                                                        ag_tensor *enc_state,
                                                        const int32_t *enc_valid) {
    return zoo_seq2seq_attn_decoder_init_rnn_state(d, c, enc_outputs, enc_state, NULL, enc_valid);
}

zoo_bahdanau_state *zoo_seq2seq_attn_decoder_init_rnn_state(const zoo_seq2seq_attn_decoder *d,
                                                            const nn_ctx *c, ag_tensor *enc_outputs,
                                                            ag_tensor *enc_state, ag_tensor *enc_c,
                                                            const int32_t *enc_valid) {
    if (!d || !c || !enc_outputs || !enc_state) return NULL;
    ag_tape *t = c->tape;
    const int H = d->hiddens, L = d->layers;
    if (enc_outputs->ndim != 3 || enc_outputs->shape[2] != H || enc_state->ndim != 3 ||
        enc_state->shape[0] != L || enc_state->shape[1] != enc_outputs->shape[1] ||
        enc_state->shape[2] != H) {
        char so[64], ss[64];
        return ag_report(c->tape,
                         "attention decoder: encoder outputs %s and state %s, expected "
                         "(Ts, B, %d) and (%d, B, %d)",
                         ag_shape_str(enc_outputs, so, sizeof so),
                         ag_shape_str(enc_state, ss, sizeof ss), H, L, H);
    }
    const int Ts = enc_outputs->shape[0], B = enc_outputs->shape[1];
    /* Attended positions Tk = the longest valid length of the batch: every position j >= Tk is
     * masked in every row, its score -1e6 gives it a weight exp(-1e6 - max) = 0 exactly (a
     * valid score is bounded by sum |w_v|, far from -1e6), so it adds nothing to the context
     * nor to any gradient, and dropping it changes no result. A row of valid length 0 (uniform
     * weights over all Ts, as d2l) or no lengths: Tk = Ts. */
    int Tk = Ts;
    if (enc_valid) {
        int longest = 0;
        for (int b = 0; b < B; b++) {
            if (enc_valid[b] < 1) longest = Ts;
            else if (enc_valid[b] > longest) longest = enc_valid[b];
        }
        Tk = longest < Ts ? longest : Ts;
    }
    zoo_bahdanau_state *s = ag_tape_alloc(t, sizeof *s);
    int32_t *lens = enc_valid ? ag_tape_alloc(t, sizeof *lens * (size_t)B) : NULL;
    int32_t *src_row = ag_tape_alloc(t, sizeof *src_row * (size_t)B);
    if (!s || (enc_valid && !lens) || !src_row) return NULL;
    memset(s, 0, sizeof *s);
    for (int b = 0; b < B; b++) src_row[b] = b;
    s->src_row = src_row;
    if (enc_valid) memcpy(lens, enc_valid, sizeof *lens * (size_t)B);
    /* d2l: outputs.permute(1, 0, 2) -> (B, Ts, H), here its first Tk positions (B, Tk, H): the
     * keys and values of every step's attention */
    s->enc_out = ag_contiguous(t, ag_transpose(t, ag_narrow(t, enc_outputs, 0, 0, Tk), 0, 1));
    /* W_k enc_out (B, Tk, H): the key half of AdditiveAttention's features, step-independent */
    s->keys = zoo_additive_attention_keys(&d->attention, c, s->enc_out);
    if (!s->keys || zoo_rnn_state_split(&d->rnn, c, "attention decoder init_state", enc_state,
                                        enc_c, s->h0, s->c0))
        return NULL;
    memcpy(s->h, s->h0, sizeof s->h);
    memcpy(s->c, s->c0, sizeof s->c);
    s->enc_valid = lens;
    s->B = B;
    s->Ts = Ts;
    s->Tk = Tk;
    s->steps = 0;
    return s;
}

ag_tensor *zoo_seq2seq_attn_decoder_attend(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                           const zoo_bahdanau_state *s, ag_tensor *query,
                                           ag_tensor **weights_out) {
    if (weights_out) *weights_out = NULL;
    if (!d || !c || !s || !query) return NULL;
    ag_tape *t = c->tape;
    const int B = s->B, H = d->hiddens;
    if (query->ndim != 2 || query->shape[0] != B || query->shape[1] != H) {
        char sq[64];
        return ag_report(c->tape, "attention decoder: query %s, expected (B = %d, H = %d)",
                         ag_shape_str(query, sq, sizeof sq), B, H);
    }
    /* context (B, 1, H) = dropout(masked_softmax(w_v tanh(W_q q + keys))) enc_out, one query
     * (B, 1, H) per row against the precomputed keys (B, Tk, H) */
    ag_tensor *ctx =
        zoo_additive_attention_attend(&d->attention, c, ag_reshape(t, query, AG_SHAPE(B, 1, H)),
                                      s->keys, s->enc_out, s->enc_valid, 1, weights_out);
    return ag_reshape(t, ctx, AG_SHAPE(B, H));
}

/* One decoder step from h (L pointers (B, H), replaced by the new state; and cs, an LSTM's
 * cell states, likewise) with the embedded input token e (B, E): context = attention(h[L-1]);
 * x = concat(context, e) (B, H + E); RNN step. Returns the new h[L-1] (B, H), or NULL (h
 * unchanged). *w gets the attention weights. */
static ag_tensor *one_step(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                           const zoo_bahdanau_state *s, ag_tensor **h, ag_tensor **cs, ag_tensor *e,
                           ag_tensor **w) {
    ag_tensor *ctx = zoo_seq2seq_attn_decoder_attend(d, c, s, h[d->layers - 1], w);
    if (!ctx || !e) return NULL;
    ag_tensor *x = ag_concat(c->tape, 2, (ag_tensor *[]){ctx, e}, 1);
    return zoo_rnn_step(&d->rnn, c, x, h, cs);
}

static bool check_batch(const nn_ctx *c, const zoo_bahdanau_state *s, int B, int T,
                        const char *what) {
    if (B == s->B && T >= 1) return true;
    ag_report(c->tape,
              "attention decoder %s: batch %d and %d steps, expected the state's "
              "batch %d and >= 1 step",
              what, B, T, s->B);
    return false;
}

ag_tensor *zoo_seq2seq_attn_decoder_forward(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                            const zoo_bahdanau_state *s, const int32_t *dec_in,
                                            int B, int T, ag_tensor **weights) {
    /* dense on all outputs at once: (B, T, H) -> (B, T, V) */
    return d ? nn_linear_forward(&d->dense, c,
                                 zoo_seq2seq_attn_decoder_features(d, c, s, dec_in, B, T, weights))
             : NULL;
}

ag_tensor *zoo_seq2seq_attn_decoder_features(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                             const zoo_bahdanau_state *s, const int32_t *dec_in,
                                             int B, int T, ag_tensor **weights) {
    if (!d || !c || !s || !dec_in) return NULL;
    if (!check_batch(c, s, B, T, "forward")) return NULL;
    ag_tape *t = c->tape;
    const int E = d->embed, H = d->hiddens;
    const int32_t *ids = zoo_time_major(t, dec_in, B, T);
    ag_tensor **outs = ag_tape_alloc(t, sizeof *outs * (size_t)T);
    if (!ids || !outs) return NULL;
    /* all T embeddings at once: (T, B, E); step `i` reads the contiguous slice (B, E) */
    ag_tensor *emb = nn_embedding_forward(&d->embedding, c, ids, AG_SHAPE(T, B));
    if (!emb) return NULL;
    ag_tensor *h[ZOO_RNN_MAX_LAYERS], *cs[ZOO_RNN_MAX_LAYERS];
    memcpy(h, s->h0, sizeof h); /* from the encoder's state; s itself is not touched */
    memcpy(cs, s->c0, sizeof cs);
    for (int i = 0; i < T; i++) {
        ag_tensor *e = ag_reshape(t, ag_narrow(t, emb, 0, i, 1), AG_SHAPE(B, E));
        ag_tensor *out = one_step(d, c, s, h, cs, e, weights ? &weights[i] : NULL);
        outs[i] = ag_reshape(t, out, AG_SHAPE(B, 1, H));
        if (!outs[i]) return NULL;
    }
    return ag_concat(t, T, outs, 1); /* (B, T, H) */
}

/* True (reported) when c would record gradients for the decoder's parameters. */
static bool records(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c, const char *what) {
    if (!ag_op_wants_grad(c->tape, 1, &d->dense.weight)) return false;
    ag_report(c->tape, "attention decoder %s: inference only, turn the tape's recording off", what);
    return true;
}

ag_tensor *zoo_seq2seq_attn_decoder_step(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                         zoo_bahdanau_state *s, const int32_t *tokens, int B,
                                         ag_tensor **weights) {
    if (!d || !c || !s || !tokens) return NULL;
    if (!check_batch(c, s, B, 1, "step") || (s->rows_cap && records(d, c, "step"))) return NULL;
    ag_tape *t = c->tape;
    ag_tensor *h[ZOO_RNN_MAX_LAYERS], *cs[ZOO_RNN_MAX_LAYERS];
    memcpy(h, s->h, sizeof h);
    memcpy(cs, s->c, sizeof cs);
    ag_tensor *e = nn_embedding_forward(&d->embedding, c, tokens, AG_SHAPE(B)); /* (B, E) */
    ag_tensor *out = one_step(d, c, s, h, cs, e, weights);
    ag_tensor *logits =
        nn_linear_forward(&d->dense, c, ag_reshape(t, out, AG_SHAPE(B, 1, d->hiddens)));
    if (!logits) return NULL;
    if (s->rows_cap) { /* s->h (s->c) are leaves over the row buffers: copy the new state in */
        for (int k = 0; k < d->layers; k++)
            for (int w = 0; w < (d->cell == ZOO_CELL_LSTM ? 2 : 1); w++) {
                ag_tensor *v = ag_contiguous(t, w ? cs[k] : h[k]);
                if (!v) return NULL;
                memcpy((w ? s->c[k] : s->h[k])->data, v->data,
                       sizeof(ag_real) * (size_t)B * d->hiddens);
            }
    } else {
        memcpy(s->h, h, sizeof s->h);
        memcpy(s->c, cs, sizeof s->c);
    }
    s->steps++;
    return logits;
}

/* ---- rows for beam search ---- */

/* The state's tensors in buffer order (enc_out, keys, h0[L], then for an LSTM c0[L], then
 * h[L], then for an LSTM c[L]) into x; returns how many. The first src_tensors(d) of them
 * depend only on the row's source. */
static int state_tensors(const zoo_seq2seq_attn_decoder *d, zoo_bahdanau_state *s, ag_tensor ***x) {
    const bool lstm = d->cell == ZOO_CELL_LSTM;
    int n = 0;
    x[n++] = &s->enc_out;
    x[n++] = &s->keys;
    for (int k = 0; k < d->layers; k++) x[n++] = &s->h0[k];
    for (int k = 0; lstm && k < d->layers; k++) x[n++] = &s->c0[k];
    for (int k = 0; k < d->layers; k++) x[n++] = &s->h[k];
    for (int k = 0; lstm && k < d->layers; k++) x[n++] = &s->c[k];
    return n;
}
static int src_tensors(const zoo_seq2seq_attn_decoder *d) {
    return 2 + d->layers * (d->cell == ZOO_CELL_LSTM ? 2 : 1);
}

/* Row bytes of tensor i of state_tensors: Tk H reals for enc_out and keys, H for the states. */
static size_t row_bytes(const zoo_seq2seq_attn_decoder *d, const zoo_bahdanau_state *s, int i) {
    return sizeof(ag_real) * (size_t)d->hiddens * (i < 2 ? (size_t)s->Tk : 1);
}

/* Points the state's tensors to leaves over buf, each its B rows of a block of rows_cap. */
static void set_rows(const zoo_seq2seq_attn_decoder *d, zoo_bahdanau_state *s) {
    ag_tensor **x[2 + 4 * ZOO_RNN_MAX_LAYERS];
    const int n = state_tensors(d, s, x), H = d->hiddens, Tk = s->Tk;
    unsigned char *p = (unsigned char *)s->buf;
    for (int i = 0; i < n; i++) {
        if (i < 2) ag_leaf_init(&s->rows[i], (ag_real *)p, NULL, AG_SHAPE(s->B, Tk, H));
        else ag_leaf_init(&s->rows[i], (ag_real *)p, NULL, AG_SHAPE(s->B, H));
        *x[i] = &s->rows[i];
        p += row_bytes(d, s, i) * (size_t)s->rows_cap;
    }
}

/* Row buffers with room for `rows` rows (nothing to do when they have it): a new buffer on
 * c->tape holding a copy of every tensor's B rows. Returns 0 or -1. */
static int ensure_rows(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c, zoo_bahdanau_state *s,
                       int rows) {
    if (rows <= s->rows_cap) return 0;
    ag_tape *t = c->tape;
    ag_tensor **x[2 + 4 * ZOO_RNN_MAX_LAYERS];
    const int n = state_tensors(d, s, x), cap = rows > s->B ? rows : s->B;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) bytes += row_bytes(d, s, i) * (size_t)cap;
    unsigned char *buf = ag_tape_alloc(t, bytes), *p = buf;
    int32_t *lens = s->enc_valid ? nn_rows_move(t, s->enc_valid, sizeof *lens, sizeof *lens, s->B,
                                                cap, sizeof *lens)
                                 : NULL;
    int32_t *src = nn_rows_move(t, s->src_row, sizeof *src, sizeof *src, s->B, cap, sizeof *src);
    if (!buf || (s->enc_valid && !lens) || !src) return -1;
    for (int i = 0; i < n; i++) {
        ag_tensor *xi = ag_contiguous(t, *x[i]);
        if (!xi) return -1;
        memcpy(p, xi->data, row_bytes(d, s, i) * (size_t)s->B);
        p += row_bytes(d, s, i) * (size_t)cap;
    }
    s->buf = (ag_real *)buf;
    s->rows_cap = cap;
    s->enc_valid = lens;
    s->src_row = src;
    set_rows(d, s);
    return 0;
}

int zoo_seq2seq_attn_decoder_reserve(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                     zoo_bahdanau_state *s, int rows) {
    if (!d || !c || !s) return -1;
    if (rows < 1) {
        ag_report(c->tape, "attention decoder reserve: %d rows, expected >= 1", rows);
        return -1;
    }
    return records(d, c, "reserve") ? -1 : ensure_rows(d, c, s, rows);
}

int zoo_seq2seq_attn_decoder_select(const zoo_seq2seq_attn_decoder *d, const nn_ctx *c,
                                    zoo_bahdanau_state *s, const int32_t *rows, int n) {
    if (!d || !c || !s || !rows) return -1;
    if (records(d, c, "select")) return -1;
    if (n < 1) {
        ag_report(c->tape, "attention decoder select: %d rows, expected >= 1", n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (rows[i] < 0 || rows[i] >= s->B) {
            ag_report(c->tape, "attention decoder select: row %d is %d, the state has %d rows", i,
                      rows[i], s->B);
            return -1;
        }
    if (ensure_rows(d, c, s, n)) return -1;
    ag_tape *t = c->tape;
    ag_tensor **x[2 + 4 * ZOO_RNN_MAX_LAYERS];
    const int m = state_tensors(d, s, x);
    const size_t I = sizeof(int32_t);
    bool *same = ag_tape_alloc(t, sizeof *same * (size_t)n); /* rows whose source stays */
    if (!same) return -1;
    nn_rows_same_source(s->src_row, s->B, rows, n, same);
    for (int i = 0; i < m; i++) /* enc_out, keys and h0 follow the source, h the row */
        if (nn_rows_gather(t, (*x[i])->data, row_bytes(d, s, i), row_bytes(d, s, i), rows, n,
                           i < src_tensors(d) ? same : NULL))
            return -1;
    if ((s->enc_valid && nn_rows_gather(t, s->enc_valid, I, I, rows, n, same)) ||
        nn_rows_gather(t, s->src_row, I, I, rows, n, same))
        return -1;
    s->B = n;
    set_rows(d, s);
    return 0;
}

/* ---- the model ---- */

static void *bm_encode(const zoo_model *m, const nn_ctx *c, const int32_t *src,
                       const int32_t *src_len, int B, int Ts, const zoo_attn_trace *trace) {
    (void)trace; /* no encoder attention */
    const zoo_bahdanau *bm = (const zoo_bahdanau *)m;
    if (!bm || !c || !src || !src_len) return NULL;
    ag_tensor *h, *cs;
    ag_tensor *out = zoo_seq2seq_encoder_run(&bm->encoder, c, src, B, Ts, &h, &cs);
    return zoo_seq2seq_attn_decoder_init_rnn_state(&bm->decoder, c, out, h, cs, src_len);
}

static ag_tensor *bm_decode_features(const zoo_model *m, const nn_ctx *c, void *s,
                                     const int32_t *dec_in, int B, int T, const nn_linear **out) {
    const zoo_seq2seq_attn_decoder *d = &((const zoo_bahdanau *)m)->decoder;
    if (out) *out = &d->dense;
    return zoo_seq2seq_attn_decoder_features(d, c, s, dec_in, B, T, NULL);
}

static ag_tensor *bm_decode(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *dec_in,
                            int B, int T) {
    return zoo_seq2seq_attn_decoder_forward(&((const zoo_bahdanau *)m)->decoder, c, s, dec_in, B, T,
                                            NULL);
}

/* The decoder's step; trace (or NULL) receives its attention weights in dec_cross[0]. */
static ag_tensor *bm_step(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *tokens,
                          int B, const zoo_attn_trace *trace) {
    return zoo_seq2seq_attn_decoder_step(&((const zoo_bahdanau *)m)->decoder, c, s, tokens, B,
                                         trace && trace->dec_cross ? &trace->dec_cross[0] : NULL);
}

static int bm_select(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *rows, int n) {
    return zoo_seq2seq_attn_decoder_select(&((const zoo_bahdanau *)m)->decoder, c, s, rows, n);
}

static int bm_reserve(const zoo_model *m, const nn_ctx *c, void *s, int rows, int steps) {
    (void)steps; /* the state does not grow with the steps */
    return zoo_seq2seq_attn_decoder_reserve(&((const zoo_bahdanau *)m)->decoder, c, s, rows);
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

int zoo_bahdanau_init(zoo_bahdanau *bm, nn_params *ps, const zoo_bahdanau_cfg *cfg) {
    memset(bm, 0, sizeof *bm);
    bm->cfg = *cfg;
    /* one attention layer, the decoder's cross-attention, whatever the RNN's layers: none in
     * the encoder (zoo_model.layers 0), one in the decoder (dec_layers 1) */
    bm->base = (zoo_model){.ops = &bm_ops,
                           .kind = &zoo_bahdanau_kind,
                           .cfg = &bm->cfg,
                           .ps = ps,
                           .src_vocab = cfg->src_vocab,
                           .tgt_vocab = cfg->tgt_vocab,
                           .dec_layers = 1};
    const zoo_bahdanau_cfg *k = cfg;
    if (k->src_vocab < 1 || k->tgt_vocab < 1 || k->embed < 1 || k->hiddens < 1 || k->layers < 1 ||
        k->layers > ZOO_RNN_MAX_LAYERS || !(k->dropout >= 0 && k->dropout < 1) ||
        (k->cell != ZOO_CELL_GRU && k->cell != ZOO_CELL_LSTM))
        return nn_params_fail(ps,
                              "bahdanau: bad config (vocab %d/%d, embed %d, hiddens %d, layers "
                              "%d, dropout %g, cell %d): sizes must be >= 1, layers <= %d, "
                              "0 <= dropout < 1, cell gru (%d) or lstm (%d)",
                              k->src_vocab, k->tgt_vocab, k->embed, k->hiddens, k->layers,
                              k->dropout, k->cell, ZOO_RNN_MAX_LAYERS, ZOO_CELL_GRU, ZOO_CELL_LSTM);
    if (zoo_seq2seq_encoder_init_cell(&bm->encoder, ps, "encoder", (zoo_cell)k->cell, k->src_vocab,
                                      k->embed, k->hiddens, k->layers, k->dropout))
        return -1;
    return zoo_seq2seq_attn_decoder_init_cell(&bm->decoder, ps, "decoder", (zoo_cell)k->cell,
                                              k->tgt_vocab, k->embed, k->hiddens, k->layers,
                                              k->dropout);
}

zoo_bahdanau_state *zoo_bahdanau_encode(const zoo_bahdanau *bm, const nn_ctx *c, const int32_t *src,
                                        const int32_t *src_len, int B, int Ts) {
    return bm ? bm_encode(&bm->base, c, src, src_len, B, Ts, NULL) : NULL;
}

ag_tensor *zoo_bahdanau_decode(const zoo_bahdanau *bm, const nn_ctx *c, const zoo_bahdanau_state *s,
                               const int32_t *dec_in, int B, int T) {
    return bm ? zoo_seq2seq_attn_decoder_forward(&bm->decoder, c, s, dec_in, B, T, NULL) : NULL;
}

static zoo_model *bm_create(const void *config, int src_vocab, int tgt_vocab) {
    zoo_bahdanau *bm = calloc(1, sizeof *bm);
    nn_params *ps = nn_params_new();
    if (!bm || !ps) {
        free(bm);
        nn_params_free(ps);
        ag_error("bahdanau: out of memory");
        return NULL;
    }
    zoo_bahdanau_cfg cfg = *(const zoo_bahdanau_cfg *)config;
    cfg.src_vocab = src_vocab;
    cfg.tgt_vocab = tgt_vocab;
    if (zoo_bahdanau_init(bm, ps, &cfg)) {
        bm_free(&bm->base);
        return NULL;
    }
    return &bm->base;
}

#define F(field) offsetof(zoo_bahdanau_cfg, field)
static const zoo_field bm_fields[] = {
    {"embed-size", ZOO_INT, F(embed), 1, 4096, "token embedding size", NULL},
    {"hiddens", ZOO_INT, F(hiddens), 1, 4096, "GRU hidden size (also the attention's width)", NULL},
    {"layers", ZOO_INT, F(layers), 1, NN_GRU_MAX_LAYERS,
     "GRU layers in the encoder and in the decoder", NULL},
    {"dropout", ZOO_REAL, F(dropout), 0, 0.99,
     "dropout between GRU layers and on the attention weights", NULL},
    {"cell", ZOO_CHOICE, F(cell), 0, 0, "the recurrent cell of the encoder and the decoder",
     zoo_cell_names},
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
