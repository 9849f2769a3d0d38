// `kiln build`: compiles a project's registry for its targets and publishes the archives and
// index (builder/build_options.hpp chooses what to build, builder/build.hpp: run_build builds it).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "builder/build.hpp"
#include "builder/build_options.hpp"
#include "builder/entry_step.hpp"
#include "builder/shard.hpp"
#include "builder/toolkit.hpp"
#include "builder/toolkit_choice.hpp"
#include "commands/commands.hpp"
#include "kiln/error.hpp"
#include "plan/target_choice.hpp"
#include "runtime/environment.hpp"
#include "util/progress.hpp"

namespace kiln::commands {
namespace {

using builder::BuildTargets;

// One toolkit's build, as the summary reports it.
struct ToolkitBuild {
  const builder::ChosenToolkit* chosen;
  builder::BuildResult result;
};

// build_result_json's summary with the targets and where they came from. The top level is the
// whole build (counts summed, every archive with its toolkit, the left-out lines of all); "toolkits"
// holds each toolkit's own summary, in the order built; "toolkit" is the first's.
std::string build_json(const std::vector<ToolkitBuild>& builds, const BuildTargets& chosen,
                       const builder::BuildToolkits& toolkits) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json per = nlohmann::ordered_json::array();
  nlohmann::ordered_json archives = nlohmann::ordered_json::array();
  nlohmann::ordered_json left_out = nlohmann::ordered_json::array();
  nlohmann::ordered_json dropped = nlohmann::ordered_json::array();
  std::size_t compiled = 0, total = 0;
  for (const auto& b : builds) {
    const builder::ToolkitInfo& tk = b.chosen->toolkit->info();
    auto one = nlohmann::ordered_json::parse(builder::build_result_json(b.result));
    if (j.empty()) j = one;
    nlohmann::ordered_json t = {{"cuda_version", tk.version}, {"compiler", tk.identity()},
                                {"root", tk.root}};
    for (auto it = one.begin(); it != one.end(); ++it) t[it.key()] = it.value();
    t["left_out"] = b.chosen->left_out;
    t["dropped"] = b.result.dropped;
    for (auto a : one["archives"]) {
      a["cuda_version"] = tk.version;
      archives.push_back(std::move(a));
    }
    for (const auto& l : b.chosen->left_out) left_out.push_back(l);
    for (const auto& l : b.result.dropped) dropped.push_back(l);
    compiled += b.result.compiled;
    total += b.result.total;
    per.push_back(std::move(t));
  }
  j["compiled"] = compiled;
  j["total"] = total;
  j["specialisations"]["total"] = total;
  j["specialisations"]["compiled"] = compiled;
  j["index"] = builds.back().result.index_path;
  j["archives"] = std::move(archives);
  j["targets"] = nlohmann::ordered_json::array();
  for (const auto& t : chosen.targets) j["targets"].push_back(t.str());
  j["targets_from"] = chosen.origin;
  const builder::ToolkitInfo& first = builds.front().chosen->toolkit->info();
  j["toolkit"] = {{"cuda_version", first.version}, {"compiler", first.identity()}, {"root", first.root}};
  j["toolkits"] = std::move(per);
  j["toolkits_from"] = toolkits.origin;
  j["left_out"] = std::move(left_out);
  j["dropped"] = std::move(dropped);
  return j.dump(2) + "\n";
}

// "cache DIR: 12 hits, 3 misses (1 refused), 0 up to date; 40960 bytes fetched, 12288 stored".
void print_cache_stats(const builder::BuildResult& r) {
  if (!r.cache) return;
  const builder::CacheStats& c = *r.cache;
  std::printf("cache %s: %zu hits, %zu misses", c.location.c_str(), c.hits, c.misses);
  if (c.refused) std::printf(" (%zu refused)", c.refused);
  std::printf(", %zu up to date; %llu bytes fetched, %llu stored (%zu results)\n", c.up_to_date,
              static_cast<unsigned long long>(c.bytes_fetched),
              static_cast<unsigned long long>(c.bytes_stored), c.stored);
  if (!c.skipped.empty()) std::printf("cache skipped: %s\n", c.skipped.c_str());
}

// The text report: a shard's line, or what was compiled and each archive published.
void print_build(const builder::BuildResult& r, const std::optional<builder::ShardSpec>& shard) {
  if (shard) {
    std::printf("shard %d/%d: compiled %zu of its %zu artifacts in %.1f s (%d jobs)\n",
                shard->index, shard->count, r.compiled, r.total, r.seconds, r.jobs);
    print_cache_stats(r);
    std::printf("%s\n", r.index_path.c_str());
    return;
  }
  if (r.compiled == 0 && (!r.cache || r.cache->hits == 0))
    std::printf("up to date: 0 of %zu compiled\n", r.total);
  else
    std::printf("compiled %zu of %zu artifacts in %.1f s (%d jobs)\n", r.compiled, r.total,
                r.seconds, r.jobs);
  print_cache_stats(r);
  for (const auto& a : r.archives) {
    std::string skipped;
    for (const auto& s : a.skipped) skipped += (skipped.empty() ? "; skipped " : ", ") + s.family;
    std::printf("%s  %zu artifacts, %llu bytes, sha256 %s%s\n", a.path.c_str(), a.artifacts,
                static_cast<unsigned long long>(a.size), a.sha256.c_str(), skipped.c_str());
  }
  std::printf("%s\n", r.index_path.c_str());
}

// The command line: the builder's flags, and what the command reads itself.
struct BuildArgs {
  builder::BuildFlags flags;
  std::string targets;
  std::string toolkits;
  int jobs = 0;
  std::string source;
  bool json = false;
  std::string shard;
};

// The targets said on stderr, the build with each toolkit in turn (each publishing its
// archives into the one --dist, whose index keeps the others': publish_release), its report on
// stdout.
void build(const BuildArgs& o) {
  const std::string source_dir = project_dir(o.source, o.json);
  const BuildTargets chosen =
      builder::project_build_targets(o.targets, source_dir, plan::release_targets());
  std::fprintf(stderr, "targets: %s (from %s)\n", builder::joined(chosen.targets).c_str(),
               chosen.origin.c_str());
  builder::BuildFlags flags = o.flags;
  if (!o.shard.empty()) flags.shard = builder::parse_shard_spec(o.shard);
  const runtime::Environment env = runtime::read_environment();
  const builder::BuildTime build_time = builder::source_build_time(source_dir, env);
  builder::BuildOptions opts =
      builder::build_options(flags, source_dir, chosen.targets, env, build_time.seconds);
  opts.build_time_origin = build_time.origin;
  opts.progress = util::progress_style_for(stderr);
  // The toolkits --toolkits (or the project) names, each with the targets it does not build
  // left out; else the nvcc kiln finds, as before toolkits were named (builder/toolkit_choice.hpp).
  const builder::BuildToolkits toolkits = builder::project_build_toolkits(o.toolkits, source_dir);
  if (opts.shard && toolkits.names.size() > 1)
    throw Error(ErrorKind::Usage,
                "--shard builds one toolkit's part: name one toolkit with --toolkits for each "
                "shard build (toolkits " + [&] {
                  std::string l;
                  for (const auto& n : toolkits.names) l += (l.empty() ? "" : ", ") + n;
                  return l;
                }() + " from " +
                    toolkits.origin +
                    "), and `kiln merge` each toolkit's shards into the same --dist, whose index "
                    "then lists them all");
  const std::vector<builder::ChosenToolkit> chosen_tks =
      builder::choose_toolkits(toolkits, opts.targets, builder::ToolkitSearch::from_env());
  const bool several = chosen_tks.size() > 1;
  if (!toolkits.names.empty()) {
    for (const auto& c : chosen_tks) {
      const builder::ToolkitInfo& tk = c.toolkit->info();
      std::fprintf(stderr, "toolkit: CUDA %s, %s at %s (from %s)\n", tk.version.c_str(),
                   tk.identity().c_str(), tk.root.c_str(), toolkits.origin.c_str());
    }
    for (const auto& c : chosen_tks)
      for (const auto& line : c.left_out) std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::vector<ToolkitBuild> builds;
  for (const auto& c : chosen_tks) {
    const builder::ToolkitInfo& tk = c.toolkit->info();
    builder::BuildOptions one = opts;
    one.asked_targets = opts.targets;
    one.targets = c.targets;
    if (!c.build_dir.empty())
      one.out_dir = (std::filesystem::path(opts.out_dir) / c.build_dir).string();
    if (several)
      std::fprintf(stderr, "CUDA %s (%s): %s\n", tk.version.c_str(), tk.identity().c_str(),
                   builder::joined(c.targets).c_str());
    builds.push_back({&c, builder::run_build(one, *c.toolkit, stderr)});
    std::fflush(stderr);
    if (!o.json) {
      if (several) std::printf("CUDA %s (%s):\n", tk.version.c_str(), tk.identity().c_str());
      print_build(builds.back().result, opts.shard);
    }
  }
  if (o.json) std::cout << build_json(builds, chosen, toolkits);
}

}  // namespace

void add_build_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "build",
      "compile every registered kernel for the given targets with nvcc (through ninja), or "
      "with NVRTC (--toolkits nvrtc:DIR), and publish one archive per target plus the release "
      "index; with several --toolkits, each toolkit's archives into one index.\n"
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
  auto o = std::make_shared<BuildArgs>();
  cmd->add_option("--targets", o->targets,
                  "comma-separated SM targets as nvcc spells them, e.g. sm_80,sm_90a,compute_90 "
                  "(default: the \"targets\" of registry/package.json, else ci/targets.txt "
                  "of the project, else the release list compiled into kiln)");
  cmd->add_option("--toolkits", o->toolkits,
                  "the toolkits to build with, comma-separated: a CUDA release (13.0: nvcc under "
                  "/usr/local/cuda-13.0, $CUDA_HOME, /usr/local/cuda or PATH), nvrtc:DIR (an NVRTC "
                  "toolkit directory, scripts/nvrtc_toolkit.sh) or a CUDA install's path. Each "
                  "toolkit builds every target it can, in turn, into the one --dist, whose index "
                  "lists the archives of all (a toolkit built alone into it keeps the others' "
                  "archives of the same build); a target a toolkit does not build is left out "
                  "with a line; at most one toolkit per CUDA version, and one with --shard "
                  "(default: registry/package.json \"toolkits\", else the project's "
                  "ci/toolkits.txt, else the nvcc kiln finds)");
  cmd->add_option("--only", o->flags.only,
                  "build only families or URIs matching this glob (fnmatch; repeatable)");
  auto* jobs_opt = cmd->add_option(
      "--jobs,-j", o->jobs, "parallel nvcc jobs (default: min(cores, MemAvailable / 512 MiB))");
  cmd->add_option("--out", o->flags.out,
                  "build directory: build.ninja, stubs, fatbins (default ./kiln-build)");
  cmd->add_option("--dist", o->flags.dist,
                  "where archives and the index are published (default <out>/dist)");
  cmd->add_option("--source", o->source,
                  "the kernel project (VERSION, registry/package.json, registry/kernels.json, "
                  "kernels/; default: the current directory when it holds registry/package.json, "
                  "else the tree this kiln was built from)");
  cmd->add_flag("--json", o->json, "print a JSON summary on stdout (progress stays on stderr)");
  cmd->add_option("--shard", o->shard,
                  "build only part I of N of the work (round-robin over targets x front-end passes) into a "
                  "shard directory (--dist, default <out>/shard-I-of-N) for `kiln merge`");
  cmd->add_option("--launcher", o->flags.launcher,
                  "run nvcc through this compiler launcher, e.g. sccache (default: "
                  "$KILN_COMPILER_LAUNCHER); it changes no byte and no hash");
  auto* cache_opt = cmd->add_option(
      "--cache", o->flags.cache,
      "result cache: a directory, or the http(s):// URL of a server speaking Bazel's HTTP cache "
      "protocol (bazel-remote, nginx with WebDAV PUT); a hit skips nvcc and is checked like a "
      "compile; a cache that fails is skipped, never the build (default: $KILN_BUILD_CACHE)");
  cmd->add_flag("--no-cache", o->flags.no_cache, "use no result cache, even if KILN_BUILD_CACHE is set")
      ->excludes(cache_opt);

