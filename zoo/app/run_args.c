/* run_args.c -- a run's configuration from the command line and from files, and back out as a
 * file and as --help (run_cfg.h). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/run_cfg_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration files ---- */

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = '\0';
    return s;
}

/* One line of a configuration file (NUL-terminated, in place); *group: the current section. */
static int read_line(zoo_run *r, const char *path, long no, char *line,
                     const zoo_cfg_group **group) {
    char *s = trim(line);
    if (!*s || *s == '#') return 0;
    if (*s == '[') {
        char *end = strchr(s, ']');
        if (!end || end[1]) return ag_error("%s:%ld: expected [group], got '%s'", path, no, s);
        *end = '\0';
        if (!(*group = zoo_cfg_group_find(s + 1)))
            return ag_error("%s:%ld: unknown group [%s] (files, data, recipe, train, exec, model)",
                            path, no, s + 1);
        return 0;
    }
    char *eq = strchr(s, '=');
    if (!eq) return ag_error("%s:%ld: expected 'name = value', got '%s'", path, no, s);
    *eq = '\0';
    char *name = trim(s), *value = trim(eq + 1), what[4200];
    snprintf(what, sizeof what, "%s:%ld: %s", path, no, name);
    int i = zoo__item_index(r, name);
    if (i < 0) return ag_error("%s: not a setting of %s %s", what, r->program, r->cmd);
    if (*group && r->items[i].group != *group)
        return ag_error("%s: belongs to [%s], not [%s]", what, r->items[i].group->name,
                        (*group)->name);
    return zoo__set_item(r, i, value, what);
}

int zoo_run_read_file(zoo_run *r, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return ag_error("--config %s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *text = malloc(cap);
    for (size_t got = 1; text && got;) {
        if (n + 1 >= cap) {
            char *t = cap < (1u << 24) ? realloc(text, cap *= 2) : NULL;
            if (!t) free(text);
            text = t;
            if (!t) break;
        }
        n += got = fread(text + n, 1, cap - n - 1, f);
    }
    bool bad = ferror(f);
    fclose(f);
    if (!text || bad) {
        free(text);
        return ag_error("--config %s: %s", path, bad ? "read error" : "too large or out of memory");
    }
    text[n] = '\0';
    if (strlen(text) != n) {
        free(text);
        return ag_error("--config %s: holds a NUL byte: not a text file", path);
    }
    free(r->file_text);
    r->file_text = text; /* the strings set from it point into it */
    const zoo_cfg_group *group = NULL;
    long no = 1;
    for (char *line = text; line; no++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (read_line(r, path, no, line, &group)) return -1;
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

void zoo_run_dump(const zoo_run *r, FILE *f) {
    fprintf(f,
            "# %s %s: the whole configuration. Read it back with --config FILE; flags given "
            "beside it override it.\n",
            r->program, r->cmd);
    const zoo_cfg_group *group = NULL;
    for (int i = 0; i < r->n_items; i++) {
        const zoo_cfg_item *it = &r->items[i];
        if (!zoo__takes(r, it)) continue;
        if (it->group != group) fprintf(f, "%s[%s]\n", group ? "\n" : "", it->group->name);
        group = it->group;
        char v[4200];
        const char *s = it->f->type == ZOO_STR
                            ? *(const char *const *)((const char *)it->obj + it->f->offset)
                            : NULL;
        fprintf(f, "%s = %s\n", it->f->name,
                it->f->type == ZOO_STR ? (s ? s : "")
                                       : zoo_field_format(it->f, it->obj, v, sizeof v));
    }
}

/* ---- the command line ---- */

/* The value of --name in argv (--name VALUE or --name=VALUE; the last one), or NULL. */
static const char *find_arg(int argc, char **argv, const char *name) {
    const char *v = NULL;
    size_t len = strlen(name);
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "--", 2) && !strncmp(argv[i] + 2, name, len)) {
            const char *rest = argv[i] + 2 + len;
            if (!*rest && i + 1 < argc) v = argv[i + 1];
            else if (*rest == '=') v = rest + 1;
        }
    }
    return v;
}

