// The one target-choice rule (target_choice.hpp) as tables: for each device, the ordered
// candidates with their reasons and the rejected targets with theirs, against the default
// release targets (ci/targets.txt) and against odd lists.
#include "plan/target_choice.hpp"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "format/toolkit.hpp"
#include "jit/jit.hpp"
#include "kiln/version.hpp"
#include "plan/resolver.hpp"
#include "test_util.hpp"

namespace {

const std::vector<std::string> kDefault = {"sm_80",  "sm_86",  "sm_89",     "sm_90a",
                                           "sm_100", "sm_120", "compute_80"};

std::vector<std::string> order(const kiln::plan::NamedChoice& c) {
  std::vector<std::string> out;
  for (const auto& [t, why] : c.candidates) out.push_back(t);
  return out;
}

std::string reason_of(const kiln::plan::NamedChoice& c, const std::string& target) {
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
    SCOPED_TRACE("CC " + kiln::plan::cc_string(cc));
    auto c = kiln::plan::choose_named_targets(cc, kDefault);
    EXPECT_EQ(order(c), cands);
    EXPECT_EQ(c.candidates.size() + c.rejected.size(), kDefault.size());
    EXPECT_EQ(c.cc, cc);
  }
}

std::vector<std::pair<std::string, std::string>> pairs(const kiln::plan::NamedChoice& c) {
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
    SCOPED_TRACE("CC " + kiln::plan::cc_string(cc));
    EXPECT_EQ(pairs(kiln::plan::choose_named_targets(cc, kDefault)), cands);
  }
}

TEST(TargetChoice, ReasonsSayWhyEachRunsOrNot) {
  auto c90 = kiln::plan::choose_named_targets(90, kDefault);
  EXPECT_EQ(reason_of(c90, "sm_90a"), "exact SASS for CC 9.0 (arch-specific)");
  EXPECT_EQ(reason_of(c90, "compute_80"),
            "PTX compute_80 of CC 8.0 <= 9.0: the driver JIT-compiles it");
  EXPECT_EQ(reason_of(c90, "sm_80"), "SASS sm_80 runs only on CC 8.x; the device is CC 9.0");
  EXPECT_EQ(reason_of(c90, "sm_100"), "SASS sm_100 runs only on CC 10.x; the device is CC 9.0");

  auto c87 = kiln::plan::choose_named_targets(87, kDefault);
  EXPECT_EQ(reason_of(c87, "sm_86"), "SASS sm_86 of the same major, CC 8.6 <= 8.7");
  EXPECT_EQ(reason_of(c87, "sm_89"), "SASS sm_89 needs CC >= 8.9; the device is CC 8.7");
  EXPECT_EQ(reason_of(c87, "sm_90a"),
            "sm_90a runs only on CC 9.0 (arch-specific); the device is CC 8.7");

  auto c75 = kiln::plan::choose_named_targets(75, kDefault);
  EXPECT_EQ(reason_of(c75, "compute_80"), "PTX compute_80 needs CC >= 8.0; the device is CC 7.5");

  auto c80 = kiln::plan::choose_named_targets(80, kDefault);
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
    SCOPED_TRACE("CC " + kiln::plan::cc_string(cc));
    EXPECT_EQ(order(kiln::plan::choose_named_targets(cc, ptx)), cands);
  }
  EXPECT_EQ(reason_of(kiln::plan::choose_named_targets(86, ptx), "compute_90"),
            "PTX compute_90 needs CC >= 9.0; the device is CC 8.6");
}

TEST(TargetChoice, ArchSpecificOnlyRunsOnItsExactArch) {
  const V only = {"sm_90a"};
  for (int cc : {75, 80, 86, 87, 89, 100, 103, 110, 120, 121}) {
    auto c = kiln::plan::choose_named_targets(cc, only);
    EXPECT_TRUE(c.candidates.empty()) << cc;
    EXPECT_EQ(
        reason_of(c, "sm_90a"),
        "sm_90a runs only on CC 9.0 (arch-specific); the device is CC " + kiln::plan::cc_string(cc));
  }
  EXPECT_EQ(order(kiln::plan::choose_named_targets(90, only)), V{"sm_90a"});
}

