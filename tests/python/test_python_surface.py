"""The Python API as a Python GPU programmer meets it (issue 40, items 4 to 9): a device is an
ordinal and a compute capability is cc; errors are also the built-ins Python code catches;
Config is immutable, checked and comparable; a loader starts no driver before its first use and
closes deterministically; the torch custom ops are CUDA ops whose fakes check what the real ops
check; every public callable is documented with a signature, and dir(kiln) is the API."""

import importlib
import inspect
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import kiln
from conftest import STAND_IN, isolated_config

URI = "scale_dtype_f32"


@pytest.fixture
def loader(tiny_package, tmp_path):
    return kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path))


# ---- 4. device is an ordinal, cc a compute capability ----------------------------------------

def test_resolve_takes_a_device_ordinal_and_a_compute_capability_as_cc(stand_in, loader):
    assert loader.resolve(URI, device=0)["device"] == "sm_90"  # the stand-in's device 0: CC 9.0
    assert loader.resolve(URI, cc=kiln.ComputeCapability(9, 0))["chosen"]["target"] == "sm_90"
    assert loader.resolve(URI, cc="8.6")["chosen"] is None


def test_a_compute_capability_given_as_device_is_refused_naming_cc(stand_in, loader):
    with pytest.raises(kiln.UsageTypeError) as e:
        loader.resolve(URI, device="sm_90")
    assert "cc='sm_90'" in str(e.value) and e.value.argument == "device"
    with pytest.raises(kiln.UsageValueError) as e:
        loader.resolve(URI, device=90)  # no device 90: the old spelling of CC 9.0
    assert "cc=90" in str(e.value)
    with pytest.raises(TypeError):
        kiln.choose_target(["sm_90"], device="9.0")


def test_device_cc_is_a_compute_capability_pair(stand_in):
    (d,) = kiln.devices()
    assert d.ordinal == 0 and d.cc == kiln.ComputeCapability(9, 0) and d.target == "sm_90"
    assert (d.cc.major, d.cc.minor) == (9, 0) and d.cc >= (8, 0) and str(d.cc) == "9.0"


def test_choose_target_takes_a_device_or_a_cc_and_names_the_target(stand_in):
    offered = ["sm_80", "sm_90a", "compute_80"]
    assert kiln.choose_target(offered, device=0) == "sm_90a"
    assert kiln.choose_target(offered, cc=kiln.ComputeCapability(8, 6)) == "sm_80"
    why = kiln.target_choice(offered, cc=(8, 6))
    assert why["cc"] == (8, 6) and why["target"] == "sm_86" and "device" not in why


# ---- 5. errors Python code can catch ---------------------------------------------------------

def test_a_wrong_type_is_a_type_error_the_same_everywhere(tmp_path):
    raised = []
    for attempt in (lambda: kiln.Config(offline="yes"),
                    lambda: kiln.Config().replace(offline="yes"),
                    lambda: kiln.load("pyt-kernels", config={"offline": True}),
                    lambda: kiln.Loader(description=tmp_path / "x.package.json",
                                        config={"offline": True})):
        with pytest.raises(kiln.UsageError) as e:
            attempt()
        assert isinstance(e.value, TypeError), e.value
        raised.append(type(e.value))
    assert set(raised) == {kiln.UsageTypeError}


def test_a_wrong_value_is_a_value_error_and_a_missing_file_a_file_not_found_error(tmp_path):
    with pytest.raises(ValueError) as e:
        kiln.Config(log_level="nonsense")
    assert isinstance(e.value, kiln.UsageError)
    with pytest.raises(ValueError):
        kiln.choose_target(["sm_90"], cc="ninety")
    missing = tmp_path / "acme-kernels-1.0.0.package.json"
    with pytest.raises(FileNotFoundError) as e:
        kiln.Loader(description=missing)
    assert isinstance(e.value, kiln.NotFoundError) and e.value.filename == str(missing)


def test_native_usage_errors_are_value_errors_with_python_names():
    e = kiln._errors._from_native("usage", 2, "kiln::ops::rmsnorm: rows = 0 must be > 0",
                                  [("argument", "rows")])
    assert isinstance(e, ValueError) and isinstance(e, kiln.UsageError)
    assert "kiln::" not in str(e) and "kiln.ops.rmsnorm" in str(e)


