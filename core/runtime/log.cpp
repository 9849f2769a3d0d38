#include "runtime/log.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "kiln/error.hpp"
#include "runtime/environment.hpp"

namespace kiln::runtime {

namespace detail {
std::atomic<int> g_log_level{-1};
std::atomic<int> g_api_log{-1};
}  // namespace detail

namespace {

std::mutex g_sink_mu;
std::FILE* g_sink = nullptr;  // null = stderr
bool g_sink_from_env_done = false;

void open_sink_locked(const std::string& pattern) {
  std::string path = expand_log_path(pattern, static_cast<long>(::getpid()));
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) {
    // A logging destination that cannot be opened must not stop kernels from loading.
    std::fprintf(stderr, "kiln [warn] cannot open KILN_LOG_FILE '%s'; logging to stderr\n",
                 path.c_str());
    return;
  }
  std::setvbuf(f, nullptr, _IOLBF, 0);
  if (g_sink) std::fclose(g_sink);
  g_sink = f;
}

// The logs start before any Loader may exist, where nothing can throw: a variable is read
// through the one table (environment.hpp), and a bad value is reported with the very message
// LoaderConfig::from_env throws, and the default kept.
Environment env_setting(const char* name) {
  Environment env;
  try {
    read_env_variable(env, name);
  } catch (const Error& e) {
    std::fprintf(stderr, "kiln [warn] %s; using the default\n", e.what());
  }
  return env;
}

std::FILE* sink_locked() {
  if (!g_sink_from_env_done) {
    g_sink_from_env_done = true;
    std::string f = env_setting("KILN_LOG_FILE").loader.log_file;
    if (!f.empty()) open_sink_locked(f);
  }
  return g_sink ? g_sink : stderr;
}

void write_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_sink_mu);
  std::FILE* f = sink_locked();
  std::fwrite(line.data(), 1, line.size(), f);
  std::fflush(f);
}

}  // namespace

LogLevel parse_log_level(std::string_view text, std::string_view source) {
  if (text == "error") return LogLevel::Error;
  if (text == "warn" || text == "warning") return LogLevel::Warn;
  if (text == "info") return LogLevel::Info;
  if (text == "debug") return LogLevel::Debug;
  throw Error(ErrorKind::Usage, std::string(source) + "='" + std::string(text) +
                                    "' is not a log level: expected error, warn, info or debug");
}

const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::Error:
      return "error";
    case LogLevel::Warn:
      return "warn";
    case LogLevel::Info:
      return "info";
    case LogLevel::Debug:
      return "debug";
  }
  return "?";
}

std::string expand_log_path(std::string_view pattern, long pid) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      out += std::to_string(pid);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

namespace detail {

int init_log_level() {
  int level =
      static_cast<int>(parse_log_level(env_setting("KILN_LOG").loader.log_level, "KILN_LOG"));
  int expected = -1;
  g_log_level.compare_exchange_strong(expected, level);
  return g_log_level.load();
}

int init_api_log() {
  int level = env_setting("KILN_API_LOG").loader.api_log;
  int expected = -1;
  g_api_log.compare_exchange_strong(expected, level);
  return g_api_log.load();
}

}  // namespace detail

void log_write(LogLevel level, std::string_view message) {
  std::string line = "kiln [";
  line += to_string(level);
  line += "] ";
  line += message;
  line += '\n';
  write_line(line);
}

void api_log(const char* name, std::initializer_list<std::pair<const char*, std::string>> args) {
  std::string line = "kiln api: ";
  line += name;
  if (api_log_enabled(2)) {
    line += '(';
    bool first = true;
    for (const auto& [k, v] : args) {
      if (!first) line += ", ";
      first = false;
      line += k;
      line += '=';
      line += v;
    }
    line += ')';
  }
  line += '\n';
  write_line(line);
}

void configure_logging(LogLevel level, int api_log_level, const std::string& log_file) {
  detail::g_log_level.store(static_cast<int>(level));
  detail::g_api_log.store(api_log_level);
  if (!log_file.empty()) {
    std::lock_guard<std::mutex> lock(g_sink_mu);
    g_sink_from_env_done = true;
    open_sink_locked(log_file);
  }
}

}  // namespace kiln::runtime
