// kiln build's pure half: planning, build.ninja text, target checks against a fake toolkit.
// No nvcc runs here (tests/integration/build_test.cpp runs the real one).
#include <gtest/gtest.h>

#include <algorithm>

#include "builder/build.hpp"
#include "builder/toolkit.hpp"
#include "kernel_project.hpp"
#include "builder/build_options.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "plan/target_choice.hpp"
#include "project/registry.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

using test::TempDir;
using test::write_file;

const char* kRegistry = test::kTwoFamilyRegistry;

// The project the kiln build runs below build: acme-norm 0.1.0 with this file's registry.
test::KernelProject acme_norm() {
  return {"acme-norm",
          "0.1.0",
          kRegistry,
          "",
          {{"norm.cu", "// norm\n"}, {"hopper.cu", "// hopper\n"}}};
}

project::Registry registry() {
  project::Registry r = project::parse_registry(kRegistry, "reg.json");
  for (auto& f : r.families) f.source_hash = std::string(64, 'a');
  for (auto& s : r.specialisations) s.source_hash = std::string(64, 'a');
  return r;
}

format::Target T(const char* s) { return *format::parse_target(s); }

// What nvcc 13.0 lists; the a/f variants come from --help's allowed values.
builder::ToolkitInfo cuda13() {
  builder::ToolkitInfo tk;
  tk.root = "/opt/cuda";
  tk.nvcc = "/opt/cuda/bin/nvcc";
  tk.version = "13.0";
  tk.full_version = "13.0.88";
  tk.codes = builder::supported_codes({"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_75",
                              "compute_80", "compute_90", "compute_100", "compute_120"},
                             {"compute_90a", "sm_90a", "sm_100a", "sm_100f", "sm_120f", "lto_90a"});
  return tk;
}

class FakeToolkit : public builder::Toolkit {
 public:
  explicit FakeToolkit(builder::ToolkitInfo i) : info_(std::move(i)) {}
  const builder::ToolkitInfo& info() override {
    ++probes;
    return info_;
  }
  int probes = 0;

 private:
  builder::ToolkitInfo info_;
};

