#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "build/build.hpp"
#include "build/shard.hpp"
#include "build/toolkit.hpp"
#include "commands/commands.hpp"
#include "kiln/error.hpp"
#include "plan/target_choice.hpp"
#include "project/package.hpp"
#include "runtime/environment.hpp"

namespace kiln::cli {
namespace {

// Reproducible by default: SOURCE_DATE_EPOCH, else the source tree's last commit, else fixed.
packager::BuildTime source_build_time(const std::string& source_dir) {
  std::optional<std::string> sde;
  const Environment env = read_environment();
  if (!env.source_date_epoch.empty()) sde = env.source_date_epoch;
  std::optional<std::string> git_time;
  if (!sde) {
    if (auto git = packager::find_on_path("git", env.path)) {
      auto r = packager::run_process({*git, "-C", source_dir, "log", "-1", "--format=%ct"});
      if (r.exit_code == 0) git_time = r.output;
    }
  }
  return packager::choose_build_time(sde, git_time);
}

std::string joined(const std::vector<Target>& targets) {
  std::string out;
  for (const auto& t : targets) out += (out.empty() ? "" : ",") + t.str();
  return out;
}

// The sources choose_build_targets chooses from, read from the project in `source_dir`.
BuildTargets build_targets(const std::string& flag, const std::string& source_dir) {
  BuildTargetSources s;
  s.flag = flag;
  if (!flag.empty()) return choose_build_targets(s);
  s.project = read_package_file(source_dir).targets;
  if (s.project.empty()) {
    auto file = std::filesystem::path(source_dir) / "ci" / "targets.txt";
    s.targets_file_path = file.string();
    std::error_code ec;
    if (std::filesystem::exists(file, ec)) {
      std::ifstream in(file, std::ios::binary);
      if (!in)
        throw Error(ErrorKind::Usage, "no --targets given and " + file.string() +
                                          " (the default target list) cannot be read");
      std::ostringstream ss;
      ss << in.rdbuf();
      s.targets_file = ss.str();
    }
    s.compiled = release_targets();
  }
  return choose_build_targets(s);
}

// build_result_json's summary with the targets and where they came from.
std::string build_json(const packager::BuildResult& r, const BuildTargets& chosen) {
  auto j = nlohmann::ordered_json::parse(packager::build_result_json(r));
  j["targets"] = nlohmann::ordered_json::array();
  for (const auto& t : chosen.targets) j["targets"].push_back(t.str());
  j["targets_from"] = chosen.origin;
  return j.dump(2) + "\n";
}

// "cache DIR: 12 hits, 3 misses (1 refused), 0 up to date; 40960 bytes fetched, 12288 stored".
void print_cache_stats(const packager::BuildResult& r) {
  if (!r.cache) return;
  const packager::CacheStats& c = *r.cache;
  std::printf("cache %s: %zu hits, %zu misses", c.location.c_str(), c.hits, c.misses);
  if (c.refused) std::printf(" (%zu refused)", c.refused);
  std::printf(", %zu up to date; %llu bytes fetched, %llu stored (%zu results)\n", c.up_to_date,
              static_cast<unsigned long long>(c.bytes_fetched),
              static_cast<unsigned long long>(c.bytes_stored), c.stored);
  if (!c.skipped.empty()) std::printf("cache skipped: %s\n", c.skipped.c_str());
}

void add_merge_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "merge",
      "merge the shards of one build (`kiln build --shard I/N`, each built anywhere) into the "
      "archives and index, byte-identical to a one-machine `kiln build` of the same tree.\n"
      "Refused, naming the field and the shard: shards of different package versions, "
      "registries, toolchains or build times (exit 4); a missing piece of work (6); a "
      "duplicated one (10); a result whose digest does not match its bytes (3).\n"
      "Details: docs/packager.md");
  struct Opts {
    std::vector<std::string> shards;
    std::string dist;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("shards", o->shards, "shard directories (what each --shard build wrote)")
      ->required();
  cmd->add_option("--dist", o->dist, "where archives and the index are published")->required();
  cmd->callback([o, &rc] {
    packager::MergeResult r = packager::run_merge(o->shards, o->dist);
    std::printf("merged %zu shards in %.2f s\n", o->shards.size(), r.seconds);
    for (const auto& a : r.archives)
      std::printf("%s  %zu artifacts, %llu bytes, sha256 %s\n", a.path.c_str(), a.artifacts,
                  static_cast<unsigned long long>(a.size), a.sha256.c_str());
    std::printf("%s\n", r.index_path.c_str());
    rc = 0;
  });
}

}  // namespace

