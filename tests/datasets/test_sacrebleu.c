/* tests/datasets/test_sacrebleu.c -- the standard score (datasets/sacrebleu.c): the 13a
 * tokenizer, corpus BLEU on raw text, effective order, chrF's defaults, the signatures, the
 * detokenizer, and the raw sides of fra.txt.
 *
 * Sources of the expected values:
 *  - sacreBLEU's own test files (github.com/mjpost/sacrebleu, test/test_bleu.py,
 *    test/test_sentence_bleu.py, test/test_chrf.py): quoted case by case below;
 *  - sacreBLEU has no unit test of tokenizer_13a alone: the tokenizer's expected strings, and the
 *    fra.txt numbers, are the output of sacreBLEU 2.6.0's own code (Tokenizer13a, BLEU(),
 *    CHRF(); the repository at commit f615c72) on the same inputs, each checked against the
 *    rules written out in datasets/metrics.h. */
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "datasets/fra_eng.h"
#include "datasets/metrics.h"
#include "datasets/unicode.h"
#include "test_util.h"

static void expect_tok(const char *in, const char *want) {
    char *out = NULL;
    TG_OK(ds_tokenize_13a(in, &out));
    if (!out) return;
    if (strcmp(out, want))
        fprintf(stderr, "13a(\"%s\") = \"%s\", expected \"%s\"\n", in, out, want);
    CU_ASSERT_STRING_EQUAL(out, want);
    free(out);
}

static void test_tokenizer_13a(void) {
    /* input -> sacreBLEU 2.6.0 Tokenizer13a()(input) */
    expect_tok("I'm a student.", "I'm a student ."); /* ' is not split */
    /* period/comma kept between digits, split elsewhere; a dash after a digit */
    expect_tok("3.14, 1,000 and 5-6 p.m.", "3.14 , 1,000 and 5 - 6 p . m .");
    /* the entities, each replace one pass in order: "&amp;quot;" -> "&quot;", then split */
    expect_tok("&quot;a&amp;b&lt;c&gt;&amp;quot;", "\" a & b < c > & quot ;");
    expect_tok("a&amp;amp;b", "a & amp ; b");
    /* <skipped> removed, "-\n" removed, "\n" -> space */
    expect_tok("a<skipped>b -\nc\nd", "ab c d");
    expect_tok("<skip<skipped>ped>", "< skipped >"); /* one pass: not rescanned */
    expect_tok("-\n-\n\n", "");
    /* Unicode whitespace (NNBSP, NBSP, ideographic space) separates words */
    expect_tok("Va\xE2\x80\xAF!", "Va !");
    expect_tok("Qu'est-ce que c'est\xC2\xA0?", "Qu'est-ce que c'est ?");
    expect_tok("a\xE3\x80\x80"
               "b",
               "a b");
    expect_tok("  a\t\tb  ", "a b");
    /* re.sub resumes after each match: the second '.' of "a..b" is \2 of rule 3's match */
    expect_tok("a..b", "a . . b");
    expect_tok("x.,y", "x . , y");
    expect_tok("1.a", "1 . a");
    expect_tok("a.1", "a . 1");
    expect_tok(".5", ". 5");
    expect_tok("9.", "9 .");
    expect_tok(",9", ", 9");
    expect_tok("2-3-4", "2 - 3 - 4");
    expect_tok("e-mail 4-", "e-mail 4 -"); /* a dash not after a digit stays */
    expect_tok("(\"hello\") [x]{y} ~`^_|\\ @#$%",
               "( \" hello \" ) [ x ] { y } ~ ` ^ _ | \\ @ # $ %");
    expect_tok("\xC3\x87"
               "a co\xC3\xBBte 12,50 \xE2\x82\xAC.",
               "\xC3\x87"
               "a co\xC3\xBBte 12,50 \xE2\x82\xAC ."); /* "Ça coûte 12,50 €." */
    expect_tok("l'homme", "l'homme");
    expect_tok("\xC3\xA9t\xC3\xA9.", "\xC3\xA9t\xC3\xA9 ."); /* "été." */
    expect_tok("", "");
    char *out = NULL;
    TG_EXPECT_ERROR(ds_tokenize_13a("a \xFF", &out),
                    "13a: invalid UTF-8 byte 0xFF at byte offset 2");
    CU_ASSERT_PTR_NULL(out);
}

