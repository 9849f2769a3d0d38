// Mirrors as TUF repositories (issue 15, items 2 and 5): a kiln release staged as a mirror and
// made a TUF repository by ci/tuf_repo.sh (the commands ci/release.sh runs), served on
// 127.0.0.1 by tests/misbehaving_server/server.py, and fetched by the loader's mirror tier
// (a CC 9.0 stand-in driver, the real fetch over loopback) and by `kiln fetch --tuf-root`.
//  - TufMirror.*: no digest pin needed; the trust anchor rule (both or neither is refused);
//    offline asks no server.
//  - TufMirrorAttack.*: each attack refused by both with its own kind, message and "attack"
//    field, and nothing written to the store (its entries compared, not just its success).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "child_process.hpp"
#include "fetch/fetch.hpp"
#include "fetch/fetch_internal.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "loader_factory.hpp"
#include "misbehaving_server.hpp"
#include "plan/resolver.hpp"
#include "plan/store_scanner.hpp"
#include "project/package_description.hpp"
#include "stand_in_driver.hpp"
#include "store/store.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"
#include "transport/http_transport.hpp"
#include "tuf/tuf_metadata.hpp"
#include "tuf/tuf_signer.hpp"
#include "tuf_forge.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::Cc90Driver;
using test::MisbehavingServer;
using test::TempDir;

const char* kUri = "axpy_dtype_f32";
constexpr std::time_t kThreeDays = 3 * 24 * 3600;

// The entries of a store directory that are not its lock directory or TUF metadata: archive
// directories, and anything a failed fetch could have left (temp files, temp directories).
std::set<std::string> store_entries(const fs::path& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name != ".kiln-locks" && name != "tuf") out.insert(name);
  }
  return out;
}

class TufMirror : public ::testing::Test {
 protected:
  void SetUp() override {
    transport::forget_bad_mirrors();
    test::ReleaseSpec spec;
    spec.loadable = true;  // the registry's source hashes: the loader takes the artifacts
    adjust(spec);
    write_dist(spec);
    auto staged = test::run(test::kiln_cli() + " mirror stage " + (tmp / "dist").string() +
                            " --to " + (tmp / "mirror").string());
    ASSERT_EQ(staged.exit_code, 0) << staged.out;
    auto made =
        test::run(test::source_dir() + "/ci/tuf_repo.sh " + test::kiln_cli() + " " +
                  (tmp / "mirror").string() + " " + repo().string() + " " + keys().string());
    ASSERT_EQ(made.exit_code, 0) << made.out;
    root = repo() / "metadata" / "1.root.json";
  }

  virtual void adjust(test::ReleaseSpec&) {}  // what a derived fixture changes in the release
  // The release the mirror serves, in tmp/dist (a derived fixture may write another).
  virtual void write_dist(const test::ReleaseSpec& spec) {
    dist_ = test::write_release_dist(tmp / "dist", spec, {"sm_80", "sm_90a"});
  }

  fs::path repo() const { return tmp / "tuf"; }
  fs::path keys() const { return tmp / "keys"; }
  fs::path cache() const { return tmp / "loader-cache"; }
  fs::path cli_cache() const { return tmp / "cli-cache"; }
  fs::path cli_store() const { return tmp / "cli-store"; }

  // A loader whose only source is the TUF mirror at `url`: no store, no JIT, a CC 9.0 device.
  // `clock_shift` moves the time TUF expiry is checked against (the real fetch otherwise).
  std::unique_ptr<Loader> loader(const std::string& url, std::shared_ptr<Cc90Driver> drv,
                                 std::time_t clock_shift = 0) {
    LoaderConfig cfg;
    cfg.cache_dir = cache().string();
    cfg.mirrors = {url};
    cfg.tuf_root = root.string();
    cfg.disable_jit = true;
    cfg.use_installed_store = false;
    plan::LoaderDeps d;
    d.driver = std::move(drv);
    if (clock_shift != 0) {
      auto shifted = [clock_shift](fetch::FetchOptions o) {
        o.tuf_clock = [clock_shift] { return std::time(nullptr) + clock_shift; };
        return o;
      };
      d.fetch = [shifted](const fetch::FetchOptions& o, const std::vector<std::string>& t,
                          const std::string& dest) { return fetch::fetch_targets(shifted(o), t, dest); };
      d.index_targets = [shifted](const fetch::FetchOptions& o) {
        return fetch::fetch_index_targets(shifted(o));
      };
    }
    return make_loader(kiln::test::reference_description(), cfg, std::move(d));
  }

  // `kiln fetch` of sm_90a from `url` into cli_store() with the TUF root, its metadata in
  // cli_cache(); `prefix` goes before the command (faketime, variables).
  test::RunResult cli_fetch(const std::string& url, const std::string& args = "",
                            const std::string& prefix = "") {
    return test::run(prefix + "env KILN_CACHE_DIR=" + cli_cache().string() + " " +
                     test::kiln_cli() + " fetch --targets sm_90a --dest " + cli_store().string() +
                     " --mirror " + url + " --tuf-root " + root.string() + " " + args);
  }

  // A refresh of both caches' TUF metadata (loader's and CLI's) from `url`, fetching sm_80 into
  // throwaway stores: what a node trusted before an attack. sm_80 cannot run on CC 9.0, so the
  // loader still needs the mirror afterwards.
  void refresh_both(const std::string& url) {
    for (const fs::path& c : {cache(), cli_cache()}) {
      // A store of its own each: an archive already present is not fetched, nor refreshed for.
      auto r = test::run("env KILN_CACHE_DIR=" + c.string() + " " + test::kiln_cli() +
                         " fetch --targets sm_80 --dest " + (c.string() + "-elsewhere") +
                         " --mirror " + url + " --tuf-root " + root.string());
      ASSERT_EQ(r.exit_code, 0) << r.out;
    }
  }

