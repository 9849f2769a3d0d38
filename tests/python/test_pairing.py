"""Pip pairs a kiln package's wheels: real pip, fresh virtual environments, a local wheel directory.

Two releases (1.0.0 and 1.1.0) of a tiny package (`pairtest-kernels`, one kernel for sm_80 and
sm_90a) and one release of a second package (`othertest-kernels`) are built with the kiln CLI
(`kiln build --dist` + `kiln wheel`) into one directory beside the kiln runtime wheel, and each
case installs into its own fresh venv with `pip install --no-index --find-links DIR`.

Needs (scripts/python_tests.sh exports them):
  KILN_TEST_KILN_CLI       the kiln CLI of this build (build/packager/kiln or similar)
  KILN_TEST_RUNTIME_WHEEL  the kiln runtime wheel (scripts/build_runtime_wheel.sh)
  KILN_TEST_PYTHON         a CPython >= 3.12 (the runtime's floor) to make the venvs with
Without them the tests skip; with KILN_REQUIRE_PYTHON_TESTS=1 they fail instead (CI).
nvcc must be on PATH or named by KILN_NVCC (kiln build compiles the two kernels).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
import zipfile

import pytest

PKG = "pairtest-kernels"
OTHER = "othertest-kernels"
TARGETS = "sm_80,sm_90a"
OLD, NEW = "1.0.0", "1.1.0"
ENV_NAMES = ("KILN_TEST_KILN_CLI", "KILN_TEST_RUNTIME_WHEEL", "KILN_TEST_PYTHON")


def _need_env():
    missing = [n for n in ENV_NAMES if not os.environ.get(n)]
    if missing:
        msg = (f"{', '.join(missing)} not set: scripts/python_tests.sh exports them "
               f"(the kiln CLI, the runtime wheel, a CPython >= 3.12)")
        if os.environ.get("KILN_REQUIRE_PYTHON_TESTS") == "1":
            pytest.fail("KILN_REQUIRE_PYTHON_TESTS=1 but " + msg)
        pytest.skip(msg)
    return {n: os.environ[n] for n in ENV_NAMES}


def _run(cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}\nstdout:\n{r.stdout}\n"
                             f"stderr:\n{r.stderr}")
    return r


KERNEL = textwrap.dedent("""\
    namespace pairtest {
    __global__ void add_one(float* x, int n) {
      int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
      if (i < n) x[i] += 1.0f;
    }
    }  // namespace pairtest
    """)
REGISTRY = json.dumps({
    "format": 1, "types": {},
    "families": [{"name": "add_one", "sources": ["add_one.cu"],
                  "entries": ["pairtest::add_one"], "targets": ["sm_80", "sm_90a"]}]})


def _release(kiln: str, work: pathlib.Path, package: str, version: str, wheels: pathlib.Path):
    """One release of a one-kernel project: kiln build --dist, then kiln wheel into `wheels`."""
    src = work / f"{package}-{version}-src"
    (src / "registry").mkdir(parents=True)
    (src / "kernels").mkdir()
    (src / "VERSION").write_text(version + "\n")
    (src / "registry/package.json").write_text(json.dumps({"format": 1, "name": package}) + "\n")
    (src / "registry/kernels.json").write_text(REGISTRY)
    (src / "kernels/add_one.cu").write_text(KERNEL)
    dist = work / f"{package}-{version}-dist"
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
    _run([kiln, "build", "--source", str(src), "--targets", TARGETS,
          "--out", str(work / f"{package}-{version}-out"), "--dist", str(dist)], env=env)
    r = _run([kiln, "wheel", "--dist", str(dist), "--out", str(wheels), "--json"], env=env)
    report = json.loads(r.stdout)
    assert report["ok"] and report["failed"] == [], report
    return dist


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory):
    env = _need_env()
    work = tmp_path_factory.mktemp("releases")
    wheels = work / "wheels"
    wheels.mkdir()
    dists = {(PKG, OLD): _release(env["KILN_TEST_KILN_CLI"], work, PKG, OLD, wheels),
             (PKG, NEW): _release(env["KILN_TEST_KILN_CLI"], work, PKG, NEW, wheels),
             (OTHER, OLD): _release(env["KILN_TEST_KILN_CLI"], work, OTHER, OLD, wheels)}
    shutil.copy(env["KILN_TEST_RUNTIME_WHEEL"], wheels)
    return {"dir": wheels, "dists": dists, "python": env["KILN_TEST_PYTHON"]}


def _reversioned_runtime(wheel: pathlib.Path, version: str, out: pathlib.Path) -> pathlib.Path:
    """The runtime wheel as if it were kiln `version` (a later runtime outside the package
    wheel's range): dist-info renamed, METADATA's Version and RECORD rewritten."""
    name_parts = wheel.name.split("-")
    old = name_parts[1]
    name_parts[1] = version
    target = out / "-".join(name_parts)
    files = {}
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            data = z.read(info)
            path = info.filename.replace(f"kiln-{old}.dist-info/", f"kiln-{version}.dist-info/")
            if path.endswith(".dist-info/METADATA"):
                data = data.replace(f"\nVersion: {old}\n".encode(),
                                    f"\nVersion: {version}\n".encode())
            files[path] = data
    record = f"kiln-{version}.dist-info/RECORD"
    def record_hash(d: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()

    rows = [f"{p},sha256={record_hash(d)},{len(d)}" for p, d in files.items() if p != record]
    files[record] = ("\n".join(rows + [f"{record},,"]) + "\n").encode()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files.items():
            z.writestr(p, d)
    return target


class Venv:
    def __init__(self, root: pathlib.Path, python: str, wheels: pathlib.Path):
        _run([python, "-m", "venv", str(root)])
        self.python = str(root / "bin" / "python")
        self.wheels = wheels

    def pip(self, *args, check=True):
        return _run([self.python, "-m", "pip", "--disable-pip-version-check", *args,
                     "--no-index", "--find-links", str(self.wheels)]
                    if args[0] == "install" else
                    [self.python, "-m", "pip", "--disable-pip-version-check", *args],
                    check=check)

    def versions(self) -> dict[str, str]:
        r = self.pip("list", "--format", "json")
        return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(r.stdout)}

    def installed(self, name: str) -> dict:
        """find_installed(name) as the venv's kiln sees it, or {"error": message}."""
        code = textwrap.dedent(f"""\
            import json
            from kiln._installed import find_installed
            try:
                i = find_installed({name!r})
            except LookupError as e:
                print(json.dumps({{"error": str(e)}}))
            else:
                print(json.dumps({{"name": i.name, "version": i.version,
                                  "description": str(i.description),
                                  "stores": [str(s) for s in i.stores], "stale": i.stale,
                                  "stale_stores": [str(s) for s in i.stale_stores]}}))
            """)
        return json.loads(_run([self.python, "-c", code]).stdout)


@pytest.fixture
def venv(tmp_path, wheelhouse):
    return Venv(tmp_path / "venv", wheelhouse["python"], wheelhouse["dir"])


def _target_dist(package: str, target: str) -> str:
    return f"{package}-cu13-{target.replace('_', '')}"


def test_wheel_directory_holds_what_kiln_wheel_promises(wheelhouse):
    names = sorted(p.name for p in wheelhouse["dir"].iterdir())
    for version in (OLD, NEW):
        assert f"pairtest_kernels-{version}-py3-none-any.whl" in names
        assert f"pairtest_kernels_cu13_sm90a-{version}-py3-none-any.whl" in names
        assert f"pairtest_kernels_cu13_sm80-{version}-py3-none-any.whl" in names
    assert f"othertest_kernels-{OLD}-py3-none-any.whl" in names


def test_a_target_wheel_brings_its_package_wheel_at_the_same_version(venv):
    venv.pip("install", f"{_target_dist(PKG, 'sm_90a')}=={OLD}")
    v = venv.versions()
    assert v[_target_dist(PKG, "sm_90a")] == OLD
    assert v[PKG] == OLD
    assert "kiln" in v  # the runtime, by the package wheel's Requires-Dist
    found = venv.installed(PKG)
    assert found["version"] == OLD and found["stale"] == []
    assert pathlib.Path(found["description"]).name == f"{PKG}-{OLD}.package.json"
    assert json.loads(pathlib.Path(found["description"]).read_text())["package_version"] == OLD
    [store] = found["stores"]
    assert (pathlib.Path(store) / f"{PKG}-{OLD}-cuda13.0-sm_90a" / "manifest.json").is_file()


def test_upgrading_the_target_wheel_upgrades_its_package_wheel(venv):
    venv.pip("install", f"{_target_dist(PKG, 'sm_90a')}=={OLD}")
    venv.pip("install", "-U", _target_dist(PKG, "sm_90a"))
    v = venv.versions()
    assert (v[_target_dist(PKG, "sm_90a")], v[PKG]) == (NEW, NEW)
    assert venv.installed(PKG)["stale"] == []


def test_the_package_wheel_offers_an_extra_per_target_that_pins_its_wheel(wheelhouse):
    whl = wheelhouse["dir"] / f"pairtest_kernels-{NEW}-py3-none-any.whl"
    with zipfile.ZipFile(whl) as z:
        metadata = z.read(f"pairtest_kernels-{NEW}.dist-info/METADATA").decode()
    for extra in ("cu13-sm80", "cu13-sm90a"):
        assert f"Provides-Extra: {extra}\n" in metadata, metadata
        assert (f"Requires-Dist: {PKG}-{extra}=={NEW}; extra == \"{extra}\"\n" in metadata), metadata


def test_upgrading_the_package_with_its_target_extra_upgrades_both(venv):
    # The upgrade that broke FlashInfer's users, spelled with the extra python -m kiln install
    # uses: pip re-resolves the target wheel with the package and moves them together.
    venv.pip("install", f"{PKG}[cu13-sm90a]=={OLD}")
    v = venv.versions()
    assert (v[_target_dist(PKG, "sm_90a")], v[PKG]) == (OLD, OLD)
    venv.pip("install", "-U", f"{PKG}[cu13-sm90a]")
    v = venv.versions()
    assert (v[_target_dist(PKG, "sm_90a")], v[PKG]) == (NEW, NEW)
    assert venv.pip("check").returncode == 0
    assert venv.installed(PKG)["stale"] == []


@pytest.fixture(scope="session")
def every_target_wheels(wheelhouse, tmp_path_factory):
    """The same releases' wheels with kiln wheel --require-every-target: the package wheel
    requires each target wheel, not only through its extra."""
    env = _need_env()
    out = tmp_path_factory.mktemp("every-target")
    for version in (OLD, NEW):
        dist = wheelhouse["dists"][(PKG, version)]
        r = _run([env["KILN_TEST_KILN_CLI"], "wheel", "--dist", str(dist), "--out", str(out),
                  "--require-every-target", "--json"],
                 env=dict(os.environ, SOURCE_DATE_EPOCH="1700000000"))
        assert json.loads(r.stdout)["ok"], r.stdout
    shutil.copy(env["KILN_TEST_RUNTIME_WHEEL"], out)
    return out


def test_with_every_target_required_a_bare_upgrade_of_the_package_upgrades_them_all(
        every_target_wheels, wheelhouse, tmp_path):
    venv = Venv(tmp_path / "venv", wheelhouse["python"], every_target_wheels)
    venv.pip("install", f"{PKG}=={OLD}")
    v = venv.versions()
    assert (v[PKG], v[_target_dist(PKG, "sm_80")], v[_target_dist(PKG, "sm_90a")]) == (OLD,) * 3
    # FlashInfer's break, exactly: the package upgraded by name alone.
    venv.pip("install", "-U", PKG)
    v = venv.versions()
    assert (v[PKG], v[_target_dist(PKG, "sm_80")], v[_target_dist(PKG, "sm_90a")]) == (NEW,) * 3
    assert venv.pip("check").returncode == 0
    found = venv.installed(PKG)
    assert found["stale"] == [] and len(found["stores"]) == 2


def test_pip_refuses_a_mismatched_set_asked_for_at_once(venv):
    r = venv.pip("install", f"{_target_dist(PKG, 'sm_90a')}=={OLD}", f"{PKG}=={NEW}",
                  check=False)
    assert r.returncode != 0
    assert "ResolutionImpossible" in r.stderr or "conflict" in r.stderr.lower(), r.stderr
    assert PKG not in venv.versions()


def test_upgrading_only_the_package_leaves_a_mismatch_pip_names_and_kiln_reports(venv):
    # The FlashInfer break: the package upgraded, the target wheel left behind. pip's resolver
    # does not re-resolve installed distributions it was not asked about: it installs and
    # warns. The Requires-Dist makes the warning exact, pip check fails, and kiln reports it.
    venv.pip("install", f"{_target_dist(PKG, 'sm_90a')}=={OLD}")
    r = venv.pip("install", "-U", PKG)
    assert venv.versions()[PKG] == NEW
    assert f"requires {PKG}=={OLD}" in r.stderr, r.stderr
    check = venv.pip("check", check=False)
    assert check.returncode != 0 and f"{PKG}=={OLD}" in check.stdout, check.stdout
    found = venv.installed(PKG)
    assert found["version"] == NEW and found["stores"] == []
    [message] = found["stale"]
    assert OLD in message and NEW in message
    assert f"-m pip install {_target_dist(PKG, 'sm_90a')}=={NEW}" in message
    assert len(found["stale_stores"]) == 1
    # The command it names pairs them again.
    command = message.split("to pair them run: ")[1]
    _run(command.split() + ["--no-index", "--find-links", str(venv.wheels)])
    again = venv.installed(PKG)
    assert again["stale"] == [] and len(again["stores"]) == 1


def test_a_runtime_outside_the_package_wheels_range_is_refused_or_named_by_pip(venv, tmp_path):
    # The other half of FlashInfer's break: the runtime upgraded past what the package reads.
    later = tmp_path / "later"
    later.mkdir()
    for whl in venv.wheels.iterdir():
        shutil.copy(whl, later)
    runtime = next(later.glob("kiln-*.whl"))
    _reversioned_runtime(runtime, "99.0.0", later)
    venv.wheels = later
    refused = venv.pip("install", f"{_target_dist(PKG, 'sm_80')}=={NEW}", "kiln==99.0.0",
                       check=False)
    assert refused.returncode != 0 and "ResolutionImpossible" in refused.stderr, refused.stderr
    venv.pip("install", f"{_target_dist(PKG, 'sm_80')}=={NEW}")
    assert venv.versions()["kiln"] != "99.0.0"  # pip picks a runtime in the range
    upgraded = venv.pip("install", "-U", "kiln")
    assert venv.versions()["kiln"] == "99.0.0"
    assert f"{PKG} {NEW} requires kiln" in upgraded.stderr, upgraded.stderr
    assert "which is incompatible" in upgraded.stderr, upgraded.stderr
    # kiln names it too, with the pip command that brings a runtime of the range back.
    found = venv.installed(PKG)
    assert found["stores"] != []  # the target wheel still pairs with its package
    [message] = found["stale"]
    assert "this runtime is kiln 99.0.0" in message and f"{PKG} {NEW} requires kiln>=" in message
    assert "-m pip install 'kiln>=" in message


def test_no_deps_mismatch_is_reported_with_both_versions_and_the_pip_command(venv):
    venv.pip("install", f"{PKG}=={NEW}")
    venv.pip("install", "--no-deps", f"{_target_dist(PKG, 'sm_80')}=={OLD}")
    found = venv.installed(PKG)
    assert found["version"] == NEW
    [message] = found["stale"]
    assert f"{_target_dist(PKG, 'sm_80')} {OLD}" in message
    assert f"{PKG} {NEW}" in message
    assert f"-m pip install {_target_dist(PKG, 'sm_80')}=={NEW}" in message


RESOLVE = textwrap.dedent("""\
    import json, warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import kiln
        loader = kiln.load("pairtest-kernels")
    r = loader.resolve("add_one", cc="sm_80", explain=True)
    print(json.dumps({"warnings": [str(w.message) for w in caught], "chosen": r["chosen"] or {}}))
    """)


def test_kiln_load_serves_the_paired_target_wheel_from_its_store(venv):
    venv.pip("install", f"{_target_dist(PKG, 'sm_80')}=={NEW}")
    out = json.loads(_run([venv.python, "-c", RESOLVE],
                          env=dict(os.environ, KILN_OFFLINE="1")).stdout)
    assert out["warnings"] == []
    assert out["chosen"]["tier"] == "store", out
    assert "pairtest_kernels_cu13_sm80" in out["chosen"]["path"], out


def test_kiln_load_with_a_stale_target_wheel_warns_and_goes_on_never_crashing(venv):
    venv.pip("install", f"{PKG}=={NEW}")
    venv.pip("install", "--no-deps", f"{_target_dist(PKG, 'sm_80')}=={OLD}")
    out = json.loads(_run([venv.python, "-c", RESOLVE],
                          env=dict(os.environ, KILN_OFFLINE="1")).stdout)
    [warning] = out["warnings"]
    assert f"{_target_dist(PKG, 'sm_80')} {OLD}" in warning and f"{PKG} {NEW}" in warning
    # The stale wheel's kernels are not served: the next tier (the JIT where NVRTC is) is.
    assert "pairtest_kernels_cu13_sm80" not in (out["chosen"].get("path") or ""), out
    assert out["chosen"].get("tier") != "store", out


def test_a_target_wheel_without_its_package_wheel_is_not_found_and_says_why(venv):
    venv.pip("install", "kiln")
    venv.pip("install", "--no-deps", f"{_target_dist(PKG, 'sm_80')}=={OLD}")
    found = venv.installed(PKG)
    assert "not installed" in found["error"] and "kiln.packages" in found["error"]
    assert f"{_target_dist(PKG, 'sm_80')} {OLD}" in found["error"]


def test_two_packages_are_discovered_side_by_side(venv):
    venv.pip("install", f"{_target_dist(PKG, 'sm_90a')}=={NEW}",
             f"{_target_dist(OTHER, 'sm_80')}=={OLD}")
    code = ("import json; from kiln._installed import installed_packages as p; "
            "print(json.dumps([(i.name, i.version, len(i.stores)) for i in p()]))")
    listed = json.loads(_run([venv.python, "-c", code]).stdout)
    assert listed == [[OTHER, OLD, 1], [PKG, NEW, 1]]
    assert venv.installed(OTHER)["stores"] != venv.installed(PKG)["stores"]


def test_kiln_install_dry_run_picks_the_target_wheel(venv, wheelhouse):
    venv.pip("install", "kiln")
    r = _run([venv.python, "-m", "kiln", "install", PKG, "--find-links",
              str(wheelhouse["dir"]), "--target", "sm_90a", "--dry-run", "--json"])
    plan = json.loads(r.stdout)
    assert plan["wheel"] == f"pairtest_kernels_cu13_sm90a-{NEW}-py3-none-any.whl"
    assert plan["available"] == ["sm_80", "sm_90a"] and plan["version"] == NEW
    assert plan["command"][1:4] == ["-m", "pip", "install"]
    assert plan["command"][-1] == f"{_target_dist(PKG, 'sm_90a')}=={NEW}"
    old = _run([venv.python, "-m", "kiln", "install", PKG, "--version", OLD, "--find-links",
                str(wheelhouse["dir"]), "--target", "sm_80", "--dry-run", "--json"])
    assert json.loads(old.stdout)["wheel"] == f"pairtest_kernels_cu13_sm80-{OLD}-py3-none-any.whl"
    assert PKG not in venv.versions()  # a dry run installs nothing


def test_kiln_install_refuses_a_target_the_directory_does_not_offer(venv, wheelhouse):
    venv.pip("install", "kiln")
    r = _run([venv.python, "-m", "kiln", "install", PKG, "--find-links",
              str(wheelhouse["dir"]), "--target", "sm_100a", "--dry-run"], check=False)
    assert r.returncode == 6  # not-found (docs/exit-codes.md)
    assert "sm_100a" in r.stderr and "sm_80, sm_90a" in r.stderr


def test_kiln_install_installs_the_chosen_target_and_its_package(venv, wheelhouse):
    venv.pip("install", "kiln")
    _run([venv.python, "-m", "kiln", "install", PKG, "--find-links", str(wheelhouse["dir"]),
          "--no-index", "--target", "sm_80"])
    v = venv.versions()
    assert (v[_target_dist(PKG, "sm_80")], v[PKG]) == (NEW, NEW)


def test_kiln_install_again_upgrades_the_package_and_its_target_together(venv, wheelhouse):
    venv.pip("install", "kiln")
    install = [venv.python, "-m", "kiln", "install", PKG, "--find-links",
               str(wheelhouse["dir"]), "--no-index", "--target", "sm_90a"]
    _run(install + ["--version", OLD])
    v = venv.versions()
    assert (v[_target_dist(PKG, "sm_90a")], v[PKG]) == (OLD, OLD)
    plan = json.loads(_run(install + ["--json"]).stdout)
    assert plan["requirements"] == [f"{PKG}[cu13-sm90a]=={NEW}", f"{_target_dist(PKG, 'sm_90a')}=={NEW}"]
    assert plan["pip_exit_code"] == 0
    v = venv.versions()
    assert (v[_target_dist(PKG, "sm_90a")], v[PKG]) == (NEW, NEW)
    assert venv.installed(PKG)["stale"] == []
    # ... and the plain pip upgrade of the extra it installed moves nothing further (both new).
    venv.pip("install", "-U", f"{PKG}[cu13-sm90a]")
    assert venv.pip("check").returncode == 0


@pytest.fixture
def simple_index(tmp_path, wheelhouse):
    """The wheel directory as a PEP 503 simple index (one directory per normalized project),
    served on loopback by python -m http.server, whose listings are the HTML pages."""
    root = tmp_path / "simple"
    for whl in wheelhouse["dir"].iterdir():
        project = whl.name.split("-")[0].replace("_", "-").lower()
        (root / project).mkdir(parents=True, exist_ok=True)
        shutil.copy(whl, root / project / whl.name)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                               "127.0.0.1", "--directory", str(root)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait()


def test_kiln_install_from_an_index_url_picks_and_installs_the_target_wheel(venv, simple_index):
    venv.pip("install", "kiln")
    r = _run([venv.python, "-m", "kiln", "install", OTHER, "--index-url", simple_index,
              "--target", "sm_80", "--dry-run", "--json"])
    plan = json.loads(r.stdout)
    assert plan["wheel"] == f"othertest_kernels_cu13_sm80-{OLD}-py3-none-any.whl"
    assert plan["available"] == ["sm_80", "sm_90a"]
    assert plan["where"].startswith(simple_index)
    _run([venv.python, "-m", "kiln", "install", PKG, "--index-url", simple_index,
          "--target", "sm_90a"])
    v = venv.versions()
    assert (v[_target_dist(PKG, "sm_90a")], v[PKG]) == (NEW, NEW)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine has devices")
def test_kiln_install_without_a_gpu_says_so_and_exits_unsupported(venv, wheelhouse):
    venv.pip("install", "kiln")
    r = _run([venv.python, "-m", "kiln", "install", PKG, "--find-links",
              str(wheelhouse["dir"]), "--dry-run"], check=False)
    assert r.returncode == 5, r.stderr  # unsupported: no device to choose for
    assert "no CUDA device" in r.stderr and "--target" in r.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))


