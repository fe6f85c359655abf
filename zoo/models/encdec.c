/* encdec.c -- the GRU-or-LSTM RNN, d2l's Seq2SeqEncoder and its plain Seq2SeqDecoder (d2l 1.0
 * section 10.7); math, shapes and names in zoo/models/encdec.h. */
#include "zoo/models/encdec.h"

#include "autograd/ag_op.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const zoo_cell_names[] = {"gru", "lstm", NULL};

const char *zoo_cell_name(zoo_cell cell) {
    return cell == ZOO_CELL_GRU || cell == ZOO_CELL_LSTM ? zoo_cell_names[cell] : "?";
}

const int32_t *zoo_time_major(ag_tape *t, const int32_t *ids, int B, int T) {
    int32_t *tm = ag_tape_alloc(t, sizeof *tm * (size_t)B * T);
    if (tm)
        for (int b = 0; b < B; b++)
            for (int s = 0; s < T; s++) tm[(size_t)s * B + b] = ids[(size_t)b * T + s];
    return tm;
}

/* ---- the recurrent cell ---- */

int zoo_rnn_init(zoo_rnn *r, nn_params *ps, const char *prefix, zoo_cell cell, int input_size,
                 int hidden, int layers, double dropout) {
    memset(r, 0, sizeof *r);
    r->cell = cell;
    r->layers = layers;
    r->hidden = hidden;
    if (cell == ZOO_CELL_GRU)
        return nn_gru_init(&r->gru, ps, prefix, input_size, hidden, layers, dropout);
    if (cell == ZOO_CELL_LSTM)
        return nn_lstm_init(&r->lstm, ps, prefix, input_size, hidden, layers, dropout);
    return nn_params_fail(ps, "%s: unknown cell %d (gru %d, lstm %d)", prefix, (int)cell,
                          ZOO_CELL_GRU, ZOO_CELL_LSTM);
}

/* "(2, 4, 16)" or "(none)". */
static const char *shape_or_none(const ag_tensor *x, char *buf, size_t len) {
    if (!x) {
        snprintf(buf, len, "(none)");
        return buf;
    }
    return ag_shape_str(x, buf, len);
}

/* A GRU's state is h alone. Reports a c given to a GRU. */
static bool gru_state_ok(const zoo_rnn *r, const nn_ctx *c, const char *what, ag_tensor *h,
                         ag_tensor *cs) {
    if (r->cell != ZOO_CELL_GRU || !cs) return true;
    char sh[64], sc[64];
    ag_report(c->tape,
              "%s: state h %s and c %s given to a GRU, whose state is one tensor h "
              "[%d, B, %d] (an LSTM's state?)",
              what, shape_or_none(h, sh, sizeof sh), ag_shape_str(cs, sc, sizeof sc), r->layers,
              r->hidden);
    return false;
}

ag_tensor *zoo_rnn_forward(const zoo_rnn *r, const nn_ctx *c, ag_tensor *x, ag_tensor *h0,
                           ag_tensor *c0, ag_tensor **h_out, ag_tensor **c_out) {
    if (h_out) *h_out = NULL;
    if (c_out) *c_out = NULL;
    if (!r || !c || !x) return NULL;
    if (r->cell == ZOO_CELL_LSTM) return nn_lstm_forward(&r->lstm, c, x, h0, c0, h_out, c_out);
    if (!gru_state_ok(r, c, "zoo_rnn_forward", h0, c0)) return NULL;
    return nn_gru_forward(&r->gru, c, x, h0, h_out);
}

ag_tensor *zoo_rnn_step(const zoo_rnn *r, const nn_ctx *c, ag_tensor *x, ag_tensor **h,
                        ag_tensor **cs) {
    if (!r) return NULL;
    return r->cell == ZOO_CELL_LSTM ? nn_lstm_step(&r->lstm, c, x, h, cs)
                                    : nn_gru_step(&r->gru, c, x, h);
}

