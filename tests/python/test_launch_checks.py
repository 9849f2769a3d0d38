"""Launches that never crash or change a value (issue 40, items 1-3), on the stand-in driver:
the argument count and sizes checked against the kernel's parameters as the driver reports them
(cuKernelGetParamInfo), every number converted exactly or refused with its name and range, and
one rule for devices and streams, with two stand-in devices."""

import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
import kiln._arrays
import kiln.ops
from conftest import STAND_IN, STAND_IN_DIR, isolated_config
from test_dlpack import DLPackArray
from test_loader import CudaCoreLikeStream, FakeDeviceArray

SCALE = "scale_dtype_f32"  # pyt::scale_kernel<float>(float* y, const float* x, float a, int n)


@pytest.fixture
def loader(tiny_package, tmp_path):
    return kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path))


def good_args(y=0x1000, x=0x2000):
    return [y, x, kiln.f32(2.0), 16]


# ---- 1. the kernel's own parameter list ----------------------------------------------------

def test_a_kernel_reports_its_parameters_as_the_driver_does(stand_in, loader):
    k = loader.get(SCALE)
    assert k.num_arguments == 4
    assert [(a.offset, a.size) for a in k.arguments_info] == [(0, 8), (8, 8), (16, 4), (20, 4)]
    assert list(k.entry_arguments_info(0)) == list(k.arguments_info)
    assert k.device == 0


@pytest.mark.parametrize("count", [0, 1, 3, 5])
def test_a_wrong_argument_count_is_a_usage_error_and_nothing_is_launched(stand_in, loader, count):
    args = (good_args() + [5])[:count]
    with pytest.raises(kiln.UsageError) as e:
        loader.launch(loader.get(SCALE), 1, 32, args)
    assert f"{SCALE} takes 4 arguments, {len(args)} given" in str(e.value)
    assert (e.value.argument, e.value.uri) == ("args", SCALE)
    assert (e.value.expected, e.value.actual) == ("4", str(len(args)))
    assert stand_in.lines() == []


def test_a_wrong_count_never_crashes_the_interpreter(stand_in, tiny_package, tmp_path):
    # What the issue saw: one argument for four parameters took the interpreter down (SIGSEGV)
    # when the driver read the slots past the list. In a child, so a crash fails only this test.
    code = textwrap.dedent(f"""
        import ctypes, kiln
        ctypes.CDLL({str(STAND_IN)!r}, mode=ctypes.RTLD_GLOBAL)
        cfg = kiln.Config(cache_dir={str(tmp_path / "c")!r}, offline=True, disable_jit=True)
        loader = kiln.Loader(description={str(tiny_package.description)!r}, config=cfg)
        try:
            loader.launch(loader.get("{SCALE}"), 1, 32, [1])
        except kiln.UsageError as e:
            print("refused:", e)
    """)
    env = dict(os.environ, LD_LIBRARY_PATH=str(STAND_IN_DIR))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert f"refused: args: {SCALE} takes 4 arguments, 1 given" in r.stdout


@pytest.mark.parametrize("index,make,says", [
    (2, lambda: kiln.f64(2.0), "a 8-byte kiln.f64 for parameter 2"),
    (2, lambda: np.float64(2.0), "a 8-byte float64 for parameter 2"),
    (3, lambda: kiln.i64(16), "a 8-byte kiln.i64 for parameter 3"),
    (3, lambda: 2**40, "the int 1099511627776 does not fit (-2147483648 to 4294967295)"),
    (3, lambda: FakeDeviceArray(0x3000), "a device pointer (8 bytes"),
    (0, lambda: kiln.f32(1.0), "a 4-byte kiln.f32 for parameter 0"),
])
def test_an_argument_that_does_not_fit_its_parameter_is_refused(stand_in, loader, index, make,
                                                                says):
    args = good_args()
    args[index] = make()
    with pytest.raises(kiln.UsageError) as e:
        loader.launch(loader.get(SCALE), 1, 32, args)
    assert says in str(e.value) and e.value.argument == f"args[{index}]"
    assert stand_in.lines() == []


