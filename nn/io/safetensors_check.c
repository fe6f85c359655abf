/* safetensors_check.c -- the rules of nn/io/checkpoint.h: the header against the file size
 * (ck_validate, before the data section is read), then the checksum and finite values against
 * the data (ck_verify). One message per rule, naming the file and the tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "nn/io/ckpt_internal.h"
#include "nn/io/json.h"

/* Reads one tensor entry {"dtype": .., "shape": [..], "data_offsets": [b, e]}. */
static int parse_entry(const char *src, const char *name, const js_val *e, nn_dtype *dtype,
                       int *ndim, int64_t *shape, uint64_t *numel, uint64_t *begin, uint64_t *end) {
    if (e->type != JS_OBJ)
        return ag_error("%s: tensor '%s': entry is a JSON %s, expected an object with "
                        "dtype, shape and data_offsets",
                        src, name, js_type_name(e->type));
    for (size_t k = 0; k < e->n; k++)
        if (strcmp(e->keys[k], "dtype") && strcmp(e->keys[k], "shape") &&
            strcmp(e->keys[k], "data_offsets"))
            return ag_error("%s: tensor '%s': unexpected field \"%s\" (expected dtype, "
                            "shape, data_offsets)",
                            src, name, e->keys[k]);
    const js_val *dt = js_get(e, "dtype"), *sh = js_get(e, "shape");
    const js_val *off = js_get(e, "data_offsets");
    const char *missing = !dt ? "dtype" : !sh ? "shape" : !off ? "data_offsets" : NULL;
    if (missing) return ag_error("%s: tensor '%s': missing field \"%s\"", src, name, missing);
    if (dt->type != JS_STR)
        return ag_error("%s: tensor '%s': dtype is a JSON %s, expected a string", src, name,
                        js_type_name(dt->type));
    if (ck_dtype_parse(dt->str, dtype))
        return ag_error("%s: tensor '%s': unknown dtype \"%s\" (expected one of %s)", src, name,
                        dt->str, ck_dtype_list());
    if (sh->type != JS_ARR)
        return ag_error("%s: tensor '%s': shape is a JSON %s, expected an array of "
                        "integers",
                        src, name, js_type_name(sh->type));
    if (sh->n > NN_CKPT_MAX_DIMS)
        return ag_error("%s: tensor '%s': shape has %zu dims, at most %d supported", src, name,
                        sh->n, NN_CKPT_MAX_DIMS);
    *ndim = (int)sh->n;
    *numel = 1;
    bool overflow = false;
    for (size_t d = 0; d < sh->n; d++) {
        uint64_t v;
        if (!js_uint(&sh->items[d], &v) || v > (uint64_t)INT64_MAX)
            return ag_error("%s: tensor '%s': shape entry %zu is not a non-negative "
                            "integer",
                            src, name, d);
        shape[d] = (int64_t)v;
        if (v && *numel > UINT64_MAX / v) overflow = true;
        else *numel *= v;
    }
    if (overflow) *numel = 0; /* reported by the caller as a size mismatch */
    if (off->type != JS_ARR || off->n != 2 || !js_uint(&off->items[0], begin) ||
        !js_uint(&off->items[1], end))
        return ag_error("%s: tensor '%s': data_offsets must be [begin, end], two "
                        "non-negative integers",
                        src, name);
    if (*begin > *end)
        return ag_error("%s: tensor '%s': data_offsets [%llu, %llu] has begin > end", src, name,
                        (unsigned long long)*begin, (unsigned long long)*end);
    if (overflow)
        return ag_error("%s: tensor '%s': shape too large (element count overflows)", src, name);
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const nn_ckpt_tensor *x = *(const nn_ckpt_tensor *const *)a;
    const nn_ckpt_tensor *y = *(const nn_ckpt_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* 8 + hlen + dlen, saturating (a header may describe any 64-bit size). */
static uint64_t file_bytes(size_t hlen, uint64_t dlen) {
    return dlen > UINT64_MAX - 8 - hlen ? UINT64_MAX : 8 + hlen + dlen;
}

/* The data size the header describes (the end of its last range) must not exceed what the
 * file holds after the header, ck->len. */
static int check_size(const nn_ckpt *ck, size_t hlen, uint64_t file_size) {
    const nn_ckpt_tensor *last = NULL;
    for (size_t i = 0; i < ck->n; i++)
        if (!last || ck->recs[i]->t.end > last->end) last = &ck->recs[i]->t;
    if (!last || last->end <= ck->len) return 0;
    return ag_error("%s: file is %llu bytes but its header describes %llu (a %zu-byte header "
                    "and %llu bytes of data, up to the end of tensor '%s'): truncated file?",
                    nn_ckpt_source(ck), (unsigned long long)file_size,
                    (unsigned long long)file_bytes(hlen, last->end), hlen,
                    (unsigned long long)last->end, last->name);
}

/* Sorted by begin, the ranges must tile [0, ck->len): no overlap, no gap, no trailing bytes
 * (ranges past the end were refused by check_size). */
static int check_coverage(const nn_ckpt *ck, size_t hlen, uint64_t file_size) {
    const char *src = nn_ckpt_source(ck);
    if (ck->n == 0) {
        if (ck->len == 0) return 0;
        return ag_error("%s: data section has %zu bytes but the header lists no tensor "
                        "(bytes [0, %zu) belong to no tensor; file is %llu bytes, its header "
                        "describes %llu)",
                        src, ck->len, ck->len, (unsigned long long)file_size,
                        (unsigned long long)(8 + hlen));
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
                          "the data section",
                          src, prev->name, (unsigned long long)prev->begin,
                          (unsigned long long)prev->end, t->name, (unsigned long long)t->begin,
                          (unsigned long long)t->end);
        else if (t->begin > at)
            rc = ag_error("%s: bytes [%llu, %llu) of the data section belong to no tensor "
                          "(a gap before '%s')",
                          src, (unsigned long long)at, (unsigned long long)t->begin, t->name);
        at = t->end;
        prev = t;
    }
    if (!rc && at != ck->len)
        rc = ag_error("%s: bytes [%llu, %zu) of the data section belong to no tensor "
                      "(trailing data after '%s'): file is %llu bytes but its header "
                      "describes %llu",
                      src, (unsigned long long)at, ck->len, prev->name,
                      (unsigned long long)file_size, (unsigned long long)file_bytes(hlen, at));
    free(v);
    return rc;
}

static bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

/* Which checksum the file must match (the rules at the top of nn/io/checkpoint.h). meta is
 * the header's __metadata__ object or NULL; its values point into hdr. 0 or -1. */
static int checksum_scheme(const nn_ckpt *ck, const js_val *meta, const char *hdr, size_t hlen,
                           ck_sum_info *sum) {
    const char *src = nn_ckpt_source(ck), *format = nn_ckpt_meta(ck, NN_CKPT_FORMAT_KEY);
    *sum = (ck_sum_info){.scheme = NN_CKPT_UNCHECKED};
    if (format && strcmp(format, NN_CKPT_FORMAT) != 0)
        return ag_error("%s: metadata %s is \"%.40s\", a format this version does not know "
                        "(it reads format %s and the files written before it): written by a "
                        "newer tapegrad?",
                        src, NN_CKPT_FORMAT_KEY, format, NN_CKPT_FORMAT);
    const js_val *v = js_get(meta, NN_CKPT_CHECKSUM_KEY);
    if (v) { /* format 2: the literal must be "<16 lowercase hex digits>" */
        size_t p = v->pos;
        bool ok = p + 18 <= hlen && hdr[p] == '"' && hdr[p + 17] == '"';
        for (size_t i = 1; ok && i <= 16; i++) ok = is_lower_hex(hdr[p + i]);
        if (!ok)
            return ag_error("%s: checksum does not match: metadata %s is \"%.40s\", not 16 "
                            "lowercase hex digits (edited or damaged)",
                            src, NN_CKPT_CHECKSUM_KEY, v->str);
        *sum = (ck_sum_info){.scheme = NN_CKPT_CHECKED_FILE, .digits_at = p + 1};
        return 0;
    }
    if (!format && nn_ckpt_meta(ck, NN_CKPT_LEGACY_CHECKSUM_KEY)) {
        sum->scheme = NN_CKPT_CHECKED_DATA;
        return 0;
    }
    const char *mark = format ? NN_CKPT_FORMAT_KEY : NULL;
    for (size_t i = 0; !mark && i < ck->nmeta; i++)
        if (strncmp(ck->mkeys[i], NN_CKPT_MARK_PREFIX, strlen(NN_CKPT_MARK_PREFIX)) == 0)
            mark = ck->mkeys[i];
    if (mark)
        return ag_error("%s: checksum missing: metadata key '%.60s' marks the file as a "
                        "tapegrad checkpoint, but it has no %s (the key was deleted, or the "
                        "file damaged); refused",
                        src, mark, NN_CKPT_CHECKSUM_KEY);
    return 0; /* a plain state_dict */
}

int ck_validate(nn_ckpt *ck, const js_val *root, const char *hdr, size_t hlen, uint64_t file_size,
                ck_sum_info *sum) {
    const char *src = nn_ckpt_source(ck);
    const js_val *meta = NULL;
    ck->len = (size_t)(file_size - 8 - hlen); /* the caller checked 8 + hlen <= file_size */
    if (root->type != JS_OBJ)
        return ag_error("%s: header is a JSON %s, expected an object", src,
                        js_type_name(root->type));
    for (size_t i = 0; i < root->n; i++) {
        const char *key = root->keys[i];
        const js_val *e = &root->items[i];
        if (strcmp(key, "__metadata__") == 0) {
            if (e->type != JS_OBJ)
                return ag_error("%s: __metadata__ is a JSON %s, expected an object of "
                                "strings",
                                src, js_type_name(e->type));
            for (size_t k = 0; k < e->n; k++) {
                if (e->items[k].type != JS_STR)
                    return ag_error("%s: __metadata__ value of \"%s\" is a JSON %s, "
                                    "expected a string",
                                    src, e->keys[k], js_type_name(e->items[k].type));
                if (ck_meta_put(ck, e->keys[k], e->items[k].str))
                    return ag_error("%s: out of memory", src);
            }
            meta = e;
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
            return ag_error("%s: tensor '%s': shape %s of %s needs %llu bytes but "
                            "data_offsets [%llu, %llu] span %llu",
                            src, key, ck_shape_fmt(s, sizeof s, ndim, shape), nn_dtype_name(dtype),
                            (unsigned long long)(numel * es), (unsigned long long)begin,
                            (unsigned long long)end, (unsigned long long)(end - begin));
        }
        if (ck_push_tensor(ck, key, dtype, ndim, shape, numel, begin, end))
            return ag_error("%s: out of memory", src);
    }
    if (checksum_scheme(ck, meta, hdr, hlen, sum) || check_size(ck, hlen, file_size)) return -1;
    return check_coverage(ck, hlen, file_size);
}

/* Adds ck's data section to st in windows of 4 MiB, each released once hashed (a mapped
 * file: ck_release). The same hash as one update over the whole section. */
static void hash_data(XXH3_state_t *st, const nn_ckpt *ck) {
    const size_t window = (size_t)4 << 20;
    if (!ck->len) XXH3_64bits_update(st, "", 0);
    for (size_t at = 0; at < ck->len; at += window) {
        size_t n = ck->len - at < window ? ck->len - at : window;
        XXH3_64bits_update(st, ck->data + at, n);
        ck_release(ck, at, at + n);
    }
}

int ck_file_hash(const char *hdr, size_t hlen, size_t digits_at, const nn_ckpt *ck,
                 uint64_t *out) {
    XXH3_state_t *st = XXH3_createState();
    if (!st) return -1;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, len8, 8);
    XXH3_64bits_update(st, hdr, digits_at);
    XXH3_64bits_update(st, "0000000000000000", 16);
    XXH3_64bits_update(st, hdr + digits_at + 16, hlen - digits_at - 16);
    hash_data(st, ck);
    *out = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return 0;
}

