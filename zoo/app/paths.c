/* paths.c -- every path a sub-command reads or writes, checked before any work (cli_internal.h):
 * outputs that collide with an input or with each other, outputs that cannot be written, and the
 * lock of a checkpoint being trained. */
#define _DEFAULT_SOURCE /* realpath, flock */
#include "zoo/app/cli_internal.h"
#include "zoo/app/run_cfg_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef TG_SOURCE_DIR
#define TG_SOURCE_DIR NULL
#endif

/* The files a sub-command writes into --plots (a name ending in '*' is a prefix). */
static const char *const TRAIN_PLOTS[] = {"loss.csv",
                                          "loss.svg",
                                          "valid.csv",
                                          "valid_bleu.svg",
                                          "valid_bleu_time.svg",
                                          "valid_loss.svg",
                                          "valid_sacrebleu.svg",
                                          "valid_sacrebleu_time.svg",
                                          "attention_*",
                                          NULL};
static const char *const STATS_PLOTS[] = {"lengths.svg", NULL};

/* One path of the sub-command. */
typedef struct use {
    char flag[40];       /* "--checkpoint", "--plots (its loss.csv)" */
    char path[PATH_MAX]; /* resolved: symbolic links, "." and ".." */
    bool out;            /* written */
} use;

/* path resolved as far as it exists: realpath of the path, or of its folder joined with its
 * last name (a file to be made). 0, or -1 naming the flag: a dangling symbolic link, a folder
 * that does not exist. */
static int resolve(const char *flag, const char *path, char *out) {
    struct stat st;
    if (!lstat(path, &st) && S_ISLNK(st.st_mode) && stat(path, &st))
        return ag_error("%s %s: a symbolic link to nothing (%s)", flag, path, strerror(errno));
    if (realpath(path, out)) return 0;
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    char real[PATH_MAX];
    if (!*name || !realpath(dir, real))
        return ag_error("%s %s: its folder %s does not exist", flag, path, dir);
    if (snprintf(out, PATH_MAX, "%s/%s", strcmp(real, "/") ? real : "", name) >= PATH_MAX)
        return ag_error("%s %s: path too long", flag, path);
    return 0;
}

/* Whether file (resolved) is one of the files written into dir (resolved) by names. */
static bool written_into(const char *dir, const char *const *names, const char *file) {
    size_t n = strlen(dir);
    if (strncmp(file, dir, n) || file[n] != '/' || strchr(file + n + 1, '/')) return false;
    for (int i = 0; names[i]; i++) {
        size_t k = strlen(names[i]);
        bool prefix = names[i][k - 1] == '*';
        if (prefix ? !strncmp(file + n + 1, names[i], k - 1) : !strcmp(file + n + 1, names[i]))
            return true;
    }
    return false;
}

/* Adds a path; an input that cannot be resolved (it will fail to open, with its own message)
 * is compared as written. 0 or -1. */
static int add(use *u, int *n, const char *flag, const char *path, bool out) {
    use *x = &u[(*n)++];
    snprintf(x->flag, sizeof x->flag, "%s", flag);
    x->out = out;
    if (!resolve(flag, path, x->path)) return 0;
    if (out) return -1;
    snprintf(x->path, sizeof x->path, "%s", path);
    return 0;
}

/* The paths of the configuration the sub-command takes (an extra of the same flag replaces an
 * item's: train's defaults) and the extras; plots: the --plots directory or NULL. */
static int gather(const zoo_cli *c, const zoo_path_extra *extra, int n_extra, use *u, int *n,
                  const char **plots) {
    const zoo_run *r = &c->run;
    *plots = NULL;
    for (int i = 0; i < r->n_items; i++) {
        const zoo_cfg_item *it = &r->items[i];
        if (it->f->type != ZOO_STR || strcmp(it->group->name, "files") || !zoo__takes(r, it))
            continue;
        const char *p = *(const char *const *)((const char *)it->obj + it->f->offset);
        char flag[40];
        snprintf(flag, sizeof flag, "--%s", it->f->name);
        bool replaced = false;
        for (int k = 0; k < n_extra; k++) replaced |= !strcmp(extra[k].flag, flag);
        if (!strcmp(it->f->name, "data")) { /* as the data loader finds it */
            char found[PATH_MAX];
            if (!ds_resolve_data_path(p, TG_SOURCE_DIR, found, sizeof found) &&
                add(u, n, flag, found, false))
                return -1;
        } else if (!strcmp(it->f->name, "plots")) {
            *plots = p;
        } else if (p && !replaced && add(u, n, flag, p, zoo_run_writes(r, it))) {
            return -1;
        }
    }
    for (int k = 0; k < n_extra; k++)
        if (add(u, n, extra[k].flag, extra[k].path, extra[k].out)) return -1;
    return 0;
}

