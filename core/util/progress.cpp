#include "util/progress.hpp"

#include <unistd.h>

namespace kiln::util {

namespace {
// A terminal redrawn more often than this only flickers.
constexpr std::chrono::milliseconds kLiveInterval{100};
}  // namespace

ProgressStyle progress_style_for(std::FILE* out) {
  return out && ::isatty(::fileno(out)) ? ProgressStyle::Live : ProgressStyle::Lines;
}

std::string human_bytes(std::uint64_t n) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (n < 1024) return std::to_string(n) + " B";
  double v = static_cast<double>(n) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

ProgressLine::ProgressLine(std::FILE* out, ProgressStyle style, std::string prefix,
                           std::chrono::milliseconds lines_interval)
    : out_(out), style_(style), prefix_(std::move(prefix)), lines_interval_(lines_interval) {}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::write_locked(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), out_);
  std::fflush(out_);
}

void ProgressLine::end_live_locked() {
  if (!live_) return;
  write_locked("\r\033[K");
  live_ = false;
}

void ProgressLine::step(const std::string& text, const std::string& live_suffix) {
  if (!out_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (style_ == ProgressStyle::Live) {
    write_locked("\r\033[K" + prefix_ + text + live_suffix);
    live_ = true;
  } else {
    write_locked(prefix_ + text + "\n");
  }
}

void ProgressLine::bytes(const std::string& what, std::uint64_t received,
                         std::optional<std::uint64_t> total) {
  if (!out_) return;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  const bool done = total && received >= *total;
  if (style_ == ProgressStyle::Live) {
    if (!done && live_ && now - last_live_ < kLiveInterval) return;
  } else {
    // A new transfer starts its own interval: one that ends within it writes nothing.
    if (what != last_what_) {
      last_what_ = what;
      last_lines_ = now;
      if (lines_interval_.count() > 0) return;
    }
    if (done || now - last_lines_ < lines_interval_) return;
  }
  std::string text = prefix_ + what + " " + human_bytes(received);
  if (total) {
    text += " of " + human_bytes(*total);
    if (*total > 0) text += " (" + std::to_string(received * 100 / *total) + "%)";
  }
  if (style_ == ProgressStyle::Live) {
    write_locked("\r\033[K" + text);
    live_ = true;
    last_live_ = now;
  } else {
    write_locked(text + "\n");
    last_lines_ = now;
  }
}

void ProgressLine::line(const std::string& text) {
  if (!out_) return;
  std::lock_guard<std::mutex> lock(mu_);
  end_live_locked();
  write_locked(prefix_ + text + "\n");
}

void ProgressLine::finish() {
  if (!out_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (live_ && style_ == ProgressStyle::Live) write_locked("\n");
  live_ = false;
}

}  // namespace kiln::util
