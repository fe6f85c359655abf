/* module.c -- the module tree: building, naming, registration, forward with the mode, the
 * parameters of a subtree, Sequential. The built-in modules are in module_layers.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/internal.h"

struct nn_module {
    const nn_module_def *def;
    void *state;       /* state_size bytes, owned */
    char *name;        /* local name, owned ("" for a root) */
    char *path;        /* full prefix in the store, owned; NULL until registered */
    nn_module *parent; /* NULL for a root */
    nn_module **kids;  /* owned */
    size_t n_kids, cap_kids;
    bool training;
    bool owns_ps;          /* the store came from nn_module_init: freed with the root */
    nn_params *ps;         /* the store it is registered in, or NULL */
    size_t t0, t1, p0, p1; /* its tensors [t0, t1) and parameters [p0, p1) in the store */
};

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

nn_module *nn_module_new(const nn_module_def *def, size_t state_size) {
    if (!def || !def->kind || !def->forward) {
        ag_error("nn_module_new: the def needs a kind and a forward");
        return NULL;
    }
    nn_module *m = calloc(1, sizeof *m);
    if (m) m->name = dup_str("");
    if (m && m->name && state_size) m->state = calloc(1, state_size);
    if (!m || !m->name || (state_size && !m->state)) {
        if (m) free(m->name);
        free(m);
        ag_error("nn_module_new: out of memory (%s)", def->kind);
        return NULL;
    }
    m->def = def;
    m->training = true;
    return m;
}

void *nn_module_state(const nn_module *m) { return m ? m->state : NULL; }

static void free_tree(nn_module *m) {
    for (size_t i = 0; i < m->n_kids; i++) free_tree(m->kids[i]);
    if (m->def->free) m->def->free(m);
    free(m->kids);
    free(m->state);
    free(m->name);
    free(m->path);
    if (m->owns_ps) nn_params_free(m->ps);
    free(m);
}

void nn_module_free(nn_module *m) {
    if (m && !m->parent) free_tree(m);
}

static nn_module *child_named(const nn_module *m, const char *name, size_t len) {
    for (size_t i = 0; i < m->n_kids; i++)
        if (strlen(m->kids[i]->name) == len && !memcmp(m->kids[i]->name, name, len))
            return m->kids[i];
    return NULL;
}

/* The checks of nn_module_add, child non-NULL: 0, or -1 / -2 (a cycle) after ag_error. */
static int add_check(const nn_module *parent, const char *name, const nn_module *child) {
    const char *kind = parent->def->kind;
    if (parent->ps)
        return ag_error("nn_module_add: %s '%s' is already registered: add children before "
                        "nn_module_register",
                        kind, parent->path);
    if (child->parent)
        return ag_error("nn_module_add: the %s module already has a parent", child->def->kind);
    for (const nn_module *a = parent; a; a = a->parent)
        if (a == child)
            return ag_error("nn_module_add: the %s module would contain itself", child->def->kind) -
                   1; /* -2: not freed (it holds parent) */
    if (!*name || strchr(name, '.') || strlen(name) >= NN_NAME_MAX)
        return ag_error("nn_module_add: bad child name '%s' (non-empty, no '.', < %d chars)", name,
                        NN_NAME_MAX);
    if (child_named(parent, name, strlen(name)))
        return ag_error("nn_module_add: %s already has a child named '%s'", kind, name);
    return 0;
}

int nn_module_add(nn_module *parent, const char *name, nn_module *child) {
    if (!child)
        return ag_error_context("nn_module_add: the child is NULL (its constructor failed)");
    if (!parent) {
        nn_module_free(child);
        return ag_error("nn_module_add: the parent is NULL");
    }
    char num[32];
    if (!name) {
        snprintf(num, sizeof num, "%zu", parent->n_kids);
        name = num;
    }
    int bad = add_check(parent, name, child);
    if (bad) {
        if (bad == -1) nn_module_free(child);
        return -1;
    }
    if (parent->n_kids == parent->cap_kids) {
        size_t cap = parent->cap_kids ? 2 * parent->cap_kids : 4;
        nn_module **k = realloc(parent->kids, cap * sizeof *k);
        if (!k) {
            nn_module_free(child);
            return ag_error("nn_module_add: out of memory");
        }
        parent->kids = k;
        parent->cap_kids = cap;
    }
    char *nm = dup_str(name);
    if (!nm) {
        nn_module_free(child);
        return ag_error("nn_module_add: out of memory");
    }
    free(child->name);
    child->name = nm;
    child->parent = parent;
    parent->kids[parent->n_kids++] = child;
    return 0;
}

/* ---- the tree ---- */

