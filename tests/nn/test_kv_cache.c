/* test_kv_cache.c -- the key/value cache of nn/kv_cache.h: reserve, append, view and select
 * against plain arrays (values exact), growth past what was reserved, the attention of one
 * query per row over the cache's views against the attention over the same prefix, the row
 * gathers, and the errors. */
#include "nn/nn.h"
#include "tests/tg_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { R = 3, W = 8, MAXT = 24, MAXR = 8 };

/* A reference of what the cache should hold: ref[r][j][f] for rows r < rows, positions j < len. */
typedef struct ref {
    ag_real k[MAXR][MAXT][W], v[MAXR][MAXT][W];
    int rows, len;
} ref;

/* Appends T positions of distinct values (from `seed`) to the cache and to the reference. */
static int append(nn_kv_cache *kv, ag_tape *t, ref *rf, int T, int seed) {
    ag_tensor *k = ag_tensor_new(t, AG_SHAPE(rf->rows, T, W)),
              *v = ag_tensor_new(t, AG_SHAPE(rf->rows, T, W));
    for (int r = 0; r < rf->rows; r++)
        for (int j = 0; j < T; j++)
            for (int f = 0; f < W; f++) {
                ag_real x = (ag_real)(seed * 1000 + r * 100 + j * 10 + f) / 7;
                k->data[((size_t)r * T + j) * W + f] = rf->k[r][rf->len + j][f] = x;
                v->data[((size_t)r * T + j) * W + f] = rf->v[r][rf->len + j][f] = -x;
            }
    rf->len += T;
    return nn_kv_cache_append(kv, t, k, v);
}

/* The views hold exactly the reference: shape (rows, len, W), every value equal. */
static void expect_views(nn_kv_cache *kv, ag_tape *t, const ref *rf) {
    CU_ASSERT_EQUAL_FATAL(kv->rows, rf->rows);
    CU_ASSERT_EQUAL_FATAL(kv->len, rf->len);
    ag_tensor *k = nn_kv_cache_keys(kv, t), *v = nn_kv_cache_values(kv, t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(k->shape[0], rf->rows);
    CU_ASSERT_EQUAL(k->shape[1], rf->len);
    CU_ASSERT_EQUAL(k->shape[2], W);
    int bad = 0;
    for (int r = 0; r < rf->rows; r++)
        for (int j = 0; j < rf->len; j++)
            for (int f = 0; f < W; f++) {
                ptrdiff_t i = ((ptrdiff_t)r * rf->len + j) * W + f;
                bad += ag_get(k, i) != rf->k[r][j][f] || ag_get(v, i) != rf->v[r][j][f];
            }
    CU_ASSERT_EQUAL(bad, 0);
}

/* The reference's rows: row i := old row rows[i]. */
static void ref_select(ref *rf, const int32_t *rows, int n) {
    ref old = *rf;
    for (int i = 0; i < n; i++) {
        memcpy(rf->k[i], old.k[rows[i]], sizeof rf->k[i]);
        memcpy(rf->v[i], old.v[rows[i]], sizeof rf->v[i]);
    }
    rf->rows = n;
}

/* Reserve, append one and several positions (past the reserved room: the cache grows and keeps
 * what it held), select with repeats (more rows than reserved: grows; fewer: in place), append
 * after a select, truncate. */
static void test_append_select_exact(void) {
    ag_tape *t = ag_tape_new();
    static ref rf;
    memset(&rf, 0, sizeof rf);
    rf.rows = R;
    nn_kv_cache kv;
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_init(&kv, R, W), 0);
    CU_ASSERT_PTR_NULL(kv.k); /* no memory before reserve or append */
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_reserve(&kv, t, R, 2), 0);
    CU_ASSERT_EQUAL(kv.t_cap, 2);
    CU_ASSERT_EQUAL(kv.rows_cap, R);
    ag_real *first = kv.k;
    for (int s = 0; s < 2; s++) CU_ASSERT_EQUAL_FATAL(append(&kv, t, &rf, 1, s), 0);
    CU_ASSERT_PTR_EQUAL(kv.k, first); /* within the reserved room: no move */
    expect_views(&kv, t, &rf);
    CU_ASSERT_PTR_EQUAL(nn_kv_cache_keys(&kv, t), &kv.k_at); /* full: the leaf itself */
    CU_ASSERT_EQUAL_FATAL(append(&kv, t, &rf, 1, 2), 0);     /* full: grows to 4 */
    CU_ASSERT_EQUAL(kv.t_cap, 4);
    CU_ASSERT_EQUAL_FATAL(append(&kv, t, &rf, 3, 3), 0); /* 6 > 4: grows to 8 */
    CU_ASSERT_EQUAL(kv.t_cap, 8);
    expect_views(&kv, t, &rf);
    /* beam expansion: 5 rows > rows_cap 3 */
    const int32_t up[5] = {2, 0, 2, 1, 1};
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_select(&kv, t, up, 5, NULL), 0);
    ref_select(&rf, up, 5);
    CU_ASSERT_EQUAL(kv.rows_cap, 5);
    expect_views(&kv, t, &rf);
    /* in place, rows repeating and swapping; then fewer rows */
    const int32_t perm[5] = {4, 3, 0, 0, 2};
    ag_real *before = kv.k;
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_select(&kv, t, perm, 5, NULL), 0);
    CU_ASSERT_PTR_EQUAL(kv.k, before);
    ref_select(&rf, perm, 5);
    expect_views(&kv, t, &rf);
    const int32_t down[2] = {3, 1};
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_select(&kv, t, down, 2, NULL), 0);
    ref_select(&rf, down, 2);
    expect_views(&kv, t, &rf);
    /* keep: rows known to hold their content are not copied */
    const int32_t same[2] = {1, 1};
    const bool keep[2] = {false, true}; /* row 1 already holds what row 1 would receive */
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_select(&kv, t, same, 2, keep), 0);
    ref_select(&rf, same, 2);
    expect_views(&kv, t, &rf);
    /* append after a select, then undo it */
    CU_ASSERT_EQUAL_FATAL(append(&kv, t, &rf, 2, 9), 0);
    expect_views(&kv, t, &rf);
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_truncate(&kv, t, 6), 0);
    rf.len = 6;
    expect_views(&kv, t, &rf);
    ag_tape_free(t);
}

