/* test_file.c -- several outputs committed as one (ag_file_commit_all, autograd/ag_file.h): all
 * replaced, or none. A write failure is made real with a file size limit (RLIMIT_FSIZE, as a full
 * disk: the write fails with EFBIG), in a child process so the limit stays there. */
#define _DEFAULT_SOURCE
#include "autograd/ag_base.h"
#include "autograd/ag_file.h"
#include "tests/tg_test.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/tg_file_XXXXXX";

static void put(const char *name, const char *text) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static bool holds(const char *name, const char *text) {
    char p[256], buf[64] = "";
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return !strcmp(buf, text);
}

/* Writes a, b, c (sizes: a and b 3 bytes, c `big` bytes) through ag_file_commit_all, under a
 * file size limit of `limit` bytes (0: none). Returns commit_all's result (the child's exit). */
static int commit_three(size_t big, rlim_t limit) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN); /* the write fails with EFBIG instead of a signal */
        struct rlimit rl = {limit, limit};
        if (limit && setrlimit(RLIMIT_FSIZE, &rl)) _exit(3);
        const char *names[3] = {"a", "b", "c"};
        ag_file fs[3];
        for (int i = 0; i < 3; i++) {
            char p[256];
            snprintf(p, sizeof p, "%s/%s", dir, names[i]);
            FILE *f = ag_file_open(&fs[i], p);
            if (!f) _exit(4);
            if (i < 2) fputs("new", f);
            else
                for (size_t k = 0; k < big; k++) fputc('x', f);
        }
        int rc = ag_file_commit_all(fs, 3);
        if (rc && !strstr(ag_last_error(), "previous file kept")) _exit(5);
        _exit(rc ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 9;
}

static void test_all_or_nothing(void) {
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    put("a", "old");
    put("b", "old");
    put("c", "old");
    /* c cannot be written (over the limit): a and b, written fine, are not replaced either */
    CU_ASSERT_EQUAL(commit_three(1 << 16, 4096), 1);
    CU_ASSERT(holds("a", "old") && holds("b", "old") && holds("c", "old"));
    /* no temporary left behind: only a, b, c in the folder */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) = 3", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
    /* everything fits: all three replaced */
    CU_ASSERT_EQUAL(commit_three(3, 0), 0);
    CU_ASSERT(holds("a", "new") && holds("b", "new") && holds("c", "xxx"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* A file that is not open is an error naming it, and the others are not replaced. */
static void test_not_open(void) {
    ag_file fs[2] = {{0}, {0}};
    char p[] = "/tmp/tg_file_one_XXXXXX";
    int fd = mkstemp(p);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(write(fd, "old", 3), 3);
    close(fd);
    FILE *f = ag_file_open(&fs[0], p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("new", f);
    CU_ASSERT_EQUAL(ag_file_commit_all(fs, 2), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "file 1 is not open"));
    FILE *r = fopen(p, "r");
    char buf[8] = "";
    CU_ASSERT_EQUAL(fread(buf, 1, 7, r), 3);
    fclose(r);
    CU_ASSERT_STRING_EQUAL(buf, "old");
    unlink(p);
}

int main(void) {
    ag_set_error_handler(NULL, NULL);
    static CU_TestInfo tests[] = {{"all or nothing on a write failure", test_all_or_nothing},
                                  {"a file not open", test_not_open},
                                  CU_TEST_INFO_NULL};
    return tg_test_main("ag_file_commit_all", tests);
}
