#!/usr/bin/env bash
# Nothing silently wrong, nothing lost: every case of docs/reliability.md that a user meets on
# the command line, run as a user runs it.
#   e2e_reliability.sh PROGRAM FRA_TXT        (PROGRAM: build/zoo/transformer_nmt)
# Each case checks the exit status (2 usage, 1 runtime), that the message names its cause, and
# that nothing already written was lost.
set -u
# shellcheck source=SCRIPTDIR/e2e_lib.sh
source "$(dirname "$0")/e2e_lib.sh"
e2e_init "$@"

to_full() { # to_full EXPECTED_STATUS ARGS...: stdout to /dev/full
    local want=$1
    shift
    "$prog" "$@" >/dev/full 2>"$dir/err"
    local got=$?
    [ "$got" = "$want" ] || { echo "  $prog $* > /dev/full exited $got, expected $want"; return 1; }
}

ck="$dir/run.safetensors"
small=(--data "$data" --num-examples 80 --epochs 1 --log-every 0)
run 0 train "${small[@]}" --checkpoint "$ck" || { echo "0 passed, 1 failed"; exit 1; }
cp "$ck" "$dir/keep.safetensors"

# 1. numbers in flags: the whole text, integers in decimal, reals finite and in range
check "--seed 1e3 refused" run 2 train "${small[@]}" --seed 1e3
check "  names the flag and the range" has err "--seed: expected an integer in \[0, 18446744073709551615\], got '1e3'"
check "--seed 0x10 refused" run 2 train "${small[@]}" --seed 0x10
check "--alpha nan refused" run 2 translate --checkpoint "$ck" --beam 4 --alpha nan "go ."
check "  names the flag" has err "--alpha: expected a number in \[0, 10\], got 'nan'"
check "--lr nan refused as usage" run 2 train "${small[@]}" --lr nan
check "--heads 3.5 refused" run 2 train "${small[@]}" --heads 3.5

# 2. messages name their cause: a sequence longer than the positional-encoding table is refused
#    before training
check "--num-steps beyond --max-len refused" run 2 train "${small[@]}" --num-steps 2000
check "  names both" has err "--num-steps 2000 is longer than the positional-encoding table \(--max-len 1000\)"
check "  no empty message" lacks err ': $'

# 3. outputs that could be lost
check "export --out = --checkpoint refused" run 2 export --checkpoint "$ck" --out "$ck" --src-vocab "$dir/s.txt" --tgt-vocab "$dir/t.txt"
check "  names both flags" has err "--checkpoint and --out name the same file"
check "  checkpoint intact" same "$ck" "$dir/keep.safetensors"
check "export --src-vocab = --checkpoint refused" run 2 export --checkpoint "$ck" --out "$dir/sd.safetensors" --src-vocab "$ck" --tgt-vocab "$dir/t.txt"
check "  checkpoint intact" same "$ck" "$dir/keep.safetensors"
check "translate > /dev/full exits 1" to_full 1 translate --checkpoint "$ck" "go ."
check "  says so" has err "writing to standard output failed"
check "eval > /dev/full exits 1" to_full 1 eval --checkpoint "$ck" --data "$data"
check "stats > /dev/full exits 1" to_full 1 stats --data "$data" --num-examples 80
check "train > /dev/full exits 1" to_full 1 train "${small[@]}" --checkpoint "$dir/full.safetensors"
check "export > /dev/full exits 1" to_full 1 export --checkpoint "$ck" --out "$dir/sd.safetensors" --src-vocab "$dir/s.txt" --tgt-vocab "$dir/t.txt"
check "--checkpoint in a missing folder refused before training" run 2 train "${small[@]}" --checkpoint "$dir/no/such/x.safetensors"
check "  names the folder" has err "its folder $dir/no/such does not exist"
check "--checkpoint a directory refused" run 2 train "${small[@]}" --checkpoint "$dir"
check "  says it is not a file" has err "exists and is not a regular file"
: > "$dir/afile"
check "--plots naming a regular file refused" run 2 train "${small[@]}" --checkpoint "$dir/p.safetensors" --plots "$dir/afile"
check "  says so" has err "afile: exists and is not a directory"
check "  nothing trained" test ! -e "$dir/p.safetensors"

