// The typed kernel API (kiln/ops.hpp, kiln/kiln_ops.h) on the GPU: the URI it picks runs and
// matches the CPU reference; on CC 9.0 gemm_f16 takes the sm_90a wgmma kernel.
#include "gpu_util.hpp"
#include "kiln/kernels.h"
#include "kiln/kiln_ops.h"
#include "spec_check.hpp"

namespace {

using namespace kiln::gpu_test;
namespace ops = kiln::ops;

struct OpsRig {
  kiln::test::TempDir cache;
  std::unique_ptr<kiln::Loader> loader;
  std::string problem;
  bool init() {
    std::string store = sm90_store(&problem);
    if (store.empty()) return false;
    loader = std::make_unique<kiln::Loader>(*kiln_kernels_package(),
                                            store_only_config(store, cache.path().string()));
    return true;
  }
};

TEST(GpuOps, RowOpsAxpyAndReduceMatchReferenceForEveryDtype) {
  KILN_REQUIRE_GPU();
  OpsRig rig;
  ASSERT_TRUE(rig.init()) << rig.problem;
  auto& l = *rig.loader;
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(ops::to_string(t));
    const int rows = 7, cols = 3000;
    auto in = random_values(static_cast<std::size_t>(rows) * cols, -3, 3, t);
    auto w = random_values(cols, 0.5f, 1.5f, t);
    DeviceArray din(t, in.size()), dw(t, cols), dout(t, in.size());
    ASSERT_EQ(din.upload(in), cudaSuccess);
    ASSERT_EQ(dw.upload(w), cudaSuccess);
    ops::rmsnorm(l, nullptr, dout.get(), din.get(), dw.get(), rows, cols, 1e-6f, t);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> ref;
    kiln::ref::rmsnorm(ref, in, w, rows, cols, 1e-6f);
    round_all(t, ref);
    EXPECT_TRUE(matches(dout.download(), ref, tolerance(t))) << "rmsnorm";

    dout.poison();
    ops::softmax(l, nullptr, dout.get(), din.get(), rows, cols, t);
    CUDA_OK(cudaDeviceSynchronize());
    kiln::ref::softmax(ref, in, rows, cols);
    round_all(t, ref);
    EXPECT_TRUE(matches(dout.download(), ref, tolerance(t))) << "softmax";

    // in place: out == in is allowed by the API
    ops::softmax(l, nullptr, din.get(), din.get(), rows, cols, t);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_TRUE(matches(din.download(), ref, tolerance(t))) << "softmax in place";

    const long long n = 100003;
    auto x = random_values(n, -2, 2, t), y = random_values(n, -2, 2, t);
    DeviceArray dx(t, n), dy(t, n), dsum(t, 1), ws(DType::F32, 256);
    ASSERT_EQ(dx.upload(x), cudaSuccess);
    ASSERT_EQ(dy.upload(y), cudaSuccess);
    ops::axpy(l, nullptr, dy.get(), dx.get(), n, -0.75f, t);
    CUDA_OK(cudaDeviceSynchronize());
    kiln::ref::axpy(y, -0.75f, x);
    round_all(t, y);
    EXPECT_TRUE(matches(dy.download(), y, tolerance(t))) << "axpy";

    auto pos = random_values(n, 0, 0.2f, t);
    ASSERT_EQ(dx.upload(pos), cudaSuccess);
    ops::reduce_sum(l, nullptr, dsum.get(), dx.get(), n, ws.get(),
                    ops::reduce_sum_workspace_bytes(), t);
    CUDA_OK(cudaDeviceSynchronize());
    float want = round_to(t, kiln::ref::reduce_sum(pos));
    float got = dsum.download()[0];
    EXPECT_NEAR(got, want, std::fabs(want) * (t == DType::F32 ? 1e-5 : 8e-3)) << "reduce_sum";

    if (t != DType::F32) {
      const long long srows = 9;
      const int d = 1500;
      auto sin = random_values(static_cast<std::size_t>(srows) * 2 * d, -6, 6, t);
      DeviceArray dsin(t, sin.size()), dsout(t, static_cast<std::size_t>(srows) * d);
      ASSERT_EQ(dsin.upload(sin), cudaSuccess);
      ops::silu_and_mul(l, nullptr, dsout.get(), dsin.get(), srows, d, t);
      CUDA_OK(cudaDeviceSynchronize());
      kiln::ref::silu_and_mul(ref, sin, srows, d);
      round_all(t, ref);
      EXPECT_TRUE(matches(dsout.download(), ref, tolerance(t))) << "silu_and_mul";
    }
  }
}

