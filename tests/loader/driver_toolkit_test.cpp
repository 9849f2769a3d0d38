// The loader weighs each candidate's toolkit against the driver's CUDA version (docs/compatibility.md):
// a store holding one kernel built by CUDA 12.9 and by CUDA 13.0 for the device's target, loaded
// through the stand-in driver reporting 12.2, 12.8 and 13.0 on devices of CC 8.0, 9.0 and 12.0.
#include <gtest/gtest.h>

#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "loader_factory.hpp"
#include "plan/resolver.hpp"
#include "plan/store_scanner.hpp"
#include "stand_in_driver.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const std::string kUri = "axpy_dtype_f32";

// The bytes standing for `uri` built by `cuda` for `target`.
std::string image(const std::string& cuda, const std::string& target) {
  return "image-cuda" + cuda + "-" + target;
}

struct Rig {
  test::TempDir tmp;
  fs::path store = tmp / "store";

  explicit Rig(const std::vector<std::string>& targets) {
    for (const char* cuda : {"12.9", "13.0"}) {
      test::ReleaseSpec rel;
      rel.loadable = true;
      rel.cuda_version = cuda;
      for (const auto& t : targets) {
        rel.with_artifacts({{kUri, image(cuda, t)}});
        test::write_store_entry(store, rel, t);
      }
    }
    plan::forget_store_memory();
  }
  std::unique_ptr<Loader> loader(std::shared_ptr<test::Cc90Driver> drv) {
    LoaderConfig cfg;
    cfg.cache_dir = (tmp / "cache").string();
    cfg.artifact_path = {store.string()};
    cfg.offline = true;
    cfg.disable_jit = true;
    cfg.use_installed_store = false;
    plan::LoaderDeps d;
    d.driver = std::move(drv);
    return make_loader(test::reference_description(), cfg, std::move(d));
  }
};

using test::stand_in_driver;

TEST(DriverToolkit, EachDeviceAndDriverGetsTheNewestToolkitTheDriverRuns) {
  Rig rig({"sm_80", "sm_90", "sm_120"});
  struct Case {
    int cc, version;
    std::string expected;
  };
  for (const Case& c : {Case{80, 13000, image("13.0", "sm_80")}, Case{90, 13000, image("13.0", "sm_90")},
                        Case{120, 13000, image("13.0", "sm_120")}, Case{80, 12080, image("12.9", "sm_80")},
                        Case{90, 12080, image("12.9", "sm_90")}, Case{120, 12080, image("12.9", "sm_120")},
                        Case{90, 12020, image("12.9", "sm_90")}}) {
    auto drv = stand_in_driver(c.version, c.cc);
    rig.loader(drv)->get(kUri);
    ASSERT_EQ(drv->images.size(), 1u);
    EXPECT_EQ(drv->images.front(), c.expected) << "CC " << c.cc << ", driver " << c.version;
    plan::forget_store_memory();
  }
}

// resolve --explain: the driver named, the taken candidate saying its toolkit runs there, the
// other toolkit's refused with both versions.
TEST(DriverToolkit, ResolveNamesTheDriverAndWhyEachToolkitWasTakenOrRefused) {
  Rig rig({"sm_90"});
  Resolution r = rig.loader(stand_in_driver(12080, 90))->resolve(kUri, 90);
  EXPECT_EQ(r.driver, "CUDA 12.8");
  ASSERT_TRUE(r.chosen);
  EXPECT_NE(r.chosen->path.find("cuda12.9-sm_90"), std::string::npos) << r.chosen->path;
  EXPECT_NE(r.chosen->reason.find("built by CUDA 12.9, which this driver (CUDA 12.8) runs"),
            std::string::npos)
      << r.chosen->reason;
  bool refused = false;
  for (const auto& c : r.rejected)
    if (c.path.find("cuda13.0-sm_90") != std::string::npos)
      refused = c.reason ==
                "built by CUDA 13.0, needs a driver >= 580 (CUDA 13.0); this driver runs CUDA 12.8";
  EXPECT_TRUE(refused) << r.to_json();
  EXPECT_NE(r.to_json().find("\"driver\": \"CUDA 12.8\""), std::string::npos) << r.to_json();
}

// A load the driver refuses is a rejected candidate with its reason; the next one serves.
TEST(DriverToolkit, ALoadTheDriverRefusesFallsToTheNextCandidate) {
  Rig rig({"sm_90"});
  auto drv = stand_in_driver(13000, 90);
  drv->refused_images = {image("13.0", "sm_90")};
  rig.loader(drv)->get(kUri);
  ASSERT_EQ(drv->images.size(), 1u);
  EXPECT_EQ(drv->images.front(), image("12.9", "sm_90"));
}

// A driver older than every toolkit: an unsupported error naming both versions, nothing loaded.
TEST(DriverToolkit, ADriverOlderThanEveryToolkitIsUnsupportedNamingTheVersions) {
  Rig rig({"sm_90"});
  auto drv = stand_in_driver(11080, 90);
  std::string msg = test::error_of(ErrorKind::Unsupported, [&] { rig.loader(drv)->get(kUri); });
  EXPECT_NE(msg.find("needs a driver >= 525 (CUDA 12.0); this driver runs CUDA 11.8"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("needs a driver >= 580 (CUDA 13.0); this driver runs CUDA 11.8"),
            std::string::npos)
      << msg;
  EXPECT_TRUE(drv->images.empty());
}

}  // namespace
}  // namespace kiln
