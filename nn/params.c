/* params.c -- the parameter store: registration, finalize (flat buffers + views), lookup;
 * non-trainable buffers beside the parameters (their own allocation, outside the flat range
 * the optimizers walk). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/internal.h"

/* Offsets are rounded up to this many elements (64 bytes in float32). */
#define NN_ALIGN_ELEMS 16
#define NN_ERR_LEN 1024

typedef struct param_rec {
    ag_tensor t;            /* returned to the layer; its address is stable */
    char name[NN_NAME_MAX]; /* t.name points here */
    nn_init init;
    size_t offset; /* into the flat buffers, or into `buffers` (set at finalize) */
    bool buffer;   /* a non-trainable buffer (nn_params_add_buffer) */
} param_rec;

/* A growable array of records. */
typedef struct rec_list {
    param_rec **r;
    size_t n, cap;
} rec_list;

struct nn_params {
    rec_list all;            /* every tensor, registration order; owns the records */
    rec_list params;         /* the trainable ones (all minus the buffers), same order */
    size_t numel;            /* sum of the parameters' numel, padding excluded */
    size_t flat;             /* buffer length in elements, padding included */
    ag_real *values, *grads; /* flat buffers of the parameters, NULL before finalize */
    ag_real *buffers;        /* values of the buffers (no gradient), NULL before finalize */
    void *grads_mem;         /* the allocation grads lies in (alloc_zeroed) */
    bool finalized;
    bool shares_values; /* values belong to another store (nn_params_share_values) */
    bool failed;        /* sticky: first registration error, reported by finalize */
    char err[NN_ERR_LEN];
};

nn_params *nn_params_new(void) {
    nn_params *ps = calloc(1, sizeof *ps);
    if (!ps) ag_error("nn_params_new: out of memory");
    return ps;
}

void nn_params_free(nn_params *ps) {
    if (!ps) return;
    for (size_t i = 0; i < ps->all.n; i++) free(ps->all.r[i]);
    free(ps->all.r);
    free(ps->params.r);
    if (!ps->shares_values) free(ps->values);
    free(ps->grads_mem);
    free(ps->buffers);
    free(ps);
}

/* Records msg as the store's sticky error (the first one wins) and as ag_last_error. */
static int store_fail_msg(nn_params *ps, const char *msg) {
    if (!ps->failed) {
        ps->failed = true;
        snprintf(ps->err, sizeof ps->err, "%s", msg);
    }
    return ag_error("%s", msg);
}

int nn_params_fail(nn_params *ps, const char *fmt, ...) {
    char msg[NN_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!ps) return ag_error("%s", msg);
    return store_fail_msg(ps, msg);
}

static param_rec *find_rec(const nn_params *ps, const char *name) {
    for (size_t i = 0; i < ps->all.n; i++)
        if (strcmp(ps->all.r[i]->name, name) == 0) return ps->all.r[i];
    return NULL;
}

/* Makes room for one more record in l; false when out of memory. */
static bool list_reserve(rec_list *l) {
    if (l->n < l->cap) return true;
    size_t cap = l->cap ? 2 * l->cap : 16;
    param_rec **r = realloc(l->r, cap * sizeof *r);
    if (!r) return false;
    l->r = r;
    l->cap = cap;
    return true;
}

