#!/usr/bin/env python3
"""Launch overhead and cold start of kiln's Python runtime, against NVIDIA's own Python layers
(issue 25: goals at most 1.3x a raw cuLaunchKernel per call, at most 1.2x cuda.core's import
to first verified result). Needs a GPU; run it in the venv tests/gpu/python_ops_check.py makes
(--keep VENV), where kiln, kiln-kernels and its target wheel are installed:

    VENV/bin/python bench/python_launch_bench.py [--calls 20000] [--rounds 7] [--json]

1. Per launch, same process, same CUfunction (kiln-kernels' axpy_dtype_f32, n = 1024, grid 4,
   block 256), arguments packed on every call, the stream synchronised after each round:
     kiln      Loader.launch(k, 4, 256, [n, kiln.f32(0.5), x, y])
     bindings  cuda.bindings.driver.cuLaunchKernel(f, ..., ((n, a, x, y), (c_longlong,
               c_float, None, None)), 0)   (if cuda-bindings is installed)
     ctypes    libcuda.so.1's cuLaunchKernel through ctypes, params packed per call (always:
               the thinnest Python FFI there is, for nodes without cuda-bindings)
   Reports per-call median, min and max over the rounds (microseconds) and kiln's ratio to each.
2. A fresh interpreter's time from before `import kiln` to the first verified result (axpy on
   1024 floats, copied back and checked), against one that loads the same fatbin from the
   same store with cuda.core (ObjectCode.from_fatbin, launch) if cuda-core is installed. Both
   move memory through libcuda with ctypes, so neither pays for torch or CuPy. Median, min and
   max over --cold runs.
Say, with the figures, whether the machine was shared.

--no-gpu DESCRIPTION measures only the Python side of part 1 where there is no GPU: run with
the stand-in driver of tests/python (stand_in_cuda.c built as libcuda.so.1, its directory first
on LD_LIBRARY_PATH) and a package description whose store holds axpy_dtype_f32 for CC 9.0;
pointers are fake (the stand-in runs nothing) and cuda-bindings is skipped (it needs the real
driver's entry points). What it shows is the per-call cost of argument packing and the call
path, which a real launch adds to the driver's own work.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

N = 1024
GRID, BLOCK = 4, 256


def cuda_lib(launch_only=False):
    lib = ctypes.CDLL("libcuda.so.1")
    names = ["cuLaunchKernel"]
    if not launch_only:
        names += ["cuMemAlloc_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuCtxSynchronize"]
    for name in names:
        getattr(lib, name).restype = ctypes.c_int
    return lib


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed: CUresult {rc}")


def device_buffers(lib, x_host):
    x, y = ctypes.c_uint64(), ctypes.c_uint64()
    nbytes = N * 4
    check(lib.cuMemAlloc_v2(ctypes.byref(x), ctypes.c_size_t(nbytes)), "cuMemAlloc")
    check(lib.cuMemAlloc_v2(ctypes.byref(y), ctypes.c_size_t(nbytes)), "cuMemAlloc")
    check(lib.cuMemcpyHtoD_v2(x, x_host, ctypes.c_size_t(nbytes)), "cuMemcpyHtoD")
    zeros = (ctypes.c_float * N)()
    check(lib.cuMemcpyHtoD_v2(y, zeros, ctypes.c_size_t(nbytes)), "cuMemcpyHtoD")
    return x.value, y.value


def rounds(fn, calls, count, lib, sync=True):
    per_call = []
    for _ in range(count):
        if sync:
            check(lib.cuCtxSynchronize(), "sync")
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        if sync:
            check(lib.cuCtxSynchronize(), "sync")
        per_call.append((time.perf_counter() - t) / calls * 1e6)
    return {"median_us": statistics.median(per_call), "min_us": min(per_call),
            "max_us": max(per_call), "rounds": count, "calls": calls}


def launch_overhead(calls, count, description=None):
    import kiln

    if description:
        loader = kiln.Loader(description=description, config=kiln.Config(
            cache_dir=os.path.join(os.path.dirname(description), ".bench-cache"), offline=True))
    else:
        loader = kiln.load("kiln-kernels")
    k = loader.get("axpy_dtype_f32")
    sync = description is None
    lib = cuda_lib(launch_only=not sync)
    if sync:
        x_host = (ctypes.c_float * N)(*([1.0] * N))
        x, y = device_buffers(lib, x_host)
    else:
        x, y = 0x7F0000001000, 0x7F0000002000  # the stand-in reads nothing
    f = k.functions[0]
    results = {"kernel": k.uri, "origin": k.origin}
    # Every launcher packs its arguments on every call, the scalar's type included.
    results["kiln"] = rounds(lambda: loader.launch(k, GRID, BLOCK, [N, kiln.f32(0.5), x, y]),
                             calls, count, lib, sync)

    def ctypes_launch():
        n_, a_, x_, y_ = ctypes.c_longlong(N), ctypes.c_float(0.5), ctypes.c_uint64(x), \
            ctypes.c_uint64(y)
        params = (ctypes.c_void_p * 4)(ctypes.addressof(n_), ctypes.addressof(a_),
                                       ctypes.addressof(x_), ctypes.addressof(y_))
        check(lib.cuLaunchKernel(ctypes.c_void_p(f), GRID, 1, 1, BLOCK, 1, 1, 0, None, params,
                                 None), "cuLaunchKernel")

    results["ctypes"] = rounds(ctypes_launch, calls, count, lib, sync)
    try:
        if not sync:
            raise ImportError("skipped: no GPU")
        from cuda.bindings import driver
    except ImportError as e:
        results["bindings"] = None
        results["bindings_missing"] = str(e)
    else:
        func = driver.CUfunction(f)
        # Device pointers as plain ints need a ctypes type: None is only for binding objects
        # (CUdeviceptr and the like, which have getPtr()).
        types = (ctypes.c_longlong, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p)

        def bindings_launch():
            err, = driver.cuLaunchKernel(func, GRID, 1, 1, BLOCK, 1, 1, 0, 0,
                                         ((N, 0.5, x, y), types), 0)
            if err != driver.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"cuLaunchKernel: {err}")

        results["bindings"] = rounds(bindings_launch, calls, count, lib)
    for base in ("bindings", "ctypes"):
        if results[base]:
            results[f"kiln_over_{base}"] = (results["kiln"]["median_us"] /
                                            results[base]["median_us"])
    return results


COLD_KILN = r"""
import time; t0 = time.perf_counter()
import ctypes, sys, kiln
loader = kiln.load("kiln-kernels"); k = loader.get("axpy_dtype_f32")
sys.path.insert(0, sys.argv[1]); import python_launch_bench as b
lib = b.cuda_lib(); xh = (ctypes.c_float * b.N)(*([1.0] * b.N)); x, y = b.device_buffers(lib, xh)
loader.launch(k, b.GRID, b.BLOCK, [b.N, kiln.f32(2.0), x, y])
out = (ctypes.c_float * b.N)(); b.check(lib.cuMemcpyDtoH_v2(out, ctypes.c_uint64(y), b.N * 4), "DtoH")
assert all(v == 2.0 for v in out)
print(time.perf_counter() - t0, k.origin, loader.package.origin)
"""

COLD_CUDA_CORE = r"""
import time; t0 = time.perf_counter()
import ctypes, sys
from cuda.core import Device, LaunchConfig, ObjectCode, launch
dev = Device(0); dev.set_current(); stream = dev.create_stream()
kernel = ObjectCode.from_fatbin(sys.argv[2]).get_kernel(sys.argv[3])
sys.path.insert(0, sys.argv[1]); import python_launch_bench as b
lib = b.cuda_lib(); xh = (ctypes.c_float * b.N)(*([1.0] * b.N)); x, y = b.device_buffers(lib, xh)
launch(stream, LaunchConfig(grid=b.GRID, block=b.BLOCK), kernel, ctypes.c_longlong(b.N),
       ctypes.c_float(2.0), ctypes.c_uint64(x), ctypes.c_uint64(y))
