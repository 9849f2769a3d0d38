// kiln build with an NVRTC toolkit, pure half: the plan spelled for NVRTC and ptxas (stubs,
// options, what the manifests record and the result cache keys), the fatbin kiln writes, the
// flag policy, naming toolkits and the targets each builds. No NVRTC runs here
// (tests/integration/nvrtc_build_test.cpp runs the real one).
#include <gtest/gtest.h>

#include "builder/build.hpp"
#include "builder/fatbin_writer.hpp"
#include "builder/nvrtc_backend.hpp"
#include "builder/nvrtc_toolkit.hpp"
#include "builder/toolkit_choice.hpp"
#include "format/fatbin.hpp"
#include "kernel_project.hpp"
#include "kiln/error.hpp"
#include "project/package.hpp"
#include "project/registry.hpp"

namespace kiln {
namespace {

format::Target T(const char* s) { return *format::parse_target(s); }

project::Registry registry() {
  project::Registry r = project::parse_registry(test::kTwoFamilyRegistry, "reg.json");
  for (auto& f : r.families) f.source_hash = std::string(64, 'a');
  for (auto& s : r.specialisations) s.source_hash = std::string(64, 'a');
  return r;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

builder::BuildPlan nvrtc(const project::Registry& r, std::vector<format::Target> targets,
                         builder::CompileMode mode = builder::CompileMode::Grouped) {
  return builder::nvrtc_plan(builder::plan_build(r, targets, {}, "/work/src", mode), r);
}

TEST(NvrtcPlan, APassIsOneNvrtcCompileOfTheGroupWithItsEntriesAsNameExpressions) {
  project::Registry r = registry();
  builder::BuildPlan p = nvrtc(r, {T("sm_90a")});
  const builder::PlannedPass& norm = p.targets[0].passes.at(0);
  EXPECT_EQ(joined(norm.args),
            "nvrtc -std=c++17 -frandom-seed=kiln -I/work/src/kernels -DNORM=1 -arch=compute_90a "
            "-o obj/passes/compute_90a/norm.0.ptx stubs/norm.0.kiln-group.cu "
            "kiln::norm<__half, 128> kiln::norm<__half, 256> kiln::norm<float, 128> "
            "kiln::norm<float, 256>");
  EXPECT_TRUE(norm.depfile.empty());
  // NVRTC has no host variables: the stub includes the sources and names the entries in comments.
  const std::string& stub = p.stubs.at(norm.stub);
  EXPECT_NE(stub.find("#include \"norm.cu\""), std::string::npos) << stub;
  EXPECT_EQ(stub.find("void* kiln_entry"), std::string::npos) << stub;
  EXPECT_NE(stub.find("// norm_dtype_f32_block_128: kiln::norm<float, 128>;"), std::string::npos)
      << stub;
}

TEST(NvrtcPlan, TheManifestRecordsNvrtcThenPtxasWithTheSourceDirectoryHidden) {
  project::Registry r = registry();
  builder::BuildPlan p = nvrtc(r, {T("sm_90a"), T("compute_80")});
  for (const auto& tp : p.targets) {
    for (const auto& a : tp.artifacts) {
      SCOPED_TRACE(a.uri + " " + tp.target.str());
      std::string flags = joined(builder::manifest_flags(a, "/work/src"));
      EXPECT_EQ(flags.rfind("nvrtc -std=c++17 -frandom-seed=kiln -I$KILN_SOURCE/kernels", 0), 0u)
          << flags;
      std::string sm = tp.target.kind == format::Target::Kind::Sass ? "sm_90a" : "sm_80";
      EXPECT_NE(flags.find("&& build-entry --target " + tp.target.str()), std::string::npos);
      EXPECT_NE(flags.find("-- ptxas -arch=" + sm), std::string::npos) << flags;
      EXPECT_EQ(flags.find("/work/src"), std::string::npos) << flags;
    }
  }
}

TEST(NvrtcPlan, OneCompilePerSpecialisationRunsNvrtcThenPtxasOnItsOwnStub) {
  project::Registry r = registry();
  builder::BuildPlan p = nvrtc(r, {T("sm_90a"), T("compute_80")},
                               builder::CompileMode::PerSpecialisation);
  const builder::PlannedArtifact& hop = p.targets[0].artifacts.at(0);
  ASSERT_EQ(hop.uri, "hopper");
  EXPECT_EQ(joined(hop.args),
            "nvrtc -std=c++17 -frandom-seed=kiln -I/work/src/kernels -arch=compute_90a --ptxas "
            "-arch=sm_90a -o obj/sm_90a/hopper.fatbin stubs/hopper.kiln-stub.cu kiln::hop");
  const builder::PlannedArtifact& ptx = p.targets[1].artifacts.at(0);
  EXPECT_EQ(joined(ptx.args).find("--ptxas"), std::string::npos);  // PTX is wrapped as it is
  EXPECT_EQ(p.stubs.at(hop.stub).find("void* kiln_entry"), std::string::npos);
}

TEST(NvrtcPlan, AFailedPassFallsBackToNvrtcCompilesPerSpecialisation) {
  project::Registry r = registry();
  builder::BuildPlan p = nvrtc(r, {T("sm_90a")});
  std::set<std::string> failed = {p.targets[0].passes.at(0).ptx};
  builder::BuildPlan fb = builder::nvrtc_plan(builder::ungroup(p, r, failed), r);
  for (const auto& a : fb.targets[0].artifacts) {
    if (a.family != "norm") continue;
    EXPECT_TRUE(a.pass.empty());
    EXPECT_EQ(a.args.at(0), "nvrtc") << a.uri;
    EXPECT_EQ(fb.stubs.at(a.stub).find("void* kiln_entry"), std::string::npos);
  }
}

TEST(NvrtcPlan, TheResultCacheKeyNamesTheToolkitAndDiffersFromNvccs) {
  project::Registry r = registry();
  builder::BuildPlan nv = nvrtc(r, {T("sm_90a")});
  builder::BuildPlan cc = builder::plan_build(r, {T("sm_90a")}, {}, "/work/src",
                                              builder::CompileMode::Grouped);
  const auto& a = nv.targets[0].artifacts.at(0);
  const auto& spec = *r.find(a.uri);
  builder::CompilerIdentity tk129{"nvrtc 12.9.86 (ptxas 12.9.86)", "none (NVRTC)", ""};
  builder::CompilerIdentity tk128{"nvrtc 12.8.93 (ptxas 12.8.93)", "none (NVRTC)", ""};
  auto key = [&](const builder::BuildPlan& p, const builder::CompilerIdentity& id,
                 const char* src) {
    const auto& x = p.targets[0].artifacts.at(0);
    return builder::compile_key(x, spec, p.stubs.at(x.stub), src, "/out", id).hex;
  };
  EXPECT_NE(key(nv, tk129, "/work/src"), key(nv, tk128, "/work/src"));
  EXPECT_NE(key(nv, tk129, "/work/src"), key(cc, tk129, "/work/src"));
  // No absolute path: another tree of the same sources hits the same entry.
  builder::BuildPlan other = builder::nvrtc_plan(
      builder::plan_build(r, {T("sm_90a")}, {}, "/elsewhere", builder::CompileMode::Grouped), r);
  EXPECT_EQ(key(nv, tk129, "/work/src"), key(other, tk129, "/elsewhere"));
}

TEST(NvrtcFlags, FamilyFlagsForPtxasAreHandedToPtxas) {
  EXPECT_EQ(joined(builder::ptxas_options({}, T("sm_90a"))), "-arch=sm_90a");
  EXPECT_EQ(joined(builder::ptxas_options({}, T("compute_80"))), "-arch=sm_80");
  EXPECT_EQ(joined(builder::ptxas_options({"-DX=1", "-Xptxas", "-O2,-v", "-maxrregcount=64",
                                           "--ptxas-options=-dlcm=cg"},
                                          T("sm_100f"))),
            "-arch=sm_100f -O2 -v --maxrregcount=64 -dlcm=cg");
}

TEST(NvrtcFlags, AWarningInTheLogIsAnError) {
  EXPECT_TRUE(builder::nvrtc_log_warns(
      "stubs/x.cu(3): warning #177-D: variable \"u\" was declared but never referenced\n"));
  EXPECT_FALSE(builder::nvrtc_log_warns(""));
  EXPECT_FALSE(builder::nvrtc_log_warns("a remark about warnings\n"));
}

// A cubin's ELF header (e_ident, e_flags) as ptxas 12.9 writes it for sm_`sm`.
std::string cuda12_cubin(int sm, std::size_t size) {
  std::string e(size, '\0');
  e.replace(0, 4, "\x7f" "ELF");
  e[4] = 2;
  e[5] = 1;
  e[6] = 1;
  e[7] = 0x33;
  e[8] = 7;
  e[0x30] = static_cast<char>(sm);
  e[0x32] = static_cast<char>(sm);
  return e;
}

TEST(FatbinWriter, ACubinIsOneElfImageOfItsTargetPaddedToEightBytes) {
  std::string cubin = cuda12_cubin(90, 203);
  std::string fb = builder::fatbin_of_cubin(cubin, T("sm_90a"));
  auto images = format::parse_fatbin(fb, "x.fatbin");
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0].target(), "sm_90a");
  EXPECT_FALSE(images[0].compressed);
  EXPECT_EQ(images[0].size, 208u);
  EXPECT_EQ(format::fatbin_image_payload(fb, images[0]).substr(0, 203), cubin);
  EXPECT_EQ(fb.size(), 16u + 64u + 208u);
  EXPECT_EQ(builder::fatbin_of_cubin(cubin, T("sm_90a")), fb);  // deterministic
  EXPECT_EQ(format::parse_fatbin(builder::fatbin_of_cubin(cuda12_cubin(100, 64), T("sm_100f")),
                                 "f")[0]
                .target(),
            "sm_100f");
  EXPECT_THROW(builder::fatbin_of_cubin(cubin, T("sm_80")), Error);
}

// A cubin of ptxas 12.9 for sm_100f with a .nv.compat section holding `compat`: the ELF header,
// the section's bytes, the section names, then the section headers (null, .nv.compat,
// .shstrtab).
std::string cubin_with_compat(const std::string& compat) {
  std::string e = cuda12_cubin(100, 64);
  auto put = [](std::string& out, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  const std::uint64_t compat_off = e.size();
  e += compat;
  const std::uint64_t names_off = e.size();
  const std::string names = std::string("\0.nv.compat\0.shstrtab\0", 23);
  e += names;
  while (e.size() % 8) e += '\0';
  const std::uint64_t shoff = e.size();
  auto section = [&](std::uint32_t name, std::uint32_t type, std::uint64_t off, std::uint64_t size) {
    std::string h;
    put(h, name, 4);
    put(h, type, 4);
    put(h, 0, 8);
    put(h, 0, 8);
    put(h, off, 8);
    put(h, size, 8);
    put(h, 0, 4);
    put(h, 0, 4);
    put(h, 4, 8);
    put(h, 0, 8);
    return h;
  };
  e += section(0, 0, 0, 0);
  e += section(1, 0x70000086, compat_off, compat.size());
  e += section(12, 3, names_off, names.size());
  for (int i = 0; i < 8; ++i) e[0x28 + i] = static_cast<char>((shoff >> (8 * i)) & 0xff);
  e[0x3a] = 64;  // e_shentsize
  e[0x3c] = 3;   // e_shnum
  e[0x3e] = 2;   // e_shstrndx
  return e;
}

TEST(FatbinWriter, ACubinsCompatibilityAttributesAreCopiedIntoTheEntryAsFatbinaryDoes) {
  // The attributes ptxas 12.9 wrote for an sm_100f cubin, and the bytes fatbinary made of them.
  const std::string compat("\x02\x02\x01\x00\x02\x05\x05\x00\x02\x03\x00\x00\x02\x06\x01\x00", 16);
  const std::string cubin = cubin_with_compat(compat);
  EXPECT_EQ(format::elf_section(cubin, ".nv.compat"), std::optional<std::string>(compat));
  EXPECT_EQ(format::elf_section(cubin, ".nv.info"), std::nullopt);
  std::string fb = builder::fatbin_of_cubin(cubin, T("sm_100f"));
  auto images = format::parse_fatbin(fb, "f.fatbin");
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0].target(), "sm_100f");
  EXPECT_EQ(format::fatbin_image_payload(fb, images[0]).substr(0, cubin.size()), cubin);
  EXPECT_EQ(fb.substr(16 + 4, 4), std::string("\x60\x00\x00\x00", 4));   // header 96 bytes
  EXPECT_EQ(fb.substr(16 + 20, 4), std::string("\x40\x00\x00\x00", 4));  // options at 64
  EXPECT_EQ(fb.substr(16 + 40, 4), std::string("\x11\x00\x20\x01", 4));  // f, attributes
  EXPECT_EQ(fb.substr(16 + 64, 32),
            std::string("\x48\x00\x00\x00\x10\x00\x00\x00"
                        "\x00\x02\x02\x01\x00\x02\x05\x05\x00\x02\x03\x00\x00\x02\x06\x01"
                        "\x00\x00\x00\x00\x00\x00\x00\x00",
                        32));
}