TEST(TargetChoice, FamilyTargetsFollowTheirFamilyRule) {
  const V fam = {"sm_100f", "sm_100", "sm_103", "sm_120f"};
  EXPECT_EQ(order(kiln::plan::choose_named_targets(100, fam)), (V{"sm_100f", "sm_100"}));
  // 10.3: exact sm_103 first, then the same-major lower-minor ones, family before plain.
  EXPECT_EQ(order(kiln::plan::choose_named_targets(103, fam)), (V{"sm_103", "sm_100f", "sm_100"}));
  EXPECT_TRUE(kiln::plan::choose_named_targets(110, fam).candidates.empty());
  EXPECT_EQ(order(kiln::plan::choose_named_targets(121, fam)), (V{"sm_120f"}));
  EXPECT_EQ(reason_of(kiln::plan::choose_named_targets(103, fam), "sm_100f"),
            "SASS sm_100f (family) of the same major, CC 10.0 <= 10.3");
  EXPECT_EQ(reason_of(kiln::plan::choose_named_targets(120, fam), "sm_100f"),
            "sm_100f runs only on CC 10.x with x >= 0 (family); the device is CC 12.0");
}

TEST(TargetChoice, ExactArchSpecificComesBeforeExactPlainAndBeforePtx) {
  EXPECT_EQ(order(kiln::plan::choose_named_targets(90, {"compute_90", "sm_90", "sm_90a"})),
            (V{"sm_90a", "sm_90", "compute_90"}));
}

TEST(TargetChoice, NothingCanRun) {
  const V none = {"sm_100", "sm_120", "compute_120"};
  for (int cc : {75, 80, 86, 87, 89, 90}) {
    auto c = kiln::plan::choose_named_targets(cc, none);
    EXPECT_TRUE(c.candidates.empty()) << cc;
    EXPECT_EQ(c.rejected.size(), 3u);
  }
  auto junk = kiln::plan::choose_named_targets(90, {"sm_9x", "sm_90"});
  EXPECT_EQ(order(junk), V{"sm_90"});
  EXPECT_EQ(reason_of(junk, "sm_9x"), "'sm_9x' is not a target");
}

TEST(TargetChoice, DuplicatesAreListedOnce) {
  EXPECT_EQ(order(kiln::plan::choose_named_targets(86, {"sm_80", "sm_80", "compute_80"})),
            (V{"sm_80", "compute_80"}));
}

TEST(TargetChoice, ReleaseTargetsCompiledInAreCiTargetsTxt) {
  // The build's default (CMake cache variable KILN_RELEASE_TARGETS from ci/targets.txt).
  EXPECT_EQ(kiln::plan::release_targets(), kDefault);
}

TEST(TargetChoice, MirrorChoiceFetchesTheBestFirstAndExplainsTheRest) {
  auto m = kiln::plan::choose_mirror_targets(90, "kiln-kernels", "0.1.0", kDefault, "http://m");
  EXPECT_EQ(m.fetch, (V{"sm_90a", "compute_80"}));
  ASSERT_EQ(m.rejected.size(), 5u);
  EXPECT_EQ(m.rejected[0].candidate.tier, "mirror");
  EXPECT_EQ(m.rejected[0].candidate.target, "sm_80");
  EXPECT_EQ(m.rejected[0].candidate.path, "http://m");
  EXPECT_EQ(m.rejected[0].kind, kiln::ErrorKind::Unsupported);

  auto none = kiln::plan::choose_mirror_targets(75, "kiln-kernels", "0.1.0", kDefault, "http://m");
  EXPECT_TRUE(none.fetch.empty());
  EXPECT_EQ(none.rejected.back().candidate.reason,
            "no archive of kiln-kernels 0.1.0 can run on CC 7.5 (the index lists: sm_80, sm_86, "
            "sm_89, sm_90a, sm_100, sm_120, compute_80)");
}