stream.sync()
out = (ctypes.c_float * b.N)(); b.check(lib.cuMemcpyDtoH_v2(out, ctypes.c_uint64(y), b.N * 4), "DtoH")
assert all(v == 2.0 for v in out)
print(time.perf_counter() - t0)
"""


def cold(runs):
    here = os.path.dirname(os.path.abspath(__file__))
    kiln_s, core_s, origin = [], [], ""
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", COLD_KILN, here], capture_output=True,
                             text=True, check=True).stdout.split()
        kiln_s.append(float(out[0]))
        origin = out[1]
    result = {"kiln": summary(kiln_s), "origin": origin}
    fatbin = origin if os.path.isfile(origin) else ""
    try:
        import cuda.core  # noqa: F401
    except ImportError:
        result["cuda_core"] = None
        result["cuda_core_missing"] = "cuda-core is not installed"
        return result
    if not fatbin:
        result["cuda_core"] = None
        result["cuda_core_missing"] = f"kiln's artifact is not a file: {origin}"
        return result
    symbol = _axpy_symbol(fatbin)
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", COLD_CUDA_CORE, here, fatbin, symbol],
                             capture_output=True, text=True, check=True).stdout.split()
        core_s.append(float(out[0]))
    result["cuda_core"] = summary(core_s)
    result["kiln_over_cuda_core"] = result["kiln"]["median_s"] / result["cuda_core"]["median_s"]
    return result


def _axpy_symbol(fatbin):
    """The lowered name of axpy_kernel<float> in the store's manifest beside the artifact."""
    store_dir = os.path.dirname(fatbin)
    with open(os.path.join(store_dir, "manifest.json")) as f:
        manifest = json.load(f)
    for entry in manifest["artifacts"]:
        if entry["uri"] == "axpy_dtype_f32":
            return entry["entries"][0]["symbol"]
    raise RuntimeError(f"axpy_dtype_f32 not in {store_dir}/manifest.json")


