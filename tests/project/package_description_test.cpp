// The package description as a file (project/package_description.hpp): written from what a
// library carries, read back strictly into the same description, refused with the field named,
// found beside a store, and used by `kiln resolve` and `kiln compat` on a node without the
// project (docs/rules.md, What is installed describes itself).
#include "project/package_description.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/error.hpp"
#include "project/package.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::ErrorKind;
using kiln::test::TempDir;
using kiln::test::write_file;
using Json = nlohmann::ordered_json;

const kiln::project::PackageData& reference_data() {
  static const kiln::project::Project project = kiln::project::load_project(kiln::test::source_dir());
  static const kiln::project::PackageData data(project);
  return data;
}

std::string reference_json() { return kiln::project::package_description_json(*reference_data().get()); }

// The error a description text is refused with (fails the test when it is accepted).
kiln::Error refusal(const std::string& text) {
  try {
    kiln::project::read_package_description(text, "desc.json");
  } catch (const kiln::Error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << text.substr(0, 200);
  return kiln::Error(ErrorKind::Internal, "accepted");
}

std::string edited(const std::function<void(Json&)>& edit) {
  Json j = Json::parse(reference_json());
  edit(j);
  return j.dump(1);
}

TEST(PackageDescription, RoundTripGivesTheSameDescriptionAsTheLibrarysOwn) {
  const kiln_package& want = *reference_data().get();
  auto read = kiln::project::read_package_description(reference_json(), "desc.json");
  const kiln_package& got = *read->get();
  EXPECT_STREQ(got.name, want.name);
  EXPECT_STREQ(got.version, want.version);
  ASSERT_EQ(got.kernel_count, want.kernel_count);
  for (std::size_t i = 0; i < got.kernel_count; ++i) {
    EXPECT_STREQ(got.kernels[i].uri, want.kernels[i].uri);
    EXPECT_STREQ(got.kernels[i].family, want.kernels[i].family);
    EXPECT_STREQ(got.kernels[i].source_hash, want.kernels[i].source_hash);
    ASSERT_EQ(got.kernels[i].param_pairs, want.kernels[i].param_pairs);
    for (std::size_t p = 0; p < 2 * got.kernels[i].param_pairs; ++p)
      EXPECT_STREQ(got.kernels[i].params[p], want.kernels[i].params[p]);
    ASSERT_EQ(got.kernels[i].entry_count, want.kernels[i].entry_count);
    for (std::size_t e = 0; e < got.kernels[i].entry_count; ++e)
      EXPECT_STREQ(got.kernels[i].entries[e], want.kernels[i].entries[e]);
  }
  ASSERT_EQ(got.file_count, want.file_count);
  for (std::size_t i = 0; i < got.file_count; ++i) {
    EXPECT_STREQ(got.files[i].path, want.files[i].path);
    EXPECT_EQ(std::string(got.files[i].data, got.files[i].size),
              std::string(want.files[i].data, want.files[i].size));
  }
  // What the loader checks of a compiled-in description holds for a read one too.
  EXPECT_NO_THROW(kiln::project::Package{read->get()});
  // Written again, byte for byte the same file.
  EXPECT_EQ(kiln::project::package_description_json(got), reference_json());
}

TEST(PackageDescription, EachMalformedFieldIsRefusedNamingTheFileAndField) {
  struct Case {
    const char* name;
    std::function<void(Json&)> edit;
    ErrorKind kind;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"unknown field", [](Json& j) { j["extra"] = 1; }, ErrorKind::Format,
       "field 'extra': unknown field"},
      {"missing field", [](Json& j) { j.erase("files"); }, ErrorKind::Format,
       "field 'files': missing"},
      {"newer format", [](Json& j) { j["format"] = 2; }, ErrorKind::Stale,
       "field 'format': version 2 is too new (upgrade kiln)"},
      {"bad name", [](Json& j) { j["package"] = "Acme"; }, ErrorKind::Format, "field 'package': "},
      {"bad version", [](Json& j) { j["package_version"] = "1.x"; }, ErrorKind::Format,
       "field 'package_version': expected MAJOR.MINOR.PATCH"},
      {"bad source hash", [](Json& j) { j["kernels"][0]["source_hash"] = "abc"; },
       ErrorKind::Format, "field 'kernels[0].source_hash': expected 64 lowercase hex digits"},
      {"unsorted kernels", [](Json& j) { std::swap(j["kernels"][0], j["kernels"][1]); },
       ErrorKind::Format, "kernels are sorted by uri, each once"},
      {"no entry", [](Json& j) { j["kernels"][0]["entries"] = Json::array(); }, ErrorKind::Format,
       "field 'kernels[0].entries': a kernel has at least one entry"},
      {"param not a pair", [](Json& j) { j["kernels"][0]["params"][0] = Json::array({"a"}); },
       ErrorKind::Format, "field 'kernels[0].params[0]': expected [name, value]"},
      {"text changed", [](Json& j) { j["files"][0]["text"] = j["files"][0]["text"].get<std::string>() + " "; },
       ErrorKind::Integrity, "files[0].size"},
      {"digest changed",
       [](Json& j) { j["files"][0]["sha256"] = std::string(64, '0'); },
       ErrorKind::Integrity, "field 'files[0].sha256': sha256 of text is"},
      {"path climbing out", [](Json& j) { j["files"][0]["path"] = "../etc/passwd"; },
       ErrorKind::Format, "field 'files[0].path': '../etc/passwd' is not a relative path"},
      {"absolute path", [](Json& j) { j["files"][0]["path"] = "/etc/passwd"; }, ErrorKind::Format,
       "files[0].path"},
      {"path twice", [](Json& j) { j["files"][1]["path"] = j["files"][0]["path"]; },
       ErrorKind::Format, "appears twice"},
  };
  for (const auto& c : cases) {
    kiln::Error e = refusal(edited(c.edit));
    EXPECT_EQ(e.kind(), c.kind) << c.name << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("desc.json"), std::string::npos) << c.name;
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << c.name << ": " << e.what();
  }
}

