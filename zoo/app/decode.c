/* decode.c -- what greedy decoding (greedy.c) and beam search (beam.c) share: the eval scope,
 * encoding before the steps, and a call's sentences cut into chunks that the engine's threads
 * take as tasks, with the model's Linear weights packed once per call. Sentences <-> ids:
 * translate.c; attention recording and plots: attention.c; evaluation on a split: evaluate.c. */
#include "zoo/app/decode_internal.h"

#include <stdlib.h>
#include <string.h>

zoo__eval_scope zoo__scope_begin(ag_tape *t, nn_packs *packs) {
    ag_tape_reset(t);
    zoo__eval_scope s = {
        t, ag_tape_set_recording(t, false), {.tape = t, .training = false, .packs = packs}};
    return s;
}

int zoo__scope_end(zoo__eval_scope *s, int rc) {
    ag_tape_set_recording(s->t, s->prev);
    ag_tape_reset(s->t);
    return rc;
}

int zoo__op_failed(zoo__eval_scope *s, const char *what) {
    return zoo__scope_end(s, ag_error_context("%s failed", what));
}

void *zoo__encode_for_steps(zoo_model *m, zoo__eval_scope *sc, const int32_t *src,
                            const int32_t *src_len, int B, int Ts, int rows, int max_steps,
                            const zoo_attn_trace *trace, ag_tape_pos *mark) {
    void *state = m->ops->encode(m, &sc->c, src, src_len, B, Ts, trace);
    if (!state || m->ops->reserve(m, &sc->c, state, rows, max_steps)) return NULL;
    *mark = ag_tape_mark(sc->t);
    return state;
}

/* ---- sentences in chunks, shared between the threads ----
 * A call of B sentences is cut into chunks of about CHUNK_ROWS decoder rows (sentences times
 * beam); the cut depends on B and the beam alone. The chunks take the sentences in order of
 * valid length, longest first (as Marian and fairseq batch by length), so that a chunk's
 * sources are of about one length: when the model is pad_free, each chunk is cut to its
 * longest source and the padding no row attends to is neither encoded nor attended. Each chunk
 * is a task of ag_run_tasks: decoded on its own, start to end, by whichever of the engine's
 * threads takes it next (the caller on its tape, the others on tapes of their own), with the
 * ops inside serial; the longest go first, so the last tasks are the short ones. Results do not
 * depend on the number of threads, a thread starved of CPU takes no more chunks (the pool's
 * rule), and the threads meet once per call instead of once per op. Rows are independent in
 * every step of the model, and a pad_free model's rows do not see the padding, so a chunk
 * decodes each sentence exactly as it would alone. */

#define CHUNK_ROWS 256

typedef struct chunk_job {
    zoo_model *m;
    nn_packs *packs;
    zoo__chunk_fn fn;
    const void *args;
    const zoo__chunk *chunks;
    ag_tape **tapes; /* per thread number: [0] the caller's, the others made at their first chunk */
} chunk_job;

static int chunk_task(void *ctx, int c, int thread) {
    chunk_job *j = ctx;
    ag_tape **t = &j->tapes[thread];
    if (!*t && !(*t = ag_tape_new()))
        return ag_error("decoding: out of memory for a thread's tape");
    return j->fn(j->m, *t, j->packs, &j->chunks[c], j->args);
}

/* Sentence b's rank in the order: Ts minus its valid length clipped to [0, Ts]. */
static int rank_of(const int32_t *src_len, int b, int Ts) {
    return Ts - (src_len[b] < 0 ? 0 : src_len[b] < Ts ? src_len[b] : Ts);
}

/* order (B,): the sentences by valid length, longest first, ties in their order (a counting
 * sort over the Ts + 1 ranks). 0 or -1. */
static int by_length(const int32_t *src_len, int B, int Ts, int32_t *order) {
    int *start = calloc((size_t)Ts + 2, sizeof *start);
    if (!start) return -1;
    for (int b = 0; b < B; b++) start[rank_of(src_len, b, Ts) + 1]++;
    for (int k = 0; k <= Ts; k++) start[k + 1] += start[k];
    for (int b = 0; b < B; b++) order[start[rank_of(src_len, b, Ts)]++] = b;
    free(start);
    return 0;
}

/* The chunks' inputs: chunk c holds sorted positions [B c / n, B (c + 1) / n), its sources
 * packed at their own width in src_s; results go to out_s / len_s in sorted order. */
static void cut_chunks(const zoo_model *m, const int32_t *src, const int32_t *src_len, int B,
                       int Ts, int max_steps, const int32_t *order, int n, int32_t *src_s,
                       int32_t *srclen_s, int32_t *out_s, int *len_s, zoo__chunk *chunks) {
    for (int c = 0; c < n; c++) {
        int b0 = (int)((int64_t)B * c / n), b1 = (int)((int64_t)B * (c + 1) / n);
        /* sorted: the chunk's first is its longest, its last its shortest; a row that attends
         * to no key (valid length 0) spreads its attention over all Ts: no cut then */
        int w = Ts, longest = src_len[order[b0]], shortest = src_len[order[b1 - 1]];
        if (m->ops->pad_free && longest < Ts && shortest >= 1) w = longest;
        for (int i = b0; i < b1; i++) {
            memcpy(src_s + (size_t)b0 * Ts + (size_t)(i - b0) * w, src + (size_t)order[i] * Ts,
                   sizeof *src * (size_t)w);
            srclen_s[i] = src_len[order[i]];
        }
        chunks[c] = (zoo__chunk){.src = src_s + (size_t)b0 * Ts,
                                 .src_len = srclen_s + b0,
                                 .B = b1 - b0,
                                 .Ts = w,
                                 .out = out_s + (size_t)b0 * max_steps,
                                 .out_len = len_s + b0};
    }
}