# 4. temporary files: a save leaves none behind; a symlinked checkpoint stays a link; the mode stays
check "no temporary left by saves" test -z "$(find "$dir" -name '*.tmp.*')"
cp "$ck" "$dir/target.safetensors"
chmod 600 "$dir/target.safetensors"
ln -s target.safetensors "$dir/link.safetensors"
check "train through a symlink" run 0 train "${small[@]}" --checkpoint "$dir/link.safetensors"
check "  the link is still a link" test -L "$dir/link.safetensors"
check "  its target was replaced" test "$(cmp -s "$ck" "$dir/target.safetensors"; echo $?)" = 1
check "  mode 0600 kept" test "$(stat -c %a "$dir/target.safetensors")" = 600

# 5. a checkpoint can be trusted: an edited header or a flipped data bit is refused
sed 's/"config.dropout":"0.1"/"config.dropout":"0.2"/' "$ck" > "$dir/edited.safetensors"
check "  (the header was edited)" test "$(cmp -s "$ck" "$dir/edited.safetensors"; echo $?)" = 1
check "edited config refused" run 1 translate --checkpoint "$dir/edited.safetensors" "go ."
check "  checksum named" has err "checksum does not match"
cp "$ck" "$dir/flipped.safetensors"
size=$(stat -c %s "$dir/flipped.safetensors")
printf '\x55' | dd of="$dir/flipped.safetensors" bs=1 seek=$((size - 5)) conv=notrunc status=none
check "flipped data bit refused" run 1 translate --checkpoint "$dir/flipped.safetensors" "go ."
check "  checksum named" has err "checksum does not match"
head -c 100 "$ck" > "$dir/short.safetensors"
check "truncated file refused" run 1 translate --checkpoint "$dir/short.safetensors" "go ."

# 6. translate: a bad line is reported with its number, the others translated, exit 1
printf 'go .\n\377 bad\ni lost .\n' > "$dir/in.txt"
check "bad input line: exit 1" run 1 translate --checkpoint "$ck" < "$dir/in.txt"
check "  line number" has err "line 2: invalid UTF-8"
check "  three output lines" test "$(wc -l < "$dir/out")" = 3
check "  the next lines translated" lacks err "line [13]:"
check "a directory as --data says so" run 1 stats --data "$dir"
check "  is a directory" has err "is a directory"

# 7. budgeted, interruptible jobs: negative limits are refused before training (0: no limit); a run
#    stopped mid-epoch (by --max-steps or by SIGINT) resumes to the same bits as an uninterrupted one
check "--max-steps -1 refused" run 2 train "${small[@]}" --max-steps -1
check "  names the flag" has err "--max-steps: expected an integer in \[0, 1000000000000\], got '-1'"
check "--time-budget -0.5 refused" run 2 train "${small[@]}" --time-budget -0.5
check "--time-budget -5 refused" run 2 train "${small[@]}" --time-budget -5
job=(--data "$data" --num-examples 200 --epochs 3 --log-every 0)
check "an uninterrupted run" run 0 train "${job[@]}" --checkpoint "$dir/whole.safetensors"
check "--max-steps stops mid-epoch" run 0 train "${job[@]}" --checkpoint "$dir/part.safetensors" --max-steps 5
check "  says where" has out "stopped at step 5 \(epoch 2, batch 1\) by --max-steps"
check "--resume finishes it" run 0 train "${job[@]}" --checkpoint "$dir/part.safetensors" --resume
check "  from that step" has err "resuming .* at step 5 \(epoch 2, batch 1\)"
run 0 export --checkpoint "$dir/whole.safetensors" --out "$dir/whole.sd" --src-vocab "$dir/ws.txt" --tgt-vocab "$dir/wt.txt"
run 0 export --checkpoint "$dir/part.safetensors" --out "$dir/part.sd" --src-vocab "$dir/ps.txt" --tgt-vocab "$dir/pt.txt"
check "  the same parameters, bit for bit" same "$dir/whole.sd" "$dir/part.sd"
# SIGINT once training runs (its first epoch line: the handler is in place by then; before it,
# a background job of this script ignores SIGINT, as every non-interactive shell's does), and
# a bound: a run that outlives it is killed and fails the check.
"$prog" train --data "$data" --epochs 100000 --log-every 1 --checkpoint "$dir/sig.safetensors" >"$dir/out" 2>"$dir/err" &
pid=$!
for _ in $(seq 600); do grep -q "^epoch 1/" "$dir/err" 2>/dev/null && break; sleep 0.1; done
kill -INT $pid
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -KILL $pid 2>/dev/null
wait $pid
status=$?
check "SIGINT: exit 130" test "$status" = 130
check "  says where it saved" has err "interrupted at step [0-9]+ .*checkpoint .*sig.safetensors"
check "  the checkpoint resumes" run 0 train --data "$data" --epochs 100000 --max-steps 1000000000 --time-budget 0.2 --log-every 0 --checkpoint "$dir/sig.safetensors" --resume
# (a budget of 10 s: the first epoch ends inside it even under the sanitizers on a loaded machine)
check "an epoch's line counts down to the time budget" run 0 train --data "$data" --epochs 100000 --time-budget 10 --log-every 1 --checkpoint "$dir/budget.safetensors"
check "  not to the 100,000 epochs" has err "^epoch 1/100000: .* remaining (10\.0|[0-9]\.[0-9])s$"