// The node's driver: the command carries it (the fetch runs on another machine), and where the
// driver cannot run this libkiln's toolkit the advice names no archive of that toolkit.
TEST(TargetChoice, FetchAdviceCarriesTheDriverAndNamesNoArchiveItCannotRun) {
  const std::string own = std::string("kiln-kernels-0.1.0-cuda") + kiln::cuda_version() +
                          "-sm_90a.tar.zst";
  const auto own_version = kiln::format::parse_cuda_version(kiln::cuda_version());
  ASSERT_TRUE(own_version);
  const int runs_own = own_version->driver_number();
  std::string a =
      kiln::plan::fetch_advice(90, "kiln-kernels", "0.1.0", kDefault, "/c", nullptr, runs_own);
  EXPECT_NE(a.find("--device sm_90 --dest /c --driver " + own_version->str()), std::string::npos)
      << a;
  EXPECT_NE(a.find(own), std::string::npos) << a;

  // A driver one major older than this libkiln's toolkit: no SASS of that toolkit runs there.
  const int older = (own_version->major - 1) * 1000 + 80;
  std::string b =
      kiln::plan::fetch_advice(90, "kiln-kernels", "0.1.0", kDefault, "/c", nullptr, older);
  EXPECT_NE(b.find("--driver " + kiln::format::driver_cuda_version(older).str()),
            std::string::npos)
      << b;
  EXPECT_EQ(b.find(own), std::string::npos) << b;
  EXPECT_NE(b.find("it fetches the sm_90a archive of a toolkit this driver runs"),
            std::string::npos)
      << b;
  EXPECT_NE(b.find("this driver runs CUDA " + kiln::format::driver_cuda_version(older).str()),
            std::string::npos)
      << b;
}

TEST(TargetChoice, FetchAdviceNamesATargetTheReleaseHas) {
  std::string a = kiln::plan::fetch_advice(90, "kiln-kernels", "0.1.0", kDefault, "/c");
  EXPECT_NE(a.find("kiln fetch --package kiln-kernels --version 0.1.0 --device sm_90 --dest /c"),
            std::string::npos)
      << a;
  EXPECT_NE(
      a.find(std::string("kiln-kernels-0.1.0-cuda") + kiln::cuda_version() + "-sm_90a.tar.zst"),
      std::string::npos)
      << a;
  EXPECT_EQ(a.find("--targets sm_90 "), std::string::npos) << a;
  std::string b = kiln::plan::fetch_advice(110, "kiln-kernels", "0.1.0", kDefault, "/c");
  EXPECT_NE(b.find("-compute_80.tar.zst"), std::string::npos) << b;
  std::string n = kiln::plan::fetch_advice(75, "kiln-kernels", "0.1.0", kDefault, "/c");
  EXPECT_NE(n.find("no archive of kiln-kernels 0.1.0 can run on CC 7.5"), std::string::npos) << n;
  EXPECT_EQ(n.find("kiln fetch"), std::string::npos) << n;
  std::string u = kiln::plan::fetch_advice(90, "kiln-kernels", "0.1.0", {}, "/c");
  EXPECT_NE(u.find("kiln fetch --package kiln-kernels --version 0.1.0 --device sm_90 --dest /c"),
            std::string::npos)
      << u;
}

TEST(ResolutionPlan, TiersInOrderWithOneMessageEachWhenSkipped) {
  auto all = kiln::plan::resolution_plan({false, {"http://m"}, false}, 90);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name, "store");
  EXPECT_EQ(all[1].name, "mirror");
  EXPECT_EQ(all[2].name, "jit");
  for (const auto& t : all) EXPECT_FALSE(t.skip) << t.name;

  auto off = kiln::plan::resolution_plan({true, {"http://m"}, true}, 90);
  ASSERT_TRUE(off[1].skip);
  EXPECT_EQ(off[1].skip->candidate.reason,
            "skipped: offline mode (KILN_OFFLINE=1) makes no network access");
  ASSERT_TRUE(off[2].skip);
  EXPECT_EQ(off[2].skip->candidate.reason, "disabled (KILN_DISABLE_JIT=1)");
  EXPECT_EQ(off[2].skip->candidate.target, "sm_90");

  auto nomirror = kiln::plan::resolution_plan({false, {}, false}, 90);
  ASSERT_TRUE(nomirror[1].skip);
  EXPECT_EQ(nomirror[1].skip->candidate.reason, "no mirror configured (KILN_MIRRORS is empty)");
  EXPECT_FALSE(nomirror[2].skip);
}