TEST(FatbinWriter, PtxIsOnePtxImageItsEntriesReadable) {
  const std::string ptx =
      "//\n// Generated by NVIDIA NVVM Compiler\n.version 8.8\n.target sm_80\n.address_size 64\n\n"
      ".visible .entry _Z1kPf(\n.param .u64 _Z1kPf_param_0\n)\n{\nret;\n}\n";
  std::string fb = builder::fatbin_of_ptx(ptx, T("compute_80"));
  auto images = format::parse_fatbin(fb, "p.fatbin");
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0].target(), "compute_80");
  EXPECT_EQ(format::ptx_entry_names(format::fatbin_image_payload(fb, images[0])),
            std::vector<std::string>{"_Z1kPf"});
  EXPECT_EQ(fb.substr(16 + 24, 4), std::string("\x08\x00\x08\x00", 4));  // PTX ISA 8.8
  EXPECT_THROW(builder::fatbin_of_ptx(".target sm_80\n", T("compute_80")), Error);
}

TEST(ToolkitNames, AListOfReleasesNvrtcDirectoriesAndPaths) {
  EXPECT_EQ(builder::parse_toolkit_list("13.0, nvrtc:/opt/nvrtc-12.9\n# old\n/usr/local/cuda-12.4",
                                        "--toolkits"),
            (std::vector<std::string>{"13.0", "nvrtc:/opt/nvrtc-12.9", "/usr/local/cuda-12.4"}));
  for (const char* bad : {"", "cuda13", "13", "13.0,13.0", "nvrtc:"}) {
    try {
      builder::parse_toolkit_list(bad, "--toolkits");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage) << bad;
      EXPECT_NE(std::string(e.what()).find("--toolkits"), std::string::npos) << e.what();
    }
  }
}

