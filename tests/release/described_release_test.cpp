// Releases that describe themselves (index format 3 pins <package>-<version>.package.json), and
// the commands an operator runs on them where no project is at hand: every run below is in an
// empty working directory, naming no package, so each command must take the package from what
// it is given (docs/rules.md, What is installed describes itself). Two packages share every mirror
// and store here.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "project/package.hpp"
#include "project/package_description.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"
#include "wheel/wheel.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using kiln::test::read_file;
using kiln::test::TempDir;
using kiln::test::write_file;

// A description of `package` `version` (the reference package's kernels under another name).
std::string description_of(const std::string& package, const std::string& version) {
  static const kiln::project::Project project = kiln::project::load_project(kiln::test::source_dir());
  static const kiln::project::PackageData data(project);
  Json j = Json::parse(kiln::project::package_description_json(*data.get()));
  j["package"] = package;
  j["package_version"] = version;
  return j.dump(2) + "\n";
}

struct Release {
  kiln::test::SyntheticDist dist;
  std::string description;
};

// A dist of `package` `version` for sm_80 and sm_90a, described (`kiln verify` of a store holds
// the description against the archives it describes).
Release described_dist(const fs::path& dir, const std::string& package,
                       const std::string& version) {
  kiln::test::ReleaseSpec rel;
  rel.package = package;
  rel.version = version;
  rel.loadable = true;  // the archives hold the kernels the description describes
  Release r{kiln::test::write_release_dist(dir, rel, {"sm_80", "sm_90a"}),
            description_of(package, version)};
  kiln::test::describe_release(r.dist, r.description);
  return r;
}

// `args` run by kiln in `cwd`, which holds no project.
kiln::test::RunResult kiln_in(const fs::path& cwd, const std::string& args) {
  return kiln::test::run("cd '" + cwd.string() + "' && KILN_CACHE_DIR='" +
                         (cwd / ".cache").string() + "' " + kiln::test::kiln_cli() + " " + args);
}

std::string json_of(const std::string& out) { return out.substr(out.find('{')); }

TEST(DescribedRelease, VerifyOfAnIndexJudgesWhatItNamesAndChecksTheDescriptionItPins) {
  TempDir tmp;
  Release acme = described_dist(tmp / "dist", "acme-kernels", "1.2.0");
  auto ok = kiln_in(tmp.path(), "verify dist/acme-kernels-1.2.0-index.json");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_CONTAINS(ok.out,
                  "no package named: dist/acme-kernels-1.2.0-index.json is the index of "
                  "acme-kernels 1.2.0");
  EXPECT_CONTAINS(ok.out, "OK dist/acme-kernels-1.2.0-index.json: 4 checked, 0 problems");

  // One byte of the description changed: integrity, naming the file and both digests.
  std::string bad = acme.description;
  bad[bad.find("acme-kernels")] = 'b';
  write_file(tmp / "dist" / "acme-kernels-1.2.0.package.json", bad);
  auto tampered = kiln_in(tmp.path(), "verify dist/acme-kernels-1.2.0-index.json");
  EXPECT_EQ(tampered.exit_code, 3) << tampered.out;
  EXPECT_CONTAINS(tampered.out, "dist/acme-kernels-1.2.0.package.json: sha256 is " +
                                    kiln::io::sha256_hex(bad) +
                                    ", dist/acme-kernels-1.2.0-index.json "
                                    "says " +
                                    kiln::io::sha256_hex(acme.description));

  // Named as another package: stale, naming both.
  write_file(tmp / "dist" / "acme-kernels-1.2.0.package.json", acme.description);
  auto other =
      kiln_in(tmp.path(), "verify dist/acme-kernels-1.2.0-index.json --package kiln-kernels");
  EXPECT_EQ(other.exit_code, 4) << other.out;
  EXPECT_CONTAINS(other.out, "the index of package acme-kernels, not kiln-kernels");
}

// An install killed while writing the description leaves "<file>.tmp.<16 hex>" in the store (crash
// points, tests/crash/): the next install of the description removes it.
TEST(DescribedRelease, AnInstallRemovesTheDescriptionTemporaryAKilledInstallLeft) {
  TempDir tmp;
  Release acme = described_dist(tmp / "dist", "acme-kernels", "1.2.0");
  const fs::path orphan = tmp / "store" / "acme-kernels-1.2.0.package.json.tmp.0123456789abcdef";
  write_file(orphan, acme.description.substr(0, 10));
  auto r = kiln_in(tmp.path(), "install dist/acme-kernels-1.2.0-index.json --dest store");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_EQ(read_file(tmp / "store" / "acme-kernels-1.2.0.package.json"), acme.description);
}

