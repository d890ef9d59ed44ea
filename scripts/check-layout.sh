#!/bin/bash
# Layout rules as a test: no include cycle between subsystem folders (each folder a node,
# an #include "x/y.h" an edge), and every source file opens with a comment saying what it owns.
cd "$(dirname "$0")/.." || exit 1
edges=$(for f in $(git ls-files '*.c' '*.h' | grep -v '^tests/\|^bench/'); do
  d=$(dirname "$f")
  sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | while read -r inc; do
    id=$(dirname "$inc"); [ "$id" != "$d" ] && [ "$id" != . ] && echo "$d $id"
  done
done | sort -u)
# tsort reports a cycle on stderr ("input contains a loop")
loops=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null)
bad=0
if [ -n "$loops" ]; then
  echo "layout: include cycle between folders:"; printf '%s\n' "$loops"
  echo "edges:"; printf '  %s\n' "$edges"; bad=1
fi
for f in $(git ls-files '*.c' '*.h' '*.sh' '*.mjs' 'web/*.js'); do
  # first non-blank line that is not a #! / #pragma once must be a comment
  l=$(grep -v -m1 -E '^\s*$|^#!|^#pragma once' "$f")
  case $l in '/*'*|'//'*|'# '*|'#'|' *'*) ;; *) echo "layout: $f: no header comment"; bad=1;; esac
done
[ $bad = 0 ] && echo "layout: ok ($(printf '%s\n' "$edges" | wc -l) folder dependencies, no cycle)"
exit $bad
