/* checkpoint.c -- the in-memory checkpoint: tensors as raw little-endian bytes, metadata,
 * dtype conversion to and from ag_real. File I/O is in safetensors.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/io/ckpt_internal.h"
#include "nn/io/json.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [NN_BOOL] = {"BOOL", 1}, [NN_U8] = {"U8", 1},           [NN_I8] = {"I8", 1},
    [NN_U16] = {"U16", 2},   [NN_I16] = {"I16", 2},         [NN_U32] = {"U32", 4},
    [NN_I32] = {"I32", 4},   [NN_U64] = {"U64", 8},         [NN_I64] = {"I64", 8},
    [NN_F16] = {"F16", 2},   [NN_BF16] = {"BF16", 2},       [NN_F32] = {"F32", 4},
    [NN_F64] = {"F64", 8},   [NN_F8_E4M3] = {"F8_E4M3", 1}, [NN_F8_E5M2] = {"F8_E5M2", 1},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

const char *nn_dtype_name(nn_dtype d) { return (unsigned)d < N_DTYPES ? dtypes[d].name : "?"; }
size_t nn_dtype_size(nn_dtype d) { return (unsigned)d < N_DTYPES ? dtypes[d].size : 0; }

int ck_dtype_parse(const char *s, nn_dtype *d) {
    for (unsigned i = 0; i < N_DTYPES; i++)
        if (strcmp(s, dtypes[i].name) == 0) {
            *d = (nn_dtype)i;
            return 0;
        }
    return -1;
}

const char *ck_dtype_list(void) {
    return "BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2";
}

nn_ckpt *nn_ckpt_new(void) {
    nn_ckpt *ck = calloc(1, sizeof *ck);
    if (!ck) ag_error("nn_ckpt_new: out of memory");
    else ck->store = NN_F32;
    return ck;
}

void nn_ckpt_free(nn_ckpt *ck) {
    if (!ck) return;
    for (size_t i = 0; i < ck->n; i++) {
        free(ck->recs[i]->name);
        free(ck->recs[i]);
    }
    for (size_t i = 0; i < ck->nmeta; i++) {
        free(ck->mkeys[i]);
        free(ck->mvals[i]);
    }
    free(ck->recs);
    free(ck->mkeys);
    free(ck->mvals);
    if (ck->map) ck_unmap(ck->map, ck->map_len);
    else free(ck->data);
    free(ck->source);
    free(ck);
}

const char *nn_ckpt_source(const nn_ckpt *ck) {
    return ck && ck->source ? ck->source : "(in memory)";
}

nn_ckpt_check nn_ckpt_checked(const nn_ckpt *ck) { return ck ? ck->checked : NN_CKPT_UNCHECKED; }

char *ck_shape_fmt(char *buf, size_t len, int ndim, const int64_t *shape) {
    size_t u = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && u < len; i++)
        u += (size_t)snprintf(buf + u, len - u, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (u < len) snprintf(buf + u, len - u, "]");
    return buf;
}

/* (ndim <= NN_CKPT_MAX_DIMS, shape) as int64 into out. */
static void shape64(int ndim, const int *shape, int64_t *out) {
    for (int i = 0; i < ndim; i++) out[i] = shape[i];
}

int ck_push_tensor(nn_ckpt *ck, const char *name, nn_dtype dtype, int ndim, const int64_t *shape,
                   uint64_t numel, uint64_t begin, uint64_t end) {
    if (ck->n == ck->cap) {
        size_t cap = ck->cap ? 2 * ck->cap : 16;
        ck_rec **r = realloc(ck->recs, cap * sizeof *r);
        if (!r) return -1;
        ck->recs = r;
        ck->cap = cap;
    }
    ck_rec *rec = calloc(1, sizeof *rec);
    char *nm = rec ? malloc(strlen(name) + 1) : NULL;
    if (!nm) {
        free(rec);
        return -1;
    }
    strcpy(nm, name);
    rec->name = nm;
    rec->t = (nn_ckpt_tensor){
        .name = nm, .dtype = dtype, .ndim = ndim, .numel = numel, .begin = begin, .end = end};
    rec->at = (size_t)begin;
    for (int i = 0; i < ndim; i++) rec->t.shape[i] = shape[i];
    ck->recs[ck->n++] = rec;
    return 0;
}

