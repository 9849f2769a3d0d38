// The one table of environment variables (core/runtime/environment.hpp): docs/loader.md lists
// exactly it, and a bad value is one Error{Usage} (same message, fields `variable` and `value`)
// through LoaderConfig::from_env, the C API, the CLI and the logs' first use.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "kiln/error.hpp"
#include "kiln/kiln.h"
#include "kiln/loader.hpp"
#include "runtime/environment.hpp"
#include "runtime/log.hpp"
#include "test_util.hpp"

namespace {

using kiln::ErrorKind;

// Re-run as a child by LogsReadBeforeAnyLoaderReportABadValueWithTheSameMessage: touch both
// logs (which read KILN_LOG and KILN_API_LOG at first use), then exit before any test runs.
[[maybe_unused]] const bool kLogChild = [] {
  if (!std::getenv("KILN_ENV_TEST_LOG_CHILD")) return false;
  std::printf("warn=%d api=%d\n", kiln::runtime::log_enabled(kiln::runtime::LogLevel::Warn) ? 1 : 0,
              kiln::runtime::api_log_enabled(1) ? 1 : 0);
  std::fflush(stdout);
  std::_Exit(0);
}();

kiln::runtime::Environment from(const std::map<std::string, std::string>& env) {
  return kiln::runtime::read_environment([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::optional<kiln::Error> error_of(const std::map<std::string, std::string>& env) {
  try {
    from(env);
  } catch (const kiln::Error& e) {
    return e;
  }
  return std::nullopt;
}

// Every variable whose parser can refuse a value, with one such value.
const std::map<std::string, std::string> kBadValues = {
    {"KILN_OFFLINE", "maybe"},    {"KILN_DISABLE_JIT", "2"}, {"KILN_ALLOW_STALE", "enabled"},
    {"KILN_INDEX_SHA256", "abc"}, {"KILN_LOG", "verbose"},   {"KILN_API_LOG", "4"},
};

std::string row(const kiln::runtime::EnvVariable& v) {
  return std::string("| `") + v.name + "` | " + v.meaning + " | " + v.default_text + " |";
}

TEST(EnvironmentTable, DocsListExactlyTheTableInOrder) {
  std::istringstream doc(kiln::test::read_file(kiln::test::source_dir() + "/docs/loader.md"));
  std::vector<std::string> rows;
  bool in_settings = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("## ", 0) == 0) in_settings = line == "## Settings";
    if (in_settings && line.rfind("| `", 0) == 0) rows.push_back(line);
  }
  std::vector<std::string> expected;
  for (const auto& v : kiln::runtime::env_variables()) expected.push_back(row(v));
  EXPECT_EQ(rows, expected) << "docs/loader.md \"## Settings\" must list env_variables() exactly";
}

TEST(EnvironmentTable, EveryRefusableVariableHasABadValueInThisTest) {
  // A variable added to the table with a parser that can refuse must be added to kBadValues.
  for (const auto& v : kiln::runtime::env_variables()) {
    std::optional<kiln::Error> e = error_of({{v.name, "\x01not-a-valid-value"}});
    EXPECT_EQ(e.has_value(), kBadValues.count(v.name) == 1) << v.name;
  }
}

TEST(EnvironmentTable, BadValueIsAUsageErrorNamingVariableAndValueInMessageAndFields) {
  for (const auto& [name, bad] : kBadValues) {
    std::optional<kiln::Error> e = error_of({{name, bad}});
    ASSERT_TRUE(e) << name;
    EXPECT_EQ(e->kind(), ErrorKind::Usage) << name;
    EXPECT_EQ(std::string(e->what()).rfind(name + "='" + bad + "' is not ", 0), 0u) << e->what();
    ASSERT_NE(e->field("variable"), nullptr) << name;
    EXPECT_EQ(*e->field("variable"), name);
    ASSERT_NE(e->field("value"), nullptr) << name;
    EXPECT_EQ(*e->field("value"), bad);
  }
}

TEST(EnvironmentTable, ToolkitAndCertificateVariablesReachTheirFields) {
  kiln::runtime::Environment e = from({{"KILN_CA_BUNDLE", "/etc/ca.pem"},
                              {"KILN_NVRTC_LIBRARY", "/opt/nvrtc.so"},
                              {"CUDA_HOME", "/cuda-home"},
                              {"CUDA_PATH", "/cuda-path"},
                              {"KILN_COMPILER_LAUNCHER", "sccache"},
                              {"SOURCE_DATE_EPOCH", "1700000000"},
                              {"PATH", "/bin:/usr/bin"}});
  EXPECT_EQ(e.loader.ca_bundle, "/etc/ca.pem");
  EXPECT_EQ(e.loader.nvrtc_library, "/opt/nvrtc.so");
  EXPECT_EQ(e.loader.cuda_home, "/cuda-home");  // CUDA_HOME before CUDA_PATH
  EXPECT_EQ(e.cuda_home, "/cuda-home");
  EXPECT_EQ(e.compiler_launcher, "sccache");
  EXPECT_EQ(e.source_date_epoch, "1700000000");
  EXPECT_EQ(e.path, "/bin:/usr/bin");
  EXPECT_EQ(from({{"KILN_CUDA_HOME", "/k"}, {"CUDA_HOME", "/c"}}).loader.cuda_home, "/k");
  EXPECT_EQ(from({{"CUDA_PATH", "/p"}}).loader.cuda_home, "/p");
  EXPECT_EQ(from({{"CUDA_PATH", "/p"}}).cuda_home, "");  // nvcc search: CUDA_HOME only
}

// Runs `kiln ARGS` with one more variable; only that one differs from this process's.
kiln::test::RunResult cli_with(const std::string& name, const std::string& value,
                               const std::string& args) {
  return kiln::test::run(name + "='" + value + "' " + kiln::test::kiln_cli() + " " + args);
}

TEST(EnvironmentTable, BadValueIsTheSameErrorThroughTheLoaderTheCApiAndTheCli) {
  kiln::test::TempDir tmp;
  for (const auto& [name, bad] : kBadValues) {
    SCOPED_TRACE(name + "=" + bad);
    const std::string message = error_of({{name, bad}})->what();

    // C++: the default Loader constructor reads the environment.
    ::setenv(name.c_str(), bad.c_str(), 1);
    try {
      kiln::Loader loader(kiln::test::reference_description());
      ADD_FAILURE() << "Loader() accepted " << name << "=" << bad;
    } catch (const kiln::Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage);
      EXPECT_EQ(e.what(), message);
    }
    // C: a NULL config takes everything from the environment.
    kiln_loader* l = nullptr;
    EXPECT_EQ(kiln_loader_create(kiln_kernels_package(), nullptr, &l), KILN_ERROR_USAGE);
    EXPECT_EQ(l, nullptr);
    EXPECT_EQ(std::string(kiln_last_error()), message);
    ASSERT_NE(kiln_last_error_field("variable"), nullptr);
    EXPECT_EQ(std::string(kiln_last_error_field("variable")), name);
    EXPECT_EQ(std::string(kiln_last_error_field("value")), bad);
    EXPECT_EQ(kiln_last_error_field("uri"), nullptr);
    ::unsetenv(name.c_str());

    // CLI: resolve (the loader's configuration) and fetch (the mirror settings) alike.
    const std::string line = "kiln: error (usage): " + message + "\n";
    auto resolve = cli_with(name, bad, "resolve axpy_dtype_f32 --device sm_90");
    EXPECT_EQ(resolve.exit_code, 2) << resolve.out;
    EXPECT_NE(resolve.out.find(line), std::string::npos) << resolve.out;
    auto fetch = cli_with(name, bad,
                          "fetch --targets sm_90 --mirror file:///nowhere --dest " +
                              (tmp / "store").string() + " --json");
    EXPECT_EQ(fetch.exit_code, 2) << fetch.out;
    EXPECT_NE(fetch.out.find(line), std::string::npos) << fetch.out;
    // --json: the error as JSON on stdout, with its fields.
    auto at = fetch.out.find("{\"error\":");
    ASSERT_NE(at, std::string::npos) << fetch.out;
    auto j = nlohmann::json::parse(fetch.out.substr(at, fetch.out.find('\n', at) - at));
    EXPECT_EQ(j["error"]["kind"], "usage");
    EXPECT_EQ(j["error"]["exit_code"], 2);
    EXPECT_EQ(j["error"]["message"], message);
    EXPECT_EQ(j["error"]["fields"]["variable"], name);
    EXPECT_EQ(j["error"]["fields"]["value"], bad);
    EXPECT_FALSE(std::filesystem::exists(tmp / "store")) << "nothing is written on a bad value";
  }
}

TEST(EnvironmentTable, LogsReadBeforeAnyLoaderReportABadValueWithTheSameMessage) {
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  auto r = kiln::test::run("KILN_ENV_TEST_LOG_CHILD=1 KILN_LOG=verbose KILN_API_LOG=4 " + self);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const auto& [name, bad] :
       {std::pair<std::string, std::string>{"KILN_LOG", "verbose"}, {"KILN_API_LOG", "4"}}) {
    std::string warning =
        "kiln [warn] " + std::string(error_of({{name, bad}})->what()) + "; using the default\n";
    EXPECT_NE(r.out.find(warning), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("warn=1 api=0"), std::string::npos) << r.out;  // the defaults
}

}  // namespace
