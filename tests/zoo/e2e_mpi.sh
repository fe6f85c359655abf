#!/usr/bin/env bash
# Data-parallel training under mpirun, on this machine (loopback), against one process
# (docs/distributed.md):
#   e2e_mpi.sh PROGRAM FRA_TXT MPIRUN
# - parity: `mpirun -np 2 PROGRAM train --shards 1` prints the same losses and translations as
#   one process with --shards 2, and its model has the same bits (the exported state_dicts are
#   the same bytes);
# - 2 ranks x 2 shards against one process with 4: the same first step, then the same run up to
#   the order of the gradient sums (within 5% after 5 epochs);
# - --resume under mpirun: a run stopped by --max-steps and resumed on 2 ranks, or started on 2
#   ranks and resumed alone, ends with the bits of the uninterrupted run;
# - a stop (SIGINT to mpirun) saves once, and the run resumes to the same bits;
# - ranks that disagree (MPMD: --seed 0 on one, --seed 1 on the other) stop at the start with
#   one message, exit 2, and write nothing; a rank that dies (SIGKILL) takes the job down and
#   the last checkpoint stays intact; translate refuses to run as 2 processes;
# - --fit-decay's fits (after the warm-up, after each validation) agreed by every rank;
# - a rank that stops (SIGSTOP): the other ends the job after --dist-timeout, with one message
#   naming it, without burning a core while it waits, and the checkpoint stays intact.
set -u
prog=$1
data=$2
mpirun=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
passed=0
failed=0
check() { # check NAME COMMAND...: passes when the command succeeds
    local name=$1
    shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name"; fi
}
# Loopback: more ranks than cores is fine (--oversubscribe); as root mpirun wants a flag; and no
# single-copy transfers between ranks (they need ptrace rights that containers often withhold).
mpi=("$mpirun" --oversubscribe --mca btl_vader_single_copy_mechanism none)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
run() { # run NAME EXPECTED_STATUS COMMAND...: stdout in NAME.out, stderr in NAME.err
    local name=$1 want=$2
    shift 2
    "$@" >"$name.out" 2>"$name.err"
    local got=$?
    if [ "$got" != "$want" ]; then
        echo "  $* exited $got, expected $want; stderr:"
        sed 's/^/    /' "$name.err" | head -30
        return 1
    fi
}
losses() { sed -n 's/^\(epoch [0-9]*\/[0-9]*: loss [0-9.]*\),.*/\1/p' "$1"; }
book() { grep -v 'tokens/sec' "$1" | grep -v '^checkpoint: '; } # translations and what follows
export_model() { # export_model CHECKPOINT OUT: the model alone, as a plain state_dict
    "$prog" export --checkpoint "$1" --out "$2" --src-vocab "$2.src" --tgt-vocab "$2.tgt" >/dev/null
}
same_losses() { [ -n "$(losses "$1")" ] && cmp -s <(losses "$1") <(losses "$2"); }
last_loss() { losses "$1" | tail -1 | sed 's/.*loss //'; }

[ -r "$data" ] || { echo "e2e_mpi: data file $data missing"; echo "0 passed, 1 failed"; exit 1; }
train=(train --data "$data" --epochs 20 --log-every 1)

# ---- parity: 2 ranks x 1 shard = 1 process x 2 shards, to the bit ----
check "one process, 2 shards" run one 0 "$prog" "${train[@]}" --shards 2 --checkpoint one.st
check "mpirun -np 2, 1 shard each" run two 0 "${mpi[@]}" -np 2 "$prog" "${train[@]}" --shards 1 --checkpoint two.st
check "parity: the same 20 epoch losses" same_losses one.err two.err
check "parity: the same translations" cmp -s <(book one.out) <(book two.out)
export_model one.st one.plain
export_model two.st two.plain
check "parity: the same model bits" cmp -s one.plain two.plain
check "rank 0 alone prints: one loss line per epoch" test "$(grep -c '^epoch 20/20' two.err)" = 1
check "rank 0 alone prints: one checkpoint line" test "$(grep -c '^checkpoint: ' two.out)" = 1
check "the checkpoint keeps the global shard count" grep -aq '"train.shards":"2"' two.st

# ---- 2 ranks x 2 shards against 1 process x 4: the same up to the order of the sums ----
check "one process, 4 shards" run four 0 "$prog" "${train[@]}" --epochs 5 --shards 4 --log-steps 1 --checkpoint four.st
check "mpirun -np 2, 2 shards each" run twotwo 0 "${mpi[@]}" -np 2 "$prog" "${train[@]}" --epochs 5 --shards 2 --log-steps 1 --checkpoint twotwo.st
check "2x2 vs 4: the same first step" cmp -s <(grep '^step 1 ' four.err | sed 's/, lr.*//') <(grep '^step 1 ' twotwo.err | sed 's/, lr.*//')
check "2x2 vs 4: a first step was printed" grep -q '^step 1 (epoch' four.err
close5() { awk -v a="$(last_loss four.err)" -v b="$(last_loss twotwo.err)" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d / a < 0.05) }'; }
check "2x2 vs 4: epoch 5 losses within 5%" close5

