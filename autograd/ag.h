/* ag.h -- tapegrad's reverse-mode autograd engine.
 *
 * In five lines:
 *
 *     ag_tape *t = ag_tape_new();
 *     ag_tensor *w = ag_leaf_new(AG_SHAPE(3, 2), true);      // a parameter: outlives the tape
 *     ag_tensor *x = ag_tensor_from(t, AG_SHAPE(4, 3), xs);  // input data: lives until reset
 *     ag_tensor *loss = ag_sum(t, ag_relu(t, ag_matmul(t, x, w)), AG_ALL, false);
 *     ag_backward(t, loss);   // w->grad += d loss / d w
 *     ag_tape_reset(t);       // every intermediate of the step freed at once, O(1)
 *
 * Every op computes its result at once (eager) and, when recording and some input requires a
 * gradient, appends a node to the tape. ag_backward() walks the nodes in reverse; each node's
 * backward ADDS into its inputs' gradients, so a tensor used twice just works.
 *
 * Precision: ag_real is float, or double when the library is compiled with TG_DOUBLE (CMake
 * builds every library twice: `ag` and `ag64`). The gradient checks use the float64 twin.
 *
 * Memory: tensors returned by ops and their data live in the tape's arena until ag_tape_reset();
 * the caller never frees them. Their gradients exist only while ag_backward needs them (see
 * there; ag_retain_grad keeps one). Leaves made by ag_leaf_new() are owned by the caller
 * (ag_leaf_free). Parameters of the nn library are leaves viewing its flat buffers.
 *
 * Errors: a shape mismatch, a bad axis, an out-of-range id, a tensor used after its tape was
 * reset, tensors of two tapes mixed: the op reports one message (op name and shapes) through the
 * error handler, marks the tape failed and returns NULL. Every op given a NULL input returns NULL
 * without a second message, so a forward pass can be checked once, at its end.
 * The library never exits and never aborts on user input.
 */
#ifndef TG_AG_H
#define TG_AG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ag_base.h"