/* One flag at argv[*i]: a control flag, an item, or (translate) a sentence. 0 or -1. */
static int parse_one(zoo_run *r, int argc, char **argv, int *i) {
    const char *arg = argv[*i];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return r->help = true, 0;
    if (strncmp(arg, "--", 2)) {
        if (r->letter != 'r' && r->letter != 'a') return ag_error("unexpected argument '%s'", arg);
        r->pos[r->n_pos++] = argv[*i];
        return 0;
    }
    char name[64], what[80];
    const char *eq = strchr(arg, '='), *value = NULL;
    size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
    if (len >= sizeof name) return ag_error("unknown flag %s", arg);
    memcpy(name, arg + 2, len);
    name[len] = '\0';
    if (!strcmp(name, "dump-config")) {
        if (eq) return ag_error("--dump-config takes no value");
        return r->dump = true, 0;
    }
    bool control = !strcmp(name, "preset") || !strcmp(name, "config");
    int k = control ? -1 : zoo__item_index(r, name);
    if (!control && k < 0) return ag_error("unknown flag --%s", name);
    if (!control && r->items[k].f->type == ZOO_SWITCH) {
        if (eq) return ag_error("--%s takes no value", name);
        r->given[k] = true;
        return *(int *)((char *)r->items[k].obj + r->items[k].f->offset) = 1, 0;
    }
    value = eq ? eq + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
    if (!value) return ag_error("--%s needs a value", name);
    if (control) return 0; /* applied first, by zoo_run_parse */
    snprintf(what, sizeof what, "--%s", name);
    if (r->items[k].f->type == ZOO_STR && !*value)
        return ag_error("--%s: expected a path, got an empty text", name);
    return zoo__set_item(r, k, value, what);
}

int zoo_run_parse(zoo_run *r, int argc, char **argv) {
    r->pos = argv;
    r->n_pos = 0;
    r->preset = find_arg(argc, argv, "preset");
    r->config = find_arg(argc, argv, "config");
    if (r->preset && r->letter != 't') return ag_error("--preset: only train takes a preset");
    if (r->preset && zoo_run_apply_preset(r, r->preset)) return -1;
    if (r->config && zoo_run_read_file(r, r->config)) return -1;
    for (int i = 0; i < argc; i++)
        if (parse_one(r, argc, argv, &i)) return -1;
    return 0;
}

/* ---- help ---- */

static void help_line(FILE *f, const zoo_field *fl, const void *obj) {
    char def[4200];
    if (fl->type == ZOO_SWITCH ||
        (fl->type == ZOO_STR && !*(const char *const *)((const char *)obj + fl->offset)))
        fprintf(f, "  --%-20s %s\n", fl->name, fl->help);
    else if (fl->type == ZOO_CHOICE)
        fprintf(f, "  --%-20s %s: %s (default %s)\n", fl->name,
                zoo_field_expects(fl, def, sizeof def), fl->help,
                zoo_field_format(fl, obj, def + 2048, sizeof def - 2048));
    else
        fprintf(f, "  --%-20s %s (default %s)\n", fl->name, fl->help,
                zoo_field_format(fl, obj, def, sizeof def));
}

void zoo_run_help(const zoo_run *r, FILE *f) {
    static const char *const what[][2] = {
        {"train", "train on the English-French data, report loss and tokens/sec, translate the "
                  "book's four sentences, write the checkpoint"},
        {"translate", "translate SENTENCE... (or each line of stdin) with a checkpoint"},
        {"eval", "corpus BLEU-4, chrF and mean d2l BLEU of a checkpoint on a split"},
        {"stats", "pairs, vocabulary sizes, sentence lengths and the length histogram"},
        {"export", "write a checkpoint as a plain state_dict (--out) and its vocabularies "
                   "(--src-vocab, --tgt-vocab), for PyTorch"},
        {"average", "write the element-wise mean of the parameters of CHECKPOINT... (or of the "
                    "--last N kept copies of --checkpoint) as a checkpoint (--out) for translate "
                    "and eval"}};
    for (size_t i = 0; i < sizeof what / sizeof *what; i++)
        if (!strcmp(what[i][0], r->cmd))
            fprintf(f, "usage: %s %s [flags]%s\n  %s\n\nflags:\n", r->program, r->cmd,
                    r->letter == 'r'   ? " [SENTENCE ...]"
                    : r->letter == 'a' ? " [CHECKPOINT ...]"
                                       : "",
                    what[i][1]);
    const zoo_cfg_group *model = zoo_cfg_group_find(ZOO_CFG_MODEL);
    for (int i = 0; i < r->n_items; i++)
        if (zoo__takes(r, &r->items[i]) && r->items[i].group != model)
            help_line(f, r->items[i].f, r->items[i].obj);
    if (r->letter == 't')
        fprintf(f, "  --%-20s %s\n", "preset NAME",
                "full: the whole-corpus recipe (docs/zoo.md); flags given as well override it");
    fprintf(f, "  --%-20s %s\n  --%-20s %s\n", "config FILE",
            "read the configuration from FILE (as --dump-config writes it); flags override it",
            "dump-config", "print the whole configuration as such a file and exit");
    if (r->letter == 's' || r->letter == 'x' || r->letter == 'a') return;
    fprintf(f, "\n%s config%s:\n", r->kind->name,
            r->letter == 't' ? ""
                             : " (for a plain state_dict; a tapegrad checkpoint carries its own)");
    for (int i = 0; i < r->n_items; i++)
        if (r->items[i].group == model) help_line(f, r->items[i].f, r->items[i].obj);
}
