#!/usr/bin/env python3
"""What a reader of the house trips on, counted (docs/architecture.md, docs/testing.md).

  scripts/house_report.py BUILD_DIR [LIZARD]
  scripts/house_report.py --check BUILD_DIR   exit 1 when a goal below is missed (ctest runs it)

BUILD_DIR is a configured build (its layering.json says which folder is which concern). Prints:
  - arrows that run back up: includes, by the files of a concern, of a concern on its own floor
    or above it, or of a facade header from core/ (the layering check refuses both; goal 0);
  - circles: concerns whose files include each other round (goal 0), and import circles among
    the Python modules of python/kiln and the generated ones of BUILD_DIR (goal 0; an import
    under `if TYPE_CHECKING:` runs never and is not counted);
  - for each op of the ops table (loader/ops_table.py), the tracked files of the API, its
    bindings, the kernels and the registry (include/, loader/, python/, kernels/, registry/,
    cmake/) that spell its name (goal: at most 3: its kernel, its registry entry, the table;
    what cmake/gen_ops.py writes from the table into the build tree is not counted);
  - with LIZARD (a lizard executable; scripts/house_report.sh installs a pinned one), the
    longest function of each folder.
"""
import ast
import csv
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "cmake"))
import check_layering  # noqa: E402  (floors, FACADE_HEADERS, source_files, INCLUDE)

check_layering.ROOT = ROOT


def concern_graph(concerns):
    """concern -> set of concerns its files include (actual, not declared)."""
    graph, facade_from_core = {}, []
    for name, c in concerns.items():
        graph[name] = set()
        for d in c["dirs"]:
            for f in check_layering.source_files(d, recursive=False):
                for inc in check_layering.INCLUDE.findall(open(f, errors="replace").read()):
                    if inc in check_layering.FACADE_HEADERS and d.startswith(os.path.join(ROOT, "core")):
                        facade_from_core.append(f"{os.path.relpath(f, ROOT)} -> {inc}")
                    head = inc.partition("/")[0]
                    if head in concerns and head != name:
                        graph[name].add(head)
    return graph, facade_from_core


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def run_time_nodes(tree):
    """ast.walk without the bodies of `if TYPE_CHECKING:`: what only a type checker reads is
    never imported, so it makes no import circle."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        test = getattr(node, "test", None)
        name = (test.id if isinstance(test, ast.Name) else
                test.attr if isinstance(test, ast.Attribute) else None)  # typing.TYPE_CHECKING
        if isinstance(node, ast.If) and name == "TYPE_CHECKING":
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))


def python_imports(*pkg_dirs):
    """Module -> the modules of the package it imports, over the package's folders (python/kiln
    and the generated modules in the build tree)."""
    graph, paths = {}, {}
    for pkg_dir in pkg_dirs:
        if os.path.isdir(pkg_dir):
            paths.update({f[:-3]: os.path.join(pkg_dir, f) for f in os.listdir(pkg_dir)
                          if f.endswith(".py")})
    for mod, path in sorted(paths.items()):
        graph[mod] = set()
        for node in run_time_nodes(ast.parse(open(path).read())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    graph[mod].add(node.module.split(".")[0])
                else:
                    graph[mod].update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module == "kiln":
                graph[mod].update(a.name for a in node.names)  # from kiln import ops
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kiln."):
                graph[mod].add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "kiln":
                        graph[mod].add("__init__")
                    elif a.name.startswith("kiln."):
                        graph[mod].add(a.name.split(".")[1])
    return {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}


def op_names():
    """The ops of the table (loader/ops_table.py, pure data; cmake/gen_ops.py reads it too)."""
    path, names = os.path.join(ROOT, "loader", "ops_table.py"), {}
    exec(compile(open(path).read(), path, "exec"), names)
    return [op["name"] for op in names["OPS"]]


def files_spelling(name):
    tracked = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True).stdout.split()
    where = ("include/", "loader/", "python/", "kernels/", "registry/", "cmake/")
    found = []
    for f in tracked:
        if not f.startswith(where) or f.endswith(".md") or not os.path.isfile(os.path.join(ROOT, f)):
            continue
        if re.search(r"\b" + re.escape(name) + r"\b", open(os.path.join(ROOT, f), errors="replace").read()):
            found.append(f)
    return found


def longest_functions(lizard):
    folders = [os.path.join(ROOT, d) for d in ("include", "core", "loader", "packager", "python")]
    out = subprocess.run([lizard, "--csv", "-l", "cpp", "-l", "python"] + folders,
                         capture_output=True, text=True).stdout
    best = {}
    for row in csv.reader(out.splitlines()):
        if len(row) < 8 or not row[4].isdigit():
            continue
        folder = os.path.dirname(os.path.relpath(row[6], ROOT))
        if folder not in best or int(row[4]) > best[folder][0]:
            best[folder] = (int(row[4]), row[7])
    return best


def main(argv):
    check = len(argv) > 1 and argv[1] == "--check"
    if check:
        argv = argv[:1] + argv[2:]
    decl = json.load(open(os.path.join(argv[1], "layering.json")))
    concerns = decl["concerns"]
    floor = check_layering.floors(concerns)
    graph, facade_from_core = concern_graph(concerns)
    up = [f"{a} -> {b}" for a in sorted(graph) for b in sorted(graph[a]) if floor[b] >= floor[a]]
    print(f"arrows back up: {len(up) + len(facade_from_core)}")
    for line in up + facade_from_core:
        print(f"  {line}")
    circles = cycles(graph)
    py_circles = cycles(python_imports(os.path.join(ROOT, "python", "kiln"),
                                       os.path.join(argv[1], "generated", "python", "kiln")))
    print(f"circles: {len(circles)} among concerns, {len(py_circles)} among python/kiln modules")
    for c in circles + py_circles:
        print("  " + " <-> ".join(c))
    print("files spelling each op (goal <= 3):")
    spread = []
    for op in op_names():
        files = files_spelling(op)
        print(f"  {op:<14} {len(files)}  {' '.join(files)}")
        if len(files) > 3:
            spread.append(op)
    if len(argv) > 2:
        print("longest function per folder (lines):")
        for folder, (length, name) in sorted(longest_functions(argv[2]).items()):
            print(f"  {folder:<26} {length:>4}  {name}")
    if check and (up or facade_from_core or circles or py_circles or spread):
        print("house_report: a goal is missed (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