/* The bit layout of the float dtypes: element size, exponent field (shift, all-ones mask),
 * mantissa mask. An all-ones exponent is infinity (mantissa 0) or NaN, except in F8_E4M3
 * (PyTorch's float8_e4m3fn), which has no infinity and one NaN per sign, S.1111.111. */
static const struct {
    unsigned bytes, shift;
    uint64_t exp, mant;
} layouts[] = {
    [NN_F16] = {2, 10, 0x1f, 0x3ff},    [NN_BF16] = {2, 7, 0xff, 0x7f},
    [NN_F32] = {4, 23, 0xff, 0x7fffff}, [NN_F64] = {8, 52, 0x7ff, 0xfffffffffffffull},
    [NN_F8_E4M3] = {1, 3, 0xf, 0x7},    [NN_F8_E5M2] = {1, 2, 0x1f, 0x3},
};

/* NULL when the element at p (dtype d, little-endian) is finite or d is not a float dtype;
 * else "NaN", "inf" or "-inf". */
static const char *nonfinite(nn_dtype d, const unsigned char *p) {
    if ((unsigned)d >= sizeof layouts / sizeof layouts[0] || !layouts[d].bytes) return NULL;
    uint64_t u = 0;
    for (unsigned i = 0; i < layouts[d].bytes; i++) u |= (uint64_t)p[i] << (8 * i);
    uint64_t exp = (u >> layouts[d].shift) & layouts[d].exp, mant = u & layouts[d].mant;
    if (exp != layouts[d].exp) return NULL;
    if (d == NN_F8_E4M3) return mant == layouts[d].mant ? "NaN" : NULL;
    if (mant) return "NaN";
    return (u >> (8 * layouts[d].bytes - 1)) ? "-inf" : "inf";
}

