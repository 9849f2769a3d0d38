// The one target-choice rule (target_choice.hpp) as tables: for each device, the ordered
// candidates with their reasons and the rejected targets with theirs, against the default
// release targets (ci/targets.txt) and against odd lists.
#include "plan/target_choice.hpp"

#include <gtest/gtest.h>

#include <map>

#include "kiln/version.hpp"
#include "plan/resolver.hpp"

namespace {

const std::vector<std::string> kDefault = {"sm_80",  "sm_86",  "sm_89",     "sm_90a",
                                           "sm_100", "sm_120", "compute_80"};

std::vector<std::string> order(const kiln::NamedChoice& c) {
  std::vector<std::string> out;
  for (const auto& [t, why] : c.candidates) out.push_back(t);
  return out;
}

std::string reason_of(const kiln::NamedChoice& c, const std::string& target) {
  for (const auto& [t, why] : c.candidates)
    if (t == target) return why;
  for (const auto& [t, why] : c.rejected)
    if (t == target) return why;
  return "<absent>";
}

using V = std::vector<std::string>;

TEST(TargetChoice, DefaultReleaseTargetsOrderedForEveryDevice) {
  // cc -> candidates, best first. Whatever is not a candidate must be rejected.
  const std::map<int, V> want = {
      {75, {}},
      {80, {"sm_80", "compute_80"}},
      {86, {"sm_86", "sm_80", "compute_80"}},
      {87, {"sm_86", "sm_80", "compute_80"}},
      {89, {"sm_89", "sm_86", "sm_80", "compute_80"}},
      {90, {"sm_90a", "compute_80"}},
      {100, {"sm_100", "compute_80"}},
      {103, {"sm_100", "compute_80"}},
      {110, {"compute_80"}},
      {120, {"sm_120", "compute_80"}},
      {121, {"sm_120", "compute_80"}},
  };
  for (const auto& [cc, cands] : want) {
    SCOPED_TRACE("CC " + kiln::cc_string(cc));
    auto c = kiln::choose_named_targets(cc, kDefault);
    EXPECT_EQ(order(c), cands);
    EXPECT_EQ(c.candidates.size() + c.rejected.size(), kDefault.size());
    EXPECT_EQ(c.cc, cc);
  }
}

std::vector<std::pair<std::string, std::string>> pairs(const kiln::NamedChoice& c) {
  return c.candidates;
}

TEST(TargetChoice, DefaultReleaseTargetsEveryCandidateWithItsReason) {
  using P = std::vector<std::pair<std::string, std::string>>;
  const std::map<int, P> want = {
      {75, {}},
      {80,
       {{"sm_80", "exact SASS for CC 8.0"},
        {"compute_80", "PTX compute_80 of CC 8.0 <= 8.0: the driver JIT-compiles it"}}},
      {86,
       {{"sm_86", "exact SASS for CC 8.6"},
        {"sm_80", "SASS sm_80 of the same major, CC 8.0 <= 8.6"},
        {"compute_80", "PTX compute_80 of CC 8.0 <= 8.6: the driver JIT-compiles it"}}},
      {87,
       {{"sm_86", "SASS sm_86 of the same major, CC 8.6 <= 8.7"},
        {"sm_80", "SASS sm_80 of the same major, CC 8.0 <= 8.7"},
        {"compute_80", "PTX compute_80 of CC 8.0 <= 8.7: the driver JIT-compiles it"}}},
      {89,
       {{"sm_89", "exact SASS for CC 8.9"},
        {"sm_86", "SASS sm_86 of the same major, CC 8.6 <= 8.9"},
        {"sm_80", "SASS sm_80 of the same major, CC 8.0 <= 8.9"},
        {"compute_80", "PTX compute_80 of CC 8.0 <= 8.9: the driver JIT-compiles it"}}},
      {90,
       {{"sm_90a", "exact SASS for CC 9.0 (arch-specific)"},
        {"compute_80", "PTX compute_80 of CC 8.0 <= 9.0: the driver JIT-compiles it"}}},
      {100,
       {{"sm_100", "exact SASS for CC 10.0"},
        {"compute_80", "PTX compute_80 of CC 8.0 <= 10.0: the driver JIT-compiles it"}}},
      {103,
       {{"sm_100", "SASS sm_100 of the same major, CC 10.0 <= 10.3"},
        {"compute_80", "PTX compute_80 of CC 8.0 <= 10.3: the driver JIT-compiles it"}}},
      {110, {{"compute_80", "PTX compute_80 of CC 8.0 <= 11.0: the driver JIT-compiles it"}}},
      {120,
       {{"sm_120", "exact SASS for CC 12.0"},
        {"compute_80", "PTX compute_80 of CC 8.0 <= 12.0: the driver JIT-compiles it"}}},
      {121,
       {{"sm_120", "SASS sm_120 of the same major, CC 12.0 <= 12.1"},
        {"compute_80", "PTX compute_80 of CC 8.0 <= 12.1: the driver JIT-compiles it"}}},
  };
  for (const auto& [cc, cands] : want) {
    SCOPED_TRACE("CC " + kiln::cc_string(cc));
    EXPECT_EQ(pairs(kiln::choose_named_targets(cc, kDefault)), cands);
  }
}

TEST(TargetChoice, ReasonsSayWhyEachRunsOrNot) {
  auto c90 = kiln::choose_named_targets(90, kDefault);
  EXPECT_EQ(reason_of(c90, "sm_90a"), "exact SASS for CC 9.0 (arch-specific)");
  EXPECT_EQ(reason_of(c90, "compute_80"),
            "PTX compute_80 of CC 8.0 <= 9.0: the driver JIT-compiles it");
  EXPECT_EQ(reason_of(c90, "sm_80"), "SASS sm_80 runs only on CC 8.x; the device is CC 9.0");
  EXPECT_EQ(reason_of(c90, "sm_100"), "SASS sm_100 runs only on CC 10.x; the device is CC 9.0");

  auto c87 = kiln::choose_named_targets(87, kDefault);
  EXPECT_EQ(reason_of(c87, "sm_86"), "SASS sm_86 of the same major, CC 8.6 <= 8.7");
  EXPECT_EQ(reason_of(c87, "sm_89"), "SASS sm_89 needs CC >= 8.9; the device is CC 8.7");
  EXPECT_EQ(reason_of(c87, "sm_90a"),
            "sm_90a runs only on CC 9.0 (arch-specific); the device is CC 8.7");

  auto c75 = kiln::choose_named_targets(75, kDefault);
  EXPECT_EQ(reason_of(c75, "compute_80"), "PTX compute_80 needs CC >= 8.0; the device is CC 7.5");

  auto c80 = kiln::choose_named_targets(80, kDefault);
  EXPECT_EQ(reason_of(c80, "sm_80"), "exact SASS for CC 8.0");
}

TEST(TargetChoice, PtxOnlyList) {
  const V ptx = {"compute_80", "compute_90", "compute_120"};
  const std::map<int, V> want = {
      {75, {}},
      {80, {"compute_80"}},
      {86, {"compute_80"}},
      {90, {"compute_90", "compute_80"}},
      {103, {"compute_90", "compute_80"}},
      {121, {"compute_120", "compute_90", "compute_80"}},
  };
  for (const auto& [cc, cands] : want) {
    SCOPED_TRACE("CC " + kiln::cc_string(cc));
    EXPECT_EQ(order(kiln::choose_named_targets(cc, ptx)), cands);
  }
  EXPECT_EQ(reason_of(kiln::choose_named_targets(86, ptx), "compute_90"),
            "PTX compute_90 needs CC >= 9.0; the device is CC 8.6");
}

TEST(TargetChoice, ArchSpecificOnlyRunsOnItsExactArch) {
  const V only = {"sm_90a"};
  for (int cc : {75, 80, 86, 87, 89, 100, 103, 110, 120, 121}) {
    auto c = kiln::choose_named_targets(cc, only);
    EXPECT_TRUE(c.candidates.empty()) << cc;
    EXPECT_EQ(
        reason_of(c, "sm_90a"),
        "sm_90a runs only on CC 9.0 (arch-specific); the device is CC " + kiln::cc_string(cc));
  }
  EXPECT_EQ(order(kiln::choose_named_targets(90, only)), V{"sm_90a"});
}

TEST(TargetChoice, FamilyTargetsFollowTheirFamilyRule) {
  const V fam = {"sm_100f", "sm_100", "sm_103", "sm_120f"};
  EXPECT_EQ(order(kiln::choose_named_targets(100, fam)), (V{"sm_100f", "sm_100"}));
  // 10.3: exact sm_103 first, then the same-major lower-minor ones, family before plain.
  EXPECT_EQ(order(kiln::choose_named_targets(103, fam)), (V{"sm_103", "sm_100f", "sm_100"}));
  EXPECT_TRUE(kiln::choose_named_targets(110, fam).candidates.empty());
  EXPECT_EQ(order(kiln::choose_named_targets(121, fam)), (V{"sm_120f"}));
  EXPECT_EQ(reason_of(kiln::choose_named_targets(103, fam), "sm_100f"),
            "SASS sm_100f (family) of the same major, CC 10.0 <= 10.3");
  EXPECT_EQ(reason_of(kiln::choose_named_targets(120, fam), "sm_100f"),
            "sm_100f runs only on CC 10.x with x >= 0 (family); the device is CC 12.0");
}

TEST(TargetChoice, ExactArchSpecificComesBeforeExactPlainAndBeforePtx) {
  EXPECT_EQ(order(kiln::choose_named_targets(90, {"compute_90", "sm_90", "sm_90a"})),
            (V{"sm_90a", "sm_90", "compute_90"}));
}

TEST(TargetChoice, NothingCanRun) {
  const V none = {"sm_100", "sm_120", "compute_120"};
  for (int cc : {75, 80, 86, 87, 89, 90}) {
    auto c = kiln::choose_named_targets(cc, none);
    EXPECT_TRUE(c.candidates.empty()) << cc;
    EXPECT_EQ(c.rejected.size(), 3u);
  }
  auto junk = kiln::choose_named_targets(90, {"sm_9x", "sm_90"});
  EXPECT_EQ(order(junk), V{"sm_90"});
  EXPECT_EQ(reason_of(junk, "sm_9x"), "'sm_9x' is not a target");
}

TEST(TargetChoice, DuplicatesAreListedOnce) {
  EXPECT_EQ(order(kiln::choose_named_targets(86, {"sm_80", "sm_80", "compute_80"})),
            (V{"sm_80", "compute_80"}));
}

TEST(TargetChoice, ReleaseTargetsCompiledInAreCiTargetsTxt) {
  // The build's default (CMake cache variable KILN_RELEASE_TARGETS from ci/targets.txt).
  EXPECT_EQ(kiln::release_targets(), kDefault);
}

TEST(TargetChoice, MirrorChoiceFetchesTheBestFirstAndExplainsTheRest) {
  auto m = kiln::choose_mirror_targets(90, "kiln-kernels", "0.1.0", kDefault, "http://m");
  EXPECT_EQ(m.fetch, (V{"sm_90a", "compute_80"}));
  ASSERT_EQ(m.rejected.size(), 5u);
  EXPECT_EQ(m.rejected[0].candidate.tier, "mirror");
  EXPECT_EQ(m.rejected[0].candidate.target, "sm_80");
  EXPECT_EQ(m.rejected[0].candidate.path, "http://m");
  EXPECT_EQ(m.rejected[0].kind, kiln::ErrorKind::Unsupported);

  auto none = kiln::choose_mirror_targets(75, "kiln-kernels", "0.1.0", kDefault, "http://m");
  EXPECT_TRUE(none.fetch.empty());
  EXPECT_EQ(none.rejected.back().candidate.reason,
            "no archive of kiln-kernels 0.1.0 can run on CC 7.5 (the index lists: sm_80, sm_86, "
            "sm_89, sm_90a, sm_100, sm_120, compute_80)");
}

TEST(TargetChoice, FetchAdviceNamesATargetTheReleaseHas) {
  std::string a = kiln::fetch_advice(90, "kiln-kernels", "0.1.0", kDefault, "/c");
  EXPECT_NE(a.find("kiln fetch --package kiln-kernels --version 0.1.0 --device sm_90 --dest /c"),
            std::string::npos)
      << a;
  EXPECT_NE(
      a.find(std::string("kiln-kernels-0.1.0-cuda") + kiln::cuda_version() + "-sm_90a.tar.zst"),
      std::string::npos)
      << a;
  EXPECT_EQ(a.find("--targets sm_90 "), std::string::npos) << a;
  std::string b = kiln::fetch_advice(110, "kiln-kernels", "0.1.0", kDefault, "/c");
  EXPECT_NE(b.find("-compute_80.tar.zst"), std::string::npos) << b;
  std::string n = kiln::fetch_advice(75, "kiln-kernels", "0.1.0", kDefault, "/c");
  EXPECT_NE(n.find("no archive of kiln-kernels 0.1.0 can run on CC 7.5"), std::string::npos) << n;
  EXPECT_EQ(n.find("kiln fetch"), std::string::npos) << n;
  std::string u = kiln::fetch_advice(90, "kiln-kernels", "0.1.0", {}, "/c");
  EXPECT_NE(u.find("kiln fetch --package kiln-kernels --version 0.1.0 --device sm_90 --dest /c"),
            std::string::npos)
      << u;
}

TEST(ResolutionPlan, TiersInOrderWithOneMessageEachWhenSkipped) {
  auto all = kiln::resolution_plan({false, {"http://m"}, false}, 90);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name, "store");
  EXPECT_EQ(all[1].name, "mirror");
  EXPECT_EQ(all[2].name, "jit");
  for (const auto& t : all) EXPECT_FALSE(t.skip) << t.name;

  auto off = kiln::resolution_plan({true, {"http://m"}, true}, 90);
  ASSERT_TRUE(off[1].skip);
  EXPECT_EQ(off[1].skip->candidate.reason,
            "skipped: offline mode (KILN_OFFLINE=1) makes no network access");
  ASSERT_TRUE(off[2].skip);
  EXPECT_EQ(off[2].skip->candidate.reason, "disabled (KILN_DISABLE_JIT=1)");
  EXPECT_EQ(off[2].skip->candidate.target, "sm_90");

  auto nomirror = kiln::resolution_plan({false, {}, false}, 90);
  ASSERT_TRUE(nomirror[1].skip);
  EXPECT_EQ(nomirror[1].skip->candidate.reason, "no mirror configured (KILN_MIRRORS is empty)");
  EXPECT_FALSE(nomirror[2].skip);
}

}  // namespace
