#pragma once
// One specialisation, end to end on the current CUDA context: fresh random inputs, NaN-poisoned
// output, the kernel obtained through Loader::get(uri, stream) and launched with the geometry of
// its kernels/*.cu launch table (its own block / tile parameters, not the ops API's choice),
// every output element checked against the CPU reference.
#include <string>
#include <vector>

#include "gpu_util.hpp"
#include "project/registry.hpp"

namespace kiln::gpu_test {

inline ::testing::AssertionResult sync_ok(cudaStream_t s, const std::string& what) {
  cudaError_t e = cudaStreamSynchronize(s);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess)
    return ::testing::AssertionFailure()
           << what << ": " << cudaGetErrorName(e) << " " << cudaGetErrorString(e);
  return ::testing::AssertionSuccess();
}

// Runs `spec` once with shape variant `variant` (0 or 1: two shapes per family, the second
// odd-sized). Throws kiln::Error from the loader; returns a failure for wrong results.
inline ::testing::AssertionResult check_spec(Loader& loader, const project::Specialisation& spec,
                                             cudaStream_t stream, int variant = 0) {
  const std::string& fam = spec.family;
  const std::string uri = spec.uri;
  const DType t = dtype_param(param(spec, "dtype"));
  const KernelHandle& k = loader.get(uri, stream);
  auto launch = [&](std::size_t entry, Loader::Dim3 grid, Loader::Dim3 block, void** args) {
    loader.launch(k, entry, grid, block, 0, stream, args);
  };
  std::vector<float> out, ref;
  const std::string what = uri + " variant " + std::to_string(variant);

  if (fam == "axpy") {
    long long n = variant ? (1LL << 20) + 3 : 1000;
    auto x = random_values(n, -2, 2, t), y = random_values(n, -2, 2, t);
    DeviceArray dx(t, n), dy(t, n);
    dx.upload(x);
    dy.upload(y);
    float alpha = 1.5f;
    void* xp = dx.get();
    void* yp = dy.get();
    void* args[] = {&n, &alpha, &xp, &yp};
    auto l = ops::axpy_launch(n);
    launch(0, l.grid, l.block, args);
    if (auto r = sync_ok(stream, what); !r) return r;
    ref = y;
    ref::axpy(ref, alpha, x);
    round_all(t, ref);
    out = dy.download();
  } else if (fam == "reduce_sum") {
    long long n = variant ? (1LL << 22) : 12345;
    float scale = n > 16384 ? 16384.0f / static_cast<float>(n) : 1.0f;
    auto x = random_values(n, 0, scale, t);
    DeviceArray dx(t, n), dout(t, 1), ws(DType::F32, 256);
    dx.upload(x);
    void* xp = dx.get();
    void* wp = ws.get();
    void* op = dout.get();
    void* a1[] = {&n, &xp, &wp};
    launch(0, {256, 1, 1}, {256, 1, 1}, a1);
    int partials = 256;
    void* a2[] = {&partials, &wp, &op};
    launch(1, {1, 1, 1}, {256, 1, 1}, a2);
    if (auto r = sync_ok(stream, what); !r) return r;
    ref = {round_to(t, ref::reduce_sum(x))};
    out = dout.download();
    // One rounded scalar: allow one ulp of the storage type on top of the float accumulation.
    double err = std::fabs(out[0] - ref[0]) / std::fabs(ref[0]);
    double tol = t == DType::F32 ? 1e-5 : t == DType::F16 ? 1e-3 : 8e-3;
    if (!std::isfinite(out[0]) || !(err < tol))
      return ::testing::AssertionFailure() << what << ": sum " << out[0] << " vs " << ref[0];
    return ::testing::AssertionSuccess();
  } else if (fam == "rmsnorm" || fam == "softmax") {
    const unsigned block = static_cast<unsigned>(std::stoi(param(spec, "block")));
    int rows = variant ? 37 : 8, cols = variant ? 5000 : 1000;
    auto in = random_values(static_cast<std::size_t>(rows) * cols, fam == "softmax" ? -10.f : -3.f,
                            fam == "softmax" ? 10.f : 3.f, t);
    DeviceArray din(t, in.size()), dout(t, in.size());
    din.upload(in);
    void* ip = din.get();
    void* op = dout.get();
    if (fam == "rmsnorm") {
      auto w = random_values(cols, 0.5f, 1.5f, t);
      DeviceArray dw(t, cols);
      dw.upload(w);
      void* wp = dw.get();
      float eps = 1e-6f;
      void* args[] = {&op, &ip, &wp, &rows, &cols, &eps};
      // variant 1: fewer blocks than rows (the kernel strides over rows)
      launch(0, {variant ? 5u : static_cast<unsigned>(rows), 1, 1}, {block, 1, 1}, args);
      if (auto r = sync_ok(stream, what); !r) return r;
      ref::rmsnorm(ref, in, w, rows, cols, eps);
    } else {
      void* args[] = {&op, &ip, &rows, &cols};
      launch(0, {static_cast<unsigned>(rows), 1, 1}, {block, 1, 1}, args);
      if (auto r = sync_ok(stream, what); !r) return r;
      ref::softmax(ref, in, rows, cols);
    }
    round_all(t, ref);
    out = dout.download();
  } else if (fam == "silu_and_mul") {
    long long rows = 13;
    int d = variant ? 4097 : 100;
    auto in = random_values(static_cast<std::size_t>(rows) * 2 * d, -6, 6, t);
    DeviceArray din(t, in.size()), dout(t, static_cast<std::size_t>(rows) * d);
    din.upload(in);
    void* ip = din.get();
    void* op = dout.get();
    void* args[] = {&op, &ip, &rows, &d};
    auto l = ops::silu_and_mul_launch(rows, d);
    launch(0, l.grid, l.block, args);
    if (auto r = sync_ok(stream, what); !r) return r;
    ref::silu_and_mul(ref, in, rows, d);
    round_all(t, ref);
    out = dout.download();
  } else if (fam == "gemm_f32" || fam == "gemm_f16_tc" || fam == "hopper_wgmma") {
    const bool f32 = fam == "gemm_f32";
    const DType in_t = f32 ? DType::F32 : DType::F16;
    int M = variant ? 129 : 256, N = variant ? 257 : 384, K = variant ? 1000 : 512;
    auto A = random_values(static_cast<std::size_t>(M) * K, -1, 1, in_t);
    auto B = random_values(static_cast<std::size_t>(K) * N, -1, 1, in_t);
    // variant 1 also misaligns A and B by one element (the kernels fall back to scalar loads)
    std::size_t mis = (!f32 && variant) ? 1 : 0;
    DeviceArray dA(in_t, A.size(), mis), dB(in_t, B.size(), mis);
    DeviceArray dC(DType::F32, static_cast<std::size_t>(M) * N);
    dA.upload(A);
    dB.upload(B);
    void* ap = dA.get();
    void* bp = dB.get();
    void* cp = dC.get();
    void* args[] = {&M, &N, &K, &ap, &bp, &cp};
    auto l = ops::gemm_launch(uri, M, N);
    launch(0, l.grid, l.block, args);
    if (auto r = sync_ok(stream, what); !r) return r;
    if (f32)
      ref::gemm_f32(ref, A, B, M, N, K);
    else
      ref::gemm_f16_tc(ref, A, B, M, N, K);
    out = dC.download();
    auto r = matches(out, ref, f32 ? 1e-5 : 1e-4);
    return r ? r : (r << " (" << what << ")");
  } else {
    return ::testing::AssertionFailure() << "no GPU check for family " << fam << " (" << uri
                                         << "): add one to tests/gpu/spec_check.hpp";
  }
  auto r = matches(out, ref, tolerance(t));
  return r ? r : (r << " (" << what << ")");
}

}  // namespace kiln::gpu_test