// ---- a family's declared targets are part of the rule (registry "targets")

kiln::project::Family declared(const std::string& name, const std::vector<std::string>& rules) {
  kiln::project::Family f;
  f.name = name;
  for (const auto& r : rules) f.targets.push_back(*kiln::format::parse_target_rule(r));
  return f;
}

kiln::jit::JitCapability nvrtc_for_every_arch() {
  kiln::jit::JitCapability cap;
  cap.available = true;
  cap.nvrtc_major = 13;
  cap.supported_archs = {75, 80, 86, 89, 90, 100, 120};
  return cap;
}

TEST(TargetChoice, TargetsTheFamilyDoesNotDeclareAreRejectedWithTheFamilysReason) {
  const kiln::project::Family hopper = declared("hopper_wgmma", {"sm_90a"});
  // CC 8.6: sm_86, sm_80 and compute_80 run there, but the family is not built for them.
  auto c = kiln::plan::choose_named_targets(86, kDefault, &hopper);
  EXPECT_TRUE(c.candidates.empty());
  EXPECT_EQ(c.candidates.size() + c.rejected.size(), kDefault.size());
  EXPECT_EQ(reason_of(c, "sm_86"), "family 'hopper_wgmma' is declared only for sm_90a");
  EXPECT_EQ(reason_of(c, "compute_80"), "family 'hopper_wgmma' is declared only for sm_90a");
  // What cannot run keeps the device's reason.
  EXPECT_EQ(reason_of(c, "sm_90a"),
            "sm_90a runs only on CC 9.0 (arch-specific); the device is CC 8.6");
  // CC 9.0: its one declared target, and nothing the family does not declare.
  EXPECT_EQ(order(kiln::plan::choose_named_targets(90, kDefault, &hopper)), V{"sm_90a"});
  // Without a family (a whole archive): the device alone decides, as before.
  EXPECT_EQ(order(kiln::plan::choose_named_targets(86, kDefault)), (V{"sm_86", "sm_80", "compute_80"}));

  const kiln::project::Family scale = declared("scale", {"sm_80+"});
  auto s75 = kiln::plan::choose_named_targets(75, {"sm_75", "sm_80", "compute_75"}, &scale);
  EXPECT_TRUE(s75.candidates.empty());
  EXPECT_EQ(reason_of(s75, "sm_75"), "family 'scale' is declared only for sm_80+");
  EXPECT_EQ(order(kiln::plan::choose_named_targets(86, {"sm_75", "sm_80", "compute_80"}, &scale)),
            (V{"sm_80", "compute_80"}));
}

TEST(TargetChoice, AFamilyNoneOfWhoseTargetsRunsOnTheDeviceSaysSo) {
  const kiln::project::Family hopper = declared("hopper_wgmma", {"sm_90a"});
  EXPECT_EQ(kiln::plan::family_cannot_run(hopper, 86).value_or("<none>"),
            "family 'hopper_wgmma' is declared only for sm_90a, which cannot run on CC 8.6");
  EXPECT_FALSE(kiln::plan::family_cannot_run(hopper, 90));
  EXPECT_TRUE(kiln::plan::family_cannot_run(hopper, 100));
  const kiln::project::Family scale = declared("scale", {"sm_80+"});
  EXPECT_EQ(kiln::plan::family_cannot_run(scale, 75).value_or("<none>"),
            "family 'scale' is declared only for sm_80+, which cannot run on CC 7.5");
  EXPECT_FALSE(kiln::plan::family_cannot_run(scale, 80));
  EXPECT_FALSE(kiln::plan::family_cannot_run(scale, 121));
  // An exact plain target admits its PTX too, which runs on every later arch.
  EXPECT_FALSE(kiln::plan::family_cannot_run(declared("f", {"sm_80"}), 90));
  EXPECT_TRUE(kiln::plan::family_cannot_run(declared("f", {"sm_80"}), 75));
}