def test_kiln_install_with_no_source_looks_where_pip_is_configured_to(venv, wheelhouse,
                                                                     simple_index):
    # `python -m kiln install kiln-kernels` as docs/python.md writes it: no --find-links and no
    # --index-url, so the wheels are found (and pip installs them) where pip itself looks.
    venv.pip("install", "kiln")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    offline = {**env, "PIP_FIND_LINKS": str(wheelhouse["dir"]), "PIP_NO_INDEX": "1"}
    r = _run([venv.python, "-m", "kiln", "install", PKG, "--target", "sm_80", "--dry-run",
              "--json"], env=offline)
    plan = json.loads(r.stdout)
    assert plan["wheel"] == f"pairtest_kernels_cu13_sm80-{NEW}-py3-none-any.whl"
    assert "--find-links" not in plan["command"] and "--index-url" not in plan["command"]
    _run([venv.python, "-m", "kiln", "install", PKG, "--target", "sm_80"], env=offline)
    v = venv.versions()
    assert (v[_target_dist(PKG, "sm_80")], v[PKG]) == (NEW, NEW)
    indexed = {**env, "PIP_INDEX_URL": simple_index}
    plan = json.loads(_run([venv.python, "-m", "kiln", "install", OTHER, "--target", "sm_90a",
                            "--dry-run", "--json"], env=indexed).stdout)
    assert plan["where"].startswith(simple_index)
    none = {**env, "PIP_NO_INDEX": "1"}
    r = _run([venv.python, "-m", "kiln", "install", PKG, "--target", "sm_80", "--dry-run"],
             env=none, check=False)
    assert r.returncode == 6 and "pip's configured sources" in r.stderr, r.stderr