TEST(ToolkitNames, AReleaseWithNoNvccOfItNamesWhereItLooked) {
  builder::ToolkitSearch s;
  s.default_root = "/nonexistent/cuda";
  s.path = "/nonexistent/bin";
  try {
    builder::find_toolkit("11.8", s);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    std::string m = e.what();
    EXPECT_NE(m.find("no nvcc of CUDA 11.8 found"), std::string::npos) << m;
    EXPECT_NE(m.find("/usr/local/cuda-11.8/bin/nvcc (none)"), std::string::npos) << m;
    EXPECT_NE(m.find("nvrtc:DIR"), std::string::npos) << m;
  }
}

TEST(ToolkitTargets, ATargetTheToolkitDoesNotBuildIsLeftOutWithALine) {
  builder::ToolkitInfo tk;
  tk.version = "13.0";
  tk.full_version = "13.0.88";
  tk.codes = {"compute_80", "sm_100", "sm_80", "sm_90a"};
  auto split = builder::toolkit_targets(tk, {T("sm_70"), T("sm_80"), T("sm_90a"), T("compute_80")});
  EXPECT_EQ(split.build, (std::vector<format::Target>{T("sm_80"), T("sm_90a"), T("compute_80")}));
  EXPECT_EQ(split.left_out,
            std::vector<std::string>{"CUDA 13.0 (nvcc 13.0.88) does not build sm_70; left out"});
}

