/* tests/datasets/test_text.c -- typed text <-> the word-level pipeline (datasets/text.h), number
 * tags, and the preprocessing the loader applies (ds_preprocess): exact strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "datasets/fra_eng.h"
#include "datasets/text.h"
#include "test_util.h"

/* Asserts f(in) == want, f one of the char ** producers below. */
static void expect_norm(const char *in, const char *want) {
    char *out = NULL;
    TG_OK(ds_text_normalize(in, &out));
    if (out) {
        if (strcmp(out, want)) TG_FAIL("normalize('%s') = '%s', want '%s'", in, out, want);
    }
    free(out);
}
static void expect_source(const char *in, const char *model, const char *typed) {
    char *m = NULL, *t = NULL;
    TG_OK(ds_text_source(in, NULL, &m, &t));
    if (m && strcmp(m, model)) TG_FAIL("source('%s') = '%s', want '%s'", in, m, model);
    if (t && strcmp(t, typed)) TG_FAIL("typed('%s') = '%s', want '%s'", in, t, typed);
    free(m);
    free(t);
}
static void expect_preprocess(const char *in, const char *want) {
    char *out = NULL;
    TG_OK(ds_preprocess(in, &out));
    if (out) CU_ASSERT_STRING_EQUAL(out, want);
    free(out);
}
static void expect_fr(const char *tokens, const char *unk, const char *want) {
    char *out = NULL;
    TG_OK(ds_detokenize_fr(tokens, unk, &out));
    if (out && strcmp(out, want)) TG_FAIL("detok('%s') = '%s', want '%s'", tokens, out, want);
    free(out);
}

static void test_preprocess(void) {
    char *out = NULL;
    /* d2l's preprocess_nmt: lowercase, a space before , . ! ? not after one */
    expect_preprocess("I'm home.", "i'm home .");
    expect_preprocess("Hi, Tom!Really?", "hi , tom !really ?");
    /* no-break spaces become spaces (then no second space before the mark); others stay */
    expect_preprocess("Va\xC2\xA0! Oui\xE2\x80\xAF?  x\ty", "va ! oui ?  x\ty");
    /* the first character gets no space; the corpus form is a fixed point */
    expect_preprocess("...", ". . .");
    expect_preprocess("i'm home .", "i'm home .");
    expect_preprocess("", "");
    expect_preprocess("ÉTÉ. ΣΑΣ", "été . σας"); /* Python's lower(), final sigma */
    TG_EXPECT_ERROR(ds_preprocess("ok \xFF", &out), "sentence:1:4: invalid UTF-8 byte 0xFF");
    CU_ASSERT_PTR_NULL(out);
}

/* ds_preprocess gives, on each side of the book's lines of fra.txt, the loader's tokens. */
static void test_preprocess_is_the_loaders(void) {
    const char *path = tu_data_path();
    if (!path) return;
    ds_fra *d = NULL;
    TG_OK(ds_fra_load(path, NULL, &d));
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[4096];
    int64_t pair = 0, same = 0;
    for (int64_t i = 0; d && i < ds_fra_num_pairs(d) && fgets(line, sizeof line, f); i++) {
        line[strcspn(line, "\r\n")] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab || ds_fra_line_of_pair(d, pair) != i) continue;
        *tab = '\0';
        for (int s = 0; s < 2; s++) {
            char *mine = NULL, *theirs = NULL;
            TG_OK(ds_preprocess(s ? tab + 1 : line, &mine));
            TG_OK(ds_fra_sentence(d, (ds_side)s, pair, &theirs));
            if (mine && theirs && !strcmp(mine, theirs)) same++;
            else TG_FAIL("line %lld side %d: '%s' vs '%s'", (long long)i, s, mine, theirs);
            free(mine);
            free(theirs);
        }
        pair++;
    }
    fclose(f);
    CU_ASSERT_EQUAL(same, 2 * 601);
    ds_fra_free(d);
}

