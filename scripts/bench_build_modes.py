#!/usr/bin/env python3
"""Summarise first gets by build mode (scripts/gpu_run.sh run writes the inputs).

Usage: bench_build_modes.py DIR
  DIR holds <round>-<mode>.json files written by `kiln_load_bench --cold-only --json`, one per
  round, the rounds in a random order. For each mode and artifact it prints the median over the
  rounds of the round's cold-get median, floor median and cold/floor, with their spread
  (min-max over rounds), then each artifact's grouped cold/floor against the per-specialisation
  one. Exit status 0 when every file parsed, 1 otherwise.
"""
import json
import pathlib
import statistics
import sys


def artifact_of(name: str) -> str:
    # "cold get (store: ...), <uri>" and "floor: ..., <uri>": the URI is after the last ", "
    return name.rsplit(", ", 1)[-1]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rounds: dict = {}  # (mode, uri) -> list of (cold, floor)
    bad = 0
    files = sorted(pathlib.Path(sys.argv[1]).glob("*.json"), key=lambda p: int(p.name.split("-", 1)[0]))
    order = []
    for f in files:
        mode = f.stem.split("-", 1)[1]
        order.append(mode)
        try:
            rows = json.loads(f.read_text())["rows"]
        except (OSError, ValueError, KeyError) as e:
            print(f"{f}: {e}", file=sys.stderr)
            bad += 1
            continue
        cold = {artifact_of(r["name"]): r["median"] for r in rows if r["name"].startswith("cold get")}
        floor = {artifact_of(r["name"]): r["median"] for r in rows if r["name"].startswith("floor")}
        for uri, c in cold.items():
            if uri in floor:
                rounds.setdefault((mode, uri), []).append((c, floor[uri]))
    print(f"rounds in the order run: {' '.join(order)}")
    print("| mode | artifact | rounds | cold get us | floor us | cold/floor median [min-max] |")
    print("|---|---|---|---|---|---|")
    ratio = {}
    for (mode, uri), xs in sorted(rounds.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        r = [c / f for c, f in xs]
        ratio[(mode, uri)] = statistics.median(r)
        print(f"| {mode} | {uri} | {len(xs)} | {statistics.median(c for c, _ in xs):.1f} | "
              f"{statistics.median(f for _, f in xs):.1f} | {statistics.median(r):.3f} "
              f"[{min(r):.3f}-{max(r):.3f}] |")
    for uri in sorted({u for _, u in ratio}):
        g, p = ratio.get(("grouped", uri)), ratio.get(("per-spec", uri))
        if g is not None and p is not None:
            print(f"{uri}: cold/floor grouped {g:.3f}, per-specialisation {p:.3f} "
                  f"(grouped/per-spec {g / p:.3f})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
