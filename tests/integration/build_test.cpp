// `kiln build` with the real nvcc and ninja, run as a user would (the kiln CLI), on a tiny
// source tree of its own: two families, sm_80 and sm_90a, five compiles per full build.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "format/archive.hpp"
#include "format/fatbin.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/version.hpp"
#include "project/package_description.hpp"
#include "test_util.hpp"
#include "tiny_project.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;
using test::write_file;

using namespace test::tiny;

class KilnBuild : public ::testing::Test {
 protected:
  void SetUp() override { write_project(src_.path()); }

  test::RunResult build(const fs::path& out, const std::string& extra = "") {
    return test::run("SOURCE_DATE_EPOCH=1700000000 " + test::kiln_cli() + " build --source " +
                     src_.path().string() + " --out " + out.string() + " --targets sm_80,sm_90a " +
                     extra);
  }

  static std::string archive(const std::string& target) {
    return format::archive_file_name(kPackage, kVersion, kiln::cuda_version(), target);
  }

  static std::vector<std::string> dir_names(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  TempDir src_;
  TempDir work_;
};

TEST_F(KilnBuild, PublishesOneArchivePerTargetWithManifestFirstAndTheIndex) {
  auto r = build(work_ / "b");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("compiled 5 of 5"), std::string::npos) << r.out;
  fs::path dist = work_ / "b/dist";
  const std::string described = format::description_file_name(kPackage, kVersion);
  EXPECT_EQ(dir_names(dist),
            (std::vector<std::string>{archive("sm_80"), archive("sm_90a"),
                                      format::index_file_name(kPackage, kVersion), described}));

  format::Index idx = format::parse_index(read_file(dist / format::index_file_name(kPackage, kVersion)), "index");
  ASSERT_EQ(idx.archives.size(), 2u);
  // The package's description is published with the release and pinned by its index.
  ASSERT_TRUE(idx.description.has_value());
  EXPECT_EQ(idx.description->file, described);
  std::size_t described_size = 0;
  EXPECT_EQ(io::sha256_file(dist / described, &described_size), idx.description->sha256);
  EXPECT_EQ(described_size, idx.description->size);
  auto read_back = project::load_package_description(dist / described);
  EXPECT_EQ(std::string(read_back->get()->name), kPackage);
  EXPECT_EQ(std::string(read_back->get()->version), kVersion);
  for (const auto& e : idx.archives) {
    std::size_t size = 0;
    EXPECT_EQ(io::sha256_file(dist / e.file, &size), e.sha256);
    EXPECT_EQ(size, e.size);
  }

  auto members = format::read_archive(dist / archive("sm_80"));
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].name, "manifest.json");
  EXPECT_EQ(members[1].name, "scale_dtype_f16.fatbin");
  EXPECT_EQ(members[2].name, "scale_dtype_f32.fatbin");
  format::Manifest m = format::parse_manifest(members[0].data, "manifest.json");
  EXPECT_EQ(m.target, "sm_80");
  EXPECT_EQ(m.package, kPackage);
  EXPECT_EQ(m.package_version, kVersion);
  EXPECT_EQ(m.cuda_version, kiln::cuda_version());
  EXPECT_EQ(m.build_time, 1700000000);
  ASSERT_EQ(m.skipped.size(), 1u);
  EXPECT_EQ(m.skipped[0].family, "hop");
  EXPECT_EQ(m.skipped[0].reason, "supports only sm_90a");
  ASSERT_EQ(m.artifacts.size(), 2u);
  const format::ArtifactEntry& a = m.artifacts[0];
  EXPECT_EQ(a.uri, "scale_dtype_f16");
  EXPECT_EQ(a.family, "scale");
  EXPECT_EQ(a.file, "scale_dtype_f16.fatbin");
  EXPECT_EQ(a.size, members[1].data.size());
  EXPECT_EQ(a.sha256, io::sha256_hex(members[1].data));
  ASSERT_EQ(a.entries.size(), 1u);
  EXPECT_EQ(a.entries[0].name, "kiln::scale_kernel<__half>");
  EXPECT_EQ(a.entries[0].symbol, "_ZN4kiln12scale_kernelI6__halfEEvPT_fi");
  std::string flags;
  for (const auto& f : a.flags) flags += f + " ";
  EXPECT_NE(flags.find("-gencode arch=compute_80,code=sm_80"), std::string::npos) << flags;
  EXPECT_EQ(flags.find(work_.path().string()), std::string::npos) << flags;
  EXPECT_EQ(flags.find(src_.path().string()), std::string::npos) << flags;

  format::Manifest h = format::parse_manifest(format::read_archive(dist / archive("sm_90a"))[0].data, "m");
  EXPECT_TRUE(h.skipped.empty());
  ASSERT_NE(h.find("hop"), nullptr);
  EXPECT_EQ(h.find("hop")->entries[0].symbol, "_ZN4kiln10hop_kernelEPf");
}

