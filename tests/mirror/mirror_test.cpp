// `kiln mirror stage|verify|sync` as an operator runs them: the checksum file's grammar, what a
// staged mirror holds, every kind of damage reported in one run, and sync from a file://
// upstream leaving the destination byte-identical when anything is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "io/file_lock.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "mirror/mirror.hpp"
#include "mirror/simple_index.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"
#include "wheel/wheel.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using mirror::ChecksumEntry;
using mirror::ReleaseFileKind;
using test::read_file;
using test::TempDir;
using test::write_file;
using Json = nlohmann::json;

const std::string kVer = kiln::version();

std::string archive_name(const std::string& target) {
  return format::archive_file_name("kiln-kernels", kVer, "13.0", target);
}
std::string wheel_name() { return "kiln_kernels_cu13_sm90a-" + kVer + "-py3-none-any.whl"; }
std::string tarball_name() { return "kiln-" + kVer + "-cuda13.0-linux-x86_64.tar.zst"; }
std::string sums_name() { return mirror::checksums_file_name("kiln-kernels", kVer); }

// The release the dist holds: two axpy artifacts per target, archives at zstd level 3.
test::ReleaseSpec release() {
  test::ReleaseSpec rel;
  rel.zstd_level = 3;
  return rel;
}

// A dist directory as `kiln build --dist` + `kiln wheel` + `kiln tarball` leave it, plus a
// file of another release and one unrelated file. Returns the index digest.
std::string make_dist(const fs::path& dir) {
  test::SyntheticDist d = test::write_release_dist(dir, release(), {"sm_80", "sm_90a"});
  // A real wheel of the sm_90a archive: stage and verify check its RECORD.
  auto members = test::release_members(release(), "sm_90a");
  wheel::write_zip(dir / wheel_name(),
                   wheel::wheel_contents(format::parse_manifest(members[0].data, "test"), members, kVer),
                   1764403200);
  write_file(dir / tarball_name(), "opaque-tarball-bytes");
  write_file(dir / "kiln_kernels_cu13_sm90a-0.0.1-py3-none-any.whl", "old wheel");
  write_file(dir / "notes.txt", "not part of any release");
  return d.index_sha256;
}

// Every file under `dir` (hidden ones too) with its digest: "identical" means this is equal.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::string rel = fs::relative(e.path(), dir).string();
    out[rel] = e.is_regular_file() ? io::sha256_file(e.path()) : "<dir>";
  }
  return out;
}

bool has_staging_dir(const fs::path& dir) {
  if (!fs::exists(dir)) return false;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(".kiln-sync-", 0) == 0) return true;
  return false;
}

void flip_byte(const fs::path& p) {
  std::string data = read_file(p);
  data[data.size() / 2] ^= 0x01;
  write_file(p, data);
}

std::string cli(const std::string& args) { return test::kiln_cli() + " mirror " + args; }

// The verify report as name -> file object.
std::map<std::string, Json> files_of(const std::string& out) {
  std::map<std::string, Json> m;
  Json j = Json::parse(out.substr(out.find('{')));
  for (const auto& f : j["files"]) m[f["name"].get<std::string>()] = f;
  return m;
}

// --- the checksum file and names -------------------------------------------------------------

TEST(MirrorChecksums, WrittenSortedInSha256sumFormatAndParsedBack) {
  std::string a(64, 'a'), b(64, 'b');
  std::string text = mirror::checksums_to_text({{"z.whl", a}, {"b.json", b}});
  EXPECT_EQ(text, b + "  b.json\n" + a + "  z.whl\n");
  auto parsed = mirror::parse_checksums(text, "S", "self");
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0], (ChecksumEntry{"b.json", b}));
  // sha256sum -b writes " *": accepted.
  EXPECT_EQ(mirror::parse_checksums(a + " *x\n", "S", "self")[0], (ChecksumEntry{"x", a}));
  EXPECT_TRUE(mirror::parse_checksums("", "S", "self").empty());
}

TEST(MirrorChecksums, MalformedLinesAreFormatErrorsNamingTheLine) {
  std::string a(64, 'a');
  auto error_of = [](const std::string& text) -> std::string {
    try {
      mirror::parse_checksums(text, "SUMS", "SUMS");
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Format) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "accepted: " << text;
    return "";
  };
  EXPECT_CONTAINS(error_of(std::string(64, 'A') + "  x\n"), "line 1");  // uppercase hex
  EXPECT_CONTAINS(error_of(a + " xy\n"), "two spaces");
  EXPECT_CONTAINS(error_of(a + "  b\n" + a + "  a\n"), "sorted");
  EXPECT_CONTAINS(error_of(a + "  a\n" + a + "  a\n"), "listed twice");
  EXPECT_CONTAINS(error_of(a + "  dir/x\n"), "plain file name");
  EXPECT_CONTAINS(error_of(a + "  .hidden\n"), "plain file name");
  EXPECT_CONTAINS(error_of(a + "  x\r\n"), "plain file name");
  EXPECT_CONTAINS(error_of(a + "  SUMS\n"), "lists itself");
  EXPECT_CONTAINS(error_of(a + "  x"), "newline");
  EXPECT_CONTAINS(error_of(a + "  a\n\n"), "line 2");
}

TEST(MirrorNames, ReleaseFilesAreRecognisedByNameAndOtherVersionsAreNot) {
  using mirror::classify_release_file;
  EXPECT_EQ(classify_release_file("kiln-kernels-0.1.0-SHA256SUMS", "kiln-kernels", "0.1.0"),
            ReleaseFileKind::Checksums);
  EXPECT_EQ(classify_release_file("kiln-kernels-0.1.0-index.json", "kiln-kernels", "0.1.0"),
            ReleaseFileKind::Index);
  EXPECT_EQ(
      classify_release_file("kiln-kernels-0.1.0-cuda13.0-sm_90a.tar.zst", "kiln-kernels", "0.1.0"),
      ReleaseFileKind::Archive);
  EXPECT_EQ(classify_release_file("kiln_kernels_cu13_sm90a-0.1.0-py3-none-any.whl", "kiln-kernels",
                                  "0.1.0"),
            ReleaseFileKind::Wheel);
  EXPECT_EQ(classify_release_file("kiln_kernels_cu13_compute80-0.2.0rc1-py3-none-any.whl",
                                  "kiln-kernels", "0.2.0-rc1"),
            ReleaseFileKind::Wheel);
  // The package's own wheel and kiln's runtime wheel of the same version.
  EXPECT_EQ(
      classify_release_file("kiln_kernels-0.2.0rc1-py3-none-any.whl", "kiln-kernels", "0.2.0-rc1"),
      ReleaseFileKind::PackageWheel);
  EXPECT_EQ(classify_release_file("kiln-0.1.0-cp312-abi3-manylinux_2_28_x86_64.whl", "kiln-kernels",
                                  "0.1.0"),
            ReleaseFileKind::RuntimeWheel);
  EXPECT_EQ(classify_release_file("kiln-0.1.1-cp312-abi3-manylinux_2_28_x86_64.whl", "kiln-kernels",
                                  "0.1.0"),
            std::nullopt);
  EXPECT_EQ(classify_release_file("kiln_kernels-0.1.1-py3-none-any.whl", "kiln-kernels", "0.1.0"),
            std::nullopt);
  EXPECT_EQ(
      classify_release_file("kiln-0.1.0-cuda13.0-linux-x86_64.tar.zst", "kiln-kernels", "0.1.0"),
      ReleaseFileKind::Tarball);
  EXPECT_EQ(
      classify_release_file("kiln-kernels-0.1.0-index.json.tmp.12ab", "kiln-kernels", "0.1.0"),
      ReleaseFileKind::Other);
  EXPECT_EQ(classify_release_file("kiln-kernels-0.1.1-index.json", "kiln-kernels", "0.1.0"),
            std::nullopt);
  // Files of the release 0.1.0-rc1 are not files of 0.1.0 of a known kind.
  EXPECT_EQ(classify_release_file("kiln-0.1.0-rc1-cuda13.0-linux-x86_64.tar.zst", "kiln-kernels",
                                  "0.1.0"),
            ReleaseFileKind::Other);
  EXPECT_EQ(classify_release_file("kiln-kernels-0.1.0-rc1-index.json", "kiln-kernels", "0.1.0"),
            ReleaseFileKind::Other);
  EXPECT_EQ(classify_release_file("kiln-kernels-0.1.0-rc1-SHA256SUMS", "kiln-kernels", "0.1.0"),
            ReleaseFileKind::Other);
  EXPECT_EQ(classify_release_file("kiln_kernels_cu13_sm90a-0.1.1-py3-none-any.whl", "kiln-kernels",
                                  "0.1.0"),
            std::nullopt);
  EXPECT_EQ(classify_release_file("notes.txt", "kiln-kernels", "0.1.0"), std::nullopt);
  EXPECT_EQ(classify_release_file(".kiln-kernels-0.1.0-SHA256SUMS", "kiln-kernels", "0.1.0"),
            std::nullopt);
}