static void test_bleu_published(void) {
    /* test/test_bleu.py, test_corpus_bleu_cases: the README example, two reference streams */
    const char *hyps[] = {"The dog bit the man.", "It wasn't surprising.",
                          "The man had just bitten him."};
    const char *r1[] = {"The dog bit the man.", "It was not unexpected.", "The man bit him first."};
    const char *r2[] = {"The dog had bit the man.", "No one was surprised.",
                        "The man had bitten the dog."};
    ds_bleu_stats st = {0}, none = {0}, empty = {0};
    for (int i = 0; i < 3; i++) {
        const char *refs[] = {r1[i], r2[i]};
        TG_OK(ds_sacrebleu_add(&st, hyps[i], refs, 2));
        TG_OK(ds_bleu_add(&none, hyps[i], refs, 2));
        TG_OK(ds_sacrebleu_add(&empty, "", refs, 2));
    }
    /* (_hyps, _refs, {}, 48.530827) and (_hyps, _refs, {'tokenize': '13a'}, 48.530827) */
    ds_bleu_score r = ds_bleu_compute(&st);
    CU_ASSERT_DOUBLE_EQUAL(r.score, 48.530827, 1e-6);
    TU_CLOSE(r.score, 48.530827009929865); /* sacreBLEU 2.6.0's full value */
    CU_ASSERT_EQUAL(r.sys_len, 17);        /* README: hyp_len = 17 ref_len = 18 */
    CU_ASSERT_EQUAL(r.ref_len, 18);
    /* (_hyps, _refs, {'tokenize': 'none'}, 49.1919566): plain whitespace split */
    CU_ASSERT_DOUBLE_EQUAL(ds_bleu_compute(&none).score, 49.1919566, 1e-6);
    /* (('', '', ''), _refs, {}, 0.0): empty hypotheses are kept, score 0 */
    r = ds_bleu_compute(&empty);
    TU_CLOSE(r.score, 0.0);
    CU_ASSERT_EQUAL(r.sys_len, 0);
    CU_ASSERT_EQUAL(r.ref_len, 17); /* closest to 0: the shorter reference, 6 + 5 + 6 */
    CU_ASSERT_EQUAL(empty.sentences, 3);

    /* test/test_sentence_bleu.py (issue #98), effective_order=True, exp smoothing:
     * ('exp', None, False, '13a', 8.493) and ('exp', None, False, 'none', 7.347) */
    const char *REF =
        "produc\xC5\xA3ia de zah\xC4\x83r brut se exprim\xC4\x83 \xC3\xAEn zah\xC4\x83r alb;";
    const char *SYS =
        "Produc\xC8\x9Bia de zah\xC4\x83r prim\xC4\x83 va fi exprimat\xC4\x83 \xC3\xAEn "
        "ceea ce prive\xC8\x99te zah\xC4\x83rul alb;";
    ds_bleu_stats a = {0}, b = {0}, z = {0};
    TG_OK(ds_sacrebleu_add(&a, SYS, &REF, 1));
    TG_OK(ds_bleu_add(&b, SYS, &REF, 1));
    CU_ASSERT_DOUBLE_EQUAL(ds_bleu_compute_eff(&a, true).score, 8.493, 1e-3);
    CU_ASSERT_DOUBLE_EQUAL(ds_bleu_compute_eff(&b, true).score, 7.347, 1e-3);
    TU_CLOSE(ds_bleu_compute_eff(&a, true).score, 8.493098745313148);
    TU_CLOSE(ds_bleu_compute(&a).score, 8.493098745313148); /* every order has n-grams */
    /* test_cases_zero_bleu (issue #141): "this is a cat" vs "okay thanks" -> 0.0 */
    const char *REF0 = "okay thanks";
    TG_OK(ds_sacrebleu_add(&z, "this is a cat", &REF0, 1));
    TU_CLOSE(ds_bleu_compute_eff(&z, true).score, 0.0);
    TU_CLOSE(ds_bleu_compute(&z).score, 0.0);

    /* effective order on a short sentence (hand): "a test" vs "a test": orders 1, 2 only,
     * 100; without it p3 = p4 = 0 -> 0 */
    ds_bleu_stats e = {0};
    const char *at = "a test";
    TG_OK(ds_sacrebleu_add(&e, "a test", &at, 1));
    TU_CLOSE(ds_bleu_compute_eff(&e, true).score, 100.0);
    TU_CLOSE(ds_bleu_compute(&e).score, 0.0);

    /* empty references are dropped; all empty is an error, as sacreBLEU */
    const char *refs2[] = {"", "The dog bit the man."};
    ds_bleu_stats one = {0};
    TG_OK(ds_sacrebleu_add(&one, "The dog bit the man.", refs2, 2));
    TU_CLOSE(ds_bleu_compute(&one).score, 100.0);
    const char *no[] = {""};
    TG_EXPECT_ERROR(ds_sacrebleu_add(&one, "x", no, 1), "empty reference");
    const char *bad[] = {"ok \xC3"};
    TG_EXPECT_ERROR(ds_sacrebleu_add(&one, "x", bad, 1), "reference 0: 13a: invalid UTF-8");
    TG_EXPECT_ERROR(ds_sacrebleu_add(&one, "\xFF", no + 0, 0), "no reference");
}