# ---- --resume under mpirun ----
check "2 ranks, stopped by --max-steps" run r1 0 "${mpi[@]}" -np 2 "$prog" "${train[@]}" --shards 1 --max-steps 55 --checkpoint r.st
check "stopped: says so once" test "$(grep -c '^stopped at step 55 ' r1.out)" = 1
check "2 ranks, resumed" run r2 0 "${mpi[@]}" -np 2 "$prog" "${train[@]}" --resume --checkpoint r.st
check "resumed: says so once" test "$(grep -c '^resuming .* at step 55 ' r2.err)" = 1
export_model r.st r.plain
check "resumed on 2 ranks: the uninterrupted bits" cmp -s one.plain r.plain
check "1 process, stopped" run x1 0 "$prog" "${train[@]}" --shards 2 --max-steps 40 --checkpoint x.st
check "resumed on 2 ranks (1 shard each)" run x2 0 "${mpi[@]}" -np 2 "$prog" "${train[@]}" --resume --checkpoint x.st
export_model x.st x.plain
check "1 process then 2 ranks: the uninterrupted bits" cmp -s one.plain x.plain
check "2 ranks, stopped" run y1 0 "${mpi[@]}" -np 2 "$prog" "${train[@]}" --shards 1 --max-steps 70 --checkpoint y.st
check "resumed alone (2 shards)" run y2 0 "$prog" "${train[@]}" --resume --checkpoint y.st
export_model y.st y.plain
check "2 ranks then 1 process: the uninterrupted bits" cmp -s one.plain y.plain
check "3 ranks cannot share 2 shards" run y3 1 "${mpi[@]}" -np 3 "$prog" "${train[@]}" --epochs 30 --resume --checkpoint y.st
check "3 ranks: message" grep -q 'has 2 shards in all, which 3 ranks cannot share' y3.err

# ---- a stop: SIGINT to mpirun, every rank stops after the same step, one save ----
rm -f s.st
"${mpi[@]}" -np 2 "$prog" "${train[@]}" --shards 1 --checkpoint-steps 5 --checkpoint s.st >s.out 2>s.err &
pid=$!
for _ in $(seq 200); do [ -s s.st ] && break; sleep 0.05; done
kill -INT "$pid"
wait "$pid"
status=$?
if grep -q '^epoch 20/20' s.err; then
    echo "  (the run ended before the signal: the stop is not checked)"
else
    check "stop: mpirun fails" test "$status" != 0
    check "stop: said once" test "$(grep -c 'interrupted at step' s.err)" = 1
    check "stop: resumed" run s2 0 "${mpi[@]}" -np 2 "$prog" "${train[@]}" --resume --checkpoint s.st
    export_model s.st s.plain
    check "stop: resumed to the uninterrupted bits" cmp -s one.plain s.plain
fi

# ---- ranks that disagree, a rank that dies, other commands ----
check "disagreeing ranks" run dis 2 "${mpi[@]}" -np 1 "$prog" "${train[@]}" --seed 0 --checkpoint d.st : -np 1 "$prog" "${train[@]}" --seed 1 --checkpoint d.st
check "disagreeing ranks: one message naming the flag" test "$(grep -c 'the ranks disagree: rank 1 runs --seed 1, rank 0 --seed 0' dis.err)" = 1
check "disagreeing ranks: nothing else from the program" test "$(grep -c 'transformer_nmt\|bahdanau_nmt\|seq2seq_nmt' dis.err)" = 1
check "disagreeing ranks: no checkpoint" test ! -e d.st
check "another data file on one rank" run dd 2 "${mpi[@]}" -np 1 "$prog" "${train[@]}" --checkpoint d.st : -np 1 "$prog" "${train[@]}" --num-examples 500 --checkpoint d.st
check "another data file: named" grep -q 'rank 1 runs --num-examples 500, rank 0 --num-examples 600' dd.err
check "a bad flag: one message" run bad 2 "${mpi[@]}" -np 2 "$prog" train --bogus
check "a bad flag: said once" test "$(grep -c 'unknown flag --bogus' bad.err)" = 1
check "translate refuses 2 processes" run tr 2 "${mpi[@]}" -np 2 "$prog" translate --checkpoint one.st "go ."
check "translate: message" grep -q 'translate runs in one process' tr.err

rm -f k.st
"${mpi[@]}" -np 2 "$prog" "${train[@]}" --epochs 200 --shards 1 --checkpoint-steps 5 --checkpoint k.st >k.out 2>k.err &
pid=$!
for _ in $(seq 200); do [ -s k.st ] && break; sleep 0.05; done
sleep 0.3
rank=$(pgrep -P "$pid" | tail -1)
[ -n "$rank" ] && kill -9 "$rank"
wait "$pid"
status=$?
check "a dead rank: mpirun fails" test "$status" != 0
check "a dead rank: the job ends" test -z "$(pgrep -f -- 'checkpoint-steps 5 --checkpoint k.st')"
check "a dead rank: the checkpoint is intact" run kt 0 "$prog" translate --checkpoint k.st "go ."