TEST(PackageDescription, TooLargeOrTooDeepIsALimitBeforeParsing) {
  EXPECT_EQ(refusal(std::string(100000, '[')).kind(), ErrorKind::Limit);
  EXPECT_EQ(refusal("not json").kind(), ErrorKind::Format);
}

TEST(PackageDescription, ASourceThatIsNotTextCannotBeWritten) {
  kiln_package_file f{"kernels/x.cu", "\xff\xfe", 2};
  kiln_package p = *reference_data().get();
  p.files = &f;
  p.file_count = 1;
  try {
    kiln::project::package_description_json(p);
    FAIL() << "written";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    EXPECT_NE(std::string(e.what()).find("not UTF-8 text"), std::string::npos) << e.what();
  }
}

TEST(PackageDescription, FoundInStoresByNameNewestVersionFirstArchivesIgnored) {
  TempDir tmp;
  write_file(tmp / "a" / "acme-kernels-1.2.0.package.json", "{}");
  write_file(tmp / "a" / "acme-kernels-1.10.0.package.json", "{}");
  write_file(tmp / "a" / "acme-kernels-1.10.0-rc1.package.json", "{}");
  write_file(tmp / "a" / "kiln-kernels-0.1.0.package.json", "{}");
  write_file(tmp / "a" / "kiln-kernels-0.1.0-cuda13.0-sm_90" / "manifest.json", "{}");
  write_file(tmp / "a" / "notes.package.json", "{}");
  write_file(tmp / "b" / "acme-kernels-0.9.0.package.json", "{}");
  auto found = kiln::project::find_package_descriptions({tmp / "a", tmp / "missing", tmp / "b"},
                                               "acme-kernels");
  std::vector<std::string> versions;
  for (const auto& f : found) versions.push_back(f.version);
  EXPECT_EQ(versions, (std::vector<std::string>{"1.10.0", "1.10.0-rc1", "1.2.0", "0.9.0"}));
  EXPECT_EQ(found.front().file, tmp / "a" / "acme-kernels-1.10.0.package.json");
  EXPECT_EQ(kiln::project::find_package_descriptions({tmp / "a"}).size(), 4u);
}

