#!/usr/bin/env bash
# End-to-end run of a zoo program on the real data, as a user runs it:
#   e2e_nmt.sh PROGRAM FRA_TXT
# train a few epochs (plots, checkpoint), resume, translate (arguments, stdin, beam), eval,
# stats, export to a plain state_dict and import it back, and the bad-input paths (bad flags,
# a missing data file, a corrupt checkpoint, which must be left as it was).
set -u
# shellcheck source=SCRIPTDIR/e2e_lib.sh
source "$(dirname "$0")/e2e_lib.sh"
e2e_init "$@"

ck="$dir/run.safetensors"

# train: the book's lines, a checkpoint, the plots
check "train" run 0 train --data "$data" --epochs 3 --checkpoint "$ck" --plots "$dir/plots" --log-every 1
check "train: loss line" has out '^loss [0-9]+\.[0-9]{3}, [0-9]+\.[0-9] tokens/sec$'
check "train: four translations" test "$(grep -Ec '^(go|i lost|he.s calm|i.m home) \. => .*, bleu [01]\.[0-9]{3}$' "$dir/out")" = 4
check "train: progress per epoch" test "$(grep -c '^epoch [1-3]/3: loss' "$dir/err")" = 3
check "train: checkpoint written" test -s "$ck"
check "train: loss plots" test -s "$dir/plots/loss.svg" -a -s "$dir/plots/loss.csv"
# the plain encoder-decoder (seq2seq_nmt) has no attention, hence no attention plot
if [ "$(basename "$prog")" = seq2seq_nmt ]; then
    check "train: no attention plot" test ! -e "$dir/plots/attention_decoder_cross.svg"
else
    check "train: attention plot" test -s "$dir/plots/attention_decoder_cross.svg"
fi
check "train: says where" has out '^plots: '
check "train: csv rows" test "$(wc -l <"$dir/plots/loss.csv")" = 4
check "train: the loss falls" awk -F, 'NR == 2 { first = $2 } NR == 4 { exit !($2 < first) }' "$dir/plots/loss.csv"

# the book's run to its end: it learns the four sentences (at least two exactly, on any CPU)
check "book's run" run 0 train --data "$data" --checkpoint "$dir/book.safetensors" --log-every 0
check "book's run: loss below 0.1" awk '/^loss / { exit !($2 + 0 < 0.1) }' "$dir/out"
check "book's run: two or more sentences exact" test "$(grep -c 'bleu 1\.000$' "$dir/out")" -ge 2

# resume to 5 epochs: continues the history
check "resume" run 0 train --data "$data" --epochs 5 --checkpoint "$ck" --plots "$dir/plots" --resume --log-every 1
cp "$dir/out" "$dir/resumed"
check "resume: says so" has err 'resuming .* at step [0-9]+ \(epoch 4, batch 0\)'
check "resume: epochs 4 and 5 only" test "$(grep -c '^epoch [45]/5' "$dir/err")" = 2
check "resume: history continued" test "$(wc -l <"$dir/plots/loss.csv")" = 6
check "resume: fixed options refused" run 2 train --data "$data" --epochs 9 --checkpoint "$ck" --resume --lr 0.1
check "resume: message" has err '^[a-z0-9_]+ train: --lr 0.1 differs from the checkpoint.s 0.005: it cannot change on --resume'

