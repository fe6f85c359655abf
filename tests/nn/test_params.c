/* test_params.c -- the parameter store and the initialisers (float32 product, links nn).
 *
 * Registration (names, order, stable pointers, shapes before finalize), finalize (flat views,
 * alignment, zero padding and gradients), lookup, zero-grad, the sticky error rule, and the
 * initialisers: same seed same bits, and the statistics / bounds of each one, including the
 * d2l defaults the layers register; non-trainable buffers. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/tg_test.h"


static void test_names_and_order(void) {
    nn_params *ps = nn_params_new();
    char p[NN_NAME_MAX];
    nn_linear a, b;
    CU_ASSERT_EQUAL(nn_linear_init(&a, ps, "fc1", 3, 4, true), 0);
    CU_ASSERT_EQUAL(
        nn_linear_init(&b, ps, nn_join(p, sizeof p, "decoder.blks", "block%d.ffn", 0), 4, 2, false),
        0);
    nn_layer_norm ln;
    CU_ASSERT_EQUAL(nn_layer_norm_init(&ln, ps, "", 1, (const int[]){4}, NN_LAYER_NORM_EPS), 0);
    CU_ASSERT_EQUAL(nn_params_count(ps), 5);
    const char *want[] = {"fc1.weight", "fc1.bias", "decoder.blks.block0.ffn.weight", "weight",
                          "bias"};
    for (size_t i = 0; i < 5; i++) CU_ASSERT_STRING_EQUAL(nn_params_at(ps, i)->name, want[i]);
    CU_ASSERT_PTR_NULL(nn_params_at(ps, 5));
    CU_ASSERT_PTR_NULL(b.bias);
    /* Before finalize: shape and name, no data. */
    CU_ASSERT_EQUAL(a.weight->ndim, 2);
    CU_ASSERT_EQUAL(a.weight->shape[0], 4);
    CU_ASSERT_EQUAL(a.weight->shape[1], 3);
    CU_ASSERT_PTR_NULL(a.weight->data);
    CU_ASSERT_PTR_NULL(nn_params_values(ps));
    CU_ASSERT_EQUAL(nn_params_numel(ps), 12 + 4 + 8 + 4 + 4);
    CU_ASSERT_PTR_EQUAL(nn_params_find(ps, "fc1.bias"), a.bias);
    CU_ASSERT_PTR_NULL(nn_params_find(ps, "fc1.nothing"));
    nn_params_free(ps);
}