const char *nn_module_kind(const nn_module *m) { return m ? m->def->kind : ""; }
const char *nn_module_name(const nn_module *m) { return m ? m->name : ""; }
const char *nn_module_path(const nn_module *m) { return m && m->path ? m->path : ""; }
size_t nn_module_child_count(const nn_module *m) { return m ? m->n_kids : 0; }

nn_module *nn_module_child(const nn_module *m, size_t i) {
    return m && i < m->n_kids ? m->kids[i] : NULL;
}

nn_module *nn_module_get(const nn_module *m, const char *path) {
    if (!m || !path) return NULL;
    while (*path && m) {
        const char *dot = strchr(path, '.');
        size_t len = dot ? (size_t)(dot - path) : strlen(path);
        m = child_named(m, path, len);
        path += len + (dot ? 1 : 0);
    }
    return (nn_module *)m;
}

/* ---- registration ---- */

static int register_tree(nn_module *m, nn_params *ps, const char *prefix) {
    m->ps = ps;
    m->t0 = m->t1 = nn_params_tensor_count(ps);
    m->p0 = m->p1 = nn_params_count(ps);
    m->path = dup_str(prefix);
    if (!m->path) return nn_params_fail(ps, "nn_module_register: out of memory");
    if (m->def->init && m->def->init(m, ps, prefix)) return -1;
    for (size_t i = 0; i < m->n_kids; i++) {
        char p[NN_NAME_MAX];
        if (!nn_join(p, sizeof p, prefix, "%s", m->kids[i]->name))
            return nn_params_fail(ps, "nn_module_register: the path '%s.%s' is longer than %d",
                                  prefix, m->kids[i]->name, NN_NAME_MAX - 1);
        if (register_tree(m->kids[i], ps, p)) return -1;
    }
    m->t1 = nn_params_tensor_count(ps);
    m->p1 = nn_params_count(ps);
    return 0;
}

int nn_module_register(nn_module *root, nn_params *ps, const char *prefix) {
    if (!root) return ag_error_context("nn_module_register: no module (a constructor failed)");
    if (!prefix) prefix = "";
    if (!ps) return ag_error("nn_module_register '%s': the store is NULL", prefix);
    if (nn_params_finalized(ps))
        return ag_error("nn_module_register '%s' (%s): the store is finalized; register every "
                        "module before nn_params_finalize",
                        prefix, root->def->kind);
    if (root->parent)
        return nn_params_fail(ps,
                              "nn_module_register '%s': the %s module has a parent: "
                              "register the root",
                              prefix, root->def->kind);
    if (root->ps)
        return nn_params_fail(ps,
                              "nn_module_register '%s': the %s module is already registered "
                              "as '%s'",
                              prefix, root->def->kind, root->path);
    if (strlen(prefix) >= NN_NAME_MAX)
        return nn_params_fail(ps, "nn_module_register: prefix longer than %d", NN_NAME_MAX - 1);
    return register_tree(root, ps, prefix);
}

nn_params *nn_module_params(const nn_module *m) { return m ? m->ps : NULL; }

/* Undoes a registration that failed: the tree is unregistered again. */
static void unregister_tree(nn_module *m) {
    for (size_t i = 0; i < m->n_kids; i++) unregister_tree(m->kids[i]);
    free(m->path);
    m->path = NULL;
    m->ps = NULL;
    m->t0 = m->t1 = m->p0 = m->p1 = 0;
}

nn_params *nn_module_init(nn_module *root, uint64_t seed) {
    if (!root) {
        ag_error_context("nn_module_init: no module (a constructor failed)");
        return NULL;
    }
    nn_params *ps = nn_params_new();
    if (!ps) {
        ag_error("nn_module_init (%s): out of memory", root->def->kind);
        return NULL;
    }
    if (nn_module_register(root, ps, "") || nn_params_finalize(ps, seed)) {
        if (root->ps == ps) unregister_tree(root); /* root as it was given */
        nn_params_free(ps);
        return NULL;
    }
    root->owns_ps = true;
    return ps;
}

/* The store of m when m is a root holding every tensor of it (else -1 after ag_error). */
static nn_params *whole_store(const nn_module *m, const char *fn) {
    if (!m) {
        ag_error("%s: no module", fn);
        return NULL;
    }
    if (!m->ps || m->parent || m->t0 != 0 || m->t1 != nn_params_tensor_count(m->ps)) {
        ag_error("%s (%s '%s'): expected a registered root that holds every tensor of its store "
                 "(nn_module_init); for a shared store use nn_save_params / nn_load_params",
                 fn, m->def->kind, m->path ? m->path : "");
        return NULL;
    }
    return m->ps;
}

int nn_module_save(const nn_module *m, const char *path) {
    nn_params *ps = whole_store(m, "nn_module_save");
    return ps ? nn_save_params(ps, path) : -1;
}

