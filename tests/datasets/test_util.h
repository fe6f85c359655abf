/* tests/datasets/test_util.h -- helpers of the datasets CUnit runners that only they need (the
 * shared ones are in tests/tg_test.h). */
#ifndef TG_DS_TEST_UTIL_H
#define TG_DS_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "datasets/fra_eng.h"
#include "tests/tg_test.h"

/* Asserts two doubles agree to a relative tolerance of 1e-12 (absolute near 0). */
#define TU_CLOSE(got, want) tu_close((got), (want), #got, __LINE__, __FILE__)
void tu_close(double got, double want, const char *expr, int line, const char *file);

/* The real fra.txt (TG_DATA_DEFAULT from CMake). If it is missing, the current test FAILS
 * with the path and this returns NULL (callers return): CI has the file. */
const char *tu_data_path(void);

/* FNV-1a 64 over the little-endian bytes of n int32 values (as ref_numbers.py). */
uint64_t tu_fnv_i32(const int32_t *v, size_t n);

/* The pairs of text (a file's content, named "mem.txt" in messages) read with options o; the
 * caller frees the result with ds_fra_free. NULL after a failed assertion. */
ds_fra *tu_load_text(const char *text, const ds_fra_options *o);

/* Assert pair `pair`'s ids on side s equal want (num_steps values), or its detokenized
 * sentence equals want. */
void tu_expect_row(const ds_fra *d, ds_side s, int64_t pair, const int32_t *want);
void tu_expect_sentence(const ds_fra *d, ds_side s, int64_t pair, const char *want);

#endif
