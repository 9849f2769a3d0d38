// run_build over a fake CommandRunner (no nvcc, no ninja): what a user of `kiln build` sees when
// compiles succeed, fail, or produce garbage: the error kind and what it names, the progress
// lines, the job limit handed down, and what is (not) published. The real runner (ninja) is run
// here too, over a fake nvcc script, for its job limit, status lines and failure parsing.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "builder/build.hpp"
#include "builder/command_runner.hpp"
#include "builder/toolkit.hpp"
#include "child_process.hpp"
#include "format/archive.hpp"
#include "format/fatbin.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kernel_project.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "result_cache/result_cache.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;
using test::write_file;

const char* kRegistry = R"({
  "format": 1,
  "types": {"f32": "float", "f16": "__half"},
  "families": [
    {"name": "scale", "sources": ["scale.cu"], "entries": ["kiln::scale<{dtype}>"],
     "params": [{"name": "dtype", "kind": "type", "values": ["f32", "f16"]}],
     "targets": ["sm_80+"]}
  ]
})";

// The symbol nvcc gives each URI's entry (`void kiln::scale<T>()`).
const std::map<std::string, std::string> kSymbols = {
    {"scale_dtype_f32", "_ZN4kiln5scaleIfEEvv"}, {"scale_dtype_f16", "_ZN4kiln5scaleI6__halfEEvv"}};

format::Target T(const char* s) { return *format::parse_target(s); }

