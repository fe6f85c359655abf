/* tests/datasets/test_metrics.c -- d2l BLEU, corpus BLEU, chrF, and the Unicode tables.
 * Expected values: hand computations in the comments, published sacreBLEU examples, and the
 * independent Python script tests/datasets/ref_numbers.py (keys bleu_d2l, corpus_bleu.*,
 * chrf.*, unicode.*). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "datasets/metrics.h"
#include "datasets/unicode.h"
#include "test_util.h"

/* FNV-1a 64 of a byte string, continuing from h (start with FNV_INIT): checksums of whole
 * tables of results. */
#define FNV_INIT 0xcbf29ce484222325ULL
static uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static double d2l(const char *p, const char *l, int k) {
    double s = -1;
    TG_OK(ds_bleu_d2l(p, l, k, &s));
    return s;
}

static void test_bleu_d2l(void) {
    /* The book's sentences: exact translations score 1 with k = 2. */
    TU_CLOSE(d2l("va !", "va !", 2), 1.0);
    TU_CLOSE(d2l("j'ai perdu .", "j'ai perdu .", 2), 1.0);
    TU_CLOSE(d2l("je suis chez moi .", "je suis chez moi .", 2), 1.0);
    TU_CLOSE(d2l("je suis chez moi .", "je suis chez moi .", 4), 1.0);
    /* The book's 0.658: "il est mouillé ." vs "il est calme .", k = 2. Lengths 4 and 4, so the
     * brevity factor is exp(min(0, 1 - 4/4)) = 1. Unigrams: il, est, . match -> p1 = 3/4.
     * Bigrams: "il est" matches of 3 -> p2 = 1/3. Score = (3/4)^(1/2) * (1/3)^(1/4)
     * = 0.8660254 * 0.7598357 = 0.6580370. */
    TU_CLOSE(d2l("il est mouillé .", "il est calme .", 2), 0.6580370064762462);
    TU_CLOSE(d2l("il est mouillé .", "il est calme .", 2), sqrt(0.75) * pow(1.0 / 3.0, 0.25));
    /* "je suis calme ." vs "il est calme .": p1 = 2/4, p2 = 1/3 ("calme ."):
     * 0.5^0.5 * (1/3)^0.25 = 0.537285 */
    TU_CLOSE(d2l("je suis calme .", "il est calme .", 2), 0.537284965911771);
    /* k = 4 with no 3-gram match: p3 = 0 -> 0 */
    TU_CLOSE(d2l("il est mouillé .", "il est calme .", 4), 0.0);
    /* "va !" with k = 4: the prediction has no 3-gram -> 0 (d2l would divide by zero) */
    TU_CLOSE(d2l("va !", "va !", 4), 0.0);
    TU_CLOSE(d2l("il .", "il est calme .", 2), 0.0); /* p2 = 0/1 */
    TU_CLOSE(d2l("a", "a b c", 2), 0.0);             /* shorter than 2 */
    TU_CLOSE(d2l("", "a", 2), 0.0);                  /* empty prediction */
    /* longer prediction: no brevity penalty; "a b c d" vs "a b": p1 = 2/4, p2 = 1/3 */
    TU_CLOSE(d2l("a b c d", "a b", 2), 0.537284965911771);
    /* clipping: "the" x4 vs "the cat": p1 = 1/4 (one "the" in the label), p2 = 0 -> 0;
     * with k = 1: exp(min(0, 1 - 2/4)) = 1 and 0.25^0.5 = 0.5 */
    TU_CLOSE(d2l("the the the the", "the cat", 2), 0.0);
    TU_CLOSE(d2l("the the the the", "the cat", 1), 0.5);
    /* "a b a b a" vs "a b a c": p1: a x3 (label has 2) -> 2, b x2 (label 1) -> 1: 3/5;
     * p2: "a b" x2 (label 1) -> 1, "b a" x2 (label 1) -> 1: 2/4.
     * (3/5)^0.5 * (1/2)^0.25 = 0.6513556 */
    TU_CLOSE(d2l("a b a b a", "a b a c", 2), 0.6513555624326306);
    /* shorter prediction: brevity factor exp(1 - 3/2) */
    TU_CLOSE(d2l("a b", "a b c", 1), exp(1.0 - 1.5));
    double s;
    TG_EXPECT_ERROR(ds_bleu_d2l("a", "a", 0, &s), "ds_bleu_d2l: k = 0");
    TG_EXPECT_ERROR(ds_bleu_d2l(NULL, "a", 2, &s), "ds_bleu_d2l: NULL argument");
}

