/* cli.c -- the command line shared by the zoo's programs: the sub-commands, what they share
 * (failures, files, loading a checkpoint) and main. The configuration: run_cfg.c; each
 * sub-command: cmd_<name>.c. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/text.h"
#include "zoo/app/decode.h"

#ifndef TG_SOURCE_DIR
#define TG_SOURCE_DIR NULL
#endif

int zoo__usage(const zoo_cli *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s %s: ", c->run.program, c->run.cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see %s %s --help)\n", c->run.program, c->run.cmd);
    va_end(ap);
    return ZOO_EXIT_USAGE;
}

/* The library's hints that name its options, as the programs' flags say them. */
static const char *const HINTS[][2] = {
    {"load with nn_ckpt_load_opts.allow_nonfinite to inspect it",
     "give --allow-nonfinite to inspect it"},
    {"pass NN_CKPT_ALLOW_EXTRA, or use nn_ckpt_load_params_partial, to load a part of a larger "
     "model",
     "it is not a checkpoint of a model of this configuration"},
};

int zoo__fail(const zoo_cli *c, const char *msg) {
    for (size_t i = 0; i < sizeof HINTS / sizeof *HINTS; i++) {
        const char *at = strstr(msg, HINTS[i][0]);
        if (!at) continue;
        fprintf(stderr, "%s %s: %.*s%s%s\n", c->run.program, c->run.cmd, (int)(at - msg), msg,
                HINTS[i][1], at + strlen(HINTS[i][0]));
        return ZOO_EXIT_RUNTIME;
    }
    fprintf(stderr, "%s %s: %s\n", c->run.program, c->run.cmd, msg);
    return ZOO_EXIT_RUNTIME;
}

/* ---- files ---- */

int zoo__mkdir_p(const char *dir) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return ag_error("%s: path too long", dir);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || !*p) {
            char keep = *p;
            *p = '\0';
            if (mkdir(buf, 0777) && errno != EEXIST)
                return ag_error("%s: cannot create: %s", buf, strerror(errno));
            *p = keep;
            if (!keep) break;
        }
    }
    struct stat st;
    if (stat(dir, &st)) return ag_error("%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return ag_error("%s: exists and is not a directory", dir);
    if (access(dir, W_OK)) return ag_error("%s: cannot write into it: %s", dir, strerror(errno));
    return 0;
}

int zoo__check_output_file(const char *what, const char *path) {
    struct stat st;
    if (!stat(path, &st) && !S_ISREG(st.st_mode))
        return ag_error("%s %s: exists and is not a regular file", what, path);
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return ag_error("%s %s: its folder %s does not exist", what, path, dir);
    if (access(dir, W_OK))
        return ag_error("%s %s: cannot write into %s: %s", what, path, dir, strerror(errno));
    return 0;
}


int zoo__load_data(const zoo_cli *c, const ds_fra_options *o, ds_fra **d) {
    char path[4096];
    if (ds_resolve_data_path(c->run.cfg.files.data, TG_SOURCE_DIR, path, sizeof path) ||
        ds_fra_load(path, o, d))
        return zoo__fail(c, ag_last_error());
    return 0;
}

/* ---- checkpoints ---- */

void zoo__unload(zoo_loaded *l) {
    zoo_model_free(l->m);
    ds_vocab_free(l->sv);
    ds_vocab_free(l->tv);
    ds_vocab_free(l->out_tv);
    nn_ckpt_free(l->ck);
    ag_tape_free(l->t);
}

/* A subword checkpoint: its vocabularies with their models as codecs, in place of the plain
 * ones (the same pieces, checked). 0 or -1. */
