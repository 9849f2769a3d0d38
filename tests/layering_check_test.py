#!/usr/bin/env python3
"""cmake/check_layering.py refuses each way code can break the declared layering, naming the
file, the include and the rule, and accepts a tree that keeps it (docs/architecture.md)."""
import json
import os
import subprocess
import sys
import tempfile

CHECK = sys.argv[1]


def tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def run(files, concerns, consumers=None, doc=None, generated=None):
    """Lays out a tree, declares it, and runs the check; returns (rc, stderr, printed map).
    generated: {consumer: folder of the tree} passed as CONSUMER=DIR (generated sources)."""
    with tempfile.TemporaryDirectory() as root:
        tree(root, files)
        decl = {"concerns": {n: {"dirs": [os.path.join(root, "core", n)], "uses": u,
                                 "private": p} for n, (u, p) in concerns.items()},
                "consumers": {n: {"dirs": [os.path.join(root, d)], "uses": u, "private": []}
                              for n, (d, u) in (consumers or {}).items()}}
        with open(os.path.join(root, "layering.json"), "w") as f:
            json.dump(decl, f)
        docs = os.path.join(root, "docs", "architecture.md")
        os.makedirs(os.path.dirname(docs))
        printed = subprocess.run([sys.executable, CHECK, os.path.join(root, "layering.json"), docs,
                                  "--print"], capture_output=True, text=True)
        with open(docs, "w") as f:
            f.write(doc if doc is not None else
                    "<!-- layering:begin -->\n```text\n" + printed.stdout.rstrip("\n") +
                    "\n```\n<!-- layering:end -->\n")
        extra = [f"{n}={os.path.join(root, d)}" for n, d in (generated or {}).items()]
        r = subprocess.run([sys.executable, CHECK, os.path.join(root, "layering.json"), docs,
                            os.path.join(root, "stamp"), *extra], capture_output=True, text=True)
        stamped = os.path.exists(os.path.join(root, "stamp"))
        assert stamped == (r.returncode == 0), "the stamp is written exactly when the check passes"
        return r.returncode, r.stderr, printed


def readme(uses):
    return {"README.md": "# x\n\nMay use: " + ", ".join(uses + ["api"]) + ".\n"}


def concern(name, files, uses):
    out = {f"core/{name}/{k}": v for k, v in files.items()}
    out.update({f"core/{name}/{k}": v for k, v in readme(uses).items()})
    return out


LOW = concern("low", {"low.hpp": "#pragma once\n", "low_rules.hpp": "#pragma once\n",
                      "low.cpp": '#include "low/low.hpp"\n#include "low/low_rules.hpp"\n'}, [])
HIGH = concern("high", {"high.hpp": '#pragma once\n#include "low/low.hpp"\n',
                        "high.cpp": '#include "high/high.hpp"\n#include "kiln/error.hpp"\n'},
               ["low"])
OK = {"low": ([], ["low_rules.hpp"]), "high": (["low"], [])}
failures = 0
passed = 0


def expect(name, rc, err, wanted):
    global failures, passed
    good = (rc == 0) if wanted is None else (rc == 1 and all(w in err for w in wanted))
    print(("ok   " if good else "FAIL ") + name + ("" if good else f": rc={rc} stderr={err!r}"))
    failures += not good
    passed += good


rc, err, _ = run({**LOW, **HIGH}, OK)
expect("a tree that keeps its declared layering passes", rc, err, None)

up = dict(LOW, **HIGH)
up["core/low/low.cpp"] += '#include "high/high.hpp"\n'
rc, err, _ = run(up, OK)
expect("an include up an undeclared arrow fails naming file, include and rule", rc, err,
       ["core/low/low.cpp", '#include "high/high.hpp"', "low may use the public API only, not high"])

private = dict(LOW, **HIGH)
private["core/high/high.cpp"] += '#include "low/low_rules.hpp"\n'
rc, err, _ = run(private, OK)
expect("another concern's private header fails", rc, err,
       ['core/high/high.cpp: #include "low/low_rules.hpp" is private to low'])

