// Every launch checked against the kernel's own parameter list (cuKernelGetParamInfo, through the
// stand-in driver of tests/support/stand_in_driver.hpp), and every number of a launch in range:
// the C++ API (kiln::Loader::launch, arguments) and the C ABI (kiln_launch_args,
// kiln_kernel_argument_*).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>

#include "kiln/error.hpp"
#include "kiln/kiln.h"
#include "kiln/loader.hpp"
#include "loader_factory.hpp"
#include "stand_in_driver.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace {

using kiln::ErrorKind;
using kiln::test::TempDir;

const std::string kUri = "axpy_dtype_f32";  // axpy_kernel(long long n, float a, const T* x, T* y)

struct Rig {
  TempDir tmp;
  std::shared_ptr<kiln::test::Cc90Driver> driver = std::make_shared<kiln::test::Cc90Driver>();
  std::unique_ptr<kiln::Loader> loader;

  explicit Rig(bool driver_reports = true) {
    if (driver_reports) driver->parameters["*"] = {8, 4, 8, 8};
    kiln::test::ReleaseSpec rel;
    rel.loadable = true;
    rel.with_artifacts({{kUri, "image:sm_90"}});
    kiln::test::write_store_entry(tmp / "store", rel, "sm_90");
    kiln::LoaderConfig cfg;
    cfg.cache_dir = (tmp / "cache").string();
    cfg.offline = true;
    cfg.disable_jit = true;
    cfg.artifact_path = {(tmp / "store").string()};
    kiln::plan::LoaderDeps deps;
    deps.driver = driver;
    deps.installed_store = "";
    loader = kiln::make_loader(kiln::test::reference_description(), cfg, std::move(deps));
  }
};

struct AxpyArgs {
  long long n = 1000;
  float a = 2.0f;
  std::uint64_t x = 0x7000, y = 0x8000;
  void* args[4] = {&n, &a, &x, &y};
};

// The field's value, "" when absent.
std::string field(const kiln::Error& e, const char* name) {
  const std::string* v = e.field(name);
  return v ? *v : std::string();
}

kiln::Error launch_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return kiln::Error(ErrorKind::Internal, "no error");
}

TEST(LaunchCheck, TheKernelsParametersAreTheDriversAndARightLaunchPassesTheirBytes) {
  Rig rig;
  const kiln::KernelHandle& k = rig.loader->get(kUri);
  const auto& params = rig.loader->arguments(k);
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[1].offset, 8u);
  EXPECT_EQ(params[1].size, 4u);
  EXPECT_EQ(params[2].offset, 16u);
  AxpyArgs a;
  rig.loader->launch(k, 0, {4, 1, 1}, {256, 1, 1}, 0, nullptr, a.args, 4);
  ASSERT_EQ(rig.driver->launches.size(), 1u);
  float alpha = 0;
  std::memcpy(&alpha, rig.driver->launches[0].args[1].data(), 4);
  EXPECT_EQ(alpha, 2.0f);
}

TEST(LaunchCheck, AWrongCountIsAUsageErrorNamingTheKernelTheExpectedAndTheGiven) {
  Rig rig;
  const kiln::KernelHandle& k = rig.loader->get(kUri);
  AxpyArgs a;
  for (std::size_t given : {std::size_t{1}, std::size_t{3}, std::size_t{5}}) {
    kiln::Error e = launch_error(
        [&] { rig.loader->launch(k, 0, {1, 1, 1}, {32, 1, 1}, 0, nullptr, a.args, given); });
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find(kUri + " takes 4 arguments, " + std::to_string(given) +
                                         " given"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(field(e, "expected"), "4");
    EXPECT_EQ(field(e, "actual"), std::to_string(given));
  }
  EXPECT_TRUE(rig.driver->launches.empty());
}

TEST(LaunchCheck, SharedBytesPast32BitsAndAZeroDimensionAreRefusedNotTruncated) {
  Rig rig;
  const kiln::KernelHandle& k = rig.loader->get(kUri);
  AxpyArgs a;
  const std::size_t big = (std::size_t{1} << 32) + 5;
  kiln::Error e = launch_error(
      [&] { rig.loader->launch(k, 0, {1, 1, 1}, {32, 1, 1}, big, nullptr, a.args, 4); });
  EXPECT_EQ(e.kind(), ErrorKind::Usage);
  EXPECT_EQ(field(e, "argument"), "shared_bytes");
  EXPECT_NE(std::string(e.what()).find("4294967301 is out of range [0, 4294967295]"),
            std::string::npos);
  e = launch_error([&] { rig.loader->launch(k, 0, {0, 1, 1}, {32, 1, 1}, 0, nullptr, a.args, 4); });
  EXPECT_EQ(field(e, "argument"), "grid");
  EXPECT_TRUE(rig.driver->launches.empty());
}

TEST(LaunchCheck, ADriverThatCannotReportParametersLeavesTheCountUncheckedAndSaysSo) {
  Rig rig(/*driver_reports=*/false);
  const kiln::KernelHandle& k = rig.loader->get(kUri);
  kiln::Error e = launch_error([&] { rig.loader->arguments(k); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_NE(std::string(e.what()).find("cuKernelGetParamInfo"), std::string::npos);
  AxpyArgs a;
  rig.loader->launch(k, 0, {1, 1, 1}, {32, 1, 1}, 0, nullptr, a.args, 4);
  EXPECT_EQ(rig.driver->launches.size(), 1u);
}

}  // namespace
