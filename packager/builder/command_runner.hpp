#pragma once
// The compiles of `kiln build` behind a small interface (ninja's CommandRunner idea): run_build
// plans, writes the stubs and build.ninja, and hands the compiles to a CommandRunner; then it
// checks and packs what came out. The real runner runs ninja over build.ninja (its -j is the
// parallel limit, its output is captured line by line); tests pass a fake runner that
// "compiles" in memory, so failure reports, progress and the job limit are unit tests.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "builder/build.hpp"

namespace kiln::builder {

// One compile that failed: the artifact's output (PlannedArtifact::fatbin, relative to the out
// directory) and what the compiler said.
struct CompileFailure {
  std::string output;
  std::string message;
};

struct CompileOutcome {
  int exit_code = 0;                     // 0: every artifact is up to date
  std::vector<CompileFailure> failures;  // the compiles that failed, in the order reported
  std::string log;                       // the runner's whole output (for an unexplained failure)
  std::size_t passes_run = 0;            // front-end passes that ran ("PASS" lines)
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Checks that the runner can run at all (e.g. ninja is on PATH); throws Error{Unsupported}
  // naming what is missing. run_build calls it before writing or compiling anything.
  virtual void check_available() = 0;
  // Brings every artifact of `plan` up to date under `out_dir` (stubs and build.ninja are
  // written there already), running at most `jobs` compiles at once. Calls `on_finished` once
  // per compile run, in the order they finish, with its "[finished/total] NVCC uri target"
  // line; an artifact already up to date runs nothing and reports nothing.
  virtual CompileOutcome run(const BuildPlan& plan, const std::string& out_dir, int jobs,
                             const std::function<void(const NinjaStatusLine&)>& on_finished) = 0;
};

// The real runner: `ninja -C <out_dir> -j <jobs>` over the written build.ninja. `path_env` is
// the PATH it searches for ninja.
std::unique_ptr<CommandRunner> make_ninja_runner(std::string path_env);

// ninja's output on a failed build: "FAILED: <outputs>", the command, then the compiler's
// output, up to the next status line or "ninja: " line. Pure; one entry per failed edge.
std::vector<CompileFailure> parse_ninja_failures(const std::string& log);

// Plans, writes stubs and build.ninja, has `runner` compile, checks every result, and
// publishes (the rest of run_build's contract is in build.hpp).
BuildResult run_build(const BuildOptions& opts, Toolkit& toolkit, CommandRunner& runner,
                      std::FILE* progress_out);

}  // namespace kiln::builder
