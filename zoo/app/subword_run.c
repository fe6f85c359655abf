/* subword_run.c -- subword vocabularies in a run: learned from the training pairs (train
 * --vocab subword), kept inside the checkpoint (metadata vocab.src_model / vocab.tgt_model: the
 * SentencePiece model file, base64), rebuilt from it (translate, eval, --resume). SentencePiece
 * itself is reached through the program's zoo_subword_ops (subword.h); this file does not link
 * it. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "datasets/text.h"
#include "zoo/app/model_io.h"

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* RFC 4648 base64 of p[0..n), NUL-terminated, malloc'd; NULL when out of memory. */
static char *base64(const unsigned char *p, size_t n) {
    char *s = malloc((n + 2) / 3 * 4 + 1), *o = s;
    if (!s) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *o++ = B64[v >> 18 & 63];
        *o++ = B64[v >> 12 & 63];
        *o++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? B64[v & 63] : '=';
    }
    *o = '\0';
    return s;
}

/* The bytes of base64 text s: *out malloc'd, *n bytes. 0, or -1 naming `what` and the offset
 * of the first character that is not base64. */
static int unbase64(const char *s, const char *what, unsigned char **out, size_t *n) {
    size_t len = strlen(s);
    *out = NULL;
    if (len % 4) return ag_error("%s: %zu characters of base64, not a multiple of 4", what, len);
    unsigned char *b = malloc(len / 4 * 3 + 1);
    if (!b) return ag_error("%s: out of memory", what);
    size_t k = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            const char *at = s[i + j] ? strchr(B64, s[i + j]) : NULL;
            bool tail = s[i + j] == '=' && i + 4 == len && j >= 2 && (j == 3 || s[i + 3] == '=');
            if (!at && !tail) {
                free(b);
                return ag_error("%s: not base64 at character %zu", what, i + (size_t)j + 1);
            }
            pad += tail;
            v = v << 6 | (at ? (uint32_t)(at - B64) : 0);
        }
        b[k++] = (unsigned char)(v >> 16);
        if (pad < 2) b[k++] = (unsigned char)(v >> 8);
        if (pad < 1) b[k++] = (unsigned char)v;
    }
    *out = b;
    *n = k;
    return 0;
}

static const char *const MODEL_KEYS[2] = {"vocab.src_model", "vocab.tgt_model"};
/* "1" when the models' text carries number tags (ds_vocab_number_tags); absent when not. */
static const char NUMBER_TAGS_KEY[] = "vocab.number_tags";

/* ---- reading one field of a model file (protocol buffer wire format) ---- */