size_t nn_ckpt_count(const nn_ckpt *ck) { return ck ? ck->n : 0; }

const nn_ckpt_tensor *nn_ckpt_at(const nn_ckpt *ck, size_t i) {
    return ck && i < ck->n ? &ck->recs[i]->t : NULL;
}

const nn_ckpt_tensor *nn_ckpt_find(const nn_ckpt *ck, const char *name) {
    if (!ck || !name) return NULL;
    for (size_t i = 0; i < ck->n; i++)
        if (strcmp(ck->recs[i]->name, name) == 0) return &ck->recs[i]->t;
    return NULL;
}

int nn_ckpt_set_borrow(nn_ckpt *ck, bool on) {
    if (!ck) return ag_error("nn_ckpt_set_borrow: checkpoint is NULL");
    ck->borrow = on;
    return 0;
}

int nn_ckpt_set_store_dtype(nn_ckpt *ck, nn_dtype d) {
    if (!ck) return ag_error("nn_ckpt_set_store_dtype: checkpoint is NULL");
    if (d != NN_F32 && d != NN_F64)
        return ag_error("nn_ckpt_set_store_dtype: dtype %s, expected F32 or F64", nn_dtype_name(d));
    ck->store = d;
    return 0;
}

/* ---- Little-endian encoding ------------------------------------------------------------- */

