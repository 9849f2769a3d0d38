// Loader::stats() and the line at exit: what a user reads after gets served by each tier, after
// refused candidates and after a miss, over the CC 9.0 stand-in driver and stores on disk.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "io/sha256.hpp"
#include "jit/jit.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"
#include "loader_factory.hpp"
#include "loader_stats.hpp"
#include "plan/resolver.hpp"
#include "stand_in_driver.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::ErrorKind;
using kiln::test::TempDir;

const std::string kUri = "axpy_dtype_f32";

// A store entry of kUri for `target` that the reference package's Loader accepts; its artifact
// is `bytes`, stale when `source_hash` is given. Returns the artifact's path.
std::string write_entry(const fs::path& store, const std::string& target, const std::string& bytes,
                        const std::string& source_hash = "") {
  kiln::test::ReleaseSpec rel;
  rel.loadable = true;
  if (!source_hash.empty()) rel.source_hash_override[kUri] = source_hash;
  rel.with_artifacts({{kUri, bytes}});
  return (kiln::test::write_store_entry(store, rel, target) / (kUri + ".fatbin")).string();
}

class CountingJit : public kiln::jit::JitCompiler {
 public:
  kiln::jit::JitCapability probe() override {
    kiln::jit::JitCapability c;
    c.available = true;
    c.nvrtc_major = 13;
    c.supported_archs = {80, 90};
    return c;
  }
  kiln::jit::JitResult compile(const kiln::project::Specialisation& spec,
                               const kiln::project::Family&, int, const std::string& cache_dir) override {
    kiln::jit::JitResult r;
    r.image = "cubin:" + spec.uri;
    for (std::size_t i = 0; i < spec.entries.size(); ++i) r.symbols.push_back("sym");
    r.cache_path = cache_dir + "/jit/key.cubin";
    kiln::test::write_file(r.cache_path, r.image);
    nlohmann::json meta = {{"cubin_sha256", kiln::io::sha256_hex(r.image)},
                           {"cubin_size", r.image.size()}};
    kiln::test::write_file(cache_dir + "/jit/key.json", meta.dump());
    return r;
  }
};

struct Rig {
  TempDir tmp;
  kiln::LoaderConfig cfg;
  std::function<std::uint64_t(const std::string& dest)> mirror;  // writes the entry; its bytes
  Rig() {
    cfg.cache_dir = (tmp / "cache").string();
    cfg.offline = true;
    cfg.disable_jit = true;
  }
  std::unique_ptr<kiln::Loader> loader() {
    kiln::plan::LoaderDeps d;
    d.driver = std::make_shared<kiln::test::Cc90Driver>();
    d.jit = std::make_shared<CountingJit>();
    d.installed_store = (tmp / "installed").string();
    d.index_targets = [](const kiln::fetch::FetchOptions&) {
      return std::vector<std::string>{"sm_90"};
    };
    d.fetch = [this](const kiln::fetch::FetchOptions&, const std::vector<std::string>&,
                     const std::string& dest) {
      if (!mirror) throw kiln::Error(ErrorKind::Network, "mirror down: HTTP 503");
      kiln::fetch::FetchResult r;
      r.bytes_downloaded = mirror(dest);
      return r;
    };
    return kiln::make_loader(kiln::test::reference_description(), cfg, std::move(d));
  }
};

std::uint64_t rejected(const kiln::LoaderStats& s, const std::string& reason) {
  auto it = s.rejected.find(reason);
  return it == s.rejected.end() ? ~0ull : it->second;
}

