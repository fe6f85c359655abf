/* tests/datasets/test_split.c -- the held-out split modes (fra_eng.h, ds_fra_options.split_mode):
 * random mode = the permutation's bits as before, disjoint mode = no English and no French
 * sentence on two sides (on a small file and on the whole fra.txt), whole components, sizes,
 * determinism, the count of test pairs sharing their English side with training. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "datasets/fra_eng.h"
#include "test_util.h"

/* 1 << part of every pair, for each side's sentences: fails when a sentence is in two parts. */
static int sentences_on_two_sides(const ds_fra *d) {
    int shared = 0;
    for (int side = 0; side < 2; side++) {
        ds_vocab *v = ds_vocab_new();
        int64_t n = ds_fra_num_pairs(d);
        uint8_t *mask = calloc((size_t)n, 1);
        for (int part = 0; part < 3; part++) {
            const int64_t *pp = ds_fra_part_pairs(d, (ds_part)part);
            for (int64_t q = 0; q < ds_fra_part_size(d, (ds_part)part); q++) {
                char *s = NULL;
                int32_t id = 0;
                TG_OK(ds_fra_sentence(d, (ds_side)side, pp[q], &s));
                TG_OK(ds_vocab_add(v, s, strlen(s), &id));
                mask[id] |= (uint8_t)(1u << part);
                free(s);
            }
        }
        for (int64_t i = 0; i < n; i++) shared += mask[i] && (mask[i] & (mask[i] - 1));
        free(mask);
        ds_vocab_free(v);
    }
    return shared;
}

static ds_fra *load_mem(const char *text, double valid, double test, uint64_t seed, int mode) {
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = 0;
    o.valid_frac = valid;
    o.test_frac = test;
    o.split_seed = seed;
    o.split_mode = mode;
    ds_fra *d = NULL;
    TG_OK(ds_fra_load_mem(text, strlen(text), "mem", &o, &d));
    return d;
}

/* 20 pairs: components {0,1,2} (English "a", French "B"), {3,5} (French "C" = "c" after
 * lowercasing), {10,11,12,13} (English "k"), the others alone: 14 components. */
static const char *SMALL = "a\tA\na\tB\nb\tb\nc\tC\nd\tD\ne\tc\nf\tF\ng\tG\nh\tH\ni\tI\n"
                           "k\tK1\nk\tK2\nk\tK3\nk\tK4\nl\tL\nm\tM\nn\tN\no\tO\np\tP\nq\tQ\n";

