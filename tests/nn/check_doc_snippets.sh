#!/usr/bin/env bash
# Checks that every ```c block of one section of a Markdown file appears, line for line, in a
# source file that compiles and runs it (leading and trailing spaces and blank lines aside), so
# the documentation's code cannot drift from the tested code.
#
# usage: tests/nn/check_doc_snippets.sh DOC.md "SECTION TITLE" SNIPPETS_FILE
# The section runs from the "## " heading that contains SECTION TITLE to the next "## " heading.
# Exit 0 when every block is found and there is at least one; else 1, printing the missing block.
set -euo pipefail
doc=$1 title=$2 src=$3
norm() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' | grep -v '^$' || true; }
haystack=$(norm < "$src")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk -v title="$title" -v dir="$tmp" '
    /^## / { insec = index($0, title) > 0; next }
    insec && /^```c[[:space:]]*$/ { n++; inblk = 1; next }
    inblk && /^```/ { inblk = 0; next }
    inblk { print > (dir "/block" n) }
' "$doc"
n=0 bad=0
for b in "$tmp"/block*; do
    [ -e "$b" ] || continue
    n=$((n + 1))
    block=$(norm < "$b")
    if [[ "$haystack" != *"$block"* ]]; then
        echo "$doc, section '$title': this block is not in $src:" >&2
        cat "$b" >&2
        bad=1
    fi
done
if [ "$n" -eq 0 ]; then
    echo "$doc: no \`\`\`c block in a section '$title'" >&2
    exit 1
fi
echo "$n blocks of '$title' found in $src"
exit $bad
