/* tape.c -- the step arena, the tape of nodes, and the reverse pass.
 *
 * The arena is a list of chunks. Allocation bumps a pointer in the newest chunk and opens a new
 * chunk (at least twice the previous capacity) when it is full. Reset keeps the memory: when a
 * step needed several chunks, they are replaced by one chunk of their total size, so from the
 * second step on a step fits one chunk and reset is O(1) with no malloc at all.
 *
 * Positions. The arena's bytes are numbered in allocation order: chunk c holds the offsets
 * [start(c), start(c) + c->used), start(head) = bytes_prev. A mark is such an offset; a rewind
 * drops every chunk that starts at or past it (the largest is kept as the spare, which the next
 * chunk to open reuses: a loop of step + rewind mallocs nothing once warm) and cuts the chunk
 * holding it back to it.
 *
 * Stale tensors. Every tensor carries the generation it was made in; reset and rewind start a
 * new one. A tensor is valid if it was made in the current generation, or, made since the last
 * reset, lies below the last rewind's position (`floor`): everything made before a mark
 * survives the rewind to it, everything made after it does not.
 *
 * Gradient buffers of intermediates. An op's result that requires a gradient gets no buffer when
 * it is made (grad NULL, grad_base = itself; a view of it: grad_base = the viewed tensor's base,
 * grad_offset its offset there). The reverse pass gives a base its buffer, zeroed, when it first
 * needs it: before running a node's backward it makes the grad of the node's output and of its
 * inputs that require one valid (a view's: its base's buffer + offset). Once the node that made
 * a base has run its backward, no later node can read that buffer (every consumer of the base
 * or of its views was recorded after it, so its backward ran before), and it goes back into
 * a free list of the arena, one bin per byte size, for the next buffer of that size. A view's
 * grad is set only around the backwards that use it (NULL in between), so no pointer outlives
 * its buffer. ag_retain_grad marks a base whose buffer is never given back.
 */
#include "autograd/ag_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define ARENA_ALIGN 64
#define ARENA_FIRST_CHUNK ((size_t)1 << 20)

typedef struct chunk {
    struct chunk *next; /* older chunk */
    size_t cap, used;
    unsigned char *base; /* ARENA_ALIGN-aligned start of the usable bytes */
} chunk;

/* Free gradient buffers of one byte size; each free buffer starts with the pointer to the next. */
typedef struct grad_bin {
    struct grad_bin *next;
    size_t bytes;
    void *free;
} grad_bin;

/* A tensor given to ag_retain_grad (newest first). */
typedef struct retained {
    struct retained *next;
    ag_tensor *x;
} retained;

struct ag_tape {
    chunk *head;       /* the newest chunk */
    chunk *spare;      /* a chunk a rewind dropped, kept for reuse, or NULL */
    size_t bytes_prev; /* bytes used in the older chunks (their `used`) */
    size_t floor;      /* position of the last rewind since the last reset (0: none) */
    size_t high_water;
    size_t mallocs;
    ag_node *last;
    size_t nodes;
    grad_bin *bins;     /* the free gradient buffers, in the arena */
    retained *retained; /* in the arena */
    size_t grad_bytes;  /* arena bytes taken by gradient buffers since the last reset */
    uint32_t gen;       /* generation of the tensors made now */
    uint32_t reset_gen; /* generation started by the last reset */
    bool recording, nan_check, failed, backward_done;
};

static chunk *chunk_new(ag_tape *t, size_t cap) {
    chunk *c = malloc(sizeof *c + cap + ARENA_ALIGN);
    if (!c) return NULL;
    uintptr_t p = (uintptr_t)(c + 1);
    c->base = (unsigned char *)((p + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1));
    c->cap = cap;
    c->used = 0;
    c->next = NULL;
    t->mallocs++;
    return c;
}

ag_tape *ag_tape_new(void) {
    ag_tape *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->head = chunk_new(t, ARENA_FIRST_CHUNK);
    if (!t->head) {
        free(t);
        return NULL;
    }
    t->recording = true;
    t->gen = t->reset_gen = 1;
    return t;
}

static void chunks_free(chunk *c) {
    for (chunk *next; c; c = next) {
        next = c->next;
        free(c);
    }
}

void ag_tape_free(ag_tape *t) {
    if (!t) return;
    chunks_free(t->head);
    free(t->spare);
    free(t);
}

static size_t bytes_used(const ag_tape *t) { return t->bytes_prev + t->head->used; }

