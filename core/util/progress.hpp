#pragma once
// The one progress writer of the kiln commands: on a terminal, a status line rewritten in place;
// anywhere else (a log, a pipe, a CI job), plain lines, few of them, never a carriage return.
// `kiln build` (its compile steps), `kiln fetch`, `kiln bundle` and `kiln mirror sync` (their
// downloads) all write through it.
//
//   Live   step() and bytes() rewrite one status line ("\r", clear to the end of the line); a
//          line() ends that status line first, so notes and status never share a line;
//          finish() ends the status line.
//   Lines  step() writes one line per step; bytes() writes a line at most once per
//          `lines_interval` for a transfer (and none for one that ends within it); line()
//          writes the line. Nothing is ever rewritten.
//
// Thread-safe: parallel downloads report into one writer.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

namespace kiln::util {

enum class ProgressStyle { Live, Lines };

// Live when `out` is a terminal, else Lines.
ProgressStyle progress_style_for(std::FILE* out);

class ProgressLine {
 public:
  // `prefix` starts every line and status ("kiln fetch: "); `lines_interval` is the least time
  // between two bytes() lines of Lines style (0: every call writes one, for tests).
  ProgressLine(std::FILE* out, ProgressStyle style, std::string prefix = "",
               std::chrono::milliseconds lines_interval = std::chrono::seconds(30));
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // One step of a counted job ("[3/10] NVCC axpy sm_90"); `live_suffix` is shown on a terminal
  // only (the elapsed time).
  void step(const std::string& text, const std::string& live_suffix = "");
  // A transfer's bytes so far: "<what> 12.0 MiB of 80.0 MiB (15%)", or without a total
  // "<what> 12.0 MiB".
  void bytes(const std::string& what, std::uint64_t received,
             std::optional<std::uint64_t> total = std::nullopt);
  // A line that stays (a download started, a file verified, a retry and its reason).
  void line(const std::string& text);
  // Ends the status line, if one is showing.
  void finish();

  ProgressStyle style() const { return style_; }

 private:
  void end_live_locked();
  void write_locked(const std::string& s);

  std::FILE* out_;
  ProgressStyle style_;
  std::string prefix_;
  std::chrono::milliseconds lines_interval_;
  std::mutex mu_;
  bool live_ = false;
  std::chrono::steady_clock::time_point last_live_{};
  std::chrono::steady_clock::time_point last_lines_{};
  std::string last_what_;
};

// "12.0 MiB", "512 B", "3.4 GiB": bytes for a person.
std::string human_bytes(std::uint64_t n);

}  // namespace kiln::util
