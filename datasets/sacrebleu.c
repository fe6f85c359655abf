/* datasets/sacrebleu.c -- the standard score: sacreBLEU's 13a tokenizer, corpus BLEU on raw
 * (detokenized) text, effective order, the signatures of BLEU and chrF (metrics.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/internal.h"
#include "datasets/metrics.h"
#include "datasets/unicode.h"

typedef struct {
    char *s;
    size_t n, cap;
} sbuf;

static int put(sbuf *b, const char *p, size_t k) {
    if (b->n + k + 1 > b->cap) {
        char *s = ds_regrow(b->s, &b->cap, b->n + k + 1, 1);
        if (!s) return -1;
        b->s = s;
    }
    memcpy(b->s + b->n, p, k);
    b->n += k;
    b->s[b->n] = 0;
    return 0;
}

static int putc1(sbuf *b, char c) { return put(b, &c, 1); }

/* Validates s[0..n) as UTF-8 without NUL (the message names `what` and the byte offset). */
static int check_text(const char *str, size_t n, const char *what) {
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int len = ds_utf8_decode(s + i, n - i, &cp);
        if (len == 0)
            return ag_error("%s: invalid UTF-8 byte 0x%02X at byte offset %zu", what, s[i], i);
        if (cp == 0) return ag_error("%s: NUL byte at byte offset %zu", what, i);
        i += (size_t)len;
    }
    return 0;
}

/* Python's str.replace(from, to): one left-to-right pass, non-overlapping, never rescanning
 * the text it wrote. Writes into *out (reset first). */
static int replace(const sbuf *in, const char *from, const char *to, sbuf *out) {
    size_t fl = strlen(from), tl = strlen(to);
    out->n = 0;
    if (put(out, "", 0)) return -1;
    for (size_t i = 0; i < in->n;) {
        if (i + fl <= in->n && memcmp(in->s + i, from, fl) == 0) {
            if (put(out, to, tl)) return -1;
            i += fl;
        } else {
            if (putc1(out, in->s[i])) return -1;
            i++;
        }
    }
    return 0;
}

/* The class [\{-\~\[-\` -\&\(-\+\:-\@\/] of the first regex: ASCII 0x20-0x26, 0x28-0x2B,
 * '/', 0x3A-0x40, 0x5B-0x60, 0x7B-0x7E. */
static bool sym(unsigned char c) {
    return (c >= 0x20 && c <= 0x26) || (c >= 0x28 && c <= 0x2B) || c == '/' ||
           (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}
static bool digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool pc(unsigned char c) { return c == '.' || c == ','; }

/* re.sub of a two-character pattern (first, second) -> first' ' second ' ' (rule 1: "\1 \2 "),
 * or ' ' first ' ' second (rule 2: " \1 \2"), or first ' ' second ' ' (rule 3 too). Python scans
 * left to right and resumes after each match; bytes stand for code points here because every
 * condition is on ASCII and a UTF-8 continuation byte is never '.', ',', '-' or a digit. */
static int two_char_rule(const sbuf *in, int rule, sbuf *out) {
    out->n = 0;
    if (put(out, "", 0)) return -1;
    const unsigned char *s = (const unsigned char *)in->s;
    for (size_t i = 0; i < in->n;) {
        bool m = false;
        if (i + 1 < in->n) {
            if (rule == 1) m = !digit(s[i]) && pc(s[i + 1]);   /* ([^0-9])([\.,]) */
            if (rule == 2) m = pc(s[i]) && !digit(s[i + 1]);   /* ([\.,])([^0-9]) */
            if (rule == 3) m = digit(s[i]) && s[i + 1] == '-'; /* ([0-9])(-)      */
        }
        if (!m) {
            if (putc1(out, (char)s[i])) return -1;
            i++;
            continue;
        }
        char r[4] = {(char)s[i], ' ', (char)s[i + 1], ' '};
        if (rule == 2) r[0] = ' ', r[1] = (char)s[i], r[2] = ' ', r[3] = (char)s[i + 1];
        if (put(out, r, 4)) return -1;
        i += 2;
    }
    return 0;
}

/* ' '.join(s.split()): runs of Unicode whitespace (str.isspace) become one space, none at the
 * ends. */
static int squeeze(const sbuf *in, sbuf *out) {
    out->n = 0;
    if (put(out, "", 0)) return -1;
    const unsigned char *s = (const unsigned char *)in->s;
    bool gap = false;
    for (size_t i = 0; i < in->n;) {
        uint32_t cp;
        int len = ds_utf8_decode(s + i, in->n - i, &cp);
        if (len == 0) return ag_error("13a: internal: invalid UTF-8"); /* validated before */
        if (ds_u_is_space(cp)) {
            gap = out->n > 0;
        } else {
            if (gap && putc1(out, ' ')) return -1;
            gap = false;
            if (put(out, in->s + i, (size_t)len)) return -1;
        }
        i += (size_t)len;
    }
    return 0;
}

int ds_tokenize_13a(const char *text, char **out) {
    *out = NULL;
    if (!text) return ag_error("ds_tokenize_13a: text is NULL");
    size_t n = strlen(text);
    if (check_text(text, n, "13a")) return -1;
    static const char *const rep[][2] = {{"<skipped>", ""}, {"-\n", ""},    {"\n", " "},
                                         {"&quot;", "\""},  {"&amp;", "&"}, {"&lt;", "<"},
                                         {"&gt;", ">"}};
    sbuf a = {0}, b = {0};
    int rc = put(&a, text, n);
    for (size_t r = 0; !rc && r < sizeof rep / sizeof rep[0]; r++) {
        rc = replace(&a, rep[r][0], rep[r][1], &b);
        sbuf t = a;
        a = b;
        b = t;
    }
    /* f' {line} ', then ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 ' (one character each) */
    b.n = 0;
    if (!rc) rc = put(&b, " ", 1);
    for (size_t i = 0; !rc && i < a.n; i++) {
        char c = a.s[i], r[3] = {' ', c, ' '};
        rc = sym((unsigned char)c) ? put(&b, r, 3) : putc1(&b, c);
    }
    if (!rc) rc = putc1(&b, ' ');
    for (int rule = 1; rule <= 3 && !rc; rule++) {
        rc = two_char_rule(&b, rule, &a);
        sbuf t = a;
        a = b;
        b = t;
    }
    if (!rc) rc = squeeze(&b, &a);
    free(b.s);
    if (rc) {
        free(a.s);
        return -1;
    }
    *out = a.s;
    return 0;
}

/* Python's s.rstrip(): the length without trailing Unicode whitespace. */
static size_t rstrip_len(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), keep = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int len = ds_utf8_decode(s + i, n - i, &cp);
        if (len == 0) return n; /* invalid: left for the tokenizer to report */
        i += (size_t)len;
        if (!ds_u_is_space(cp)) keep = i;
    }
    return keep;
}

