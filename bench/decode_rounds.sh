#!/bin/sh
# decode_rounds.sh -- greedy decoding of a trained checkpoint by `transformer_nmt translate` in
# several settings and by PyTorch's KV-cached decoder (decode_torch.py), run in turn, round
# after round, so that the machine's drift falls on all of them alike. For the decoding figures
# of docs/benchmarks.md ("int8 decoding on AMX tiles").
#
# usage: bench/decode_rounds.sh BINARY CKPT EN_TXT SRC_PIECES ROUNDS "NAME=FLAGS" ...
#   EN_TXT: the sources as text, one a line (translate's input); SRC_PIECES: the same through
#   `decode_torch.py normalize` and `spm_encode --output_format=piece` (decode_torch.py's input,
#   bench/README.md). Each round runs, in this order: every NAME=FLAGS as
#       BINARY translate --checkpoint CKPT --beam 1 --raw-output FLAGS < EN_TXT
#   (FLAGS may start with VAR=value words, put in the environment: TG_QUANT_KERNEL=avx512-vnni),
#   then `load`, the first setting's command on an empty input (loading alone), then PyTorch at
#   its best setting (one thread, OpenBLAS's AVX-512 kernels, batches of 256 by length):
#       OPENBLAS_CORETYPE=SkylakeX LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
#       /usr/bin/python3 bench/decode_torch.py decode CKPT SRC_PIECES --threads 1 --batch 256 \
#           --by-length
# Each run's wall and CPU seconds (user + system) and peak RSS come from /usr/bin/time; PyTorch's
# decoding alone from its own clock (sentences/s). Then, per setting, the medians, and the
# median over the rounds of (PyTorch's decoding seconds) / (the setting's wall seconds less the
# same round's loading): how many times PyTorch's speed its decoding alone runs at. Every
# setting's output is kept until the end, and the script names, for each, the settings before it
# whose outputs are identical to it. The first round is a warm-up, not counted.
set -eu
[ $# -ge 6 ] || { echo "usage: $0 BINARY CKPT EN_TXT SRC_PIECES ROUNDS NAME=FLAGS..." >&2; exit 2; }
bin=$1 ckpt=$2 en=$3 src=$4 rounds=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
n=$(wc -l <"$en")
timed() { # name, then a command: appends "name wall cpu rss_mib" to $dir/times
    name=$1
    shift
    /usr/bin/time -f "$name %e %U %S %M" -o "$dir/t" "$@" || { echo "$0: $name failed" >&2; exit 1; }
    awk '{printf "%s %s %.2f %.0f\n", $1, $2, $3 + $4, $5 / 1024}' "$dir/t" >>"$dir/times"
}
run_setting() { # NAME=FLAGS, output file, input file, label
    envs="" args=""
    for w in ${1#*=}; do # the leading VAR=value words go to the environment
        case $args$w in *=*) envs="$envs $w" ;; *) args="$args $w" ;; esac
    done
    # shellcheck disable=SC2086
    timed "$4" env $envs "$bin" translate --checkpoint "$ckpt" --beam 1 --raw-output $args \
        <"$3" >"$2"
}
for r in $(seq 0 "$rounds"); do
    : >"$dir/times"
    for s in "$@"; do run_setting "$s" "$dir/${s%%=*}.txt" "$en" "${s%%=*}"; done
    run_setting "$1" /dev/null /dev/null load
    timed torch env OPENBLAS_CORETYPE=SkylakeX \
        LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread /usr/bin/python3 \
        "$here/decode_torch.py" decode "$ckpt" "$src" --threads 1 --batch 256 --by-length \
        >"$dir/torch.out"
    sps=$(sed -n 's/.* \([0-9.]*\) sentences\/s.*/\1/p' "$dir/torch.out")
    echo "torch_decode $(echo "$n $sps" | awk '{printf "%.3f", $1 / $2}') 0 0" >>"$dir/times"
    if [ "$r" -eq 0 ]; then echo "round 0 (warm-up, $(date -u +%H:%M:%S)): not counted"; continue; fi
    echo "round $r ($(date -u +%H:%M:%S)): $(awk '{printf "%s %ss %scpu %sMiB; ", $1, $2, $3, $4}' "$dir/times")"
    awk -v r="$r" '{print r, $0}' "$dir/times" >>"$dir/all"
done
echo "medians over $rounds rounds (wall s, CPU s, peak RSS MiB; x torch: PyTorch's decoding"
echo "seconds over the setting's wall seconds less loading, per round, then the median):"
awk '
    { w[$2, $1] = $3; c[$2, $1] = $4; m[$2, $1] = $5; names[$2] = 1; R = $1 > R ? $1 : R }
    function med(a, k,   v, i, j, t, n) {
        n = 0
        for (i = 1; i <= R; i++) v[++n] = a[k, i] + 0
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    END {
        for (k in names) {
            if (k == "torch_decode") continue
            for (i = 1; i <= R; i++) x[k, i] = (k == "torch" || k == "load") ? 0 : w["torch_decode", i] / (w[k, i] - w["load", i])
            printf "  %-14s %7.2f %7.2f %6.0f", k, med(w, k), med(c, k), med(m, k)
            if (k != "torch" && k != "load") printf "   %.2fx torch", med(x, k)
            printf "\n"
        }
        printf "  %-14s %7.2f (PyTorch decoding alone, its clock)\n", "torch_decode", med(w, "torch_decode")
    }' "$dir/all"
seen=""
for s in "$@"; do # each setting's output against the earlier settings'
    same=""
    for p in $seen; do cmp -s "$dir/$p.txt" "$dir/${s%%=*}.txt" && same="$same $p"; done
    echo "${s%%=*}: output identical to:${same:- none of the settings before it}"
    seen="$seen ${s%%=*}"
done
