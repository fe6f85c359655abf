/* safetensors_check.c -- validation of a parsed safetensors header against its data section
 * (every rule listed in nn/checkpoint.h; one message per rule, naming file and tensor). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/io/ckpt_internal.h"
#include "nn/io/json.h"

/* Reads one tensor entry {"dtype": .., "shape": [..], "data_offsets": [b, e]}. */
static int parse_entry(const char *src, const char *name, const js_val *e, nn_dtype *dtype,
                       int *ndim, int64_t *shape, uint64_t *numel, uint64_t *begin,
                       uint64_t *end)
{
    if (e->type != JS_OBJ)
        return ag_error("%s: tensor '%s': entry is a JSON %s, expected an object with "
                            "dtype, shape and data_offsets", src, name, js_type_name(e->type));
    for (size_t k = 0; k < e->n; k++)
        if (strcmp(e->keys[k], "dtype") && strcmp(e->keys[k], "shape") &&
            strcmp(e->keys[k], "data_offsets"))
            return ag_error("%s: tensor '%s': unexpected field \"%s\" (expected dtype, "
                                "shape, data_offsets)", src, name, e->keys[k]);
    const js_val *dt = js_get(e, "dtype"), *sh = js_get(e, "shape");
    const js_val *off = js_get(e, "data_offsets");
    const char *missing = !dt ? "dtype" : !sh ? "shape" : !off ? "data_offsets" : NULL;
    if (missing) return ag_error("%s: tensor '%s': missing field \"%s\"", src, name, missing);
    if (dt->type != JS_STR)
        return ag_error("%s: tensor '%s': dtype is a JSON %s, expected a string", src, name,
                            js_type_name(dt->type));
    if (ck_dtype_parse(dt->str, dtype))
        return ag_error("%s: tensor '%s': unknown dtype \"%s\" (expected one of %s)", src,
                            name, dt->str, ck_dtype_list());
    if (sh->type != JS_ARR)
        return ag_error("%s: tensor '%s': shape is a JSON %s, expected an array of "
                            "integers", src, name, js_type_name(sh->type));
    if (sh->n > NN_CKPT_MAX_DIMS)
        return ag_error("%s: tensor '%s': shape has %zu dims, at most %d supported", src,
                            name, sh->n, NN_CKPT_MAX_DIMS);
    *ndim = (int)sh->n;
    *numel = 1;
    bool overflow = false;
    for (size_t d = 0; d < sh->n; d++) {
        uint64_t v;
        if (!js_uint(&sh->items[d], &v) || v > (uint64_t)INT64_MAX)
            return ag_error("%s: tensor '%s': shape entry %zu is not a non-negative "
                                "integer", src, name, d);
        shape[d] = (int64_t)v;
        if (v && *numel > UINT64_MAX / v) overflow = true;
        else *numel *= v;
    }
    if (overflow) *numel = 0;  /* reported by the caller as a size mismatch */
    if (off->type != JS_ARR || off->n != 2 || !js_uint(&off->items[0], begin) ||
        !js_uint(&off->items[1], end))
        return ag_error("%s: tensor '%s': data_offsets must be [begin, end], two "
                            "non-negative integers", src, name);
    if (*begin > *end)
        return ag_error("%s: tensor '%s': data_offsets [%llu, %llu] has begin > end", src,
                            name, (unsigned long long)*begin, (unsigned long long)*end);
    if (overflow)
        return ag_error("%s: tensor '%s': shape too large (element count overflows)", src,
                            name);
    return 0;
}