static int run_chunks(zoo_model *m, ag_tape *t, nn_packs *packs, const zoo__chunk *chunks, int n,
                      zoo__chunk_fn fn, const void *args) {
    if (n < 2) return fn(m, t, packs, &chunks[0], args);
    int threads = ag_threads();
    ag_tape **tapes = calloc((size_t)threads, sizeof *tapes);
    if (!tapes) return ag_error("decoding: out of memory");
    tapes[0] = t;
    chunk_job j = {m, packs, fn, args, chunks, tapes};
    int rc = ag_run_tasks(n, chunk_task, &j, NULL);
    for (int i = 1; i < threads; i++) ag_tape_free(tapes[i]);
    free(tapes);
    return rc;
}

/* Refuses a source id outside the model's vocabulary, naming the sentence and the position in
 * the caller's terms (the chunks reorder and cut the sentences). */
static int check_ids(const zoo_model *m, const int32_t *src, int B, int Ts) {
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Ts; i++) {
            int32_t id = src[(size_t)b * Ts + i];
            if (id < 0 || id >= m->src_vocab)
                return ag_error("decoding: sentence %d, position %d: source id %d, expected 0 .. "
                                "%d (the source vocabulary)",
                                b, i, (int)id, m->src_vocab - 1);
        }
    return 0;
}

int zoo__in_chunks(zoo_model *m, ag_tape *t, const int32_t *src, const int32_t *src_len, int B,
                   int Ts, int max_steps, int32_t *out, int *out_len, int rows_each,
                   zoo__chunk_fn fn, const void *args) {
    if (B < 1) return 0;
    if (check_ids(m, src, B, Ts)) return -1;
    int per = CHUNK_ROWS / rows_each > 0 ? CHUNK_ROWS / rows_each : 1;
    int n = (B + per - 1) / per;
    int32_t *order = malloc(sizeof *order * (size_t)B),
            *src_s = malloc(sizeof *src_s * (size_t)B * Ts);
    int32_t *srclen_s = malloc(sizeof *srclen_s * (size_t)B);
    int32_t *out_s = malloc(sizeof *out_s * (size_t)B * max_steps);
    int *len_s = malloc(sizeof *len_s * (size_t)B);
    zoo__chunk *chunks = malloc(sizeof *chunks * (size_t)n);
    nn_packs *packs = m->packs ? m->packs : nn_packs_new();
    int rc = 0;
    if (!order || !src_s || !srclen_s || !out_s || !len_s || !chunks || !packs ||
        by_length(src_len, B, Ts, order))
        rc = ag_error("decoding %d sentences: out of memory", B);
    if (!rc) {
        cut_chunks(m, src, src_len, B, Ts, max_steps, order, n, src_s, srclen_s, out_s, len_s,
                   chunks);
        rc = run_chunks(m, t, packs, chunks, n, fn, args);
    }
    for (int i = 0; !rc && i < B; i++) { /* back to the caller's order */
        out_len[order[i]] = len_s[i];
        memcpy(out + (size_t)order[i] * max_steps, out_s + (size_t)i * max_steps,
               sizeof *out * (size_t)len_s[i]);
    }
    if (packs != m->packs) nn_packs_free(packs);
    free(order), free(src_s), free(srclen_s), free(out_s), free(len_s), free(chunks);
    return rc;
}

/* ---- quantized inference ---- */

int zoo_decode_quantize(zoo_model *m, nn_quant q, bool output) {
    if (q != NN_QUANT_NONE && q != NN_QUANT_INT8 && q != NN_QUANT_BF16)
        return ag_error("zoo_decode_quantize: mode %d, expected none, int8 or bf16", (int)q);
    nn_packs_free(m->packs);
    m->packs = NULL;
    if (q == NN_QUANT_NONE) return 0;
    nn_packs *p = nn_packs_new();
    if (!p) return ag_error_context("zoo_decode_quantize");
    nn_packs_set_quant(p, q);
    /* unless output: the output layer (the one matrix over the target vocabulary; an embedding
     * of the same shape is not a Linear, so keeping it float changes nothing) gives float
     * logits */
    for (size_t i = 0; !output && i < nn_params_count(m->ps); i++) {
        const ag_tensor *w = nn_params_at(m->ps, i);
        if (w->ndim == 2 && w->shape[0] == m->tgt_vocab && nn_packs_keep_float(p, w)) {
            nn_packs_free(p);
            return ag_error_context("zoo_decode_quantize");
        }
    }
    m->packs = p;
    return 0;
}
