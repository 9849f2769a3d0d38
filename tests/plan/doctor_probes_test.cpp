// What `kiln doctor` gathers before judge_loading decides: the stores in the loader's order
// (plan/doctor_probes.hpp), the CUDA tools' directories and version line
// (builder/tool_probe.hpp), a directory really written (io/write_probe.hpp).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "builder/tool_probe.hpp"
#include "io/write_probe.hpp"
#include "plan/doctor_probes.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

TEST(DoctorProbes, StoresInTheLoadersOrderWithWhatEachHolds) {
  test::TempDir dir;
  test::ReleaseSpec rel;
  test::write_store_entry(dir / "a", rel, "sm_90a");
  std::filesystem::path broken = test::write_store_entry(dir / "a", rel, "sm_80");
  test::write_file(broken / "manifest.json", "{ not json");
  LoaderConfig cfg;
  cfg.artifact_path = {(dir / "a").string(), (dir / "absent").string()};
  cfg.cache_dir = (dir / "cache").string();
  std::vector<plan::StoreProbe> s = plan::probe_stores(cfg, plan::StoreScanner(), (dir / "installed").string());
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].facts.source, "artifact path");
  EXPECT_TRUE(s[0].facts.required);
  EXPECT_TRUE(s[0].facts.readable);
  EXPECT_EQ(s[0].archives, 2u);
  EXPECT_EQ(s[0].unusable, 1);
  EXPECT_EQ(s[0].facts.targets, std::vector<std::string>{"sm_90a"});
  EXPECT_EQ(s[1].facts.dir, (dir / "absent").string());
  EXPECT_TRUE(s[1].facts.required);
  EXPECT_FALSE(s[1].facts.readable);
  EXPECT_FALSE(s[1].facts.problem.empty());
  EXPECT_EQ(s[2].facts.source, "installed beside this kiln");
  EXPECT_FALSE(s[2].facts.required);
  EXPECT_EQ(s[3].facts.source, "cache directory");
  EXPECT_EQ(s[3].facts.dir, cfg.cache_dir);
  EXPECT_FALSE(s[3].facts.required);
  // No installed store known, or the config does without it: not listed.
  EXPECT_EQ(plan::probe_stores(cfg, plan::StoreScanner(), "").size(), 3u);
  cfg.use_installed_store = false;
  EXPECT_EQ(plan::probe_stores(cfg, plan::StoreScanner(), (dir / "installed").string()).size(), 3u);
}

TEST(DoctorProbes, ToolsAreLookedForInCudaHomeThenTheDefaultThenPath) {
  EXPECT_EQ(builder::tool_dirs("/opt/cuda", "/usr/bin::/bin"),
            (std::vector<std::string>{"/opt/cuda/bin", "/usr/local/cuda/bin", "/usr/bin", "/bin"}));
  EXPECT_EQ(builder::tool_dirs("", ""), std::vector<std::string>{"/usr/local/cuda/bin"});
}

TEST(DoctorProbes, TheVersionLineIsNvccsReleaseLineElseTheLastOne) {
  EXPECT_EQ(builder::version_line("nvcc: NVIDIA (R) Cuda compiler driver\n"
                                   "Cuda compilation tools, release 13.0, V13.0.88\n"
                                   "Build cuda_13.0.r13.0/compiler.36424714_0\n"),
            "Cuda compilation tools, release 13.0, V13.0.88");
  EXPECT_EQ(builder::version_line("ptxas: NVIDIA (R) Ptx optimizing assembler\nV13.0.88\n\n"),
            "V13.0.88");
  EXPECT_EQ(builder::version_line(""), "");
}

TEST(DoctorProbes, AWriteProbeCreatesTheDirectoryAndLeavesNothing) {
  test::TempDir dir;
  EXPECT_EQ(io::write_probe((dir / "new" / "cache").string()), "");
  EXPECT_TRUE(std::filesystem::is_empty(dir / "new" / "cache"));
  test::write_file(dir / "file", "x");
  EXPECT_NE(io::write_probe((dir / "file" / "below").string()).find("cannot create it: "),
            std::string::npos);
  if (::geteuid() != 0) {  // root writes anywhere
    std::filesystem::create_directories(dir / "ro");
    ::chmod((dir / "ro").c_str(), 0555);
    EXPECT_NE(io::write_probe((dir / "ro").string()).find("cannot create a file in it: "),
              std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
