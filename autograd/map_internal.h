/* map_internal.h -- the elementwise templates of the engine's own op files (not installed):
 * NumPy broadcasting, one binary op with broadcasting (BINARY_OP), one unary map with up to
 * two scalar constants (UNARY_OP). ops_elementwise.c and ops_pointwise.c instantiate them.
 *
 * Inputs may be views with any strides; results are contiguous. A broadcast input is read with
 * stride 0 along the broadcast axes, and its backward writes with the same strides, so `+=`
 * along a stride-0 axis is exactly the reduction over the broadcast axes.
 */
#ifndef TG_AG_MAP_INTERNAL_H
#define TG_AG_MAP_INTERNAL_H

#include "autograd/ag_internal.h"

/* ---- broadcasting ---- */

typedef struct bcast {
    int nd;
    int shape[AG_MAX_DIMS];
    ptrdiff_t sy[AG_MAX_DIMS], sa[AG_MAX_DIMS], sb[AG_MAX_DIMS];
} bcast;

/* The broadcast of a and b, and each one's strides aligned to it (0 where broadcast). */
static inline bool broadcast(ag_tape *t, const char *op, const ag_tensor *a, const ag_tensor *b,
                             bcast *bc) {
    bc->nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < bc->nd; d++) {
        int da = d - (bc->nd - a->ndim), db = d - (bc->nd - b->ndim);
        int na = da >= 0 ? a->shape[da] : 1, nb = db >= 0 ? b->shape[db] : 1;
        if (na != nb && na != 1 && nb != 1) {
            char sa[64], sb[64];
            ag_report(t, "%s: shapes %s and %s do not broadcast (axis %d: %d vs %d)", op,
                      ag_shape_str(a, sa, sizeof sa), ag_shape_str(b, sb, sizeof sb), d, na, nb);
            return false;
        }
        bc->shape[d] = na > nb ? na : nb;
        if (na == 0 || nb == 0) bc->shape[d] = 0;
        bc->sa[d] = na == 1 ? 0 : a->stride[da];
        bc->sb[d] = nb == 1 ? 0 : b->stride[db];
    }
    ag_contig_strides(bc->nd, bc->shape, bc->sy);
    return true;
}

/* One binary op: forward y = F(a, b); backward ga += DA, gb += DB, where the expressions see
 * g (the output gradient), a, b and y at the current element. */