static void expect_bleu(const ds_bleu_score *r, double score, const double prec[4], double bp,
                        int64_t sys, int64_t ref) {
    TU_CLOSE(r->score, score);
    for (int n = 0; n < 4; n++) TU_CLOSE(r->precisions[n], prec[n]);
    TU_CLOSE(r->bp, bp);
    CU_ASSERT_EQUAL(r->sys_len, sys);
    CU_ASSERT_EQUAL(r->ref_len, ref);
}

static void test_corpus_bleu(void) {
    /* sacreBLEU README example (two reference streams), with the 13a tokenization written out
     * by hand. Published: "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944
     * hyp_len = 17 ref_len = 18)". */
    const char *sys[] = {"The dog bit the man .", "It wasn't surprising .",
                         "The man had just bitten him ."};
    const char *r1[] = {"The dog bit the man .", "It was not unexpected .",
                        "The man bit him first ."};
    const char *r2[] = {"The dog had bit the man .", "No one was surprised .",
                        "The man had bitten the dog ."};
    ds_bleu_stats st = {0};
    for (int i = 0; i < 3; i++)
        TG_OK(ds_bleu_add(&st, sys[i], (const char *const[]){r1[i], r2[i]}, 2));
    ds_bleu_score r = ds_bleu_compute(&st);
    expect_bleu(&r, 48.530827009929865,
                (const double[]){82.3529411764706, 50.0, 45.45454545454545, 37.5},
                0.9428731438548749, 17, 18);
    CU_ASSERT_EQUAL(st.correct[0], 14);
    CU_ASSERT_EQUAL(st.total[0], 17);
    /* the same with the first references only */
    TG_OK(ds_corpus_bleu(sys, r1, 3, &r));
    expect_bleu(&r, 45.06750632106114,
                (const double[]){70.58823529411765, 42.857142857142854, 36.36363636363637, 37.5},
                1.0, 17, 17);
    /* Hand computation ("mixed"): hyps "il est mouillé ." and "je suis calme ." against
     * "il est calme ." and "je suis chez moi .". sys_len 8, ref_len 9.
     * 1-grams: 3 + 3 of 8 -> 75 %; 2-grams: "il est" + "je suis" of 6 -> 33.33 %;
     * 3-grams: 0 of 4 -> 'exp' smoothing 100 / (2 * 4) = 12.5; 4-grams: 0 of 2 ->
     * 100 / (4 * 2) = 12.5; BP = exp(1 - 9/8) = 0.8824969;
     * BLEU = BP * (75 * 33.33 * 12.5 * 12.5)^(1/4) = 0.8824969 * 25 = 22.0624226. */
    const char *mh[] = {"il est mouillé .", "je suis calme ."},
               *mr[] = {"il est calme .", "je suis chez moi ."};
    TG_OK(ds_corpus_bleu(mh, mr, 2, &r));
    expect_bleu(&r, 22.06242256461489, (const double[]){75.0, 100.0 / 3.0, 12.5, 12.5}, exp(-0.125),
                8, 9);
    TU_CLOSE(r.score, exp(-0.125) * 25.0);
    /* the same through ids */
    ds_bleu_stats si = {0};
    const int32_t h1[] = {1, 2, 9, 3}, f1[] = {1, 2, 8, 3}, h2[] = {4, 5, 8, 3},
                  f2[] = {4, 5, 6, 7, 3};
    TG_OK(ds_bleu_add_ids(&si, h1, 4, f1, 4));
    TG_OK(ds_bleu_add_ids(&si, h2, 4, f2, 5));
    ds_bleu_score ri = ds_bleu_compute(&si);
    TU_CLOSE(ri.score, r.score);
    CU_ASSERT_EQUAL(si.sentences, 2);
    /* identical corpus: 100 (the book's four references) */
    const char *book[] = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};
    TG_OK(ds_corpus_bleu(book, book, 4, &r));
    TU_CLOSE(r.score, 100.0);
    /* no match at all: 0 (sacreBLEU 2.x early stop) */
    TG_OK(ds_corpus_bleu((const char *const[]){"x y z"}, (const char *const[]){"a b c"}, 1, &r));
    TU_CLOSE(r.score, 0.0);
    /* every hypothesis shorter than 3: total_3 = 0, p3 = p4 = 0 -> 0 */
    TG_OK(ds_corpus_bleu((const char *const[]){"a b", "c"}, (const char *const[]){"a b", "c"}, 2,
                         &r));
    TU_CLOSE(r.score, 0.0);
    TU_CLOSE(r.precisions[1], 100.0);
    /* tokens are runs of Unicode whitespace (str.split()): NBSP, tabs, repeated spaces */
    TG_OK(ds_corpus_bleu((const char *const[]){"  a\xC2\xA0"
                                               "b\tc  d "},
                         (const char *const[]){"a b c d"}, 1, &r));
    TU_CLOSE(r.score, 100.0);
    /* an empty corpus and an empty hypothesis: 0 */
    ds_bleu_stats empty = {0};
    TU_CLOSE(ds_bleu_compute(&empty).score, 0.0);
    TG_OK(ds_corpus_bleu((const char *const[]){""}, (const char *const[]){"a"}, 1, &r));
    TU_CLOSE(r.bp, 0.0);
    TU_CLOSE(r.score, 0.0);
    /* errors */
    TG_EXPECT_ERROR(
        ds_corpus_bleu((const char *const[]){"a \xFF"}, (const char *const[]){"a"}, 1, &r),
        "hypothesis: invalid UTF-8 byte 0xFF at byte offset 2");
    TG_EXPECT_ERROR(ds_bleu_add(&st, "a", (const char *const[]){"a"}, 0), "no reference");
}