void put(std::string& s, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A fatbin holding one uncompressed PTX image for compute_<arch> with one entry: what nvcc
// writes for a PTX target, laid out as fatbin.hpp describes.
std::string ptx_fatbin(int arch, const std::string& symbol) {
  std::string ptx = ".version 9.0\n.target sm_" + std::to_string(arch) + "\n.visible .entry " +
                    symbol + "()\n{\n ret;\n}\n";
  std::string h;
  put(h, 1, 2);  // PTX
  put(h, 0x0101, 2);
  put(h, 64, 4);
  put(h, ptx.size(), 8);
  put(h, 0, 4);
  put(h, 0, 4);
  put(h, 0, 2);
  put(h, 0, 2);
  put(h, static_cast<std::uint64_t>(arch), 4);
  put(h, 0, 4);
  put(h, 0, 4);
  put(h, 0x11, 8);
  put(h, 0, 8);
  put(h, ptx.size(), 8);
  std::string body = h + ptx;
  std::string out;
  put(out, format::kFatbinMagic, 4);
  put(out, 1, 2);
  put(out, 16, 2);
  put(out, body.size(), 8);
  return out + body;
}

// "Compiles" every planned artifact in plan order, one status line each, writing a correct
// fatbin unless told otherwise; records what it was asked.
class FakeRunner : public builder::CommandRunner {
 public:
  bool available = true;
  std::map<std::string, std::string> fail;  // "<target>/<uri>" -> compiler message
  std::set<std::string> garbage;            // "<target>/<uri>" whose output is not a fatbin
  bool unexplained_failure = false;         // exit 1 with no failure attributed
  std::vector<int> jobs_asked;
  std::vector<std::string> order;  // "<target>/<uri>" in the order they "finished"
  bool reverse = false;            // finish in reverse plan order
  int checks = 0;
  std::set<std::string> fail_pass;  // "<target>/<family>" whose front-end pass fails
  std::vector<std::size_t> passes_asked;  // the plan's passes, per run

  void check_available() override {
    ++checks;
    if (!available) throw Error(ErrorKind::Unsupported, "ninja not found on PATH (/nowhere)");
  }
  builder::CompileOutcome run(const builder::BuildPlan& plan, const std::string& out_dir, int jobs,
                     const std::function<void(const builder::NinjaStatusLine&)>& on_finished) override {
    jobs_asked.push_back(jobs);
    passes_asked.push_back(plan.pass_count());
    builder::CompileOutcome out;
    // A failed pass: ninja runs nothing behind it.
    std::set<std::string> failed_passes;
    for (const auto& tp : plan.targets)
      for (const auto& p : tp.passes)
        if (fail_pass.count(tp.target.str() + "/" + p.family)) {
          failed_passes.insert(p.ptx);
          out.exit_code = 1;
          out.failures.push_back({p.ptx, p.family + ".cu(1): error: in the group\n"});
        }
    std::vector<const builder::PlannedArtifact*> edges;
    for (const auto& tp : plan.targets)
      for (const auto& a : tp.artifacts)
        if (!failed_passes.count(a.pass)) edges.push_back(&a);
    if (reverse) std::reverse(edges.begin(), edges.end());
    int finished = 0;
    for (const builder::PlannedArtifact* a : edges) {
      std::string key = builder::work_key(a->target.str(), a->uri);
      order.push_back(key);
      on_finished({++finished, static_cast<int>(edges.size()), a->uri, a->target.str()});
      if (auto f = fail.find(key); f != fail.end()) {
        out.exit_code = 1;
        out.failures.push_back({a->fatbin, f->second});
        continue;
      }
      write_file(fs::path(out_dir) / a->fatbin,
                 garbage.count(key) ? std::string("not a fatbin")
                                    : ptx_fatbin(a->target.arch, kSymbols.at(a->uri)));
    }
    if (unexplained_failure) {
      out.exit_code = 1;
      out.log = "ninja: error: loading 'build.ninja': something odd\n";
    }
    return out;
  }
};

class FixedToolkit : public builder::Toolkit {
 public:
  FixedToolkit() {
    info_.root = "/opt/cuda";
    info_.nvcc = "/opt/cuda/bin/nvcc";
    info_.version = kiln::cuda_version();
    info_.full_version = info_.version + ".88";
    info_.codes = builder::supported_codes({"sm_80", "sm_90", "compute_80", "compute_90"}, {});
  }
  const builder::ToolkitInfo& info() override { return info_; }

 private:
  builder::ToolkitInfo info_;
};

struct BuildRig {
  TempDir src, out;
  FixedToolkit toolkit;
  FakeRunner runner;
  builder::BuildOptions opts;
  BuildRig() {
    // A project that is not kiln's: its own package name and version name everything built.
    test::write_kernel_project(
        src.path(), {"acme-scale", "2.3.4", kRegistry, "", {{"scale.cu", "// scale\n"}}});
    opts.source_dir = src.path().string();
    opts.out_dir = (out / "build").string();
    opts.dist_dir = (out / "dist").string();
    opts.targets = {T("compute_80"), T("compute_90")};
    opts.jobs = 3;
    opts.build_time = 1764403200;
  }
  // Runs the build with progress lines captured; returns them.
  std::string build(builder::BuildResult* result = nullptr) {
    std::FILE* f = std::tmpfile();
    std::string text;
    try {
      builder::BuildResult r = builder::run_build(opts, toolkit, runner, f);
      if (result) *result = r;
    } catch (...) {
      std::fclose(f);
      throw;
    }
    std::rewind(f);
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
    return text;
  }
  Error build_error() {
    try {
      build();
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "the build succeeded";
    return Error(ErrorKind::Internal, "<no error>");
  }
};

TEST(BuildRun, CompilesThroughTheRunnerAndPublishesEveryCheckedResult) {
  BuildRig rig;
  builder::BuildResult r;
  rig.build(&r);
  EXPECT_EQ(rig.runner.checks, 1);
  EXPECT_EQ(rig.runner.jobs_asked, std::vector<int>{3});  // --jobs is the runner's limit
  EXPECT_EQ(r.jobs, 3);
  EXPECT_EQ(r.total, 4u);
  EXPECT_EQ(r.compiled, 4u);
  ASSERT_EQ(r.archives.size(), 2u);
  EXPECT_EQ(r.index_path, (rig.out / "dist" / format::index_file_name("acme-scale", "2.3.4")).string());
  auto members = format::read_archive(r.archives[0].path);
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].name, "manifest.json");
  format::Manifest m = format::parse_manifest(members[0].data, r.archives[0].path);
  EXPECT_EQ(m.target, "compute_80");
  // The project's own identity, not kiln's.
  EXPECT_EQ(m.package, "acme-scale");
  EXPECT_EQ(m.package_version, "2.3.4");
  EXPECT_EQ(fs::path(r.archives[0].path).filename(),
            format::archive_file_name("acme-scale", "2.3.4", kiln::cuda_version(), "compute_80"));
  ASSERT_EQ(m.artifacts.size(), 2u);
  EXPECT_EQ(m.artifacts[0].uri, "scale_dtype_f16");
  ASSERT_EQ(m.artifacts[0].entries.size(), 1u);
  EXPECT_EQ(m.artifacts[0].entries[0].symbol, "_ZN4kiln5scaleI6__halfEEvv");
  EXPECT_EQ(members[1].data, ptx_fatbin(80, "_ZN4kiln5scaleI6__halfEEvv"));
  EXPECT_TRUE(fs::exists(rig.out / "build" / "build.ninja"));
}