class Cai:
    """A CUDA array (__cuda_array_interface__) at a made-up address: the ops' checks read only
    the interface; these calls never reach a launch."""

    def __init__(self, shape, typestr="<f4", ptr=0x1000):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape,
                                         "typestr": typestr, "strides": None, "version": 3}


def test_op_arguments_of_a_wrong_type_or_size_are_usage_errors_naming_them():
    import kiln.ops

    with pytest.raises(kiln.UsageTypeError) as e:
        kiln.ops.axpy(Cai((4,)), Cai((4,)), "a", loader=object())
    assert e.value.argument == "alpha"
    with pytest.raises(kiln.UsageValueError) as e:  # 2^31 rows: more than the kernel's int
        kiln.ops.softmax(Cai((2**31, 1)), out=Cai((2**31, 1)), loader=object())
    assert e.value.argument == "x" and "2147483648" in str(e.value)
    assert "_ops." not in str(e.value)


def test_an_empty_input_launches_nothing():
    import kiln.ops

    # No loader is asked for (loader=object() would fail at once): nothing to launch.
    x = Cai((0, 64))
    assert kiln.ops.rmsnorm(x, Cai((64,)), out=x, loader=object()) is x
    y = Cai((0,))
    assert kiln.ops.axpy(y, Cai((0,)), 0.5, loader=object()) is y

    class Out(Cai):
        filled = None

        def fill(self, value):
            self.filled = value

    out = Out((1,))  # the sum of nothing is 0, as torch.sum gives
    assert kiln.ops.reduce_sum(Cai((0,)), out=out, workspace=Cai((1024,)),
                               loader=object()) is out
    assert out.filled == 0


# ---- 6. Config: immutable, checked, comparable -----------------------------------------------

def test_config_is_immutable_and_says_how_to_change_it(loader):
    c = kiln.Config(artifact_path=["/a"])
    with pytest.raises(AttributeError) as e:
        c.offline = True
    assert isinstance(e.value, kiln.UsageError) and "replace(offline=" in str(e.value)
    with pytest.raises(AttributeError):
        loader.config.offline = True
    assert isinstance(c.artifact_path, tuple)  # no append that changes a copy
    with pytest.raises(AttributeError):
        c.artifact_path.append("/b")  # type: ignore[attr-defined]
    assert c.replace(offline=True).offline is True and c.offline is False


@pytest.mark.parametrize("field,value", [
    ("log_level", "nonsense"), ("api_log", 7), ("index_sha256", "abc"), ("offline", 1),
    ("mirrors", "https://one.example"), ("cache_dir", 3)])
def test_every_field_is_checked(field, value):
    with pytest.raises(kiln.UsageError) as e:
        kiln.Config(**{field: value})
    assert e.value.setting == field


def test_configs_compare_and_hash_by_value(tmp_path):
    a = kiln.Config(cache_dir=tmp_path, artifact_path=[tmp_path / "s"])
    b = kiln.Config(cache_dir=str(tmp_path), artifact_path=(str(tmp_path / "s"),))
    assert a == b and hash(a) == hash(b) and a != a.replace(offline=True)
    assert kiln.Config.from_env() == kiln.Config.from_env()


# ---- 7. lifetime ------------------------------------------------------------------------------

@pytest.mark.skipif(STAND_IN is None, reason="needs the stand-in driver")
def test_load_starts_no_driver_before_the_first_get(tiny_package, tmp_path):
    init_log = tmp_path / "init.log"
    code = textwrap.dedent(f"""
        import ctypes, sys, types
        ctypes.CDLL({str(STAND_IN)!r}, mode=ctypes.RTLD_GLOBAL)
        import kiln
        found = types.SimpleNamespace(name="pyt-kernels", version="1.0.0",
                                      description={str(tiny_package.description)!r},
                                      stores=[{str(tiny_package.store)!r}], stale=[])
        sys.modules["kiln._installed"] = types.SimpleNamespace(find_installed=lambda n: found)
        loader = kiln.load("pyt-kernels", cache_dir={str(tmp_path / "c")!r}, offline=True,
                           disable_jit=True)
        print(open({str(init_log)!r}).read().count("cuInit") if
              __import__("os").path.exists({str(init_log)!r}) else 0)
        loader.get("scale_dtype_f32")
        print(open({str(init_log)!r}).read().count("cuInit"))
        """)
    env = dict(os.environ, KILN_STAND_IN_INIT_LOG=str(init_log))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "1"]


