// The environment, read from one table (environment.hpp): a fixed precedence (explicit fields
// set after from_env() win), and errors that name the variable and the value.
#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/config.hpp"
#include "runtime/environment.hpp"
#include "runtime/log.hpp"

namespace kiln::runtime {

namespace {

std::vector<std::string> split(const std::string& s, const std::string& separators) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (separators.find(c) != std::string::npos) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::optional<bool> bool_value(const std::string& value) {
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* t : kTrue)
    if (value == t) return true;
  for (const char* f : kFalse)
    if (value == f) return false;
  return std::nullopt;
}

constexpr const char* kBoolExpected = "one of 0, 1, true, false, yes, no, on, off";

template <bool LoaderConfig::*Field>
void apply_bool(Environment& env, const std::string& name, const std::string& v) {
  std::optional<bool> b = bool_value(v);
  if (!b) throw bad_env_value(name, v, "a boolean", kBoolExpected);
  env.loader.*Field = *b;
}

// One row per variable. A row's parser is a captureless lambda; the name is passed back in so
// that messages never spell it twice.
#define KILN_BOOL_ROW(NAME, FIELD, MEANING, DEFAULT)                                               \
  {                                                                                                \
    NAME, MEANING, DEFAULT,                                                                        \
        [](Environment& e, const std::string& v) { apply_bool<&LoaderConfig::FIELD>(e, NAME, v); } \
  }

// Built on first use: the logs may read a variable from another translation unit's static
// initialiser, before a namespace-scope table would exist.
const std::vector<EnvVariable>& variables_table() {
  static const std::vector<EnvVariable> table = {
    {"KILN_ARTIFACT_PATH", "`:`-separated store directories, searched first, in order", "none",
     [](Environment& e, const std::string& v) { e.loader.artifact_path = split(v, ":"); }},
    {"KILN_CACHE_DIR", "writable cache: downloads (a store), `jit/`, `tuf/` and `scan/` (scan records)",
     "`$XDG_CACHE_HOME/kiln`, else `~/.cache/kiln`",
     [](Environment& e, const std::string& v) { e.loader.cache_dir = v; }},
    {"KILN_MIRRORS", "mirror URLs, whitespace- or `,`-separated, tried in order",
     "none (or compiled in)",
     [](Environment& e, const std::string& v) { e.loader.mirrors = split(v, " \t\n,"); }},
    {"KILN_INDEX_SHA256", "digest pinning the mirror's release index", "compiled in",
     [](Environment& e, const std::string& v) {
       if (!io::is_sha256_hex(v))
         throw bad_env_value("KILN_INDEX_SHA256", v, "a SHA-256 digest", "64 lowercase hex digits");
       e.loader.index_sha256 = v;
     }},
    {"KILN_TUF_ROOT",
     "TUF root file: mirrors are TUF repositories (docs/tuf.md); not with `KILN_INDEX_SHA256`",
     "`<prefix>/share/kiln/tuf/root.json` if installed",
     [](Environment& e, const std::string& v) { e.loader.tuf_root = v; }},
    {"KILN_CA_BUNDLE", "PEM file of CA certificates for `https://` mirrors", "system store",
     [](Environment& e, const std::string& v) { e.loader.ca_bundle = v; }},
    KILN_BOOL_ROW("KILN_OFFLINE", offline, "no network access, ever", "off"),
    KILN_BOOL_ROW("KILN_DISABLE_JIT", disable_jit, "never compile with NVRTC", "off"),
    KILN_BOOL_ROW("KILN_ALLOW_STALE", allow_stale,
                  "diagnostic: load stale artifacts, warned on every load", "off"),
    {"KILN_LOG", "`error`, `warn`, `info`, `debug` for the loader's decisions", "`warn`",
     [](Environment& e, const std::string& v) {
       try {
         e.loader.log_level = to_string(parse_log_level(v, "KILN_LOG"));
       } catch (const Error&) {
         throw bad_env_value("KILN_LOG", v, "a log level", "error, warn, info or debug");
       }
     }},
    {"KILN_API_LOG", "`0..3`: kernel calls (1: name, 2+: arguments), written before the launch",
     "`0`",
     [](Environment& e, const std::string& v) {
       if (v.size() != 1 || v[0] < '0' || v[0] > '3')
         throw bad_env_value("KILN_API_LOG", v, "an API log level", "0, 1, 2 or 3");
       e.loader.api_log = v[0] - '0';
     }},
    {"KILN_LOG_FILE", "log destination instead of stderr; `%p` = pid", "stderr",
     [](Environment& e, const std::string& v) { e.loader.log_file = v; }},
    {"KILN_NVRTC_LIBRARY",
     "the NVRTC library the JIT loads (only that one is tried, and only when the driver runs its "
     "code)",
     "the first of `libnvrtc.so.13`, `libnvrtc.so.12`, `libnvrtc.so` whose code the driver runs "
     "(docs/compatibility.md)",
     [](Environment& e, const std::string& v) { e.loader.nvrtc_library = v; }},
    {"KILN_CUDA_HOME", "toolkit whose `include/` has `cuda_fp16.h` for the JIT",
     "`CUDA_HOME`, else `CUDA_PATH`",
     [](Environment& e, const std::string& v) { e.loader.cuda_home = v; }},
    {"CUDA_HOME", "toolkit: `kiln build`/`doctor` look for nvcc in its `bin/` first; JIT headers",
     "`/usr/local/cuda`",
     [](Environment& e, const std::string& v) {
       e.cuda_home = v;
       if (e.loader.cuda_home.empty()) e.loader.cuda_home = v;
     }},
    {"CUDA_PATH", "JIT headers, when neither `KILN_CUDA_HOME` nor `CUDA_HOME` is set", "none",
     [](Environment& e, const std::string& v) {
       if (e.loader.cuda_home.empty()) e.loader.cuda_home = v;
     }},
    {"KILN_COMPILER_LAUNCHER", "`kiln build`: the compiler launcher (e.g. `sccache`)", "none",
     [](Environment& e, const std::string& v) { e.compiler_launcher = v; }},
    {"KILN_BUILD_CACHE", "`kiln build`: the result cache, a directory or an `http(s)://` URL",
     "none", [](Environment& e, const std::string& v) { e.build_cache = v; }},
    {"NVCC_CCBIN", "`kiln build`: nvcc's host compiler; in the result cache's key",
     "`gcc` on `PATH`", [](Environment& e, const std::string& v) { e.nvcc_ccbin = v; }},
    {"NVCC_PREPEND_FLAGS", "`kiln build`: flags nvcc adds first; in the result cache's key",
     "none", [](Environment& e, const std::string& v) { e.nvcc_prepend_flags = v; }},
    {"NVCC_APPEND_FLAGS", "`kiln build`: flags nvcc adds last; in the result cache's key", "none",
     [](Environment& e, const std::string& v) { e.nvcc_append_flags = v; }},
    {"SOURCE_DATE_EPOCH", "`kiln build`/`tarball`/`wheel`: the time recorded in outputs",
     "the last git commit, else fixed",
     [](Environment& e, const std::string& v) { e.source_date_epoch = v; }},
    {"PATH", "`kiln build`/`doctor`: where nvcc, ninja and git are found", "none",
     [](Environment& e, const std::string& v) { e.path = v; }},
    {"XDG_CACHE_HOME", "default cache directory: `$XDG_CACHE_HOME/kiln`", "none",
     [](Environment& e, const std::string& v) { e.xdg_cache_home = v; }},
    {"HOME", "default cache directory without `XDG_CACHE_HOME`: `~/.cache/kiln`", "none",
     [](Environment& e, const std::string& v) { e.home = v; }},
  };
  return table;
}

#undef KILN_BOOL_ROW

void apply(Environment& env, const EnvVariable& var, const GetEnv& getenv) {
  const char* v = getenv(var.name);
  // An empty variable counts as unset: `KILN_OFFLINE= cmd` is a common way to clear one.
  if (v && *v) var.apply(env, v);
}

}  // namespace

