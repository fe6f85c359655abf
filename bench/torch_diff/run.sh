#!/bin/sh
# Builds torch_diff against a build tree's float64 libraries, runs it, compares with PyTorch.
#   bench/torch_diff/run.sh [BUILD_DIR (default build)] [SEED]
# Needs PyTorch for /usr/bin/python3 (not part of ctest).
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
b=$(cd "${1:-$root/build}" && pwd)
seed=${2:-20261124}
out=${TMPDIR:-/tmp}/torch_diff
mkdir -p "$out"
cc -std=c11 -O2 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -DTG_DOUBLE -I"$root" "$here/torch_diff.c" "$here/torch_diff_edge.c" \
  "$b/optim/libtapegrad_optim64.a" "$b/nn/libtapegrad_nn64.a" "$b/autograd/libtapegrad_ag64.a" \
  "$b/autograd/libtapegrad_ag_base.a" -lblis -lxxhash -lpthread -lm -o "$out/torch_diff"
"$out/torch_diff" "$out/torch_diff.txt" "$seed"
/usr/bin/python3 "$here/torch_diff.py" "$out/torch_diff.txt"
