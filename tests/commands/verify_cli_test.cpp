// `kiln verify`, `kiln install` and `kiln inspect` as a user runs them: exit codes, what the
// output names, what is left on disk.
#include <gtest/gtest.h>

#include <map>

#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/version.hpp"
#include "release/verify_release.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::vector<format::ArchiveMember> release_members(const std::string& target, const std::string& version,
                                           std::vector<test::SyntheticArtifact> artifacts = {
                                               {"axpy_dtype_f32", "f32-image"},
                                               {"axpy_dtype_f16", "f16-image"}}) {
  test::ReleaseSpec rel;
  rel.version = version;
  return test::release_members(rel.with_artifacts(std::move(artifacts)), target);
}

// Writes archives for the targets and an index pinning them; returns the index path.
fs::path write_release(const fs::path& dir, const std::vector<std::string>& targets) {
  test::ReleaseSpec rel;
  rel.with_artifacts({{"axpy_dtype_f32", "f32-image"}, {"axpy_dtype_f16", "f16-image"}});
  return test::write_release_dist(dir, rel, targets).index_path;
}

std::string cli(const std::string& args) { return test::kiln_cli() + " " + args; }

TEST(VerifyCli, GoodArchiveExitsZero) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", release_members("sm_80", kiln::version()), 0);
  auto r = test::run(cli("verify " + (dir / "a.tar.zst").string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("OK"), std::string::npos) << r.out;
}

TEST(VerifyCli, ReportsEveryCorruptArtifactAndExitsIntegrity) {
  TempDir dir;
  auto members = release_members("sm_80", kiln::version());
  members[1].data[0] ^= 1;
  members[2].data[0] ^= 1;
  format::write_archive(dir / "a.tar.zst", members, 0);
  auto r = test::run(cli("verify " + (dir / "a.tar.zst").string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("a.tar.zst:" + members[1].name), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a.tar.zst:" + members[2].name), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[sha256]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 problems"), std::string::npos) << r.out;
}

TEST(VerifyCli, OtherPackageVersionIsStaleNamingBothVersions) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", release_members("sm_80", "0.0.1"), 0);
  // Named nothing, the archive is judged by what it names itself: intact, so OK.
  auto own = test::run("cd '" + dir.path().string() + "' && " + cli("verify a.tar.zst"));
  EXPECT_EQ(own.exit_code, 0) << own.out;
  EXPECT_NE(own.out.find("no package named: a.tar.zst is of kiln-kernels 0.0.1"), std::string::npos)
      << own.out;
  auto r = test::run(cli("verify --json --package kiln-kernels --version " +
                         std::string(kiln::version()) + " " + (dir / "a.tar.zst").string()));
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_NE(r.out.find("package_version is 0.0.1, this kiln is " + std::string(kiln::version())),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"kind\": \"stale\""), std::string::npos) << r.out;
}

