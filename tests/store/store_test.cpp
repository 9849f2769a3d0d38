#include "store/store.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>

#include <map>

#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const char* kStem = "kiln-kernels-0.1.0-cuda13.0-sm_90a";

// Version 0.1.0 (kStem) with the given artifacts (uri -> bytes).
test::ReleaseSpec release(const std::map<std::string, std::string>& artifacts) {
  test::ReleaseSpec rel;
  rel.version = "0.1.0";
  rel.cuda_version = "13.0";
  std::vector<test::SyntheticArtifact> arts;
  for (const auto& [uri, data] : artifacts) arts.push_back({uri, data});
  rel.with_artifacts(std::move(arts));
  return rel;
}

format::Manifest manifest_for(const std::map<std::string, std::string>& artifacts,
                      const std::string& target = "sm_90a") {
  return test::release_manifest(release(artifacts), target);
}

std::vector<format::ArchiveMember> members_for(const std::map<std::string, std::string>& artifacts,
                                       const std::string& target = "sm_90a") {
  return test::release_members(release(artifacts), target);
}

const std::map<std::string, std::string> kArtifacts = {{"axpy_dtype_f32", "fatbin-f32-bytes"},
                                                       {"axpy_dtype_f16", "fatbin-f16"}};

// Every path under dir with its bytes: "exactly as it was" is compared on this.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::string rel = fs::relative(e.path(), dir).string();
    // The install lock (docs/mirrors.md: locks stay); its holder line changes per installer.
    if (rel.rfind(".kiln-locks", 0) == 0) continue;
    out[rel] = e.is_regular_file() ? test::read_file(e.path()) : std::string("<dir>");
  }
  return out;
}

using test::error_of;

TEST(Store, InstallUnpacksManifestAndArtifactsUnderTheArchiveStem) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", members_for(kArtifacts), 0);
  store::InstallResult r = store::install_archive(dir / "a.tar.zst", dir / "store");
  EXPECT_EQ(r.action, store::InstallResult::Action::Installed);
  EXPECT_EQ(r.directory, dir / "store" / kStem);
  auto snap = snapshot(dir / "store");
  EXPECT_EQ(snap.size(), 4u);  // the directory, manifest, two artifacts: no temp left
  EXPECT_EQ(snap[std::string(kStem) + "/axpy_dtype_f32.fatbin"], "fatbin-f32-bytes");
  EXPECT_EQ(snap[std::string(kStem) + "/manifest.json"],
            format::manifest_to_json(manifest_for(kArtifacts)));
}

// A download installed by fetch is removed before its directory is renamed into place: a kill
// leaves the archive or the directory, never both (crash points, tests/crash/); the archive of
// a refused install stays for the caller to report and remove.
TEST(Store, AnInstallThatConsumesTheArchiveRemovesItBeforeTheDirectoryAppears) {
  TempDir dir;
  fs::create_directories(dir / "store");
  format::write_archive(dir / "store" / "a.tar.zst", members_for(kArtifacts), 0);
  store::InstallResult r = store::install_archive(dir / "store" / "a.tar.zst", dir / "store", std::nullopt, {},
                                    store::ArchiveAfterInstall::Remove);
  EXPECT_EQ(r.action, store::InstallResult::Action::Installed);
  EXPECT_FALSE(fs::exists(dir / "store" / "a.tar.zst"));
  EXPECT_EQ(snapshot(dir / "store").size(), 4u);

  format::write_archive(dir / "b.tar.zst", members_for(kArtifacts), 0);
  std::string refused = error_of(ErrorKind::Stale, [&] {
    store::install_archive(dir / "b.tar.zst", dir / "store", std::nullopt,
                    store::RequiredRelease{"another-package", ""}, store::ArchiveAfterInstall::Remove);
  });
  EXPECT_NE(refused.find("not another-package"), std::string::npos) << refused;
  EXPECT_TRUE(fs::exists(dir / "b.tar.zst"));
}

