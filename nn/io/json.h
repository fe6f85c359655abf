/* json.h -- a small strict JSON parser for safetensors headers (internal to nn/).
 *
 * Parses RFC 8259 JSON into a tree: objects keep their members in file order (duplicate keys
 * are an error), strings are decoded to NUL-terminated UTF-8 (\u0000 and invalid UTF-8 are
 * rejected), numbers keep their text. Nesting deeper than JS_MAX_DEPTH is rejected. */
#ifndef TG_NN_JSON_H
#define TG_NN_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JS_MAX_DEPTH 32

typedef enum js_type { JS_NULL, JS_BOOL, JS_NUM, JS_STR, JS_ARR, JS_OBJ } js_type;

typedef struct js_val {
    js_type type;
    size_t pos;      /* byte offset of the value in the text, for messages */
    bool b;          /* JS_BOOL */
    const char *num; /* JS_NUM: points into the text (not NUL-terminated) */
    size_t numlen;
    char *str;            /* JS_STR: decoded, owned */
    size_t n;             /* JS_ARR / JS_OBJ: number of items / members */
    char **keys;          /* JS_OBJ: n decoded keys, owned */
    struct js_val *items; /* JS_ARR / JS_OBJ: n values, owned */
} js_val;

/* Parses text[0..len) (one value, surrounded by optional whitespace) into *out.
 * Returns 0, or -1 with a message ("expected ':' at byte 17") in err. On failure *out needs
 * no js_free. */
int js_parse(const char *text, size_t len, js_val *out, char *err, size_t errlen);
void js_free(js_val *v);

/* The member `key` of object o, or NULL. */
const js_val *js_get(const js_val *o, const char *key);
/* True and *out set when v is a non-negative integer literal (no sign, fraction or exponent)
 * that fits in 64 bits. */
bool js_uint(const js_val *v, uint64_t *out);
/* True when the NUL-terminated s is valid UTF-8 (what a JSON string may hold). */
bool js_utf8_valid(const char *s);
/* "object", "string" ... for messages. */
const char *js_type_name(js_type t);

#endif