std::string expect_error(ErrorKind kind, const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

std::vector<std::string> uris(const builder::TargetPlan& tp) {
  std::vector<std::string> out;
  for (const auto& a : tp.artifacts) out.push_back(a.uri);
  return out;
}

TEST(BuildPlan, FamilyOutsideItsTargetRulesIsSkippedWithTheReason) {
  builder::BuildPlan p = builder::plan_build(registry(), {T("sm_90a"), T("sm_80")}, {}, "/src");
  ASSERT_EQ(p.targets.size(), 2u);
  EXPECT_EQ(p.targets[0].target.str(), "sm_80");  // Target order, not argument order
  EXPECT_EQ(uris(p.targets[0]),
            (std::vector<std::string>{"norm_dtype_f16_block_128", "norm_dtype_f16_block_256",
                                      "norm_dtype_f32_block_128", "norm_dtype_f32_block_256"}));
  ASSERT_EQ(p.targets[0].skipped.size(), 1u);
  EXPECT_EQ(p.targets[0].skipped[0].family, "hopper");
  EXPECT_EQ(p.targets[0].skipped[0].reason, "supports only sm_90a");
  EXPECT_EQ(p.targets[1].target.str(), "sm_90a");
  EXPECT_EQ(p.targets[1].artifacts.size(), 5u);
  EXPECT_TRUE(p.targets[1].skipped.empty());
  EXPECT_EQ(p.artifact_count(), 9u);
}

TEST(BuildPlan, ComputeTargetCompilesToPtxOfThatArch) {
  builder::BuildPlan p = builder::plan_build(registry(), {T("compute_80")}, {"norm_dtype_f32_block_128"}, "/src");
  ASSERT_EQ(p.artifact_count(), 1u);
  const auto& args = p.targets[0].artifacts[0].args;
  auto g = std::find(args.begin(), args.end(), "-gencode");
  ASSERT_NE(g, args.end());
  EXPECT_EQ(*(g + 1), "arch=compute_80,code=compute_80");
  EXPECT_EQ(p.targets[0].artifacts[0].fatbin, "obj/compute_80/norm_dtype_f32_block_128.fatbin");
}

TEST(BuildPlan, SassTargetNeverBuildsAnotherArch) {
  EXPECT_EQ(builder::gencode_for(T("sm_90a")), "arch=compute_90a,code=sm_90a");
  EXPECT_EQ(builder::gencode_for(T("sm_86")), "arch=compute_86,code=sm_86");
  EXPECT_EQ(builder::gencode_for(T("sm_100f")), "arch=compute_100f,code=sm_100f");
}

TEST(BuildPlan, OnlyMatchesFamilyNamesAndUris) {
  builder::BuildPlan byfam = builder::plan_build(registry(), {T("sm_90a")}, {"hop*"}, "/src");
  EXPECT_EQ(uris(byfam.targets[0]), std::vector<std::string>{"hopper"});
  builder::BuildPlan byuri = builder::plan_build(registry(), {T("sm_80")}, {"norm_*_block_256"}, "/src");
  EXPECT_EQ(uris(byuri.targets[0]),
            (std::vector<std::string>{"norm_dtype_f16_block_256", "norm_dtype_f32_block_256"}));
  // Families not asked for are neither built nor reported as skipped.
  EXPECT_TRUE(byuri.targets[0].skipped.empty());
}

TEST(BuildPlan, OnlyGlobMatchingNothingIsNotFoundNamingTheGlob) {
  std::string msg = expect_error(ErrorKind::NotFound,
                                 [] { builder::plan_build(registry(), {T("sm_80")}, {"nrom*"}, "/src"); });
  EXPECT_NE(msg.find("'nrom*'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("norm"), std::string::npos) << msg;
}

TEST(BuildPlan, AskingForFamilyOnlyOnTargetsItCannotSupportIsUnsupported) {
  std::string msg = expect_error(ErrorKind::Unsupported, [] {
    builder::plan_build(registry(), {T("sm_80"), T("sm_86")}, {"hopper"}, "/src");
  });
  EXPECT_NE(msg.find("hopper supports only sm_90a"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sm_80,sm_86"), std::string::npos) << msg;
}

TEST(BuildPlan, StubIncludesSourcesAndTakesEveryEntryAddress) {
  project::Registry r = registry();
  std::string stub = builder::stub_source(*r.family("norm"), *r.find("norm_dtype_f16_block_256"));
  EXPECT_NE(stub.find("#include \"norm.cu\"\n"), std::string::npos);
  EXPECT_NE(stub.find("void* kiln_entry_0 = (void*)&kiln::norm<__half, 256>;\n"), std::string::npos)
      << stub;
}

TEST(BuildPlan, NinjaFileHasOneEdgePerArtifactWithDepfileAndNvccAsInput) {
  builder::BuildPlan p = builder::plan_build(registry(), {T("sm_80"), T("sm_90a")}, {}, "/work/src");
  std::string n = builder::ninja_file(p, "/opt/cuda/bin/nvcc");
  size_t edges = 0;
  for (size_t i = n.find("\nbuild "); i != std::string::npos; i = n.find("\nbuild ", i + 1))
    ++edges;
  EXPECT_EQ(edges, 9u);
  EXPECT_NE(
      n.find(
          "build obj/sm_90a/hopper.fatbin: nvcc stubs/hopper.kiln-stub.cu | /opt/cuda/bin/nvcc\n"),
      std::string::npos)
      << n;
  EXPECT_NE(n.find("  depfile = obj/sm_90a/hopper.d\n"), std::string::npos);
  EXPECT_NE(n.find("deps = gcc"), std::string::npos);
  EXPECT_NE(n.find("description = NVCC $uri $target"), std::string::npos);
  EXPECT_NE(
      n.find("-I/work/src/kernels -DNORM=1 -gencode arch=compute_80,code=sm_80 -MD -MF "
             "obj/sm_80/norm_dtype_f16_block_128.d -o obj/sm_80/norm_dtype_f16_block_128.fatbin "
             "stubs/norm_dtype_f16_block_128.kiln-stub.cu"),
      std::string::npos)
      << n;
  // Same plan, same bytes: the file is rewritten only when the plan changes.
  EXPECT_EQ(n, builder::ninja_file(builder::plan_build(registry(), {T("sm_90a"), T("sm_80")}, {}, "/work/src"),
                          "/opt/cuda/bin/nvcc"));
}

TEST(BuildPlan, NinjaFileEscapesPathsWithSpacesAndDollars) {
  builder::BuildPlan p = builder::plan_build(registry(), {T("sm_90a")}, {"hopper"}, "/my src/$x");
  std::string n = builder::ninja_file(p, "/opt/my cuda/bin/nvcc");
  EXPECT_NE(n.find("| /opt/my$ cuda/bin/nvcc\n"), std::string::npos) << n;
  EXPECT_NE(n.find("command = '/opt/my cuda/bin/nvcc' $args"), std::string::npos) << n;
  EXPECT_NE(n.find("'-I/my src/$$x/kernels'"), std::string::npos) << n;
}

TEST(BuildPlan, ManifestFlagsAreThePortableArgvWithoutDepfileFlags) {
  builder::BuildPlan p = builder::plan_build(registry(), {T("sm_80")}, {"norm_dtype_f32_block_128"}, "/work/src");
  auto f = builder::manifest_flags(p.targets[0].artifacts[0], "/work/src");
  EXPECT_EQ(f, (std::vector<std::string>{"-std=c++17", "-O3", "--fatbin", "--compress-mode=none",
                                         "-Werror", "all-warnings", "-I$KILN_SOURCE/kernels",
                                         "-DNORM=1", "-gencode", "arch=compute_80,code=sm_80", "-o",
                                         "obj/sm_80/norm_dtype_f32_block_128.fatbin",
                                         "stubs/norm_dtype_f32_block_128.kiln-stub.cu"}));
}

TEST(Toolkit, ParsesNvccVersionLine) {
  auto v = builder::parse_nvcc_version(
      "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
      "Build cuda_13.0.r13.0/compiler.36424714_0\n");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->first, "13.0");
  EXPECT_EQ(v->second, "13.0.88");
  EXPECT_FALSE(builder::parse_nvcc_version("gcc (Debian 12.2.0-14) 12.2.0"));
}

TEST(Toolkit, ReadsAllowedGpuCodesFromHelpParagraph) {
  const char* help =
      "--gpu-architecture <arch>   (-arch)\n        Allowed values for this option:  'sm_99',"
      "'compute_99'.\n\n--gpu-code <code>,...  (-code)\n        Specify the name.\n"
      "        Allowed values for this option:  'compute_90a','lto_90a',\n"
      "        'sm_100f','sm_90','sm_90a'.\n\n--generate-code <spec>  (-gencode)\n"
      "        Allowed keywords for this option:  'arch','code'.\n";
  EXPECT_EQ(builder::parse_allowed_values(help, "--gpu-code"),
            (std::vector<std::string>{"compute_90a", "lto_90a", "sm_100f", "sm_90", "sm_90a"}));
  EXPECT_TRUE(builder::parse_allowed_values(help, "--no-such-option").empty());
}

TEST(Toolkit, SuffixedTargetCountsOnlyWhenItsBaseArchIsListed) {
  auto codes = builder::supported_codes({"sm_90", "compute_90"}, {"sm_90a", "sm_100a", "lto_90a"});
  EXPECT_EQ(codes, (std::vector<std::string>{"sm_90", "sm_90a", "compute_90"}));
}

TEST(Toolkit, UnsupportedTargetIsNamedWithWhatTheToolkitBuilds) {
  builder::ToolkitInfo tk = cuda13();
  EXPECT_NO_THROW(builder::check_targets(tk, {T("sm_80"), T("sm_90a"), T("compute_80"), T("sm_100f")}));
  for (const char* bad : {"sm_60", "sm_999", "sm_80a", "compute_70"}) {
    std::string msg = expect_error(ErrorKind::Unsupported, [&] { builder::check_targets(tk, {T(bad)}); });
    EXPECT_NE(msg.find(std::string("target ") + bad + " is not supported"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("sm_75, sm_80, sm_86, sm_90, sm_90a"), std::string::npos) << msg;
    EXPECT_NE(msg.find("/opt/cuda/bin/nvcc"), std::string::npos) << msg;
  }
}

TEST(Toolkit, MissingCudaHomeNvccNamesTheVariable) {
  builder::ToolkitSearch s;
  s.cuda_home = "/nonexistent/cuda";
  builder::NvccToolkit tk(s);
  std::string msg = expect_error(ErrorKind::Unsupported, [&] { tk.info(); });
  EXPECT_NE(msg.find("CUDA_HOME is set to '/nonexistent/cuda'"), std::string::npos) << msg;
}

TEST(Toolkit, NoToolkitAnywhereNamesEveryPlaceLooked) {
  builder::ToolkitSearch s;
  s.default_root = "/nonexistent/cuda";
  s.path = "/nonexistent/bin";
  builder::NvccToolkit tk(s);
  std::string msg = expect_error(ErrorKind::Unsupported, [&] { tk.info(); });
  EXPECT_NE(msg.find("/nonexistent/cuda/bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("PATH (/nonexistent/bin)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("set CUDA_HOME"), std::string::npos) << msg;
}

TEST(BuildJobs, CappedByCoresAndMemoryAndOverriddenByJobs) {
  const std::uint64_t gib = std::uint64_t{1} << 30;
  EXPECT_EQ(builder::choose_jobs(16, 64 * gib, gib, std::nullopt), 16);
  EXPECT_EQ(builder::choose_jobs(16, 3 * gib, gib, std::nullopt), 3);
  EXPECT_EQ(builder::choose_jobs(16, gib / 2, gib, std::nullopt), 1);
  EXPECT_EQ(builder::choose_jobs(2, std::nullopt, gib, std::nullopt), 2);
  EXPECT_EQ(builder::choose_jobs(0, std::nullopt, gib, std::nullopt), 1);
  EXPECT_EQ(builder::choose_jobs(2, gib, gib, 7), 7);
  expect_error(ErrorKind::Usage, [] { builder::choose_jobs(2, std::nullopt, 1, 0); });
}

TEST(BuildJobs, ReadsMemAvailableInBytes) {
  EXPECT_EQ(builder::parse_mem_available("MemTotal:       24000000 kB\nMemAvailable:   2048 kB\n"),
            std::optional<std::uint64_t>(2048u * 1024u));
  EXPECT_FALSE(builder::parse_mem_available("MemTotal: 1 kB\n"));
}

TEST(BuildProgress, ParsesNinjaStatusLinesOnly) {
  auto s = builder::parse_ninja_status("[3/8] NVCC norm_dtype_f16_block_128 sm_90a");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->finished, 3);
  EXPECT_EQ(s->total, 8);
  EXPECT_EQ(s->uri, "norm_dtype_f16_block_128");
  EXPECT_EQ(s->target, "sm_90a");
  EXPECT_FALSE(builder::parse_ninja_status("ninja: no work to do."));
  EXPECT_FALSE(builder::parse_ninja_status("[x/8] NVCC a b"));
  EXPECT_FALSE(builder::parse_ninja_status("stubs/x.cu(3): error: expected a ';'"));
}

TEST(BuildTargets, TargetsFileAllowsCommentsAndNewlines) {
  auto t = builder::parse_targets_file("# release list\nsm_80, sm_90a # hopper\ncompute_80\n", "t.txt");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[2].str(), "compute_80");
  std::string msg =
      expect_error(ErrorKind::Usage, [] { builder::parse_targets_file("sm_80,sm90\n", "ci/targets.txt"); });
  EXPECT_NE(msg.find("ci/targets.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'sm90'"), std::string::npos) << msg;
  expect_error(ErrorKind::Usage, [] { builder::parse_targets_file("# nothing\n", "t.txt"); });
}

std::vector<std::string> names(const std::vector<format::Target>& targets) {
  std::vector<std::string> out;
  for (const auto& t : targets) out.push_back(t.str());
  return out;
}

// Every source given: each test takes away the one before, and the next one answers.
builder::BuildTargetSources every_source() {
  builder::BuildTargetSources s;
  s.flag = "sm_90a,sm_80";
  s.project = {T("sm_86"), T("compute_80")};
  s.targets_file = "sm_89\n# a comment\nsm_120\n";
  s.targets_file_path = "/p/ci/targets.txt";
  s.compiled = {"sm_100", "sm_80"};
  return s;
}

TEST(BuildTargets, TheFlagThenThePackageFileThenTheTargetsFileThenTheCompiledList) {
  builder::BuildTargetSources s = every_source();
  builder::BuildTargets t = builder::choose_build_targets(s);
  EXPECT_EQ(names(t.targets), (std::vector<std::string>{"sm_90a", "sm_80"}));
  EXPECT_EQ(t.origin, "--targets");
  s.flag.clear();
  t = builder::choose_build_targets(s);
  EXPECT_EQ(names(t.targets), (std::vector<std::string>{"sm_86", "compute_80"}));
  EXPECT_EQ(t.origin, "registry/package.json");
  s.project.clear();
  t = builder::choose_build_targets(s);
  EXPECT_EQ(names(t.targets), (std::vector<std::string>{"sm_89", "sm_120"}));
  EXPECT_EQ(t.origin, "ci/targets.txt");
  s.targets_file.reset();
  t = builder::choose_build_targets(s);
  EXPECT_EQ(names(t.targets), (std::vector<std::string>{"sm_100", "sm_80"}));
  EXPECT_EQ(t.origin, "the release list compiled into kiln");
}

TEST(BuildTargets, NoListAnywhereIsAUsageErrorNamingEachPlaceLooked) {
  builder::BuildTargetSources s = every_source();
  s.flag.clear();
  s.project.clear();
  s.targets_file.reset();
  s.compiled.clear();
  std::string msg = test::error_of(ErrorKind::Usage, [&] { builder::choose_build_targets(s); });
  for (const char* named :
       {"--targets", "registry/package.json", "/p/ci/targets.txt", "KILN_RELEASE_TARGETS"})
    EXPECT_NE(msg.find(named), std::string::npos) << named << ": " << msg;
}

TEST(BuildTargets, AMalformedListNamesWhereItCameFrom) {
  builder::BuildTargetSources s = every_source();
  s.flag.clear();
  s.project.clear();
  s.targets_file = "sm_80\nsm90a\n";
  std::string msg = test::error_of(ErrorKind::Usage, [&] { builder::choose_build_targets(s); });
  EXPECT_EQ(msg.rfind("/p/ci/targets.txt: 'sm90a' is not a target", 0), 0u) << msg;
  s.targets_file.reset();
  s.compiled = {"sm_80", "sm90a"};
  msg = test::error_of(ErrorKind::Usage, [&] { builder::choose_build_targets(s); });
  EXPECT_EQ(msg.rfind("the release list compiled into kiln (KILN_RELEASE_TARGETS): 'sm90a'", 0), 0u)
      << msg;
}

TEST(BuildTargets, SourceDateEpochMustBeAnInteger) {
  EXPECT_EQ(builder::parse_source_date_epoch("1700000000"), 1700000000);
  expect_error(ErrorKind::Usage, [] { builder::parse_source_date_epoch("yesterday"); });
  expect_error(ErrorKind::Usage, [] { builder::parse_source_date_epoch("-5"); });
}

TEST(BuildTargets, ASourceTreeThatIsNoDirectoryIsNotFoundBeforeAnyList) {
  TempDir dir;
  write_file(dir / "file", "x");
  for (const std::string flag : {"", "sm_80"}) {
    std::string msg = test::error_of(ErrorKind::NotFound, [&] {
      builder::project_build_targets(flag, (dir / "file").string(), {"sm_80"});
    });
    EXPECT_NE(msg.find("is not a directory"), std::string::npos) << msg;
  }
  EXPECT_EQ(builder::project_build_targets("sm_90a", dir.path().string(), {}).origin, "--targets");
}

TEST(BuildOptionsFromFlags, DistDefaultsUnderOutAShardToItsOwnDirectory) {
  builder::BuildFlags f;
  f.out = "/o";
  builder::BuildOptions o = builder::build_options(f, "/src", {T("sm_80")}, runtime::Environment{}, 42);
  EXPECT_EQ(o.dist_dir, "/o/dist");
  EXPECT_EQ(o.source_dir, "/src");
  EXPECT_EQ(o.build_time, 42);
  EXPECT_FALSE(o.jobs);
  f.shard = builder::ShardSpec{2, 3};
  EXPECT_EQ(builder::build_options(f, "/src", {}, runtime::Environment{}, 0).dist_dir, "/o/shard-2-of-3");
  f.dist = "/d";
  EXPECT_EQ(builder::build_options(f, "/src", {}, runtime::Environment{}, 0).dist_dir, "/d");
}

TEST(BuildOptionsFromFlags, FlagsWinOverTheEnvironmentAndNoCacheDropsItsCache) {
  runtime::Environment env;
  env.compiler_launcher = "ccache";
  env.build_cache = "/env-cache";
  env.loader.ca_bundle = "/ca.pem";
  env.nvcc_ccbin = "g++-12";
  builder::BuildFlags f;
  builder::BuildOptions o = builder::build_options(f, "/src", {}, env, 0);
  EXPECT_EQ(o.launcher, "ccache");
  EXPECT_EQ(o.cache, "/env-cache");
  EXPECT_EQ(o.cache_ca_bundle, "/ca.pem");
  EXPECT_EQ(o.nvcc_ccbin, "g++-12");
  f.launcher = "sccache";
  f.cache = "/flag-cache";
  f.jobs = 3;
  o = builder::build_options(f, "/src", {}, env, 0);
  EXPECT_EQ(o.launcher, "sccache");
  EXPECT_EQ(o.cache, "/flag-cache");
  EXPECT_EQ(o.jobs, 3);
  f.cache.clear();
  f.no_cache = true;
  EXPECT_EQ(builder::build_options(f, "/src", {}, env, 0).cache, "");
}

TEST(BuildOptionsFromFlags, SourceDateEpochIsTheBuildTimeBeforeGit) {
  runtime::Environment env;
  env.source_date_epoch = "1700000000";
  builder::BuildTime t = builder::source_build_time("/nonexistent", env);
  EXPECT_EQ(t.seconds, 1700000000);
  EXPECT_EQ(t.origin, "SOURCE_DATE_EPOCH");
  env.source_date_epoch.clear();
  env.path.clear();  // no git: the fixed time
  EXPECT_EQ(builder::source_build_time("/nonexistent", env).seconds, builder::kFixedBuildTime);
}

TEST(BuildEntries, MatchesEachEntryBySymbolDemangledName) {
  auto demangle = [](const std::string& s) {
    return s == "_Z1a" ? std::string("kiln::norm<float, 128>") : std::string("kiln::other");
  };
  auto e = builder::match_entries({"kiln::norm<float,128>"}, {"_Z1b", "_Z1a"}, demangle, "u", "sm_80");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].name, "kiln::norm<float,128>");
  EXPECT_EQ(e[0].symbol, "_Z1a");
  std::string msg = expect_error(ErrorKind::Format, [&] {
    builder::match_entries({"kiln::norm<__half, 128>"}, {"_Z1b"}, demangle, "norm_x", "sm_80");
  });
  EXPECT_NE(msg.find("'kiln::norm<__half, 128>'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("norm_x"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kiln::other"), std::string::npos) << msg;
}

TEST(BuildRun, UnsupportedTargetFailsBeforeWritingOrCompilingAnything) {
  TempDir src, out;
  test::write_kernel_project(src.path(), acme_norm());
  builder::ToolkitInfo tk = cuda13();
  tk.version = kiln::cuda_version();
  FakeToolkit fake(tk);
  builder::BuildOptions o;
  o.source_dir = src.path().string();
  o.out_dir = (out / "b").string();
  o.dist_dir = (out / "d").string();
  o.targets = {T("sm_80"), T("sm_60")};
  std::string msg = expect_error(ErrorKind::Unsupported, [&] { builder::run_build(o, fake, nullptr); });
  EXPECT_NE(msg.find("target sm_60 is not supported"), std::string::npos) << msg;
  EXPECT_EQ(fake.probes, 1);
  EXPECT_FALSE(std::filesystem::exists(out / "b"));
  EXPECT_FALSE(std::filesystem::exists(out / "d"));
}

TEST(BuildCli, TargetTypoIsAUsageErrorNamingIt) {
  auto r = test::run(test::kiln_cli() + " build --targets sm_80,sm90a --out /nonexistent/x");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("'sm90a' is not a target"), std::string::npos) << r.out;
}

// A project outside kiln's tree, built where no nvcc can be found: kiln build says which target
// list it took, then stops (exit 5) before writing or compiling anything.
TEST(BuildCli, SaysOnStderrWhichTargetListItTook) {
  TempDir src, out;
  test::KernelProject project = acme_norm();
  project.package_members = R"("targets": ["sm_90a", "sm_80"])";
  test::write_kernel_project(src.path(), project);
  auto build = [&](const std::string& args) {
    return test::run("CUDA_HOME=" + (out / "no-cuda").string() + " PATH=" +
                     (out / "no-bin").string() + " " + test::kiln_cli() + " build --source " +
                     src.path().string() + " --out " + (out / "b").string() + args);
  };
  auto r = build("");
  EXPECT_EQ(r.exit_code, 5) << r.out;
  EXPECT_NE(r.out.find("targets: sm_90a,sm_80 (from registry/package.json)\n"), std::string::npos)
      << r.out;
  EXPECT_FALSE(std::filesystem::exists(out / "b"));

  r = build(" --targets sm_86");
  EXPECT_NE(r.out.find("targets: sm_86 (from --targets)\n"), std::string::npos) << r.out;

  write_file(src / "registry/package.json", test::package_json(acme_norm()));
  r = build("");
  std::string compiled;
  for (const auto& t : kiln::plan::release_targets()) compiled += (compiled.empty() ? "" : ",") + t;
  if (compiled.empty()) {
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("KILN_RELEASE_TARGETS"), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("targets: " + compiled + " (from the release list compiled into kiln)\n"),
              std::string::npos)
        << r.out;
  }

  write_file(src / "ci/targets.txt", "sm_89\n");
  r = build("");
  EXPECT_NE(r.out.find("targets: sm_89 (from ci/targets.txt)\n"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out / "b"));
}

TEST(BuildCli, HelpNamesEveryOption) {
  auto r = test::run(test::kiln_cli() + " build --help");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  for (const char* opt : {"--targets", "--only", "--jobs", "--out", "--dist", "--source", "--json"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

}  // namespace
}  // namespace kiln
