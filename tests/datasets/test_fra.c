/* tests/datasets/test_fra.c -- the d2l pipeline on the real fra.txt (numbers pinned from
 * tests/datasets/ref_numbers.py, an independent stdlib Python implementation; rerun it with
 * `python3 tests/datasets/ref_numbers.py > /tmp/ref.txt` and compare the keys quoted in the
 * comments); d2l's quirks on small synthetic files are in test_fra_quirks.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "datasets/fra_eng.h"
#include "autograd/ag_base.h"
#include "test_util.h"

static ds_fra *load_real(int64_t num_examples, int32_t num_steps) {
    const char *path = tu_data_path();
    if (!path) return NULL;
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = num_examples;
    o.num_steps = num_steps;
    ds_fra *d = NULL;
    TG_OK(ds_fra_load(path, &o, &d));
    return d;
}

static void expect_tokens(const ds_vocab *v, int from, const char *const *want, int n) {
    for (int i = 0; i < n; i++) {
        const char *t = ds_vocab_token(v, from + i, NULL);
        if (!t || strcmp(t, want[i]) != 0)
            TG_FAIL("token %d is \"%s\", expected \"%s\"", from + i, t ? t : "(none)", want[i]);
    }
}

/* d2l's default run: num_examples 600 -> 601 pairs, vocabularies 184 / 201 (ref keys d600.*). */
static void test_default_run(void) {
    ds_fra *d = load_real(600, 10);
    if (!d) return;
    const ds_fra_stats *st = ds_fra_get_stats(d);
    CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 601);
    CU_ASSERT_EQUAL(st->lines, 601);
    CU_ASSERT_EQUAL(st->skipped_no_tab + st->skipped_many_tabs, 0);
    CU_ASSERT_EQUAL(st->tokens[DS_SRC], 1832);
    CU_ASSERT_EQUAL(st->tokens[DS_TGT], 1940);
    CU_ASSERT_EQUAL(st->truncated[DS_SRC], 0);
    CU_ASSERT_EQUAL(st->truncated[DS_TGT], 0);
    const ds_vocab *sv = ds_fra_vocab(d, DS_SRC), *tv = ds_fra_vocab(d, DS_TGT);
    CU_ASSERT_EQUAL(ds_vocab_size(sv), 184);
    CU_ASSERT_EQUAL(ds_vocab_size(tv), 201);
    TG_OK(ds_vocab_check_reserved(sv));
    TG_OK(ds_vocab_check_reserved(tv));
    const char *src_first[] = {".",   "!", "i",  "i'm", "it", "go",
                               "tom", "?", "me", "get", "be", "up"};
    const char *tgt_first[] = {".",    "!",    "je", "suis",  "tom", "?",
                               "j'ai", "nous", "ça", "c'est", "est", "à"};
    expect_tokens(sv, 4, src_first, 12);
    expect_tokens(tv, 4, tgt_first, 12);
    CU_ASSERT_STRING_EQUAL(ds_vocab_token(sv, 183, NULL), "how's");
    CU_ASSERT_STRING_EQUAL(ds_vocab_token(tv, 200, NULL), "recul");
    tu_expect_row(d, DS_SRC, 0, (const int32_t[]){9, 4, 3, 1, 1, 1, 1, 1, 1, 1});
    tu_expect_row(d, DS_SRC, 1, (const int32_t[]){113, 4, 3, 1, 1, 1, 1, 1, 1, 1});
    tu_expect_row(d, DS_SRC, 2, (const int32_t[]){54, 5, 3, 1, 1, 1, 1, 1, 1, 1});
    tu_expect_row(d, DS_TGT, 0, (const int32_t[]){16, 5, 3, 1, 1, 1, 1, 1, 1, 1});
    tu_expect_row(d, DS_TGT, 1, (const int32_t[]){65, 5, 3, 1, 1, 1, 1, 1, 1, 1});
    tu_expect_row(d, DS_TGT, 2, (const int32_t[]){66, 5, 3, 1, 1, 1, 1, 1, 1, 1});
    const int32_t tvl[] = {3, 3, 3, 3, 3, 4, 4, 4, 3, 4};
    for (int i = 0; i < 10; i++) {
        CU_ASSERT_EQUAL(ds_fra_valid_len(d, DS_SRC)[i], 3);
        CU_ASSERT_EQUAL(ds_fra_valid_len(d, DS_TGT)[i], tvl[i]);
    }
    /* every id and valid length, index for index */
    CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_ids(d, DS_SRC), 6010), 0x4ec1559795e4580fULL);
    CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_valid_len(d, DS_SRC), 601), 0xadd394b92c3d1476ULL);
    CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_ids(d, DS_TGT), 6010), 0x9b1e46d72702ac74ULL);
    CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_valid_len(d, DS_TGT), 601), 0x56b6305ea8be4c7eULL);
    tu_expect_sentence(d, DS_SRC, 0, "go .");
    tu_expect_sentence(d, DS_TGT, 0, "va !");
    tu_expect_sentence(d, DS_TGT, 2, "cours !"); /* "Cours\u202f!": no double space */
    CU_ASSERT_EQUAL(ds_fra_sentence_len(d, DS_TGT, 2), 2);
    CU_ASSERT_STRING_EQUAL(ds_fra_token(d, DS_TGT, 2, 1, NULL), "!");
    CU_ASSERT_PTR_NULL(ds_fra_token(d, DS_TGT, 2, 2, NULL));
    CU_ASSERT_EQUAL(ds_fra_line_of_pair(d, 600), 600);
    CU_ASSERT_EQUAL(ds_fra_line_of_pair(d, 601), -1);
    CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_TRAIN), 601);
    CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_TEST), 0);
    ds_fra_free(d);
}

