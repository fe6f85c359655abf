/* test_grad_buffers.c -- intermediates' gradient buffers: none before the backward needs one,
 * given back and reused once the op that made the tensor has run its backward, views resolved to
 * their base's buffer, ag_retain_grad, gradients bit-identical to the engine that gave every
 * intermediate its own buffer when it was made, and an op of the public API that sees valid
 * pointers. */
#include "autograd/ag_op.h"
#include "tests/tg_test.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>


/* ---- an op of the public API that records what its backward saw ----
 * y = 2 x; the backward notes y->grad and x->grad, and whether x->grad was all zeros before it
 * added into it (it is the only consumer of x in the graphs below). */
enum { MAX_PROBES = 8 };
static const ag_real *seen_out[MAX_PROBES], *seen_in[MAX_PROBES];
static bool seen_zero_in[MAX_PROBES];
static int n_seen;

static void probe_backward(ag_node *n) {
    ag_tensor *x = n->in[0], *y = n->out;
    if (n_seen < MAX_PROBES) {
        bool zero = true;
        for (ptrdiff_t i = 0; i < x->numel; i++) zero &= x->grad[i] == 0;
        seen_out[n_seen] = y->grad;
        seen_in[n_seen] = x->grad;
        seen_zero_in[n_seen++] = zero;
    }
    for (ptrdiff_t i = 0; i < y->numel; i++) x->grad[i] += 2 * y->grad[i];
}
static const ag_op PROBE = {"probe", probe_backward};

static ag_tensor *probe(ag_tape *t, ag_tensor *x) {
    if (!ag_op_check(t, "probe", 1, &x)) return NULL;
    x = ag_op_contig(t, x);
    ag_tensor *y = x ? ag_op_out(t, x->ndim, x->shape, 1, &x) : NULL;
    if (!y) return NULL;
    for (ptrdiff_t i = 0; i < y->numel; i++) y->data[i] = 2 * x->data[i];
    ag_op_record(t, &PROBE, y, 1, &x, 0);
    return y;
}

enum { N = 1000 }; /* 4000 bytes of float: a 4032-byte buffer */

/* A chain x -> p1 -> p2 -> p3 of one size: the buffer of p3's gradient goes back once p3's node
 * has run and serves p1, so two buffers do for three gradients. */
static void test_chain_reuses_buffers(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_leaf_new(AG_SHAPE(N), true);
    for (int i = 0; i < N; i++) x->data[i] = (ag_real)i;
    ag_tensor *p1 = probe(t, x), *p2 = probe(t, p1), *p3 = probe(t, p2);
    ag_tensor *loss = ag_sum(t, p3, AG_ALL, false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
    /* nothing allocated before the backward */
    CU_ASSERT_TRUE(p1->requires_grad && p2->requires_grad && p3->requires_grad);
    CU_ASSERT_PTR_NULL(p1->grad);
    CU_ASSERT_PTR_NULL(p3->grad);
    CU_ASSERT_PTR_NULL(loss->grad);
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).grad_bytes, 0);
    size_t before = ag_tape_stats_get(t).bytes_used;
    n_seen = 0;
    CU_ASSERT_EQUAL_FATAL(ag_backward(t, loss), 0);
    CU_ASSERT_EQUAL_FATAL(n_seen, 3);
    /* probes ran p3, p2, p1: p3's buffer came back and became p1's */
    CU_ASSERT_PTR_EQUAL(seen_out[0], seen_out[2]);
    CU_ASSERT_PTR_EQUAL(seen_in[1], seen_out[2]);
    CU_ASSERT_PTR_NOT_EQUAL(seen_out[0], seen_out[1]);
    CU_ASSERT_PTR_EQUAL(seen_in[2], x->grad); /* the leaf's own */
    /* every buffer handed to a node was zeroed, the reused one too */
    for (int i = 0; i < 3; i++) CU_ASSERT_TRUE(seen_zero_in[i]);
    /* the scalar's 64 bytes and two 4032-byte buffers */
    ag_tape_stats s = ag_tape_stats_get(t);
    CU_ASSERT_EQUAL(s.grad_bytes, 64 + 2 * 4032);
    CU_ASSERT_TRUE(s.bytes_used - before >= s.grad_bytes);
    for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(x->grad[i], 8);
    /* after the pass the intermediates hold no gradient */
    CU_ASSERT_PTR_NULL(p1->grad);
    CU_ASSERT_PTR_NULL(p2->grad);
    CU_ASSERT_PTR_NULL(p3->grad);
    CU_ASSERT_PTR_NULL(loss->grad);
    /* the next step starts afresh */
    ag_tape_reset(t);
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).grad_bytes, 0);
    ag_tape_free(t);
    ag_leaf_free(x);
}

/* ---- views ---- */

/* A graph of views (a transpose, a narrow of it), a tensor used twice, broadcasting and
 * same-size intermediates whose gradient buffers the backward reuses. */
