/* datasets/unicode.h -- the UTF-8 and Unicode pieces the pipeline needs to match Python.
 *
 * d2l reads fra.txt as strict UTF-8 and lowercases it with Python's str.lower(); the
 * metrics split on Python's whitespace (str.split()). These functions reproduce exactly
 * that for the Unicode version in ds_unicode_version (tables generated from Python's
 * unicodedata by datasets/gen_unicode_tables.py), including the one multi-code-point
 * lowercase (U+0130 -> "i" U+0307) and the Final_Sigma rule (U+03A3 becomes U+03C2 at the
 * end of a word, U+03C3 elsewhere). */
#ifndef TG_DS_UNICODE_H
#define TG_DS_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Unicode version of the generated tables, e.g. "14.0.0". */
extern const char ds_unicode_version[];

/* Decodes the UTF-8 sequence starting at s[0] (n >= 1 bytes available). Returns its length
 * (1..4) and stores the code point in *cp, or returns 0 when the bytes are not valid UTF-8
 * by Python's strict rules: no overlong forms, no surrogates (U+D800..DFFF), nothing above
 * U+10FFFF, no truncated sequence. Never reads past s[n-1]. */
int ds_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* Encodes a code point (< 0x110000, not a surrogate) into out; returns 1..4 bytes. */
int ds_utf8_encode(uint32_t cp, unsigned char out[4]);

/* Python's lowercase of one code point, without context: returns the number of code points
 * written to out (1, or 2 for U+0130). U+03A3 maps to U+03C3 here; the context-dependent
 * final sigma is handled by ds_utf8_lower() and the fra-eng reader. */
int ds_u_lower(uint32_t cp, uint32_t out[2]);

/* Unicode properties (derived, as Python uses them). */
bool ds_u_is_cased(uint32_t cp);          /* Lowercase | Uppercase | Lt                   */
bool ds_u_is_case_ignorable(uint32_t cp); /* Mn|Me|Cf|Lm|Sk|WB=MidLetter,MidNumLet,SQuote */
bool ds_u_is_space(uint32_t cp);          /* Python str.isspace()                         */

/* Lowercase of U+03A3 at byte offset `pos` of s[lo..hi) by the Final_Sigma rule: U+03C2 when
 * preceded by a cased letter (skipping case-ignorable ones) and not followed by one,
 * U+03C3 otherwise. s[lo..pos) must be valid UTF-8; the scan stops at invalid bytes. */
uint32_t ds_u_sigma_lower(const unsigned char *s, size_t lo, size_t pos, size_t hi);

/* Python's s.lower() on UTF-8 text s[0..n). On success *out is a malloc'd NUL-terminated
 * string (caller frees) of *out_len bytes (out_len may be NULL). Returns 0, or -1 for invalid
 * UTF-8 or a NUL byte (the message gives the byte offset) or out of memory. */
int ds_utf8_lower(const char *s, size_t n, char **out, size_t *out_len);

/* Tables (generated). */
typedef struct {
    uint32_t first, count, stride;
    int32_t delta;
} ds_u_run;
typedef struct {
    uint32_t lo, hi;
} ds_u_range;
extern const ds_u_run ds_u_lower_runs[];
extern const size_t ds_u_lower_runs_len;
extern const ds_u_range ds_u_cased[], ds_u_case_ignorable[], ds_u_space[];
extern const size_t ds_u_cased_len, ds_u_case_ignorable_len, ds_u_space_len;

#ifdef __cplusplus
}
#endif

#endif