/* num_steps 5: 48 French sentences lose their <eos> (ref keys d600_steps5.*). */
static void test_truncation(void) {
    ds_fra *d = load_real(600, 5);
    if (!d) return;
    CU_ASSERT_EQUAL(ds_fra_get_stats(d)->truncated[DS_TGT], 48);
    CU_ASSERT_EQUAL(ds_fra_get_stats(d)->truncated[DS_SRC], 0);
    CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_ids(d, DS_SRC), 3005), 0x247194e0ad83bdbeULL);
    CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_ids(d, DS_TGT), 3005), 0xc6fb6d8acc4b09c3ULL);
    CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_valid_len(d, DS_TGT), 601), 0xc76ed290b3ac4560ULL);
    /* a truncated row has no <eos> and valid_len = num_steps */
    int seen = 0;
    for (int64_t p = 0; p < 601; p++) {
        if (ds_fra_sentence_len(d, DS_TGT, p) < 5) continue;
        const int32_t *row = ds_fra_ids(d, DS_TGT) + p * 5;
        for (int j = 0; j < 5; j++) CU_ASSERT_NOT_EQUAL(row[j], DS_EOS);
        CU_ASSERT_EQUAL(ds_fra_valid_len(d, DS_TGT)[p], 5);
        seen++;
    }
    CU_ASSERT_EQUAL(seen, 48);
    ds_fra_free(d);
}

/* The whole file (ref keys all.*): 167,130 pairs; the French vocabulary contains the empty
 * token (id 3887). */
static void test_whole_file(void) {
    ds_fra *d = load_real(0, 10);
    if (!d) return;
    const ds_fra_stats *st = ds_fra_get_stats(d);
    CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 167130);
    CU_ASSERT_EQUAL(st->lines, 167130);
    CU_ASSERT_EQUAL(st->tokens[DS_SRC], 1206295);
    CU_ASSERT_EQUAL(st->tokens[DS_TGT], 1267605);
    CU_ASSERT_EQUAL(st->truncated[DS_SRC], 25411);
    CU_ASSERT_EQUAL(st->truncated[DS_TGT], 34727);
    CU_ASSERT_EQUAL(ds_vocab_size(ds_fra_vocab(d, DS_SRC)), 10012);
    CU_ASSERT_EQUAL(ds_vocab_size(ds_fra_vocab(d, DS_TGT)), 17851);
    const char *src_first[] = {".", "i",  "you", "to",   "the", "?",
                               "a", "is", "tom", "that", "he",  "do"};
    const char *tgt_first[] = {".", "je", "de", "?",  "pas",  "que",
                               "à", "ne", "le", "la", "vous", "il"};
    expect_tokens(ds_fra_vocab(d, DS_SRC), 4, src_first, 12);
    expect_tokens(ds_fra_vocab(d, DS_TGT), 4, tgt_first, 12);
    CU_ASSERT_STRING_EQUAL(ds_vocab_token(ds_fra_vocab(d, DS_SRC), 10011, NULL), "semicolons");
    CU_ASSERT_STRING_EQUAL(ds_vocab_token(ds_fra_vocab(d, DS_TGT), 17850, NULL), "thaï");
    CU_ASSERT_EQUAL(ds_vocab_find(ds_fra_vocab(d, DS_TGT), "", 0), 3887);
    CU_ASSERT_EQUAL(ds_vocab_find(ds_fra_vocab(d, DS_SRC), "", 0), -1);
    CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_ids(d, DS_SRC), 1671300), 0xa90b1cb73d4ea43fULL);
    CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_valid_len(d, DS_SRC), 167130), 0x3c62df528d8480f2ULL);
    CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_ids(d, DS_TGT), 1671300), 0x04e36f8be1f17899ULL);
    CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_valid_len(d, DS_TGT), 167130), 0x9a4d69030a86cb07ULL);
    ds_fra_free(d);
}