/* The cache's views used by the attention of one query per row (the decoder step, in place over
 * rows t_cap apart) give the bits of the general kernel over contiguous copies of the same
 * prefix (the claim of nn/attention.c), at every length, past the one-query kernel's 16 keys
 * too; and the values of the causal full pass over the whole sequence at that query's row. */
static void test_step_attention_over_cache(void) {
    enum { B = 3, H = 8, HEADS = 2, T = 20 };
    ag_tape *t = ag_tape_new();
    ag_rng rng;
    ag_rng_seed(&rng, 11);
    static ag_real Q[B][T][H], K[B][T][H], V[B][T][H];
    for (int b = 0; b < B; b++)
        for (int j = 0; j < T; j++)
            for (int f = 0; f < H; f++) {
                Q[b][j][f] = (ag_real)ag_rng_normal(&rng);
                K[b][j][f] = (ag_real)ag_rng_normal(&rng);
                V[b][j][f] = (ag_real)ag_rng_normal(&rng);
            }
    nn_attention a;
    CU_ASSERT_EQUAL_FATAL(nn_attention_init(&a, HEADS, 0), 0);
    nn_ctx c = {.tape = t, .training = false};
    /* the full causal pass: query j sees keys 0..j */
    ag_tensor *fq = ag_tensor_from(t, AG_SHAPE(B, T, H), &Q[0][0][0]),
              *fk = ag_tensor_from(t, AG_SHAPE(B, T, H), &K[0][0][0]),
              *fv = ag_tensor_from(t, AG_SHAPE(B, T, H), &V[0][0][0]);
    int32_t causal[B * T];
    for (int i = 0; i < B * T; i++) causal[i] = i % T + 1;
    ag_tensor *full = nn_attention_forward(&a, &c, fq, fk, fv, causal, 2, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full);
    nn_kv_cache kv;
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_init(&kv, B, H), 0);
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_reserve(&kv, t, B, 4), 0); /* grows on the way */
    bool prev = ag_tape_set_recording(t, false);
    int differ = 0;
    double err = 0;
    for (int j = 0; j < T; j++) {
        ag_tensor *k = ag_tensor_new(t, AG_SHAPE(B, 1, H)),
                  *v = ag_tensor_new(t, AG_SHAPE(B, 1, H));
        ag_tensor *q = ag_leaf_new(AG_SHAPE(B, 1, H), true);
        for (int b = 0; b < B; b++) {
            memcpy(k->data + b * H, K[b][j], sizeof K[b][j]);
            memcpy(v->data + b * H, V[b][j], sizeof V[b][j]);
            memcpy(q->data + b * H, Q[b][j], sizeof Q[b][j]);
        }
        CU_ASSERT_EQUAL_FATAL(nn_kv_cache_append(&kv, t, k, v), 0);
        ag_tensor *step = nn_attention_forward(&a, &c, q, nn_kv_cache_keys(&kv, t),
                                               nn_kv_cache_values(&kv, t), NULL, 0, NULL);
        /* the general kernel (recording: q wants its gradient) over contiguous copies */
        ag_tensor *pk = ag_tensor_new(t, AG_SHAPE(B, j + 1, H)),
                  *pv = ag_tensor_new(t, AG_SHAPE(B, j + 1, H));
        for (int b = 0; b < B; b++) {
            memcpy(pk->data + (size_t)b * (j + 1) * H, K[b], sizeof(ag_real) * (j + 1) * H);
            memcpy(pv->data + (size_t)b * (j + 1) * H, V[b], sizeof(ag_real) * (j + 1) * H);
        }
        ag_tape_set_recording(t, true);
        ag_tensor *general = nn_attention_forward(&a, &c, q, pk, pv, NULL, 0, NULL);
        ag_tape_set_recording(t, false);
        CU_ASSERT_PTR_NOT_NULL_FATAL(step);
        CU_ASSERT_PTR_NOT_NULL_FATAL(general);
        CU_ASSERT_TRUE(general->requires_grad);
        differ += memcmp(step->data, general->data, sizeof(ag_real) * B * H) != 0;
        for (int b = 0; b < B; b++)
            for (int f = 0; f < H; f++)
                err = fmax(err, fabs((double)step->data[b * H + f] -
                                     full->data[((size_t)b * T + j) * H + f]));
        ag_leaf_free(q);
    }
    ag_tape_set_recording(t, prev);
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT_TRUE(err < 1e-5);
    CU_ASSERT_TRUE(kv.t_cap >= T);
    ag_tape_free(t);
}