TEST(Store, ScanListsInstalledArchiveWithItsManifest) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", members_for(kArtifacts), 0);
  store::install_archive(dir / "a.tar.zst", dir / "store");
  auto entries = store::scan_store(dir / "store");
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_TRUE(entries[0].manifest) << entries[0].error;
  EXPECT_EQ(entries[0].manifest->target, "sm_90a");
  EXPECT_TRUE(store::verify_store_archive(entries[0]).empty());
  EXPECT_TRUE(store::store_has_verified(dir / "store", kStem));
  EXPECT_FALSE(store::store_has_verified(dir / "store", "kiln-kernels-0.1.0-cuda13.0-sm_80"));
  const format::ArtifactEntry* a = entries[0].manifest->find("axpy_dtype_f16");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(store::read_verified_artifact(entries[0].dir, *a), "fatbin-f16");
}

TEST(Store, ScanReportsBrokenEntriesAndGoesOn) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", members_for(kArtifacts), 0);
  store::install_archive(dir / "a.tar.zst", dir / "store");
  fs::create_directories(dir / "store" / "kiln-kernels-9.9.9a-no-manifest");
  test::write_file(dir / "store" / "kiln-kernels-9.9.9b-bad-json" / "manifest.json", "{not json");
  test::write_file(dir / "store" / "kiln-kernels-9.9.9-cuda13.0-sm_80" / "manifest.json",
                   format::manifest_to_json(manifest_for(kArtifacts)));  // name does not match
  fs::create_directories(dir / "store" / ".tmp-abcdef");
  test::write_file(dir / "store" / "stray-file", "x");
  auto entries = store::scan_store(dir / "store");
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(fs::path(entries[0].dir).filename(), "kiln-kernels-0.1.0-cuda13.0-sm_90a");
  EXPECT_TRUE(entries[0].manifest);
  EXPECT_FALSE(entries[1].manifest);
  EXPECT_EQ(entries[1].error_kind, ErrorKind::Format);
  EXPECT_NE(entries[1].error.find("expected '" + std::string(kStem) + "'"), std::string::npos)
      << entries[1].error;
  EXPECT_EQ(fs::path(entries[2].dir).filename(), "kiln-kernels-9.9.9a-no-manifest");
  EXPECT_EQ(entries[2].error_kind, ErrorKind::NotFound);
  EXPECT_NE(entries[2].error.find("no manifest.json"), std::string::npos) << entries[2].error;
  EXPECT_EQ(entries[3].error_kind, ErrorKind::Format);
  EXPECT_NE(entries[3].error.find("kiln-kernels-9.9.9b-bad-json"), std::string::npos)
      << entries[3].error;
}

// The one store rule (core/store/store_scan.hpp): only <package>-<version>-* directories (or
// links to one) are archives; the cache's jit/, hidden entries and anything else are skipped
// unreported.
TEST(Store, ScanSkipsEntriesThatAreNotArchiveDirectoriesAndFollowsLinks) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", members_for(kArtifacts), 0);
  store::install_archive(dir / "a.tar.zst", dir / "elsewhere");
  fs::create_directories(dir / "store" / "jit" / "sm_90");
  fs::create_directories(dir / "store" / "notes");
  fs::create_directories(dir / "store" / ".kiln-locks");
  test::write_file(dir / "store" / "kiln-kernels-a-plain-file", "x");
  fs::create_directory_symlink(dir / "elsewhere" / kStem, dir / "store" / kStem);
  auto entries = store::scan_store(dir / "store");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(fs::path(entries[0].dir).filename(), kStem);
  ASSERT_TRUE(entries[0].manifest) << entries[0].error;
  EXPECT_TRUE(store::verify_store_archive(entries[0]).empty());
  EXPECT_TRUE(store::store_has_verified(dir / "store", kStem));
  EXPECT_FALSE(store::store_has_verified(dir / "store", "jit"));
  EXPECT_FALSE(store::store_has_verified(dir / "store", "../elsewhere/" + std::string(kStem)));
}

TEST(Store, MissingStoreScansEmpty) {
  TempDir dir;
  EXPECT_TRUE(store::scan_store(dir / "nothing-here").empty());
}

