/* tests/datasets/test_util.h -- helpers shared by the datasets CUnit runners. */
#ifndef TG_DS_TEST_UTIL_H
#define TG_DS_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <CUnit/CUnit.h>

/* Fails the current test with a formatted message (shown by CUnit's report). */
#define TU_FAIL(...) tu_fail_msg(__LINE__, __FILE__, __VA_ARGS__)
void tu_fail_msg(int line, const char *file, const char *fmt, ...);

/* Asserts a ds_ call returned `want`; on mismatch the failure shows ag_last_error(). */
#define TU_STATUS(call, want) tu_check_status((call), (want), #call, __LINE__, __FILE__)
bool tu_check_status(int got, int want, const char *expr, int line, const char *file);

/* Asserts that ag_last_error() contains `needle`. */
#define TU_ERROR_HAS(needle) tu_error_has((needle), __LINE__, __FILE__)
bool tu_error_has(const char *needle, int line, const char *file);

/* Asserts two doubles agree to a relative tolerance of 1e-12 (absolute near 0). */
#define TU_CLOSE(got, want) tu_close((got), (want), #got, __LINE__, __FILE__)
void tu_close(double got, double want, const char *expr, int line, const char *file);

/* The real fra.txt (TG_DATA_DEFAULT from CMake). If it is missing, the current test FAILS
 * with the path and this returns NULL (callers return): CI has the file. */
const char *tu_data_path(void);

/* Writes data[0..len) to a new temporary file; returns its malloc'd path (tu_unlink frees). */
char *tu_temp_file(const void *data, size_t len);
void tu_unlink(char *path);
/* A new temporary directory; malloc'd path. */
char *tu_temp_dir(void);

/* FNV-1a 64 over the little-endian bytes of n int32 values (as ref_numbers.py). */
uint64_t tu_fnv_i32(const int32_t *v, size_t n);

/* Runs one suite of tests; returns the process exit status (0 when everything passed). */
int tu_main(const char *suite, const CU_TestInfo *tests);

#endif
