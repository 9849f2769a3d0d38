// The JIT tier uses an NVRTC the driver runs (jit/jit.hpp, docs/compatibility.md): its cubin is
// SASS of the NVRTC's toolkit, which a driver of an older major cannot load. Through the real
// libnvrtc.so.13 of this machine and, when KILN_TEST_NVRTC_TOOLKIT names one
// (scripts/nvrtc_toolkit.sh), PyPI's libnvrtc.so.12 of CUDA 12.9; drivers 12.2, 12.8 and 13.0.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "jit/jit.hpp"
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

// This machine's NVRTC 13 (the default candidates, no driver weighed), or skip.
jit::JitCapability nvrtc13() {
  jit::JitCapability cap = jit::NvrtcCompiler(jit::NvrtcConfig{}).probe();
  return cap;
}

// PyPI's NVRTC 12.9 laid out by scripts/nvrtc_toolkit.sh; "" when KILN_TEST_NVRTC_TOOLKIT is unset.
std::string nvrtc12_library() {
  const std::string dir = test::nvrtc_test_toolkit();
  if (dir.empty()) return "";
  fs::path lib = fs::path(dir) / "lib64" / "libnvrtc.so.12";
  return fs::exists(lib) ? lib.string() : "";
}

jit::JitCapability probe(const std::string& library, int driver) {
  jit::NvrtcConfig c;
  c.library = library;
  c.driver = driver;
  return jit::NvrtcCompiler(c).probe();
}

TEST(NvrtcDriver, TheRefusalIsTheSassRuleNamingBothVersions) {
  EXPECT_EQ(jit::nvrtc_driver_refusal({13, 0}, 12080),
            "NVRTC 13.0 compiles code that needs a driver >= 580 (CUDA 13.0); this driver runs "
            "CUDA 12.8");
  EXPECT_FALSE(jit::nvrtc_driver_refusal({13, 0}, 13000));
  EXPECT_FALSE(jit::nvrtc_driver_refusal({12, 9}, 12020)) << "12.9's cubin runs on a 12.2 driver";
  EXPECT_FALSE(jit::nvrtc_driver_refusal({12, 9}, 13000));
  EXPECT_TRUE(jit::nvrtc_driver_refusal({12, 9}, 11080));
  EXPECT_FALSE(jit::nvrtc_driver_refusal({13, 0}, 0)) << "a driver not known is not weighed";
}

// NVRTC 13 alone and a 12.x driver: no NVRTC the driver runs, said with both versions; a
// 13.0 driver takes it.
TEST(NvrtcDriver, Nvrtc13IsPassedOverByA12Driver) {
  jit::JitCapability real = nvrtc13();
  if (!real.available || real.nvrtc_major != 13) GTEST_SKIP() << "no NVRTC 13 here: " << real.missing;
  for (int driver : {12020, 12080}) {
    jit::JitCapability cap = probe(real.library_path, driver);
    EXPECT_FALSE(cap.available);
    ASSERT_TRUE(cap.refused_by_driver);
    EXPECT_EQ(cap.refused_by_driver->str(), "13.0");
    const std::string drv = format::driver_cuda_version(driver).str();
    EXPECT_NE(cap.missing.find("no NVRTC that this driver (CUDA " + drv + ") runs"),
              std::string::npos)
        << cap.missing;
    EXPECT_NE(cap.missing.find("NVRTC 13.0 compiles code that needs a driver >= 580 (CUDA 13.0)"),
              std::string::npos)
        << cap.missing;
    // The JIT candidate's refusal: unsupported, with the driver's fields.
    auto r = plan::jit_refusal(cap, 90);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->kind, ErrorKind::Unsupported);
    ASSERT_EQ(r->fields.size(), 2u);
    EXPECT_EQ(r->fields[0].value, drv);
    EXPECT_EQ(r->fields[1].value, "13.0");
  }
  jit::JitCapability cap = probe(real.library_path, 13000);
  EXPECT_TRUE(cap.available) << cap.missing;
  EXPECT_EQ(cap.nvrtc_major, 13);
}

