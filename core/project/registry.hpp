#pragma once
// The kernel registry: registry/kernels.json parsed, validated and expanded into
// specialisations, each with a deterministic URI and a source hash.
// Format: docs/registry.md. The parser is pure (text in, values out); reading files goes
// through SourceTree so tests and the loader (embedded sources) share one code path.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/target.hpp"

namespace kiln::project {

struct RegistryParam {
  std::string name;
  std::string kind;  // "type" or "int" or "str"
  std::vector<std::string> values;
};

struct Family {
  std::string name;
  std::vector<std::string> sources;  // relative to kernels/
  std::vector<std::string> entries;  // C++ name expressions with {param} placeholders
  std::vector<RegistryParam> params;
  std::vector<format::TargetRule> targets;
  std::vector<std::string> flags;
  std::string source_hash;                // filled by compute_source_hashes
  std::vector<std::string> hashed_files;  // sources + included kernels/ headers, sorted
};

struct Specialisation {
  std::string uri;
  std::string family;
  std::vector<std::pair<std::string, std::string>> params;  // in registry order
  std::vector<std::string> entries;  // name expressions with C++ spellings substituted
  std::string source_hash;
};

// Read access to kernels/ files by relative path (disk, or a package description's copy:
// PackageSourceTree in kiln/package.h).
class SourceTree {
 public:
  virtual ~SourceTree() = default;
  virtual std::optional<std::string> read(const std::string& relpath) const = 0;
  virtual std::string describe() const = 0;  // for error messages
};

class DiskSourceTree : public SourceTree {
 public:
  explicit DiskSourceTree(std::string kernels_dir) : dir_(std::move(kernels_dir)) {}
  std::optional<std::string> read(const std::string& relpath) const override;
  std::string describe() const override { return dir_; }

 private:
  std::string dir_;
};

struct Registry {
  int format = 0;
  std::string origin;  // file name for messages
  std::map<std::string, std::string> types;
  std::vector<Family> families;
  std::vector<Specialisation> specialisations;  // sorted by URI

  const Specialisation* find(std::string_view uri) const;
  const Family* family(std::string_view name) const;
};

// What the family's declared targets (registry "targets") are, as written: "family
// 'hopper_wgmma' is declared only for sm_90a" ("sm_80+", "sm_90a, sm_100a").
std::string declared_only(const Family& family);
// Why `family` is not served on target t: nullopt when its declared targets admit t, else
// "family 'hopper_wgmma' is declared only for sm_90a". Whatever serves a family's kernels asks
// this one question: every tier's target choice (plan/target_choice.hpp) and the JIT's target.
std::optional<std::string> undeclared_target(const Family& family, const format::Target& t);

constexpr int kRegistryFormat = 1;

// Parses and validates; throws Error{Format} naming origin, family and field.
Registry parse_registry(std::string_view json_text, const std::string& origin);
// Fills Family::source_hash / hashed_files and each Specialisation::source_hash.
void compute_source_hashes(Registry& reg, const SourceTree& tree);
// The #include "..." names of one source file (angle includes are ignored).
std::vector<std::string> quoted_includes(std::string_view source);

// Reads <root>/registry/kernels.json and hashes <root>/kernels/.
Registry load_registry(const std::string& repo_root);
std::string registry_to_json(const Registry& reg);  // `kiln registry list --json`, stable bytes

}  // namespace kiln::project
