#pragma once
// What `kiln build` builds and how, from its command line, the project and the environment: the
// target list and where it came from, the --dist default, the launcher and result cache that the
// environment supplies when no flag does, and the reproducible build time. The choices are pure
// (values in, values out) and unit-tested (tests/build_plan_test.cpp); the readers beside them
// read the project's files and ask git.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "builder/build.hpp"
#include "format/target.hpp"
#include "runtime/environment.hpp"

namespace kiln::builder {

// The places a build's targets may come from, in the order they are asked: --targets; the
// project's registry/package.json "targets"; its ci/targets.txt when it has one; the release list
// compiled into kiln (KILN_RELEASE_TARGETS).
struct BuildTargetSources {
  std::string flag;                         // --targets as given; "" when not given
  std::vector<format::Target> project;              // registry/package.json "targets"; empty: none
  std::optional<std::string> targets_file;  // ci/targets.txt's text; nullopt: no such file
  std::string targets_file_path;            // that file, for messages
  std::vector<std::string> compiled;        // release_targets()
};
struct BuildTargets {
  std::vector<format::Target> targets;
  std::string origin;  // "--targets", "registry/package.json", "ci/targets.txt", "the release
                       // list compiled into kiln"
};
// The first source that names targets. Throws Error{Usage} for a malformed list (naming where it
// came from) and when nothing names a target.
BuildTargets choose_build_targets(const BuildTargetSources& sources);
// choose_build_targets over the project in `source_dir` (its package file, then ci/targets.txt,
// read only when the flag is empty) and `compiled`. Throws Error{NotFound} when `source_dir` is
// not a directory, Error{Usage} when ci/targets.txt exists but cannot be read.
BuildTargets project_build_targets(const std::string& flag, const std::string& source_dir,
                                   const std::vector<std::string>& compiled);
// "sm_90a,sm_80": the targets as one comma-separated list.
std::string joined(const std::vector<format::Target>& targets);

// The build time of the tree in `source_dir` (choose_build_time): SOURCE_DATE_EPOCH from `env`,
// else `git log -1 --format=%ct` there (git found on env's PATH), else the fixed time.
BuildTime source_build_time(const std::string& source_dir, const runtime::Environment& env);

// `kiln build`'s options as given on its command line ("" or nullopt: not given).
struct BuildFlags {
  std::vector<std::string> only;
  std::optional<int> jobs;
  std::string out = "kiln-build";
  std::string dist;
  std::optional<ShardSpec> shard;
  std::string launcher;
  std::string cache;
  bool no_cache = false;
  bool per_specialisation = false;  // --one-nvcc-per-specialisation
};
// The build's options: the flags, completed from `env` where they are empty (launcher:
// KILN_COMPILER_LAUNCHER; cache: KILN_BUILD_CACHE unless no_cache; the nvcc variables and the
// CA bundle as read), with --dist defaulting to <out>/dist, or <out>/shard-I-of-N for a shard.
// Progress is left Lines: the caller knows its terminal.
BuildOptions build_options(const BuildFlags& flags, const std::string& source_dir,
                           const std::vector<format::Target>& targets, const runtime::Environment& env,
                           std::int64_t build_time);

}  // namespace kiln::builder
