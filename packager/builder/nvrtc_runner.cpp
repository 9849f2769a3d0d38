// `kiln build`'s NVRTC back end, the compiles (nvrtc_backend.hpp): the runner that compiles an
// NVRTC plan in this process, ptxas as a child, and writes the fatbins.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "builder/entry_step.hpp"
#include "builder/fatbin_writer.hpp"
#include "builder/nvrtc_backend.hpp"
#include "builder/nvrtc_toolkit.hpp"
#include "io/atomic_file.hpp"
#include "kiln/error.hpp"
#include "util/join.hpp"

namespace kiln::builder {
namespace fs = std::filesystem;

namespace {

// One compile's step failed: the message is what the user reads under the URI.
struct StepFailed {
  std::string message;
};

class NvrtcRunner : public CommandRunner {
 public:
  explicit NvrtcRunner(NvrtcToolkit& tk) : toolkit_(tk) {}

  void check_available() override { toolkit_.library(); }

  CompileOutcome run(const BuildPlan& plan, const std::string& out_dir, int jobs,
                     const std::function<void(const NinjaStatusLine&)>& on_finished) override {
    const ToolkitInfo& tk = toolkit_.info();
    const NvrtcLibrary& lib = toolkit_.library();
    out_ = fs::path(out_dir);
    CompileOutcome outcome;
    std::mutex mu;

    // The passes, each once (a pass serves every target of its virtual arch).
    std::vector<const PlannedPass*> passes;
    std::set<std::string> seen;
    for (const auto& tp : plan.targets)
      for (const auto& p : tp.passes)
        if (seen.insert(p.ptx).second) passes.push_back(&p);
    std::set<std::string> failed_passes;
    for_each_parallel(passes.size(), jobs, [&](std::size_t i) {
      const PlannedPass& p = *passes[i];
      try {
        compile_front_end(lib, tk, p.args, out_ / p.ptx);
        std::lock_guard<std::mutex> g(mu);
        ++outcome.passes_run;
      } catch (const StepFailed& f) {
        std::lock_guard<std::mutex> g(mu);
        ++outcome.passes_run;
        failed_passes.insert(p.ptx);
        outcome.failures.push_back({p.ptx, f.message});
      } catch (const Error& e) {
        std::lock_guard<std::mutex> g(mu);
        failed_passes.insert(p.ptx);
        outcome.failures.push_back({p.ptx, e.what()});
      }
    });

    std::vector<const PlannedArtifact*> artifacts;
    for (const auto& tp : plan.targets)
      for (const auto& a : tp.artifacts)
        if (a.pass.empty() || !failed_passes.count(a.pass)) artifacts.push_back(&a);
    const int total = static_cast<int>(plan.artifact_count());
    int finished = 0;
    for_each_parallel(artifacts.size(), jobs, [&](std::size_t i) {
      const PlannedArtifact& a = *artifacts[i];
      std::string failure;
      try {
        if (a.pass.empty())
          compile_own(lib, tk, a);
        else
          back_end(tk, a);
      } catch (const StepFailed& f) {
        failure = f.message;
      } catch (const Error& e) {
        failure = e.what();
      }
      std::lock_guard<std::mutex> g(mu);
      if (!failure.empty()) outcome.failures.push_back({a.fatbin, failure});
      on_finished({++finished, total, a.uri, a.target.str()});
    });
    outcome.exit_code = outcome.failures.empty() ? 0 : 1;
    return outcome;
  }

 private:
  // Runs `fn(i)` for i < n on at most `jobs` threads.
  static void for_each_parallel(std::size_t n, int jobs, const std::function<void(std::size_t)>& fn) {
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      for (std::size_t i; (i = next++) < n;) fn(i);
    };
    std::size_t threads = std::min<std::size_t>(n, static_cast<std::size_t>(std::max(1, jobs)));
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
  }

  // NVRTC over `stub` with `options` (the toolkit's include directories added), its PTX; a
  // failure or a warning is a StepFailed with NVRTC's log.
  std::string nvrtc_ptx(const NvrtcLibrary& lib, const ToolkitInfo& tk,
                        const std::vector<std::string>& options, const std::string& stub,
                        const std::vector<std::string>& entries) {
    std::string source = io::read_whole_file(out_ / stub);
    std::vector<std::string> opts = options;
    for (const auto& d : tk.include_dirs) opts.push_back("-I" + d);
    NvrtcOutput r = lib.compile_to_ptx(source, stub, opts, entries);
    if (!r.ok) throw StepFailed{r.log};
    if (nvrtc_log_warns(r.log))
      throw StepFailed{r.log + "NVRTC warned, and kiln builds with warnings as errors (nvcc's "
                               "-Werror all-warnings)\n"};
    return r.ptx;
  }

