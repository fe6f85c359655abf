#!/bin/sh
# Builds tests/datasets/fuzz_fra.c with clang + libFuzzer + ASan + UBSan into a temporary
# directory and fuzzes the datasets reader, tokenizer, lowercasing, vocabulary parser and
# metrics for a bounded time. Exits non-zero on a crash, an invariant failure or a leak; the
# crashing input is kept (its path is printed).
#
#   tests/datasets/run_fuzz.sh [SECONDS]        (default 60)
#
# Needs clang with libFuzzer (Debian: clang-14, libclang-rt-14-dev) and libxxhash-dev.
# Environment: CC_FUZZ (compiler, default clang), FUZZ_JOBS (parallel workers, default 1).
# The build and the run: tests/fuzz_lib.sh.
set -eu
# shellcheck source=SCRIPTDIR/../fuzz_lib.sh
. "$(dirname "$0")/../fuzz_lib.sh"
fuzz_init ds "$@"
fuzz_build fuzz_fra "$HERE/fuzz_fra.c" "$ROOT"/datasets/*.c "$ROOT"/autograd/base.c \
  "$ROOT"/autograd/file.c

# Seed corpus: first byte = options, then file content.
printf '\000Go.\tVa !\nHi.\tSalut !\nRun!\tCours\342\200\257!\n' > "$C/basic"
printf '\041\303\207A VA\tJ\303\242I \302\240? \316\243\316\243\nno tab\na\tb\tc\r\nx  y\t ,z\r' > "$C/quirks"
printf '\000\304\260STANBUL \310\272\tO\316\243 \342\204\252\n' > "$C/casing"
printf '\377A\tB\nC\tD\nE\tF\nG\tH\n' > "$C/split"
printf '\002<unk>\n<pad>\n<bos>\n<eos>\nle\n\n' > "$C/vocab"
printf '\000il est calme .\040il est mouill\303\251 .' > "$C/metrics"
# A dictionary of the bytes the code treats specially (libFuzzer splices them into inputs).
cat > "$WORK/ds.dict" <<'DICT'
tab="\x09"
crlf="\x0d\x0a"
cr="\x0d"
nul="\x00"
comma=","
dot="."
bang="!"
question="?"
nbsp="\xc2\xa0"
nnbsp="\xe2\x80\xaf"
thin_space="\xe2\x80\x89"
capital_i_dot="\xc4\xb0"
capital_a_stroke="\xc8\xba"
capital_sigma="\xce\xa3"
small_sigma="\xcf\x83"
combining_dot="\xcc\x87"
modifier_h="\xca\xb0"
kelvin="\xe2\x84\xaa"
e_acute_upper="\xc3\x89"
oe_upper="\xc5\x92"
cyrillic_es="\xd0\xa1"
ideographic_space="\xe3\x80\x80"
surrogate="\xed\xa0\x80"
overlong="\xc0\xaf"
max_cp="\xf4\x8f\xbf\xbf"
too_big="\xf4\x90\x80\x80"
apostrophe="'"
pad="<pad>"
unk="<unk>"
eos="<eos>"
DICT
DATA="$ROOT/../shared/data/fra-eng/fra.txt"
if [ -r "$DATA" ]; then
  { printf '\000'; head -c 3000 "$DATA"; } > "$C/fra_head"
  { printf '\203'; sed -n '5000,5030p' "$DATA"; } > "$C/fra_mid"
fi

fuzz_run fuzz_fra 8192 "$WORK/ds.dict"
