"""kiln.Loader over a package built by the real `kiln build`: get, prefetch, resolve, launch and
its arguments, on the stand-in driver (conftest.py): what reaches cuLaunchKernel is logged."""

import struct

import numpy as np
import pytest

import kiln
from conftest import isolated_config


class FakeDeviceArray:
    """A producer of __cuda_array_interface__ (as CuPy and PyTorch are) at a given address."""

    def __init__(self, ptr, shape=(4,), typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape,
                                         "typestr": typestr, "strides": strides, "version": 3}


class TorchLikeStream:
    cuda_stream = 0x5000


class CudaCoreLikeStream:
    def __cuda_stream__(self):
        return (0, 0x6000)


@pytest.fixture
def loader(tiny_package, tmp_path):
    return kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path))


def hexle(fmt, value):
    return struct.pack("<" + fmt, value).ljust(8, b"\0").hex()


def test_package_reads_the_description(tiny_package):
    p = kiln.Package.from_file(tiny_package.description)
    assert (p.name, p.version) == ("pyt-kernels", "1.0.0")
    assert p.uris == ["broken", "scale_dtype_f32", "scale_dtype_i32"]


def test_get_loads_the_verified_artifact_from_the_store(stand_in, loader, tiny_package):
    k = loader.get("scale_dtype_f32")
    assert k.uri == "scale_dtype_f32" and k.entries == 1
    assert str(tiny_package.store) in k.origin
    assert loader.get("scale_dtype_f32").functions == k.functions  # once per context


def test_launch_packs_each_kind_of_argument(stand_in, loader, monkeypatch):
    # A kernel of seven parameters of these sizes, as the stand-in driver reports it.
    monkeypatch.setenv("KILN_STAND_IN_PARAM_SIZES", "8,8,4,4,8,1,8")
    k = loader.get("scale_dtype_f32")
    args = [0x7F0000001000, FakeDeviceArray(0x7F0000002000), kiln.f32(2.5), np.int32(-7),
            np.float64(0.5), kiln.u8(255), -1]
    loader.launch(k, grid=(3, 2), block=128, args=args, shared_bytes=64, stream=0x1234)
    (line,) = stand_in.lines()
    head, params = line.split(" params ")
    assert "scale_kernel" in head
    assert "grid 3,2,1 block 128,1,1 shared 64 ctx 0 stream 0x1234" in head
    slots = params.split()
    assert slots[0] == hexle("Q", 0x7F0000001000)
    assert slots[1] == hexle("Q", 0x7F0000002000)
    assert slots[2][:8] == struct.pack("<f", 2.5).hex()
    assert slots[3][:8] == struct.pack("<i", -7).hex()
    assert slots[4] == hexle("d", 0.5)
    assert slots[5][:2] == "ff"
    assert slots[6] == "ff" * 8


@pytest.mark.parametrize("stream,expected", [(None, "0x0"), (TorchLikeStream(), "0x5000"),
                                             (CudaCoreLikeStream(), "0x6000")])
def test_streams_from_ints_and_framework_objects(stand_in, loader, stream, expected):
    loader.launch(loader.get("scale_dtype_f32"), 1, 1, [0, 0, kiln.f32(1.0), 4], stream=stream)
    assert f"stream {expected} params" in stand_in.lines()[0]


@pytest.mark.parametrize("arg,says", [
    (1.5, "a float needs a type: kiln.f32(x)"),
    (True, "a bool has no kernel type"),
    (np.zeros(4, np.float32), "in host memory"),
    ("ptr", "is no kernel argument"),
    (2**64, "does not fit in 64 bits"),
])
def test_argument_that_is_no_kernel_argument_is_a_usage_error_naming_it(stand_in, loader, arg,
                                                                        says):
    k = loader.get("scale_dtype_f32")
    with pytest.raises(kiln.UsageError) as e:
        loader.launch(k, 1, 1, [0, arg])
    assert e.value.argument == "args[1]" and says in str(e.value)
    assert stand_in.lines() == []  # nothing launched


@pytest.mark.parametrize("kwargs,argument", [
    (dict(grid=0, block=1), "grid"), (dict(grid=(1, 1, 1, 1), block=1), "grid"),
    (dict(grid=1, block=-3), "block"), (dict(grid=1, block=1, stream="s"), "stream"),
    (dict(grid=1, block=1, entry=1), "entry"),
])
def test_bad_launch_geometry_stream_or_entry_is_a_usage_error(stand_in, loader, kwargs, argument):
    with pytest.raises(kiln.UsageError) as e:
        loader.launch(loader.get("scale_dtype_f32"), args=[], **kwargs)
    assert e.value.argument == argument