static void put_le(unsigned char *p, uint64_t v, int nbytes) {
    for (int i = 0; i < nbytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int nbytes) {
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* IEEE half: sign 1, exponent 5 (bias 15), mantissa 10. */
static double half_to_double(uint16_t h) {
    int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (exp == 0) v = ldexp((double)mant, -24); /* zero / subnormal */
    else if (exp == 31) v = mant ? NAN : INFINITY;
    else v = ldexp((double)(mant | 0x400), exp - 25); /* (1 + m/1024) 2^(e-15) */
    return (h & 0x8000) ? -v : v;
}

int ck_add_begin(nn_ckpt *ck, const char *op, const char *name, int ndim, const int *shape,
                 const void *src, size_t es, int64_t *sh, uint64_t *numel) {
    char s[96];
    if (!ck || !name || (!shape && ndim > 0)) return ag_error("%s: NULL argument", op);
    if (ck->map)
        return ag_error("%s: %s is mapped read-only (nn_ckpt_load_opts.map): nothing can be "
                        "added to it",
                        op, nn_ckpt_source(ck));
    if (!name[0] || strcmp(name, "__metadata__") == 0 || !js_utf8_valid(name))
        return ag_error("%s: invalid tensor name '%s' (empty, reserved or not UTF-8)", op, name);
    if (nn_ckpt_find(ck, name)) return ag_error("%s: duplicate tensor '%s'", op, name);
    if (ndim < 0 || ndim > NN_CKPT_MAX_DIMS)
        return ag_error("%s: tensor '%s': ndim %d, expected 0 to %d", op, name, ndim,
                        NN_CKPT_MAX_DIMS);
    shape64(ndim, shape, sh);
    *numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return ag_error("%s: tensor '%s': bad shape %s", op, name,
                            ck_shape_fmt(s, sizeof s, ndim, sh));
        if (shape[i] && *numel > SIZE_MAX / 8 / (uint64_t)shape[i])
            return ag_error("%s: tensor '%s': shape %s too large", op, name,
                            ck_shape_fmt(s, sizeof s, ndim, sh));
        *numel *= (uint64_t)shape[i];
    }
    if (*numel > 0 && !src) return ag_error("%s: tensor '%s': data is NULL", op, name);
    size_t bytes = (size_t)*numel * es;
    if (ck->held + bytes > ck->data_cap) {
        size_t cap = ck->data_cap ? ck->data_cap : 4096;
        while (cap < ck->held + bytes) cap *= 2;
        unsigned char *d = realloc(ck->data, cap);
        if (!d) return ag_error("%s: out of memory adding '%s'", op, name);
        ck->data = d;
        ck->data_cap = cap;
    }
    return 0;
}

void ck_encode(unsigned char *dst, const ag_real *src, size_t n, nn_dtype d) {
    for (size_t i = 0; i < n; i++) {
        if (d == NN_F32) {
            float f = (float)src[i];
            uint32_t u;
            memcpy(&u, &f, 4);
            put_le(dst + 4 * i, u, 4);
        } else {
            double f = (double)src[i];
            uint64_t u;
            memcpy(&u, &f, 8);
            put_le(dst + 8 * i, u, 8);
        }
    }
}

int nn_ckpt_add(nn_ckpt *ck, const char *name, int ndim, const int *shape, const ag_real *src) {
    int64_t sh[NN_CKPT_MAX_DIMS];
    uint64_t numel;
    size_t es = ck ? nn_dtype_size(ck->store) : 0;
    bool borrow = ck && ck->borrow;
    if (ck_add_begin(ck, "nn_ckpt_add", name, ndim, shape, src, borrow ? 0 : es, sh, &numel))
        return -1;
    size_t bytes = (size_t)numel * es;
    if (!borrow && numel) ck_encode(ck->data + ck->held, src, (size_t)numel, ck->store);
    if (ck_push_tensor(ck, name, ck->store, ndim, sh, numel, ck->len, ck->len + bytes))
        return ag_error("nn_ckpt_add: out of memory adding '%s'", name);
    ck_rec *r = ck->recs[ck->n - 1];
    r->at = ck->held;
    if (borrow) r->src = src;
    else ck->held += bytes;
    ck->len += bytes;
    return 0;
}

/* Checks t against (ndim <= NN_CKPT_MAX_DIMS, shape) and a float dtype (i64: dtype I64); 0 or
 * -1 with a message. */
static int check_tensor(const nn_ckpt *ck, const char *name, const nn_ckpt_tensor *t, int ndim,
                        const int *shape, bool i64) {
    char want[160], got[160];
    int64_t sh[NN_CKPT_MAX_DIMS];
    if (ndim < 0 || ndim > NN_CKPT_MAX_DIMS)
        return ag_error("%s: tensor '%s': ndim %d asked, expected 0 to %d", nn_ckpt_source(ck),
                        name, ndim, NN_CKPT_MAX_DIMS);
    shape64(ndim, shape, sh);
    ck_shape_fmt(want, sizeof want, ndim, sh);
    if (!t)
        return ag_error("%s: tensor '%s' is missing (expected shape %s)", nn_ckpt_source(ck), name,
                        want);
    if (i64 ? t->dtype != NN_I64
            : t->dtype != NN_F32 && t->dtype != NN_F64 && t->dtype != NN_F16 && t->dtype != NN_BF16)
        return ag_error("%s: tensor '%s' has dtype %s, expected %s", nn_ckpt_source(ck), name,
                        nn_dtype_name(t->dtype),
                        i64 ? "I64" : "a float dtype (F32, F64, F16 or BF16)");
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == sh[i];
    if (!same)
        return ag_error("%s: tensor '%s' has shape %s, expected %s", nn_ckpt_source(ck), name,
                        ck_shape_fmt(got, sizeof got, t->ndim, t->shape), want);
    return 0;
}

const unsigned char *ck_bytes(const nn_ckpt *ck, const nn_ckpt_tensor *t) {
    return ck->data + ((const ck_rec *)t)->at;
}

/* Decodes n elements of dtype d (a checked float dtype) at p into dst as ag_real. */
static void decode(const unsigned char *p, nn_dtype d, size_t n, ag_real *dst) {
    size_t es = nn_dtype_size(d);
    for (size_t i = 0; i < n; i++, p += es) {
        if (d == NN_F32) {
            uint32_t u = (uint32_t)get_le(p, 4);
            float f;
            memcpy(&f, &u, 4);
            dst[i] = (ag_real)f;
        } else if (d == NN_F64) {
            uint64_t u = get_le(p, 8);
            double f;
            memcpy(&f, &u, 8);
            dst[i] = (ag_real)f;
        } else if (d == NN_F16) {
            dst[i] = (ag_real)half_to_double((uint16_t)get_le(p, 2));
        } else { /* BF16: the upper half of an F32 */
            uint32_t u = (uint32_t)get_le(p, 2) << 16;
            float f;
            memcpy(&f, &u, 4);
            dst[i] = (ag_real)f;
        }
    }
}

void ck_decode(const nn_ckpt *ck, const nn_ckpt_tensor *t, ag_real *dst) {
    const ag_real *src = ((const ck_rec *)t)->src;
    if (!src) {
        decode(ck_bytes(ck, t), t->dtype, (size_t)t->numel, dst);
        return;
    }
    /* borrowed: the values as the file will hold them, encoded and decoded in chunks */
    unsigned char buf[4096];
    const size_t chunk = sizeof buf / nn_dtype_size(t->dtype);
    for (size_t i = 0; i < t->numel; i += chunk) {
        size_t m = t->numel - i < chunk ? (size_t)t->numel - i : chunk;
        ck_encode(buf, src + i, m, t->dtype);
        decode(buf, t->dtype, m, dst + i);
    }
}

int nn_ckpt_read(const nn_ckpt *ck, const char *name, int ndim, const int *shape, ag_real *dst) {
    if (!ck || !name || (!shape && ndim > 0) || !dst)
        return ag_error("nn_ckpt_read: NULL argument");
    const nn_ckpt_tensor *t = nn_ckpt_find(ck, name);
    if (check_tensor(ck, name, t, ndim, shape, false)) return -1;
    ck_decode(ck, t, dst);
    return 0;
}

int ck_check(const nn_ckpt *ck, const char *name, int ndim, const int *shape, bool i64) {
    return check_tensor(ck, name, nn_ckpt_find(ck, name), ndim, shape, i64);
}

/* ---- Metadata --------------------------------------------------------------------------- */

int ck_meta_put(nn_ckpt *ck, const char *key, const char *value) {
    char *v = malloc(strlen(value) + 1);
    if (!v) return -1;
    strcpy(v, value);
    for (size_t i = 0; i < ck->nmeta; i++)
        if (strcmp(ck->mkeys[i], key) == 0) {
            free(ck->mvals[i]);
            ck->mvals[i] = v;
            return 0;
        }
    if (ck->nmeta == ck->meta_cap) {
        size_t cap = ck->meta_cap ? 2 * ck->meta_cap : 8;
        char **k = realloc(ck->mkeys, cap * sizeof *k);
        if (k) ck->mkeys = k;
        char **w = k ? realloc(ck->mvals, cap * sizeof *w) : NULL;
        if (!w) {
            free(v);
            return -1;
        }
        ck->mvals = w;
        ck->meta_cap = cap;
    }
    char *k = malloc(strlen(key) + 1);
    if (!k) {
        free(v);
        return -1;
    }
    strcpy(k, key);
    ck->mkeys[ck->nmeta] = k;
    ck->mvals[ck->nmeta++] = v;
    return 0;
}

int nn_ckpt_set_meta(nn_ckpt *ck, const char *key, const char *value) {
    if (!ck || !key || !value) return ag_error("nn_ckpt_set_meta: NULL argument");
    if (ck_reserved_key(key))
        return ag_error("nn_ckpt_set_meta: key '%s' is reserved (nn_ckpt_save writes the "
                        "format and checksum keys itself)",
                        key);
    if (!js_utf8_valid(key) || !js_utf8_valid(value))
        return ag_error("nn_ckpt_set_meta: key '%.60s': key and value must be UTF-8 text "
                        "(safetensors metadata is JSON)",
                        key);
    if (ck_meta_put(ck, key, value))
        return ag_error("nn_ckpt_set_meta: out of memory setting '%s'", key);
    return 0;
}

const char *nn_ckpt_meta(const nn_ckpt *ck, const char *key) {
    if (!ck || !key) return NULL;
    for (size_t i = 0; i < ck->nmeta; i++)
        if (strcmp(ck->mkeys[i], key) == 0) return ck->mvals[i];
    return NULL;
}

size_t nn_ckpt_meta_count(const nn_ckpt *ck) { return ck ? ck->nmeta : 0; }

int nn_ckpt_meta_at(const nn_ckpt *ck, size_t i, const char **key, const char **value) {
    if (!ck || i >= ck->nmeta)
        return ag_error("nn_ckpt_meta_at: index %zu out of range (%zu pairs)", i,
                        ck ? ck->nmeta : 0);
    if (key) *key = ck->mkeys[i];
    if (value) *value = ck->mvals[i];
    return 0;
}

bool ck_reserved_key(const char *key) {
    return strcmp(key, NN_CKPT_FORMAT_KEY) == 0 || strcmp(key, NN_CKPT_CHECKSUM_KEY) == 0 ||
           strcmp(key, NN_CKPT_LEGACY_CHECKSUM_KEY) == 0;
}