TEST(BuildRun, FailingCompilesAreEachReportedNamingFamilyUriAndTargetAndNothingIsPublished) {
  BuildRig rig;
  rig.runner.fail["compute_80/scale_dtype_f32"] =
      "scale.cu(3): error: identifier \"x\" is undefined\n";
  rig.runner.fail["compute_90/scale_dtype_f16"] = "scale.cu(9): error: too few arguments\n";
  Error e = rig.build_error();
  EXPECT_EQ(e.kind(), ErrorKind::Compile) << e.what();
  std::string msg = e.what();
  EXPECT_NE(msg.find("nothing was published to " + (rig.out / "dist").string()), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("nvcc failed for family scale, URI scale_dtype_f32, target compute_80:\n"
                     "scale.cu(3): error: identifier \"x\" is undefined"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("nvcc failed for family scale, URI scale_dtype_f16, target compute_90:\n"
                     "scale.cu(9): error: too few arguments"),
            std::string::npos)
      << msg;
  EXPECT_LT(msg.find("compute_80:"), msg.find("compute_90:")) << msg;  // in the order reported
  EXPECT_FALSE(fs::exists(rig.out / "dist"));
}

TEST(BuildRun, FailedCompileLeavesThePreviousDistByteForByte) {
  BuildRig rig;
  rig.build();
  std::string index = read_file(rig.out / "dist" / format::index_file_name("acme-scale", "2.3.4"));
  std::size_t files = std::distance(fs::directory_iterator(rig.out / "dist"), {});
  rig.runner.fail["compute_90/scale_dtype_f32"] = "error: boom\n";
  EXPECT_EQ(rig.build_error().kind(), ErrorKind::Compile);
  EXPECT_EQ(read_file(rig.out / "dist" / format::index_file_name("acme-scale", "2.3.4")), index);
  EXPECT_EQ(std::distance(fs::directory_iterator(rig.out / "dist"), {}),
            static_cast<std::ptrdiff_t>(files));
}

// A build killed mid-publish left its archives under temporary names and the index's temporary
// in the dist, one more per kill (crash points, tests/crash/): the next publish of the release
// removes them, and leaves other releases' alone.
TEST(BuildRun, APublishRemovesWhatAKilledPublishOfTheReleaseLeft) {
  BuildRig rig;
  rig.build();
  const fs::path dist = rig.out / "dist";
  const std::string archive =
      format::archive_file_name("acme-scale", "2.3.4", kiln::cuda_version(), "compute_80");
  const std::vector<std::string> left = {
      "." + archive + ".partial-99999", "." + archive + ".partial-99999.tmp.a1b2c3d4",
      format::index_file_name("acme-scale", "2.3.4") + ".tmp.0123456789abcdef"};
  for (const auto& n : left) write_file(dist / n, "half");
  const std::string others = ".acme-other-1.0.0-cuda13.0-compute_80.tar.zst.partial-99999";
  write_file(dist / others, "another release's");
  rig.opts.build_time += 1;  // other bytes: the archives are written again
  rig.build();
  for (const auto& n : left) EXPECT_FALSE(fs::exists(dist / n)) << n;
  EXPECT_TRUE(fs::exists(dist / others));
}

TEST(BuildRun, RunnerFailureWithoutAFailedCompileIsInternalWithTheRunnersOutput) {
  BuildRig rig;
  rig.runner.unexplained_failure = true;
  Error e = rig.build_error();
  EXPECT_EQ(e.kind(), ErrorKind::Internal) << e.what();
  EXPECT_NE(
      std::string(e.what()).find("ninja failed (exit code 1) in " + (rig.out / "build").string()),
      std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("something odd"), std::string::npos) << e.what();
  EXPECT_FALSE(fs::exists(rig.out / "dist"));
}

TEST(BuildRun, CorruptCompileResultFailsNamingTheArtifactAndIsRemovedForTheNextBuild) {
  BuildRig rig;
  rig.runner.garbage.insert("compute_90/scale_dtype_f16");
  Error e = rig.build_error();
  EXPECT_EQ(e.kind(), ErrorKind::Format) << e.what();
  std::string msg = e.what();
  EXPECT_NE(msg.find("compile result of scale_dtype_f16 for compute_90 is not what was asked for"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("obj/compute_90/scale_dtype_f16.fatbin"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(rig.out / "build" / "obj/compute_90/scale_dtype_f16.fatbin"));
  EXPECT_TRUE(fs::exists(rig.out / "build" / "obj/compute_80/scale_dtype_f16.fatbin"));
  EXPECT_FALSE(fs::exists(rig.out / "dist"));
}

TEST(BuildRun, ProgressLinesFollowTheOrderCompilesFinish) {
  BuildRig rig;
  rig.runner.reverse = true;
  std::string lines = rig.build();
  EXPECT_EQ(lines,
            "[1/4] NVCC scale_dtype_f32 compute_90\n"
            "[2/4] NVCC scale_dtype_f16 compute_90\n"
            "[3/4] NVCC scale_dtype_f32 compute_80\n"
            "[4/4] NVCC scale_dtype_f16 compute_80\n");
}

TEST(BuildRun, LiveProgressRewritesOneLineAndEndsIt) {
  BuildRig rig;
  rig.opts.progress = builder::ProgressStyle::Live;
  std::string text = rig.build();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 4) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("\r\033[K[4/4] NVCC scale_dtype_f32 compute_90  "), std::string::npos)
      << text;
}

TEST(BuildRun, UnavailableRunnerFailsBeforeWritingOrCompilingAnything) {
  BuildRig rig;
  rig.runner.available = false;
  Error e = rig.build_error();
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  EXPECT_NE(std::string(e.what()).find("ninja not found"), std::string::npos) << e.what();
  EXPECT_TRUE(rig.runner.jobs_asked.empty());
  EXPECT_FALSE(fs::exists(rig.out / "build"));
  EXPECT_FALSE(fs::exists(rig.out / "dist"));
}

TEST(BuildRun, AFailedPassIsCompiledOneNvccPerSpecialisationAndSaysSo) {
  BuildRig rig;
  rig.runner.fail_pass.insert("compute_90/scale");
  builder::BuildResult r;
  std::string log = rig.build(&r);
  EXPECT_NE(log.find("front-end pass scale.0 for compute_90 failed; compiling its 2 "
                     "specialisations one nvcc each"),
            std::string::npos)
      << log;
  EXPECT_EQ(rig.runner.passes_asked, (std::vector<std::size_t>{2, 1}));  // then compute_80's only
  EXPECT_EQ(r.fallbacks, 2u);
  ASSERT_EQ(r.archives.size(), 2u);
  // The fallback's manifest records what really compiled it: its own nvcc and stub.
  format::Manifest m =
      format::parse_manifest(format::read_archive(r.archives[1].path)[0].data, "m");
  std::string flags;
  for (const auto& f : m.artifacts[0].flags) flags += f + " ";
  EXPECT_NE(flags.find("stubs/scale_dtype_f16.kiln-stub.cu"), std::string::npos) << flags;
  EXPECT_EQ(flags.find("build-entry"), std::string::npos) << flags;
  format::Manifest m80 =
      format::parse_manifest(format::read_archive(r.archives[0].path)[0].data, "m");
  flags.clear();
  for (const auto& f : m80.artifacts[0].flags) flags += f + " ";
  EXPECT_NE(flags.find("&& build-entry"), std::string::npos) << flags;
}

TEST(BuildRun, ASpecialisationThatFailsAloneAfterItsPassIsNamedWithItsMessage) {
  BuildRig rig;
  rig.runner.fail_pass.insert("compute_80/scale");
  rig.runner.fail["compute_80/scale_dtype_f32"] = "scale.cu(3): error: identifier \"x\" is undefined\n";
  Error e = rig.build_error();
  EXPECT_EQ(e.kind(), ErrorKind::Compile);
  EXPECT_NE(std::string(e.what()).find("nvcc failed for family scale, URI scale_dtype_f32, target "
                                       "compute_80:\nscale.cu(3): error: identifier"),
            std::string::npos)
      << e.what();
}

TEST(BuildRun, GroupedShardBuildTakesWholePasses) {
  BuildRig rig;
  rig.opts.shard = builder::ShardSpec{2, 2};
  builder::BuildResult r;
  rig.build(&r);
  // One pass per target: compute_80's is unit 0 (shard 1), compute_90's unit 1 (shard 2).
  EXPECT_EQ(rig.runner.order,
            (std::vector<std::string>{"compute_90/scale_dtype_f16", "compute_90/scale_dtype_f32"}));
  EXPECT_EQ(rig.runner.passes_asked, std::vector<std::size_t>{1});
}

TEST(BuildRun, ShardBuildHandsOnlyItsPartToTheRunner) {
  BuildRig rig;
  rig.opts.mode = builder::CompileMode::PerSpecialisation;
  rig.opts.shard = builder::ShardSpec{2, 2};
  builder::BuildResult r;
  rig.build(&r);
  // Plan order is compute_80/f16, compute_80/f32, compute_90/f16, compute_90/f32; shard 2 of 2
  // gets positions 1 and 3.
  EXPECT_EQ(rig.runner.order,
            (std::vector<std::string>{"compute_80/scale_dtype_f32", "compute_90/scale_dtype_f32"}));
  EXPECT_EQ(r.total, 2u);
  EXPECT_TRUE(r.archives.empty());
}

// --- the real runner: ninja over a fake nvcc that records how many compiles overlap ----------

TEST(ParseNinjaFailures, EachFailedBlockGivesItsOutputAndTheCompilersLines) {
  auto f = builder::parse_ninja_failures(
      "[1/3] NVCC a sm_80\n"
      "FAILED: obj/sm_80/b.fatbin \n"
      "/opt/cuda/bin/nvcc -o obj/sm_80/b.fatbin ...\n"
      "b.cu(1): error: nope\n"
      "1 error detected\n"
      "[2/3] NVCC c sm_80\n"
      "FAILED: obj/sm_80/c.fatbin obj/sm_80/c.d\n"
      "nvcc ...\n"
      "c.cu(2): error: also nope\n"
      "ninja: build stopped: subcommand failed.\n");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].output, "obj/sm_80/b.fatbin");
  EXPECT_EQ(f[0].message, "b.cu(1): error: nope\n1 error detected\n");
  EXPECT_EQ(f[1].output, "obj/sm_80/c.fatbin");
  EXPECT_EQ(f[1].message, "c.cu(2): error: also nope\n");
  EXPECT_TRUE(builder::parse_ninja_failures("[1/1] NVCC a sm_80\nninja: no work to do.\n").empty());
}