TEST(Store, VerifyFindsCorruptedMissingAndUnlistedFiles) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", members_for(kArtifacts), 0);
  auto r = store::install_archive(dir / "a.tar.zst", dir / "store");
  test::write_file(r.directory / "axpy_dtype_f32.fatbin", "fatbin-f32-BYTES");  // same size
  fs::remove(r.directory / "axpy_dtype_f16.fatbin");
  test::write_file(r.directory / "extra.bin", "x");
  auto problems = store::verify_store_archive(store::scan_store(dir / "store").at(0));
  ASSERT_EQ(problems.size(), 3u);
  std::map<std::string, store::VerifyProblem> by_field;
  for (const auto& p : problems) by_field[p.field] = p;
  EXPECT_EQ(by_field["sha256"].kind, ErrorKind::Integrity);
  EXPECT_NE(by_field["sha256"].message.find("axpy_dtype_f32.fatbin"), std::string::npos);
  EXPECT_EQ(store::most_severe(problems), ErrorKind::Integrity);
  EXPECT_FALSE(store::store_has_verified(dir / "store", kStem));
  std::string msg = error_of(ErrorKind::Integrity, [&] {
    store::read_verified_artifact(r.directory, *r.manifest.find("axpy_dtype_f32"));
  });
  EXPECT_NE(msg.find(io::sha256_hex("fatbin-f32-bytes")), std::string::npos) << msg;
  EXPECT_NE(msg.find(io::sha256_hex("fatbin-f32-BYTES")), std::string::npos) << msg;
}

TEST(Store, ReinstallingTheSameArchiveLeavesTheCopyUntouched) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", members_for(kArtifacts), 0);
  store::install_archive(dir / "a.tar.zst", dir / "store");
  auto before = snapshot(dir / "store");
  auto r = store::install_archive(dir / "a.tar.zst", dir / "store");
  EXPECT_EQ(r.action, store::InstallResult::Action::Unchanged);
  EXPECT_EQ(snapshot(dir / "store"), before);
}

TEST(Store, DifferingCopyIsReplacedWholeWithNoTempLeft) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", members_for(kArtifacts), 0);
  auto r = store::install_archive(dir / "a.tar.zst", dir / "store");
  test::write_file(r.directory / "axpy_dtype_f32.fatbin", "tampered");
  test::write_file(r.directory / "leftover", "x");
  r = store::install_archive(dir / "a.tar.zst", dir / "store");
  EXPECT_EQ(r.action, store::InstallResult::Action::Replaced);
  auto snap = snapshot(dir / "store");
  EXPECT_EQ(snap.size(), 4u);
  EXPECT_EQ(snap[std::string(kStem) + "/axpy_dtype_f32.fatbin"], "fatbin-f32-bytes");
  EXPECT_TRUE(store::store_has_verified(dir / "store", kStem));
}

// Each refused archive must leave the destination exactly as it was.
class StoreRefusal : public ::testing::Test {
 protected:
  void SetUp() override {
    format::write_archive(dir / "good.tar.zst", members_for(kArtifacts, "sm_80"), 0);
    store::install_archive(dir / "good.tar.zst", dir / "store");
    before = snapshot(dir / "store");
    ASSERT_EQ(before.size(), 4u);
  }
  std::string refuse(const fs::path& archive, ErrorKind kind,
                     const std::optional<std::string>& sha = std::nullopt) {
    std::string msg = error_of(kind, [&] { store::install_archive(archive, dir / "store", sha); });
    EXPECT_EQ(snapshot(dir / "store"), before) << msg;
    return msg;
  }
  TempDir dir;
  std::map<std::string, std::string> before;
};

TEST_F(StoreRefusal, ArchiveDigestMismatch) {
  format::write_archive(dir / "a.tar.zst", members_for(kArtifacts), 0);
  std::string msg = refuse(dir / "a.tar.zst", ErrorKind::Integrity, std::string(64, '0'));
  EXPECT_NE(msg.find(std::string(64, '0')), std::string::npos) << msg;
  EXPECT_NE(msg.find("a.tar.zst"), std::string::npos) << msg;
}