TEST(GpuOps, GemmF16TakesWgmmaOnHopperAndBothGemmsMatchReference) {
  KILN_REQUIRE_GPU();
  OpsRig rig;
  ASSERT_TRUE(rig.init()) << rig.problem;
  auto& l = *rig.loader;
  int cc_major = 0, cc_minor = 0;
  CUDA_OK(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, 0));
  CUDA_OK(cudaDeviceGetAttribute(&cc_minor, cudaDevAttrComputeCapabilityMinor, 0));
  for (auto [M, N, K] : {std::tuple{100, 70, 33}, std::tuple{2048, 2304, 256}}) {
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
    auto A = random_values(static_cast<std::size_t>(M) * K, -1, 1, DType::F16);
    auto B = random_values(static_cast<std::size_t>(K) * N, -1, 1, DType::F16);
    DeviceArray dA(DType::F16, A.size()), dB(DType::F16, B.size());
    DeviceArray dC(DType::F32, static_cast<std::size_t>(M) * N);
    ASSERT_EQ(dA.upload(A), cudaSuccess);
    ASSERT_EQ(dB.upload(B), cudaSuccess);
    std::string uri =
        ops::gemm_f16(l, nullptr, static_cast<float*>(dC.get()), dA.get(), dB.get(), M, N, K);
    CUDA_OK(cudaDeviceSynchronize());
    if (cc_major * 10 + cc_minor == 90)
      EXPECT_EQ(uri.rfind("hopper_wgmma_bn_", 0), 0u) << uri;
    else
      EXPECT_EQ(uri.rfind("gemm_f16_tc_", 0), 0u) << uri;
    std::vector<float> ref;
    kiln::ref::gemm_f16_tc(ref, A, B, M, N, K);
    EXPECT_TRUE(matches(dC.download(), ref, 1e-4)) << uri;

    // f32 GEMM over the same (f16-representable) values
    DeviceArray fA(DType::F32, A.size()), fB(DType::F32, B.size());
    ASSERT_EQ(fA.upload(A), cudaSuccess);
    ASSERT_EQ(fB.upload(B), cudaSuccess);
    dC.poison();
    ops::gemm_f32(l, nullptr, static_cast<float*>(dC.get()), static_cast<const float*>(fA.get()),
                  static_cast<const float*>(fB.get()), M, N, K);
    CUDA_OK(cudaDeviceSynchronize());
    kiln::ref::gemm_f32(ref, A, B, M, N, K);
    EXPECT_TRUE(matches(dC.download(), ref, 1e-5)) << ops::choose_uri_gemm_f32(M, N, K);
  }
}

TEST(GpuOps, CAbiRunsRmsnormAndReportsAMissingArtifactAsNotFound) {
  KILN_REQUIRE_GPU();
  std::string problem;
  std::string store = sm90_store(&problem);
  ASSERT_FALSE(store.empty()) << problem;
  kiln::test::TempDir tmp;
  kiln_config c;
  kiln_config_init(&c);
  c.artifact_path = store.c_str();
  std::string cache = (tmp / "cache").string();
  c.cache_dir = cache.c_str();
  c.offline = 1;
  c.disable_jit = 1;
  kiln_loader* l = nullptr;
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << kiln_last_error();
  const int rows = 3, cols = 700;
  auto in = random_values(static_cast<std::size_t>(rows) * cols, -3, 3, DType::BF16);
  auto w = random_values(cols, 0.5f, 1.5f, DType::BF16);
  DeviceArray din(DType::BF16, in.size()), dw(DType::BF16, cols), dout(DType::BF16, in.size());
  ASSERT_EQ(din.upload(in), cudaSuccess);
  ASSERT_EQ(dw.upload(w), cudaSuccess);
  ASSERT_EQ(kiln_op_rmsnorm(l, nullptr, dout.get(), din.get(), dw.get(), rows, cols, 1e-6f,
                            KILN_DTYPE_BF16),
            KILN_OK)
      << kiln_ops_last_error();
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> ref;
  kiln::ref::rmsnorm(ref, in, w, rows, cols, 1e-6f);
  round_all(DType::BF16, ref);
  EXPECT_TRUE(matches(dout.download(), ref, tolerance(DType::BF16)));
  kiln_loader_destroy(l);

  // The same call against an empty store fails as not-found, naming the URI it chose.
  kiln_config e;
  kiln_config_init(&e);
  std::string empty = (tmp / "empty").string();
  fs::create_directories(empty);
  e.artifact_path = empty.c_str();
  e.cache_dir = cache.c_str();
  e.offline = 1;
  e.disable_jit = 1;
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &e, &l), KILN_OK) << kiln_last_error();
  EXPECT_EQ(kiln_op_rmsnorm(l, nullptr, dout.get(), din.get(), dw.get(), rows, cols, 1e-6f,
                            KILN_DTYPE_BF16),
            KILN_ERROR_NOT_FOUND);
  EXPECT_NE(std::string(kiln_ops_last_error()).find("rmsnorm_dtype_bf16_block_256"),
            std::string::npos)
      << kiln_ops_last_error();
  kiln_loader_destroy(l);
}

}  // namespace
