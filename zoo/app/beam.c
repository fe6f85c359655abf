/* beam.c -- beam search over B sources at once: per source the `beam` best prefixes by total
 * log-probability, GNMT's length penalty, finished prefixes as fairseq (decode.h). */
#include "zoo/app/decode_internal.h"

#include "autograd/ag_op.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct hyp {
    double score; /* total log-probability */
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

/* The candidates of one prefix (row k, total log-probability base) into best[0..*n) (at most
 * cap, keep_best's order): base + log_softmax(z)[v] for every token v, the log-softmax as
 *   lp[v] = (z[v] - mx) - lse,  mx = max z,  lse = log(sum_v exp(z[v] - mx))
 * in double, the exponentials in ag_real (ex: V scratch values, vectorised). Once the list is
 * full, a token whose score cannot beat the last kept one is skipped by comparing z with zcut:
 * the score is non-decreasing in z (each rounded operation is), so a zcut seen to be rejected
 * rejects every z <= zcut, and the list is exactly keep_best's over all V. The loops over V
 * keep LANES partial maxima and sums (independent chains), and skip blocks of LANES tokens at
 * once. */
enum { LANES = 8 };
static void row_candidates(const ag_real *z, int V, double base, int32_t k, ag_real *ex, hyp *best,
                           int *n, int cap) {
    ag_real m[LANES];
    for (int l = 0; l < LANES; l++) m[l] = z[0];
    int v0 = V - V % LANES;
    for (int v = 0; v < v0; v += LANES)
        for (int l = 0; l < LANES; l++) m[l] = z[v + l] > m[l] ? z[v + l] : m[l];
    ag_real mx = m[0];
    for (int l = 1; l < LANES; l++) mx = m[l] > mx ? m[l] : mx;
    for (int v = v0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
    for (int v = 0; v < V; v++) ex[v] = z[v] - mx;
    ag_vexp_inplace(ex, V);
    double sums[LANES] = {0}, sum = 0;
    for (int v = 0; v < v0; v += LANES)
        for (int l = 0; l < LANES; l++) sums[l] += ex[v + l];
    for (int v = v0; v < V; v++) sum += ex[v];
    for (int l = 0; l < LANES; l++) sum += sums[l];
    const double lse = log(sum);
    ag_real zcut = -INFINITY;
    for (int v = 0; v < V; v++) {
        if (v % LANES == 0 && v + LANES <= V) { /* a block all at or under the cut: skipped */
            bool any = false;
            for (int l = 0; l < LANES; l++) any |= z[v + l] > zcut;
            if (!any) {
                v += LANES - 1;
                continue;
            }
        }
        if (z[v] <= zcut) continue;
        keep_best(best, n, cap, base + (((double)z[v] - mx) - lse), k, v);
        if (*n == cap) { /* the bar may have risen: a new cut, a little under it, checked */
            double last = best[cap - 1].score, c = last - base + lse + mx;
            ag_real cut = (ag_real)(c - 1e-6 * (fabs(c) + 1));
            zcut = base + (((double)cut - mx) - lse) <= last ? cut : -INFINITY;
        }
    }
}

/* One source's search. Its live prefixes are rows [row0, row0 + n_alive) of the model's state;
 * prefix k's tokens are tokens[k * L ..] (L = max_steps + 1), its score alive[k]. */
typedef struct beam_sent {
    int n_alive, n_finished, best_len;
    double best_norm;
    bool running;
} beam_sent;

/* The arrays of a batched search, malloc'd together (beam_free). */
typedef struct beam_arrays {
    int32_t *tokens, *next; /* (B K, L): prefixes of the live hypotheses, this step and next */
    int32_t *best;          /* (B, L): the best finished prefix per source */
    hyp *alive;             /* (B K) */
    hyp *cand;              /* (2 K): one source's best candidates of a step */
    ag_real *ex;            /* (V): one row's exponentials */
    int32_t *tok, *rows;    /* (B K): the next step's inputs, and the state rows they extend */
    beam_sent *sent;        /* (B) */
} beam_arrays;

static void beam_free(beam_arrays *a) {
    free(a->tokens), free(a->next), free(a->best), free(a->alive), free(a->cand), free(a->ex);
    free(a->tok), free(a->rows), free(a->sent);
}

static int beam_alloc(beam_arrays *a, int B, int K, int L, int V) {
    size_t BK = (size_t)B * K;
    *a = (beam_arrays){.tokens = calloc(BK * L, sizeof *a->tokens),
                       .next = calloc(BK * L, sizeof *a->next),
                       .best = calloc((size_t)B * L, sizeof *a->best),
                       .alive = calloc(BK, sizeof *a->alive),
                       .cand = calloc((size_t)2 * K, sizeof *a->cand),
                       .ex = malloc(sizeof *a->ex * (size_t)V),
                       .tok = malloc(sizeof *a->tok * BK),
                       .rows = malloc(sizeof *a->rows * BK),
                       .sent = calloc((size_t)B, sizeof *a->sent)};
    if (a->tokens && a->next && a->best && a->alive && a->cand && a->ex && a->tok && a->rows &&
        a->sent)
        return 0;
    beam_free(a);
    return ag_error("beam search: out of memory");
}

/* Step s of source b, whose prefixes are state rows [row0, row0 + n_alive) with logits y:
 * its 2K best candidates over n_alive * V; an <eos> among the first K finishes its prefix, the
 * others become the next prefixes (at most K), appended to a->tok / a->rows at *n_rows when the
 * source goes on. The bookkeeping of the single-sentence search, per source. */
static void beam_advance(beam_arrays *a, int b, int K, int L, int V, int s, int32_t eos,
                         double alpha, const ag_real *y, int row0, int *n_rows) {
    beam_sent *st = &a->sent[b];
    hyp *alive = a->alive + (size_t)b * K, *cand = a->cand;
    int n_cand = 0;
    for (int k = 0; k < st->n_alive; k++)
        row_candidates(y + (size_t)(row0 + k) * V, V, alive[k].score, k, a->ex, cand, &n_cand,
                       2 * K);
    int n_next = 0, first = *n_rows;
    for (int i = 0; i < n_cand && n_next < K; i++) {
        const hyp *h = &cand[i];
        const int32_t *prefix = a->tokens + ((size_t)b * K + h->parent) * L;
        if (h->token == eos) {
            /* as fairseq: only an <eos> among the top K candidates finishes a prefix; the K more
             * candidates kept are there to refill the beam, not to end it */
            if (i >= K || st->n_finished >= K) continue;
            st->n_finished++;
            double norm = h->score / length_penalty(s + 1, alpha);
            if (norm > st->best_norm) {
                st->best_norm = norm;
                st->best_len = s;
                memcpy(a->best + (size_t)b * L, prefix, sizeof *prefix * (size_t)s);
            }
        } else {
            int32_t *p = a->next + ((size_t)b * K + n_next) * L;
            memcpy(p, prefix, sizeof *p * (size_t)s);
            p[s] = h->token;
            alive[n_next] = (hyp){h->score, s + 1, 0, 0};
            a->tok[first + n_next] = h->token;
            a->rows[first + n_next] = row0 + h->parent;
            n_next++;
        }
    }
    st->n_alive = n_next;
    st->running = n_next > 0 && st->n_finished < K;
    if (st->running) *n_rows += n_next;
}

static int beam_search(zoo_model *m, ag_tape *t, nn_packs *packs, const int32_t *src,
                       const int32_t *src_len, int B, int Ts, int32_t bos, int32_t eos,
                       int max_steps, int beam, double alpha, int32_t *out, int *out_len) {
    const int K = beam, V = m->tgt_vocab, L = max_steps + 1;
    beam_arrays a;
    if (beam_alloc(&a, B, K, L, V)) return -1;
    for (int b = 0; b < B; b++) {
        a.sent[b] = (beam_sent){.n_alive = 1, .best_norm = -INFINITY, .running = true};
        a.alive[(size_t)b * K] = (hyp){0, 0, 0, 0};
        a.tok[b] = bos;
    }
    zoo__eval_scope sc = zoo__scope_begin(t, packs);
    ag_tape_pos mark;
    void *state = zoo__encode_for_steps(m, &sc, src, src_len, B, Ts, B * K, max_steps, NULL, &mark);
    int rc = state ? 0 : zoo__op_failed(&sc, "encoding");
    for (int s = 0, n = B; !rc && s < max_steps && n > 0; s++) {
        ag_tensor *y = m->ops->step(m, &sc.c, state, a.tok, n, NULL);
        if (!y) {
            rc = zoo__op_failed(&sc, "decoding");
            break;
        }
        int row0 = 0, n_next = 0;
        for (int b = 0; b < B; b++) {
            if (!a.sent[b].running) continue;
            int rows_b = a.sent[b].n_alive;
            beam_advance(&a, b, K, L, V, s, eos, alpha, y->data, row0, &n_next);
            row0 += rows_b;
        }
        int32_t *swap = a.tokens;
        a.tokens = a.next;
        a.next = swap;
        if (ag_tape_rewind(t, mark) || (n_next && m->ops->select(m, &sc.c, state, a.rows, n_next)))
            rc = zoo__op_failed(&sc, "decoding");
        n = n_next;
    }
    for (int b = 0; !rc && b < B; b++) {
        beam_sent *st = &a.sent[b];
        /* unfinished prefixes compete too (they reached max_steps) */
        for (int k = 0; k < st->n_alive && st->n_finished < K; k++) {
            const hyp *h = &a.alive[(size_t)b * K + k];
            double norm = h->score / length_penalty(h->len, alpha);
            if (norm > st->best_norm) {
                st->best_norm = norm;
                st->best_len = h->len;
                memcpy(a.best + (size_t)b * L, a.tokens + ((size_t)b * K + k) * L,
                       sizeof *a.best * (size_t)h->len);
            }
        }
        memcpy(out + (size_t)b * max_steps, a.best + (size_t)b * L,
               sizeof *out * (size_t)st->best_len);
        out_len[b] = st->best_len;
    }
    beam_free(&a);
    return rc ? rc : zoo__scope_end(&sc, 0);
}

static int beam_chunk(zoo_model *m, ag_tape *t, nn_packs *packs, const zoo__chunk *ch,
                      const void *args) {
    const zoo__decode_args *a = args;
    return beam_search(m, t, packs, ch->src, ch->src_len, ch->B, ch->Ts, a->bos, a->eos,
                       a->max_steps, a->beam, a->alpha, ch->out, ch->out_len);
}

int zoo_beam_search(zoo_model *m, ag_tape *t, const int32_t *src, const int32_t *src_len, int B,
                    int Ts, int32_t bos, int32_t eos, int max_steps, int beam, double alpha,
                    int32_t *out, int *out_len) {
    if (beam < 1) return ag_error("beam search: beam size %d < 1", beam);
    zoo__decode_args a = {bos, eos, max_steps, beam, alpha};
    return zoo__in_chunks(m, t, src, src_len, B, Ts, max_steps, out, out_len, beam, beam_chunk, &a);
}