  std::string tuf_repo(const std::string& args) {
    auto r = test::run(test::kiln_cli() + " tuf-repo --dir " + repo().string() +
                       " --offline-keys " + (keys() / "offline").string() + " --online-keys " +
                       (keys() / "online").string() + " " + args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.out;
    return r.out;
  }
  // A new targets version (release 2 of the repository): one more file signed in.
  void next_release() {
    test::write_file(tmp / "notes" / "kiln-release-notes.txt", "release 2\n");
    tuf_repo("add " + (tmp / "notes").string());
  }
  std::string metadata(const std::string& file) {
    return test::read_file(repo() / "metadata" / file);
  }
  json signed_of(const std::string& file) {
    return test::tuf_forge::signed_of(repo() / "metadata", file);
  }
  // The private keys of `role` (`sub`: "retired" for keys that left it).
  std::vector<tuf::Signer> keys_of(const std::string& role, const std::string& sub = "") {
    return test::tuf_forge::keys_of(keys(), repo() / "metadata", role, sub);
  }
  static std::vector<const tuf::Signer*> ptrs(const std::vector<tuf::Signer>& v,
                                              std::size_t n = 99) {
    return test::tuf_forge::ptrs(v, n);
  }

  // Both clients refuse what `url` serves: the loader's get() with Error{Integrity} carrying
  // attack=`attack`, `kiln fetch --json` with exit 3 and the same field; each message holds
  // every one of `parts`; neither store gains an entry and no image reaches the driver.
  void expect_refused(const std::string& url, const std::string& attack,
                      const std::vector<std::string>& parts, std::time_t clock_shift = 0,
                      const std::string& cli_prefix = "") {
    auto drv = std::make_shared<Cc90Driver>();
    auto before = store_entries(cache());
    try {
      loader(url, drv, clock_shift)->get(kUri);
      ADD_FAILURE() << "the loader took a kernel from a refused repository";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Integrity) << e.what();
      ASSERT_NE(e.field("attack"), nullptr) << e.what();
      EXPECT_EQ(*e.field("attack"), attack);
      EXPECT_EQ(*e.field("uri"), kUri);
      for (const auto& p : parts) EXPECT_CONTAINS(e.what(), p);
    }
    EXPECT_TRUE(drv->images.empty());
    EXPECT_EQ(store_entries(cache()), before);

    auto r = cli_fetch(url, "--json", cli_prefix);
    EXPECT_EQ(r.exit_code, exit_code(ErrorKind::Integrity)) << r.out;
    json err;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("{\"error\"", 0) == 0) err = json::parse(line)["error"];
    ASSERT_TRUE(err.is_object()) << r.out;
    EXPECT_EQ(err["kind"], "integrity");
    EXPECT_EQ(err["fields"]["attack"], attack) << r.out;
    for (const auto& p : parts) EXPECT_CONTAINS(err["message"].get<std::string>(), p);
    EXPECT_EQ(store_entries(cli_store()), std::set<std::string>{});
  }

  TempDir tmp;
  test::SyntheticDist dist_;
  fs::path root;
};

// --- the happy path and the trust anchor rule ------------------------------------------------

TEST_F(TufMirror, LoaderGetsTheKernelFromATufMirrorWithNoDigestPin) {
  MisbehavingServer s(repo(), "ok");
  auto drv = std::make_shared<Cc90Driver>();
  auto l = loader(s.url(), drv);
  const KernelHandle& h = l->get(kUri);
  EXPECT_EQ(h.origin, (cache() / dist_.stem("sm_90a") / "axpy_dtype_f32.fatbin").string());
  EXPECT_EQ(drv->images,
            std::vector<std::string>{dist_.artifacts["sm_90a"]["axpy_dtype_f32.fatbin"]});
  EXPECT_EQ(store_entries(cache()), std::set<std::string>{dist_.stem("sm_90a")});
  // The metadata of the refresh, kept per root under the cache: the next refresh's reference.
  fs::path md = cache() / "tuf" / io::sha256_hex(test::read_file(root));
  EXPECT_TRUE(fs::exists(md / "timestamp.json"));
  EXPECT_TRUE(fs::exists(md / "targets.json"));
  EXPECT_GE(s.count("/metadata/timestamp.json"), 1);
  // The archive came from its hash-prefixed target name (consistent snapshots), not the plain one.
  json targets = signed_of("targets.json")["targets"];
  std::string archive = dist_.archive.at("sm_90a");
  std::string sha = targets[archive]["hashes"]["sha256"];
  EXPECT_EQ(s.count("/targets/" + sha + "." + archive), 1);
  EXPECT_EQ(s.count("/targets/" + archive), 0);
}

// Bit rot in the TUF metadata the node keeps (docs/loader.md, "Bit rot"): one flipped byte in any
// stored file is a copy that no longer verifies; the next refresh fetches the mirror's and the
// kernel is served, never the damaged copy trusted.
TEST_F(TufMirror, AFlippedByteInAnyStoredMetadataFileIsRefusedAndTheMirrorServesAgain) {
  MisbehavingServer s(repo(), "ok");
  ASSERT_EQ(loader(s.url(), std::make_shared<Cc90Driver>())->get(kUri).origin,
            (cache() / dist_.stem("sm_90a") / "axpy_dtype_f32.fatbin").string());
  const fs::path md = cache() / "tuf" / io::sha256_hex(test::read_file(root));
  std::vector<fs::path> stored;
  for (const auto& e : fs::directory_iterator(md))
    if (e.is_regular_file() && e.path().extension() == ".json") stored.push_back(e.path());
  ASSERT_GE(stored.size(), 3u);
  for (const fs::path& f : stored) {
    const std::string original = test::read_file(f);
    std::string bytes = original;
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x01);
    test::write_file(f, bytes);
    fs::remove_all(cache() / dist_.stem("sm_90a"));  // the mirror tier must run again
    plan::forget_store_memory();
    transport::forget_bad_mirrors();  // as a fresh process
    auto drv = std::make_shared<Cc90Driver>();
    std::string origin;
    try {
      origin = loader(s.url(), drv)->get(kUri).origin;
    } catch (const Error& e) {
      ADD_FAILURE() << f.filename() << " damaged: " << e.what();
    }
    EXPECT_EQ(origin, (cache() / dist_.stem("sm_90a") / "axpy_dtype_f32.fatbin").string())
        << f.filename();
    EXPECT_EQ(drv->images,
              std::vector<std::string>{dist_.artifacts["sm_90a"]["axpy_dtype_f32.fatbin"]})
        << f.filename();
    if (fs::exists(f) && test::read_file(f) == bytes) test::write_file(f, original);
  }
}

