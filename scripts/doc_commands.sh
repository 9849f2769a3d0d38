#!/usr/bin/env bash
# Runs every ```sh block of a Markdown file, in order, in one bash with -euo pipefail, echoing
# each block first: a page whose commands are executed cannot drift from the code.
#   scripts/doc_commands.sh FILE        (the blocks read whatever variables the page says)
# A block a test cannot run as written (it needs a GPU, a real remote host, root, or kiln's source
# tree) is fenced ```sh-untested and its first line says why: `# untested: REASON` (or the
# line just above the fence does, as `<!-- untested: REASON -->`, where the block must show
# only its commands, as the README's first lines do). It is skipped, and named on stderr with its reason; one without a reason fails the page, and so does
# a block fenced bash, shell or console (each shell block is either run or says why not).
# Exit: that of the first failing command (its block is named on stderr), 2 for a page whose
# blocks break these rules, 0 when all pass (or it has nothing to run).
set -euo pipefail
file=${1:?usage: doc_commands.sh FILE.md}
script=$(mktemp)
trap 'rm -f "$script"' EXIT
awk -v file="$file" '
  function q(s) { gsub(/\047/, "\047\\\047\047", s); return "\047" s "\047" }
  /^```sh[[:space:]]*$/ && !inblock {
    inblock = "run"; n++
    printf "echo \"--- %s, block %d (line %d)\" >&2\n", file, n, NR; next
  }
  /^```sh-untested[[:space:]]*$/ && !inblock {
    inblock = "skip"; n++; start = NR; first = 1
    if (prev ~ /^<!-- untested: [^[:space:]].* -->$/) {
      first = 0; why = prev; sub(/^<!-- untested: /, "", why); sub(/ -->$/, "", why)
      printf "echo %s >&2\n", q("--- " file ", block " n " (line " start ") skipped: " why)
    }
    next
  }
  /^```(bash|shell|console|zsh)[[:space:]]*$/ && !inblock {
    printf "%s:%d: a ```%s block: fence it sh (run by the docs test) or sh-untested (with a reason)\n",
      file, NR, substr($0, 4) > "/dev/stderr"; bad = 1; next
  }
  /^```/ && !inblock { inblock = "other"; next }
  /^```/ && inblock { inblock = ""; next }
  inblock == "skip" && first {
    first = 0
    if ($0 !~ /^# untested: [^[:space:]]/) {
      printf "%s:%d: a sh-untested block must start with \"# untested: REASON\"\n", file, start > "/dev/stderr"
      bad = 1
    } else {
      printf "echo %s >&2\n", q("--- " file ", block " n " (line " start ") skipped: " substr($0, 13))
    }
    next
  }
  inblock == "run" { print }
  { prev = $0 }
  END { if (bad) exit 2 }
' "$file" >"$script" || exit 2
[ -s "$script" ] || { echo "doc_commands.sh: no sh block to run in $file" >&2; exit 0; }
bash -euo pipefail -x "$script"
