#!/bin/sh
# step_pace.sh -- seconds per training step of two `transformer_nmt train` settings, run in turn
# (A B A B ...), from the program's own progress lines, so that start-up (reading the data,
# learning the subword model) is left out. For the comparisons of docs/benchmarks.md that fix a
# run's number of steps from another's pace (a setting with a cheaper or a costlier step gets the
# steps the same hour holds).
#
# usage: bench/step_pace.sh BINARY[:BINARY_B] PAIRS FROM TO "A's flags" "B's flags"
#   BINARY_B, when given, runs B's flags (two builds compared, the same flags or not)
#   each run: BINARY train <flags> --time-budget 0 --fit-decay 0 --max-steps TO --log-steps FROM
#   --valid-steps 0, its checkpoint in a temporary directory; its pace is (elapsed at step TO -
#   elapsed at step FROM) / (TO - FROM), from the progress lines (FROM must divide TO).
# It prints each run's pace, then the medians and the median of the pairs' ratios B / A.
# The data file comes from TG_FRA_ENG (or --data in the flags).
set -eu
[ $# -eq 6 ] || { echo "usage: $0 BINARY[:BINARY_B] PAIRS FROM TO A_FLAGS B_FLAGS" >&2; exit 2; }
bin_a=${1%%:*} bin_b=${1#*:} pairs=$2 from=$3 to=$4 a_flags=$5 b_flags=$6
if [ "$to" -le "$from" ] || [ $((to % from)) -ne 0 ]; then
    echo "$0: FROM must divide TO, and TO be larger" >&2
    exit 2
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pace() { # binary flags -> seconds per step between FROM and TO
    # shellcheck disable=SC2086
    "$1" train $2 --time-budget 0 --fit-decay 0 --max-steps "$to" --log-steps "$from" \
        --valid-steps 0 --checkpoint "$dir/c.safetensors" >"$dir/out" 2>"$dir/err" ||
        { echo "$0: the run failed:" >&2; tail -n 5 "$dir/err" >&2; exit 1; }
    awk -v f="$from" -v t="$to" '
        $1 == "step" && ($2 == f || $2 == t) { for (i = 1; i < NF; i++) if ($i == "elapsed") e[$2] = $(i + 1) + 0 }
        END { if (!(f in e) || !(t in e)) exit 1; printf "%.4f\n", (e[t] - e[f]) / (t - f) }' "$dir/err"
}
: >"$dir/pairs"
for i in $(seq "$pairs"); do
    pa=$(pace "$bin_a" "$a_flags") || exit 1
    pb=$(pace "$bin_b" "$b_flags") || exit 1
    echo "pair $i ($(date -u +%H:%M:%S)): A $pa s/step, B $pb s/step, B/A $(echo "$pb $pa" | awk '{printf "%.3f", $1 / $2}')"
    echo "$pa $pb" >>"$dir/pairs"
done
median() { # numbers, one a line -> "median (range min-max)"
    sort -n | awk '{v[NR] = $1} END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                                     printf "%.4f (range %.4f-%.4f)\n", m, v[1], v[NR] }'
}
echo "median A $(cut -d' ' -f1 "$dir/pairs" | median) s/step"
echo "median B $(cut -d' ' -f2 "$dir/pairs" | median) s/step"
echo "median B/A $(awk '{print $2 / $1}' "$dir/pairs" | median)"
