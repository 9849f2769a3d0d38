// `kiln build --toolkits A,B`: one release of several toolkits, built with the real nvcc kiln was
// built with and the real NVRTC 12.9 toolkit (KILN_TEST_NVRTC_TOOLKIT; ci/test.sh sets it) on the
// tiny project: one --dist and one index listing every toolkit's archives (target, then newest
// toolkit first), a target one toolkit does not build left out with a line while the other
// builds it, the same index and archives from one run with both, from one toolkit at a time in
// either order, and from each toolkit's shards merged into the same --dist; and verify, inspect,
// wheel and the mirror carrying both toolkits side by side.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "format/manifest.hpp"
#include "kiln/version.hpp"
#include "test_util.hpp"
#include "tiny_project.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;
using namespace test::tiny;

class MultiToolkitBuild : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = test::nvrtc_test_toolkit();
    if (dir.empty())
      GTEST_SKIP() << "no NVRTC toolkit: set KILN_TEST_NVRTC_TOOLKIT=$(scripts/nvrtc_toolkit.sh) "
                      "(ci/test.sh does)";
    nvrtc_ = std::string("nvrtc:") + dir;
    write_project(src_.path());
  }

  test::RunResult build(const fs::path& out, const std::string& toolkits,
                        const std::string& extra = "") {
    return test::run("SOURCE_DATE_EPOCH=1700000000 " + test::kiln_cli() + " build --source " +
                     src_.path().string() + " --out " + out.string() + " --targets " + targets_ +
                     " --toolkits " + toolkits + " --jobs 2 " + extra);
  }

  std::vector<std::string> listed(const fs::path& dist) {
    auto idx = format::parse_index(read_file(dist / format::index_file_name(kPackage, kVersion)),
                                   "index");
    std::vector<std::string> out;
    for (const auto& a : idx.archives) out.push_back(a.target + " " + a.cuda_version);
    return out;
  }

  // Every file of `a` is in `b` with the same bytes, and the other way round.
  static void expect_same_dist(const fs::path& a, const fs::path& b) {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(a)) {
      ++n;
      ASSERT_TRUE(fs::exists(b / e.path().filename())) << e.path().filename();
      EXPECT_EQ(read_file(e.path()), read_file(b / e.path().filename())) << e.path().filename();
    }
    EXPECT_EQ(n, static_cast<std::size_t>(std::distance(fs::directory_iterator(b), fs::directory_iterator())));
  }

  const std::string cuda_ = kiln::cuda_version();  // the nvcc kiln was built with: 13.0
  const std::string targets_ = "sm_70,sm_90a";     // CUDA 13 has no sm_70
  std::string nvrtc_;
  TempDir src_;
  TempDir work_;
};

TEST_F(MultiToolkitBuild, BothToolkitsInOneRunPublishOneIndexOfBoth) {
  auto r = build(work_ / "a", cuda_ + "," + nvrtc_);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("CUDA " + cuda_ + " (nvcc " + cuda_), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("does not build sm_70; left out"), std::string::npos) << r.out;
  EXPECT_EQ(listed(work_ / "a/dist"), (std::vector<std::string>{"sm_70 12.9", "sm_90a " + cuda_,
                                                                "sm_90a 12.9"}));
  // The summary reports each toolkit.
  auto j = test::run("(SOURCE_DATE_EPOCH=1700000000 " + test::kiln_cli() + " build --source " +
                     src_.path().string() + " --out " + (work_ / "a").string() + " --targets " +
                     targets_ + " --toolkits " + cuda_ + "," + nvrtc_ + " --json 2>/dev/null)");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  auto s = nlohmann::json::parse(j.out);
  ASSERT_EQ(s["toolkits"].size(), 2u) << j.out;
  EXPECT_EQ(s["toolkits"][0]["cuda_version"], cuda_);
  EXPECT_EQ(s["toolkits"][1]["cuda_version"], "12.9");
  EXPECT_EQ(s["toolkits"][1]["archives"].size(), 2u);
  EXPECT_EQ(s["archives"].size(), 3u);
  EXPECT_EQ(s["compiled"], 0) << "a second run compiles nothing";
  EXPECT_EQ(s["left_out"].size(), 1u);
}