/* d2l predict_seq2seq's encoding against the default vocabulary (ref keys predict.*). */
static void test_predict_helpers(void) {
    ds_fra *d = load_real(600, 10);
    if (!d) return;
    const ds_vocab *sv = ds_fra_vocab(d, DS_SRC), *tv = ds_fra_vocab(d, DS_TGT);
    struct {
        const char *s;
        int n;
        int32_t ids[6];
    } cases[] = {{"go .", 3, {9, 4, 3}},
                 {"i lost .", 4, {6, 20, 4, 3}},
                 {"he's calm .", 4, {58, 43, 4, 3}},
                 {"i'm home .", 4, {7, 56, 4, 3}},
                 {"Go Away Now .", 5, {9, 28, 72, 4, 3}}};
    for (int c = 0; c < 5; c++) {
        int32_t ids[10], vl = -1;
        TG_OK(ds_encode_sentence(sv, cases[c].s, 10, ids, &vl));
        CU_ASSERT_EQUAL(vl, cases[c].n);
        for (int j = 0; j < 10; j++)
            CU_ASSERT_EQUAL(ids[j], j < cases[c].n ? cases[c].ids[j] : DS_PAD);
    }
    /* longer than num_steps: truncated, no <eos>, valid_len not clipped (d2l's enc_valid_len) */
    int32_t ids[3], vl;
    TG_OK(ds_encode_sentence(sv, "i'm home now .", 3, ids, &vl));
    CU_ASSERT_EQUAL(vl, 5);
    CU_ASSERT_EQUAL(ids[0], 7);
    CU_ASSERT_EQUAL(ids[2], 72);
    /* no punctuation spacing and single-space splitting, as d2l: "go." is one unknown token,
     * a double space gives an empty (unknown) token */
    int32_t ids2[4];
    TG_OK(ds_encode_sentence(sv, "go.", 4, ids2, &vl));
    CU_ASSERT_EQUAL(ids2[0], DS_UNK);
    CU_ASSERT_EQUAL(vl, 2);
    TG_OK(ds_encode_sentence(sv, "go  .", 4, ids2, &vl));
    CU_ASSERT_EQUAL(vl, 4);
    CU_ASSERT_EQUAL(ids2[1], DS_UNK);
    /* decode: tokens up to the first <eos> */
    int32_t out[] = {ds_vocab_id(tv, "je"), ds_vocab_id(tv, "suis"), DS_UNK, DS_EOS, 5};
    char *s = NULL;
    TG_OK(ds_decode_ids(tv, out, 5, &s));
    if (s) CU_ASSERT_STRING_EQUAL(s, "je suis <unk>");
    free(s);
    TG_OK(ds_decode_ids(tv, out, 0, &s));
    if (s) CU_ASSERT_STRING_EQUAL(s, "");
    free(s);
    ds_fra_free(d);
}

