// Typed kernel API without a GPU: URI choice and launch geometry (pure), argument validation
// (refused before anything is loaded or launched), and what a valid call hands the driver,
// over a fake driver and a real store directory.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>

#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/kiln_ops.h"
#include "kiln/loader.hpp"
#include "kiln/ops.hpp"
#include "kiln/version.hpp"
#include "loader_factory.hpp"
#include "plan/resolver.hpp"
#include "project/registry.hpp"
#include "runtime/driver.hpp"
#include "runtime/log.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace ops = kiln::ops;
using kiln::ErrorKind;
using ops::DType;

struct LaunchRecord {
  unsigned grid[3], block[3];
  void* function;
  std::vector<std::uint64_t> words;  // the first 8 bytes behind each argument pointer
  std::string log_at_launch;         // the API log file's content when the launch happened
};

// Records every driver call; touched() says whether anything at all reached it.
class RecordingDriver : public kiln::runtime::Driver {
 public:
  std::mutex mu;
  int calls = 0;
  std::vector<LaunchRecord> launches;
  std::string log_file;
  size_t nargs = 0;  // how many argument pointers to capture per launch

  void init() override { note(); }
  int driver_version() override { return note(), 13000; }
  std::vector<kiln::runtime::DeviceInfo> devices() override {
    return note(), std::vector<kiln::runtime::DeviceInfo>{{0, "Fake", 90}};
  }
  void* current_context() override { return note(), reinterpret_cast<void*>(0x10); }
  int current_device_cc() override { return note(), 90; }
  bool stream_is_capturing(void*) override { return note(), false; }
  void* load_library(const std::string&) override { return note(), reinterpret_cast<void*>(0x20); }
  unsigned kernel_count(void*) override { return note(), 2u; }
  void* get_kernel(void*, const std::string& sym) override {
    note();
    return reinterpret_cast<void*>(std::hash<std::string>()(sym) | 1);
  }
  void* kernel_function(void* k) override { return note(), k; }
  void unload_library(void*) noexcept override {}
  void launch(void* fn, const unsigned grid[3], const unsigned block[3], unsigned, void*,
              void** args) override {
    note();
    LaunchRecord r{{grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]}, fn, {}, ""};
    for (size_t i = 0; i < nargs; ++i) {
      std::uint64_t w = 0;
      std::memcpy(&w, args[i], 4);  // ints and floats: 4 bytes; pointers checked separately
      r.words.push_back(w);
    }
    if (!log_file.empty()) r.log_at_launch = kiln::test::read_file(log_file);
    std::lock_guard<std::mutex> lock(mu);
    launches.push_back(std::move(r));
  }

 private:
  void note() {
    std::lock_guard<std::mutex> lock(mu);
    ++calls;
  }
};

// One archive for the host's target with the given URIs (the bytes are never run), each
// fresh for this build's registry.
void write_store(const fs::path& store, const std::vector<std::string>& uris) {
  std::vector<kiln::test::SyntheticArtifact> artifacts;
  for (const auto& uri : uris) {
    // `loadable` falls back to made-up fields for a URI the registry lacks: refuse it here.
    ASSERT_NE(kiln::test::reference_package().registry().find(uri), nullptr) << uri;
    artifacts.push_back({uri, "image of " + uri});
  }
  kiln::test::ReleaseSpec rel;
  rel.loadable = true;
  rel.with_artifacts(std::move(artifacts));
  kiln::test::write_store_entry(store, rel, "sm_90");
}

struct Rig {
  kiln::test::TempDir tmp;
  std::shared_ptr<RecordingDriver> driver = std::make_shared<RecordingDriver>();
  kiln::LoaderConfig cfg;
  Rig() {
    cfg.artifact_path = {(tmp / "store").string()};
    cfg.cache_dir = (tmp / "cache").string();
    cfg.offline = true;
    cfg.disable_jit = true;
    cfg.use_installed_store = false;
  }
  std::unique_ptr<kiln::Loader> loader() {
    kiln::plan::LoaderDeps d;
    d.driver = driver;
    d.installed_store = (tmp / "installed").string();
    return kiln::make_loader(kiln::test::reference_description(), cfg, std::move(d));
  }
};