int zoo_rnn_state_split(const zoo_rnn *r, const nn_ctx *c, const char *what, ag_tensor *h,
                        ag_tensor *cs, ag_tensor **hp, ag_tensor **cp) {
    if (!r || !c || !h) return -1;
    if (r->cell == ZOO_CELL_GRU)
        return gru_state_ok(r, c, what, h, cs) ? nn_gru_state_split(&r->gru, c, h, hp) : -1;
    if (!cs) {
        char sh[64]; /* e.g. a GRU's state */
        ag_report(c->tape,
                  "%s: state h %s and c (none) given to an LSTM, whose state is two "
                  "tensors (h, c), each [%d, B, %d] (a GRU's state?)",
                  what, ag_shape_str(h, sh, sizeof sh), r->layers, r->hidden);
        return -1;
    }
    if (cs->ndim != h->ndim || memcmp(cs->shape, h->shape, sizeof(int) * (size_t)h->ndim)) {
        char sh[64], sc[64];
        ag_report(c->tape,
                  "%s: state h %s and c %s given to an LSTM, expected two tensors of "
                  "one shape [%d, B, %d]",
                  what, ag_shape_str(h, sh, sizeof sh), ag_shape_str(cs, sc, sizeof sc), r->layers,
                  r->hidden);
        return -1;
    }
    if (nn_lstm_state_split(&r->lstm, c, h, hp) || nn_lstm_state_split(&r->lstm, c, cs, cp))
        return -1;
    return 0;
}

/* (L, B, H) from the pieces, of h or of c. */
static ag_tensor *rnn_join(const zoo_rnn *r, const nn_ctx *c, ag_tensor *const *parts) {
    return r->cell == ZOO_CELL_LSTM ? nn_lstm_state_join(&r->lstm, c, parts)
                                    : nn_gru_state_join(&r->gru, c, parts);
}

/* ---- encoder ---- */

int zoo_seq2seq_encoder_init_cell(zoo_seq2seq_encoder *e, nn_params *ps, const char *prefix,
                                  zoo_cell cell, int vocab, int embed, int hiddens, int layers,
                                  double dropout) {
    char p[NN_NAME_MAX];
    memset(e, 0, sizeof *e);
    if (nn_embedding_init(&e->embedding, ps, nn_join(p, sizeof p, prefix, "embedding"), vocab,
                          embed))
        return -1;
    return zoo_rnn_init(&e->rnn, ps, nn_join(p, sizeof p, prefix, "rnn"), cell, embed, hiddens,
                        layers, dropout);
}

int zoo_seq2seq_encoder_init(zoo_seq2seq_encoder *e, nn_params *ps, const char *prefix, int vocab,
                             int embed, int hiddens, int layers, double dropout) {
    return zoo_seq2seq_encoder_init_cell(e, ps, prefix, ZOO_CELL_GRU, vocab, embed, hiddens, layers,
                                         dropout);
}

ag_tensor *zoo_seq2seq_encoder_run(const zoo_seq2seq_encoder *e, const nn_ctx *c,
                                   const int32_t *src, int B, int T, ag_tensor **h,
                                   ag_tensor **cs) {
    if (h) *h = NULL;
    if (cs) *cs = NULL;
    if (!e || !c || !src) return NULL;
    if (B < 1 || T < 1)
        return ag_report(c->tape, "seq2seq encoder: source (B = %d, T = %d), expected >= 1", B, T);
    const int32_t *ids = zoo_time_major(c->tape, src, B, T);
    if (!ids) return NULL;
    /* (T, B, E) -> outputs (T, B, H), state (L, B, H); the padded positions go through too */
    ag_tensor *x = nn_embedding_forward(&e->embedding, c, ids, AG_SHAPE(T, B));
    return zoo_rnn_forward(&e->rnn, c, x, NULL, NULL, h, cs);
}

ag_tensor *zoo_seq2seq_encoder_forward(const zoo_seq2seq_encoder *e, const nn_ctx *c,
                                       const int32_t *src, int B, int T, ag_tensor **state) {
    if (state) *state = NULL;
    if (e && c && e->rnn.cell != ZOO_CELL_GRU)
        return ag_report(c->tape, "seq2seq encoder: an LSTM's state is (h, c): use "
                                  "zoo_seq2seq_encoder_run");
    return zoo_seq2seq_encoder_run(e, c, src, B, T, state, NULL);
}

/* ---- decoder ---- */

int zoo_seq2seq_decoder_init(zoo_seq2seq_decoder *d, nn_params *ps, const char *prefix,
                             zoo_cell cell, int vocab, int embed, int hiddens, int layers,
                             double dropout) {
    char p[NN_NAME_MAX];
    memset(d, 0, sizeof *d);
    *d = (zoo_seq2seq_decoder){
        .cell = cell, .vocab = vocab, .embed = embed, .hiddens = hiddens, .layers = layers};
    /* the book's GRU reads the context after the embedding: E + H inputs */
    const int in = cell == ZOO_CELL_GRU ? embed + hiddens : embed;
    if (nn_embedding_init(&d->embedding, ps, nn_join(p, sizeof p, prefix, "embedding"), vocab,
                          embed) ||
        zoo_rnn_init(&d->rnn, ps, nn_join(p, sizeof p, prefix, "rnn"), cell, in, hiddens, layers,
                     dropout))
        return -1;
    return nn_linear_init(&d->dense, ps, nn_join(p, sizeof p, prefix, "dense"), hiddens, vocab,
                          true);
}

