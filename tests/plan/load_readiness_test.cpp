// The doctor's verdict over the facts it gathered (plan/load_readiness.hpp): pure, no driver,
// disk or network; `kiln doctor` and `python -m kiln doctor` print what it decides.
#include "plan/load_readiness.hpp"

#include <gtest/gtest.h>

namespace kiln {
namespace {

// A machine where loading works: the driver and a CC 9.0 device, a writable cache, a store
// holding an sm_90a archive of the package, a mirror that answered, no JIT.
plan::LoadFacts good() {
  plan::LoadFacts f;
  f.driver_loads = true;
  f.device_ccs = {90};
  f.cache_dir = "/c";
  f.stores = {{"/s", "artifact path", true, true, "", {"sm_90a"}}};
  f.mirrors = {{"https://m", true, "ok, index digest matches"}};
  f.jit_problem = "libnvrtc.so.13 not found";
  return f;
}

plan::LoadFacts no_driver(plan::LoadFacts f) {
  f.driver_loads = false;
  f.driver_problem = "libcuda.so.1 does not load";
  f.device_ccs.clear();
  return f;
}
plan::LoadFacts no_store(plan::LoadFacts f) {
  f.stores = {{"/s", "artifact path", true, true, "", {}}};
  return f;
}
plan::LoadFacts mirror_unreachable(plan::LoadFacts f) {
  f.mirrors = {{"https://m", false, "connection refused"}};
  return f;
}

TEST(LoadReadiness, AMachineWithDriverDeviceAndAStoreArchiveForItIsOk) {
  plan::LoadVerdict v = plan::judge_loading(good());
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.missing, std::vector<std::string>{});
}

TEST(LoadReadiness, NoDriverAloneIsMissingTheDriverNamedWithItsProblem) {
  plan::LoadVerdict v = plan::judge_loading(no_driver(good()));
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.missing, std::vector<std::string>{"CUDA driver (libcuda.so.1 does not load)"});
}

TEST(LoadReadiness, ADriverWithoutADeviceIsMissingADevice) {
  plan::LoadFacts f = good();
  f.device_ccs.clear();
  EXPECT_EQ(plan::judge_loading(f).missing,
            std::vector<std::string>{"a CUDA device (the driver reports none)"});
}

TEST(LoadReadiness, NoStoreArchiveAloneIsServedByTheReachableMirror) {
  EXPECT_TRUE(plan::judge_loading(no_store(good())).ok);
}

TEST(LoadReadiness, AnUnreachableMirrorAloneIsServedByTheStore) {
  EXPECT_TRUE(plan::judge_loading(mirror_unreachable(good())).ok);
}

TEST(LoadReadiness, NoStoreArchiveAndNoMirrorNamesEveryTierThatCannotServeTheDevice) {
  plan::LoadVerdict v = plan::judge_loading(mirror_unreachable(no_store(good())));
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.missing, std::vector<std::string>{
                           "a source of kernels for sm_90 (CC 9.0): no store holds an archive "
                           "that runs there (searched /s); no mirror reached (https://m: "
                           "connection refused); no usable JIT (libnvrtc.so.13 not found)"});
}

TEST(LoadReadiness, AllTogetherNamesTheDriverAndTheMissingSource) {
  plan::LoadVerdict v = plan::judge_loading(mirror_unreachable(no_store(no_driver(good()))));
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.missing,
            (std::vector<std::string>{
                "CUDA driver (libcuda.so.1 does not load)",
                "a source of kernels: no store holds an archive of the package (searched /s); "
                "no mirror reached (https://m: connection refused); no usable JIT "
                "(libnvrtc.so.13 not found)"}));
}

TEST(LoadReadiness, AStoreArchiveTheTargetChoiceRefusesForTheDeviceDoesNotServeIt) {
  plan::LoadFacts f = mirror_unreachable(good());
  f.device_ccs = {80};  // sm_90a runs only on CC 9.0
  plan::LoadVerdict v = plan::judge_loading(f);
  ASSERT_EQ(v.missing.size(), 1u);
  EXPECT_EQ(v.missing[0].rfind("a source of kernels for sm_80 (CC 8.0): no store holds an "
                               "archive that runs there",
                               0),
            0u)
      << v.missing[0];
  f.device_ccs = {90, 80};  // one entry per device that nothing serves
  EXPECT_EQ(plan::judge_loading(f).missing.size(), 1u);
}

TEST(LoadReadiness, OfflineMirrorsAndAUsableJitAreJudgedAsSuch) {
  plan::LoadFacts f = no_store(good());
  f.offline = true;
  plan::LoadVerdict v = plan::judge_loading(f);
  ASSERT_EQ(v.missing.size(), 1u);
  EXPECT_NE(v.missing[0].find("mirrors not used: offline (KILN_OFFLINE=1)"), std::string::npos);
  f.jit_usable = true;
  EXPECT_TRUE(plan::judge_loading(f).ok);
}

TEST(LoadReadiness, AnUnwritableCacheAndAnUnreadableConfiguredStoreAreMissing) {
  plan::LoadFacts f = good();
  f.cache_problem = "cannot create it: Permission denied";
  f.stores.push_back({"/gone", "artifact path", true, false, "does not exist", {}});
  f.stores.push_back({"/opt", "installed beside this kiln", false, false, "does not exist", {}});
  EXPECT_EQ(
      plan::judge_loading(f).missing,
      (std::vector<std::string>{"writable cache directory /c (cannot create it: Permission denied)",
                                "store /gone (does not exist)"}));
}

}  // namespace
}  // namespace kiln
