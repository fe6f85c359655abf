/* tests/datasets/test_util.c -- helpers of the datasets CUnit runners. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

void tu_close(double got, double want, const char *expr, int line, const char *file) {
    double tol = 1e-12 * fmax(1.0, fabs(want));
    if (fabs(got - want) <= tol)
        CU_assertImplementation(CU_TRUE, (unsigned)line, expr, file, "", CU_FALSE);
    else tg_fail_(file, line, "%s = %.17g, expected %.17g", expr, got, want);
}

const char *tu_data_path(void) {
    static const char *path = TG_DATA_DEFAULT;
    if (access(path, R_OK) == 0) return path;
    TG_FAIL("fra.txt not found at %s: this test needs the real data (see docs/datasets.md)", path);
    return NULL;
}

uint64_t tu_fnv_i32(const int32_t *v, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t x = (uint32_t)v[i];
        for (int b = 0; b < 4; b++) {
            h ^= (x >> (8 * b)) & 0xFF;
            h *= 0x100000001b3ULL;
        }
    }
    return h;
}

ds_fra *tu_load_text(const char *text, const ds_fra_options *o) {
    ds_fra *d = NULL;
    TG_OK(ds_fra_load_mem(text, strlen(text), "mem.txt", o, &d));
    return d;
}

void tu_expect_row(const ds_fra *d, ds_side s, int64_t pair, const int32_t *want) {
    const int32_t *row = ds_fra_ids(d, s) + pair * ds_fra_num_steps(d);
    for (int j = 0; j < ds_fra_num_steps(d); j++)
        if (row[j] != want[j])
            TG_FAIL("side %d pair %lld step %d: %d, expected %d", s, (long long)pair, j, row[j],
                    want[j]);
}

void tu_expect_sentence(const ds_fra *d, ds_side s, int64_t pair, const char *want) {
    char *got = NULL;
    TG_OK(ds_fra_sentence(d, s, pair, &got));
    if (got && strcmp(got, want) != 0)
        TG_FAIL("side %d pair %lld: \"%s\", expected \"%s\"", s, (long long)pair, got, want);
    free(got);
}