TEST_F(TufMirror, CliFetchesFromTheRepositoryCiReleaseWritesWithTheTufRootAlone) {
  MisbehavingServer s(repo(), "ok");
  auto r = cli_fetch(s.url(), "--json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "length and hashes match the targets metadata");
  EXPECT_EQ(store_entries(cli_store()), std::set<std::string>{dist_.stem("sm_90a")});
  EXPECT_TRUE(store::store_has_verified(cli_store(), dist_.stem("sm_90a")));
  // --device chooses among the targets the TUF-verified index lists; a second run only refreshes.
  auto d = test::run("env KILN_CACHE_DIR=" + cli_cache().string() + " " + test::kiln_cli() +
                     " fetch --device 8.0 --dest " + cli_store().string() + " --mirror " + s.url() +
                     " --tuf-root " + root.string());
  ASSERT_EQ(d.exit_code, 0) << d.out;
  EXPECT_EQ(store_entries(cli_store()),
            (std::set<std::string>{dist_.stem("sm_80"), dist_.stem("sm_90a")}));
  // KILN_TUF_ROOT does what --tuf-root does.
  auto env =
      test::run("env KILN_CACHE_DIR=" + cli_cache().string() + " KILN_TUF_ROOT=" + root.string() +
                " " + test::kiln_cli() + " fetch --targets sm_90a --dest " +
                (tmp / "other").string() + " --mirror " + s.url());
  ASSERT_EQ(env.exit_code, 0) << env.out;
  EXPECT_TRUE(store::store_has_verified(tmp / "other", dist_.stem("sm_90a")));
}

TEST_F(TufMirror, BothTrustAnchorsOrNeitherAreUsageErrorsNamingWhatToDo) {
  MisbehavingServer s(repo(), "ok");
  auto both = cli_fetch(s.url(), "--index-sha256 " + dist_.index_sha256);
  EXPECT_EQ(both.exit_code, exit_code(ErrorKind::Usage)) << both.out;
  EXPECT_CONTAINS(both.out, "two trust anchors are configured");
  EXPECT_CONTAINS(both.out, root.string());
  EXPECT_CONTAINS(both.out, dist_.index_sha256);
  // The variable and a flag of the other kind: the same refusal.
  auto mixed = test::run("env KILN_CACHE_DIR=" + cli_cache().string() +
                         " KILN_INDEX_SHA256=" + dist_.index_sha256 + " " + test::kiln_cli() +
                         " fetch --targets sm_90a --dest " + cli_store().string() + " --mirror " +
                         s.url() + " --tuf-root " + root.string());
  EXPECT_EQ(mixed.exit_code, exit_code(ErrorKind::Usage)) << mixed.out;
  auto neither =
      test::run("env KILN_CACHE_DIR=" + cli_cache().string() + " " + test::kiln_cli() +
                " fetch --targets sm_90a --dest " + cli_store().string() + " --mirror " + s.url());
  EXPECT_EQ(neither.exit_code, exit_code(ErrorKind::Usage)) << neither.out;
  EXPECT_CONTAINS(neither.out, "pass --tuf-root FILE");
  EXPECT_CONTAINS(neither.out, "--index-sha256 HEX");
  EXPECT_EQ(s.total(), 0);
  EXPECT_EQ(store_entries(cli_store()), std::set<std::string>{});
}

TEST_F(TufMirror, ARootInstalledBesideKilnIsTheAnchorWhenNoneIsConfigured) {
  // An install tree: bin/kiln (the core linked in) and share/kiln/tuf/root.json beside it.
  fs::path prefix = tmp / "prefix";
  fs::create_directories(prefix / "bin");
  fs::copy_file(test::kiln_cli(), prefix / "bin" / "kiln");
  test::write_file(prefix / "share" / "kiln" / "tuf" / "root.json", test::read_file(root));
  std::string kiln = (prefix / "bin" / "kiln").string();
  MisbehavingServer tuf(repo(), "ok");
  auto r = test::run("env KILN_CACHE_DIR=" + cli_cache().string() + " " + kiln +
                     " fetch --targets sm_90a --dest " + cli_store().string() + " --mirror " +
                     tuf.url());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "length and hashes match the targets metadata");
  EXPECT_TRUE(store::store_has_verified(cli_store(), dist_.stem("sm_90a")));
  // A configured pin beats the installed root: the flat mirror, read by its index digest.
  MisbehavingServer flat(tmp / "mirror", "ok");
  auto p = test::run("env KILN_CACHE_DIR=" + cli_cache().string() + " " + kiln +
                     " fetch --targets sm_80 --dest " + cli_store().string() + " --mirror " +
                     flat.url() + " --index-sha256 " + dist_.index_sha256);
  ASSERT_EQ(p.exit_code, 0) << p.out;
  EXPECT_CONTAINS(p.out, "SHA-256 matches the pin");
}

TEST_F(TufMirror, OfflineAsksNoServerAndNamesTheFetchCommand) {
  MisbehavingServer s(repo(), "ok");
  LoaderConfig cfg;
  cfg.cache_dir = cache().string();
  cfg.mirrors = {s.url()};
  cfg.tuf_root = root.string();
  cfg.offline = true;
  cfg.disable_jit = true;
  cfg.use_installed_store = false;
  plan::LoaderDeps d;
  d.driver = std::make_shared<Cc90Driver>();
  std::string msg = test::error_of(ErrorKind::NotFound, [&] {
    make_loader(kiln::test::reference_description(), cfg, d)->get(kUri);
  });
  EXPECT_CONTAINS(msg, "offline mode");
  auto r = cli_fetch(s.url(), "--offline");
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::NotFound)) << r.out;
  EXPECT_CONTAINS(r.out, "no mirror was contacted");
  EXPECT_EQ(s.total(), 0);
  EXPECT_FALSE(fs::exists(cache() / "tuf"));
  EXPECT_FALSE(fs::exists(cli_cache() / "tuf"));
}

// A TUF root pointed at a plain mirror: not "unreachable" but NotFound (exit 6), naming the
// metadata file the mirror lacks, that it looks like a plain mirror, and the two ways out.
TEST_F(TufMirror, ATufRootPointedAtAPlainMirrorIsNotFoundSayingSoWithTheWayOut) {
  MisbehavingServer plain(tmp / "mirror", "ok");
  const std::string index = dist_.index_path.filename().string();
  auto r = cli_fetch(plain.url());
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::NotFound)) << r.out;
  EXPECT_CONTAINS(r.out, plain.url() + "/metadata/timestamp.json: not found: " + plain.url() +
                             " serves no TUF metadata; it serves " + plain.url() + "/" + index +
                             " as a plain mirror does");
  EXPECT_CONTAINS(r.out,
                  "point --mirror at one, or fetch from a plain mirror with the index's "
                  "pinned digest (--index-sha256, KILN_INDEX_SHA256)");
  EXPECT_EQ(r.out.find("unreachable"), std::string::npos) << r.out;
  EXPECT_EQ(store_entries(cli_store()), std::set<std::string>{});
  // The loader's mirror tier rejects it for the same reason, and its get() is NotFound.
  auto drv = std::make_shared<Cc90Driver>();
  std::string msg =
      test::error_of(ErrorKind::NotFound, [&] { loader(plain.url(), drv)->get(kUri); });
  EXPECT_CONTAINS(msg, "serves no TUF metadata");
  EXPECT_TRUE(drv->images.empty());
  // An empty directory is no plain mirror either: only the missing metadata is named.
  fs::create_directories(tmp / "nothing");
  MisbehavingServer nothing(tmp / "nothing", "ok");
  auto n = cli_fetch(nothing.url());
  EXPECT_EQ(n.exit_code, exit_code(ErrorKind::NotFound)) << n.out;
  EXPECT_CONTAINS(n.out, nothing.url() + " serves no TUF metadata");
  EXPECT_EQ(n.out.find("as a plain mirror does"), std::string::npos) << n.out;
}

