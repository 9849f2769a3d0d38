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
#include "stand_in_driver.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"
#include "transport/http_transport.hpp"

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

// Two packages on one plain file:// mirror, each release pinned by the digest of its own index.
struct TwoPinnedPackages {
  kiln::test::TempDir tmp;
  // A second package: the reference description under another name (its URIs and source
  // hashes are the reference package's, so the same synthetic artifacts load for both).
  kiln_package acme = [] {
    kiln_package p = *kiln_kernels_package();
    p.name = "acme-kernels";
    return p;
  }();
  kiln::test::SyntheticDist kiln_dist = release("kiln-kernels");
  kiln::test::SyntheticDist acme_dist = release("acme-kernels");
  std::string mirror = "file://" + (tmp / "mirror").string();
  int loaders = 0;

  kiln::test::SyntheticDist release(const std::string& package) {
    kiln::test::ReleaseSpec rel;
    rel.package = package;
    rel.loadable = true;
    return kiln::test::write_release_dist(tmp / "mirror", rel, {"sm_90"});
  }
  // A loader of `package` on a CC 9.0 stand-in, fetching from the mirror into a cache of its own
  // (so nothing one loader fetched serves another), pinned by `pin`.
  kiln_status create(const kiln_package* package, const char* pin, kiln_loader** out) {
    const std::string cache = (tmp / ("cache-" + std::to_string(loaders++))).string();
    kiln_config c = offline_config(cache);
    c.offline = 0;
    c.mirrors = mirror.c_str();
    c.tuf_root = "";
    c.index_sha256 = pin;
    kiln::plan::LoaderDeps deps;
    deps.driver = std::make_shared<kiln::test::Cc90Driver>();
    deps.installed_store = (tmp / "no-installed-store").string();
    return kiln::c_api::loader_create_with(package, &c, std::move(deps), out);
  }
};

TEST(CApi, EachLoaderHasItsOwnIndexPinAndEachRefusesTheOtherPackagesIndex) {
  kiln::transport::forget_bad_mirrors();
  TwoPinnedPackages two;
  ASSERT_NE(two.kiln_dist.index_sha256, two.acme_dist.index_sha256);
  kiln_loader* reference_loader = nullptr;
  kiln_loader* acme_loader = nullptr;
  ASSERT_EQ(
      two.create(kiln_kernels_package(), two.kiln_dist.index_sha256.c_str(), &reference_loader),
      KILN_OK)
      << last();
  ASSERT_EQ(two.create(&two.acme, two.acme_dist.index_sha256.c_str(), &acme_loader), KILN_OK)
      << last();
  kiln_kernel* k = nullptr;
  EXPECT_EQ(kiln_get(reference_loader, "axpy_dtype_f32", &k), KILN_OK) << last();
  EXPECT_EQ(kiln_get(acme_loader, "axpy_dtype_f32", &k), KILN_OK) << last();
  kiln_loader_destroy(reference_loader);
  kiln_loader_destroy(acme_loader);

  // Swapped: each pin refuses the other package's index, naming both digests.
  struct Swap {
    const kiln_package* package;
    const kiln::test::SyntheticDist& pinned;
    const kiln::test::SyntheticDist& served;
  };
  for (const Swap& s : {Swap{kiln_kernels_package(), two.acme_dist, two.kiln_dist},
                        Swap{&two.acme, two.kiln_dist, two.acme_dist}}) {
    // A mirror that served bytes failing a pin is skipped for the rest of the process.
    kiln::transport::forget_bad_mirrors();
    kiln_loader* l = nullptr;
    ASSERT_EQ(two.create(s.package, s.pinned.index_sha256.c_str(), &l), KILN_OK) << last();
    EXPECT_EQ(kiln_get(l, "axpy_dtype_f32", &k), KILN_ERROR_INTEGRITY) << last();
    EXPECT_NE(last().find("index SHA-256 mismatch: pinned " + s.pinned.index_sha256 + ", served " +
                          s.served.index_sha256),
              std::string::npos)
        << last();
    kiln_loader_destroy(l);
  }
  kiln::transport::forget_bad_mirrors();
}

TEST(CApi, IndexPinFieldNullTakesTheVariableAndEmptyClearsIt) {
  kiln::test::TempDir tmp;
  const std::string cache = (tmp / "cache").string();
  const std::string from_env(64, 'e');
  const std::string own(64, '0');
  ScopedEnv e("KILN_INDEX_SHA256", from_env.c_str());
  kiln_config c = offline_config(cache);
  kiln_loader* l = nullptr;
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << last();
  EXPECT_EQ(l->loader->config().index_sha256, from_env);  // kiln_config_init: NULL
  kiln_loader_destroy(l);
  c.index_sha256 = own.c_str();
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << last();
  EXPECT_EQ(l->loader->config().index_sha256, own);
  kiln_loader_destroy(l);
  c.index_sha256 = "";
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << last();
  EXPECT_EQ(l->loader->config().index_sha256, "");
  kiln_loader_destroy(l);
  // A caller compiled against the header before index_sha256: its config ends there.
  c.struct_size = offsetof(kiln_config, index_sha256);
  c.index_sha256 = "not read";
  ASSERT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_OK) << last();
  EXPECT_EQ(l->loader->config().index_sha256, from_env);
  kiln_loader_destroy(l);
}

// The field is checked by the variable's own rule, and the message is the variable's with the
// field named: the caller set the field.
TEST(CApi, BadIndexPinFieldIsUsageWithTheVariablesRuleNamingTheField) {
  kiln::test::TempDir tmp;
  const std::string cache = (tmp / "cache").string();
  const std::string upper(64, 'A');
  for (const std::string& bad : {std::string("abc"), upper}) {
    kiln_config c = offline_config(cache);
    c.index_sha256 = bad.c_str();
    kiln_loader* l = nullptr;
    EXPECT_EQ(kiln_loader_create(kiln_kernels_package(), &c, &l), KILN_ERROR_USAGE) << bad;
    EXPECT_EQ(l, nullptr);
    EXPECT_EQ(last(), "kiln_config.index_sha256='" + bad +
                          "' is not a SHA-256 digest: expected 64 lowercase hex digits");
    ASSERT_NE(kiln_last_error_field("field"), nullptr);
    EXPECT_STREQ(kiln_last_error_field("field"), "kiln_config.index_sha256");
    ASSERT_NE(kiln_last_error_field("value"), nullptr);
    EXPECT_EQ(kiln_last_error_field("value"), bad);
  }
  // The variable refuses the same values with the same words.
  ScopedEnv e("KILN_INDEX_SHA256", "abc");
  kiln_loader* l = nullptr;
  EXPECT_EQ(kiln_loader_create(kiln_kernels_package(), nullptr, &l), KILN_ERROR_USAGE);
  EXPECT_EQ(last(),
            "KILN_INDEX_SHA256='abc' is not a SHA-256 digest: expected 64 lowercase hex digits");
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
  kiln::plan::LoaderDeps deps;
  deps.driver = kiln::runtime::make_cuda_driver((tmp / "no-driver-here" / "libcuda.so.1").string());
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
