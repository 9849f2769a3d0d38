#!/usr/bin/env python3
"""On-device proof of kiln's Python runtime (issue 25): run on a GPU node with no source tree.

    python3 tests/gpu/python_ops_check.py --wheels DIR [--keep VENV]

DIR holds what ci/release.sh publishes: the `kiln` runtime wheel, the kiln-kernels package
wheel and its target wheels (and, when present, acme-kernels' wheels). The script makes a venv
of this interpreter that sees the system's numpy/torch/cupy (--system-site-packages),
pip-installs the wheels from DIR alone (--no-index), then re-runs itself inside it and checks:

  1. every reference op from Python (kiln.ops on torch CUDA tensors, else CuPy arrays) against
     a NumPy reference: axpy, reduce_sum, rmsnorm, softmax, silu_and_mul, gemm_f32, gemm_f16;
  2. the same ops through torch.ops.kiln.* (when torch is there);
  3. Loader.launch on raw pointers (axpy), and the JIT tier (a Loader with no store: NVRTC);
  4. acme-kernels loaded from its own wheels beside kiln-kernels in one interpreter (if given);
  5. launches checked against the kernel's parameters as the real driver reports them
     (cuKernelGetParamInfo), numbers refused rather than truncated, and the device and stream
     rule with real arrays: an input written on another stream is waited for, stream=None is
     the framework's current stream, arrays of another device are refused (2+ GPUs).

Prints one line per check and 'N passed, M failed'; exit 0 when all pass, 1 otherwise, 77 with
a message when this machine has no usable GPU.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile


def gpu_problem() -> str:
    """"" when libcuda.so.1 loads and reports a device, else why not (checked before any
    install, so a machine without a GPU exits 77 at once)."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"no CUDA driver ({e})"
    if cuda.cuInit(0) != 0:
        return "cuInit failed (no usable device or driver)"
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "the driver reports no device"
    return ""


def outer(args) -> int:
    problem = gpu_problem()
    if problem:
        print(f"python_ops_check: no GPU: {problem}")
        return 77
    wheels = os.path.abspath(args.wheels)
    for pattern, what in (("kiln-*-abi3-*.whl", "the kiln runtime wheel"),
                          ("kiln_kernels-*.whl", "the kiln-kernels package wheel")):
        if not glob.glob(os.path.join(wheels, pattern)):
            print(f"python_ops_check: no {what} ({pattern}) in {wheels}: give the directory "
                  "ci/release.sh publishes its wheels to")
            return 2
    venv = args.keep or tempfile.mkdtemp(prefix="kiln-gpu-venv-")
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    # When this interpreter is itself a venv (the GPU node's python3 is /opt/torch/.venv), a
    # venv made from it sees the base interpreter's packages, not this one's torch/CuPy/numpy:
    # a .pth file adds this interpreter's site-packages after the new venv's own.
    import site
    inner_site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(inner_site, "kiln-gpu-check-host.pth"), "w") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    pip = [py, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", wheels]
    subprocess.run(pip + ["kiln", "kiln-kernels"], check=True)
    # The target wheel for this machine: `python -m kiln install` when the runtime has it, else
    # every kiln-kernels target wheel in DIR (the loader picks by the target-choice rule).
    r = subprocess.run([py, "-m", "kiln", "install", "kiln-kernels", "--find-links", wheels,
                        "--no-index"])
    if r.returncode != 0:
        targets = [w for w in glob.glob(os.path.join(wheels, "kiln_kernels_*.whl"))]
        subprocess.run(pip + ["--no-deps", *targets], check=True)
    acme = glob.glob(os.path.join(wheels, "acme_kernels*.whl"))
    if acme:
        subprocess.run(pip + ["--no-deps", *acme], check=True)
    return subprocess.run([py, os.path.abspath(__file__), "--inner",
                           "--acme" if acme else "--no-acme"]).returncode


# ---- inside the venv --------------------------------------------------------------------------

class Checks:
    def __init__(self):
        self.passed, self.failed = 0, 0

    def run(self, name, fn):
        try:
            detail = fn()
            self.passed += 1
            print(f"ok   {name}" + (f": {detail}" if detail else ""), flush=True)
        except Exception as e:  # noqa: BLE001 - each check reports its own failure
            self.failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)