# 8. the training recipe: a schedule needs its warm-up, names are checked, a run with a recipe
#    stopped mid-epoch resumes to the bits of an uninterrupted one, and the recipe is fixed on --resume
check "--lr-schedule invsqrt without warm-up refused" run 2 train "${small[@]}" --lr-schedule invsqrt
check "  names the flag" has err "needs --warmup-steps >= 1"
check "--lr-schedule bogus refused" run 2 train "${small[@]}" --lr-schedule bogus
check "  lists the names" has err "expected one of constant, invsqrt, cosine, linear, got 'bogus'"
recipe=(--lr 0.002 --beta2 0.98 --lr-schedule invsqrt --warmup-steps 4 --label-smoothing 0.1)
check "a run with a recipe" run 0 train "${job[@]}" "${recipe[@]}" --checkpoint "$dir/rw.safetensors" --log-steps 3
check "  the progress shows the warm-up" has err "step 3 \\(epoch [0-9.]+\\): loss [0-9.]+, lr 0.0015,"
check "  stopped at step 6" run 0 train "${job[@]}" "${recipe[@]}" --checkpoint "$dir/rp.safetensors" --max-steps 6
check "  resumed" run 0 train "${job[@]}" --checkpoint "$dir/rp.safetensors" --resume
run 0 export --checkpoint "$dir/rw.safetensors" --out "$dir/rw.sd" --src-vocab "$dir/rws.txt" --tgt-vocab "$dir/rwt.txt"
run 0 export --checkpoint "$dir/rp.safetensors" --out "$dir/rp.sd" --src-vocab "$dir/rps.txt" --tgt-vocab "$dir/rpt.txt"
check "  the same parameters, bit for bit" same "$dir/rw.sd" "$dir/rp.sd"
check "  --beta2 cannot change on --resume" run 2 train "${job[@]}" --checkpoint "$dir/rp.safetensors" --resume --epochs 4 --beta2 0.9
check "  says so" has err "--beta2 0.9 differs from the checkpoint's 0.98"

