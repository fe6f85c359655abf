/* json.c -- strict recursive-descent JSON parser (see json.h). */
#include "nn/io/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct jp {
    const char *s;
    size_t len, i;
    char *err;
    size_t errlen;
    int depth;
} jp;

static int fail(jp *p, const char *what) {
    if (p->i < p->len) snprintf(p->err, p->errlen, "%s at byte %zu", what, p->i);
    else snprintf(p->err, p->errlen, "%s at the end of the header (byte %zu)", what, p->i);
    return -1;
}

static void skip_ws(jp *p) {
    while (p->i < p->len &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int hex4(jp *p, unsigned *out) {
    unsigned v = 0;
    if (p->len - p->i < 4) return fail(p, "truncated \\u escape");
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return fail(p, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) k = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, min = 0x10000;
    else return 0;
    if (n < k) return 0;
    unsigned cp = c & (0x7F >> k);
    for (size_t j = 1; j < k; j++) {
        if ((s[j] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[j] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return k;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses a string at p->i (which is '"'); *out is a malloc'd decoded copy. */
/* The code point of a \u escape (p->i just past the 'u'), a surrogate pair joined; 0 or -1. */
static int u_escape(jp *p, unsigned *cp) {
    if (hex4(p, cp)) return -1;
    if (*cp >= 0xD800 && *cp <= 0xDBFF) { /* high surrogate: a low one must follow */
        unsigned lo;
        if (p->len - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
            return fail(p, "unpaired surrogate in \\u escape");
        p->i += 2;
        if (hex4(p, &lo)) return -1;
        if (lo < 0xDC00 || lo > 0xDFFF) return fail(p, "unpaired surrogate in \\u escape");
        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (*cp >= 0xDC00 && *cp <= 0xDFFF) {
        return fail(p, "unpaired surrogate in \\u escape");
    }
    return *cp == 0 ? fail(p, "\\u0000 in string") : 0;
}

static int parse_string(jp *p, char **out) {
    p->i++; /* opening quote */
    size_t start = p->i;
    /* The decoded form is never longer than the raw text. */
    size_t end = start;
    while (end < p->len && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->len) return fail(p, "unterminated string");
    char *o = malloc(end - start + 1);
    if (!o) return fail(p, "out of memory");
    size_t n = 0;
    while (p->s[p->i] != '"') {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c < 0x20) {
            free(o);
            return fail(p, "control character in string");
        }
        if (c != '\\') {
            size_t k = utf8_len((const unsigned char *)p->s + p->i, p->len - p->i);
            if (!k) {
                free(o);
                return fail(p, "invalid UTF-8 in string");
            }
            memcpy(o + n, p->s + p->i, k);
            n += k;
            p->i += k;
            continue;
        }
        p->i++;
        char e = p->s[p->i++];
        unsigned cp;
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u':
            if (u_escape(p, &cp)) {
                free(o);
                return -1;
            }
            n += put_utf8(o + n, cp);
            break;
        default:
            p->i--;
            free(o);
            return fail(p, "bad escape in string");
        }
    }
    p->i++; /* closing quote */
    o[n] = '\0';
    *out = o;
    return 0;
}

static int parse_number(jp *p, js_val *v) {
    size_t st = p->i;
    const char *s = p->s;
#define DIGIT(k) ((k) < p->len && s[k] >= '0' && s[k] <= '9')
    if (p->i < p->len && s[p->i] == '-') p->i++;
    if (!DIGIT(p->i)) return fail(p, "bad number");
    if (s[p->i] == '0') p->i++;
    else
        while (DIGIT(p->i)) p->i++;
    if (p->i < p->len && s[p->i] == '.') {
        p->i++;
        if (!DIGIT(p->i)) return fail(p, "bad number");
        while (DIGIT(p->i)) p->i++;
    }
    if (p->i < p->len && (s[p->i] == 'e' || s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->len && (s[p->i] == '+' || s[p->i] == '-')) p->i++;
        if (!DIGIT(p->i)) return fail(p, "bad number");
        while (DIGIT(p->i)) p->i++;
    }
#undef DIGIT
    v->type = JS_NUM;
    v->num = s + st;
    v->numlen = p->i - st;
    return 0;
}

static int parse_value(jp *p, js_val *v);

/* Appends (key, value) to a growing container; keys may be NULL for arrays. */
static int push(jp *p, js_val *c, size_t *cap, char *key, js_val *item) {
    if (c->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 4;
        js_val *it = realloc(c->items, nc * sizeof *it);
        if (!it) return fail(p, "out of memory");
        c->items = it;
        if (c->type == JS_OBJ) {
            char **k = realloc(c->keys, nc * sizeof *k);
            if (!k) return fail(p, "out of memory");
            c->keys = k;
        }
        *cap = nc;
    }
    c->items[c->n] = *item;
    if (c->type == JS_OBJ) c->keys[c->n] = key;
    c->n++;
    return 0;
}

static int parse_container(jp *p, js_val *v, bool obj) {
    size_t cap = 0;
    v->type = obj ? JS_OBJ : JS_ARR;
    if (++p->depth > JS_MAX_DEPTH) return fail(p, "nesting too deep");
    p->i++; /* '{' or '[' */
    skip_ws(p);
    if (p->i < p->len && p->s[p->i] == (obj ? '}' : ']')) {
        p->i++;
        p->depth--;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        js_val item = {0};
        skip_ws(p);
        if (obj) {
            if (p->i >= p->len || p->s[p->i] != '"') return fail(p, "expected a string key");
            if (parse_string(p, &key)) return -1;
            for (size_t k = 0; k < v->n; k++)
                if (strcmp(v->keys[k], key) == 0) {
                    char m[160];
                    snprintf(m, sizeof m, "duplicate key \"%.100s\"", key);
                    free(key);
                    return fail(p, m);
                }
            skip_ws(p);
            if (p->i >= p->len || p->s[p->i] != ':') {
                free(key);
                return fail(p, "expected ':'");
            }
            p->i++;
        }
        if (parse_value(p, &item) || push(p, v, &cap, key, &item)) {
            free(key);
            js_free(&item);
            return -1;
        }
        skip_ws(p);
        if (p->i < p->len && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->len && p->s[p->i] == (obj ? '}' : ']')) {
            p->i++;
            break;
        }
        return fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    p->depth--;
    return 0;
}

static int parse_value(jp *p, js_val *v) {
    skip_ws(p);
    v->pos = p->i;
    if (p->i >= p->len) return fail(p, "expected a value");
    char c = p->s[p->i];
    if (c == '{' || c == '[') return parse_container(p, v, c == '{');
    if (c == '"') {
        v->type = JS_STR;
        return parse_string(p, &v->str);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    static const struct {
        const char *w;
        js_type t;
        bool b;
    } lits[] = {{"true", JS_BOOL, true}, {"false", JS_BOOL, false}, {"null", JS_NULL, false}};
    for (size_t k = 0; k < sizeof lits / sizeof lits[0]; k++) {
        size_t n = strlen(lits[k].w);
        if (p->len - p->i >= n && memcmp(p->s + p->i, lits[k].w, n) == 0) {
            v->type = lits[k].t;
            v->b = lits[k].b;
            p->i += n;
            return 0;
        }
    }
    return fail(p, "expected a value");
}

int js_parse(const char *text, size_t len, js_val *out, char *err, size_t errlen) {
    jp p = {.s = text, .len = len, .err = err, .errlen = errlen};
    memset(out, 0, sizeof *out);
    if (parse_value(&p, out) == 0) {
        skip_ws(&p);
        if (p.i == p.len) return 0;
        fail(&p, "unexpected text after the JSON value");
    }
    js_free(out);
    memset(out, 0, sizeof *out);
    return -1;
}

void js_free(js_val *v) {
    if (!v) return;
    if (v->type == JS_STR) free(v->str);
    if (v->type == JS_ARR || v->type == JS_OBJ) {
        for (size_t k = 0; k < v->n; k++) {
            js_free(&v->items[k]);
            if (v->keys) free(v->keys[k]);
        }
        free(v->items);
        free(v->keys);
    }
    memset(v, 0, sizeof *v);
}

const js_val *js_get(const js_val *o, const char *key) {
    if (!o || o->type != JS_OBJ) return NULL;
    for (size_t k = 0; k < o->n; k++)
        if (strcmp(o->keys[k], key) == 0) return &o->items[k];
    return NULL;
}

bool js_uint(const js_val *v, uint64_t *out) {
    if (!v || v->type != JS_NUM) return false;
    uint64_t x = 0;
    for (size_t k = 0; k < v->numlen; k++) {
        char c = v->num[k];
        if (c < '0' || c > '9') return false;
        unsigned d = (unsigned)(c - '0');
        if (x > (UINT64_MAX - d) / 10) return false;
        x = x * 10 + d;
    }
    *out = x;
    return true;
}

bool js_utf8_valid(const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = utf8_len((const unsigned char *)s + i, n - i);
        if (!k) return false;
        i += k;
    }
    return true;
}

const char *js_type_name(js_type t) {
    static const char *names[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)t < 6 ? names[t] : "?";
}
