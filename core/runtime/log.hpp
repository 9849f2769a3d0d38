#pragma once
// Two logs (docs/loader.md): the loader's own decisions (KILN_LOG=error|warn|info|debug)
// and kernel API calls (KILN_API_LOG=0..3), both to stderr or KILN_LOG_FILE (%p = pid).
// Levels are read from the environment once, at first use; Loader's config may override them.
// When a log is off, the check is one load of a cached int and one branch.
#include <atomic>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace kiln::runtime {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

// "error|warn|info|debug" (also "warning"); throws Error{Usage} naming `source` otherwise.
LogLevel parse_log_level(std::string_view text, std::string_view source);
const char* to_string(LogLevel level);
// KILN_LOG_FILE with every "%p" replaced by `pid`.
std::string expand_log_path(std::string_view pattern, long pid);

namespace detail {
extern std::atomic<int> g_log_level;  // -1 = not yet read from the environment
extern std::atomic<int> g_api_log;    // -1 = not yet read from the environment
int init_log_level();
int init_api_log();
}  // namespace detail

inline bool log_enabled(LogLevel level) {
  int cur = detail::g_log_level.load(std::memory_order_relaxed);
  if (cur < 0) cur = detail::init_log_level();
  return static_cast<int>(level) <= cur;
}
// Writes "kiln [warn] message" as one line (one write call, so lines from threads never mix).
void log_write(LogLevel level, std::string_view message);
inline void log(LogLevel level, std::string_view message) {
  if (log_enabled(level)) log_write(level, message);
}

// For the typed host functions ("ops"): call before the launch, so a crash leaves the call
// behind.  if (kiln::api_log_enabled(1)) kiln::api_log("rmsnorm", {{"n", std::to_string(n)}});
// Level 1 writes the name; level >= 2 also the arguments.
inline bool api_log_enabled(int level) {
  int cur = detail::g_api_log.load(std::memory_order_relaxed);
  if (cur < 0) cur = detail::init_api_log();
  return level <= cur && cur > 0;
}
void api_log(const char* name,
             std::initializer_list<std::pair<const char*, std::string>> args = {});

// Overrides from a LoaderConfig (the last configured Loader wins: the logs are per process).
// log_file "" keeps the current sink.
void configure_logging(LogLevel level, int api_log_level, const std::string& log_file);

}  // namespace kiln::runtime
