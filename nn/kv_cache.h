/* nn/kv_cache.h -- decoding state: a key/value cache for incremental decoding, and the row
 * gathers of a decoding state (beam search).
 *
 * An attention layer that decodes one position at a time attends to the keys and values of
 * every position so far. nn_kv_cache keeps them for `rows` rows (batch rows or beams), each a
 * sequence of `len` positions of `width` features, every row the same length (a step appends
 * one position to every row). Layout: two buffers, keys and values, (rows_cap, t_cap, width)
 * each, row r position j at (r t_cap + j) width.
 *
 *     nn_kv_cache kv;
 *     nn_kv_cache_init(&kv, B, H);                 // no memory yet
 *     nn_kv_cache_reserve(&kv, t, beams, steps);   // room, before the loop's tape mark
 *     nn_kv_cache_append(&kv, t, k, v);            // k, v (B, T, H): positions len .. len+T-1
 *     ag_tensor *K = nn_kv_cache_keys(&kv, t);     // (B, len, H), a view for the attention
 *     nn_kv_cache_select(&kv, t, rows, n, NULL);   // row i := old row rows[i]
 *
 * Memory: the buffers live on the tape given to reserve, append and select (ag_tape_alloc)
 * and are freed by its reset; the nn_kv_cache struct is the caller's (e.g. inside a decoding
 * state on the tape). A cache that lacks room (more rows or positions than reserved) moves to
 * bigger buffers on that tape (the old ones stay until the reset). So a caller that rewinds the
 * tape after each step (ag_tape_rewind) reserves first, before its mark: buffers that append or
 * select make after a mark are freed by the rewind.
 *
 * Inference only: the cache holds copies, no gradient flows through it; append refuses keys or
 * values that would record one.
 *
 * Errors: functions returning int return 0 or -1, those returning a pointer NULL, after
 * reporting (ag_report on the tape given: ag_last_error() names the function, the shapes, the
 * row ids). A failed call leaves the cache as it was.
 */
#ifndef TG_NN_KV_CACHE_H
#define TG_NN_KV_CACHE_H

#include "base.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nn_kv_cache {
    ag_real *k, *v;       /* (rows_cap, t_cap, width) each, on a tape; NULL before any room */
    int rows;             /* rows in use (>= 1) */
    int len;              /* positions filled in every row */
    int rows_cap, t_cap;  /* rows and positions the buffers hold */
    int width;            /* features per position */
    ag_tensor k_at, v_at; /* the leaves the views are taken from (rows, t_cap, width) */
} nn_kv_cache;

/* An empty cache of `rows` rows and `width` features; no memory. Returns 0, or -1 with
 * ag_last_error() for rows or width < 1. */
int nn_kv_cache_init(nn_kv_cache *kv, int rows, int width);

/* Room for at least `rows` rows and `steps` positions in all (moving the rows in use and their
 * positions to new buffers on t when the cache has less; nothing otherwise). Returns 0 or -1. */
int nn_kv_cache_reserve(nn_kv_cache *kv, ag_tape *t, int rows, int steps);

/* Appends T positions to every row: k and v (rows, T, width), any strides, copied to
 * positions len .. len + T - 1; len += T. Without room, first grows to max(len + T, 2 t_cap)
 * positions on t. -1 for other shapes or when k or v would record a gradient. */
int nn_kv_cache_append(nn_kv_cache *kv, ag_tape *t, ag_tensor *k, ag_tensor *v);

/* The filled prefix (rows, len, width) of the keys / values: a view over the buffer (row
 * stride t_cap width; on t, or the cache's own leaf when len == t_cap), valid until the cache
 * next changes. The attention cores read it in place (nn_attention_forward's one-query
 * kernel) or copy it. NULL (reported) when the cache is empty. */
ag_tensor *nn_kv_cache_keys(nn_kv_cache *kv, ag_tape *t);
ag_tensor *nn_kv_cache_values(nn_kv_cache *kv, ag_tape *t);

/* Drops positions len .. kv->len - 1 (0 <= len <= kv->len), e.g. to undo a step that failed
 * halfway. Returns 0 or -1. */
int nn_kv_cache_truncate(nn_kv_cache *kv, ag_tape *t, int len);

/* Keeps rows: afterwards the cache has n rows, row i being the old row rows[i] (n >= 1, each
 * in [0, rows); repeats allowed: beam expansion; fewer rows: finished rows dropped), growing
 * to n rows on t when rows_cap < n. keep (n,) or NULL as nn_rows_gather: rows known to hold
 * what they would receive are not copied. Returns 0, or -1 naming the first bad row id. */
int nn_kv_cache_select(nn_kv_cache *kv, ag_tape *t, const int32_t *rows, int n, const bool *keep);

/* ---- rows of a decoding state ------------------------------------------------------------
 * A decoding state keeps per-row buffers (encoder outputs, recurrent states, caches) that beam
 * search reorders. A buffer holds rows of `len` bytes, `stride` bytes apart. */

/* 0 when rows (n,) are valid row ids of a state of B rows (n >= 1, each in [0, B)); else -1
 * after reporting "<what>: row i is r, the state has B rows" (or the count). */
int nn_rows_check(ag_tape *t, const char *what, const int32_t *rows, int n, int B);
/* Row i of buf becomes the old row rows[i], i < n (rows may repeat; buf must have room for n
 * rows), except the rows with keep[i] true, left as they are (keep NULL: the rows with
 * rows[i] == i): e.g. rows that already hold the same content. The old rows to move are first
 * copied to scratch memory on t (freed with the step). Returns 0, or -1 when out of memory
 * (reported). */
int nn_rows_gather(ag_tape *t, void *buf, size_t stride, size_t len, const int32_t *rows, int n,
                   const bool *keep);
/* keep (n,) for nn_rows_gather of the buffers that depend only on a row's source (src (n_old,):
 * the source of each old row; gathered itself with this keep): keep[i] when old row i comes
 * from the same source as old row rows[i], so already holds what it would receive. */
void nn_rows_same_source(const int32_t *src, int n_old, const int32_t *rows, int n, bool *keep);
/* A new buffer on t with room for cap rows, stride bytes apart, whose first n rows are copies of
 * the n rows of src (len bytes each, src_stride apart). NULL when out of memory (reported). */
void *nn_rows_move(ag_tape *t, const void *src, size_t src_stride, size_t len, int n, int cap,
                   size_t stride);

#ifdef __cplusplus
}
#endif

#endif
