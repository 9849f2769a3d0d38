// The real CommandRunner of `kiln build`: ninja over the written build.ninja, -j as the parallel
// limit, NINJA_STATUS lines as progress, FAILED blocks as the failures.
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "builder/command_runner.hpp"
#include "builder/toolkit.hpp"
#include "kiln/error.hpp"

namespace kiln::builder {

std::vector<CompileFailure> parse_ninja_failures(const std::string& log) {
  std::vector<CompileFailure> out;
  std::istringstream in(log);
  std::string line;
  CompileFailure* cur = nullptr;
  bool skip_command = false;
  while (std::getline(in, line)) {
    if (line.rfind("FAILED: ", 0) == 0) {
      std::string outs = line.substr(8);
      while (!outs.empty() && outs.back() == ' ') outs.pop_back();
      out.push_back({outs.substr(0, outs.find(' ')), ""});
      cur = &out.back();
      skip_command = true;
      continue;
    }
    if (!cur) continue;
    if (skip_command) {
      skip_command = false;
      continue;
    }
    if (parse_ninja_status(line) || line.rfind("ninja: ", 0) == 0) {
      cur = nullptr;
      continue;
    }
    cur->message += line + "\n";
  }
  return out;
}

namespace {

class NinjaRunner : public CommandRunner {
 public:
  explicit NinjaRunner(std::string path_env) : path_env_(std::move(path_env)) {}

  void check_available() override {
    ninja_ = find_on_path("ninja", path_env_);
    if (!ninja_)
      throw Error(ErrorKind::Unsupported,
                  "ninja not found on PATH (" + path_env_ +
                      "); kiln build runs ninja to compile. Install it (apt-get install "
                      "ninja-build, or pip install ninja) or add it to PATH");
  }

  CompileOutcome run(const BuildPlan& plan, const std::string& out_dir, int jobs,
                     const std::function<void(const NinjaStatusLine&)>& on_finished) override {
    if (!ninja_) check_available();
    // ninja counts front-end passes as edges; progress counts specialisations: with passes in
    // the plan, the numbers are the finished artifacts of the artifacts handed to ninja.
    const bool grouped = plan.pass_count() > 0;
    int finished = 0;
    std::size_t passes = 0;
    const int total = static_cast<int>(plan.artifact_count());
    ProcessResult nr = run_process({*ninja_, "-C", out_dir, "-j", std::to_string(jobs)},
                                   {{"NINJA_STATUS", "[%f/%t] "}}, [&](const std::string& line) {
                                     auto s = parse_ninja_status(line);
                                     if (!s) {
                                       if (line.find("] PASS ") != std::string::npos) ++passes;
                                       return;
                                     }
                                     if (grouped) {
                                       s->finished = ++finished;
                                       s->total = total;
                                     }
                                     on_finished(*s);
                                   });
    CompileOutcome out;
    out.exit_code = nr.exit_code;
    out.passes_run = passes;
    if (nr.exit_code != 0) out.failures = parse_ninja_failures(nr.output);
    out.log = std::move(nr.output);
    return out;
  }

 private:
  std::string path_env_;
  std::optional<std::string> ninja_;
};

}  // namespace

std::unique_ptr<CommandRunner> make_ninja_runner(std::string path_env) {
  return std::make_unique<NinjaRunner>(std::move(path_env));
}

}  // namespace kiln::builder