climb = dict(LOW, **HIGH)
climb["core/low/low.cpp"] += '#include "../high/high.hpp"\n'
rc, err, _ = run(climb, OK)
expect("an include climbing out with .. fails", rc, err, ["climbs out of its folder"])

unused = dict(LOW, **concern("high", {"high.cpp": "int x;\n"}, ["low"]))
rc, err, _ = run(unused, OK)
expect("a declared use nothing includes fails", rc, err,
       ["high declares USES low, but no file of high includes a header of low"])

rc, err, _ = run({**LOW, **HIGH}, {"low": (["high"], []), "high": (["low"], [])})
expect("a cycle of declared uses fails", rc, err, ["run in a circle"])

rc, err, _ = run({**LOW, **HIGH}, OK, doc="<!-- layering:begin -->\n```text\nstale\n```\n"
                 "<!-- layering:end -->\n")
expect("a map that differs from the declarations fails, printing the right one", rc, err,
       ["docs/architecture.md: the map differs", "high        core/high/"])

noreadme = {k: v for k, v in {**LOW, **HIGH}.items() if k != "core/high/README.md"}
rc, err, _ = run(noreadme, OK)
expect("a concern folder without README.md fails", rc, err, ["core/high/README.md: missing"])

stale = dict(LOW, **HIGH)
stale["core/high/README.md"] = "# x\n\nMay use: api.\n"
rc, err, _ = run(stale, OK)
expect("a README whose May use differs fails", rc, err, ['should say "May use: low, api."'])

consumer = dict(LOW, **HIGH)
consumer["tests/t.cpp"] = '#include "high/high.hpp"\n#include "low/low_rules.hpp"\n'
rc, err, _ = run(consumer, OK, consumers={"tests": ("tests", ["high", "low"])})
expect("a consumer (tests) including a private header fails", rc, err,
       ['tests/t.cpp: #include "low/low_rules.hpp" is private to low'])

named = dict(LOW, **HIGH)
named["core/low/low.cpp"] += "namespace kiln::low {\nint f() { return 1; }\n}  // namespace kiln::low\n"
named["core/high/high.hpp"] += ("namespace kiln::low {\nstruct Shape;\n}\n"
                                "namespace kiln::high {\nint g(const low::Shape&);\n}\n")
rc, err, _ = run(named, OK)
expect("code in its concern's namespace, forward-declaring another's type, passes", rc, err, None)

foreign = dict(LOW, **HIGH)
foreign["core/high/high.cpp"] += "namespace kiln::low {\nint h() { return 2; }\n}\n"
rc, err, _ = run(foreign, OK)
expect("code defined in another concern's namespace fails", rc, err,
       ["core/high/high.cpp: namespace kiln::low: the code of high lives in namespace kiln::high"])

flat = dict(LOW, **HIGH)
flat["core/low/low.cpp"] += "namespace kiln {\nint helper() { return 3; }\n}\n"
rc, err, _ = run(flat, OK)
expect("code of a concern in the flat kiln namespace fails", rc, err,
       ["core/low/low.cpp: namespace kiln: the code of low lives in namespace kiln::low"])

gen = dict(LOW, **HIGH)
gen["build/generated/facade/ops.cpp"] = '#include "low/low_rules.hpp"\n'
gen["facade/api.cpp"] = '#include "high/high.hpp"\n'
rc, err, printed = run(gen, OK, consumers={"facade": ("facade", ["high"])},
                       generated={"facade": "build/generated/facade"})
expect("a generated source (CONSUMER=DIR) is checked as that consumer's file", rc, err,
       ['build/generated/facade/ops.cpp: #include "low/low_rules.hpp": facade may use high, '
        'not low'])
expect("and its folder stays out of the printed map", 0 if "build/" not in printed.stdout else 1,
       printed.stdout, None)

print(f"{passed} passed, {failures} failed")
sys.exit(1 if failures else 0)
