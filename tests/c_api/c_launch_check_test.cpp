// The C ABI's launch checked against the kernel's parameters (kiln_launch_args,
// kiln_kernel_argument_count / _info) over the stand-in driver that reports them.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "c_api_internal.hpp"
#include "kiln/kernels.h"
#include "kiln/kiln.h"
#include "stand_in_driver.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace {

TEST(CLaunchCheck, ArgumentsAreReportedAndAWrongCountIsUsageWithNothingLaunched) {
  kiln::test::TempDir tmp;
  kiln::test::ReleaseSpec rel;
  rel.loadable = true;
  rel.with_artifacts({{"axpy_dtype_f32", "image:sm_90"}});
  kiln::test::write_store_entry(tmp / "store", rel, "sm_90");
  const std::string store = (tmp / "store").string(), cache = (tmp / "cache").string();
  kiln_config c;
  kiln_config_init(&c);
  c.artifact_path = store.c_str();
  c.cache_dir = cache.c_str();
  c.offline = 1;
  c.disable_jit = 1;
  auto driver = std::make_shared<kiln::test::Cc90Driver>();
  driver->parameters["*"] = {8, 4, 8, 8};
  kiln::plan::LoaderDeps deps;
  deps.driver = driver;
  deps.installed_store = "";
  kiln_loader* l = nullptr;
  ASSERT_EQ(kiln::c_api::loader_create_with(kiln_kernels_package(), &c, std::move(deps), &l),
            KILN_OK)
      << kiln_last_error();
  kiln_kernel* k = nullptr;
  ASSERT_EQ(kiln_get(l, "axpy_dtype_f32", &k), KILN_OK) << kiln_last_error();
  size_t count = 0, offset = 0, size = 0;
  ASSERT_EQ(kiln_kernel_argument_count(l, k, 0, &count), KILN_OK) << kiln_last_error();
  EXPECT_EQ(count, 4u);
  ASSERT_EQ(kiln_kernel_argument_info(l, k, 0, 1, &offset, &size), KILN_OK);
  EXPECT_EQ(offset, 8u);
  EXPECT_EQ(size, 4u);
  EXPECT_EQ(kiln_kernel_argument_info(l, k, 0, 4, &offset, &size), KILN_ERROR_USAGE);

  long long n = 1;
  void* one[] = {&n};
  const unsigned grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
  EXPECT_EQ(kiln_launch_args(l, k, 0, grid, block, 0, nullptr, one, 1), KILN_ERROR_USAGE);
  std::string msg = kiln_last_error();
  EXPECT_NE(msg.find("axpy_dtype_f32 takes 4 arguments, 1 given"), std::string::npos) << msg;
  EXPECT_STREQ(kiln_last_error_field("expected"), "4");
  EXPECT_STREQ(kiln_last_error_field("actual"), "1");
  EXPECT_EQ(kiln_launch_args(l, k, 0, grid, block, (size_t{1} << 32) + 5, nullptr, one, 4),
            KILN_ERROR_USAGE);
  EXPECT_STREQ(kiln_last_error_field("argument"), "shared_bytes");
  EXPECT_TRUE(driver->launches.empty());
  float a = 1.0f;
  std::uint64_t x = 0x1000, y = 0x2000;
  void* four[] = {&n, &a, &x, &y};
  EXPECT_EQ(kiln_launch_args(l, k, 0, grid, block, 0, nullptr, four, 4), KILN_OK)
      << kiln_last_error();
  EXPECT_EQ(driver->launches.size(), 1u);
  kiln_loader_destroy(l);
}

}  // namespace