static void test_finalize_views(void) {
    nn_params *ps = nn_params_new();
    ag_tensor *first = nn_params_add(ps, "m", "w0", AG_SHAPE(3, 5), nn_init_ones());
    ag_tensor *ts[100];
    char nm[16];
    for (int i = 0; i < 100; i++) { /* many registrations: the first pointer must not move */
        snprintf(nm, sizeof nm, "p%d", i);
        ts[i] = nn_params_add(ps, "m", nm, AG_SHAPE(i % 7 + 1), nn_init_constant(i));
        CU_ASSERT_PTR_NOT_NULL_FATAL(ts[i]);
    }
    CU_ASSERT_PTR_EQUAL(nn_params_find(ps, "m.w0"), first);
    CU_ASSERT_FALSE(nn_params_finalized(ps));
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 1), 0);
    CU_ASSERT_TRUE(nn_params_finalized(ps));
    ag_real *v = nn_params_values(ps), *g = nn_params_grads(ps);
    size_t flat = nn_params_flat_size(ps);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL((uintptr_t)v % 64, 0);
    CU_ASSERT_EQUAL(first->data, v);
    CU_ASSERT_EQUAL(first->grad, g);
    CU_ASSERT_TRUE(first->requires_grad);
    CU_ASSERT_STRING_EQUAL(first->name, "m.w0");
    CU_ASSERT_TRUE(ag_is_contiguous(first));
    size_t used = 0;
    for (size_t i = 0; i < nn_params_count(ps); i++) {
        ag_tensor *t = nn_params_at(ps, i);
        size_t off = nn_params_offset(ps, i);
        CU_ASSERT_EQUAL(off % 16, 0);
        CU_ASSERT_PTR_EQUAL(t->data, v + off);
        CU_ASSERT_PTR_EQUAL(t->grad, g + off);
        used += (size_t)t->numel;
    }
    CU_ASSERT_EQUAL(used, nn_params_numel(ps));
    CU_ASSERT_TRUE(flat >= used);
    for (int i = 0; i < 100; i++)
        for (ptrdiff_t k = 0; k < ts[i]->numel; k++) CU_ASSERT_EQUAL(ts[i]->data[k], (ag_real)i);
    /* Padding is zero: the sum of the buffer is the sum of the parameters. */
    double sum = 0, want = 15;
    for (size_t i = 0; i < flat; i++) sum += v[i];
    for (int i = 0; i < 100; i++) want += (double)i * (i % 7 + 1);
    CU_ASSERT_DOUBLE_EQUAL(sum, want, 1e-6);
    for (size_t i = 0; i < flat; i++) CU_ASSERT_EQUAL(g[i], 0);
    /* zero_grad clears whatever backward accumulated. */
    for (size_t i = 0; i < flat; i++) g[i] = 1;
    nn_params_zero_grad(ps);
    for (size_t i = 0; i < flat; i++) CU_ASSERT_EQUAL(g[i], 0);
    /* A parameter is a usable leaf: backward accumulates into the store's gradient buffer. */
    ag_tape *t = ag_tape_new();
    ag_tensor *loss = ag_sum(t, ag_mul(t, first, first), AG_ALL, false);
    CU_ASSERT_EQUAL(ag_backward(t, loss), 0);
    CU_ASSERT_EQUAL(g[0], 2);
    CU_ASSERT_EQUAL(g[14], 2);
    ag_tape_free(t);
    nn_params_free(ps);
}

/* finalize_zero: the same layout as finalize (offsets, views, requires_grad on parameters
 * only), every value and buffer zero instead of initialised; a second finalize of either kind
 * is refused; reinit afterwards runs the initialisers finalize would have. */
static void test_finalize_zero(void) {
    nn_params *a = nn_params_new(), *b = nn_params_new();
    nn_params *both[2] = {a, b};
    ag_tensor *w[2], *buf[2];
    for (int i = 0; i < 2; i++) {
        w[i] = nn_params_add(both[i], "m", "w", AG_SHAPE(3, 5), nn_init_normal(0, 1));
        nn_params_add(both[i], "m", "b", AG_SHAPE(7), nn_init_ones());
        buf[i] = nn_params_add_buffer(both[i], "m", "stat", AG_SHAPE(4), nn_init_ones());
        CU_ASSERT_PTR_NOT_NULL_FATAL(buf[i]);
    }
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(a, 3), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize_zero(b), 0);
    CU_ASSERT_TRUE(nn_params_finalized(b));
    CU_ASSERT_EQUAL(nn_params_flat_size(a), nn_params_flat_size(b));
    for (size_t i = 0; i < nn_params_count(a); i++)
        CU_ASSERT_EQUAL(nn_params_offset(a, i), nn_params_offset(b, i));
    for (size_t i = 0; i < nn_params_flat_size(b); i++) CU_ASSERT_EQUAL(nn_params_values(b)[i], 0);
    for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(buf[1]->data[k], 0);
    CU_ASSERT_TRUE(w[1]->requires_grad);
    CU_ASSERT_FALSE(buf[1]->requires_grad);
    TG_EXPECT_ERROR(nn_params_finalize_zero(b), "nn_params_finalize: store already finalized");
    TG_EXPECT_ERROR(nn_params_finalize(b, 3), "nn_params_finalize: store already finalized");
    CU_ASSERT_EQUAL_FATAL(nn_params_reinit(b, 3), 0);
    CU_ASSERT_EQUAL(
        memcmp(nn_params_values(a), nn_params_values(b), sizeof(ag_real) * nn_params_flat_size(a)),
        0);
    CU_ASSERT_EQUAL(memcmp(buf[0]->data, buf[1]->data, sizeof(ag_real) * 4), 0);
    nn_params_free(a);
    nn_params_free(b);
}

