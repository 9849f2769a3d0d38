// util::ProgressLine: what a terminal and what a log file show of the same progress.
#include "util/progress.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace {

using kiln::util::ProgressLine;
using kiln::util::ProgressStyle;

// What `write` wrote through a ProgressLine of `style` into a file.
template <typename F>
std::string written(ProgressStyle style, std::chrono::milliseconds interval, F&& write) {
  std::FILE* f = std::tmpfile();
  {
    ProgressLine p(f, style, "kiln fetch: ", interval);
    write(p);
  }
  std::string out(static_cast<std::size_t>(std::ftell(f)), '\0');
  std::rewind(f);
  out.resize(std::fread(out.data(), 1, out.size(), f));
  std::fclose(f);
  return out;
}

void a_download(ProgressLine& p) {
  p.line("downloading https://mirror.example/a.tar.zst (3145728 bytes)");
  for (std::uint64_t n = 1; n <= 3; ++n) p.bytes("a.tar.zst", n << 20, 3u << 20);
  p.line("verified a.tar.zst");
}

TEST(ProgressLine, InALogEveryLineIsAPlainLineWithoutCarriageReturns) {
  const std::string log = written(ProgressStyle::Lines, std::chrono::milliseconds(0), a_download);
  EXPECT_EQ(log.find('\r'), std::string::npos) << log;
  EXPECT_EQ(log.find('\033'), std::string::npos) << log;
  EXPECT_EQ(log,
            "kiln fetch: downloading https://mirror.example/a.tar.zst (3145728 bytes)\n"
            "kiln fetch: a.tar.zst 1.0 MiB of 3.0 MiB (33%)\n"
            "kiln fetch: a.tar.zst 2.0 MiB of 3.0 MiB (66%)\n"
            "kiln fetch: verified a.tar.zst\n");
}

TEST(ProgressLine, InALogADownloadShorterThanTheIntervalWritesNoByteLines) {
  const std::string log = written(ProgressStyle::Lines, std::chrono::seconds(30), a_download);
  EXPECT_EQ(log,
            "kiln fetch: downloading https://mirror.example/a.tar.zst (3145728 bytes)\n"
            "kiln fetch: verified a.tar.zst\n");
}

TEST(ProgressLine, OnATerminalTheBytesRewriteOneStatusLineThatNotesEndFirst) {
  const std::string tty = written(ProgressStyle::Live, std::chrono::seconds(30), a_download);
  // The first byte report draws the status line; the last (complete) always redraws it.
  EXPECT_NE(tty.find("\r\033[Kkiln fetch: a.tar.zst 1.0 MiB of 3.0 MiB (33%)"), std::string::npos)
      << tty;
  EXPECT_NE(tty.find("\r\033[Kkiln fetch: a.tar.zst 3.0 MiB of 3.0 MiB (100%)"),
            std::string::npos)
      << tty;
  // The note after it clears the status line first: no note shares a line with a status.
  EXPECT_NE(tty.find("(100%)\r\033[Kkiln fetch: verified a.tar.zst\n"), std::string::npos) << tty;
  EXPECT_EQ(std::count(tty.begin(), tty.end(), '\n'), 2) << tty;
}

TEST(ProgressLine, StepsAreLinesInALogAndOneRewrittenLineEndedByFinishOnATerminal) {
  auto steps = [](ProgressLine& p) {
    p.step("[1/2] NVCC a sm_90", "  0.1s");
    p.step("[2/2] NVCC b sm_90", "  0.2s");
    p.finish();
  };
  EXPECT_EQ(written(ProgressStyle::Lines, std::chrono::milliseconds(0), steps),
            "kiln fetch: [1/2] NVCC a sm_90\nkiln fetch: [2/2] NVCC b sm_90\n");
  EXPECT_EQ(written(ProgressStyle::Live, std::chrono::milliseconds(0), steps),
            "\r\033[Kkiln fetch: [1/2] NVCC a sm_90  0.1s\r\033[Kkiln fetch: [2/2] NVCC b sm_90  "
            "0.2s\n");
}

TEST(ProgressLine, ATerminalIsLiveAndAFileIsLines) {
  std::FILE* f = std::tmpfile();
  EXPECT_EQ(kiln::util::progress_style_for(f), ProgressStyle::Lines);
  std::fclose(f);
  EXPECT_EQ(kiln::util::progress_style_for(nullptr), ProgressStyle::Lines);
}

TEST(ProgressLine, BytesForAPerson) {
  EXPECT_EQ(kiln::util::human_bytes(512), "512 B");
  EXPECT_EQ(kiln::util::human_bytes(1536), "1.5 KiB");
  EXPECT_EQ(kiln::util::human_bytes(std::uint64_t{3} << 30), "3.0 GiB");
}

}  // namespace
