/* datasets/fra_codec.c -- a side of a dataset re-encoded through a vocabulary's codec
 * (ds_fra_set_vocab, fra_eng.h): subword units instead of d2l's words. */
#include <stdlib.h>
#include <string.h>

#include "autograd/ag_base.h"
#include "datasets/fra_internal.h"
#include "datasets/internal.h"
#include "datasets/text.h"

int ds_fra_tagged(const ds_fra *d, ds_side side, int64_t pair, char **out) {
    const char *src = ds_fra_raw(d, DS_SRC, pair, NULL);
    const uint64_t key = (uint64_t)pair + 1; /* the pair's own shuffle of the tags, never 0 */
    return side == DS_SRC ? ds_numtag_source(src, key, out)
                          : ds_numtag_target(src, ds_fra_raw(d, DS_TGT, pair, NULL), key, out);
}

/* Pair p's side as its vocabulary's codec reads it: the raw text, or ds_fra_tagged's when v has
 * number tags. *tagged: NULL, or the tagged text (malloc'd) that *text then points to. 0 or -1. */
static int side_text(const ds_fra *d, ds_side side, int64_t p, const ds_vocab *v, const char **text,
                     char **tagged) {
    *tagged = NULL;
    *text = ds_fra_raw(d, side, p, NULL);
    if (!ds_vocab_number_tags(v)) return 0;
    if (ds_fra_tagged(d, side, p, tagged)) return -1;
    *text = *tagged;
    return 0;
}

/* The side's tokens: every pair's side (side_text) through the codec, ids into sd->tok (the
 * types are a copy of the vocabulary, so type id = vocabulary id). 0 or -1. */
static int encode_all(ds_fra *d, ds_fra_side *sd, ds_side side, const ds_vocab *v) {
    const ds_codec *c = ds_vocab_codec(v);
    int32_t nv = ds_vocab_size(v);
    sd->ntok = 0;
    sd->off[0] = 0;
    for (int64_t p = 0; p < d->n_pairs; p++) {
        int32_t *ids = NULL;
        size_t n = 0;
        const char *text;
        char *tagged;
        int rc = side_text(d, side, p, v, &text, &tagged) || c->encode(c->ctx, text, &ids, &n);
        free(tagged);
        if (rc) return ag_error_context("line %lld", (long long)d->line_of_pair[p] + 1);
        if (sd->ntok + n > sd->captok) {
            int32_t *t = ds_regrow(sd->tok, &sd->captok, sd->ntok + n, sizeof *sd->tok);
            if (!t) return free(ids), -1;
            sd->tok = t;
        }
        for (size_t j = 0; j < n; j++) {
            if (ids[j] < 0 || ids[j] >= nv) {
                int bad = ids[j];
                free(ids);
                return ag_error("line %lld: the %s codec gave id %d, outside its vocabulary of %d",
                                (long long)d->line_of_pair[p] + 1, c->name, bad, (int)nv);
            }
            sd->tok[sd->ntok++] = ids[j];
        }
        free(ids);
        sd->off[p + 1] = (int64_t)sd->ntok;
    }
    return 0;
}

/* The ids (+ <eos>, truncated or padded) and valid lengths of every pair; the truncated count. */
static void make_arrays(const ds_fra *d, ds_fra_side *sd, int64_t *truncated) {
    const int T = d->opt.num_steps;
    *truncated = 0;
    for (int64_t p = 0; p < d->n_pairs; p++) {
        int32_t *row = sd->ids + p * T;
        int64_t len = sd->off[p + 1] - sd->off[p];
        int j = 0;
        for (; j < T && j < len; j++) row[j] = sd->tok[sd->off[p] + j];
        if (j < T) row[j++] = DS_EOS;
        else (*truncated)++;
        sd->valid_len[p] = j;
        for (; j < T; j++) row[j] = DS_PAD;
    }
}

int ds_fra_set_vocab(ds_fra *d, ds_side side, ds_vocab *v) {
    ds_fra_side *sd = &d->side[side];
    if (!ds_vocab_codec(v)) {
        ds_vocab_free(v);
        return ag_error("ds_fra_set_vocab: the vocabulary has no codec");
    }
    ds_vocab_free(sd->vocab);
    sd->vocab = v;
    ds_vocab *types = ds_vocab_new();
    int rc = types ? 0 : -1;
    for (int32_t id = 0; !rc && id < ds_vocab_size(v); id++) {
        size_t len;
        const char *t = ds_vocab_token(v, id, &len);
        rc = ds_vocab_add(types, t, len, NULL);
    }
    ds_vocab_free(sd->types);
    sd->types = types;
    if (!rc) rc = encode_all(d, sd, side, v);
    if (rc) return -1;
    d->stats.tokens[side] = (int64_t)sd->ntok;
    make_arrays(d, sd, &d->stats.truncated[side]);
    return 0;
}
