#!/usr/bin/env bash
# The house's layering, checked from the #include lines of the sources (ctest: layering):
#
#   zoo/app      -> zoo/models, optim, nn, autograd, datasets
#   zoo/models   -> nn, autograd
#   optim        -> nn, autograd
#   nn           -> autograd
#   datasets     -> autograd/ag_base.h and ag_file.h only (the library ag_base: the shared error
#                   channel, RNG and atomic output files)
#   autograd     -> nothing
#
# (programs under */examples/ may use every library) and: a private header (*internal.h) is included only by files of its own library; the
# headers of one library include each other without a cycle (checked with tsort).
#
# usage: tests/layering.sh [SOURCE_DIR]          check; exit 1 naming every violation
#        tests/layering.sh --dot [SOURCE_DIR]    print the library-level include graph (DOT)
set -euo pipefail
dot=0
if [ "${1:-}" = "--dot" ]; then dot=1; shift; fi
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

lib_of() { # path -> library name
    case "$1" in
        zoo/models/*) echo zoo/models ;;
        zoo/app/*) echo zoo/app ;;
        autograd/*|nn/*|optim/*|datasets/*) echo "${1%%/*}" ;;
        *) echo "" ;;
    esac
}

allowed() { # from-library to-header -> 0 if the include is allowed
    local from=$1 hdr=$2 to
    to=$(lib_of "$hdr")
    [ -n "$to" ] || return 0          # system headers, BLIS, xxHash, CUnit
    [ "$from" = "$to" ] && return 0
    case "$from:$to" in
        zoo/app:zoo/models|zoo/app:optim|zoo/app:nn|zoo/app:autograd|zoo/app:datasets) return 0 ;;
        zoo/models:nn|zoo/models:autograd|optim:nn|optim:autograd|nn:autograd) return 0 ;;
        datasets:autograd) case "$hdr" in autograd/ag_base.h|autograd/ag_file.h) return 0 ;; esac ;;
    esac
    return 1
}

# An include resolves as the compiler resolves it: first beside the including file (public
# headers include each other relatively, "ag_base.h", "../autograd/ag.h", so that they work
# installed under include/tapegrad/), then from the source root ("autograd/ag_op.h").
resolve() { # including-file include -> path from the root
    local rel
    rel=$(realpath -m --relative-to=. "$(dirname "$1")/$2")
    if [ -e "$rel" ]; then echo "$rel"; else echo "$2"; fi
}

bad=0
edges=$(mktemp)
trap 'rm -f "$edges" "$edges".*' EXIT
while IFS= read -r f; do
    from=$(lib_of "$f")
    while IFS= read -r hdr; do
        [ -n "$hdr" ] || continue
        hdr=$(resolve "$f" "$hdr")
        to=$(lib_of "$hdr")
        if ! allowed "$from" "$hdr"; then
            echo "layering: $f includes $hdr ($from may not depend on ${to:-?})"
            bad=1
        fi
        case "$hdr" in
            *internal.h)
                if [ "$to" != "$from" ]; then
                    echo "layering: $f includes the private header $hdr of $to"
                    bad=1
                fi ;;
        esac
        if [ -n "$to" ] && [ "$to" != "$from" ]; then echo "$from $to" >> "$edges.lib"; fi
        case "$f" in *.h) [ "$to" = "$from" ] && echo "$f $hdr" >> "$edges" ;; esac
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find autograd nn optim datasets zoo -name '*.[ch]' -not -path '*/examples/*' | sort)

# private headers outside their library: tests included
while IFS= read -r f; do
    while IFS= read -r hdr; do
        echo "layering: $f (a test) includes the private header $hdr"
        bad=1
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(.*internal\.h\)".*/\1/p' "$f" |
             grep -v '^tests/' || true)
done < <(find tests -name '*.[ch]' | sort)

# no cycle among the headers of a library
if [ -s "$edges" ] && ! tsort "$edges" > /dev/null 2> "$edges.err"; then
    echo "layering: an include cycle between headers:"
    cat "$edges.err"
    bad=1
fi

if [ "$dot" = 1 ]; then
    echo 'digraph includes {'
    echo '  rankdir=TB; node [shape=box, fontname="sans-serif"];'
    echo '  { rank=same; "autograd"; }  { rank=same; "nn"; "datasets"; }'
    sort -u "$edges.lib" | while read -r a b; do echo "  \"$a\" -> \"$b\";"; done
    echo '}'
    exit 0
fi
if [ "$bad" = 0 ]; then echo "layering: ok"; fi
exit "$bad"
