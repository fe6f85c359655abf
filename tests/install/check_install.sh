#!/usr/bin/env bash
# An installed tapegrad, checked from outside (ctest: installed_headers; CI):
#  1. every installed header compiled on its own with the installed include directory only, as
#     C11 and as C++11, -Wall -Wextra -pedantic-errors -Werror: a header fails when it includes
#     another tapegrad header by a path that resolves only in the source tree (public headers
#     include each other relatively: "ag_base.h", "../autograd/ag.h"), or is not valid C++
#     (extern "C", no compound literals in macros ...);
#  2. with pkg-config: tests/cxx/test_headers.cpp, every installed header in one C++ program,
#     built with `pkg-config --cflags --libs tapegrad` and run (shared libraries);
#  3. with pkg-config and nm: the static link flags of tapegrad-ag (Libs.private) carry what the
#     BLIS it was built with needs, read from that library's undefined symbols: -fopenmp (or
#     -lgomp) for an OpenMP BLIS (GOMP_ / omp_ symbols), -pthread for pthread_ symbols.
#
# usage: tests/install/check_install.sh PREFIX [CC [CXX]]
#        tests/install/check_install.sh --install BUILD_DIR [CC [CXX]]
#          (installs BUILD_DIR into a temporary prefix first)
#
# TG_CHECK_FLAGS: more compiler flags for the program of step 2 (a sanitizer build's
# -fsanitize=..., as its libraries need).
# TG_HEADERS_PENDING: a regular expression of headers to leave out, with a notice (headers
# whose owners have not converted them yet; set it empty to check every header).
set -euo pipefail
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg-headers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ "${1:-}" = "--install" ]; then
    build=$2
    shift 2
    prefix=$tmp/prefix
    cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
else
    prefix=$1
    shift
fi
cc=${1:-cc}
cxx=${2:-c++}
pending=${TG_HEADERS_PENDING-}
inc=$prefix/include
[ -d "$inc/tapegrad" ] || { echo "check_install: no $inc/tapegrad" >&2; exit 1; }

n=0; bad=0; skipped=0
while IFS= read -r h; do
    if [ -n "$pending" ] && [[ "$h" =~ $pending ]]; then
        skipped=$((skipped + 1))
        continue
    fi
    n=$((n + 1))
    printf '#include <tapegrad/%s>\nint main(void) { return 0; }\n' "$h" > "$tmp/t.c"
    cp "$tmp/t.c" "$tmp/t.cpp"
    if ! "$cc" -std=c11 -Wall -Wextra -pedantic-errors -Werror -I"$inc" -fsyntax-only "$tmp/t.c" 2> "$tmp/err"; then
        echo "check_install: $h does not compile as C11 from $inc:"; cat "$tmp/err"; bad=1
    fi
    if ! "$cxx" -std=c++11 -Wall -Wextra -pedantic-errors -Werror -I"$inc" -fsyntax-only "$tmp/t.cpp" 2> "$tmp/err"; then
        echo "check_install: $h does not compile as C++11 from $inc:"; cat "$tmp/err"; bad=1
    fi
done < <(cd "$inc/tapegrad" && find . -name '*.h' | sed 's|^\./||' | sort)

echo "check_install: $n installed headers compile alone as C11 and C++11 with -I$inc only"

# 2. One C++ program over every (checked) installed header, through pkg-config.
pcdir=$(dirname "$(find "$prefix" -name tapegrad.pc -path '*/pkgconfig/*' | head -1)")
if ! command -v pkg-config > /dev/null; then
    echo "check_install: NOTE: no pkg-config: the C++ program was not built (apt-get install pkg-config)"
elif [ ! -f "$pcdir/tapegrad.pc" ]; then
    echo "check_install: no tapegrad.pc under $prefix"; bad=1
else
    (cd "$inc/tapegrad" && find . -name '*.h' | sed 's|^\./||' | sort) | while IFS= read -r h; do
        if [ -z "$pending" ] || ! [[ "$h" =~ $pending ]]; then echo "#include <tapegrad/$h>"; fi
    done > "$tmp/all_public_headers.h"
    here=$(cd "$(dirname "$0")/.." && pwd)
    flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs tapegrad)
    # shellcheck disable=SC2086
    if "$cxx" -std=c++11 -Wall -Wextra ${TG_CHECK_FLAGS:-} -I"$tmp" "$here/cxx/test_headers.cpp" $flags -o "$tmp/cxx_test" 2> "$tmp/err" &&
       LD_LIBRARY_PATH="$(dirname "$pcdir")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/cxx_test"; then
        echo "check_install: tests/cxx/test_headers.cpp built with pkg-config tapegrad and ran"
    else
        echo "check_install: tests/cxx/test_headers.cpp against $prefix failed:"; cat "$tmp/err"; bad=1
    fi
fi
# 3. Libs.private against the BLIS flavour (any flavour: serial, pthreads, OpenMP).
if command -v pkg-config > /dev/null && command -v nm > /dev/null && [ -f "$pcdir/tapegrad-ag.pc" ]; then
    blis=$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=blis_library tapegrad-ag)
    static=" $(PKG_CONFIG_PATH="$pcdir" pkg-config --static --libs tapegrad-ag) "
    case "$blis" in *.a) nmflags=() ;; *) nmflags=(-D) ;; esac
    if [ -z "$blis" ] || [ ! -f "$blis" ]; then
        echo "check_install: tapegrad-ag.pc names no BLIS library that exists (blis_library='$blis')"; bad=1
    else
        undef=$(nm "${nmflags[@]}" --undefined-only "$blis" 2> /dev/null || true)
        need=""
        if grep -qE 'GOMP_|omp_get_' <<< "$undef"; then need=openmp
        elif grep -q 'pthread_' <<< "$undef"; then need=pthread; fi
        if [ "$need" = openmp ] && ! [[ "$static" =~ \ -fopenmp\ |\ -lgomp\  ]]; then
            echo "check_install: $blis is an OpenMP BLIS but pkg-config --static --libs tapegrad-ag lacks -fopenmp / -lgomp:$static"; bad=1
        elif [ -n "$need" ] && ! [[ "$static" =~ \ -pthread\  ]]; then
            echo "check_install: $blis calls pthread_* but pkg-config --static --libs tapegrad-ag lacks -pthread:$static"; bad=1
        else
            echo "check_install: static link flags of tapegrad-ag fit its BLIS ($blis needs: ${need:-nothing more})"
        fi
    fi
fi
if [ "$skipped" -gt 0 ]; then
    echo "check_install: NOTE: $skipped headers matching '$pending' left out (TG_HEADERS_PENDING)"
fi
exit "$bad"