def test_ints_fill_smaller_parameters_when_they_fit(stand_in, loader):
    args = good_args()
    args[3] = -1  # an int parameter: -1 fits
    loader.launch(loader.get(SCALE), 1, 32, args)
    assert stand_in.lines()[0].split(" params ")[1].split()[3] == "ffffffff"


def test_a_driver_that_cannot_report_parameters_leaves_launches_unchecked(stand_in, loader,
                                                                          monkeypatch):
    monkeypatch.setenv("KILN_STAND_IN_NO_PARAM_INFO", "1")
    monkeypatch.setenv("KILN_STAND_IN_PARAMS", "4")
    k = loader.get(SCALE)
    with pytest.raises(kiln.UnsupportedError) as e:
        k.num_arguments
    assert "cuKernelGetParamInfo" in str(e.value)
    loader.launch(k, 1, 32, good_args())
    assert len(stand_in.lines()) == 1


# ---- 2. numbers converted exactly or refused -----------------------------------------------

def test_shared_bytes_past_32_bits_is_refused_not_truncated(stand_in, loader):
    with pytest.raises(kiln.UsageError) as e:
        loader.launch(loader.get(SCALE), 1, 32, good_args(), shared_bytes=2**32 + 5)
    assert e.value.argument == "shared_bytes" and "4294967301 is out of range" in str(e.value)
    assert stand_in.lines() == []


def test_numpy_integers_are_integers_and_numpy_floats_are_not(stand_in, loader):
    loader.launch(loader.get(SCALE), grid=np.int64(4), block=(np.int32(2), 8), args=good_args(),
                  shared_bytes=np.uint32(64), entry=np.int64(0))
    assert "grid 4,1,1 block 2,8,1 shared 64" in stand_in.lines()[0]
    for kwargs, argument in ((dict(grid=np.float64(4.0), block=1), "grid"),
                             (dict(grid=1, block=(2, 4.0)), "block[1]"),
                             (dict(grid=1, block=1, shared_bytes=1.0), "shared_bytes")):
        with pytest.raises(kiln.UsageError) as e:
            loader.launch(loader.get(SCALE), args=good_args(), **kwargs)
        assert e.value.argument == argument


@pytest.mark.parametrize("make,value", [
    (kiln.f32, 1e300), (kiln.f32, -1e39), (kiln.f32, 2**2000), (kiln.f64, 2**2000),
    (kiln.f64, -(2**1100)),
])
def test_a_float_scalar_out_of_its_range_is_refused_with_the_range(make, value):
    with pytest.raises(kiln.UsageError) as e:
        make(value)
    assert "out of range [" in str(e.value)


def test_float_scalars_take_what_is_in_range_and_integer_scalars_take_index_types():
    assert kiln.f32(3.4e38).bytes == np.float32(3.4e38).tobytes()
    assert kiln.f32(float("inf")).bytes == np.float32("inf").tobytes()  # asked for, not overflowed
    assert kiln.f32(np.float64(0.5)).bytes == np.float32(0.5).tobytes()
    assert kiln.i32(np.int64(-5)).bytes == np.int32(-5).tobytes()
    assert kiln.u64(2**64 - 1).bytes == b"\xff" * 8
    for bad in (5.0, np.float64(5.0), True, "5"):
        with pytest.raises(kiln.UsageError):
            kiln.i32(bad)
    with pytest.raises(kiln.UsageError) as e:
        kiln.u8(np.int64(256))
    assert "256 is out of range [0, 255]" in str(e.value)


# ---- 3. devices and streams ----------------------------------------------------------------

class OnDevice(FakeDeviceArray):
    """A CAI producer that says its device as torch does (.device.index)."""

    def __init__(self, ptr, device, shape=(4,), stream=None):
        super().__init__(ptr, shape)
        self.__cuda_array_interface__["stream"] = stream

        class Dev:
            index = device
        self.device = Dev()


@pytest.fixture
def device_1(stand_in, monkeypatch):
    """Two stand-in devices, device 1's primary context current on this thread."""
    monkeypatch.setenv("KILN_STAND_IN_DEVICES", "2")
    cuda = ctypes.CDLL(str(STAND_IN))
    ctx = ctypes.c_void_p()
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 1) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    yield
    cuda.cuCtxSetCurrent(None)


