"""Fixtures for the Python runtime's tests (scripts/python_tests.sh runs them in a fresh venv
where only the runtime wheel provides `kiln`; docs/python.md).

Environment (set by scripts/python_tests.sh): KILN_TEST_KILN_CLI (the kiln CLI, for building
test packages), KILN_TEST_RUNTIME_WHEEL (the wheel under test), KILN_TEST_PYTHON (the
interpreter the venv was made from), KILN_TEST_SOURCE_DIR (kiln's source tree: the reference
package's project, read by `kiln package-source`), KILN_TEST_PYBUILD (the tools venv: auditwheel).

No GPU here: the tests that load and launch use a stand-in libcuda.so.1 (stand_in_cuda.c),
preloaded before kiln first opens the driver, so the loader's real tiers, verification and
argument packing run and every launch is logged. Tests of "no driver" run in a child
interpreter without it.
"""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = pathlib.Path(__file__).resolve().parent


def _env_path(name: str) -> pathlib.Path:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set: run tests/python through scripts/python_tests.sh", 2)
    return pathlib.Path(value)


def _real_driver_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


REAL_DRIVER = _real_driver_present()
STAND_IN_DIR = pathlib.Path(os.environ.get("KILN_TEST_WORK", "/tmp")) / "kiln-stand-in-cuda"


def _build_stand_in() -> pathlib.Path:
    STAND_IN_DIR.mkdir(parents=True, exist_ok=True)
    lib = STAND_IN_DIR / "libcuda.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o", str(lib),
                    str(HERE / "stand_in_cuda.c")], check=True)
    return lib


# Loaded before any test imports kiln's driver: dlopen("libcuda.so.1") then finds this one by
# its SONAME. Not on a machine with a real driver (the stand-in tests skip there).
STAND_IN = None if REAL_DRIVER else _build_stand_in()
if STAND_IN is not None:
    ctypes.CDLL(str(STAND_IN), mode=ctypes.RTLD_GLOBAL)


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """The stand-in driver's launch log (a fresh file per test); skips with a real driver."""
    if STAND_IN is None:
        pytest.skip("a real CUDA driver is present: the stand-in tests run only without one")
    log = tmp_path / "launches.log"
    monkeypatch.setenv("KILN_STAND_IN_LOG", str(log))
    monkeypatch.delenv("KILN_STAND_IN_LAUNCH_ERROR", raising=False)
    monkeypatch.delenv("KILN_STAND_IN_PARAMS", raising=False)

    class Log:
        path = log

        def lines(self) -> list[str]:
            return log.read_text().splitlines() if log.exists() else []

    return Log()


@pytest.fixture(scope="session")
def kiln_cli() -> pathlib.Path:
    return _env_path("KILN_TEST_KILN_CLI")


def run_kiln(cli, *args, cwd=None) -> subprocess.CompletedProcess:
    r = subprocess.run([str(cli), *map(str, args)], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"kiln {' '.join(map(str, args))} failed ({r.returncode}):\n"
                             f"{r.stdout}\n{r.stderr}")
    return r


# A tiny kernel project: one family, two specialisations, and a third family whose source
# NVRTC refuses (nvcc builds it), so the JIT tier has something to fail on.
SCALE_CU = """\
namespace pyt {
template <typename T>
__global__ void scale_kernel(T* y, const T* x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
}  // namespace pyt
"""
NO_RTC_CU = """\
#ifdef __CUDACC_RTC__
#error "pyt-kernels' broken family: NVRTC is meant to fail here"
#endif
namespace pyt {
__global__ void broken_kernel(float* y) { y[0] = 1.0f; }
}  // namespace pyt
"""
KERNELS_JSON = {
    "format": 1,
    "types": {"f32": "float", "i32": "int"},
    "families": [
        {"name": "scale", "sources": ["scale.cu"], "entries": ["pyt::scale_kernel<{dtype}>"],
         "params": [{"name": "dtype", "kind": "type", "values": ["f32", "i32"]}],
         "targets": ["sm_80+"], "flags": []},
        {"name": "broken", "sources": ["broken.cu"], "entries": ["pyt::broken_kernel"],
         "params": [], "targets": ["sm_80+"], "flags": []},
    ],
}


def write_project(root: pathlib.Path, name: str, version: str) -> pathlib.Path:
    (root / "registry").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "VERSION").write_text(version + "\n")
    (root / "registry" / "package.json").write_text(json.dumps({"format": 1, "name": name}))
    (root / "registry" / "kernels.json").write_text(json.dumps(KERNELS_JSON, indent=1))
    (root / "kernels" / "scale.cu").write_text(SCALE_CU)
    (root / "kernels" / "broken.cu").write_text(NO_RTC_CU)
    return root


class BuiltPackage:
    def __init__(self, name, version, dist, store):
        self.name, self.version, self.dist, self.store = name, version, dist, store

    @property
    def description(self) -> pathlib.Path:
        return self.store / f"{self.name}-{self.version}.package.json"

    @property
    def index(self) -> pathlib.Path:
        return self.dist / f"{self.name}-{self.version}-index.json"


@pytest.fixture(scope="session")
def tiny_package(kiln_cli, tmp_path_factory) -> BuiltPackage:
    """pyt-kernels 1.0.0 built for sm_90 by the real `kiln build` and installed into a store."""
    work = tmp_path_factory.mktemp("pyt")
    project = write_project(work / "project", "pyt-kernels", "1.0.0")
    run_kiln(kiln_cli, "build", "--source", project, "--targets", "sm_90", "--out",
             work / "out", "--dist", work / "dist")
    store = work / "store"
    run_kiln(kiln_cli, "install", work / "dist" / "pyt-kernels-1.0.0-index.json", "--dest", store)
    built = BuiltPackage("pyt-kernels", "1.0.0", work / "dist", store)
    if not built.description.exists():  # `kiln install` may leave it in dist only
        shutil.copy(work / "dist" / built.description.name, built.description)
    return built


@pytest.fixture(scope="session")
def reference_description(kiln_cli, tmp_path_factory) -> pathlib.Path:
    """kiln-kernels' description (no artifacts: the JIT tier compiles what is asked)."""
    src = _env_path("KILN_TEST_SOURCE_DIR")
    work = tmp_path_factory.mktemp("ref")
    version = (src / "VERSION").read_text().strip()
    desc = work / f"kiln-kernels-{version}.package.json"
    run_kiln(kiln_cli, "package-source", "--source", src, "--symbol", "kiln_kernels_package",
             "--output", work / "package.c", "--description", desc)
    return desc


def isolated_config(tmp_path, **fields):
    """A Config that reads no environment and touches only tmp_path."""
    import kiln

    base = dict(cache_dir=str(tmp_path / "cache"), offline=True, disable_jit=True)
    base.update(fields)
    return kiln.Config(**base)


def run_child(code: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter of this venv, without the stand-in driver."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_STAND_IN")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, cwd="/")
