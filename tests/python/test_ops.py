"""kiln.ops: the reference ops' argument checks, and a launch through the real loader of the
reference package (kiln-kernels' description; its JIT tier compiles the kernel with the real
NVRTC for the stand-in's CC 9.0)."""

import pytest

import kiln
import kiln._ops_support
import kiln.ops
from conftest import isolated_config
from test_loader import FakeDeviceArray


@pytest.fixture
def ref_loader(reference_description, tmp_path):
    return kiln.Loader(description=reference_description, config=isolated_config(
        tmp_path, disable_jit=False, use_installed_store=False))


def arr(ptr, shape, typestr="<f4", strides=None):
    return FakeDeviceArray(ptr, shape, typestr, strides)


def test_axpy_launches_the_reference_kernel_with_the_arrays(stand_in, ref_loader, monkeypatch):
    monkeypatch.setenv("KILN_STAND_IN_PARAMS", "4")
    y, x = arr(0x10000, (8, 4)), arr(0x20000, (8, 4))
    assert kiln.ops.axpy(y, x, 2.0, loader=ref_loader, stream=0x77) is y
    (line,) = stand_in.lines()
    assert "axpy_kernel" in line and "stream 0x77" in line
    n, alpha, xp, yp = line.split(" params ")[1].split()
    assert int.from_bytes(bytes.fromhex(n), "little") == 32
    assert (int.from_bytes(bytes.fromhex(xp), "little"),
            int.from_bytes(bytes.fromhex(yp), "little")) == (0x20000, 0x10000)


def test_rmsnorm_picks_the_block_for_its_columns(stand_in, ref_loader):
    x, w = arr(0x10000, (4, 1024), "<f2"), arr(0x30000, (1024,), "<f2")
    kiln.ops.rmsnorm(x, w, 1e-5, out=x, loader=ref_loader, stream=0)
    uri = kiln._kiln._ops.choose_uri_rmsnorm("f16", 1024)
    assert "rmsnorm" in stand_in.lines()[0] and "block_" in uri


@pytest.mark.parametrize("call,argument,says", [
    (lambda L: kiln.ops.axpy(arr(0x100, (4,)), arr(0x200, (5,)), 1.0, loader=L), "x", "shape"),
    (lambda L: kiln.ops.axpy(arr(0x100, (4,)), arr(0x200, (4,), "<f2"), 1.0, loader=L), "x",
     "dtype"),
    (lambda L: kiln.ops.axpy(arr(0x100, (4,), "<i4"), arr(0x200, (4,), "<i4"), 1.0, loader=L),
     "y", "dtype"),
    (lambda L: kiln.ops.softmax(arr(0x100, (4, 8), strides=(4, 32)), out=arr(0x300, (4, 8)),
                                loader=L), "x", "contiguous"),
    (lambda L: kiln.ops.rmsnorm(arr(0x100, (4, 8)), arr(0x200, (4,)), out=arr(0x300, (4, 8)),
                                loader=L), "weight", "shape"),
    (lambda L: kiln.ops.silu_and_mul(arr(0x100, (4, 8), "<f4"), out=arr(0x300, (4, 4)),
                                     loader=L), "x", "dtype"),
    (lambda L: kiln.ops.gemm_f32(arr(0x100, (4, 8)), arr(0x200, (7, 2)), out=arr(0x300, (4, 2)),
                                 loader=L), "b", "[K, N]"),
    (lambda L: kiln.ops.softmax(arr(0x100, (4, 8)), loader=L), "out", "give out="),
    (lambda L: kiln.ops.softmax(object(), loader=L), "x", "no device array"),
])
def test_ops_check_their_arrays_before_any_launch(stand_in, ref_loader, call, argument, says):
    with pytest.raises(kiln.UsageError) as e:
        call(ref_loader)
    assert e.value.argument == argument and says in str(e.value)
    assert stand_in.lines() == []


def test_ops_refuse_a_loader_of_another_package(stand_in, tiny_package, tmp_path):
    other = kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path))
    with pytest.raises(kiln.UsageError) as e:
        kiln.ops.axpy(arr(0x100, (4,)), arr(0x200, (4,)), 1.0, loader=other)
    assert e.value.package == "pyt-kernels"


def test_ops_default_loader_is_the_installed_reference_package(monkeypatch):
    monkeypatch.setattr(kiln._ops_support, "_default_loader", None)
    with pytest.raises(kiln.NotFoundError) as e:
        kiln.ops.axpy(arr(0x100, (4,)), arr(0x200, (4,)), 1.0)
    assert e.value.package == "kiln-kernels"


def test_an_out_given_through_dlpack_is_read_for_the_ops_stream(stand_in, ref_loader):
    from test_dlpack import DLPackArray

    x, w = arr(0x10000, (4, 1024)), arr(0x30000, (1024,))
    out = DLPackArray(0x50000, (4, 1024), code=2, bits=32)  # float32, device 0
    assert kiln.ops.rmsnorm(x, w, 1e-5, out=out, loader=ref_loader, stream=0x99) is out
    assert out.calls == [0x99]  # the producer orders its work before the op's stream
    (line,) = stand_in.lines()
    assert "stream 0x99" in line