# ---- a stopped rank (SIGSTOP): the other gives up after --dist-timeout, with one message ----
# Each rank starts through a wrapper that writes its pid to pid.RANK; once training has saved, one
# rank is stopped. The job must end by itself (bound: 60 s for a 3 s deadline, on a loaded
# machine), fail, name the stopped rank and the deadline once, leave the checkpoint loadable, and
# the waiting rank must not burn a core meanwhile (under 1 s of processor time in 2 s).
printf '#!/bin/sh\necho $$ >"pid.$OMPI_COMM_WORLD_RANK"\nexec "$@"\n' >rank.sh
chmod +x rank.sh
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; } # user + system ticks
stopped_rank() { # stopped_rank RANK: stops RANK during training, checks the job's end
    local stop=$1 wait=$((1 - $1)) name="stop$1"
    rm -f "$name.st" pid.0 pid.1
    "${mpi[@]}" -np 2 ./rank.sh "$prog" "${train[@]}" --epochs 200 --shards 1 --checkpoint-steps 5 \
        --dist-timeout 3 --checkpoint "$name.st" >"$name.out" 2>"$name.err" &
    local pid=$! t0 t1 ticks waited=0 status
    for _ in $(seq 1200); do [ -s "$name.st" ] && [ -s pid.0 ] && [ -s pid.1 ] && break; sleep 0.05; done
    local victim other
    victim=$(cat "pid.$stop" 2>/dev/null) other=$(cat "pid.$wait" 2>/dev/null)
    if [ -z "$victim" ] || [ -z "$other" ] || [ ! -s "$name.st" ]; then
        check "stopped rank $stop: training started" false
        kill -9 "$pid" 2>/dev/null
        wait "$pid"
        return
    fi
    kill -STOP "$victim"
    t0=$(cpu "$other")
    sleep 2
    t1=$(cpu "$other")
    ticks=$(getconf CLK_TCK)
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 600 ]; do sleep 0.1; waited=$((waited + 1)); done
    if kill -0 "$pid" 2>/dev/null; then # still running: end it, and say so
        kill -CONT "$victim" 2>/dev/null
        kill -9 "$pid" "$victim" "$other" 2>/dev/null
    fi
    wait "$pid"
    status=$?
    kill -CONT "$victim" 2>/dev/null # leftovers (mpirun normally took them down)
    kill -9 "$victim" "$other" 2>/dev/null
    check "stopped rank $stop: the job ends by itself within 60 s" test "$waited" -lt 600
    check "stopped rank $stop: mpirun fails" test "$status" != 0
    check "stopped rank $stop: one message naming it and the deadline" \
        test "$(grep -c "rank $stop did not answer within 3 s (--dist-timeout): ending the job" "$name.err")" = 1
    check "stopped rank $stop: no other rank blamed" test "$(grep -c 'did not answer' "$name.err")" = 1
    check "stopped rank $stop: the waiting rank slept (CPU $((t1 - t0)) ticks in 2 s)" \
        test $((t1 - t0)) -lt "$ticks"
    check "stopped rank $stop: the checkpoint is intact" run "${name}t" 0 "$prog" translate --checkpoint "$name.st" "go ."
}
stopped_rank 1
stopped_rank 0

# validation and early stopping under mpirun: rank 0 prints, every rank stops at the same step
check "--patience under mpirun" run pat 0 "${mpi[@]}" -np 2 "$prog" train --data "$data" --num-examples 200 --valid-frac 0.2 --valid-steps 1 --patience 1 --lr 0 --epochs 50 --log-every 0 --shards 1 --checkpoint pat.st
check "  stops at step 2, once" test "$(grep -c 'by --patience' pat.out)" = 1
check "  one line per validation (rank 0's)" test "$(grep -c '^valid at step' pat.err)" = 2
check "  the best checkpoint" test -s pat.st.best

# --fit-decay with validations under mpirun: rank 0's fits (at the warm-up's end, then after each
# validation: collectives at steps 3, 4, 8, ...) reach every rank, so both stop after the same
# step (else one would wait for the other until --dist-timeout), and the checkpoint keeps the
# last end the log gave (40, --max-steps, unless a loaded machine's budget ends the run first)
check "--fit-decay with refits under mpirun" run fit 0 "${mpi[@]}" -np 2 "$prog" train --data "$data" --num-examples 200 --valid-frac 0.1 --valid-steps 4 --lr-schedule linear --warmup-steps 3 --decay-steps 1000 --fit-decay 1 --time-budget 30 --max-steps 40 --epochs 100000 --log-every 0 --shards 1 --checkpoint fit.st
fit_end=$(sed -n -e 's/^schedule: the warm-up ended .* the decay ends at step \([0-9]*\),.*/\1/p' -e "s/^schedule: at step .*, the decay's end moves from step [0-9]* to \([0-9]*\),.*/\1/p" fit.err | tail -1)
check "  a fitted end on rank 0's log" test -n "$fit_end"
check "  the checkpoint keeps the last one" grep -aq "\"train.decay_steps\":\"$fit_end\"" fit.st
check "  one stop line" test "$(grep -c '^stopped at step' fit.out)" = 1

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
