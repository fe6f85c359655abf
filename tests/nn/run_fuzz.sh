#!/bin/sh
# Builds tests/nn/fuzz_ckpt.c with clang + libFuzzer + ASan + UBSan into a temporary directory
# and fuzzes the checkpoint reader of nn/io (header, tensor table, sizes, checksums, non-finite
# values, re-serialisation) for a bounded time, starting from the seed corpus
# tests/nn/fuzz_ckpt_corpus/. Exits non-zero on a crash, an invariant failure or a leak; the
# crashing input is kept (its path is printed).
#
#   tests/nn/run_fuzz.sh [SECONDS]        (default 60)
#
# Needs clang with libFuzzer (Debian: clang-14, libclang-rt-14-dev) and libxxhash-dev.
# Environment: CC_FUZZ (compiler, default clang), FUZZ_JOBS (parallel workers, default 1).
# The build and the run: tests/fuzz_lib.sh.
#
# The seed corpus (each file under 4 KB; new interesting inputs are not written back to it):
#   plain_torch.safetensors      as safetensors.torch.save_file writes: F16, BF16, F32, I64,
#                                metadata {"format": "pt"}, no checksum
#   marked_v2.safetensors        nn_ckpt_save: tapegrad.model, config.*, a vocabulary, optim.*
#   f64_scalar_empty.safetensors nn_ckpt_save with the F64 store: a scalar, an empty tensor
#   legacy_v1.safetensors        written by the previous version (data-only checksum)
#   nan_v2.safetensors           nn_ckpt_save of a NaN and an infinity (refused unless
#                                allow_nonfinite)
#   bad_*.safetensors            truncated data, a header length past the end, invalid JSON,
#                                overlapping ranges, a marked file without its checksum
set -eu
# shellcheck source=SCRIPTDIR/../fuzz_lib.sh
. "$(dirname "$0")/../fuzz_lib.sh"
fuzz_init ckpt "$@"
fuzz_build fuzz_ckpt "$HERE/fuzz_ckpt.c" \
  "$ROOT"/nn/io/json.c "$ROOT"/nn/io/checkpoint.c "$ROOT"/nn/io/safetensors.c \
  "$ROOT"/nn/io/safetensors_check.c "$ROOT"/nn/io/ckpt_map.c "$ROOT"/autograd/base.c \
  "$ROOT"/autograd/file.c

# libFuzzer adds what it finds to the first corpus directory: copy the seeds.
cp "$HERE"/fuzz_ckpt_corpus/* "$C/"
# The tokens of the format (libFuzzer splices them into inputs).
cat > "$WORK/ckpt.dict" <<'DICT'
meta="\"__metadata__\""
dtype="\"dtype\""
shape="\"shape\""
offsets="\"data_offsets\""
f32="\"F32\""
f64="\"F64\""
f16="\"F16\""
bf16="\"BF16\""
e4m3="\"F8_E4M3\""
e5m2="\"F8_E5M2\""
i64="\"I64\""
bool="\"BOOL\""
format="\"tapegrad.format\""
checksum="\"tapegrad.checksum\""
legacy="\"tapegrad.xxh3_64\""
model="\"tapegrad.model\""
two="\"2\""
escape="\\u0000"
escape_a="\\u00e9"
surrogate="\\ud83d\\ude00"
big="18446744073709551615"
nan_f32="\x00\x00\xc0\x7f"
inf_f32="\x00\x00\x80\x7f"
DICT

fuzz_run fuzz_ckpt 4096 "$WORK/ckpt.dict"
