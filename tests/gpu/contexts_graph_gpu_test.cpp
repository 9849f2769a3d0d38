// One device, two CUDA contexts: each gets its own loaded module; and CUDA Graphs: kernels
// prefetched, captured through the typed API, replayed with new inputs; a miss during capture
// fails without reading, downloading or compiling anything.
#include <cudaTypedefs.h>

#include <chrono>

#include "gpu_util.hpp"
#include "kiln/kernels.h"
#include "spec_check.hpp"

namespace {

using namespace kiln::gpu_test;
namespace ops = kiln::ops;

// Driver entry points through the runtime, so the tests never link libcuda.
template <typename F>
F driver_fn(const char* name, unsigned version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<F>(p);
}

TEST(GpuContexts, TwoContextsOnOneDeviceEachLoadTheirOwnModuleAndComputeCorrectly) {
  KILN_REQUIRE_GPU();
  std::string problem;
  std::string store = sm90_store(&problem);
  ASSERT_FALSE(store.empty()) << problem;
  auto ctx_create = driver_fn<PFN_cuCtxCreate_v12050>("cuCtxCreate", 12050);
  auto ctx_destroy = driver_fn<PFN_cuCtxDestroy_v4000>("cuCtxDestroy", 4000);
  auto ctx_set = driver_fn<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent", 4000);
  auto ctx_get = driver_fn<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent", 4000);
  ASSERT_TRUE(ctx_create && ctx_destroy && ctx_set && ctx_get);

  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(nullptr));  // the primary context is now current
  CUcontext primary = nullptr, created = nullptr;
  ASSERT_EQ(ctx_get(&primary), CUDA_SUCCESS);
  ASSERT_EQ(ctx_create(&created, nullptr, 0, 0), CUDA_SUCCESS);  // and current
  ASSERT_NE(primary, created);

  kiln::test::TempDir cache;
  kiln::Loader l(*kiln_kernels_package(), store_only_config(store, cache.path().string()));
  const kiln::project::Specialisation* spec =
      kiln::test::reference_package().registry().find("rmsnorm_dtype_f16_block_256");
  ASSERT_NE(spec, nullptr);

  std::vector<const kiln::KernelHandle*> handles(2);
  // Interleaved: created, primary, created, primary, ... each check uses fresh inputs.
  for (int round = 0; round < 6; ++round) {
    const int which = round % 2;
    ASSERT_EQ(ctx_set(which == 0 ? created : primary), CUDA_SUCCESS);
    EXPECT_TRUE(check_spec(l, *spec, nullptr, round % 2))
        << "context " << which << " round " << round;
    const kiln::KernelHandle& h = l.get(spec->uri);
    if (round < 2) handles[which] = &h;
    EXPECT_EQ(&h, handles[which]) << "the cache entry of a context changed between calls";
  }
  EXPECT_NE(handles[0], handles[1]) << "both contexts share one cache entry";
  EXPECT_NE(handles[0]->functions[0], handles[1]->functions[0]);
  EXPECT_NE(handles[0]->library, handles[1]->library);

  ASSERT_EQ(ctx_set(primary), CUDA_SUCCESS);
  ASSERT_EQ(ctx_destroy(created), CUDA_SUCCESS);
}

// new random inputs, copied into the same device buffers the graph was captured with
struct GraphBuffers {
  static constexpr long long kN = 50000;
  static constexpr int kRows = 16, kCols = 2048;
  DeviceArray x{DType::F32, kN}, y{DType::F32, kN}, sum{DType::F32, 1}, ws{DType::F32, 256};
  DeviceArray in{DType::BF16, static_cast<std::size_t>(kRows) * kCols}, w{DType::BF16, kCols},
      out{DType::BF16, static_cast<std::size_t>(kRows) * kCols};
  std::vector<float> hx, hy, hin, hw;
  void refill() {
    hx = random_values(kN, -1, 1, DType::F32);
    hy = random_values(kN, -1, 1, DType::F32);
    hin = random_values(hin.size() ? hin.size() : static_cast<std::size_t>(kRows) * kCols, -3, 3,
                        DType::BF16);
    hw = random_values(kCols, 0.5f, 1.5f, DType::BF16);
    x.upload(hx);
    y.upload(hy);
    in.upload(hin);
    w.upload(hw);
    sum.poison();
    out.poison();
  }
};

// y = 0.5 x + y; sum = reduce_sum(y); out = rmsnorm(in, w): three kiln launches, one workspace.
void enqueue(kiln::Loader& l, cudaStream_t s, GraphBuffers& b) {
  ops::axpy(l, s, b.y.get(), b.x.get(), GraphBuffers::kN, 0.5f, DType::F32);
  ops::reduce_sum(l, s, b.sum.get(), b.y.get(), GraphBuffers::kN, b.ws.get(),
                  ops::reduce_sum_workspace_bytes(), DType::F32);
  ops::rmsnorm(l, s, b.out.get(), b.in.get(), b.w.get(), GraphBuffers::kRows, GraphBuffers::kCols,
               1e-6f, DType::BF16);
}