/* Shuffled batches: pinned permutations (ref keys perm.d600.*), sizes, contents. */
static void test_batches(void) {
    ds_fra *d = load_real(600, 10);
    if (!d) return;
    ds_batches *it;
    TG_OK(ds_batches_new(d, DS_TRAIN, true, &it));
    if (!it) return;
    CU_ASSERT_EQUAL(ds_batches_count(it), 10);
    const int64_t e0[] = {339, 86, 167, 235, 366, 542, 407, 493, 458, 155};
    const int64_t e1[] = {426, 584, 50, 234, 524, 298, 53, 408, 479, 453};
    for (int epoch = 0; epoch < 3; epoch++) {
        if (epoch < 2) ds_batches_epoch(it, epoch); /* epoch 2: replay epoch 1 */
        else ds_batches_epoch(it, 1);
        const int64_t *want = epoch == 0 ? e0 : e1;
        ds_batch b;
        int nb = 0, total = 0, bad = 0;
        char seen[601] = {0};
        while (ds_batches_next(it, &b)) {
            CU_ASSERT_EQUAL(b.num_steps, 10);
            CU_ASSERT_EQUAL(b.size, nb < 9 ? 64 : 601 - 9 * 64); /* last batch 25 rows */
            if (nb == 0)
                for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(b.pairs[i], want[i]);
            for (int r = 0; r < b.size; r++) {
                int64_t p = b.pairs[r];
                bad += seen[p]++ != 0;
                bad += memcmp(b.src + r * 10, ds_fra_ids(d, DS_SRC) + p * 10, 40) != 0;
                bad += memcmp(b.tgt + r * 10, ds_fra_ids(d, DS_TGT) + p * 10, 40) != 0;
                bad += b.src_valid_len[r] != ds_fra_valid_len(d, DS_SRC)[p];
                bad += b.tgt_valid_len[r] != ds_fra_valid_len(d, DS_TGT)[p];
            }
            total += b.size;
            nb++;
        }
        CU_ASSERT_EQUAL(nb, 10);
        CU_ASSERT_EQUAL(total, 601);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_FALSE(ds_batches_next(it, &b)); /* stays at the end */
    }
    ds_batches_free(it);
    /* another seed: another order (ref key perm.d600.seed7.epoch0) */
    ds_fra_options o = ds_fra_defaults();
    o.seed = 7;
    ds_fra *d7 = NULL;
    TG_OK(ds_fra_load(tu_data_path(), &o, &d7));
    if (d7 && ds_batches_new(d7, DS_TRAIN, true, &it) == 0) {
        ds_batch b;
        CU_ASSERT_TRUE(ds_batches_next(it, &b));
        const int64_t s7[] = {367, 5, 399, 163, 72, 431, 539, 102, 590, 589};
        for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(b.pairs[i], s7[i]);
        ds_batches_free(it);
    }
    ds_fra_free(d7);
    /* without shuffling: ascending; another batch size: 6 x 100 rows + 1 */
    TG_OK(ds_batches_new_sized(d, DS_ALL, false, 100, &it));
    if (it) {
        CU_ASSERT_EQUAL(ds_batches_count(it), 7);
        ds_batch b;
        int64_t next = 0;
        int nb = 0;
        while (ds_batches_next(it, &b)) {
            CU_ASSERT_EQUAL(b.size, ++nb < 7 ? 100 : 1);
            for (int r = 0; r < b.size; r++) CU_ASSERT_EQUAL(b.pairs[r], next++);
        }
        CU_ASSERT_EQUAL(next, 601);
        ds_batches_free(it);
    }
    TG_EXPECT_ERROR(ds_batches_new_sized(d, DS_ALL, false, -1, &it), "batch_size = -1");
    ds_fra_free(d);
}

/* Token batches: every pair once per epoch, rows x the batch's longest length <= the budget,
 * arrays cut to that length (only padding dropped), rows sorted inside a batch by source
 * length, marked by_tokens, as many batches in every epoch, a seeded batch order that an epoch
 * replays, and the refusal of a budget below the longest pair. */