  cmd->add_flag("--one-nvcc-per-specialisation", o->flags.per_specialisation,
                "compile each specialisation and target with its own nvcc, as a failed "
                "front-end pass does (default: one front-end pass per group of a family's "
                "specialisations and target, then a back end per specialisation)");

  cmd->callback([o, jobs_opt, &rc] {
    if (jobs_opt->count() > 0) o->flags.jobs = o->jobs;
    build(*o);
    rc = 0;
  });

  // What build.ninja runs for each grouped specialisation (builder/entry_step.hpp); not for
  // people, so not in the help.
  auto* entry = app.add_subcommand("build-entry", "");
  entry->group("");
  auto step = std::make_shared<builder::EntryStep>();
  auto target = std::make_shared<std::string>();
  entry->add_option("--nvcc", step->nvcc)->required();
  entry->add_option("--target", *target)->required();
  entry->add_option("--pass", step->pass_ptx)->required();
  entry->add_option("--out", step->out)->required();
  entry->add_option("--entry", step->entries)->required();
  // Everything after "--" is nvcc's (flags that begin with '-').
  entry->prefix_command(true);
  entry->callback([entry, step, target, &rc] {
    step->nvcc_flags = entry->remaining();
    if (!step->nvcc_flags.empty() && step->nvcc_flags.front() == "--")
      step->nvcc_flags.erase(step->nvcc_flags.begin());
    auto t = format::parse_target(*target);
    if (!t) throw Error(ErrorKind::Usage, "build-entry: not a target: " + *target);
    step->target = *t;
    builder::run_entry_step(*step);
    rc = 0;
  });
}

}  // namespace kiln::commands