/* sacreBLEU's BLEU._preprocess_segment (case mixed): tokenizer_13a(sent.rstrip()). */
static int preprocess(const char *s, char **out) {
    size_t n = rstrip_len(s);
    char *cut = malloc(n + 1);
    if (!cut) return ag_error("out of memory");
    memcpy(cut, s, n);
    cut[n] = 0;
    int rc = ds_tokenize_13a(cut, out);
    free(cut);
    return rc;
}

int ds_sacrebleu_add(ds_bleu_stats *s, const char *hyp, const char *const *refs, size_t n_refs) {
    if (!s || !hyp || !refs || n_refs < 1)
        return ag_error("ds_sacrebleu_add: NULL argument or no reference");
    char *h = NULL, **r = calloc(n_refs, sizeof *r);
    size_t kept = 0;
    int rc = r ? 0 : ag_error("out of memory");
    for (size_t i = 0; !rc && i < n_refs; i++) {
        if (!refs[i]) rc = ag_error("ds_sacrebleu_add: reference %zu is NULL", i);
        else if (refs[i][0] && preprocess(refs[i], &r[kept++])) /* sacreBLEU drops "" */
            rc = ag_error_context("reference %zu", i);
    }
    if (!rc && kept == 0) rc = ag_error("ds_sacrebleu_add: empty reference (sacreBLEU refuses it)");
    if (!rc && preprocess(hyp, &h)) rc = ag_error_context("hypothesis");
    if (!rc) rc = ds_bleu_add(s, h, (const char *const *)r, kept);
    for (size_t i = 0; r && i < n_refs; i++) free(r[i]);
    free(r);
    free(h);
    return rc;
}

int ds_sacrebleu_corpus(const char *const *hyps, const char *const *refs, size_t n,
                        ds_bleu_score *out) {
    ds_bleu_stats s = {0};
    for (size_t i = 0; i < n; i++)
        if (ds_sacrebleu_add(&s, hyps[i], &refs[i], 1)) return -1;
    *out = ds_bleu_compute(&s);
    return 0;
}

const char *ds_sacrebleu_signature(int nrefs, char *buf, size_t cap) {
    snprintf(buf, cap, "nrefs:%d|case:mixed|eff:no|tok:13a|smooth:exp|version:%s", nrefs,
             DS_SACREBLEU_VERSION);
    return buf;
}

const char *ds_chrf_signature(int nrefs, char *buf, size_t cap) {
    snprintf(buf, cap, "nrefs:%d|case:mixed|eff:yes|nc:%d|nw:0|space:no|version:%s", nrefs,
             DS_CHRF_ORDER, DS_SACREBLEU_VERSION);
    return buf;
}

/* A token made only of . , ! ? ; : ) */
static bool closing(const char *t, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strchr(".,!?;:)", t[i])) return false;
    return n > 0;
}

int ds_detokenize_d2l(const char *text, char **out) {
    *out = NULL;
    if (!text) return ag_error("ds_detokenize_d2l: text is NULL");
    sbuf b = {0};
    int rc = put(&b, "", 0);
    for (const char *t = text; !rc;) {
        const char *sp = strchr(t, ' ');
        size_t n = sp ? (size_t)(sp - t) : strlen(t);
        if (n && b.n && !closing(t, n)) rc = putc1(&b, ' ');
        if (!rc && n) rc = put(&b, t, n);
        if (!sp) break;
        t = sp + 1;
    }
    if (rc) {
        free(b.s);
        return -1;
    }
    *out = b.s;
    return 0;
}