static ag_tensor *views_graph(ag_tape *t, ag_tensor *x, ag_tensor *w, ag_tensor **view) {
    ag_tensor *a = ag_tanh(t, x);                                        /* (3, 4) */
    ag_tensor *b = ag_mul(t, a, w);                                      /* (3, 4), w (4) */
    ag_tensor *bt = ag_transpose(t, b, 0, 1);                            /* (4, 3) view of b */
    ag_tensor *c = ag_exp(t, ag_narrow(t, bt, 1, 0, 2));                 /* a view of a view */
    ag_tensor *d = ag_add(t, c, c);                                      /* c used twice */
    ag_tensor *e = ag_sigmoid(t, ag_mul(t, a, a));                       /* a used again */
    ag_tensor *r = ag_reshape(t, ag_narrow(t, e, 0, 1, 2), AG_SHAPE(8)); /* a view of e */
    if (view) *view = bt;
    return ag_add(t, ag_sum(t, d, AG_ALL, false), ag_sum(t, ag_mul(t, r, r), AG_ALL, false));
}

static void views_graph_leaves(ag_tensor *x, ag_tensor *w) {
    for (int i = 0; i < 12; i++) x->data[i] = (ag_real)((i - 5.5) / 4);
    for (int i = 0; i < 4; i++) w->data[i] = (ag_real)(0.3 * (i + 1));
}

/* The loss and the gradients of views_graph as the engine gave them before its gradient buffers
 * became lazy (every intermediate its own, zeroed when made; commit b2cfeb6), as float bits. */
static const uint32_t want_loss = 0x41841c0cu;
static const uint32_t want_gx[12] = {0x3dd531cbu, 0x3e8271c1u, 0x3ef6c438u, 0x3f5aab75u,
                                     0x3e9bb8dfu, 0x3f8474e7u, 0x4002cc2au, 0x405865d3u,
                                     0x3e5d574au, 0x3e54a74cu, 0x3e295c6bu, 0x3df0b23fu};
static const uint32_t want_gw[4] = {0xbfff5f5bu, 0xbf9d0848u, 0xbef020bfu, 0x3f081b9fu};

static bool same_bits(const ag_real *got, const uint32_t *want, int n) {
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, got + i, sizeof u);
        if (u != want[i]) return false;
    }
    return true;
}

/* Runs views_graph (retaining every intermediate when retain_all), returns the leaves' gradients
 * in g (16 values). */
static void run_views_graph(bool retain_all, ag_real *g, ag_real *loss_value) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_leaf_new(AG_SHAPE(3, 4), true), *w = ag_leaf_new(AG_SHAPE(4), true);
    views_graph_leaves(x, w);
    ag_tensor *bt;
    ag_tensor *loss = views_graph(t, x, w, &bt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
    /* a view of an intermediate: no pointer yet, only its base and offset */
    CU_ASSERT_TRUE(bt->requires_grad);
    CU_ASSERT_PTR_NULL(bt->grad);
    CU_ASSERT_PTR_NOT_NULL(bt->grad_base);
    CU_ASSERT_PTR_NOT_EQUAL(bt->grad_base, bt);
    CU_ASSERT_EQUAL(bt->grad_base->grad_base, bt->grad_base);
    if (retain_all) CU_ASSERT_EQUAL(ag_retain_grad(bt), 0);
    CU_ASSERT_EQUAL_FATAL(ag_backward(t, loss), 0);
    if (retain_all) { /* the view points into its base's kept buffer */
        CU_ASSERT_PTR_NOT_NULL(bt->grad);
        CU_ASSERT_PTR_EQUAL(bt->grad, bt->grad_base->grad);
    } else {
        CU_ASSERT_PTR_NULL(bt->grad);
        CU_ASSERT_PTR_NULL(bt->grad_base->grad);
    }
    memcpy(g, x->grad, 12 * sizeof *g);
    memcpy(g + 12, w->grad, 4 * sizeof *g);
    *loss_value = loss->data[0];
    ag_tape_free(t);
    ag_leaf_free(x);
    ag_leaf_free(w);
}

static void test_views_bit_identical(void) {
    ag_real g[16], gr[16], l, lr;
    run_views_graph(false, g, &l);
    run_views_graph(true, gr, &lr);
    CU_ASSERT_EQUAL(memcmp(g, gr, sizeof g), 0); /* keeping a buffer changes no bit */
    CU_ASSERT_EQUAL(l, lr);
#ifndef TG_DOUBLE
    CU_ASSERT_TRUE(same_bits(&l, &want_loss, 1));
    CU_ASSERT_TRUE(same_bits(g, want_gx, 12));
    CU_ASSERT_TRUE(same_bits(g + 12, want_gw, 4));
#endif
}

/* The root a view of an intermediate (as the LSTM cell's h and c are views of its one result):
 * seeded through its base's buffer. */