static void test_normalize(void) {
    expect_norm("I\xE2\x80\x99m home.", "I'm home.");                        /* U+2019 */
    expect_norm("\xE2\x80\x98Go\xE2\x80\x99 now", "'Go' now");               /* U+2018 */
    expect_norm("I\xCA\xBCm", "I'm");                                        /* U+02BC */
    expect_norm("\xE2\x80\x9CHi\xE2\x80\x9D, he said.", "\"Hi\", he said."); /* U+201C/D */
    expect_norm("He said \xC2\xAB hi \xC2\xBB.", "He said \"hi\".");         /* guillemets */
    expect_norm("\xC2\xABhi\xC2\xBB", "\"hi\"");
    expect_norm("Wait\xE2\x80\xA6", "Wait..."); /* U+2026 */
    /* blanks: NBSP, narrow NBSP, thin space, tab, line breaks; runs, ends */
    expect_norm("  Go\xC2\xA0\xC2\xA0on\xE2\x80\xAF!\t\n", "Go on !");
    expect_norm("a\xE2\x80\x89 b\r\nc", "a b c");
    expect_norm("   ", "");
    expect_norm("", "");
    /* zero width and soft hyphen removed */
    expect_norm("\xEF\xBB\xBFho\xC2\xADme\xE2\x80\x8B.", "home.");
    /* case, accents, other punctuation kept */
    expect_norm("Où est-ce ? (oui) 3 \xE2\x80\x93 4", "Où est-ce ? (oui) 3 \xE2\x80\x93 4");
    char *out = NULL;
    TG_EXPECT_ERROR(ds_text_normalize("go \xE2\x80", &out), "invalid UTF-8 byte 0xE2 at byte 4");
    CU_ASSERT_PTR_NULL(out);
    TG_EXPECT_ERROR(ds_text_normalize("\xC0\xAF", &out), "invalid UTF-8 byte 0xC0 at byte 1");
}

static void test_source(void) {
    /* the corpus form is unchanged: today's input gives today's ids */
    expect_source("i'm home .", "i'm home .", "i'm home .");
    expect_source("go .", "go .", "go .");
    /* typed text */
    expect_source("I'm home.", "i'm home .", "I'm home .");
    expect_source("Go on.", "go on .", "Go on .");
    expect_source("  I\xE2\x80\x99m  home\xC2\xA0!  ", "i'm home !", "I'm home !");
    expect_source("Hi, Tom. Really?!", "hi , tom . really ? !", "Hi , Tom . Really ? !");
    expect_source("\xE2\x80\x9CParis\xE2\x80\x9D.", "\"paris\" .", "\"Paris\" .");
    expect_source("", "", "");
    char *m = NULL, *t = NULL;
    TG_OK(ds_text_source("Go.", DS_PREPROCESS_D2L, &m, NULL));
    if (m) CU_ASSERT_STRING_EQUAL(m, "go .");
    free(m);
    TG_EXPECT_ERROR(ds_text_source("Go.", "bpe", &m, &t), "preprocessing 'bpe' is unknown",
                    "'d2l'");
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NULL(t);
    TG_EXPECT_ERROR(ds_text_source("Go\xFF", NULL, &m, &t), "invalid UTF-8 byte 0xFF at byte 3");
    CU_ASSERT_PTR_NULL(m);
    /* "normalize" (subword models): the text as typed, byte for byte (the vocabulary's codec
     * normalizes it as it encodes: once), UTF-8 still checked */
    const char *typed = "  I\xE2\x80\x99m\xC2\xA0 home. ";
    TG_OK(ds_text_source(typed, DS_PREPROCESS_NORMALIZE, &m, &t));
    if (m && t) {
        CU_ASSERT_STRING_EQUAL(m, typed);
        CU_ASSERT_STRING_EQUAL(t, typed);
    }
    free(m), free(t);
    TG_OK(ds_text_source(typed, DS_PREPROCESS_NORMALIZE, &m, NULL));
    if (m) CU_ASSERT_STRING_EQUAL(m, typed);
    free(m);
    TG_EXPECT_ERROR(ds_text_source("Va\xC3", DS_PREPROCESS_NORMALIZE, &m, &t),
                    "invalid UTF-8 byte 0xC3 at byte 3");
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NULL(t);
}

