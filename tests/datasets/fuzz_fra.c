/* tests/datasets/fuzz_fra.c -- libFuzzer harness for the reader, the tokenizer, the
 * lowercasing, the vocabulary parser, the metrics and the number tags. Built and run by run_fuzz.sh:
 *
 *     tests/datasets/run_fuzz.sh 60        # seconds
 *
 * The first input byte picks the options (num_examples, num_steps, min_freq, batch size,
 * split); the rest is the file. Every successful load is checked against the pipeline's
 * invariants; any violation calls abort() so libFuzzer reports it with the input. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/fra_eng.h"
#include "datasets/metrics.h"
#include "datasets/text.h"
#include "datasets/unicode.h"
#include "datasets/vocab.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_fra: invariant failed at %s:%d: %s\n", __FILE__, __LINE__,       \
                    #cond);                                                                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = ds_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (l == 0) return false;
        i += (size_t)l;
    }
    return true;
}

static void check_status(int rc) {
    CHECK(rc == 0 || rc == -1); /* the error contract: 0, or -1 with a message */
    if (rc) CHECK(ag_last_error()[0] != 0);
}

static void check_dataset(ds_fra *d) {
    const ds_fra_options *o = ds_fra_opts(d);
    const int T = ds_fra_num_steps(d);
    const int64_t n = ds_fra_num_pairs(d);
    const ds_fra_stats *st = ds_fra_get_stats(d);
    CHECK(n > 0 && n == st->pairs);
    CHECK(st->lines == st->pairs + st->skipped_no_tab + st->skipped_many_tabs);
    if (o->num_examples) CHECK(st->lines <= o->num_examples + 1);
    for (int s = 0; s < 2; s++) {
        const ds_vocab *v = ds_fra_vocab(d, (ds_side)s);
        CHECK(ds_vocab_check_reserved(v) == 0);
        const int32_t V = ds_vocab_size(v);
        const int32_t *ids = ds_fra_ids(d, (ds_side)s), *vl = ds_fra_valid_len(d, (ds_side)s);
        int64_t tokens = 0;
        for (int64_t p = 0; p < n; p++) {
            int32_t len = ds_fra_sentence_len(d, (ds_side)s, p), nonpad = 0;
            CHECK(len >= 1);
            tokens += len;
            for (int j = 0; j < T; j++) {
                int32_t id = ids[p * T + j];
                CHECK(id >= 0 && id < V);
                nonpad += id != DS_PAD;
                if (j == len) CHECK(id == DS_EOS);
                if (j > len) CHECK(id == DS_PAD);
            }
            CHECK(vl[p] == nonpad && vl[p] <= T);
            for (int32_t j = 0; j < len; j++) {
                size_t tl;
                const char *t = ds_fra_token(d, (ds_side)s, p, j, &tl);
                CHECK(t && strlen(t) == tl && !memchr(t, ' ', tl) && !memchr(t, '\t', tl) &&
                      !memchr(t, '\n', tl) && !memchr(t, '\r', tl) && valid_utf8(t, tl));
                /* the array holds the token's id, or <unk> when it is not in the vocabulary */
                if (j < T) {
                    int32_t want = ds_vocab_find(v, t, tl);
                    CHECK(ids[p * T + j] == (want < 0 ? DS_UNK : want));
                }
            }
            char *sent;
            CHECK(ds_fra_sentence(d, (ds_side)s, p, &sent) == 0);
            /* preprocessed text is already lowercase */
            char *low;
            size_t ll, sl = strlen(sent);
            CHECK(ds_utf8_lower(sent, sl, &low, &ll) == 0);
            CHECK(ll == sl && memcmp(low, sent, sl) == 0);
            free(low);
            free(sent);
        }
        CHECK(tokens == st->tokens[s]);
    }
    /* batches of the training part visit each of its pairs once per epoch */
    ds_batches *it;
    int64_t ntrain = ds_fra_part_size(d, DS_TRAIN);
    CHECK(ds_fra_part_size(d, DS_VALID) + ds_fra_part_size(d, DS_TEST) + ntrain == n ||
          ds_fra_part_size(d, DS_TRAIN) == n);
    CHECK(ds_batches_new(d, DS_TRAIN, true, &it) == 0);
    char *seen = calloc((size_t)n, 1);
    for (int epoch = 0; epoch < 2; epoch++) {
        ds_batches_epoch(it, epoch);
        ds_batch b;
        int64_t total = 0;
        memset(seen, 0, (size_t)n);
        while (ds_batches_next(it, &b)) {
            CHECK(b.size >= 1 && b.size <= o->batch_size);
            for (int r = 0; r < b.size; r++) {
                CHECK(b.pairs[r] >= 0 && b.pairs[r] < n && !seen[b.pairs[r]]);
                seen[b.pairs[r]] = 1;
                CHECK(memcmp(b.src + r * T, ds_fra_ids(d, DS_SRC) + b.pairs[r] * T,
                             (size_t)T * 4) == 0);
            }
            total += b.size;
        }
        CHECK(total == ntrain);
    }
    free(seen);
    ds_batches_free(it);
}

