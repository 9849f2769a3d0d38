// `kiln compat` as a user runs it: the answer (exit code), and every incompatibility named with
// its field and both values, for archives, an index, a store, and another build of libkiln.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/kiln.h"
#include "kiln/version.hpp"
#include "project/package.hpp"
#include "project/package_description.hpp"
#include "project/registry.hpp"
#include "release/compat_inputs.hpp"
#include "release/tarball.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"
#include "wheel/wheel.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;
using Json = nlohmann::json;

const char* kUri32 = "axpy_dtype_f32";
const char* kUri16 = "axpy_dtype_f16";

struct ArchiveSpec {
  std::string target = "sm_90";
  std::string version = kiln::version();
  int format = format::kManifestFormat;
  std::map<std::string, std::string> hash_override;  // uri -> source hash
};

// An archive whose kernels carry the source hashes this libkiln's registry gives them.
fs::path write_archive_for(const fs::path& dir, const ArchiveSpec& s) {
  test::ReleaseSpec rel;
  rel.version = s.version;
  rel.format_version = s.format;
  rel.loadable = true;
  rel.source_hash_override = s.hash_override;
  rel.with_artifacts(
      {{kUri16, std::string("image of ") + kUri16}, {kUri32, std::string("image of ") + kUri32}});
  return test::write_release_archive(dir, rel, s.target);
}

struct Run {
  int exit_code;
  Json j;
  std::string out;
};

Run compat(const std::string& args) {
  auto r = test::run("(" + test::kiln_cli() + " compat --json " + args + " 2>/dev/null)");
  Run out{r.exit_code, Json(), r.out};
  try {
    out.j = Json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.out;
  }
  return out;
}

const Json* find_problem(const Json& pkg, const std::string& field) {
  for (const auto& p : pkg["problems"])
    if (p["field"] == field) return &p;
  return nullptr;
}