/* Registers a parameter (buffer false) or a buffer; messages name the public function. */
static ag_tensor *add_rec(nn_params *ps, const char *prefix, const char *name, int ndim,
                          const int *shape, nn_init init, bool buffer) {
    const char *fn = buffer ? "nn_params_add_buffer" : "nn_params_add";
    const char *kind = buffer ? "buffer" : "parameter";
    char full[NN_NAME_MAX], msg[NN_ERR_LEN], s[96];
    if (!ps) {
        ag_error("%s: store is NULL", fn);
        return NULL;
    }
    if (!name || !name[0]) {
        nn_params_fail(ps, "%s: empty %s name (prefix '%s')", fn, kind, prefix ? prefix : "(null)");
        return NULL;
    }
    if (!prefix) {
        nn_params_fail(ps,
                       "%s: prefix is NULL for %s '%s' (a prefix built by nn_join that "
                       "did not fit in its buffer?)",
                       fn, kind, name);
        return NULL;
    }
    int len = prefix[0] ? snprintf(full, sizeof full, "%s.%s", prefix, name)
                        : snprintf(full, sizeof full, "%s", name);
    if (len < 0 || (size_t)len >= sizeof full) {
        nn_params_fail(ps, "%s: name '%s.%s' is longer than %d characters", fn, prefix, name,
                       NN_NAME_MAX - 1);
        return NULL;
    }
    if (ps->finalized) {
        nn_params_fail(ps, "%s: %s '%s' registered after nn_params_finalize", fn, kind, full);
        return NULL;
    }
    if (find_rec(ps, full)) {
        nn_params_fail(ps, "%s: duplicate %s name '%s'", fn, kind, full);
        return NULL;
    }
    if (ndim < 0 || ndim > AG_MAX_DIMS || (ndim > 0 && !shape)) {
        nn_params_fail(ps, "%s: %s '%s': ndim %d, expected 0 to %d", fn, kind, full, ndim,
                       AG_MAX_DIMS);
        return NULL;
    }
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0 || numel > (size_t)PTRDIFF_MAX / sizeof(ag_real) / (size_t)shape[i]) {
            nn_params_fail(ps, "%s: %s '%s': bad shape %s (dims must be > 0)", fn, kind, full,
                           nn_shape_fmt(s, sizeof s, ndim, shape));
            return NULL;
        }
        numel *= (size_t)shape[i];
    }
    if (nn_init_check(init, full, ndim, shape, msg, sizeof msg)) {
        store_fail_msg(ps, msg);
        return NULL;
    }
    param_rec *rec = NULL;
    if (!list_reserve(&ps->all) || (!buffer && !list_reserve(&ps->params)) ||
        !(rec = calloc(1, sizeof *rec))) {
        nn_params_fail(ps, "%s: out of memory registering '%s'", fn, full);
        return NULL;
    }
    memcpy(rec->name, full, (size_t)len + 1);
    rec->init = init;
    rec->buffer = buffer;
    /* Until finalize the tensor carries shape and name only (data == grad == NULL). */
    rec->t.ndim = ndim;
    ptrdiff_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        rec->t.shape[i] = shape[i];
        rec->t.stride[i] = stride;
        stride *= shape[i];
    }
    rec->t.numel = (ptrdiff_t)numel;
    rec->t.requires_grad = !buffer;
    rec->t.name = rec->name;
    ps->all.r[ps->all.n++] = rec;
    if (!buffer) {
        ps->params.r[ps->params.n++] = rec;
        ps->numel += numel;
    }
    return &rec->t;
}

ag_tensor *nn_params_add(nn_params *ps, const char *prefix, const char *name, int ndim,
                         const int *shape, nn_init init) {
    return add_rec(ps, prefix, name, ndim, shape, init, false);
}

ag_tensor *nn_params_add_buffer(nn_params *ps, const char *prefix, const char *name, int ndim,
                                const int *shape, nn_init init) {
    return add_rec(ps, prefix, name, ndim, shape, init, true);
}

int nn_params_set_init(nn_params *ps, ag_tensor *p, nn_init init) {
    char msg[NN_ERR_LEN];
    if (!ps || !p) return ag_error("nn_params_set_init: NULL argument");
    param_rec *rec = NULL;
    for (size_t i = 0; i < ps->all.n && !rec; i++)
        if (&ps->all.r[i]->t == p) rec = ps->all.r[i];
    if (!rec)
        return nn_params_fail(ps,
                              "nn_params_set_init: tensor '%s' is not a parameter or buffer "
                              "of this store",
                              p->name ? p->name : "(unnamed)");
    if (ps->finalized)
        return nn_params_fail(ps,
                              "nn_params_set_init: parameter '%s': store already "
                              "finalized (use nn_params_reinit or write the values)",
                              rec->name);
    if (nn_init_check(init, rec->name, rec->t.ndim, rec->t.shape, msg, sizeof msg))
        return store_fail_msg(ps, msg);
    rec->init = init;
    return 0;
}

