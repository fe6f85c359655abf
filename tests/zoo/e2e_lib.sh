# shellcheck shell=bash
# tests/zoo/e2e_lib.sh -- what the end-to-end scripts share (bash; sourced by e2e_nmt.sh and
# e2e_reliability.sh):
#
#   e2e_init PROGRAM FRA_TXT    prog, data and dir, a temporary directory (removed at exit, even
#                               where a case made it read-only); ends the script (1 failed) when
#                               the data file is not readable
#   check NAME COMMAND...       counts a case: passed when the command succeeds, else FAILED: NAME
#   run EXPECTED_STATUS ARGS... runs $prog ARGS (stdout in $dir/out, stderr in $dir/err); true
#                               when it exits EXPECTED_STATUS, else says so with its stderr
#   has FILE REGEX              $dir/FILE has a line matching REGEX (else shows the file)
#   lacks FILE REGEX            $dir/FILE has none
#   same A B                    files A and B have the same bytes
#   st_header FILE              prints the JSON header of safetensors FILE (its first 8 bytes
#                               give its length)
#   st_meta FILE KEY            prints the value of metadata KEY of FILE (a value without '"')
#   e2e_summary                 prints "N passed, M failed"; true when none failed (the last
#                               command of a script: its exit status)
passed=0
failed=0
check() {
    local name=$1
    shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name"; fi
}
run() {
    local want=$1
    shift
    "$prog" "$@" >"$dir/out" 2>"$dir/err"
    local got=$?
    if [ "$got" != "$want" ]; then
        echo "  $prog $* exited $got, expected $want; stderr:"
        sed 's/^/    /' "$dir/err"
        return 1
    fi
}
has() { grep -Eq -- "$2" "$dir/$1" || { echo "  $1 lacks /$2/:"; sed 's/^/    /' "$dir/$1"; return 1; }; }
lacks() { ! grep -Eq -- "$2" "$dir/$1" || { echo "  $1 has /$2/"; return 1; }; }
same() { cmp -s "$1" "$2" || { echo "  $1 changed"; return 1; }; }
e2e_init() {
    prog=$1
    data=$2
    dir=$(mktemp -d)
    trap 'chmod -R u+w "$dir"; rm -rf "$dir"' EXIT
    [ -r "$data" ] || { echo "e2e: data file $data missing"; echo "0 passed, 1 failed"; exit 1; }
}
st_header() {
    local n
    n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
    tail -c +9 "$1" | head -c "$n"
}
st_meta() { st_header "$1" | grep -o "\"$2\":\"[^\"]*\"" | cut -d'"' -f4; }
e2e_summary() {
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
}
