/* test_tape_mark.c -- ag_tape_mark / ag_tape_rewind: what a rewind frees and keeps, chunks
 * opened after the mark, recorded nodes, stale tensors, invalid marks, steady-state mallocs. */
#include "autograd/ag.h"
#include "tests/tg_test.h"

#include <stdio.h>
#include <string.h>


static ag_tensor *filled(ag_tape *t, int n, ag_real v) {
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(n));
    if (x)
        for (int i = 0; i < n; i++) x->data[i] = v;
    return x;
}

/* Everything after the mark goes, everything before stays usable, also across chunks. */
static void test_rewind_frees_after_mark(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *a = filled(t, 100, 2);
    size_t before = ag_tape_stats_get(t).bytes_used;
    ag_tape_pos mark = ag_tape_mark(t);
    /* 3 MB after the mark: the 1 MB first chunk overflows into new ones */
    for (int i = 0; i < 6; i++) CU_ASSERT_PTR_NOT_NULL(filled(t, 1 << 17, (ag_real)i));
    CU_ASSERT_TRUE(ag_tape_stats_get(t).chunks > 1);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, mark), 0);
    ag_tape_stats s = ag_tape_stats_get(t);
    CU_ASSERT_EQUAL(s.bytes_used, before);
    CU_ASSERT_TRUE(s.high_water >= before + ((size_t)6 << 19)); /* the peak is remembered */
    /* a survives, and the freed bytes are handed out again */
    ag_tensor *b = ag_scale(t, a, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(b->data[99], 6);
    CU_ASSERT_EQUAL(a->data[0], 2);
    CU_ASSERT_FALSE(ag_tape_failed(t));
    ag_tape_free(t);
}

/* A tensor made after the mark is refused after the rewind, one made before is not. */
static void test_stale_tensor_refused(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *keep = filled(t, 8, 1);
    ag_tape_pos mark = ag_tape_mark(t);
    ag_tensor *gone = filled(t, 8, 1);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, mark), 0);
    tg_n_captured = 0;
    CU_ASSERT_PTR_NULL(ag_add(t, keep, gone));
    CU_ASSERT_EQUAL(tg_n_captured, 1);
    TG_CAPTURED_HAS("after the mark it was rewound to");
    ag_tape_reset(t);
    /* after a second rewind, a tensor made between the two rewinds below the new mark stays */
    ag_tape_pos m0 = ag_tape_mark(t);
    filled(t, 8, 1);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, m0), 0);
    ag_tensor *x = filled(t, 8, 1);
    ag_tape_pos m1 = ag_tape_mark(t);
    ag_tensor *y = filled(t, 8, 1);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, m1), 0);
    tg_n_captured = 0;
    CU_ASSERT_PTR_NULL(ag_add(t, x, y));
    CU_ASSERT_EQUAL(tg_n_captured, 1);
    ag_tape_reset(t);
    /* the same, y's bytes handed out again but not as a tensor header: still refused */
    m0 = ag_tape_mark(t);
    filled(t, 8, 1);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, m0), 0);
    x = filled(t, 8, 1);
    m1 = ag_tape_mark(t);
    y = filled(t, 8, 1);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, m1), 0);
    CU_ASSERT_PTR_NOT_NULL(ag_tape_alloc(t, 4096));
    tg_n_captured = 0;
    CU_ASSERT_PTR_NULL(ag_add(t, x, y));
    CU_ASSERT_EQUAL(tg_n_captured, 1);
    CU_ASSERT_PTR_NOT_NULL(ag_add(t, x, x)); /* a failed op does not stop the next */
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* A leaf whose header lives in tape scratch (e.g. a decoding state's view of its buffers) is a
 * valid input after rewinds below it, like every tensor made before the mark. */
static void test_leaf_in_arena(void) {
    ag_tape *t = ag_tape_new();
    ag_real *buf = ag_tape_alloc(t, sizeof *buf * 4);
    ag_tensor *leaf = ag_tape_alloc(t, sizeof *leaf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(leaf);
    for (int i = 0; i < 4; i++) buf[i] = (ag_real)i;
    CU_ASSERT_EQUAL_FATAL(ag_leaf_init(leaf, buf, NULL, AG_SHAPE(4)), 0);
    ag_tape_pos mark = ag_tape_mark(t);
    for (int step = 0; step < 3; step++) {
        ag_tensor *y = ag_scale(t, leaf, 2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_EQUAL(y->data[3], 6);
        CU_ASSERT_EQUAL(ag_tape_rewind(t, mark), 0);
    }
    CU_ASSERT_FALSE(ag_tape_failed(t));
    ag_tape_free(t);
}

/* Nodes recorded after the mark are dropped: a backward runs the graph made before it. */
static void test_rewind_drops_nodes(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *w = ag_leaf_new(AG_SHAPE(3), true);
    for (int i = 0; i < 3; i++) w->data[i] = (ag_real)(i + 1);
    ag_tensor *loss = ag_sum(t, ag_mul(t, w, w), AG_ALL, false); /* d/dw = 2 w */
    size_t nodes = ag_tape_stats_get(t).nodes;
    CU_ASSERT_TRUE(nodes > 0);
    ag_tape_pos mark = ag_tape_mark(t);
    for (int i = 0; i < 5; i++) ag_scale(t, ag_exp(t, w), 2); /* more nodes, also on w */
    CU_ASSERT_TRUE(ag_tape_stats_get(t).nodes > nodes);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, mark), 0);
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).nodes, nodes);
    CU_ASSERT_EQUAL_FATAL(ag_backward(t, loss), 0);
    for (int i = 0; i < 3; i++) CU_ASSERT_DOUBLE_EQUAL(w->grad[i], 2.0 * (i + 1), 1e-6);
    ag_tape_free(t);
    ag_leaf_free(w);
}

