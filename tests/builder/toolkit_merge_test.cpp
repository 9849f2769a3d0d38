// Publishing a release one toolkit at a time into one --dist (builder/toolkit_merge.hpp, through
// publish_release): the index then lists every toolkit's archives, whatever the order they were
// published in; a toolkit published again replaces only its own archives; and another build's
// archives, or archives that changed or went missing, are left out with a line, never kept
// silently. No compiler: the archives hold synthetic fatbins.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "builder/build.hpp"
#include "builder/toolkit_merge.hpp"
#include "format/manifest.hpp"
#include "io/atomic_file.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const std::vector<std::string> kTargets = {"sm_80", "sm_90a"};

// Publishes toolkit `cuda`'s archives of `targets` into `dist` as `kiln build` would; returns the
// lines about archives of other toolkits left out.
std::vector<std::string> publish(const fs::path& dist, const std::string& cuda,
                                 const std::vector<std::string>& targets,
                                 std::int64_t build_time = 1764403200) {
  test::ReleaseSpec rel;
  rel.version = "1.2.3";
  rel.cuda_version = cuda;
  rel.build_time = build_time;
  builder::PackageIdentity id;
  id.name = rel.package;
  id.version = rel.version;
  id.git_commit = rel.git_commit;
  id.cuda_version = cuda;
  id.description_json = "{\"package\": \"kiln-kernels\"}\n";
  id.provenance = test::sample_provenance(kTargets);
  id.provenance.build_time = build_time;
  id.provenance.toolkits.clear();
  if (cuda == "12.9") {
    id.provenance.toolkits.push_back(format::BuildTool{"nvrtc", "12.9.86"});
    id.provenance.toolkits.push_back(format::BuildTool{"ptxas", "12.9.86"});
  } else {
    id.provenance.toolkits.push_back(format::BuildTool{"nvcc", cuda + ".88"});
  }
  auto content = [&](std::size_t i) {
    builder::ArchiveContent c;
    c.manifest = test::release_manifest(rel, targets.at(i));
    for (const auto& a : test::release_artifacts(rel, targets.at(i))) c.bytes.push_back(a.bytes);
    return c;
  };
  std::string index_path;
  std::vector<std::string> dropped;
  builder::publish_release(id, targets.size(), content, build_time, dist.string(), &index_path,
                           &dropped);
  return dropped;
}

fs::path index_of(const fs::path& dist) { return dist / format::index_file_name("kiln-kernels", "1.2.3"); }

format::Index read_index(const fs::path& dist) {
  return format::parse_index(test::read_file(index_of(dist)), "index");
}

