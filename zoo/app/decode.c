/* predict.c -- greedy and beam-search decoding, attention recording, evaluation. */
#include "zoo/app/decode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/metrics.h"
#include "zoo/app/plot.h"

/* Runs in eval mode with recording off; restores recording and resets the tape. */
typedef struct eval_scope {
    ag_tape *t;
    bool prev;
    nn_ctx c;
} eval_scope;

static eval_scope scope_begin(ag_tape *t) {
    ag_tape_reset(t);
    eval_scope s = {t, ag_tape_set_recording(t, false), {.tape = t, .training = false}};
    return s;
}
static int scope_end(eval_scope *s, int rc) {
    ag_tape_set_recording(s->t, s->prev);
    ag_tape_reset(s->t);
    return rc;
}
static int op_failed(eval_scope *s, const char *what) {
    return scope_end(s, ag_error_context("%s failed", what));
}

/* Index of the largest of x[0..n), the first on ties. */
static int32_t argmax(const ag_real *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* ---- greedy ---- */

/* Called after the encoder (step -1) and after each decoding step with the trace that received
 * their attention weights. */
typedef void (*step_hook)(zoo_model *m, int step, const zoo_attn_trace *trace, void *user);

static int greedy(zoo_model *m, ag_tape *t, const int32_t *src, const int32_t *src_len, int B,
                  int Ts, int32_t bos, int32_t eos, int max_steps, int32_t *out, int *out_len,
                  step_hook hook, void *user) {
    eval_scope sc = scope_begin(t);
    zoo_attn_trace trace = {0}, *tr = NULL;
    if (hook) {
        size_t n = (size_t)(m->layers > 0 ? m->layers : 1);
        ag_tensor **w = ag_tape_alloc(t, sizeof *w * 3 * n);
        if (!w) return op_failed(&sc, "encoding");
        memset(w, 0, sizeof *w * 3 * n);
        trace = (zoo_attn_trace){w, w + n, w + 2 * n};
        tr = &trace;
    }
    void *state = m->ops->encode(m, &sc.c, src, src_len, B, Ts, tr);
    int32_t *tok = ag_tape_alloc(t, sizeof *tok * (size_t)B);
    bool *done = ag_tape_alloc(t, sizeof *done * (size_t)B);
    if (!state || !tok || !done) return op_failed(&sc, "encoding");
    if (hook) hook(m, -1, tr, user);
    for (int b = 0; b < B; b++) {
        tok[b] = bos;
        done[b] = false;
        out_len[b] = 0;
    }
    int V = m->tgt_vocab, alive = B;
    for (int s = 0; s < max_steps && alive; s++) {
        ag_tensor *y = m->ops->step(m, &sc.c, state, tok, B, tr);
        if (!y) return op_failed(&sc, "decoding");
        if (hook) hook(m, s, tr, user);
        for (int b = 0; b < B; b++) {
            tok[b] = argmax(y->data + (size_t)b * V, V);
            if (done[b]) continue;
            if (tok[b] == eos) {
                done[b] = true;
                alive--;
            } else {
                out[(size_t)b * max_steps + out_len[b]++] = tok[b];
            }
        }
    }
    return scope_end(&sc, 0);
}

int zoo_greedy(zoo_model *m, ag_tape *t, const int32_t *src, const int32_t *src_len, int B,
               int Ts, int32_t bos, int32_t eos, int max_steps, int32_t *out, int *out_len) {
    return greedy(m, t, src, src_len, B, Ts, bos, eos, max_steps, out, out_len, NULL, NULL);
}

/* ---- beam search ---- */

typedef struct hyp {
    double score;   /* total log-probability */
    int len;
    int32_t parent; /* row of the previous step's beam, while selecting */
    int32_t token;
} hyp;

static double length_penalty(int len, double alpha) { return pow((5.0 + len) / 6.0, alpha); }

/* Inserts (score, row, token) into best[0..*n) kept sorted by descending score, at most cap. */
static void keep_best(hyp *best, int *n, int cap, double score, int32_t row, int32_t token) {
    if (*n == cap && score <= best[cap - 1].score) return;
    int i = *n < cap ? (*n)++ : cap - 1;
    while (i > 0 && best[i - 1].score < score) {
        best[i] = best[i - 1];
        i--;
    }
    best[i] = (hyp){score, 0, row, token};
}

int zoo_beam_search(zoo_model *m, ag_tape *t, const int32_t *src, int32_t src_len, int Ts,
                    int32_t bos, int32_t eos, int max_steps, int beam, double alpha,
                    int32_t *out, int *out_len) {
    if (beam < 1) return ag_error("beam search: beam size %d < 1", beam);
    int K = beam, V = m->tgt_vocab, L = max_steps + 1;
    /* tokens[k][0..len): prefix k (without <bos>); next: the step's selections */
    int32_t *tokens = calloc((size_t)K * L, sizeof *tokens), *next = calloc((size_t)K * L, sizeof *next);
    int32_t *srcs = malloc(sizeof *srcs * (size_t)K * Ts), *lens = malloc(sizeof *lens * (size_t)K);
    int32_t *dec_in = malloc(sizeof *dec_in * (size_t)K * L), *best_tokens = malloc(sizeof *best_tokens * (size_t)L);
    hyp *alive = calloc((size_t)K, sizeof *alive), *cand = calloc((size_t)2 * K, sizeof *cand);
    double *lp = malloc(sizeof *lp * (size_t)V);
    int rc = -1;
    if (!tokens || !next || !srcs || !lens || !dec_in || !best_tokens || !alive || !cand || !lp) {
        ag_error("beam search: out of memory");
        goto done;
    }
    for (int k = 0; k < K; k++) {
        memcpy(srcs + (size_t)k * Ts, src, sizeof *srcs * (size_t)Ts);
        lens[k] = src_len;
    }
    eval_scope sc = scope_begin(t);
    void *state = m->ops->encode(m, &sc.c, srcs, lens, K, Ts, NULL);
    if (!state) {
        op_failed(&sc, "encoding");
        goto done;
    }
    int n_alive = 1, best_len = 0;
    double best_norm = -INFINITY;
    alive[0] = (hyp){0, 0, 0, 0};
    int n_finished = 0;
    for (int s = 0; s < max_steps && n_alive > 0 && n_finished < K; s++) {
        for (int k = 0; k < K; k++) { /* rows past n_alive repeat row 0 */
            int src_k = k < n_alive ? k : 0;
            dec_in[(size_t)k * (s + 1)] = bos;
            memcpy(dec_in + (size_t)k * (s + 1) + 1, tokens + (size_t)src_k * L, sizeof *dec_in * (size_t)s);
        }
        ag_tensor *y = m->ops->decode(m, &sc.c, state, dec_in, K, s + 1);
        if (!y) {
            op_failed(&sc, "decoding");
            goto done;
        }
        int n_cand = 0;
        for (int k = 0; k < n_alive; k++) {
            const ag_real *z = y->data + ((size_t)k * (s + 1) + s) * V;
            double mx = z[argmax(z, V)], sum = 0;
            for (int v = 0; v < V; v++) sum += exp((double)z[v] - mx);
            for (int v = 0; v < V; v++) lp[v] = (double)z[v] - mx - log(sum);
            for (int v = 0; v < V; v++) keep_best(cand, &n_cand, 2 * K, alive[k].score + lp[v], k, v);
        }
        int n_next = 0;
        for (int i = 0; i < n_cand && n_next < K; i++) {
            const hyp *h = &cand[i];
            const int32_t *prefix = tokens + (size_t)h->parent * L;
            if (h->token == eos) {
                /* as fairseq: only an <eos> among the top K candidates finishes a prefix; the
                 * K more candidates kept are there to refill the beam, not to end it */
                if (i >= K || n_finished >= K) continue;
                n_finished++;
                double norm = h->score / length_penalty(s + 1, alpha);
                if (norm > best_norm) {
                    best_norm = norm;
                    best_len = s;
                    memcpy(best_tokens, prefix, sizeof *best_tokens * (size_t)s);
                }
            } else {
                memcpy(next + (size_t)n_next * L, prefix, sizeof *next * (size_t)s);
                next[(size_t)n_next * L + s] = h->token;
                alive[n_next] = (hyp){h->score, s + 1, 0, 0};
                n_next++;
            }
        }
        int32_t *swap = tokens;
        tokens = next;
        next = swap;
        n_alive = n_next;
    }
    /* unfinished prefixes compete too (they reached max_steps) */
    for (int k = 0; k < n_alive && n_finished < K; k++) {
        double norm = alive[k].score / length_penalty(alive[k].len, alpha);
        if (norm > best_norm) {
            best_norm = norm;
            best_len = alive[k].len;
            memcpy(best_tokens, tokens + (size_t)k * L, sizeof *best_tokens * (size_t)best_len);
        }
    }
    memcpy(out, best_tokens, sizeof *out * (size_t)best_len);
    *out_len = best_len;
    rc = scope_end(&sc, 0);
done:
    free(tokens);
    free(next);
    free(srcs);
    free(lens);
    free(dec_in);
    free(best_tokens);
    free(alive);
    free(cand);
    free(lp);
    return rc;
}

/* ---- sentences ---- */

static int encode_sentence(const ds_vocab *v, const char *sentence, int num_steps, int32_t *ids,
                           int32_t *len) {
    if (ds_encode_sentence(v, sentence, num_steps, ids, len))
        return ag_error_context("source sentence");
    return 0;
}

static int ids_to_text(const ds_vocab *v, const int32_t *ids, int n, char **out) {
    if (ds_decode_ids(v, ids, (size_t)n, out)) return -1;
    return 0;
}

int zoo_translate(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab, const ds_vocab *tgt_vocab,
                  const char *sentence, int num_steps, int beam, double alpha, char **out) {
    *out = NULL;
    int32_t *ids = malloc(sizeof *ids * (size_t)num_steps * 2), len;
    if (!ids) return ag_error("translate: out of memory");
    int32_t *res = ids + num_steps;
    int n = 0, rc = encode_sentence(src_vocab, sentence, num_steps, ids, &len);
    int32_t bos = ds_vocab_id(tgt_vocab, "<bos>"), eos = ds_vocab_id(tgt_vocab, "<eos>");
    if (!rc)
        rc = beam > 1 ? zoo_beam_search(m, t, ids, len, num_steps, bos, eos, num_steps, beam, alpha, res, &n)
                      : zoo_greedy(m, t, ids, &len, 1, num_steps, bos, eos, num_steps, res, &n);
    if (!rc) rc = ids_to_text(tgt_vocab, res, n, out);
    free(ids);
    return rc;
}

/* ---- attention recording ---- */

typedef struct rec_ctx {
    zoo_attn_record *rec;
    int steps;
} rec_ctx;

static int map_alloc(zoo_attn_map *mp, int layers, int heads, int rows, int cols) {
    *mp = (zoo_attn_map){layers, heads, rows, cols, NULL};
    if (!layers) return 0;
    mp->w = calloc((size_t)layers * heads * rows * cols, sizeof *mp->w);
    return mp->w ? 0 : ag_error("attention record: out of memory");
}

/* Copies weights (heads rows of B = 1: (heads, Tq, Tk)) into map row `row` (Tq = 1) or rows
 * 0..Tq-1 (the encoder), columns 0..Tk-1. */
static void copy_weights(zoo_attn_map *mp, int layer, const ag_tensor *w, int row) {
    if (!w) return;
    int heads = mp->heads, Tq = w->shape[1], Tk = w->shape[2];
    for (int h = 0; h < heads; h++)
        for (int q = 0; q < Tq; q++)
            for (int k = 0; k < Tk && k < mp->cols; k++) {
                int r = row < 0 ? q : row;
                if (r >= mp->rows) continue;
                mp->w[(((size_t)layer * heads + h) * mp->rows + r) * mp->cols + k] =
                    (float)w->data[((size_t)h * Tq + q) * Tk + k];
            }
}

static void record_hook(zoo_model *m, int step, const zoo_attn_trace *tr, void *user) {
    zoo_attn_record *rec = user;
    for (int l = 0; l < m->layers; l++) {
        if (step < 0) {
            if (rec->enc_self.w) copy_weights(&rec->enc_self, l, tr->enc_self[l], -1);
            continue;
        }
        if (rec->dec_self.w) copy_weights(&rec->dec_self, l, tr->dec_self[l], step);
        if (rec->dec_cross.w) copy_weights(&rec->dec_cross, l, tr->dec_cross[l], step);
    }
    if (step >= 0) rec->steps = step + 1;
}

int zoo_translate_attention(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab,
                            const ds_vocab *tgt_vocab, const char *sentence, int num_steps,
                            char **out, zoo_attn_record *rec) {
    memset(rec, 0, sizeof *rec);
    *out = NULL;
    int L = m->layers, Ts = num_steps;
    int h_enc = m->ops->attn_heads(m, ZOO_ATTN_ENC_SELF), h_self = m->ops->attn_heads(m, ZOO_ATTN_DEC_SELF);
    int h_cross = m->ops->attn_heads(m, ZOO_ATTN_DEC_CROSS);
    int32_t *ids = malloc(sizeof *ids * (size_t)num_steps * 2), len;
    if (!ids) return ag_error("translate: out of memory");
    int32_t *res = ids + num_steps;
    int n = 0, rc = encode_sentence(src_vocab, sentence, num_steps, ids, &len);
    if (!rc)
        rc = map_alloc(&rec->enc_self, h_enc ? L : 0, h_enc, Ts, Ts) ||
             map_alloc(&rec->dec_self, h_self ? L : 0, h_self, num_steps, num_steps) ||
             map_alloc(&rec->dec_cross, h_cross ? L : 0, h_cross, num_steps, Ts);
    int32_t bos = ds_vocab_id(tgt_vocab, "<bos>"), eos = ds_vocab_id(tgt_vocab, "<eos>");
    if (!rc) rc = greedy(m, t, ids, &len, 1, Ts, bos, eos, num_steps, res, &n, record_hook, rec);
    if (!rc) rc = ids_to_text(tgt_vocab, res, n, out);
    rec->src_steps = Ts;
    if (!rc) {
        rec->src_tokens = calloc((size_t)Ts, sizeof *rec->src_tokens);
        rec->tgt_tokens = calloc((size_t)num_steps, sizeof *rec->tgt_tokens);
        if (!rec->src_tokens || !rec->tgt_tokens) rc = ag_error("translate: out of memory");
    }
    if (!rc) {
        for (int i = 0; i < Ts; i++) rec->src_tokens[i] = ds_vocab_token(src_vocab, ids[i], NULL);
        for (int i = 0; i < rec->steps; i++)
            rec->tgt_tokens[i] = i == 0 ? "<bos>" : ds_vocab_token(tgt_vocab, res[i - 1], NULL);
    }
    free(ids);
    if (rc) {
        free(*out);
        *out = NULL;
        zoo_attn_record_free(rec);
    }
    return rc;
}

void zoo_attn_record_free(zoo_attn_record *rec) {
    free(rec->enc_self.w);
    free(rec->dec_self.w);
    free(rec->dec_cross.w);
    free(rec->src_tokens);
    free(rec->tgt_tokens);
    memset(rec, 0, sizeof *rec);
}

/* One grid file: layers x heads maps of rows x cols (the first `rows` rows of the map). */
static int plot_map(const zoo_attn_map *mp, int rows, int cols, const char *dir, const char *prefix,
                    const char *what, const char *title, const char *const *rl, const char *const *cl,
                    const char *xl, const char *yl) {
    if (!mp->w || !mp->layers || rows < 1) return 0;
    size_t n = (size_t)mp->layers * mp->heads;
    float *w = malloc(sizeof *w * n * rows * cols);
    char **titles = calloc(n, sizeof *titles);
    int rc = -1;
    if (w && titles) {
        for (size_t k = 0; k < n; k++) {
            for (int r = 0; r < rows; r++)
                memcpy(w + (k * rows + r) * cols, mp->w + (k * mp->rows + r) * mp->cols, sizeof *w * cols);
            titles[k] = malloc(64);
            if (titles[k]) snprintf(titles[k], 64, "layer %d, head %d", (int)(k / mp->heads) + 1, (int)(k % mp->heads) + 1);
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s_%s.svg", dir, prefix, what);
        rc = zoo_svg_heatmaps(path, title, mp->layers, mp->heads, (const char *const *)titles, w, rows,
                              cols, rl, cl, xl, yl);
    } else {
        ag_error("attention plot: out of memory");
    }
    for (size_t k = 0; titles && k < n; k++) free(titles[k]);
    free(titles);
    free(w);
    return rc;
}

int zoo_attn_record_plot(const zoo_attn_record *rec, const char *dir, const char *prefix) {
    const char *const *src = rec->src_tokens, *const *tgt = rec->tgt_tokens;
    int Ts = rec->src_steps, S = rec->steps;
    return plot_map(&rec->enc_self, Ts, Ts, dir, prefix, "encoder_self", "encoder self-attention",
                    src, src, "keys", "queries") ||
           plot_map(&rec->dec_self, S, S, dir, prefix, "decoder_self", "decoder self-attention",
                    tgt, tgt, "keys", "queries") ||
           plot_map(&rec->dec_cross, S, Ts, dir, prefix, "decoder_cross",
                    "decoder-encoder attention", tgt, src, "keys (source)", "queries (target)")
               ? -1
               : 0;
}

/* ---- evaluation ---- */

int zoo_evaluate(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab, const ds_vocab *tgt_vocab,
                 const ds_fra *data, ds_part part, int num_steps, zoo_eval_result *r) {
    memset(r, 0, sizeof *r);
    int T = num_steps, chunk = 256;
    int64_t n = ds_fra_part_size(data, part);
    const int64_t *pairs = ds_fra_part_pairs(data, part);
    if (n <= 0) return ag_error("evaluate: the chosen split is empty");
    int32_t *src = malloc(sizeof *src * (size_t)chunk * T), *len = malloc(sizeof *len * (size_t)chunk);
    int32_t *out = malloc(sizeof *out * (size_t)chunk * T);
    int *out_len = malloc(sizeof *out_len * (size_t)chunk);
    ds_bleu_stats bs = {0};
    ds_chrf_stats cs = {0};
    double d2l = 0;
    int rc = 0;
    if (!src || !len || !out || !out_len) rc = ag_error("evaluate: out of memory");
    int32_t bos = ds_vocab_id(tgt_vocab, "<bos>"), eos = ds_vocab_id(tgt_vocab, "<eos>");
    for (int64_t at = 0; !rc && at < n; at += chunk) {
        int B = (int)(n - at < chunk ? n - at : chunk);
        for (int b = 0; !rc && b < B; b++) {
            char *sentence = NULL;
            if (ds_fra_sentence(data, DS_SRC, pairs[at + b], &sentence)) rc = -1;
            if (!rc) rc = encode_sentence(src_vocab, sentence, T, src + (size_t)b * T, &len[b]);
            free(sentence);
        }
        if (!rc) rc = zoo_greedy(m, t, src, len, B, T, bos, eos, T, out, out_len);
        for (int b = 0; !rc && b < B; b++) {
            char *hyp = NULL, *ref = NULL;
            double s = 0;
            rc = ids_to_text(tgt_vocab, out + (size_t)b * T, out_len[b], &hyp);
            if (!rc && ds_fra_sentence(data, DS_TGT, pairs[at + b], &ref)) rc = -1;
            const char *refs[1] = {ref};
            if (!rc && (ds_bleu_add(&bs, hyp, refs, 1) || ds_chrf_add(&cs, hyp, ref) ||
                        ds_bleu_d2l(hyp, ref, 2, &s)))
                rc = ag_error_context("evaluate");
            d2l += s;
            free(hyp);
            free(ref);
        }
    }
    if (!rc) {
        r->sentences = n;
        r->bleu4 = ds_bleu_compute(&bs).score;
        r->chrf = ds_chrf_compute(&cs);
        r->d2l_bleu = d2l / (double)n;
    }
    free(src);
    free(len);
    free(out);
    free(out_len);
    return rc;
}