#define BINARY_OP(fname, opname, F, DA, DB)                                                        \
    static void fname##_backward(ag_node *n) {                                                     \
        ag_tensor *ta = n->in[0], *tb = n->in[1], *ty = n->out;                                    \
        const ag_real *A = ta->data, *B = tb->data, *Y = ty->data, *G = ty->grad;                  \
        if (ta != tb && ag_same_shape(ta, tb) && ag_is_contiguous(ta) && ag_is_contiguous(tb)) {   \
            /* same shapes, distinct contiguous operands: flat, vectorisable loops */              \
            for (int side = 0; side < 2; side++) {                                                 \
                ag_tensor *tg = side ? tb : ta;                                                    \
                if (!tg->requires_grad) continue;                                                  \
                const ag_real *restrict a_ = A, *restrict b_ = B, *restrict y_ = Y;                \
                const ag_real *restrict g_ = G;                                                    \
                ag_real *restrict d_ = tg->grad;                                                   \
                for (ptrdiff_t i = 0; i < ty->numel; i++) {                                        \
                    ag_real g = g_[i], a = a_[i], b = b_[i], y = y_[i];                            \
                    (void)a, (void)b, (void)y;                                                     \
                    d_[i] += side ? (DB) : (DA);                                                   \
                }                                                                                  \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        bcast bc;                                                                                  \
        broadcast(NULL, opname, ta, tb, &bc);                                                      \
        /* one pass per operand: its gradient is written through its own (broadcast)         \
         * strides, so stride-0 axes accumulate the reduction */     \
        for (int side = 0; side < 2; side++) {                                                     \
            ag_tensor *tg = side ? tb : ta; /* x * x: both passes, into the same buffer */         \
            if (!tg->requires_grad) continue;                                                      \
            ag_real *D = tg->grad;                                                                 \
            ag_iter it;                                                                            \
            ag_iter_init(&it, bc.nd, bc.shape, 3, (const ptrdiff_t *[]){bc.sy, bc.sa, bc.sb});     \
            for (ptrdiff_t r = 0; r < it.outer; r++, ag_iter_next(&it)) {                          \
                const ag_real *restrict g0 = G + it.off[0], *restrict y0 = Y + it.off[0];          \
                const ag_real *restrict a0 = A + it.off[1], *restrict b0 = B + it.off[2];          \
                ag_real *d0 = D + it.off[1 + side];                                                \
                ptrdiff_t sd = it.is[1 + side];                                                    \
                if (sd == 0) { /* a reduction along the run */                                     \
                    ag_real acc = 0;                                                               \
                    for (ptrdiff_t j = 0; j < it.inner; j++) {                                     \
                        ag_real g = g0[j * it.is[0]], a = a0[j * it.is[1]], b = b0[j * it.is[2]],  \
                                y = y0[j * it.is[0]];                                              \
                        (void)a, (void)b, (void)y;                                                 \
                        acc += side ? (DB) : (DA);                                                 \
                    }                                                                              \
                    *d0 += acc;                                                                    \
                } else if (it.is[0] == 1 && it.is[1] <= 1 && it.is[2] <= 1 && sd == 1) {           \
                    ag_real *restrict dr = d0; /* contiguous run: vectorizes */                    \
                    for (ptrdiff_t j = 0; j < it.inner; j++) {                                     \
                        ag_real g = g0[j], a = a0[j * it.is[1]], b = b0[j * it.is[2]], y = y0[j];  \
                        (void)a, (void)b, (void)y;                                                 \
                        dr[j] += side ? (DB) : (DA);                                               \
                    }                                                                              \
                } else {                                                                           \
                    for (ptrdiff_t j = 0; j < it.inner; j++) {                                     \
                        ag_real g = g0[j * it.is[0]], a = a0[j * it.is[1]], b = b0[j * it.is[2]],  \
                                y = y0[j * it.is[0]];                                              \
                        (void)a, (void)b, (void)y;                                                 \
                        d0[j * sd] += side ? (DB) : (DA);                                          \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static const ag_op fname##_op = {opname, fname##_backward};                                    \
    ag_tensor *ag_##fname(ag_tape *t, ag_tensor *ta, ag_tensor *tb) {                              \
        ag_tensor *in[2] = {ta, tb};                                                               \
        bcast bc;                                                                                  \
        if (!ag_op_check(t, opname, 2, in) || !broadcast(t, opname, ta, tb, &bc)) return NULL;     \
        ag_tensor *ty = ag_op_out(t, bc.nd, bc.shape, 2, in);                                      \
        if (!ty) return NULL;                                                                      \
        const ag_real *A = ta->data, *B = tb->data;                                                \
        ag_real *Y = ty->data;                                                                     \
        ag_iter it;                                                                                \
        ag_iter_init(&it, bc.nd, bc.shape, 3, (const ptrdiff_t *[]){bc.sy, bc.sa, bc.sb});         \
        for (ptrdiff_t r = 0; r < it.outer; r++, ag_iter_next(&it)) {                              \
            ag_real *restrict y0 = Y + it.off[0];                                                  \
            const ag_real *restrict a0 = A + it.off[1], *restrict b0 = B + it.off[2];              \
            if (it.is[1] == 1 && it.is[2] == 1) { /* the common, vectorisable case */              \
                for (ptrdiff_t j = 0; j < it.inner; j++) {                                         \
                    ag_real a = a0[j], b = b0[j];                                                  \
                    y0[j] = (F);                                                                   \
                }                                                                                  \
            } else {                                                                               \
                for (ptrdiff_t j = 0; j < it.inner; j++) {                                         \
                    ag_real a = a0[j * it.is[1]], b = b0[j * it.is[2]];                            \
                    y0[j] = (F);                                                                   \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        ag_op_record(t, &fname##_op, ty, 2, in, 0);                                                \
        return ty;                                                                                 \
    }

/* ---- unary maps ----
 * One op: forward y = F(x, c, c2) with c, c2 the op's scalar constants (unused by most);
 * backward gx += g * DF, where DF sees x, y, c and c2. fname##_impl(t, x, c, c2) makes it. */

typedef struct unary_saved {
    double c, c2;
} unary_saved;

#define UNARY_OP(fname, opname, F, DF)                                                             \
    static void fname##_backward(ag_node *n) {                                                     \
        ag_tensor *tx = n->in[0], *ty = n->out;                                                    \
        const double c = ((const unary_saved *)n->saved)->c;                                       \
        const double c2 = ((const unary_saved *)n->saved)->c2;                                     \
        (void)c, (void)c2;                                                                         \
        if (ag_is_contiguous(tx)) { /* the common, vectorisable case */                            \
            const ag_real *restrict X = tx->data, *restrict Y = ty->data;                          \
            const ag_real *restrict G = ty->grad;                                                  \
            ag_real *restrict GX = tx->grad;                                                       \
            for (ptrdiff_t i = 0; i < tx->numel; i++) {                                            \
                ag_real x = X[i], y = Y[i], g = G[i];                                              \
                (void)x, (void)y;                                                                  \
                GX[i] += g * (DF);                                                                 \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        ag_iter it;                                                                                \
        ag_iter_init(&it, tx->ndim, tx->shape, 2, (const ptrdiff_t *[]){tx->stride, ty->stride});  \
        for (ptrdiff_t r = 0; r < it.outer; r++, ag_iter_next(&it)) {                              \
            for (ptrdiff_t j = 0; j < it.inner; j++) {                                             \
                ptrdiff_t ix = it.off[0] + j * it.is[0], iy = it.off[1] + j;                       \
                ag_real x = tx->data[ix], y = ty->data[iy], g = ty->grad[iy];                      \
                (void)x, (void)y;                                                                  \
                tx->grad[ix] += g * (DF);                                                          \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static const ag_op fname##_op = {opname, fname##_backward};                                    \
    static ag_tensor *fname##_impl(ag_tape *t, ag_tensor *tx, double c, double c2) {               \
        (void)c2;                                                                                  \
        if (!ag_op_check(t, opname, 1, &tx)) return NULL;                                          \
        ag_tensor *ty = ag_op_out(t, tx->ndim, tx->shape, 1, &tx);                                 \
        if (!ty) return NULL;                                                                      \
        if (ag_is_contiguous(tx)) {                                                                \
            const ag_real *restrict X = tx->data;                                                  \
            ag_real *restrict Y = ty->data;                                                        \
            for (ptrdiff_t i = 0; i < tx->numel; i++) {                                            \
                ag_real x = X[i];                                                                  \
                Y[i] = (F);                                                                        \
            }                                                                                      \
        } else {                                                                                   \
            ag_iter it;                                                                            \
            ag_iter_init(&it, tx->ndim, tx->shape, 2,                                              \
                         (const ptrdiff_t *[]){tx->stride, ty->stride});                           \
            for (ptrdiff_t r = 0; r < it.outer; r++, ag_iter_next(&it)) {                          \
                const ag_real *x0 = tx->data + it.off[0];                                          \
                ag_real *y0 = ty->data + it.off[1];                                                \
                for (ptrdiff_t j = 0; j < it.inner; j++) {                                         \
                    ag_real x = x0[j * it.is[0]];                                                  \
                    y0[j] = (F);                                                                   \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        ag_node *nd = ag_op_record(t, &fname##_op, ty, 1, &tx, sizeof(unary_saved));               \
        if (nd) *(unary_saved *)nd->saved = (unary_saved){c, c2};                                  \
        return ty;                                                                                 \
    }

#endif
