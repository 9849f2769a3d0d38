// A slow mirror costs a bounded, short time (issue 26, item 3; docs/security.md, "Slow
// mirrors"): real servers on loopback (tests/misbehaving_server/server.py) trickling an endless
// index or TUF metadata file just above the 1 KB/s stall rule, with the per-mirror time of a file
// only a bound limits (--download-timeout, 60 s by default) shortened to 2 s so each test takes
// seconds; `kiln fetch` and the loader's mirror tier alike. Before the rule, such a mirror held
// `kiln fetch` for that time plus the file's bound at --min-rate: 2 s + 16 MiB at 64 KiB/s (258 s)
// for the index, 2 s + 500 KB at 64 KiB/s (9.8 s) for a root. A slow but honest link (every file
// dripped at 16 KiB/s) still completes.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "fetch/fetch.hpp"
#include "format/manifest.hpp"
#include "kiln/loader.hpp"
#include "loader_factory.hpp"
#include "misbehaving_server.hpp"
#include "plan/resolver.hpp"
#include "stand_in_driver.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test::MisbehavingServer;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class SlowMirror : public ::testing::Test {
 protected:
  void SetUp() override {
    test::ReleaseSpec spec;
    spec.zstd_level = 3;
    spec.artifacts = [](const std::string& target) {
      unsigned seed = target == "sm_80" ? 1 : 3;
      return std::vector<test::SyntheticArtifact>{
          {"axpy_dtype_f32", test::random_bytes(20000, seed)},
          {"rmsnorm_dtype_f16", test::random_bytes(20000, seed + 1)}};
    };
    rel = test::write_release_dist(tmp / "dist", spec, {"sm_80", "sm_90a"});
    index_name = format::index_file_name(rel.package, rel.version);
  }
  // `kiln fetch` of sm_90a into a new store from `mirrors`, in order, with `trust` and `args`.
  test::RunResult fetch(const std::vector<std::string>& mirrors, const std::string& trust,
                        const std::string& args) {
    std::string cmd = "env KILN_CACHE_DIR=" + (tmp / "cache").string() + " " + test::kiln_cli() +
                      " fetch --targets sm_90a --dest " + (tmp / "store").string() + " " + trust +
                      " " + args;
    for (const auto& m : mirrors) cmd += " --mirror " + m;
    return test::run(cmd);
  }
  bool installed() const { return fs::is_directory(tmp / "store" / rel.stem("sm_90a")); }

  test::TempDir tmp;
  test::SyntheticDist rel;
  std::string index_name;
};

TEST_F(SlowMirror, AnEndlessIndexJustAboveTheStallRuleCostsTheMirrorItsTimeNotItsBound) {
  MisbehavingServer slow(rel.dir, "trickle", {"--match", "index.json", "--drip-rate", "1100"});
  MisbehavingServer good(rel.dir, "ok");
  auto t0 = Clock::now();
  // --min-rate left at 64 KiB/s: the old deadline would have been 2 s + 256 s.
  auto r =
      fetch({slow.url(), good.url()}, "--index-sha256 " + rel.index_sha256, "--download-timeout 2");
  double took = seconds_since(t0);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_GE(took, 1.9);
  EXPECT_LT(took, 8.0) << r.out;
  EXPECT_CONTAINS(r.out, slow.url() + "/" + index_name + ": deadline passed");
  EXPECT_CONTAINS(r.out, "deadline of 2000 ms");
  EXPECT_EQ(slow.count("/" + index_name), 1);  // not retried
  EXPECT_EQ(good.count("/" + index_name), 1);
  EXPECT_TRUE(installed());
}

TEST_F(SlowMirror, AnIndexThatStallsAgainAndAgainGetsOneBudgetForEveryRetry) {
  // Half the index, then silence: the stall rule (--low-speed-time 1 s) ends each attempt, and
  // each is retried; all of them together get the 2 s, so the second mirror serves after ~2 s.
  MisbehavingServer stall(rel.dir, "stall", {"--match", "index.json", "--stall-seconds", "30"});
  MisbehavingServer good(rel.dir, "ok");
  auto t0 = Clock::now();
  auto r = fetch({stall.url(), good.url()}, "--index-sha256 " + rel.index_sha256,
                 "--download-timeout 2 --low-speed-seconds 1 --retry-base-ms 200");
  double took = seconds_since(t0);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_LT(took, 5.0) << r.out;
  EXPECT_GE(stall.count("/" + index_name), 1);
  EXPECT_LE(stall.count("/" + index_name), 2);
  EXPECT_EQ(good.count("/" + index_name), 1);
  EXPECT_TRUE(installed());
}

TEST_F(SlowMirror, EndlessTufRootMetadataCostsTheMirrorItsTimeAndTheNextMirrorServes) {
  auto staged = test::run(test::kiln_cli() + " mirror stage " + rel.dir.string() + " --to " +
                          (tmp / "mirror").string());
  ASSERT_EQ(staged.exit_code, 0) << staged.out;
  auto made = test::run(test::source_dir() + "/ci/tuf_repo.sh " + test::kiln_cli() + " " +
                        (tmp / "mirror").string() + " " + (tmp / "tuf").string() + " " +
                        (tmp / "keys").string());
  ASSERT_EQ(made.exit_code, 0) << made.out;
  // A rotation makes root v2, which a client of v1 asks for: this mirror trickles it forever.
  auto rotated =
      test::run(test::kiln_cli() + " tuf-repo --dir " + (tmp / "tuf").string() +
                " --offline-keys " + (tmp / "keys" / "offline").string() + " --online-keys " +
                (tmp / "keys" / "online").string() + " rotate timestamp");
  ASSERT_EQ(rotated.exit_code, 0) << rotated.out;
  ASSERT_TRUE(fs::exists(tmp / "tuf" / "metadata" / "2.root.json"));
  MisbehavingServer slow(tmp / "tuf", "trickle", {"--match", "2.root.json", "--drip-rate", "1100"});
  MisbehavingServer good(tmp / "tuf", "ok");
  auto t0 = Clock::now();
  auto r = fetch({slow.url(), good.url()},
                 "--tuf-root " + (tmp / "tuf" / "metadata" / "1.root.json").string(),
                 "--download-timeout 2");
  double took = seconds_since(t0);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_GE(took, 1.9);
  EXPECT_LT(took, 8.0) << r.out;
  EXPECT_EQ(slow.count("/metadata/2.root.json"), 1);
  EXPECT_TRUE(installed());
}

TEST_F(SlowMirror, TheLoadersMirrorTierMovesOnAfterTheSameTime) {
  // A release the reference package's loader accepts; its index trickled by the first mirror.
  test::ReleaseSpec spec;
  spec.loadable = true;
  test::SyntheticDist dist = test::write_release_dist(tmp / "loadable", spec, {"sm_80", "sm_90a"});
  MisbehavingServer slow(dist.dir, "trickle", {"--match", "index.json", "--drip-rate", "1100"});
  MisbehavingServer good(dist.dir, "ok");
  LoaderConfig cfg;
  cfg.cache_dir = (tmp / "loader-cache").string();
  cfg.mirrors = {slow.url(), good.url()};
  cfg.index_sha256 = dist.index_sha256;
  cfg.disable_jit = true;
  cfg.use_installed_store = false;
  plan::LoaderDeps deps;
  auto drv = std::make_shared<test::Cc90Driver>();
  deps.driver = drv;
  // The tier fetches with FetchOptions' defaults (60 s); 2 s here, as --download-timeout 2.
  auto shortened = [](fetch::FetchOptions o) {
    o.download_timeout_ms = 2000;
    return o;
  };
  deps.fetch = [shortened](const fetch::FetchOptions& o, const std::vector<std::string>& t,
                           const std::string& dest) {
    return fetch::fetch_targets(shortened(o), t, dest);
  };
  deps.index_targets = [shortened](const fetch::FetchOptions& o) {
    return fetch::fetch_index_targets(shortened(o));
  };
  auto loader = make_loader(test::reference_description(), cfg, std::move(deps));
  auto t0 = Clock::now();
  (void)loader->get("axpy_dtype_f32");
  double took = seconds_since(t0);
  // The tier reads the index twice (to choose a target, then to fetch it): 2 s each on the
  // slow mirror, then the good one serves; before, each would have been 2 s + 256 s.
  EXPECT_EQ(slow.count("/" + index_name), 2);
  EXPECT_GE(took, 3.8);
  EXPECT_LT(took, 12.0);
  EXPECT_EQ(drv->images,
            std::vector<std::string>{dist.artifacts["sm_90a"]["axpy_dtype_f32.fatbin"]});
}

TEST_F(SlowMirror, ASlowButSteadyLinkStillCompletesTheRelease) {
  // Every file at 16 KiB/s; deadlines: 1 s for the index, 1 s + size at 8 KiB/s per archive.
  // The same proportions as 64 KiB/s against the defaults' 60 s and 64 KiB/s floor.
  MisbehavingServer slow(rel.dir, "drip", {"--match", "", "--drip-rate", "16384"});
  auto t0 = Clock::now();
  auto r = fetch({slow.url()}, "--index-sha256 " + rel.index_sha256,
                 "--download-timeout 1 --min-rate 8192");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_LT(seconds_since(t0), 15.0);
  EXPECT_EQ(slow.count("/" + index_name), 1);
  EXPECT_EQ(slow.count("/" + rel.archive.at("sm_90a")), 1);
  EXPECT_TRUE(installed());
}

}  // namespace
}  // namespace kiln