/* Whether the n F32 values at p are all finite: their exponent fields are not all ones. Blocks of
 * 16 with no exit, so that the compiler vectorises them (a checkpoint's tensors are mostly
 * F32; the element-wise nonfinite then runs only to name a bad value). */
static bool f32_all_finite(const unsigned char *p, uint64_t n) {
    uint32_t bad = 0;
    uint64_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 16 <= n; i += 16) {
        uint32_t u[16];
        memcpy(u, p + 4 * i, sizeof u);
        for (int l = 0; l < 16; l++) bad |= (~u[l] & 0x7f800000u) == 0;
    }
#endif
    for (; i < n; i++) bad |= nonfinite(NN_F32, p + 4 * i) != NULL;
    return !bad;
}

/* Refuses a float tensor holding NaN or infinity, naming it and its first bad element. */
static int check_finite(const nn_ckpt *ck, const nn_ckpt_tensor *t) {
    size_t es = nn_dtype_size(t->dtype);
    uint64_t count = 0, first = 0;
    const char *what = NULL;
    if (t->dtype == NN_F32 && f32_all_finite(ck->data + t->begin, t->numel)) {
        ck_release(ck, t->begin, t->end);
        return 0;
    }
    for (uint64_t i = 0; i < t->numel; i++) {
        const char *w = nonfinite(t->dtype, ck->data + t->begin + i * es);
        if (!w) continue;
        if (!count++) first = i, what = w;
    }
    ck_release(ck, t->begin, t->end);
    if (!count) return 0;
    char s[160];
    return ag_error("%s: tensor '%s' (%s %s) holds %llu non-finite value%s (element %llu is "
                    "%s): refused, the model it holds diverged or was damaged; load with "
                    "nn_ckpt_load_opts.allow_nonfinite to inspect it",
                    nn_ckpt_source(ck), t->name, nn_dtype_name(t->dtype),
                    ck_shape_fmt(s, sizeof s, t->ndim, t->shape), (unsigned long long)count,
                    count > 1 ? "s" : "", (unsigned long long)first, what);
}

