#pragma once
// Shared by the GPU tests: the skip rule, the store the tests load from, device buffers typed by
// kiln::ops::DType, seeded random inputs, NaN poisoning and the per-dtype error bounds.
// Memory, streams and graphs use the CUDA runtime (linked statically); kernels come only
// through libkiln.
#include <cuda.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/ops.hpp"
#include "project/registry.hpp"
#include "reference/kernels.hpp"
#include "runtime/driver.hpp"
#include "test_util.hpp"

namespace kiln::gpu_test {

namespace fs = std::filesystem;
using ops::DType;

// "" when a GPU is usable; else the reason the loader's driver gives (no libcuda, no device).
inline std::string no_gpu_reason() {
  static std::string reason = [] {
    try {
      auto d = runtime::make_cuda_driver();
      d->init();
      if (d->devices().empty()) return std::string("the driver reports no device");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    int n = 0;
    if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess || n == 0)
      return std::string("CUDA runtime: ") + cudaGetErrorString(e);
    return std::string();
  }();
  return reason;
}

#define KILN_REQUIRE_GPU()                                                   \
  do {                                                                       \
    if (std::string why_ = ::kiln::gpu_test::no_gpu_reason(); !why_.empty()) \
      GTEST_SKIP() << "no CUDA GPU: " << why_;                               \
  } while (0)

#define CUDA_OK(expr)                                                          \
  do {                                                                         \
    cudaError_t e_ = (expr);                                                   \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorName(e_) << " " \
                               << cudaGetErrorString(e_);                      \
  } while (0)

// Seed: KILN_TEST_SEED when set (to replay a failure), else fresh; always printed.
inline std::mt19937& rng() {
  static std::mt19937 g = [] {
    unsigned seed = std::random_device{}();
    if (const char* s = std::getenv("KILN_TEST_SEED"))
      seed = static_cast<unsigned>(std::strtoul(s, nullptr, 10));
    std::cout << "[kiln gpu] random seed " << seed << " (replay with KILN_TEST_SEED=" << seed << ")"
              << std::endl;
    return std::mt19937(seed);
  }();
  return g;
}

inline float round_to(DType t, float v) {
  return t == DType::F16 ? ref::round_to_f16(v) : t == DType::BF16 ? ref::round_to_bf16(v) : v;
}

inline void round_all(DType t, std::vector<float>& v) {
  for (float& x : v) x = round_to(t, x);
}

// Uniform in [lo, hi], representable in dtype, never all zeros.
inline std::vector<float> random_values(std::size_t n, float lo, float hi, DType t) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) {
    do x = round_to(t, d(rng()));
    while (x == 0.0f);
  }
  return v;
}

// rel L2 bound per storage type of the output (inputs and reference rounded the same way).
inline double tolerance(DType out) {
  return out == DType::F32 ? 1e-5 : out == DType::F16 ? 2e-3 : 1e-2;
}

