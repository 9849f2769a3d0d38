// The toolkit facts (format/toolkit.hpp) and index format 5, whose archives name their own
// toolkit so one index lists archives of several.
#include "format/toolkit.hpp"

#include <gtest/gtest.h>

#include "format/manifest.hpp"
#include "kiln/error.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

const std::string kHashA(64, 'a');

std::string refusal(const char* toolkit, bool ptx, int driver) {
  return format::driver_refuses(std::string_view(toolkit), ptx, driver).value_or("");
}

TEST(Toolkit, SassNeedsADriverOfItsMajorAndRunsOnEveryNewerOne) {
  // 13.x SASS: a 13 driver (580 or newer), never a 12 one.
  EXPECT_EQ(refusal("13.0", false, 12080),
            "built by CUDA 13.0, needs a driver >= 580 (CUDA 13.0); this driver runs CUDA 12.8");
  EXPECT_EQ(refusal("13.0", false, 13000), "");
  EXPECT_EQ(refusal("13.0", false, 13020), "");
  // 12.x SASS: any driver of CUDA 12.0 or newer, older minors included (minor-version
  // compatibility) and 13 (backward compatibility).
  EXPECT_EQ(refusal("12.9", false, 12020), "");
  EXPECT_EQ(refusal("12.9", false, 13000), "");
  EXPECT_EQ(refusal("12.8", false, 11080),
            "built by CUDA 12.8, needs a driver >= 525 (CUDA 12.0); this driver runs CUDA 11.8");
}

TEST(Toolkit, PtxNeedsADriverAtLeastAsNewAsItsToolkit) {
  EXPECT_EQ(refusal("12.8", true, 12020),
            "PTX built by CUDA 12.8, needs a driver of CUDA >= 12.8; this driver runs CUDA 12.2");
  EXPECT_EQ(refusal("12.8", true, 12080), "");
  EXPECT_EQ(refusal("12.8", true, 13000), "");
  EXPECT_NE(refusal("13.0", true, 12080), "");
  EXPECT_NE(refusal("13", false, 13000).find("unknown CUDA toolkit '13'"), std::string::npos);
}

TEST(Toolkit, VersionsAndOldestDrivers) {
  EXPECT_EQ(format::driver_cuda_version(12080).str(), "12.8");
  EXPECT_EQ(format::driver_cuda_version(13000).str(), "13.0");
  ASSERT_TRUE(format::parse_cuda_version("12.9"));
  EXPECT_EQ(format::parse_cuda_version("12.9")->driver_number(), 12090);
  EXPECT_FALSE(format::parse_cuda_version("12"));
  EXPECT_FALSE(format::parse_cuda_version("12.x"));
  EXPECT_FALSE(format::parse_cuda_version("1234.0"));
  EXPECT_EQ(format::oldest_driver_release(13), 580);
  EXPECT_EQ(format::oldest_driver_release(12), 525);
  EXPECT_FALSE(format::oldest_driver_release(9));
}

TEST(Toolkit, WhatEachToolkitCanBuild) {
  auto cannot = [](const char* tk, const char* t) {
    return format::toolkit_cannot_build(*format::parse_cuda_version(tk), *format::parse_target(t))
        .value_or("");
  };
  EXPECT_NE(cannot("13.0", "sm_70"), "");
  EXPECT_NE(cannot("13.0", "sm_72"), "");
  EXPECT_EQ(cannot("13.0", "sm_75"), "");
  EXPECT_EQ(cannot("13.0", "sm_120"), "");
  EXPECT_EQ(cannot("12.2", "sm_70"), "");
  EXPECT_EQ(cannot("12.6", "sm_100a"), "CUDA 12.6 cannot build sm_100a (it came with CUDA 12.8)");
  EXPECT_NE(cannot("12.6", "sm_120"), "");
  EXPECT_EQ(cannot("12.8", "sm_120"), "");
  EXPECT_EQ(cannot("12.8", "compute_90"), "");
}

