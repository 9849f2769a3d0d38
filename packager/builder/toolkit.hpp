#pragma once
// The CUDA toolkit as `kiln build` sees it: where nvcc is, which version it is, and which
// targets it really builds. The probe sits behind `Toolkit` so planning and target checks are
// unit-tested with a fake; `NvccToolkit` runs the real binaries. Also the one place that
// spawns child processes for the packager (nvcc probes, ninja).
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/target.hpp"

namespace kiln::builder {

struct ToolkitInfo {
  // How it compiles: nvcc (a CUDA install), or NVRTC loaded from a toolkit directory with that
  // directory's ptxas, kiln writing the fatbins (nvrtc_toolkit.hpp).
  enum class Kind { Nvcc, Nvrtc };
  Kind kind = Kind::Nvcc;
  std::string root;          // toolkit prefix, e.g. /usr/local/cuda
  std::string nvcc;          // absolute path of the nvcc that will compile ("" for NVRTC)
  std::string version;       // major.minor, e.g. "13.0"
  std::string full_version;  // e.g. "13.0.88"
  std::string found_via;     // "CUDA_HOME", "/usr/local/cuda" or "PATH": for messages
  // Every target nvcc accepts for `-gencode code=...` (sm_*, compute_*, with a/f variants),
  // sorted; lto_* is left out.
  std::vector<std::string> codes;
  // NVRTC only: the library (dlopen'ed), the ptxas beside it, the include directories every
  // compile is given (the toolkit's headers).
  std::string nvrtc_library;
  std::string ptxas;
  std::vector<std::string> include_dirs;
  std::string ptxas_version;  // NVRTC: ptxas's full version, e.g. "12.9.86"
  // The compiler's name and full version, as the result cache's key and messages name it:
  // "nvcc 13.0.88", "nvrtc 12.9.86 (ptxas 12.9.86)".
  std::string identity() const;
  // "nvcc" or "NVRTC": what failed, in a compile error.
  std::string compiler_name() const;
};

class Toolkit {
 public:
  virtual ~Toolkit() = default;
  // Probes once and returns the facts; throws Error{Unsupported} naming what is missing.
  virtual const ToolkitInfo& info() = 0;
};

// Where to look: CUDA_HOME (when set, it must hold nvcc: no silent fallback), then
// /usr/local/cuda, then nvcc on PATH.
struct ToolkitSearch {
  std::optional<std::string> cuda_home;  // $CUDA_HOME
  std::string default_root = "/usr/local/cuda";
  std::string path;  // $PATH
  static ToolkitSearch from_env();
};

// The real toolkit: runs `nvcc --version`, `--list-gpu-arch`, `--list-gpu-code`, `--help`,
// `ptxas --version` and `fatbinary --version`.
class NvccToolkit : public Toolkit {
 public:
  explicit NvccToolkit(ToolkitSearch search) : search_(std::move(search)) {}
  const ToolkitInfo& info() override;

 private:
  ToolkitSearch search_;
  std::optional<ToolkitInfo> info_;
};

// ---- pure parsing and checks (unit-tested) ----

// "Cuda compilation tools, release 13.0, V13.0.88" -> {"13.0", "13.0.88"}.
std::optional<std::pair<std::string, std::string>> parse_nvcc_version(std::string_view text);
// One name per line (`--list-gpu-arch`, `--list-gpu-code`); blank lines ignored.
std::vector<std::string> parse_name_lines(std::string_view text);
// The "Allowed values for this option: 'a','b',..." list that follows `option` in nvcc --help.
std::vector<std::string> parse_allowed_values(std::string_view help, std::string_view option);
// The codes a toolkit builds: the listed real/virtual archs, plus the a/f variants that
// --help allows for --gpu-code whose base arch is listed. Sorted, unique, no lto_*.
std::vector<std::string> supported_codes(const std::vector<std::string>& listed,
                                         const std::vector<std::string>& allowed_gpu_code);

// Throws Error{Unsupported} for the first target the toolkit cannot build, naming it and
// every target the toolkit supports.
void check_targets(const ToolkitInfo& tk, const std::vector<format::Target>& targets);
// nvcc's -gencode value for a target: sm_90a -> arch=compute_90a,code=sm_90a;
// compute_90 -> arch=compute_90,code=compute_90.
std::string gencode_for(const format::Target& t);

// ---- processes ----

struct ProcessResult {
  int exit_code = -1;  // 128+signal when killed by a signal
  std::string output;  // stdout and stderr together
};
// Runs argv[0] (a path, or a name looked up on PATH) with extra environment variables; each
// output line is handed to on_line as it arrives (when given). Throws Error{Unsupported} when
// the program cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& extra_env = {},
                          const std::function<void(const std::string&)>& on_line = {});
// The host compiler nvcc preprocesses with, as the result cache's key names it: `ccbin`
// (NVCC_CCBIN) when set, else gcc on `path`; the first line of its `--version`, or a sentence
// saying why it could not be run (then nvcc cannot run it either, and the compile fails).
std::string host_compiler_identity(const std::string& ccbin, const std::string& path);
// The first executable `name` in the ':'-separated PATH, or nullopt.
std::optional<std::string> find_on_path(const std::string& name, const std::string& path);

}  // namespace kiln::builder