TEST(NvrtcToolkitFacts, CodesAreWhatBothNvrtcAndPtxasKnow) {
  EXPECT_EQ(builder::nvrtc_codes({"compute_90a", "lto_90", "sm_90a", "sm_90", "sm_110", "sm_80"},
                                 {80, 90}),
            (std::vector<std::string>{"compute_90a", "sm_80", "sm_90", "sm_90a"}));
  EXPECT_EQ(builder::nvrtc_version_from_json(R"({"cuda_nvrtc": {"version": "12.9.86"}})"),
            std::optional<std::string>("12.9.86"));
  EXPECT_EQ(builder::nvrtc_version_from_json(R"({"cuda": {"version": "12.9.86"}})"), std::nullopt);
  EXPECT_EQ(builder::nvrtc_version_from_json("not json"), std::nullopt);
}

TEST(PackageFile, ToolkitsAreReadAndAnEmptyListRefused) {
  auto pf = project::parse_package_file(
      R"({"format": 1, "name": "p", "toolkits": ["13.0", "nvrtc:toolkits/12.9"]})", "package.json");
  EXPECT_EQ(pf.toolkits, (std::vector<std::string>{"13.0", "nvrtc:toolkits/12.9"}));
  EXPECT_THROW(project::parse_package_file(R"({"format": 1, "name": "p", "toolkits": []})", "p"),
               Error);
}

}  // namespace
}  // namespace kiln