/* A replica store reads the master's values and keeps its own gradients; stores that differ
 * are refused, naming the first difference; reinit of a replica is refused. */
static nn_params *two_linears(int out2) {
    nn_params *ps = nn_params_new();
    nn_linear a, b;
    nn_linear_init(&a, ps, "a", 3, 4, true);
    nn_linear_init(&b, ps, "b", 4, out2, true);
    return ps;
}

static void test_share_values(void) {
    nn_params *master = two_linears(2), *rep = two_linears(2), *other = two_linears(3);
    TG_EXPECT_ERROR(nn_params_share_values(rep, master), "finalized"); /* not finalized */
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(master, 1), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(rep, 2), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(other, 1), 0);
    TG_EXPECT_ERROR(nn_params_share_values(other, master), "b.weight");
    CU_ASSERT_EQUAL_FATAL(nn_params_share_values(rep, master), 0);
    CU_ASSERT_PTR_EQUAL(nn_params_values(rep), nn_params_values(master));
    CU_ASSERT_PTR_NOT_EQUAL(nn_params_grads(rep), nn_params_grads(master));
    for (size_t i = 0; i < nn_params_count(master); i++) {
        CU_ASSERT_PTR_EQUAL(nn_params_at(rep, i)->data, nn_params_at(master, i)->data);
        CU_ASSERT_PTR_EQUAL(nn_params_at(rep, i)->grad,
                            nn_params_grads(rep) + nn_params_offset(rep, i));
    }
    /* backward through the replica fills the replica's gradients only */
    ag_tape *t = ag_tape_new();
    ag_tensor *w = nn_params_find(rep, "a.weight");
    CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, w, w), AG_ALL, false)), 0);
    CU_ASSERT_EQUAL(w->grad[5], 2 * nn_params_find(master, "a.weight")->data[5]);
    CU_ASSERT_EQUAL(nn_params_find(master, "a.weight")->grad[5], 0);
    ag_tape_free(t);
    CU_ASSERT_EQUAL(nn_params_share_values(rep, master), -1); /* already shares */
    TG_EXPECT_ERROR(nn_params_reinit(rep, 3), "another store");
    ag_real before = nn_params_find(master, "b.bias")->data[1];
    nn_params_free(rep); /* leaves the master's values alone (ASan would see a double free) */
    CU_ASSERT_EQUAL(nn_params_find(master, "b.bias")->data[1], before);
    nn_params_free(master);
    nn_params_free(other);
}