static void test_disjoint_small(void) {
    for (uint64_t seed = 0; seed < 20; seed++) {
        ds_fra *d = load_mem(SMALL, 0.2, 0.25, seed, DS_SPLIT_DISJOINT);
        if (!d) return;
        CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 20);
        CU_ASSERT_EQUAL(sentences_on_two_sides(d), 0);
        /* targets: test floor(0.25 * 20) = 5, valid 4; first fit never exceeds them, and with
         * 11 single pairs both are reached exactly */
        CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_TEST), 5);
        CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_VALID), 4);
        CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_TRAIN), 11);
        CU_ASSERT_EQUAL(ds_fra_shared_src_test(d), 0);
        /* whole components: 0, 1, 2 together, 3 and 5 together, 10..13 together */
        int where[20] = {0};
        for (int part = 0; part < 3; part++)
            for (int64_t q = 0; q < ds_fra_part_size(d, (ds_part)part); q++)
                where[ds_fra_part_pairs(d, (ds_part)part)[q]] = part;
        CU_ASSERT(where[0] == where[1] && where[1] == where[2]);
        CU_ASSERT_EQUAL(where[3], where[5]);
        CU_ASSERT(where[10] == where[11] && where[11] == where[12] && where[12] == where[13]);
        /* determinism: the same seed, the same parts */
        ds_fra *e = load_mem(SMALL, 0.2, 0.25, seed, DS_SPLIT_DISJOINT);
        for (int part = 0; e && part < 3; part++) {
            CU_ASSERT_EQUAL(ds_fra_part_size(d, (ds_part)part), ds_fra_part_size(e, (ds_part)part));
            CU_ASSERT_EQUAL(memcmp(ds_fra_part_pairs(d, (ds_part)part),
                                   ds_fra_part_pairs(e, (ds_part)part),
                                   (size_t)ds_fra_part_size(d, (ds_part)part) * sizeof(int64_t)),
                            0);
        }
        ds_fra_free(e);
        ds_fra_free(d);
    }
    /* a component larger than the target goes to train: test floor(0.15 * 20) = 3 pairs
     * cannot hold {10..13} */
    for (uint64_t seed = 0; seed < 20; seed++) {
        ds_fra *d3 = load_mem(SMALL, 0, 0.15, seed, DS_SPLIT_DISJOINT);
        if (!d3) return;
        CU_ASSERT_EQUAL(ds_fra_part_size(d3, DS_TEST), 3);
        for (int64_t q = 0; q < 3; q++) {
            int64_t p = ds_fra_part_pairs(d3, DS_TEST)[q];
            CU_ASSERT(p < 10 || p > 13);
        }
        ds_fra_free(d3);
    }
    /* no held-out part at all without fractions */
    ds_fra *d = load_mem(SMALL, 0, 0, 0, DS_SPLIT_DISJOINT);
    if (d) CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_TRAIN), 20);
    ds_fra_free(d);
    ds_fra_options o = ds_fra_defaults();
    o.split_mode = 2;
    TG_EXPECT_ERROR(ds_fra_load_mem(SMALL, strlen(SMALL), "mem", &o, &d),
                    "split_mode = 2, expected 0 (random) or 1 (disjoint)");
    CU_ASSERT_STRING_EQUAL(ds_split_mode_names[DS_SPLIT_RANDOM], "random");
    CU_ASSERT_STRING_EQUAL(ds_split_mode_names[DS_SPLIT_DISJOINT], "disjoint");
    CU_ASSERT_PTR_NULL(ds_split_mode_names[2]);
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Random mode: test = sorted p[0..n_test), valid = sorted next n_valid, as before. */
static void test_random_unchanged(void) {
    ds_fra *d = load_mem(SMALL, 0.2, 0.25, 7, DS_SPLIT_RANDOM);
    if (!d) return;
    int64_t p[20];
    ag_rng_permutation(p, 20, 7, DS_SPLIT_STREAM);
    qsort(p, 5, sizeof *p, cmp64);
    qsort(p + 5, 4, sizeof *p, cmp64);
    qsort(p + 9, 11, sizeof *p, cmp64);
    CU_ASSERT_EQUAL(memcmp(ds_fra_part_pairs(d, DS_TEST), p, 5 * sizeof *p), 0);
    CU_ASSERT_EQUAL(memcmp(ds_fra_part_pairs(d, DS_VALID), p + 5, 4 * sizeof *p), 0);
    CU_ASSERT_EQUAL(memcmp(ds_fra_part_pairs(d, DS_TRAIN), p + 9, 11 * sizeof *p), 0);
    CU_ASSERT_EQUAL(ds_fra_opts(d)->split_mode, DS_SPLIT_RANDOM);
    CU_ASSERT_EQUAL(ds_fra_defaults().split_mode, DS_SPLIT_RANDOM);
    ds_fra_free(d);
}

/* The whole fra.txt with the "full" preset's split (0.01197 each, split seed 1). */
static void test_real_data(void) {
    const char *path = tu_data_path();
    if (!path) return;
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = 0;
    o.valid_frac = o.test_frac = 0.01197;
    o.split_seed = 1;
    ds_fra *r = NULL, *d = NULL;
    TG_OK(ds_fra_load(path, &o, &r));
    o.split_mode = DS_SPLIT_DISJOINT;
    TG_OK(ds_fra_load(path, &o, &d));
    if (!r || !d) {
        ds_fra_free(r);
        ds_fra_free(d);
        return;
    }
    int64_t n = ds_fra_num_pairs(d), target = (int64_t)floor(0.01197 * (double)n);
    CU_ASSERT_EQUAL(target, 2000);
    /* random: the sizes exactly, and English sides shared with training */
    CU_ASSERT_EQUAL(ds_fra_part_size(r, DS_TEST), 2000);
    CU_ASSERT_EQUAL(ds_fra_shared_src_test(r), 1011);
    CU_ASSERT(sentences_on_two_sides(r) > 0);
    /* disjoint: nothing shared, the targets reached */
    CU_ASSERT_EQUAL(sentences_on_two_sides(d), 0);
    CU_ASSERT_EQUAL(ds_fra_shared_src_test(d), 0);
    CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_TEST), 2000);
    CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_VALID), 2000);
    CU_ASSERT_EQUAL(ds_fra_part_size(d, DS_TRAIN), n - 4000);
    fprintf(stderr, "random: %lld of %lld test pairs share their English side\n",
            (long long)ds_fra_shared_src_test(r), (long long)ds_fra_part_size(r, DS_TEST));
    ds_fra_free(r);
    ds_fra_free(d);
}

int main(void) {
    static const CU_TestInfo tests[] = {
        {"disjoint split: small file, components, sizes, determinism", test_disjoint_small},
        {"random split: the permutation's bits as before", test_random_unchanged},
        {"whole fra.txt: random shares, disjoint does not", test_real_data},
        CU_TEST_INFO_NULL,
    };
    return tg_test_main("datasets_split", tests);
}