static void fuzz_metrics(const char *a, const char *b) {
    double s;
    int rc = ds_bleu_d2l(a, b, 2, &s);
    check_status(rc);
    if (!rc) CHECK(s >= 0.0 && s <= 1.0 + 1e-12);
    ds_bleu_score bs;
    rc = ds_corpus_bleu(&a, &b, 1, &bs);
    check_status(rc);
    if (!rc) CHECK(bs.score >= 0.0 && bs.score <= 100.0 + 1e-9 && !isnan(bs.score));
    rc = ds_corpus_chrf(&a, &b, 1, &s);
    check_status(rc);
    if (!rc) CHECK(s >= 0.0 && s <= 100.0 + 1e-9 && !isnan(s));
    /* a text against itself */
    if (ds_corpus_chrf(&a, &a, 1, &s) == 0 && strlen(a) > 0)
        CHECK(s == 0.0 || fabs(s - 100.0) < 1e-9);
}

/* Number tags (datasets/text.h) of src and its "translation" tgt: valid UTF-8 out, never longer
 * than 3 bytes a byte in; a source's tags in order restored give the source back, less the tag
 * characters it held. */
static void fuzz_numtags(const char *src, const char *tgt, uint64_t key) {
    char *s = NULL, *t = NULL, *back = NULL;
    int rc = ds_numtag_source(src, 0, &s);
    check_status(rc);
    if (rc) return;
    CHECK(valid_utf8(s, strlen(s)) && strlen(s) <= 3 * strlen(src));
    CHECK(ds_numtag_restore(src, s, &back) == 0);
    size_t k = 0, n = strlen(src);
    char *plain = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        const unsigned char *u = (const unsigned char *)src + i;
        if (i + 2 < n && u[0] == 0xEE && u[1] == 0x80 && u[2] >= 0x80 &&
            u[2] < 0x80 + DS_NUMTAG_MAX)
            i += 2;
        else plain[k++] = src[i];
    }
    plain[k] = '\0';
    CHECK(strcmp(back, plain) == 0);
    rc = ds_numtag_target(src, tgt, key, &t);
    check_status(rc);
    if (!rc) CHECK(valid_utf8(t, strlen(t)) && strlen(t) <= 3 * strlen(tgt));
    free(s), free(t), free(back), free(plain);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t ctl = data[0];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;

    ds_fra_options o = ds_fra_defaults();
    o.num_examples = ctl & 3; /* 0 = every line */
    o.num_steps = 1 + ((ctl >> 2) & 7);
    o.min_freq = (ctl >> 5) & 1 ? 1 : 2;
    o.batch_size = 1 + ((ctl >> 2) & 3);
    if (ctl & 0x80) {
        o.valid_frac = 0.25;
        o.test_frac = 0.25;
        o.split_seed = ctl;
    }
    ds_fra *d = NULL;
    int rc = ds_fra_load_mem(text, n, "fuzz", &o, &d);
    check_status(rc);
    if (rc == 0) {
        check_dataset(d);
        /* predict helpers with the learned vocabulary */
        char *z = malloc(n + 1);
        memcpy(z, text, n);
        z[n] = 0;
        int32_t ids[8], vl;
        rc = ds_encode_sentence(ds_fra_vocab(d, DS_SRC), z, 8, ids, &vl);
        check_status(rc);
        if (!rc) {
            char *back;
            CHECK(ds_decode_ids(ds_fra_vocab(d, DS_SRC), ids, 8, &back) == 0);
            free(back);
        }
        free(z);
        ds_fra_free(d);
    } else {
        CHECK(d == NULL);
    }

    /* Python-compatible lowercasing: valid UTF-8 out, idempotent */
    char *low;
    size_t ll;
    rc = ds_utf8_lower(text, n, &low, &ll);
    check_status(rc);
    if (rc == 0) {
        CHECK(valid_utf8(low, ll) && ll <= n + n / 2);
        char *low2;
        size_t ll2;
        CHECK(ds_utf8_lower(low, ll, &low2, &ll2) == 0);
        CHECK(ll2 == ll && memcmp(low, low2, ll) == 0);
        free(low2);
        free(low);
    }

    /* the vocabulary text format */
    ds_vocab *v = NULL;
    rc = ds_vocab_parse(text, n, "fuzz-vocab", &v);
    check_status(rc);
    if (rc == 0) {
        for (int32_t i = 0; i < ds_vocab_size(v); i++) {
            size_t tl;
            const char *t = ds_vocab_token(v, i, &tl);
            CHECK(ds_vocab_find(v, t, tl) == i);
        }
        ds_vocab_free(v);
    }

    /* metrics on the two halves of the input (NUL-terminated copies) */
    size_t h = n / 2;
    char *a = malloc(h + 1), *b = malloc(n - h + 1);
    memcpy(a, text, h);
    a[h] = 0;
    memcpy(b, text + h, n - h);
    b[n - h] = 0;
    if (strlen(a) == h && strlen(b) == n - h) {
        fuzz_metrics(a, b);
        fuzz_numtags(a, b, ctl);
    }
    free(a);
    free(b);
    return 0;
}