#ifdef __cplusplus
#include <initializer_list>
extern "C" {
#endif

#ifdef TG_DOUBLE
typedef double ag_real;
#else
typedef float ag_real;
#endif

#define AG_MAX_DIMS 6
/* Axis argument meaning "all axes" for the reductions. */
#define AG_ALL (-100)
/* AG_SHAPE(2, 3) expands to `2, (const int[]){2, 3}`: the (ndim, shape) argument pair.
 * In C++ (no compound literals) the pair is taken from a temporary std::initializer_list<int>,
 * whose array lives to the end of the full expression, as a C compound literal in a call lives
 * to the end of its block at least: use AG_SHAPE in a call's arguments, never keep the pointer. */
#ifdef __cplusplus
#define AG_SHAPE(...)                                                                              \
    (int)std::initializer_list<int>{__VA_ARGS__}.size(),                                           \
        std::initializer_list<int>{__VA_ARGS__}.begin()
#else
#define AG_SHAPE(...)                                                                              \
    (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (const int[]) { __VA_ARGS__ }
#endif

typedef struct ag_tape ag_tape;

/* A strided n-d array. Element (i0, ..., i{n-1}) is data[sum_k ik * stride[k]]. When the tensor
 * requires a gradient, grad has exactly the layout of data (same offsets), so a view (reshape,
 * transpose, narrow) shares both the values and the gradient of the tensor it views.
 *
 * Where grad points: a leaf's (ag_leaf_new, ag_leaf_init) is the caller's buffer, always there,
 * and so is a view's of a leaf. An intermediate's (a tensor an op made, or a view of one) is
 * given by ag_backward: NULL until the reverse pass first needs it, then a zeroed buffer of the
 * tape's arena, which goes back to the arena for reuse once the pass has run the backward of
 * the op that made the tensor (grad is NULL again then). To read an intermediate's gradient after
 * ag_backward, call ag_retain_grad on it before. */
typedef struct ag_tensor {
    ag_real *data;
    ag_real *grad; /* NULL when no gradient is tracked */
    int ndim;      /* 0 for a scalar */
    int shape[AG_MAX_DIMS];
    ptrdiff_t stride[AG_MAX_DIMS]; /* in elements */
    ptrdiff_t numel;
    bool requires_grad;
    const char *name; /* optional, for messages (parameters carry their name) */
    /* engine bookkeeping */
    ag_tape *tape; /* NULL for leaves */
    /* An intermediate's gradient lives in the buffer of grad_base (itself, or the tensor a view
     * views), grad_offset elements in; NULL for leaves and their views (grad is fixed). */
    struct ag_tensor *grad_base;
    ptrdiff_t grad_offset;
    bool grad_retained; /* on a grad_base: ag_retain_grad keeps its buffer after backward */
    uint32_t gen;       /* the tape's generation when created */
    uint32_t magic;
} ag_tensor;

/* Reports a usage error of a forward pass the way an op does, for code built on the engine
 * (layers, models): records the message, marks t failed (t may be NULL), calls the handler.
 * Returns NULL, so a forward function can `return ag_report(t, "...", ...);`. */
void *ag_report(ag_tape *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- Threads ----------------------------------------------------------------------------- */

/* Threads that ops may use (the caller included): 1, the default, is serial. Large products,
 * batched products and row-wise kernels split their independent outputs between them, so
 * results do not depend on the number: same inputs, same bits. Returns 0, or -1 (reported) for
 * n outside [1, 256] or threads that could not be started. Call it at start-up or between
 * steps, not while another thread runs ops. */
int ag_set_threads(int n);
int ag_threads(void);

/* ---- Precision of products ------------------------------------------------------------ */

/* The inputs of matmul and linear products, forward and backward (y = x W^T, dx = dy W,
 * dW = dy^T x, and ag_matmul's three), and of ops that ask for it (ag_op_gemm: nn's fused
 * output-layer cross-entropy; nn's attention kernel does not): AG_FP32 (the default) multiplies
 * float32 values; AG_BF16 rounds both operands to bfloat16 (nearest even) and accumulates in
 * float32 (ag_gemm_bf16, autograd/ag_op.h). Everything else -- the weights, their gradients'
 * storage, every other op (softmax, layer norm statistics, losses, reductions), the optimizers
 * -- stays float32. A global setting of the engine like ag_set_threads: set it at start-up or
 * between steps, never while ops run; a scope saves ag_get_precision() and sets it back.
 * Products run on the CPU's AMX tiles or AVX512-BF16 instructions when it has them
 * (ag_bf16_native), else through a portable emulation with the same bits, many times slower: a
 * program should then stay in float32 (the zoo's trainers print a line and do). Returns 0, or
 * -1 (reported) for an unknown value, or AG_BF16 in the float64 engine (gradient checks run
 * float64 products). */
typedef enum ag_precision { AG_FP32 = 0, AG_BF16 = 1 } ag_precision;
int ag_set_precision(ag_precision p);
ag_precision ag_get_precision(void);
/* True when bf16 products run on the CPU's own instructions (AMX's tdpbf16ps or AVX512-BF16's
 * vdpbf16ps; ag_gemm_bf16_kernel, ag_op.h, names the kernel): the CPU and the compiler have
 * them, and neither the environment (TG_BF16_KERNEL=emulated) nor ag_bf16_emulate chose a
 * portable emulation. */
bool ag_bf16_native(void);
/* True when bf16 products run faster than float32's on this CPU: on AMX tiles, or on
 * AVX512-BF16 where its dot product runs at full rate (AG_CPU_BF16_DOT_FULL_RATE, ag_cpu.h),
 * with the kernel in use (ag_gemm_bf16_kernel) being that one. A step of the zoo's --preset full
 * costs about 0.5 of float32's on AMX and 0.66 on Zen 4's AVX512-BF16 (docs/benchmarks.md);
 * Intel's AVX512-BF16 without AMX is slower than float32, and emulation far slower. */
bool ag_bf16_faster(void);

/* Runs fn(ctx, begin, end) over [0, n) cut into one contiguous range per thread, the caller
 * taking the first, and returns when every range is done. With one thread, or n below
 * 2 * min_per_thread, or when called from inside another region, it is simply
 * fn(ctx, 0, n) in the caller. Ops called inside fn run serially in their thread, so a
 * region may run whole forward and backward passes, each on its own tape (see the trainer's
 * batch shards). fn must only write state that no other range touches. */
void ag_parallel_for(ptrdiff_t n, ptrdiff_t min_per_thread,
                     void (*fn)(void *ctx, ptrdiff_t begin, ptrdiff_t end), void *ctx);

/* ag_parallel_for for work whose results never depend on how [0, n) is cut (each index an
 * independent output: a row of a product, a row of a softmax, a batch and head). Outside a task
 * of ag_run_tasks it is ag_parallel_for(n, block, fn, ctx). Inside a task on two threads or
 * more, where ag_parallel_for runs serially, [0, n) is cut into blocks of `block` indices (the
 * last may be shorter) that the task's thread runs one at a time, and the call's threads that
 * have run out of tasks take blocks too: a step whose shards end unevenly (a slower core, a
 * longer shard) waits less for the last one. With fewer than two blocks it is fn(ctx, 0, n).
 * Which thread runs a block changes no bit, as long as fn keeps to the rule above. */
void ag_parallel_blocks(ptrdiff_t n, ptrdiff_t block,
                        void (*fn)(void *ctx, ptrdiff_t begin, ptrdiff_t end), void *ctx);

/* A task of ag_run_tasks: runs task `task` (0 to n - 1) on thread `thread` of the call (0: the
 * calling thread; 1 to ag_threads() - 1: the others; tasks running at the same time have
 * different threads, so per-thread state such as a tape can be indexed by it). Returns 0, or -1
 * with a message in ag_last_error. */
typedef int (*ag_task_fn)(void *ctx, int task, int thread);

enum { AG_TASK_DONE = 0, AG_TASK_FAILED = -1, AG_TASK_SKIPPED = 1 };
#define AG_TASK_ERROR_MAX 1024 /* ag_last_error's size */

/* How one task of ag_run_tasks ended. */
typedef struct ag_task_result {
    int status; /* AG_TASK_DONE, AG_TASK_FAILED, or AG_TASK_SKIPPED: not run (a task failed) */
    char error[AG_TASK_ERROR_MAX]; /* when failed: the task's ag_last_error, copied */
} ag_task_result;

/* Runs the n tasks fn(ctx, task, thread) on the engine's threads and returns when every one is
 * done: each task is taken whole by one thread, in order of index, by whichever thread is free
 * (the caller included), so results never depend on the number of threads as long as tasks only write state of
 * their own. Ops called inside a task run serially in its thread (as inside ag_parallel_for),
 * but for ag_parallel_blocks' blocks, which the call's threads whose tasks have ended may take;
 * with one task, or one thread, or when called from inside a region, the tasks simply run in
 * order in the caller. Once a task fails, no more tasks are taken (those taken run to their
 * end). Workers starved of CPU time take no task (the rule of ag_set_threads' pool: below 60%
 * of their wall time in two 10 ms windows in a row, they are left out for a while).
 * results (n, owned by the caller; may be NULL) receives each task's status and error. Returns
 * 0 when every task returned 0, else -1 with ag_last_error set to the error of the failed task
 * of lowest index (its message, unchanged). */
int ag_run_tasks(int n, ag_task_fn fn, void *ctx, ag_task_result *results);

/* For tests of the pool's starvation rule and of code run on it: with a hook, the rule stops
 * reading the clocks. Its time is now(user) (ns), and each range or task a worker runs counts
 * as one 10 ms window of wall time with as much CPU time, or with none when starved(worker,
 * user) (worker 1 to ag_threads() - 1; NULL: none) returns true: two such laps in a row leave
 * the workers out until now() has advanced by 250 ms (then 500 ms, doubling...). NULL restores
 * the clocks. Each call starts a new judgment (as ag_set_threads does). Call it between
 * regions. Returns 0, or -1 (ag_last_error) for a hook without a clock. */
typedef struct ag_starve_hook {
    int64_t (*now)(void *user);
    bool (*starved)(int worker, void *user);
    void *user;
} ag_starve_hook;
int ag_set_starve_hook(const ag_starve_hook *hook);
/* Workers asleep, waiting for a region (for tests that wake them). */
int ag_threads_asleep(void);

/* ---- The tape ----------------------------------------------------------------------------- */

/* Returns a new tape (NULL if out of memory); free it with ag_tape_free. Recording is on. */
ag_tape *ag_tape_new(void);
void ag_tape_free(ag_tape *t);
/* Frees every tensor made on the tape since the last reset, in O(1) (arena reset). After the
 * first steps the arena holds one chunk big enough for a whole step: no malloc in steady state. */
void ag_tape_reset(ag_tape *t);
/* Recording on: ops append backward nodes. Off (no-grad, e.g. inference): ops only compute.
 * Returns the previous setting. */
bool ag_tape_set_recording(ag_tape *t, bool on);
/* NaN tripwire: when on, every op checks its output and reports the first op producing a NaN
 * or an infinity. Off by default. Returns the previous setting. */
bool ag_tape_set_nan_check(ag_tape *t, bool on);
/* True once an op on this tape reported an error since the last reset. */
bool ag_tape_failed(const ag_tape *t);

/* Scratch memory for the step (e.g. integer arrays a model derives from its inputs): bytes
 * from the tape's arena, 64-byte aligned, valid until the next reset. NULL (reported) only when
 * out of memory. */
void *ag_tape_alloc(ag_tape *t, size_t bytes);

/* A position in the tape's arena (fields private), for freeing part of a step: e.g. a decoder
 * keeps what it computed once (the encoder's output, its caches) and drops each token's
 * intermediates. Marks nest like a stack.
 *
 *     ag_tape_pos mark = ag_tape_mark(t);     // after what must survive
 *     for (...) { y = step(...); copy what y holds that is needed; ag_tape_rewind(t, mark); }
 *
 * ag_tape_rewind frees everything allocated on the tape after the mark: tensors (their data and
 * gradients), recorded nodes and ag_tape_alloc scratch; what was allocated before the mark stays
 * valid. Tensors and pointers made after the mark become invalid: an op given such a tensor
 * reports it (as long as its memory has not been handed out again). Chunks the arena opened
 * after the mark are released, the largest kept for reuse, so a loop of steps and rewinds
 * mallocs nothing once warm. Rewind with recording off, or before ag_backward: a backward after
 * a rewind runs only the nodes recorded before the mark; a rewind after a backward frees the
 * gradient buffers it made (a retained grad it frees becomes NULL). The failed flag is kept
 * (only a reset clears it). A mark is valid until the next reset or a rewind to an earlier
 * mark. Returns 0, or -1 (reported, nothing changed) for a mark from before the last reset or
 * above the tape's current position; other invalid marks (rewound below, then passed again)
 * are not detected. */
typedef struct ag_tape_pos {
    size_t offset_;
    uint32_t reset_gen_;
} ag_tape_pos;
ag_tape_pos ag_tape_mark(const ag_tape *t);
int ag_tape_rewind(ag_tape *t, ag_tape_pos mark);

typedef struct ag_tape_stats {
    size_t bytes_used; /* arena bytes in use now (gradient buffers included) */
    size_t high_water; /* most arena bytes used by one step since the tape was made */
    size_t capacity;   /* arena bytes held */
    size_t chunks;     /* arena chunks held (1 in steady state) */
    size_t nodes;      /* nodes recorded since the last reset */
    size_t mallocs;    /* chunk allocations since the tape was made */
    size_t grad_bytes; /* arena bytes the backward took for intermediates' gradient buffers since
                        * the last reset (a buffer reused counts once) */
} ag_tape_stats;
ag_tape_stats ag_tape_stats_get(const ag_tape *t);

/* Reverse pass from a scalar root: seeds d root = 1 and accumulates into the grad of every leaf
 * that requires one. Intermediates' gradients live only during the pass: each buffer is taken
 * (zeroed) from the arena when the pass first needs it and given back for reuse once the op that
 * made the tensor has run its backward, so at most the gradients in flight exist at once. After
 * the pass an intermediate's grad is NULL unless ag_retain_grad kept it. Returns 0, or -1 after
 * reporting an error (root not scalar, root does not require a gradient, backward already run
 * on this tape since reset, out of memory for a gradient buffer). */
int ag_backward(ag_tape *t, ag_tensor *root);
/* The same from any root, seeding d root = seed (root->numel values, row-major order). */
int ag_backward_seed(ag_tape *t, ag_tensor *root, const ag_real *seed);
/* Keeps x's gradient past the next ag_backward (an intermediate's, which the pass otherwise
 * frees; for a view, the whole buffer of the tensor it views): after the pass x->grad points to
 * it (zeros when nothing flowed into x), valid until the tape's next reset. Call it after x is
 * made and before ag_backward. Nothing to do for a leaf, a view of one, or a tensor that tracks
 * no gradient (its grad stays NULL). Returns 0; -1 for NULL (no message), or after reporting: x
 * from an earlier step, backward already run, out of memory. */
int ag_retain_grad(ag_tensor *x);

/* ---- Tensors ------------------------------------------------------------------------------ */

/* New contiguous tensor on the tape, zero-filled, no gradient (input data, masks ...). */
ag_tensor *ag_tensor_new(ag_tape *t, int ndim, const int *shape);
/* The same, filled with a copy of src (numel values, row-major). */
ag_tensor *ag_tensor_from(ag_tape *t, int ndim, const int *shape, const ag_real *src);

/* A leaf the caller owns: one malloc holding the struct, zeroed data, and a zeroed grad when
 * requires_grad. Returns NULL on bad shape or out of memory. Free with ag_leaf_free. */
ag_tensor *ag_leaf_new(int ndim, const int *shape, bool requires_grad);
void ag_leaf_free(ag_tensor *x);
/* Makes *x a contiguous leaf viewing caller-owned memory (grad may be NULL); shape may point
 * into x itself. Returns 0, or -1 on a bad shape. The nn parameter store uses this to view its
 * flat buffers. */
int ag_leaf_init(ag_tensor *x, ag_real *data, ag_real *grad, int ndim, const int *shape);

bool ag_is_contiguous(const ag_tensor *x);
/* Writes "[2, 3, 4]" into buf (always NUL-terminated); returns buf. */
char *ag_shape_str(const ag_tensor *x, char *buf, size_t len);
/* Element at a row-major flat index i (0 <= i < numel), following the strides. */
ag_real ag_get(const ag_tensor *x, ptrdiff_t i);

/* ---- Ops --------------------------------------------------------------------------------- */
/* Each returns a tensor owned by the tape t, or NULL after an error. Inputs may be leaves or
 * tensors of t. Unless said otherwise the result is contiguous. */

/* Elementwise with NumPy broadcasting (backward sums over the broadcast axes). */
ag_tensor *ag_add(ag_tape *t, ag_tensor *a, ag_tensor *b);
ag_tensor *ag_sub(ag_tape *t, ag_tensor *a, ag_tensor *b);
ag_tensor *ag_mul(ag_tape *t, ag_tensor *a, ag_tensor *b);
ag_tensor *ag_div(ag_tape *t, ag_tensor *a, ag_tensor *b);
ag_tensor *ag_add_scalar(ag_tape *t, ag_tensor *x, double c); /* x + c */
ag_tensor *ag_scale(ag_tape *t, ag_tensor *x, double c);      /* x * c */
ag_tensor *ag_neg(ag_tape *t, ag_tensor *x);
ag_tensor *ag_exp(ag_tape *t, ag_tensor *x);
ag_tensor *ag_log(ag_tape *t, ag_tensor *x);
ag_tensor *ag_sqrt(ag_tape *t, ag_tensor *x);
ag_tensor *ag_tanh(ag_tape *t, ag_tensor *x);
ag_tensor *ag_sigmoid(ag_tape *t, ag_tensor *x);
ag_tensor *ag_relu(ag_tape *t, ag_tensor *x); /* gradient 0 at x = 0 */
/* GELU, the exact erf form (PyTorch's default): x * 0.5 * (1 + erf(x / sqrt 2)). */
ag_tensor *ag_gelu(ag_tape *t, ag_tensor *x);

/* More elementwise ops, PyTorch's definitions and gradients, kinks included (the math of each:
 * the head of autograd/ops_pointwise.c). Binary ones broadcast as ag_add. */
ag_tensor *ag_abs(ag_tape *t, ag_tensor *x);                  /* gradient 0 at x = 0 */
ag_tensor *ag_log1p(ag_tape *t, ag_tensor *x);                /* log(1 + x) */
ag_tensor *ag_pow_scalar(ag_tape *t, ag_tensor *x, double p); /* x^p; gradient 0 when p = 0 */
/* a^b; da = b a^(b-1) (0 where b = 0), db = a^b log a (0 where a = 0 and b >= 0). */
ag_tensor *ag_pow(ag_tape *t, ag_tensor *a, ag_tensor *b);
/* min(max(x, min), max); -INFINITY / INFINITY for no bound; min > max gives max everywhere.
 * The gradient passes where min <= x <= max, the bounds included (PyTorch). A NaN bound is
 * reported. */
ag_tensor *ag_clamp(ag_tape *t, ag_tensor *x, double min, double max);
/* Elementwise max / min (a NaN wins); where a == b the gradient is split in halves. */
ag_tensor *ag_maximum(ag_tape *t, ag_tensor *a, ag_tensor *b);
ag_tensor *ag_minimum(ag_tape *t, ag_tensor *a, ag_tensor *b);
/* cond ? a : b over the broadcast of the three; cond is a tensor, true where nonzero, and gets
 * no gradient (it may be a tensor of the tape or a leaf that requires none). */
ag_tensor *ag_where(ag_tape *t, ag_tensor *cond, ag_tensor *a, ag_tensor *b);
/* mask ? value : x, mask broadcast to x's shape (true where nonzero); the result has x's shape. */
ag_tensor *ag_masked_fill(ag_tape *t, ag_tensor *x, ag_tensor *mask, double value);
/* log(1 + exp(beta x)) / beta, and x where beta x > threshold (PyTorch: beta 1, threshold 20);
 * beta = 0 is reported. */
ag_tensor *ag_softplus(ag_tape *t, ag_tensor *x, double beta, double threshold);
ag_tensor *ag_silu(ag_tape *t, ag_tensor *x); /* x sigmoid(x) */
/* x for x > 0, negative_slope x else (PyTorch: 0.01); gradient negative_slope at 0. */
ag_tensor *ag_leaky_relu(ag_tape *t, ag_tensor *x, double negative_slope);
/* x for x > 0, alpha (exp(x) - 1) else (PyTorch: alpha 1); gradient alpha at 0. */
ag_tensor *ag_elu(ag_tape *t, ag_tensor *x, double alpha);

/* Matrix product on BLIS (the engine's own kernel for small products). a (..., M, K) and
 * b (..., K, N) with 0 to 2 leading batch axes, the same on both sides, -> (..., M, N); a 2-D
 * operand is shared by every batch. Operands are read through their strides, never copied:
 * a transposed view (ag_transpose) or a permuted one (heads split out of (B, T, h, d)) costs
 * nothing. */
ag_tensor *ag_matmul(ag_tape *t, ag_tensor *a, ag_tensor *b);
/* Fused dense layer: x (..., in), w (out, in) (row o: the weights of output o), bias (out) or
 * NULL -> (..., out), y = x w^T + bias. */
ag_tensor *ag_linear(ag_tape *t, ag_tensor *x, ag_tensor *w, ag_tensor *bias);

/* Shape ops. reshape, permute, transpose and narrow return views (sharing data and grad) when
 * the layout allows; reshape copies a non-contiguous input. One shape entry may be -1. */
ag_tensor *ag_reshape(ag_tape *t, ag_tensor *x, int ndim, const int *shape);
ag_tensor *ag_permute(ag_tape *t, ag_tensor *x, const int *perm); /* perm has x->ndim axes */
ag_tensor *ag_transpose(ag_tape *t, ag_tensor *x, int axis0, int axis1);
ag_tensor *ag_contiguous(ag_tape *t, ag_tensor *x); /* x itself when already contiguous */
ag_tensor *ag_narrow(ag_tape *t, ag_tensor *x, int axis, int start, int len);
/* Concatenation of n tensors along axis; all other dimensions must agree. */
ag_tensor *ag_concat(ag_tape *t, int n, ag_tensor *const *xs, int axis);
/* Each index along axis repeated `repeats` times in place (torch.repeat_interleave). */
ag_tensor *ag_repeat_interleave(ag_tape *t, ag_tensor *x, int repeats, int axis);
/* torch.stack: n >= 1 tensors of one shape, joined along a new axis at `axis` (in
 * [-(ndim+1), ndim]) -> ndim + 1 dimensions. */
ag_tensor *ag_stack(ag_tape *t, int n, ag_tensor *const *xs, int axis);
/* torch.index_select: the n entries index[j] in [0, x->shape[axis]) of x along axis, in order
 * (repeats allowed) -> x's shape with n along axis. Backward scatter-adds. index is copied. */
ag_tensor *ag_index_select(ag_tape *t, ag_tensor *x, int axis, const int32_t *index, int n);
/* torch.gather: index of x's rank (index_shape[d] <= x->shape[d] for d != axis, values in
 * [0, x->shape[axis])) -> index_shape, y[p] = x[p with p[axis] := index[p]]. Backward
 * scatter-adds. index is copied. */
ag_tensor *ag_gather(ag_tape *t, ag_tensor *x, int axis, const int32_t *index, int index_ndim,
                     const int *index_shape);
/* Row gather (embedding lookup): table (N, D), ids of shape ids_shape with values in [0, N)
 * -> (ids_shape..., D). Backward scatter-adds into the table's gradient. ids are copied. */
ag_tensor *ag_gather_rows(ag_tape *t, ag_tensor *table, const int32_t *ids, int ids_ndim,
                          const int *ids_shape);

/* Reductions over one axis (negative counts from the end) or over AG_ALL axes (-> scalar,
 * or all-ones shape with keepdim). max's gradient goes to the first maximal element. */
ag_tensor *ag_sum(ag_tape *t, ag_tensor *x, int axis, bool keepdim);
ag_tensor *ag_mean(ag_tape *t, ag_tensor *x, int axis, bool keepdim);
ag_tensor *ag_max(ag_tape *t, ag_tensor *x, int axis, bool keepdim);
/* torch.max(x, dim) / torch.min(x, dim): the extremum along one axis (AG_ALL is reported) and
 * its first index (a NaN counts as the extremum, as ag_argmax); the gradient goes to that index.
 * indices: NULL, or a caller-owned buffer of n_indices >= numel / shape[axis] values that gets
 * the indices in the result's row-major order. An empty axis is reported. */
ag_tensor *ag_max_dim(ag_tape *t, ag_tensor *x, int axis, bool keepdim, int32_t *indices,
                      size_t n_indices);
ag_tensor *ag_min_dim(ag_tape *t, ag_tensor *x, int axis, bool keepdim, int32_t *indices,
                      size_t n_indices);
/* torch.amax / amin: the extremum over one axis or AG_ALL; the gradient is split evenly between
 * the elements equal to it (ties). A NaN result (a NaN in the slice) gives every element of its
 * slice a NaN gradient, as PyTorch (no element equals NaN: dy / 0 * 0). */
ag_tensor *ag_amax(ag_tape *t, ag_tensor *x, int axis, bool keepdim);
ag_tensor *ag_amin(ag_tape *t, ag_tensor *x, int axis, bool keepdim);
/* log sum exp over one axis or AG_ALL, max-shifted (infinite maxima as PyTorch; an empty axis
 * gives -inf). */
ag_tensor *ag_logsumexp(ag_tape *t, ag_tensor *x, int axis, bool keepdim);
/* Variance and standard deviation over one axis or AG_ALL: sum (x - mean)^2 / max(0, n -
 * correction); correction 1 is unbiased (PyTorch's default), 0 biased. std's gradient is 0 where
 * std = 0. A non-finite correction is reported. */
ag_tensor *ag_var(ag_tape *t, ag_tensor *x, int axis, double correction, bool keepdim);
ag_tensor *ag_std(ag_tape *t, ag_tensor *x, int axis, double correction, bool keepdim);

/* Softmax and log-softmax over the last axis, max-subtracted. */
ag_tensor *ag_softmax(ag_tape *t, ag_tensor *x);
ag_tensor *ag_log_softmax(ag_tape *t, ag_tensor *x);
/* Masked softmax over the last axis of x (B, Tq, Tk): scores at key positions >= the valid
 * length are set to -1e6 before the softmax (so a row of valid length 0 is uniform, not NaN).
 * valid_lens: NULL (plain softmax), shape (B,) with vl_ndim 1 (one length per row b), or
 * (B, Tq) with vl_ndim 2 (one per query). The lengths are copied. */
ag_tensor *ag_masked_softmax(ag_tape *t, ag_tensor *x, const int32_t *valid_lens, int vl_ndim);

/* Inverted dropout, always applied: each element is zeroed with probability p in [0, 1] and
 * the rest scaled by 1 / (1 - p), drawing one value from rng (the mask is a counter hash keyed
 * by it, see ag_op.h); p = 0 returns x itself. Whether to drop at all (training or eval) is the
 * caller's decision (nn_dropout_forward). NULL (reported) for p outside [0, 1], or p > 0 and no
 * rng. */
ag_tensor *ag_dropout(ag_tape *t, ag_tensor *x, double p, ag_rng *rng);

/* Fused softmax cross-entropy: logits (..., V), labels (...) in [0, V), weights (...) or NULL
 * for ones -> per-position loss (...) = weight * (logsumexp(logits) - logits[label]).
 * labels and weights are copied. A masked sequence loss is ag_mean over the time axis of this,
 * with the valid-position mask (1 or 0) as weights. */
ag_tensor *ag_softmax_ce(ag_tape *t, ag_tensor *logits, const int32_t *labels,
                         const ag_real *weights);

/* ---- Losses (PyTorch's definitions and reductions) ----
 * How a loss reduces its per-position values l_i: AG_REDUCE_MEAN (0, the default) gives the
 * scalar sum_i l_i / D, D the number of elements (MSE, BCE, L1, smooth L1, Huber, KL) or the
 * sum of the weights of the positions not ignored (NLL, cross-entropy; D = 0 gives NaN, as
 * PyTorch); AG_REDUCE_SUM the
 * scalar sum_i l_i; AG_REDUCE_NONE the l_i themselves, in the positions' shape. Labels,
 * weights and pos_weight are copied. A label outside [0, C) (other than ignore_index) or
 * shapes that do not fit are reported, naming the op and both shapes.
 * AG_REDUCE_BATCHMEAN (ag_kl_div only; reported elsewhere) is the scalar sum_i l_i divided by
 * the batch size, the first dimension (1 for a scalar). */
typedef enum ag_reduction {
    AG_REDUCE_MEAN,
    AG_REDUCE_SUM,
    AG_REDUCE_NONE,
    AG_REDUCE_BATCHMEAN
} ag_reduction;

/* PyTorch's default ignore_index: no valid class has it, so passing it ignores nothing. */
#define AG_IGNORE_INDEX (-100)

/* Mean squared error: x and target of one shape (no broadcasting), l = (x - target)^2.
 * target may require a gradient too. */
ag_tensor *ag_mse_loss(ag_tape *t, ag_tensor *x, ag_tensor *target, ag_reduction reduction);
/* Binary cross-entropy on logits x, targets of x's shape (probabilities in [0, 1]; may require
 * a gradient), in PyTorch's stable form, p = pos_weight[c] for the class c = the last index
 * (NULL: p = 1; else x->shape[-1] values):
 *   l = (1 - y) x + (1 + (p - 1) y) (max(-x, 0) + log(1 + exp(-|x|)))
 *     = max(x, 0) - x y + log(1 + exp(-|x|))      when p = 1. */
ag_tensor *ag_bce_with_logits(ag_tape *t, ag_tensor *x, ag_tensor *target,
                              const ag_real *pos_weight, ag_reduction reduction);
/* Elementwise regression losses, x and target of one shape (no broadcasting; target may
 * require a gradient), d = x - target:
 *   l1:        l = |d|                                              gradient 0 at d = 0
 *   smooth_l1: l = 0.5 d^2 / beta if |d| < beta, else |d| - 0.5 beta  (beta >= 0; 0: l1)
 *   huber:     l = 0.5 d^2 if |d| <= delta, else delta (|d| - 0.5 delta)  (delta > 0)
 * PyTorch's l1_loss, smooth_l1_loss (default beta 1), huber_loss (default delta 1). */
ag_tensor *ag_l1_loss(ag_tape *t, ag_tensor *x, ag_tensor *target, ag_reduction reduction);
ag_tensor *ag_smooth_l1_loss(ag_tape *t, ag_tensor *x, ag_tensor *target, double beta,
                             ag_reduction reduction);
ag_tensor *ag_huber_loss(ag_tape *t, ag_tensor *x, ag_tensor *target, double delta,
                         ag_reduction reduction);
/* PyTorch's kl_div: input holds log-probabilities, target probabilities (log-probabilities when
 * log_target), one shape:
 *   l = target (log target - input), 0 where target = 0   (log_target false)
 *   l = exp(target) (target - input)                       (log_target true)
 * MEAN divides by numel (PyTorch's default, not the KL divergence), BATCHMEAN by the batch size
 * (the mathematical KL when input and target are rows of distributions). target may require a
 * gradient; where target = 0 (log_target false) it gets 0. */
ag_tensor *ag_kl_div(ag_tape *t, ag_tensor *input, ag_tensor *target, ag_reduction reduction,
                     bool log_target);
/* Negative log-likelihood on log-probabilities logp (..., C), labels (...) in [0, C):
 *   l = -w[label] logp[label], 0 where label == ignore_index;
 * class_weights (C) or NULL for ones; the mean divides by the sum of w[label] over the positions
 * not ignored. NONE gives (...). */
ag_tensor *ag_nll_loss(ag_tape *t, ag_tensor *logp, const int32_t *labels,
                       const ag_real *class_weights, int32_t ignore_index, ag_reduction reduction);
/* Fused softmax cross-entropy with label smoothing eps in [0, 1] (PyTorch's definition: eps
 * spread uniformly over ALL C classes), on logits (..., C), labels (...) in [0, C):
 *   l = w ((1 - eps) (lse - x[label]) + eps (lse - mean_c x[c])),  lse = log sum_c exp(x[c]),
 * 0 where label == ignore_index; weights: one per position (...) (e.g. a 1/0 mask), NULL for
 * ones; the mean divides by the sum of the weights of the positions not ignored. NONE gives
 * the per-position losses (...). With eps = 0, no ignored label and NONE it is ag_softmax_ce. */
ag_tensor *ag_cross_entropy(ag_tape *t, ag_tensor *logits, const int32_t *labels,
                            const ag_real *weights, double label_smoothing, int32_t ignore_index,
                            ag_reduction reduction);

/* ---- Values out of the engine (no tape, nothing recorded) ----
 * Both read any tensor (a leaf, a tensor of a tape, a strided view) in row-major order of its
 * shape; the caller owns out / dst, and what they hold stays valid after ag_tape_reset.
 * Return 0, or -1 (reported; nothing written) for a NULL tensor or buffer, a bad axis or a
 * buffer too small. */
/* Index of the maximum along axis (negative from the end): out gets numel / shape[axis]
 * indices, in row-major order of the other axes (capacity n). AG_ALL: one index into the
 * row-major flattening. Ties: the first maximal index; a NaN counts as the maximum (both as
 * PyTorch). An empty axis is refused. */
int ag_argmax(const ag_tensor *x, int axis, int32_t *out, size_t n);
/* Copies x's numel values into dst (capacity n >= numel elements), converting to float or
 * double; ag_copy_out copies ag_reals. */
int ag_copy_out(const ag_tensor *x, ag_real *dst, size_t n);
int ag_copy_out_f32(const ag_tensor *x, float *dst, size_t n);
int ag_copy_out_f64(const ag_tensor *x, double *dst, size_t n);

/* ---- Gradient checking (a library API: use it on your own ops and models) ---------------- */

/* Builds the function under test on tape t from the inputs (the same leaves every call) and
 * returns its output. It must be deterministic: reseed any RNG inside. */
typedef ag_tensor *(*ag_gradcheck_fn)(ag_tape *t, ag_tensor *const *inputs, void *user);

typedef struct ag_gradcheck_opts {
    double eps;      /* central-difference step; 0 -> 1e-6 (double) or 1e-2 (float) */
    double atol;     /* 0 -> 1e-6 (double) / 1e-2 (float) */
    double rtol;     /* 0 -> 1e-5 (double) / 5e-2 (float) */
    int max_elems;   /* elements checked per input, evenly spread; 0 -> all */
    bool skip_kinks; /* skip points whose one-sided differences disagree (ReLU at 0, ties) */
    uint64_t seed;   /* of the random projection; 0 -> a fixed default */
} ag_gradcheck_opts;

typedef struct ag_gradcheck_result {
    bool ok;
    int checked; /* elements compared */
    int skipped; /* elements skipped as kinks */
    double max_abs_err;
    char msg[512]; /* on failure: op, input, element, numeric and analytic values */
    /* What a report of the check needs (a row of the tables of docs/gradcheck.md):
     * with numeric n and analytic a of a checked element, |diff| = |n - a|, scale = max(|n|, |a|),
     * and an element passes when |diff| <= atol + rtol * scale. */
    char name[96];          /* the name given (truncated) */
    char shapes[160];       /* the inputs' shapes and the output's: "[4, 5] [6, 5] -> [3, 4]";
                         * an input that requires no gradient is marked "(const)" */
    int elems;              /* elements of the inputs that require a gradient (checked + skipped +
                         * those max_elems left out) */
    double max_rel_err;     /* max |diff| / scale over the checked elements with scale >= atol
                         * (below it the absolute tolerance rules); 0 when there are none */
    double worst;           /* max |diff| / (atol + rtol * scale): the check passes while <= 1 */
    double eps, atol, rtol; /* the knobs used, defaults filled in */
} ag_gradcheck_result;

/* Checks the gradients of the scalar L = sum(R * f(inputs)), R a fixed random normal
 * projection of the output, w.r.t. every input that requires a gradient, against central
 * differences. inputs must be contiguous leaves (ag_leaf_new or ag_leaf_init). opts may be
 * NULL. The inputs' data are restored and their grads hold the analytic gradient at return. */
ag_gradcheck_result ag_gradcheck(const char *name, ag_gradcheck_fn fn, int n_inputs,
                                 ag_tensor *const *inputs, void *user,
                                 const ag_gradcheck_opts *opts);

#ifdef __cplusplus
}
#endif

#endif