# translate: arguments, stdin, beam search
check "translate args" run 0 translate --checkpoint "$ck" "go ." "i lost ."
check "translate: one line each" test "$(wc -l <"$dir/out")" = 2
echo "he's calm ." | "$prog" translate --checkpoint "$ck" >"$dir/stdin_out" 2>"$dir/err"
check "translate stdin" test "$(wc -l <"$dir/stdin_out")" = 1
# a line at a time, as a person types: each translation comes while stdin is still open
interactive() {
    local a b rc=0
    coproc TR { "$prog" translate --checkpoint "$ck" 2>"$dir/err"; }
    echo "go ." >&"${TR[1]}"
    IFS= read -r -t 60 a <&"${TR[0]}" || rc=1
    echo "i lost ." >&"${TR[1]}"
    IFS= read -r -t 60 b <&"${TR[0]}" || rc=1
    exec {TR[1]}>&-
    wait "$TR_PID" || rc=1
    [ "$rc" = 0 ] && [ -n "$a" ] && [ -n "$b" ] || { echo "  got '${a-}' and '${b-}'"; return 1; }
}
check "translate stdin: a line at a time" interactive
check "translate beam" run 0 translate --checkpoint "$ck" --beam 3 --alpha 0.7 "go ."
check "translate beam: one line" test "$(wc -l <"$dir/out")" = 1
# text in, text out: typed text is put in the corpus form (the d2l-form input gives the same
# tokens), the translation is printed as French text (no <unk>, no space before a period);
# --raw-output prints the model's tokens as they are
check "translate typed" run 0 translate --checkpoint "$ck" "I'm home." "i'm home ." $'  I\xe2\x80\x99m\xc2\xa0 home. '
check "  one line each" test "$(wc -l <"$dir/out")" = 3
check "  typed = the corpus form" test "$(sort -u "$dir/out" | wc -l)" = 1
check "  no <unk>" lacks out '<unk>'
check "  no space before a period" lacks out ' \.'
# an empty or blank line gives an empty line (never a translation of nothing), in its place
printf 'go .\n\n \t \ni lost .\n' | "$prog" translate --checkpoint "$ck" >"$dir/blank_out" 2>"$dir/err"
check "translate: blank lines" test "$?" = 0
check "  four lines" test "$(wc -l <"$dir/blank_out")" = 4
check "  the blank ones empty" test "$(sed -n '2p;3p' "$dir/blank_out" | tr -d '\n')" = ""
check "  the others translated" test -n "$(sed -n 1p "$dir/blank_out")" -a -n "$(sed -n 4p "$dir/blank_out")"
# a line of several sentences: each translated alone, joined by a space
check "translate: two sentences in a line" run 0 translate --checkpoint "$ck" "Go. I lost." "Go." "I lost."
check "  each alone, joined" test "$(sed -n 1p "$dir/out")" = "$(sed -n 2p "$dir/out") $(sed -n 3p "$dir/out")"
# a sentence longer than the checkpoint's --num-steps (10 here) is translated whole, in a call of
# its own, not cut to its first 10 tokens
long="i think that tom will be able to finish the report by monday because he has time ."
check "translate: longer than --num-steps" run 0 translate --checkpoint "$ck" --raw-output "$long" "go ."
check "  two lines" test "$(wc -l <"$dir/out")" = 2
check "  the second as alone" test "$(sed -n 2p "$dir/out")" = "$("$prog" translate --checkpoint "$ck" --raw-output "go ." 2>/dev/null)"
if [ "$(basename "$prog")" = transformer_nmt ]; then # a positional-encoding table of 12
    check "a model of 12 positions" run 0 train --data "$data" --num-examples 80 --epochs 1 --max-len 12 --log-every 0 --checkpoint "$dir/p12.safetensors"
    check "  takes 11 words and <eos>" run 0 translate --checkpoint "$dir/p12.safetensors" "a b c d e f g h i j k"
    check "  refuses 12 words and <eos>" run 1 translate --checkpoint "$dir/p12.safetensors" "go ." "a b c d e f g h i j k l" "go ."
    check "  names the line, the length, the limit" has err "sentence 2: 13 tokens with <eos>, more than this model.s 12 positions: split the sentence"
    check "  an empty line in its place" test "$(sed -n 2p "$dir/out")" = "" -a "$(wc -l <"$dir/out")" = 3
    check "  refuses a line whose second sentence is too long" run 1 translate --checkpoint "$dir/p12.safetensors" "Go. A b c d e f g h i j k l."
    check "  names it" has err "sentence 1: 14 tokens with <eos>, more than this model.s 12 positions"
    check "  one empty line, none of it translated" test "$(cat "$dir/out")" = "" -a "$(wc -l <"$dir/out")" = 1
fi
check "translate --raw-output" run 0 translate --checkpoint "$ck" --raw-output --beam 1 "I'm home." "i'm home ."
check "  the same tokens" test "$(sort -u "$dir/out" | wc -l)" = 1
sed -n "s/^i'm home \. => \(.*\), bleu [01]\.[0-9]*$/\1/p" "$dir/resumed" >"$dir/by_train"
check "  the trainer's tokens for \"i'm home .\"" test "$(head -1 "$dir/out")" = "$(cat "$dir/by_train")"