def test_scalar_wrappers_check_their_range():
    assert kiln.i32(-5).bytes == struct.pack("<i", -5)
    assert kiln.f64(1).bytes == struct.pack("<d", 1.0)
    with pytest.raises(kiln.UsageError):
        kiln.u32(-1)
    with pytest.raises(kiln.UsageError):
        kiln.i8(128)


def test_kernel_of_another_loader_is_refused(stand_in, loader, tiny_package, tmp_path):
    other = kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path))
    with pytest.raises(kiln.UsageError) as e:
        loader.launch(other.get("scale_dtype_f32"), 1, 1, [])
    assert e.value.argument == "kernel"


def test_resolve_gives_the_decision_with_resolution_to_jsons_keys(loader, tiny_package):
    r = loader.resolve("scale_dtype_f32", cc="sm_90")
    assert set(r) >= {"uri", "device", "chosen", "rejected"}
    assert r["device"] == "sm_90"
    assert r["chosen"]["tier"] == "store" and r["chosen"]["target"] == "sm_90"
    assert set(loader.resolve("scale_dtype_f32", cc=90, explain=False)) == {
        "uri", "device", "chosen"}
    # CC 8.6: the package has only sm_90, and JIT is off: nothing chosen, each refusal says why.
    r86 = loader.resolve("scale_dtype_f32", cc="8.6")
    assert r86["chosen"] is None
    assert any("sm_90" in c["reason"] for c in r86["rejected"])


def test_prefetch_loads_every_uri_and_reports_each_missing_one(stand_in, loader):
    loader.prefetch(["scale_dtype_f32", "scale_dtype_i32"])
    with pytest.raises(kiln.NotFoundError) as e:
        loader.prefetch(["scale_dtype_f32", "no_such_uri"])
    assert "no_such_uri" in str(e.value)


def test_choose_target_is_the_one_target_choice_rule():
    offered = ["sm_80", "sm_90a", "compute_80"]
    assert kiln.choose_target(offered, cc=90) == "sm_90a"
    assert kiln.choose_target(offered, cc="8.6") == "sm_80"
    assert kiln.choose_target(offered, cc=120) == "compute_80"
    assert kiln.choose_target(["sm_90a"], cc=75) is None
    why = kiln.target_choice(["sm_90a", "sm_80"], cc=86)
    assert why["target"] == "sm_86" and why["candidates"][0][0] == "sm_80"
    assert why["rejected"][0][0] == "sm_90a" and "9.0" in why["rejected"][0][1]
    with pytest.raises(kiln.UsageError):
        kiln.choose_target(offered, cc="ninety")


def test_devices_and_choose_target_default_come_from_the_driver(stand_in):
    assert kiln.devices() == [kiln.Device(0, "kiln stand-in CC 9.0", kiln.ComputeCapability(9, 0), "sm_90")]
    assert kiln.choose_target(["sm_80", "sm_90"]) == "sm_90"


def test_load_puts_the_store_of_the_best_target_first(stand_in, tmp_path):
    # The loader's store order wins over target preference, so kiln.load orders the target
    # wheels' stores by the target-choice rule for device 0 (the stand-in: CC 9.0).
    ptx, sass, other = tmp_path / "compute80", tmp_path / "sm90a", tmp_path / "sm100"
    for store, target in ((ptx, "compute_80"), (sass, "sm_90a"), (other, "sm_100")):
        (store / f"acme-kernels-1.2.0-cuda13.0-{target}").mkdir(parents=True)
    assert kiln._stores_best_first("acme-kernels", [ptx, other, sass]) == [sass, ptx, other]
    # Listed by the loader's store rule: another package's archive, or a name that is not an
    # archive directory's, offers nothing, and the store keeps its place after.
    foreign = tmp_path / "foreign"
    (foreign / "other-kernels-1.0.0-cuda13.0-sm_90a").mkdir(parents=True)
    (foreign / ".acme-kernels-1.2.0-cuda13.0-sm_90a").mkdir()
    assert kiln._stores_best_first("acme-kernels", [foreign, ptx]) == [ptx, foreign]
    assert kiln._kiln._store_targets(str(tmp_path / "missing"), "acme-kernels") == []