// Runs f, expects Error{Usage} whose message contains `needle`, and no driver call at all.
template <typename F>
void expect_usage(Rig& rig, const std::string& needle, F&& f) {
  try {
    f();
    ADD_FAILURE() << "no error; expected usage error mentioning '" << needle << "'";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to mention: " << needle;
  }
  EXPECT_EQ(rig.driver->calls, 0) << "the driver was called before validation failed";
}

// Fake device addresses: never dereferenced, aligned unless offset.
void* dev(std::uintptr_t a) { return reinterpret_cast<void*>(a); }

TEST(OpsUri, RmsnormBlockGrowsWithRowLength) {
  EXPECT_EQ(ops::choose_uri_rmsnorm(DType::BF16, 1), "rmsnorm_dtype_bf16_block_128");
  EXPECT_EQ(ops::choose_uri_rmsnorm(DType::BF16, 256), "rmsnorm_dtype_bf16_block_128");
  EXPECT_EQ(ops::choose_uri_rmsnorm(DType::F16, 257), "rmsnorm_dtype_f16_block_256");
  EXPECT_EQ(ops::choose_uri_rmsnorm(DType::F32, 1024), "rmsnorm_dtype_f32_block_256");
  EXPECT_EQ(ops::choose_uri_rmsnorm(DType::F32, 4096), "rmsnorm_dtype_f32_block_512");
}

TEST(OpsUri, SoftmaxAndGemmTilesFollowTheShape) {
  EXPECT_EQ(ops::choose_uri_softmax(DType::F16, 512), "softmax_dtype_f16_block_128");
  EXPECT_EQ(ops::choose_uri_softmax(DType::F16, 513), "softmax_dtype_f16_block_256");
  EXPECT_EQ(ops::choose_uri_gemm_f32(100, 4096, 7), "gemm_f32_bm_64_bn_128_bk_8");
  EXPECT_EQ(ops::choose_uri_gemm_f32(4096, 64, 7), "gemm_f32_bm_128_bn_64_bk_8");
}

TEST(OpsUri, GemmF16PrefersWgmmaOnlyOnComputeCapability90) {
  EXPECT_EQ(ops::choose_uris_gemm_f16(4096, 4096, 4096, 90),
            (std::vector<std::string>{"hopper_wgmma_bn_128", "gemm_f16_tc_bm_128_bn_128"}));
  EXPECT_EQ(ops::choose_uris_gemm_f16(64, 64, 64, 90),
            (std::vector<std::string>{"hopper_wgmma_bn_64", "gemm_f16_tc_bm_64_bn_64"}));
  EXPECT_EQ(ops::choose_uris_gemm_f16(64, 64, 64, 89),
            (std::vector<std::string>{"gemm_f16_tc_bm_64_bn_64"}));
  EXPECT_EQ(ops::choose_uris_gemm_f16(64, 64, 64, 100),
            (std::vector<std::string>{"gemm_f16_tc_bm_64_bn_64"}));
}

TEST(OpsUri, EveryChosenUriExistsInTheEmbeddedRegistry) {
  const kiln::project::Registry& reg = kiln::test::reference_package().registry();
  std::set<std::string> chosen;
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    chosen.insert(ops::choose_uri_axpy(t));
    chosen.insert(ops::choose_uri_reduce_sum(t));
    for (int cols : {1, 300, 100000}) {
      chosen.insert(ops::choose_uri_rmsnorm(t, cols));
      chosen.insert(ops::choose_uri_softmax(t, cols));
    }
    if (t != DType::F32) chosen.insert(ops::choose_uri_silu_and_mul(t));
  }
  for (int m : {1, 5000})
    for (int n : {1, 5000}) {
      chosen.insert(ops::choose_uri_gemm_f32(m, n, 1));
      for (const auto& u : ops::choose_uris_gemm_f16(m, n, 1, 90)) chosen.insert(u);
    }
  for (const auto& u : chosen) EXPECT_NE(reg.find(u), nullptr) << u << " is not registered";
  // Every registered specialisation is reachable through the typed API.
  for (const auto& s : reg.specialisations) EXPECT_TRUE(chosen.count(s.uri)) << s.uri;
}

