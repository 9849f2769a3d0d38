"""Every error kind reachable from Python, as the exception class of its kind, with the kind,
exit code (docs/exit-codes.md), message and context fields."""

import json
import os
import pathlib
import shutil

import pytest

import kiln
from conftest import isolated_config, run_child


def check(e, cls, kind, code):
    assert type(e) is cls and isinstance(e, kiln.Error)
    assert (e.kind, e.exit_code) == (kind, code)
    assert e.message == str(e) and e.message
    return e


def test_error_carries_fields_as_attributes_and_json():
    e = kiln._errors._from_native("integrity", 3, "digest differs",
                                  [("uri", "axpy_dtype_f32"), ("attack", "rollback"),
                                   ("uri", "second")])
    check(e, kiln.IntegrityError, "integrity", 3)
    assert (e.uri, e.attack, e.target) == ("axpy_dtype_f32", "rollback", None)
    assert e.fields == {"uri": "axpy_dtype_f32", "attack": "rollback"}
    assert e.to_json()["error"]["exit_code"] == 3
    with pytest.raises(AttributeError):
        e.no_such_field_name


def test_usage_loader_without_a_package():
    with pytest.raises(kiln.UsageError) as e:
        kiln.Loader()
    check(e.value, kiln.UsageTypeError, "usage", 2)
    assert e.value.argument == "description"


def test_usage_bad_log_level(tiny_package, tmp_path):
    with pytest.raises(kiln.UsageError) as e:
        kiln.Loader(description=tiny_package.description,
                    config=isolated_config(tmp_path, log_level="loud"))
    assert "loud" in str(e.value)


def test_not_found_description_file_names_it(tmp_path):
    missing = tmp_path / "acme-kernels-1.0.0.package.json"
    with pytest.raises(kiln.NotFoundError) as e:
        kiln.Loader(description=missing)
    check(e.value, kiln.MissingFileError, "not-found", 6)
    assert str(missing) in str(e.value)


def test_not_found_load_of_a_package_that_is_not_installed():
    with pytest.raises(kiln.NotFoundError) as e:
        kiln.load("no-such-kernels")
    check(e.value, kiln.NotFoundError, "not-found", 6)
    assert e.value.package == "no-such-kernels" and "no-such-kernels" in str(e.value)


def test_not_found_uri_not_in_the_package(stand_in, tiny_package, tmp_path):
    loader = kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path))
    with pytest.raises(kiln.NotFoundError) as e:
        loader.get("scale_dtype_f64")
    assert e.value.uri == "scale_dtype_f64"


def _description(tiny_package) -> dict:
    return json.loads(tiny_package.description.read_text())


def test_format_malformed_description(tmp_path):
    bad = tmp_path / "pyt-kernels-1.0.0.package.json"
    bad.write_text('{"format": 1, "package": ')
    with pytest.raises(kiln.FormatError) as e:
        kiln.Loader(description=bad)
    check(e.value, kiln.FormatError, "format", 10)
    assert str(bad) in str(e.value)


def test_stale_description_of_a_newer_format(tiny_package, tmp_path):
    d = _description(tiny_package)
    d["format"] = 2
    newer = tmp_path / tiny_package.description.name
    newer.write_text(json.dumps(d))
    with pytest.raises(kiln.StaleError) as e:
        kiln.Loader(description=newer)
    check(e.value, kiln.StaleError, "stale", 4)
    assert "newer" in str(e.value) or "too new" in str(e.value)


def test_limit_description_larger_than_the_json_limit(tmp_path):
    big = tmp_path / "pyt-kernels-1.0.0.package.json"
    with open(big, "wb") as f:
        f.truncate((64 << 20) + 1)
    with pytest.raises(kiln.LimitError) as e:
        kiln.Loader(description=big)
    check(e.value, kiln.LimitError, "limit", 12)


def test_io_description_that_is_not_a_regular_file(tmp_path):
    d = tmp_path / "pyt-kernels-1.0.0.package.json"
    d.mkdir()
    with pytest.raises(kiln.IoError) as e:
        kiln.Loader(description=d)
    check(e.value, kiln.IoError, "io", 9)
    assert str(d) in str(e.value) and "not a regular file" in str(e.value)