TEST_F(TufMirror, CliFetchDeviceDownloadsTheIndexTargetOnce) {
  MisbehavingServer s(repo(), "ok");
  auto r = test::run("env KILN_CACHE_DIR=" + cli_cache().string() + " " + test::kiln_cli() +
                     " fetch --device 9.0 --dest " + cli_store().string() + " --mirror " + s.url() +
                     " --tuf-root " + root.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string index = dist_.index_path.filename().string();
  std::string sha = signed_of("targets.json")["targets"][index]["hashes"]["sha256"];
  EXPECT_EQ(s.count("/targets/" + sha + "." + index), 1) << r.out;
  EXPECT_EQ(store_entries(cli_store()), std::set<std::string>{dist_.stem("sm_90a")});
}

// A release's archive the targets metadata lists but the mirror does not serve: NotFound, as
// under a pinned digest.
TEST_F(TufMirror, AnArchiveMissingFromTheRepositoryIsNotFound) {
  MisbehavingServer s(repo(), "404", {"--match", dist_.archive.at("sm_90a")});
  auto r = cli_fetch(s.url(), "--json");
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::NotFound)) << r.out;
  EXPECT_CONTAINS(r.out, "HTTP 404");
  EXPECT_EQ(store_entries(cli_store()), std::set<std::string>{});
}

TEST_F(TufMirror, AnAttackedMirrorIsDistrustedAndTheNextOneServes) {
  MisbehavingServer bad(repo(), "endless", {"--match", "timestamp.json"});
  MisbehavingServer down(repo(), "404", {"--match", "/"});
  MisbehavingServer good(repo(), "ok");
  auto r = test::run("env KILN_CACHE_DIR=" + cli_cache().string() + " " + test::kiln_cli() +
                     " fetch --json --targets sm_90a --dest " + cli_store().string() +
                     " --tuf-root " + root.string() + " --mirror " + bad.url() + " --mirror " +
                     down.url() + " --mirror " + good.url());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  json out = json::parse(r.out.substr(r.out.find("{\n")));
  // The metadata of the first two mirrors, then the archive: the distrusted mirror is skipped,
  // the unreachable one asked again.
  ASSERT_EQ(out["failures"].size(), 4u) << r.out;
  EXPECT_EQ(out["failures"][0]["mirror"], bad.url());
  EXPECT_EQ(out["failures"][0]["attack"], "endless-data");
  EXPECT_EQ(out["failures"][1]["mirror"], down.url());
  EXPECT_FALSE(out["failures"][1].contains("attack")) << r.out;  // unreachable attacks nothing
  EXPECT_EQ(out["failures"][2]["mirror"], bad.url());
  EXPECT_EQ(out["failures"][2]["what"], "skipped: served bytes that failed verification earlier");
  EXPECT_EQ(out["failures"][3]["mirror"], down.url());
  EXPECT_EQ(bad.total(), 2);  // 2.root.json and the endless timestamp.json, nothing after
  EXPECT_EQ(store_entries(cli_store()), std::set<std::string>{dist_.stem("sm_90a")});
}

// --- attacks -----------------------------------------------------------------------------------

using TufMirrorAttack = TufMirror;

TEST_F(TufMirrorAttack, TimestampReplayedPastItsExpiryIsRefusedAsFreeze) {
  ASSERT_EQ(test::run("command -v faketime").exit_code, 0)
      << "faketime is missing (a Debian package: scripts/bootstrap.sh installs it)";
  // The mirror serves the timestamp it was given (1 day expiry); the clients look 3 days later.
  MisbehavingServer s(repo(), "ok");
  expect_refused(s.url(), "freeze",
                 {"tuf: expired metadata (freeze): timestamp.json v2: field \"expires\" is " +
                  signed_of("timestamp.json")["expires"].get<std::string>() + ", now is past it"},
                 kThreeDays, "faketime -f +3d ");
}

TEST_F(TufMirrorAttack, OlderTimestampAfterANewerOneIsRefusedAsRollback) {
  std::string old_timestamp = metadata("timestamp.json");
  next_release();
  MisbehavingServer s(repo(), "ok");
  refresh_both(s.url());
  test::write_file(repo() / "metadata" / "timestamp.json", old_timestamp);
  expect_refused(s.url(), "rollback",
                 {"tuf: rollback: timestamp.json: field \"version\" is 2, trusted version is 3"});
}

TEST_F(TufMirrorAttack, OlderSnapshotResignedWithStolenOnlineKeysIsRefusedAsRollback) {
  json old_snapshot = signed_of("snapshot.json");  // names targets v2
  next_release();
  MisbehavingServer s(repo(), "ok");
  refresh_both(s.url());
  test::tuf_forge::resign_old_snapshot_as_v4(repo() / "metadata", old_snapshot, keys_of("snapshot"),
                                             keys_of("timestamp"));
  expect_refused(s.url(), "rollback",
                 {"tuf: rollback: snapshot.json v4: meta \"targets.json\" version is 2, trusted "
                  "snapshot has 3"});
}

TEST_F(TufMirrorAttack, TargetsMetadataMixedFromTwoReleasesIsRefused) {
  std::string release1_targets = metadata("targets.json");
  next_release();
  // Release 2's snapshot names targets v3; the mirror serves release 1's under that name.
  test::write_file(repo() / "metadata" / "3.targets.json", release1_targets);
  MisbehavingServer s(repo(), "ok");
  expect_refused(s.url(), "mix-and-match",
                 {"tuf: targets role differs from snapshot (mix-and-match): targets.json "
                  "(snapshot v3 meta)"});
}