TEST(OpsLaunch, GeometryFollowsTheKernelLaunchTable) {
  auto a = ops::axpy_launch(1000);
  EXPECT_EQ(a.grid.x, 4u);
  EXPECT_EQ(a.block.x, 256u);
  EXPECT_EQ(ops::axpy_launch(1LL << 40).grid.x, 65535u);  // grid-stride beyond that
  auto s = ops::silu_and_mul_launch(13, 100);
  EXPECT_EQ(s.block.x, 128u);
  EXPECT_EQ(s.grid.x, 13u);
  EXPECT_EQ(ops::silu_and_mul_launch(1, 5000).block.x, 1024u);
  EXPECT_EQ(ops::silu_and_mul_launch(1, 1).block.x, 32u);
  auto g = ops::gemm_launch("gemm_f32_bm_128_bn_64_bk_8", 129, 257);
  EXPECT_EQ(g.grid.x, 5u);
  EXPECT_EQ(g.grid.y, 2u);
  EXPECT_EQ(g.block.x, 256u);
  auto w = ops::gemm_launch("hopper_wgmma_bn_128", 129, 257);
  EXPECT_EQ(w.grid.x, 3u);
  EXPECT_EQ(w.grid.y, 3u);
  EXPECT_EQ(w.block.x, 128u);
  EXPECT_EQ(ops::rmsnorm_launch(100000, 4096).grid.x, 65535u);
  EXPECT_EQ(ops::rmsnorm_launch(37, 4096).block.x, 512u);
  EXPECT_EQ(ops::reduce_sum_workspace_bytes(), 1024u);
}

TEST(OpsValidation, NullPointersAreRefusedNamingTheArgumentBeforeAnyLoad) {
  Rig rig;
  auto l = rig.loader();
  expect_usage(rig, "y is null",
               [&] { ops::axpy(*l, nullptr, nullptr, dev(256), 10, 1, DType::F32); });
  expect_usage(rig, "x is null",
               [&] { ops::axpy(*l, nullptr, dev(256), nullptr, 10, 1, DType::F32); });
  expect_usage(rig, "weight is null", [&] {
    ops::rmsnorm(*l, nullptr, dev(256), dev(4096), nullptr, 2, 4, 1e-6f, DType::F16);
  });
  expect_usage(rig, "workspace is null", [&] {
    ops::reduce_sum(*l, nullptr, dev(256), dev(4096), 10, nullptr, 1024, DType::F32);
  });
  expect_usage(rig, "B is null", [&] {
    ops::gemm_f16(*l, nullptr, static_cast<float*>(dev(256)), dev(8192), nullptr, 4, 4, 4);
  });
}

TEST(OpsValidation, NonPositiveAndOverflowingSizesAreRefused) {
  Rig rig;
  auto l = rig.loader();
  expect_usage(rig, "n = 0 must be > 0",
               [&] { ops::axpy(*l, nullptr, dev(256), dev(512), 0, 1, DType::F32); });
  expect_usage(rig, "rows = -1",
               [&] { ops::softmax(*l, nullptr, dev(256), dev(256), -1, 4, DType::F32); });
  expect_usage(rig, "K = 0", [&] {
    ops::gemm_f32(*l, nullptr, static_cast<float*>(dev(1 << 20)),
                  static_cast<const float*>(dev(256)), static_cast<const float*>(dev(512)), 4, 4,
                  0);
  });
  expect_usage(rig, "overflows", [&] {
    ops::silu_and_mul(*l, nullptr, dev(256), dev(1 << 20),
                      std::numeric_limits<long long>::max() / 2, 1 << 30, DType::BF16);
  });
  expect_usage(rig, "overflows", [&] {
    ops::axpy(*l, nullptr, dev(256), dev(512), std::numeric_limits<long long>::max(), 1,
              DType::F32);
  });
}