static void test_errors_are_sticky(void) {
    nn_params *ps = nn_params_new();
    CU_ASSERT_PTR_NOT_NULL(nn_params_add(ps, "a", "w", AG_SHAPE(2, 2), nn_init_zeros()));
    TG_EXPECT_NULL(nn_params_add(ps, "a", "w", AG_SHAPE(2, 2), nn_init_zeros()),
                   "duplicate parameter name 'a.w'");
    TG_EXPECT_NULL(nn_params_add(ps, "a", "bad", AG_SHAPE(2, 0), nn_init_zeros()),
                   "bad shape [2, 0]");
    TG_EXPECT_NULL(nn_params_add(ps, "a", "u", AG_SHAPE(2), nn_init_uniform(1, 0)),
                   "parameter 'a.u': invalid initialiser");
    TG_EXPECT_NULL(nn_params_add(ps, "a", "x", AG_SHAPE(5), nn_init_xavier_uniform()),
                   "Xavier init needs");
    TG_EXPECT_NULL(nn_params_add(ps, NULL, "w", AG_SHAPE(2), nn_init_zeros()), "prefix is NULL");
    char longname[NN_NAME_MAX + 8];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    TG_EXPECT_NULL(nn_params_add(ps, "a", longname, AG_SHAPE(2), nn_init_zeros()), "longer than");
    nn_linear l;
    TG_EXPECT_ERROR(nn_linear_init(&l, ps, "fc", 0, 3, true), "nn_linear_init 'fc': in = 0");
    /* finalize reports the first error. */
    TG_EXPECT_ERROR(nn_params_finalize(ps, 1), "duplicate parameter name 'a.w'");
    nn_params_free(ps);

    /* nn_join that does not fit: NULL, and the registration receiving it fails. */
    ps = nn_params_new();
    char small[8];
    TG_EXPECT_NULL(nn_join(small, sizeof small, "encoder", "blks.block%d", 3), "does not fit");
    CU_ASSERT_EQUAL(
        nn_linear_init(&l, ps, nn_join(small, sizeof small, "encoder", "x"), 2, 2, true), -1);
    TG_EXPECT_ERROR(nn_params_finalize(ps, 1), "prefix is NULL");
    nn_params_free(ps);

    /* After finalize: no more registrations, no second finalize, no set_init. */
    ps = nn_params_new();
    ag_tensor *w = nn_params_add(ps, "", "w", AG_SHAPE(2), nn_init_zeros());
    CU_ASSERT_EQUAL(nn_params_set_init(ps, w, nn_init_constant(3)), 0);
    TG_EXPECT_ERROR(nn_params_set_init(ps, w, nn_init_normal(0, -1)), "invalid initialiser");
    nn_params_free(ps);
    ps = nn_params_new();
    w = nn_params_add(ps, "", "w", AG_SHAPE(2), nn_init_zeros());
    CU_ASSERT_EQUAL(nn_params_set_init(ps, w, nn_init_constant(3)), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 1), 0);
    CU_ASSERT_EQUAL(w->data[0], 3);
    TG_EXPECT_ERROR(nn_params_finalize(ps, 1), "already finalized");
    TG_EXPECT_NULL(nn_params_add(ps, "", "v", AG_SHAPE(2), nn_init_zeros()),
                   "registered after nn_params_finalize");
    CU_ASSERT_EQUAL(nn_params_set_init(ps, w, nn_init_zeros()), -1);
    nn_params_free(ps);
    /* An empty store finalizes. */
    ps = nn_params_new();
    CU_ASSERT_EQUAL(nn_params_finalize(ps, 1), 0);
    CU_ASSERT_EQUAL(nn_params_count(ps), 0);
    nn_params_zero_grad(ps);
    nn_params_free(ps);
}

/* A model with one of every layer; registered identically for the determinism checks. */
typedef struct zoo_like {
    nn_embedding emb;
    nn_linear fc;
    nn_layer_norm ln;
    nn_gru gru;
} zoo_like;

static nn_params *build(zoo_like *m, uint64_t seed) {
    nn_params *ps = nn_params_new();
    nn_embedding_init(&m->emb, ps, "emb", 50, 16);
    nn_linear_init(&m->fc, ps, "fc", 64, 48, true);
    nn_layer_norm_init(&m->ln, ps, "ln", 2, (const int[]){3, 16}, NN_LAYER_NORM_EPS);
    nn_gru_init(&m->gru, ps, "rnn", 24, 40, 2, 0.1);
    CU_ASSERT_EQUAL(nn_params_finalize(ps, seed), 0);
    return ps;
}

static void test_init_determinism(void) {
    zoo_like a, b, c;
    nn_params *pa = build(&a, 123), *pb = build(&b, 123), *pc = build(&c, 124);
    size_t n = nn_params_flat_size(pa);
    CU_ASSERT_EQUAL_FATAL(n, nn_params_flat_size(pb));
    CU_ASSERT_EQUAL(memcmp(nn_params_values(pa), nn_params_values(pb), n * sizeof(ag_real)), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(nn_params_values(pa), nn_params_values(pc), n * sizeof(ag_real)), 0);
    /* reinit with the finalize seed reproduces the same bits. */
    CU_ASSERT_EQUAL(nn_params_reinit(pc, 123), 0);
    CU_ASSERT_EQUAL(memcmp(nn_params_values(pa), nn_params_values(pc), n * sizeof(ag_real)), 0);
    nn_params_free(pa);
    nn_params_free(pb);
    nn_params_free(pc);
}