# 9. the whole-corpus job: token batches, validation, the best checkpoint, early stopping,
#    presets; what cannot work is refused before training, naming the flag
check "--valid-steps without a validation split refused" run 2 train "${small[@]}" --valid-steps 5
check "  names the flags" has err "--valid-steps 5: the validation split is empty \(--valid-frac 0 of 81 pairs\)"
check "--valid-frac holding no pair refused" run 2 train "${small[@]}" --valid-steps 5 --valid-frac 0.001
check "--patience without --valid-steps refused" run 2 train "${small[@]}" --patience 3
check "  says so" has err "--patience and --best-checkpoint need --valid-steps"
check "--valid-metric without --valid-steps refused" run 2 train "${small[@]}" --valid-metric sacrebleu
check "  says so" has err "--valid-metric sacrebleu needs --valid-steps"
check "--valid-metric bleu5 refused" run 2 train "${small[@]}" --valid-frac 0.2 --valid-steps 2 --valid-metric bleu5
check "  names the choices" has err "--valid-metric: expected one of auto, bleu4, sacrebleu, got 'bleu5'"
check "--batch-tokens below the longest pair refused" run 2 train "${small[@]}" --batch-tokens 5
check "  names the flag and the pair" has err "--batch-tokens: batch_tokens = 5 is below the longest pair \([0-9]+ tokens"
check "--best-checkpoint in a missing folder refused" run 2 train "${small[@]}" --valid-frac 0.2 --valid-steps 2 --best-checkpoint "$dir/no/b.safetensors"
check "--preset bogus refused" run 2 train "${small[@]}" --preset bogus
check "  names it" has err "--preset bogus: no such preset"
val=(--data "$data" --num-examples 400 --valid-frac 0.1 --batch-tokens 200 --log-every 0 --plots "$dir/vp")
check "token batches with validation" run 0 train "${val[@]}" --epochs 3 --valid-steps 10 --checkpoint "$dir/v.safetensors"
check "  a validation line" has err "valid at step 10 \(epoch [0-9.]+\): loss [0-9.]+, BLEU-4 [0-9.]+, sacreBLEU [0-9.]+, chrF [0-9.]+ \(best BLEU-4 [0-9.]+"
check "  the best checkpoint" test -s "$dir/v.best.safetensors"
check "  the curves" test -s "$dir/vp/valid_bleu.svg" -a -s "$dir/vp/valid_bleu_time.svg" -a -s "$dir/vp/valid_loss.svg" -a -s "$dir/vp/valid_sacrebleu.svg" -a -s "$dir/vp/valid_sacrebleu_time.svg"
check "  valid.csv: a header and a line per validation" test "$(head -1 "$dir/vp/valid.csv")" = "step,epoch,seconds,train_loss,valid_loss,bleu,sacrebleu,chrf"
check "  the summary line" has out "valid: BLEU-4 [0-9.]+, sacreBLEU [0-9.]+, loss [0-9.]+ at step [0-9]+; best BLEU-4"
check "  a word run chooses by BLEU-4" test "$(st_meta "$dir/v.safetensors" train.valid_metric)" = bleu4
check "--patience 1 stops early" run 0 train "${val[@]}" --epochs 50 --valid-steps 1 --patience 1 --lr 0 --checkpoint "$dir/e.safetensors"
check "  says so" has out "by --patience"
check "a token-batch run stopped mid-epoch" run 0 train "${val[@]}" --epochs 2 --valid-steps 7 --checkpoint "$dir/tp.safetensors" --max-steps 9
check "  resumed" run 0 train "${val[@]}" --epochs 2 --valid-steps 7 --checkpoint "$dir/tp.safetensors" --resume
check "  an uninterrupted one" run 0 train "${val[@]}" --epochs 2 --valid-steps 7 --checkpoint "$dir/tw.safetensors"
run 0 export --checkpoint "$dir/tw.safetensors" --out "$dir/tw.sd" --src-vocab "$dir/tws.txt" --tgt-vocab "$dir/twt.txt"
run 0 export --checkpoint "$dir/tp.safetensors" --out "$dir/tp.sd" --src-vocab "$dir/tps.txt" --tgt-vocab "$dir/tpt.txt"
check "  the same parameters, bit for bit" same "$dir/tw.sd" "$dir/tp.sd"
check "  --batch-tokens cannot change on --resume" run 2 train "${val[@]}" --epochs 3 --batch-tokens 300 --checkpoint "$dir/tp.safetensors" --resume
check "--preset full, flags given override it" run 0 train --data "$data" --preset full --num-examples 300 --valid-frac 0.1 --test-frac 0 --batch-tokens 400 --hiddens 32 --ffn-hiddens 64 --max-steps 2 --valid-steps 2 --log-steps 0 --checkpoint "$dir/pf.safetensors"
st_header "$dir/pf.safetensors" | tr ',' '\n' > "$dir/pf.header"
for kv in '"config.heads":"8"' '"train.lr_schedule":"linear"' '"config.d2l-step-positions":"0"' '"data.num_examples":"300"'; do
    check "  the preset's or the flags' $kv" has pf.header "$kv"