// Several packages share one mirror: each release's files are its own, never another's.
TEST(MirrorNames, ReleasesOfTwoPackagesInOneMirrorNeverClaimEachOthersFiles) {
  using mirror::classify_release_file;
  EXPECT_EQ(classify_release_file("acme-scale-2.0.0-SHA256SUMS", "acme-scale", "2.0.0"),
            ReleaseFileKind::Checksums);
  EXPECT_EQ(classify_release_file("acme-scale-2.0.0-index.json", "acme-scale", "2.0.0"),
            ReleaseFileKind::Index);
  EXPECT_EQ(
      classify_release_file("acme-scale-2.0.0-cuda13.0-sm_90a.tar.zst", "acme-scale", "2.0.0"),
      ReleaseFileKind::Archive);
  EXPECT_EQ(
      classify_release_file("acme_scale_cu13_sm90a-2.0.0-py3-none-any.whl", "acme-scale", "2.0.0"),
      ReleaseFileKind::Wheel);
  // kiln's own tarball belongs to the reference package only.
  EXPECT_EQ(
      classify_release_file("kiln-2.0.0-cuda13.0-linux-x86_64.tar.zst", "acme-scale", "2.0.0"),
      std::nullopt);
  // Same version, other package: not a file of this release.
  for (const char* other :
       {"kiln-kernels-2.0.0-index.json", "kiln-kernels-2.0.0-SHA256SUMS",
        "kiln-kernels-2.0.0-cuda13.0-sm_90a.tar.zst",
        "kiln_kernels_cu13_sm90a-2.0.0-py3-none-any.whl", "acme-2.0.0-index.json"})
    EXPECT_EQ(classify_release_file(other, "acme-scale", "2.0.0"), std::nullopt) << other;
  EXPECT_EQ(classify_release_file("acme-scale-2.0.0-index.json", "acme", "2.0.0"), std::nullopt);
  // A wheel of "acme-cutlass" is not one of "acme".
  EXPECT_EQ(
      classify_release_file("acme_cutlass_cu13_sm90a-2.0.0-py3-none-any.whl", "acme", "2.0.0"),
      std::nullopt);
  EXPECT_EQ(classify_release_file("acme_cu13_sm90a-2.0.0-py3-none-any.whl", "acme", "2.0.0"),
            ReleaseFileKind::Wheel);
  // A package named acme takes none of acme-kernels' wheels, nor those of one named acme-cu13;
  // kiln's runtime wheel is the reference package's only.
  EXPECT_EQ(classify_release_file("acme-2.0.0-py3-none-any.whl", "acme", "2.0.0"),
            ReleaseFileKind::PackageWheel);
  for (const char* other :
       {"acme_kernels-2.0.0-py3-none-any.whl", "acme_kernels_cu13_sm90a-2.0.0-py3-none-any.whl",
        "acme_cu13-2.0.0-py3-none-any.whl", "acme_cu13_cu13_sm90a-2.0.0-py3-none-any.whl",
        "kiln-2.0.0-cp312-abi3-manylinux_2_28_x86_64.whl"})
    EXPECT_EQ(classify_release_file(other, "acme", "2.0.0"), std::nullopt) << other;
  EXPECT_EQ(classify_release_file("acme_kernels-2.0.0-py3-none-any.whl", "acme-kernels", "2.0.0"),
            ReleaseFileKind::PackageWheel);
}

// --- which releases stage and verify act on, unnamed -----------------------------------------

TEST(MirrorReleases, StageWithNoIndexInTheSourcesIsNotFoundNamingThem) {
  TempDir tmp;
  write_file(tmp / "dist" / "notes.txt", "not a release");
  try {
    mirror::releases_to_stage({tmp / "dist"}, tmp / "mirror");
    FAIL() << "found a release";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    EXPECT_CONTAINS(
        std::string(e.what()),
        "no release to stage: no <package>-<version>-index.json in " + (tmp / "dist").string());
    EXPECT_CONTAINS(std::string(e.what()), "(name one with --package and --version)");
  }
  make_dist(tmp / "dist");
  auto found = mirror::releases_to_stage({tmp / "dist"}, tmp / "mirror");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].package, "kiln-kernels");
  EXPECT_EQ(found[0].version, kVer);
}

TEST(MirrorReleases, VerifyTakesEveryReleaseInTheDirectoryAndAPinOnlyOne) {
  TempDir tmp;
  fs::create_directories(tmp / "empty");
  try {
    mirror::releases_to_verify(tmp / "empty", false);
    FAIL() << "found a release";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
  }
  write_file(tmp / "m" / "acme-1.0.0-index.json", "{}");
  EXPECT_EQ(mirror::releases_to_verify(tmp / "m", true).size(), 1u);
  write_file(tmp / "m" / "zeta-2.0.0-SHA256SUMS", "");
  EXPECT_EQ(mirror::releases_to_verify(tmp / "m", false).size(), 2u);
  try {
    mirror::releases_to_verify(tmp / "m", true);
    FAIL() << "a pin covered two releases";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_CONTAINS(std::string(e.what()), "holds 2 releases (acme 1.0.0, zeta 2.0.0)");
  }
}