  // `nvrtc <options> -o <out> <stub> <entry>...`.
  void compile_front_end(const NvrtcLibrary& lib, const ToolkitInfo& tk,
                         const std::vector<std::string>& args, const fs::path& out) {
    auto o = std::find(args.begin(), args.end(), "-o");
    if (args.empty() || args[0] != "nvrtc" || o == args.end() || args.end() - o < 3)
      throw Error(ErrorKind::Internal, "not an NVRTC pass: " + util::join(args, " "));
    std::vector<std::string> options(args.begin() + 1, o);
    std::string ptx = nvrtc_ptx(lib, tk, options, *(o + 2), {o + 3, args.end()});
    create_parent(out);
    io::write_file_atomically(out, ptx);
  }

  // ptxas <options> [-e names] -o <cubin> <ptx>; the cubin's bytes.
  std::string ptxas(const ToolkitInfo& tk, const std::vector<std::string>& options,
                    const std::vector<std::string>& entries, const fs::path& ptx,
                    const fs::path& cubin) {
    std::vector<std::string> argv = {tk.ptxas};
    argv.insert(argv.end(), options.begin(), options.end());
    if (!entries.empty()) argv.insert(argv.end(), {"-e", util::join(entries, ",")});
    argv.insert(argv.end(), {"-o", cubin.string(), ptx.string()});
    ProcessResult r = run_process(argv);
    if (r.exit_code != 0)
      throw StepFailed{r.output + (r.output.empty() || r.output.back() == '\n' ? "" : "\n") +
                       "ptxas failed (exit code " + std::to_string(r.exit_code) + ") on " +
                       ptx.string() + "\n"};
    std::string bytes = io::read_whole_file(cubin, std::uint64_t{1} << 30);
    std::error_code ec;
    fs::remove(cubin, ec);
    return bytes;
  }

  // A grouped artifact: `--target T --pass P --out O --entry E... -- ptxas <options>`.
  void back_end(const ToolkitInfo& tk, const PlannedArtifact& a) {
    std::vector<std::string> entries, ptxas_opts;
    auto dash = std::find(a.args.begin(), a.args.end(), "--");
    for (auto it = a.args.begin(); it != dash && it + 1 != dash; ++it)
      if (*it == "--entry") entries.push_back(*++it);
    if (dash == a.args.end() || dash + 1 == a.args.end() || *(dash + 1) != "ptxas")
      throw Error(ErrorKind::Internal, "not an NVRTC back end: " + util::join(a.args, " "));
    ptxas_opts.assign(dash + 2, a.args.end());
    const fs::path module = out_ / a.pass;
    const fs::path out = out_ / a.fatbin;
    create_parent(out);
    std::string ptx = io::read_whole_file(module, std::uint64_t{1} << 30);
    std::vector<std::string> symbols = module_entry_symbols(ptx, entries, a.fatbin, a.target.str());
    fs::path cubin = out;
    cubin.replace_extension(".cubin");
    if (a.target.kind == format::Target::Kind::Sass) {
      io::write_file_atomically(out, fatbin_of_cubin(ptxas(tk, ptxas_opts, symbols, module, cubin), a.target));
      return;
    }
    fs::path slice = out;
    slice.replace_extension(".ptx");
    std::string cut = ptx_slice(ptx, symbols);
    io::write_file_atomically(slice, cut);
    ptxas(tk, ptxas_opts, {}, slice, cubin);  // the check: what the driver will JIT compiles
    io::write_file_atomically(out, fatbin_of_ptx(cut, a.target));
  }

  // One specialisation on its own: `nvrtc <options> [--ptxas <options>] -o <fatbin> <stub>
  // <entry>...`.
  void compile_own(const NvrtcLibrary& lib, const ToolkitInfo& tk, const PlannedArtifact& a) {
    auto o = std::find(a.args.begin(), a.args.end(), "-o");
    if (a.args.empty() || a.args[0] != "nvrtc" || o == a.args.end() || a.args.end() - o < 3)
      throw Error(ErrorKind::Internal, "not an NVRTC compile: " + util::join(a.args, " "));
    auto px = std::find(a.args.begin(), o, "--ptxas");
    std::vector<std::string> options(a.args.begin() + 1, px);
    const fs::path out = out_ / *(o + 1);
    create_parent(out);
    std::string ptx = nvrtc_ptx(lib, tk, options, *(o + 2), {o + 3, a.args.end()});
    if (a.target.kind == format::Target::Kind::Ptx) {
      io::write_file_atomically(out, fatbin_of_ptx(ptx, a.target));
      return;
    }
    fs::path module = out, cubin = out;
    module.replace_extension(".ptx");
    cubin.replace_extension(".cubin");
    io::write_file_atomically(module, ptx);
    std::vector<std::string> ptxas_opts(px == o ? o : px + 1, o);
    io::write_file_atomically(out, fatbin_of_cubin(ptxas(tk, ptxas_opts, {}, module, cubin), a.target));
  }

  static void create_parent(const fs::path& p) {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (ec)
      throw Error(ErrorKind::Io, "cannot create " + p.parent_path().string() + ": " + ec.message());
  }

  NvrtcToolkit& toolkit_;
  fs::path out_;
};

}  // namespace

std::unique_ptr<CommandRunner> make_nvrtc_runner(NvrtcToolkit& toolkit) {
  return std::make_unique<NvrtcRunner>(toolkit);
}

}  // namespace kiln::builder
