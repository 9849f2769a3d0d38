#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "c_api_internal.hpp"
#include "plan/resolver.hpp"
#include "runtime/driver.hpp"
#include "test_util.hpp"

namespace {

// Sets an environment variable for one test and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string last() { return kiln_last_error(); }

kiln_config offline_config(const std::string& cache) {
  kiln_config c;
  kiln_config_init(&c);
  c.cache_dir = cache.c_str();
  c.artifact_path = "";
  c.mirrors = "";
  c.offline = 1;
  c.disable_jit = 1;
  return c;
}

TEST(CApi, NullArgumentsAreUsageErrorsNamingTheArgument) {
  EXPECT_EQ(kiln_loader_create(kiln_kernels_package(), nullptr, nullptr), KILN_ERROR_USAGE);
  EXPECT_NE(last().find("out is NULL"), std::string::npos) << last();
  kiln_kernel* k = nullptr;
  EXPECT_EQ(kiln_get(nullptr, "axpy_dtype_f32", &k), KILN_ERROR_USAGE);
  EXPECT_NE(last().find("loader is NULL"), std::string::npos) << last();
  EXPECT_EQ(kiln_prefetch(nullptr, nullptr, 0), KILN_ERROR_USAGE);
  void* fn = nullptr;
  EXPECT_EQ(kiln_kernel_function(nullptr, 0, &fn), KILN_ERROR_USAGE);
  unsigned g[3] = {1, 1, 1};
  EXPECT_EQ(kiln_launch(nullptr, nullptr, 0, g, g, 0, nullptr, nullptr), KILN_ERROR_USAGE);
  EXPECT_EQ(kiln_kernel_entry_count(nullptr), 0u);
}

TEST(CApi, ConfigWithoutStructSizeIsRejected) {
  kiln_config c{};
  kiln_loader* l = nullptr;
  EXPECT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_ERROR_USAGE);
  EXPECT_EQ(l, nullptr);
  EXPECT_NE(last().find("kiln_config_init"), std::string::npos) << last();
}

TEST(CApi, TufRootReachesTheLoaderAndAConfigSizedBeforeItTakesItFromTheEnvironment) {
  kiln::test::TempDir tmp;
  const std::string cache = (tmp / "cache").string();
  ScopedEnv e("KILN_TUF_ROOT", "/from/env/root.json");
  kiln_config c = offline_config(cache);
  c.tuf_root = "/etc/kiln/root.json";
  kiln_loader* l = nullptr;
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << last();
  EXPECT_EQ(l->loader->config().tuf_root, "/etc/kiln/root.json");
  kiln_loader_destroy(l);
  // A caller compiled against the header before tuf_root: its config ends there.
  c.struct_size = offsetof(kiln_config, tuf_root);
  c.tuf_root = "/must/not/be/read";
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << last();
  EXPECT_EQ(l->loader->config().tuf_root, "/from/env/root.json");
  kiln_loader_destroy(l);
}

// The config's artifact_path and mirrors are split by their variables' own rules (':' for the
// path; whitespace and ',' for mirrors), replace what the environment says, and "" clears it.
TEST(CApi, ListsGivenInTheConfigAreSplitAsTheirVariablesAndReplaceTheEnvironment) {
  kiln::test::TempDir tmp;
  const std::string cache = (tmp / "cache").string();
  ScopedEnv path("KILN_ARTIFACT_PATH", "/env/a:/env/b");
  ScopedEnv mirrors("KILN_MIRRORS", "https://env.example/m");
  kiln_config c = offline_config(cache);
  c.artifact_path = "/opt/a::/opt/b:";
  c.mirrors = "https://m1.example/k, https://m2.example/k\thttps://m3.example/k";
  kiln_loader* l = nullptr;
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << last();
  EXPECT_EQ(l->loader->config().artifact_path, (std::vector<std::string>{"/opt/a", "/opt/b"}));
  EXPECT_EQ(l->loader->config().mirrors,
            (std::vector<std::string>{"https://m1.example/k", "https://m2.example/k",
                                      "https://m3.example/k"}));
  kiln_loader_destroy(l);
  c.artifact_path = "";
  c.mirrors = "";
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << last();
  EXPECT_TRUE(l->loader->config().artifact_path.empty());
  EXPECT_TRUE(l->loader->config().mirrors.empty());
  kiln_loader_destroy(l);
  c.artifact_path = nullptr;  // NULL: the environment's
  c.mirrors = nullptr;
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << last();
  EXPECT_EQ(l->loader->config().artifact_path, (std::vector<std::string>{"/env/a", "/env/b"}));
  EXPECT_EQ(l->loader->config().mirrors, std::vector<std::string>{"https://env.example/m"});
  kiln_loader_destroy(l);
}