# eval and stats
check "eval" run 0 eval --checkpoint "$ck" --data "$data" --num-examples 300 --test-frac 0.2
check "eval: line" has out '^corpus BLEU-4 [0-9]+\.[0-9]{2}, chrF [0-9]+\.[0-9]{2}, mean d2l BLEU [01]\.[0-9]{3} on 60 test sentences$'
cp "$dir/out" "$dir/eval_scores"
# --out: the translations it scored, one line per test pair (source, reference, translation)
check "eval --out" run 0 eval --checkpoint "$ck" --data "$data" --num-examples 300 --test-frac 0.2 --out "$dir/tr.tsv"
check "  the same scores" test "$(head -2 "$dir/out")" = "$(head -2 "$dir/eval_scores")"
check "  says where" has out '^translations: .*tr\.tsv \(source, reference, translation; tab-separated\)$'
check "  60 lines of 3 fields" test "$(awk -F'\t' 'NF == 3' "$dir/tr.tsv" | wc -l)" = 60 -a "$(wc -l <"$dir/tr.tsv")" = 60
check "  sources and references are pairs of the data" test -z "$(cut -f1,2 "$dir/tr.tsv" | grep -vxFf <(cut -f1,2 "$data"))"
check "  no pair twice" test "$(cut -f1,2 "$dir/tr.tsv" | sort -u | wc -l)" = 60
cp "$dir/tr.tsv" "$dir/tr_saved"
check "  a failed eval keeps the file" run 2 eval --checkpoint "$ck" --data "$data" --num-examples 300 --test-frac 0.2 --beam 0 --out "$dir/tr.tsv"
check "  kept" same "$dir/tr.tsv" "$dir/tr_saved"
check "  the checkpoint as --out refused" run 2 eval --checkpoint "$ck" --data "$data" --out "$ck"
check "  message" has err 'name the same file'
check "stats" run 0 stats --data "$data" --plots "$dir/plots"
check "stats: vocabulary line" has out '^vocabulary: source [0-9]+ tokens, target [0-9]+ tokens'
check "stats: histogram" test -s "$dir/plots/lengths.svg"
check "stats of token batches, 3 shards" run 0 stats --data "$data" --batch-tokens 200 --shards 3
check "stats: the padding left by the shards' cut" has out "^each of 3 shards cut to its rows' longest \(training\): padding [0-9.]+% of the source positions"

# a run written down and given back: --dump-config, --config FILE (flags beside it override it)
check "dump-config" run 0 train --data "$data" --epochs 2 --lr 0.004 --dump-config
cp "$dir/out" "$dir/run.cfg"
check "dump-config: values" has out '^lr = 0.004$'
check "dump-config: epochs" has out '^epochs = 2$'
check "config: read back" run 0 train --config "$dir/run.cfg" --dump-config
check "config: same configuration" cmp -s "$dir/out" "$dir/run.cfg"
check "config: a flag overrides it" run 0 train --config "$dir/run.cfg" --epochs 3 --dump-config
check "config: overridden" has out '^epochs = 3$'
check "config: trains as the flags do" run 0 train --config "$dir/run.cfg" --checkpoint "$dir/c1.safetensors" --log-every 0
grep -E '=>|^loss' "$dir/out" | sed -E 's/, [0-9.]+ tokens.sec//' >"$dir/by_config"
check "flags: the same run" run 0 train --data "$data" --epochs 2 --lr 0.004 --checkpoint "$dir/c2.safetensors" --log-every 0
grep -E '=>|^loss' "$dir/out" | sed -E 's/, [0-9.]+ tokens.sec//' >"$dir/by_flags"
check "config: same losses and translations" cmp -s "$dir/by_config" "$dir/by_flags"
printf '[train]\nepochs = two\n' >"$dir/bad.cfg"
check "config: a bad value" run 2 train --config "$dir/bad.cfg"
check "config: names file and line" has err "bad.cfg:2: epochs: expected an integer in \\[1, 1000000\\], got 'two'"

# export a plain state_dict and import it back: the same translations
check "export" run 0 export --checkpoint "$ck" --out "$dir/plain.safetensors" --src-vocab "$dir/src.txt" --tgt-vocab "$dir/tgt.txt"
"$prog" translate --checkpoint "$ck" "i'm home ." "go ." >"$dir/a" 2>/dev/null
"$prog" translate --checkpoint "$dir/plain.safetensors" --src-vocab "$dir/src.txt" --tgt-vocab "$dir/tgt.txt" "i'm home ." "go ." >"$dir/b" 2>"$dir/err"
check "import: same translations" cmp -s "$dir/a" "$dir/b"
check "import: needs vocabularies" run 1 translate --checkpoint "$dir/plain.safetensors" "go ."
check "import: message" has err 'src-vocab'