TEST_F(TufMirrorAttack, RootRotatedWithTooFewSignaturesIsRefused) {
  // One stolen root key (threshold 2 of 3) signs a root v2 handing timestamp to the thief.
  auto root_keys = keys_of("root");
  tuf::Signer thief = tuf::Signer::generate("ed25519");
  json r = signed_of("root.json");
  r["version"] = 2;
  r["keys"][thief.keyid()] = tuf::key_to_json(thief.public_key());
  r["roles"]["timestamp"]["keyids"] = {thief.keyid()};
  test::write_file(repo() / "metadata" / "2.root.json", tuf::sign_metadata(r, ptrs(root_keys, 1)));
  MisbehavingServer s(repo(), "ok");
  expect_refused(s.url(), "threshold",
                 {"tuf: signature threshold not met: root.json v2 has 1 valid signature(s) from "
                  "the keys trusted root v1 trusts for it, threshold is 2"});
}

TEST_F(TufMirrorAttack, TimestampSignedWithARevokedKeyIsRefused) {
  std::string revoked = signed_of("root.json")["roles"]["timestamp"]["keyids"][0];
  tuf_repo("add-key timestamp");
  tuf_repo("revoke timestamp " + revoked.substr(0, 12));
  MisbehavingServer s(repo(), "ok");
  refresh_both(s.url());  // both clients now trust root v3, which no longer lists the key
  auto retired = keys_of("timestamp", "retired");
  ASSERT_EQ(retired.size(), 1u);
  json ts = signed_of("timestamp.json");
  ts["version"] = ts["version"].get<int>() + 1;
  test::write_file(repo() / "metadata" / "timestamp.json", tuf::sign_metadata(ts, ptrs(retired)));
  expect_refused(s.url(), "untrusted-key",
                 {"tuf: signed by a key not trusted for the role (revoked or unknown): "
                  "timestamp.json v" +
                      std::to_string(ts["version"].get<int>()) + " has 0 valid signature(s)",
                  "signed by key(s) " + revoked.substr(0, 8) + " that root v3 does not list"});
}

TEST_F(TufMirrorAttack, EndlessTimestampResponseIsCutAtItsBound) {
  MisbehavingServer s(repo(), "endless", {"--match", "timestamp.json"});
  auto t0 = std::chrono::steady_clock::now();
  expect_refused(s.url(), "endless-data",
                 {"tuf: response too large (endless data): " + s.url() +
                  "/metadata/timestamp.json: more than 16384 bytes served"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}

TEST_F(TufMirrorAttack, WrongArchiveBytesAreRefusedAgainstTheTargetsMetadata) {
  MisbehavingServer s(repo(), "flip", {"--match", ".tar.zst"});
  std::string archive = dist_.archive.at("sm_90a");
  std::string sha = signed_of("targets.json")["targets"][archive]["hashes"]["sha256"];
  expect_refused(s.url(), "target-mismatch",
                 {"tuf: target bytes differ from metadata: target " + archive + ": sha256 is ",
                  ", metadata says " + sha});
}

// --- air-gapped bundles --------------------------------------------------------------------

class TufBundle : public TufMirror {
 protected:
  // `kiln bundle` from `url` (its TUF metadata in its own cache); `extra` picks the archives.
  test::RunResult bundle(const std::string& url, const fs::path& out,
                         const std::string& extra = "--device 9.0") {
    return test::run("env KILN_CACHE_DIR=" + (tmp / "bundler-cache").string() + " " +
                     test::kiln_cli() + " bundle --mirror " + url + " --tuf-root " + root.string() +
                     " --out " + out.string() + " " + extra);
  }
  // `kiln install --bundle` on "the air-gapped machine": offline, its own cache (its TUF
  // metadata for the root) and store.
  test::RunResult install(const fs::path& b, const std::string& extra = "",
                          const std::string& prefix = "") {
    return test::run(prefix + "env KILN_OFFLINE=1 KILN_CACHE_DIR=" + node_cache().string() + " " +
                     test::kiln_cli() + " install --bundle " + b.string() + " --tuf-root " +
                     root.string() + " --dest " + node_store().string() + " " + extra);
  }
  fs::path node_cache() const { return tmp / "node-cache"; }
  fs::path node_store() const { return tmp / "node-store"; }
  static json error_of_run(const test::RunResult& r) {
    json err;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("{\"error\"", 0) == 0) err = json::parse(line)["error"];
    return err;
  }
};

TEST_F(TufBundle, ABundleMadeOnlineInstallsOfflineAfterItsMetadataAndArchivesVerify) {
  fs::path b = tmp / "bundle";
  {
    MisbehavingServer s(repo(), "ok");
    auto made = bundle(s.url(), b, "--device 9.0 --json");
    ASSERT_EQ(made.exit_code, 0) << made.out;
    EXPECT_CONTAINS(made.out, "\"targets\": [\n    \"sm_90a\"\n  ]");
  }  // the mirror is gone: the node has no network
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(b)) files.insert(e.path().filename().string());
  // Consistent snapshots: snapshot and targets under their versioned names, as on the mirror.
  EXPECT_EQ(files,
            (std::set<std::string>{"1.root.json", "timestamp.json", "2.snapshot.json",
                                   "2.targets.json", format::index_file_name("kiln-kernels", dist_.version),
                                   dist_.archive.at("sm_90a")}));
  auto r = install(b, "--json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(
      r.out, "verified kiln-kernels " + dist_.version + " in " + b.string() + " against root v1");
  EXPECT_EQ(store_entries(node_store()), std::set<std::string>{dist_.stem("sm_90a")});
  EXPECT_TRUE(store::store_has_verified(node_store(), dist_.stem("sm_90a")));
  // The node keeps what it verified for that root: the reference for its next bundle.
  EXPECT_TRUE(
      fs::exists(node_cache() / "tuf" / io::sha256_hex(test::read_file(root)) / "timestamp.json"));
}

