/* zoo/models/config.h -- typed configs described once.
 *
 * A config is a plain C struct (zoo_transformer_cfg, the CLI's training options ...). Beside it
 * one constant table of zoo_field describes each field a user can set: its name, type, place in
 * the struct, accepted range and help. Everything that reads or writes a config by name goes
 * through that table: the command-line flags and --help, the checkpoint metadata
 * ("config.<name>"), validation. The model itself only reads the typed struct. Defaults live in
 * one place, a constant struct of the config's type (the kind's `defaults`); --help prints them
 * from it.
 *
 *     static const zoo_field FIELDS[] = {
 *         {"hiddens", ZOO_INT, offsetof(my_cfg, hiddens), 1, 4096, "model width"},
 *         {"dropout", ZOO_REAL, offsetof(my_cfg, dropout), 0, 0.99, "dropout probability"},
 *     };
 *
 * Values are parsed strictly, by one parser for flags, configuration files and checkpoint
 * metadata: the whole text must be a number of the field's type written in decimal, with no
 * blanks (integers without exponent; reals with an optional point and exponent, no hex, no
 * "inf" or "nan"), in [min, max].
 */
#ifndef TG_ZOO_CONFIG_H
#define TG_ZOO_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zoo_type {
    ZOO_INT,    /* int */
    ZOO_I64,    /* int64_t */
    ZOO_U64,    /* uint64_t */
    ZOO_REAL,   /* double */
    ZOO_BOOL,   /* bool: "0" / "1" (also "false" / "true") */
    ZOO_STR,    /* const char * (a flag: points into argv; min and max unused) */
    ZOO_SWITCH, /* int set to 1 by a flag without a value */
    ZOO_CHOICE, /* int: an index into the field's names table (NULL-terminated: {"gru", "lstm",
                 * NULL}: 0 gru, 1 lstm), parsed and formatted by name (min and max unused) */
} zoo_type;

typedef struct zoo_field {
    const char *name; /* flag "--name", checkpoint key "config.name" */
    zoo_type type;
    size_t offset;   /* of the field in its struct */
    double min, max; /* accepted range, inclusive (numbers) */
    const char *help;
    const char *const *names; /* ZOO_CHOICE: the names of its values, NULL-terminated */
} zoo_field;

/* The field called name in fields[0 .. n), or NULL. */
const zoo_field *zoo_field_find(const zoo_field *fields, int n, const char *name);

/* Parses text into field f of the struct at obj. Returns 0, or -1 with ag_last_error():
 * "<what>: expected an integer in [1, 64], got '3.5'" (what: e.g. "--heads" or
 * "file: metadata config.heads"). obj is unchanged on failure. */
int zoo_field_parse(const zoo_field *f, void *obj, const char *text, const char *what);

/* Writes field f of obj as text into buf (integers in decimal, reals in the shortest form that
 * parses back to the same double, bools as 0 / 1, strings as they are or "(none)").
 * Returns buf. */
char *zoo_field_format(const zoo_field *f, const void *obj, char *buf, size_t len);

/* "an integer in [1, 64]", "a number in [0, 0.99]", "0 or 1", "a text", "one of gru, lstm":
 * what f accepts. */
const char *zoo_field_expects(const zoo_field *f, char *buf, size_t len);

/* The value of a numeric field as a double (bools and switches as 0 / 1, a choice as its
 * index). */
double zoo_field_number(const zoo_field *f, const void *obj);

#ifdef __cplusplus
}
#endif

#endif
