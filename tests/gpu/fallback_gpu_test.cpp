// The slower tiers on a real GPU: NVRTC JIT with an empty store (and its disk cache reused by a
// second process), and a PTX-only (compute_80) store JIT-compiled by the driver.
#include <unistd.h>

#include "gpu_util.hpp"
#include "kiln/kernels.h"
#include "spec_check.hpp"

namespace {

using namespace kiln::gpu_test;

const char* kJitUri = "rmsnorm_dtype_f16_block_256";

std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

kiln::LoaderConfig jit_config(const std::string& empty_store, const std::string& cache) {
  kiln::LoaderConfig c = store_only_config(empty_store, cache);
  c.disable_jit = false;  // offline stays on: JIT is the only way left
  return c;
}

TEST(GpuJit, EmptyStoreOfflineCompilesWithNvrtcAndASecondProcessReusesTheCache) {
  KILN_REQUIRE_GPU();
  kiln::test::TempDir tmp;
  fs::create_directories(tmp / "empty");
  const std::string cache = (tmp / "cache").string();
  kiln::Loader l(*kiln_kernels_package(), jit_config((tmp / "empty").string(), cache));
  kiln::Resolution r = l.resolve(kJitUri);
  ASSERT_TRUE(r.chosen.has_value()) << r.to_json();
  EXPECT_EQ(r.chosen->tier, "jit") << r.to_json();
  const kiln::project::Specialisation* spec = kiln::test::reference_package().registry().find(kJitUri);
  EXPECT_TRUE(check_spec(l, *spec, nullptr, 0));
  EXPECT_TRUE(check_spec(l, *spec, nullptr, 1));
  const kiln::KernelHandle& h = l.get(kJitUri);
  ASSERT_EQ(h.origin.rfind("jit:", 0), 0u) << h.origin;
  const fs::path cubin = h.origin.substr(4);
  ASSERT_TRUE(fs::exists(cubin)) << cubin;
  EXPECT_EQ(cubin.string().rfind(cache, 0), 0u) << "JIT output outside the cache dir: " << cubin;
  const auto mtime = fs::last_write_time(cubin);

  // A second process, same cache: it must load the cached cubin and compile nothing.
  std::string exe = self_exe();
  ASSERT_FALSE(exe.empty());
  auto child = kiln::test::run("KILN_LOG=info KILN_TEST_JIT_CHILD_CACHE=" + cache +
                               " KILN_TEST_JIT_CHILD_STORE=" + (tmp / "empty").string() + " '" +
                               exe + "' --gtest_filter=GpuJit.ChildProcessLoadsFromJitCache");
  EXPECT_EQ(child.exit_code, 0) << child.out;
  EXPECT_NE(child.out.find("[  PASSED  ] 1 test"), std::string::npos) << child.out;
  EXPECT_NE(child.out.find("child origin jit:" + cubin.string()), std::string::npos) << child.out;
  EXPECT_EQ(child.out.find("JIT-compiled"), std::string::npos) << "the child compiled:\n"
                                                               << child.out;
  EXPECT_EQ(fs::last_write_time(cubin), mtime) << "the cached cubin was rewritten";
}

// A cache directory that cannot be written (here a path under a file: ENOTDIR) costs the disk
// entry, not the kernel: NVRTC's result is loaded from memory and computes right on the GPU
// (docs/loader.md, "When the cache cannot be written").
TEST(GpuJit, ACacheThatCannotBeWrittenStillServesTheJitResultFromMemory) {
  KILN_REQUIRE_GPU();
  kiln::test::TempDir tmp;
  fs::create_directories(tmp / "empty");
  kiln::test::write_file(tmp / "a-file", "");
  const std::string cache = (tmp / "a-file" / "cache").string();
  kiln::Loader l(*kiln_kernels_package(), jit_config((tmp / "empty").string(), cache));
  const kiln::project::Specialisation* spec = kiln::test::reference_package().registry().find(kJitUri);
  EXPECT_TRUE(check_spec(l, *spec, nullptr, 0));
  EXPECT_EQ(l.get(kJitUri).origin, "jit:memory");
  EXPECT_EQ(kiln::test::read_file(tmp / "a-file"), "");
}

// Runs only as the child of the test above (skips otherwise).
TEST(GpuJit, ChildProcessLoadsFromJitCache) {
  const char* cache = std::getenv("KILN_TEST_JIT_CHILD_CACHE");
  const char* store = std::getenv("KILN_TEST_JIT_CHILD_STORE");
  if (!cache || !store)
    GTEST_SKIP() << "runs only as the child of EmptyStoreOffline...SecondProcess";
  KILN_REQUIRE_GPU();
  kiln::LoaderConfig c = jit_config(store, cache);
  c.log_level = "info";
  kiln::Loader l(*kiln_kernels_package(), c);
  const kiln::project::Specialisation* spec = kiln::test::reference_package().registry().find(kJitUri);
  EXPECT_TRUE(check_spec(l, *spec, nullptr, 1));
  std::cout << "child origin " << l.get(kJitUri).origin << std::endl;
}

TEST(GpuForwardCompat, PtxOnlyCompute80StoreRunsThroughTheDriverJit) {
  KILN_REQUIRE_GPU();
  const char* ptx_store = std::getenv("KILN_TEST_GPU_PTX_STORE");
  std::string store;
  kiln::test::TempDir tmp;
  if (ptx_store && *ptx_store) {
    store = ptx_store;
  } else {
    std::string cmd = kiln::test::kiln_cli() +
                      " build --targets compute_80 --only rmsnorm --only softmax --out " +
                      (tmp / "build").string() + " --dist " + (tmp / "dist").string() + " && " +
                      kiln::test::kiln_cli() + " install " + (tmp / "dist").string() +
                      "/*-index.json" + " --dest " + (tmp / "store").string();
    auto r = kiln::test::run(cmd);
    ASSERT_EQ(r.exit_code, 0) << "KILN_TEST_GPU_PTX_STORE unset and building one failed: " << cmd
                              << "\n"
                              << r.out;
    store = (tmp / "store").string();
  }
  kiln::Loader l(*kiln_kernels_package(), store_only_config(store, (tmp / "cache").string()));
  for (const char* uri : {"rmsnorm_dtype_bf16_block_512", "softmax_dtype_f32_block_128"}) {
    kiln::Resolution r = l.resolve(uri);
    ASSERT_TRUE(r.chosen.has_value()) << r.to_json();
    EXPECT_EQ(r.chosen->tier, "store") << r.to_json();
    EXPECT_EQ(r.chosen->target, "compute_80") << r.to_json();
    EXPECT_EQ(r.device, "sm_90");
    const kiln::project::Specialisation* spec = kiln::test::reference_package().registry().find(uri);
    EXPECT_TRUE(check_spec(l, *spec, nullptr, 0)) << uri;
    EXPECT_TRUE(check_spec(l, *spec, nullptr, 1)) << uri;
    EXPECT_NE(l.get(uri).origin.find("compute_80"), std::string::npos) << l.get(uri).origin;
  }
}

}  // namespace