TEST(OpsValidation, MisalignedPointersTooSmallWorkspaceAndOverlapAreRefused) {
  Rig rig;
  auto l = rig.loader();
  expect_usage(rig, "x (4097) is not 4-byte aligned",
               [&] { ops::axpy(*l, nullptr, dev(1 << 20), dev(4097), 10, 1, DType::F32); });
  expect_usage(rig, "in (4097) is not 2-byte aligned", [&] {
    ops::rmsnorm(*l, nullptr, dev(1 << 20), dev(4097), dev(8192), 2, 4, 1e-6f, DType::BF16);
  });
  expect_usage(rig, "workspace_bytes = 1020 is too small: 1024 needed", [&] {
    ops::reduce_sum(*l, nullptr, dev(256), dev(4096), 10, dev(1 << 20), 1020, DType::F32);
  });
  expect_usage(rig, "overlap partially",
               [&] { ops::axpy(*l, nullptr, dev(4096), dev(4096 + 8), 100, 1, DType::F32); });
  expect_usage(rig, "out overlaps in",
               [&] { ops::silu_and_mul(*l, nullptr, dev(4096), dev(4096), 4, 8, DType::F16); });
  expect_usage(rig, "C overlaps A", [&] {
    ops::gemm_f32(*l, nullptr, static_cast<float*>(dev(4096)),
                  static_cast<const float*>(dev(4096 + 16)),
                  static_cast<const float*>(dev(1 << 20)), 4, 4, 4);
  });
  expect_usage(rig, "eps", [&] {
    ops::rmsnorm(*l, nullptr, dev(4096), dev(4096), dev(1 << 20), 2, 4,
                 std::numeric_limits<float>::quiet_NaN(), DType::F32);
  });
  expect_usage(rig, "dtype f32 is not built",
               [&] { ops::silu_and_mul(*l, nullptr, dev(4096), dev(1 << 20), 4, 8, DType::F32); });
  expect_usage(rig, "dtype 7", [&] {
    ops::softmax(*l, nullptr, dev(4096), dev(4096), 2, 4, static_cast<DType>(7));
  });
}

TEST(OpsLaunchPath, ValidRmsnormLogsThenLaunchesTheChosenKernelWithTableGeometry) {
  Rig rig;
  write_store(rig.tmp / "store", {"rmsnorm_dtype_bf16_block_512"});
  rig.cfg.api_log = 2;
  rig.cfg.log_file = (rig.tmp / "api.log").string();
  rig.driver->log_file = rig.cfg.log_file;
  rig.driver->nargs = 6;
  auto l = rig.loader();
  ops::rmsnorm(*l, nullptr, dev(1 << 20), dev(1 << 24), dev(1 << 28), 37, 4096, 1e-5f, DType::BF16);
  kiln::runtime::configure_logging(kiln::runtime::LogLevel::Warn, 0, "");
  ASSERT_EQ(rig.driver->launches.size(), 1u);
  const auto& r = rig.driver->launches[0];
  EXPECT_EQ(r.grid[0], 37u);
  EXPECT_EQ(r.block[0], 512u);
  EXPECT_EQ(r.words[3], 37u);    // rows
  EXPECT_EQ(r.words[4], 4096u);  // cols
  float eps;
  std::memcpy(&eps, &r.words[5], 4);
  EXPECT_FLOAT_EQ(eps, 1e-5f);
  // The API log line, with its arguments, was written before the launch.
  EXPECT_NE(r.log_at_launch.find("kiln api: rmsnorm("), std::string::npos) << r.log_at_launch;
  EXPECT_NE(r.log_at_launch.find("uri=rmsnorm_dtype_bf16_block_512"), std::string::npos);
  EXPECT_NE(r.log_at_launch.find("rows=37"), std::string::npos);
  EXPECT_NE(r.log_at_launch.find("cols=4096"), std::string::npos);
}

TEST(OpsLaunchPath, ReduceSumLaunchesPartialThenFinalOverTheWorkspace) {
  Rig rig;
  write_store(rig.tmp / "store", {"reduce_sum_dtype_f16"});
  rig.driver->nargs = 1;
  auto l = rig.loader();
  ops::reduce_sum(*l, nullptr, dev(256), dev(1 << 20), 12345, dev(1 << 24), 4096, DType::F16);
  ASSERT_EQ(rig.driver->launches.size(), 2u);
  EXPECT_EQ(rig.driver->launches[0].grid[0], 256u);
  EXPECT_EQ(rig.driver->launches[0].block[0], 256u);
  EXPECT_EQ(rig.driver->launches[0].words[0], 12345u);  // n
  EXPECT_EQ(rig.driver->launches[1].grid[0], 1u);
  EXPECT_EQ(rig.driver->launches[1].words[0], 256u);  // num_partials = partial grid
  EXPECT_NE(rig.driver->launches[0].function, rig.driver->launches[1].function);
}