def test_integrity_artifact_whose_bytes_differ_from_its_manifest(stand_in, tiny_package,
                                                                 tmp_path):
    store = tmp_path / "store"
    shutil.copytree(tiny_package.store, store)
    for f in store.rglob("*"):
        if f.is_file() and "scale_dtype_f32" in f.name and not f.name.endswith(".json"):
            f.write_bytes(f.read_bytes()[:-1] + bytes([f.read_bytes()[-1] ^ 1]))
    loader = kiln.Loader(description=store / tiny_package.description.name,
                         config=isolated_config(tmp_path))
    with pytest.raises(kiln.IntegrityError) as e:
        loader.get("scale_dtype_f32")
    check(e.value, kiln.IntegrityError, "integrity", 3)
    assert e.value.uri == "scale_dtype_f32"


def test_stale_archive_of_another_package_version(stand_in, tiny_package, tmp_path):
    d = _description(tiny_package)
    d["package_version"] = "1.0.1"
    newer = tmp_path / "pyt-kernels-1.0.1.package.json"
    newer.write_text(json.dumps(d))
    loader = kiln.Loader(description=newer,
                         config=isolated_config(tmp_path, artifact_path=[tiny_package.store]))
    with pytest.raises(kiln.StaleError) as e:
        loader.get("scale_dtype_f32")
    check(e.value, kiln.StaleError, "stale", 4)
    assert (e.value.uri, e.value.target) == ("scale_dtype_f32", "sm_90")
    assert "package_version differs: archive has 1.0.0" in str(e.value)


def test_driver_error_from_the_launch(stand_in, tiny_package, tmp_path, monkeypatch):
    loader = kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path))
    k = loader.get("scale_dtype_f32")
    monkeypatch.setenv("KILN_STAND_IN_LAUNCH_ERROR", "700")
    with pytest.raises(kiln.DriverError) as e:
        loader.launch(k, 1, 1, [0, 0, kiln.f32(1.0), 4])
    check(e.value, kiln.DriverError, "driver", 11)
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in str(e.value)


# A tier's own failure (a mirror unreachable, NVRTC refusing a source) is one rejected candidate
# of get(); get() fails as not-found naming it (stale or integrity only when every candidate that
# would have run failed for that reason: plan/resolver.hpp, resolution_failure). Network and
# compile errors are therefore not raised as such by the Python API, only explained.
def test_unreachable_mirror_is_explained_in_the_not_found_error(stand_in, tiny_package, tmp_path):
    loader = kiln.Loader(description=tiny_package.description, config=isolated_config(
        tmp_path, offline=False, use_installed_store=False, mirrors=["http://127.0.0.1:9/"],
        index_sha256="0" * 64))
    with pytest.raises(kiln.NotFoundError) as e:
        loader.get("scale_dtype_f32")
    check(e.value, kiln.NotFoundError, "not-found", 6)
    assert "http://127.0.0.1:9/pyt-kernels-1.0.0-index.json: connection failed" in str(e.value)


def test_jit_compile_failure_is_explained_in_the_not_found_error(stand_in, tiny_package, tmp_path):
    loader = kiln.Loader(description=tiny_package.description, config=isolated_config(
        tmp_path, disable_jit=False, use_installed_store=False))
    with pytest.raises(kiln.NotFoundError) as e:
        loader.get("broken")
    assert "[jit sm_90]" in str(e.value) and "NVRTC failed to compile broken" in str(e.value)
    assert "NVRTC is meant to fail here" in str(e.value)


def test_jit_tier_compiles_with_nvrtc_when_the_store_lacks_the_kernel(stand_in, tiny_package,
                                                                     tmp_path):
    loader = kiln.Loader(description=tiny_package.description, config=isolated_config(
        tmp_path, disable_jit=False, use_installed_store=False))
    k = loader.get("scale_dtype_i32")
    assert k.origin.startswith("jit:") and k.origin.endswith(".cubin")


def test_unsupported_without_a_driver(tiny_package):
    r = run_child(f"""
        import kiln
        try:
            kiln.devices()
        except kiln.UnsupportedError as e:
            print("devices", e.kind, e.exit_code, e.message)
        loader = kiln.Loader(description={str(tiny_package.description)!r},
                             config=kiln.Config(offline=True, disable_jit=True))
        try:
            loader.get("scale_dtype_f32")
        except kiln.Error as e:
            print("get", type(e).__name__, e.message)
    """, {"LD_LIBRARY_PATH": "/nonexistent"})
    assert r.returncode == 0, r.stderr
    if "devices unsupported 5" not in r.stdout:
        pytest.skip("a CUDA driver is present here")
    assert "libcuda.so.1" in r.stdout
    assert "get UnsupportedError" in r.stdout
