/* test_cpu.c -- ag_cpu_has (autograd/ag_cpu.h): each feature as the compiler's own CPU check
 * reads it, an OR of features as all of them, the empty set always, and the same answers from
 * threads that ask at once, the first time (the cache being filled while they ask); the AMX
 * features only where Linux lists them for the CPU, and in an OR as all of its features;
 * AVX512-BF16 at full rate on AMD's cores only. */
#include "autograd/ag_base.h"
#include "autograd/ag_cpu.h"
#include "tests/tg_test.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum { NF = 5, NT = 4 };
static const unsigned feats[NF] = {AG_CPU_AVX512F, AG_CPU_AVX512BW, AG_CPU_AVX512VNNI,
                                   AG_CPU_AVX512BF16, AG_CPU_AVX2};
static const char *const names[NF] = {"avx512f", "avx512bw", "avx512vnni", "avx512bf16", "avx2"};
static unsigned answers[NT]; /* per thread: bit s set when subset s (of feats) is reported */

static void *ask(void *arg) {
    unsigned *out = arg, got = 0;
    for (unsigned s = 0; s < 1u << NF; s++) {
        unsigned want = 0;
        for (int i = 0; i < NF; i++)
            if (s >> i & 1) want |= feats[i];
        if (ag_cpu_has(want)) got |= 1u << s;
    }
    *out = got;
    return NULL;
}

/* The compiler's check, independently of the library (false where no kernel is built). */
static bool direct(int i) {
#if AG_CPU_X86_KERNELS
    __builtin_cpu_init();
    switch (i) { /* __builtin_cpu_supports takes a literal */
    case 0: return __builtin_cpu_supports("avx512f");
    case 1: return __builtin_cpu_supports("avx512bw");
    case 2: return __builtin_cpu_supports("avx512vnni");
    case 3: return __builtin_cpu_supports("avx512bf16");
    default: return __builtin_cpu_supports("avx2");
    }
#else
    (void)i;
    return false;
#endif
}

static void test_features(void) {
    /* first calls of the process, from NT threads at once */
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[t], NULL, ask, &answers[t]), 0);
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
    for (int t = 1; t < NT; t++) CU_ASSERT_EQUAL(answers[t], answers[0]);
    CU_ASSERT(ag_cpu_has(0));
    printf("\n    this CPU:");
    for (int i = 0; i < NF; i++) {
        bool has = ag_cpu_has(feats[i]);
        CU_ASSERT_EQUAL(has, direct(i));
        printf(" %s %s", names[i], has ? "yes" : "no");
    }
    printf(" ");
    /* an OR: every feature in it */
    for (unsigned s = 0; s < 1u << NF; s++) {
        bool all = true;
        for (int i = 0; i < NF; i++)
            if (s >> i & 1) all = all && direct(i);
        CU_ASSERT_EQUAL((answers[0] >> s & 1) != 0, all);
    }
}

/* True when /proc/cpuinfo's flags list `flag` (a whole word), false without the file. */
static bool cpuinfo_flag(const char *flag) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5))
            for (char *w = strtok(strchr(line, ':') ? strchr(line, ':') + 1 : line, " \t\n"); w;
                 w = strtok(NULL, " \t\n"))
                found = found || !strcmp(w, flag);
    fclose(f);
    return found;
}

static void test_amx(void) {
    const bool bf16 = ag_cpu_has(AG_CPU_AMX_BF16), int8 = ag_cpu_has(AG_CPU_AMX_INT8);
    printf("\n    AMX tiles granted: bf16 %s, int8 %s ", bf16 ? "yes" : "no", int8 ? "yes" : "no");
    if (bf16) CU_ASSERT(cpuinfo_flag("amx_tile") && cpuinfo_flag("amx_bf16"));
    if (int8) CU_ASSERT(cpuinfo_flag("amx_tile") && cpuinfo_flag("amx_int8"));
    CU_ASSERT_EQUAL(ag_cpu_has(AG_CPU_AMX_BF16 | AG_CPU_AMX_INT8), bf16 && int8);
    CU_ASSERT_EQUAL(ag_cpu_has(AG_CPU_AVX512VNNI | AG_CPU_AMX_INT8),
                    ag_cpu_has(AG_CPU_AVX512VNNI) && int8);
    CU_ASSERT_EQUAL(ag_cpu_has(AG_CPU_AMX_INT8), int8); /* the cached answer */
}

/* AVX512-BF16 at full rate: AMD's cores with AVX512-BF16, no other (ag_cpu.h). */
static void test_bf16_full_rate(void) {
    const bool full = ag_cpu_has(AG_CPU_BF16_DOT_FULL_RATE);
    printf("\n    vdpbf16ps at full rate: %s ", full ? "yes" : "no");
    if (full) CU_ASSERT(ag_cpu_has(AG_CPU_AVX512BF16));
#if AG_CPU_X86_KERNELS
    CU_ASSERT_EQUAL(full, direct(3) && __builtin_cpu_is("amd"));
#else
    CU_ASSERT(!full);
#endif
}

int main(void) {
    static CU_TestInfo tests[] = {{"features, ORs, threads", test_features},
                                  {"AMX: as the CPU's flags, in ORs", test_amx},
                                  {"AVX512-BF16 at full rate: AMD's", test_bf16_full_rate},
                                  CU_TEST_INFO_NULL};
    return tg_test_main("ag_cpu_has", tests);
}