static void test_unk_word(void) {
    ds_vocab *v = ds_vocab_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    const char *known[] = {"<unk>", "i", "saw", ".", "home"};
    for (int i = 0; i < 5; i++) TG_OK(ds_vocab_add(v, known[i], strlen(known[i]), NULL));
    char *w = (char *)1;
    CU_ASSERT_EQUAL(ds_text_unk_word(v, "i saw zorglub .", "I saw Zorglub .", &w), 1);
    if (w) CU_ASSERT_STRING_EQUAL(w, "Zorglub"); /* as typed */
    free(w);
    CU_ASSERT_EQUAL(ds_text_unk_word(v, "i saw zorglub .", NULL, &w), 1);
    if (w) CU_ASSERT_STRING_EQUAL(w, "zorglub");
    free(w);
    /* typed with another token count: the model's form */
    CU_ASSERT_EQUAL(ds_text_unk_word(v, "i saw zorglub .", "I saw", &w), 1);
    if (w) CU_ASSERT_STRING_EQUAL(w, "zorglub");
    free(w);
    CU_ASSERT_EQUAL(ds_text_unk_word(v, "i saw home .", "I saw home .", &w), 0);
    CU_ASSERT_PTR_NULL(w);
    CU_ASSERT_EQUAL(ds_text_unk_word(v, "i saw bob and al .", "I saw Bob and Al .", &w), 3);
    CU_ASSERT_PTR_NULL(w);
    /* "zorglub" and "" (repeated spaces make empty tokens the vocabulary lacks) */
    CU_ASSERT_EQUAL(ds_text_unk_word(v, "zorglub  .", NULL, &w), 2);
    CU_ASSERT_PTR_NULL(w);
    ds_vocab_free(v);
}

static void test_detokenize(void) {
    /* the book's four translations */
    expect_fr("va !", NULL, "Va !");
    expect_fr("j'ai perdu .", NULL, "J'ai perdu.");
    expect_fr("il est calme .", NULL, "Il est calme.");
    expect_fr("je suis chez moi .", NULL, "Je suis chez moi.");
    /* French spacing: U+0020 before ! ? : ; none before . , ) ... and after ( */
    expect_fr("oui , c'est ça : non ; vraiment ?", NULL, "Oui, c'est ça : non ; vraiment ?");
    expect_fr("attends , ( oui ) d'accord . . .", NULL, "Attends, (oui) d'accord...");
    expect_fr("il dit \" bonjour \" , puis part .", NULL, "Il dit \"bonjour\", puis part.");
    /* capitals: sentence starts after . ! ?, multi-byte letters, after opening marks */
    expect_fr("non . été ! œuf ? ça", NULL, "Non. Été ! Œuf ? Ça");
    expect_fr("\" à demain \" .", NULL, "\"À demain\".");
    expect_fr("« salut » .", NULL, "« Salut ».");
    expect_fr("3 chats .", NULL, "3 chats.");
    expect_fr("j’ai faim .", NULL, "J’ai faim."); /* the corpus's U+2019 kept */
    /* <unk>: the first takes the source's one unknown word, others dropped; specials dropped */
    expect_fr("j'ai vu <unk> .", "Zorglub", "J'ai vu Zorglub.");
    expect_fr("<unk> est là .", "zorglub", "Zorglub est là.");
    expect_fr("va <unk> les <unk> <unk> .", "Zorglub", "Va Zorglub les.");
    expect_fr("va <unk> les <unk> <unk> .", NULL, "Va les.");
    expect_fr("<unk> <unk>", NULL, "");
    expect_fr("<bos> oui <pad> <eos>", NULL, "Oui");
    expect_fr(" oui  non ", NULL, "Oui non");
    expect_fr("", NULL, "");
    /* UTF-8: multi-byte tokens kept whole; invalid bytes refused */
    expect_fr("où\xE2\x80\xAF"
              "est-il ?",
              NULL,
              "Où\xE2\x80\xAF"
              "est-il ?");
    char *out = (char *)1;
    TG_EXPECT_ERROR(ds_detokenize_fr("va \xE9 !", NULL, &out), "invalid UTF-8 byte 0xE9 at byte 4");
    CU_ASSERT_PTR_NULL(out);
    TG_EXPECT_ERROR(ds_detokenize_fr("<unk>", "\xFF", &out), "invalid UTF-8 byte 0xFF at byte 1");
    CU_ASSERT_PTR_NULL(out);
}

