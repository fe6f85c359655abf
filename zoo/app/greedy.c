/* greedy.c -- greedy decoding, d2l's predict_seq2seq, batched over sentences: every row takes
 * its argmax token each step, and rows that said <eos> leave the batch. */
#include "zoo/app/decode_internal.h"

#include "autograd/ag_op.h"

#include <stdlib.h>
#include <string.h>

int zoo__greedy(zoo_model *m, ag_tape *t, nn_packs *packs, const int32_t *src,
                const int32_t *src_len, int B, int Ts, int32_t bos, int32_t eos, int max_steps,
                int32_t *out, int *out_len, zoo__step_hook hook, void *user) {
    for (int b = 0; b < B; b++) out_len[b] = 0;
    /* row r of the state decodes sentence sent[r]; tok[r] is its next input */
    int32_t *tok = malloc(sizeof *tok * (size_t)B), *sent = malloc(sizeof *sent * (size_t)B);
    int32_t *keep = malloc(sizeof *keep * (size_t)B);
    if (!tok || !sent || !keep) {
        free(tok), free(sent), free(keep);
        return ag_error("greedy decoding: out of memory");
    }
    zoo__eval_scope sc = zoo__scope_begin(t, packs);
    zoo_attn_trace trace = {0}, *tr = NULL;
    int rc = 0;
    if (hook) {
        int most = m->layers > m->dec_layers ? m->layers : m->dec_layers;
        size_t n = (size_t)(most > 0 ? most : 1);
        ag_tensor **w = ag_tape_alloc(t, sizeof *w * 3 * n);
        if (w) {
            memset(w, 0, sizeof *w * 3 * n);
            trace = (zoo_attn_trace){w, w + n, w + 2 * n};
            tr = &trace;
        } else {
            rc = zoo__op_failed(&sc, "encoding");
        }
    }
    ag_tape_pos mark;
    void *state =
        rc ? NULL : zoo__encode_for_steps(m, &sc, src, src_len, B, Ts, B, max_steps, tr, &mark);
    if (!rc && !state) rc = zoo__op_failed(&sc, "encoding");
    if (!rc && hook) hook(m, -1, tr, user);
    for (int r = 0; r < B; r++) {
        tok[r] = bos;
        sent[r] = r;
    }
    const int V = m->tgt_vocab;
    for (int s = 0, n = B; !rc && s < max_steps && n > 0; s++) {
        ag_tensor *y = m->ops->step(m, &sc.c, state, tok, n, tr);
        if (!y) {
            rc = zoo__op_failed(&sc, "decoding");
            break;
        }
        if (hook) hook(m, s, tr, user);
        int kept = 0; /* the rows that did not say <eos> go on; tok[r] < 0: row r ended */
        for (int r = 0; r < n; r++) {
            int32_t k = (int32_t)ag_row_argmax(y->data + (size_t)r * V, V), b = sent[r];
            tok[r] = k == eos ? -1 : k;
            if (k == eos) continue;
            out[(size_t)b * max_steps + out_len[b]++] = k;
            kept++;
        }
        /* the rows [0, kept) go on: an ended one takes the last row that goes on, so the state
         * moves one row per ended row, not every row after it */
        for (int i = 0, j = n - 1; i < kept; i++) {
            keep[i] = i;
            if (tok[i] >= 0) continue;
            while (tok[j] < 0) j--;
            keep[i] = j, sent[i] = sent[j], tok[i] = tok[j];
            j--;
        }
        if (ag_tape_rewind(t, mark) ||
            (kept && kept < n && m->ops->select(m, &sc.c, state, keep, kept)))
            rc = zoo__op_failed(&sc, "decoding");
        n = kept;
    }
    free(tok), free(sent), free(keep);
    return rc ? rc : zoo__scope_end(&sc, 0);
}

static int greedy_chunk(zoo_model *m, ag_tape *t, nn_packs *packs, const zoo__chunk *ch,
                        const void *args) {
    const zoo__decode_args *a = args;
    return zoo__greedy(m, t, packs, ch->src, ch->src_len, ch->B, ch->Ts, a->bos, a->eos,
                       a->max_steps, ch->out, ch->out_len, NULL, NULL);
}

int zoo_greedy(zoo_model *m, ag_tape *t, const int32_t *src, const int32_t *src_len, int B, int Ts,
               int32_t bos, int32_t eos, int max_steps, int32_t *out, int *out_len) {
    zoo__decode_args a = {bos, eos, max_steps, 1, 0};
    return zoo__in_chunks(m, t, src, src_len, B, Ts, max_steps, out, out_len, 1, greedy_chunk, &a);
}