static double chrf1(const char *h, const char *r) {
    double s = -1;
    TG_OK(ds_corpus_chrf(&h, &r, 1, &s));
    return s;
}

static void test_chrf(void) {
    /* Published (Hugging Face's chrF metric card, computed with sacreBLEU): 61.576379378113785 */
    TU_CLOSE(chrf1("The relationship between Obama and Netanyahu is not exactly friendly.",
                   "The ties between Obama and Netanyahu are not particularly friendly."),
             61.576379378113785);
    /* Hand computation ("short"): hyps "ab", "abc d" against "abc", "ab"; whitespace removed:
     * ab|abc and abcd|ab.
     * n=1: hyp 2+4 = 6, ref 3+2 = 5, match 2+2 = 4. n=2: hyp 1+3 = 4, ref 2+1 = 3, match 1+1 = 2.
     * n=3: sentence 1 has no hyp 3-gram (ref 1), sentence 2's ref has none, so its hyp
     * 3-grams are not counted: hyp 0 -> not an effective order; n >= 4 likewise.
     * P = (4/6 + 2/4) / 2 = 7/12, R = (4/5 + 2/3) / 2 = 11/15,
     * chrF = 100 * 5 P R / (4 P + R) = 100 * (5 * 77/180) / (28/12 + 11/15) = 69.7463768. */
    double s;
    TG_OK(ds_corpus_chrf((const char *const[]){"ab", "abc d"}, (const char *const[]){"abc", "ab"},
                         2, &s));
    TU_CLOSE(s, 69.7463768115942);
    double P = 7.0 / 12.0, R = 11.0 / 15.0;
    TU_CLOSE(s, 100 * 5 * P * R / (4 * P + R));
    /* a French pair against the Python script */
    TG_OK(ds_corpus_chrf((const char *const[]){"il est mouillé .", "je suis calme ."},
                         (const char *const[]){"il est calme .", "je suis chez moi ."}, 2, &s));
    TU_CLOSE(s, 37.002531905210596);
    TU_CLOSE(chrf1("le chat", "le chat"), 100.0);
    TU_CLOSE(chrf1("le chat", "lechat"), 100.0); /* whitespace is removed */
    TU_CLOSE(chrf1("le\xC2\xA0"
                   "chat",
                   "lechat"),
             100.0); /* Unicode whitespace too */
    TU_CLOSE(chrf1("", "abc"), 0.0);
    TU_CLOSE(chrf1("xyz", "abc"), 0.0);
    /* characters are code points: "é" is one character, so "été" has 2 bigrams */
    ds_chrf_stats st = {0};
    TG_OK(ds_chrf_add(&st, "été", "été"));
    CU_ASSERT_EQUAL(st.hyp[0], 3);
    CU_ASSERT_EQUAL(st.hyp[1], 2);
    CU_ASSERT_EQUAL(st.match[2], 1);
    CU_ASSERT_EQUAL(st.hyp[3], 0);
    TG_EXPECT_ERROR(ds_chrf_add(&st, "ok", "\xC3"), "reference: invalid UTF-8");
}