TEST(TargetChoice, JitTierRefusesAFamilyNotDeclaredForTheDeviceWithTheJitsOwnWords) {
  const kiln::project::Family hopper = declared("hopper_wgmma", {"sm_90a"});
  auto r = kiln::plan::jit_refusal(nvrtc_for_every_arch(), 86, &hopper);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, kiln::ErrorKind::Unsupported);
  EXPECT_EQ(r->candidate.tier, "jit");
  EXPECT_EQ(r->candidate.target, "sm_86");
  EXPECT_EQ(r->candidate.reason, "family 'hopper_wgmma' is declared only for sm_90a");
  // The JIT's own refusal is the same sentence (one rule, not a copy).
  EXPECT_EQ(kiln::jit::jit_refusal_reason(hopper, 86), r->candidate.reason);
  EXPECT_FALSE(kiln::plan::jit_refusal(nvrtc_for_every_arch(), 90, &hopper));
  // The family's rule holds whatever NVRTC is there: it comes first.
  kiln::jit::JitCapability none;
  none.missing = "libnvrtc.so.13 not found";
  EXPECT_EQ(kiln::plan::jit_refusal(none, 86, &hopper)->candidate.reason,
            "family 'hopper_wgmma' is declared only for sm_90a");
  const kiln::project::Family scale = declared("scale", {"sm_80+"});
  EXPECT_EQ(kiln::plan::jit_refusal(nvrtc_for_every_arch(), 75, &scale)->candidate.reason,
            "family 'scale' is declared only for sm_80+");
  EXPECT_FALSE(kiln::plan::jit_refusal(nvrtc_for_every_arch(), 86, &scale));
}

TEST(TargetChoice, MirrorTierAndAdviceApplyTheFamilysDeclaredTargets) {
  const kiln::project::Family hopper = declared("hopper_wgmma", {"sm_90a"});
  auto m = kiln::plan::choose_mirror_targets(86, "kiln-kernels", "0.1.0", kDefault, "http://m", &hopper);
  EXPECT_TRUE(m.fetch.empty());
  ASSERT_FALSE(m.rejected.empty());
  EXPECT_EQ(m.rejected.back().candidate.reason,
            "no archive of kiln-kernels 0.1.0 can serve family hopper_wgmma on CC 8.6 (the index "
            "lists: sm_80, sm_86, sm_89, sm_90a, sm_100, sm_120, compute_80)");
  auto m90 =
      kiln::plan::choose_mirror_targets(90, "kiln-kernels", "0.1.0", kDefault, "http://m", &hopper);
  EXPECT_EQ(m90.fetch, V{"sm_90a"});

  std::string advice = kiln::plan::fetch_advice(86, "kiln-kernels", "0.1.0", kDefault, "/c", &hopper);
  EXPECT_EQ(advice,
            "family 'hopper_wgmma' is declared only for sm_90a, which cannot run on CC 8.6: no "
            "archive of kiln-kernels 0.1.0 and no JIT can serve it on this device");
  EXPECT_EQ(advice.find("kiln fetch"), std::string::npos) << advice;
  // A family that runs there: the archive the rule picks for it.
  const kiln::project::Family axpy = declared("axpy", {"sm_80+"});
  EXPECT_NE(kiln::plan::fetch_advice(86, "kiln-kernels", "0.1.0", kDefault, "/c", &axpy).find("sm_86"),
            std::string::npos);
}

// ---- the CLI: `kiln resolve` answers by the same rule

struct Resolved {
  kiln::test::RunResult text, json;
};

Resolved resolve_cli(const kiln::test::TempDir& dir, const std::string& source,
                     const std::string& args, const std::string& env = "KILN_OFFLINE=1") {
  const std::string base = "KILN_ARTIFACT_PATH=" + (dir / "none").string() +
                           " KILN_CACHE_DIR=" + (dir / "cache").string() + " " + env + " " +
                           kiln::test::kiln_cli() + " resolve --source " + source + " " + args;
  return {kiln::test::run(base + " 2>/dev/null"),
          kiln::test::run(base + " --explain --json 2>/dev/null")};
}

