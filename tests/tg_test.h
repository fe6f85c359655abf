/* tg_test.h -- the shared harness of the CUnit test programs (tests/tg_test.c, the static
 * library tg_test that tg_cunit_test links into every one of them).
 *
 *     static CU_TestInfo tests[] = {{"name", fn}, ..., CU_TEST_INFO_NULL};
 *     static CU_SuiteInfo suites[] = {{"suite", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
 *     int main(void) { return tg_test_run(suites); }        // or tg_test_main("suite", tests)
 *
 * Exit status 0 only when every assertion passed (ctest reads it).
 *
 * The error contract (autograd/ag_base.h): a call fails with -1 or NULL and one message in
 * ag_last_error(); a forward pass also hands the message to the error handler.
 *
 *     TG_OK(ds_vocab_save(v, path));                      // returns 0 (else shows the message)
 *     TG_EXPECT_ERROR(ds_vocab_load(p, &v), p, "cannot open");  // -1, message has every text
 *     TG_EXPECT_NULL(ag_add(t, a, b), "add", "[2, 3]");   // NULL, message has every text
 *     TG_ERROR_HAS("line 3");                             // ag_last_error() has every text
 *     TG_HAS(msg, "F16", "dtype");                        // any string has every text
 *
 *     ag_set_error_handler(tg_capture, NULL);             // the handler's last message and
 *     ... TG_CAPTURED_HAS("matmul", "[2, 3]"); tg_n_captured ...   // how many it received
 *     ag_set_error_handler(NULL, NULL);
 *
 * Output into a string: a FILE* for a function that writes to one (tg_stream), or what this
 * process writes to its stdout / stderr file descriptor (tg_fd_capture). Temporary files and
 * directories: tg_temp_file, tg_temp_dir, tg_path, tg_remove.
 *
 * The TG_ macros report the caller's file and line; on failure CUnit's report shows the
 * message or text that was searched. Every TG_ assertion returns whether it passed. */
#ifndef TG_TEST_H
#define TG_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>

/* Runs the suites; 0 when every assertion passed, 1 when one failed, 2 when CUnit failed. */
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

/* tg_test_run of one suite (no set-up or clean-up functions). */
int tg_test_main(const char *suite, const CU_TestInfo *tests);

/* ---- assertions on the error contract ---- */

/* Fails the current test with a formatted message (shown in CUnit's report). */
#define TG_FAIL(...) tg_fail_(__FILE__, __LINE__, __VA_ARGS__)
/* `text` contains each of the texts that follow (at least one; a NULL ends the list early). */
#define TG_HAS(text, ...) tg_has_(__FILE__, __LINE__, #text, (text), __VA_ARGS__, (const char *)0)
/* ag_last_error() contains each text. */
#define TG_ERROR_HAS(...) TG_HAS(ag_last_error(), __VA_ARGS__)
/* The call (an int of the contract) returns 0. */
#define TG_OK(call) tg_ok_(__FILE__, __LINE__, #call, (call))
/* The call (an int of the contract) returns -1 and ag_last_error() contains each text. */
#define TG_EXPECT_ERROR(call, ...)                                                                 \
    tg_expect_(__FILE__, __LINE__, #call, (call) == -1, "-1", __VA_ARGS__, (const char *)0)
/* The call (a pointer of the contract) returns NULL and ag_last_error() contains each text. */
#define TG_EXPECT_NULL(call, ...)                                                                  \
    tg_expect_(__FILE__, __LINE__, #call, (call) == NULL, "NULL", __VA_ARGS__, (const char *)0)

/* ---- the error handler ---- */

/* An ag_error_fn (ag_set_error_handler(tg_capture, NULL)): keeps the last message it receives in
 * tg_captured (truncated to 511 bytes) and counts them in tg_n_captured (reset it at will). */
void tg_capture(const char *msg, void *user);
extern char tg_captured[512];
extern int tg_n_captured;
/* tg_captured contains each text. */
#define TG_CAPTURED_HAS(...) TG_HAS(tg_captured, __VA_ARGS__)

/* ---- output captured into a string ---- */

/* A FILE* whose output is kept in memory (open_memstream):
 *     tg_stream s; FILE *f = tg_stream_open(&s); ... fn(f) ...; tg_stream_text(&s); tg_stream_close(&s);
 * tg_stream_text flushes and returns everything written so far (NUL-terminated, owned by s,
 * valid until the next write or tg_stream_close). Exits with status 2 if it cannot open. */
typedef struct tg_stream {
    FILE *f;
    char *buf;
    size_t len;
} tg_stream;
FILE *tg_stream_open(tg_stream *s);
const char *tg_stream_text(tg_stream *s);
void tg_stream_close(tg_stream *s);

/* What this process writes to file descriptor fd (STDOUT_FILENO, STDERR_FILENO) between begin
 * and end, whoever writes it (stdio is flushed at both ends): end restores fd and returns the
 * text (malloc'd, NUL-terminated, the caller frees). Exits with status 2 if it cannot begin. */
typedef struct tg_fd_capture {
    int fd, saved;
    FILE *tmp;
} tg_fd_capture;
void tg_fd_capture_begin(tg_fd_capture *c, int fd);
char *tg_fd_capture_end(tg_fd_capture *c);

/* ---- temporary files and directories ---- */

/* A new empty directory $TMPDIR/tg_test_XXXXXX (TMPDIR unset: /tmp); its malloc'd path. */
char *tg_temp_dir(void);
/* A new file $TMPDIR/tg_test_XXXXXX holding data[0..len); its malloc'd path. */
char *tg_temp_file(const void *data, size_t len);
/* "dir/name" in one of 8 static buffers used in turn (valid for the next 7 calls). */
const char *tg_path(const char *dir, const char *name);
/* Removes path -- a file, or a directory and everything in it -- and frees it. NULL: nothing.
 * Returns 0, or -1 when something could not be removed. */
int tg_remove(char *path);
/* The same without freeing path. */
int tg_remove_tree(const char *path);

/* ---- what the macros call ---- */
void tg_fail_(const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
bool tg_has_(const char *file, int line, const char *what, const char *text, ...);
bool tg_ok_(const char *file, int line, const char *call, int got);
bool tg_expect_(const char *file, int line, const char *call, bool failed, const char *want, ...);

#endif