done
check "  the flags' --hiddens" has pf.header '"config.hiddens":"32"'
check "  the flags' --batch-tokens" has pf.header '"data.batch_tokens":"400"'
check "--fit-decay without --time-budget refused" run 2 train "${small[@]}" --fit-decay 1 --lr-schedule linear --warmup-steps 2 --decay-steps 10
check "  says what it needs" has err "--fit-decay needs --time-budget and --lr-schedule linear or cosine: give them, or --fit-decay 0"
check "--fit-decay with a constant rate refused" run 2 train "${small[@]}" --fit-decay 1 --time-budget 5
check "a run with its decay fitted to --time-budget" run 0 train --data "$data" --num-examples 200 --epochs 100000 --log-every 0 --lr-schedule linear --warmup-steps 3 --decay-steps 1000 --fit-decay 1 --time-budget 2 --checkpoint "$dir/fit.safetensors"
check "  the fitted end on the log" has err "^schedule: the warm-up ended at step 3 after [0-9.]+s \([0-9.]+s a step\); the decay ends at step [0-9]+, where the rest of --time-budget ends \(--decay-steps [0-9]+ --max-steps [0-9]+ repeat it\)$"
check "  stopped there or by the budget" has out "^stopped at step [0-9]+ \(epoch [0-9]+, batch [0-9]+\) by (the end of the decay \(--fit-decay\)|--time-budget);"
fitted=$(sed -n 's/^schedule: .* the decay ends at step \([0-9]*\),.*/\1/p' "$dir/err")
st_header "$dir/fit.safetensors" | tr ',' '\n' > "$dir/fit.header"
check "  the checkpoint's recipe has it" has fit.header "\"train.decay_steps\":\"$fitted\""
fit=(train --data "$data" --num-examples 200 --epochs 100000 --log-every 0 --fit-decay 1 --time-budget 60 --checkpoint "$dir/fit.safetensors" --resume)
if grep -q "by the end of the decay" "$dir/out"; then
    check "  the run ends there: --resume has nothing to train" run 1 "${fit[@]}"
    check "  says so" has err "the run is at step $fitted, where it ends \(its decay $fitted\): nothing to train"
else # the budget came first: --resume trains to the decay's end
    check "  --resume trains on to the decay's end" run 0 "${fit[@]}"
    check "  and stops there" has out "^stopped at step $fitted .* by the end of the decay"
fi

