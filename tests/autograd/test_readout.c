/* test_readout.c -- ag_argmax and ag_copy_out on contiguous tensors and on strided views,
 * against naive loops over ag_get; PyTorch's tie and NaN rules; the refusals (float32); the
 * vectorized row kernel ag_row_argmax against the one-by-one rule. */
#include "autograd/ag.h"
#include "autograd/ag_op.h"
#include "tests/tg_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


/* The naive argmax along axis a of x: index arithmetic on the row-major flat index. */
static void naive_argmax(const ag_tensor *x, int a, int32_t *out) {
    ptrdiff_t inner = 1;
    for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
    ptrdiff_t n = x->shape[a], outer = x->numel / (n * inner);
    for (ptrdiff_t o = 0; o < outer; o++)
        for (ptrdiff_t i = 0; i < inner; i++) {
            int32_t best = 0;
            for (ptrdiff_t k = 1; k < n; k++)
                if (ag_get(x, (o * n + k) * inner + i) > ag_get(x, (o * n + best) * inner + i))
                    best = (int32_t)k;
            out[o * inner + i] = best;
        }
}

static void test_argmax_views(void) {
    ag_tape *t = ag_tape_new();
    ag_rng rng;
    ag_rng_seed(&rng, 9);
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(3, 4, 5));
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)ag_rng_normal(&rng);
    ag_tensor *views[3] = {x, ag_permute(t, x, (const int[]){2, 0, 1}),
                           ag_narrow(t, ag_transpose(t, x, 0, 2), 1, 1, 2)};
    int32_t got[64], want[64];
    for (int v = 0; v < 3; v++) {
        ag_tensor *y = views[v];
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        for (int a = 0; a < 3; a++) {
            memset(got, -1, sizeof got);
            CU_ASSERT_EQUAL(ag_argmax(y, a - 3 * (a == 2), got, 64), 0); /* -1 for the last */
            naive_argmax(y, a, want);
            CU_ASSERT_EQUAL(memcmp(got, want, (size_t)(y->numel / y->shape[a]) * sizeof *got), 0);
        }
        /* AG_ALL: an index into the row-major flattening */
        CU_ASSERT_EQUAL(ag_argmax(y, AG_ALL, got, 1), 0);
        for (ptrdiff_t i = 0; i < y->numel; i++) CU_ASSERT_TRUE(ag_get(y, i) <= ag_get(y, got[0]));
    }
    ag_tape_free(t);
}

static void test_argmax_ties_nan(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(3, 4),
                                  (const ag_real[]){1, 3, 3, 0,     /* tie */
                                                    2, NAN, 5, NAN, /* NaN */
                                                    -1, -1, -1, -1});
    int32_t got[3];
    CU_ASSERT_EQUAL(ag_argmax(x, 1, got, 3), 0);
    CU_ASSERT_EQUAL(got[0], 1); /* the first of the maxima */
    CU_ASSERT_EQUAL(got[1], 1); /* the first NaN */
    CU_ASSERT_EQUAL(got[2], 0);
    CU_ASSERT_EQUAL(ag_argmax(x, AG_ALL, got, 1), 0);
    CU_ASSERT_EQUAL(got[0], 5);
    /* a scalar and a 1-D tensor */
    ag_tensor *s = ag_tensor_from(t, 0, (const int[]){1}, (const ag_real[]){4});
    CU_ASSERT_EQUAL(ag_argmax(s, AG_ALL, got, 1), 0);
    CU_ASSERT_EQUAL(got[0], 0);
    ag_tensor *v = ag_tensor_from(t, AG_SHAPE(4), (const ag_real[]){0, 7, 7, 1});
    CU_ASSERT_EQUAL(ag_argmax(v, 0, got, 1), 0);
    CU_ASSERT_EQUAL(got[0], 1);
    ag_tape_free(t);
}

static void test_copy_out(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(2, 3, 4));
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)(i * 0.5);
    ag_tensor *v = ag_narrow(t, ag_permute(t, x, (const int[]){2, 0, 1}), 0, 1, 3); /* (3, 2, 3) */
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_FALSE(ag_is_contiguous(v));
    ag_real r[18];
    float f[18];
    double d[20];
    CU_ASSERT_EQUAL(ag_copy_out(v, r, 18), 0);
    CU_ASSERT_EQUAL(ag_copy_out_f32(v, f, 18), 0);
    CU_ASSERT_EQUAL(ag_copy_out_f64(v, d, 20), 0); /* a larger buffer is fine */
    ag_tape_reset(t); /* the copies are the caller's: they outlive the tape's step */
    for (int i = 0; i < 18; i++) {
        int k = i / 6 + 1, a = i / 3 % 2, b = i % 3; /* v[k-1, a, b] = x[a, b, k] */
        double want = ((a * 3 + b) * 4 + k) * 0.5;
        CU_ASSERT_EQUAL(r[i], want);
        CU_ASSERT_EQUAL(f[i], (float)want);
        CU_ASSERT_EQUAL(d[i], want);
    }
    /* a leaf, row-major already */
    ag_tensor *l = ag_leaf_new(AG_SHAPE(2, 2), false);
    for (int i = 0; i < 4; i++) l->data[i] = (ag_real)(i + 1);
    CU_ASSERT_EQUAL(ag_copy_out_f64(l, d, 4), 0);
    CU_ASSERT_EQUAL(d[3], 4);
    ag_leaf_free(l);
    ag_tape_free(t);
}

