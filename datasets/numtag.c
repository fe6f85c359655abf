/* datasets/numtag.c -- numbers as tags around a model (text.h, "Number tags"): the digit runs of
 * a source as the tags U+E000 + K, a target's copies of them likewise, and a model's tags
 * replaced by the source's digits. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ag_base.h"
#include "datasets/text.h"
#include "datasets/internal.h"

/* The UTF-8 of tag K (U+E000 + K, K < 64): EE 80 80+K. */
static bool is_tag(const char *p, int *k) {
    const unsigned char *u = (const unsigned char *)p;
    if (u[0] != 0xEE || u[1] != 0x80 || u[2] < 0x80 || u[2] >= 0x80 + DS_NUMTAG_MAX) return false;
    *k = u[2] - 0x80;
    return true;
}

static bool digit(char c) { return c >= '0' && c <= '9'; }

/* The distinct digit runs of s in order of first appearance, the first DS_NUMTAG_MAX of them:
 * run j at s + at[j], len[j] bytes. Returns their count. */
static int source_numbers(const char *s, const char *at[DS_NUMTAG_MAX], size_t len[DS_NUMTAG_MAX]) {
    int n = 0;
    for (const char *p = s; *p;) {
        if (!digit(*p)) {
            p++;
            continue;
        }
        size_t l = 0;
        while (digit(p[l])) l++;
        bool seen = false;
        for (int j = 0; j < n && !seen; j++) seen = len[j] == l && !memcmp(at[j], p, l);
        if (!seen && n < DS_NUMTAG_MAX) at[n] = p, len[n++] = l;
        p += l;
    }
    return n;
}

/* The tag of number j: j for shuffle 0, else entry j of a permutation of 0 .. DS_NUMTAG_MAX - 1
 * drawn from shuffle (splitmix64, then Fisher-Yates). */
static void tag_order(uint64_t shuffle, int order[DS_NUMTAG_MAX]) {
    for (int j = 0; j < DS_NUMTAG_MAX; j++) order[j] = j;
    for (int j = DS_NUMTAG_MAX - 1; shuffle && j > 0; j--) {
        uint64_t z = (shuffle += 0x9E3779B97F4A7C15u);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
        const int r = (int)((z ^ (z >> 31)) % (uint64_t)(j + 1)), t = order[j];
        order[j] = order[r], order[r] = t;
    }
}

/* text with each digit run equal to number j of src (source_numbers) as the tag tag_order
 * gives j, tags already in text removed (they cannot be told from ours); *out malloc'd. 0, or
 * -1 (out of memory). */
static int tag(const char *src, const char *text, uint64_t shuffle, char **out) {
    const char *at[DS_NUMTAG_MAX];
    size_t len[DS_NUMTAG_MAX];
    const int n = source_numbers(src, at, len);
    int order[DS_NUMTAG_MAX];
    tag_order(shuffle, order);
    /* a tag (3 bytes) replaces at least one digit: at most 3 times the length */
    char *o = malloc(3 * strlen(text) + 1), *w = o;
    if (!o) return ag_error("number tags: out of memory");
    for (const char *p = text; *p;) {
        int k;
        if (is_tag(p, &k)) {
            p += 3;
            continue;
        }
        if (!digit(*p)) {
            *w++ = *p++;
            continue;
        }
        size_t l = 0;
        while (digit(p[l])) l++;
        int j = 0;
        while (j < n && !(len[j] == l && !memcmp(at[j], p, l))) j++;
        if (j < n) {
            *w++ = (char)0xEE, *w++ = (char)0x80, *w++ = (char)(0x80 + order[j]);
        } else {
            memcpy(w, p, l);
            w += l;
        }
        p += l;
    }
    *w = '\0';
    *out = o;
    return 0;
}

int ds_numtag_source(const char *src, uint64_t shuffle, char **out) {
    *out = NULL;
    if (ds__utf8_check(src)) return -1;
    return tag(src, src, shuffle, out);
}

int ds_numtag_target(const char *src, const char *tgt, uint64_t shuffle, char **out) {
    *out = NULL;
    if (ds__utf8_check(src) || ds__utf8_check(tgt)) return -1;
    return tag(src, tgt, shuffle, out);
}

int ds_numtag_restore(const char *src, const char *text, char **out) {
    *out = NULL;
    if (ds__utf8_check(src) || ds__utf8_check(text)) return -1;
    const char *at[DS_NUMTAG_MAX];
    size_t len[DS_NUMTAG_MAX], longest = 0;
    const int n = source_numbers(src, at, len);
    for (int j = 0; j < n; j++) longest = len[j] > longest ? len[j] : longest;
    /* a tag (3 bytes) becomes at most `longest` bytes */
    char *o = malloc(strlen(text) / 3 * (longest > 3 ? longest : 3) + 4), *w = o;
    if (!o) return ag_error("number tags: out of memory");
    for (const char *p = text; *p;) {
        int k;
        if (!is_tag(p, &k)) {
            *w++ = *p++;
            continue;
        }
        if (k < n) {
            memcpy(w, at[k], len[k]);
            w += len[k];
        }
        p += 3;
    }
    *w = '\0';
    *out = o;
    return 0;
}