TEST(CApi, BadEnvironmentBooleanIsUsageNamingTheVariable) {
  ScopedEnv e("KILN_OFFLINE", "maybe");
  kiln_loader* l = nullptr;
  EXPECT_EQ(kiln_loader_create(kiln_kernels_package(), nullptr, &l), KILN_ERROR_USAGE);
  EXPECT_EQ(l, nullptr);
  EXPECT_NE(last().find("KILN_OFFLINE='maybe'"), std::string::npos) << last();
}

TEST(CApi, BadConfigBooleanIsUsageNamingTheField) {
  kiln::test::TempDir tmp;
  const std::string cache = (tmp / "cache").string();  // outlives the config
  kiln_config c = offline_config(cache);
  c.allow_stale = 7;
  kiln_loader* l = nullptr;
  EXPECT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_ERROR_USAGE);
  EXPECT_NE(last().find("allow_stale"), std::string::npos) << last();
}

TEST(CApi, UnknownUriIsNotFoundWithNearMatches) {
  kiln::test::TempDir tmp;
  std::string cache = (tmp / "cache").string();
  kiln_config c = offline_config(cache);
  kiln_loader* l = nullptr;
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << last();
  kiln_kernel* k = nullptr;
  EXPECT_EQ(kiln_get(l, "axpy_dtype_f33", &k), KILN_ERROR_NOT_FOUND);
  EXPECT_EQ(k, nullptr);
  EXPECT_NE(last().find("axpy_dtype_f32"), std::string::npos) << last();
  const char* uris[] = {"axpy_dtype_f33", "nope"};
  EXPECT_EQ(kiln_prefetch(l, uris, 2), KILN_ERROR_NOT_FOUND);
  EXPECT_NE(last().find("nope"), std::string::npos) << last();
  kiln_loader_destroy(l);
}

TEST(CApi, WithoutADriverGetIsUnsupportedNamingLibcuda) {
  kiln::test::TempDir tmp;
  const std::string cache = (tmp / "cache").string();  // outlives the config
  kiln_config c = offline_config(cache);
  // The real driver over an absent libcuda.so.1: "no driver" on every machine, GPU or not.
  kiln::LoaderDeps deps;
  deps.driver = kiln::make_cuda_driver((tmp / "no-driver-here" / "libcuda.so.1").string());
  kiln_loader* l = nullptr;
  ASSERT_EQ(kiln::c_api::loader_create_with(kiln_kernels_package(), &c, std::move(deps), &l),
            KILN_OK)
      << last();
  kiln_kernel* k = reinterpret_cast<kiln_kernel*>(&c);  // must come back NULL
  kiln_status st = kiln_get(l, "axpy_dtype_f32", &k);
  std::string msg = last();
  kiln_loader_destroy(l);
  EXPECT_EQ(st, KILN_ERROR_UNSUPPORTED) << msg;
  EXPECT_EQ(k, nullptr);
  EXPECT_NE(msg.find("no CUDA driver"), std::string::npos) << msg;
  EXPECT_NE(msg.find("libcuda.so.1"), std::string::npos) << msg;
}

TEST(CApi, LastErrorIsPerThread) {
  kiln_loader_create(kiln_kernels_package(), nullptr, nullptr);
  std::string mine = last();
  std::string other;
  std::thread t([&] {
    kiln_kernel* k = nullptr;
    kiln_get(nullptr, nullptr, &k);
    other = kiln_last_error();
  });
  t.join();
  EXPECT_EQ(last(), mine);
  EXPECT_NE(other, mine);
}

TEST(CApi, StatusCodesMirrorErrorKindsAndExitCodes) {
  EXPECT_STREQ(kiln_status_name(KILN_OK), "ok");
  EXPECT_STREQ(kiln_status_name(KILN_ERROR_NOT_FOUND), "not-found");
  EXPECT_STREQ(kiln_status_name(KILN_ERROR_STALE), "stale");
  EXPECT_STREQ(kiln_status_name(KILN_ERROR_DRIVER), "driver");
  EXPECT_STREQ(kiln_status_name(static_cast<kiln_status>(99)), "unknown");
}

}  // namespace