/* Folds one result, the bytes s[0..n) then the separator 0xFF, into the FNV-1a hash *h. */
static void hash_result(uint64_t *h, const void *s, size_t n) {
    static const unsigned char sep = 0xFF;
    *h = fnv1a(*h, s, n);
    *h = fnv1a(*h, &sep, 1);
}

/* hash_result of ds_utf8_lower(in[0..n)), or one more in *bad when it fails. */
static void hash_lower(uint64_t *h, int *bad, const char *in, size_t n) {
    char *out;
    size_t len;
    if (ds_utf8_lower(in, n, &out, &len) != 0) {
        (*bad)++;
        return;
    }
    hash_result(h, out, len);
    free(out);
}

/* Lowercasing and the Final_Sigma rule match Python's str.lower() for every code point:
 * FNV-1a over the UTF-8 of each result (0xFF between results), pinned from ref_numbers.py
 * (keys unicode.lower_fnv, unicode.sigma_fnv). */
static void test_unicode_lower(void) {
    uint64_t h = FNV_INIT;
    int bad = 0;
    for (uint32_t c = 0; c < 0x110000; c++) {
        if (c >= 0xD800 && c < 0xE000) continue;
        unsigned char in[4];
        int n = ds_utf8_encode(c, in);
        if (c == 0) /* ds_utf8_lower rejects NUL; its lowercase is itself */
            hash_result(&h, in, 1);
        else hash_lower(&h, &bad, (const char *)in, (size_t)n);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(h, 0x6b763109dc190e82ULL);
    /* probes "A" c SIGMA, "1" c SIGMA, "A" SIGMA c for every c */
    h = FNV_INIT;
    for (uint32_t c = 0; c < 0x110000; c++) {
        if (c >= 0xD800 && c < 0xE000) continue;
        unsigned char ch[4];
        int n = ds_utf8_encode(c, ch);
        for (int probe = 0; probe < 3; probe++) {
            char buf[16];
            size_t k = 0;
            if (probe < 2) {
                buf[k++] = probe == 0 ? 'A' : '1';
                memcpy(buf + k, ch, (size_t)n);
                k += (size_t)n;
                memcpy(buf + k, "\xCE\xA3", 2);
                k += 2;
            } else {
                memcpy(buf, "A\xCE\xA3", 3);
                k = 3;
                memcpy(buf + k, ch, (size_t)n);
                k += (size_t)n;
            }
            if (c == 0) { /* NUL: Python's result, built by hand ("a" NUL sigma / ...) */
                const char *want[3] = {"a\0\xCF\x83", "1\0\xCF\x83", "a\xCF\x82\0"};
                hash_result(&h, want[probe], 4);
            } else {
                hash_lower(&h, &bad, buf, k);
            }
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(h, 0xf61202f7c45aa280ULL);
    /* spot checks */
    char *out;
    TG_OK(ds_utf8_lower("ÀÉÎÕÜ ÇÆ ÞŸ Œ İ KELVIN:\xE2\x84\xAA",
                        strlen("ÀÉÎÕÜ ÇÆ ÞŸ Œ İ KELVIN:\xE2\x84\xAA"), &out, NULL));
    if (out) CU_ASSERT_STRING_EQUAL(out, "àéîõü çæ þÿ œ i\xCC\x87 kelvin:k");
    free(out);
    TG_OK(ds_utf8_lower("ΣΑΣ Σ.Σ", strlen("ΣΑΣ Σ.Σ"), &out, NULL));
    if (out) CU_ASSERT_STRING_EQUAL(out, "σας σ.ς"); /* "." is case-ignorable */
    free(out);
    CU_ASSERT_TRUE(ds_u_is_space(0x3000));
    CU_ASSERT_TRUE(ds_u_is_space(0x1C));
    CU_ASSERT_FALSE(ds_u_is_space(0x200B));
    CU_ASSERT_TRUE(ds_u_is_cased(0x2B0)); /* modifier letter: cased and case-ignorable */
    CU_ASSERT_TRUE(ds_u_is_case_ignorable(0x2B0));
    CU_ASSERT_TRUE(ds_u_is_case_ignorable('\''));
}

int main(void) {
    static const CU_TestInfo tests[] = {
        {"d2l BLEU: book cases and hand computations", test_bleu_d2l},
        {"corpus BLEU: sacreBLEU README, hand computation", test_corpus_bleu},
        {"chrF: published example, hand computation", test_chrf},
        {"lowercase and final sigma = Python, all code points", test_unicode_lower},
        CU_TEST_INFO_NULL,
    };
    return tg_test_main("datasets_metrics", tests);
}