static void test_view_root(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_leaf_new(AG_SHAPE(2, 3), true);
    for (int i = 0; i < 6; i++) x->data[i] = (ag_real)i / 4;
    ag_tensor *y = ag_scale(t, x, 3);
    ag_tensor *root = ag_narrow(t, ag_narrow(t, y, 0, 1, 1), 1, 2, 1); /* y[1][2], (1, 1) */
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    CU_ASSERT_EQUAL(ag_backward(t, root), 0);
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(x->grad[i], i == 5 ? 3 : 0);
    ag_tape_free(t);
    ag_leaf_free(x);
}

/* ---- ag_retain_grad ---- */

static void test_retain_grad(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_leaf_new(AG_SHAPE(4), true);
    for (int i = 0; i < 4; i++) x->data[i] = (ag_real)(i + 1);
    ag_tensor *y = ag_scale(t, x, 2);                            /* y = 2x */
    ag_tensor *tail = ag_narrow(t, y, 0, 2, 2);                  /* a view: y[2:4] */
    ag_tensor *unused = ag_exp(t, x);                            /* off the loss's path */
    ag_tensor *data = ag_tensor_new(t, AG_SHAPE(4));             /* tracks nothing */
    ag_tensor *loss = ag_sum(t, ag_mul(t, y, y), AG_ALL, false); /* d/dy = 2y */
    CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
    CU_ASSERT_EQUAL(ag_retain_grad(y), 0);
    CU_ASSERT_EQUAL(ag_retain_grad(tail), 0);
    CU_ASSERT_EQUAL(ag_retain_grad(unused), 0);
    CU_ASSERT_EQUAL(ag_retain_grad(loss), 0);
    CU_ASSERT_EQUAL(ag_retain_grad(x), 0);    /* a leaf: nothing to do */
    CU_ASSERT_EQUAL(ag_retain_grad(data), 0); /* no gradient: nothing to do */
    CU_ASSERT_EQUAL(ag_retain_grad(NULL), -1);
    CU_ASSERT_PTR_NULL(y->grad); /* still lazy */
    tg_n_captured = 0;
    CU_ASSERT_EQUAL_FATAL(ag_backward(t, loss), 0);
    CU_ASSERT_EQUAL(tg_n_captured, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y->grad);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(y->grad[i], 4 * (i + 1));
    CU_ASSERT_PTR_EQUAL(tail->grad, y->grad + 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(unused->grad);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(unused->grad[i], 0); /* nothing flowed in */
    CU_ASSERT_EQUAL(loss->grad[0], 1);
    CU_ASSERT_PTR_NULL(data->grad);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(x->grad[i], 8 * (i + 1));
    /* too late once the pass ran */
    ag_tensor *z = ag_scale(t, x, 1);
    CU_ASSERT_EQUAL(ag_retain_grad(z), -1);
    CU_ASSERT_EQUAL(tg_n_captured, 1);
    TG_CAPTURED_HAS("retain_grad");
    /* a tensor of an earlier step is refused */
    ag_tape_reset(t);
    tg_n_captured = 0;
    CU_ASSERT_EQUAL(ag_retain_grad(y), -1);
    CU_ASSERT_EQUAL(tg_n_captured, 1);
    ag_tape_free(t);
    ag_leaf_free(x);
    ag_set_error_handler(NULL, NULL);
}

/* A rewind after the backward frees the buffers the pass made: a retained grad there is unset,
 * not left pointing at freed memory, whether it was retained before the mark or after. */
static void test_rewind_after_backward(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_leaf_new(AG_SHAPE(4), true);
    ag_tensor *y = ag_scale(t, x, 2), *z = ag_scale(t, x, 3);
    ag_tensor *loss = ag_sum(t, ag_add(t, y, z), AG_ALL, false);
    CU_ASSERT_EQUAL(ag_retain_grad(y), 0);
    ag_tape_pos mark = ag_tape_mark(t);
    CU_ASSERT_EQUAL(ag_retain_grad(z), 0);
    CU_ASSERT_EQUAL_FATAL(ag_backward(t, loss), 0);
    CU_ASSERT_PTR_NOT_NULL(y->grad);
    CU_ASSERT_PTR_NOT_NULL(z->grad);
    CU_ASSERT_EQUAL(ag_tape_rewind(t, mark), 0);
    CU_ASSERT_PTR_NULL(y->grad);
    CU_ASSERT_PTR_NULL(z->grad);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(x->grad[i], 5);
    ag_tape_free(t);
    ag_leaf_free(x);
}

static CU_TestInfo tests[] = {
    {"a chain of one size: buffers made when needed, given back, reused zeroed",
     test_chain_reuses_buffers},
    {"views of intermediates: gradients bit-identical to eager buffers", test_views_bit_identical},
    {"a root that is a view of an intermediate", test_view_root},
    {"ag_retain_grad keeps intermediates' and views' gradients", test_retain_grad},
    {"a rewind after the backward unsets the gradients it frees", test_rewind_after_backward},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("gradient buffers", tests); }
