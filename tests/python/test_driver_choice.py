"""The driver's half of the target-choice rule in Python (docs/compatibility.md): `python -m
kiln install --driver X.Y` (else this node's driver) chooses only target wheels of a CUDA the
driver runs, the newest first; `python -m kiln doctor` says which toolkits of a package's stores
the driver runs. The node's driver is the stand-in (stand_in_cuda.c) reporting
KILN_STAND_IN_DRIVER."""

import json
import subprocess
import sys

import pytest

from conftest import STAND_IN
from kiln import _install

# `python -m kiln install ARGS` in a fresh interpreter whose libcuda is the stand-in (argv[1]).
CHILD = ("import ctypes, sys; ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL); "
         "from kiln import _install; sys.exit(_install.main(sys.argv[2:]))")


def wheels(tmp_path, majors=(12, 13), targets=("sm90", "sm80")):
    d = tmp_path / "wheels"
    d.mkdir()
    for major in majors:
        for t in targets:
            (d / f"pyt_kernels_cu{major}_{t}-1.0.0-py3-none-any.whl").write_bytes(b"")
    return d


def plan(capsys, *args):
    rc = _install.main(["pyt-kernels", "--dry-run", "--json", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else None), err


@pytest.mark.parametrize("driver,major", [("12.2", 12), ("12.8", 12), ("13.0", 13)])
def test_install_takes_the_newest_cuda_the_driver_runs(tmp_path, capsys, driver, major):
    rc, j, err = plan(capsys, "--find-links", wheels(tmp_path), "--target", "sm_90",
                      "--driver", driver)
    assert rc == 0, err
    assert j["wheel"] == f"pyt_kernels_cu{major}_sm90-1.0.0-py3-none-any.whl"
    assert j["cuda_major"] == major
    assert j["driver"] == driver and j["driver_from"] == "--driver"
    assert f"driver: CUDA {driver} (--driver)" in err


def test_install_with_a_driver_older_than_every_wheel_is_unsupported_naming_both(tmp_path,
                                                                                  capsys):
    rc, j, err = plan(capsys, "--find-links", wheels(tmp_path), "--target", "sm_90",
                      "--driver", "11.8")
    assert rc == 5, err
    assert j["error"]["kind"] == "unsupported"
    msg = j["error"]["message"]
    assert "runs on this driver (CUDA 11.8, --driver)" in msg
    assert "needs a driver >= 525 (CUDA 12.0); this driver runs CUDA 11.8" in msg
    assert "needs a driver >= 580 (CUDA 13.0); this driver runs CUDA 11.8" in msg
    only13 = tmp_path / "only13"
    only13.mkdir()
    (only13 / "pyt_kernels_cu13_sm90-1.0.0-py3-none-any.whl").write_bytes(b"")
    rc, j, err = plan(capsys, "--find-links", only13, "--target", "sm_90", "--driver", "12.8")
    assert rc == 5, err
    assert "built by CUDA 13.0, needs a driver >= 580 (CUDA 13.0); this driver runs CUDA 12.8" \
        in j["error"]["message"]


def test_install_driver_that_is_not_a_version_is_a_usage_error_naming_the_flag(tmp_path,
                                                                               capsys):
    rc, j, err = plan(capsys, "--find-links", wheels(tmp_path), "--target", "sm_90",
                      "--driver", "580")
    assert rc == 2, err
    assert "--driver '580' is not a driver's CUDA version" in j["error"]["message"]


def test_install_weighs_the_nodes_driver_without_the_flag(stand_in, tmp_path, monkeypatch):
    # A process reads its driver's version once (docs/compatibility.md), so each driver is a
    # fresh interpreter, as on a node.
    d = wheels(tmp_path)
    for version, driver, major in [("12080", "12.8", 12), ("13000", "13.0", 13)]:
        monkeypatch.setenv("KILN_STAND_IN_DRIVER", version)
        r = subprocess.run([sys.executable, "-c", CHILD, str(STAND_IN), "pyt-kernels",
                            "--dry-run", "--json", "--find-links", str(d), "--target", "sm_90"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        j = json.loads(r.stdout)
        assert j["cuda_major"] == major
        assert j["driver"] == driver and j["driver_from"] == "this node's driver"


def test_doctor_says_which_toolkits_of_a_store_the_driver_runs(tiny_package):
    from kiln import _doctor

    # tiny_package was built by this kiln's toolkit (CUDA 13.0) for sm_90.
    old = _doctor._toolkits([str(tiny_package.store)], "pyt-kernels", 12080)
    assert len(old) == 1, old
    assert old[0]["cuda_version"] == "13.0" and old[0]["driver_runs"] is False
    assert old[0]["detail"] == ("built by CUDA 13.0, needs a driver >= 580 (CUDA 13.0); "
                                "this driver runs CUDA 12.8")
    new = _doctor._toolkits([str(tiny_package.store)], "pyt-kernels", 13000)
    assert new[0]["driver_runs"] is True and new[0]["runnable_archives"] == new[0]["archives"]
    unknown = _doctor._toolkits([str(tiny_package.store)], "pyt-kernels", 0)
    assert unknown[0]["driver_runs"] is None