/* Mean and variance of n values. */
static void stats(const ag_real *x, size_t n, double *mean, double *var, double *lo, double *hi) {
    double s = 0, q = 0;
    *lo = INFINITY, *hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        if (x[i] < *lo) *lo = x[i];
        if (x[i] > *hi) *hi = x[i];
    }
    *mean = s / (double)n;
    for (size_t i = 0; i < n; i++) q += (x[i] - *mean) * (x[i] - *mean);
    *var = q / (double)n;
}

/* Checks U(-b, b) (b = bound): inside the bounds, reaching near both ends, var b^2/3. */
static void check_uniform(const ag_tensor *p, double lo_b, double hi_b) {
    double mean, var, lo, hi, w = hi_b - lo_b;
    stats(p->data, (size_t)p->numel, &mean, &var, &lo, &hi);
    CU_ASSERT_TRUE(lo >= lo_b - 1e-7 && hi <= hi_b + 1e-7);
    CU_ASSERT_TRUE(lo < lo_b + 0.02 * w && hi > hi_b - 0.02 * w); /* fills the interval */
    double sd = sqrt(w * w / 12 / (double)p->numel);              /* std of the mean */
    CU_ASSERT_DOUBLE_EQUAL(mean, (lo_b + hi_b) / 2, 5 * sd);
    CU_ASSERT_DOUBLE_EQUAL(var, w * w / 12, 0.1 * w * w / 12);
}