# 9. the second audit (2026-11-24): outputs that collide, runs that race, faults
a="$dir/a2"
mkdir -p "$a/P" "$a/Q"
head -n 200 "$data" >"$a/d.txt"
cp "$a/d.txt" "$a/keep.txt"
cp "$a/d.txt" "$a/P/loss.csv"
cp "$a/d.txt" "$a/Q/lengths.svg"
tiny=(--epochs 1 --log-every 0)
check "--checkpoint naming --data refused" run 2 train --data "$a/d.txt" --checkpoint "$a/d.txt" "${tiny[@]}"
check "  names both flags" has err "--data and --checkpoint name the same file"
check "  the data kept" same "$a/d.txt" "$a/keep.txt"
check "--best-checkpoint naming --data (through ..) refused" run 2 train --data "$a/d.txt" --valid-frac 0.1 --valid-steps 2 --best-checkpoint "$a/P/../d.txt" "${tiny[@]}" --checkpoint "$a/x.safetensors"
check "  names both flags" has err "--data and --best-checkpoint name the same file"
check "--checkpoint naming a symlink to --data refused" bash -c "ln -s '$a/d.txt' '$a/link' && '$prog' train --data '$a/d.txt' --checkpoint '$a/link' --epochs 1 2>/dev/null; [ \$? = 2 ]"
check "--checkpoint P/loss.csv --plots P refused" run 2 train --data "$a/d.txt" --checkpoint "$a/P/loss.csv" --plots "$a/P" "${tiny[@]}"
check "  says --plots writes it" has err "is a file --plots .* writes: it would be overwritten"
check "  the file kept" same "$a/P/loss.csv" "$a/keep.txt"
check "--checkpoint P/attention_x.svg --plots P refused" run 2 train --data "$a/d.txt" --checkpoint "$a/P/attention_x.svg" --plots "$a/P" "${tiny[@]}"
check "--best-checkpoint P/valid.csv --plots P refused" run 2 train --data "$a/d.txt" --valid-frac 0.1 --valid-steps 2 --best-checkpoint "$a/P/valid.csv" --plots "$a/P" "${tiny[@]}" --checkpoint "$a/y.safetensors"
check "stats --data Q/lengths.svg --plots Q refused" run 2 stats --data "$a/Q/lengths.svg" --plots "$a/Q"
check "  the data kept" same "$a/Q/lengths.svg" "$a/keep.txt"
check "train --data P/loss.csv --plots P refused" run 2 train --data "$a/P/loss.csv" --plots "$a/P" "${tiny[@]}"
check "  the data kept" same "$a/P/loss.csv" "$a/keep.txt"
check "a link to nothing as --checkpoint refused before training" bash -c "ln -s '$a/none/x' '$a/dangling' && '$prog' train --data '$a/d.txt' --checkpoint '$a/dangling' --epochs 1 2>'$a/err'; [ \$? = 2 ] && grep -q 'a symbolic link to nothing' '$a/err'"
check "an empty --checkpoint refused" run 2 train --data "$a/d.txt" --checkpoint "" "${tiny[@]}"
check "  says so" has err "--checkpoint: expected a path, got an empty text"
check "an empty --data refused (no fall-back to the default file)" run 2 train --data ""
check "an empty --plots refused" run 2 stats --data "$a/d.txt" --plots ""
# two runs of one checkpoint: the second is refused while the first holds the lock
"$prog" train --data "$a/d.txt" --epochs 100000 --time-budget 20 --log-every 0 --checkpoint "$a/race.safetensors" >/dev/null 2>&1 &
first=$!
for _ in $(seq 200); do [ -s "$a/race.safetensors.lock" ] && break; sleep 0.05; done
check "a second train of the same checkpoint refused" run 1 train --data "$a/d.txt" "${tiny[@]}" --checkpoint "$a/race.safetensors"
check "  names the process" has err "is being trained by process $first"
kill -INT "$first"
wait "$first"
check "  the first saved it" test -s "$a/race.safetensors"
check "  and removed its lock file" test ! -e "$a/race.safetensors.lock"
"$prog" train --data "$a/d.txt" --epochs 100000 --time-budget 20 --log-every 0 --checkpoint "$a/race.safetensors" --resume >/dev/null 2>&1 &
first=$!
for _ in $(seq 200); do grep -qx "$first" "$a/race.safetensors.lock" 2>/dev/null && break; sleep 0.05; done
check "a second --resume of it refused" run 1 train --data "$a/d.txt" --epochs 100000 --log-every 0 --checkpoint "$a/race.safetensors" --resume
kill -INT "$first"
wait "$first"
check "the lock goes with the process: resuming again works" run 0 train --data "$a/d.txt" --epochs 100000 --max-steps 200000 --time-budget 0.3 --log-every 0 --checkpoint "$a/race.safetensors" --resume
# --resume with other tokens in vocabularies of the same sizes
run 0 train --data "$a/d.txt" "${tiny[@]}" --checkpoint "$a/v.safetensors"
sed -E ':a; s/^([^\t]*)\b[Gg]o\b/\1Zq/; ta' "$a/d.txt" >"$a/d2.txt" # "go" -> "zq": same sizes
check "--resume with other tokens refused" run 1 train --data "$a/d2.txt" --epochs 2 --log-every 0 --checkpoint "$a/v.safetensors" --resume
check "  names the token" has err "source vocabulary differs from the checkpoint's: token [0-9]+ is '.*' here, '.*' there"
# translate: a NUL byte is a bad line, not a cut one
printf 'go .\ngo\0 away .\ni lost .\n' >"$a/nul.txt"
check "translate: a line with a NUL byte reported" bash -c "'$prog' translate --checkpoint '$ck' <'$a/nul.txt' >'$a/out' 2>'$a/err'; [ \$? = 1 ]"
check "  names the line" has a2/err "line 2: a NUL byte at byte 3"
check "  three output lines" test "$(wc -l <"$a/out")" = 3
check "  the others translated" lacks a2/err "line [13]:"
# numbers: decimal only, no blanks, as for integers
check "--time-budget 0x10 refused" run 2 train --data "$a/d.txt" --time-budget 0x10
check "--lr ' 0.1' refused" run 2 train --data "$a/d.txt" --lr " 0.1"
check "--lr 'inf' refused" run 2 train --data "$a/d.txt" --lr inf
check "--heads 3 --hiddens 32 refused before the data is read" run 2 train --data "$a/none.txt" --heads 3 --hiddens 32
check "  names the config" has err "hiddens 32, ffn 64, heads 3"
# export: all three outputs or none
printf 'old\n' >"$a/o.sd"; printf 'old\n' >"$a/s.txt"; printf 'old\n' >"$a/t.txt"
check "export beyond a file size limit fails" bash -c "trap '' XFSZ; ulimit -f 8; '$prog' export --checkpoint '$ck' --out '$a/o.sd' --src-vocab '$a/s.txt' --tgt-vocab '$a/t.txt' 2>'$a/err'; [ \$? = 1 ]"
check "  nothing replaced" bash -c "for f in o.sd s.txt t.txt; do [ \"\$(cat '$a'/\$f)\" = old ] || exit 1; done"
check "  no temporary left" test "$(ls -A "$a" | grep -c '\.tmp')" = 0

e2e_summary