TEST(CompatCli, MatchingArchiveOnARunnableDeviceIsCompatible) {
  TempDir dir;
  fs::path a = write_archive_for(dir.path(), {});
  auto r = compat("--device sm_90 " + a.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(r.j["compatible"].get<bool>());
  EXPECT_EQ(r.j["loader"]["version"], kiln::version());
  EXPECT_EQ(r.j["devices"][0], "sm_90");
  ASSERT_EQ(r.j["packages"].size(), 1u);
  EXPECT_EQ(r.j["packages"][0]["kind"], "archive");
  EXPECT_EQ(r.j["packages"][0]["manifests"][0]["target"], "sm_90");
  EXPECT_TRUE(r.j["packages"][0]["problems"].empty());
}

TEST(CompatCli, OtherPackageVersionIsStaleNamingBothVersions) {
  TempDir dir;
  ArchiveSpec s;
  s.version = "0.0.9";
  fs::path a = write_archive_for(dir.path(), s);
  auto r = compat("--device none " + a.string());
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_FALSE(r.j["compatible"].get<bool>());
  const Json* p = find_problem(r.j["packages"][0], "package_version");
  ASSERT_NE(p, nullptr) << r.out;
  EXPECT_EQ((*p)["package"], "0.0.9");
  EXPECT_EQ((*p)["loader"], kiln::version());
  EXPECT_EQ((*p)["kind"], "stale");
}

// ---- the package's own wheel (docs/wheels.md, "Checking a wheel")

// A description of acme-kernels 1.2.0 (the reference package's kernels under another name).
std::string acme_description() {
  static const project::Project project = project::load_project(test::source_dir());
  static const project::PackageData data(project);
  Json j = Json::parse(project::package_description_json(*data.get()));
  j["package"] = "acme-kernels";
  j["package_version"] = "1.2.0";
  return j.dump(2) + "\n";
}

// A described acme-kernels 1.2.0 dist with its wheels written beside the index.
fs::path acme_dist_with_wheels(const fs::path& dir) {
  test::ReleaseSpec rel;
  rel.package = "acme-kernels";
  rel.version = "1.2.0";
  auto dist = test::write_release_dist(dir, rel, {"sm_90a"});
  test::describe_release(dist, acme_description());
  wheel::BuildOptions o;
  o.dist = dir;
  o.out = dir;
  auto built = wheel::build_wheels(o);
  EXPECT_TRUE(built.failed.empty());
  return dir / "acme_kernels-1.2.0-py3-none-any.whl";
}

TEST(CompatCli, PackageWheelBesideItsIndexWithThisKilnInItsRangeIsCompatible) {
  TempDir dir;
  fs::path whl = acme_dist_with_wheels(dir / "dist");
  auto r = compat("--device none " + whl.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.j["packages"][0]["kind"], "package-wheel");
  EXPECT_TRUE(r.j["packages"][0]["problems"].empty()) << r.out;
  EXPECT_CONTAINS(r.out, "the description acme-kernels-1.2.0-index.json pins");
}

TEST(CompatCli, PackageWheelWhoseDescriptionIsNotTheIndexsIsStale) {
  TempDir dir;
  fs::path whl = acme_dist_with_wheels(dir / "dist");
  // Another build of the same release: a description with other bytes, in a valid wheel.
  fs::remove(whl);
  std::string other = acme_description();
  other.insert(other.size() - 1, " ");
  wheel::write_zip(
      whl,
      wheel::package_wheel_contents("acme-kernels", "1.2.0",
                                    {"acme-kernels-1.2.0.package.json", other}, kiln::version()),
      0);
  auto r = compat("--device none " + whl.string());
  EXPECT_EQ(r.exit_code, 4) << r.out;
  const Json* p = find_problem(r.j["packages"][0], "description");
  ASSERT_NE(p, nullptr) << r.out;
  EXPECT_EQ((*p)["kind"], "stale");
  EXPECT_CONTAINS((*p)["message"].get<std::string>(), "acme-kernels-1.2.0-index.json pins");
}

TEST(CompatCli, PackageWheelWhoseRuntimeRangeExcludesThisKilnIsStaleNamingBoth) {
  TempDir dir;
  fs::path whl = dir / "acme_kernels-1.2.0-py3-none-any.whl";  // no index beside it
  wheel::write_zip(whl,
                   wheel::package_wheel_contents(
                       "acme-kernels", "1.2.0",
                       {"acme-kernels-1.2.0.package.json", acme_description()}, "99.4.0"),
                   0);
  auto r = compat("--device none " + whl.string());
  EXPECT_EQ(r.exit_code, 4) << r.out;
  const Json* p = find_problem(r.j["packages"][0], "requires_dist");
  ASSERT_NE(p, nullptr) << r.out;
  EXPECT_EQ((*p)["package"], "kiln>=99.4.0,<99.5");
  EXPECT_EQ((*p)["loader"], kiln::version());
}

TEST(CompatCli, RuntimeWheelOfAnotherVersionIsStale) {
  TempDir dir;
  fs::path whl = dir / "kiln-99.0.0-cp312-abi3-manylinux_2_28_x86_64.whl";
  test::write_file(whl, "not read: the name says the version");
  auto r = compat("--device none " + whl.string());
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_EQ(r.j["packages"][0]["kind"], "runtime-wheel");
  const Json* p = find_problem(r.j["packages"][0], "version");
  ASSERT_NE(p, nullptr) << r.out;
  EXPECT_EQ((*p)["package"], "99.0.0");
}

TEST(CompatCli, ChangedKernelSourceHashIsStaleNamingTheUriAndBothHashes) {
  TempDir dir;
  ArchiveSpec s;
  s.hash_override[kUri16] = std::string(64, 'e');
  fs::path a = write_archive_for(dir.path(), s);
  auto r = compat("--device sm_90 " + a.string());
  EXPECT_EQ(r.exit_code, 4) << r.out;
  const Json* p = find_problem(r.j["packages"][0], "source_hash");
  ASSERT_NE(p, nullptr) << r.out;
  EXPECT_EQ((*p)["package"], std::string(64, 'e'));
  EXPECT_EQ((*p)["loader"], kiln_package_source_hash(kiln_kernels_package(), kUri16));
  EXPECT_NE((*p)["message"].get<std::string>().find(kUri16), std::string::npos);
  // Only the changed kernel is named.
  EXPECT_EQ(r.j["packages"][0]["problems"].size(), 1u) << r.out;
}

TEST(CompatCli, NewerManifestFormatIsStaleNamingBothFormatVersions) {
  TempDir dir;
  ArchiveSpec s;
  s.format = format::kManifestFormat + 1;
  fs::path a = write_archive_for(dir.path(), s);
  auto r = compat("--device none " + a.string());
  EXPECT_EQ(r.exit_code, 4) << r.out;
  const Json* p = find_problem(r.j["packages"][0], "format_version");
  ASSERT_NE(p, nullptr) << r.out;
  EXPECT_EQ((*p)["package"], std::to_string(format::kManifestFormat + 1));
  EXPECT_EQ((*p)["loader"], std::to_string(format::kManifestFormat));
}

TEST(CompatCli, TargetThatCannotRunOnTheDeviceIsUnsupportedNamingBoth) {
  TempDir dir;
  fs::path a = write_archive_for(dir.path(), {});
  auto r = compat("--device sm_80 " + a.string());
  EXPECT_EQ(r.exit_code, 5) << r.out;
  const Json* p = find_problem(r.j["packages"][0], "target");
  ASSERT_NE(p, nullptr) << r.out;
  EXPECT_EQ((*p)["package"], "sm_90");
  EXPECT_EQ((*p)["loader"], "sm_80");
  EXPECT_NE((*p)["message"].get<std::string>().find("CC 9.x"), std::string::npos) << r.out;
  // The same archive answers yes for a device it runs on; --device 9.0 spells the same device.
  EXPECT_EQ(compat("--device 9.0 " + a.string()).exit_code, 0);
}

// `kiln compat --device sm_90 dist/*.whl` (README): the target wheels of one release are a set,
// of which the device's is installed; a wheel for another target is "not for" the device (a
// note), and only a set of which no wheel runs there is unsupported.
TEST(CompatCli, TargetWheelsGivenTogetherAnswerForTheSetNotEachWheel) {
  TempDir dir;
  test::ReleaseSpec rel;
  rel.loadable = true;
  rel.with_artifacts(
      {{kUri16, std::string("image of ") + kUri16}, {kUri32, std::string("image of ") + kUri32}});
  auto dist = test::write_release_dist(dir.path(), rel, {"sm_80", "sm_90a"});
  static const project::Project project = project::load_project(test::source_dir());
  static const project::PackageData data(project);
  test::describe_release(dist, project::package_description_json(*data.get()));
  wheel::BuildOptions o;
  o.dist = dir.path();
  o.out = dir.path();
  ASSERT_TRUE(wheel::build_wheels(o).failed.empty());
  const std::string v = kiln::version();
  const std::string both =
      (dir.path() / wheel::wheel_file_name("kiln-kernels", v, "13.0", "sm_80")).string() + " " +
      (dir.path() / wheel::wheel_file_name("kiln-kernels", v, "13.0", "sm_90a")).string();
  auto r = compat("--device sm_90 " + both);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  ASSERT_EQ(r.j["packages"].size(), 2u) << r.out;
  EXPECT_TRUE(r.j["packages"][0]["problems"].empty()) << r.out;
  EXPECT_CONTAINS(r.j["packages"][0]["notes"].dump(), "not for sm_90 (another wheel given serves it)");
  auto table = test::run(test::kiln_cli() + " compat --device sm_90 " + both + " 2>&1");
  EXPECT_EQ(table.exit_code, 0) << table.out;
  EXPECT_EQ(table.out.find("INCOMPATIBLE"), std::string::npos) << table.out;
  // Alone, the sm_80 wheel is what it was: unsupported on sm_90; a device none runs on, too.
  auto alone = compat("--device sm_90 " + (dir.path() / wheel::wheel_file_name(
                                                            "kiln-kernels", v, "13.0", "sm_80"))
                                              .string());
  EXPECT_EQ(alone.exit_code, 5) << alone.out;
  auto none = compat("--device sm_75 " + both);
  EXPECT_EQ(none.exit_code, 5) << none.out;
  EXPECT_NE(find_problem(none.j["packages"][1], "target"), nullptr) << none.out;
}

TEST(CompatCli, IndexChecksTheArchivesBesideItAndStoreChecksEveryArchiveDirectory) {
  TempDir dir;
  ArchiveSpec s80;
  s80.target = "sm_80";
  fs::path a80 = write_archive_for(dir.path(), s80);
  ArchiveSpec s90;
  s90.hash_override[kUri32] = std::string(64, 'd');
  fs::path a90 = write_archive_for(dir.path(), s90);
  format::Index idx;
  idx.package = "kiln-kernels";
  idx.package_version = kiln::version();
  idx.git_commit = "3f9c2a1";
  for (const auto& [p, t] : {std::pair{a80, "sm_80"}, std::pair{a90, "sm_90"}}) {
    std::size_t size = 0;
    std::string sha = io::sha256_file(p, &size);
    idx.archives.push_back({p.filename().string(), t, kiln::cuda_version(), size, sha});
  }
  idx.provenance = test::sample_provenance({"sm_80", "sm_90"});
  fs::path index = dir / format::index_file_name("kiln-kernels", kiln::version());
  test::write_file(index, format::index_to_json(idx));

  auto r = compat("--device sm_90 " + index.string());
  EXPECT_EQ(r.exit_code, 4) << r.out;
  const Json& pkg = r.j["packages"][0];
  EXPECT_EQ(pkg["kind"], "index");
  EXPECT_EQ(pkg["manifests"].size(), 2u);
  const Json* p = find_problem(pkg, "source_hash");
  ASSERT_NE(p, nullptr) << r.out;
  EXPECT_NE((*p)["where"].get<std::string>().find("sm_90"), std::string::npos);

  // The good archive installed into a store: compatible.
  auto inst = test::run(test::kiln_cli() + " install " + a80.string() + " --dest " +
                        (dir / "store").string());
  ASSERT_EQ(inst.exit_code, 0) << inst.out;
  auto rs = compat("--device sm_86 " + (dir / "store").string());
  EXPECT_EQ(rs.exit_code, 0) << rs.out;
  EXPECT_EQ(rs.j["packages"][0]["kind"], "store");
  EXPECT_EQ(rs.j["packages"][0]["manifests"][0]["target"], "sm_80");
}

TEST(CompatCli, EveryPackageIsReportedAndTheTableNamesTheProblem) {
  TempDir dir;
  fs::path good = write_archive_for(dir.path(), {});
  ArchiveSpec old;
  old.version = "0.0.9";
  fs::path stale = write_archive_for(dir.path(), old);
  std::string missing = (dir / "nope.tar.zst").string();
  auto r = compat("--device sm_90 " + good.string() + " " + missing + " " + stale.string());
  ASSERT_EQ(r.j["packages"].size(), 3u) << r.out;
  EXPECT_TRUE(r.j["packages"][0]["compatible"].get<bool>());
  EXPECT_EQ(r.j["packages"][1]["problems"][0]["kind"], "not-found");
  EXPECT_FALSE(r.j["packages"][2]["compatible"].get<bool>());
  EXPECT_EQ(r.exit_code, 4);  // stale outranks not-found

  auto t = test::run(test::kiln_cli() + " compat --device sm_90 " + good.string() + " " +
                     stale.string());
  EXPECT_EQ(t.exit_code, 4);
  EXPECT_NE(t.out.find("INCOMPATIBLE"), std::string::npos) << t.out;
  EXPECT_NE(
      t.out.find(
          "package_version differs: archive has 0.0.9, this loader's package kiln-kernels is " +
          std::string(kiln::version())),
      std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("NOT compatible"), std::string::npos) << t.out;
}

TEST(CompatCli, AnotherLibkilnIsQuestionedThroughItsCAbi) {
  TempDir dir;
  fs::path a = write_archive_for(dir.path(), {});
  // A copy in another directory: dlopen gives a second, separate instance of the library.
  fs::path copy = dir / "other" / "libkiln.so";
  fs::create_directories(copy.parent_path());
  fs::copy_file(KILN_LIB_PATH, copy);
  auto r = compat("--loader " + copy.string() + " --device sm_90 " + a.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.j["loader"]["library"], fs::weakly_canonical(copy).string());
  EXPECT_EQ(r.j["loader"]["version"], kiln::version());
  EXPECT_EQ(r.j["loader"]["cuda_version"], kiln::cuda_version());

  test::write_file(dir / "fake.so", "not a shared library");
  auto bad = test::run(test::kiln_cli() + " compat --loader " + (dir / "fake.so").string() + " " +
                       a.string());
  EXPECT_EQ(bad.exit_code, 5) << bad.out;
  EXPECT_NE(bad.out.find("fake.so"), std::string::npos) << bad.out;
  auto none = test::run(test::kiln_cli() + " compat --loader " + (dir / "nope.so").string() + " " +
                        a.string());
  EXPECT_EQ(none.exit_code, 6) << none.out;
}

TEST(CompatCAbi, FactsMatchTheCppSide) {
  EXPECT_STREQ(kiln_version(), kiln::version());
  EXPECT_STREQ(kiln_cuda_version(), kiln::cuda_version());
  EXPECT_EQ(kiln_manifest_format(), format::kManifestFormat);
  EXPECT_EQ(kiln_index_format(), format::kIndexFormat);
  EXPECT_EQ(std::string(kiln_package_source_hash(kiln_kernels_package(), kUri32)),
            kiln::test::reference_package().registry().find(kUri32)->source_hash);
  EXPECT_EQ(kiln_package_source_hash(kiln_kernels_package(), "no_such_kernel"), nullptr);
  EXPECT_EQ(kiln_package_source_hash(kiln_kernels_package(), nullptr), nullptr);
}

// ---- an input that names its package is judged as that package, wherever kiln runs

// acme-kernels 1.2.0's release: its index, one archive and its description, every kernel with
// the source hash its description gives it.
test::SyntheticDist acme_release(const fs::path& dir) {
  test::ReleaseSpec rel;
  rel.package = "acme-kernels";
  rel.version = "1.2.0";
  rel.loadable = true;
  auto dist = test::write_release_dist(dir, rel, {"sm_90a"});
  test::describe_release(dist, acme_description());
  return dist;
}

struct Judged {
  Run compat;              // kiln compat --json --device sm_90 INPUT
  test::RunResult verify;  // kiln verify INPUT
};

// Both commands on `input`, run in `cwd` with `env` (no KILN_* of the test's own environment).
Judged judge_from(const fs::path& cwd, const std::string& env, const fs::path& input) {
  const std::string here = "cd '" + cwd.string() + "' && env -u KILN_ARTIFACT_PATH " + env + " ";
  Judged j;
  auto c = test::run("(" + here + test::kiln_cli() + " compat --json --device sm_90 '" +
                     input.string() + "' 2>/dev/null)");
  j.compat.exit_code = c.exit_code;
  j.compat.out = c.out;
  try {
    j.compat.j = Json::parse(c.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << "\n" << c.out;
  }
  j.verify = test::run(here + test::kiln_cli() + " verify '" + input.string() + "'");
  return j;
}

void expect_judged_as_acme(const Judged& j) {
  EXPECT_EQ(j.compat.exit_code, 0) << j.compat.out;
  ASSERT_EQ(j.compat.j["packages"].size(), 1u) << j.compat.out;
  const Json& p = j.compat.j["packages"][0];
  EXPECT_EQ(p["judged_as"], "acme-kernels 1.2.0") << j.compat.out;
  EXPECT_TRUE(p["problems"].empty()) << j.compat.out;
  EXPECT_EQ(j.compat.out.find("kiln-kernels"), std::string::npos) << j.compat.out;
  EXPECT_EQ(j.verify.exit_code, 0) << j.verify.out;
  EXPECT_EQ(j.verify.out.find("FAIL"), std::string::npos) << j.verify.out;
  EXPECT_NE(j.verify.out.find("OK "), std::string::npos) << j.verify.out;
}

TEST(CompatCli, AnotherPackagesIndexInsideKilnsSourceTreeIsJudgedAsThatPackage) {
  TempDir dir;
  auto dist = acme_release(dir / "dist");
  // kiln's tree holds registry/package.json (kiln-kernels): a default only for its own inputs.
  Judged j =
      judge_from(test::source_dir(), "KILN_CACHE_DIR=" + (dir / "cache").string(), dist.index_path);
  expect_judged_as_acme(j);
  // kiln install takes it as what it names too.
  auto installed = test::run("cd '" + test::source_dir() + "' && " + test::kiln_cli() +
                             " install '" + dist.index_path.string() + "' --dest '" +
                             (dir / "store").string() + "'");
  EXPECT_EQ(installed.exit_code, 0) << installed.out;
  EXPECT_TRUE(fs::exists(dir / "store" / "acme-kernels-1.2.0.package.json")) << installed.out;
  // An input of the tree's own package is still judged against it (another version: stale).
  test::ReleaseSpec old;
  old.version = "0.0.9";
  auto kiln_dist = test::write_release_dist(dir / "old", old, {"sm_90a"});
  Judged stale = judge_from(test::source_dir(), "KILN_CACHE_DIR=" + (dir / "cache").string(),
                            kiln_dist.index_path);
  EXPECT_EQ(stale.compat.exit_code, 4) << stale.compat.out;
  EXPECT_EQ(stale.verify.exit_code, 4) << stale.verify.out;
}

TEST(CompatCli, AnotherPackagesIndexBesideAnInstalledKilnKernelsIsJudgedAsThatPackage) {
  TempDir dir;
  auto dist = acme_release(dir / "dist");
  // A node: no project here, kiln-kernels described in the store a loader reads.
  static const project::Project project = project::load_project(test::source_dir());
  static const project::PackageData data(project);
  test::write_file(dir / "store" / project::package_description_file_name("kiln-kernels", kiln::version()),
                   project::package_description_json(*data.get()));
  fs::create_directories(dir / "work");
  Judged j = judge_from(dir / "work",
                        "KILN_ARTIFACT_PATH=" + (dir / "store").string() +
                            " KILN_CACHE_DIR=" + (dir / "cache").string(),
                        dist.index_path);
  expect_judged_as_acme(j);
}

TEST(CompatCli, AnArchiveOfAPackageKilnHasNoDescriptionOfIsJudgedWithoutOneAndSaysSo) {
  TempDir dir;
  auto dist = acme_release(dir / "dist");
  fs::create_directories(dir / "alone");
  const fs::path archive = dir / "alone" / dist.archive.at("sm_90a");
  fs::copy_file(dist.dir / dist.archive.at("sm_90a"), archive);
  Judged j = judge_from(test::source_dir(), "KILN_CACHE_DIR=" + (dir / "cache").string(), archive);
  EXPECT_EQ(j.compat.exit_code, 0) << j.compat.out;
  const Json& p = j.compat.j["packages"][0];
  EXPECT_EQ(p["judged_as"], "acme-kernels 1.2.0") << j.compat.out;
  bool said = false;
  for (const auto& n : p["notes"])
    said = said || n.get<std::string>().find("source hashes are not checked") != std::string::npos;
  EXPECT_TRUE(said) << j.compat.out;
  EXPECT_EQ(j.verify.exit_code, 0) << j.verify.out;
}

// How `kiln compat` judges several inputs (release/compat_inputs.hpp), without the CLI.
TEST(CompatInputs, AnInputNamingAPackageKilnHasNoDescriptionOfIsJudgedWithoutHashes) {
  release::LoaderFacts loader;
  loader.package = "kiln-kernels";
  loader.source_hashes = {{"u", "h"}};
  release::InputRelease named{"acme-kernels", "1.2.0", {}};
  release::LoaderFacts f = release::facts_judged_as(loader, named, nullptr);
  EXPECT_EQ(f.package, "acme-kernels");
  EXPECT_EQ(f.package_version, "1.2.0");
  EXPECT_TRUE(f.source_hashes.empty());
  EXPECT_FALSE(f.kernels_known);
}

TEST(CompatInputs, EachInputIsNotedWhenJudgedAsAnotherPackageOrWithoutADescription) {
  TempDir dir;
  release::CompatReport rep = release::check_compat_inputs(
      {(dir / "a.tar.zst").string(), (dir / "b.tar.zst").string(), (dir / "c.tar.zst").string()},
      {}, [](const fs::path& input) {
        release::LoaderFacts f;
        f.package = input.stem().stem() == "a" ? "first" : "second";
        f.package_version = "1.0.0";
        f.kernels_known = input.stem().stem() != "c";
        return f;
      });
  ASSERT_EQ(rep.packages.size(), 3u);
  EXPECT_EQ(rep.loader.package, "first");
  EXPECT_EQ(rep.packages[0].judged_as, "first 1.0.0");
  EXPECT_TRUE(rep.packages[0].notes.empty());
  ASSERT_EQ(rep.packages[1].notes.size(), 1u);
  EXPECT_EQ(rep.packages[1].notes[0], "judged as second 1.0.0, the package it names");
  ASSERT_EQ(rep.packages[2].notes.size(), 1u);
  EXPECT_NE(rep.packages[2].notes[0].find("source hashes are not checked"), std::string::npos);
  EXPECT_FALSE(rep.compatible());  // none of them exists
}

TEST(CompatInputs, DevicesAreParsedAutoAsksTheDriverAndNoneAddsNothing) {
  auto parse = [](const std::string& d) { return d == "sm_90" ? 90 : 80; };
  EXPECT_EQ(release::compat_devices({"sm_90", "auto", "none", "sm_80", "sm_90"}, parse,
                                [] { return std::vector<int>{86, 90}; }),
            (std::vector<int>{80, 86, 90}));
  EXPECT_EQ(release::compat_devices({"auto"}, parse,
                                []() -> std::vector<int> {
                                  throw Error(ErrorKind::Unsupported, "no driver");
                                }),
            std::vector<int>{});
  EXPECT_TRUE(release::compat_devices({"none"}, parse, [] { return std::vector<int>{90}; }).empty());
}

TEST(TarballPrefix, TheFlagThenTheTreeThisKilnRunsFromElseHowToMakeOne) {
  EXPECT_EQ(release::tarball_prefix("/p", fs::path("/running")), fs::path("/p"));
  EXPECT_EQ(release::tarball_prefix("", fs::path("/running")), fs::path("/running"));
  std::string msg = test::error_of(ErrorKind::Usage, [] { release::tarball_prefix("", std::nullopt); });
  EXPECT_NE(msg.find("cmake --install"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln
