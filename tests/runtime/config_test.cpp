#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "runtime/log.hpp"
#include "test_util.hpp"

namespace {

using kiln::ErrorKind;
using kiln::LoaderConfig;

LoaderConfig from(const std::map<std::string, std::string>& env) {
  return LoaderConfig::from_env([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

ErrorKind kind_of(const std::map<std::string, std::string>& env, std::string* msg) {
  try {
    from(env);
  } catch (const kiln::Error& e) {
    *msg = e.what();
    return e.kind();
  }
  return ErrorKind::Internal;
}

TEST(Config, BooleansAcceptExactlyTheEightSpellings) {
  for (const char* t : {"1", "true", "yes", "on"})
    EXPECT_TRUE(from({{"KILN_OFFLINE", t}}).offline) << t;
  for (const char* f : {"0", "false", "no", "off"})
    EXPECT_FALSE(from({{"KILN_OFFLINE", f}}).offline) << f;
  EXPECT_TRUE(from({{"KILN_DISABLE_JIT", "on"}}).disable_jit);
  EXPECT_TRUE(from({{"KILN_ALLOW_STALE", "yes"}}).allow_stale);
}

TEST(Config, AnyOtherBooleanIsUsageErrorNamingTheVariable) {
  for (const char* var : {"KILN_OFFLINE", "KILN_DISABLE_JIT", "KILN_ALLOW_STALE"}) {
    for (const char* bad : {"TRUE", "2", "y", "enabled", " 1"}) {
      std::string msg;
      EXPECT_EQ(kind_of({{var, bad}}, &msg), ErrorKind::Usage) << var << "=" << bad;
      EXPECT_NE(msg.find(var), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
    }
  }
}

TEST(Config, UnsetGivesDefaultsAndCacheUnderXdgOrHome) {
  LoaderConfig c = from({{"XDG_CACHE_HOME", "/x/cache"}, {"HOME", "/home/u"}});
  EXPECT_FALSE(c.offline);
  EXPECT_FALSE(c.disable_jit);
  EXPECT_FALSE(c.allow_stale);
  EXPECT_EQ(c.cache_dir, "/x/cache/kiln");
  EXPECT_EQ(from({{"HOME", "/home/u"}}).cache_dir, "/home/u/.cache/kiln");
  EXPECT_EQ(from({{"HOME", "/home/u"}, {"KILN_CACHE_DIR", "/c"}}).cache_dir, "/c");
  EXPECT_EQ(c.log_level, "warn");
  EXPECT_EQ(c.api_log, 0);
}

TEST(Config, ArtifactPathAndMirrorsAreSplitInOrder) {
  LoaderConfig c = from({{"KILN_ARTIFACT_PATH", "/a::/b:/c"},
                         {"KILN_MIRRORS", "https://m1/x, file:///m2\thttps://m3"}});
  EXPECT_EQ(c.artifact_path, (std::vector<std::string>{"/a", "/b", "/c"}));
  EXPECT_EQ(c.mirrors, (std::vector<std::string>{"https://m1/x", "file:///m2", "https://m3"}));
}

TEST(Config, BadLogLevelsAndIndexDigestAreUsageErrorsNamingTheVariable) {
  std::string msg;
  EXPECT_EQ(kind_of({{"KILN_LOG", "verbose"}}, &msg), ErrorKind::Usage);
  EXPECT_NE(msg.find("KILN_LOG"), std::string::npos);
  EXPECT_EQ(kind_of({{"KILN_API_LOG", "4"}}, &msg), ErrorKind::Usage);
  EXPECT_NE(msg.find("KILN_API_LOG"), std::string::npos);
  EXPECT_EQ(kind_of({{"KILN_INDEX_SHA256", "abc"}}, &msg), ErrorKind::Usage);
  EXPECT_NE(msg.find("KILN_INDEX_SHA256"), std::string::npos);
  EXPECT_EQ(from({{"KILN_API_LOG", "2"}, {"KILN_LOG", "debug"}}).api_log, 2);
}

TEST(Config, LogFilePatternExpandsPid) {
  EXPECT_EQ(kiln::runtime::expand_log_path("/tmp/kiln-%p.log", 42), "/tmp/kiln-42.log");
  EXPECT_EQ(kiln::runtime::expand_log_path("a%p%p%", 7), "a77%");
}

TEST(Config, LogLinesAndApiCallsGoToTheConfiguredFile) {
  kiln::test::TempDir tmp;
  std::string pattern = (tmp / "log-%p.txt").string();
  kiln::runtime::configure_logging(kiln::runtime::LogLevel::Info, 2, pattern);
  kiln::runtime::log(kiln::runtime::LogLevel::Info, "loaded something");
  kiln::runtime::log(kiln::runtime::LogLevel::Debug, "not shown");
  if (kiln::runtime::api_log_enabled(1)) kiln::runtime::api_log("rmsnorm", {{"n", "128"}, {"dtype", "bf16"}});
  kiln::runtime::configure_logging(kiln::runtime::LogLevel::Warn, 0, "/dev/stderr");
  std::string text = kiln::test::read_file(tmp / ("log-" + std::to_string(::getpid()) + ".txt"));
  EXPECT_NE(text.find("kiln [info] loaded something"), std::string::npos) << text;
  EXPECT_EQ(text.find("not shown"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln api: rmsnorm(n=128, dtype=bf16)"), std::string::npos) << text;
  EXPECT_FALSE(kiln::runtime::api_log_enabled(1));
}

}  // namespace
