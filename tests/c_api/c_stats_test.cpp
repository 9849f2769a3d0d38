// kiln_loader_stats_json: the loader's statistics as JSON in the caller's buffer, through the C
// ABI as a C program calls it (the CC 9.0 stand-in driver, a store on disk).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "c_api_internal.hpp"
#include "kiln/kernels.h"
#include "kiln/kiln.h"
#include "stand_in_driver.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace {

const std::string kUri = "axpy_dtype_f32";

TEST(CStats, JsonComesIntoTheCallersBufferAfterAskingItsLength) {
  kiln::test::TempDir tmp;
  kiln::test::ReleaseSpec rel;
  rel.loadable = true;
  rel.with_artifacts({{kUri, "image:sm_90"}});
  kiln::test::write_store_entry(tmp / "store", rel, "sm_90");
  const std::string store = (tmp / "store").string(), cache = (tmp / "cache").string();
  kiln_config c;
  kiln_config_init(&c);
  c.artifact_path = store.c_str();
  c.cache_dir = cache.c_str();
  c.offline = 1;
  c.disable_jit = 1;
  kiln::plan::LoaderDeps deps;
  deps.driver = std::make_shared<kiln::test::Cc90Driver>();
  deps.installed_store = (tmp / "no-installed-store").string();
  kiln_loader* l = nullptr;
  ASSERT_EQ(kiln::c_api::loader_create_with(kiln_kernels_package(), &c, std::move(deps), &l),
            KILN_OK)
      << kiln_last_error();
  kiln_kernel* k = nullptr;
  ASSERT_EQ(kiln_get(l, kUri.c_str(), &k), KILN_OK) << kiln_last_error();

  std::size_t length = 0;
  ASSERT_EQ(kiln_loader_stats_json(l, nullptr, 0, &length), KILN_OK) << kiln_last_error();
  ASSERT_GT(length, 0u);
  std::string buf(length + 1, 'x');
  ASSERT_EQ(kiln_loader_stats_json(l, buf.data(), buf.size(), nullptr), KILN_OK);
  EXPECT_EQ(buf.back(), '\0');
  auto j = nlohmann::json::parse(buf.c_str());
  EXPECT_EQ(j.at("stats_format"), 1);
  EXPECT_EQ(j.at("hits").at("store"), 1);
  EXPECT_EQ(j.at("bytes").at("verified"), 11);  // "image:sm_90"
  // One byte short: refused, naming both sizes, the buffer untouched.
  std::string small(length, 'x');
  EXPECT_EQ(kiln_loader_stats_json(l, small.data(), small.size(), nullptr), KILN_ERROR_USAGE);
  EXPECT_EQ(std::string(kiln_last_error_field("expected")), std::to_string(length + 1));
  EXPECT_EQ(std::string(kiln_last_error_field("actual")), std::to_string(length));
  EXPECT_EQ(small, std::string(length, 'x'));
  EXPECT_EQ(kiln_loader_stats_json(l, nullptr, 8, &length), KILN_ERROR_USAGE);
  kiln_loader_destroy(l);
  EXPECT_EQ(kiln_loader_stats_json(nullptr, nullptr, 0, &length), KILN_ERROR_USAGE);
}

}  // namespace