format::Index two_toolkit_index() {
  format::Index idx;
  idx.package = "kiln-kernels";
  idx.package_version = "0.1.0";
  idx.git_commit = "3f9c2a1";
  for (const char* cuda : {"12.9", "13.0"})
    for (const char* t : {"sm_90a", "sm_80"})
      idx.archives.push_back(
          {format::archive_file_name("kiln-kernels", "0.1.0", cuda, t), t, cuda, 10, kHashA});
  format::Provenance p;
  p.kiln_version = "0.1.0";
  p.toolkits = {{"nvcc", "12.9.86"}, {"nvcc", "13.0.88"}};
  p.hosts = {"x86_64-linux"};
  p.build_time = 1764547200;
  p.build_time_origin = "git commit time";
  p.targets = {"sm_80", "sm_90a"};
  idx.provenance = p;
  return idx;
}

// One index lists one target's archives of several toolkits: target first, newest toolkit next.
TEST(IndexFormat5, ArchivesOfSeveralToolkitsSortedByTargetThenNewestToolkit) {
  const std::string text = format::index_to_json(two_toolkit_index());
  EXPECT_EQ(text.find("\n  \"cuda_version\""), std::string::npos) << text;
  format::Index back = format::parse_index(text, "i.json");
  EXPECT_EQ(format::index_to_json(back), text);
  ASSERT_EQ(back.archives.size(), 4u);
  std::vector<std::string> order;
  for (const auto& a : back.archives) order.push_back(a.cuda_version + " " + a.target);
  EXPECT_EQ(order, (std::vector<std::string>{"13.0 sm_80", "12.9 sm_80", "13.0 sm_90a",
                                             "12.9 sm_90a"}));
  EXPECT_EQ(format::index_toolkits(back), (std::vector<std::string>{"13.0", "12.9"}));
}

TEST(IndexFormat5, ToolkitAndTargetAreUniqueAndNameTheFile) {
  format::Index idx = two_toolkit_index();
  idx.archives.push_back(idx.archives.front());
  std::string msg = test::error_of(
      ErrorKind::Format, [&] { format::parse_index(format::index_to_json(idx), "i.json"); });
  EXPECT_NE(msg.find("duplicate target 'sm_90a' of CUDA 12.9"), std::string::npos) << msg;
  idx = two_toolkit_index();
  idx.archives[0].cuda_version = "13.1";  // the file still says 12.9 (or 13.0)
  msg = test::error_of(ErrorKind::Format,
                       [&] { format::parse_index(format::index_to_json(idx), "i.json"); });
  EXPECT_NE(msg.find("file': expected 'kiln-kernels-0.1.0-cuda13.1-"), std::string::npos) << msg;
  idx.archives[0].cuda_version = "13";
  msg = test::error_of(ErrorKind::Format,
                       [&] { format::parse_index(format::index_to_json(idx), "i.json"); });
  EXPECT_NE(msg.find("cuda_version': expected MAJOR.MINOR"), std::string::npos) << msg;
}

// Format 5 has no top-level cuda_version, and 4 no per-archive one; 4 is read with every archive
// taking the top-level value.
TEST(IndexFormat5, WhereTheToolkitIsSaidDependsOnTheFormat) {
  std::string text = format::index_to_json(two_toolkit_index());
  std::string top = text;
  top.insert(top.find("  \"archives\""), "  \"cuda_version\": \"13.0\",\n");
  std::string msg = test::error_of(ErrorKind::Format, [&] { format::parse_index(top, "i.json"); });
  EXPECT_NE(msg.find("field 'cuda_version': not a field of index format 5"), std::string::npos)
      << msg;

  format::Index four = two_toolkit_index();
  four.format_version = 4;
  four.archives.erase(four.archives.begin() + 2, four.archives.end());  // 12.9 only
  for (auto& a : four.archives) a.cuda_version = "12.9";
  const std::string old = format::index_to_json(four);
  EXPECT_NE(old.find("\n  \"cuda_version\": \"12.9\",\n  \"archives\""), std::string::npos) << old;
  format::Index back = format::parse_index(old, "old.json");
  EXPECT_EQ(back.format_version, 4);
  for (const auto& a : back.archives) EXPECT_EQ(a.cuda_version, "12.9");

  std::string mixed = old;
  const std::string at = "\"target\": \"sm_80\",\n";
  mixed.replace(mixed.find(at), at.size(), at + "      \"cuda_version\": \"12.9\",\n");
  msg = test::error_of(ErrorKind::Format, [&] { format::parse_index(mixed, "old.json"); });
  EXPECT_NE(msg.find("cuda_version': unknown field"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln
