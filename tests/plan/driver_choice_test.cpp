// The driver joins the one target-choice rule (docs/compatibility.md): a store of archives of
// two toolkits (CUDA 12.9 and 13.0) for the same targets, weighed on devices of CC 8.0, 9.0 and
// 12.0 under drivers of CUDA 12.2, 12.8 and 13.0.
#include <gtest/gtest.h>

#include "format/toolkit.hpp"
#include "io/sha256.hpp"
#include "plan/resolver.hpp"

namespace {

using kiln::ErrorKind;
using kiln::plan::StoreScan;
using kiln::store::StoreArchive;

const std::string kUri = "axpy_dtype_f32";
const std::string kHash(64, 'a');

kiln::plan::BuildIdentity identity() {
  return {"kiln-kernels", "0.1.0", kiln::format::kManifestFormat, kHash};
}

StoreArchive archive(const std::string& cuda, const std::string& target) {
  kiln::format::Manifest m;
  m.package = "kiln-kernels";
  m.package_version = "0.1.0";
  m.cuda_version = cuda;
  m.target = target;
  kiln::format::ArtifactEntry a;
  a.uri = kUri;
  a.family = "axpy";
  a.entries = {{"kiln::axpy_kernel<float>", "_Z11axpy_kernelIfEvv"}};
  a.source_hash = kHash;
  a.file = kUri + ".fatbin";
  a.size = 3;
  a.sha256 = kiln::io::sha256_hex("abc");
  m.artifacts.push_back(a);
  StoreArchive s;
  s.dir = "/s/" + kiln::format::archive_stem("kiln-kernels", "0.1.0", cuda, target);
  s.manifest = std::make_shared<const kiln::format::Manifest>(m);
  return s;
}

// Both toolkits of every target; the 12.9 archives first, so the order is the rule's, not the
// store's.
StoreScan two_toolkit_store() {
  StoreScan s;
  s.dir = "/s";
  s.readable = true;
  for (const char* cuda : {"12.9", "13.0"})
    for (const char* t : {"sm_80", "sm_90a", "sm_120", "compute_80"})
      s.archives.push_back(archive(cuda, t));
  return s;
}

std::vector<std::string> usable(int cc, int driver) {
  auto plan = kiln::plan::plan_stores(kUri, cc, identity(), {two_toolkit_store()}, false, true, driver);
  std::vector<std::string> out;
  for (const auto& c : plan.usable) {
    const std::string& dir = c.candidate.path;
    const std::string cuda = dir.substr(dir.find("-cuda") + 5, 4);
    out.push_back(cuda + " " + c.candidate.target);
  }
  return out;
}

TEST(DriverChoice, BestTargetThenNewestToolkitTheDriverRuns) {
  struct Case {
    int cc, driver;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      // A 13.0 driver runs both: the best target first, then the newest toolkit.
      {80, 13000, {"13.0 sm_80", "12.9 sm_80", "13.0 compute_80", "12.9 compute_80"}},
      {90, 13000, {"13.0 sm_90a", "12.9 sm_90a", "13.0 compute_80", "12.9 compute_80"}},
      {120, 13000, {"13.0 sm_120", "12.9 sm_120", "13.0 compute_80", "12.9 compute_80"}},
      // A 12.8 driver runs 12.9 SASS (minor-version compatibility) but neither 12.9 PTX nor any
      // of 13.0.
      {80, 12080, {"12.9 sm_80"}},
      {90, 12080, {"12.9 sm_90a"}},
      {120, 12080, {"12.9 sm_120"}},
      // So does a 12.2 driver.
      {90, 12020, {"12.9 sm_90a"}},
      // Not known (no driver): toolkits are not weighed, the newest first.
      {90, 0, {"13.0 sm_90a", "12.9 sm_90a", "13.0 compute_80", "12.9 compute_80"}},
  };
  for (const auto& c : cases)
    EXPECT_EQ(usable(c.cc, c.driver), c.expected) << "CC " << c.cc << ", driver " << c.driver;
}

// Each refused candidate keeps the driver's reason, naming both versions; a taken one says the
// driver runs its toolkit.
TEST(DriverChoice, RefusalsNameBothVersions) {
  auto plan = kiln::plan::plan_stores(kUri, 90, identity(), {two_toolkit_store()}, false, true, 12080);
  ASSERT_FALSE(plan.usable.empty());
  EXPECT_NE(plan.usable.front().candidate.reason.find(
                "built by CUDA 12.9, which this driver (CUDA 12.8) runs"),
            std::string::npos)
      << plan.usable.front().candidate.reason;
  bool sass13 = false, ptx129 = false;
  for (const auto& r : plan.rejected) {
    EXPECT_EQ(r.kind, ErrorKind::Unsupported) << r.candidate.reason;
    if (r.candidate.path.find("cuda13.0-sm_90a") != std::string::npos) {
      sass13 = true;
      EXPECT_EQ(r.candidate.reason,
                "built by CUDA 13.0, needs a driver >= 580 (CUDA 13.0); this driver runs CUDA 12.8");
    }
    if (r.candidate.path.find("cuda12.9-compute_80") != std::string::npos) {
      ptx129 = true;
      EXPECT_EQ(r.candidate.reason,
                "PTX built by CUDA 12.9, needs a driver of CUDA >= 12.9; this driver runs CUDA 12.8");
    }
  }
  EXPECT_TRUE(sass13);
  EXPECT_TRUE(ptx129);
}

// A driver older than every toolkit: nothing is usable, and every refusal says why.
TEST(DriverChoice, ADriverOlderThanEveryToolkitGetsNothing) {
  auto plan = kiln::plan::plan_stores(kUri, 90, identity(), {two_toolkit_store()}, false, true, 11080);
  EXPECT_TRUE(plan.usable.empty());
  bool named = false;
  for (const auto& r : plan.rejected)
    if (r.candidate.reason.find("needs a driver >= 525 (CUDA 12.0); this driver runs CUDA 11.8") !=
        std::string::npos)
      named = true;
  EXPECT_TRUE(named);
}

}  // namespace
