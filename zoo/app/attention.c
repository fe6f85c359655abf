/* attention.c -- one sentence's greedy translation recording every attention map the model
 * has (zoo_translate_attention), and the maps drawn as d2l's heatmaps (zoo_attn_record_plot). */
#include "zoo/app/decode_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zoo/app/plot.h"

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
    if (step < 0) {
        for (int l = 0; rec->enc_self.w && l < m->layers; l++)
            copy_weights(&rec->enc_self, l, tr->enc_self[l], -1);
        return;
    }
    for (int l = 0; l < m->dec_layers; l++) {
        if (rec->dec_self.w) copy_weights(&rec->dec_self, l, tr->dec_self[l], step);
        if (rec->dec_cross.w) copy_weights(&rec->dec_cross, l, tr->dec_cross[l], step);
    }
    rec->steps = step + 1;
}

int zoo_translate_attention(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab,
                            const ds_vocab *tgt_vocab, const char *sentence, int num_steps,
                            char **out, zoo_attn_record *rec) {
    memset(rec, 0, sizeof *rec);
    *out = NULL;
    int L = m->layers, D = m->dec_layers, Ts = num_steps;
    int h_enc = m->ops->attn_heads(m, ZOO_ATTN_ENC_SELF),
        h_self = m->ops->attn_heads(m, ZOO_ATTN_DEC_SELF);
    int h_cross = m->ops->attn_heads(m, ZOO_ATTN_DEC_CROSS);
    int32_t *ids = malloc(sizeof *ids * (size_t)num_steps * 2), len;
    if (!ids) return ag_error("translate: out of memory");
    int32_t *res = ids + num_steps;
    int n = 0, rc = zoo__encode_sentence(src_vocab, sentence, num_steps, ids, &len);
    if (!rc)
        rc = map_alloc(&rec->enc_self, h_enc ? L : 0, h_enc, Ts, Ts) ||
             map_alloc(&rec->dec_self, h_self ? D : 0, h_self, num_steps, num_steps) ||
             map_alloc(&rec->dec_cross, h_cross ? D : 0, h_cross, num_steps, Ts);
    int32_t bos = ds_vocab_id(tgt_vocab, "<bos>"), eos = ds_vocab_id(tgt_vocab, "<eos>");
    if (!rc)
        rc = zoo__greedy(m, t, NULL, ids, &len, 1, Ts, bos, eos, num_steps, res, &n, record_hook,
                         rec);
    if (!rc) rc = ds_decode_translation(tgt_vocab, res, (size_t)n, sentence, out);
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