static void test_init_statistics(void) {
    nn_params *ps = nn_params_new();
    ag_tensor *z = nn_params_add(ps, "", "z", AG_SHAPE(7, 3), nn_init_zeros());
    ag_tensor *o = nn_params_add(ps, "", "o", AG_SHAPE(5), nn_init_ones());
    ag_tensor *k = nn_params_add(ps, "", "k", AG_SHAPE(5), nn_init_constant(-2.5));
    ag_tensor *u = nn_params_add(ps, "", "u", AG_SHAPE(100, 100), nn_init_uniform(-0.5, 1.5));
    ag_tensor *g = nn_params_add(ps, "", "g", AG_SHAPE(200, 100), nn_init_normal(3, 2));
    ag_tensor *x = nn_params_add(ps, "", "x", AG_SHAPE(300, 100), nn_init_xavier_uniform());
    ag_tensor *x3 = nn_params_add(ps, "", "x3", AG_SHAPE(20, 10, 30), nn_init_xavier_uniform());
    nn_linear fc;
    nn_embedding emb;
    nn_layer_norm ln;
    nn_gru gru;
    nn_linear_init(&fc, ps, "fc", 400, 300, true);
    nn_embedding_init(&emb, ps, "emb", 200, 100);
    nn_layer_norm_init(&ln, ps, "ln", 2, (const int[]){3, 4}, NN_LAYER_NORM_EPS);
    nn_gru_init(&gru, ps, "gru", 30, 50, 2, 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 7), 0);
    for (int i = 0; i < 21; i++) CU_ASSERT_EQUAL(z->data[i], 0);
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(o->data[i], 1);
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(k->data[i], -2.5f);
    check_uniform(u, -0.5, 1.5);
    double mean, var, lo, hi;
    stats(g->data, (size_t)g->numel, &mean, &var, &lo, &hi);
    CU_ASSERT_DOUBLE_EQUAL(mean, 3, 0.05); /* std of the mean: 2 / sqrt(20000) */
    CU_ASSERT_DOUBLE_EQUAL(sqrt(var), 2, 0.05);
    double b = sqrt(6.0 / (100 + 300)); /* Xavier: fan_in 100, fan_out 300 */
    check_uniform(x, -b, b);
    b = sqrt(6.0 / (10 * 30 + 20 * 30)); /* receptive field 30 */
    check_uniform(x3, -b, b);
    /* d2l defaults of the layers (docs/spec.md 5). */
    b = sqrt(6.0 / (400 + 300));
    check_uniform(fc.weight, -b, b);
    check_uniform(fc.bias, -1 / sqrt(400.0), 1 / sqrt(400.0));
    stats(emb.weight->data, (size_t)emb.weight->numel, &mean, &var, &lo, &hi);
    CU_ASSERT_DOUBLE_EQUAL(mean, 0, 0.03);
    CU_ASSERT_DOUBLE_EQUAL(var, 1, 0.05);
    for (int i = 0; i < 12; i++) {
        CU_ASSERT_EQUAL(ln.weight->data[i], 1);
        CU_ASSERT_EQUAL(ln.bias->data[i], 0);
    }
    CU_ASSERT_EQUAL(ln.weight->ndim, 2);
    b = sqrt(6.0 / (30 + 150));
    check_uniform(gru.layer[0].weight_ih, -b, b);
    b = sqrt(6.0 / (50 + 150));
    check_uniform(gru.layer[0].weight_hh, -b, b);
    check_uniform(gru.layer[1].weight_ih, -b, b);
    for (int l = 0; l < 2; l++) {
        stats(gru.layer[l].bias_ih->data, 150, &mean, &var, &lo, &hi);
        CU_ASSERT_TRUE(lo >= -1 / sqrt(50.0) && hi <= 1 / sqrt(50.0));
        stats(gru.layer[l].bias_hh->data, 150, &mean, &var, &lo, &hi);
        CU_ASSERT_TRUE(lo >= -1 / sqrt(50.0) && hi <= 1 / sqrt(50.0));
    }
    nn_params_free(ps);

    /* nn_init_fill on a caller's buffer. */
    ag_rng r;
    ag_rng_seed(&r, 3);
    ag_real buf[6];
    CU_ASSERT_EQUAL(nn_init_fill(nn_init_constant(4), buf, AG_SHAPE(2, 3), &r), 0);
    CU_ASSERT_EQUAL(buf[5], 4);
    CU_ASSERT_EQUAL(nn_init_fill(nn_init_uniform(2, 1), buf, AG_SHAPE(2, 3), &r), -1);
}

static void test_gru_names(void) {
    nn_params *ps = nn_params_new();
    nn_gru g;
    CU_ASSERT_EQUAL(nn_gru_init(&g, ps, "encoder.rnn", 3, 4, 2, 0.1), 0);
    const char *want[] = {"encoder.rnn.weight_ih_l0", "encoder.rnn.weight_hh_l0",
                          "encoder.rnn.bias_ih_l0",   "encoder.rnn.bias_hh_l0",
                          "encoder.rnn.weight_ih_l1", "encoder.rnn.weight_hh_l1",
                          "encoder.rnn.bias_ih_l1",   "encoder.rnn.bias_hh_l1"};
    CU_ASSERT_EQUAL_FATAL(nn_params_count(ps), 8);
    for (size_t i = 0; i < 8; i++) CU_ASSERT_STRING_EQUAL(nn_params_at(ps, i)->name, want[i]);
    CU_ASSERT_EQUAL(g.layer[0].weight_ih->shape[0], 12);
    CU_ASSERT_EQUAL(g.layer[0].weight_ih->shape[1], 3);
    CU_ASSERT_EQUAL(g.layer[1].weight_ih->shape[1], 4);
    CU_ASSERT_EQUAL(g.layer[1].weight_hh->shape[1], 4);
    CU_ASSERT_EQUAL(g.layer[1].bias_hh->shape[0], 12);
    TG_EXPECT_ERROR(nn_gru_init(&g, ps, "bad", 3, 4, NN_GRU_MAX_LAYERS + 1, 0), "num_layers");
    TG_EXPECT_ERROR(nn_gru_init(&g, ps, "bad2", 3, 4, 1, 1.0), "dropout = 1");
    nn_dropout d;
    TG_EXPECT_ERROR(nn_dropout_init(&d, -0.1), "expected 0 <= p < 1");
    nn_params_free(ps);
}

