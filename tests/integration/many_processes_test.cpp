// A node's worth of processes (issue 26, item 4): tests/node/many_processes.sh run on a
// synthetic loadable release (the reference package's source hashes and symbols, fake fatbin
// bytes) with the stand-in libcuda of bench/stand_in_libcuda.c: 64 processes of 8 threads on one
// empty cache, through a pinned mirror and then through the TUF repository of that mirror. Each
// process checks that the images its driver got are the store's bytes; the script checks that
// the server was asked once for the one archive a CC 9.0 device needs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;

TEST(NodeProcesses, SixtyFourProcessesOfEightThreadsDownloadEachArchiveOnceAndLoadTheStoresBytes) {
  const fs::path stand_in = test::stand_in_libcuda_dir();
  const fs::path node = fs::path(KILN_TEST_BINARY_DIR) / "tests" / "kiln_node_process";
  if (stand_in.empty()) GTEST_SKIP() << "no stand-in libcuda (-DKILN_BUILD_BENCH=ON builds it)";
  ASSERT_TRUE(fs::exists(node)) << node;
  test::TempDir tmp;
  test::ReleaseSpec spec;
  spec.loadable = true;
  test::write_release_dist(tmp.path() / "dist", spec, {"sm_80", "sm_90a"});
  auto staged = test::run(test::kiln_cli() + " mirror stage " + (tmp.path() / "dist").string() +
                          " --to " + (tmp.path() / "mirror").string());
  ASSERT_EQ(staged.exit_code, 0) << staged.out;
  const std::string procs = "64", threads = "8";
  auto r = test::run("env LD_LIBRARY_PATH=" + stand_in.string() +
                     " KILN_STAND_IN_CC=90 PROCS=" + procs + " THREADS=" + threads +
                     " URIS='axpy_dtype_f16 axpy_dtype_f32' bash " + test::source_dir() +
                     "/tests/node/many_processes.sh " + test::kiln_cli() + " " + node.string() +
                     " " + (tmp.path() / "mirror").string() + " " + (tmp.path() / "work").string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::cout << r.out;  // the figures (wall time, downloads, errors) for the log
  for (const std::string mode : {"pinned", "tuf"}) {
    SCOPED_TRACE(mode);
    std::ifstream in(tmp.path() / "work" / (mode + ".summary.json"));
    ASSERT_TRUE(in) << r.out;
    nlohmann::json s = nlohmann::json::parse(in);
    EXPECT_EQ(s["errors"], 0) << s["first_error"];
    EXPECT_EQ(s["mismatches"], 0);
    EXPECT_EQ(s["gets"], 64 * 8 * 2);  // every thread got both URIs
    // One archive (sm_90a: a CC 9.0 device) downloaded once for all 64 processes.
    ASSERT_EQ(s["archive_downloads"].size(), 1u) << s.dump();
    EXPECT_EQ(s["archive_downloads"].begin().value(), 1) << s.dump();
    EXPECT_NE(s["archive_downloads"].begin().key().find("sm_90a"), std::string::npos) << s.dump();
  }
}

}  // namespace
}  // namespace kiln
