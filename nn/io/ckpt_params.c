/* ckpt_params.c -- parameter stores (parameters and buffers) to and from checkpoints, strict
 * and partial; int64 tensors; typed metadata helpers. */
#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/io/ckpt_internal.h"
#include "nn/io/json.h"

/* ---- int64 tensors ------------------------------------------------------------------------
 * The store keeps every tensor as ag_real; PyTorch keeps some buffers as int64 (BatchNorm's
 * num_batches_tracked). nn_ckpt_add_i64 writes such a tensor with dtype I64, nn_ckpt_read_i64
 * reads one back. */

static void le64_put(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t le64_get(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int nn_ckpt_add_i64(nn_ckpt *ck, const char *name, int ndim, const int *shape, const int64_t *src) {
    int64_t sh[NN_CKPT_MAX_DIMS];
    uint64_t numel;
    if (ck_add_begin(ck, "nn_ckpt_add_i64", name, ndim, shape, src, 8, sh, &numel)) return -1;
    size_t bytes = (size_t)numel * 8;
    for (uint64_t i = 0; i < numel; i++) le64_put(ck->data + ck->held + 8 * i, (uint64_t)src[i]);
    if (ck_push_tensor(ck, name, NN_I64, ndim, sh, numel, ck->len, ck->len + bytes))
        return ag_error("nn_ckpt_add_i64: out of memory adding '%s'", name);
    ck->recs[ck->n - 1]->at = ck->held;
    ck->held += bytes;
    ck->len += bytes;
    return 0;
}

int nn_ckpt_read_i64(const nn_ckpt *ck, const char *name, int ndim, const int *shape,
                     int64_t *dst) {
    if (!ck || !name || (!shape && ndim > 0) || !dst)
        return ag_error("nn_ckpt_read_i64: NULL argument");
    if (ck_check(ck, name, ndim, shape, true)) return -1;
    const nn_ckpt_tensor *t = nn_ckpt_find(ck, name);
    const unsigned char *p = ck_bytes(ck, t);
    for (uint64_t i = 0; i < t->numel; i++) dst[i] = (int64_t)le64_get(p + 8 * i);
    return 0;
}

/* ---- stores ------------------------------------------------------------------------------
 * A store's tensors, parameters and buffers, in registration order (PyTorch's state_dict
 * order). A buffer named "num_batches_tracked" (BatchNorm's, int64 in PyTorch) is a float in
 * the store and I64 in the file: converted on save (rounded) and on load (an I64 tensor, or a
 * float one, is accepted). Every other tensor goes through nn_ckpt_add / ck_decode. */

static bool is_count(const ag_tensor *p) {
    static const char suffix[] = "num_batches_tracked";
    const size_t n = strlen(p->name), k = sizeof suffix - 1;
    return !p->requires_grad && n >= k && !strcmp(p->name + n - k, suffix) &&
           (n == k || p->name[n - k - 1] == '.');
}

static int add_tensor(nn_ckpt *ck, const ag_tensor *p) {
    if (!is_count(p)) return nn_ckpt_add(ck, p->name, p->ndim, p->shape, p->data);
    int64_t v[16];
    if (p->numel > 16)
        return ag_error("nn_ckpt_add_params: counter '%s' has %td elements, expected at most 16",
                        p->name, p->numel);
    for (ptrdiff_t i = 0; i < p->numel; i++) v[i] = (int64_t)llround((double)p->data[i]);
    return nn_ckpt_add_i64(ck, p->name, p->ndim, p->shape, v);
}

/* Checks the checkpoint's tensor for store tensor p (present, a dtype it can take, p's shape). */
static int check_tensor(const nn_ckpt *ck, const ag_tensor *p) {
    const nn_ckpt_tensor *t = nn_ckpt_find(ck, p->name);
    return ck_check(ck, p->name, p->ndim, p->shape, is_count(p) && t && t->dtype == NN_I64);
}

static void load_tensor(const nn_ckpt *ck, ag_tensor *p) {
    const nn_ckpt_tensor *t = nn_ckpt_find(ck, p->name);
    if (t->dtype != NN_I64) {
        ck_decode(ck, t, p->data);
    } else {
        const unsigned char *b = ck_bytes(ck, t);
        for (uint64_t i = 0; i < t->numel; i++) p->data[i] = (ag_real)(int64_t)le64_get(b + 8 * i);
    }
    ck_release(ck, t->begin, t->end); /* a mapped file: done with its pages */
}

int nn_ckpt_add_params(nn_ckpt *ck, const nn_params *ps) {
    if (!ck || !ps) return ag_error("nn_ckpt_add_params: NULL argument");
    if (!nn_params_finalized(ps))
        return ag_error("nn_ckpt_add_params: the parameter store is not finalized");
    for (size_t i = 0; i < nn_params_tensor_count(ps); i++)
        if (add_tensor(ck, nn_params_tensor_at(ps, i))) return -1;
    return 0;
}

static bool has_prefix(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int nn_ckpt_load_params(const nn_ckpt *ck, nn_params *ps, unsigned flags) {
    if (!ck || !ps) return ag_error("nn_ckpt_load_params: NULL argument");
    if (!nn_params_finalized(ps))
        return ag_error("nn_ckpt_load_params: the parameter store is not finalized");
    if (flags & ~NN_CKPT_ALLOW_EXTRA)
        return ag_error("nn_ckpt_load_params: unknown flags 0x%x", flags);
    const size_t n = nn_params_tensor_count(ps);
    /* Every check first, so that a failure leaves the store untouched. */
    for (size_t i = 0; i < n; i++)
        if (check_tensor(ck, nn_params_tensor_at(ps, i))) return -1;
    if (!(flags & NN_CKPT_ALLOW_EXTRA)) {
        for (size_t i = 0; i < nn_ckpt_count(ck); i++) {
            const char *name = nn_ckpt_at(ck, i)->name;
            if (!has_prefix(name, NN_CKPT_OPTIM_PREFIX) && !nn_params_find(ps, name))
                return ag_error("%s: unexpected tensor '%s': not a tensor of the model "
                                "(%zu parameters and buffers expected; pass "
                                "NN_CKPT_ALLOW_EXTRA, or use nn_ckpt_load_params_partial, "
                                "to load a part of a larger model)",
                                nn_ckpt_source(ck), name, n);
        }
    }
    for (size_t i = 0; i < n; i++) load_tensor(ck, nn_params_tensor_at(ps, i));
    return 0;
}

void nn_ckpt_load_report_free(nn_ckpt_load_report *r) {
    if (!r) return;
    free(r->missing);
    free(r->unexpected);
    memset(r, 0, sizeof *r);
}

int nn_ckpt_load_params_partial(const nn_ckpt *ck, nn_params *ps, nn_ckpt_load_report *report) {
    if (report) memset(report, 0, sizeof *report);
    if (!ck || !ps) return ag_error("nn_ckpt_load_params_partial: NULL argument");
    if (!nn_params_finalized(ps))
        return ag_error("nn_ckpt_load_params_partial: the parameter store is not finalized");
    const size_t n = nn_params_tensor_count(ps), nc = nn_ckpt_count(ck);
    size_t loaded = 0;
    /* checks first: a tensor present under a name of the store must fit it (shape, dtype) */
    for (size_t i = 0; i < n; i++) {
        const ag_tensor *p = nn_params_tensor_at(ps, i);
        if (!nn_ckpt_find(ck, p->name)) continue;
        if (check_tensor(ck, p)) return -1;
        loaded++;
    }
    if (!loaded)
        return ag_error("%s: a non-strict load matched nothing: none of its %zu tensors is named "
                        "as one of the %zu tensors of the model (e.g. '%s')",
                        nn_ckpt_source(ck), nc, n, n ? nn_params_tensor_at(ps, 0)->name : "(none)");
    nn_ckpt_load_report r = {.loaded = loaded};
    if (report) {
        r.missing = malloc(sizeof *r.missing * (n - loaded + 1));
        r.unexpected = malloc(sizeof *r.unexpected * (nc + 1));
        if (!r.missing || !r.unexpected) {
            nn_ckpt_load_report_free(&r);
            return ag_error("nn_ckpt_load_params_partial: out of memory");
        }
        for (size_t i = 0; i < n; i++) {
            const ag_tensor *p = nn_params_tensor_at(ps, i);
            if (!nn_ckpt_find(ck, p->name)) r.missing[r.n_missing++] = p->name;
        }
        for (size_t i = 0; i < nc; i++) {
            const char *name = nn_ckpt_at(ck, i)->name;
            if (!has_prefix(name, NN_CKPT_OPTIM_PREFIX) && !nn_params_find(ps, name))
                r.unexpected[r.n_unexpected++] = name;
        }
    }
    for (size_t i = 0; i < n; i++) {
        ag_tensor *p = nn_params_tensor_at(ps, i);
        if (nn_ckpt_find(ck, p->name)) load_tensor(ck, p);
    }
    if (report) *report = r;
    return 0;
}

int nn_save_params(const nn_params *ps, const char *path) {
    nn_ckpt *ck = nn_ckpt_new();
    if (!ck) return -1;
    nn_ckpt_set_borrow(ck, true); /* saved from ps's buffers, not from a copy */
    int rc = nn_ckpt_add_params(ck, ps);
    if (!rc) rc = nn_ckpt_save(ck, path);
    nn_ckpt_free(ck);
    return rc;
}

int nn_load_params(nn_params *ps, const char *path) {
    nn_ckpt *ck;
    if (nn_ckpt_load(&ck, path)) return -1;
    int rc = nn_ckpt_load_params(ck, ps, 0);
    nn_ckpt_free(ck);
    return rc;
}

/* ---- Typed metadata ---------------------------------------------------------------------- */

int nn_ckpt_set_meta_int(nn_ckpt *ck, const char *key, int64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return nn_ckpt_set_meta(ck, key, buf);
}

int nn_ckpt_meta_int(const nn_ckpt *ck, const char *key, int64_t *v) {
    const char *s = nn_ckpt_meta(ck, key);
    if (!s)
        return ag_error("%s: metadata key '%s' is missing (expected an integer)",
                        nn_ckpt_source(ck), key ? key : "(null)");
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!s[0] || *end || errno)
        return ag_error("%s: metadata '%s' = \"%.60s\", expected a decimal integer",
                        nn_ckpt_source(ck), key, s);
    *v = x;
    return 0;
}

/* An ag_rng as 64 hex digits: s[0] .. s[3], 16 digits each. */
int nn_ckpt_set_meta_rng(nn_ckpt *ck, const char *key, const ag_rng *r) {
    char buf[72];
    if (!r) return ag_error("nn_ckpt_set_meta_rng: rng is NULL");
    snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, r->s[0],
             r->s[1], r->s[2], r->s[3]);
    return nn_ckpt_set_meta(ck, key, buf);
}

int nn_ckpt_meta_rng(const nn_ckpt *ck, const char *key, ag_rng *r) {
    const char *s = nn_ckpt_meta(ck, key);
    if (!s)
        return ag_error("%s: metadata key '%s' is missing (expected an rng state)",
                        nn_ckpt_source(ck), key ? key : "(null)");
    ag_rng x;
    bool ok = strlen(s) == 64;
    for (int k = 0; ok && k < 4; k++) {
        x.s[k] = 0;
        for (int j = 0; ok && j < 16; j++) {
            char c = s[16 * k + j];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            ok = d >= 0;
            x.s[k] = (x.s[k] << 4) | (uint64_t)(ok ? d : 0);
        }
    }
    if (!ok || !r)
        return ag_error("%s: metadata '%s' = \"%.70s\", expected 64 lowercase hex digits "
                        "(an rng state)",
                        nn_ckpt_source(ck), key, s);
    *r = x;
    return 0;
}
