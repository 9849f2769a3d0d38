// `kiln tarball` of an install tree built for another host (the aarch64 tree cross-built on an
// x86_64 machine): named for the tree's platform, read from its binaries' ELF headers, with the
// version and CUDA version read from the tree since its libkiln cannot be loaded here.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "release/tarball.hpp"
#include "release/tree_platform.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// The first 64 bytes of a 64-bit little-endian ELF file for `machine` (62 x86_64, 183 aarch64).
std::string elf_header(unsigned machine) {
  std::string h(64, '\0');
  h[0] = 0x7f, h[1] = 'E', h[2] = 'L', h[3] = 'F', h[4] = 2, h[5] = 1, h[6] = 1;
  h[16] = 3;  // ET_DYN
  h[18] = static_cast<char>(machine & 0xff);
  h[19] = static_cast<char>(machine >> 8);
  return h;
}

void write(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

// An install tree as `cmake --install` leaves it, its binaries standing in as ELF headers of
// `machine` (`kiln_machine` for bin/kiln).
fs::path fake_tree(const fs::path& prefix, unsigned machine, unsigned kiln_machine,
                   const std::string& cuda = kiln::cuda_version()) {
  const std::string v = kiln::version();
  const std::string mm = v.substr(0, v.rfind('.'));
  write(prefix / "bin" / "kiln", elf_header(kiln_machine));
  for (std::string lib : {"libkiln", "libkiln-kernels"}) {
    write(prefix / "lib" / (lib + ".so." + v), elf_header(machine));
    fs::create_symlink(lib + ".so." + v, prefix / "lib" / (lib + ".so." + mm));
    fs::create_symlink(lib + ".so." + mm, prefix / "lib" / (lib + ".so"));
  }
  write(prefix / "include" / "kiln" / "kiln.h", "/* kiln.h */\n");
  write(prefix / "lib" / "cmake" / "kiln" / "kilnConfig.cmake",
        "include(\"${CMAKE_CURRENT_LIST_DIR}/kilnTargets.cmake\")\nset(kiln_CUDA_VERSION \"" +
            cuda + "\")\n");
  write(prefix / "lib" / "pkgconfig" / "kiln.pc", "Name: kiln\n");
  write(prefix / "share" / "doc" / "kiln" / "README.md", "# kiln\n");
  return prefix;
}

TEST(TreePlatform, ElfHeaderNamesThePlatform) {
  TempDir t;
  write(t.path() / "arm", elf_header(183));
  write(t.path() / "x86", elf_header(62));
  EXPECT_EQ(release::elf_platform(t.path() / "arm"), "linux-aarch64");
  EXPECT_EQ(release::elf_platform(t.path() / "x86"), "linux-x86_64");
  // This test program is built for the host kiln runs on.
  EXPECT_EQ(release::elf_platform("/proc/self/exe"), release::host_platform());

  write(t.path() / "riscv", elf_header(243));
  try {
    release::elf_platform(t.path() / "riscv");
    FAIL() << "a RISC-V binary was given a platform";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    EXPECT_NE(std::string(e.what()).find("ELF machine 243"), std::string::npos) << e.what();
  }
  write(t.path() / "text", "#!/bin/sh\necho not a binary at all\n");
  EXPECT_THROW(release::elf_platform(t.path() / "text"), Error);
}

TEST(TreePlatform, AnAarch64TreeIsPackedAsLinuxAarch64) {
  TempDir t;
  test::ReleaseSpec rel;
  test::SyntheticDist dist = test::write_release_dist(t.path() / "dist", rel, {"sm_90a"});
  fs::path prefix = fake_tree(t.path() / "stage-aarch64", 183, 183);

  release::TarballOptions o;
  o.dist = dist.dir;
  o.out = t.path() / "out";
  o.prefix = prefix;
  std::string said;
  o.progress = [&](const std::string& s) { said += s + "\n"; };
  release::TarballResult r = release::build_tarball(o);
  EXPECT_EQ(r.file.filename().string(), "kiln-" + std::string(kiln::version()) + "-cuda" +
                                            kiln::cuda_version() + "-linux-aarch64.tar.zst");
  EXPECT_NE(said.find("built for linux-aarch64"), std::string::npos) << said;
  // The tarball reads back as a kiln tarball with the target's store.
  auto manifests = release::tarball_manifests(r.file);
  ASSERT_EQ(manifests.size(), 1u);
  EXPECT_EQ(manifests[0].target, "sm_90a");
}

TEST(TreePlatform, AMixedTreeIsRefused) {
  TempDir t;
  test::ReleaseSpec rel;
  test::SyntheticDist dist = test::write_release_dist(t.path() / "dist", rel, {"sm_90a"});
  // An x86_64 bin/kiln beside aarch64 libraries: a tree put together from two builds.
  fs::path prefix = fake_tree(t.path() / "mixed", 183, 62);
  release::TarballOptions o;
  o.dist = dist.dir;
  o.out = t.path() / "out";
  o.prefix = prefix;
  try {
    release::build_tarball(o);
    FAIL() << "a tree of two hosts was packed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    EXPECT_NE(std::string(e.what()).find("bin/kiln is built for linux-x86_64"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(o.out / ("kiln-" + std::string(kiln::version()) + "-cuda" +
                                   kiln::cuda_version() + "-linux-aarch64.tar.zst")));
}

TEST(TreePlatform, AForeignTreeOfAnotherReleaseIsRefused) {
  TempDir t;
  test::ReleaseSpec rel;
  test::SyntheticDist dist = test::write_release_dist(t.path() / "dist", rel, {"sm_90a"});
  fs::path prefix = fake_tree(t.path() / "stage-aarch64", 183, 183);
  // The libkiln of the tree is another version than the release: renamed as another build
  // would name it.
  const std::string v = kiln::version();
  fs::rename(prefix / "lib" / ("libkiln.so." + v), prefix / "lib" / "libkiln.so.0.0.1");
  fs::remove(prefix / "lib" / ("libkiln.so." + v.substr(0, v.rfind('.'))));
  fs::create_symlink("libkiln.so.0.0.1", prefix / "lib" / ("libkiln.so." + v.substr(0, v.rfind('.'))));
  release::TarballOptions o;
  o.dist = dist.dir;
  o.out = t.path() / "out";
  o.prefix = prefix;
  try {
    release::build_tarball(o);
    FAIL() << "a libkiln of another version was packed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Stale);
    EXPECT_NE(std::string(e.what()).find("is kiln 0.0.1"), std::string::npos) << e.what();
  }
  // Without kiln_CUDA_VERSION in the package config its CUDA version cannot be read.
  fs::path other = fake_tree(t.path() / "no-cuda", 183, 183, "");
  o.prefix = other;
  EXPECT_THROW(release::build_tarball(o), Error);
}

}  // namespace
}  // namespace kiln
