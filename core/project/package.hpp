#pragma once
// A kernel package: a project's kernels under the project's own name and version.
//
//   <project>/VERSION                 MAJOR.MINOR.PATCH[-prerelease], one line
//   <project>/registry/package.json   {"format": 1, "name": "<package name>"}, optionally
//                                     "targets": ["sm_80", ...] (kiln build's default list)
//   <project>/registry/kernels.json   the registry (docs/registry.md)
//   <project>/kernels/                the sources it names
//
// The packager reads a project (load_project); a library carries its package as the generated
// C description of kiln/package.h (PackageData::to_c_source, run by `kiln package-source` for
// kiln_add_kernel_package); the loader serves one package through Package, a checked view of
// such a description. docs/packages.md.
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/target.hpp"
#include "kiln/package.h"
#include "project/registry.hpp"

namespace kiln::project {

constexpr int kPackageFileFormat = 1;

// registry/package.json parsed; throws Error{Format} naming origin and field. Fields: "format"
// (kPackageFileFormat), "name", "comment" (ignored) and, optional, "targets": the targets
// `kiln build` builds when not given --targets, each as nvcc spells it, at least one, no
// target twice. Any other field is an error.
struct PackageFile {
  std::string name;
  std::vector<format::Target> targets;  // in the file's order; empty when the file names none
  std::vector<std::string> toolkits;    // "toolkits", as kiln build --toolkits names them; empty: none
};
PackageFile parse_package_file(std::string_view json_text, const std::string& origin);
// <project_root>/registry/package.json read and parsed; Error{NotFound} naming the file looked
// for when there is none.
PackageFile read_package_file(const std::filesystem::path& project_root);
// A VERSION file's one line; throws Error{Format} naming the file when it is not a version.
std::string parse_version_file(std::string_view text, const std::string& origin);

struct Project {
  std::filesystem::path root;
  std::string name;
  std::string version;
  std::vector<format::Target> targets;  // registry/package.json "targets"; empty when it names none
  Registry registry;            // hashed
  // The bytes each file was hashed from, read once: registry/kernels.json's text, and every
  // kernels/ file the source hashes cover (relative to kernels/). A description embeds these,
  // so what it carries is exactly what was hashed.
  std::string registry_text;
  std::map<std::string, std::string> sources;
};
// Reads and checks every file above; throws Error{NotFound} naming the file looked for when one
// is missing (with what a project holds), Error{Format} when one is malformed.
Project load_project(const std::filesystem::path& root);

// A project's package description with the storage it points into: what the generator writes
// out as C, and what the CLI hands to an in-process Loader for a project on disk.
class PackageData {
 public:
  // One specialisation as a description carries it.
  struct Kernel {
    std::string uri, family, source_hash;
    std::vector<std::string> params;  // name, value, name, value... in registry order
    std::vector<std::string> entries;
  };
  explicit PackageData(const Project& project);
  // From parts already checked (read_package_description, project/package_description.hpp);
  // the kernels are sorted by URI here. files: (path, bytes).
  PackageData(std::string name, std::string version, std::vector<Kernel> kernels,
              std::vector<std::pair<std::string, std::string>> files);
  PackageData(const PackageData&) = delete;
  PackageData& operator=(const PackageData&) = delete;
  const kiln_package* get() const { return &desc_; }
  // A C source defining `const kiln_package* <symbol>(void)` (and nothing else with linkage).
  std::string to_c_source(const std::string& symbol) const;
  // Every file the description was made from (for a build system's depfile); empty for one
  // read from a description file.
  const std::vector<std::filesystem::path>& inputs() const { return inputs_; }

 private:
  void link();  // the C views (desc_ and what it points to) over the storage above
  std::string name_, version_;
  std::vector<Kernel> kernels_;
  std::vector<std::pair<std::string, std::string>> files_;  // path, bytes
  std::vector<std::vector<const char*>> param_ptrs_, entry_ptrs_;
  std::vector<kiln_package_kernel> ckernels_;
  std::vector<kiln_package_file> cfiles_;
  std::vector<std::filesystem::path> inputs_;
  kiln_package desc_{};
};

// A C identifier is what `--symbol` and kiln_add_kernel_package's SYMBOL must be.
bool is_c_identifier(std::string_view s);

// The loader's view of one package description, read without copies; what does not hold
// together throws Error{Usage} naming it. The constructor checks the header and the files; a
// kernel is checked when a lookup reaches it (its fields, and its order against both
// neighbours), and the whole table once a lookup misses or every URI is asked for, so that
// creating a Loader costs the same for 10 kernels or 20,000 (docs/decisions.md, "Loading cost
// independent of package size"). Lookups are memoised per URI.
class Package {
 public:
  explicit Package(const kiln_package* desc);
  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const kiln_package* c() const { return desc_; }
  // The description's own entry for uri, checked; nullptr for a URI the package does not have.
  const kiln_package_kernel* kernel(std::string_view uri) const;
  // uri's index in the kernel table if a search finds it there, else nullopt; checks nothing
  // beyond the entries the search compares (a hint: format/manifest_entry.hpp, UriRanks).
  std::optional<std::size_t> rank(std::string_view uri) const;
  // nullptr for a URI the package does not have. The pointer lives as long as this Package.
  const Specialisation* spec(std::string_view uri) const;
  std::vector<std::string> uris() const;  // sorted
  // The full registry parsed from the description's files and hashed (the JIT tier); throws
  // Error{Format} when the files disagree with the kernel table.
  const Registry& registry() const;
  std::shared_ptr<const SourceTree> sources() const;
  // The shared library (or executable) that defines the description (dladdr), "" if unknown:
  // the store installed beside it is <dir>/../share/kiln/artifacts.
  std::string library_path() const;

 private:
  [[noreturn]] static void refuse(const std::string& what);
  void check_kernel(std::size_t i) const;  // its fields, and its order after kernel i - 1
  void check_all_kernels() const;          // once

  const kiln_package* desc_;
  std::string name_, version_;
  mutable std::once_flag all_checked_;
  mutable std::mutex mu_;
  mutable std::map<const kiln_package_kernel*, std::unique_ptr<const Specialisation>> specs_;
  mutable std::unique_ptr<const Registry> registry_;
};

// Reads files of a package description (path relative to kernels/, as SourceTree says).
class PackageSourceTree : public SourceTree {
 public:
  explicit PackageSourceTree(const kiln_package* desc) : desc_(desc) {}
  std::optional<std::string> read(const std::string& relpath) const override;
  std::string describe() const override;

 private:
  const kiln_package* desc_;
};

}  // namespace kiln::project
