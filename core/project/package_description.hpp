#pragma once
// A package's description as a file: what `kiln package-source` compiles into a package's library
// (kiln/package.h), written as JSON so that it ships wherever the package's stores go (the CMake
// install of a library made with kiln_add_kernel_package, the tarball, `kiln install`) and every
// command on a node without the project's sources can answer from it (docs/rules.md, What is
// installed describes itself; docs/packages.md, "What is installed"). docs/decisions.md, "The
// package description as a file".
//
// The file is <store>/<name>-<version>.package.json (a regular file: the store rule,
// store/store_scan.hpp, counts only directories as archives, so it is never taken for one):
//
//   {
//     "format": 1,
//     "package": "<name>",                    is_package_name
//     "package_version": "<version>",         is_package_version
//     "kernels": [                            sorted by uri, unique; at most kMaxPackageKernels
//       {"uri": "axpy_dtype_f32",             the registry's URI rule (non-empty, [a-z0-9_])
//        "family": "axpy",
//        "params": [["dtype", "f32"], ...],   name/value pairs in registry order
//        "entries": ["axpy<float>", ...],     C++ name expressions, at least one
//        "source_hash": "<64 hex>"}
//     ],
//     "files": [                              the sources the JIT tier compiles from; at most
//       {"path": "registry/kernels.json",     kMaxPackageFiles; relative, no "..", unique
//        "size": 1234, "sha256": "<64 hex>",  of "text", checked on read
//        "text": "..."}                       the file's bytes (UTF-8 text)
//     ]
//   }
//
// Every field is required and no other is allowed. It is untrusted input like a manifest:
// bounded (io::limits::kMaxJsonBytes, depth), strictly parsed, and fuzzed (fuzz/
// package_description_fuzz.cpp). A description read from a file is checked again by the loader
// (Package) like a compiled-in one; the artifacts it leads to are still hashed on every load.
//
// Versions: 1 (kiln 0.1): first.
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/package.h"
#include "project/package.hpp"

namespace kiln::project {

constexpr int kPackageDescriptionFormat = 1;

// The JSON of a description (any kiln_package: a project's, or one a library carries).
// Throws Error{Format} when a source is not UTF-8 text (a description carries sources as text).
std::string package_description_json(const kiln_package& package);

// Reads a description file's text strictly; throws Error{Format} (malformed, a field missing,
// unknown or wrong, a file whose digest differs), Error{Stale} (another format version, saying
// which is too old or too new) or Error{Limit} (too large, too deep, too many kernels or files),
// each naming `origin` and the field.
std::unique_ptr<PackageData> read_package_description(std::string_view text,
                                                      const std::string& origin);

// "<name>-<version>.package.json".
std::string package_description_file_name(std::string_view name, std::string_view version);

// A description found in a store directory.
struct FoundDescription {
  std::filesystem::path file;
  std::string package;
  std::string version;
};
// The descriptions of `package` (any package when empty) in each of `stores`, in the order
// given, each store's sorted by version, newest first (missing stores are skipped). Only the
// names are read here: the file is read and checked by load_package_description.
std::vector<FoundDescription> find_package_descriptions(
    const std::vector<std::filesystem::path>& stores, std::string_view package = {});

// Reads and checks one description file (a regular file of at most io::limits::kMaxJsonBytes);
// throws as read_package_description does, and Error{NotFound}/Error{Io} naming the file.
std::unique_ptr<PackageData> load_package_description(const std::filesystem::path& file);

// -1, 0, 1 as version a is older than, equal to, newer than b (MAJOR.MINOR.PATCH numerically,
// then a pre-release before its release, pre-releases compared as text).
int compare_package_versions(std::string_view a, std::string_view b);

}  // namespace kiln::project