TEST(DescribedRelease, InstallOfAnIndexWritesTheDescriptionTheStoreIsThenJudgedBy) {
  TempDir tmp;
  Release acme = described_dist(tmp / "dist", "acme-kernels", "1.2.0");
  auto r = kiln_in(tmp.path(), "install dist/acme-kernels-1.2.0-index.json --dest store --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = Json::parse(json_of(r.out));
  ASSERT_EQ(j["descriptions"].size(), 1u) << r.out;
  EXPECT_EQ(j["descriptions"][0],
            "store/acme-kernels-1.2.0.package.json");  // under --dest as given
  EXPECT_EQ(read_file(tmp / "store" / "acme-kernels-1.2.0.package.json"), acme.description);

  // The store now says which version of acme-kernels it serves: verify judges by it.
  auto v = kiln_in(tmp.path(), "verify store");
  EXPECT_EQ(v.exit_code, 0) << v.out;
  Release newer = described_dist(tmp / "dist2", "acme-kernels", "1.3.0");
  kiln::test::write_store_entry(
      tmp / "store",
      [] {
        kiln::test::ReleaseSpec rel;
        rel.package = "acme-kernels";
        rel.version = "1.3.0";
        return rel;
      }(),
      "sm_86");
  auto mixed = kiln_in(tmp.path(), "verify store");
  EXPECT_EQ(mixed.exit_code, 4) << mixed.out;
  EXPECT_CONTAINS(mixed.out, "package_version is 1.3.0, acme-kernels is 1.2.0");

  // Installing another version of a described package needs that version named.
  auto refused = kiln_in(tmp.path(), "install dist2/acme-kernels-1.3.0-index.json --dest store");
  EXPECT_EQ(refused.exit_code, 4) << refused.out;
  EXPECT_CONTAINS(refused.out, "package_version is 1.3.0, acme-kernels wanted is 1.2.0 (the version "
                               "named or described beside --dest; name this one with --version "
                               "1.3.0, or pass --any-version to keep both)");
  auto named = kiln_in(tmp.path(),
                       "install dist2/acme-kernels-1.3.0-index.json --dest store "
                       "--package acme-kernels --version 1.3.0");
  EXPECT_EQ(named.exit_code, 0) << named.out;
  EXPECT_EQ(read_file(tmp / "store" / "acme-kernels-1.3.0.package.json"), newer.description);
}

// Two packages' releases staged, verified and synced together, each judged on its own.
TEST(DescribedRelease, AMirrorOfTwoPackagesIsStagedVerifiedAndSyncedReleaseByRelease) {
  TempDir tmp;
  Release kiln_rel = described_dist(tmp / "dist-kiln", "kiln-kernels", "0.1.0");
  Release acme = described_dist(tmp / "dist-acme", "acme-kernels", "1.2.0");
  auto staged = kiln_in(tmp.path(), "mirror stage dist-kiln dist-acme --to mirror --json");
  ASSERT_EQ(staged.exit_code, 0) << staged.out;
  Json s = Json::parse(json_of(staged.out));
  ASSERT_EQ(s["releases"].size(), 2u) << staged.out;
  EXPECT_EQ(s["releases"][0]["package"], "acme-kernels");
  EXPECT_EQ(s["releases"][1]["package"], "kiln-kernels");
  for (const char* f : {"acme-kernels-1.2.0.package.json", "kiln-kernels-0.1.0.package.json",
                        "acme-kernels-1.2.0-SHA256SUMS", "kiln-kernels-0.1.0-SHA256SUMS"})
    EXPECT_TRUE(fs::exists(tmp / "mirror" / f)) << f;
  EXPECT_CONTAINS(read_file(tmp / "mirror" / "acme-kernels-1.2.0-SHA256SUMS"),
                  kiln::io::sha256_hex(acme.description) + "  acme-kernels-1.2.0.package.json\n");

  auto verified = kiln_in(tmp.path(), "mirror verify mirror");
  EXPECT_EQ(verified.exit_code, 0) << verified.out;
  EXPECT_CONTAINS(verified.out, "acme-kernels-1.2.0.package.json");

  // Each release with its own pin; a wrong pin fails that release only.
  auto pinned =
      kiln_in(tmp.path(),
              "mirror verify mirror --release kiln-kernels-0.1.0=" + kiln_rel.dist.index_sha256 +
                  " --release acme-kernels-1.2.0=" + std::string(64, 'e') + " --json");
  EXPECT_EQ(pinned.exit_code, 3) << pinned.out;
  Json p = Json::parse(json_of(pinned.out));
  ASSERT_EQ(p["releases"].size(), 2u) << pinned.out;
  EXPECT_EQ(p["releases"][0]["package"], "kiln-kernels");
  EXPECT_EQ(p["releases"][0]["ok"], true) << pinned.out;
  EXPECT_EQ(p["releases"][1]["ok"], false) << pinned.out;

  // Sync both from the staged mirror, each under its own index pin.
  auto synced = kiln_in(
      tmp.path(), "mirror sync --from file://" + (tmp / "mirror").string() +
                      " --to copy --release kiln-kernels-0.1.0=" + kiln_rel.dist.index_sha256 +
                      " --release acme-kernels-1.2.0=" + acme.dist.index_sha256 + " --json");
  ASSERT_EQ(synced.exit_code, 0) << synced.out;
  EXPECT_EQ(read_file(tmp / "copy" / "acme-kernels-1.2.0.package.json"), acme.description);
  EXPECT_EQ(read_file(tmp / "copy" / "kiln-kernels-0.1.0.package.json"), kiln_rel.description);

  // The description changed on the upstream: its pin (the index) refuses it, and nothing of
  // that release is written; the other release is unaffected.
  write_file(tmp / "mirror" / "acme-kernels-1.2.0.package.json",
             description_of("acme-kernels", "9.9.9"));
  auto refused = kiln_in(
      tmp.path(), "mirror sync --from file://" + (tmp / "mirror").string() +
                      " --to copy2 --release kiln-kernels-0.1.0=" + kiln_rel.dist.index_sha256 +
                      " --release acme-kernels-1.2.0=" + acme.dist.index_sha256);
  EXPECT_EQ(refused.exit_code, 3) << refused.out;
  EXPECT_TRUE(fs::exists(tmp / "copy2" / "kiln-kernels-0.1.0-index.json"));
  EXPECT_FALSE(fs::exists(tmp / "copy2" / "acme-kernels-1.2.0-index.json"));
  EXPECT_FALSE(fs::exists(tmp / "copy2" / "acme-kernels-1.2.0.package.json"));

  // A sync names each release with its pin.
  auto unpinned = kiln_in(tmp.path(), "mirror sync --from file://" + (tmp / "mirror").string() +
                                          " --to copy3 --release acme-kernels-1.2.0");
  EXPECT_EQ(unpinned.exit_code, 2) << unpinned.out;
  EXPECT_CONTAINS(unpinned.out, "a sync needs the index pin, NAME-VERSION=INDEX_SHA256");
}

TEST(DescribedRelease, AWheelCarriesTheDescriptionInItsStore) {
  TempDir tmp;
  Release acme = described_dist(tmp / "dist", "acme-kernels", "1.2.0");
  auto r = kiln_in(tmp.path(), "wheel --dist dist --out wheels --targets sm_90a");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const fs::path whl = tmp / "wheels" / "acme_kernels_cu13_sm90a-1.2.0-py3-none-any.whl";
  // The package's own wheel carries it too, as the one description of the package.
  auto own =
      kiln::wheel::read_package_wheel(tmp / "wheels" / "acme_kernels-1.2.0-py3-none-any.whl");
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->package, "acme-kernels");
  EXPECT_EQ(own->description, acme.description);
  bool found = false;
  for (const auto& f : kiln::wheel::read_zip(whl))
    if (f.path == "acme_kernels_cu13_sm90a/artifacts/acme-kernels-1.2.0.package.json") {
      found = true;
      EXPECT_EQ(f.data, acme.description);
    }
  EXPECT_TRUE(found) << whl;
}