static int use_subword(const zoo_cli *c, zoo_loaded *l) {
    ds_vocab *v[2];
    if (zoo_ckpt_subword(c->subword, l->ck, &v[0], &v[1])) return -1;
    const char *pre = nn_ckpt_meta(l->ck, DS_PREPROCESS_KEY);
    if (!v[0] && pre && !strcmp(pre, DS_PREPROCESS_NORMALIZE))
        return ag_error("%s: metadata " DS_PREPROCESS_KEY " is " DS_PREPROCESS_NORMALIZE
                        " (a subword model) but there is no vocab.src_model",
                        nn_ckpt_source(l->ck));
    if (!v[0]) return 0;
    ds_vocab **have[2] = {&l->sv, &l->tv};
    for (int i = 0; i < 2; i++) {
        int32_t n = ds_vocab_size(v[i]), bad = ds_vocab_size(*have[i]) == n ? -1 : 0;
        for (int32_t id = 0; bad < 0 && id < n; id++) {
            size_t la, lb;
            const char *a = ds_vocab_token(v[i], id, &la), *b = ds_vocab_token(*have[i], id, &lb);
            if (la != lb || memcmp(a, b, la)) bad = id;
        }
        if (bad >= 0) {
            ds_vocab_free(v[0]);
            ds_vocab_free(v[1]);
            return ag_error("%s: the %s subword model and vocab.%s differ (token %d)",
                            nn_ckpt_source(l->ck), i ? "target" : "source", i ? "tgt" : "src",
                            (int)bad);
        }
    }
    for (int i = 0; i < 2; i++) {
        ds_vocab_free(*have[i]);
        *have[i] = v[i];
    }
    return 0;
}

int zoo__load(const zoo_cli *c, zoo_loaded *l) {
    const zoo_run_cfg *cfg = &c->run.cfg;
    *l = (zoo_loaded){0};
    int rc = 0;
    if (!cfg->files.checkpoint) {
        rc = zoo__usage(c, "--checkpoint is required");
    } else if (cfg->exec.quantize_output && cfg->exec.quantize == NN_QUANT_NONE) {
        rc = zoo__usage(c, "--quantize-output: the output layer follows --quantize, which is "
                           "none; give --quantize int8 or bf16");
    } else if (!(l->t = ag_tape_new())) {
        rc = zoo__fail(c, "out of memory");
    } else if (nn_ckpt_load_with(&l->ck, cfg->files.checkpoint,
                                 &(nn_ckpt_load_opts){.allow_nonfinite = cfg->exec.allow_nonfinite,
                                                      .map = true}) ||
               (nn_ckpt_meta(l->ck, "tapegrad.model")
                    ? zoo_ckpt_load_model(l->ck, c->run.kind, &l->m, &l->sv, &l->tv)
                    : zoo_ckpt_import_state_dict(l->ck, c->run.kind, cfg->model,
                                                 cfg->files.src_vocab, cfg->files.tgt_vocab, &l->m,
                                                 &l->sv, &l->tv)) ||
               use_subword(c, l)) {
        rc = zoo__fail(c, ag_last_error());
    } else if (zoo_decode_quantize(l->m, (nn_quant)cfg->exec.quantize, cfg->exec.quantize_output)) {
        rc = zoo__fail(c, ag_last_error()); /* --quantize: translate and eval */
    }
    if (rc) zoo__unload(l);
    return rc;
}

int zoo__run_options(const zoo_cli *c, const nn_ckpt *ck, const char *const *names, int n,
                     ds_fra_options *o) {
    const zoo_cfg_group *g = zoo_cfg_group_find("data");
    bool only[64] = {false};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->n && k < 64; k++)
            if (!strcmp(g->opts[k].f.name, names[i]) && !zoo_run_given(&c->run, names[i]))
                only[k] = true;
    *o = c->run.cfg.data;
    return zoo_data_meta_read(ck, o, only) ? zoo__fail(c, ag_last_error()) : 0;
}

int zoo__check_steps(const zoo_cli *c, const void *cfg, int num_steps) {
    if (c->run.kind->check_steps && c->run.kind->check_steps(cfg, num_steps))
        return zoo__usage(c, "%s", ag_last_error());
    return 0;
}

int zoo__decode_threads(const zoo_cli *c) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (c->run.cfg.exec.threads || cores < 2) return 0;
    return ag_set_threads(cores < 256 ? (int)cores : 256) ? zoo__fail(c, ag_last_error()) : 0;
}

/* ---- main ---- */

static const struct {
    const char *name;
    char letter;
    int (*run)(zoo_cli *);
} CMDS[] = {{"train", 't', zoo__cmd_train},   {"translate", 'r', zoo__cmd_translate},
            {"eval", 'e', zoo__cmd_eval},     {"stats", 's', zoo__cmd_stats},
            {"export", 'x', zoo__cmd_export}, {"average", 'a', zoo__cmd_average}};