static void test_token_batches(void) {
    const char *path = tu_data_path();
    if (!path) return;
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = 5000;
    o.num_steps = 12;
    o.batch_tokens = 200;
    ds_fra *d = NULL;
    TG_OK(ds_fra_load(path, &o, &d));
    if (!d) return;
    ds_batches *it;
    TG_OK(ds_batches_new(d, DS_TRAIN, true, &it));
    if (!it) {
        ds_fra_free(d);
        return;
    }
    int64_t n = ds_fra_num_pairs(d), nb = ds_batches_count(it);
    const int32_t *sl = ds_fra_valid_len(d, DS_SRC), *tl = ds_fra_valid_len(d, DS_TGT);
    char *seen = calloc((size_t)n, 1);
    int64_t *first = calloc(3, sizeof *first), padded = 0, tokens = 0;
    for (int epoch = 0; epoch < 3 && seen && first; epoch++) {
        ds_batches_epoch(it, epoch == 2 ? 1 : epoch); /* epoch 2 replays epoch 1 */
        memset(seen, 0, (size_t)n);
        ds_batch b;
        int64_t k = 0, total = 0, bad = 0;
        while (ds_batches_next(it, &b)) {
            if (k == 0) first[epoch] = b.pairs[0];
            int32_t L = b.num_steps, longest = 0, prev_s = 0;
            bad += L < 1 || L > 12 || (int64_t)b.size * L > 200;
            for (int r = 0; r < b.size; r++) {
                int64_t p = b.pairs[r];
                int32_t len = sl[p] > tl[p] ? sl[p] : tl[p];
                bad += seen[p]++ != 0;
                bad += len > L || sl[p] < prev_s; /* none longer; sorted by source length */
                if (len > longest) longest = len;
                prev_s = sl[p];
                bad += memcmp(b.src + r * L, ds_fra_ids(d, DS_SRC) + p * 12, 4 * (size_t)L) != 0;
                bad += memcmp(b.tgt + r * L, ds_fra_ids(d, DS_TGT) + p * 12, 4 * (size_t)L) != 0;
                for (int j = L; j < 12; j++) /* what was cut is padding */
                    bad += ds_fra_ids(d, DS_SRC)[p * 12 + j] != DS_PAD ||
                           ds_fra_ids(d, DS_TGT)[p * 12 + j] != DS_PAD;
                bad += b.src_valid_len[r] != sl[p] || b.tgt_valid_len[r] != tl[p];
                if (epoch == 0) tokens += tl[p], padded += L;
            }
            bad += longest != L || !b.by_tokens; /* as long as its longest pair */
            total += b.size;
            k++;
        }
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(total, n);
        CU_ASSERT_EQUAL(k, nb);
    }
    CU_ASSERT_EQUAL(first[1], first[2]);     /* a replayed epoch */
    CU_ASSERT_NOT_EQUAL(first[0], first[1]); /* another order */
    /* far less padding than sentence batches padded to num_steps */
    CU_ASSERT_TRUE(padded < 12 * n / 2);
    CU_ASSERT_TRUE(tokens > 0);
    free(seen);
    free(first);
    ds_batches_free(it);
    /* a budget below the longest pair (12 steps here) */
    ds_fra *d2 = NULL;
    o.batch_tokens = 11;
    TG_OK(ds_fra_load(path, &o, &d2));
    if (d2) {
        TG_EXPECT_ERROR(ds_batches_new(d2, DS_TRAIN, true, &it), "batch_tokens = 11",
                        "longest pair (12 tokens");
        /* sized batches never use tokens */
        TG_OK(ds_batches_new_sized(d2, DS_ALL, false, 100, &it));
        if (it) CU_ASSERT_EQUAL(ds_batches_count(it), (n + 99) / 100);
        ds_batches_free(it);
    }
    ds_fra_free(d2);
    o.batch_tokens = -1;
    TG_EXPECT_ERROR(ds_fra_load(path, &o, &d2), "batch_tokens = -1");
    ds_fra_free(d);
}

/* The documented RNG, reproduced by ref_numbers.py (ref key rng.seed42.stream0.first3). */
static void test_rng(void) {
    ag_rng r;
    ag_rng_seed_stream(&r, 42, 0);
    CU_ASSERT_EQUAL(ag_rng_next(&r), 0x1ff785474f113b15ULL);
    CU_ASSERT_EQUAL(ag_rng_next(&r), 0x4b7867ceff5d8325ULL);
    CU_ASSERT_EQUAL(ag_rng_next(&r), 0x90ca7a95a9909966ULL);
    /* below(n) stays in range and hits both ends */
    int lo = 0, hi = 0;
    for (int i = 0; i < 10000; i++) {
        uint64_t x = ag_rng_below64(&r, 7);
        CU_ASSERT_TRUE(x < 7);
        lo += x == 0;
        hi += x == 6;
    }
    CU_ASSERT_TRUE(lo > 1000 && hi > 1000);
}