// A second package's described release signed into the same repository: one bundle carries
// both releases with their descriptions; the node installs each, naming none, and the
// descriptions land beside the archives (what `kiln resolve` and `compat` read there).
TEST_F(TufBundle, OneBundleCarriesTwoPackagesReleasesAndInstallsBothWithTheirDescriptions) {
  test::ReleaseSpec acme;
  acme.package = "acme-kernels";
  acme.version = "1.2.0";
  test::SyntheticDist acme_dist = test::write_release_dist(tmp / "dist-acme", acme, {"sm_90a"});
  json described = json::parse(project::package_description_json(test::reference_description()));
  described["package"] = "acme-kernels";
  described["package_version"] = "1.2.0";
  const std::string acme_description = described.dump(2) + "\n";
  test::describe_release(acme_dist, acme_description);
  auto staged = test::run(test::kiln_cli() + " mirror stage " + (tmp / "dist-acme").string() +
                          " --to " + (tmp / "mirror").string());
  ASSERT_EQ(staged.exit_code, 0) << staged.out;
  tuf_repo("add " + (tmp / "mirror").string());

  fs::path b = tmp / "bundle.tar.zst";
  {
    MisbehavingServer s(repo(), "ok");
    auto made = bundle(s.url(), b,
                       "--targets sm_90a --json --release kiln-kernels-" + dist_.version +
                           " --release acme-kernels-1.2.0");
    ASSERT_EQ(made.exit_code, 0) << made.out;
    json j = json::parse(made.out.substr(made.out.find("{\n")));
    ASSERT_EQ(j["releases"].size(), 2u) << made.out;
    EXPECT_EQ(j["releases"][1]["package"], "acme-kernels");
    EXPECT_EQ(j["releases"][1]["targets"], json::array({"sm_90a"}));
    EXPECT_NE(std::find(j["files"].begin(), j["files"].end(), "acme-kernels-1.2.0.package.json"),
              j["files"].end())
        << made.out;
  }
  auto r = install(b, "--json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "verified acme-kernels 1.2.0 in " + b.string());
  EXPECT_EQ(store_entries(node_store()),
            (std::set<std::string>{dist_.stem("sm_90a"), acme_dist.stem("sm_90a"),
                                   "acme-kernels-1.2.0.package.json"}));
  EXPECT_EQ(test::read_file(node_store() / "acme-kernels-1.2.0.package.json"), acme_description);
}

TEST_F(TufBundle, ATarballBundleWithARotatedRootCarriesTheChainAndInstallsTheSame) {
  tuf_repo("rotate timestamp");  // root v2, signed by v1's keys: the node still holds v1
  fs::path b = tmp / "bundle.tar.zst";
  {
    MisbehavingServer s(repo(), "ok");
    auto made = bundle(s.url(), b, "--targets sm_80,sm_90a");
    ASSERT_EQ(made.exit_code, 0) << made.out;
  }
  ASSERT_TRUE(fs::is_regular_file(b));
  auto r = install(b);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "against root v2");
  EXPECT_EQ(store_entries(node_store()),
            (std::set<std::string>{dist_.stem("sm_80"), dist_.stem("sm_90a")}));
}

TEST_F(TufBundle, ExpiredMetadataIsRefusedUnlessAnExpiryReferenceIsGivenAndThatIsLoud) {
  ASSERT_EQ(test::run("command -v faketime").exit_code, 0)
      << "faketime is missing (a Debian package: scripts/bootstrap.sh installs it)";
  fs::path b = tmp / "bundle";
  {
    MisbehavingServer s(repo(), "ok");
    ASSERT_EQ(bundle(s.url(), b).exit_code, 0);
  }
  std::string expires = signed_of("timestamp.json")["expires"];
  // Three days later the bundle's timestamp (1 day) has expired: a freeze, nothing installed.
  auto late = install(b, "--json", "faketime -f +3d ");
  EXPECT_EQ(late.exit_code, exit_code(ErrorKind::Integrity)) << late.out;
  EXPECT_EQ(error_of_run(late)["fields"]["attack"], "freeze") << late.out;
  EXPECT_CONTAINS(late.out, "expired metadata (freeze): timestamp.json v2");
  EXPECT_EQ(store_entries(node_store()), std::set<std::string>{});
  // The operator says which time to check against: accepted, and every expired role is named.
  std::string when = tuf::format_utc_time(std::time(nullptr));
  auto ok = install(b, "--json --expiry-reference " + when, "faketime -f +3d ");
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_CONTAINS(ok.out, "WARNING: --expiry-reference " + when);
  EXPECT_CONTAINS(ok.out, "not protected against a replayed (frozen) bundle");
  EXPECT_CONTAINS(ok.out,
                  "WARNING: accepted expired metadata because of --expiry-reference: "
                  "timestamp.json v2 expired " +
                      expires);
  EXPECT_CONTAINS(ok.out, "\"expired_accepted\": [\n    \"timestamp.json v2 expired " + expires);
  EXPECT_EQ(store_entries(node_store()), std::set<std::string>{dist_.stem("sm_90a")});
  auto bad = install(b, "--expiry-reference yesterday");
  EXPECT_EQ(bad.exit_code, exit_code(ErrorKind::Usage)) << bad.out;
}

// A wrong clock (docs/tuf.md, "A wrong clock"). A year ahead: every role has expired by it, and
// the refusal names the metadata's expiry, the node's clock and that the clock may be wrong.
TEST_F(TufBundle, AClockAYearAheadIsRefusedNamingBothTimesAndTheClock) {
  ASSERT_EQ(test::run("command -v faketime").exit_code, 0)
      << "faketime is missing (a Debian package: scripts/bootstrap.sh installs it)";
  fs::path b = tmp / "bundle";
  {
    MisbehavingServer s(repo(), "ok");
    ASSERT_EQ(bundle(s.url(), b).exit_code, 0);
  }
  const std::string year_ahead = tuf::format_utc_time(std::time(nullptr) + 365 * 86400).substr(0, 10);
  auto r = install(b, "--json", "faketime -f +365d ");
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::Integrity)) << r.out;
  EXPECT_EQ(error_of_run(r)["fields"]["attack"], "freeze") << r.out;
  // The first role past its expiry (the root, signed for 365 days, or the timestamp, for 1).
  EXPECT_CONTAINS(r.out, "field \"expires\" is ");
  EXPECT_CONTAINS(r.out, "this node's clock reads " + year_ahead);
  EXPECT_CONTAINS(r.out, "this node's clock is wrong");
  EXPECT_EQ(store_entries(node_store()), std::set<std::string>{});
}

