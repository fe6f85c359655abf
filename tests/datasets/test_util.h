/* tests/datasets/test_util.h -- helpers of the datasets CUnit runners that only they need (the
 * shared ones are in tests/tg_test.h). */
#ifndef TG_DS_TEST_UTIL_H
#define TG_DS_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tests/tg_test.h"

/* Asserts two doubles agree to a relative tolerance of 1e-12 (absolute near 0). */
#define TU_CLOSE(got, want) tu_close((got), (want), #got, __LINE__, __FILE__)
void tu_close(double got, double want, const char *expr, int line, const char *file);

/* The real fra.txt (TG_DATA_DEFAULT from CMake). If it is missing, the current test FAILS
 * with the path and this returns NULL (callers return): CI has the file. */
const char *tu_data_path(void);

/* FNV-1a 64 over the little-endian bytes of n int32 values (as ref_numbers.py). */
uint64_t tu_fnv_i32(const int32_t *v, size_t n);

#endif
