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

struct ag_tape {
    chunk *head;       /* the newest chunk */
    chunk *spare;      /* a chunk a rewind dropped, kept for reuse, or NULL */
    size_t bytes_prev; /* bytes used in the older chunks (their `used`) */
    size_t floor;      /* position of the last rewind since the last reset (0: none) */
    size_t high_water;
    size_t mallocs;
    ag_node *last;
    size_t nodes;
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
        t->last = t->last->prev;
        t->nodes--;
    }
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
            ag_report(t, "%s: input %d is not a tensor (uninitialised or freed)", op, i);
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
    if (rg) {
        y->grad = ag_tape_calloc(t, bytes);
        if (!y->grad) return NULL;
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
     * through the shared memory, so a view needs no backward node. In no-grad mode the view
     * tracks nothing, like every other result. */
    if (x->requires_grad && x->grad && t->recording) {
        y->grad = x->grad + offset;
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
    /* root->grad shares the root's layout (it may be a view): seed through the strides. */
    if (ag_is_contiguous(root)) {
        for (ptrdiff_t i = 0; i < root->numel; i++) root->grad[i] += seed[i];
    } else {
        seed_strided(root, seed);
    }
    t->backward_done = true;
    for (ag_node *nd = t->last; nd; nd = nd->prev) nd->op->backward(nd);
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
