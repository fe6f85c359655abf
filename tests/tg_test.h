/* tg_test.h -- the small shared harness of the CUnit test programs.
 *
 *     static CU_TestInfo tests[] = {{"name", fn}, ..., CU_TEST_INFO_NULL};
 *     static CU_SuiteInfo suites[] = {{"suite", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
 *     int main(void) { return tg_test_run(suites); }
 *
 * Exit status 0 only when every assertion passed (ctest reads it). */
#ifndef TG_TEST_H
#define TG_TEST_H

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>

static inline int tg_test_run(CU_SuiteInfo *suites) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    if (CU_register_suites(suites) != CUE_SUCCESS) {
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed ? 1 : 0;
}

#endif
