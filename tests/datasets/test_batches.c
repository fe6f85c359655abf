/* test_batches.c -- the mini-batch loader over arrays (datasets/batches.h): every row once per
 * epoch, the gathered rows match the arrays, the order is ag_rng_permutation(n, seed, epoch),
 * last batch smaller or dropped, and the refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/batches.h"
#include "tests/tg_test.h"

enum { N = 23, D = 3 };
static float xs[N * D];
static int32_t ys[N];
static int16_t lens[N * 2];

static void fill(void) {
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < D; j++) xs[i * D + j] = (float)(i * 10 + j) + 0.5f;
        ys[i] = 1000 + i;
        lens[2 * i] = (int16_t)i;
        lens[2 * i + 1] = (int16_t)-i;
    }
}

static ds_loader *make(int64_t batch, bool shuffle, bool drop_last, uint64_t seed) {
    ds_array a[3] = {DS_ARRAY(xs, D), DS_ARRAY(ys, 1), DS_ARRAY(lens, 2)};
    ds_loader_opts o = {
        .batch_size = batch, .shuffle = shuffle, .drop_last = drop_last, .seed = seed};
    ds_loader *it = NULL;
    TG_OK(ds_loader_new(N, 3, a, &o, &it));
    return it;
}

/* Runs one epoch; checks every batch's gathered rows against the arrays; returns the rows in
 * visiting order in seen[] and the number of rows. */
static int64_t run_epoch(ds_loader *it, int64_t epoch, int64_t batch, int64_t *seen) {
    ds_loader_epoch(it, epoch);
    ds_minibatch b;
    int64_t n = 0, k = 0;
    while (ds_loader_next(it, &b)) {
        CU_ASSERT_EQUAL(b.index, k++);
        CU_ASSERT_TRUE(b.size >= 1 && b.size <= batch);
        const float *x = b.data[0];
        const int32_t *y = b.data[1];
        const int16_t *l = b.data[2];
        for (int64_t r = 0; r < b.size; r++) {
            int64_t row = b.rows[r];
            CU_ASSERT_EQUAL(memcmp(x + r * D, xs + row * D, D * sizeof *x), 0);
            CU_ASSERT_EQUAL(y[r], ys[row]);
            CU_ASSERT_EQUAL(l[2 * r + 1], lens[2 * row + 1]);
            seen[n++] = row;
        }
    }
    CU_ASSERT_EQUAL(k, ds_loader_count(it));
    return n;
}

static void test_in_order(void) {
    int64_t seen[N];
    ds_loader *it = make(5, false, false, 0);
    CU_ASSERT_EQUAL(ds_loader_count(it), 5); /* 5 5 5 5 3 */
    CU_ASSERT_EQUAL(run_epoch(it, 0, 5, seen), N);
    for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(seen[i], i);
    ds_loader_free(it);
    /* drop_last: 4 batches of 5, the 3 last rows are not visited */
    it = make(5, false, true, 0);
    CU_ASSERT_EQUAL(ds_loader_count(it), 4);
    CU_ASSERT_EQUAL(run_epoch(it, 0, 5, seen), 20);
    ds_loader_free(it);
    /* a batch larger than the data: one batch of everything, or none with drop_last */
    it = make(100, false, false, 0);
    CU_ASSERT_EQUAL(run_epoch(it, 0, 100, seen), N);
    ds_loader_free(it);
    it = make(100, true, true, 0);
    CU_ASSERT_EQUAL(ds_loader_count(it), 0);
    CU_ASSERT_EQUAL(run_epoch(it, 0, 100, seen), 0);
    ds_loader_free(it);
}

static void test_shuffled(void) {
    int64_t a[N], b[N], c[N], want[N];
    ds_loader *it = make(4, true, false, 42), *again = make(4, true, false, 42);
    CU_ASSERT_EQUAL(run_epoch(it, 3, 4, a), N);
    /* the documented order: ag_rng_permutation(n, seed, epoch) */
    ag_rng_permutation(want, N, 42, 3);
    CU_ASSERT_EQUAL(memcmp(a, want, sizeof a), 0);
    /* every row once */
    int count[N] = {0};
    for (int i = 0; i < N; i++) count[a[i]]++;
    for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(count[i], 1);
    /* deterministic: another loader, epochs replayed out of order */
    run_epoch(again, 0, 4, b);
    run_epoch(again, 3, 4, c);
    CU_ASSERT_EQUAL(memcmp(a, c, sizeof a), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0); /* epochs differ */
    /* restarting an epoch in the middle gives its first batch again */
    ds_loader_epoch(it, 3);
    ds_minibatch mb;
    ds_loader_next(it, &mb);
    ds_loader_epoch(it, 3);
    ds_loader_next(it, &mb);
    CU_ASSERT_EQUAL(mb.index, 0);
    CU_ASSERT_EQUAL(mb.rows[0], want[0]);
    ds_loader_free(it);
    ds_loader_free(again);
    /* another seed, another order */
    it = make(4, true, false, 43);
    run_epoch(it, 3, 4, b);
    CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
    ds_loader_free(it);
}

static void test_refusals(void) {
    ds_array a[1] = {DS_ARRAY(ys, 1)};
    ds_loader_opts o = {.batch_size = 4};
    ds_loader *it = NULL;
    TG_EXPECT_ERROR(ds_loader_new(0, 1, a, &o, &it), "ds_loader_new: n_rows = 0, expected >= 1");
    o.batch_size = 0;
    TG_EXPECT_ERROR(ds_loader_new(N, 1, a, &o, &it), "batch_size = 0, expected >= 1");
    o.batch_size = 4;
    TG_EXPECT_ERROR(ds_loader_new(N, DS_LOADER_MAX_ARRAYS + 1, a, &o, &it),
                    "9 arrays, expected 1 to 8");
    a[0].row_elems = 0;
    TG_EXPECT_ERROR(ds_loader_new(N, 1, a, &o, &it),
                    "array 0 has data set, elem_size 4, row_elems 0");
    a[0] = (ds_array){NULL, 4, 1};
    TG_EXPECT_ERROR(ds_loader_new(N, 1, a, &o, &it), "array 0 has data NULL");
    a[0] = (ds_array){ys, SIZE_MAX / 2, 4};
    TG_EXPECT_ERROR(ds_loader_new(N, 1, a, &o, &it), "too large");
    TG_EXPECT_ERROR(ds_loader_new(N, 1, a, NULL, &it), "opts is NULL");
    ds_loader_free(NULL);
}

static CU_TestInfo tests[] = {
    {"in order: every row, last batch smaller or dropped", test_in_order},
    {"shuffled: ag_rng_permutation(n, seed, epoch), deterministic", test_shuffled},
    {"refusals name the argument", test_refusals},
    CU_TEST_INFO_NULL,
};
int main(void) {
    fill();
    return tg_test_main("batches", tests);
}