// Device array of n elements of one dtype; contents start as NaN (0xFF bytes are NaN in f32,
// f16 and bf16), so an element the kernel never wrote fails the check.
class DeviceArray {
 public:
  DeviceArray(DType t, std::size_t n, std::size_t misalign_elems = 0)
      : t_(t), n_(n), off_(misalign_elems) {
    bytes_ = (n + off_ + 8) * ops::element_size(t);
    if (cudaMalloc(&base_, bytes_) != cudaSuccess) base_ = nullptr;
    poison();
  }
  ~DeviceArray() {
    if (base_) cudaFree(base_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  bool ok() const { return base_ != nullptr; }
  void* get() const { return static_cast<char*>(base_) + off_ * ops::element_size(t_); }
  std::size_t size() const { return n_; }
  void poison() {
    if (base_) cudaMemset(base_, 0xFF, bytes_);
  }
  cudaError_t upload(const std::vector<float>& v) {
    std::vector<unsigned char> b = pack(v);
    return cudaMemcpy(get(), b.data(), b.size(), cudaMemcpyHostToDevice);
  }
  std::vector<float> download() const {
    std::vector<unsigned char> b(n_ * ops::element_size(t_));
    if (cudaMemcpy(b.data(), get(), b.size(), cudaMemcpyDeviceToHost) != cudaSuccess) return {};
    return unpack(b);
  }

 private:
  std::vector<unsigned char> pack(const std::vector<float>& v) const {
    std::vector<unsigned char> b(v.size() * ops::element_size(t_));
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (t_ == DType::F32) {
        std::memcpy(&b[4 * i], &v[i], 4);
      } else {
        std::uint16_t h =
            t_ == DType::F16 ? ref::f16_bits_from_float(v[i]) : ref::bf16_bits_from_float(v[i]);
        std::memcpy(&b[2 * i], &h, 2);
      }
    }
    return b;
  }
  std::vector<float> unpack(const std::vector<unsigned char>& b) const {
    std::vector<float> v(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      if (t_ == DType::F32) {
        std::memcpy(&v[i], &b[4 * i], 4);
      } else {
        std::uint16_t h;
        std::memcpy(&h, &b[2 * i], 2);
        v[i] = t_ == DType::F16 ? ref::float_from_f16_bits(h) : ref::float_from_bf16_bits(h);
      }
    }
    return v;
  }

  DType t_;
  std::size_t n_, off_;
  std::size_t bytes_ = 0;
  void* base_ = nullptr;
};

// Every element finite and rel L2 under the bound; the message names the first bad element.
inline ::testing::AssertionResult matches(const std::vector<float>& out,
                                          const std::vector<float>& ref, double tol) {
  if (out.size() != ref.size())
    return ::testing::AssertionFailure() << "size " << out.size() << " vs reference " << ref.size();
  for (std::size_t i = 0; i < out.size(); ++i)
    if (!std::isfinite(out[i]))
      return ::testing::AssertionFailure()
             << "element " << i << " is " << out[i]
             << " (never written, or NaN/inf computed); reference " << ref[i];
  double err = ref::rel_l2(out, ref);
  if (!(err < tol)) return ::testing::AssertionFailure() << "rel L2 error " << err << " >= " << tol;
  return ::testing::AssertionSuccess() << "rel L2 error " << err;
}

inline DType dtype_param(const std::string& s) {
  return s == "f16" ? DType::F16 : s == "bf16" ? DType::BF16 : DType::F32;
}

// The store the GPU tests load from: KILN_TEST_GPU_STORE (scripts/gpu_run.sh builds it with
// `kiln build --targets sm_90,sm_90a` + `kiln install`). Without it, the test builds the same
// store once per process into a temporary directory with the kiln CLI (minutes; needs nvcc).
inline std::string sm90_store(std::string* problem) {
  if (const char* s = std::getenv("KILN_TEST_GPU_STORE"); s && *s) return s;
  static std::mutex mu;
  static std::string built, error;
  std::lock_guard<std::mutex> lock(mu);
  if (built.empty() && error.empty()) {
    static test::TempDir dir;  // lives until the process ends
    std::string cmd = test::kiln_cli() + " build --targets sm_90,sm_90a --out " +
                      (dir / "build").string() + " --dist " + (dir / "dist").string() + " && " +
                      test::kiln_cli() + " install " + (dir / "dist").string() + "/*-index.json" +
                      " --dest " + (dir / "store").string();
    auto r = test::run(cmd);
    if (r.exit_code == 0)
      built = (dir / "store").string();
    else
      error = "KILN_TEST_GPU_STORE is not set and building a store failed (exit " +
              std::to_string(r.exit_code) + "): " + cmd + "\n" + r.out;
  }
  if (problem) *problem = error;
  return built;
}

// A loader over exactly one store: offline, no JIT, nothing installed, a private cache dir.
inline LoaderConfig store_only_config(const std::string& store, const std::string& cache_dir) {
  LoaderConfig c;
  c.artifact_path = {store};
  c.cache_dir = cache_dir;
  c.offline = true;
  c.disable_jit = true;
  c.use_installed_store = false;
  return c;
}

inline std::string param(const project::Specialisation& s, const std::string& name) {
  for (const auto& [k, v] : s.params)
    if (k == name) return v;
  return "";
}

}  // namespace kiln::gpu_test