def summary(xs):
    return {"median_s": statistics.median(xs), "min_s": min(xs), "max_s": max(xs), "runs": len(xs)}


def main() -> int:
    p = argparse.ArgumentParser(description="kiln Python launch overhead and cold start")
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--cold", type=int, default=5)
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-gpu", metavar="DESCRIPTION",
                   help="launch overhead only, on the stand-in driver (see above)")
    a = p.parse_args()
    result = {"launch": launch_overhead(a.calls, a.rounds, a.no_gpu)}
    result["cold"] = None if a.no_gpu else cold(a.cold)
    if a.json:
        print(json.dumps(result, indent=2))
        return 0
    L = result["launch"]
    print(f"launch per call ({L['kernel']}, n={N}, grid {GRID}, block {BLOCK}, "
          f"{a.rounds} rounds x {a.calls} calls):")
    for name in ("kiln", "bindings", "ctypes"):
        r = L[name]
        if r is None:
            print(f"  {name:9s} not measured: {L.get(name + '_missing', '')}")
        else:
            print(f"  {name:9s} median {r['median_us']:.2f} us (min {r['min_us']:.2f}, "
                  f"max {r['max_us']:.2f})")
    for base in ("bindings", "ctypes"):
        if f"kiln_over_{base}" in L:
            print(f"  kiln / {base}: {L[f'kiln_over_{base}']:.2f}x")
    C = result["cold"]
    if C is None:
        return 0
    print(f"fresh interpreter, import to first verified result ({a.cold} runs):")
    print(f"  kiln      median {C['kiln']['median_s']*1e3:.1f} ms (min "
          f"{C['kiln']['min_s']*1e3:.1f}, max {C['kiln']['max_s']*1e3:.1f}) from {C['origin']}")
    if C.get("cuda_core"):
        k = C["cuda_core"]
        print(f"  cuda.core median {k['median_s']*1e3:.1f} ms (min {k['min_s']*1e3:.1f}, max "
              f"{k['max_s']*1e3:.1f}); kiln / cuda.core: {C['kiln_over_cuda_core']:.2f}x")
    else:
        print(f"  cuda.core: {C.get('cuda_core_missing')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
