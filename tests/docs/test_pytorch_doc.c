/* test_pytorch_doc.c -- runs the snippets of docs/pytorch.md (pytorch_snippets.h) as C, against
 * the float32 libraries, and checks what they print; tests/cxx/test_pytorch_doc.cpp runs the
 * same code as C++. */
#include <stdlib.h>
#include <unistd.h>

#include "pytorch_snippets.h"
#include "tests/tg_test.h"

static void test_snippets(void) {
    char *dir = tg_temp_dir();
    const char *path = tg_path(dir, "net.safetensors");
    tg_fd_capture cap;
    tg_fd_capture_begin(&cap, STDOUT_FILENO);
    int rc = pytorch_snippets_run(path);
    char *out = tg_fd_capture_end(&cap);
    CU_ASSERT_EQUAL(rc, 0);
    TG_HAS(out, "0.weight [16, 2] 32\n0.bias [16] 16\n2.weight [3, 16] 48\n2.bias [3] 3\n");
    TG_HAS(out, "2.weight: 3 x 16, first value ", "epoch 2: lr 0.005 (group 1: 0.0005)\n",
           "square: ok, 12 elements", "l1 0.625 mse 4.25 ce ");
    free(out);
    tg_remove(dir); /* and the file in it */
}

int main(void) {
    static CU_TestInfo tests[] = {{"snippets", test_snippets}, CU_TEST_INFO_NULL};
    return tg_test_main("pytorch_doc", tests);
}