TEST_F(StoreRefusal, ArtifactDigestMismatchNamesTheMember) {
  auto members = members_for(kArtifacts);
  members[1].data[0] ^= 1;  // same size, different bytes
  format::write_archive(dir / "a.tar.zst", members, 0);
  std::string msg = refuse(dir / "a.tar.zst", ErrorKind::Integrity);
  EXPECT_NE(msg.find(members[1].name), std::string::npos) << msg;
  EXPECT_NE(msg.find("sha256"), std::string::npos) << msg;
}

TEST_F(StoreRefusal, MissingManifest) {
  format::write_archive(dir / "a.tar.zst", {{"axpy_dtype_f32.fatbin", "x"}}, 0);
  std::string msg = refuse(dir / "a.tar.zst", ErrorKind::Format);
  EXPECT_NE(msg.find("no manifest.json"), std::string::npos) << msg;
}

TEST_F(StoreRefusal, ManifestNotFirst) {
  auto members = members_for(kArtifacts);
  std::swap(members[0], members[1]);
  format::write_archive(dir / "a.tar.zst", members, 0);
  std::string msg = refuse(dir / "a.tar.zst", ErrorKind::Format);
  EXPECT_NE(msg.find("must be the first member"), std::string::npos) << msg;
}

TEST_F(StoreRefusal, UnlistedMember) {
  auto members = members_for(kArtifacts);
  members.push_back({"evil.so", "x"});
  format::write_archive(dir / "a.tar.zst", members, 0);
  std::string msg = refuse(dir / "a.tar.zst", ErrorKind::Integrity);
  EXPECT_NE(msg.find("evil.so"), std::string::npos) << msg;
}

TEST_F(StoreRefusal, LinksDevicesAndEscapingNames) {
  struct Evil {
    std::string name;
    unsigned type;
    std::string link;
  };
  for (const auto& ev : std::vector<Evil>{{"x.fatbin", AE_IFLNK, "/etc/passwd"},
                                          {"../x.fatbin", AE_IFREG, ""},
                                          {"/tmp/x.fatbin", AE_IFREG, ""},
                                          {"null", AE_IFCHR, ""},
                                          {"hard", AE_IFREG, "manifest.json"}}) {
    fs::path p = dir / "evil.tar.zst";
    struct archive* a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_zstd(a);
    ASSERT_EQ(archive_write_open_filename(a, p.c_str()), ARCHIVE_OK);
    std::string manifest = format::manifest_to_json(manifest_for(kArtifacts));
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, "manifest.json");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, manifest.size());
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK);
    archive_write_data(a, manifest.data(), manifest.size());
    archive_entry_clear(e);
    archive_entry_set_pathname(e, ev.name.c_str());
    archive_entry_set_filetype(e, ev.type);
    archive_entry_set_perm(e, 0644);
    if (ev.type == AE_IFLNK) archive_entry_set_symlink(e, ev.link.c_str());
    if (ev.type == AE_IFREG && !ev.link.empty()) archive_entry_set_hardlink(e, ev.link.c_str());
    if (ev.type == AE_IFREG && ev.link.empty()) archive_entry_set_size(e, 1);
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK) << ev.name;
    if (ev.type == AE_IFREG && ev.link.empty()) archive_write_data(a, "x", 1);
    archive_entry_free(e);
    ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    std::string msg = refuse(p, ErrorKind::Format);
    EXPECT_NE(msg.find("'" + ev.name + "'"), std::string::npos) << msg;
  }
}

TEST_F(StoreRefusal, NewerManifestFormatIsStale) {
  auto members = members_for(kArtifacts);
  auto pos = members[0].data.find("\"format_version\": 2");
  members[0].data.replace(pos, 19, "\"format_version\": 3");
  format::write_archive(dir / "a.tar.zst", members, 0);
  std::string msg = refuse(dir / "a.tar.zst", ErrorKind::Stale);
  EXPECT_NE(msg.find("too new"), std::string::npos) << msg;
}

TEST_F(StoreRefusal, MissingArchiveIsNotFound) {
  refuse(dir / "none.tar.zst", ErrorKind::NotFound);
}

}  // namespace
}  // namespace kiln