/* A varint at *p (< end): its value in *v, *p past it. False when it runs past end or 10 bytes. */
static bool varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; *p < end && shift < 70; shift += 7) {
        const unsigned char b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/* The fields of a message in [p, end): the first with this number and wire type (0: varint, 2:
 * length-delimited) -- its value (*v), or its bytes ([*at, *at + *v); at may be NULL for a
 * varint). 1 found, 0 not, -1 bytes that are not a message. */
static int find_field(const unsigned char *p, const unsigned char *end, uint64_t number, int type,
                      uint64_t *v, const unsigned char **at) {
    while (p < end) {
        uint64_t key, val = 0;
        if (!varint(&p, end, &key)) return -1;
        const int wire = (int)(key & 7);
        if (wire != 0 && wire != 1 && wire != 2 && wire != 5) return -1; /* groups: none here */
        if (wire == 0 && !varint(&p, end, &val)) return -1;
        if (wire == 2 && (!varint(&p, end, &val) || val > (uint64_t)(end - p))) return -1;
        if ((wire == 1 && end - p < 8) || (wire == 5 && end - p < 4)) return -1;
        if (key >> 3 == number && wire == type) {
            *v = val;
            if (at) *at = p;
            return 1;
        }
        p += wire == 2 ? (ptrdiff_t)val : wire == 1 ? 8 : wire == 5 ? 4 : 0;
    }
    return 0;
}

int zoo__spm_split_digits(const void *model, size_t len, const char *what) {
    const unsigned char *p = model, *spec = NULL;
    uint64_t n = 0, on = 0;
    int rc = find_field(p, p + len, 2, 2, &n, &spec);              /* ModelProto.trainer_spec */
    if (rc > 0) rc = find_field(spec, spec + n, 25, 0, &on, NULL); /* TrainerSpec.split_digits */
    if (rc < 0)
        return ag_error("%s: not a SentencePiece model (a malformed protocol buffer)", what);
    return rc > 0 && on != 0;
}

int zoo_ckpt_add_codecs(nn_ckpt *ck, const ds_vocab *src, const ds_vocab *tgt) {
    const ds_vocab *vs[2] = {src, tgt};
    for (int i = 0; i < 2; i++) {
        const ds_codec *c = ds_vocab_codec(vs[i]);
        if (!c) continue;
        char *text = base64(c->model, c->model_len);
        int rc = text ? nn_ckpt_set_meta(ck, MODEL_KEYS[i], text) : ag_error("out of memory");
        free(text);
        if (rc) return -1;
    }
    return ds_vocab_codec(src) && ds_vocab_number_tags(src)
               ? nn_ckpt_set_meta(ck, NUMBER_TAGS_KEY, "1")
               : 0;
}

int zoo_ckpt_subword(const zoo_subword_ops *ops, const nn_ckpt *ck, ds_vocab **sv, ds_vocab **tv) {
    ds_vocab **out[2] = {sv, tv};
    *sv = *tv = NULL;
    for (int i = 0; i < 2; i++) {
        const char *text = nn_ckpt_meta(ck, MODEL_KEYS[i]);
        if (!text) continue;
        char what[4200];
        snprintf(what, sizeof what, "%s: metadata %s", nn_ckpt_source(ck), MODEL_KEYS[i]);
        if (!ops) {
            ag_error("%s: a subword model, and this program was built without SentencePiece", what);
            goto fail;
        }
        unsigned char *bytes = NULL;
        size_t n = 0;
        if (unbase64(text, what, &bytes, &n)) goto fail;
        int rc = ops->vocab(bytes, n, what, out[i]);
        free(bytes);
        if (rc) goto fail;
    }
    if (!*sv != !*tv) {
        ag_error("%s: metadata has %s but not %s", nn_ckpt_source(ck), MODEL_KEYS[!*sv],
                 MODEL_KEYS[!*tv]);
        goto fail;
    }
    const char *tags = nn_ckpt_meta(ck, NUMBER_TAGS_KEY);
    if (tags && (strcmp(tags, "1") || !*sv)) {
        ag_error("%s: metadata %s is '%s', expected 1 beside %s", nn_ckpt_source(ck),
                 NUMBER_TAGS_KEY, tags, MODEL_KEYS[0]);
        goto fail;
    }
    for (int i = 0; tags && i < 2; i++) ds_vocab_set_number_tags(*out[i], true);
    return 0;
fail:
    ds_vocab_free(*sv);
    ds_vocab_free(*tv);
    *sv = *tv = NULL;
    return -1;
}

/* Side `which` of pair p as the model reads it, normalized (ds_text_normalize); with number
 * tags, as ds_fra_tagged gives it (the tags of the pair's encoding). *out malloc'd. 0 or -1. */
static int pair_text(const ds_fra *d, ds_side which, int64_t p, bool tags, char **out) {
    char *tagged = NULL;
    if (tags && ds_fra_tagged(d, which, p, &tagged)) return -1;
    int rc = ds_text_normalize(tagged ? tagged : ds_fra_raw(d, which, p, NULL), out);
    free(tagged);
    return rc;
}

/* The training pairs' sides (sides: 1 the one side `side`, 2 both, English then French of each
 * pair), each as pair_text gives it, in pair order. *out: n malloc'd strings. 0 or -1. */
static int training_text(const ds_fra *d, int side, int sides, bool tags, char ***out, size_t *n) {
    int64_t np = ds_fra_part_size(d, DS_TRAIN);
    const int64_t *pairs = ds_fra_part_pairs(d, DS_TRAIN);
    char **s = calloc((size_t)np * (size_t)sides + 1, sizeof *s);
    size_t k = 0;
    int rc = s ? 0 : ag_error("out of memory");
    for (int64_t q = 0; !rc && q < np; q++)
        for (int j = 0; !rc && j < sides; j++)
            rc = pair_text(d, sides == 2 ? (ds_side)j : (ds_side)side, pairs[q], tags, &s[k++]);
    *out = s;
    *n = k;
    return rc;
}

static void free_text(char **s, size_t n) {
    for (size_t i = 0; s && i < n; i++) free(s[i]);
    free(s);
}

/* Trains one model on the training text of `side` (both: -1) and makes its vocabulary. */
static int train_one(const zoo_cli *c, const ds_fra *d, int side, ds_vocab **v) {
    const zoo_vocab_opts *o = &c->run.cfg.vocab;
    char **text = NULL, *model = NULL;
    size_t n = 0, len = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc =
        training_text(d, side < 0 ? 0 : side, side < 0 ? 2 : 1, o->number_tags != 0, &text, &n);
    if (!rc)
        rc = c->subword->train((const char *const *)text, n, o->size, o->split_digits != 0,
                               (uint32_t)c->run.cfg.data.seed, &model, &len);
    free_text(text, n);
    if (!rc) rc = c->subword->vocab(model, len, "the trained subword model", v);
    free(model);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!rc && zoo_dist_rank(c->dist) == 0)
        fprintf(stderr,
                "subword: a %s model of %d pieces learned from %zu training sentences in "
                "%.1f s\n",
                side < 0         ? "joint"
                : side == DS_SRC ? "English"
                                 : "French",
                ds_vocab_size(*v), n,
                (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return rc;
}

int zoo__subword_train(const zoo_cli *c, ds_fra *d) {
    if (!c->subword)
        return ag_error("--vocab subword: this program was built without SentencePiece");
    ds_vocab *v[2] = {NULL, NULL};
    int rc = 0;
    if (c->run.cfg.vocab.share == ZOO_VOCAB_JOINT) {
        rc = train_one(c, d, -1, &v[0]);
        /* a second vocabulary of the same model: each side's vocabulary owns its own */
        const ds_codec *k = rc ? NULL : ds_vocab_codec(v[0]);
        if (k) rc = c->subword->vocab(k->model, k->model_len, "the trained subword model", &v[1]);
    } else {
        for (int s = 0; s < 2 && !rc; s++) rc = train_one(c, d, s, &v[s]);
    }
    if (rc) {
        ds_vocab_free(v[0]);
        ds_vocab_free(v[1]);
        return -1;
    }
    for (int s = 0; s < 2; s++) ds_vocab_set_number_tags(v[s], c->run.cfg.vocab.number_tags != 0);
    rc = ds_fra_set_vocab(d, DS_SRC, v[0]); /* takes v[0], also on failure */
    if (rc) ds_vocab_free(v[1]);
    return rc ? -1 : ds_fra_set_vocab(d, DS_TGT, v[1]);
}

int zoo__subword_data(const zoo_cli *c, const nn_ckpt *ck, ds_fra *d) {
    ds_vocab *sv, *tv;
    if (zoo_ckpt_subword(c->subword, ck, &sv, &tv)) return -1;
    if (!sv) return 0;
    if (ds_fra_set_vocab(d, DS_SRC, sv)) {
        ds_vocab_free(tv);
        return -1;
    }
    return ds_fra_set_vocab(d, DS_TGT, tv);
}
