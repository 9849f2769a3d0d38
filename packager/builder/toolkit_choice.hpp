#pragma once
// Which toolkits a `kiln build` compiles with, as a user names them (--toolkits LIST), and which
// of the asked targets each can build. docs/packager.md, "Toolkits".
//   "X.Y"        nvcc of CUDA X.Y: /usr/local/cuda-X.Y/bin/nvcc, else the first of $CUDA_HOME,
//                /usr/local/cuda and nvcc on PATH whose release is X.Y
//   "nvrtc:DIR"  the NVRTC toolkit directory DIR (scripts/nvrtc_toolkit.sh lays one out)
//   "DIR"        (a path: it holds a '/') a CUDA install (DIR/bin/nvcc)
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "builder/toolkit.hpp"
#include "format/target.hpp"

namespace kiln::builder {

// A comma- or newline-separated list ('#' starts a comment), in the order given; duplicates
// refused. Throws Error{Usage} naming `origin` for an empty list or a malformed name.
std::vector<std::string> parse_toolkit_list(std::string_view text, const std::string& origin);

// The toolkit `name` names (above). Probes nothing yet: info() does. Throws Error{Unsupported}
// naming every place looked at when no toolkit of that name is found.
std::unique_ptr<Toolkit> find_toolkit(const std::string& name, const ToolkitSearch& search);

// The asked targets split by what `tk` builds: those it builds, in order, and one line for each
// it does not ("CUDA 13.0 (nvcc) does not build sm_70; left out").
struct ToolkitTargets {
  std::vector<format::Target> build;
  std::vector<std::string> left_out;
};
ToolkitTargets toolkit_targets(const ToolkitInfo& tk, const std::vector<format::Target>& targets);

// The toolkits a build names, and where the list came from: --toolkits; the project's
// registry/package.json "toolkits"; its ci/toolkits.txt. Empty `names` (origin "the nvcc of
// CUDA_HOME, /usr/local/cuda or PATH"): none is named, and the build uses the one ToolkitSearch
// finds, as before toolkits were named. Throws Error{Usage} for a malformed list, naming where it came from.
struct BuildToolkits {
  std::vector<std::string> names;
  std::string origin;
};
BuildToolkits project_build_toolkits(const std::string& flag, const std::string& source_dir);

// The toolkits a build compiles with, each with the targets it builds, in the order named:
// every named toolkit, the targets it does not build left out (a line each), or, when none is
// named, the one `search` finds, given every target (run_build refuses one it does not build,
// as before toolkits were named). A named toolkit that builds none of the targets is left out
// with a line (in the first chosen toolkit's `left_out`) when another builds some; when none
// does, throws Error{Unsupported} naming what each builds. Two named toolkits of one CUDA
// version are refused (Error{Usage}): an index lists one archive per (toolkit, target).
struct ChosenToolkit {
  std::string name;  // as named ("13.0", "nvrtc:DIR"); "" when none was named
  std::unique_ptr<Toolkit> toolkit;
  std::vector<format::Target> targets;
  std::vector<std::string> left_out;
  // The subdirectory of --out for this toolkit's build files (stubs, build.ninja, results), so
  // that toolkits never share a compile result: toolkit_build_dir; "" (--out itself) when none
  // was named.
  std::string build_dir;
};
std::vector<ChosenToolkit> choose_toolkits(const BuildToolkits& toolkits,
                                           const std::vector<format::Target>& targets,
                                           const ToolkitSearch& search);

// "toolkit-13.0-nvcc", "toolkit-12.9-nvrtc": where a named toolkit's build files go under --out.
std::string toolkit_build_dir(const ToolkitInfo& tk);

}  // namespace kiln::builder