/* Runs every initialiser (parameters and buffers) in registration order from one rng seeded
 * with `seed`. */
static int run_inits(nn_params *ps, uint64_t seed) {
    ag_rng rng;
    ag_rng_seed(&rng, seed);
    for (size_t i = 0; i < ps->all.n; i++) {
        param_rec *r = ps->all.r[i];
        if (nn_init_fill(r->init, r->t.data, r->t.ndim, r->t.shape, &rng)) {
            char msg[NN_ERR_LEN]; /* copied: ag_last_error's buffer is rewritten below */
            snprintf(msg, sizeof msg, "%s", ag_last_error());
            return ag_error("%s '%s': %s", r->buffer ? "buffer" : "parameter", r->name, msg);
        }
    }
    return 0;
}

static ag_real *alloc_flat(size_t n) {
    size_t bytes = n * sizeof(ag_real); /* a multiple of 64: n is a multiple of 16 */
    ag_real *p = aligned_alloc(64, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

/* n zeros, 64-byte aligned, in *mem's allocation: calloc, which leaves a large block's pages
 * untouched (fresh from the system, already zero) until they are written, so a store only
 * used for inference never holds its gradients in memory. */
static ag_real *alloc_zeroed(size_t n, void **mem) {
    unsigned char *p = calloc(n * sizeof(ag_real) + 64, 1);
    *mem = p;
    return p ? (ag_real *)(p + (64 - (uintptr_t)p % 64) % 64) : NULL;
}

/* nn_params_finalize up to the initialisers. */
int nn_params_finalize_zero(nn_params *ps) {
    if (!ps) return ag_error("nn_params_finalize: store is NULL");
    if (ps->failed) return ag_error("%s", ps->err);
    if (ps->finalized) return ag_error("nn_params_finalize: store already finalized");
    /* Parameters and buffers each laid out in their own range, in registration order. */
    size_t off = 0, boff = 0;
    for (size_t i = 0; i < ps->all.n; i++) {
        param_rec *r = ps->all.r[i];
        size_t *o = r->buffer ? &boff : &off;
        r->offset = *o;
        *o += ((size_t)r->t.numel + NN_ALIGN_ELEMS - 1) / NN_ALIGN_ELEMS * NN_ALIGN_ELEMS;
    }
    ps->flat = off;
    if (off > 0) {
        ps->values = alloc_flat(off);
        ps->grads = alloc_zeroed(off, &ps->grads_mem);
    }
    if (boff > 0) ps->buffers = alloc_flat(boff);
    if ((off > 0 && (!ps->values || !ps->grads)) || (boff > 0 && !ps->buffers)) {
        free(ps->values);
        free(ps->grads_mem);
        free(ps->buffers);
        ps->values = ps->grads = ps->buffers = NULL;
        ps->grads_mem = NULL;
        return ag_error("nn_params_finalize: out of memory for %zu parameters (%zu bytes, "
                        "twice) and %zu buffer elements",
                        ps->numel, off * sizeof(ag_real), boff);
    }
    for (size_t i = 0; i < ps->all.n; i++) {
        param_rec *r = ps->all.r[i];
        int ndim = r->t.ndim, shape[AG_MAX_DIMS]; /* copied: ag_leaf_init rewrites r->t */
        memcpy(shape, r->t.shape, sizeof shape);
        ag_real *data = r->buffer ? ps->buffers + r->offset : ps->values + r->offset;
        ag_real *grad = r->buffer ? NULL : ps->grads + r->offset;
        if (ag_leaf_init(&r->t, data, grad, ndim, shape) != 0)
            return ag_error("nn_params_finalize: ag_leaf_init refused '%s'", r->name);
        r->t.name = r->name;
        r->t.requires_grad = !r->buffer;
    }
    ps->finalized = true;
    return 0;
}

int nn_params_finalize(nn_params *ps, uint64_t seed) {
    return nn_params_finalize_zero(ps) ? -1 : run_inits(ps, seed);
}

int nn_params_reinit(nn_params *ps, uint64_t seed) {
    if (!ps || !ps->finalized) return ag_error("nn_params_reinit: store not finalized");
    if (ps->shares_values)
        return ag_error("nn_params_reinit: the store's values belong to another store");
    nn_params_zero_grad(ps);
    return run_inits(ps, seed);
}

int nn_params_share_values(nn_params *replica, nn_params *master) {
    if (!replica || !master || !replica->finalized || !master->finalized)
        return ag_error("nn_params_share_values: both stores must be finalized");
    if (replica == master || replica->shares_values)
        return ag_error("nn_params_share_values: the replica already shares its values");
    if (replica->all.n != master->all.n || replica->flat != master->flat)
        return ag_error("nn_params_share_values: the stores differ (%zu and %zu tensors)",
                        replica->all.n, master->all.n);
    for (size_t i = 0; i < master->all.n; i++) {
        const param_rec *r = replica->all.r[i], *m = master->all.r[i];
        if (strcmp(r->name, m->name) || r->buffer != m->buffer || r->offset != m->offset ||
            r->t.ndim != m->t.ndim ||
            memcmp(r->t.shape, m->t.shape, sizeof(int) * (size_t)m->t.ndim))
            return ag_error("nn_params_share_values: tensor %zu differs ('%s' and '%s')", i,
                            r->name, m->name);
    }
    for (size_t i = 0; i < replica->all.n; i++) {
        param_rec *r = replica->all.r[i];
        if (r->buffer) /* a copy: the replica's buffers stay its own */
            memcpy(r->t.data, master->buffers + r->offset, sizeof(ag_real) * (size_t)r->t.numel);
        else r->t.data = master->values + r->offset;
    }
    free(replica->values);
    replica->values = master->values;
    replica->shares_values = true;
    return 0;
}

bool nn_params_finalized(const nn_params *ps) { return ps && ps->finalized; }
size_t nn_params_count(const nn_params *ps) { return ps ? ps->params.n : 0; }
size_t nn_params_numel(const nn_params *ps) { return ps ? ps->numel : 0; }
size_t nn_params_flat_size(const nn_params *ps) { return ps && ps->finalized ? ps->flat : 0; }
ag_real *nn_params_values(nn_params *ps) { return ps ? ps->values : NULL; }
ag_real *nn_params_grads(nn_params *ps) { return ps ? ps->grads : NULL; }

ag_tensor *nn_params_at(const nn_params *ps, size_t i) {
    return ps && i < ps->params.n ? &ps->params.r[i]->t : NULL;
}

size_t nn_params_offset(const nn_params *ps, size_t i) {
    return ps && i < ps->params.n ? ps->params.r[i]->offset : 0;
}

size_t nn_params_tensor_count(const nn_params *ps) { return ps ? ps->all.n : 0; }

ag_tensor *nn_params_tensor_at(const nn_params *ps, size_t i) {
    return ps && i < ps->all.n ? &ps->all.r[i]->t : NULL;
}

ag_tensor *nn_params_find(const nn_params *ps, const char *name) {
    if (!ps || !name) return NULL;
    param_rec *r = find_rec(ps, name);
    return r ? &r->t : NULL;
}

void nn_params_zero_grad(nn_params *ps) {
    if (ps && ps->grads) memset(ps->grads, 0, ps->flat * sizeof(ag_real));
}

char *nn_join(char *buf, size_t len, const char *prefix, const char *fmt, ...) {
    char suffix[NN_NAME_MAX];
    if (!buf || len == 0 || !prefix || !fmt) {
        ag_error("nn_join: NULL argument");
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(suffix, sizeof suffix, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof suffix) {
        ag_error("nn_join: name suffix longer than %d characters", NN_NAME_MAX - 1);
        return NULL;
    }
    int m =
        prefix[0] ? snprintf(buf, len, "%s.%s", prefix, suffix) : snprintf(buf, len, "%s", suffix);
    if (m < 0 || (size_t)m >= len) {
        ag_error("nn_join: '%s.%s' does not fit in %zu bytes", prefix, suffix, len);
        buf[0] = '\0';
        return NULL;
    }
    return buf;
}