/* nn_rows_gather against a plain gather: repeats, keep, the same-source rule. */
static void test_rows_gather(void) {
    ag_tape *t = ag_tape_new();
    int32_t buf[6][3], want[6][3];
    for (int r = 0; r < 6; r++)
        for (int f = 0; f < 3; f++) buf[r][f] = r * 10 + f;
    const int32_t rows[5] = {4, 4, 0, 3, 1};
    for (int i = 0; i < 5; i++) memcpy(want[i], buf[rows[i]], sizeof want[i]);
    /* stride 3 ints, 2 of them moved: the third column stays */
    for (int i = 0; i < 5; i++) want[i][2] = buf[i][2];
    CU_ASSERT_EQUAL_FATAL(nn_rows_gather(t, buf, sizeof buf[0], 2 * sizeof(int32_t), rows, 5, NULL),
                          0);
    CU_ASSERT_EQUAL(memcmp(buf, want, sizeof(int32_t) * 5 * 3), 0);
    /* sources: old rows 0, 1 from source 7, rows 2, 3 from 8 */
    const int32_t src[4] = {7, 7, 8, 8}, sel[4] = {1, 0, 3, 3};
    bool keep[4];
    nn_rows_same_source(src, 4, sel, 4, keep);
    CU_ASSERT_TRUE(keep[0] && keep[1] && keep[2] && keep[3]);
    const int32_t sel2[3] = {2, 2, 0};
    nn_rows_same_source(src, 2, sel2, 3, keep); /* row 2 is new: never kept */
    CU_ASSERT_TRUE(!keep[0] && !keep[1] && !keep[2]);
    ag_tape_free(t);
}

/* Misuse is refused, named, and leaves the cache as it was. */
static void test_errors(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    nn_kv_cache kv;
    TG_EXPECT_ERROR(nn_kv_cache_init(&kv, 0, W), "0 rows");
    CU_ASSERT_EQUAL_FATAL(nn_kv_cache_init(&kv, 2, W), 0);
    TG_EXPECT_NULL(nn_kv_cache_keys(&kv, t), "empty");
    CU_ASSERT_EQUAL(nn_kv_cache_reserve(&kv, t, 2, -1), -1);
    /* shapes: rows and width must match */
    ag_tensor *k = ag_tensor_new(t, AG_SHAPE(3, 1, W)), *v = ag_tensor_new(t, AG_SHAPE(3, 1, W));
    TG_EXPECT_ERROR(nn_kv_cache_append(&kv, t, k, v), "[3, 1, 8]");
    CU_ASSERT_EQUAL(kv.len, 0);
    /* keys that record a gradient */
    ag_tensor *kg = ag_leaf_new(AG_SHAPE(2, 1, W), true),
              *vg = ag_leaf_new(AG_SHAPE(2, 1, W), true);
    TG_EXPECT_ERROR(nn_kv_cache_append(&kv, t, kg, vg), "inference only");
    bool prev = ag_tape_set_recording(t, false); /* the same, recording off: accepted */
    CU_ASSERT_EQUAL(nn_kv_cache_append(&kv, t, kg, vg), 0);
    ag_tape_set_recording(t, prev);
    CU_ASSERT_EQUAL(kv.len, 1);
    /* row ids */
    TG_EXPECT_ERROR(nn_kv_cache_select(&kv, t, (const int32_t[]){0, 2}, 2, NULL),
                    "nn_kv_cache_select: row 1 is 2");
    TG_EXPECT_ERROR(nn_kv_cache_select(&kv, t, (const int32_t[]){-1}, 1, NULL), "row 0 is -1");
    CU_ASSERT_EQUAL(nn_kv_cache_select(&kv, t, (const int32_t[]){0}, 0, NULL), -1);
    CU_ASSERT_EQUAL(kv.rows, 2);
    CU_ASSERT_EQUAL(nn_kv_cache_truncate(&kv, t, 2), -1);
    CU_ASSERT_EQUAL(kv.len, 1);
    ag_leaf_free(kg);
    ag_leaf_free(vg);
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

static CU_TestInfo tests[] = {
    {"reserve, append, select: the views hold a plain gather's values", test_append_select_exact},
    {"one query over the cache: the general kernel's bits, the causal pass's values",
     test_step_attention_over_cache},
    {"row gathers: repeats, keep, same source", test_rows_gather},
    {"errors: shapes, gradients, row ids, empty", test_errors},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("nn_kv_cache", tests); }