TEST_F(MultiToolkitBuild, OneToolkitAtATimeAndShardsGiveTheSameRelease) {
  ASSERT_EQ(build(work_ / "both", cuda_ + "," + nvrtc_).exit_code, 0);
  for (const auto& [out, order] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"old-first", {nvrtc_, cuda_}}, {"new-first", {cuda_, nvrtc_}}}) {
    SCOPED_TRACE(out);
    for (const auto& tk : order) {
      auto r = build(work_ / out, tk);
      ASSERT_EQ(r.exit_code, 0) << r.out;
      EXPECT_EQ(r.out.find("left out: another build"), std::string::npos) << r.out;
    }
    expect_same_dist(work_ / "both/dist", work_ / out / "dist");
  }
  // Several toolkits cannot share a shard; each toolkit's shards merged into one --dist can.
  auto refused = build(work_ / "sh", cuda_ + "," + nvrtc_, "--shard 1/2");
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.out.find("--shard builds one toolkit's part"), std::string::npos) << refused.out;
  int n = 0;
  for (const auto& tk : {nvrtc_, cuda_}) {
    std::string shards;
    for (const char* part : {"1/2", "2/2"}) {
      const fs::path dir = work_ / ("shard-" + std::to_string(n++));
      auto r = build(work_ / "sh", tk, std::string("--shard ") + part + " --dist " + dir.string());
      ASSERT_EQ(r.exit_code, 0) << r.out;
      shards += " " + dir.string();
    }
    auto m = test::run(test::kiln_cli() + " merge" + shards + " --dist " + (work_ / "merged").string());
    ASSERT_EQ(m.exit_code, 0) << m.out;
  }
  expect_same_dist(work_ / "both/dist", work_ / "merged");
}

TEST_F(MultiToolkitBuild, AToolkitOfAnotherBuildIsLeftOutWithALine) {
  ASSERT_EQ(build(work_ / "b", nvrtc_).exit_code, 0);
  auto r = test::run("SOURCE_DATE_EPOCH=1700000100 " + test::kiln_cli() + " build --source " +
                     src_.path().string() + " --out " + (work_ / "b").string() + " --targets " +
                     targets_ + " --toolkits " + cuda_ + " --jobs 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("CUDA 12.9 archives of the index in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("another build (build time 1700000000, this build's 1700000100)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(listed(work_ / "b/dist"), (std::vector<std::string>{"sm_90a " + cuda_}));
}

TEST_F(MultiToolkitBuild, VerifyInspectWheelsAndMirrorCarryBothToolkits) {
  ASSERT_EQ(build(work_ / "b", cuda_ + "," + nvrtc_).exit_code, 0);
  const fs::path dist = work_ / "b/dist";
  const std::string index = (dist / format::index_file_name(kPackage, kVersion)).string();
  const std::string source = " --source " + src_.path().string();
  auto v = test::run(test::kiln_cli() + " verify" + source + " " + index);
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_NE(v.out.find("0 problems"), std::string::npos) << v.out;
  auto i = test::run(test::kiln_cli() + " inspect " + index);
  EXPECT_EQ(i.exit_code, 0) << i.out;
  EXPECT_NE(i.out.find("CUDA 12.9, " + cuda_ + ", 3 archives"), std::string::npos) << i.out;
  auto w = test::run(test::kiln_cli() + " wheel --dist " + dist.string() + " --out " +
                     (work_ / "wheels").string());
  ASSERT_EQ(w.exit_code, 0) << w.out;
  const std::string cu = "cu" + cuda_.substr(0, cuda_.find('.'));
  for (const std::string& name : std::vector<std::string>{
           "tiny_kernels_cu12_sm70", "tiny_kernels_cu12_sm90a", "tiny_kernels_" + cu + "_sm90a"})
    EXPECT_TRUE(fs::exists(work_ / "wheels" / (name + "-" + kVersion + "-py3-none-any.whl"))) << name;
  EXPECT_FALSE(fs::exists(work_ / "wheels" / ("tiny_kernels_" + cu + "_sm70-" + kVersion + "-py3-none-any.whl")));
  auto st = test::run(test::kiln_cli() + " mirror stage" + source + " " + dist.string() + " " +
                      (work_ / "wheels").string() + " --to " + (work_ / "mirror").string());
  ASSERT_EQ(st.exit_code, 0) << st.out;
  for (const auto& a : {format::archive_file_name(kPackage, kVersion, "12.9", "sm_70"),
                        format::archive_file_name(kPackage, kVersion, "12.9", "sm_90a"),
                        format::archive_file_name(kPackage, kVersion, cuda_, "sm_90a")})
    EXPECT_TRUE(fs::exists(work_ / "mirror" / a)) << a;
  auto mv = test::run(test::kiln_cli() + " mirror verify " + (work_ / "mirror").string());
  EXPECT_EQ(mv.exit_code, 0) << mv.out;
}

}  // namespace
}  // namespace kiln
