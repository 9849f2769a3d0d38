#pragma once
// The one kernel-project fixture: a project that is not kiln's, written into a directory as a
// user lays one out (docs/packages.md): VERSION, registry/package.json, registry/kernels.json and
// the sources under kernels/. Every test that needs a project of its own writes it through here.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "test_util.hpp"

namespace kiln::test {

// A registry of two families: norm (dtype x block, sm_80+, one flag) and hopper (sm_90a only),
// shared by the build-plan and registry tests.
inline constexpr const char* kTwoFamilyRegistry = R"({
  "format": 1,
  "types": {"f32": "float", "f16": "__half"},
  "families": [
    {"name": "norm", "sources": ["norm.cu"], "entries": ["kiln::norm<{dtype}, {block}>"],
     "params": [{"name": "dtype", "kind": "type", "values": ["f32", "f16"]},
                {"name": "block", "kind": "int", "values": [128, 256]}],
     "targets": ["sm_80+"], "flags": ["-DNORM=1"]},
    {"name": "hopper", "sources": ["hopper.cu"], "entries": ["kiln::hop"],
     "targets": ["sm_90a"]}
  ]
})";

struct KernelProject {
  std::string name;      // registry/package.json's "name"
  std::string version;   // VERSION
  std::string registry;  // registry/kernels.json, as written
  // More members of registry/package.json after "format" and "name", as JSON text (for example
  // R"("targets": ["sm_90a"])"); empty for none.
  std::string package_members;
  // kernels/<file> and its text, written in this order (a later one replaces an earlier one).
  std::vector<std::pair<std::string, std::string>> kernels;
};

// registry/package.json's text for `p`.
inline std::string package_json(const KernelProject& p) {
  std::string members = p.package_members.empty() ? "" : ", " + p.package_members;
  return "{\"format\": 1, \"name\": \"" + p.name + "\"" + members + "}\n";
}

// Writes `p` under `dir` (created as needed); returns `dir`.
inline std::filesystem::path write_kernel_project(const std::filesystem::path& dir,
                                                  const KernelProject& p) {
  write_file(dir / "VERSION", p.version + "\n");
  write_file(dir / "registry" / "package.json", package_json(p));
  write_file(dir / "registry" / "kernels.json", p.registry);
  for (const auto& [file, text] : p.kernels) write_file(dir / "kernels" / file, text);
  return dir;
}

}  // namespace kiln::test
