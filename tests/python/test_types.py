"""Types (docs/python.md "Types"): the wheel ships kiln/py.typed and the stubs of kiln._kiln
(generated at build time by nanobind's stub generator, python/CMakeLists.txt), and mypy, pinned
by scripts/python_build_tools.sh, reads docs/python.md's examples against the installed wheel
(this fresh venv's site-packages) without an error, and refuses wrong calls, so the types it
reads are the wheel's and not Any."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest

from kiln import _kiln

WHEEL = pathlib.Path(os.environ["KILN_TEST_RUNTIME_WHEEL"])
SOURCE = pathlib.Path(os.environ["KILN_TEST_SOURCE_DIR"])
TOOLS = pathlib.Path(os.environ["KILN_TEST_PYBUILD"])


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each block fenced exactly as ```python: the blocks that run as
    written (tests/gpu/python_doc_check.py's rule; ```py blocks are fragments)."""
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


MYPY_CACHE = pathlib.Path(os.environ.get("KILN_TEST_WORK", "/tmp")) / "mypy-cache"


def mypy(cwd: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    """The pinned mypy (tools venv) resolving imports in this venv: the installed kiln wheel,
    and torch and numpy of the tools venv through its .pth file. One cache for the session
    (torch is most of the work)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MYPY", "PYTHONPATH"))}
    return subprocess.run(
        [str(TOOLS / "bin" / "python"), "-m", "mypy", "--python-executable", sys.executable,
         "--cache-dir", str(MYPY_CACHE), "--no-error-summary", "--show-error-codes",
         "--hide-error-context", *args],
        cwd=cwd, env=env, capture_output=True, text=True)


def errors(out: str, name: str) -> list[tuple[int, str, str]]:
    """(line, message, code) of each error mypy reports in the file `name`."""
    return [(int(m[1]), m[2], m[3]) for m in
            re.finditer(rf"^{re.escape(name)}:(\d+): error: (.*)  \[([a-z-]+)\]$", out, re.M)]


# A wrong call per line, each with the error mypy must report on it.
WRONG = {
    'k = kiln.load("acme-kernels").get(7)': "arg-type",
    'kiln.load("acme-kernels").launch(k, grid=1.5, block=256, args=[])': "arg-type",
    'kiln.f32("2.0")': "arg-type",
    'kiln.lod("acme-kernels")': "attr-defined",
    'entries: str = k.entries': "assignment",
    'kiln.Loader(description="x.package.json", config={})': "arg-type",
    'kiln.ops.no_such_op(k)': "attr-defined",
}
WRONG_LINES = ["import kiln", "import kiln.ops", *WRONG]


@pytest.fixture(scope="session")
def strict_run(tmp_path_factory) -> subprocess.CompletedProcess:
    """mypy --strict over docs/python.md's ```python blocks (the blocks that run as written;
    in order, as one module: the GPU check runs them in one namespace) and over WRONG_LINES.
    Calls to unannotated functions are allowed: kiln.ops' functions are not annotated yet (the
    ops table generates them)."""
    work = tmp_path_factory.mktemp("types")
    page = SOURCE / "docs" / "python.md"
    blocks = python_blocks(page.read_text())
    assert blocks, f"no ```python block in {page}"
    (work / "python_md.py").write_text(
        "".join(f"# docs/python.md, line {line}\n{body}" for line, body in blocks))
    (work / "wrong.py").write_text("\n".join(WRONG_LINES) + "\n")
    return mypy(work, "--strict", "--allow-untyped-calls", "python_md.py", "wrong.py")


def test_wheel_holds_py_typed_and_the_stubs_of_every_module_of_the_extension():
    with zipfile.ZipFile(WHEEL) as z:
        names = set(z.namelist())
    assert "kiln/py.typed" in names
    # One file for the module, or a stub package when it has submodules (kiln._kiln._ops):
    # one .pyi cannot type a submodule.
    subs = sorted(n for n, v in vars(_kiln).items()
                  if type(v).__name__ == "module" and v.__name__ == f"kiln._kiln.{n}")
    if subs:
        want = {"kiln/_kiln/__init__.pyi"} | {f"kiln/_kiln/{n}.pyi" for n in subs}
    else:
        want = {"kiln/_kiln.pyi"}
    assert {n for n in names if n.endswith(".pyi")} == want, sorted(names)


def test_stubs_name_what_the_extension_exports():
    site = pathlib.Path(_kiln.__file__).parent
    stub = site / "_kiln.pyi"
    if not stub.exists():
        stub = site / "_kiln" / "__init__.pyi"
    text = stub.read_text()
    public = [n for n in vars(_kiln) if not n.startswith("__")]
    missing = [n for n in public
               if not re.search(rf"^(class|def) {n}\b|\b{n} as {n}$|^{n}:", text, re.M)]
    assert not missing, missing


def test_docs_python_examples_type_check_against_the_installed_wheel(strict_run):
    assert strict_run.returncode in (0, 1), strict_run.stdout + strict_run.stderr
    found = errors(strict_run.stdout, "python_md.py")
    assert not found, f"mypy over docs/python.md's python blocks:\n{strict_run.stdout}"


def test_mypy_refuses_wrong_calls_so_it_reads_the_wheels_types(strict_run):
    assert strict_run.returncode == 1, strict_run.stdout + strict_run.stderr
    found = errors(strict_run.stdout, "wrong.py")
    for number, line in enumerate(WRONG_LINES, 1):
        codes = [code for n, _, code in found if n == number]
        want = WRONG.get(line)
        assert (want in codes) if want else not codes, (line, want, strict_run.stdout)


# The runtime's hand-written modules (kiln.ops and kiln.torch_ops are generated from the ops
# table, unannotated).
RUNTIME_MODULES = ["kiln", "kiln.__main__", "kiln._errors", "kiln._arrays", "kiln._doctor",
                   "kiln._install", "kiln._installed", "kiln._ops_support", "kiln._config",
                   "kiln._device", "kiln._loader"]


def test_the_runtime_modules_type_check_against_the_stubs(tmp_path):
    args = [a for m in RUNTIME_MODULES for a in ("-m", m)]
    r = mypy(tmp_path, "--follow-imports=silent", *args)
    assert r.returncode == 0, r.stdout + r.stderr