static void test_refusals(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(2, 3));
    int32_t idx[8] = {0};
    ag_real buf[8];
    CU_ASSERT_EQUAL(ag_argmax(x, 2, idx, 8), -1);
    TG_CAPTURED_HAS("argmax: axis 2 out of range for shape [2, 3]");
    CU_ASSERT_STRING_EQUAL(ag_last_error(), tg_captured);
    CU_ASSERT_EQUAL(ag_argmax(x, 1, idx, 1), -1);
    TG_CAPTURED_HAS("argmax: 2 indices for axis 1 of [2, 3], out holds 1");
    CU_ASSERT_EQUAL(ag_argmax(ag_tensor_new(t, AG_SHAPE(2, 0)), 1, idx, 8), -1);
    TG_CAPTURED_HAS("argmax: axis 1 of [2, 0] has 0 elements");
    CU_ASSERT_EQUAL(ag_argmax(NULL, 0, idx, 8), -1);
    TG_CAPTURED_HAS("argmax: the tensor is NULL");
    CU_ASSERT_EQUAL(ag_copy_out(x, buf, 5), -1);
    TG_CAPTURED_HAS("copy_out: [2, 3] has 6 values, dst holds 5");
    CU_ASSERT_EQUAL(ag_copy_out_f32(x, NULL, 8), -1);
    TG_CAPTURED_HAS("copy_out: dst is NULL");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* The rule one value at a time: the first largest, a NaN counting as the largest. */
static ptrdiff_t naive_row_argmax(const float *x, ptrdiff_t n) {
    ptrdiff_t arg = 0;
    for (ptrdiff_t k = 1; k < n; k++)
        if (x[k] > x[arg] || (isnan(x[k]) && !isnan(x[arg]))) arg = k;
    return arg;
}

/* Rows of lengths around the kernel's lanes (16) and blocks (256) and a vocabulary's, filled
 * with small integers (many ties), with the largest repeated further on, -0 beside +0, -inf,
 * all equal, and NaNs at the start, in a later block or next to the largest. */
static void test_row_argmax(void) {
    static float x[17754];
    const ptrdiff_t lens[] = {1, 2, 15, 16, 17, 255, 256, 257, 511, 1000, 17754};
    unsigned seed = 5;
    int cases = 0;
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        ptrdiff_t n = lens[li];
        for (int kind = 0; kind < 8; kind++) {
            for (ptrdiff_t i = 0; i < n; i++) {
                seed = seed * 1664525u + 1013904223u;
                x[i] = (float)((int)(seed >> 24) % 50) - 25;
            }
            ptrdiff_t at = (ptrdiff_t)(seed % (unsigned)n), later = n - 1 - at / 3;
            switch (kind) {
            case 1: x[at] = 100, x[later] = 100; break; /* a tie of the largest */
            case 2:
                for (ptrdiff_t i = 0; i < n; i++) x[i] = -INFINITY;
                break;
            case 3:
                for (ptrdiff_t i = 0; i < n; i++) x[i] = i % 2 ? 0.0f : -0.0f;
                break;
            case 4: x[0] = NAN; break;
            case 5: x[later] = NAN, x[at] = 1000; break; /* NaN after the largest */
            case 6: x[at] = NAN, x[n - 1] = 1000; break; /* NaN before it */
            case 7: x[at] = -INFINITY, x[later] = INFINITY; break;
            default: break;
            }
            ptrdiff_t got = ag_row_argmax(x, n), want = naive_row_argmax(x, n);
            if (got != want) printf("\n    n %td kind %d: %td, expected %td", n, kind, got, want);
            CU_ASSERT_EQUAL(got, want);
            cases++;
        }
    }
    CU_ASSERT_EQUAL(cases, 88);
}

static CU_TestInfo tests[] = {
    {"argmax on views against a naive loop", test_argmax_views},
    {"argmax: ties, NaN, scalars", test_argmax_ties_nan},
    {"copy out of a strided view, float and double", test_copy_out},
    {"refusals name the function and the shapes", test_refusals},
    {"row argmax (vectorized) against the one-by-one rule", test_row_argmax},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("readout", tests); }