bool have_ninja() { return test::run("command -v ninja >/dev/null").exit_code == 0; }

// Six compiles of 0.3 s each through ninja -j 2; the fake nvcc counts the compiles running when
// it starts, and fails for the URI named "boom".
struct NinjaRig {
  TempDir dir;
  builder::BuildPlan plan;
  fs::path nvcc = dir / "fake-nvcc.sh";
  explicit NinjaRig(const std::vector<std::string>& uris) {
    write_file(
        nvcc,
        "#!/bin/sh\n"
        "out=; mf=; prev=\n"
        "for a in \"$@\"; do\n"
        "  [ \"$prev\" = -o ] && out=$a; [ \"$prev\" = -MF ] && mf=$a; prev=$a\n"
        "done\n"
        "d='" +
            (dir / "running").string() +
            "'\n"
            "mkdir -p \"$d\"; touch \"$d/$$\"\n"
            "ls \"$d\" | wc -l >> '" +
            (dir / "overlap").string() +
            "'\n"
            "sleep 0.3\n"
            "rm -f \"$d/$$\"\n"
            "[ -n \"$mf\" ] && echo \"$out: \" > \"$mf\"\n"
            "case \"$out\" in *boom*) echo \"boom.cu(7): error: kaboom\" >&2; exit 2;; esac\n"
            "echo fatbin > \"$out\"\n");
    fs::permissions(nvcc, fs::perms::owner_all);
    builder::TargetPlan tp;
    tp.target = T("sm_80");
    for (const auto& u : uris) {
      builder::PlannedArtifact a;
      a.uri = u;
      a.family = "f";
      a.target = tp.target;
      a.stub = "stubs/" + u + ".cu";
      a.fatbin = "obj/sm_80/" + u + ".fatbin";
      a.depfile = "obj/sm_80/" + u + ".d";
      a.args = {"-c", a.stub, "-MD", "-MF", a.depfile, "-o", a.fatbin};
      tp.artifacts.push_back(a);
      plan.stubs[a.stub] = "// " + u + "\n";
    }
    plan.source_dir = dir.path().string();
    plan.targets.push_back(tp);
    for (const auto& [rel, text] : plan.stubs) write_file(dir / "out" / rel, text);
    fs::create_directories(dir / "out" / "obj" / "sm_80");
    write_file(dir / "out" / "build.ninja", builder::ninja_file(plan, nvcc.string()));
  }
  builder::CompileOutcome run(int jobs, std::vector<builder::NinjaStatusLine>* lines) {
    const char* path = std::getenv("PATH");
    auto runner = builder::make_ninja_runner(path ? path : "");
    runner->check_available();
    return runner->run(plan, (dir / "out").string(), jobs,
                       [&](const builder::NinjaStatusLine& s) { lines->push_back(s); });
  }
  int max_overlap() {
    std::istringstream in(read_file(dir / "overlap"));
    int n = 0, most = 0;
    while (in >> n) most = std::max(most, n);
    return most;
  }
};