def inner(args) -> int:
    import numpy as np

    import kiln

    try:
        devs = kiln.devices()
    except kiln.Error as e:
        print(f"python_ops_check: no GPU: {e}")
        return 77
    if not devs:
        print("python_ops_check: no GPU: the driver reports no device")
        return 77
    print(f"kiln {kiln.__version__} from {os.path.dirname(kiln.__file__)}; devices: {devs}")
    xp = Framework()
    print(f"device arrays through {xp.name}")
    rng = np.random.default_rng(25)
    c = Checks()
    import kiln.ops as ops

    def close(got, want, rtol, atol, what):
        got = np.asarray(got, dtype=np.float64)
        want = np.asarray(want, dtype=np.float64)
        err = np.max(np.abs(got - want) / (atol + rtol * np.abs(want)))
        if not err <= 1.0:
            raise AssertionError(f"{what}: max scaled error {err:.3g} > 1")
        return f"max scaled error {err:.3g}"

    def axpy():
        for dt in ("float32", "float16"):
            x, y = rng.standard_normal(10000).astype(dt), rng.standard_normal(10000).astype(dt)
            dy = xp.to_device(y)
            ops.axpy(dy, xp.to_device(x), 0.75)
            close(xp.to_host(dy), 0.75 * x.astype(np.float32) + y, 1e-2, 1e-2, dt)
        return "f32, f16"

    def reduce_sum():
        x = rng.standard_normal(100000).astype(np.float32)
        out = ops.reduce_sum(xp.to_device(x))
        return close(xp.to_host(out).reshape(-1)[0], x.astype(np.float64).sum(), 1e-4, 1e-2,
                     "sum")

    def rmsnorm():
        x = rng.standard_normal((64, 1024)).astype(np.float32)
        w = rng.standard_normal(1024).astype(np.float32)
        out = ops.rmsnorm(xp.to_device(x), xp.to_device(w), 1e-6)
        want = x * w / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6)
        return close(xp.to_host(out), want, 1e-4, 1e-4, "rmsnorm")

    def softmax():
        x = rng.standard_normal((64, 512)).astype(np.float32)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return close(xp.to_host(ops.softmax(xp.to_device(x))), e / e.sum(axis=1, keepdims=True),
                     1e-4, 1e-6, "softmax")

    def silu_and_mul():
        x = rng.standard_normal((32, 2 * 256)).astype(np.float16)
        g, u = x[:, :256].astype(np.float32), x[:, 256:].astype(np.float32)
        want = g / (1 + np.exp(-g)) * u
        return close(xp.to_host(ops.silu_and_mul(xp.to_device(x))), want, 1e-2, 1e-2, "silu")

    def gemm_f32():
        a = rng.standard_normal((128, 96)).astype(np.float32)
        b = rng.standard_normal((96, 64)).astype(np.float32)
        return close(xp.to_host(ops.gemm_f32(xp.to_device(a), xp.to_device(b))), a @ b, 1e-4,
                     1e-3, "gemm_f32")

    def gemm_f16():
        a = rng.standard_normal((128, 128)).astype(np.float16)
        b = rng.standard_normal((128, 128)).astype(np.float16)
        want = a.astype(np.float32) @ b.astype(np.float32)
        return close(xp.to_host(ops.gemm_f16(xp.to_device(a), xp.to_device(b))), want, 1e-2,
                     1e-2, "gemm_f16")

    for name, fn in [("ops.axpy", axpy), ("ops.reduce_sum", reduce_sum),
                     ("ops.rmsnorm", rmsnorm), ("ops.softmax", softmax),
                     ("ops.silu_and_mul", silu_and_mul), ("ops.gemm_f32", gemm_f32),
                     ("ops.gemm_f16", gemm_f16)]:
        c.run(name, fn)

    if xp.name == "torch":
        import torch

        import kiln.torch_ops  # noqa: F401  (registers torch.ops.kiln.*)

        def torch_ops():
            x = torch.randn(16, 256, device="cuda")
            w = torch.randn(256, device="cuda")
            got = torch.ops.kiln.rmsnorm(x, w, 1e-6)
            want = x * w * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
            torch.testing.assert_close(torch.ops.kiln.gemm_f16(a, a), a.float() @ a.float(),
                                       rtol=1e-2, atol=1e-2)
            compiled = torch.compile(lambda t: torch.ops.kiln.softmax(t * 2), fullgraph=True,
                                     backend="aot_eager")
            torch.testing.assert_close(compiled(x), torch.softmax(x * 2, dim=1))
            return "rmsnorm, gemm_f16, compiled softmax"

        c.run("torch.ops.kiln", torch_ops)

        def empty_inputs():
            # As torch treats them: nothing launched, an empty result, zeros for a reduction
            # over no element (the zeros written by torch, on the GPU).
            e = torch.empty(0, 64, device="cuda")
            assert tuple(kiln.ops.softmax(e).shape) == (0, 64)
            s = kiln.ops.reduce_sum(torch.empty(0, device="cuda"))
            assert s.numel() == 1 and float(s.reshape(())) == 0.0
            a, b = torch.randn(8, 0, device="cuda"), torch.randn(0, 4, device="cuda")
            torch.testing.assert_close(kiln.ops.gemm_f32(a, b), torch.zeros(8, 4, device="cuda"))
            return "softmax of [0, 64], sum of nothing, gemm over K = 0"

        c.run("empty inputs", empty_inputs)

    loader = kiln.load("kiln-kernels")

    def raw_launch():
        x = rng.standard_normal(4096).astype(np.float32)
        y = np.zeros(4096, np.float32)
        dx, dy = xp.to_device(x), xp.to_device(y)
        k = loader.get("axpy_dtype_f32")
        loader.launch(k, grid=16, block=256, args=[4096, kiln.f32(2.0), xp.ptr(dx), xp.ptr(dy)])
        close(xp.to_host(dy), 2 * x, 1e-6, 1e-6, "axpy via launch")
        return f"from {k.origin}"

    def jit_tier():
        with tempfile.TemporaryDirectory() as cache:
            cfg = kiln.Config.from_env(artifact_path=[], use_installed_store=False,
                                       cache_dir=cache, offline=True, disable_jit=False)
            jl = kiln.Loader(description=loader.package.origin, config=cfg)
            k = jl.get("axpy_dtype_f32")
            assert k.origin.startswith("jit:"), k.origin
            x = rng.standard_normal(1000).astype(np.float32)
            dy = xp.to_device(np.zeros(1000, np.float32))
            jl.launch(k, 4, 256, [1000, kiln.f32(1.0), xp.ptr(xp.to_device(x)), xp.ptr(dy)])
            close(xp.to_host(dy), x, 1e-6, 1e-6, "jit axpy")
            return k.origin

    def closed_loader():
        # close() frees the modules now; a closed loader's kernel is refused, never launched.
        with kiln.load("kiln-kernels") as own:
            k = own.get("axpy_dtype_f32")
        try:
            own.launch(k, 1, 1, [0, kiln.f32(1.0), 0, 0])
        except kiln.UsageValueError as e:
            assert "closed" in str(e), e
        else:
            raise AssertionError("a closed loader launched")
        assert loader.get("axpy_dtype_f32").functions  # another loader is untouched
        return "with-block closed, launch refused"

    c.run("Loader.launch", raw_launch)
    c.run("Loader.close", closed_loader)
    c.run("JIT tier", jit_tier)

    def launch_checks():
        k = loader.get("axpy_dtype_f32")  # axpy_kernel<float>(long long n, float a, x, y)
        sizes = [a.size for a in k.arguments_info]
        assert k.num_arguments == 4 and sizes == [8, 4, 8, 8], sizes
        dy = xp.to_device(np.zeros(256, np.float32))
        for bad, says in (([1], "takes 4 arguments, 1 given"),
                          ([256, kiln.f64(1.0), xp.ptr(dy), xp.ptr(dy)], "8-byte kiln.f64")):
            try:
                loader.launch(k, 1, 256, bad)
            except kiln.UsageError as e:
                assert says in str(e), str(e)
            else:
                raise AssertionError(f"{bad} was launched")
        try:
            loader.launch(k, 1, 256, [256, kiln.f32(1.0), xp.ptr(dy), xp.ptr(dy)],
                          shared_bytes=2**32 + 5)
        except kiln.UsageError as e:
            assert e.argument == "shared_bytes", e
        else:
            raise AssertionError("shared_bytes=2**32+5 was launched")
        loader.launch(k, np.int64(1), 256, [256, kiln.f32(1.0), dy, dy])  # arrays, numpy int
        close(xp.to_host(dy), np.zeros(256), 1e-6, 1e-6, "axpy of zeros")
        return f"{k.uri}: parameters {sizes}; wrong count, size and shared_bytes refused"

    c.run("launch checks (driver's parameter list)", launch_checks)

    if xp.name == "torch":
        import torch

        class CaiV3:
            """A torch tensor's CUDA Array Interface as v3 producers (CuPy, Numba) give it:
            with the stream its data is written on (torch's own is v2, without one)."""

            def __init__(self, t, stream):
                cai = dict(t.__cuda_array_interface__, version=3)
                cai["stream"] = stream.cuda_stream or 1  # 1: the legacy default stream
                self.__cuda_array_interface__ = cai

        class DLPackOnly:
            """A torch tensor through DLPack alone (kiln prefers the array interface)."""

            def __init__(self, t):
                self.t = t

            def __dlpack__(self, stream=None):
                return self.t.__dlpack__(stream=stream)

            def __dlpack_device__(self):
                return self.t.__dlpack_device__()

        def streams_and_devices():
            k = loader.get("axpy_dtype_f32")
            n = 1 << 22
            src = torch.randn(n, device="cuda")
            producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
            for wrap, how in ((lambda t: CaiV3(t, producer), "CAI v3 stream synchronised"),
                              (DLPackOnly, "__dlpack__(stream=consumer)")):
                x = torch.zeros(n, device="cuda")
                y = torch.zeros(n, device="cuda")
                torch.cuda.synchronize()
                with torch.cuda.stream(producer):
                    torch.cuda._sleep(200_000_000)  # the copy lands long after this returns
                    x.copy_(src)
                    # Without the ordering, the kernel on `consumer` reads x before the copy.
                    loader.launch(k, (n + 255) // 256, 256, [n, kiln.f32(1.0), wrap(x), y],
                                  stream=consumer)
                consumer.synchronize()
                torch.testing.assert_close(y, src, msg=how)
            x = src
            y = torch.zeros(n, device="cuda")
            # stream=None inside a stream context: that stream, in Loader.launch and kiln.ops.
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                assert kiln._arrays.default_stream([x]) == s.cuda_stream
                y.zero_()
                loader.launch(k, (n + 255) // 256, 256, [n, kiln.f32(2.0), src, y])
                ops.axpy(y, src, -1.0)
            s.synchronize()
            torch.testing.assert_close(y, src)
            detail = ("CAI v3 stream and DLPack producer ordered before the launch; stream=None "
                      "is torch's current stream")
            if torch.cuda.device_count() < 2:
                return detail + "; one GPU: the two-device refusal is proven by the stand-in"
            x1 = torch.randn(1024, device="cuda:1")
            try:
                ops.softmax(x1)
            except kiln.UsageError as e:
                assert "cuda:1" in str(e), e
            else:
                raise AssertionError("an op on cuda:1 ran in cuda:0's context")
            with torch.cuda.device(1):
                out = ops.softmax(x1)
                k1 = loader.get("axpy_dtype_f32")
            assert out.device == x1.device and k1.device == 1
            torch.testing.assert_close(out, torch.softmax(x1, dim=-1))
            return detail + "; cuda:1 arrays refused in cuda:0, served under torch.cuda.device(1)"

        c.run("devices and streams (torch)", streams_and_devices)
    if args.acme:
        def acme():
            a = kiln.load("acme-kernels")
            x = rng.standard_normal(1000).astype(np.float32)
            dx = xp.to_device(x)
            k = a.get("scale_dtype_f32")
            a.launch(k, 4, 256, [1000, kiln.f32(3.0), xp.ptr(dx)])
            close(xp.to_host(dx), 3 * x, 1e-6, 1e-6, "acme scale")
            raw_launch()  # kiln-kernels still serves beside it
            return f"acme-kernels {a.package.version} beside kiln-kernels {loader.package.version}"

        c.run("two packages in one interpreter", acme)
    print(f"{c.passed} passed, {c.failed} failed")
    return 0 if c.failed == 0 else 1


class Framework:
    """Device arrays through torch if importable with CUDA, else CuPy."""

    def __init__(self):
        try:
            import torch

            if torch.cuda.is_available():
                self.name, self.mod = "torch", torch
                return
        except ImportError:
            pass
        import cupy

        self.name, self.mod = "cupy", cupy

    def to_device(self, a):
        if self.name == "torch":
            return self.mod.from_numpy(a.copy()).cuda()
        return self.mod.asarray(a)

    def to_host(self, d):
        if self.name == "torch":
            self.mod.cuda.synchronize()
            return d.cpu().numpy()
        return self.mod.asnumpy(d)

    def ptr(self, d):
        return d.data_ptr() if self.name == "torch" else d.data.ptr


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wheels", help="directory of the published wheels")
    p.add_argument("--keep", help="venv directory to make or reuse")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--acme", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--no-acme", dest="acme", action="store_false", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.inner:
        return inner(args)
    if not args.wheels:
        p.error("--wheels DIR is required")
    return outer(args)


if __name__ == "__main__":
    sys.exit(main())