/* Buffers: registered and named beside the parameters, in the tensor list only, no gradient,
 * their own allocation, initialised in registration order from the same rng; errors as for
 * parameters; a replica gets a copy of master's buffers and keeps its own. */
static nn_params *with_buffers(void) {
    nn_params *ps = nn_params_new();
    nn_params_add(ps, "m", "w", AG_SHAPE(2, 3), nn_init_normal(0, 1));
    nn_params_add_buffer(ps, "m", "stat", AG_SHAPE(3), nn_init_uniform(-1, 1));
    nn_params_add_buffer(ps, "m", "count", 0, NULL, nn_init_constant(7));
    nn_params_add(ps, "m", "b", AG_SHAPE(3), nn_init_normal(0, 1));
    return ps;
}

static void test_buffers(void) {
    nn_params *ps = with_buffers(), *plain = nn_params_new(), *dup = nn_params_new();
    nn_params_add(plain, "m", "w", AG_SHAPE(2, 3), nn_init_normal(0, 1));
    nn_params_add(plain, "m", "b", AG_SHAPE(3), nn_init_normal(0, 1));
    CU_ASSERT_EQUAL(nn_params_count(ps), 2);
    CU_ASSERT_EQUAL(nn_params_tensor_count(ps), 4);
    CU_ASSERT_EQUAL(nn_params_numel(ps), 9);
    const char *all[] = {"m.w", "m.stat", "m.count", "m.b"};
    for (size_t i = 0; i < 4; i++) CU_ASSERT_STRING_EQUAL(nn_params_tensor_at(ps, i)->name, all[i]);
    CU_ASSERT_PTR_NULL(nn_params_tensor_at(ps, 4));
    CU_ASSERT_STRING_EQUAL(nn_params_at(ps, 1)->name, "m.b");
    ag_tensor *stat = nn_params_find(ps, "m.stat"), *count = nn_params_find(ps, "m.count");
    CU_ASSERT_PTR_EQUAL(stat, nn_params_tensor_at(ps, 1));
    CU_ASSERT_FALSE(stat->requires_grad);
    /* errors: a name shared with a parameter, after finalize */
    nn_params_add(dup, "m", "w", AG_SHAPE(1), nn_init_zeros());
    TG_EXPECT_NULL(nn_params_add_buffer(dup, "m", "w", AG_SHAPE(1), nn_init_zeros()),
                   "nn_params_add_buffer: duplicate buffer name 'm.w'");
    CU_ASSERT_EQUAL(nn_params_finalize(dup, 1), -1); /* sticky */
    nn_params_free(dup);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 11), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(plain, 11), 0);
    TG_EXPECT_NULL(nn_params_add_buffer(ps, "m", "late", AG_SHAPE(1), nn_init_zeros()),
                   "buffer 'm.late' registered after nn_params_finalize");
    /* the flat buffers hold the parameters only: the same layout as without buffers; the
     * initialisers run in registration order from one stream (m.w: the same values) */
    CU_ASSERT_EQUAL(nn_params_flat_size(ps), nn_params_flat_size(plain));
    CU_ASSERT_EQUAL(nn_params_offset(ps, 1), nn_params_offset(plain, 1));
    CU_ASSERT_EQUAL(
        memcmp(nn_params_at(ps, 0)->data, nn_params_at(plain, 0)->data, 6 * sizeof(ag_real)), 0);
    CU_ASSERT_PTR_NULL(stat->grad);
    CU_ASSERT_PTR_NOT_NULL_FATAL(stat->data);
    const ag_real *v = nn_params_values(ps);
    CU_ASSERT_TRUE(stat->data < v || stat->data >= v + nn_params_flat_size(ps));
    for (int i = 0; i < 3; i++) CU_ASSERT_TRUE(stat->data[i] >= -1 && stat->data[i] < 1);
    CU_ASSERT_EQUAL(count->ndim, 0);
    CU_ASSERT_EQUAL(count->numel, 1);
    CU_ASSERT_EQUAL(count->data[0], 7);
    /* zero-grad and reinit */
    stat->data[0] = 5, count->data[0] = 1;
    nn_params_zero_grad(ps);
    CU_ASSERT_EQUAL(stat->data[0], 5);
    CU_ASSERT_EQUAL(nn_params_reinit(ps, 11), 0);
    CU_ASSERT_NOT_EQUAL(stat->data[0], 5);
    CU_ASSERT_EQUAL(count->data[0], 7);
    /* a replica: parameters shared, buffers copied then its own */
    nn_params *rep = with_buffers();
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(rep, 12), 0);
    count->data[0] = 3;
    CU_ASSERT_EQUAL_FATAL(nn_params_share_values(rep, ps), 0);
    ag_tensor *rcount = nn_params_find(rep, "m.count");
    CU_ASSERT_EQUAL(rcount->data[0], 3);
    CU_ASSERT_PTR_NOT_EQUAL(rcount->data, count->data);
    rcount->data[0] = 4;
    CU_ASSERT_EQUAL(count->data[0], 3);
    CU_ASSERT_PTR_EQUAL(nn_params_at(rep, 1)->data, nn_params_at(ps, 1)->data);
    /* a replica whose buffers differ is refused */
    nn_params *no_buf = nn_params_new();
    nn_params_add(no_buf, "m", "w", AG_SHAPE(2, 3), nn_init_normal(0, 1));
    nn_params_add(no_buf, "m", "b", AG_SHAPE(3), nn_init_normal(0, 1));
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(no_buf, 1), 0);
    TG_EXPECT_ERROR(nn_params_share_values(no_buf, ps), "differ");
    nn_params_free(no_buf);
    nn_params_free(rep);
    nn_params_free(plain);
    nn_params_free(ps);
}

