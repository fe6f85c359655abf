/* ops_gru.c -- the fused GRU cell (PyTorch's GRU gate equations, one op instead of twelve).
 *
 * gi (B, 3H) = x W_ih^T + b_ih and gh (B, 3H) = h W_hh^T + b_hh hold the gates r, z, n in
 * that order along axis 1; h (B, H) is the previous state. Per element (b, j):
 *   r = sigmoid(gi_r + gh_r)     z = sigmoid(gi_z + gh_z)     n = tanh(gi_n + r gh_n)
 *   h' = n + z (h - n)
 * Backward, g = dh':
 *   dh += g z      dn = g (1 - z)      dz = g (h - n)
 *   a_n = dn (1 - n^2):    dgi_n += a_n     dgh_n += a_n r
 *   a_z = dz z (1 - z):    dgi_z += a_z     dgh_z += a_z
 *   a_r = a_n gh_n r (1 - r):  dgi_r += a_r     dgh_r += a_r
 * The forward keeps r, z, n; the backward first forms a = (a_r, a_z, a_n) for the whole batch,
 * then adds it into each input's gradient in its own loop (so gi, gh and h may be one tensor).
 */
#include "autograd/ag_internal.h"

typedef struct gru_saved {
    ag_real *rzn;   /* (B, 3H): r, z, n */
    ag_real *a;     /* (B, 3H) scratch for the backward */
} gru_saved;

static void gru_cell_backward(ag_node *nd) {
    ag_tensor *gi = nd->in[0], *gh = nd->in[1], *h = nd->in[2], *y = nd->out;
    const gru_saved *s = nd->saved;
    const int B = h->shape[0], H = h->shape[1];
    for (int b = 0; b < B; b++) {
        const ag_real *restrict g = y->grad + (ptrdiff_t)b * H, *restrict hb = h->data + (ptrdiff_t)b * H;
        const ag_real *restrict r = s->rzn + (ptrdiff_t)b * 3 * H, *restrict z = r + H, *restrict n = z + H;
        const ag_real *restrict ghn = gh->data + (ptrdiff_t)b * 3 * H + 2 * H;
        ag_real *restrict ar = s->a + (ptrdiff_t)b * 3 * H, *restrict az = ar + H, *restrict an = az + H;
        for (int j = 0; j < H; j++) an[j] = g[j] * (1 - z[j]) * (1 - n[j] * n[j]);
        for (int j = 0; j < H; j++) az[j] = g[j] * (hb[j] - n[j]) * z[j] * (1 - z[j]);
        for (int j = 0; j < H; j++) ar[j] = an[j] * ghn[j] * r[j] * (1 - r[j]);
    }
    ptrdiff_t n3 = (ptrdiff_t)B * 3 * H;
    if (gi->grad) {
        ag_real *restrict d = gi->grad;
        const ag_real *restrict a = s->a;
        for (ptrdiff_t i = 0; i < n3; i++) d[i] += a[i];
    }
    if (gh->grad) {
        for (int b = 0; b < B; b++) {
            ag_real *restrict d = gh->grad + (ptrdiff_t)b * 3 * H;
            const ag_real *restrict a = s->a + (ptrdiff_t)b * 3 * H, *restrict r = s->rzn + (ptrdiff_t)b * 3 * H;
            for (int j = 0; j < 2 * H; j++) d[j] += a[j];
            for (int j = 2 * H; j < 3 * H; j++) d[j] += a[j] * r[j - 2 * H];
        }
    }
    if (h->grad) {
        for (int b = 0; b < B; b++) {
            ag_real *restrict d = h->grad + (ptrdiff_t)b * H;
            const ag_real *restrict g = y->grad + (ptrdiff_t)b * H, *restrict z = s->rzn + (ptrdiff_t)b * 3 * H + H;
            for (int j = 0; j < H; j++) d[j] += g[j] * z[j];
        }
    }
}
static const ag_op gru_cell_op = {"gru_cell", gru_cell_backward};

ag_tensor *ag_gru_cell(ag_tape *t, ag_tensor *gi, ag_tensor *gh, ag_tensor *h) {
    ag_tensor *in[3] = {gi, gh, h};
    if (!ag_op_check(t, "gru_cell", 3, in)) return NULL;
    if (h->ndim != 2 || gi->ndim != 2 || gh->ndim != 2 || gi->shape[0] != h->shape[0] ||
        gh->shape[0] != h->shape[0] || gi->shape[1] != 3 * h->shape[1] ||
        gh->shape[1] != 3 * h->shape[1]) {
        char si[64], sg[64], sh[64];
        return ag_report(t, "gru_cell: gates %s and %s with state %s; expected (B, 3H), (B, 3H), (B, H)",
                        ag_shape_str(gi, si, sizeof si), ag_shape_str(gh, sg, sizeof sg),
                        ag_shape_str(h, sh, sizeof sh));
    }
    for (int i = 0; i < 3; i++)
        if (!(in[i] = ag_op_contig(t, in[i]))) return NULL;
    gi = in[0], gh = in[1], h = in[2];
    const int B = h->shape[0], H = h->shape[1];
    ag_tensor *y = ag_op_out(t, AG_SHAPE(B, H), 3, in);
    gru_saved s = {NULL, NULL};
    s.rzn = y ? ag_tape_alloc(t, sizeof *s.rzn * (size_t)B * 3 * H) : NULL;
    if (!s.rzn || (y->requires_grad && !(s.a = ag_tape_alloc(t, sizeof *s.a * (size_t)B * 3 * H))))
        return NULL;
    for (int b = 0; b < B; b++) {
        const ag_real *restrict xi = gi->data + (ptrdiff_t)b * 3 * H, *restrict xh = gh->data + (ptrdiff_t)b * 3 * H;
        const ag_real *restrict hb = h->data + (ptrdiff_t)b * H;
        ag_real *restrict r = s.rzn + (ptrdiff_t)b * 3 * H, *restrict z = r + H, *restrict n = z + H;
        ag_real *restrict yb = y->data + (ptrdiff_t)b * H;
        /* one loop per gate: each vectorizes (a single loop with three inlined
         * transcendentals does not) */
        for (int j = 0; j < H; j++) r[j] = ag_sigmoid1(xi[j] + xh[j]);
        for (int j = 0; j < H; j++) z[j] = ag_sigmoid1(xi[H + j] + xh[H + j]);
        for (int j = 0; j < H; j++) n[j] = ag_tanh1(xi[2 * H + j] + r[j] * xh[2 * H + j]);
        for (int j = 0; j < H; j++) yb[j] = n[j] + z[j] * (hb[j] - n[j]);
    }
    ag_node *nd = ag_op_record(t, &gru_cell_op, y, 3, in, sizeof s);
    if (nd) *(gru_saved *)nd->saved = s;
    return y;
}