# kept copies and their average: train keeps the 3 most recent periodic saves of its run
# (NAME.step<STEPS>.safetensors), average takes them (--last 3, or named), translate and eval
# load the result, which is no training checkpoint
kk="$dir/keep.safetensors"
touch "$dir/keep.step1.safetensors" "$dir/keepx.step2.safetensors" "$dir/keep.step02.safetensors"
check "keep" run 0 train --data "$data" --epochs 2 --max-steps 10 --checkpoint-steps 2 --keep-checkpoints 3 --checkpoint "$kk" --log-every 0
check "keep: the 3 most recent" test "$(cd "$dir" && echo keep.step*.safetensors)" = "keep.step02.safetensors keep.step10.safetensors keep.step6.safetensors keep.step8.safetensors"
check "keep: others untouched" test -e "$dir/keepx.step2.safetensors"
check "keep: the last copy is the checkpoint" cmp -s "$kk" "$dir/keep.step10.safetensors"
check "average --last" run 0 average --out "$dir/avg.safetensors" --last 3 --checkpoint "$kk"
check "  says so" has out '^average of 3 checkpoints .*keep.step6.safetensors .*keep.step10.safetensors.*no optimizer state'
check "average named" run 0 average --out "$dir/avg2.safetensors" "$dir/keep.step6.safetensors" "$dir/keep.step8.safetensors" "$dir/keep.step10.safetensors"
check "  the same file" cmp -s "$dir/avg.safetensors" "$dir/avg2.safetensors"
check "  translate loads it" run 0 translate --checkpoint "$dir/avg.safetensors" "go ." "i lost ."
check "  two lines" test "$(wc -l <"$dir/out")" = 2
check "  eval loads it" run 0 eval --checkpoint "$dir/avg.safetensors" --data "$data"
check "  not for --resume" run 1 train --data "$data" --epochs 9 --checkpoint "$dir/avg.safetensors" --resume
check "  --out naming an input" run 2 average --out "$dir/keep.step8.safetensors" --last 3 --checkpoint "$kk"
check "  message" has err 'name the same file'
check "  too few kept" run 1 average --out "$dir/avg3.safetensors" --last 4 --checkpoint "$kk"
check "small run" run 0 train --data "$data" --epochs 1 --num-examples 300 --checkpoint "$dir/small.safetensors" --log-every 0
check "  another run's vocabulary refused" run 1 average --out "$dir/avg3.safetensors" "$kk" "$dir/small.safetensors"
check "  message" has err 'small.safetensors: its source vocabulary \(vocab.src\) differs from .*keep.safetensors.s at token [0-9]+'
check "  a plain state_dict refused" run 1 average --out "$dir/avg3.safetensors" "$kk" "$dir/plain.safetensors"
check "  message" has err "plain.safetensors: its tapegrad.model is absent, .*keep.safetensors's '[a-z0-9]+'"
check "  nothing written" test ! -e "$dir/avg3.safetensors"

# bad input: one line naming what and where, the right exit status, nothing overwritten
check "unknown flag" run 2 train --data "$data" --epochz 3
check "unknown flag: named" has err 'unknown flag --epochz'
check "bad value" run 2 train --data "$data" --layers x
check "bad value: range" has err '--layers: expected an integer in'
check "missing data" run 1 train --data "$dir/nope.txt" --epochs 1 --checkpoint "$dir/x.safetensors"
check "missing data: named" has err "$dir/nope.txt"
check "missing data: no checkpoint" test ! -e "$dir/x.safetensors"
head -c 1000 "$ck" >"$dir/cut.safetensors"
cp "$dir/cut.safetensors" "$dir/cut.orig"
check "corrupt checkpoint" run 1 translate --checkpoint "$dir/cut.safetensors" "go ."
check "corrupt checkpoint: named" has err 'cut.safetensors'
check "corrupt resume" run 1 train --data "$data" --epochs 9 --checkpoint "$dir/cut.safetensors" --resume
check "corrupt checkpoint: untouched" cmp -s "$dir/cut.safetensors" "$dir/cut.orig"
check "no sub-command" run 2 frobnicate
for sub in train translate eval stats export average; do
    check "$sub --help" run 0 "$sub" --help
done

e2e_summary
