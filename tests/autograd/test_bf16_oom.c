/* test_bf16_oom.c -- a bf16 product that finds no memory is an error of its op, never a float32
 * product in its place (ag_op_gemm, autograd/ag_op.h): linear's and matmul's forward return NULL
 * with a message naming the op and the size, and a backward that fails makes ag_backward fail
 * naming its op, the gradient untouched.
 *
 * The failure is made real: in a child process (the limit stays there), on a new thread (whose
 * packed block for ag_gemm_bf16 does not exist yet), the address space is limited (RLIMIT_AS) to
 * what is mapped plus 256 KB (and what the allocator still has in reserve taken), after a float32
 * warm-up has given the tape its arena, so the 512 KB block is the one allocation that fails. */
#define _DEFAULT_SOURCE
#include "autograd/ag_op.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/tg_test.h"

#if defined(__SANITIZE_ADDRESS__)
/* The sanitizer's allocator returns NULL, as malloc does, instead of stopping the process. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

enum { R = 50, IN = 40, OUT = 30 };

static bool has(const char *a, const char *b, const char *c) {
    const char *e = ag_last_error();
    return strstr(e, a) && strstr(e, b) && strstr(e, c);
}

static bool limit_memory(void) {
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1) return false;
    fclose(f);
    rlim_t now = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE), lim = now + (256 << 10);
    struct rlimit rl = {lim, lim};
    if (setrlimit(RLIMIT_AS, &rl)) return false;
    /* glibc gives a thread a heap of address space reserved ahead: what of it is left goes now,
     * in blocks of the packed block's size, kept (the child exits without freeing them) */
    for (int i = 0; i < 1024; i++)
        if (!malloc(512 << 10)) return true;
    return false;
}

/* The checks in order; returns 0, or the number of the first one that failed. */
static void *child_thread(void *arg) {
    int *rc = arg;
    ag_tensor *x = ag_leaf_new(2, (int[]){R, IN}, true),
              *w = ag_leaf_new(2, (int[]){OUT, IN}, true), *b = ag_leaf_new(1, (int[]){OUT}, true),
              *a3 = ag_leaf_new(3, (int[]){2, R, IN}, false),
              *b3 = ag_leaf_new(3, (int[]){2, IN, OUT}, false);
    static float seed[R * OUT];
    for (int i = 0; i < R * IN; i++) x->data[i] = (float)(i % 7) - 3, a3->data[i] = 1;
    for (int i = 0; i < OUT * IN; i++) w->data[i] = (float)(i % 5) - 2, b3->data[i] = 2;
    for (int i = 0; i < R * OUT; i++) seed[i] = 1;
    ag_tape *t = ag_tape_new();
    /* float32 warm-up: the tape's arena, the thread pool, the float GEMM's scratch */
    ag_tensor *y = ag_linear(t, x, w, b);
    *rc = 1;
    if (!y || !ag_matmul(t, a3, b3) || ag_backward_seed(t, y, seed)) return NULL;
    ag_tape_reset(t);
    memset(x->grad, 0, sizeof(float) * R * IN);
    *rc = 2;
    if (!(y = ag_linear(t, x, w, b))) return NULL; /* recorded in float32, for the backward */
    *rc = 3;
    if (!limit_memory()) return NULL;
    *rc = 4;
    if (ag_set_precision(AG_BF16)) return NULL;
    *rc = 5; /* the backward: -1, naming the op; x's gradient untouched (its product failed) */
    if (ag_backward_seed(t, y, seed) != -1 || !has("backward: linear", "ag_gemm_bf16", "512 KB") ||
        !ag_tape_failed(t))
        return NULL;
    for (int i = 0; i < R * IN; i++)
        if (x->grad[i] != 0) return NULL;
    ag_tape_reset(t);
    *rc = 6; /* linear's forward */
    if (ag_linear(t, x, w, b) ||
        !has("linear: ag_gemm_bf16: out of memory", "512 KB", "50 x 30 x 40"))
        return NULL;
    ag_tape_reset(t);
    *rc = 7; /* matmul's, batches in parallel */
    if (ag_matmul(t, a3, b3) || !has("matmul: ag_gemm_bf16", "out of memory", "512 KB"))
        return NULL;
    *rc = 0;
    return NULL;
}

static void silent(const char *msg, void *user) { (void)msg, (void)user; }

static void test_oom_is_an_error(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        ag_set_error_handler(silent, NULL);
        int rc = 9;
        pthread_t th;
        if (pthread_create(&th, NULL, child_thread, &rc) || pthread_join(th, NULL)) _exit(10);
        _exit(rc);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
    if (rc) printf("(the child failed at check %d: see child_thread) ", rc);
    CU_ASSERT_EQUAL(rc, 0);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"a bf16 product without memory: its op's error, forward and backward",
         test_oom_is_an_error},
        CU_TEST_INFO_NULL};
    return tg_test_main("bf16 out of memory", tests);
}