zoo_encdec_state *zoo_seq2seq_decoder_init_state(const zoo_seq2seq_decoder *d, const nn_ctx *c,
                                                 ag_tensor *enc_h, ag_tensor *enc_c) {
    if (!d || !c || !enc_h) return NULL;
    ag_tape *t = c->tape;
    zoo_encdec_state *s = ag_tape_alloc(t, sizeof *s);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    if (zoo_rnn_state_split(&d->rnn, c, "seq2seq decoder init_state", enc_h, enc_c, s->h0, s->c0))
        return NULL;
    const int B = enc_h->shape[1];
    if (!(s->src_row = ag_tape_alloc(t, sizeof *s->src_row * (size_t)B))) return NULL;
    for (int b = 0; b < B; b++) s->src_row[b] = b;
    memcpy(s->h, s->h0, sizeof s->h);
    memcpy(s->c, s->c0, sizeof s->c);
    s->h0_all = enc_h;
    s->c0_all = enc_c;
    s->B = B;
    return s;
}

static bool check_batch(const nn_ctx *c, const zoo_encdec_state *s, int B, int T,
                        const char *what) {
    if (B == s->B && T >= 1) return true;
    ag_report(c->tape,
              "seq2seq decoder %s: batch %d and %d steps, expected the state's "
              "batch %d and >= 1 step",
              what, B, T, s->B);
    return false;
}

ag_tensor *zoo_seq2seq_decoder_forward(const zoo_seq2seq_decoder *d, const nn_ctx *c,
                                       const zoo_encdec_state *s, const int32_t *dec_in, int B,
                                       int T) {
    /* dense on all outputs at once: (B, T, H) -> (B, T, V) */
    return d ? nn_linear_forward(&d->dense, c, zoo_seq2seq_decoder_features(d, c, s, dec_in, B, T))
             : NULL;
}

ag_tensor *zoo_seq2seq_decoder_features(const zoo_seq2seq_decoder *d, const nn_ctx *c,
                                        const zoo_encdec_state *s, const int32_t *dec_in, int B,
                                        int T) {
    if (!d || !c || !s || !dec_in) return NULL;
    if (!check_batch(c, s, B, T, "forward")) return NULL;
    ag_tape *t = c->tape;
    const int H = d->hiddens;
    const int32_t *ids = zoo_time_major(t, dec_in, B, T);
    if (!ids) return NULL;
    ag_tensor *x = nn_embedding_forward(&d->embedding, c, ids, AG_SHAPE(T, B)); /* (T, B, E) */
    if (d->cell == ZOO_CELL_GRU) {
        /* d2l: context = state[-1].repeat(T, 1, 1); X = cat((X, context), 2) -> (T, B, E + H) */
        ag_tensor *ctx = ag_reshape(t, s->h0[d->layers - 1], AG_SHAPE(1, B, H));
        x = ag_concat(t, 2, (ag_tensor *[]){x, ag_repeat_interleave(t, ctx, T, 0)}, 2);
    }
    /* the encoder's state; once the rows moved (select), joined from the pieces */
    ag_tensor *h0 = s->h0_all ? s->h0_all : rnn_join(&d->rnn, c, s->h0);
    ag_tensor *c0 = d->cell != ZOO_CELL_LSTM ? NULL
                    : s->c0_all              ? s->c0_all
                                             : rnn_join(&d->rnn, c, s->c0);
    if (!x || !h0 || (d->cell == ZOO_CELL_LSTM && !c0)) return NULL;
    ag_tensor *out = zoo_rnn_forward(&d->rnn, c, x, h0, c0, NULL, NULL); /* (T, B, H) */
    return ag_contiguous(t, ag_transpose(t, out, 0, 1));                 /* (B, T, H) */
}

/* True (reported) when c would record gradients for the decoder's parameters. */
static bool records(const zoo_seq2seq_decoder *d, const nn_ctx *c, const char *what) {
    if (!ag_op_wants_grad(c->tape, 1, &d->dense.weight)) return false;
    ag_report(c->tape, "seq2seq decoder %s: inference only, turn the tape's recording off", what);
    return true;
}

