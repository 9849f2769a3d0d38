#include "builder/build_options.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "builder/toolkit.hpp"
#include "kiln/error.hpp"
#include "project/package.hpp"

namespace kiln::builder {

BuildTargets choose_build_targets(const BuildTargetSources& s) {
  if (!s.flag.empty()) return {format::parse_target_list(s.flag), "--targets"};
  if (!s.project.empty()) return {s.project, "registry/package.json"};
  if (s.targets_file)
    return {parse_targets_file(*s.targets_file, s.targets_file_path), "ci/targets.txt"};
  const std::string compiled_origin = "the release list compiled into kiln";
  if (!s.compiled.empty()) {
    std::string list;
    for (const auto& t : s.compiled) list += (list.empty() ? "" : ",") + t;
    try {
      return {format::parse_target_list(list), compiled_origin};
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

BuildTargets project_build_targets(const std::string& flag, const std::string& source_dir,
                                   const std::vector<std::string>& compiled) {
  if (!std::filesystem::is_directory(source_dir))
    throw Error(ErrorKind::NotFound, "source tree " + source_dir + " is not a directory");
  BuildTargetSources s;
  s.flag = flag;
  if (!flag.empty()) return choose_build_targets(s);
  s.project = project::read_package_file(source_dir).targets;
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
    s.compiled = compiled;
  }
  return choose_build_targets(s);
}

std::string joined(const std::vector<format::Target>& targets) {
  std::string out;
  for (const auto& t : targets) out += (out.empty() ? "" : ",") + t.str();
  return out;
}

BuildTime source_build_time(const std::string& source_dir, const runtime::Environment& env) {
  std::optional<std::string> sde;
  if (!env.source_date_epoch.empty()) sde = env.source_date_epoch;
  std::optional<std::string> git_time;
  if (!sde) {
    if (auto git = find_on_path("git", env.path)) {
      auto r = run_process({*git, "-C", source_dir, "log", "-1", "--format=%ct"});
      if (r.exit_code == 0) git_time = r.output;
    }
  }
  return choose_build_time(sde, git_time);
}

BuildOptions build_options(const BuildFlags& flags, const std::string& source_dir,
                           const std::vector<format::Target>& targets, const runtime::Environment& env,
                           std::int64_t build_time) {
  BuildOptions opts;
  opts.source_dir = source_dir;
  opts.targets = targets;
  opts.only = flags.only;
  opts.jobs = flags.jobs;
  opts.out_dir = flags.out;
  opts.shard = flags.shard;
  std::string dist_default = opts.shard ? "shard-" + std::to_string(opts.shard->index) + "-of-" +
                                              std::to_string(opts.shard->count)
                                        : "dist";
  opts.dist_dir =
      flags.dist.empty() ? (std::filesystem::path(flags.out) / dist_default).string() : flags.dist;
  opts.launcher = flags.launcher.empty() ? env.compiler_launcher : flags.launcher;
  opts.mode = flags.per_specialisation ? CompileMode::PerSpecialisation : CompileMode::Grouped;
  if (!flags.no_cache) opts.cache = flags.cache.empty() ? env.build_cache : flags.cache;
  opts.cache_ca_bundle = env.loader.ca_bundle;
  opts.nvcc_ccbin = env.nvcc_ccbin;
  opts.nvcc_prepend_flags = env.nvcc_prepend_flags;
  opts.nvcc_append_flags = env.nvcc_append_flags;
  opts.build_time = build_time;
  return opts;
}

}  // namespace kiln::builder
