/* tests/datasets/test_util.c -- helpers shared by the datasets CUnit runners. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "datasets/common.h"
#include "test_util.h"
#include "tests/tg_test.h"

/* CUnit keeps the condition string pointer; keep a ring of message buffers alive. */
static char msgs[64][768];
static int next_msg;

static char *msg_buf(void) {
    char *m = msgs[next_msg];
    next_msg = (next_msg + 1) % 64;
    return m;
}

void tu_fail_msg(int line, const char *file, const char *fmt, ...) {
    char *m = msg_buf();
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof msgs[0], fmt, ap);
    va_end(ap);
    CU_assertImplementation(CU_FALSE, (unsigned)line, m, file, "", CU_FALSE);
}

bool tu_check_status(int got, int want, const char *expr, int line, const char *file) {
    if (got == want) {
        CU_assertImplementation(CU_TRUE, (unsigned)line, expr, file, "", CU_FALSE);
        return true;
    }
    tu_fail_msg(line, file, "%s returned %d (%s), expected %d (%s); ag_last_error: %s", expr, got,
                ds_status_name(got), want, ds_status_name(want), ag_last_error());
    return false;
}

bool tu_error_has(const char *needle, int line, const char *file) {
    if (strstr(ag_last_error(), needle)) {
        CU_assertImplementation(CU_TRUE, (unsigned)line, needle, file, "", CU_FALSE);
        return true;
    }
    tu_fail_msg(line, file, "error message \"%s\" lacks \"%s\"", ag_last_error(), needle);
    return false;
}

void tu_close(double got, double want, const char *expr, int line, const char *file) {
    double tol = 1e-12 * fmax(1.0, fabs(want));
    if (fabs(got - want) <= tol)
        CU_assertImplementation(CU_TRUE, (unsigned)line, expr, file, "", CU_FALSE);
    else tu_fail_msg(line, file, "%s = %.17g, expected %.17g", expr, got, want);
}

const char *tu_data_path(void) {
    static const char *path = TG_DATA_DEFAULT;
    if (access(path, R_OK) == 0) return path;
    tu_fail_msg(__LINE__, __FILE__,
                "fra.txt not found at %s: this test needs the real data (see docs/datasets.md)",
                path);
    return NULL;
}

char *tu_temp_file(const void *data, size_t len) {
    char *path = malloc(64);
    snprintf(path, 64, "/tmp/ds_test_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        exit(2);
    }
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w <= 0) {
            perror("write");
            exit(2);
        }
        p += w;
        len -= (size_t)w;
    }
    close(fd);
    return path;
}

void tu_unlink(char *path) {
    if (path) unlink(path);
    free(path);
}

char *tu_temp_dir(void) {
    char *path = malloc(64);
    snprintf(path, 64, "/tmp/ds_test_dir_XXXXXX");
    if (!mkdtemp(path)) {
        perror("mkdtemp");
        exit(2);
    }
    return path;
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

int tu_main(const char *suite, const CU_TestInfo *tests) {
    CU_SuiteInfo suites[] = {{suite, NULL, NULL, NULL, NULL, (CU_TestInfo *)tests},
                             CU_SUITE_INFO_NULL};
    return tg_test_run(suites);
}
