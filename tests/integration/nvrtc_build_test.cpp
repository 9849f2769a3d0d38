// `kiln build --toolkits nvrtc:DIR` with the real NVRTC 12.9 and ptxas of the toolkit directory
// scripts/nvrtc_toolkit.sh lays out (KILN_TEST_NVRTC_TOOLKIT names it; ci/test.sh sets it), run
// as a user would (the kiln CLI) on the tiny project: real archives, the same bytes twice and in
// another tree, result-cache hits across tree paths, a compile error naming the URI and source
// line, and targets a toolkit does not build left out with a line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "format/archive.hpp"
#include "format/fatbin.hpp"
#include "format/manifest.hpp"
#include "kiln/version.hpp"
#include "test_util.hpp"
#include "tiny_project.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;
using test::write_file;
using namespace test::tiny;

class NvrtcBuild : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = test::nvrtc_test_toolkit();
    if (dir.empty())
      GTEST_SKIP() << "no NVRTC toolkit: set KILN_TEST_NVRTC_TOOLKIT=$(scripts/nvrtc_toolkit.sh) "
                      "(ci/test.sh does)";
    toolkit_ = dir;
    write_project(src_.path());
  }

  test::RunResult build(const fs::path& src, const fs::path& out, const std::string& targets,
                        const std::string& extra = "") {
    return test::run("SOURCE_DATE_EPOCH=1700000000 " + test::kiln_cli() + " build --source " +
                     src.string() + " --out " + out.string() + " --targets " + targets +
                     " --toolkits nvrtc:" + toolkit_ + " --jobs 2 " + extra);
  }

  static std::string archive(const std::string& target) {
    return format::archive_file_name(kPackage, kVersion, "12.9", target);
  }

  std::string toolkit_;
  TempDir src_;
  TempDir work_;
};

TEST_F(NvrtcBuild, PublishesCuda129ArchivesOfSassAndPtxWithEveryEntry) {
  auto r = build(src_.path(), work_ / "b", "sm_80,sm_90a,compute_80", "--json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const fs::path dist = work_ / "b/dist";
  for (const char* target : {"sm_80", "sm_90a", "compute_80"}) {
    SCOPED_TRACE(target);
    ASSERT_TRUE(fs::exists(dist / archive(target))) << r.out;
    auto members = format::read_archive(dist / archive(target));
    ASSERT_FALSE(members.empty());
    format::Manifest m = format::parse_manifest(members[0].data, "manifest.json");
    EXPECT_EQ(m.cuda_version, "12.9");
    EXPECT_EQ(m.target, target);
    ASSERT_EQ(members.size(), m.artifacts.size() + 1);
    for (std::size_t i = 0; i < m.artifacts.size(); ++i) {
      const auto& e = m.artifacts[i];
      SCOPED_TRACE(e.uri);
      ASSERT_EQ(members[i + 1].name, e.file);
      const std::string& bytes = members[i + 1].data;
      auto images = format::parse_fatbin(bytes, e.file);
      ASSERT_EQ(images.size(), 1u);
      EXPECT_EQ(images[0].target(), target);
      ASSERT_FALSE(e.entries.empty());
      // The flags say how it was built: NVRTC, then ptxas or the cut PTX.
      std::string flags;
      for (const auto& f : e.flags) flags += f + " ";
      EXPECT_NE(flags.find("nvrtc -std=c++17 -frandom-seed=kiln -I$KILN_SOURCE/kernels"),
                std::string::npos)
          << flags;
      EXPECT_EQ(flags.find(src_.path().string()), std::string::npos) << flags;
    }
  }
  auto hop = format::read_archive(dist / archive("sm_90a"));
  bool has_hop = false;
  for (const auto& e : format::parse_manifest(hop[0].data, "manifest.json").artifacts)
    has_hop = has_hop || e.uri == "hop";
  EXPECT_TRUE(has_hop);
  auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["toolkit"]["cuda_version"], "12.9");
  EXPECT_EQ(j["toolkit"]["compiler"].get<std::string>().rfind("nvrtc 12.9.", 0), 0u) << r.out;
  EXPECT_EQ(j["mode"], "grouped");
}

