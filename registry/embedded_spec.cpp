// The loader's view of the embedded registry on its cold path: one specialisation by URI from
// the table compiled in at build time (embedded_table.hpp), with no JSON parsed and no source
// hashed at run time. The full registry (embedded_registry(), registry.cpp) is still parsed
// where families matter: the JIT tier and `kiln registry`.
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "embedded_table.hpp"
#include "kiln/registry.hpp"

namespace kiln {

namespace {

const embedded::SpecRow* find_row(std::string_view uri) {
  const embedded::SpecRow* rows = embedded::spec_rows();
  const embedded::SpecRow* end = rows + embedded::spec_row_count();
  const embedded::SpecRow* it = std::lower_bound(
      rows, end, uri,
      [](const embedded::SpecRow& r, std::string_view u) { return std::string_view(r.uri) < u; });
  return it != end && std::string_view(it->uri) == uri ? it : nullptr;
}

Specialisation from_row(const embedded::SpecRow& r) {
  Specialisation s;
  s.uri = r.uri;
  s.family = r.family;
  for (std::size_t i = 0; i < r.param_pairs; ++i)
    s.params.emplace_back(r.params[2 * i], r.params[2 * i + 1]);
  s.entries.assign(r.entries, r.entries + r.entry_count);
  s.source_hash = r.source_hash;
  return s;
}

}  // namespace

const Specialisation* embedded_spec(std::string_view uri) {
  const embedded::SpecRow* row = find_row(uri);
  if (!row) return nullptr;
  // Built once per URI and kept for the process: callers hold the pointer.
  static std::mutex mu;
  static auto* built =
      new std::unordered_map<const embedded::SpecRow*, std::unique_ptr<const Specialisation>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*built)[row];
  if (!slot) slot = std::make_unique<const Specialisation>(from_row(*row));
  return slot.get();
}

std::vector<std::string> embedded_uris() {
  std::vector<std::string> out;
  const embedded::SpecRow* rows = embedded::spec_rows();
  for (std::size_t i = 0; i < embedded::spec_row_count(); ++i) out.emplace_back(rows[i].uri);
  return out;
}

}  // namespace kiln