TEST(NinjaRunner, RunsAtMostJobsCompilesAtOnceAndReportsEachFinishedOne) {
  if (!have_ninja()) GTEST_SKIP() << "ninja is not on PATH (scripts/bootstrap.sh installs it)";
  NinjaRig rig({"a", "b", "c", "d", "e", "f"});
  std::vector<builder::NinjaStatusLine> lines;
  builder::CompileOutcome o = rig.run(2, &lines);
  EXPECT_EQ(o.exit_code, 0) << o.log;
  EXPECT_TRUE(o.failures.empty());
  EXPECT_EQ(rig.max_overlap(), 2);
  ASSERT_EQ(lines.size(), 6u);
  std::set<std::string> uris;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].finished, static_cast<int>(i + 1));
    EXPECT_EQ(lines[i].total, 6);
    EXPECT_EQ(lines[i].target, "sm_80");
    uris.insert(lines[i].uri);
  }
  EXPECT_EQ(uris.size(), 6u);
  // Up to date now: a second run compiles nothing and reports nothing.
  lines.clear();
  o = rig.run(2, &lines);
  EXPECT_EQ(o.exit_code, 0) << o.log;
  EXPECT_TRUE(lines.empty());
}

TEST(NinjaRunner, FailedCompileIsReportedWithItsOutputAndTheCompilersMessage) {
  if (!have_ninja()) GTEST_SKIP() << "ninja is not on PATH (scripts/bootstrap.sh installs it)";
  NinjaRig rig({"a", "boom"});
  std::vector<builder::NinjaStatusLine> lines;
  builder::CompileOutcome o = rig.run(1, &lines);
  EXPECT_NE(o.exit_code, 0);
  ASSERT_EQ(o.failures.size(), 1u) << o.log;
  EXPECT_EQ(o.failures[0].output, "obj/sm_80/boom.fatbin");
  EXPECT_EQ(o.failures[0].message, "boom.cu(7): error: kaboom\n");
  EXPECT_NE(o.log.find("FAILED: "), std::string::npos) << o.log;
  EXPECT_EQ(rig.max_overlap(), 1);
}