// The fatbins kiln writes hold the bytes CUDA's own fatbinary (beside the nvcc kiln was built
// with) makes of the same cubins, for targets with and without compatibility attributes.
TEST_F(NvrtcBuild, EachSassFatbinIsWhatFatbinaryMakesOfItsCubin) {
  const fs::path fatbinary = fs::path(KILN_NVCC).parent_path() / "fatbinary";
  if (!fs::exists(fatbinary)) GTEST_SKIP() << fatbinary << " is not installed";
  auto r = build(src_.path(), work_ / "b", "sm_80,sm_90a,sm_100f,sm_120a");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  int compared = 0;
  for (const char* target : {"sm_80", "sm_90a", "sm_100f", "sm_120a"}) {
    // A named toolkit builds under <out>/toolkit-<version>-<kind> (docs/packager.md, "Toolkits").
    for (const auto& f : fs::directory_iterator(work_ / "b/toolkit-12.9-nvrtc/obj" / target)) {
      if (f.path().extension() != ".fatbin") continue;
      SCOPED_TRACE(f.path().string());
      const std::string bytes = read_file(f.path());
      auto images = format::parse_fatbin(bytes, f.path().string());
      ASSERT_EQ(images.size(), 1u);
      const fs::path cubin = work_ / "x.cubin", again = work_ / "x.fatbin";
      write_file(cubin, format::fatbin_image_payload(bytes, images[0]));
      auto fb = test::run(fatbinary.string() + " --create=" + again.string() +
                          " --image3=kind=elf,sm=" + std::string(target).substr(3) +
                          ",file=" + cubin.string());
      ASSERT_EQ(fb.exit_code, 0) << fb.out;
      EXPECT_EQ(read_file(again), bytes);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2 + 3 + 2 + 2);  // scale f16/f32 on each, hop on sm_90a
}

TEST_F(NvrtcBuild, SameTreeTwiceAndInAnotherDirectoryGivesTheSameBytes) {
  ASSERT_EQ(build(src_.path(), work_ / "a", "sm_90a,compute_80").exit_code, 0);
  ASSERT_EQ(build(src_.path(), work_ / "b", "sm_90a,compute_80").exit_code, 0);
  TempDir other;
  write_project(other.path());
  ASSERT_EQ(build(other.path(), work_ / "c", "sm_90a,compute_80").exit_code, 0);
  for (const char* target : {"sm_90a", "compute_80"}) {
    std::string a = read_file(work_ / "a/dist" / archive(target));
    EXPECT_EQ(a, read_file(work_ / "b/dist" / archive(target))) << target;
    EXPECT_EQ(a, read_file(work_ / "c/dist" / archive(target))) << target;
  }
}

TEST_F(NvrtcBuild, ResultCacheHitsAcrossTreePathsAndGivesTheSameArchives) {
  const fs::path cache = work_ / "cache";
  auto first = build(src_.path(), work_ / "a", "sm_90a", "--cache " + cache.string());
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_NE(first.out.find("0 hits, 3 misses"), std::string::npos) << first.out;
  TempDir other;
  write_project(other.path());
  auto second = build(other.path(), work_ / "b", "sm_90a", "--cache " + cache.string());
  ASSERT_EQ(second.exit_code, 0) << second.out;
  EXPECT_NE(second.out.find("3 hits, 0 misses"), std::string::npos) << second.out;
  EXPECT_EQ(read_file(work_ / "a/dist" / archive("sm_90a")),
            read_file(work_ / "b/dist" / archive("sm_90a")));
}

TEST_F(NvrtcBuild, ASecondBuildCompilesNothingAndAChangedKernelOnlyItsFamily) {
  auto first = build(src_.path(), work_ / "b", "sm_90a");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_NE(first.out.find("compiled 3 of 3"), std::string::npos) << first.out;
  const std::string before = read_file(work_ / "b/dist" / archive("sm_90a"));
  auto again = build(src_.path(), work_ / "b", "sm_90a");
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find("up to date: 0 of 3 compiled"), std::string::npos) << again.out;
  EXPECT_EQ(read_file(work_ / "b/dist" / archive("sm_90a")), before);
  write_file(src_ / "kernels/hop.cu", std::string(kHop) + "// changed\n");
  auto changed = build(src_.path(), work_ / "b", "sm_90a");
  ASSERT_EQ(changed.exit_code, 0) << changed.out;
  EXPECT_NE(changed.out.find("compiled 1 of 3"), std::string::npos) << changed.out;
}