// A clock gone back a year after the node accepted metadata (its metadata files carry the time
// the clock read then): expiry is judged at that time, so metadata that had expired by then is
// refused, naming both times and the clock; the clock alone would have taken it.
TEST_F(TufBundle, AClockGoneBackAYearStillRefusesWhatHadExpiredNamingBothTimes) {
  fs::path b = tmp / "bundle";
  {
    MisbehavingServer s(repo(), "ok");
    ASSERT_EQ(bundle(s.url(), b).exit_code, 0);
  }
  auto first = install(b);
  ASSERT_EQ(first.exit_code, 0) << first.out;
  // The node last accepted metadata a year from now, by its clock then; the clock now reads a
  // year earlier than that, and the bundle's timestamp (1 day) expired in between.
  const std::time_t accepted = std::time(nullptr) + 365 * 86400;
  for (const auto& e : fs::recursive_directory_iterator(node_cache() / "tuf"))
    if (e.is_regular_file()) {
      timespec t[2] = {{accepted, 0}, {accepted, 0}};
      ASSERT_EQ(::utimensat(AT_FDCWD, e.path().c_str(), t, 0), 0) << e.path();
    }
  fs::remove_all(node_store());
  auto r = install(b, "--json");
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::Integrity)) << r.out;
  EXPECT_EQ(error_of_run(r)["fields"]["attack"], "freeze") << r.out;
  EXPECT_CONTAINS(r.out, "now is past it");  // the role named with its "expires"
  EXPECT_CONTAINS(r.out, "This node's clock reads " +
                             tuf::format_utc_time(std::time(nullptr)).substr(0, 10));
  EXPECT_CONTAINS(r.out, "earlier than " + tuf::format_utc_time(accepted));
  EXPECT_CONTAINS(r.out, "the clock is behind");
  EXPECT_EQ(store_entries(node_store()), std::set<std::string>{});
}

TEST_F(TufBundle, ATamperedBundleInstallsNothingEvenFromItsIntactArchives) {
  fs::path b = tmp / "bundle";
  {
    MisbehavingServer s(repo(), "ok");
    ASSERT_EQ(bundle(s.url(), b, "--targets sm_80,sm_90a").exit_code, 0);
  }
  fs::path archive = b / dist_.archive.at("sm_90a");
  std::string bytes = test::read_file(archive);
  bytes[bytes.size() / 2] ^= 1;
  test::write_file(archive, bytes);
  auto r = install(b, "--json");
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::Integrity)) << r.out;
  EXPECT_EQ(error_of_run(r)["fields"]["attack"], "target-mismatch") << r.out;
  EXPECT_CONTAINS(r.out, "target bytes differ from metadata: target " + dist_.archive.at("sm_90a") +
                             ": sha256 is ");
  EXPECT_EQ(store_entries(node_store()), std::set<std::string>{});  // not even sm_80
  // Metadata signed by keys the node's root does not trust: the bundle of another repository.
  fs::path other = tmp / "other-repo";
  ASSERT_EQ(test::run(test::source_dir() + "/ci/tuf_repo.sh " + test::kiln_cli() + " " +
                      (tmp / "mirror").string() + " " + other.string() + " " +
                      (tmp / "other-keys").string())
                .exit_code,
            0);
  fs::path forged = tmp / "forged";
  fs::copy(b, forged);
  test::write_file(forged / dist_.archive.at("sm_90a"),
                   test::read_file(tmp / "mirror" / dist_.archive.at("sm_90a")));
  fs::copy_file(other / "metadata" / "timestamp.json", forged / "timestamp.json",
                fs::copy_options::overwrite_existing);
  auto f = install(forged, "--json");
  EXPECT_EQ(f.exit_code, exit_code(ErrorKind::Integrity)) << f.out;
  EXPECT_EQ(error_of_run(f)["fields"]["attack"], "untrusted-key") << f.out;
  EXPECT_EQ(store_entries(node_store()), std::set<std::string>{});
}

TEST_F(TufBundle, ABundleWithoutItsTimestampIsNotFoundNamingTheFileNotANetworkFailure) {
  // Found by fuzz/bundle_fuzz.cpp: a bundle lacking a metadata file read as "repository
  // unreachable" (exit 8) on a machine that downloads nothing.
  fs::path b = tmp / "bundle";
  {
    MisbehavingServer s(repo(), "ok");
    ASSERT_EQ(bundle(s.url(), b, "--targets sm_80").exit_code, 0);
  }
  fs::remove(b / "timestamp.json");
  auto r = install(b, "--json");
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::NotFound)) << r.out;
  EXPECT_CONTAINS(r.out, "the bundle " + b.string() + " has no timestamp.json");
  EXPECT_EQ(error_of_run(r)["fields"]["file"], "timestamp.json") << r.out;
  EXPECT_EQ(store_entries(node_store()), std::set<std::string>{});
}

TEST_F(TufBundle, AnOlderBundleAfterANewerOneIsRefusedAsRollback) {
  fs::path old_bundle = tmp / "bundle-1";
  fs::path new_bundle = tmp / "bundle-2";
  {
    MisbehavingServer s(repo(), "ok");
    ASSERT_EQ(bundle(s.url(), old_bundle).exit_code, 0);
  }
  next_release();
  {
    MisbehavingServer s(repo(), "ok");
    auto made = bundle(s.url(), new_bundle);
    ASSERT_EQ(made.exit_code, 0) << made.out;
  }
  ASSERT_EQ(install(new_bundle).exit_code, 0);
  fs::remove_all(node_store());
  auto r = install(old_bundle, "--json");
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::Integrity)) << r.out;
  EXPECT_EQ(error_of_run(r)["fields"]["attack"], "rollback") << r.out;
  EXPECT_CONTAINS(r.out,
                  "tuf: rollback: timestamp.json: field \"version\" is 2, trusted version is 3");
  EXPECT_EQ(store_entries(node_store()), std::set<std::string>{});
}

TEST_F(TufBundle, ABundleNeedsATufRootAndANewPath) {
  MisbehavingServer s(repo(), "ok");
  auto no_root =
      test::run("env KILN_CACHE_DIR=" + (tmp / "c").string() + " " + test::kiln_cli() +
                " bundle --mirror " + s.url() + " --device 9.0 --out " + (tmp / "b").string());
  EXPECT_EQ(no_root.exit_code, exit_code(ErrorKind::Usage)) << no_root.out;
  EXPECT_CONTAINS(no_root.out, "a bundle is made and verified with a TUF root");
  fs::create_directories(tmp / "exists");
  auto exists = bundle(s.url(), tmp / "exists");
  EXPECT_EQ(exists.exit_code, exit_code(ErrorKind::Usage)) << exists.out;
  EXPECT_EQ(s.total(), 0);
}

// --- the cost of TUF on the fetch path (scripts/tuf_bench.sh, docs/performance.md) ----------

// Artifacts of KILN_BENCH_KB (1024) incompressible KiB each: an archive of about twice that.
// --- a release of two toolkits: the bundle carries what the driver runs ----------------------

