#!/usr/bin/env bash
# The house's size limits, checked from the sources (ctest: size_limits): no file of a library or
# program (autograd, nn, optim, datasets, zoo; examples aside) over 600
# lines, no function over 80 (from the line that opens its body to the line that closes it, a
# function being a definition whose body opens at the end of a line and closes with "}" in
# column 0, as clang-format writes them; the signature may span several lines).
#
# usage: tests/size_limits.sh [SOURCE_DIR]    exit 1 naming every file and function over
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
files=$(find autograd nn optim datasets zoo -name '*.[ch]' -not -path '*/examples/*' \
| sort)
bad=0
for f in $files; do
    n=$(wc -l <"$f")
    if [ "$n" -gt 600 ]; then echo "$f: $n lines (at most 600)"; bad=1; fi
done
# shellcheck disable=SC2086
long=$(awk '
    FNR == 1 { open = 0; head = "" }
    open && /^\}/ { if (FNR - open + 1 > 80) printf "%s:%d: %s ... %d lines (at most 80)\n", FILENAME, open, name, FNR - open + 1; open = 0; next }
    open { next }
    /^[A-Za-z_]/ && !/^(typedef|struct|enum|union|static const|const|extern)/ && !/;[ \t]*$/ { head = $0; start = FNR }
    /^[ \t\/#]|^$|;[ \t]*$/ && !/\{$/ { if (!/^[ \t]/) head = "" }
    head != "" && /\)[^;]*\{$/ { open = start; name = head; head = "" }
' $files)
if [ -n "$long" ]; then echo "$long"; bad=1; fi
if [ "$bad" = 0 ]; then echo "size limits: $(echo "$files" | wc -l) files, none over 600 lines, no function over 80"; fi
exit "$bad"
