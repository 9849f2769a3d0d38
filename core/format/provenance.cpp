#include "format/provenance.hpp"

namespace kiln::format {

namespace {

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

}  // namespace

std::string describe_provenance(const Provenance& p) {
  std::vector<std::string> tools;
  for (const auto& t : p.toolkits) tools.push_back(t.name + " " + t.version);
  std::string source = "not from a git checkout";
  if (!p.source_commit.empty())
    source = "from commit " + p.source_commit +
             (!p.source_dirty ? " (changes unknown)"
                              : *p.source_dirty ? " with uncommitted changes" : " (clean)");
  return "kiln " + p.kiln_version + ", " + joined(tools, ", ") + ", on " + joined(p.hosts, ", ") +
         ", " + source + ", build time " + std::to_string(p.build_time) + " (" +
         p.build_time_origin + "), targets " + joined(p.targets, ",");
}

std::optional<std::string> dirty_build_warning(const Provenance& p) {
  if (!p.source_dirty.value_or(false)) return std::nullopt;
  return "built from a tree with uncommitted changes at commit " + p.source_commit +
         ": its archives need not match that commit; rebuild from a clean checkout to publish";
}

}  // namespace kiln::format
