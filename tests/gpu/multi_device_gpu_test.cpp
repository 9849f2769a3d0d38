// One Loader shared by threads bound to device 0 and device 1 (issue 8): a module per device,
// correct results on both after interleaved repeated use, and a graph captured per device.
#include <thread>

#include "gpu_util.hpp"
#include "kiln/kernels.h"
#include "spec_check.hpp"

namespace {

using namespace kiln::gpu_test;
namespace ops = kiln::ops;

int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

#define KILN_REQUIRE_TWO_GPUS()                                                             \
  do {                                                                                      \
    KILN_REQUIRE_GPU();                                                                     \
    if (int n_ = device_count(); n_ < 2)                                                    \
      GTEST_SKIP() << "needs 2 CUDA devices, " << n_ << " present (run on nvidia-h200-x2)"; \
  } while (0)

TEST(GpuMultiDevice, ThreadsOnTwoDevicesGetTheirOwnModuleAndCorrectResults) {
  KILN_REQUIRE_TWO_GPUS();
  std::string problem;
  std::string store = sm90_store(&problem);
  ASSERT_FALSE(store.empty()) << problem;
  kiln::test::TempDir cache;
  kiln::Loader l(*kiln_kernels_package(), store_only_config(store, cache.path().string()));
  const kiln::project::Specialisation* spec =
      kiln::test::reference_package().registry().find("softmax_dtype_bf16_block_256");
  ASSERT_NE(spec, nullptr);
  const kiln::KernelHandle* handle[2] = {nullptr, nullptr};
  std::string failures[2];
  const int kIters = 20;
  auto worker = [&](int dev) {
    if (cudaSetDevice(dev) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
      failures[dev] = "cannot make device current";
      return;
    }
    for (int i = 0; i < kIters; ++i) {
      try {
        auto r = check_spec(l, *spec, nullptr, i % 2);
        if (!r && failures[dev].empty())
          failures[dev] = "iteration " + std::to_string(i) + ": " + r.message();
        const kiln::KernelHandle& h = l.get(spec->uri);
        if (i == 0) handle[dev] = &h;
        if (handle[dev] != &h && failures[dev].empty()) failures[dev] = "cache entry changed";
      } catch (const std::exception& e) {
        failures[dev] = e.what();
        return;
      }
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
  ASSERT_TRUE(handle[0] && handle[1]);
  EXPECT_NE(handle[0], handle[1]) << "both devices share one cache entry";
  EXPECT_NE(handle[0]->functions[0], handle[1]->functions[0]);
}

TEST(GpuMultiDevice, PrefetchOnBothDevicesThenAGraphPerDeviceReplaysCorrectly) {
  KILN_REQUIRE_TWO_GPUS();
  std::string problem;
  std::string store = sm90_store(&problem);
  ASSERT_FALSE(store.empty()) << problem;
  kiln::test::TempDir cache;
  kiln::Loader l(*kiln_kernels_package(), store_only_config(store, cache.path().string()));
  const std::string uri = ops::choose_uri_axpy(DType::F32);
  std::string failures[2];
  auto worker = [&](int dev) {
    auto fail = [&](const std::string& m) {
      if (failures[dev].empty()) failures[dev] = m;
    };
    if (cudaSetDevice(dev) != cudaSuccess || cudaFree(nullptr) != cudaSuccess)
      return fail("set device");
    try {
      l.prefetch({uri});
      const long long n = 4096;
      DeviceArray x(DType::F32, n), y(DType::F32, n);
      cudaStream_t s;
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        return fail("stream");
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
        return fail("capture");
      ops::axpy(l, s, y.get(), x.get(), n, 2.0f, DType::F32);
      if (cudaStreamEndCapture(s, &g) != cudaSuccess ||
          cudaGraphInstantiate(&ge, g, 0) != cudaSuccess)
        return fail("end capture / instantiate");
      for (int i = 0; i < 10; ++i) {
        auto hx = random_values(n, -1, 1, DType::F32), hy = random_values(n, -1, 1, DType::F32);
        x.upload(hx);
        y.upload(hy);
        cudaGraphLaunch(ge, s);
        if (cudaStreamSynchronize(s) != cudaSuccess) return fail("replay " + std::to_string(i));
        kiln::ref::axpy(hy, 2.0f, hx);
        if (auto r = matches(y.download(), hy, 1e-5); !r)
          return fail("replay " + std::to_string(i) + ": " + r.message());
      }
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
      cudaStreamDestroy(s);
    } catch (const std::exception& e) {
      fail(e.what());
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

}  // namespace
