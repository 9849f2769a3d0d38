#!/usr/bin/env python3
"""Runs docs/python.md as written: every ```python block, in order, in one namespace (blocks
fenced as ```py are fragments and are skipped). Run it with the interpreter of a venv where the
release's wheels are installed (the venv tests/gpu/python_ops_check.py --keep leaves), on a GPU
machine, from a directory outside the source tree:

    VENV/bin/python tests/gpu/python_doc_check.py docs/python.md

Prints one line per block; exit 0 when every block ran, 1 otherwise, 77 when there is no GPU."""

from __future__ import annotations

import sys
import traceback


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each block fenced exactly as ```python."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start, body = i + 1, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            blocks.append((start + 1, "\n".join(body) + "\n"))
        i += 1
    return blocks


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python_doc_check.py DOC.md", file=sys.stderr)
        return 2
    path = sys.argv[1]
    with open(path, encoding="utf-8") as f:
        blocks = python_blocks(f.read())
    if not blocks:
        print(f"python_doc_check: no ```python block in {path}")
        return 1
    import kiln

    try:
        if not kiln.devices():
            print("python_doc_check: no GPU: the driver reports no device")
            return 77
    except kiln.Error as e:
        print(f"python_doc_check: no GPU: {e}")
        return 77
    namespace: dict = {"__name__": "__doc__"}
    failed = 0
    for line, code in blocks:
        try:
            exec(compile(code, f"{path}:{line}", "exec"), namespace)
            print(f"ok   {path}:{line}", flush=True)
        except Exception:  # noqa: BLE001 - each block reports its own failure
            failed += 1
            print(f"FAIL {path}:{line}\n{traceback.format_exc()}", flush=True)
    print(f"{len(blocks) - failed} of {len(blocks)} blocks ran")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