Error bad_env_value(std::string_view name, std::string_view value, std::string_view what,
                    std::string_view expected) {
  return Error(ErrorKind::Usage,
               std::string(name) + "='" + std::string(value) + "' is not " + std::string(what) +
                   ": expected " + std::string(expected),
               {{"variable", std::string(name)}, {"value", std::string(value)}});
}

const std::vector<EnvVariable>& env_variables() { return variables_table(); }

Environment read_environment(const GetEnv& getenv) {
  Environment env;
  for (const auto& var : variables_table()) apply(env, var, getenv);
  if (env.loader.cache_dir.empty()) {
    if (!env.xdg_cache_home.empty())
      env.loader.cache_dir = env.xdg_cache_home + "/kiln";
    else if (!env.home.empty())
      env.loader.cache_dir = env.home + "/.cache/kiln";
    else  // No home (some batch systems): a per-user directory that is still writable.
      env.loader.cache_dir = "/tmp/kiln-cache-" + std::to_string(static_cast<long>(::getuid()));
  }
  return env;
}

Environment read_environment() {
  return read_environment([](const char* name) -> const char* { return std::getenv(name); });
}

void read_env_variable(Environment& env, std::string_view name, const GetEnv& getenv) {
  for (const auto& var : variables_table())
    if (name == var.name) return apply(env, var, getenv);
  throw Error(ErrorKind::Internal, "read_env_variable: " + std::string(name) +
                                       " is not in the table of environment variables");
}

void read_env_variable(Environment& env, std::string_view name) {
  read_env_variable(env, name, [](const char* n) -> const char* { return std::getenv(n); });
}

}  // namespace kiln::runtime

// The loader's public vocabulary (kiln/config.hpp), defined here where the variables are read.
namespace kiln {

bool parse_bool_setting(const std::string& name, const std::string& value) {
  if (std::optional<bool> b = runtime::bool_value(value)) return *b;
  throw Error(ErrorKind::Usage,
              name + "='" + value + "' is not a boolean: expected " + runtime::kBoolExpected,
              {{"setting", name}, {"value", value}});
}

LoaderConfig LoaderConfig::from_env() { return runtime::read_environment().loader; }

LoaderConfig LoaderConfig::from_env(const std::function<const char*(const char*)>& getenv) {
  return runtime::read_environment(getenv).loader;
}

}  // namespace kiln