// Every file under `dir` (hidden ones and lock files included) with its bytes; "" for a
// directory: what a refused install must leave exactly as it was.
std::map<std::string, std::string> listing_and_bytes(const fs::path& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out[fs::relative(it->path(), dir).string()] =
        it->is_directory() ? std::string() : read_file(it->path());
  return out;
}

// A store that already serves one release, and acme-kernels 1.2.0's dist whose sm_90a archive
// (the second: sm_80 would land first) is damaged by `damage`; `kiln install` of that index
// must refuse it as integrity (exit 3) before anything is written, naming the archive and the
// index, and leave the store's listing and bytes as they were: no description, no archive of
// the release, no temporaries. A destination that did not exist is not created.
void expect_release_refused_leaving_the_store(const std::function<void(const fs::path&)>& damage,
                                              const std::string& said) {
  TempDir tmp;
  described_dist(tmp / "dist-kiln", "kiln-kernels", "0.1.0");
  ASSERT_EQ(
      kiln_in(tmp.path(), "install dist-kiln/kiln-kernels-0.1.0-index.json --dest store").exit_code,
      0);
  Release acme = described_dist(tmp / "dist", "acme-kernels", "1.2.0");
  const fs::path archive = tmp / "dist" / acme.dist.archive.at("sm_90a");
  const std::string pinned = read_file(archive);
  damage(archive);
  const auto before = listing_and_bytes(tmp / "store");
  ASSERT_FALSE(before.empty());

  auto r = kiln_in(tmp.path(), "install dist/acme-kernels-1.2.0-index.json --dest store");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, "kiln: error (integrity)");
  EXPECT_CONTAINS(r.out, "dist/" + acme.dist.archive.at("sm_90a") + ": " + said);
  EXPECT_CONTAINS(r.out, "dist/acme-kernels-1.2.0-index.json says ");
  EXPECT_EQ(listing_and_bytes(tmp / "store"), before);
  EXPECT_FALSE(fs::exists(tmp / "store" / "acme-kernels-1.2.0.package.json"));

  auto fresh = kiln_in(tmp.path(), "install dist/acme-kernels-1.2.0-index.json --dest fresh");
  EXPECT_EQ(fresh.exit_code, 3) << fresh.out;
  EXPECT_FALSE(fs::exists(tmp / "fresh"));

  // Repaired, the same command installs the whole release, description last.
  write_file(archive, pinned);
  auto ok = kiln_in(tmp.path(), "install dist/acme-kernels-1.2.0-index.json --dest store");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_EQ(read_file(tmp / "store" / "acme-kernels-1.2.0.package.json"), acme.description);
}

