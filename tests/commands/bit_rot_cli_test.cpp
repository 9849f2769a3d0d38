// Bit rot in an installed store, as an operator meets it: one flipped byte of an artifact, a
// manifest or the package description. `kiln verify` names the damaged file and fails; `kiln
// install` of the same release puts the verified bytes back in place, atomically (no temporary
// left, the store verifying again), whatever kind of file it was.
#include <gtest/gtest.h>

#include "format/manifest.hpp"
#include "kiln/version.hpp"
#include "project/package.hpp"
#include "project/package_description.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

enum class Kind { Artifact, Manifest, Description };

std::string kind_name(Kind k) {
  switch (k) {
    case Kind::Artifact: return "Artifact";
    case Kind::Manifest: return "Manifest";
    case Kind::Description: return "Description";
  }
  return "?";
}

const std::string& reference_description() {
  static const project::Project project = project::load_project(test::source_dir());
  static const project::PackageData data(project);
  static const std::string json = project::package_description_json(*data.get());
  return json;
}

std::string cli(const std::string& args) { return test::kiln_cli() + " " + args; }

// Every entry of the store whose name says it is a temporary (an install's scratch directory,
// an AtomicFile's temp file).
std::vector<std::string> temporaries(const fs::path& store) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(store)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(".tmp-", 0) == 0 || n.find(".tmp.") != std::string::npos)
      out.push_back(e.path().string());
  }
  return out;
}

class BitRotCli : public ::testing::TestWithParam<Kind> {};

TEST_P(BitRotCli, VerifyNamesTheDamagedFileAndInstallOfTheReleaseRepairsItInPlace) {
  TempDir dir;
  test::ReleaseSpec rel;
  rel.loadable = true;  // the artifacts are the reference package's kernels, as described
  rel.with_artifacts({{"axpy_dtype_f32", test::random_bytes(4000, 1)},
                      {"axpy_dtype_f16", test::random_bytes(4000, 2)}});
  test::SyntheticDist dist = test::write_release_dist(dir / "dist", rel, {"sm_80", "sm_90a"});
  test::describe_release(dist, reference_description());
  const fs::path store = dir / "store";
  auto r = test::run(cli("install " + dist.index_path.string() + " --dest " + store.string()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const fs::path entry = store / dist.stem("sm_80");
  fs::path damaged;
  switch (GetParam()) {
    case Kind::Artifact: damaged = entry / "axpy_dtype_f32.fatbin"; break;
    case Kind::Manifest: damaged = entry / "manifest.json"; break;
    case Kind::Description:
      damaged = store / format::description_file_name(dist.package, dist.version);
      break;
  }
  ASSERT_TRUE(fs::exists(damaged)) << damaged;
  const std::string original = test::read_file(damaged);
  // Bytes spread over the file: its start, its middle and its end.
  for (std::size_t at : {std::size_t{0}, original.size() / 2, original.size() - 2}) {
    std::string bytes = original;
    bytes[at] = static_cast<char>(bytes[at] ^ 0x01);
    test::write_file(damaged, bytes);
    r = test::run(cli("verify " + store.string()));
    EXPECT_NE(r.exit_code, 0) << "byte " << at << ":\n" << r.out;
    EXPECT_CONTAINS(r.out, damaged.filename().string());
    r = test::run(cli("install " + dist.index_path.string() + " --dest " + store.string()));
    EXPECT_EQ(r.exit_code, 0) << "byte " << at << ":\n" << r.out;
    EXPECT_EQ(test::read_file(damaged), original) << "byte " << at << " not repaired";
    EXPECT_EQ(temporaries(store), std::vector<std::string>{});
    r = test::run(cli("verify " + store.string()));
    EXPECT_EQ(r.exit_code, 0) << "byte " << at << ":\n" << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, BitRotCli,
                         ::testing::Values(Kind::Artifact, Kind::Manifest, Kind::Description),
                         [](const auto& p) { return kind_name(p.param); });

}  // namespace
}  // namespace kiln