TEST_F(NvrtcBuild, CompileErrorNamesTheUriAndTheSourceLine) {
  write_file(src_ / "kernels/hop.cu",
             "namespace kiln {\n__global__ void hop_kernel(float* x) { x[0] = undeclared_y; }\n}\n");
  auto r = build(src_.path(), work_ / "b", "sm_90a");
  EXPECT_EQ(r.exit_code, 7) << r.out;
  EXPECT_NE(r.out.find("NVRTC failed for family hop, URI hop, target sm_90a"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hop.cu(2): error: identifier \"undeclared_y\" is undefined"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(!fs::exists(work_ / "b/dist") || fs::is_empty(work_ / "b/dist"));
}

TEST_F(NvrtcBuild, AWarningFailsTheCompileAsNvccsWerrorDoes) {
  write_file(src_ / "kernels/hop.cu",
             "namespace kiln {\n__global__ void hop_kernel(float* x) { int unused; x[0] = 1; }\n}\n");
  auto r = build(src_.path(), work_ / "b", "sm_90a");
  EXPECT_EQ(r.exit_code, 7) << r.out;
  EXPECT_NE(r.out.find("URI hop, target sm_90a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warning #177-D"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warnings as errors"), std::string::npos) << r.out;
}

TEST_F(NvrtcBuild, ATargetTheToolkitDoesNotBuildIsLeftOutWithALine) {
  // sm_110 is CUDA 13's name for Thor; NVRTC 12.9 has none.
  auto r = build(src_.path(), work_ / "b", "sm_90a,sm_110");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("CUDA 12.9 (nvrtc 12.9."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("does not build sm_110; left out"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(work_ / "b/dist" / archive("sm_90a")));
  EXPECT_FALSE(fs::exists(work_ / "b/dist" / archive("sm_110")));
  auto none = build(src_.path(), work_ / "c", "sm_110");
  EXPECT_EQ(none.exit_code, 5) << none.out;
  EXPECT_NE(none.out.find("builds none of the targets sm_110"), std::string::npos) << none.out;
}

TEST_F(NvrtcBuild, AToolkitDirectoryWithoutNvrtcIsNamedBeforeAnyCompile) {
  TempDir empty;
  write_file(empty / "version.json", R"({"cuda_nvrtc": {"version": "12.9.86"}})");
  auto r = test::run(test::kiln_cli() + " build --source " + src_.path().string() + " --out " +
                     (work_ / "b").string() + " --targets sm_90a --toolkits nvrtc:" +
                     empty.path().string());
  EXPECT_EQ(r.exit_code, 5) << r.out;
  EXPECT_NE(r.out.find("has no lib64/libnvrtc.so.12"), std::string::npos) << r.out;
}

// The nvcc kiln was built with, named as a release: CUDA 13 has no sm_70, which is left out with
// a line while sm_80 builds.
TEST(ToolkitsBuild, ANamedNvccReleaseLeavesOutATargetItDoesNotBuild) {
  TempDir src, work;
  write_project(src.path());
  const std::string release = kiln::cuda_version();
  auto r = test::run("SOURCE_DATE_EPOCH=1700000000 " + test::kiln_cli() + " build --source " +
                     src.path().string() + " --out " + (work / "b").string() +
                     " --targets sm_70,sm_80 --toolkits " + release);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("toolkit: CUDA " + release + ", nvcc "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA " + release + " (nvcc " + release), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("does not build sm_70; left out"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(work / "b/dist" / format::archive_file_name(kPackage, kVersion, release, "sm_80")));
  EXPECT_FALSE(fs::exists(work / "b/dist" / format::archive_file_name(kPackage, kVersion, release, "sm_70")));
}

}  // namespace
}  // namespace kiln
