// kiln build's grouped compiles, pure half: front-end passes in the plan and build.ninja, the
// group bound, the fallback plan of a failed pass, shards that never split a pass, the result
// cache's key of a grouped artifact, and the back end's PTX cut (builder/entry_step.hpp).
// No nvcc runs here (tests/integration/build_test.cpp runs the real one).
#include <gtest/gtest.h>

#include <set>

#include "builder/build.hpp"
#include "builder/entry_step.hpp"
#include "kernel_project.hpp"
#include "kiln/error.hpp"
#include "project/registry.hpp"

namespace kiln {
namespace {

format::Target T(const char* s) { return *format::parse_target(s); }

project::Registry registry(const char* text = test::kTwoFamilyRegistry) {
  project::Registry r = project::parse_registry(text, "reg.json");
  for (auto& f : r.families) f.source_hash = std::string(64, 'a');
  for (auto& s : r.specialisations) s.source_hash = std::string(64, 'a');
  return r;
}

builder::BuildPlan grouped(const project::Registry& r, std::vector<format::Target> targets,
                           std::vector<std::string> only = {}, const char* src = "/work/src") {
  return builder::plan_build(r, targets, only, src, builder::CompileMode::Grouped);
}

// A family of n one-entry specialisations (i = 0..n-1).
std::string wide_registry(int n) {
  std::string values;
  for (int i = 0; i < n; ++i) values += (i ? "," : "") + std::to_string(i);
  return R"({"format": 1, "types": {}, "families": [{"name": "wide", "sources": ["wide.cu"],
    "entries": ["kiln::wide<{i}>"], "params": [{"name": "i", "kind": "int", "values": [)" +
         values + R"(]}], "targets": ["sm_80+"]}]})";
}

TEST(GroupedPlan, OnePassPerFamilyAndTargetServesEverySpecialisation) {
  builder::BuildPlan p = grouped(registry(), {T("sm_80"), T("sm_90a")});
  ASSERT_EQ(p.targets.size(), 2u);
  EXPECT_EQ(p.artifact_count(), 9u);  // 4 norm x 2 targets + hopper
  EXPECT_EQ(p.pass_count(), 3u);      // norm on both, hopper on sm_90a
  const builder::PlannedPass& norm = p.targets[0].passes.at(0);
  EXPECT_EQ(norm.family, "norm");
  EXPECT_EQ(norm.ptx, "obj/passes/compute_80/norm.0.ptx");
  EXPECT_EQ(norm.uris.size(), 4u);
  // The front end compiles to PTX of the target's virtual arch, with the family's flags.
  std::string args;
  for (const auto& a : norm.args) args += a + " ";
  // The depfile is written by the device-side preprocessing itself (-Xcompiler), not by a second
  // preprocessing nvcc's -MD would run.
  EXPECT_NE(args.find("-ptx -Werror all-warnings -I/work/src/kernels -DNORM=1 -arch=compute_80 "
                      "-Xcompiler -MD,-MF,obj/passes/compute_80/norm.0.d,-MT,obj/passes/compute_80/"
                      "norm.0.ptx -o obj/passes/compute_80/norm.0.ptx stubs/norm.0.kiln-group.cu"),
            std::string::npos)
      << args;
  // The group's stub instantiates every member once, the sources once.
  const std::string& stub = p.stubs.at(norm.stub);
  EXPECT_EQ(stub.find("#include \"norm.cu\""), stub.rfind("#include \"norm.cu\""));
  for (const char* e : {"kiln::norm<float, 128>", "kiln::norm<float, 256>",
                        "kiln::norm<__half, 128>", "kiln::norm<__half, 256>"})
    EXPECT_NE(stub.find(std::string("(void*)&") + e + ";"), std::string::npos) << stub;
  // Each artifact: its own fatbin from the pass's module, its own entries.
  for (const auto& a : p.targets[0].artifacts) {
    EXPECT_EQ(a.pass, norm.ptx);
    EXPECT_EQ(a.fatbin, "obj/sm_80/" + a.uri + ".fatbin");
    EXPECT_NE(std::find(a.args.begin(), a.args.end(), "--entry"), a.args.end());
  }
  // The per-specialisation plan is still there, unchanged, for the fallback and the comparison.
  builder::BuildPlan ps = builder::plan_build(registry(), {T("sm_80")}, {}, "/work/src");
  EXPECT_EQ(ps.pass_count(), 0u);
  EXPECT_EQ(ps.targets[0].artifacts[0].stub, "stubs/norm_dtype_f16_block_128.kiln-stub.cu");
}

TEST(GroupedPlan, ASassAndAPtxTargetOfOneVirtualArchShareOnePass) {
  builder::BuildPlan p = grouped(registry(), {T("sm_80"), T("compute_80"), T("sm_90a")});
  EXPECT_EQ(p.pass_count(), 3u);  // norm for compute_80 (both targets), norm and hopper for 90a
  ASSERT_EQ(p.targets.size(), 3u);
  EXPECT_EQ(p.targets[0].passes[0].ptx, p.targets[2].passes[0].ptx);  // sm_80 and compute_80
  std::string n = builder::ninja_file(p, "/opt/cuda/bin/nvcc", "", "/opt/kiln/bin/kiln");
  std::size_t edges = 0;
  for (std::size_t i = n.find("build obj/passes/compute_80/norm.0.ptx:"); i != std::string::npos;
       i = n.find("build obj/passes/compute_80/norm.0.ptx:", i + 1))
    ++edges;
  EXPECT_EQ(edges, 1u);
  // One unit of work for shards: both targets' norm artifacts go to one shard.
  std::vector<int> owner = builder::plan_work_shards(p, 3);
  std::vector<std::string> work = builder::plan_work(p);
  for (std::size_t i = 0; i < work.size(); ++i)
    if (work[i].rfind("sm_80/norm", 0) == 0 || work[i].rfind("compute_80/norm", 0) == 0) {
      EXPECT_EQ(owner[i], owner[0]) << work[i];
    }
}

TEST(GroupedPlan, OnlyAndGroupsLeaveEachPassTheWholeGroupSoBytesNeverDependOnThem) {
  builder::BuildPlan all = grouped(registry(), {T("sm_80")});
  builder::BuildPlan one = grouped(registry(), {T("sm_80")}, {"norm_dtype_f16_block_256"});
  ASSERT_EQ(one.artifact_count(), 1u);
  ASSERT_EQ(one.pass_count(), 1u);
  // The one URI is compiled from the same module as in the whole build.
  EXPECT_EQ(one.targets[0].passes[0].args, all.targets[0].passes[0].args);
  EXPECT_EQ(one.stubs.at(one.targets[0].passes[0].stub),
            all.stubs.at(all.targets[0].passes[0].stub));
  EXPECT_EQ(one.targets[0].artifacts[0].args,
            all.targets[0].artifacts[1].args);  // f16_block_256 is second in URI order
}

TEST(GroupedPlan, APassHoldsAtMostTheBoundOfEntries) {
  project::Registry r = registry(wide_registry(150).c_str());
  builder::BuildPlan p = grouped(r, {T("sm_90")});
  const auto& passes = p.targets[0].passes;
  ASSERT_EQ(passes.size(), 3u);  // 64 + 64 + 22
  EXPECT_EQ(passes[0].uris.size(), builder::kMaxPassEntries);
  EXPECT_EQ(passes[1].uris.size(), builder::kMaxPassEntries);
  EXPECT_EQ(passes[2].uris.size(), 150 - 2 * builder::kMaxPassEntries);
  std::set<std::string> seen;
  for (const auto& ps : passes) seen.insert(ps.uris.begin(), ps.uris.end());
  EXPECT_EQ(seen.size(), 150u);
  EXPECT_EQ(p.targets[0].artifacts.size(), 150u);
}

TEST(GroupedPlan, NinjaFileRunsEachPassOnceAndEachBackEndAfterItsPass) {
  builder::BuildPlan p = grouped(registry(), {T("sm_90a")});
  std::string n = builder::ninja_file(p, "/opt/cuda/bin/nvcc", "", "/opt/kiln/bin/kiln");
  EXPECT_NE(n.find("build obj/passes/compute_90a/norm.0.ptx: nvcc_pass stubs/norm.0.kiln-group.cu | "
                   "/opt/cuda/bin/nvcc\n"),
            std::string::npos)
      << n;
  EXPECT_NE(n.find("  depfile = obj/passes/compute_90a/norm.0.d\n"), std::string::npos);
  EXPECT_NE(n.find("build obj/sm_90a/norm_dtype_f32_block_128.fatbin: kiln_entry "
                   "obj/passes/compute_90a/norm.0.ptx | /opt/cuda/bin/nvcc /opt/kiln/bin/kiln\n"),
            std::string::npos)
      << n;
  EXPECT_NE(n.find("command = /opt/kiln/bin/kiln build-entry --nvcc /opt/cuda/bin/nvcc $args"),
            std::string::npos);
  // A pass's line is not a specialisation's: progress counts specialisations.
  EXPECT_NE(n.find("description = PASS $family.$group $target"), std::string::npos);
  EXPECT_FALSE(builder::parse_ninja_status("[1/7] PASS norm.0 sm_90a"));
  EXPECT_NE(n.find("--entry 'kiln::norm<float, 128>' --"), std::string::npos) << n;
}

TEST(GroupedPlan, AFailedPassFallsBackToOneNvccPerSpecialisationOfThatPassOnly) {
  project::Registry r = registry();
  builder::BuildPlan p = grouped(r, {T("sm_90a")});
  builder::BuildPlan u = builder::ungroup(p, r, {"obj/passes/compute_90a/norm.0.ptx"});
  ASSERT_EQ(u.targets[0].passes.size(), 1u);  // hopper's pass stays
  EXPECT_EQ(u.targets[0].passes[0].family, "hopper");
  for (const auto& a : u.targets[0].artifacts) {
    if (a.family == "norm") {
      EXPECT_TRUE(a.pass.empty());
      EXPECT_EQ(a.stub, "stubs/" + a.uri + ".kiln-stub.cu");
      EXPECT_EQ(u.stubs.count(a.stub), 1u);
      EXPECT_EQ(a.args, builder::plan_build(r, {T("sm_90a")}, {a.uri}, "/work/src")
                            .targets[0]
                            .artifacts[0]
                            .args);
    } else {
      EXPECT_FALSE(a.pass.empty());
    }
  }
  EXPECT_EQ(u.stubs.count("stubs/norm.0.kiln-group.cu"), 0u);  // no pass uses it any more
}

TEST(GroupedPlan, ShardsNeverSplitAPassAndCoverEveryPieceOnce) {
  project::Registry r = registry(wide_registry(150).c_str());
  builder::BuildPlan p = grouped(r, {T("sm_80"), T("sm_90")});  // 6 passes
  std::vector<std::string> work = builder::plan_work(p);
  for (int n = 1; n <= 8; ++n) {
    std::vector<int> owner = builder::plan_work_shards(p, n);
    ASSERT_EQ(owner.size(), work.size());
    std::multiset<std::string> seen;
    std::size_t runs = 0;
    for (int i = 1; i <= n; ++i) {
      builder::BuildPlan s = builder::shard_plan(p, {i, n});
      auto w = builder::plan_work(s);
      seen.insert(w.begin(), w.end());
      runs += s.pass_count();
      for (const auto& tp : s.targets)
        for (const auto& a : tp.artifacts) {
          bool has_pass = false;
          for (const auto& ps : tp.passes) has_pass = has_pass || ps.ptx == a.pass;
          EXPECT_TRUE(has_pass) << a.uri;
        }
    }
    EXPECT_EQ(seen, std::multiset<std::string>(work.begin(), work.end())) << "N=" << n;
    EXPECT_EQ(runs, 6u) << "N=" << n;  // each pass in exactly one shard
  }
}

TEST(GroupedPlan, ManifestFlagsNameThePassAndTheBackEndWithoutPaths) {
  builder::BuildPlan p = grouped(registry(), {T("sm_80")}, {"norm_dtype_f32_block_128"});
  auto f = builder::manifest_flags(p.targets[0].artifacts[0], "/work/src");
  std::string s;
  for (const auto& x : f) s += x + " ";
  EXPECT_NE(s.find("-I$KILN_SOURCE/kernels"), std::string::npos) << s;
  EXPECT_NE(s.find(" && build-entry --target sm_80 --pass obj/passes/compute_80/norm.0.ptx"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("-MF"), std::string::npos) << s;
  EXPECT_EQ(s.find("-Xcompiler"), std::string::npos) << s;
  EXPECT_EQ(s.find("/work/src"), std::string::npos) << s;
}

TEST(GroupedPlan, TheKeyFollowsTheGroupAndStaysPathIndependent) {
  project::Registry r = registry();
  builder::CompilerIdentity id{"13.0.88", "gcc 12", ""};
  auto key = [&](const project::Registry& reg, const char* src, const char* out) {
    builder::BuildPlan p = grouped(reg, {T("sm_80")}, {"norm_dtype_f32_block_128"}, src);
    const auto& a = p.targets[0].artifacts[0];
    return builder::compile_key(a, *reg.find(a.uri), p.stubs.at(a.stub), src, out, id).hex;
  };
  std::string k = key(r, "/a/src", "/a/out");
  EXPECT_EQ(k, key(r, "/b/elsewhere", "/b/out"));
  // Another member of the group changes the module, so the key.
  project::Registry more = registry(R"({"format": 1, "types": {"f32": "float", "f16": "__half"},
    "families": [{"name": "norm", "sources": ["norm.cu"], "entries": ["kiln::norm<{dtype}, {block}>"],
     "params": [{"name": "dtype", "kind": "type", "values": ["f32", "f16"]},
                {"name": "block", "kind": "int", "values": [128, 256, 512]}],
     "targets": ["sm_80+"], "flags": ["-DNORM=1"]}]})");
  EXPECT_NE(k, key(more, "/a/src", "/a/out"));
  // And the per-specialisation compile of the same URI is another unit.
  builder::BuildPlan ps = builder::plan_build(r, {T("sm_80")}, {"norm_dtype_f32_block_128"}, "/a/src");
  const auto& a = ps.targets[0].artifacts[0];
  EXPECT_NE(k, builder::compile_key(a, *r.find(a.uri), ps.stubs.at(a.stub), "/a/src", "/a/out", id).hex);
}

// A module as NVVM writes it: two entries sharing a helper function and a shared array, one
// using a string constant and a forward-declared function.
const char* kModule = R"(//
// Generated by NVIDIA NVVM Compiler
//
.version 9.0
.target sm_80
.address_size 64

	// .globl	_Z1av
.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.func _Z6helperv
;
.shared .align 4 .b8 _ZZ7scratchE1s[132];
.global .align 1 .b8 $str[4] = {104, 105, 10, 0};
.global .align 4 .u32 only_b;

.visible .entry _Z1av(
	.param .u64 _Z1av_param_0
)
.maxntid 128, 1, 1
{
	.reg .b64 	%rd<3>;
	// { a comment with a brace
	mov.u64 	%rd1, $str;
	st.shared.f32 	[_ZZ7scratchE1s], %f1;
	{ // callseq 0, 0
	call.uni _Z6helperv, ();
	}
	ret;

}
	// .globl	_Z1bv
.visible .entry _Z1bv()
{
	ld.global.u32 	%r1, [only_b];
	st.shared.f32 	[_ZZ7scratchE1s], %f1;
	ret;

}
.func _Z6helperv()
{
	ret;

}
)";

TEST(PtxSlice, KeepsTheEntryAndWhatItReachesInModuleOrder) {
  std::string a = builder::ptx_slice(kModule, {"_Z1av"});
  EXPECT_EQ(a.find(".version 9.0\n.target sm_80\n.address_size 64\n"),
            a.find(".version 9.0"));
  EXPECT_NE(a.find(".visible .entry _Z1av("), std::string::npos) << a;
  EXPECT_NE(a.find(".func _Z6helperv\n;"), std::string::npos) << a;  // its declaration
  EXPECT_NE(a.find(".func _Z6helperv()\n{"), std::string::npos) << a;  // and definition
  EXPECT_NE(a.find("$str[4] = {104, 105, 10, 0};"), std::string::npos) << a;
  EXPECT_NE(a.find("_ZZ7scratchE1s[132]"), std::string::npos) << a;
  EXPECT_EQ(a.find("_Z1bv"), std::string::npos) << a;
  EXPECT_EQ(a.find("only_b"), std::string::npos) << a;
  EXPECT_EQ(a.find("vprintf"), std::string::npos) << a;  // declared, never called
  EXPECT_LT(a.find("_ZZ7scratchE1s[132]"), a.find(".entry _Z1av"));
  // The other entry: its own global, the shared array, none of a's.
  std::string b = builder::ptx_slice(kModule, {"_Z1bv"});
  EXPECT_NE(b.find("only_b;"), std::string::npos) << b;
  EXPECT_EQ(b.find("$str"), std::string::npos) << b;
  EXPECT_EQ(b.find("_Z6helperv"), std::string::npos) << b;
  // Deterministic, and both entries together are the module's statements less the unused one.
  EXPECT_EQ(a, builder::ptx_slice(kModule, {"_Z1av"}));
  std::string ab = builder::ptx_slice(kModule, {"_Z1av", "_Z1bv"});
  EXPECT_NE(ab.find("_Z1bv"), std::string::npos);
  EXPECT_NE(ab.find("_Z1av"), std::string::npos);
}

TEST(PtxSlice, RefusesWhatItDoesNotUnderstand) {
  EXPECT_THROW(builder::ptx_slice(kModule, {"_Z1cv"}), Error);
  EXPECT_THROW(builder::ptx_slice(".entry x() { ret; }", {"x"}), Error);  // no header
  std::string debug = std::string(kModule) + ".section .debug_str { $L1: .b8 1 }\n";
  EXPECT_THROW(builder::ptx_slice(debug, {"_Z1av"}), Error);
  std::string open = std::string(kModule) + ".visible .entry _Z1cv() {\n";
  EXPECT_THROW(builder::ptx_slice(open, {"_Z1av"}), Error);
}

TEST(PtxSlice, EntriesAreFoundByTheirDemangledNames) {
  std::string m = ".version 9.0\n.target sm_80\n.address_size 64\n"
                  ".visible .entry _ZN4kiln4normIfLi128EEEvv()\n{\n ret;\n}\n"
                  ".visible .entry _ZN4kiln4normI6__halfLi128EEEvv()\n{\n ret;\n}\n";
  EXPECT_EQ(builder::module_entry_symbols(m, {"kiln::norm<__half,128>"}, "x.fatbin", "sm_80"),
            std::vector<std::string>{"_ZN4kiln4normI6__halfLi128EEEvv"});
  try {
    builder::module_entry_symbols(m, {"kiln::norm<double, 128>"}, "x.fatbin", "sm_80");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kiln::norm<double, 128>"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln
