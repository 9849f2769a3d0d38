"""python -m kiln doctor [--json] and the command dispatch."""

import json
import subprocess
import sys

import pytest

from conftest import run_child


def doctor(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kiln", "doctor", *args], capture_output=True,
                          text=True, env=env, cwd="/")


def test_doctor_json_reports_driver_nvrtc_libraries_cache_and_formats(tmp_path):
    import os

    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path / "cache"))
    r = doctor("--json", env=env)
    j = json.loads(r.stdout)
    # Its verdict (tested below) depends on this machine's driver; its facts do not.
    assert r.returncode == (0 if j["ok"] else 5), r.stderr
    assert j["runtime"]["package_description_format"] == 1
    assert j["cache_dir"] == {"path": str(tmp_path / "cache"), "writable": True, "detail": ""}
    assert {lib["name"] for lib in j["libraries"]} == {"libcurl", "libarchive"}
    for lib in j["libraries"]:
        assert lib["loaded"] == bool(lib["path"]) and lib["needed_for"]
    assert j["driver"]["library"] == "libcuda.so.1"
    assert set(j["nvrtc"]) >= {"available", "version", "path", "detail"}
    assert j["installed"]["available"] in (True, False)


def test_doctor_text_says_what_is_missing_and_exits_5_for_an_unwritable_cache(tmp_path):
    import os

    blocker = tmp_path / "file"
    blocker.write_text("")
    env = dict(os.environ, KILN_CACHE_DIR=str(blocker / "cache"))
    r = doctor(env=env)
    assert r.returncode == 5, r.stdout + r.stderr
    assert f"missing: writable cache directory {blocker / 'cache'}" in r.stdout
    assert "libcurl: libcurl.so.4" in r.stdout


DOCTOR_MAIN = """
    import sys
    from kiln.__main__ import main
    sys.exit(main(["doctor"] + sys.argv[1:]))
"""


# No driver, no archive in the store, the only mirror unreachable, JIT off: nothing can load,
# and the verdict is `kiln doctor`'s (the same C++ rule), each missing piece named.
def test_doctor_with_nothing_to_load_from_exits_5_naming_each_missing_piece(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    env = {"LD_LIBRARY_PATH": "/nonexistent", "KILN_ARTIFACT_PATH": str(store),
           "KILN_MIRRORS": "http://127.0.0.1:9", "KILN_DISABLE_JIT": "1",
           "KILN_CACHE_DIR": str(tmp_path / "cache")}
    r = run_child(DOCTOR_MAIN.replace('sys.argv[1:]', '["--json"]'), env)
    assert r.returncode == 5, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert j["ok"] is False
    source = j["missing"][-1]
    assert source.startswith("a source of kernels"), j["missing"]
    assert f"no store holds an archive of the package (searched {store}" in source or \
        f"no store holds an archive that runs there (searched {store}" in source, source
    assert "no mirror reached (http://127.0.0.1:9: " in source
    assert "no usable JIT (disabled by KILN_DISABLE_JIT)" in source
    if not j["devices"]:
        assert len(j["missing"]) == 2 and j["missing"][0].startswith("CUDA driver ("), j
    text = run_child(DOCTOR_MAIN.replace('sys.argv[1:]', '[]'), env)
    assert text.returncode == 5
    assert "ok:" not in text.stdout
    assert f"missing: {source}\n" in text.stdout


def test_doctor_with_a_device_and_a_store_archive_for_it_is_ok(stand_in, tiny_package, tmp_path):
    from kiln import _doctor
    from conftest import isolated_config

    j = _doctor.facts(isolated_config(tmp_path, artifact_path=[str(tiny_package.store)]))
    assert j["devices"] and j["devices"][0]["cc"] == 90, j
    assert j["ok"] is True, j["missing"]
    assert j["missing"] == []
    # Served by nothing (no store, offline, JIT off): the same rule says what is missing.
    j = _doctor.facts(isolated_config(tmp_path, artifact_path=[str(tmp_path)]))
    assert j["ok"] is False
    assert j["missing"] == [
        f"a source of kernels for sm_90 (CC 9.0): no store holds an archive that runs there "
        f"(searched {tmp_path}, {tmp_path / 'cache'}); no mirror configured; no usable JIT "
        f"(disabled by KILN_DISABLE_JIT)"], j["missing"]


def test_unknown_command_is_a_usage_error():
    r = subprocess.run([sys.executable, "-m", "kiln", "frobnicate"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr
