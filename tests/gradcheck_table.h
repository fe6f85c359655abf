/* gradcheck_table.h -- the table of the gradient checks a test program ran, printed at its end.
 *
 *     ag_gradcheck_result r = tg_gradcheck(name, fn, n, in, user, &opts); // ag_gradcheck + a row
 *     ...
 *     int main(void) { int rc = tg_test_run(suites); tg_gc_print("nn layers"); return rc; }
 *
 * One Markdown row per check: its name, the shapes (inputs -> output), the elements checked
 * (of those requiring a gradient; kinks skipped), the largest absolute and relative difference
 * between numeric and analytic gradient, the worst ratio of a difference to what the tolerance
 * allows (a check passes while it is <= 1), the tolerances and the central-difference step.
 * The fields come from ag_gradcheck_result (autograd/ag.h). Between the markers the table is
 * Markdown as printed; tests/gradcheck_doc.sh collects the tables of `ctest -L gradcheck` into
 * docs/gradcheck.md. A program that ran no check (a float32 build) prints nothing. */
#ifndef TG_GRADCHECK_TABLE_H
#define TG_GRADCHECK_TABLE_H

#include <stdio.h>

#include "autograd/ag.h"

#define TG_GC_MAX_ROWS 256

static struct {
    int n, dropped;
    ag_gradcheck_result rows[TG_GC_MAX_ROWS];
} tg_gc_table;

static inline void tg_gc_record(const ag_gradcheck_result *r) {
    if (tg_gc_table.n < TG_GC_MAX_ROWS) tg_gc_table.rows[tg_gc_table.n++] = *r;
    else tg_gc_table.dropped++;
}

/* ag_gradcheck, its result recorded as a row of the table. */
static inline ag_gradcheck_result tg_gradcheck(const char *name, ag_gradcheck_fn fn, int n_inputs,
                                               ag_tensor *const *inputs, void *user,
                                               const ag_gradcheck_opts *opts) {
    ag_gradcheck_result r = ag_gradcheck(name, fn, n_inputs, inputs, user, opts);
    tg_gc_record(&r);
    return r;
}

/* "|" inside a cell would end it: printed as "/". */
static inline void tg_gc_cell(const char *s) {
    for (; *s; s++) putchar(*s == '|' ? '/' : *s);
}

static inline void tg_gc_print(const char *title) {
    if (tg_gc_table.n == 0) return;
    int failed = 0;
    for (int i = 0; i < tg_gc_table.n; i++) failed += !tg_gc_table.rows[i].ok;
    printf("\n<!-- gradcheck table begin -->\n");
    printf("### %s: %d checks, %s\n\n", title, tg_gc_table.n,
           failed ? "SOME FAILED" : "all passed");
    printf("| check | shapes (inputs -> output) | elements checked | max abs diff | "
           "max rel diff | worst / allowed | atol, rtol | eps | result |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < tg_gc_table.n; i++) {
        const ag_gradcheck_result *r = &tg_gc_table.rows[i];
        printf("| ");
        tg_gc_cell(r->name);
        printf(" | ");
        tg_gc_cell(r->shapes);
        printf(" | %d of %d", r->checked, r->elems);
        if (r->skipped) printf(" (%d kinks skipped)", r->skipped);
        printf(" | %.1e | %.1e | %.1e | %.0e, %.0e | %.0e | %s |\n", r->max_abs_err, r->max_rel_err,
               r->worst, r->atol, r->rtol, r->eps, r->ok ? "pass" : "FAIL");
    }
    if (tg_gc_table.dropped) printf("\n(%d more checks not shown)\n", tg_gc_table.dropped);
    printf("<!-- gradcheck table end -->\n");
    fflush(stdout);
}

#endif
