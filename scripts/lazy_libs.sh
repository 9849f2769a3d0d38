# Sourced by the GPU scripts (gpu_run.sh, gpu_release_check.sh) that carry libraries to a bare
# machine. libkiln dlopens libcurl and libarchive on first use (docs/loader.md), so ldd does not
# name them: lazy_libs KILN prints their paths, from the SONAMEs `KILN doctor --json` reports.
lazy_libs() {
  { "$1" doctor --json 2>/dev/null || true; } | python3 -c 'import json, sys
for l in json.load(sys.stdin)["libraries"]: print(l["soname"])' |
    while read -r so; do
      # awk reads to the end (no `exit`): ldconfig killed by SIGPIPE would fail the pipeline
      # under pipefail, and a caller with `set -e` with it (seen as exit 141, now and then).
      "$(command -v ldconfig || echo /sbin/ldconfig)" -p |
        awk -v so="$so" '$1 == so && /x86-64/ && !found {print $NF; found = 1}'
    done
}
