#!/usr/bin/env python3
"""The layering check the build runs (cmake/KilnConcern.cmake, docs/architecture.md).

Reads what CMake declared (layering.json: each concern's folder, the concerns it may use and its
private headers; each consumer folder and what it may use) and fails when the code says
otherwise: an #include "<concern>/..." that USES does not declare, another concern's private
header, an include climbing out with "..", a declared use nothing includes, or a cycle. It also
holds docs/architecture.md's map (between the layering markers) and each concern's README.md
("May use: ...") to the declaration. A concern's code lives in the namespace of its name
(kiln::<concern>, the public API kiln itself): opening another is refused, except a block that
only forward-declares, and a `namespace kiln` block that defines what include/kiln/ declares.

  check_layering.py LAYERING_JSON ARCHITECTURE_MD STAMP [CONSUMER=DIR...]
                                        check (DIRs: generated sources of that consumer);
                                        touch STAMP when all holds
  check_layering.py LAYERING_JSON ARCHITECTURE_MD --print  print the map the doc must hold
"""
import json
import os
import re
import sys

SOURCE_EXTENSIONS = (".cpp", ".hpp", ".h", ".c", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
BEGIN, END = "<!-- layering:begin -->", "<!-- layering:end -->"
# The public headers of include/kiln/ that declare the facade (the Loader class, the typed ops and
# the C ABI over them). The core stands below the facade: it uses the vocabulary headers
# (config.hpp, resolution.hpp, package.h, kernels.h, error.hpp, version.hpp), never these.
FACADE_HEADERS = {"kiln/loader.hpp", "kiln/ops.hpp", "kiln/kiln.h", "kiln/kiln_ops.h"}


def floors(concerns):
    """concern -> floor (1 = uses nothing but the public API); raises on a cycle."""
    floor, visiting = {}, []

    def visit(name):
        if name in floor:
            return floor[name]
        if name in visiting:
            cycle = visiting[visiting.index(name):] + [name]
            raise ValueError("the declared uses run in a circle: " + " -> ".join(cycle))
        visiting.append(name)
        # The public API (api) is under every other concern, declared or not.
        uses = concerns[name]["uses"] + (["api"] if name != "api" and "api" in concerns else [])
        for u in uses:
            if u not in concerns:
                raise ValueError(f"{name} declares USES {u}, which is no concern")
        floor[name] = 1 + max((visit(u) for u in uses), default=0)
        visiting.pop()
        return floor[name]

    for name in concerns:
        visit(name)
    return floor


def source_files(directory, recursive):
    if not recursive:
        return sorted(os.path.join(directory, f) for f in os.listdir(directory)
                      if f.endswith(SOURCE_EXTENSIONS))
    out = []
    for root, _, files in os.walk(directory):
        out += [os.path.join(root, f) for f in files if f.endswith(SOURCE_EXTENSIONS)]
    return sorted(out)


def check_file(path, me, allowed, concerns, problems, used):
    text = open(path, encoding="utf-8", errors="replace").read()
    for include in INCLUDE.findall(text):
        if ".." in include.split("/"):
            problems.append(f'{path}: #include "{include}" climbs out of its folder; '
                            "include a concern's header as \"<concern>/<file>\"")
            continue
        if include in FACADE_HEADERS and os.path.relpath(path, ROOT).startswith("core" + os.sep):
            problems.append(f'{path}: #include "{include}" is the facade\'s; the core uses the '
                            "vocabulary of include/kiln/ (config.hpp, resolution.hpp, package.h, "
                            "error.hpp)")
            continue
        head, _, rest = include.partition("/")
        if not rest or head not in concerns or head == me:
            continue
        if head not in allowed:
            problems.append(f'{path}: #include "{include}": {me} may use '
                            f'{", ".join(sorted(allowed)) or "the public API only"}, not {head}')
            continue
        used.add(head)
        if rest in concerns[head]["private"]:
            problems.append(f'{path}: #include "{include}" is private to {head}')


NAMESPACE = re.compile(r"^namespace\s+(kiln(?:::\w+)*)\s*\{", re.M)
FORWARD = re.compile(r"^\s*(?:class|struct)\s+\w+\s*;\s*$")
DEFINED = re.compile(r"^(?!\s)(?!namespace|using|template|//|#|\})[^(;=]*?\b(\w+(?:::~?\w+)*)\s*\(")


def block_body(text, start):
    """The text between the brace that opens at `start` and the one that closes it."""
    depth, i = 0, start
    while i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
        i += 1
    return text[start + 1:]


def public_names():
    """The names include/kiln/ declares (a concern may define them in a `namespace kiln` block)."""
    names = set()
    folder = os.path.join(ROOT, "include", "kiln")
    for f in (os.listdir(folder) if os.path.isdir(folder) else []):
        names |= set(re.findall(r"\b(\w+)\s*\(", open(os.path.join(folder, f)).read()))
    return names


def check_namespaces(path, me, problems, public):
    """A concern's code lives in kiln::<concern> (the public API: kiln)."""
    own = "kiln" if me == "api" else "kiln::" + me
    text = open(path, encoding="utf-8", errors="replace").read()
    for m in NAMESPACE.finditer(text):
        ns = m.group(1)
        if ns == own or ns.startswith(own + "::"):
            continue
        body = block_body(text, m.end() - 1)
        lines = [l for l in body.splitlines() if l.strip() and not l.strip().startswith("//")]
        if all(FORWARD.match(l) for l in lines):
            continue  # forward declarations of another concern's types
        if ns == "kiln":
            defined = [d.group(1) for l in lines if (d := DEFINED.match(l))]
            foreign = [d for d in defined if "::" not in d and d not in public]
            if not foreign:
                continue  # defines the public vocabulary's members and functions
        problems.append(f"{path}: namespace {ns}: the code of {me} lives in namespace {own} "
                        "(another concern's namespace may only be opened to forward-declare)")


def may_use(name, concern):
    """The "May use:" sentence of a concern's README.md, from its declaration."""
    if name == "api":
        return "nothing of kiln"
    return ", ".join(concern["uses"] + ["api"])


def layering_map(concerns, consumers, floor):
    lines = ["floor  concern     folder               may use (besides the public API, kiln/)"]
    for name in sorted(concerns, key=lambda n: (-floor[n], n)):
        folder = os.path.relpath(concerns[name]["dirs"][0], ROOT)
        uses = " ".join(sorted(concerns[name]["uses"], key=lambda u: (-floor[u], u))) or "-"
        lines.append(f"{floor[name]:>5}  {name:<11} {folder + '/':<20} {uses}")
    lines.append("")
    lines.append("consumer   folders                        may use")
    for name in sorted(consumers):
        folders = " ".join(os.path.relpath(d, ROOT) + "/" for d in consumers[name]["dirs"])
        uses = " ".join(sorted(consumers[name]["uses"], key=lambda u: (-floor[u], u)))
        lines.append(f"{name:<10} {folders:<30} {uses}")
    return "\n".join(lines)


def main(argv):
    global ROOT
    decl = json.load(open(argv[1]))
    doc = argv[2]
    ROOT = os.path.dirname(os.path.dirname(os.path.abspath(doc)))
    concerns, consumers = decl["concerns"], decl["consumers"]
    try:
        floor = floors(concerns)
    except ValueError as e:
        print(f"layering: {e}", file=sys.stderr)
        return 1
    expected = layering_map(concerns, consumers, floor)
    if argv[3] == "--print":
        print(expected)
        return 0

    problems = []
    public = public_names()
    for name, c in concerns.items():
        used = set()
        for d in c["dirs"]:
            for f in source_files(d, recursive=False):
                check_file(f, name, set(c["uses"]), concerns, problems, used)
                check_namespaces(f, name, problems, public)
        for u in sorted(set(c["uses"]) - used):
            problems.append(f"{name} declares USES {u}, but no file of {name} includes a header "
                            f"of {u}: drop it from USES")
        readme = os.path.join(c["dirs"][0], "README.md")
        says = f"May use: {may_use(name, c)}."
        if not os.path.exists(readme):
            problems.append(f"{readme}: missing; each concern's folder says what it is")
        elif says not in " ".join(open(readme, encoding="utf-8").read().split()):
            problems.append(f"{readme}: should say \"{says}\" (as declared in CMake)")
    for name, c in consumers.items():
        for d in c["dirs"]:
            for f in source_files(d, recursive=True):
                check_file(f, name, set(c["uses"]), concerns, problems, set())
    # CONSUMER=DIR after the stamp: generated sources (cmake/gen_ops.py) checked as that
    # consumer's files, without appearing in the map (their folder is in the build tree).
    for extra in argv[4:]:
        name, _, d = extra.partition("=")
        if os.path.isdir(d):
            for f in source_files(d, recursive=True):
                check_file(f, name, set(consumers[name]["uses"]), concerns, problems, set())

    text = open(doc, encoding="utf-8").read()
    block = re.search(re.escape(BEGIN) + r"\n```text\n(.*?)\n```\n" + re.escape(END), text, re.S)
    if not block:
        problems.append(f"{doc}: no map between {BEGIN} and {END}")
    elif block.group(1) != expected:
        problems.append(f"{doc}: the map differs from what the CMakeLists declare; it should read:"
                        f"\n```text\n{expected}\n```")

    if problems:
        print("layering: the code does not keep the declared layering (docs/architecture.md):",
              file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    with open(argv[3], "w") as stamp:
        stamp.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