TEST(VerifyCli, IndexReportsMissingAndTamperedArchivesTogether) {
  TempDir dir;
  fs::path index = write_release(dir.path(), {"sm_80", "sm_90a", "compute_80"});
  fs::remove(dir / format::archive_file_name("kiln-kernels", kiln::version(), "13.0", "sm_90a"));
  fs::path tampered =
      dir / format::archive_file_name("kiln-kernels", kiln::version(), "13.0", "compute_80");
  format::write_archive(tampered,
                release_members("compute_80", kiln::version(), {{"axpy_dtype_f64", "other"}}), 0);
  auto r = test::run(cli("verify --json " + index.string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;  // integrity outranks not-found
  EXPECT_NE(r.out.find("\"kind\": \"not-found\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sm_90a.tar.zst: listed in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"file\": \"" + tampered.string() + "\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"ok\": false"), std::string::npos) << r.out;
}

TEST(VerifyCli, GoodIndexAndItsArchivesExitZero) {
  TempDir dir;
  fs::path index = write_release(dir.path(), {"sm_80", "sm_90a"});
  auto r = test::run(cli("verify " + index.string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("3 checked"), std::string::npos) << r.out;
}

TEST(InstallCli, IndexInstallsEveryArchiveThenStoreVerifies) {
  TempDir dir;
  fs::path index = write_release(dir.path(), {"sm_80", "sm_90a"});
  auto r =
      test::run(cli("install --json " + index.string() + " --dest " + (dir / "store").string()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"action\": \"installed\""), std::string::npos) << r.out;
  EXPECT_TRUE(
      fs::exists(dir / "store" / format::archive_stem("kiln-kernels", kiln::version(), "13.0", "sm_90a") /
                 "axpy_dtype_f16.fatbin"));
  r = test::run(cli("verify " + (dir / "store").string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = test::run(cli("install " + index.string() + " --dest " + (dir / "store").string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("unchanged"), std::string::npos) << r.out;
  // A corrupted store is caught by verify.
  test::write_file(dir / "store" / format::archive_stem("kiln-kernels", kiln::version(), "13.0", "sm_80") /
                       "axpy_dtype_f32.fatbin",
                   "f32-IMAGE");
  r = test::run(cli("verify " + (dir / "store").string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("axpy_dtype_f32.fatbin"), std::string::npos) << r.out;
}

TEST(InstallCli, ArchiveNotMatchingTheIndexDigestIsRefusedAndStoreStaysEmpty) {
  TempDir dir;
  fs::path index = write_release(dir.path(), {"sm_80"});
  format::write_archive(dir / format::archive_file_name("kiln-kernels", kiln::version(), "13.0", "sm_80"),
                release_members("sm_80", kiln::version(), {{"axpy_dtype_f32", "evil"}}), 0);
  fs::create_directories(dir / "store");
  auto r = test::run(cli("install " + index.string() + " --dest " + (dir / "store").string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  // Another archive of another size: the size is judged first, as `kiln verify` does.
  EXPECT_NE(r.out.find("sm_80.tar.zst: size is "), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(dir / "store"));
}

// --json failures carry the error's context fields: a program reads which field differed and
// both values without parsing the message.
TEST(InstallCli, JsonFailureCarriesTheFieldThatDifferedAndBothValues) {
  TempDir dir;
  fs::path index = write_release(dir.path(), {"sm_80"});
  fs::path archive = dir / format::archive_file_name("kiln-kernels", kiln::version(), "13.0", "sm_80");
  const std::string pinned = io::sha256_file(archive);
  std::string bytes = test::read_file(archive);
  bytes[bytes.size() / 2] ^= 1;  // the same size: the digest is the field that differs
  test::write_file(archive, bytes);
  auto r =
      test::run(cli("install --json " + index.string() + " --dest " + (dir / "store").string()));
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("\"field\": \"sha256\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"expected\": \"" + pinned + "\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"actual\": \"" + io::sha256_file(archive) + "\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"path\": \"" + archive.string() + "\""), std::string::npos) << r.out;
}

// Outside any project and with nothing named, the version a store's description names is the
// one its loader serves: another is refused as stale unless --any-version. Named (--package
// and --version, or --source), the named release decides wherever the command runs.
TEST(InstallCli, OtherVersionIsRefusedUnlessAnyVersion) {
  TempDir dir;
  format::write_archive(dir / "old.tar.zst", release_members("sm_80", "0.0.1"), 0);
  const std::string here = "cd '" + dir.path().string() + "' && ";
  test::write_file(dir / "store" / ("kiln-kernels-" + std::string(kiln::version()) + ".package.json"),
                   "{}");
  auto r = test::run(here + cli("install " + (dir / "old.tar.zst").string() + " --dest " +
                                (dir / "store").string()));
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_NE(r.out.find("at the version described beside the store"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "store" / format::archive_stem("kiln-kernels", "0.0.1", "13.0", "sm_80")));
  r = test::run(here + cli("install --package kiln-kernels --version " +
                           std::string(kiln::version()) + " " + (dir / "old.tar.zst").string() +
                           " --dest " + (dir / "other").string()));
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_FALSE(fs::exists(dir / "other" / format::archive_stem("kiln-kernels", "0.0.1", "13.0", "sm_80")));
  r = test::run(here + cli("install --any-version " + (dir / "old.tar.zst").string() + " --dest " +
                           (dir / "store").string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir / "store" / format::archive_stem("kiln-kernels", "0.0.1", "13.0", "sm_80") /
                         "manifest.json"));
  // Nothing named, nothing described: the archive names its release, and that is installed.
  r = test::run(here + cli("install " + (dir / "old.tar.zst").string() + " --dest " +
                           (dir / "fresh").string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("installing the package and version each input names"), std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(dir / "fresh" / format::archive_stem("kiln-kernels", "0.0.1", "13.0", "sm_80") /
                         "manifest.json"));
}

TEST(InspectCli, ArchiveShowsManifestFieldsAndMembersInOrder) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", release_members("sm_90a", kiln::version()), 0);
  auto r = test::run(cli("inspect --json " + (dir / "a.tar.zst").string()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"kind\": \"archive\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"target\": \"sm_90a\""), std::string::npos) << r.out;
  EXPECT_LT(r.out.find("\"name\": \"manifest.json\""),
            r.out.find("\"name\": \"axpy_dtype_f16.fatbin\""));
  r = test::run(cli("inspect " + (dir / "a.tar.zst").string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("axpy_dtype_f32"), std::string::npos) << r.out;
}

TEST(InspectCli, MissingPathExitsNotFoundAndUnknownFileExitsFormat) {
  TempDir dir;
  auto r = test::run(cli("inspect " + (dir / "nope").string()));
  EXPECT_EQ(r.exit_code, 6) << r.out;
  test::write_file(dir / "x.txt", "hello");
  r = test::run(cli("inspect " + (dir / "x.txt").string()));
  EXPECT_EQ(r.exit_code, 10) << r.out;
  r = test::run(cli("verify " + (dir / "x.txt").string()));
  EXPECT_EQ(r.exit_code, 2) << r.out;
}

// A corrupt index is an index (its name says so when its content cannot): `kiln verify` and
// `kiln install` report a format error naming the file and what its parser found, as `kiln
// mirror stage` does; only a file that is none of kiln's by content or name is a usage error.
TEST(VerifyCli, CorruptIndexIsAFormatErrorNamingTheFileForVerifyAndInstall) {
  TempDir dir;
  fs::path good = write_release(dir / "rel", {"sm_80"});
  const std::string text = test::read_file(good);
  const std::string name = good.filename().string();
  const std::map<std::string, std::string> corrupt = {
      {"not-json", "{ this is not json"},
      {"truncated", text.substr(0, 12)},
      {"wrong-fields", R"({"format": 3, "archives": "none"})"},
      {"empty", ""}};
  for (const auto& [what, bytes] : corrupt) {
    fs::path index = dir / what / name;
    test::write_file(index, bytes);
    auto v = test::run(cli("verify " + index.string()));
    EXPECT_EQ(v.exit_code, 10) << what << ": " << v.out;
    EXPECT_NE(v.out.find("FAIL (format) " + index.string()), std::string::npos)
        << what << ": " << v.out;
    EXPECT_EQ(v.out.find("unknown"), std::string::npos) << what << ": " << v.out;
    auto i = test::run(cli("install " + index.string() + " --dest " + (dir / "store").string()));
    EXPECT_EQ(i.exit_code, 10) << what << ": " << i.out;
    EXPECT_NE(i.out.find(index.string()), std::string::npos) << what << ": " << i.out;
    EXPECT_NE(i.out.find("format"), std::string::npos) << what << ": " << i.out;
  }
  // The parse problem itself is named.
  auto v = test::run(cli("verify " + (dir / "not-json" / name).string()));
  EXPECT_NE(v.out.find("parse"), std::string::npos) << v.out;
  EXPECT_FALSE(
      fs::exists(dir / "store" / format::archive_stem("kiln-kernels", kiln::version(), "13.0", "sm_80")));
}

TEST(VerifyCli, AFileOfNoKindKilnReadsIsAUsageErrorSaidInAWholeSentence) {
  TempDir dir;
  test::write_file(dir / "notes.txt", "release notes\n");
  auto v = test::run(cli("verify " + (dir / "notes.txt").string()));
  EXPECT_EQ(v.exit_code, 2) << v.out;
  EXPECT_NE(v.out.find("notes.txt is a file of no kind kiln reads"), std::string::npos) << v.out;
  auto i = test::run(
      cli("install " + (dir / "notes.txt").string() + " --dest " + (dir / "store").string()));
  EXPECT_EQ(i.exit_code, 2) << i.out;
  EXPECT_NE(i.out.find("notes.txt is a file of no kind kiln reads"), std::string::npos) << i.out;
}

TEST(VerifyCli, EmptyStoreIsNotReportedAsOk) {
  TempDir dir;
  fs::create_directories(dir / "store");
  auto r = test::run(cli("verify " + (dir / "store").string()));
  EXPECT_EQ(r.exit_code, 6) << r.out;
}

// The judgement itself (release/verify_release.hpp), without the CLI.
TEST(VerifyRelease, AnInputOfAnotherPackageThanTheDefaultIsJudgedAsItselfWithANote) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", release_members("sm_80", "0.0.1"), 0);
  release::ReleaseJudging by_default{release::JudgedRelease{"acme-kernels", "1.0.0"}, true};
  EXPECT_FALSE(by_default.covers("kiln-kernels"));
  EXPECT_EQ(by_default.version_for_all(), "");
  release::ReleaseVerification v = release::verify_release_path(dir / "a.tar.zst", by_default);
  EXPECT_EQ(v.kind, store::PathKind::Archive);
  EXPECT_EQ(v.exit_code(), 0);
  ASSERT_TRUE(v.named);
  EXPECT_EQ(v.named->is, "is of");
  EXPECT_EQ(v.named->package, "kiln-kernels");
  EXPECT_EQ(v.named->version, "0.0.1");
}

TEST(VerifyRelease, ANamedReleaseJudgesEveryInputAndNamesTheFieldThatDiffers) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", release_members("sm_80", "0.0.1"), 0);
  release::ReleaseJudging named{release::JudgedRelease{"acme-kernels", ""}, false};
  EXPECT_TRUE(named.covers("kiln-kernels"));
  release::ReleaseVerification v = release::verify_release_path(dir / "a.tar.zst", named);
  EXPECT_FALSE(v.named);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].field, "package");
  EXPECT_EQ(v.exit_code(), exit_code(ErrorKind::Stale));
  named.release->name = "kiln-kernels";
  named.release->version = "0.0.2";
  EXPECT_EQ(named.version_for_all(), "0.0.2");
  v = release::verify_release_path(dir / "a.tar.zst", named);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].field, "package_version");
}

TEST(VerifyRelease, AnEmptyStoreIsNotFoundAndAFileOfNoKindAUsageError) {
  TempDir dir;
  fs::create_directories(dir / "store");
  release::ReleaseVerification v = release::verify_release_path(dir / "store", {});
  EXPECT_EQ(v.kind, store::PathKind::Store);
  EXPECT_EQ(v.exit_code(), exit_code(ErrorKind::NotFound));
  test::write_file(dir / "notes.txt", "hello");
  EXPECT_THROW(release::verify_release_path(dir / "notes.txt", {}), Error);
}

}  // namespace
}  // namespace kiln
