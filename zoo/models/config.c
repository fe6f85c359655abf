/* config.c -- strict parsing and formatting of typed config fields (zoo/models/config.h). */
#include "zoo/models/config.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ag_base.h"

const zoo_field *zoo_field_find(const zoo_field *fields, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(fields[i].name, name)) return &fields[i];
    return NULL;
}

static bool integral(zoo_type t) { return t == ZOO_INT || t == ZOO_I64 || t == ZOO_U64; }

/* v in the shortest %g form that reads back as the same double; returns buf. */
static char *shortest(double v, char *buf, size_t len) {
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    return buf;
}

/* A choice field's name number i: copies it into buf and returns buf, or NULL when there are
 * not that many names. */
static const char *choice_name(const zoo_field *f, int i, char *buf, size_t len) {
    for (int k = 0; f->names && f->names[k]; k++)
        if (k == i) {
            snprintf(buf, len, "%s", f->names[k]);
            return buf;
        }
    return NULL;
}

const char *zoo_field_expects(const zoo_field *f, char *buf, size_t len) {
    char lo[32], hi[32];
    shortest(f->min, lo, sizeof lo);
    shortest(f->max, hi, sizeof hi);
    if (f->type == ZOO_U64 && f->max >= 18446744073709551615.0)
        snprintf(buf, len, "an integer in [%s, 18446744073709551615]", lo);
    else if (integral(f->type)) snprintf(buf, len, "an integer in [%s, %s]", lo, hi);
    else if (f->type == ZOO_REAL) snprintf(buf, len, "a number in [%s, %s]", lo, hi);
    else if (f->type == ZOO_BOOL) snprintf(buf, len, "0 or 1");
    else if (f->type == ZOO_CHOICE) {
        char name[64];
        size_t at = (size_t)snprintf(buf, len, "one of");
        for (int i = 0; choice_name(f, i, name, sizeof name) && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s %s", i ? "," : "", name);
    } else snprintf(buf, len, f->type == ZOO_STR ? "a text" : "no value");
    return buf;
}

/* Whole-string decimal integer (optional sign; no spaces, exponent or hex) in [min, max]. */
static bool parse_integer(const char *text, zoo_type t, double min, double max, int64_t *si,
                          uint64_t *ui) {
    if (!*text || (text[0] != '-' && text[0] != '+' && (text[0] < '0' || text[0] > '9')))
        return false;
    char *end;
    errno = 0;
    if (t == ZOO_U64) {
        if (text[0] == '-') return false;
        *ui = strtoull(text, &end, 10);
        if (errno || *end) return false;
        /* max of a u64 field is given as a double; compare in the integers when it is 2^64 */
        return (double)*ui >= min && (max >= 18446744073709551615.0 || (double)*ui <= max);
    }
    long long v = strtoll(text, &end, 10);
    if (errno || *end) return false;
    *si = v;
    return (double)v >= min && (double)v <= max;
}

/* Whole-string decimal real: optional sign, digits with an optional point (at least one digit),
 * an optional exponent; no blanks, hex, "inf" or "nan". */
static bool decimal_real(const char *p) {
    if (*p == '+' || *p == '-') p++;
    int digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++) digits++;
    if (!digits) return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    return !*p;
}

int zoo_field_parse(const zoo_field *f, void *obj, const char *text, const char *what) {
    char *dst = (char *)obj + f->offset, exp[96];
    int64_t si = 0;
    uint64_t ui = 0;
    switch (f->type) {
    case ZOO_STR: *(const char **)dst = text; return 0;
    case ZOO_SWITCH: *(int *)dst = 1; return 0;
    case ZOO_CHOICE: {
        char name[64];
        for (int i = 0; choice_name(f, i, name, sizeof name); i++)
            if (!strcmp(name, text)) {
                *(int *)dst = i;
                return 0;
            }
        break;
    }
    case ZOO_BOOL:
        if (!strcmp(text, "0") || !strcmp(text, "false")) *(bool *)dst = false;
        else if (!strcmp(text, "1") || !strcmp(text, "true")) *(bool *)dst = true;
        else break;
        return 0;
    case ZOO_REAL: {
        char *end;
        errno = 0;
        double v = strtod(text, &end);
        if (!decimal_real(text) || *end || errno || !isfinite(v) || v < f->min || v > f->max) break;
        *(double *)dst = v;
        return 0;
    }
    case ZOO_INT:
    case ZOO_I64:
    case ZOO_U64:
        if (!parse_integer(text, f->type, f->min, f->max, &si, &ui)) break;
        if (f->type == ZOO_INT) *(int *)dst = (int)si;
        else if (f->type == ZOO_I64) *(int64_t *)dst = si;
        else *(uint64_t *)dst = ui;
        return 0;
    }
    return ag_error("%s: expected %s, got '%s'", what, zoo_field_expects(f, exp, sizeof exp), text);
}

double zoo_field_number(const zoo_field *f, const void *obj) {
    const char *src = (const char *)obj + f->offset;
    switch (f->type) {
    case ZOO_INT: return *(const int *)src;
    case ZOO_I64: return (double)*(const int64_t *)src;
    case ZOO_U64: return (double)*(const uint64_t *)src;
    case ZOO_REAL: return *(const double *)src;
    case ZOO_BOOL: return *(const bool *)src;
    case ZOO_SWITCH: return *(const int *)src;
    case ZOO_CHOICE: return *(const int *)src;
    case ZOO_STR: break;
    }
    return NAN;
}

char *zoo_field_format(const zoo_field *f, const void *obj, char *buf, size_t len) {
    const char *src = (const char *)obj + f->offset;
    switch (f->type) {
    case ZOO_INT: snprintf(buf, len, "%d", *(const int *)src); break;
    case ZOO_I64: snprintf(buf, len, "%lld", (long long)*(const int64_t *)src); break;
    case ZOO_U64: snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)src); break;
    case ZOO_REAL: shortest(*(const double *)src, buf, len); break;
    case ZOO_BOOL: snprintf(buf, len, "%d", *(const bool *)src ? 1 : 0); break;
    case ZOO_SWITCH: snprintf(buf, len, "%s", *(const int *)src ? "on" : "off"); break;
    case ZOO_STR:
        snprintf(buf, len, "%s", *(const char *const *)src ? *(const char *const *)src : "(none)");
        break;
    case ZOO_CHOICE:
        if (!choice_name(f, *(const int *)src, buf, len))
            snprintf(buf, len, "(choice %d)", *(const int *)src);
        break;
    }
    return buf;
}