TEST_F(KilnBuild, EveryArtifactHoldsOnlyTheImageOfItsArchiveTarget) {
  auto r = build(work_ / "b");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* t : {"sm_80", "sm_90a"}) {
    for (const auto& mem : format::read_archive(work_ / "b/dist" / archive(t))) {
      if (mem.name == "manifest.json") continue;
      auto images = format::parse_fatbin(mem.data, mem.name);
      ASSERT_EQ(images.size(), 1u) << mem.name;
      EXPECT_EQ(images[0].kind, format::FatbinImage::Kind::Elf) << mem.name;
      EXPECT_EQ(images[0].arch, std::string(t) == "sm_80" ? 80 : 90) << mem.name;
    }
  }
}

TEST_F(KilnBuild, ComputeTargetPublishesPtxWithEntrySymbols) {
  auto r = test::run(test::kiln_cli() + " build --source " + src_.path().string() + " --out " +
                     (work_ / "p").string() + " --targets compute_80 --only scale_dtype_f32");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto members = format::read_archive(work_ / "p/dist" / archive("compute_80"));
  ASSERT_EQ(members.size(), 2u);
  auto images = format::parse_fatbin(members[1].data, members[1].name);
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0].kind, format::FatbinImage::Kind::Ptx);
  EXPECT_EQ(images[0].arch, 80);
  format::Manifest m = format::parse_manifest(members[0].data, "m");
  EXPECT_EQ(m.artifacts[0].entries[0].symbol, "_ZN4kiln12scale_kernelIfEEvPT_fi");
}

// Grouped (the default): one front-end pass per family and target, yet each fatbin holds its
// own URI's code only, on a SASS and on a PTX target; --one-nvcc-per-specialisation builds the
// same URIs and entries its own way.
TEST_F(KilnBuild, EachFatbinHoldsOnlyItsOwnUrisEntriesInBothModes) {
  for (const char* mode : {"", "--one-nvcc-per-specialisation"}) {
    fs::path out = work_ / (std::string("m") + (*mode ? "1" : "0"));
    auto r = test::run(test::kiln_cli() + " build --json --source " + src_.path().string() +
                       " --out " + out.string() + " --targets sm_80,compute_80 " + mode);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out.substr(r.out.find("{\n")));
    EXPECT_EQ(j["mode"], *mode ? "per-specialisation" : "grouped");
    EXPECT_EQ(j["passes"], *mode ? 0 : 1);  // scale for compute_80: sm_80 and compute_80
    EXPECT_EQ(j["specialisations"]["compiled"], 4);
    for (const char* t : {"sm_80", "compute_80"}) {
      auto members = format::read_archive(out / "dist" / archive(t));
      format::Manifest m = format::parse_manifest(members[0].data, "m");
      ASSERT_EQ(m.artifacts.size(), 2u);
      for (std::size_t i = 0; i < m.artifacts.size(); ++i) {
        const std::string& bytes = members[i + 1].data;
        auto images = format::parse_fatbin(bytes, members[i + 1].name);
        ASSERT_EQ(images.size(), 1u);
        std::string payload = format::fatbin_image_payload(bytes, images[0]);
        std::vector<std::string> syms = images[0].kind == format::FatbinImage::Kind::Ptx
                                            ? format::ptx_entry_names(payload)
                                            : format::elf_function_symbols(payload);
        EXPECT_EQ(std::count(syms.begin(), syms.end(), m.artifacts[i].entries[0].symbol), 1)
            << t << " " << m.artifacts[i].uri << " " << mode;
        for (const auto& other : m.artifacts) {
          if (other.uri == m.artifacts[i].uri) continue;
          EXPECT_EQ(std::count(syms.begin(), syms.end(), other.entries[0].symbol), 0)
              << t << " " << m.artifacts[i].uri << " holds " << other.uri << " " << mode;
        }
      }
    }
  }
}

// A URI's bytes do not depend on what else is built: its pass compiles its whole group.
TEST_F(KilnBuild, OneUriAloneGivesTheBytesOfTheWholeBuild) {
  ASSERT_EQ(build(work_ / "all").exit_code, 0);
  auto r = build(work_ / "one", "--only scale_dtype_f16");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* t : {"sm_80", "sm_90a"}) {
    std::string f = std::string("obj/") + t + "/scale_dtype_f16.fatbin";
    EXPECT_EQ(read_file(work_ / "one" / f), read_file(work_ / "all" / f)) << f;
  }
}

TEST_F(KilnBuild, SecondBuildCompilesNothingAndSaysSo) {
  ASSERT_EQ(build(work_ / "b").exit_code, 0);
  auto ninja_time = fs::last_write_time(work_ / "b/build.ninja");
  auto archive_time = fs::last_write_time(work_ / "b/dist" / archive("sm_80"));
  auto r = build(work_ / "b");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("up to date: 0 of 5 compiled"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("NVCC"), std::string::npos) << r.out;
  EXPECT_EQ(fs::last_write_time(work_ / "b/build.ninja"), ninja_time);
  // Same members, same bytes: the archive is not even rewritten.
  EXPECT_EQ(fs::last_write_time(work_ / "b/dist" / archive("sm_80")), archive_time);
}