// sm_90a built by CUDA 12.9 and by CUDA 13.0, sm_80 by CUDA 12.9 only (docs/compatibility.md).
class TufBundleTwoToolkits : public TufBundle {
 protected:
  void write_dist(const test::ReleaseSpec& spec) override {
    test::ReleaseSpec rel = spec;
    std::vector<format::IndexEntry> entries;
    for (const auto& [target, cuda] : std::vector<std::pair<std::string, std::string>>{
             {"sm_80", "12.9"}, {"sm_90a", "12.9"}, {"sm_90a", "13.0"}}) {
      rel.cuda_version = cuda;
      fs::path p = test::write_release_archive(tmp / "dist", rel, target);
      std::size_t size = 0;
      std::string sha = io::sha256_file(p, &size);
      entries.push_back({p.filename().string(), target, cuda, size, sha});
    }
    test::write_file(tmp / "dist" / format::index_file_name(rel.package, rel.version),
                     format::index_to_json(test::release_index(rel, entries)));
    dist_.package = rel.package;
    dist_.version = rel.version;
  }
  std::string archive(const std::string& cuda, const std::string& target) const {
    return format::archive_file_name(dist_.package, dist_.version, cuda, target);
  }
  std::set<std::string> archives_in(const fs::path& b) const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(b)) {
      std::string n = e.path().filename().string();
      if (n.size() > 8 && n.compare(n.size() - 8, 8, ".tar.zst") == 0) out.insert(n);
    }
    return out;
  }
};

TEST_F(TufBundleTwoToolkits, TheBundleCarriesOfEachTargetTheNewestToolkitTheDriverRuns) {
  MisbehavingServer s(repo(), "ok");
  // A CUDA 12.8 driver on CC 9.0: sm_90a of CUDA 12.9 (13.0 needs 580).
  auto old = bundle(s.url(), tmp / "b-12.8", "--device 9.0 --driver 12.8 --json");
  ASSERT_EQ(old.exit_code, 0) << old.out;
  EXPECT_EQ(archives_in(tmp / "b-12.8"), std::set<std::string>{archive("12.9", "sm_90a")});
  // A CUDA 13.0 driver: the newest toolkit of the same target.
  auto now = bundle(s.url(), tmp / "b-13.0", "--device 9.0 --driver 13.0");
  ASSERT_EQ(now.exit_code, 0) << now.out;
  EXPECT_EQ(archives_in(tmp / "b-13.0"), std::set<std::string>{archive("13.0", "sm_90a")});
  // --targets: every asked target, each of the newest toolkit this driver runs.
  auto both = bundle(s.url(), tmp / "b-targets", "--targets sm_80,sm_90a --driver 12.8");
  ASSERT_EQ(both.exit_code, 0) << both.out;
  EXPECT_EQ(archives_in(tmp / "b-targets"),
            (std::set<std::string>{archive("12.9", "sm_80"), archive("12.9", "sm_90a")}));
  // The bundle installs offline as any other.
  auto r = install(tmp / "b-12.8");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(store_entries(node_store()),
            std::set<std::string>{
                format::archive_stem(dist_.package, dist_.version, "12.9", "sm_90a")});
  // A driver older than every toolkit: unsupported, both versions named, nothing written.
  auto none = bundle(s.url(), tmp / "b-11.8", "--device 9.0 --driver 11.8");
  EXPECT_EQ(none.exit_code, exit_code(ErrorKind::Unsupported)) << none.out;
  EXPECT_CONTAINS(none.out, "this driver runs CUDA 11.8");
  EXPECT_FALSE(fs::exists(tmp / "b-11.8"));
}

class TufBench : public TufMirror {
 protected:
  void adjust(test::ReleaseSpec& spec) override {
    std::size_t kb = 1024;
    if (const char* env = std::getenv("KILN_BENCH_KB")) kb = std::stoul(env);
    spec.artifacts = [kb](const std::string& target) {
      unsigned seed = target == "sm_80" ? 1 : 3;
      return std::vector<test::SyntheticArtifact>{
          {"axpy_dtype_f32", test::random_bytes(kb << 10, seed)},
          {"axpy_dtype_f16", test::random_bytes(kb << 10, seed + 1)}};
    };
    spec.zstd_level = 1;
  }
};

// `kiln fetch` of one archive on loopback, each run into a new store: pinned by the index digest,
// through TUF with no metadata yet (a node's first fetch: root chain, timestamp, snapshot,
// targets), and through TUF with the metadata of the previous run (timestamp only, the rest
// still valid). One python3 http.server serves the flat mirror and the TUF repository, as the
// refresh rows of tuf_bench.sh are measured. Whole processes, median of KILN_BENCH_RUNS (9).
TEST_F(TufBench, DISABLED_FetchThroughTufAgainstADigestPin) {
  int runs = 9;
  if (const char* env = std::getenv("KILN_BENCH_RUNS")) runs = std::max(1, std::atoi(env));
  int port = test::free_port();
  test::Child server({"python3", "-m", "http.server", std::to_string(port), "--bind", "127.0.0.1",
                      "-d", tmp.path().string()},
                     tmp / "server.log");
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  for (int i = 0;
       i < 200 &&
       test::run("curl -fs " + url + "/tuf/metadata/1.root.json -o /dev/null").exit_code != 0;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  auto timed = [](const std::string& cmd) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = test::run(cmd);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.out;
    return ms;
  };
  std::map<std::string, std::vector<double>> ms;
  const std::string kiln = test::kiln_cli();
  for (int i = 0; i < runs; ++i) {
    std::string n = std::to_string(i);
    ms["a pinned"].push_back(timed(kiln + " fetch --targets sm_90a --dest " +
                                   (tmp / ("pin-" + n)).string() + " --mirror " + url +
                                   "/mirror --index-sha256 " + dist_.index_sha256));
    std::string tuf =
        " fetch --targets sm_90a --mirror " + url + "/tuf --tuf-root " + root.string() + " --dest ";
    ms["b tuf, no metadata yet"].push_back(
        timed("env KILN_CACHE_DIR=" + (tmp / ("cold-" + n)).string() + " " + kiln + tuf +
              (tmp / ("cold-store-" + n)).string()));
    ms["c tuf, metadata of the last run"].push_back(
        timed("env KILN_CACHE_DIR=" + (tmp / "warm").string() + " " + kiln + tuf +
              (tmp / ("warm-store-" + n)).string()));
    ms["d kiln --version"].push_back(timed(kiln + " --version"));
  }
  std::uint64_t size = fs::file_size(tmp / "mirror" / dist_.archive.at("sm_90a"));
  std::printf("kiln fetch of one archive (%llu bytes) on loopback, median of %d runs:\n",
              static_cast<unsigned long long>(size), runs);
  for (auto& [what, v] : ms) {
    std::sort(v.begin(), v.end());
    std::printf("  %-34s %6.1f ms\n", what.substr(2).c_str(), v[v.size() / 2]);
  }
}

}  // namespace
}  // namespace kiln