TEST(MirrorReleases, TheWorstOfSeveralReportsIsTheMostSevereProblem) {
  mirror::MirrorReport ok, stale, bad;
  ok.files = {{"a", ReleaseFileKind::Index, mirror::FileStatus::Ok, std::nullopt, ""}};
  stale.files = {{"b", ReleaseFileKind::Index, mirror::FileStatus::Ok, ErrorKind::Stale, ""}};
  bad.files = {{"c", ReleaseFileKind::Archive, mirror::FileStatus::Ok, ErrorKind::Integrity, ""}};
  EXPECT_EQ(mirror::worst_of({ok}), std::nullopt);
  EXPECT_EQ(mirror::worst_of({}), std::nullopt);
  EXPECT_EQ(mirror::worst_of({ok, stale}), ErrorKind::Stale);
  EXPECT_EQ(mirror::worst_of({stale, bad, ok}), ErrorKind::Integrity);
  EXPECT_EQ(mirror::worst_of({bad, stale}), ErrorKind::Integrity);
}

// --- stage + verify ----------------------------------------------------------------------------

class Mirror : public ::testing::Test {
 protected:
  void SetUp() override {
    index_sha = make_dist(tmp / "dist");
    mirror = tmp / "mirror";
  }
  void stage() {
    auto r = test::run(cli("stage " + (tmp / "dist").string() + " --to " + mirror.string()));
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  TempDir tmp;
  fs::path mirror;
  std::string index_sha;
};

// kiln's runtime wheel as scripts/build_runtime_wheel.sh names it: a valid wheel (RECORD and all)
// whose contents the mirror does not read.
void write_runtime_wheel(const fs::path& whl, const std::string& version) {
  const std::string di = "kiln-" + version + ".dist-info";
  std::vector<wheel::WheelFile> files = {
      {"kiln/__init__.py", "__version__ = \"" + version + "\"\n"},
      {di + "/METADATA", "Metadata-Version: 2.1\nName: kiln\nVersion: " + version + "\n"},
      {di + "/WHEEL",
       "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
       "Tag: cp312-abi3-manylinux_2_28_x86_64\n"}};
  std::string record;
  for (const auto& f : files)
    record +=
        f.path + "," + wheel::record_hash(f.data) + "," + std::to_string(f.data.size()) + "\n";
  files.push_back({di + "/RECORD", record + di + "/RECORD,,\n"});
  wheel::write_zip(whl, files, 1764403200);
}

TEST_F(Mirror, ThePackageWheelAndTheRuntimeWheelAreStagedListedAndVerifiedAsTheirKinds) {
  const std::string package_whl = wheel::package_wheel_file_name("kiln-kernels", kVer);
  const std::string runtime_whl = "kiln-" + kVer + "-cp312-abi3-manylinux_2_28_x86_64.whl";
  wheel::write_zip(
      tmp / "dist" / package_whl,
      wheel::package_wheel_contents("kiln-kernels", kVer,
                                    {format::description_file_name("kiln-kernels", kVer), "{}"}, kVer),
      0);
  write_runtime_wheel(tmp / "dist" / runtime_whl, kVer);
  // Another package's own wheel and another version's runtime: not this release's.
  write_file(tmp / "dist" / ("kiln_kernels_extra-" + kVer + "-py3-none-any.whl"), "other");
  write_file(tmp / "dist" / "kiln-0.0.1-cp312-abi3-manylinux_2_28_x86_64.whl", "older");
  stage();
  const std::string sums = read_file(mirror / sums_name());
  EXPECT_CONTAINS(sums, "  " + package_whl + "\n");
  EXPECT_CONTAINS(sums, "  " + runtime_whl + "\n");
  EXPECT_FALSE(fs::exists(mirror / ("kiln_kernels_extra-" + kVer + "-py3-none-any.whl")));
  EXPECT_FALSE(fs::exists(mirror / "kiln-0.0.1-cp312-abi3-manylinux_2_28_x86_64.whl"));
  auto r = test::run(cli("verify --json " + mirror.string() + " --sums-sha256 " +
                         io::sha256_file(mirror / sums_name())));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto files = files_of(r.out);
  EXPECT_EQ(files[package_whl]["kind"], "package-wheel") << r.out;
  EXPECT_EQ(files[runtime_whl]["kind"], "runtime-wheel") << r.out;
  EXPECT_EQ(files[runtime_whl]["status"], "ok") << r.out;
  // A runtime wheel whose RECORD no longer matches is refused like any wheel.
  fs::remove(tmp / "dist" / runtime_whl);
  write_runtime_wheel(tmp / "dist" / runtime_whl, kVer);
  auto zip = wheel::read_zip(tmp / "dist" / runtime_whl);
  zip[0].data += "# changed\n";
  fs::remove(mirror / runtime_whl);
  wheel::write_zip(mirror / runtime_whl, zip, 1764403200);
  r = test::run(cli("verify --json " + mirror.string()));
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_EQ(files_of(r.out)[runtime_whl]["error"], "integrity") << r.out;
}

TEST_F(Mirror, StageCopiesTheReleaseAndWritesSha256sumsThenVerifyIsOk) {
  auto r = test::run(cli("stage --json " + (tmp / "dist").string() + " --to " + mirror.string()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(mirror)) names.insert(e.path().filename().string());
  // The release's files, and the pip index made from its wheel (listed by no checksum file).
  EXPECT_EQ(names, (std::set<std::string>{sums_name(), format::index_file_name("kiln-kernels", kVer),
                                          archive_name("sm_80"), archive_name("sm_90a"),
                                          wheel_name(), tarball_name(), wheel_name() + ".metadata",
                                          "simple"}));
  names.erase(wheel_name() + ".metadata");
  names.erase("simple");
  std::string expected;
  for (const auto& n : names)
    if (n != sums_name()) expected += io::sha256_file(mirror / n) + "  " + n + "\n";
  EXPECT_EQ(read_file(mirror / sums_name()), expected);
  for (const auto& n : names)
    if (n != sums_name()) {
      EXPECT_EQ(read_file(mirror / n), read_file(tmp / "dist" / n)) << n;
    }
  // Standard tools read it.
  if (test::run("command -v sha256sum").exit_code == 0) {
    auto c = test::run("cd " + mirror.string() + " && sha256sum -c " + sums_name());
    EXPECT_EQ(c.exit_code, 0) << c.out;
  }

  const std::string sums_sha = io::sha256_file(mirror / sums_name());
  r = test::run(cli("verify " + mirror.string() + " --index-sha256 " + index_sha +
                    " --sums-sha256 " + sums_sha));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "OK " + mirror.string());
  // 6 files, the wheel's .metadata and 4 pages (the root's and the project's, HTML and JSON).
  EXPECT_CONTAINS(r.out, "11 files, 0 with problems");
  r = test::run(cli("verify --json " + mirror.string() + " --sums-sha256 " + sums_sha));
  EXPECT_EQ(r.exit_code, 0) << r.out;  // the pinned checksum file covers the index too
  r = test::run(cli("verify --json " + mirror.string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto files = files_of(r.out);
  EXPECT_EQ(files.size(), 11u);
  for (const auto& [name, f] : files) EXPECT_EQ(f["status"], "ok") << name;
  EXPECT_EQ(files[wheel_name()]["kind"], "wheel");
  EXPECT_EQ(files[tarball_name()]["kind"], "tarball");
}

// A mirror directory is served whole: a private key in it (TUF keys kept beside the release, an
// operator's deploy key) would be served with the release. Stage refuses, naming it, and copies
// nothing.
TEST_F(Mirror, StageRefusesAMirrorThatHoldsAPrivateKeyAndCopiesNothing) {
  const fs::path key = mirror / "tuf" / "signing.key";
  write_file(key, "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIA==\n-----END EC PRIVATE KEY-----\n");
  auto before = snapshot(mirror);
  auto r = test::run(cli("stage " + (tmp / "dist").string() + " --to " + mirror.string()));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_CONTAINS(r.out, "mirror stage: " + key.string() + " is a private key");
  EXPECT_CONTAINS(r.out, "would be served from the mirror " + mirror.string());
  EXPECT_EQ(snapshot(mirror), before);
  fs::remove(key);
  stage();
}

// A stage killed mid-copy leaves "<file>.tmp.<16 hex>" in the mirror, which `mirror verify` would
// report as an unlisted file of the release (crash points, tests/crash/): the next stage of the
// release removes it, and leaves other releases' alone.
TEST_F(Mirror, AStageRemovesWhatAKilledStageOfTheReleaseLeft) {
  fs::create_directories(mirror);
  const fs::path orphan = mirror / (archive_name("sm_80") + ".tmp.0123456789abcdef");
  const fs::path other = mirror / "acme-kernels-1.0.0-index.json.tmp.0123456789abcdef";
  write_file(orphan, "half an archive");
  write_file(other, "another release's");
  stage();
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_TRUE(fs::exists(other));
  fs::remove(other);
  auto r = test::run(cli("verify " + mirror.string() + " --index-sha256 " + index_sha +
                         " --sums-sha256 " + io::sha256_file(mirror / sums_name())));
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

// A mirror serving two packages (docs/architecture.md's words): with no release named and no
// project here, verify checks every release in the directory and reports them in one table; a
// problem in one release is that release's, and a pin, which covers one release, needs it named.
TEST_F(Mirror, VerifyWithNothingNamedChecksEveryReleaseOfEveryPackage) {
  stage();
  test::ReleaseSpec acme;
  acme.package = "acme-kernels";
  acme.version = "1.2.0";
  test::write_release_dist(tmp / "acme-dist", acme, {"sm_90a"});
  auto st = test::run(cli("stage " + (tmp / "acme-dist").string() + " --to " + mirror.string() +
                          " --package acme-kernels --version 1.2.0"));
  ASSERT_EQ(st.exit_code, 0) << st.out;
  const std::string here = "cd '" + tmp.path().string() + "' && ";
  auto r = test::run(here + cli("verify " + mirror.string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "OK " + mirror.string() + " (acme-kernels release 1.2.0)");
  EXPECT_CONTAINS(r.out, "OK " + mirror.string() + " (kiln-kernels release " + kVer + ")");
  // 6 files, the wheel's .metadata and 4 pages (the root's and the project's, HTML and JSON).
  EXPECT_CONTAINS(r.out, "11 files, 0 with problems");
  auto j = test::run(here + cli("verify --json " + mirror.string()));
  ASSERT_EQ(j.exit_code, 0) << j.out;
  Json report = Json::parse(j.out);
  ASSERT_EQ(report["releases"].size(), 2u) << j.out;
  EXPECT_EQ(report["releases"][0]["package"], "acme-kernels");
  EXPECT_EQ(report["releases"][1]["package"], "kiln-kernels");

  // One release's archive damaged: that release fails, the other stays OK, exit 3.
  const std::string acme_archive = format::archive_file_name("acme-kernels", "1.2.0", "13.0", "sm_90a");
  write_file(mirror / acme_archive, read_file(mirror / acme_archive) + "x");
  r = test::run(here + cli("verify " + mirror.string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, "FAILED " + mirror.string() + " (acme-kernels release 1.2.0)");
  EXPECT_CONTAINS(r.out, "OK " + mirror.string() + " (kiln-kernels release " + kVer + ")");

  // A pin covers one release: with two there, name it.
  r = test::run(here + cli("verify " + mirror.string() + " --index-sha256 " + index_sha));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_CONTAINS(r.out, "holds 2 releases (acme-kernels 1.2.0, kiln-kernels " + kVer + ")");
  r = test::run(here + cli("verify " + mirror.string() + " --sums-sha256 " +
                           io::sha256_file(mirror / sums_name()) +
                           " --package kiln-kernels --version " + kVer));
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(Mirror, RestageLeavesIdenticalFilesAndRefusesOtherBytesNamingBothDigests) {
  stage();
  auto before = snapshot(mirror);
  auto r = test::run(cli("stage --json " + (tmp / "dist").string() + " --to " + mirror.string()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = Json::parse(r.out.substr(r.out.find('{')));
  EXPECT_TRUE(j["copied"].empty()) << r.out;
  EXPECT_EQ(j["unchanged"].size(), 5u) << r.out;
  EXPECT_EQ(snapshot(mirror), before);

  std::string old_sha = io::sha256_file(mirror / wheel_name());
  // A valid wheel of the same release with other bytes (a later timestamp): a rebuild.
  auto members = test::release_members(release(), "sm_90a");
  wheel::write_zip(tmp / "dist" / wheel_name(),
                   wheel::wheel_contents(format::parse_manifest(members[0].data, "test"), members, kVer),
                   1764403200 + 86400);
  std::string new_sha = io::sha256_file(tmp / "dist" / wheel_name());
  r = test::run(cli("stage " + (tmp / "dist").string() + " --to " + mirror.string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, old_sha);
  EXPECT_CONTAINS(r.out, new_sha);
  EXPECT_CONTAINS(r.out, "refusing to overwrite");
  EXPECT_EQ(snapshot(mirror), before);
}

TEST_F(Mirror, StageRefusesATamperedArchiveBeforeCopyingAnything) {
  format::write_archive(tmp / "dist" / archive_name("sm_90a"), test::release_members(release(), "sm_80"), 0,
                3);
  auto r = test::run(cli("stage " + (tmp / "dist").string() + " --to " + mirror.string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, archive_name("sm_90a"));
  EXPECT_TRUE(snapshot(mirror).empty());
}

TEST_F(Mirror, WheelsStagedLaterJoinTheReleaseTheMirrorAlreadyHolds) {
  fs::create_directories(tmp / "wheels");
  fs::rename(tmp / "dist" / wheel_name(), tmp / "wheels" / wheel_name());
  stage();
  EXPECT_FALSE(fs::exists(mirror / wheel_name()));
  auto r = test::run(cli("stage " + (tmp / "wheels").string() + " --to " + mirror.string()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(read_file(mirror / sums_name()), "  " + wheel_name() + "\n");
  EXPECT_CONTAINS(read_file(mirror / sums_name()), "  " + archive_name("sm_80") + "\n");
  r = test::run(cli("verify " + mirror.string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(Mirror, VerifyReportsEveryKindOfDamageTogetherWithTheWorstExitCode) {
  stage();
  fs::remove(mirror / archive_name("sm_80"));  // missing archive
  flip_byte(mirror / archive_name("sm_90a"));  // flipped byte
  // A wrong SHA256SUMS line: the tarball's digest replaced (the file stays well formed).
  std::string sums = read_file(mirror / sums_name());
  std::string tar_sha = io::sha256_file(mirror / tarball_name());
  sums.replace(sums.find(tar_sha), 64, std::string(64, 'e'));
  write_file(mirror / sums_name(), sums);
  // An extra file of the release that nothing lists.
  std::string extra = "kiln_kernels_cu13_sm80-" + kVer + "-py3-none-any.whl";
  write_file(mirror / extra, "stray");
  // Files of other releases and unrelated files are none of the named release's business.
  write_file(mirror / "kiln-kernels-0.0.1-index.json", "{}");
  write_file(mirror / "README", "hello");

  auto r = test::run(
      cli("verify --json --package kiln-kernels --version " + kVer + " " + mirror.string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;  // integrity outranks not-found
  auto files = files_of(r.out);
  ASSERT_EQ(files.count(archive_name("sm_80")), 1u) << r.out;
  EXPECT_EQ(files[archive_name("sm_80")]["status"], "missing");
  EXPECT_EQ(files[archive_name("sm_80")]["error"], "not-found");
  EXPECT_CONTAINS(files[archive_name("sm_80")]["detail"].get<std::string>(), "listed in");
  EXPECT_EQ(files[archive_name("sm_90a")]["status"], "mismatch");
  EXPECT_EQ(files[archive_name("sm_90a")]["error"], "integrity");
  EXPECT_EQ(files[tarball_name()]["status"], "mismatch");
  EXPECT_CONTAINS(files[tarball_name()]["detail"].get<std::string>(), std::string(64, 'e'));
  EXPECT_CONTAINS(files[tarball_name()]["detail"].get<std::string>(), tar_sha);
  EXPECT_EQ(files[extra]["status"], "unlisted");
  EXPECT_EQ(files[extra]["error"], "integrity");
  EXPECT_EQ(files[wheel_name()]["status"], "ok");
  EXPECT_EQ(files[format::index_file_name("kiln-kernels", kVer)]["status"], "ok");
  EXPECT_EQ(files.count("README"), 0u);
  EXPECT_EQ(files.count("kiln-kernels-0.0.1-index.json"), 0u);
  Json j = Json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["version"], kVer);
  EXPECT_EQ(j["dir"], mirror.string());

  // The table names the same files.
  r = test::run(cli("verify " + mirror.string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, "4 with problems");
  EXPECT_CONTAINS(r.out, "FAILED");
}

TEST_F(Mirror, WheelWhoseMemberDiffersFromItsRecordIsReportedEvenWhenChecksumsAgree) {
  stage();
  // Rebuild the wheel with one artifact changed but the RECORD of the good one, and re-hash
  // it into SHA256SUMS: only the wheel's own RECORD can tell.
  auto members = test::release_members(release(), "sm_90a");
  auto files = wheel::wheel_contents(format::parse_manifest(members[0].data, "test"), members, kVer);
  for (auto& f : files)
    if (f.path.find(".fatbin") != std::string::npos) {
      f.data[0] ^= 1;
      break;
    }
  std::string old_sha = io::sha256_file(mirror / wheel_name());
  fs::remove(mirror / wheel_name());
  wheel::write_zip(mirror / wheel_name(), files, 1764403200);
  std::string sums = read_file(mirror / sums_name());
  sums.replace(sums.find(old_sha), 64, io::sha256_file(mirror / wheel_name()));
  write_file(mirror / sums_name(), sums);

  auto r = test::run(cli("verify --json " + mirror.string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  auto vf = files_of(r.out);
  EXPECT_NE(vf[wheel_name()]["status"], "ok") << r.out;
  EXPECT_EQ(vf[wheel_name()]["error"], "integrity");
  EXPECT_CONTAINS(vf[wheel_name()]["detail"].get<std::string>(), ".fatbin");
  EXPECT_EQ(vf[archive_name("sm_90a")]["status"], "ok");

  // Staging such a wheel is refused before the mirror is touched.
  fs::copy_file(mirror / wheel_name(), tmp / "dist" / wheel_name(),
                fs::copy_options::overwrite_existing);
  auto st =
      test::run(cli("stage " + (tmp / "dist").string() + " --to " + (tmp / "mirror2").string()));
  EXPECT_EQ(st.exit_code, 3) << st.out;
  EXPECT_CONTAINS(st.out, wheel_name());
  EXPECT_FALSE(fs::exists(tmp / "mirror2" / wheel_name()));
}

TEST_F(Mirror, MissingChecksumFileIsReportedAndIndexAndArchivesAreStillChecked) {
  stage();
  fs::remove(mirror / sums_name());
  auto r = test::run(cli("verify --json " + mirror.string()));
  EXPECT_EQ(r.exit_code, 6) << r.out;
  auto files = files_of(r.out);
  EXPECT_EQ(files[sums_name()]["status"], "missing");
  EXPECT_EQ(files[sums_name()]["error"], "not-found");
  EXPECT_EQ(files[archive_name("sm_80")]["status"], "ok");
  EXPECT_EQ(files[wheel_name()]["status"], "unlisted");

  flip_byte(mirror / archive_name("sm_80"));
  r = test::run(cli("verify --json " + mirror.string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  files = files_of(r.out);
  EXPECT_EQ(files[sums_name()]["status"], "missing");
  EXPECT_EQ(files[archive_name("sm_80")]["status"], "mismatch");
}

TEST_F(Mirror, IndexNotMatchingThePinIsAnIntegrityError) {
  stage();
  auto r = test::run(cli("verify " + mirror.string() + " --index-sha256 " + std::string(64, '0')));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, "pinned sha256 " + std::string(64, '0'));
  EXPECT_CONTAINS(r.out, index_sha);
}

TEST_F(Mirror, MalformedChecksumFileIsAFormatError) {
  stage();
  write_file(mirror / sums_name(), "not a checksum line\n");
  auto r = test::run(cli("verify --json " + mirror.string()));
  EXPECT_EQ(r.exit_code, 10) << r.out;  // the wheel and tarball are listed nowhere: not-found
  auto files = files_of(r.out);
  EXPECT_EQ(files[sums_name()]["status"], "invalid");
  EXPECT_EQ(files[sums_name()]["error"], "format");
}

TEST_F(Mirror, EmptyDirectoryIsNotFoundAndMissingDirectoryToo) {
  fs::create_directories(mirror);
  auto r = test::run(cli("verify " + mirror.string()));
  EXPECT_EQ(r.exit_code, 6) << r.out;
  r = test::run(cli("verify " + (tmp / "nope").string()));
  EXPECT_EQ(r.exit_code, 6) << r.out;
}

TEST_F(Mirror, VerifyWithAnIndexPinReportsWheelsAndTarballsAsUncovered) {
  stage();
  auto r = test::run(cli("verify --json " + mirror.string() + " --index-sha256 " + index_sha));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  auto files = files_of(r.out);
  for (const auto& name : {wheel_name(), tarball_name()}) {
    EXPECT_EQ(files[name]["status"], "uncovered") << name;
    EXPECT_EQ(files[name]["error"], "integrity") << name;
    EXPECT_CONTAINS(files[name]["detail"].get<std::string>(), "--sums-sha256");
  }
  for (const auto& name :
       {format::index_file_name("kiln-kernels", kVer), archive_name("sm_80"), archive_name("sm_90a")})
    EXPECT_EQ(files[name]["status"], "ok") << name;
}

TEST_F(Mirror, VerifyWithAWrongSumsPinNamesBothDigestsAndCoversNothing) {
  stage();
  const std::string wrong(64, '0');
  auto r = test::run(cli("verify --json " + mirror.string() + " --sums-sha256 " + wrong));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  auto files = files_of(r.out);
  EXPECT_EQ(files[sums_name()]["status"], "mismatch");
  EXPECT_CONTAINS(files[sums_name()]["detail"].get<std::string>(),
                  "pinned sha256 " + wrong + " (--sums-sha256), the file has " +
                      io::sha256_file(mirror / sums_name()));
  EXPECT_EQ(files[wheel_name()]["status"], "uncovered");
  EXPECT_EQ(files[format::index_file_name("kiln-kernels", kVer)]["status"], "uncovered");
}

// --- what a sync may publish (plan_sync, no I/O) -------------------------------------------------

class SyncPlanTest : public ::testing::Test {
 protected:
  SyncPlanTest() {
    idx.package = "kiln-kernels";
    idx.package_version = "0.1.0";
    idx.archives.push_back(
        {format::archive_file_name("kiln-kernels", "0.1.0", "13.0", "sm_90a"), "sm_90a", "13.0", 10, sha('a')});
    entries = {{"kiln-0.1.0-cuda13.0-linux-x86_64.tar.zst", sha('b')},
               {format::archive_file_name("kiln-kernels", "0.1.0", "13.0", "sm_90a"), sha('a')},
               {"kiln-kernels-0.1.0-index.json", sha('c')},
               {"kiln_kernels_cu13_sm90a-0.1.0-py3-none-any.whl", sha('d')}};
  }
  static std::string sha(char c) { return std::string(64, c); }
  mirror::SyncPlan plan(bool sums_pinned, const std::vector<ChecksumEntry>& e) {
    return mirror::plan_sync(e, mirror::checksums_to_text(e), idx, "kiln-kernels", "0.1.0",
                               true, sums_pinned, "UP/kiln-kernels-0.1.0-SHA256SUMS");
  }
  std::string error_of(const std::vector<ChecksumEntry>& e) {
    try {
      plan(true, e);
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), ErrorKind::Format) << err.what();
      return err.what();
    }
    ADD_FAILURE() << "plan_sync accepted it";
    return "";
  }
  format::Index idx;
  std::vector<ChecksumEntry> entries;
};

TEST_F(SyncPlanTest, IndexPinAlonePublishesIndexAndArchivesAndWithholdsWheelsAndTarballs) {
  auto p = plan(false, entries);
  std::vector<std::string> published;
  for (const auto& f : p.publish) published.push_back(f.name);
  EXPECT_EQ(published,
            (std::vector<std::string>{format::archive_file_name("kiln-kernels", "0.1.0", "13.0", "sm_90a"),
                                      "kiln-kernels-0.1.0-index.json"}));
  EXPECT_EQ(p.publish[0].size, std::optional<std::uint64_t>(10));
  ASSERT_EQ(p.withheld.size(), 2u);
  EXPECT_EQ(p.withheld[0].name, "kiln-0.1.0-cuda13.0-linux-x86_64.tar.zst");
  EXPECT_EQ(p.withheld[0].kind, ReleaseFileKind::Tarball);
  EXPECT_EQ(p.withheld[1].kind, ReleaseFileKind::Wheel);
  EXPECT_CONTAINS(p.withheld[1].reason, "is not pinned (--sums-sha256");
  // The checksum file written lists only what is published.
  EXPECT_EQ(p.checksums_text, sha('a') + "  " +
                                  format::archive_file_name("kiln-kernels", "0.1.0", "13.0", "sm_90a") +
                                  "\n" + sha('c') + "  kiln-kernels-0.1.0-index.json\n");
}

TEST_F(SyncPlanTest, PinnedChecksumsPublishesEverythingWithTheUpstreamBytes) {
  auto p = plan(true, entries);
  EXPECT_EQ(p.publish.size(), 4u);
  EXPECT_TRUE(p.withheld.empty());
  EXPECT_EQ(p.checksums_text, mirror::checksums_to_text(entries));
  EXPECT_CONTAINS(p.publish[3].covered_by, "--sums-sha256");
}

TEST_F(SyncPlanTest, ALineThatIsNotAFileOfTheReleaseIsRefusedNamingLineAndFile) {
  for (const std::string name :
       {"index.html", "kiln-0.0.9-SHA256SUMS", "kiln-kernels-0.0.9-index.json",
        "kiln-kernels-0.1.0-rc1-index.json", "kiln-0.1.0-rc1-SHA256SUMS",
        "kiln-kernels-0.1.0-notes.txt"}) {
    auto e = entries;
    e.push_back({name, sha('e')});
    std::sort(e.begin(), e.end(),
              [](const ChecksumEntry& a, const ChecksumEntry& b) { return a.name < b.name; });
    std::size_t line = 0;
    while (e[line].name != name) ++line;
    EXPECT_CONTAINS(error_of(e), "UP/kiln-kernels-0.1.0-SHA256SUMS: line " +
                                     std::to_string(line + 1) + ": '" + name +
                                     "' is not a file of release 0.1.0");
  }
}

TEST_F(SyncPlanTest, ArchiveDigestDisagreeingWithTheIndexIsAnIntegrityError) {
  auto e = entries;
  e[1].sha256 = sha('f');
  try {
    plan(true, e);
    ADD_FAILURE() << "accepted";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::Integrity);
    EXPECT_CONTAINS(err.what(), "lists sha256 " + sha('f') +
                                    ", kiln-kernels-0.1.0-index.json pins " + sha('a'));
  }
}

// --- the pip index ------------------------------------------------------------------------------

// Stage writes the mirror's pip index (simple_index.hpp) after the files it names; verify checks
// that every link carries the wheel's digest and every .metadata file is the wheel's METADATA, and
// a restage repairs what was damaged.
TEST_F(Mirror, StageWritesThePipIndexAndVerifyCatchesATamperedLinkHashAndMetadata) {
  stage();
  const std::string page = "simple/kiln-kernels-cu13-sm90a/index.html";
  const std::string meta = wheel_name() + ".metadata";
  const std::string sha = io::sha256_file(mirror / wheel_name());
  const std::string html = read_file(mirror / page);
  EXPECT_CONTAINS(html, "<a href=\"../../" + wheel_name() + "#sha256=" + sha + "\"");
  EXPECT_CONTAINS(html, "data-core-metadata=\"sha256=" + io::sha256_file(mirror / meta) + "\"");
  EXPECT_EQ(read_file(mirror / meta), mirror::wheel_metadata(mirror / wheel_name()));
  EXPECT_CONTAINS(read_file(mirror / meta), "Name: kiln-kernels-cu13-sm90a\n");
  EXPECT_CONTAINS(read_file(mirror / "simple" / "index.html"),
                  "<a href=\"kiln-kernels-cu13-sm90a/\">kiln-kernels-cu13-sm90a</a>");
  EXPECT_CONTAINS(read_file(mirror / "simple" / "kiln-kernels-cu13-sm90a" / "index.json"),
                  "\"hashes\": {\"sha256\": \"" + sha + "\"}");
  // No other version's wheel is offered (the 0.0.1 wheel in the dist is not staged).
  EXPECT_EQ(html.find("0.0.1"), std::string::npos) << html;
  auto r = test::run(cli("verify --json " + mirror.string()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto files = files_of(r.out);
  EXPECT_EQ(files[page]["kind"], "simple-page") << r.out;
  EXPECT_EQ(files[page]["status"], "ok") << r.out;
  EXPECT_EQ(files["simple/index.json"]["status"], "ok") << r.out;
  EXPECT_EQ(files[meta]["kind"], "wheel-metadata") << r.out;
  EXPECT_EQ(files[meta]["status"], "ok") << r.out;
  // A restage changes nothing: the same wheels give the same pages.
  auto before = snapshot(mirror);
  stage();
  EXPECT_EQ(snapshot(mirror), before);

  // A link whose hash is not the file's.
  std::string bad_sha = sha;
  bad_sha[0] = bad_sha[0] == '0' ? '1' : '0';
  std::string tampered = html;
  tampered.replace(tampered.find(sha), sha.size(), bad_sha);
  write_file(mirror / page, tampered);
  r = test::run(cli("verify --json " + mirror.string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  files = files_of(r.out);
  EXPECT_EQ(files[page]["status"], "mismatch") << r.out;
  EXPECT_EQ(files[page]["error"], "integrity") << r.out;
  EXPECT_CONTAINS(files[page]["detail"].get<std::string>(),
                  "links " + wheel_name() + " with sha256 " + bad_sha + ", the file has " + sha);
  EXPECT_EQ(files[wheel_name()]["status"], "ok") << r.out;  // the wheel itself is fine
  stage();  // repaired
  EXPECT_EQ(read_file(mirror / page), html);

  // A metadata file that is not the wheel's METADATA; a project page that is gone.
  write_file(mirror / meta, "Metadata-Version: 2.1\nName: evil\n");
  fs::remove(mirror / "simple" / "kiln-kernels-cu13-sm90a" / "index.json");
  r = test::run(cli("verify --json " + mirror.string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  files = files_of(r.out);
  EXPECT_EQ(files[meta]["status"], "mismatch") << r.out;
  EXPECT_EQ(files["simple/kiln-kernels-cu13-sm90a/index.json"]["status"], "missing") << r.out;
  stage();
  r = test::run(cli("verify " + mirror.string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

// Several versions on one mirror: each project page lists every version's wheel, and a sync
// writes the same index from the files it published.
TEST_F(Mirror, ThePipIndexListsEveryVersionAndASyncWritesTheSamePages) {
  stage();
  // A second release of the package with its own target wheel.
  const std::string v2 = "9.9.9";
  test::ReleaseSpec rel2 = release();
  rel2.version = v2;
  test::write_release_dist(tmp / "dist2", rel2, {"sm_90a"});
  auto members = test::release_members(rel2, "sm_90a");
  const std::string wheel2 = "kiln_kernels_cu13_sm90a-" + v2 + "-py3-none-any.whl";
  wheel::write_zip(tmp / "dist2" / wheel2,
                   wheel::wheel_contents(format::parse_manifest(members[0].data, "test"), members, v2),
                   1764403200);
  auto r = test::run(cli("stage " + (tmp / "dist2").string() + " --to " + mirror.string() +
                         " --package kiln-kernels --version " + v2));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string html = read_file(mirror / "simple" / "kiln-kernels-cu13-sm90a" / "index.html");
  EXPECT_LT(html.find(wheel_name()), html.find(wheel2)) << html;  // sorted by file name
  EXPECT_TRUE(fs::exists(mirror / (wheel2 + ".metadata")));
  r = test::run(cli("verify " + mirror.string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;

  // A sync of the first release alone offers only its wheel; of both, the same pages.
  const fs::path down = tmp / "down";
  const std::string pins = " --index-sha256 " + index_sha + " --sums-sha256 " +
                           io::sha256_file(mirror / sums_name());
  r = test::run(cli("sync --from file://" + mirror.string() + " --to " + down.string() + pins));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::string one = read_file(down / "simple" / "kiln-kernels-cu13-sm90a" / "index.html");
  EXPECT_CONTAINS(one, wheel_name());
  EXPECT_EQ(one.find(wheel2), std::string::npos) << one;
  const std::string sums2 = mirror::checksums_file_name("kiln-kernels", v2);
  r = test::run(cli("sync --from file://" + mirror.string() + " --to " + down.string() +
                    " --package kiln-kernels --version " + v2 + " --sums-sha256 " +
                    io::sha256_file(mirror / sums2)));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* p : {"simple/index.html", "simple/index.json",
                        "simple/kiln-kernels-cu13-sm90a/index.html",
                        "simple/kiln-kernels-cu13-sm90a/index.json"})
    EXPECT_EQ(read_file(down / p), read_file(mirror / p)) << p;
  r = test::run(cli("verify " + down.string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;

  // A TUF repository of the mirror signs the pages and metadata files like every other file.
  const fs::path repo = tmp / "repo";
  r = test::run(test::kiln_cli() + " tuf-repo --dir " + repo.string() + " init");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = test::run(test::kiln_cli() + " tuf-repo --dir " + repo.string() + " add " + mirror.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json targets = Json::parse(read_file(repo / "metadata" / "targets.json"))["signed"]["targets"];
  for (const std::string& p : std::vector<std::string>{"simple/index.html",
                                "simple/kiln-kernels-cu13-sm90a/index.json",
                              wheel2 + ".metadata"})
    EXPECT_EQ(targets[p]["hashes"]["sha256"], io::sha256_file(mirror / p)) << p;
}

// --- sync from file:// -------------------------------------------------------------------------

class MirrorSyncFile : public Mirror {
 protected:
  void SetUp() override {
    Mirror::SetUp();
    stage();
    upstream = "file://" + mirror.string();
    dest = tmp / "down";
    sums_sha = io::sha256_file(mirror / sums_name());
    pins = "--index-sha256 " + index_sha + " --sums-sha256 " + sums_sha;
  }
  test::RunResult sync(const std::string& extra = "") {
    return test::run(cli("sync --json --retries 0 --from " + upstream + " --to " + dest.string() +
                         " " + pins + " " + extra));
  }
  std::string upstream;
  fs::path dest;
  std::string sums_sha;
  std::string pins;  // both pins: the whole release is covered
};

TEST_F(MirrorSyncFile, FirstRunCopiesEverythingAndSecondTransfersNothing) {
  auto r = sync();
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = Json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["transferred"].size(), 6u) << r.out;
  EXPECT_TRUE(j["already_good"].empty()) << r.out;
  EXPECT_GT(j["bytes_transferred"].get<std::uint64_t>(), 0u);
  // The index and the checksum file are renamed into place last.
  EXPECT_EQ(j["transferred"][4], format::index_file_name("kiln-kernels", kVer));
  EXPECT_EQ(j["transferred"][5], sums_name());
  EXPECT_EQ(snapshot(dest), snapshot(mirror));
  EXPECT_FALSE(has_staging_dir(dest));
  EXPECT_CONTAINS(r.out, "kiln mirror sync: downloading");  // progress on stderr
  auto v = test::run(cli("verify " + dest.string() + " " + pins));
  EXPECT_EQ(v.exit_code, 0) << v.out;

  auto before = snapshot(dest);
  r = test::run(cli("sync --from " + upstream + " --to " + dest.string() + " " + pins));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "0 files transferred (0 bytes), 6 already good");
  EXPECT_EQ(snapshot(dest), before);
}

// A sync killed mid-way leaves its staging directory (crash points, tests/crash/): the next sync
// of the release removes it.
TEST_F(MirrorSyncFile, ASyncRemovesTheStagingDirectoryAKilledSyncOfTheReleaseLeft) {
  const fs::path left = dest / (".kiln-sync-kiln-kernels-" + std::string(kVer) + "-AbC123");
  write_file(left / archive_name("sm_80"), "half an archive");
  auto r = sync();
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(has_staging_dir(dest));
  EXPECT_EQ(snapshot(dest), snapshot(mirror));
  // Killed after its renames, with nothing left to transfer: removed all the same.
  write_file(left / archive_name("sm_80"), "a staged copy");
  r = sync();
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "0 files transferred");
  EXPECT_FALSE(has_staging_dir(dest));
}

TEST_F(MirrorSyncFile, ASyncWithNothingToTransferDoesNotWaitForAWriterHoldingTheMirror) {
  ASSERT_EQ(sync().exit_code, 0);
  const fs::path left = dest / (".kiln-sync-kiln-kernels-" + std::string(kVer) + "-AbC123");
  write_file(left / archive_name("sm_80"), "a staged copy");
  // Another stage or sync of the mirror, at work (the same lock they take).
  io::FileLock writer = io::FileLock::acquire_directory(dest, std::chrono::seconds(5));
  ASSERT_TRUE(writer.held());
  const auto start = std::chrono::steady_clock::now();
  auto r = sync();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "0 files transferred");
  EXPECT_CONTAINS(r.out, "is being written by another stage or sync");
  EXPECT_LT(took, std::chrono::seconds(20));
  EXPECT_TRUE(has_staging_dir(dest));  // the writer's to remove
  writer.release();
  ASSERT_EQ(sync().exit_code, 0);
  EXPECT_FALSE(has_staging_dir(dest));
}

TEST_F(MirrorSyncFile, CorruptUpstreamArchiveLeavesTheDestinationByteIdentical) {
  // The destination already holds part of the release and an unrelated file.
  fs::create_directories(dest);
  fs::copy_file(mirror / wheel_name(), dest / wheel_name());
  write_file(dest / "README", "operator notes");
  std::string good_sha = io::sha256_file(mirror / archive_name("sm_90a"));
  flip_byte(mirror / archive_name("sm_90a"));
  auto before = snapshot(dest);
  auto r = sync();
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, archive_name("sm_90a"));
  EXPECT_CONTAINS(r.out, upstream + "/" + archive_name("sm_90a"));
  EXPECT_CONTAINS(r.out, "expected " + good_sha);                                    // listed
  EXPECT_CONTAINS(r.out, "served " + io::sha256_file(mirror / archive_name("sm_90a")));  // came
  EXPECT_CONTAINS(r.out, "Nothing was changed");
  EXPECT_EQ(snapshot(dest), before);
  EXPECT_FALSE(has_staging_dir(dest));
}

TEST_F(MirrorSyncFile, SyncRefusesADestinationThatHoldsAPrivateKeyAndWritesNothing) {
  // A TUF key file as kiln tuf-repo names it, found by its name alone.
  const fs::path key = dest / "keys" / "online" / "timestamp" / (std::string(64, 'c') + ".pem");
  write_file(key, "key bytes");
  auto before = snapshot(dest);
  auto r = sync();
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_CONTAINS(r.out, "mirror sync: " + key.string() + " is a private key");
  EXPECT_CONTAINS(r.out, "nothing was published");
  EXPECT_EQ(snapshot(dest), before);
  EXPECT_FALSE(has_staging_dir(dest));
  EXPECT_FALSE(fs::exists(dest / sums_name()));
}

TEST_F(MirrorSyncFile, FailureIntoANewDirectoryLeavesNoDirectory) {
  write_file(mirror / archive_name("sm_80"), "short");  // truncated: size mismatch
  auto r = sync();
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, "size mismatch");
  EXPECT_FALSE(fs::exists(dest));
}

TEST_F(MirrorSyncFile, MissingUpstreamFileIsNotFoundNamingTheUrl) {
  fs::remove(mirror / tarball_name());
  auto r = sync();
  EXPECT_EQ(r.exit_code, 6) << r.out;
  EXPECT_CONTAINS(r.out, upstream + "/" + tarball_name());
  EXPECT_FALSE(fs::exists(dest));
}

TEST_F(MirrorSyncFile, WithoutAnyPinNothingIsFetchedOrWritten) {
  pins = "";
  auto r = sync();
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_CONTAINS(r.out, "no pin: give --index-sha256");
  EXPECT_FALSE(fs::exists(dest));
}

TEST_F(MirrorSyncFile, IndexPinAlonePublishesIndexAndArchivesAndNamesEachWithheldFile) {
  pins = "--index-sha256 " + index_sha;
  auto r = sync();
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = Json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["transferred"], Json::array({archive_name("sm_80"), archive_name("sm_90a"),
                                           format::index_file_name("kiln-kernels", kVer), sums_name()}));
  ASSERT_EQ(j["withheld"].size(), 2u) << r.out;
  EXPECT_EQ(j["withheld"][0]["name"], tarball_name());
  EXPECT_EQ(j["withheld"][1]["name"], wheel_name());
  EXPECT_CONTAINS(r.out, "kiln mirror sync: not published: " + wheel_name() + " (wheel): ");
  EXPECT_CONTAINS(r.out, "kiln mirror sync: verified " + archive_name("sm_80") + " (covered by " +
                             format::index_file_name("kiln-kernels", kVer) +
                             " (size and sha256), trusted through the pinned index digest "
                             "(--index-sha256))");
  EXPECT_FALSE(fs::exists(dest / wheel_name()));
  EXPECT_FALSE(fs::exists(dest / tarball_name()));
  // The checksum file written lists only what was published, and the mirror verifies.
  EXPECT_EQ(read_file(dest / sums_name()),
            io::sha256_file(mirror / archive_name("sm_80")) + "  " + archive_name("sm_80") + "\n" +
                io::sha256_file(mirror / archive_name("sm_90a")) + "  " + archive_name("sm_90a") +
                "\n" + index_sha + "  " + format::index_file_name("kiln-kernels", kVer) + "\n");
  auto v = test::run(cli("verify " + dest.string() + " --index-sha256 " + index_sha));
  EXPECT_EQ(v.exit_code, 0) << v.out;
}

TEST_F(MirrorSyncFile, IndexNotMatchingThePinIsRefusedBeforeAnyDownload) {
  pins = "--sums-sha256 " + sums_sha;
  auto r = sync("--index-sha256 " + std::string(64, '1'));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, "pinned " + std::string(64, '1'));
  EXPECT_CONTAINS(r.out, index_sha);
  EXPECT_FALSE(fs::exists(dest));
}

TEST_F(MirrorSyncFile, ALocalFileWithOtherBytesIsReplacedByTheVerifiedOne) {
  ASSERT_EQ(sync().exit_code, 0);
  write_file(dest / tarball_name(), "damaged");
  auto r = sync();
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = Json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["transferred"], Json::array({tarball_name()}));
  EXPECT_EQ(snapshot(dest), snapshot(mirror));
}

}  // namespace
}  // namespace kiln
