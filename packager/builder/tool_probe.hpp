#pragma once
// The CUDA tools `kiln doctor` reports (nvcc, ptxas, nvlink, fatbinary): found where a build
// would look, and really run (`<tool> --version`).
#include <string>
#include <string_view>
#include <vector>

namespace kiln::builder {

struct ToolFact {
  std::string name;
  std::string path;     // "" when not found
  std::string version;  // the line of `--version` naming it, when it ran
  std::string detail;   // why it is not usable
  bool runnable = false;
};

// The directories looked in, in order: $CUDA_HOME/bin (when set), /usr/local/cuda/bin, then each
// entry of `path` (':'-separated, empty entries skipped).
std::vector<std::string> tool_dirs(const std::string& cuda_home, const std::string& path);

// The line of a `--version` output that names the version: the last non-empty line, except that
// once a line holds "release " (nvcc's "Cuda compilation tools, release 13.0, V13.0.88") only a
// later line that also holds it replaces it.
std::string version_line(std::string_view output);

// `name` found in tool_dirs() of the environment (runtime/environment.hpp) and run with
// --version.
ToolFact probe_tool(const std::string& name);

}  // namespace kiln::builder