/* Marks nest; a mark from before a reset, or above where the tape was rewound to, is refused. */
static void test_nested_and_invalid_marks(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    filled(t, 10, 0);
    ag_tape_pos a = ag_tape_mark(t);
    filled(t, 1000, 0);
    ag_tape_pos b = ag_tape_mark(t);
    size_t at_b = ag_tape_stats_get(t).bytes_used;
    filled(t, 1000, 0);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, b), 0);
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).bytes_used, at_b);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, b), 0); /* again: nothing after it, nothing changes */
    CU_ASSERT_EQUAL(ag_tape_rewind(t, a), 0);
    size_t at_a = ag_tape_stats_get(t).bytes_used;
    tg_n_captured = 0;
    CU_ASSERT_EQUAL(ag_tape_rewind(t, b), -1); /* above the current position */
    CU_ASSERT_EQUAL(tg_n_captured, 1);
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).bytes_used, at_a);
    ag_tape_reset(t);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, ag_tape_mark(t)), 0); /* at position 0 */
    filled(t, 10, 0);
    filled(t, 10, 0);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, a), -1); /* from before the reset */
    TG_CAPTURED_HAS("ag_tape_rewind");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* A decoding loop: after the first steps, step + rewind opens no chunk (the spare is reused),
 * and the next reset coalesces everything into one chunk again. */
static void test_steady_state_no_malloc(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *state = filled(t, 1 << 16, 1);
    ag_tape_pos mark = ag_tape_mark(t);
    size_t mallocs = 0;
    for (int step = 0; step < 20; step++) {
        for (int i = 0; i < 3; i++) CU_ASSERT_PTR_NOT_NULL(ag_add(t, state, state)); /* 768 KB */
        if (step == 2) mallocs = ag_tape_stats_get(t).mallocs;
        CU_ASSERT_EQUAL(ag_tape_rewind(t, mark), 0);
    }
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).mallocs, mallocs);
    CU_ASSERT_EQUAL(state->data[5], 1);
    ag_tape_reset(t);
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).chunks, 1);
    size_t cap = ag_tape_stats_get(t).capacity;
    state = filled(t, 1 << 16, 1);
    for (int i = 0; i < 3; i++) CU_ASSERT_PTR_NOT_NULL(ag_add(t, state, state));
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).chunks, 1); /* the whole step fits */
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).capacity, cap);
    ag_tape_free(t);
}

static CU_TestInfo tests[] = {
    {"rewind frees what follows the mark, across chunks", test_rewind_frees_after_mark},
    {"a tensor made after the mark is refused", test_stale_tensor_refused},
    {"a leaf with its header in tape scratch stays valid", test_leaf_in_arena},
    {"rewind drops the nodes recorded after the mark", test_rewind_drops_nodes},
    {"nested marks; invalid marks refused", test_nested_and_invalid_marks},
    {"step + rewind: no malloc in steady state", test_steady_state_no_malloc},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("tape mark", tests); }