int zoo__check_paths(const zoo_cli *c, const zoo_path_extra *extra, int n_extra) {
    use u[ZOO_RUN_MAX_ITEMS];
    int n = 0;
    const char *plots;
    if (n_extra > 8) return ag_error("check_paths: %d extra paths (at most 8)", n_extra);
    if (gather(c, extra, n_extra, u, &n, &plots)) return -1;
    char pdir[PATH_MAX];
    if (plots && zoo__mkdir_p(plots)) return -1;
    if (plots && !realpath(plots, pdir)) return ag_error("--plots %s: %s", plots, strerror(errno));
    const char *const *written = c->run.letter == 't' ? TRAIN_PLOTS : STATS_PLOTS;
    for (int i = 0; i < n; i++) {
        if (plots && written_into(pdir, written, u[i].path))
            return ag_error("%s %s is a file --plots %s writes: it would be overwritten", u[i].flag,
                            u[i].path, plots);
        for (int j = i + 1; j < n; j++)
            if ((u[i].out || u[j].out) && !strcmp(u[i].path, u[j].path))
                return ag_error("%s and %s name the same file (%s): an output never replaces an "
                                "input or another output",
                                u[i].flag, u[j].flag, u[j].path);
        if (u[i].out && zoo__check_output_file(u[i].flag, u[i].path)) return -1;
    }
    return 0;
}

/* ---- the lock of a checkpoint being trained ----
 * flock on PATH.lock, which holds the holder's pid. The holder removes the file before it lets
 * go (zoo__unlock), so none is left behind; a taker checks, once it holds the lock, that the
 * file it locked is still the one at PATH.lock (same inode), else it was removed in between and
 * the taker starts again: two processes never both hold the lock of one path. A process that
 * dies leaves the file, unlocked, for the next run to take. */

/* Whether fd is the file now at path. */
static bool still_there(int fd, const char *path) {
    struct stat a, b;
    return !fstat(fd, &a) && !stat(path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int zoo__lock(zoo_lock *l, const char *ckpath) {
    snprintf(l->path, sizeof l->path, "%s.lock", ckpath);
    for (int tries = 0; tries < 100; tries++) {
        l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (l->fd < 0) return ag_error("%s: cannot create: %s", l->path, strerror(errno));
        if (flock(l->fd, LOCK_EX | LOCK_NB)) {
            char pid[32] = "";
            ssize_t got = pread(l->fd, pid, sizeof pid - 1, 0);
            pid[got > 0 ? got : 0] = '\0';
            pid[strcspn(pid, "\n")] = '\0';
            close(l->fd);
            l->fd = -1;
            return ag_error("--checkpoint %s is being trained by process %s (its lock %s is "
                            "held): one run writes a checkpoint at a time",
                            ckpath, *pid ? pid : "?", l->path);
        }
        if (still_there(l->fd, l->path)) {
            char pid[32];
            int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            if (ftruncate(l->fd, 0) || pwrite(l->fd, pid, (size_t)len, 0) != len) {
                /* the pid is only informative */
            }
            return 0;
        }
        close(l->fd); /* removed by its last holder after we opened it: again */
    }
    l->fd = -1;
    return ag_error("%s: could not be locked: it keeps being replaced", l->path);
}

void zoo__unlock(zoo_lock *l) {
    if (l->fd < 0) return;
    unlink(l->path); /* while holding it: see above */
    close(l->fd);    /* releases the lock (the kernel does so too when the process dies) */
    l->fd = -1;
}
