// The one manifest-against-index check (core/store/index_entry_check.hpp) as each of its users
// reports it: `kiln verify INDEX` (verify_index_file), `kiln mirror verify` (verify_mirror) and
// `kiln compat INDEX` (check_compat). The same disagreement gets the same kind, and the field
// and both values, everywhere; before, each held its own copy and called every field Integrity.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/version.hpp"
#include "mirror/mirror.hpp"
#include "release/compat.hpp"
#include "release/loader_facts.hpp"
#include "store/index_entry_check.hpp"
#include "store/store.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const std::string kVer = kiln::version();

// A release directory: an index listing one archive for `index_target` with CUDA 13.0, whose
// manifest says `manifest_target` and `manifest_cuda`; the checksum file beside it.
// Returns the index path. The archive is built from one release (the manifest's) and named and
// pinned by another (the index's): that is the disagreement under test.
fs::path write_release(const fs::path& dir, const std::string& index_target,
                       const std::string& manifest_target, const std::string& manifest_cuda) {
  test::ReleaseSpec manifest_rel;
  manifest_rel.version = kVer;
  manifest_rel.cuda_version = manifest_cuda;
  manifest_rel.with_artifacts({{"axpy_dtype_f32", "f32-image"}});
  test::ReleaseSpec index_rel = manifest_rel;
  index_rel.cuda_version = "13.0";
  const fs::path archive = test::write_release_archive(
      dir, index_rel, index_target, test::release_members(manifest_rel, manifest_target));
  const format::IndexEntry entry =
      test::release_index_entry(index_rel, index_target, test::read_file(archive));
  const std::string index_json = format::index_to_json(test::release_index(index_rel, {entry}));
  const fs::path index = dir / format::index_file_name("kiln-kernels", kVer);
  test::write_file(index, index_json);
  test::write_file(dir / mirror::checksums_file_name("kiln-kernels", kVer),
                   mirror::checksums_to_text({{index.filename().string(), io::sha256_hex(index_json)},
                                                {entry.file, entry.sha256}}));
  return index;
}

const store::VerifyProblem* problem_on(const std::vector<store::VerifyProblem>& ps, const std::string& field) {
  auto it = std::find_if(ps.begin(), ps.end(), [&](const auto& p) { return p.field == field; });
  return it == ps.end() ? nullptr : &*it;
}

TEST(ManifestIndexCheck, FieldsAndKindsComeFromOneRule) {
  format::Manifest m;
  m.target = "sm_80";
  m.package = "kiln-kernels";
  m.package_version = "0.0.1";
  m.cuda_version = "12.8";
  format::Index idx;
  idx.package = "kiln-kernels";
  idx.package_version = "0.1.0";
  format::IndexEntry e{"x.tar.zst", "sm_90a", "13.0", 1, std::string(64, 'a')};
  auto got = store::manifest_index_mismatches(m, e, idx);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].field, "target");
  EXPECT_EQ(got[0].kind, ErrorKind::Integrity);
  EXPECT_EQ(got[0].in_manifest, "sm_80");
  EXPECT_EQ(got[0].in_index, "sm_90a");
  EXPECT_EQ(got[1].field, "package_version");
  EXPECT_EQ(got[1].kind, ErrorKind::Stale);
  EXPECT_EQ(got[2].field, "cuda_version");
  EXPECT_EQ(got[2].kind, ErrorKind::Stale);
  EXPECT_EQ(got[2].in_manifest, "12.8");
  EXPECT_EQ(got[2].in_index, "13.0");
  m.target = "sm_90a";
  m.package = "kiln-kernels";
  m.package_version = "0.1.0";
  m.cuda_version = "13.0";
  EXPECT_TRUE(store::manifest_index_mismatches(m, e, idx).empty());
}

