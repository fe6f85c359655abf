/* kv_cache.c -- the key/value cache and the row gathers of nn/kv_cache.h. */
#include "nn/kv_cache.h"

#include "autograd/ag_op.h"

#include <string.h>

int nn_kv_cache_init(nn_kv_cache *kv, int rows, int width) {
    if (!kv) return ag_error("nn_kv_cache_init: NULL cache");
    memset(kv, 0, sizeof *kv);
    if (rows < 1 || width < 1)
        return ag_error("nn_kv_cache_init: %d rows of width %d, expected both >= 1", rows, width);
    kv->rows = rows;
    kv->width = width;
    return 0;
}

/* New buffers of rows_cap x t_cap positions on t; row i of the new ones gets the filled prefix
 * of old row from[i] (from NULL: row i), i < n; kv->rows = n. Returns 0 or -1 (kv unchanged). */
static int move_to(nn_kv_cache *kv, ag_tape *t, int rows_cap, int t_cap, const int32_t *from,
                   int n) {
    const size_t W = (size_t)kv->width, R = sizeof(ag_real), row = W * R * (size_t)t_cap;
    ag_real *k = ag_tape_alloc(t, row * (size_t)rows_cap), *v = ag_tape_alloc(t, row * rows_cap);
    if (!k || !v) return -1;
    const size_t used = W * R * (size_t)kv->len, old_row = W * (size_t)kv->t_cap;
    for (int i = 0; used && i < n; i++) {
        const size_t src = (size_t)(from ? from[i] : i) * old_row;
        memcpy(k + (size_t)i * W * t_cap, kv->k + src, used);
        memcpy(v + (size_t)i * W * t_cap, kv->v + src, used);
    }
    kv->k = k;
    kv->v = v;
    kv->rows = n;
    kv->rows_cap = rows_cap;
    kv->t_cap = t_cap;
    return 0;
}

int nn_kv_cache_reserve(nn_kv_cache *kv, ag_tape *t, int rows, int steps) {
    if (!kv || !t) return -1;
    if (rows < 1 || steps < 0) {
        ag_report(t, "nn_kv_cache_reserve: %d rows and %d steps, expected >= 1 and >= 0", rows,
                  steps);
        return -1;
    }
    const int rc = rows > kv->rows_cap ? rows : kv->rows_cap;
    const int tc = steps > kv->t_cap ? steps : kv->t_cap;
    if (rc == kv->rows_cap && tc == kv->t_cap && kv->k) return 0;
    return move_to(kv, t, rc > kv->rows ? rc : kv->rows, tc, NULL, kv->rows);
}

int nn_kv_cache_append(nn_kv_cache *kv, ag_tape *t, ag_tensor *k, ag_tensor *v) {
    if (!kv || !ag_op_check(t, "nn_kv_cache_append", 2, (ag_tensor *[]){k, v})) return -1;
    if (k->ndim != 3 || v->ndim != 3 || k->shape[0] != kv->rows || k->shape[2] != kv->width ||
        v->shape[0] != k->shape[0] || v->shape[1] != k->shape[1] || v->shape[2] != kv->width) {
        char sk[64], sv[64];
        ag_report(t, "nn_kv_cache_append: keys %s and values %s, expected (%d, T, %d) both",
                  ag_shape_str(k, sk, sizeof sk), ag_shape_str(v, sv, sizeof sv), kv->rows,
                  kv->width);
        return -1;
    }
    if (ag_op_wants_grad(t, 2, (ag_tensor *[]){k, v})) {
        ag_report(t, "nn_kv_cache_append: the keys or values record a gradient, which the "
                     "cache's copies would cut: inference only, turn the tape's recording off");
        return -1;
    }
    const int T = k->shape[1], need = kv->len + T;
    if (need > kv->t_cap || !kv->k) {
        const int grown = 2 * kv->t_cap > need ? 2 * kv->t_cap : need;
        if (move_to(kv, t, kv->rows_cap > kv->rows ? kv->rows_cap : kv->rows, grown, NULL,
                    kv->rows))
            return -1;
    }
    if (!(k = ag_contiguous(t, k)) || !(v = ag_contiguous(t, v))) return -1;
    const size_t W = (size_t)kv->width, n = W * (size_t)T;
    for (int r = 0; r < kv->rows; r++) {
        const size_t at = ((size_t)r * kv->t_cap + kv->len) * W;
        memcpy(kv->k + at, k->data + (size_t)r * n, sizeof(ag_real) * n);
        memcpy(kv->v + at, v->data + (size_t)r * n, sizeof(ag_real) * n);
    }
    kv->len = need;
    return 0;
}

