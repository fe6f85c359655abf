/* decode.c -- greedy and beam-search decoding, attention recording, evaluation. */
#include "zoo/app/decode.h"

#include "autograd/ag_op.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "datasets/metrics.h"
#include "zoo/app/plot.h"

/* Runs in eval mode with recording off; restores recording and resets the tape. */
typedef struct eval_scope {
    ag_tape *t;
    bool prev;
    nn_ctx c;
} eval_scope;

static eval_scope scope_begin(ag_tape *t, nn_packs *packs) {
    ag_tape_reset(t);
    eval_scope s = {
        t, ag_tape_set_recording(t, false), {.tape = t, .training = false, .packs = packs}};
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

/* ---- sentences in chunks, shared between the threads ----
 * A call of B sentences is cut into chunks of about CHUNK_ROWS decoder rows (sentences times
 * beam); the cut depends on B and the beam alone. Each chunk is decoded on its own, start to
 * end, by whichever of the engine's threads takes it next (the caller on its tape, the others on
 * tapes of their own), with the ops inside serial. Results therefore do not depend on the
 * number of threads, a thread slowed down by another process takes fewer chunks, and the
 * threads meet once per call instead of once per op. Rows are independent in every step of
 * the model, so a chunk decodes exactly as it would in one large batch. */

#define CHUNK_ROWS 256

/* Decodes sentences [b0, b1) of the call on tape t with the call's packed weights; 0 or -1
 * (ag_last_error). */
typedef int (*chunk_fn)(zoo_model *m, ag_tape *t, nn_packs *packs, int b0, int b1,
                        const void *args);

typedef struct chunk_job {
    zoo_model *m;
    ag_tape *t; /* the caller's */
    nn_packs *packs;
    chunk_fn fn;
    const void *args;
    int B, chunks;
    atomic_int next;    /* the next chunk to take */
    pthread_mutex_t mu; /* guards the error below */
    int failed;         /* the lowest chunk that failed, or `chunks` */
    char err[512];
} chunk_job;

static void chunk_failed(chunk_job *j, int c, const char *msg) {
    pthread_mutex_lock(&j->mu);
    if (c < j->failed) {
        j->failed = c;
        snprintf(j->err, sizeof j->err, "%s", msg);
    }
    pthread_mutex_unlock(&j->mu);
    atomic_store(&j->next, j->chunks); /* the others stop taking chunks */
}

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One thread's share: chunks taken one at a time until none is left. Range 0 is the caller's
 * (ag_parallel_for), which decodes on the caller's tape. A helper thread that had a core for
 * less than STARVED of a chunk's wall time stops taking chunks: the machine is busy with other
 * work (the scheduler shares one core's time between this process's threads), and one thread
 * alone then goes faster than two taking turns. */
#define STARVED 0.6

static void run_chunks(void *ctx, ptrdiff_t begin, ptrdiff_t end) {
    chunk_job *j = ctx;
    (void)end;
    ag_tape *own = NULL, *t = begin == 0 ? j->t : NULL;
    double wall = seconds(CLOCK_MONOTONIC), cpu = seconds(CLOCK_THREAD_CPUTIME_ID);
    for (int c; (c = atomic_fetch_add(&j->next, 1)) < j->chunks;) {
        if (!t && !(t = own = ag_tape_new())) {
            chunk_failed(j, c, "decoding: out of memory for a thread's tape");
            break;
        }
        int b0 = (int)((int64_t)j->B * c / j->chunks),
            b1 = (int)((int64_t)j->B * (c + 1) / j->chunks);
        if (j->fn(j->m, t, j->packs, b0, b1, j->args)) {
            chunk_failed(j, c, ag_last_error());
            break;
        }
        double w = seconds(CLOCK_MONOTONIC), u = seconds(CLOCK_THREAD_CPUTIME_ID);
        if (begin != 0 && u - cpu < STARVED * (w - wall)) break;
        wall = w, cpu = u;
    }
    ag_tape_free(own);
}

/* fn over sentences [0, B) in chunks of about CHUNK_ROWS / rows_each sentences, the model's
 * Linear weights packed once for the call (nn_packs: the same bits, no packing per product). */
static int in_chunks(zoo_model *m, ag_tape *t, int B, int rows_each, chunk_fn fn,
                     const void *args) {
    int per = CHUNK_ROWS / rows_each > 0 ? CHUNK_ROWS / rows_each : 1;
    int chunks = (B + per - 1) / per;
    nn_packs *packs = nn_packs_new();
    if (!packs) return ag_error_context("decoding");
    int rc;
    if (chunks < 2) {
        rc = fn(m, t, packs, 0, B, args);
    } else {
        chunk_job j = {.m = m,
                       .t = t,
                       .packs = packs,
                       .fn = fn,
                       .args = args,
                       .B = B,
                       .chunks = chunks,
                       .failed = chunks};
        atomic_init(&j.next, 0);
        pthread_mutex_init(&j.mu, NULL);
        ag_parallel_for(ag_threads(), 1, run_chunks, &j);
        pthread_mutex_destroy(&j.mu);
        rc = j.failed < chunks ? ag_error("%s", j.err) : 0;
    }
    nn_packs_free(packs);
    return rc;
}

/* ---- greedy ---- */

/* Called after the encoder (step -1) and after each decoding step with the trace that received
 * their attention weights. */
typedef void (*step_hook)(zoo_model *m, int step, const zoo_attn_trace *trace, void *user);

/* Encodes (trace or NULL), reserves room for `rows` rows and max_steps steps, and marks the tape
 * where the state ends: each step's intermediates above it are rewound. NULL after an error. */
static void *encode_for_steps(zoo_model *m, eval_scope *sc, const int32_t *src,
                              const int32_t *src_len, int B, int Ts, int rows, int max_steps,
                              const zoo_attn_trace *trace, ag_tape_pos *mark) {
    void *state = m->ops->encode(m, &sc->c, src, src_len, B, Ts, trace);
    if (!state || m->ops->reserve(m, &sc->c, state, rows, max_steps)) return NULL;
    *mark = ag_tape_mark(sc->t);
    return state;
}

static int greedy(zoo_model *m, ag_tape *t, nn_packs *packs, const int32_t *src,
                  const int32_t *src_len, int B, int Ts, int32_t bos, int32_t eos, int max_steps,
                  int32_t *out, int *out_len, step_hook hook, void *user) {
    for (int b = 0; b < B; b++) out_len[b] = 0;
    /* row r of the state decodes sentence sent[r]; tok[r] is its next input */
    int32_t *tok = malloc(sizeof *tok * (size_t)B), *sent = malloc(sizeof *sent * (size_t)B);
    int32_t *keep = malloc(sizeof *keep * (size_t)B);
    if (!tok || !sent || !keep) {
        free(tok), free(sent), free(keep);
        return ag_error("greedy decoding: out of memory");
    }
    eval_scope sc = scope_begin(t, packs);
    zoo_attn_trace trace = {0}, *tr = NULL;
    int rc = 0;
    if (hook) {
        size_t n = (size_t)(m->layers > 0 ? m->layers : 1);
        ag_tensor **w = ag_tape_alloc(t, sizeof *w * 3 * n);
        if (w) {
            memset(w, 0, sizeof *w * 3 * n);
            trace = (zoo_attn_trace){w, w + n, w + 2 * n};
            tr = &trace;
        } else {
            rc = op_failed(&sc, "encoding");
        }
    }
    ag_tape_pos mark;
    void *state =
        rc ? NULL : encode_for_steps(m, &sc, src, src_len, B, Ts, B, max_steps, tr, &mark);
    if (!rc && !state) rc = op_failed(&sc, "encoding");
    if (!rc && hook) hook(m, -1, tr, user);
    for (int r = 0; r < B; r++) {
        tok[r] = bos;
        sent[r] = r;
    }
    const int V = m->tgt_vocab;
    for (int s = 0, n = B; !rc && s < max_steps && n > 0; s++) {
        ag_tensor *y = m->ops->step(m, &sc.c, state, tok, n, tr);
        if (!y) {
            rc = op_failed(&sc, "decoding");
            break;
        }
        if (hook) hook(m, s, tr, user);
        int kept = 0; /* the rows that did not say <eos> go on, in order */
        for (int r = 0; r < n; r++) {
            int32_t k = (int32_t)ag_row_argmax(y->data + (size_t)r * V, V), b = sent[r];
            if (k == eos) continue;
            out[(size_t)b * max_steps + out_len[b]++] = k;
            keep[kept] = r;
            sent[kept] = b;
            tok[kept++] = k;
        }
        if (ag_tape_rewind(t, mark) ||
            (kept && kept < n && m->ops->select(m, &sc.c, state, keep, kept)))
            rc = op_failed(&sc, "decoding");
        n = kept;
    }
    free(tok), free(sent), free(keep);
    return rc ? rc : scope_end(&sc, 0);
}

typedef struct decode_args {
    const int32_t *src, *src_len;
    int Ts;
    int32_t bos, eos;
    int max_steps, beam;
    double alpha;
    int32_t *out;
    int *out_len;
} decode_args;

static int greedy_chunk(zoo_model *m, ag_tape *t, nn_packs *packs, int b0, int b1,
                        const void *args) {
    const decode_args *a = args;
    return greedy(m, t, packs, a->src + (size_t)b0 * a->Ts, a->src_len + b0, b1 - b0, a->Ts, a->bos,
                  a->eos, a->max_steps, a->out + (size_t)b0 * a->max_steps, a->out_len + b0, NULL,
                  NULL);
}

int zoo_greedy(zoo_model *m, ag_tape *t, const int32_t *src, const int32_t *src_len, int B, int Ts,
               int32_t bos, int32_t eos, int max_steps, int32_t *out, int *out_len) {
    decode_args a = {src, src_len, Ts, bos, eos, max_steps, 1, 0, out, out_len};
    return in_chunks(m, t, B, 1, greedy_chunk, &a);
}

/* ---- beam search ---- */

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
    eval_scope sc = scope_begin(t, packs);
    ag_tape_pos mark;
    void *state = encode_for_steps(m, &sc, src, src_len, B, Ts, B * K, max_steps, NULL, &mark);
    int rc = state ? 0 : op_failed(&sc, "encoding");
    for (int s = 0, n = B; !rc && s < max_steps && n > 0; s++) {
        ag_tensor *y = m->ops->step(m, &sc.c, state, a.tok, n, NULL);
        if (!y) {
            rc = op_failed(&sc, "decoding");
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
            rc = op_failed(&sc, "decoding");
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
    return rc ? rc : scope_end(&sc, 0);
}

static int beam_chunk(zoo_model *m, ag_tape *t, nn_packs *packs, int b0, int b1, const void *args) {
    const decode_args *a = args;
    return beam_search(m, t, packs, a->src + (size_t)b0 * a->Ts, a->src_len + b0, b1 - b0, a->Ts,
                       a->bos, a->eos, a->max_steps, a->beam, a->alpha,
                       a->out + (size_t)b0 * a->max_steps, a->out_len + b0);
}

int zoo_beam_search(zoo_model *m, ag_tape *t, const int32_t *src, const int32_t *src_len, int B,
                    int Ts, int32_t bos, int32_t eos, int max_steps, int beam, double alpha,
                    int32_t *out, int *out_len) {
    if (beam < 1) return ag_error("beam search: beam size %d < 1", beam);
    decode_args a = {src, src_len, Ts, bos, eos, max_steps, beam, alpha, out, out_len};
    return in_chunks(m, t, B, beam, beam_chunk, &a);
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

int zoo_translate_batch(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab,
                        const ds_vocab *tgt_vocab, const char *const *sentences, int n,
                        int num_steps, int beam, double alpha, char **outs) {
    for (int i = 0; i < n; i++) outs[i] = NULL;
    const int T = num_steps,
              chunk = beam > 1 ? (ZOO_DECODE_ROWS + beam - 1) / beam : ZOO_DECODE_ROWS;
    int32_t *src = malloc(sizeof *src * (size_t)chunk * T),
            *len = malloc(sizeof *len * (size_t)chunk);
    int32_t *res = malloc(sizeof *res * (size_t)chunk * T);
    int *res_len = malloc(sizeof *res_len * (size_t)chunk);
    int rc = src && len && res && res_len ? 0 : ag_error("translate: out of memory");
    int32_t bos = ds_vocab_id(tgt_vocab, "<bos>"), eos = ds_vocab_id(tgt_vocab, "<eos>");
    for (int at = 0; !rc && at < n; at += chunk) {
        int B = n - at < chunk ? n - at : chunk;
        for (int b = 0; !rc && b < B; b++)
            rc = encode_sentence(src_vocab, sentences[at + b], T, src + (size_t)b * T, &len[b]);
        if (!rc)
            rc = beam > 1
                     ? zoo_beam_search(m, t, src, len, B, T, bos, eos, T, beam, alpha, res, res_len)
                     : zoo_greedy(m, t, src, len, B, T, bos, eos, T, res, res_len);
        for (int b = 0; !rc && b < B; b++)
            rc = ids_to_text(tgt_vocab, res + (size_t)b * T, res_len[b], &outs[at + b]);
    }
    for (int i = 0; rc && i < n; i++) {
        free(outs[i]);
        outs[i] = NULL;
    }
    free(src), free(len), free(res), free(res_len);
    return rc;
}

int zoo_translate(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab, const ds_vocab *tgt_vocab,
                  const char *sentence, int num_steps, int beam, double alpha, char **out) {
    return zoo_translate_batch(m, t, src_vocab, tgt_vocab, &sentence, 1, num_steps, beam, alpha,
                               out);
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
    int h_enc = m->ops->attn_heads(m, ZOO_ATTN_ENC_SELF),
        h_self = m->ops->attn_heads(m, ZOO_ATTN_DEC_SELF);
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
    if (!rc)
        rc = greedy(m, t, NULL, ids, &len, 1, Ts, bos, eos, num_steps, res, &n, record_hook, rec);
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
                    const char *what, const char *title, const char *const *rl,
                    const char *const *cl, const char *xl, const char *yl) {
    if (!mp->w || !mp->layers || rows < 1) return 0;
    size_t n = (size_t)mp->layers * mp->heads;
    float *w = malloc(sizeof *w * n * rows * cols);
    char **titles = calloc(n, sizeof *titles);
    int rc = -1;
    if (w && titles) {
        for (size_t k = 0; k < n; k++) {
            for (int r = 0; r < rows; r++)
                memcpy(w + (k * rows + r) * cols, mp->w + (k * mp->rows + r) * mp->cols,
                       sizeof *w * cols);
            titles[k] = malloc(64);
            if (titles[k])
                snprintf(titles[k], 64, "layer %d, head %d", (int)(k / mp->heads) + 1,
                         (int)(k % mp->heads) + 1);
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s_%s.svg", dir, prefix, what);
        rc = zoo_svg_heatmaps(path, title, mp->layers, mp->heads, (const char *const *)titles, w,
                              rows, cols, rl, cl, xl, yl);
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
                   plot_map(&rec->dec_self, S, S, dir, prefix, "decoder_self",
                            "decoder self-attention", tgt, tgt, "keys", "queries") ||
                   plot_map(&rec->dec_cross, S, Ts, dir, prefix, "decoder_cross",
                            "decoder-encoder attention", tgt, src, "keys (source)",
                            "queries (target)")
               ? -1
               : 0;
}

/* ---- evaluation ---- */

int zoo_evaluate(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab, const ds_vocab *tgt_vocab,
                 const ds_fra *data, ds_part part, int num_steps, zoo_eval_result *r) {
    memset(r, 0, sizeof *r);
    int T = num_steps,
        chunk = 2048; /* sentences per zoo_greedy call (it shares them out in chunks) */
    int64_t n = ds_fra_part_size(data, part);
    const int64_t *pairs = ds_fra_part_pairs(data, part);
    if (n <= 0) return ag_error("evaluate: the chosen split is empty");
    int32_t *src = malloc(sizeof *src * (size_t)chunk * T),
            *len = malloc(sizeof *len * (size_t)chunk);
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
