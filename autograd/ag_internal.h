/* ag_internal.h -- what the engine's own files share beyond the public op-authoring API
 * (autograd/ag_op.h): the tensor magic, failure marking and the GEMM scratch. Not installed. */
#ifndef TG_AG_INTERNAL_H
#define TG_AG_INTERNAL_H

#include "autograd/ag_op.h"

#define AG_MAGIC 0x61677445u /* "Etga" */

/* Marks t failed (t may be NULL). */
void ag__mark_failed(ag_tape *t);
/* Frees the calling thread's GEMM scratch buffer (thread-pool workers call it as they end). */
void ag__scratch_free(void);
void ag__packed_scratch_free(void);
void ag__bf16_scratch_free(void);
/* The BLIS context (a const cntx_t *) of the engine's GEMM micro-kernel, or NULL when BLIS's own
 * kernels run (gemm_kernel.c); chosen once, at the first call. */
const void *ag__gemm_cntx(void);
/* Whether ag_gemm runs a product C (m x n, column stride csc) = A (m x k) B in BLIS's blocked
 * code (where the engine's micro-kernel runs when it has one) rather than its code for small
 * sizes: BLIS's own test with m held to its NT, each side at least 200 (ops_matmul.c). */
bool ag__gemm_blocked(int m, int n, int k, ptrdiff_t csc);

/* The reduction of x over axis (negative from the end; AG_ALL: every axis, seen as one): the
 * result's shape (*nd dims into shape, keepdim keeping the axis as 1) and x, contiguous, seen as
 * (outer, n, inner) around the axis. False after reporting a bad axis (ops_reduce.c). */
bool ag__reduce_split(ag_tape *t, const char *op, const ag_tensor *x, int axis, bool keepdim,
                      int *nd, int *shape, ptrdiff_t *outer, ptrdiff_t *n, ptrdiff_t *inner);

#endif