ag_tensor *zoo_seq2seq_decoder_step(const zoo_seq2seq_decoder *d, const nn_ctx *c,
                                    zoo_encdec_state *s, const int32_t *tokens, int B) {
    if (!d || !c || !s || !tokens) return NULL;
    if (!check_batch(c, s, B, 1, "step") || (s->rows_cap && records(d, c, "step"))) return NULL;
    ag_tape *t = c->tape;
    const int L = d->layers, H = d->hiddens;
    ag_tensor *h[ZOO_RNN_MAX_LAYERS], *cs[ZOO_RNN_MAX_LAYERS];
    memcpy(h, s->h, sizeof h);
    memcpy(cs, s->c, sizeof cs);
    ag_tensor *x = nn_embedding_forward(&d->embedding, c, tokens, AG_SHAPE(B)); /* (B, E) */
    if (x && d->cell == ZOO_CELL_GRU) /* (B, E + H): the context stays the encoder's */
        x = ag_concat(t, 2, (ag_tensor *[]){x, s->h0[L - 1]}, 1);
    ag_tensor *out = x ? zoo_rnn_step(&d->rnn, c, x, h, cs) : NULL;
    ag_tensor *logits = nn_linear_forward(&d->dense, c, ag_reshape(t, out, AG_SHAPE(B, 1, H)));
    if (!logits) return NULL;
    if (s->rows_cap) { /* s->h (and s->c) are leaves over the row buffers: copy the new state in */
        for (int k = 0; k < L; k++)
            for (int w = 0; w < (d->cell == ZOO_CELL_LSTM ? 2 : 1); w++) {
                ag_tensor *v = ag_contiguous(t, w ? cs[k] : h[k]);
                if (!v) return NULL;
                memcpy((w ? s->c[k] : s->h[k])->data, v->data, sizeof(ag_real) * (size_t)B * H);
            }
    } else {
        memcpy(s->h, h, sizeof s->h);
        memcpy(s->c, cs, sizeof s->c);
    }
    s->steps++;
    return logits;
}

/* ---- rows for beam search ---- */

/* The state's pieces in buffer order (h0[L], c0[L] for an LSTM, h[L], c[L] for an LSTM) into
 * x; *n_src gets how many of them follow the source (h0, c0). Returns how many. */
static int state_tensors(const zoo_seq2seq_decoder *d, zoo_encdec_state *s, ag_tensor ***x,
                         int *n_src) {
    const int L = d->layers;
    const bool lstm = d->cell == ZOO_CELL_LSTM;
    int n = 0;
    for (int k = 0; k < L; k++) x[n++] = &s->h0[k];
    for (int k = 0; lstm && k < L; k++) x[n++] = &s->c0[k];
    *n_src = n;
    for (int k = 0; k < L; k++) x[n++] = &s->h[k];
    for (int k = 0; lstm && k < L; k++) x[n++] = &s->c[k];
    return n;
}

static void set_rows(const zoo_seq2seq_decoder *d, zoo_encdec_state *s) {
    ag_tensor **x[4 * ZOO_RNN_MAX_LAYERS];
    int n_src;
    const int n = state_tensors(d, s, x, &n_src), H = d->hiddens;
    for (int i = 0; i < n; i++) {
        ag_leaf_init(&s->rows[i], s->buf + (size_t)i * s->rows_cap * H, NULL, AG_SHAPE(s->B, H));
        *x[i] = &s->rows[i];
    }
}

static int ensure_rows(const zoo_seq2seq_decoder *d, const nn_ctx *c, zoo_encdec_state *s,
                       int rows) {
    if (rows <= s->rows_cap) return 0;
    ag_tape *t = c->tape;
    ag_tensor **x[4 * ZOO_RNN_MAX_LAYERS];
    int n_src;
    const int n = state_tensors(d, s, x, &n_src), cap = rows > s->B ? rows : s->B, H = d->hiddens;
    const size_t row = sizeof(ag_real) * (size_t)H;
    ag_real *buf = ag_tape_alloc(t, row * (size_t)cap * n);
    int32_t *src = nn_rows_move(t, s->src_row, sizeof *src, sizeof *src, s->B, cap, sizeof *src);
    if (!buf || !src) return -1;
    for (int i = 0; i < n; i++) {
        ag_tensor *xi = ag_contiguous(t, *x[i]);
        if (!xi) return -1;
        memcpy(buf + (size_t)i * cap * H, xi->data, row * (size_t)s->B);
    }
    s->buf = buf;
    s->rows_cap = cap;
    s->src_row = src;
    s->h0_all = s->c0_all = NULL; /* the pieces are the truth from now on */
    set_rows(d, s);
    return 0;
}

