#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "build.hpp"
#include "commands.hpp"
#include "kiln/error.hpp"

namespace kiln::cli {

void add_build_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "build",
      "compile every registered kernel for the given targets with nvcc (through ninja) and "
      "publish one archive per target plus the release index.\n"
      "Incremental: a second run compiles only what changed. Reproducible: with "
      "SOURCE_DATE_EPOCH set, the same tree gives byte-identical archives in any --out.\n"
      "Exit codes: 2 bad arguments, 5 unsupported target or missing nvcc/ninja, 6 --only "
      "matches nothing, 7 a kernel failed to compile (nothing is published), 9 I/O.\n"
      "Details: docs/packager.md");
  struct Opts {
    std::string targets;
    std::vector<std::string> only;
    int jobs = 0;
    std::string out = "kiln-build";
    std::string dist;
    std::string source;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--targets", o->targets,
                  "comma-separated SM targets as nvcc spells them, e.g. sm_80,sm_90a,compute_90 "
                  "(default: ci/targets.txt of the source tree)");
  cmd->add_option("--only", o->only,
                  "build only families or URIs matching this glob (fnmatch; repeatable)");
  auto* jobs_opt = cmd->add_option(
      "--jobs,-j", o->jobs, "parallel nvcc jobs (default: min(cores, MemAvailable / 512 MiB))");
  cmd->add_option("--out", o->out,
                  "build directory: build.ninja, stubs, fatbins (default ./kiln-build)");
  cmd->add_option("--dist", o->dist,
                  "where archives and the index are published (default <out>/dist)");
  cmd->add_option("--source", o->source,
                  "source tree holding registry/kernels.json and kernels/ (default: the tree "
                  "this kiln was configured from)");
  cmd->add_flag("--json", o->json, "print a JSON summary on stdout (progress stays on stderr)");

  cmd->callback([o, jobs_opt, &rc] {
    packager::BuildOptions opts;
    opts.source_dir = o->source.empty() ? default_source_dir() : o->source;
    if (!std::filesystem::is_directory(opts.source_dir))
      throw Error(ErrorKind::NotFound, "source tree " + opts.source_dir + " is not a directory");
    if (!o->targets.empty()) {
      opts.targets = parse_target_list(o->targets);
    } else {
      auto file = std::filesystem::path(opts.source_dir) / "ci" / "targets.txt";
      std::ifstream in(file, std::ios::binary);
      if (!in)
        throw Error(ErrorKind::Usage, "no --targets given and " + file.string() +
                                          " (the default target list) cannot be read");
      std::ostringstream ss;
      ss << in.rdbuf();
      opts.targets = packager::parse_targets_file(ss.str(), file.string());
    }
    opts.only = o->only;
    if (jobs_opt->count() > 0) opts.jobs = o->jobs;
    opts.out_dir = o->out;
    opts.dist_dir = o->dist.empty() ? (std::filesystem::path(o->out) / "dist").string() : o->dist;
    // Reproducible builds pin the time; otherwise the manifest records when it was packaged.
    if (const char* sde = std::getenv("SOURCE_DATE_EPOCH"); sde && *sde)
      opts.build_time = packager::parse_source_date_epoch(sde);
    else
      opts.build_time = static_cast<std::int64_t>(std::time(nullptr));
    opts.progress =
        ::isatty(STDERR_FILENO) ? packager::ProgressStyle::Live : packager::ProgressStyle::Lines;

    packager::NvccToolkit toolkit(packager::ToolkitSearch::from_env());
    packager::BuildResult r = packager::run_build(opts, toolkit, stderr);
    std::fflush(stderr);
    if (o->json) {
      std::cout << packager::build_result_json(r);
    } else {
      if (r.compiled == 0)
        std::printf("up to date: 0 of %zu compiled\n", r.total);
      else
        std::printf("compiled %zu of %zu artifacts in %.1f s (%d jobs)\n", r.compiled, r.total,
                    r.seconds, r.jobs);
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
}

}  // namespace kiln::cli