/* Held-out split of the whole corpus, 10 % / 10 %, split_seed 1234 (ref keys split.all.*). */
static void test_split(void) {
    const char *path = tu_data_path();
    if (!path) return;
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = 0;
    o.valid_frac = 0.1;
    o.test_frac = 0.1;
    o.split_seed = 1234;
    ds_fra *d = NULL, *d2 = NULL;
    TG_OK(ds_fra_load(path, &o, &d));
    TG_OK(ds_fra_load(path, &o, &d2));
    if (!d || !d2) goto done;
    CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_TRAIN), 133704);
    CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_VALID), 16713);
    CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_TEST), 16713);
    const int64_t t5[] = {3, 7, 10, 16, 25}, v5[] = {6, 8, 9, 21, 26};
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(ds_fra_part_pairs(d, DS_TEST)[i], t5[i]);
        CU_ASSERT_EQUAL(ds_fra_part_pairs(d, DS_VALID)[i], v5[i]);
    }
    /* vocabularies from the training pairs only */
    CU_ASSERT_EQUAL(ds_vocab_size(ds_fra_vocab(d, DS_SRC)), 9079);
    CU_ASSERT_EQUAL(ds_vocab_size(ds_fra_vocab(d, DS_TGT)), 15910);
    /* disjoint, covering, ascending; identical on a second load (determinism) */
    char *part = calloc(167130, 1);
    int bad = 0;
    for (int p = DS_TRAIN; p <= DS_TEST; p++) {
        const int64_t *v = ds_fra_part_pairs(d, (ds_part)p);
        for (int64_t i = 0; i < ds_fra_part_size(d, (ds_part)p); i++) {
            bad += part[v[i]]++ != 0;
            bad += i > 0 && v[i] <= v[i - 1];
            bad += v[i] != ds_fra_part_pairs(d2, (ds_part)p)[i];
        }
    }
    for (int64_t i = 0; i < 167130; i++) bad += part[i] != 1;
    CU_ASSERT_EQUAL(bad, 0);
    free(part);
    /* batches of the training part visit only training pairs */
    ds_batches *it;
    if (ds_batches_new(d, DS_TRAIN, true, &it) == 0) {
        CU_ASSERT_EQUAL(ds_batches_count(it), (133704 + 63) / 64);
        ds_batch b;
        ds_batches_next(it, &b);
        for (int r = 0; r < b.size; r++) {
            const int64_t *tr = ds_fra_part_pairs(d, DS_TEST);
            int64_t lo = 0, hi = 16713;
            while (lo < hi) {
                int64_t mid = (lo + hi) / 2;
                if (tr[mid] < b.pairs[r]) lo = mid + 1;
                else hi = mid;
            }
            CU_ASSERT_FALSE(lo < 16713 && tr[lo] == b.pairs[r]);
        }
        ds_batches_free(it);
    }
    /* the split file */
    char *sp = tg_temp_file("", 0);
    TG_OK(ds_fra_write_split(d, sp));
    FILE *f = fopen(sp, "r");
    char line[256];
    int n = 0, ntest = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        long long pair, ln;
        char name[16];
        if (sscanf(line, "%lld\t%lld\t%15s", &pair, &ln, name) == 3 && pair == n) {
            ntest += strcmp(name, "test") == 0;
            if (n == 3) CU_ASSERT_STRING_EQUAL(name, "test");
            if (n == 6) CU_ASSERT_STRING_EQUAL(name, "valid");
            if (n == 0) CU_ASSERT_STRING_EQUAL(name, "train");
        }
        n++;
    }
    if (f) fclose(f);
    CU_ASSERT_EQUAL(n, 167130);
    CU_ASSERT_EQUAL(ntest, 16713);
    tg_remove(sp);
    /* another split seed, another test set */
    ds_fra_free(d2);
    o.split_seed = 1235;
    d2 = NULL;
    TG_OK(ds_fra_load(path, &o, &d2));
    if (d2)
        CU_ASSERT_NOT_EQUAL(
            memcmp(ds_fra_part_pairs(d, DS_TEST), ds_fra_part_pairs(d2, DS_TEST), 5 * 8), 0);
done:
    ds_fra_free(d);
    ds_fra_free(d2);
}

int main(void) {
    static const CU_TestInfo tests[] = {
        {"default run (600 examples): 601 pairs, vocab 184/201, arrays", test_default_run},
        {"num_steps 5: truncation loses <eos>", test_truncation},
        {"whole file: 167130 pairs, vocab 10012/17851, arrays", test_whole_file},
        {"predict helpers: encode / decode as d2l", test_predict_helpers},
        {"batches: seeded shuffles, sizes, contents", test_batches},
        {"token batches: budget, lengths, cut arrays, seeded order", test_token_batches},
        {"rng: documented xoshiro256** stream", test_rng},
        {"split: sizes, determinism, disjointness, file", test_split},
        CU_TEST_INFO_NULL,
    };
    return tg_test_main("datasets_fra", tests);
}
