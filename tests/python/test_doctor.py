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
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["runtime"]["package_description_format"] == 1
    assert j["cache_dir"] == {"path": str(tmp_path / "cache"), "writable": True, "detail": ""}
    assert {lib["name"] for lib in j["libraries"]} == {"libcurl", "libarchive"}
    for lib in j["libraries"]:
        assert lib["loaded"] == bool(lib["path"]) and lib["needed_for"]
    assert j["driver"]["library"] == "libcuda.so.1"
    assert set(j["nvrtc"]) >= {"available", "version", "path", "detail"}
    assert j["installed"]["available"] in (True, False)
    assert j["ok"] is True


def test_doctor_text_says_what_is_missing_and_exits_5_for_an_unwritable_cache(tmp_path):
    import os

    blocker = tmp_path / "file"
    blocker.write_text("")
    env = dict(os.environ, KILN_CACHE_DIR=str(blocker / "cache"))
    r = doctor(env=env)
    assert r.returncode == 5, r.stdout + r.stderr
    assert f"missing: writable cache directory {blocker / 'cache'}" in r.stdout
    assert "libcurl: libcurl.so.4" in r.stdout


def test_doctor_without_a_driver_reports_no_gpu_and_still_passes():
    r = run_child("""
        import sys
        from kiln.__main__ import main
        sys.exit(main(["doctor"]))
    """, {"LD_LIBRARY_PATH": "/nonexistent"})
    if "gpu: none" not in r.stdout:
        pytest.skip("a CUDA driver is present here")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "driver: not available" in r.stdout and "libcuda.so.1" in r.stdout


def test_unknown_command_is_a_usage_error():
    r = subprocess.run([sys.executable, "-m", "kiln", "frobnicate"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr
