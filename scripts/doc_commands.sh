#!/usr/bin/env bash
# Runs every ```sh block of a Markdown file, in order, in one bash with -euo pipefail, echoing
# each block first: a page whose commands are executed cannot drift from the code.
#   scripts/doc_commands.sh FILE        (the blocks read whatever variables the page says)
# Exit: that of the first failing command (its block is named on stderr), 0 when all pass.
set -euo pipefail
file=${1:?usage: doc_commands.sh FILE.md}
script=$(mktemp)
trap 'rm -f "$script"' EXIT
awk -v file="$file" '
  /^```sh[[:space:]]*$/ { inblock = 1; n++; printf "echo \"--- %s, block %d (line %d)\" >&2\n", file, n, NR; next }
  /^```/ && inblock { inblock = 0; next }
  inblock { print }
' "$file" >"$script"
[ -s "$script" ] || { echo "doc_commands.sh: no sh block in $file" >&2; exit 2; }
bash -euo pipefail -x "$script"