TEST(NinjaRunner, MissingNinjaIsUnsupportedNamingThePathSearched) {
  auto runner = builder::make_ninja_runner("/nonexistent-bin");
  try {
    runner->check_available();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("ninja not found on PATH (/nonexistent-bin)"),
              std::string::npos)
        << e.what();
  }
}

// ---- the result cache in front of the compiles (--cache DIR) ----

// Every archive and the index of a build, by file name.
std::map<std::string, std::string> published(const builder::BuildResult& r) {
  std::map<std::string, std::string> out;
  for (const auto& a : r.archives) out[fs::path(a.path).filename().string()] = read_file(a.path);
  out[fs::path(r.index_path).filename().string()] = read_file(r.index_path);
  return out;
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(BuildCache, ACleanTreeElsewhereTakesEveryResultFromTheCacheWithIdenticalBytes) {
  TempDir cache;
  BuildRig first;
  first.opts.cache = cache.path().string();
  builder::BuildResult cold;
  first.build(&cold);
  EXPECT_EQ(cold.compiled, 4u);
  ASSERT_TRUE(cold.cache);
  EXPECT_EQ(cold.cache->misses, 4u);
  EXPECT_EQ(cold.cache->stored, 4u);
  EXPECT_EQ(cold.cache->hits, 0u);
  EXPECT_GT(cold.cache->bytes_stored, 0u);

  BuildRig second;  // the same project in another source and out directory
  second.opts.cache = cache.path().string();
  builder::BuildResult warm;
  std::string progress = second.build(&warm);
  EXPECT_EQ(warm.compiled, 0u);
  EXPECT_TRUE(second.runner.jobs_asked.empty()) << "nothing was left to compile";
  ASSERT_TRUE(warm.cache);
  EXPECT_EQ(warm.cache->hits, 4u);
  EXPECT_EQ(warm.cache->misses, 0u);
  EXPECT_EQ(warm.cache->bytes_fetched, cold.cache->bytes_stored);
  EXPECT_NE(progress.find(": 4 hits, 0 to compile, 0 up to date"), std::string::npos) << progress;
  EXPECT_EQ(published(warm), published(cold));

  BuildRig plain;  // and no cache at all: the same bytes
  builder::BuildResult uncached;
  plain.build(&uncached);
  EXPECT_FALSE(uncached.cache);
  EXPECT_EQ(published(uncached), published(cold));

  // Again into the same --out: up to date, neither looked up nor compiled.
  builder::BuildResult again;
  second.build(&again);
  EXPECT_EQ(again.cache->up_to_date, 4u);
  EXPECT_EQ(again.cache->hits + again.cache->misses + again.cache->bytes_fetched, 0u);
  EXPECT_EQ(published(again), published(cold));
}

TEST(BuildCache, AnEntryWhoseBytesDoNotMatchItsDigestIsRefusedAndCompiledAgain) {
  TempDir cache;
  BuildRig first;
  first.opts.cache = cache.path().string();
  builder::BuildResult cold;
  first.build(&cold);
  fs::path blob = files_in(cache / "cas").at(0);
  std::string poisoned = read_file(blob);
  poisoned[poisoned.size() / 2] ^= 0x20;
  write_file(blob, poisoned);

  BuildRig second;
  second.opts.cache = cache.path().string();
  builder::BuildResult r;
  std::string progress = second.build(&r);
  EXPECT_EQ(r.cache->refused, 1u);
  EXPECT_EQ(r.cache->hits, 3u);
  EXPECT_EQ(r.compiled, 1u);
  EXPECT_NE(progress.find("refused: " + blob.string() + ": sha256 is " + io::sha256_hex(poisoned)),
            std::string::npos)
      << progress;
  EXPECT_EQ(published(r), published(cold));
  // The recompiled result was stored again: a third tree hits everything.
  BuildRig third;
  third.opts.cache = cache.path().string();
  builder::BuildResult healed;
  third.build(&healed);
  EXPECT_EQ(healed.cache->hits, 4u);
  EXPECT_EQ(published(healed), published(cold));
}

TEST(BuildCache, AnEntryOfAnotherTargetIsRefusedByTheCompileResultCheck) {
  TempDir cache;
  BuildRig first;
  first.opts.cache = cache.path().string();
  builder::BuildResult cold;
  first.build(&cold);
  // Rewrite every entry consistently (digest and all) to a fatbin built for compute_75: only
  // the compile-result check can tell.
  result_cache::ResultCache writer(result_cache::make_directory_backend(cache.path().string()));
  for (const fs::path& entry : files_in(cache / "ac")) {
    result_cache::CachedOutput out = result_cache::decode_action_result(read_file(entry), entry.string());
    std::string uri = out.name.substr(0, out.name.size() - std::string(".fatbin").size());
    ASSERT_TRUE(
        writer.store(entry.filename().string(), out.name, ptx_fatbin(75, kSymbols.at(uri))).ok);
  }
  BuildRig second;
  second.opts.cache = cache.path().string();
  builder::BuildResult r;
  std::string progress = second.build(&r);
  EXPECT_EQ(r.cache->refused, 4u);
  EXPECT_EQ(r.cache->hits, 0u);
  EXPECT_EQ(r.compiled, 4u);
  EXPECT_NE(progress.find("refused: compile result of scale_dtype_f16 for compute_80 is not what "
                          "was asked for"),
            std::string::npos)
      << progress;
  EXPECT_NE(progress.find("it holds an image for compute_75"), std::string::npos) << progress;
  EXPECT_EQ(published(r), published(cold));
}

TEST(BuildCache, ACacheDirectoryThatCannotBeCreatedIsSkippedWithItsReason) {
  BuildRig rig;
  write_file(rig.out / "not-a-dir", "x");
  rig.opts.cache = (rig.out / "not-a-dir" / "cache").string();
  builder::BuildResult r;
  std::string progress = rig.build(&r);
  EXPECT_EQ(r.compiled, 4u);
  ASSERT_TRUE(r.cache);
  EXPECT_NE(r.cache->skipped.find(rig.opts.cache), std::string::npos) << r.cache->skipped;
  EXPECT_NE(progress.find("result cache skipped: "), std::string::npos) << progress;
  EXPECT_EQ(r.archives.size(), 2u);
}

TEST(BuildCache, AFailedBuildKeepsWhatCompiledSoTheNextBuildCompilesOnlyTheFailure) {
  TempDir cache;
  BuildRig rig;
  rig.opts.cache = cache.path().string();
  rig.runner.fail["compute_90/scale_dtype_f32"] = "scale.cu(3): error: oops\n";
  EXPECT_EQ(rig.build_error().kind(), ErrorKind::Compile);
  EXPECT_EQ(files_in(cache / "ac").size(), 3u);
  rig.runner.fail.clear();
  rig.runner.order.clear();
  builder::BuildResult r;
  rig.build(&r);
  EXPECT_EQ(rig.runner.order, std::vector<std::string>{"compute_90/scale_dtype_f32"});
  EXPECT_EQ(r.cache->up_to_date, 3u);
  EXPECT_EQ(r.cache->misses, 1u);
}

TEST(BuildCache, ARemoteThatNeverAnswersCostsOneDeadlineAndTheBuildCompilesEverything) {
  test::SilentListener silent;
  BuildRig rig;
  rig.opts.cache = silent.url();
  rig.opts.cache_request_deadline_ms = 700;
  auto t0 = std::chrono::steady_clock::now();
  builder::BuildResult r;
  std::string progress = rig.build(&r);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.compiled, 4u);
  EXPECT_EQ(r.archives.size(), 2u);
  ASSERT_TRUE(r.cache);
  EXPECT_EQ(r.cache->stored, 0u);
  EXPECT_NE(r.cache->skipped.find("GET " + silent.url() + "/ac/"), std::string::npos)
      << r.cache->skipped;
  // Lookups run side by side and stop at the first failure; stores are not tried.
  EXPECT_LT(secs, 3 * 0.7) << progress;
  // One line says so, however many lookups were in flight.
  std::size_t first = progress.find("skipped for the rest of this build");
  ASSERT_NE(first, std::string::npos) << progress;
  EXPECT_EQ(progress.find("skipped for the rest of this build", first + 1), std::string::npos)
      << progress;
  EXPECT_NE(
      progress.find("result cache " + silent.url() + " skipped for the rest of this build: GET "),
      std::string::npos)
      << progress;
}

TEST(BuildCache, ARemoteThatIsNotThereIsSkippedAtOnce) {
  BuildRig rig;
  rig.opts.cache = "http://127.0.0.1:" + std::to_string(test::free_port());
  auto t0 = std::chrono::steady_clock::now();
  builder::BuildResult r;
  rig.build(&r);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  EXPECT_EQ(r.compiled, 4u);
  EXPECT_NE(r.cache->skipped.find("connection failed"), std::string::npos) << r.cache->skipped;
}

}  // namespace
}  // namespace kiln