int ck_verify(nn_ckpt *ck, const ck_sum_info *sum, const char *hdr, size_t hlen,
              const nn_ckpt_load_opts *opts) {
    const char *src = nn_ckpt_source(ck);
    char got[17];
    if (sum->scheme == NN_CKPT_CHECKED_FILE) {
        uint64_t h;
        if (ck_file_hash(hdr, hlen, sum->digits_at, ck, &h))
            return ag_error("%s: out of memory", src);
        snprintf(got, sizeof got, "%016llx", (unsigned long long)h);
        if (memcmp(hdr + sum->digits_at, got, 16) != 0)
            return ag_error("%s: checksum does not match: metadata %s is %.16s but the file "
                            "hashes to %s: its header (metadata, tensor names, dtypes, shapes, "
                            "offsets) or its data changed after it was saved (edited or "
                            "damaged); refused",
                            src, NN_CKPT_CHECKSUM_KEY, hdr + sum->digits_at, got);
    } else if (sum->scheme == NN_CKPT_CHECKED_DATA) {
        const char *want = nn_ckpt_meta(ck, NN_CKPT_LEGACY_CHECKSUM_KEY);
        XXH3_state_t *st = XXH3_createState();
        if (!st) return ag_error("%s: out of memory", src);
        XXH3_64bits_reset(st);
        hash_data(st, ck);
        XXH64_hash_t h = XXH3_64bits_digest(st);
        XXH3_freeState(st);
        snprintf(got, sizeof got, "%016llx", (unsigned long long)h);
        if (strcmp(want, got) != 0)
            return ag_error("%s: checksum does not match: metadata %s (legacy scheme, the data "
                            "section only) is \"%.40s\" but the data hashes to %s: its data "
                            "changed after it was saved (edited or damaged); refused",
                            src, NN_CKPT_LEGACY_CHECKSUM_KEY, want, got);
    }
    ck->checked = sum->scheme;
    if (opts && opts->allow_nonfinite) return 0;
    for (size_t i = 0; i < ck->n; i++)
        if (check_finite(ck, &ck->recs[i]->t)) return -1;
    return 0;
}
