/* decode.c -- what greedy decoding (greedy.c) and beam search (beam.c) share: the eval scope,
 * encoding before the steps, and a call's sentences cut into chunks that the engine's threads
 * take as tasks, with the model's Linear weights packed once per call. Sentences <-> ids:
 * translate.c; attention recording and plots: attention.c; evaluation on a split: evaluate.c. */
#include "zoo/app/decode_internal.h"

#include <stdlib.h>

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
 * beam); the cut depends on B and the beam alone. Each chunk is a task of ag_run_tasks: decoded
 * on its own, start to end, by whichever of the engine's threads takes it next (the caller on
 * its tape, the others on tapes of their own), with the ops inside serial. Results therefore do
 * not depend on the number of threads, a thread starved of CPU takes no more chunks (the pool's
 * rule), and the threads meet once per call instead of once per op. Rows are independent in
 * every step of the model, so a chunk decodes exactly as it would in one large batch. */

#define CHUNK_ROWS 256

typedef struct chunk_job {
    zoo_model *m;
    nn_packs *packs;
    zoo__chunk_fn fn;
    const void *args;
    int B, chunks;
    ag_tape **tapes; /* per thread number: [0] the caller's, the others made at their first chunk */
} chunk_job;

/* Task c: sentences [B c / chunks, B (c + 1) / chunks) on the tape of its thread. */
static int chunk_task(void *ctx, int c, int thread) {
    chunk_job *j = ctx;
    ag_tape **t = &j->tapes[thread];
    if (!*t && !(*t = ag_tape_new()))
        return ag_error("decoding: out of memory for a thread's tape");
    int b0 = (int)((int64_t)j->B * c / j->chunks), b1 = (int)((int64_t)j->B * (c + 1) / j->chunks);
    return j->fn(j->m, *t, j->packs, b0, b1, j->args);
}

int zoo__in_chunks(zoo_model *m, ag_tape *t, int B, int rows_each, zoo__chunk_fn fn,
                   const void *args) {
    int per = CHUNK_ROWS / rows_each > 0 ? CHUNK_ROWS / rows_each : 1;
    int chunks = (B + per - 1) / per;
    nn_packs *packs = m->packs ? m->packs : nn_packs_new();
    if (!packs) return ag_error_context("decoding");
    int rc;
    if (chunks < 2) {
        rc = fn(m, t, packs, 0, B, args);
    } else {
        int threads = ag_threads();
        ag_tape **tapes = calloc((size_t)threads, sizeof *tapes);
        if (!tapes) {
            rc = ag_error("decoding: out of memory");
        } else {
            tapes[0] = t;
            chunk_job j = {m, packs, fn, args, B, chunks, tapes};
            rc = ag_run_tasks(chunks, chunk_task, &j, NULL);
            for (int i = 1; i < threads; i++) ag_tape_free(tapes[i]);
            free(tapes);
        }
    }
    if (packs != m->packs) nn_packs_free(packs);
    return rc;
}

/* ---- quantized inference ---- */

int zoo_decode_quantize(zoo_model *m, nn_quant q) {
    if (q != NN_QUANT_NONE && q != NN_QUANT_INT8 && q != NN_QUANT_BF16)
        return ag_error("zoo_decode_quantize: mode %d, expected none, int8 or bf16", (int)q);
    nn_packs_free(m->packs);
    m->packs = NULL;
    if (q == NN_QUANT_NONE) return 0;
    nn_packs *p = nn_packs_new();
    if (!p) return ag_error_context("zoo_decode_quantize");
    nn_packs_set_quant(p, q);
    /* the output layer (the one matrix over the target vocabulary; an embedding of the same
     * shape is not a Linear, so keeping it float changes nothing) gives float logits */
    for (size_t i = 0; i < nn_params_count(m->ps); i++) {
        const ag_tensor *w = nn_params_at(m->ps, i);
        if (w->ndim == 2 && w->shape[0] == m->tgt_vocab && nn_packs_keep_float(p, w)) {
            nn_packs_free(p);
            return ag_error_context("zoo_decode_quantize");
        }
    }
    m->packs = p;
    return 0;
}