TEST(OpsLaunchPath, MissingArtifactIsNotFoundNamingTheChosenUri) {
  Rig rig;
  auto l = rig.loader();
  try {
    ops::softmax(*l, nullptr, dev(4096), dev(4096), 2, 1000, DType::F16);
    FAIL() << "no error";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    EXPECT_NE(std::string(e.what()).find("softmax_dtype_f16_block_256"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(rig.driver->launches.empty());
}

TEST(OpsCApi, BadArgumentsReturnUsageWithTheMessage) {
  kiln_config c;
  kiln_config_init(&c);
  c.offline = 1;
  c.disable_jit = 1;
  kiln_loader* l = nullptr;
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << kiln_last_error();
  EXPECT_EQ(
      kiln_op_rmsnorm(l, nullptr, nullptr, dev(4096), dev(8192), 2, 4, 1e-6f, KILN_DTYPE_BF16),
      KILN_ERROR_USAGE);
  EXPECT_NE(std::string(kiln_ops_last_error()).find("out is null"), std::string::npos)
      << kiln_ops_last_error();
  // One error slot for the whole C ABI: the loader's accessor reports the op's failure too.
  EXPECT_EQ(std::string(kiln_last_error()), std::string(kiln_ops_last_error()));
  EXPECT_EQ(kiln_op_reduce_sum(l, nullptr, dev(256), dev(4096), 10, dev(1 << 20),
                               kiln_op_reduce_sum_workspace_bytes() - 4, KILN_DTYPE_F32),
            KILN_ERROR_USAGE);
  EXPECT_NE(std::string(kiln_ops_last_error()).find("too small"), std::string::npos);
  EXPECT_EQ(kiln_op_axpy(nullptr, nullptr, dev(256), dev(512), 4, 1, KILN_DTYPE_F32),
            KILN_ERROR_USAGE);
  EXPECT_NE(std::string(kiln_ops_last_error()).find("loader is NULL"), std::string::npos);
  EXPECT_EQ(kiln_op_softmax(l, nullptr, dev(256), dev(256), 2, 4, static_cast<kiln_dtype>(9)),
            KILN_ERROR_USAGE);
  kiln_loader_destroy(l);
}

}  // namespace

namespace {

// gemm_f16 remembers, per loader and context, that the wgmma kernel is unusable. A Loader built
// where a destroyed one lived (same address, placement new) must not inherit that verdict: here
// the first loader's stores lack the wgmma kernel, the second's have it, and the second must use
// it. Keyed by address, the second call would skip wgmma and return the tensor-core URI. It
// also asks the loader's own driver (the fake, CC 9.0), not a driver of its own.
TEST(OpsGemmF16, ANewLoaderAtARecycledAddressDoesNotInheritTheOldOnesFallback) {
  Rig rig;
  write_store(rig.tmp / "without-wgmma", {"gemm_f16_tc_bm_64_bn_64"});
  write_store(rig.tmp / "with-wgmma", {"hopper_wgmma_bn_64", "gemm_f16_tc_bm_64_bn_64"});
  alignas(kiln::Loader) unsigned char storage[sizeof(kiln::Loader)];
  auto build = [&](const std::string& store) {
    kiln::LoaderConfig cfg = rig.cfg;
    cfg.artifact_path = {(rig.tmp / store).string()};
    kiln::plan::LoaderDeps d;
    d.driver = rig.driver;
    d.installed_store = (rig.tmp / "installed").string();
    return kiln::make_loader_at(storage, kiln::test::reference_description(), cfg, std::move(d));
  };
  auto* C = static_cast<float*>(dev(1 << 20));
  kiln::Loader* first = build("without-wgmma");
  const std::uint64_t first_id = first->id();
  EXPECT_EQ(ops::gemm_f16(*first, nullptr, C, dev(8192), dev(16384), 64, 64, 64),
            "gemm_f16_tc_bm_64_bn_64");
  first->~Loader();
  kiln::Loader* second = build("with-wgmma");
  ASSERT_EQ(static_cast<void*>(second), static_cast<void*>(first));
  EXPECT_NE(second->id(), first_id) << "a loader id was reused";
  EXPECT_EQ(ops::gemm_f16(*second, nullptr, C, dev(8192), dev(16384), 64, 64, 64),
            "hopper_wgmma_bn_64");
  second->~Loader();
  EXPECT_EQ(rig.driver->launches.size(), 2u);
}

}  // namespace
