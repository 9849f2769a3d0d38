// LoaderConfig from the environment: one table of variables, a fixed precedence (explicit
// fields set after from_env() win), and errors that name the variable.
#include <unistd.h>

#include <cstdlib>

#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/sha256.hpp"
#include "log.hpp"

namespace kiln {

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

std::string default_cache_dir(const std::function<const char*(const char*)>& getenv) {
  if (const char* x = getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kiln";
  if (const char* h = getenv("HOME"); h && *h) return std::string(h) + "/.cache/kiln";
  // No home (some batch systems): a per-user directory that is still writable.
  return "/tmp/kiln-cache-" + std::to_string(static_cast<long>(::getuid()));
}

}  // namespace

bool parse_bool_setting(const std::string& name, const std::string& value) {
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* t : kTrue)
    if (value == t) return true;
  for (const char* f : kFalse)
    if (value == f) return false;
  throw Error(ErrorKind::Usage, name + "='" + value +
                                    "' is not a boolean: expected one of 0, 1, true, false, yes, "
                                    "no, on, off");
}

LoaderConfig LoaderConfig::from_env() {
  return from_env([](const char* name) -> const char* { return std::getenv(name); });
}

LoaderConfig LoaderConfig::from_env(const std::function<const char*(const char*)>& getenv) {
  LoaderConfig c;
  auto get = [&](const char* name) -> std::optional<std::string> {
    const char* v = getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
  };
  // An empty variable counts as unset: `KILN_OFFLINE= cmd` is a common way to clear one.
  auto boolean = [&](const char* name, bool& field) {
    if (auto v = get(name); v && !v->empty()) field = parse_bool_setting(name, *v);
  };
  if (auto v = get("KILN_ARTIFACT_PATH")) c.artifact_path = split(*v, ":");
  if (auto v = get("KILN_CACHE_DIR"); v && !v->empty())
    c.cache_dir = *v;
  else
    c.cache_dir = default_cache_dir(getenv);
  if (auto v = get("KILN_MIRRORS")) c.mirrors = split(*v, " \t\n,");
  if (auto v = get("KILN_INDEX_SHA256"); v && !v->empty()) {
    if (!is_sha256_hex(*v))
      throw Error(ErrorKind::Usage, "KILN_INDEX_SHA256='" + *v +
                                        "' is not a SHA-256 digest: expected 64 lowercase hex "
                                        "digits");
    c.index_sha256 = *v;
  }
  boolean("KILN_OFFLINE", c.offline);
  boolean("KILN_DISABLE_JIT", c.disable_jit);
  boolean("KILN_ALLOW_STALE", c.allow_stale);
  if (auto v = get("KILN_LOG"); v && !v->empty())
    c.log_level = to_string(parse_log_level(*v, "KILN_LOG"));
  if (auto v = get("KILN_API_LOG"); v && !v->empty()) {
    if (v->size() != 1 || (*v)[0] < '0' || (*v)[0] > '3')
      throw Error(ErrorKind::Usage,
                  "KILN_API_LOG='" + *v + "' is not an API log level: expected 0, 1, 2 or 3");
    c.api_log = (*v)[0] - '0';
  }
  if (auto v = get("KILN_LOG_FILE")) c.log_file = *v;
  return c;
}

}  // namespace kiln