static double chrf1(const char *h, const char *r) {
    double s = -1;
    TG_OK(ds_corpus_chrf(&h, &r, 1, &s));
    return s;
}

static void test_chrf_published(void) {
    /* test/test_chrf.py, test_cases_effective_order (no eps smoothing = sacreBLEU 2.x's default;
     * the file uses beta = 3, but in each of these cases P = R, so beta 2 gives the same). */
    TU_CLOSE(chrf1("a", "a"), 100.0);
    TU_CLOSE(chrf1("", "reference"), 0.0);
    TU_CLOSE(chrf1("a b c", "a b c"), 100.0);
    TU_CLOSE(chrf1("a b c", "abc"), 100.0);
    TU_CLOSE(chrf1("", "c"), 0.0);
    double s;
    TG_OK(ds_corpus_chrf((const char *const[]){"a", "b"}, (const char *const[]){"a", "c"}, 2, &s));
    TU_CLOSE(s, 50.0);
    TU_CLOSE(chrf1("aa", "ab"), 25.0);
}

static void test_signatures(void) {
    char b[128];
    CU_ASSERT_STRING_EQUAL(ds_sacrebleu_signature(1, b, sizeof b),
                           "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
    CU_ASSERT_STRING_EQUAL(ds_sacrebleu_signature(2, b, sizeof b),
                           "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
    CU_ASSERT_STRING_EQUAL(ds_chrf_signature(1, b, sizeof b),
                           "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0");
    char small[8];
    CU_ASSERT_STRING_EQUAL(ds_chrf_signature(1, small, sizeof small), "nrefs:1");
}

static void expect_detok(const char *in, const char *want) {
    char *out = NULL;
    TG_OK(ds_detokenize_d2l(in, &out));
    if (out) CU_ASSERT_STRING_EQUAL(out, want);
    free(out);
}

static void test_detokenize(void) {
    expect_detok("va !", "va!");
    expect_detok("je suis chez moi .", "je suis chez moi.");
    expect_detok("attends . . .", "attends...");
    expect_detok("oui , c'est ça ?", "oui, c'est ça?");
    expect_detok("a ; b : c ) d ( e", "a; b: c) d ( e");
    expect_detok("a  b ", "a b"); /* empty tokens dropped */
    expect_detok("", "");
    expect_detok(". a", ". a"); /* nothing to glue to */
    expect_detok("<unk> .", "<unk>.");
}

/* The raw French sides of the whole fra.txt through the tokenizer, and a corpus score on the
 * first 2000 pairs, against sacreBLEU 2.6.0 on the same file (read as Python does: universal
 * newlines, lines with exactly one tab). */
static void test_real_data(void) {
    const char *path = tu_data_path();
    if (!path) return;
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = 0;
    ds_fra *d = NULL;
    TG_OK(ds_fra_load(path, &o, &d));
    if (!d) return;
    int64_t n = ds_fra_num_pairs(d);
    CU_ASSERT_EQUAL(n, 167130);
    uint64_t h = 0xcbf29ce484222325ULL;
    int bad = 0;
    for (int64_t p = 0; p < n; p++) {
        char *t = NULL;
        if (ds_tokenize_13a(ds_fra_raw(d, DS_TGT, p, NULL), &t)) {
            bad++;
            continue;
        }
        for (const unsigned char *c = (const unsigned char *)t;; c++) {
            h = (h ^ (*c ? *c : 0xFF)) * 0x100000001b3ULL; /* 0xFF after each sentence */
            if (!*c) break;
        }
        free(t);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(h, 0xf80da98196114fd4ULL);
    /* the raw sides as written (line 1: "Go.\tVa !") */
    size_t len = 0;
    CU_ASSERT_STRING_EQUAL(ds_fra_raw(d, DS_SRC, 0, &len), "Go.");
    CU_ASSERT_EQUAL(len, 3);
    CU_ASSERT_STRING_EQUAL(ds_fra_raw(d, DS_TGT, 0, &len), "Va !");
    CU_ASSERT_EQUAL(len, 4);
    CU_ASSERT_PTR_NULL(ds_fra_raw(d, DS_TGT, n, NULL));
    /* hyps = refs shifted by one, and the lowercased references, on pairs 0..1999:
     * sacreBLEU 8.708962769666515 (counts 3328/735/150/27 of 7179/5179/3179/1457) and
     * 48.052095291425005; chrF of the lowercased ones 89.57416174363928 */
    ds_bleu_stats s1 = {0}, s2 = {0};
    ds_chrf_stats c2 = {0};
    for (int64_t p = 0; p < 2000; p++) {
        const char *ref = ds_fra_raw(d, DS_TGT, p, NULL),
                   *shift = ds_fra_raw(d, DS_TGT, (p + 1) % 2000, NULL);
        char *low = NULL;
        size_t rl = strlen(ref);
        TG_OK(ds_utf8_lower(ref, rl, &low, NULL));
        TG_OK(ds_sacrebleu_add(&s1, shift, &ref, 1));
        if (low) {
            TG_OK(ds_sacrebleu_add(&s2, low, &ref, 1));
            TG_OK(ds_chrf_add(&c2, low, ref));
        }
        free(low);
    }
    TU_CLOSE(ds_bleu_compute(&s1).score, 8.708962769666515);
    CU_ASSERT_EQUAL(s1.correct[0], 3328);
    CU_ASSERT_EQUAL(s1.correct[3], 27);
    CU_ASSERT_EQUAL(s1.total[3], 1457);
    TU_CLOSE(ds_bleu_compute(&s2).score, 48.052095291425005);
    TU_CLOSE(ds_chrf_compute(&c2), 89.57416174363928);
    ds_fra_free(d);
}

int main(void) {
    static const CU_TestInfo tests[] = {
        {"13a tokenizer = sacreBLEU 2.6.0", test_tokenizer_13a},
        {"sacreBLEU: test_bleu.py and test_sentence_bleu.py vectors", test_bleu_published},
        {"chrF: test_chrf.py effective-order vectors", test_chrf_published},
        {"signatures", test_signatures},
        {"d2l detokenizer", test_detokenize},
        {"fra.txt raw sides: 13a checksum and scores = sacreBLEU 2.6.0", test_real_data},
        CU_TEST_INFO_NULL,
    };
    return tg_test_main("datasets_sacrebleu", tests);
}