int nn_module_load(nn_module *m, const char *path) {
    nn_params *ps = whole_store(m, "nn_module_load");
    return ps ? nn_load_params(ps, path) : -1;
}

/* ---- forward, modes ---- */

/* m's path: after registration the one it was given, before it the local names from the root
 * down ("2.0"); "" for a root. Written into buf (len > 0). */
static void path_of(const nn_module *m, char *buf, size_t len) {
    if (m->path || !m->parent) {
        snprintf(buf, len, "%s", m->path ? m->path : "");
        return;
    }
    path_of(m->parent, buf, len);
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, "%s%s", n ? "." : "", m->name);
}

/* "classifier.2 (Linear)", or "Linear" for a path "" */
static const char *label(const nn_module *m, char *buf, size_t len) {
    char p[NN_NAME_MAX];
    path_of(m, p, sizeof p);
    if (*p) snprintf(buf, len, "%s (%s)", p, m->def->kind);
    else snprintf(buf, len, "%s", m->def->kind);
    return buf;
}

ag_tensor *nn_module_fail(const nn_module *m, const nn_ctx *c, const char *fmt, ...) {
    char msg[768], lb[NN_NAME_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ag_report(c ? c->tape : NULL, "%s: %s", m ? label(m, lb, sizeof lb) : "module", msg);
}

ag_tensor *nn_module_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    if (!m || !c || !x) return NULL;
    if (m->def->init && !m->ps)
        return nn_module_fail(m, c,
                              "not registered in a parameter store (nn_module_register "
                              "on the root, then nn_params_finalize)");
    if (m->def->init && !nn_params_finalized(m->ps))
        return nn_module_fail(m, c, "the store is not finalized (nn_params_finalize)");
    nn_ctx own = *c;
    own.training = c->training && m->training;
    ag_tensor *y = m->def->forward(m, &own, x);
    if (!y && m->n_kids == 0) { /* an op inside failed: put the path in front, once */
        char lb[NN_NAME_MAX + 64];
        label(m, lb, sizeof lb);
        if (strncmp(ag_last_error(), lb, strlen(lb)) != 0) ag_error_context("%s", lb);
    }
    return y;
}

void nn_module_train(nn_module *m, bool on) {
    if (!m) return;
    m->training = on;
    for (size_t i = 0; i < m->n_kids; i++) nn_module_train(m->kids[i], on);
}

bool nn_module_training(const nn_module *m) { return m && m->training; }

/* ---- parameters and state ---- */

size_t nn_module_param_count(const nn_module *m) { return m && m->ps ? m->p1 - m->p0 : 0; }
size_t nn_module_tensor_count(const nn_module *m) { return m && m->ps ? m->t1 - m->t0 : 0; }

ag_tensor *nn_module_param_at(const nn_module *m, size_t i) {
    return i < nn_module_param_count(m) ? nn_params_at(m->ps, m->p0 + i) : NULL;
}

ag_tensor *nn_module_tensor_at(const nn_module *m, size_t i) {
    return i < nn_module_tensor_count(m) ? nn_params_tensor_at(m->ps, m->t0 + i) : NULL;
}

const char *nn_module_state_name(const nn_module *m, const ag_tensor *t) {
    size_t n = nn_module_tensor_count(m);
    for (size_t i = 0; i < n; i++)
        if (nn_module_tensor_at(m, i) == t)
            return *m->path ? t->name + strlen(m->path) + 1 : t->name;
    return NULL;
}

void nn_module_zero_grad(nn_module *m) {
    size_t n = nn_module_param_count(m);
    for (size_t i = 0; i < n; i++) {
        ag_tensor *p = nn_module_param_at(m, i);
        if (p->grad) memset(p->grad, 0, (size_t)p->numel * sizeof *p->grad);
    }
}

/* ---- Sequential ---- */

static ag_tensor *sequential_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    for (size_t i = 0; i < m->n_kids && x; i++) x = nn_module_forward(m->kids[i], c, x);
    return x;
}

static const nn_module_def sequential_def = {"Sequential", NULL, sequential_forward, NULL};

nn_module *nn_sequential_of(int n, nn_module *const *mods) {
    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (!mods[i]) bad = i;
    nn_module *s = bad < 0 && n >= 0 ? nn_module_new(&sequential_def, 0) : NULL;
    if (!s) {
        if (bad >= 0)
            ag_error_context("nn_sequential: module %d is NULL (its constructor failed)", bad);
        else if (n < 0) ag_error("nn_sequential: n = %d", n);
        for (int i = 0; i < n; i++) nn_module_free(mods[i]);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (nn_module_add(s, NULL, mods[i])) { /* out of memory, or a module with a parent */
            for (int j = i + 1; j < n; j++) nn_module_free(mods[j]);
            nn_module_free(s);
            return NULL;
        }
    return s;
}