::testing::AssertionResult check_graph_outputs(GraphBuffers& b) {
  std::vector<float> y = b.hy;
  kiln::ref::axpy(y, 0.5f, b.hx);
  if (auto r = matches(b.y.download(), y, 1e-5); !r) return r << " (axpy)";
  const float want = kiln::ref::reduce_sum(y);
  const float got = b.sum.download()[0];
  if (!std::isfinite(got) || std::fabs(got - want) > 1e-4 * (1 + std::fabs(want)))
    return ::testing::AssertionFailure() << "reduce_sum " << got << " vs " << want;
  std::vector<float> ref;
  kiln::ref::rmsnorm(ref, b.hin, b.hw, GraphBuffers::kRows, GraphBuffers::kCols, 1e-6f);
  round_all(DType::BF16, ref);
  if (auto r = matches(b.out.download(), ref, tolerance(DType::BF16)); !r) return r << " (rmsnorm)";
  return ::testing::AssertionSuccess();
}

TEST(GpuGraphs, PrefetchedKernelsCapturedOnceGiveCorrectResultsOnEveryReplay) {
  KILN_REQUIRE_GPU();
  std::string problem;
  std::string store = sm90_store(&problem);
  ASSERT_FALSE(store.empty()) << problem;
  kiln::test::TempDir cache;
  kiln::Loader l(*kiln_kernels_package(), store_only_config(store, cache.path().string()));
  l.prefetch({ops::choose_uri_axpy(DType::F32), ops::choose_uri_reduce_sum(DType::F32),
              ops::choose_uri_rmsnorm(DType::BF16, GraphBuffers::kCols)});
  GraphBuffers b;
  b.refill();
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  enqueue(l, s, b);
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  std::size_t nodes = 0;
  CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_EQ(nodes, 4u);  // axpy, reduce partial, reduce final, rmsnorm
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  const int kReplays = 40;
  for (int i = 0; i < kReplays; ++i) {
    b.refill();  // synchronous copies into the captured buffers
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    EXPECT_TRUE(check_graph_outputs(b)) << "replay " << i << " of " << kReplays;
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(s));
}

TEST(GpuGraphs, MissDuringCaptureFailsAsUsageWithoutReadingFetchingOrCompiling) {
  KILN_REQUIRE_GPU();
  std::string problem;
  std::string store = sm90_store(&problem);
  ASSERT_FALSE(store.empty()) << problem;
  kiln::test::TempDir tmp;
  // Everything a miss could reach is configured: the store, a mirror, JIT. None may be used.
  kiln::LoaderConfig cfg = store_only_config(store, (tmp / "cache").string());
  cfg.offline = false;
  cfg.mirrors = {"http://127.0.0.1:9/kiln"};
  cfg.disable_jit = false;
  kiln::Loader l(*kiln_kernels_package(), cfg);
  l.prefetch({ops::choose_uri_axpy(DType::F32)});
  const std::string missing = ops::choose_uri_softmax(DType::F16, 4096);

  DeviceArray x(DType::F32, 1000), y(DType::F32, 1000), sm(DType::F16, 4096);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  ops::axpy(l, s, y.get(), x.get(), 1000, 1.0f, DType::F32);  // prefetched: fine
  auto t0 = std::chrono::steady_clock::now();
  kiln::ErrorKind kind = kiln::ErrorKind::Internal;
  std::string msg;
  try {
    ops::softmax(l, s, sm.get(), sm.get(), 1, 4096, DType::F16);
  } catch (const kiln::Error& e) {
    kind = e.kind();
    msg = e.what();
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(kind, kiln::ErrorKind::Usage) << msg;
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
  EXPECT_NE(msg.find("prefetch before capture"), std::string::npos) << msg;
  EXPECT_LT(ms, 50.0) << "a miss during capture took " << ms << " ms: did it resolve?";
  // Nothing was compiled or downloaded into the cache directory.
  EXPECT_FALSE(fs::exists(tmp / "cache" / "jit"));
  EXPECT_TRUE(!fs::exists(tmp / "cache") || fs::is_empty(tmp / "cache"));

  // The capture is still ours to end; the stream is usable afterwards.
  cudaGraph_t graph = nullptr;
  cudaError_t end = cudaStreamEndCapture(s, &graph);
  EXPECT_TRUE(end == cudaSuccess || end == cudaErrorStreamCaptureInvalidated)
      << cudaGetErrorName(end);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
  cudaStreamCaptureStatus st;
  CUDA_OK(cudaStreamIsCapturing(s, &st));
  EXPECT_EQ(st, cudaStreamCaptureStatusNone);
  // After capture, the same call resolves normally.
  ops::softmax(l, s, sm.get(), sm.get(), 1, 4096, DType::F16);
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaStreamDestroy(s));
}

}  // namespace