def test_a_launch_with_an_array_of_another_device_is_refused(device_1, loader, stand_in):
    k = loader.get(SCALE)
    assert k.device == 1
    for other in (OnDevice(0x1000, device=0), DLPackArray(0x1000, (4,), device_id=0)):
        with pytest.raises(kiln.UsageError) as e:
            loader.launch(k, 1, 32, [other, 0x2000, kiln.f32(1.0), 4])
        assert e.value.argument == "args[0]"
        assert "on cuda:0" in str(e.value) and "loaded for cuda:1" in str(e.value)
    assert stand_in.lines() == []
    loader.launch(k, 1, 32, [OnDevice(0x1000, device=1), 0x2000, kiln.f32(1.0), 4])
    assert " ctx 1 " in stand_in.lines()[0]


def test_an_op_on_arrays_of_another_device_is_refused_before_anything_runs(device_1, stand_in):
    x, y = OnDevice(0x1000, device=0), OnDevice(0x2000, device=0)
    with pytest.raises(kiln.UsageError) as e:
        kiln.ops.axpy(y, x, 1.0, stream=0)
    assert e.value.argument == "y" and "current device is cuda:1" in str(e.value)
    assert stand_in.lines() == []


def test_an_inputs_cai_stream_is_synchronised_when_it_is_not_the_launchs(stand_in, loader):
    k = loader.get(SCALE)
    loader.launch(k, 1, 32, [OnDevice(0x1000, 0, stream=0x7000), 0, kiln.f32(1.0), 4],
                  stream=0x1234)
    assert stand_in.lines()[0] == "synchronize 0x7000"
    assert stand_in.lines()[1].startswith("launch ")
    # The launch's own stream, or the legacy default stream (1) for stream=None: no wait.
    loader.launch(k, 1, 32, [OnDevice(0x1000, 0, stream=0x1234), 0, kiln.f32(1.0), 4],
                  stream=0x1234)
    loader.launch(k, 1, 32, [OnDevice(0x1000, 0, stream=1), 0, kiln.f32(1.0), 4])
    assert [line.split()[0] for line in stand_in.lines()] == ["synchronize", "launch", "launch",
                                                              "launch"]
    with pytest.raises(kiln.UsageError) as e:
        loader.launch(k, 1, 32, [OnDevice(0x1000, 0, stream=0), 0, kiln.f32(1.0), 4])
    assert "stream is 0" in str(e.value)


def test_a_cuda_stream_protocol_of_an_unknown_version_is_refused(stand_in, loader):
    class Future(CudaCoreLikeStream):
        def __cuda_stream__(self):
            return (1, 0x6000)

    with pytest.raises(kiln.UsageError) as e:
        loader.launch(loader.get(SCALE), 1, 32, good_args(), stream=Future())
    assert e.value.argument == "stream" and "version 1" in str(e.value)


def test_stream_none_is_one_rule_for_launch_and_ops(stand_in, loader, reference_description,
                                                    tmp_path, monkeypatch):
    # Both ask kiln._arrays.default_stream (the arrays' framework's current stream).
    asked = []

    def default_stream(objs):
        asked.append(len(list(objs)))
        return 0x4242

    monkeypatch.setattr(kiln._arrays, "default_stream", default_stream)
    monkeypatch.setattr(kiln._ops_support, "default_stream", default_stream)
    loader.launch(loader.get(SCALE), 1, 32, [OnDevice(0x1000, 0), 0, kiln.f32(1.0), 4])
    assert "stream 0x4242 " in stand_in.lines()[0]
    loader.launch(loader.get(SCALE), 1, 32, good_args())  # ints only: no framework to ask
    assert "stream 0x0 " in stand_in.lines()[1]
    ref = kiln.Loader(description=reference_description, config=isolated_config(
        tmp_path, disable_jit=False, use_installed_store=False))
    kiln.ops.axpy(OnDevice(0x1000, 0, (8,)), OnDevice(0x2000, 0, (8,)), 2.0, loader=ref)
    assert "axpy_kernel" in stand_in.lines()[2] and "stream 0x4242 " in stand_in.lines()[2]
    assert asked