static int cmp_range(const void *a, const void *b)
{
    const nn_ckpt_tensor *x = *(const nn_ckpt_tensor *const *)a;
    const nn_ckpt_tensor *y = *(const nn_ckpt_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Sorted by begin, the ranges must tile [0, len): no overlap, no gap, nothing past the end. */
static int check_coverage(const nn_ckpt *ck, const char *src)
{
    if (ck->n == 0) {
        if (ck->len == 0) return 0;
        return ag_error("%s: data section has %zu bytes but the header lists no tensor "
                            "(bytes [0, %zu) belong to no tensor)", src, ck->len, ck->len);
    }
    const nn_ckpt_tensor **v = malloc(ck->n * sizeof *v);
    if (!v) return ag_error("%s: out of memory", src);
    for (size_t i = 0; i < ck->n; i++) v[i] = &ck->recs[i]->t;
    qsort(v, ck->n, sizeof *v, cmp_range);
    uint64_t at = 0;
    const nn_ckpt_tensor *prev = NULL;
    int rc = 0;
    for (size_t i = 0; i < ck->n && !rc; i++) {
        const nn_ckpt_tensor *t = v[i];
        if (t->begin < at)
            rc = ag_error("%s: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap in "
                              "the data section", src, prev->name,
                              (unsigned long long)prev->begin, (unsigned long long)prev->end,
                              t->name, (unsigned long long)t->begin,
                              (unsigned long long)t->end);
        else if (t->begin > at)
            rc = ag_error("%s: bytes [%llu, %llu) of the data section belong to no tensor "
                              "(a gap before '%s')", src, (unsigned long long)at,
                              (unsigned long long)t->begin, t->name);
        at = t->end;
        prev = t;
    }
    if (!rc && at != ck->len)
        rc = ag_error("%s: bytes [%llu, %zu) of the data section belong to no tensor "
                          "(trailing data after '%s')", src, (unsigned long long)at, ck->len,
                          prev->name);
    free(v);
    return rc;
}

int ck_validate(nn_ckpt *ck, const js_val *root, const char *src)
{
    if (root->type != JS_OBJ)
        return ag_error("%s: header is a JSON %s, expected an object", src,
                            js_type_name(root->type));
    for (size_t i = 0; i < root->n; i++) {
        const char *key = root->keys[i];
        const js_val *e = &root->items[i];
        if (strcmp(key, "__metadata__") == 0) {
            if (e->type != JS_OBJ)
                return ag_error("%s: __metadata__ is a JSON %s, expected an object of "
                                    "strings", src, js_type_name(e->type));
            for (size_t k = 0; k < e->n; k++) {
                if (e->items[k].type != JS_STR)
                    return ag_error("%s: __metadata__ value of \"%s\" is a JSON %s, "
                                        "expected a string", src, e->keys[k],
                                        js_type_name(e->items[k].type));
                if (ck_meta_put(ck, e->keys[k], e->items[k].str))
                    return ag_error("%s: out of memory", src);
            }
            continue;
        }
        nn_dtype dtype = NN_F32;
        int ndim = 0;
        int64_t shape[NN_CKPT_MAX_DIMS] = {0};
        uint64_t numel = 0, begin = 0, end = 0;
        if (parse_entry(src, key, e, &dtype, &ndim, shape, &numel, &begin, &end)) return -1;
        uint64_t es = nn_dtype_size(dtype);
        if (numel > UINT64_MAX / es || numel * es != end - begin) {
            char s[160];
            size_t u = (size_t)snprintf(s, sizeof s, "[");
            for (int d = 0; d < ndim && u < sizeof s; d++)
                u += (size_t)snprintf(s + u, sizeof s - u, d ? ", %lld" : "%lld",
                                      (long long)shape[d]);
            if (u < sizeof s) snprintf(s + u, sizeof s - u, "]");
            return ag_error("%s: tensor '%s': shape %s of %s needs %llu bytes but "
                                "data_offsets [%llu, %llu] span %llu", src, key, s,
                                nn_dtype_name(dtype), (unsigned long long)(numel * es),
                                (unsigned long long)begin, (unsigned long long)end,
                                (unsigned long long)(end - begin));
        }
        if (end > ck->len)
            return ag_error("%s: tensor '%s': data_offsets [%llu, %llu] run past the end "
                                "of the data section (%zu bytes): truncated file?", src, key,
                                (unsigned long long)begin, (unsigned long long)end, ck->len);
        if (ck_push_tensor(ck, key, dtype, ndim, shape, numel, begin, end))
            return ag_error("%s: out of memory", src);
    }
    if (check_coverage(ck, src)) return -1;
    const char *want = nn_ckpt_meta(ck, NN_CKPT_CHECKSUM_KEY);
    if (want) {
        char got[17];
        ck_checksum_hex(ck, got);
        if (strcmp(want, got) != 0)
            return ag_error("%s: checksum mismatch: metadata %s = \"%.40s\" but the data "
                                "section hashes to %s (file corrupted?)", src,
                                NN_CKPT_CHECKSUM_KEY, want, got);
    }
    return 0;
}