BuildTargets choose_build_targets(const BuildTargetSources& s) {
  if (!s.flag.empty()) return {parse_target_list(s.flag), "--targets"};
  if (!s.project.empty()) return {s.project, "registry/package.json"};
  if (s.targets_file)
    return {packager::parse_targets_file(*s.targets_file, s.targets_file_path), "ci/targets.txt"};
  const std::string compiled_origin = "the release list compiled into kiln";
  if (!s.compiled.empty()) {
    std::string list;
    for (const auto& t : s.compiled) list += (list.empty() ? "" : ",") + t;
    try {
      return {parse_target_list(list), compiled_origin};
    } catch (const Error& e) {
      throw Error(e.kind(), compiled_origin + " (KILN_RELEASE_TARGETS): " + e.what());
    }
  }
  throw Error(ErrorKind::Usage,
              "no --targets given, registry/package.json names no \"targets\", " +
                  s.targets_file_path +
                  " does not exist, and this kiln was built without a release target list "
                  "(KILN_RELEASE_TARGETS): give --targets, or name them in registry/package.json "
                  "(docs/packages.md)");
}

void add_build_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "build",
      "compile every registered kernel for the given targets with nvcc (through ninja) and "
      "publish one archive per target plus the release index.\n"
      "Incremental: a second run compiles only what changed. Reproducible: the build time is "
      "SOURCE_DATE_EPOCH, else the source tree's last git commit time, else 1980-01-01, so the "
      "same tree gives byte-identical archives in any --out.\n"
      "--shard I/N builds one part of the work into a shard (in --dist); `kiln merge` turns "
      "all N shards into the archives and index a one-machine build gives.\n"
      "--cache DIR|URL (or KILN_BUILD_CACHE) takes compile results from a content-keyed cache, "
      "a directory or a Bazel HTTP cache server, checked like a compile; misses are stored.\n"
      "Exit codes: 2 bad arguments, 5 unsupported target or missing nvcc/ninja/launcher, 6 "
      "--only matches nothing, 7 a kernel failed to compile (nothing is published), 9 I/O, "
      "10 a compile result lacks its target's image or an entry (nothing is published).\n"
      "Details: docs/packager.md");
  struct Opts {
    std::string targets;
    std::vector<std::string> only;
    int jobs = 0;
    std::string out = "kiln-build";
    std::string dist;
    std::string source;
    bool json = false;
    std::string shard;
    std::string launcher;
    std::string cache;
    bool no_cache = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--targets", o->targets,
                  "comma-separated SM targets as nvcc spells them, e.g. sm_80,sm_90a,compute_90 "
                  "(default: the \"targets\" of registry/package.json, else ci/targets.txt "
                  "of the project, else the release list compiled into kiln)");
  cmd->add_option("--only", o->only,
                  "build only families or URIs matching this glob (fnmatch; repeatable)");
  auto* jobs_opt = cmd->add_option(
      "--jobs,-j", o->jobs, "parallel nvcc jobs (default: min(cores, MemAvailable / 512 MiB))");
  cmd->add_option("--out", o->out,
                  "build directory: build.ninja, stubs, fatbins (default ./kiln-build)");
  cmd->add_option("--dist", o->dist,
                  "where archives and the index are published (default <out>/dist)");
  cmd->add_option("--source", o->source,
                  "the kernel project (VERSION, registry/package.json, registry/kernels.json, "
                  "kernels/; default: the current directory when it holds registry/package.json, "
                  "else the tree this kiln was built from)");
  cmd->add_flag("--json", o->json, "print a JSON summary on stdout (progress stays on stderr)");
  cmd->add_option("--shard", o->shard,
                  "build only part I of N of the work (round-robin over targets x URIs) into a "
                  "shard directory (--dist, default <out>/shard-I-of-N) for `kiln merge`");
  cmd->add_option("--launcher", o->launcher,
                  "run nvcc through this compiler launcher, e.g. sccache (default: "
                  "$KILN_COMPILER_LAUNCHER); it changes no byte and no hash");
  auto* cache_opt = cmd->add_option(
      "--cache", o->cache,
      "result cache: a directory, or the http(s):// URL of a server speaking Bazel's HTTP cache "
      "protocol (bazel-remote, nginx with WebDAV PUT); a hit skips nvcc and is checked like a "
      "compile; a cache that fails is skipped, never the build (default: $KILN_BUILD_CACHE)");
  cmd->add_flag("--no-cache", o->no_cache, "use no result cache, even if KILN_BUILD_CACHE is set")
      ->excludes(cache_opt);

  cmd->callback([o, jobs_opt, &rc] {
    packager::BuildOptions opts;
    opts.source_dir = project_dir(o->source, o->json);
    if (!std::filesystem::is_directory(opts.source_dir))
      throw Error(ErrorKind::NotFound, "source tree " + opts.source_dir + " is not a directory");
    const BuildTargets chosen = build_targets(o->targets, opts.source_dir);
    opts.targets = chosen.targets;
    std::fprintf(stderr, "targets: %s (from %s)\n", joined(chosen.targets).c_str(),
                 chosen.origin.c_str());
    opts.only = o->only;
    if (jobs_opt->count() > 0) opts.jobs = o->jobs;
    opts.out_dir = o->out;
    if (!o->shard.empty()) opts.shard = packager::parse_shard_spec(o->shard);
    std::string dist_default = opts.shard ? "shard-" + std::to_string(opts.shard->index) + "-of-" +
                                                std::to_string(opts.shard->count)
                                          : "dist";
    opts.dist_dir =
        o->dist.empty() ? (std::filesystem::path(o->out) / dist_default).string() : o->dist;
    const Environment env = read_environment();
    opts.launcher = o->launcher.empty() ? env.compiler_launcher : o->launcher;
    if (!o->no_cache) opts.cache = o->cache.empty() ? env.build_cache : o->cache;
    opts.cache_ca_bundle = env.loader.ca_bundle;
    opts.nvcc_ccbin = env.nvcc_ccbin;
    opts.nvcc_prepend_flags = env.nvcc_prepend_flags;
    opts.nvcc_append_flags = env.nvcc_append_flags;
    opts.build_time = source_build_time(opts.source_dir).seconds;
    opts.progress =
        ::isatty(STDERR_FILENO) ? packager::ProgressStyle::Live : packager::ProgressStyle::Lines;

    packager::NvccToolkit toolkit(packager::ToolkitSearch::from_env());
    packager::BuildResult r = packager::run_build(opts, toolkit, stderr);
    std::fflush(stderr);
    if (opts.shard && !o->json) {
      std::printf("shard %d/%d: compiled %zu of its %zu artifacts in %.1f s (%d jobs)\n",
                  opts.shard->index, opts.shard->count, r.compiled, r.total, r.seconds, r.jobs);
      print_cache_stats(r);
      std::printf("%s\n", r.index_path.c_str());
    } else if (o->json) {
      std::cout << build_json(r, chosen);
    } else {
      if (r.compiled == 0 && (!r.cache || r.cache->hits == 0))
        std::printf("up to date: 0 of %zu compiled\n", r.total);
      else
        std::printf("compiled %zu of %zu artifacts in %.1f s (%d jobs)\n", r.compiled, r.total,
                    r.seconds, r.jobs);
      print_cache_stats(r);
      for (const auto& a : r.archives) {
        std::string skipped;
        for (const auto& s : a.skipped)
          skipped += (skipped.empty() ? "; skipped " : ", ") + s.family;
        std::printf("%s  %zu artifacts, %llu bytes, sha256 %s%s\n", a.path.c_str(), a.artifacts,
                    static_cast<unsigned long long>(a.size), a.sha256.c_str(), skipped.c_str());
      }
      std::printf("%s\n", r.index_path.c_str());
    }
    rc = 0;
  });
  add_merge_command(app, rc);
}

}  // namespace kiln::cli