static void note_high_water(ag_tape *t) {
    size_t used = bytes_used(t);
    if (used > t->high_water) t->high_water = used;
}

void ag_tape_reset(ag_tape *t) {
    note_high_water(t);
    if (t->head->next || t->spare) { /* several chunks: coalesce into one that holds a whole step */
        size_t total = t->spare ? t->spare->cap : 0;
        for (chunk *c = t->head; c; c = c->next) total += c->cap;
        chunk *one = chunk_new(t, total);
        if (one) {
            chunks_free(t->head);
            free(t->spare);
            t->spare = NULL;
            t->head = one;
        } else { /* keep the chunks; still correct, just not coalesced */
            for (chunk *c = t->head; c; c = c->next) c->used = 0;
        }
    }
    t->head->used = 0;
    t->bytes_prev = 0;
    t->floor = 0;
    t->last = NULL;
    t->nodes = 0;
    t->bins = NULL;
    t->retained = NULL;
    t->grad_bytes = 0;
    t->reset_gen = ++t->gen;
    t->failed = false;
    t->backward_done = false;
}

/* Where p stands in t's arena: 1 inside the bytes handed out (*off: its position), -1 inside the
 * arena (the spare included) but past them (freed by a reset or a rewind), 0 outside the arena.
 * Reads no tensor memory. */
static int arena_where(const ag_tape *t, const void *p, size_t *off) {
    const unsigned char *q = p;
    size_t start = t->bytes_prev;
    for (const chunk *c = t->head; c; c = c->next) {
        if (q >= c->base && q < c->base + c->cap) {
            *off = start + (size_t)(q - c->base);
            return q < c->base + c->used ? 1 : -1;
        }
        if (c->next) start -= c->next->used;
    }
    const chunk *s = t->spare;
    return s && q >= s->base && q < s->base + s->cap ? -1 : 0;
}

ag_tape_pos ag_tape_mark(const ag_tape *t) {
    return (ag_tape_pos){.offset_ = bytes_used(t), .reset_gen_ = t->reset_gen};
}

int ag_tape_rewind(ag_tape *t, ag_tape_pos mark) {
    if (mark.reset_gen_ != t->reset_gen || mark.offset_ > bytes_used(t)) {
        ag_report(t, "ag_tape_rewind: the mark is no longer on the tape (taken before the last "
                     "reset, or above a position the tape was rewound to since)");
        return -1;
    }
    note_high_water(t);
    size_t off;
    while (t->last && arena_where(t, t->last, &off) > 0 && off >= mark.offset_) {
        TG_ASSERT(t->nodes > 0);
        t->last = t->last->prev;
        t->nodes--;
    }
    for (retained *r = t->retained; r; r = r->next) { /* kept buffers past the mark go */
        ag_tensor *x = r->x, *b = x->grad_base;
        if (x->grad && arena_where(t, x->grad, &off) > 0 && off >= mark.offset_) x->grad = NULL;
        if (b->grad && arena_where(t, b->grad, &off) > 0 && off >= mark.offset_) b->grad = NULL;
    }
    while (t->retained && arena_where(t, t->retained, &off) > 0 && off >= mark.offset_)
        t->retained = t->retained->next;
    t->bins = NULL; /* free buffers may lie past the mark: start the lists anew */
    while (t->head->next && t->bytes_prev >= mark.offset_) { /* chunks opened after the mark */
        chunk *c = t->head;
        t->head = c->next;
        t->bytes_prev -= t->head->used;
        c->next = NULL;
        if (t->spare && t->spare->cap >= c->cap) {
            free(c);
        } else {
            free(t->spare);
            t->spare = c;
        }
    }
    TG_ASSERT(mark.offset_ >= t->bytes_prev && mark.offset_ - t->bytes_prev <= t->head->cap);
    t->head->used = mark.offset_ - t->bytes_prev;
    t->floor = mark.offset_;
    t->gen++;
    return 0;
}

void *ag_tape_alloc(ag_tape *t, size_t bytes) {
    bytes = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (bytes == 0) bytes = ARENA_ALIGN;
    chunk *c = t->head;
    if (c->cap - c->used < bytes) {
        size_t cap = c->cap * 2 > bytes ? c->cap * 2 : bytes;
        chunk *nc = t->spare && t->spare->cap >= bytes ? t->spare : chunk_new(t, cap);
        if (!nc)
            return ag_report(t, "out of memory: the tape's arena could not grow by %zu bytes", cap);
        if (nc == t->spare) t->spare = NULL;
        nc->used = 0;
        nc->next = c;
        t->bytes_prev += c->used;
        t->head = c = nc;
    }
    void *p = c->base + c->used;
    c->used += bytes;
    TG_ASSERT(c->used <= c->cap && ((uintptr_t)p & (ARENA_ALIGN - 1)) == 0);
    return p;
}


