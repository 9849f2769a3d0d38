// Releases that describe themselves (index format 3 pins <package>-<version>.package.json), and
// the commands an operator runs on them where no project is at hand: every run below is in an
// empty working directory, naming no package, so each command must take the package from what
// it is given (design.md rule 12). Two packages share every mirror and store here.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

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
  static const kiln::Project project = kiln::load_project(kiln::test::source_dir());
  static const kiln::PackageData data(project);
  Json j = Json::parse(kiln::package_description_json(*data.get()));
  j["package"] = package;
  j["package_version"] = version;
  return j.dump(2) + "\n";
}

struct Release {
  kiln::test::SyntheticDist dist;
  std::string description;
};

// A dist of `package` `version` for sm_80 and sm_90a, described.
Release described_dist(const fs::path& dir, const std::string& package,
                       const std::string& version) {
  kiln::test::ReleaseSpec rel;
  rel.package = package;
  rel.version = version;
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
                                    kiln::sha256_hex(bad) +
                                    ", dist/acme-kernels-1.2.0-index.json "
                                    "says " +
                                    kiln::sha256_hex(acme.description));

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
                  kiln::sha256_hex(acme.description) + "  acme-kernels-1.2.0.package.json\n");

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

}  // namespace