int zoo_cli_main(const zoo_model_kind *kind, int argc, char **argv) {
    return zoo_cli_main_dist(kind, NULL, argc, argv);
}

/* Parses the arguments and runs the sub-command (or prints its help or configuration). */
static int run_cmd(zoo_cli *c, int (*cmd)(zoo_cli *), int argc, char **argv) {
    zoo_run *r = &c->run;
    if (zoo_run_parse(r, argc, argv)) return zoo__usage(c, "%s", ag_last_error());
    if (r->help) return zoo_run_help(r, stdout), -1;
    if (r->dump) return zoo_run_dump(r, stdout), -1;
    if (r->letter != 't' && zoo__check_paths(c, NULL, 0)) /* train: with its defaults */
        return zoo__usage(c, "%s", ag_last_error());
    if (r->cfg.exec.threads && ag_set_threads(r->cfg.exec.threads))
        return zoo__fail(c, ag_last_error());
    int rc = cmd(c);
    ag_set_threads(1); /* joins the workers */
    return rc;
}

/* Under mpirun: train runs on every process, rank 0 alone printing (dist.h); the other
 * sub-commands refuse. 0 or an exit status. */
static int open_dist(zoo_cli *c, const struct zoo_dist_transport *transport) {
    if (!(c->dist = zoo_dist_open(transport))) return zoo__fail(c, ag_last_error());
    int rc = 0;
    if (zoo_dist_size(c->dist) > 1 && c->run.letter != 't')
        rc = zoo_dist_rank(c->dist) ? ZOO_EXIT_USAGE
                                    : zoo__usage(c,
                                                 "%s runs in one process; run it without mpirun "
                                                 "(%d processes here)",
                                                 c->run.cmd, zoo_dist_size(c->dist));
    else if (zoo_dist_hold_output(c->dist)) rc = zoo__fail(c, ag_last_error());
    if (rc) zoo_dist_close(c->dist);
    return rc;
}

int zoo_cli_main_dist(const zoo_model_kind *kind, const struct zoo_dist_transport *transport,
                      int argc, char **argv) {
    return zoo_cli_main_subword(kind, transport, NULL, argc, argv);
}

int zoo_cli_main_subword(const zoo_model_kind *kind, const struct zoo_dist_transport *transport,
                         const struct zoo_subword_ops *subword, int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: %s train|translate|eval|stats|export|average [flags]   (%s SUBCOMMAND "
               "--help for its flags)\n",
               kind->program, kind->program);
        return argc < 2 ? ZOO_EXIT_USAGE : 0;
    }
    for (size_t i = 0; i < sizeof CMDS / sizeof *CMDS; i++) {
        if (strcmp(argv[1], CMDS[i].name)) continue;
        zoo_cli c = {.subword = subword};
        if (zoo_run_init(&c.run, kind, CMDS[i].name, CMDS[i].letter)) {
            fprintf(stderr, "%s %s: %s\n", kind->program, CMDS[i].name, ag_last_error());
            return ZOO_EXIT_RUNTIME;
        }
        int rc = open_dist(&c, transport);
        if (rc) {
            zoo_run_free(&c.run);
            return rc;
        }
        rc = run_cmd(&c, CMDS[i].run, argc - 2, argv + 2);
        if (!zoo_dist_started(c.dist)) { /* a rank that failed before the check takes part */
            bool report;
            int all = zoo_dist_check_start(c.dist, rc > 0 ? rc : 0, NULL, &report);
            zoo_dist_write_held(c.dist, stderr);
            if (all && rc <= 0) rc = all;
        }
        zoo_run_free(&c.run);
        if (fflush(stdout) || ferror(stdout)) {
            /* a full disk or a closed pipe: what was printed is incomplete */
            fprintf(stderr, "%s %s: writing to standard output failed: %s\n", kind->program,
                    CMDS[i].name, strerror(errno));
            if (rc <= 0) rc = ZOO_EXIT_RUNTIME;
        }
        zoo_dist_close(c.dist);
        return rc < 0 ? 0 : rc;
    }
    fprintf(stderr,
            "%s: unknown sub-command '%s' (train, translate, eval, stats, export, "
            "average)\n",
            kind->program, argv[1]);
    return ZOO_EXIT_USAGE;
}