/* ds_text_sentences(in) == the sentences in want, separated by '|' ("" for none). */
static void expect_sentences(const char *in, const char *want) {
    char **out = NULL, got[512] = "";
    int n = ds_text_sentences(in, &out);
    CU_ASSERT_FATAL(n >= 0);
    for (int i = 0; i < n; i++) {
        if (i) strcat(got, "|");
        strcat(got, out[i]);
        free(out[i]);
    }
    free(out);
    if (strcmp(got, want)) TG_FAIL("sentences('%s') = '%s', want '%s'", in, got, want);
}

static void test_sentences(void) {
    expect_sentences("I am tired. I want to go home.", "I am tired.|I want to go home.");
    expect_sentences("It's nice today. Let's walk!  Can we take the dog?   ",
                     "It's nice today.|Let's walk!|Can we take the dog?");
    expect_sentences("Go on.", "Go on.");
    expect_sentences("", "");
    expect_sentences(" \t ", "");
    /* abbreviations and initials stay inside a sentence; "I" ends one */
    expect_sentences("Dr. Smith arrived at 3 p.m. and left.",
                     "Dr. Smith arrived at 3 p.m. and left.");
    expect_sentences("Mr. and Mrs. Brown came. MR. Lee too.",
                     "Mr. and Mrs. Brown came.|MR. Lee too.");
    expect_sentences("J. K. Rowling wrote it. So did I. Really?",
                     "J. K. Rowling wrote it.|So did I.|Really?");
    expect_sentences("We met at 5 p.m. Then we ate.", "We met at 5 p.m. Then we ate.");
    /* closing quotes and brackets stay with their sentence; repeated marks, ellipses */
    expect_sentences("He said \"Stop.\" Then he left.", "He said \"Stop.\"|Then he left.");
    expect_sentences("(It was late.) We slept.", "(It was late.)|We slept.");
    expect_sentences("Really?! Yes... Wait\xE2\x80\xA6 Now.",
                     "Really?!|Yes...|Wait\xE2\x80\xA6|Now.");
    expect_sentences("\xE2\x80\x9CHi.\xE2\x80\x9D \xC3\x89lodie smiled.",
                     "\xE2\x80\x9CHi.\xE2\x80\x9D|\xC3\x89lodie smiled.");
    /* the next sentence starts with a digit or a quote; no cut without a blank or before
     * lowercase (the corpus form, numbers, e-mail-like text) */
    expect_sentences("It costs $5. 10 people came. \"Why?\" he asked.",
                     "It costs $5.|10 people came.|\"Why?\" he asked.");
    expect_sentences("i'm home . he's calm . go .", "i'm home . he's calm . go .");
    expect_sentences("Version 2.0 is out. see www.example.com now.",
                     "Version 2.0 is out. see www.example.com now.");
    expect_sentences("Stop! ", "Stop!");
    char **out = (char **)1;
    TG_EXPECT_ERROR(ds_text_sentences("Go. \xE9t\xE9.", &out), "invalid UTF-8 byte 0xE9 at byte 5");
    CU_ASSERT_PTR_NULL(out);
}

