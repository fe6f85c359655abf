/* datasets/unicode.c -- strict UTF-8 and Python-compatible lowercasing. */
#include <stdlib.h>

#include "datasets/internal.h"
#include "datasets/unicode.h"

int ds_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    /* Valid lead bytes and the allowed range of the second byte (Unicode table 3-7). */
    int len;
    unsigned lo = 0x80, hi = 0xBF;
    uint32_t c;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2;
        c = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3;
        c = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;      /* no overlong                */
        else if (b0 == 0xED) hi = 0x9F; /* no surrogates               */
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
        c = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;      /* no overlong                */
        else if (b0 == 0xF4) hi = 0x8F; /* nothing above U+10FFFF     */
    } else {
        return 0; /* continuation byte as lead, C0, C1, F5..FF */
    }
    if (n < (size_t)len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    c = (c << 6) | (s[1] & 0x3F);
    for (int i = 2; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    *cp = c;
    return len;
}

int ds_utf8_encode(uint32_t cp, unsigned char out[4]) {
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static bool in_ranges(const ds_u_range *r, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n; /* first range with r.hi >= cp */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].hi < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && r[lo].lo <= cp;
}

bool ds_u_is_cased(uint32_t cp) { return in_ranges(ds_u_cased, ds_u_cased_len, cp); }
bool ds_u_is_case_ignorable(uint32_t cp) {
    return in_ranges(ds_u_case_ignorable, ds_u_case_ignorable_len, cp);
}
bool ds_u_is_space(uint32_t cp) { return in_ranges(ds_u_space, ds_u_space_len, cp); }

int ds_u_lower(uint32_t cp, uint32_t out[2]) {
    if (cp < 0x80) {
        out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        return 1;
    }
    if (cp == 0x130) { /* LATIN CAPITAL LETTER I WITH DOT ABOVE: SpecialCasing */
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    /* Last run whose first code point is <= cp. */
    size_t lo = 0, hi = ds_u_lower_runs_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ds_u_lower_runs[mid].first <= cp) lo = mid + 1;
        else hi = mid;
    }
    out[0] = cp;
    if (lo > 0) {
        const ds_u_run *r = &ds_u_lower_runs[lo - 1];
        uint32_t k = cp - r->first;
        if (k % r->stride == 0 && k / r->stride < r->count)
            out[0] = (uint32_t)((int64_t)cp + r->delta);
    }
    return 1;
}

/* Start of the code point ending just before byte `pos` (> lo), or SIZE_MAX if the bytes
 * there do not form one. */
static size_t prev_start(const unsigned char *s, size_t lo, size_t pos) {
    size_t i = pos - 1;
    int k = 0;
    while (i > lo && (s[i] & 0xC0) == 0x80 && k < 3) {
        i--;
        k++;
    }
    uint32_t cp;
    if (ds_utf8_decode(s + i, pos - i, &cp) != (int)(pos - i)) return SIZE_MAX;
    return i;
}

uint32_t ds_u_sigma_lower(const unsigned char *s, size_t lo, size_t pos, size_t hi) {
    /* \p{cased} \p{case-ignorable}* SIGMA !( \p{case-ignorable}* \p{cased} ) */
    bool cased_before = false;
    size_t i = pos;
    while (i > lo) {
        size_t st = prev_start(s, lo, i);
        if (st == SIZE_MAX) break;
        uint32_t cp;
        ds_utf8_decode(s + st, i - st, &cp);
        if (!ds_u_is_case_ignorable(cp)) {
            cased_before = ds_u_is_cased(cp);
            break;
        }
        i = st;
    }
    if (!cased_before) return 0x3C3;
    size_t j = pos + 2; /* U+03A3 is two bytes */
    while (j < hi) {
        uint32_t cp;
        int len = ds_utf8_decode(s + j, hi - j, &cp);
        if (len == 0) break;
        if (!ds_u_is_case_ignorable(cp)) return ds_u_is_cased(cp) ? 0x3C3 : 0x3C2;
        j += (size_t)len;
    }
    return 0x3C2;
}

int ds_utf8_lower(const char *src, size_t n, char **out, size_t *out_len) {
    const unsigned char *s = (const unsigned char *)src;
    *out = NULL;
    /* Lowercasing grows a string by at most 3/2 (2-byte -> 3-byte code points). */
    if (n > (SIZE_MAX - 8) / 2) return ag_error("string of %zu bytes too long", n);
    unsigned char *o = malloc(n + n / 2 + 8);
    if (!o) return ag_error("out of memory lowercasing %zu bytes", n);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp, low[2];
        int len = ds_utf8_decode(s + i, n - i, &cp);
        if (len == 0 || cp == 0) {
            free(o);
            if (len == 0) return ag_error("invalid UTF-8 byte 0x%02X at byte offset %zu", s[i], i);
            return ag_error("NUL byte at byte offset %zu", i);
        }
        int m = (cp == 0x3A3) ? (low[0] = ds_u_sigma_lower(s, 0, i, n), 1) : ds_u_lower(cp, low);
        for (int t = 0; t < m; t++) k += (size_t)ds_utf8_encode(low[t], o + k);
        i += (size_t)len;
    }
    o[k] = 0;
    *out = (char *)o;
    if (out_len) *out_len = k;
    return 0;
}