int zoo_seq2seq_decoder_reserve(const zoo_seq2seq_decoder *d, const nn_ctx *c, zoo_encdec_state *s,
                                int rows) {
    if (!d || !c || !s) return -1;
    if (rows < 1) {
        ag_report(c->tape, "seq2seq decoder reserve: %d rows, expected >= 1", rows);
        return -1;
    }
    return records(d, c, "reserve") ? -1 : ensure_rows(d, c, s, rows);
}

int zoo_seq2seq_decoder_select(const zoo_seq2seq_decoder *d, const nn_ctx *c, zoo_encdec_state *s,
                               const int32_t *rows, int n) {
    if (!d || !c || !s || !rows) return -1;
    if (records(d, c, "select")) return -1;
    if (n < 1) {
        ag_report(c->tape, "seq2seq decoder select: %d rows, expected >= 1", n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (rows[i] < 0 || rows[i] >= s->B) {
            ag_report(c->tape, "seq2seq decoder select: row %d is %d, the state has %d rows", i,
                      rows[i], s->B);
            return -1;
        }
    if (ensure_rows(d, c, s, n)) return -1;
    ag_tape *t = c->tape;
    ag_tensor **x[4 * ZOO_RNN_MAX_LAYERS];
    int n_src;
    const int m = state_tensors(d, s, x, &n_src);
    const size_t row = sizeof(ag_real) * (size_t)d->hiddens, I = sizeof(int32_t);
    bool *same = ag_tape_alloc(t, sizeof *same * (size_t)n); /* rows whose source stays */
    if (!same) return -1;
    nn_rows_same_source(s->src_row, s->B, rows, n, same);
    for (int i = 0; i < m; i++) /* h0, c0 follow the source, h, c the row */
        if (nn_rows_gather(t, (*x[i])->data, row, row, rows, n, i < n_src ? same : NULL)) return -1;
    if (nn_rows_gather(t, s->src_row, I, I, rows, n, same)) return -1;
    s->B = n;
    set_rows(d, s);
    return 0;
}

/* ---- the model ---- */

const zoo_encdec_cfg zoo_encdec_default_cfg = {
    .cell = ZOO_CELL_LSTM, .embed = 32, .hiddens = 32, .layers = 2, .dropout = 0.1};

zoo_encdec_cfg zoo_encdec_defaults(int src_vocab, int tgt_vocab) {
    zoo_encdec_cfg c = zoo_encdec_default_cfg;
    c.src_vocab = src_vocab;
    c.tgt_vocab = tgt_vocab;
    return c;
}

static void *ed_encode(const zoo_model *m, const nn_ctx *c, const int32_t *src,
                       const int32_t *src_len, int B, int Ts, const zoo_attn_trace *trace) {
    (void)trace;   /* no attention */
    (void)src_len; /* as d2l, the encoder runs over the padding too */
    const zoo_encdec *ed = (const zoo_encdec *)m;
    if (!ed || !c || !src) return NULL;
    ag_tensor *h, *cs;
    if (!zoo_seq2seq_encoder_run(&ed->encoder, c, src, B, Ts, &h, &cs)) return NULL;
    return zoo_seq2seq_decoder_init_state(&ed->decoder, c, h, cs);
}

static ag_tensor *ed_decode(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *dec_in,
                            int B, int T) {
    return zoo_seq2seq_decoder_forward(&((const zoo_encdec *)m)->decoder, c, s, dec_in, B, T);
}

static ag_tensor *ed_decode_features(const zoo_model *m, const nn_ctx *c, void *s,
                                     const int32_t *dec_in, int B, int T, const nn_linear **out) {
    const zoo_seq2seq_decoder *d = &((const zoo_encdec *)m)->decoder;
    if (out) *out = &d->dense;
    return zoo_seq2seq_decoder_features(d, c, s, dec_in, B, T);
}

static ag_tensor *ed_step(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *tokens,
                          int B, const zoo_attn_trace *trace) {
    (void)trace; /* no attention */
    return zoo_seq2seq_decoder_step(&((const zoo_encdec *)m)->decoder, c, s, tokens, B);
}

static int ed_select(const zoo_model *m, const nn_ctx *c, void *s, const int32_t *rows, int n) {
    return zoo_seq2seq_decoder_select(&((const zoo_encdec *)m)->decoder, c, s, rows, n);
}

static int ed_reserve(const zoo_model *m, const nn_ctx *c, void *s, int rows, int steps) {
    (void)steps; /* the state does not grow with the steps */
    return zoo_seq2seq_decoder_reserve(&((const zoo_encdec *)m)->decoder, c, s, rows);
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

int zoo_encdec_init(zoo_encdec *ed, nn_params *ps, const zoo_encdec_cfg *cfg) {
    memset(ed, 0, sizeof *ed);
    ed->cfg = *cfg;
    ed->base = (zoo_model){.ops = &ed_ops,
                           .kind = &zoo_encdec_kind,
                           .cfg = &ed->cfg,
                           .ps = ps,
                           .src_vocab = cfg->src_vocab,
                           .tgt_vocab = cfg->tgt_vocab}; /* no attention: layers, dec_layers 0 */
    const zoo_encdec_cfg *k = cfg;
    if (k->src_vocab < 1 || k->tgt_vocab < 1 || k->embed < 1 || k->hiddens < 1 || k->layers < 1 ||
        k->layers > ZOO_RNN_MAX_LAYERS || !(k->dropout >= 0 && k->dropout < 1) ||
        (k->cell != ZOO_CELL_GRU && k->cell != ZOO_CELL_LSTM))
        return nn_params_fail(ps,
                              "seq2seq: bad config (vocab %d/%d, cell %d, embed %d, hiddens %d, "
                              "layers %d, dropout %g): sizes must be >= 1, layers <= %d, "
                              "0 <= dropout < 1, cell gru (%d) or lstm (%d)",
                              k->src_vocab, k->tgt_vocab, k->cell, k->embed, k->hiddens, k->layers,
                              k->dropout, ZOO_RNN_MAX_LAYERS, ZOO_CELL_GRU, ZOO_CELL_LSTM);
    if (zoo_seq2seq_encoder_init_cell(&ed->encoder, ps, "encoder", (zoo_cell)k->cell, k->src_vocab,
                                      k->embed, k->hiddens, k->layers, k->dropout))
        return -1;
    return zoo_seq2seq_decoder_init(&ed->decoder, ps, "decoder", (zoo_cell)k->cell, k->tgt_vocab,
                                    k->embed, k->hiddens, k->layers, k->dropout);
}

zoo_encdec_state *zoo_encdec_encode(const zoo_encdec *ed, const nn_ctx *c, const int32_t *src,
                                    int B, int Ts) {
    return ed ? ed_encode(&ed->base, c, src, NULL, B, Ts, NULL) : NULL;
}

ag_tensor *zoo_encdec_decode(const zoo_encdec *ed, const nn_ctx *c, const zoo_encdec_state *s,
                             const int32_t *dec_in, int B, int T) {
    return ed ? zoo_seq2seq_decoder_forward(&ed->decoder, c, s, dec_in, B, T) : NULL;
}

static zoo_model *ed_create(const void *config, int src_vocab, int tgt_vocab) {
    zoo_encdec *ed = calloc(1, sizeof *ed);
    nn_params *ps = nn_params_new();
    if (!ed || !ps) {
        free(ed);
        nn_params_free(ps);
        ag_error("seq2seq: out of memory");
        return NULL;
    }
    zoo_encdec_cfg cfg = *(const zoo_encdec_cfg *)config;
    cfg.src_vocab = src_vocab;
    cfg.tgt_vocab = tgt_vocab;
    if (zoo_encdec_init(ed, ps, &cfg)) {
        ed_free(&ed->base);
        return NULL;
    }
    return &ed->base;
}

#define F(field) offsetof(zoo_encdec_cfg, field)
static const zoo_field ed_fields[] = {
    {"embed-size", ZOO_INT, F(embed), 1, 4096, "token embedding size", NULL},
    {"hiddens", ZOO_INT, F(hiddens), 1, 4096, "RNN hidden size", NULL},
    {"layers", ZOO_INT, F(layers), 1, ZOO_RNN_MAX_LAYERS,
     "RNN layers in the encoder and in the decoder", NULL},
    {"dropout", ZOO_REAL, F(dropout), 0, 0.99, "dropout between RNN layers", NULL},
    {"cell", ZOO_CHOICE, F(cell), 0, 0, "the recurrent cell of the encoder and the decoder",
     zoo_cell_names},
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