TEST(ManifestIndexCheck, OtherToolkitIsStaleInVerifyMirrorVerifyAndCompatAlike) {
  TempDir dir;
  fs::path index = write_release(dir.path(), "sm_90a", "sm_90a", "12.8");
  const std::string archive =
      (dir.path() / format::archive_file_name("kiln-kernels", kVer, "13.0", "sm_90a")).string();
  const std::string says =
      archive + ": manifest cuda_version is 12.8, " + index.string() + " says 13.0";

  auto problems = store::verify_index_file(index, kVer, nullptr);
  const store::VerifyProblem* p = problem_on(problems, "cuda_version");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->kind, ErrorKind::Stale);
  EXPECT_EQ(p->message, says);
  EXPECT_EQ(store::most_severe(problems), ErrorKind::Stale);

  mirror::MirrorReport report =
      mirror::verify_mirror(dir.path(), {"kiln-kernels", kVer, "", ""});
  auto row = std::find_if(report.files.begin(), report.files.end(), [&](const auto& f) {
    return f.kind == mirror::ReleaseFileKind::Archive;
  });
  ASSERT_NE(row, report.files.end());
  EXPECT_EQ(row->error, ErrorKind::Stale) << row->detail;
  EXPECT_NE(row->detail.find("manifest cuda_version is 12.8"), std::string::npos) << row->detail;
  EXPECT_NE(row->detail.find("says 13.0"), std::string::npos) << row->detail;

  release::LoaderFacts facts;
  facts.version = kVer;
  facts.package = "kiln-kernels";
  facts.package_version = kVer;
  facts.cuda_version = "13.0";
  facts.manifest_format = format::kManifestFormat;
  facts.index_format = format::kIndexFormat;
  release::CompatReport cr = release::check_compat(facts, {90}, {index});
  ASSERT_EQ(cr.packages.size(), 1u);
  const auto& probs = cr.packages[0].problems;
  auto cp = std::find_if(probs.begin(), probs.end(),
                         [](const auto& x) { return x.field == "cuda_version"; });
  ASSERT_NE(cp, probs.end()) << cr.to_table();
  EXPECT_EQ(cp->kind, ErrorKind::Stale);
  EXPECT_EQ(cp->package_value, "12.8");
  EXPECT_EQ(cp->loader_value, "13.0");
  EXPECT_EQ(cp->message, says);
}

TEST(ManifestIndexCheck, ArchiveOfAnotherTargetIsIntegrityNamingBothTargetsEverywhere) {
  TempDir dir;
  fs::path index = write_release(dir.path(), "sm_90a", "sm_80", "13.0");
  const std::string says =
      (dir.path() / format::archive_file_name("kiln-kernels", kVer, "13.0", "sm_90a")).string() +
      ": manifest target is sm_80, " + index.string() + " says sm_90a";
  auto problems = store::verify_index_file(index, kVer, nullptr);
  const store::VerifyProblem* p = problem_on(problems, "target");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->kind, ErrorKind::Integrity);
  EXPECT_EQ(p->message, says);
  mirror::MirrorReport report =
      mirror::verify_mirror(dir.path(), {"kiln-kernels", kVer, "", ""});
  EXPECT_EQ(report.worst(), ErrorKind::Integrity);
  bool named = false;
  for (const auto& f : report.files)
    named |= f.detail.find("manifest target is sm_80") != std::string::npos;
  EXPECT_TRUE(named);
}

// kiln wheel used to keep its own copy of the check, calling every disagreement integrity
// (exit 3); it now says what verify, install and compat say: another release is stale (exit 4).
// kiln install's error carries the differing field and both values as fields (--json).
TEST(ManifestIndexCheck, WheelAndInstallRefuseAnotherToolkitsArchiveAsStaleWithItsFields) {
  TempDir dir;
  fs::path index = write_release(dir.path(), "sm_90a", "sm_90a", "12.8");
  const std::string archive =
      (dir.path() / format::archive_file_name("kiln-kernels", kVer, "13.0", "sm_90a")).string();
  const std::string says =
      archive + ": manifest cuda_version is 12.8, " + index.string() + " says 13.0";

  auto w = test::run(test::kiln_cli() + " wheel --dist " + dir.path().string() + " --out " +
                     (dir / "wheels").string() + " 2>&1");
  EXPECT_EQ(w.exit_code, exit_code(ErrorKind::Stale)) << w.out;
  EXPECT_NE(w.out.find("refusing to make a wheel of " + archive), std::string::npos) << w.out;
  EXPECT_NE(w.out.find(says), std::string::npos) << w.out;
  EXPECT_FALSE(
      fs::exists(dir / "wheels" / ("kiln_kernels_cu13_sm90a-" + kVer + "-py3-none-any.whl")));

  auto i = test::run(test::kiln_cli() + " install " + index.string() + " --dest " +
                     (dir / "store").string() + " --json 2>/dev/null");
  EXPECT_EQ(i.exit_code, exit_code(ErrorKind::Stale)) << i.out;
  ASSERT_NE(i.out.find("\"fields\""), std::string::npos) << i.out;
  auto j = nlohmann::json::parse(i.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << i.out;
  ASSERT_EQ(j["failed"].size(), 1u) << i.out;
  EXPECT_EQ(j["failed"][0]["kind"], "stale") << i.out;
  const auto& f = j["failed"][0]["fields"];
  EXPECT_EQ(f["path"], archive) << i.out;
  EXPECT_EQ(f["index"], index.string()) << i.out;
  EXPECT_EQ(f["field"], "cuda_version") << i.out;
  EXPECT_EQ(f["actual"], "12.8") << i.out;
  EXPECT_EQ(f["expected"], "13.0") << i.out;
}

}  // namespace
}  // namespace kiln