TEST(LoaderStats, AStoreGetIsOneStoreHitWithItsBytesReadAndVerified) {
  Rig rig;
  write_entry(rig.tmp / "s1", "sm_90", "image:sm_90");
  rig.cfg.artifact_path = {(rig.tmp / "s1").string()};
  auto l = rig.loader();
  l->get(kUri);
  kiln::LoaderStats s = l->stats();
  EXPECT_EQ(s.store_hits, 1u);
  EXPECT_EQ(s.memory_hits + s.mirror_hits + s.jit_hits + s.misses, 0u);
  EXPECT_EQ(s.bytes_read, 11u);  // "image:sm_90"
  EXPECT_EQ(s.bytes_verified, 11u);
  EXPECT_EQ(s.bytes_fetched, 0u);
  EXPECT_GT(s.store_ns, 0u);
  EXPECT_EQ(s.mirror_ns + s.jit_ns, 0u);
  EXPECT_EQ(s.jit_compiles, 0u);
  for (const auto& [reason, n] : s.rejected) EXPECT_EQ(n, 0u) << reason;
  // Further gets are in-process hits: nothing more is read.
  l->get(kUri);
  l->get(kUri);
  s = l->stats();
  EXPECT_EQ(s.memory_hits, 2u);
  EXPECT_EQ(s.store_hits, 1u);
  EXPECT_EQ(s.bytes_read, 11u);
}

TEST(LoaderStats, RefusedCandidatesAreCountedByReasonAndTheirBytesAsReadNotVerified) {
  Rig rig;
  // First store: a stale artifact (another source hash) and a corrupted one of another target;
  // the second store serves.
  write_entry(rig.tmp / "s1", "sm_90", "image:sm_90", std::string(64, 'd'));
  std::string bad = write_entry(rig.tmp / "s2", "sm_90", "image:sm_90");
  kiln::test::write_file(bad, "image:sm_99");  // same size, other bytes
  write_entry(rig.tmp / "s3", "sm_90", "image:sm_90");
  rig.cfg.artifact_path = {(rig.tmp / "s1").string(), (rig.tmp / "s2").string(),
                           (rig.tmp / "s3").string()};
  auto l = rig.loader();
  l->get(kUri);
  kiln::LoaderStats s = l->stats();
  EXPECT_EQ(s.store_hits, 1u);
  EXPECT_EQ(rejected(s, "stale"), 1u);
  EXPECT_EQ(rejected(s, "integrity"), 1u);
  EXPECT_EQ(rejected(s, "not-found"), 0u);
  EXPECT_EQ(s.bytes_read, 22u);  // the corrupted one and the one served
  EXPECT_EQ(s.bytes_verified, 11u);
}

TEST(LoaderStats, AGetNoTierServesIsAMissWithTheTiersPassedOverCounted) {
  Rig rig;
  rig.cfg.artifact_path = {(rig.tmp / "missing").string()};
  auto l = rig.loader();
  EXPECT_THROW(l->get(kUri), kiln::Error);
  kiln::LoaderStats s = l->stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.store_hits + s.memory_hits + s.mirror_hits + s.jit_hits, 0u);
  // Offline: the mirror tier is passed over; without JIT: so is the JIT tier.
  std::uint64_t total = 0;
  for (const auto& [reason, n] : s.rejected) total += n;
  EXPECT_GE(total, 2u);
  // An unknown URI is not a miss of the tiers: none was asked.
  EXPECT_THROW(l->get("no_such_kernel"), kiln::Error);
  EXPECT_EQ(l->stats().misses, 1u);
}

TEST(LoaderStats, AMirrorGetCountsTheBytesFetchedAndTheMirrorTier) {
  Rig rig;
  rig.cfg.offline = false;
  rig.cfg.mirrors = {"file:///srv/mirror"};
  rig.mirror = [](const std::string& dest) {
    write_entry(dest, "sm_90", "image:sm_90");
    return std::uint64_t{4096};
  };
  auto l = rig.loader();
  l->get(kUri);
  kiln::LoaderStats s = l->stats();
  EXPECT_EQ(s.mirror_hits, 1u);
  EXPECT_EQ(s.store_hits, 0u);
  EXPECT_EQ(s.bytes_fetched, 4096u);
  EXPECT_EQ(s.bytes_verified, 11u);
  EXPECT_GT(s.mirror_ns, 0u);
}

