// test_pytorch_doc.cpp -- the snippets of docs/pytorch.md (tests/docs/pytorch_snippets.h, also
// run as C by test_docs_pytorch) compiled as C++11 and run. Exit status 0 on success.
#include "tests/docs/pytorch_snippets.h"

#include <cstdio>

int main() {
    ag_set_error_handler(nullptr, nullptr);
    const char *path = "test_cxx_pytorch_doc.safetensors"; // in the build directory
    int rc = pytorch_snippets_run(path);
    std::remove(path);
    return rc ? 1 : 0;
}
