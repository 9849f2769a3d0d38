// `kiln fetch` and the loader's mirror tier fetch, of a target's archives in a two-toolkit
// release (CUDA 12.9 and 13.0, index format 5), the newest the node's driver runs
// (FetchOptions::driver; docs/compatibility.md). Over file://, no server.
#include <gtest/gtest.h>

#include "fetch/fetch.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct TwoToolkits {
  test::TempDir tmp;
  fs::path dist = tmp / "dist", dest = tmp / "store";
  std::string index_sha256;
  TwoToolkits() {
    test::ReleaseSpec rel;
    std::vector<format::IndexEntry> entries;
    for (const char* cuda : {"12.9", "13.0"}) {
      rel.cuda_version = cuda;
      rel.zstd_level = 1;
      fs::path p = test::write_release_archive(dist, rel, "sm_90a");
      std::size_t size = 0;
      std::string sha = io::sha256_file(p, &size);
      entries.push_back({p.filename().string(), "sm_90a", cuda, size, sha});
    }
    const std::string json = format::index_to_json(test::release_index(rel, entries));
    test::write_file(dist / format::index_file_name(rel.package, rel.version), json);
    index_sha256 = io::sha256_hex(json);
  }
  fetch::FetchOptions options(int driver) const {
    fetch::FetchOptions o;
    o.mirrors = {"file://" + dist.string()};
    o.package = "kiln-kernels";
    o.version = test::ReleaseSpec().version;
    o.index_sha256 = index_sha256;
    o.driver = driver;
    return o;
  }
};

TEST(DriverFetch, TheNewestToolkitTheDriverRunsIsFetched) {
  for (int driver : {13000, 12080, 0}) {
    TwoToolkits rig;
    fetch::FetchResult r = fetch::fetch_targets(rig.options(driver), {"sm_90a"}, rig.dest.string());
    ASSERT_EQ(r.installed.size(), 1u);
    const std::string want = driver == 12080 ? "-cuda12.9-sm_90a" : "-cuda13.0-sm_90a";
    EXPECT_NE(r.installed.front().find(want), std::string::npos)
        << "driver " << driver << ": " << r.installed.front();
  }
}

TEST(DriverFetch, ADriverThatRunsNoneIsUnsupportedNamingBothVersions) {
  TwoToolkits rig;
  std::string msg = test::error_of(ErrorKind::Unsupported, [&] {
    fetch::fetch_targets(rig.options(11080), {"sm_90a"}, rig.dest.string());
  });
  EXPECT_NE(msg.find("has no archive for sm_90a that this driver runs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("built by CUDA 13.0, needs a driver >= 580 (CUDA 13.0); this driver runs "
                     "CUDA 11.8"),
            std::string::npos)
      << msg;
  EXPECT_FALSE(fs::exists(rig.dest) && !fs::is_empty(rig.dest));
}

}  // namespace
}  // namespace kiln
