#!/usr/bin/env python3
"""Prints what a directory holds, one sorted line per entry: 'path/' for a directory,
'path SIZE SHA256' for a file, 'path -> TARGET' for a link. Paths given after the directory
(relative to it) are left out with everything under them. Used by crash_points.sh to tell
whether anything changed."""
import hashlib
import os
import sys


def main():
    root, excluded = sys.argv[1], set(sys.argv[2:])
    lines = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for name in list(dirnames):
            rel = os.path.normpath(os.path.join(rel_dir, name))
            full = os.path.join(dirpath, name)
            if rel in excluded:
                dirnames.remove(name)
            elif os.path.islink(full):
                lines.append(f"{rel} -> {os.readlink(full)}")
                dirnames.remove(name)
            else:
                lines.append(rel + "/")
        for name in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            full = os.path.join(dirpath, name)
            if rel in excluded:
                continue
            if os.path.islink(full):
                lines.append(f"{rel} -> {os.readlink(full)}")
                continue
            with open(full, "rb") as f:
                data = f.read()
            lines.append(f"{rel} {len(data)} {hashlib.sha256(data).hexdigest()}")
    print("\n".join(sorted(lines)))


if __name__ == "__main__":
    main()