/* The view (rows, len, width) of buffer buf through the leaf at. */
static ag_tensor *view(nn_kv_cache *kv, ag_tape *t, ag_real *buf, ag_tensor *at, const char *fn) {
    if (!kv || !t) return NULL;
    if (kv->len < 1) return ag_report(t, "%s: the cache is empty (append first)", fn);
    if (ag_leaf_init(at, buf, NULL, AG_SHAPE(kv->rows, kv->t_cap, kv->width))) return NULL;
    return kv->len == kv->t_cap ? at : ag_narrow(t, at, 1, 0, kv->len);
}

ag_tensor *nn_kv_cache_keys(nn_kv_cache *kv, ag_tape *t) {
    return view(kv, t, kv ? kv->k : NULL, kv ? &kv->k_at : NULL, "nn_kv_cache_keys");
}

ag_tensor *nn_kv_cache_values(nn_kv_cache *kv, ag_tape *t) {
    return view(kv, t, kv ? kv->v : NULL, kv ? &kv->v_at : NULL, "nn_kv_cache_values");
}

int nn_kv_cache_truncate(nn_kv_cache *kv, ag_tape *t, int len) {
    if (!kv) return -1;
    if (len < 0 || len > kv->len) {
        ag_report(t, "nn_kv_cache_truncate: to %d positions, the cache has %d", len, kv->len);
        return -1;
    }
    kv->len = len;
    return 0;
}

int nn_kv_cache_select(nn_kv_cache *kv, ag_tape *t, const int32_t *rows, int n, const bool *keep) {
    if (!kv || !rows || nn_rows_check(t, "nn_kv_cache_select", rows, n, kv->rows)) return -1;
    if (n > kv->rows_cap || !kv->k) { /* straight into new buffers: row i from rows[i] */
        int32_t *from = ag_tape_alloc(t, sizeof *from * (size_t)n);
        if (!from) return -1;
        for (int i = 0; i < n; i++)
            from[i] = (keep ? keep[i] && i < kv->rows : rows[i] == i) ? i : rows[i];
        return move_to(kv, t, n, kv->t_cap, from, n);
    }
    const size_t W = (size_t)kv->width, R = sizeof(ag_real), stride = W * R * (size_t)kv->t_cap,
                 used = W * R * (size_t)kv->len;
    if (nn_rows_gather(t, kv->k, stride, used, rows, n, keep) ||
        nn_rows_gather(t, kv->v, stride, used, rows, n, keep))
        return -1;
    kv->rows = n;
    return 0;
}

/* ---- rows of a decoding state ---- */

int nn_rows_check(ag_tape *t, const char *what, const int32_t *rows, int n, int B) {
    if (n < 1 || !rows) {
        ag_report(t, "%s: %d rows, expected >= 1", what, n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (rows[i] < 0 || rows[i] >= B) {
            ag_report(t, "%s: row %d is %d, the state has %d rows", what, i, rows[i], B);
            return -1;
        }
    return 0;
}

int nn_rows_gather(ag_tape *t, void *buf, size_t stride, size_t len, const int32_t *rows, int n,
                   const bool *keep) {
    int moved = 0;
    for (int i = 0; i < n; i++) moved += keep ? !keep[i] : rows[i] != i;
    if (!len || !moved) return 0;
    unsigned char *old = ag_tape_alloc(t, len * (size_t)moved), *b = buf;
    if (!old) return -1;
    for (int pass = 0; pass < 2; pass++) /* copy the sources aside, then into place */
        for (int i = 0, j = 0; i < n; i++) {
            if (keep ? keep[i] : rows[i] == i) continue;
            unsigned char *row = b + (size_t)i * stride, *src = b + (size_t)rows[i] * stride;
            if (pass == 0) memcpy(old + (size_t)j++ * len, src, len);
            else memcpy(row, old + (size_t)j++ * len, len);
        }
    return 0;
}

void nn_rows_same_source(const int32_t *src, int n_old, const int32_t *rows, int n, bool *keep) {
    for (int i = 0; i < n; i++) keep[i] = i < n_old && src[i] == src[rows[i]];
}

void *nn_rows_move(ag_tape *t, const void *src, size_t src_stride, size_t len, int n, int cap,
                   size_t stride) {
    unsigned char *dst = ag_tape_alloc(t, stride * (size_t)cap);
    const unsigned char *from = src;
    for (int i = 0; dst && i < n; i++)
        memcpy(dst + (size_t)i * stride, from + (size_t)i * src_stride, len);
    return dst;
}