// NVRTC 12.9 (PyPI's) runs on every driver of 12.0 and newer, 13.0 included.
TEST(NvrtcDriver, Nvrtc12IsTakenByEveryDriverItRunsOn) {
  const std::string lib = nvrtc12_library();
  if (lib.empty())
    GTEST_SKIP() << "no NVRTC 12: set KILN_TEST_NVRTC_TOOLKIT=$(scripts/nvrtc_toolkit.sh)";
  for (int driver : {12020, 12080, 13000}) {
    jit::JitCapability cap = probe(lib, driver);
    EXPECT_TRUE(cap.available) << driver << ": " << cap.missing;
    EXPECT_EQ(cap.nvrtc_major, 12);
    EXPECT_EQ(cap.nvrtc_minor, 9);
  }
  jit::JitCapability old = probe(lib, 11080);
  EXPECT_FALSE(old.available);
  EXPECT_NE(old.missing.find("this driver runs CUDA 11.8"), std::string::npos) << old.missing;
}

// The cache key names the NVRTC: a result of NVRTC 13.0 is never served to a 12.9 compile.
TEST(NvrtcDriver, TheCacheKeyNamesTheNvrtcVersion) {
  jit::JitKeyInputs a;
  a.uri = kUri;
  a.arch = 90;
  a.nvrtc_major = 13;
  a.nvrtc_minor = 0;
  jit::JitKeyInputs b = a;
  b.nvrtc_major = 12;
  b.nvrtc_minor = 9;
  EXPECT_NE(jit::jit_cache_key(a), jit::jit_cache_key(b));
}

// Through the loader and the stand-in driver: with no store archive and only NVRTC 13, a 12.x
// driver gets an unsupported error naming both versions, never a JIT of code it cannot load; a
// 13.0 driver's resolve() takes the JIT tier.
struct JitRig {
  test::TempDir tmp;
  std::unique_ptr<Loader> loader(std::shared_ptr<test::Cc90Driver> drv, const std::string& nvrtc) {
    LoaderConfig cfg;
    cfg.cache_dir = (tmp / "cache").string();
    cfg.offline = true;
    cfg.use_installed_store = false;
    cfg.nvrtc_library = nvrtc;
    plan::LoaderDeps d;
    d.driver = std::move(drv);
    return make_loader(test::reference_description(), cfg, std::move(d));
  }
};

using test::stand_in_driver;

TEST(NvrtcDriver, TheLoadersJitTierRefusesNvrtc13OnA12DriverNamingBothVersions) {
  jit::JitCapability real = nvrtc13();
  if (!real.available || real.nvrtc_major != 13) GTEST_SKIP() << "no NVRTC 13 here: " << real.missing;
  for (int cc : {80, 90, 120}) {
    JitRig rig;
    auto drv = stand_in_driver(12080, cc);
    const std::string msg = test::error_of(ErrorKind::Unsupported,
                                           [&] { rig.loader(drv, real.library_path)->get(kUri); });
    EXPECT_NE(msg.find("[jit "), std::string::npos) << msg;
    EXPECT_NE(msg.find("NVRTC 13.0 compiles code that needs a driver >= 580 (CUDA 13.0); this "
                       "driver runs CUDA 12.8"),
              std::string::npos)
        << msg;
    EXPECT_TRUE(drv->images.empty()) << "nothing handed to the driver";
    plan::forget_store_memory();
  }
  JitRig rig;
  Resolution r = rig.loader(stand_in_driver(13000, 90), real.library_path)->resolve(kUri, 90);
  ASSERT_TRUE(r.chosen) << r.to_json();
  EXPECT_EQ(r.chosen->tier, "jit");
}

TEST(NvrtcDriver, TheLoadersJitTierTakesNvrtc12OnA12Driver) {
  const std::string lib = nvrtc12_library();
  if (lib.empty())
    GTEST_SKIP() << "no NVRTC 12: set KILN_TEST_NVRTC_TOOLKIT=$(scripts/nvrtc_toolkit.sh)";
  for (int version : {12020, 12080, 13000}) {
    JitRig rig;
    Resolution r = rig.loader(stand_in_driver(version, 90), lib)->resolve(kUri, 90);
    ASSERT_TRUE(r.chosen) << version << ": " << r.to_json();
    EXPECT_EQ(r.chosen->tier, "jit") << r.to_json();
  }
}

}  // namespace
}  // namespace kiln