TEST(DescribedRelease, InstallOfAnIndexWithATruncatedArchiveWritesNothing) {
  expect_release_refused_leaving_the_store(
      [](const fs::path& archive) {
        const std::string bytes = read_file(archive);
        write_file(archive, bytes.substr(0, bytes.size() / 2));
      },
      "size is ");
}

TEST(DescribedRelease, InstallOfAnIndexWithAFlippedByteInAnArchiveWritesNothing) {
  expect_release_refused_leaving_the_store(
      [](const fs::path& archive) {
        std::string bytes = read_file(archive);
        bytes[bytes.size() / 2] ^= 0x01;  // the same size: only the digest tells
        write_file(archive, bytes);
      },
      "sha256 is ");
}

// An archive whose bytes are the ones pinned but whose members are not what its manifest says
// (an index that pinned a bad build): refused when unpacked, and still nothing of the release
// lands, not the archive that unpacked well before it, not the description.
TEST(DescribedRelease, InstallOfAnIndexPinningABadArchiveLandsNoneOfIt) {
  TempDir tmp;
  Release acme = described_dist(tmp / "dist", "acme-kernels", "1.2.0");
  const fs::path archive = tmp / "dist" / acme.dist.archive.at("sm_90a");
  kiln::test::ReleaseSpec rel;
  rel.package = "acme-kernels";
  rel.version = "1.2.0";
  auto members = kiln::test::release_members(rel, "sm_90a");
  members.back().data[0] ^= 0x01;
  kiln::format::write_archive(archive, members, 0);
  // Re-pin the bad bytes in the index, as a broken build would have.
  Json index = Json::parse(read_file(acme.dist.index_path));
  for (auto& a : index["archives"])
    if (a["target"] == "sm_90a") {
      a["size"] = fs::file_size(archive);
      a["sha256"] = kiln::io::sha256_file(archive);
    }
  write_file(acme.dist.index_path, index.dump(2) + "\n");
  fs::create_directories(tmp / "store");

  auto r = kiln_in(tmp.path(), "install dist/acme-kernels-1.2.0-index.json --dest store");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, "refusing to install the release of dist/acme-kernels-1.2.0-index.json");
  EXPECT_CONTAINS(r.out, acme.dist.archive.at("sm_90a") + ":" + members.back().name);
  EXPECT_FALSE(fs::exists(tmp / "store" / acme.dist.stem("sm_80")));
  EXPECT_FALSE(fs::exists(tmp / "store" / "acme-kernels-1.2.0.package.json"));
  for (const auto& e : fs::directory_iterator(tmp / "store"))
    EXPECT_EQ(e.path().filename(), ".kiln-locks") << e.path();
}

}  // namespace