def test_close_frees_the_loader_and_a_closed_loader_is_a_clear_error(stand_in, loader):
    k = loader.get(URI)
    loader.close()
    assert loader.closed
    for use in (lambda: loader.get(URI), lambda: loader.launch(k, 1, 1, []),
                lambda: k.functions):
        with pytest.raises(kiln.UsageValueError) as e:
            use()
        assert "closed" in str(e.value)
    assert k.uri == URI  # what it was stays readable
    loader.close()  # again: nothing


def test_a_loader_is_a_context_manager(stand_in, tiny_package, tmp_path):
    with kiln.Loader(description=tiny_package.description,
                     config=isolated_config(tmp_path)) as loader:
        loader.get(URI)
    assert loader.closed
    with pytest.raises(ValueError):
        loader.get(URI)


# ---- 8. torch custom ops -----------------------------------------------------------------------

def test_torch_ops_are_registered_for_cuda_only():
    torch = pytest.importorskip("torch")
    import kiln.torch_ops  # noqa: F401

    x, w = torch.ones(2, 8), torch.ones(8)
    with pytest.raises(NotImplementedError):  # not kiln.ops on host memory: no CPU kernel
        torch.ops.kiln.rmsnorm(x, w, 1e-6)


def test_the_fake_of_axpy_checks_contiguity_as_the_real_op_does():
    torch = pytest.importorskip("torch")
    import kiln.torch_ops  # noqa: F401
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        y = torch.empty(8, 8).t()  # not contiguous
        with pytest.raises(kiln.UsageError) as e:
            torch.ops.kiln.axpy_(y, torch.empty(8, 8), 0.5)
        assert e.value.argument == "y"
        with pytest.raises(kiln.UsageError) as e:
            torch.ops.kiln.rmsnorm(torch.empty(2, 8), torch.empty(8), -1.0)
        assert e.value.argument == "eps"


# ---- 9. a documented, typed surface ----------------------------------------------------------

def test_dir_of_kiln_is_the_api():
    names = set(dir(kiln))
    assert {"annotations", "pathlib", "warnings", "NamedTuple", "TYPE_CHECKING", "Any"} \
        .isdisjoint(names)
    assert "ops" in names and set(kiln.__all__) <= names
    ops = importlib.import_module("kiln.ops")
    assert {"rmsnorm", "axpy", "use_loader"} <= set(ops.__all__)


def _public_callables():
    for name in kiln.__all__:
        obj = getattr(kiln, name)
        if isinstance(obj, type) and issubclass(obj, (BaseException, tuple)):
            continue
        if name in ("ArgumentInfo", "Kernel", "Package", "Scalar"):  # made by the runtime
            if name == "Package":
                yield "kiln.Package.from_file", obj.from_file
                yield "kiln.Package.from_library", obj.from_library
            continue
        yield f"kiln.{name}", obj
        if isinstance(obj, type):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and callable(getattr(obj, attr)):
                    yield f"kiln.{name}.{attr}", getattr(obj, attr)


def test_every_public_callable_has_a_signature_and_a_docstring():
    import kiln.ops

    found = list(_public_callables())
    found += [(f"kiln.ops.{n}", getattr(kiln.ops, n)) for n in kiln.ops.__all__
              if callable(getattr(kiln.ops, n))]
    for name, obj in found:
        sig = inspect.signature(obj)  # ValueError for a callable without one
        doc = inspect.getdoc(obj) or ""
        assert doc.strip(), name
        for p in sig.parameters:
            if p not in ("self", "cls", "fields", "_arrange") and not p.startswith("_"):
                assert p in doc, (name, p)
    assert {"kiln.Loader.get", "kiln.Loader.launch", "kiln.Config.replace",
            "kiln.f32"} <= {n for n, _ in found}


def test_the_stubs_cover_the_extension():
    stubs = pathlib.Path(kiln.__file__).parent / "_kiln"
    text = (stubs / "__init__.pyi").read_text()
    for name in ("class Loader", "def close", "def parse_cc", "def choose_target"):
        assert name in text, name
