#!/usr/bin/env bash
# --precision fp32|bf16|auto (docs/zoo.md, "The training recipe") as a user runs it:
#   e2e_precision.sh PROGRAM FRA_TXT        (PROGRAM: build/zoo/transformer_nmt)
# fp32 is the default and the same run given explicitly; bf16 is recorded in the checkpoint and
# fixed on --resume; without a bf16 kernel on the CPU's instructions (forced here with TG_BF16_KERNEL=emulated) a
# bf16 run says so and trains in float32, to float32's bits; with one (where the CPU has it) it
# trains in bf16, silently; auto is bf16 where the products run faster than float32's (AMX tiles,
# AMD's AVX512-BF16) and fp32 elsewhere (forced here with TG_BF16_KERNEL=emulated), says which,
# records it, and on --resume means the checkpoint's; a bad value is a usage error naming the flag.
set -u
# shellcheck source=SCRIPTDIR/e2e_lib.sh
source "$(dirname "$0")/e2e_lib.sh"
e2e_init "$@"

small=(--data "$data" --num-examples 80 --epochs 3 --log-every 1)
losses() { sed -E 's/, [0-9.]+ tokens\/sec.*//' "$dir/err" | grep '^epoch' >"$dir/$1"; }
precision() { grep -aq "\"train.precision\":\"$2\"" "$1" || { echo "  $1: no train.precision $2"; return 1; }; }
has_amx=false # AMX-BF16 tiles: the bf16 kernel, and the chain TG_BF16_KERNEL=emulated emulates
grep -q amx_bf16 /proc/cpuinfo 2>/dev/null && has_amx=true
message="--precision bf16: no bf16 kernel on the CPU's instructions \\(it lacks AMX and AVX512-BF16, or TG_BF16_KERNEL=emulated\\); training in float32"

check "default run" run 0 train "${small[@]}" --checkpoint "$dir/d.safetensors"
losses default
check "  recorded as fp32" precision "$dir/d.safetensors" fp32
check "--precision fp32" run 0 train "${small[@]}" --precision fp32 --checkpoint "$dir/f.safetensors"
losses fp32
check "  the default's losses" same "$dir/default" "$dir/fp32"

export TG_BF16_KERNEL=emulated
check "bf16 without the kernel" run 0 train "${small[@]}" --precision bf16 --checkpoint "$dir/e.safetensors"
unset TG_BF16_KERNEL
check "  says so" has err "$message"
losses emulated
check "  trains in float32: the default's losses" same "$dir/default" "$dir/emulated"
check "  recorded as bf16" precision "$dir/e.safetensors" bf16

if grep -q avx512_bf16 /proc/cpuinfo 2>/dev/null; then
    check "bf16 on AVX512-BF16" run 0 train "${small[@]}" --precision bf16 --checkpoint "$dir/b.safetensors"
    check "  no message" lacks err "no bf16 kernel"
    check "  recorded as bf16" precision "$dir/b.safetensors" bf16
    losses bf16
    check "  a translation" has out "=> .*bleu"
    check "--resume with another precision refused" run 2 train "${small[@]}" --epochs 4 --resume --precision fp32 --checkpoint "$dir/b.safetensors"
    check "  names the flag" has err "--precision fp32 differs from the checkpoint's bf16"
    check "--resume in bf16" run 0 train "${small[@]}" --epochs 4 --resume --checkpoint "$dir/b.safetensors"
else
    echo "(no AVX512-BF16 on this CPU: the bf16 kernel's run not made)"
fi

export TG_BF16_KERNEL=emulated
check "--precision auto, bf16 emulated" run 0 train "${small[@]}" --precision auto --checkpoint "$dir/a.safetensors"
unset TG_BF16_KERNEL
emulated="emulated 12x32" # the emulation of the CPU's own chain: the AMX kernel's, else vdpbf16ps's
$has_amx && emulated="amx-emulated 32x32"
check "  says fp32" has err "--precision auto: fp32 \\(bf16 products would be slower here: $emulated\\)"
losses auto_fp32
check "  the default's losses" same "$dir/default" "$dir/auto_fp32"
check "  recorded as fp32" precision "$dir/a.safetensors" fp32
check "--resume --precision auto: the checkpoint's" run 0 train "${small[@]}" --epochs 4 --resume --precision auto --checkpoint "$dir/a.safetensors"
check "  nothing resolved again" lacks err "--precision auto:"
check "  still fp32" precision "$dir/a.safetensors" fp32
# bf16 is faster on AMX tiles, and on AVX512-BF16 in AMD's cores (ag_bf16_faster)
if $has_amx ||
    { grep -q AuthenticAMD /proc/cpuinfo && grep -q avx512_bf16 /proc/cpuinfo; } 2>/dev/null; then
    check "--precision auto where bf16 is faster" run 0 train "${small[@]}" --precision auto --checkpoint "$dir/p.safetensors"
    check "  says bf16" has err "--precision auto: bf16 \\(its products run faster than fp32's here: (amx|avx512bf16) [0-9x]+\\)"
    losses auto_bf16
    check "  --precision bf16's losses" same "$dir/bf16" "$dir/auto_bf16"
    check "  recorded as bf16" precision "$dir/p.safetensors" bf16
else
    echo "(neither AMX nor AMD's AVX512-BF16 on this CPU: --precision auto's bf16 run not made)"
fi

check "--precision fp16 refused" run 2 train "${small[@]}" --precision fp16 --checkpoint "$dir/x.safetensors"
check "  names the flag and the choices" has err "--precision: expected one of fp32, bf16, auto, got 'fp16'"

e2e_summary