/* Tags in test strings: T0 .. T4 are U+E000 .. U+E004. */
#define T0 "\xEE\x80\x80"
#define T1 "\xEE\x80\x81"
#define T2 "\xEE\x80\x82"
#define T3 "\xEE\x80\x83"
#define T4 "\xEE\x80\x84"

/* Asserts the three number-tag functions on one pair: src tagged, tgt tagged against it, the
 * tagged target restored (= tgt), and a model's output `out` restored to `restored`. */
static void expect_tags(const char *src, const char *tgt, const char *want_src,
                        const char *want_tgt, const char *out, const char *restored) {
    char *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    TG_OK(ds_numtag_source(src, 0, &a));
    TG_OK(ds_numtag_target(src, tgt, 0, &b));
    if (a && strcmp(a, want_src)) TG_FAIL("numtag_source('%s') = '%s'", src, a);
    if (b && strcmp(b, want_tgt)) TG_FAIL("numtag_target('%s', '%s') = '%s'", src, tgt, b);
    if (b) TG_OK(ds_numtag_restore(src, b, &c));
    if (c && strcmp(c, tgt)) TG_FAIL("restore of the tagged target '%s' = '%s'", tgt, c);
    TG_OK(ds_numtag_restore(src, out, &d));
    if (d && strcmp(d, restored)) TG_FAIL("restore('%s', out) = '%s', want '%s'", src, d, restored);
    free(a), free(b), free(c), free(d);
}

static void test_number_tags(void) {
    /* a number the target copies; values in order of first appearance, repeats one tag */
    expect_tags("I was born in 1956.", "Je suis n\xC3\xA9 en 1956.", "I was born in " T0 ".",
                "Je suis n\xC3\xA9 en " T0 ".", "Je suis n\xC3\xA9 en " T0 ".",
                "Je suis n\xC3\xA9 en 1956.");
    expect_tags("Room 12, 3 beds, room 12.", "Chambre 12, 3 lits.",
                "Room " T0 ", " T1 " beds, room " T0 ".", "Chambre " T0 ", " T1 " lits.",
                T1 " et " T0, "3 et 12");
    /* runs, not values: 1,000 is two runs, written 1 000 in French; 007 is not 7 */
    expect_tags("It cost $1,000, not 7.",
                "\xC3\x87"
                "a a co\xC3\xBBt\xC3\xA9 1 000 $, pas 007.",
                "It cost $" T0 "," T1 ", not " T2 ".",
                "\xC3\x87"
                "a a co\xC3\xBBt\xC3\xA9 " T0 " " T1 " $, pas 007.",
                T1 T0, "0001");
    /* a target number the source lacks stays digits; digits inside words are runs too */
    expect_tags("Two dogs, MP3.", "Deux chiens, MP3 et 2.", "Two dogs, MP" T0 ".",
                "Deux chiens, MP" T0 " et 2.", "MP" T0, "MP3");
    /* at most DS_NUMTAG_MAX distinct values are tagged; later ones stay digits */
    CU_ASSERT_EQUAL(DS_NUMTAG_MAX, 4);
    expect_tags("1 2 3 4 5 2", "5 4 3 2 1", T0 " " T1 " " T2 " " T3 " 5 " T1,
                "5 " T3 " " T2 " " T1 " " T0, "5", "5");
    /* a tag the source has no number for is dropped; a tag past DS_NUMTAG_MAX is text; tags
     * already in a text are removed when it is tagged */
    expect_tags("No numbers.", "Pas de nombres.", "No numbers.", "Pas de nombres.",
                "x " T0 " y " T4, "x  y " T4);
    char *a = NULL, *b = NULL;
    TG_OK(ds_numtag_target("a" T0 "b 9", "c" T1 "d 9", 0, &a));
    if (a) CU_ASSERT_STRING_EQUAL(a, "cd " T0);
    TG_OK(ds_numtag_source("a" T0 "b 9", 0, &b));
    if (b) CU_ASSERT_STRING_EQUAL(b, "ab " T0);
    free(a), free(b);
    expect_tags("", "", "", "", "", "");
    char *out = (char *)1;
    TG_EXPECT_ERROR(ds_numtag_source("\xE9t\xE9 1", 0, &out), "invalid UTF-8 byte 0xE9 at byte 1");
    CU_ASSERT_PTR_NULL(out);
    TG_EXPECT_ERROR(ds_numtag_target("1", "\xC3(", 0, &out), "invalid UTF-8 byte 0xC3 at byte 1");
    TG_EXPECT_ERROR(ds_numtag_restore("1", "ok \xFF", &out), "invalid UTF-8 byte 0xFF at byte 4");
    CU_ASSERT_PTR_NULL(out);
}

