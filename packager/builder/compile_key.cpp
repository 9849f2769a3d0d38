// The result cache's key of one compile (build.hpp: compile_key). Pure: values in, key out.
#include <algorithm>

#include "builder/build.hpp"
#include "io/sha256.hpp"

namespace kiln::builder {

bool embeds_paths(const std::vector<std::string>& flags) {
  static const char* const kPathFlags[] = {
      "-lineinfo", "--generate-line-info", "-G", "--device-debug", "-g", "--debug"};
  return std::any_of(flags.begin(), flags.end(), [](const std::string& f) {
    return std::any_of(std::begin(kPathFlags), std::end(kPathFlags),
                       [&](const char* p) { return f == p; });
  });
}

CompileKey compile_key(const PlannedArtifact& a, const project::Specialisation& spec,
                       const std::string& stub, const std::string& source_dir,
                       const std::string& out_dir, const CompilerIdentity& compiler) {
  CompileKey k;
  auto add = [&k](std::string tag, std::string value) {
    k.fields.emplace_back(std::move(tag), std::move(value));
  };
  add("kiln-compile-key", kCompileKeyVersion);
  add("source_hash", spec.source_hash);
  add("uri", a.uri);
  for (const auto& [name, value] : spec.params) add("param", name + "=" + value);
  for (const auto& e : spec.entries) add("entry", e);
  add("stub", stub);
  add("target", a.target.str());
  // A grouped artifact's bytes also depend on kiln's back end (the entries it picks, the PTX it
  // cuts): its version is in the key. The group stub above names every member of the group.
  if (!a.pass.empty()) add("backend", std::string("kiln build-entry ") + kEntryStepVersion);
  std::vector<std::string> flags = manifest_flags(a, source_dir);
  for (const auto& f : flags) add("flag", f);
  if (embeds_paths(flags)) {
    add("source_dir", source_dir);
    add("out_dir", out_dir);
  }
  add("nvcc", compiler.nvcc_version);
  add("host_compiler", compiler.host_compiler);
  add("nvcc_environment", compiler.nvcc_environment);
  io::Sha256 h;
  for (const auto& [tag, value] : k.fields) h.field(tag, value);
  k.hex = h.hex();
  return k;
}

}  // namespace kiln::builder