TEST(PackageDescription, VersionsCompareNumericallyAndPreReleasesComeFirst) {
  EXPECT_LT(kiln::project::compare_package_versions("1.2.0", "1.10.0"), 0);
  EXPECT_GT(kiln::project::compare_package_versions("1.10.0", "1.10.0-rc1"), 0);
  EXPECT_LT(kiln::project::compare_package_versions("1.10.0-rc1", "1.10.0-rc2"), 0);
  EXPECT_EQ(kiln::project::compare_package_versions("0.1.0", "0.1.0"), 0);
}

TEST(PackageDescriptionCli, PackageSourceWritesTheFileThatReadsBackAsTheProjectsPackage) {
  TempDir tmp;
  auto r = kiln::test::run(kiln::test::kiln_cli() + " package-source --source '" +
                           kiln::test::source_dir() + "' --symbol s --output '" +
                           (tmp / "s.c").string() + "' --description '" +
                           (tmp / "d.json").string() + "' 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(kiln::test::read_file(tmp / "d.json"), reference_json());
}

// A node with the installed store and its description, no project: resolve and compat answer
// from the description and say where it came from; with two packages there they ask for one.
TEST(PackageDescriptionCli, ResolveAndCompatUseTheDescriptionInstalledBesideTheStore) {
  TempDir tmp;
  fs::path store = tmp / "prefix" / "share" / "kiln" / "artifacts";
  write_file(store / kiln::project::package_description_file_name("kiln-kernels", "0.1.0"),
             reference_json());
  kiln::test::ReleaseSpec rel;
  rel.loadable = true;
  kiln::test::write_store_entry(store, rel, "sm_90");
  std::string env = "cd '" + tmp.path().string() + "' && KILN_ARTIFACT_PATH='" + store.string() +
                    "' KILN_CACHE_DIR='" + (tmp / "cache").string() +
                    "' KILN_OFFLINE=1 KILN_DISABLE_JIT=1 ";
  auto r = kiln::test::run(env + kiln::test::kiln_cli() + " resolve axpy_dtype_f32 --device sm_90 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("package kiln-kernels 0.1.0 from " + store.string()), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(": store sm_90"), std::string::npos) << r.out;
  auto c = kiln::test::run(env + kiln::test::kiln_cli() + " compat --device sm_90 '" +
                           store.string() + "' 2>&1");
  EXPECT_EQ(c.exit_code, 0) << c.out;

  // A second package described there: nothing is guessed.
  Json other = Json::parse(reference_json());
  other["package"] = "acme-kernels";
  write_file(store / kiln::project::package_description_file_name("acme-kernels", "0.1.0"), other.dump());
  auto two = kiln::test::run(env + kiln::test::kiln_cli() + " resolve axpy_dtype_f32 --device sm_90 2>&1");
  EXPECT_EQ(two.exit_code, 2) << two.out;
  EXPECT_NE(two.out.find("several packages are described in"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("acme-kernels, kiln-kernels): name one with --package NAME"),
            std::string::npos)
      << two.out;
  auto named = kiln::test::run(env + kiln::test::kiln_cli() +
                               " resolve axpy_dtype_f32 --device sm_90 --package kiln-kernels 2>&1");
  EXPECT_EQ(named.exit_code, 0) << named.out;

  // A package named that is not described anywhere: not found, naming the file and the stores.
  auto none = kiln::test::run(env + kiln::test::kiln_cli() +
                              " resolve axpy_dtype_f32 --device sm_90 --package zeta-kernels 2>&1");
  EXPECT_EQ(none.exit_code, 6) << none.out;
  EXPECT_NE(none.out.find("zeta-kernels-<version>.package.json"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find(store.string()), std::string::npos) << none.out;
}

}  // namespace