/* A forward before nn_params_finalize says what to call, not only that the input is no tensor. */
static void test_forward_before_finalize(void) {
    nn_params *ps = nn_params_new();
    nn_linear l;
    CU_ASSERT_EQUAL(nn_linear_init(&l, ps, "fc", 3, 2, true), 0);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_set_error_handler(tg_capture, NULL);
    CU_ASSERT_PTR_NULL(nn_linear_forward(&l, &c, ag_tensor_new(t, AG_SHAPE(4, 3))));
    TG_CAPTURED_HAS("linear: input 1 is not a tensor with data", "nn_params_finalize");
    ag_set_error_handler(NULL, NULL);
    CU_ASSERT_EQUAL(nn_params_finalize(ps, 1), 0); /* then it runs */
    ag_tape_reset(t);
    CU_ASSERT_PTR_NOT_NULL(nn_linear_forward(&l, &c, ag_tensor_new(t, AG_SHAPE(4, 3))));
    ag_tape_free(t);
    nn_params_free(ps);
}

static CU_TestInfo tests[] = {
    {"a forward before finalize names nn_params_finalize", test_forward_before_finalize},
    {"names, order, shapes before finalize", test_names_and_order},
    {"finalize: flat views, alignment, zero-grad", test_finalize_views},
    {"finalize_zero: the same layout, zeros, reinit as finalize", test_finalize_zero},
    {"registration errors are sticky", test_errors_are_sticky},
    {"a replica shares the values, not the gradients", test_share_values},
    {"init determinism: same seed, same bits", test_init_determinism},
    {"initialiser statistics and d2l defaults", test_init_statistics},
    {"GRU parameter names (PyTorch layout)", test_gru_names},
    {"buffers: beside the parameters, outside the flat buffers", test_buffers},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("nn_params", tests); }