const nlohmann::json* rejection(const nlohmann::json& j, const std::string& tier,
                                const std::string& target) {
  for (const auto& r : j["rejected"])
    if (r["tier"] == tier && r["target"] == target) return &r;
  return nullptr;
}

TEST(TargetChoiceCli, ResolveNeverPromisesJitForAFamilyNotDeclaredForTheDevice) {
  kiln::test::TempDir dir;
  auto r = resolve_cli(dir, kiln::test::source_dir(), "hopper_wgmma_bn_64 --device sm_86");
  EXPECT_EQ(r.text.exit_code, 6) << r.text.out;  // not found: no tier can serve
  EXPECT_EQ(r.text.out.find("jit sm_86"), std::string::npos) << r.text.out;
  EXPECT_NE(r.text.out.find("hopper_wgmma_bn_64 on sm_86: no source; jit: family 'hopper_wgmma' "
                            "is declared only for sm_90a"),
            std::string::npos)
      << r.text.out;
  EXPECT_EQ(r.json.exit_code, 6) << r.json.out;
  auto j = nlohmann::json::parse(r.json.out);
  EXPECT_TRUE(j["chosen"].is_null()) << r.json.out;
  const nlohmann::json* jit = rejection(j, "jit", "sm_86");
  ASSERT_NE(jit, nullptr) << r.json.out;
  EXPECT_EQ((*jit)["reason"], "family 'hopper_wgmma' is declared only for sm_90a");
}

TEST(TargetChoiceCli, ResolveOfAnotherPackagesFamilyBelowItsTargetsServesNothing) {
  kiln::test::TempDir dir;
  const std::string acme = kiln::test::source_dir() + "/examples/acme-kernels";
  // A mirror configured (never contacted by resolve): acme's release targets are unknown here,
  // yet no archive of a family declared only for sm_80+ can run on CC 7.5.
  auto r = resolve_cli(dir, acme, "scale_dtype_f32 --device sm_75",
                       "KILN_MIRRORS=file://" + (dir / "mirror").string());
  EXPECT_EQ(r.text.exit_code, 6) << r.text.out;
  EXPECT_EQ(r.text.out.find("jit sm_75"), std::string::npos) << r.text.out;
  EXPECT_NE(r.text.out.find("family 'scale' is declared only for sm_80+"), std::string::npos)
      << r.text.out;
  auto j = nlohmann::json::parse(r.json.out);
  EXPECT_TRUE(j["chosen"].is_null()) << r.json.out;
  const nlohmann::json* mirror = rejection(j, "mirror", "");
  ASSERT_NE(mirror, nullptr) << r.json.out;
  EXPECT_EQ((*mirror)["reason"],
            "family 'scale' is declared only for sm_80+, which cannot run on CC 7.5");
  // On a device it is declared for, the same package resolves.
  auto ok = resolve_cli(dir, acme, "scale_dtype_f32 --device sm_86",
                        "KILN_MIRRORS=file://" + (dir / "mirror").string());
  EXPECT_EQ(ok.text.exit_code, 0) << ok.text.out;
}

TEST(TargetChoiceCli, ResolveWithTheReleaseTargetsNeverOffersAMirrorArchiveTheFamilyLacks) {
  if (kiln::plan::release_targets().empty()) GTEST_SKIP() << "this build compiled in no release targets";
  kiln::test::TempDir dir;
  auto r = resolve_cli(dir, kiln::test::source_dir(), "hopper_wgmma_bn_64 --device sm_86",
                       "KILN_MIRRORS=file://" + (dir / "mirror").string());
  EXPECT_EQ(r.text.exit_code, 6) << r.text.out;
  EXPECT_EQ(r.text.out.find("mirror sm_86"), std::string::npos) << r.text.out;
  auto j = nlohmann::json::parse(r.json.out);
  EXPECT_TRUE(j["chosen"].is_null()) << r.json.out;
  for (const auto& t : kiln::plan::release_targets()) {
    const nlohmann::json* m = rejection(j, "mirror", t);
    ASSERT_NE(m, nullptr) << t << "\n" << r.json.out;
  }
}

}  // namespace