void *ag_tape_calloc(ag_tape *t, size_t bytes) {
    void *p = ag_tape_alloc(t, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

bool ag_tape_set_recording(ag_tape *t, bool on) {
    bool prev = t->recording;
    t->recording = on;
    return prev;
}

bool ag_tape_set_nan_check(ag_tape *t, bool on) {
    bool prev = t->nan_check;
    t->nan_check = on;
    return prev;
}

bool ag_tape_failed(const ag_tape *t) { return t->failed; }

ag_tape_stats ag_tape_stats_get(const ag_tape *t) {
    ag_tape_stats s = {0};
    s.bytes_used = bytes_used(t);
    s.high_water = s.bytes_used > t->high_water ? s.bytes_used : t->high_water;
    for (const chunk *c = t->head; c; c = c->next) {
        s.capacity += c->cap;
        s.chunks++;
    }
    if (t->spare) {
        s.capacity += t->spare->cap;
        s.chunks++;
    }
    s.nodes = t->nodes;
    s.mallocs = t->mallocs;
    s.grad_bytes = t->grad_bytes;
    return s;
}

/* ---- validation ---- */

void ag__mark_failed(ag_tape *t) {
    if (t) t->failed = true;
}

/* A tensor at arena position off made in generation x->gen is still valid (see the head). */
static bool gen_valid(const ag_tape *t, const ag_tensor *x, size_t off) {
    return x->gen == t->gen || (off < t->floor && (uint32_t)(x->gen - t->reset_gen) <
                                                      (uint32_t)(t->gen - t->reset_gen));
}

bool ag_op_check(ag_tape *t, const char *op, int n, ag_tensor *const *in) {
    for (int i = 0; i < n; i++) {
        if (!in[i]) return false;
    }
    if (!t) {
        ag_report(NULL, "%s: no tape given", op);
        return false;
    }
    for (int i = 0; i < n; i++) {
        const ag_tensor *x = in[i];
        size_t off = 0;
        int where = arena_where(t, x, &off);
        /* a leaf may live in the arena (a header in ag_tape_alloc memory): no generation */
        if (where < 0 ||
            (where > 0 && (x->magic != AG_MAGIC || (x->tape && !gen_valid(t, x, off))))) {
            ag_report(t,
                      "%s: input %d was made before the tape was last reset, or after the "
                      "mark it was rewound to (a tensor of an earlier step)",
                      op, i);
            return false;
        }
        if (x->magic != AG_MAGIC) {
            ag_report(t,
                      "%s: input %d is not a tensor with data: a parameter of a store not "
                      "finalized yet (call nn_params_finalize before a forward), or a tensor "
                      "uninitialised or freed",
                      op, i);
            return false;
        }
        if (x->tape && x->tape != t) {
            ag_report(t, "%s: input %d belongs to another tape", op, i);
            return false;
        }
    }
    return true;
}

/* ---- results ---- */

bool ag_op_wants_grad(const ag_tape *t, int n, ag_tensor *const *in) {
    if (!t->recording) return false;
    for (int i = 0; i < n; i++) {
        if (in[i]->requires_grad) return true;
    }
    return false;
}

static ag_tensor *tensor_header(ag_tape *t, int ndim, const int *shape) {
    TG_ASSERT(ndim >= 0 && ndim <= AG_MAX_DIMS); /* the op validated its shapes */
    ag_tensor *y = ag_tape_alloc(t, sizeof *y);
    if (!y) return NULL;
    memset(y, 0, sizeof *y);
    y->ndim = ndim;
    memcpy(y->shape, shape, (size_t)ndim * sizeof *shape);
    y->numel = ag_numel(ndim, shape);
    y->tape = t;
    y->gen = t->gen;
    y->magic = AG_MAGIC;
    return y;
}

ag_tensor *ag_op_new(ag_tape *t, int ndim, const int *shape, bool rg) {
    ag_tensor *y = tensor_header(t, ndim, shape);
    if (!y) return NULL;
    ag_contig_strides(ndim, shape, y->stride);
    size_t bytes = (size_t)y->numel * sizeof(ag_real);
    y->data = ag_tape_alloc(t, bytes);
    if (!y->data) return NULL;
    if (rg) { /* its buffer comes in the reverse pass (see the head) */
        y->grad_base = y;
        y->requires_grad = true;
    }
    return y;
}

ag_tensor *ag_op_out(ag_tape *t, int ndim, const int *shape, int n, ag_tensor *const *in) {
    return ag_op_new(t, ndim, shape, ag_op_wants_grad(t, n, in));
}

ag_tensor *ag_op_view(ag_tape *t, ag_tensor *x, int ndim, const int *shape, const ptrdiff_t *stride,
                      ptrdiff_t offset) {
    ag_tensor *y = tensor_header(t, ndim, shape);
    if (!y) return NULL;
    memcpy(y->stride, stride, (size_t)ndim * sizeof *stride);
    y->data = x->data + offset;
    /* A view of a tensor whose gradient is tracked shares it: gradients flow into the base
     * through the shared memory, so a view needs no backward node. A leaf's grad is there now;
     * an intermediate's buffer comes in the reverse pass (see the head). In no-grad mode the
     * view tracks nothing, like every other result. */
    if (x->requires_grad && (x->grad_base || x->grad) && t->recording) {
        if (x->grad_base) {
            y->grad_base = x->grad_base;
            y->grad_offset = x->grad_offset + offset;
        } else {
            y->grad = x->grad + offset;
        }
        y->requires_grad = true;
    }
    y->name = x->name;
    return y;
}

static bool all_finite(const ag_tensor *y) {
    for (ptrdiff_t i = 0; i < y->numel; i++) {
        if (!isfinite(ag_get(y, i))) return false;
    }
    return true;
}

ag_node *ag_op_record(ag_tape *t, const ag_op *op, ag_tensor *y, int n, ag_tensor *const *in,
                      size_t saved_bytes) {
    if (t->nan_check && !all_finite(y)) {
        char s[64];
        ag_report(t, "%s: produced a NaN or an infinity (output %s)", op->name,
                  ag_shape_str(y, s, sizeof s));
    }
    if (!y->requires_grad) return NULL;
    ag_node *nd = ag_tape_alloc(t, sizeof *nd + (size_t)n * sizeof(ag_tensor *));
    if (!nd) return NULL;
    nd->op = op;
    nd->out = y;
    nd->in = (ag_tensor **)(nd + 1);
    memcpy(nd->in, in, (size_t)n * sizeof *in);
    nd->n_in = n;
    nd->saved = saved_bytes ? ag_tape_calloc(t, saved_bytes) : NULL;
    nd->prev = t->last;
    t->last = nd;
    t->nodes++;
    return nd;
}

/* ---- gradient buffers of intermediates (see the head) ---- */

static size_t grad_size(const ag_tensor *base) {
    size_t bytes = (size_t)base->numel * sizeof(ag_real);
    bytes = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    return bytes ? bytes : ARENA_ALIGN;
}

static grad_bin *grad_bin_of(const ag_tape *t, size_t bytes) {
    grad_bin *b = t->bins;
    while (b && b->bytes != bytes) b = b->next;
    return b;
}

/* A zeroed buffer of `bytes` (a grad_size): a free one of that size, else new arena memory (and
 * the bin it will go back to). NULL (reported) when out of memory. */
static ag_real *grad_take(ag_tape *t, size_t bytes) {
    grad_bin *b = grad_bin_of(t, bytes);
    void *p = b ? b->free : NULL;
    if (p) {
        b->free = *(void **)p;
    } else {
        if (!b) {
            if (!(b = ag_tape_alloc(t, sizeof *b))) return NULL;
            *b = (grad_bin){t->bins, bytes, NULL};
            t->bins = b;
        }
        if (!(p = ag_tape_alloc(t, bytes))) return NULL;
        t->grad_bytes += bytes;
    }
    return memset(p, 0, bytes);
}

/* Puts p, a grad_take buffer of `bytes` of this pass, into its bin's free list. */
static void grad_give(ag_tape *t, void *p, size_t bytes) {
    grad_bin *b = grad_bin_of(t, bytes); /* made by the grad_take that gave p */
    TG_ASSERT(b && p);
    *(void **)p = b->free;
    b->free = p;
}

/* Makes x->grad valid: its base's buffer (taken now if it has none) + x's offset. Nothing to do
 * for a leaf or a view of one. False (reported) when out of memory. */
static bool grad_ready(ag_tape *t, ag_tensor *x) {
    ag_tensor *b = x->grad_base;
    if (!b) return true;
    if (!b->grad && !(b->grad = grad_take(t, grad_size(b)))) return false;
    TG_ASSERT(x->grad_offset >= 0 && x->grad_offset <= b->numel); /* a view lies in its base */
    x->grad = b->grad + x->grad_offset;
    return true;
}

/* After a backward that used x: a view's grad is unset again (its base's buffer may go). */
static void grad_unset_view(ag_tensor *x) {
    if (x->grad_base && x->grad_base != x) x->grad = NULL;
}

/* After the backward of the node that made y: y's buffer goes back to the free list, unless
 * retained (or y is a view, whose base's node has not run yet). */
static void grad_release(ag_tape *t, ag_tensor *y) {
    if (y->grad_base == y && y->grad && !y->grad_retained) {
        grad_give(t, y->grad, grad_size(y));
        y->grad = NULL;
    }
    grad_unset_view(y);
}

int ag_retain_grad(ag_tensor *x) {
    if (!x) return -1;
    if (!x->grad_base) return 0;
    ag_tape *t = x->tape;
    if (!ag_op_check(t, "retain_grad", 1, &x)) return -1;
    if (t->backward_done) {
        ag_report(t, "retain_grad: backward already ran on this tape; retain before ag_backward");
        return -1;
    }
    retained *r = ag_tape_alloc(t, sizeof *r);
    if (!r) return -1;
    *r = (retained){t->retained, x};
    t->retained = r;
    x->grad_base->grad_retained = true;
    return 0;
}

/* ---- reverse pass ---- */

/* root->grad += seed, seed in row-major order, root a strided view. */
static void seed_strided(ag_tensor *root, const ag_real *seed) {
    ptrdiff_t contig[AG_MAX_DIMS];
    ag_contig_strides(root->ndim, root->shape, contig);
    ag_iter it;
    ag_iter_init(&it, root->ndim, root->shape, 2, (const ptrdiff_t *[]){root->stride, contig});
    for (ptrdiff_t r = 0; r < it.outer; r++, ag_iter_next(&it)) {
        for (ptrdiff_t j = 0; j < it.inner; j++)
            root->grad[it.off[0] + j * it.is[0]] += seed[it.off[1] + j * it.is[1]];
    }
}

/* Set by ag_op_fail_backward during the node's backward (on the thread running the pass). */
static _Thread_local bool backward_failed;

void ag_op_fail_backward(void) { backward_failed = true; }

int ag_backward_seed(ag_tape *t, ag_tensor *root, const ag_real *seed) {
    if (!ag_op_check(t, "backward", 1, &root)) {
        if (!root) ag_report(t, "backward: the root is NULL (an op of the forward pass failed)");
        return -1;
    }
    if (t->backward_done) {
        ag_report(t, "backward: already run on this tape; reset the tape before the next step");
        return -1;
    }
    if (!root->requires_grad) {
        ag_report(t, "backward: the root does not require a gradient (no input tracked one, or "
                     "it was computed with recording off)");
        return -1;
    }
    t->backward_done = true;
    if (!grad_ready(t, root)) return -1;
    /* root->grad shares the root's layout (it may be a view): seed through the strides. */
    if (ag_is_contiguous(root)) {
        for (ptrdiff_t i = 0; i < root->numel; i++) root->grad[i] += seed[i];
    } else {
        seed_strided(root, seed);
    }
    grad_unset_view(root);
    for (ag_node *nd = t->last; nd; nd = nd->prev) {
        if (!grad_ready(t, nd->out)) return -1;
        for (int i = 0; i < nd->n_in; i++)
            if (nd->in[i]->requires_grad && !grad_ready(t, nd->in[i])) return -1;
        backward_failed = false;
        nd->op->backward(nd);
        if (backward_failed) {
            ag_report(t, "backward: %s: %s", nd->op->name, ag_last_error());
            return -1;
        }
        for (int i = 0; i < nd->n_in; i++) grad_unset_view(nd->in[i]);
        grad_release(t, nd->out);
    }
    for (retained *r = t->retained; r; r = r->next)
        if (!grad_ready(t, r->x)) return -1;
    return 0;
}

int ag_backward(ag_tape *t, ag_tensor *root) {
    if (root && root->numel != 1) {
        char s[64];
        ag_report(t, "backward: the root must be a scalar, got shape %s",
                  ag_shape_str(root, s, sizeof s));
        return -1;
    }
    const ag_real one = 1;
    return ag_backward_seed(t, root, &one);
}