/* Training's tags (shuffle != 0): the numbers of a pair get a permutation of the tags, the same
 * on both sides and for the same key; over many keys each tag is number 0's about as often. */
static void test_number_tags_shuffled(void) {
    const char *src = "1 22 333 4444 5", *tgt = "4444 et 1, 5";
    int first[DS_NUMTAG_MAX] = {0};
    for (uint64_t key = 1; key <= 4000; key++) {
        char *a = NULL, *b = NULL, *again = NULL;
        TG_OK(ds_numtag_source(src, key, &a));
        TG_OK(ds_numtag_target(src, tgt, key, &b));
        TG_OK(ds_numtag_source(src, key, &again));
        if (!a || !b || !again) break;
        CU_ASSERT_STRING_EQUAL(a, again);
        /* a = "Ta Tb Tc Td 5" with a, b, c, d distinct tags; b = "Td et Ta, 5" */
        int t[4];
        for (int j = 0; j < 4; j++) t[j] = (unsigned char)a[4 * j + 2] - 0x80;
        CU_ASSERT(strlen(a) == 17 && !strcmp(a + 15, " 5"));
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                CU_ASSERT(t[i] >= 0 && t[i] < 4 && (i == j || t[i] != t[j]));
        char want[32];
        snprintf(want, sizeof want, "\xEE\x80%c et \xEE\x80%c, 5", 0x80 + t[3], 0x80 + t[0]);
        CU_ASSERT_STRING_EQUAL(b, want);
        first[t[0]]++;
        free(a), free(b), free(again);
    }
    for (int j = 0; j < DS_NUMTAG_MAX; j++)
        if (first[j] < 850 || first[j] > 1150)
            TG_FAIL("tag %d first %d times of 4000", j, first[j]);
    /* key 0 is the order: what a sentence to translate gets */
    char *a = NULL;
    TG_OK(ds_numtag_source(src, 0, &a));
    if (a) CU_ASSERT_STRING_EQUAL(a, T0 " " T1 " " T2 " " T3 " 5");
    free(a);
}

int main(void) {
    static const CU_TestInfo tests[] = {
        {"ds_preprocess: d2l's preprocess_nmt on one sentence", test_preprocess},
        {"ds_preprocess = the loader's tokens on the book's lines", test_preprocess_is_the_loaders},
        {"normalize: quotes, apostrophes, blanks, invisible characters", test_normalize},
        {"source: typed text -> the model's form and the typed tokens", test_source},
        {"unknown source words", test_unk_word},
        {"French detokenization: spacing, capitals, <unk>, UTF-8", test_detokenize},
        {"sentences of a typed line: marks, abbreviations, initials, quotes", test_sentences},
        {"number tags: source, target, restore; limits, stray tags, bad input", test_number_tags},
        {"number tags shuffled for training: a permutation, the same for a key, each tag as often",
         test_number_tags_shuffled},
        CU_TEST_INFO_NULL,
    };
    return tg_test_main("datasets_text", tests);
}