TEST_F(KilnBuild, ChangingOneKernelRebuildsOnlyItsFamily) {
  ASSERT_EQ(build(work_ / "b").exit_code, 0);
  write_file(src_ / "kernels/hop.cu", std::string(kHop) + "// changed\n");
  auto r = build(work_ / "b", "--json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("NVCC hop sm_90a"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("NVCC scale"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(r.out.substr(r.out.find("{\n")));
  EXPECT_EQ(j["compiled"], 1);
  EXPECT_EQ(j["total"], 5);
  // A shared header rebuilds every specialisation that includes it, on every target.
  write_file(src_ / "kernels/common.cuh", std::string(kCommon) + "// changed\n");
  r = build(work_ / "b", "--json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  j = nlohmann::json::parse(r.out.substr(r.out.find("{\n")));
  EXPECT_EQ(j["compiled"], 4);
}

// Without --targets, a project outside kiln's tree builds the list its package file names, and
// says so on stderr and in --json.
TEST_F(KilnBuild, WithoutTargetsBuildsThePackageFilesListAndSaysWhereItCameFrom) {
  write_file(src_ / "registry/package.json",
             R"({"format": 1, "name": ")" + kPackage + R"(", "targets": ["sm_80"]})");
  auto r = test::run("SOURCE_DATE_EPOCH=1700000000 " + test::kiln_cli() + " build --source " +
                     src_.path().string() + " --out " + (work_ / "b").string() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("targets: sm_80 (from registry/package.json)\n"), std::string::npos)
      << r.out;
  auto j = nlohmann::json::parse(r.out.substr(r.out.find("{\n")));
  EXPECT_EQ(j["targets"], nlohmann::json::array({"sm_80"}));
  EXPECT_EQ(j["targets_from"], "registry/package.json");
  EXPECT_EQ(dir_names(work_ / "b/dist"),
            (std::vector<std::string>{archive("sm_80"), format::index_file_name(kPackage, kVersion),
                                      format::description_file_name(kPackage, kVersion)}));
}

TEST_F(KilnBuild, SameTreeInAnotherDirectoryGivesByteIdenticalArchivesAndIndex) {
  ASSERT_EQ(build(work_ / "one").exit_code, 0);
  auto r = build(work_ / "elsewhere/two", "--jobs 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto names = dir_names(work_ / "one/dist");
  ASSERT_EQ(names, dir_names(work_ / "elsewhere/two/dist"));
  for (const auto& n : names)
    EXPECT_EQ(read_file(work_ / "one/dist" / n), read_file(work_ / "elsewhere/two/dist" / n)) << n;
}

TEST_F(KilnBuild, UnsupportedTargetFailsBeforeAnyCompileNamingIt) {
  for (const char* bad : {"sm_60", "sm_999"}) {
    auto r = test::run(test::kiln_cli() + " build --source " + src_.path().string() + " --out " +
                       (work_ / "b").string() + " --targets sm_80," + bad);
    EXPECT_EQ(r.exit_code, 5) << r.out;
    EXPECT_NE(r.out.find(std::string("target ") + bad + " is not supported"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("sm_80, sm_86"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("NVCC"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(work_ / "b/build.ninja"));
  }
}

TEST_F(KilnBuild, AskingOnlyForAFamilyOnTargetsItCannotSupportIsAnError) {
  auto r = test::run(test::kiln_cli() + " build --source " + src_.path().string() + " --out " +
                     (work_ / "b").string() + " --targets sm_80 --only hop");
  EXPECT_EQ(r.exit_code, 5) << r.out;
  EXPECT_NE(r.out.find("hop supports only sm_90a"), std::string::npos) << r.out;
}

TEST_F(KilnBuild, CompileErrorNamesFamilyUriTargetAndLeavesPreviousDistUntouched) {
  ASSERT_EQ(build(work_ / "b").exit_code, 0);
  fs::path dist = work_ / "b/dist";
  auto before_names = dir_names(dist);
  std::string before = read_file(dist / archive("sm_90a"));
  write_file(
      src_ / "kernels/hop.cu",
      "namespace kiln {\n__global__ void hop_kernel(float* x) { x[0] = undeclared_y; }\n}\n");
  auto r = build(work_ / "b");
  EXPECT_EQ(r.exit_code, 7) << r.out;
  EXPECT_NE(r.out.find("family hop, URI hop, target sm_90a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("identifier \"undeclared_y\" is undefined"), std::string::npos) << r.out;
  EXPECT_EQ(dir_names(dist), before_names);
  EXPECT_EQ(read_file(dist / archive("sm_90a")), before);
}

TEST_F(KilnBuild, CompileErrorOnFirstBuildPublishesNothing) {
  write_file(src_ / "kernels/scale.cu", std::string(kScale) + "this is not C++;\n");
  auto r = build(work_ / "b");
  EXPECT_EQ(r.exit_code, 7) << r.out;
  EXPECT_NE(r.out.find("family scale, URI scale_dtype_f"), std::string::npos) << r.out;
  EXPECT_TRUE(!fs::exists(work_ / "b/dist") || fs::is_empty(work_ / "b/dist"));
}

}  // namespace
}  // namespace kiln