// (target, toolkit) of each index entry, in the index's order.
std::vector<std::string> listed(const fs::path& dist) {
  std::vector<std::string> out;
  for (const auto& a : read_index(dist).archives) out.push_back(a.target + " " + a.cuda_version);
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

TEST(ToolkitMerge, EachToolkitInTurnGivesTheIndexOfBothInEitherOrder) {
  TempDir a, b;
  EXPECT_TRUE(publish(a.path(), "13.0", kTargets).empty());
  EXPECT_TRUE(publish(a.path(), "12.9", kTargets).empty());
  EXPECT_TRUE(publish(b.path(), "12.9", kTargets).empty());
  EXPECT_TRUE(publish(b.path(), "13.0", kTargets).empty());
  EXPECT_EQ(listed(a.path()),
            (std::vector<std::string>{"sm_80 13.0", "sm_80 12.9", "sm_90a 13.0", "sm_90a 12.9"}));
  EXPECT_EQ(test::read_file(index_of(a.path())), test::read_file(index_of(b.path())));
  const format::Index idx = read_index(a.path());
  ASSERT_TRUE(idx.provenance);
  ASSERT_EQ(idx.provenance->toolkits.size(), 3u);
  EXPECT_EQ(idx.provenance->toolkits[0].name, "nvcc");
  EXPECT_EQ(idx.provenance->toolkits[1].name, "nvrtc");
  EXPECT_EQ(idx.provenance->toolkits[2].name, "ptxas");
  EXPECT_EQ(format::index_toolkits(idx), (std::vector<std::string>{"13.0", "12.9"}));
  for (const auto& e : idx.archives) EXPECT_TRUE(fs::exists(a / e.file)) << e.file;
}

TEST(ToolkitMerge, PublishingAToolkitAgainReplacesOnlyItsOwnArchives) {
  TempDir d;
  publish(d.path(), "13.0", kTargets);
  publish(d.path(), "12.9", {"sm_80"});
  EXPECT_TRUE(publish(d.path(), "13.0", {"sm_90a"}).empty());
  EXPECT_EQ(listed(d.path()), (std::vector<std::string>{"sm_80 12.9", "sm_90a 13.0"}));
  const format::Index idx = read_index(d.path());
  EXPECT_EQ(idx.provenance->toolkits.size(), 3u);  // nvcc 13.0, nvrtc and ptxas 12.9
}

TEST(ToolkitMerge, AnotherBuildsToolkitIsLeftOutWithALine) {
  TempDir d;
  publish(d.path(), "12.9", kTargets, 1700000000);
  auto dropped = publish(d.path(), "13.0", kTargets, 1700000100);
  ASSERT_EQ(dropped.size(), 1u) << joined(dropped);
  EXPECT_NE(dropped[0].find("CUDA 12.9 archives of the index in"), std::string::npos) << dropped[0];
  EXPECT_NE(dropped[0].find("another build (build time 1700000000, this build's 1700000100)"),
            std::string::npos)
      << dropped[0];
  EXPECT_EQ(listed(d.path()), (std::vector<std::string>{"sm_80 13.0", "sm_90a 13.0"}));
  const format::Index idx = read_index(d.path());
  ASSERT_EQ(idx.provenance->toolkits.size(), 1u);
  EXPECT_EQ(idx.provenance->toolkits[0].name, "nvcc");
}

TEST(ToolkitMerge, AChangedOrMissingArchiveIsLeftOutWithALine) {
  TempDir d;
  publish(d.path(), "12.9", kTargets);
  const format::Index before = read_index(d.path());
  test::write_file(d / before.archives[0].file, "not the archive the index pinned");
  fs::remove(d / before.archives[1].file);
  auto dropped = publish(d.path(), "13.0", kTargets);
  ASSERT_EQ(dropped.size(), 2u) << joined(dropped);
  EXPECT_NE(dropped[0].find("CUDA 12.9 sm_80 (" + before.archives[0].file +
                            ") left out: the file is not what the index pinned"),
            std::string::npos)
      << dropped[0];
  EXPECT_NE(dropped[1].find("CUDA 12.9 sm_90a (" + before.archives[1].file +
                            ") left out: the file is missing"),
            std::string::npos)
      << dropped[1];
  EXPECT_EQ(listed(d.path()), (std::vector<std::string>{"sm_80 13.0", "sm_90a 13.0"}));
}

TEST(ToolkitMerge, AnIndexNamingAForeignFileKeepsNothingAndSaysSo) {
  TempDir d;
  publish(d.path(), "12.9", {"sm_80"});
  format::Index idx = read_index(d.path());
  // The index names another file for the 12.9 archive (a copy under a name that is not its own).
  const std::string foreign = "kiln-kernels-1.2.3-other-sm_80.tar.zst";
  fs::copy_file(d / idx.archives[0].file, d / foreign);
  idx.archives[0].file = foreign;
  io::write_file_atomically(index_of(d.path()), format::index_to_json(idx));
  auto dropped = publish(d.path(), "13.0", {"sm_80"});
  ASSERT_EQ(dropped.size(), 1u) << joined(dropped);
  EXPECT_NE(dropped[0].find("cannot be read, so no other toolkit's archives are kept"),
            std::string::npos)
      << dropped[0];
  EXPECT_NE(dropped[0].find("found '" + foreign + "'"), std::string::npos) << dropped[0];
  EXPECT_EQ(listed(d.path()), (std::vector<std::string>{"sm_80 13.0"}));
}

TEST(ToolkitMerge, AnUnreadableIndexKeepsNothingAndSaysSo) {
  TempDir d;
  publish(d.path(), "12.9", {"sm_80"});
  test::write_file(index_of(d.path()), "{ not an index");
  auto dropped = publish(d.path(), "13.0", {"sm_80"});
  ASSERT_EQ(dropped.size(), 1u) << joined(dropped);
  EXPECT_NE(dropped[0].find("cannot be read, so no other toolkit's archives are kept"),
            std::string::npos)
      << dropped[0];
  EXPECT_EQ(listed(d.path()), (std::vector<std::string>{"sm_80 13.0"}));
}

TEST(ToolkitMerge, ToolVersionsNameTheirToolkit) {
  EXPECT_EQ(builder::tool_cuda_version("12.9.86"), "12.9");
  EXPECT_EQ(builder::tool_cuda_version("13.0"), "13.0");
  EXPECT_EQ(builder::tool_cuda_version("13"), "13");
}

}  // namespace
}  // namespace kiln