TEST(LoaderStats, AJitGetCountsOneCompileAndTheMirrorThatFailedFirst) {
  Rig rig;
  rig.cfg.offline = false;
  rig.cfg.disable_jit = false;
  rig.cfg.mirrors = {"https://mirror.example/kiln"};  // down: rig.mirror is empty
  auto l = rig.loader();
  l->get(kUri);
  kiln::LoaderStats s = l->stats();
  EXPECT_EQ(s.jit_hits, 1u);
  EXPECT_EQ(s.jit_compiles, 1u);
  EXPECT_EQ(s.bytes_verified, std::string("cubin:" + kUri).size());
  EXPECT_EQ(rejected(s, "network"), 1u);
  EXPECT_GT(s.jit_ns, 0u);
}

TEST(LoaderStats, WarmGetsFromManyThreadsAreEachCountedOnce) {
  // Each thread waits at the start until all have begun: all hold a shard at once.
  Rig rig;
  write_entry(rig.tmp / "s1", "sm_90", "image:sm_90");
  rig.cfg.artifact_path = {(rig.tmp / "s1").string()};
  auto l = rig.loader();
  l->get(kUri);
  // More threads at once than there are shards: some add to the shared one.
  constexpr int kThreads = static_cast<int>(kiln::LoaderCounters::kShards) + 8, kGets = 2000;
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      l->get(kUri);  // this thread's hit cache, and its shard, are made
      ++started;
      while (started.load() < kThreads) std::this_thread::yield();
      for (int i = 1; i < kGets; ++i) l->get(kUri);
    });
  for (auto& t : threads) t.join();
  kiln::LoaderStats s = l->stats();
  EXPECT_EQ(s.memory_hits, std::uint64_t{kThreads} * kGets);
  EXPECT_EQ(s.store_hits, 1u);
}

TEST(LoaderStats, SinceIsTheWorkBetweenTwoSnapshots) {
  Rig rig;
  write_entry(rig.tmp / "s1", "sm_90", "image:sm_90");
  rig.cfg.artifact_path = {(rig.tmp / "s1").string()};
  auto l = rig.loader();
  l->get(kUri);
  kiln::LoaderStats before = l->stats();
  for (int i = 0; i < 3; ++i) l->get(kUri);
  kiln::LoaderStats d = l->stats().since(before);
  EXPECT_EQ(d.memory_hits, 3u);
  EXPECT_EQ(d.store_hits, 0u);
  EXPECT_EQ(d.bytes_read, 0u);
  EXPECT_EQ(d.store_ns, 0u);
}

TEST(LoaderStats, JsonFormIsStableWithEveryReasonPresent) {
  Rig rig;
  write_entry(rig.tmp / "s1", "sm_90", "image:sm_90");
  rig.cfg.artifact_path = {(rig.tmp / "s1").string()};
  auto l = rig.loader();
  l->get(kUri);
  auto j = nlohmann::json::parse(l->stats().json());
  EXPECT_EQ(j.at("stats_format"), 1);
  EXPECT_EQ(j.at("hits").at("store"), 1);
  EXPECT_EQ(j.at("hits").at("memory"), 0);
  EXPECT_EQ(j.at("misses"), 0);
  EXPECT_EQ(j.at("bytes").at("read"), 11);
  EXPECT_EQ(j.at("bytes").at("verified"), 11);
  EXPECT_EQ(j.at("bytes").at("fetched"), 0);
  EXPECT_GT(j.at("time_ns").at("store").get<std::uint64_t>(), 0u);
  EXPECT_EQ(j.at("jit_compiles"), 0);
  for (const char* reason : {"internal", "usage", "integrity", "stale", "unsupported",
                             "not-found", "compile", "network", "io", "format", "driver", "limit"})
    EXPECT_EQ(j.at("rejected").at(reason), 0) << reason;
  EXPECT_EQ(j.at("rejected").size(), 12u);
  // A LoaderStats of nothing has the same keys.
  auto zero = nlohmann::json::parse(kiln::LoaderStats{}.json());
  EXPECT_EQ(zero.at("rejected").size(), 12u);
  EXPECT_EQ(zero.at("hits").at("store"), 0);
}

// --- the line at exit, in a fresh process: this test binary, running only the child test below

const char* kChildStore = "KILN_TEST_STATS_CHILD_STORE";

// A child: one Loader over the store named by the variable, one get and one warm get, then
// the process ends as a program's does (exit: the line at exit is written then). Run by the
// tests below; skipped when the variable is unset.
TEST(LoaderStatsChild, DISABLED_OneStoreGetThenExit) {
  const char* store = std::getenv(kChildStore);
  if (!store) GTEST_SKIP();
  kiln::LoaderConfig cfg = kiln::LoaderConfig::from_env();
  cfg.artifact_path = {store};
  cfg.offline = true;
  cfg.disable_jit = true;
  kiln::plan::LoaderDeps d;
  d.driver = std::make_shared<kiln::test::Cc90Driver>();
  d.installed_store = "";
  static std::unique_ptr<kiln::Loader> kept;  // still alive at exit, as a program's may be
  kept = kiln::make_loader(kiln::test::reference_description(), cfg, std::move(d));
  kept->get(kUri);
  kept->get(kUri);
}

std::string run_child(const std::string& env) {
  return kiln::test::run(env + " /proc/" + std::to_string(::getpid()) +
                         "/exe --gtest_also_run_disabled_tests "
                         "--gtest_filter=LoaderStatsChild.DISABLED_OneStoreGetThenExit")
      .out;
}

TEST(LoaderStatsExit, AtInfoTheProcessEndsWithOneSummaryLine) {
  TempDir tmp;
  write_entry(tmp / "s1", "sm_90", "image:sm_90");
  const std::string out = run_child(std::string(kChildStore) + "=" + (tmp / "s1").string() +
                                    " KILN_LOG=info KILN_CACHE_DIR=" + (tmp / "cache").string());
  const std::string want =
      "kiln [info] loader statistics at exit (1 loader): 2 gets; hits: memory 1, store 1, "
      "mirror 0, jit 0; misses 0; bytes read 11, verified 11, fetched 0; time: store ";
  const auto at = out.find(want);
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.find("loader statistics", at + want.size()), std::string::npos)
      << "one line only\n" << out;
  EXPECT_NE(out.find("; JIT compiles 0; rejected 0\n", at), std::string::npos) << out;
}

TEST(LoaderStatsExit, BelowInfoNothingIsWrittenAtExit) {
  TempDir tmp;
  write_entry(tmp / "s1", "sm_90", "image:sm_90");
  for (const char* level : {"warn", "error"}) {
    const std::string out = run_child(std::string(kChildStore) + "=" + (tmp / "s1").string() +
                                      " KILN_LOG=" + level + " KILN_CACHE_DIR=" +
                                      (tmp / "cache").string());
    EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
    EXPECT_EQ(out.find("loader statistics"), std::string::npos) << level << "\n" << out;
  }
}

TEST(LoaderStatsExit, AProcessThatMadeNoLoaderWritesNothingAtExit) {
  // The child test is filtered out: the process runs no test and makes no Loader.
  const std::string out = kiln::test::run(
      "KILN_LOG=debug /proc/" + std::to_string(::getpid()) +
      "/exe --gtest_filter=LoaderStatsChild.None").out;
  EXPECT_NE(out.find("0 tests"), std::string::npos) << out;
  EXPECT_EQ(out.find("kiln ["), std::string::npos) << out;
}

TEST(LoaderStatsExit, TheSummaryNamesEveryReasonThatWasCounted) {
  kiln::LoaderStats s;
  s.store_hits = 1;
  s.rejected = {{"stale", 2}, {"integrity", 1}, {"network", 0}};
  const std::string line = kiln::exit_summary(s, 2);
  EXPECT_NE(line.find("(2 loaders): 1 gets;"), std::string::npos) << line;
  EXPECT_NE(line.find("rejected 3 (integrity 1, stale 2)"), std::string::npos) << line;
}

}  // namespace
