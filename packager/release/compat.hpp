#pragma once
// `kiln compat`: will this libkiln (or another build of it) accept a package? The rules are the
// loader's own (resolver.cpp plan_stores): the manifest format version it reads, the package
// version it is, the source hash it expects for each kernel URI; plus, for the devices given
// or present, whether any of the package's targets runs there (target rules of format/target.hpp).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "format/provenance.hpp"
#include "kiln/error.hpp"
#include "release/loader_facts.hpp"

namespace kiln::release {

struct CompatProblem {
  ErrorKind kind = ErrorKind::Stale;  // Stale: version/format/hash; Unsupported: target; ...
  std::string field;                  // package_version, format_version, source_hash, target, ...
  std::string where;                  // the manifest or file it was found in
  std::string package_value;
  std::string loader_value;  // (or the device, for `target`)
  std::string message;       // one sentence naming the field and both values
};

struct CompatManifest {
  std::string origin;  // file (and member) the manifest came from
  std::string target, package, package_version, cuda_version;
  int format_version = 0;
  std::size_t artifacts = 0;
  std::size_t unknown_uris = 0;  // URIs this libkiln's registry does not have (never asked for)
  bool compatible = true;
};

struct CompatPackage {
  std::string path;
  std::string judged_as;  // "acme-kernels 1.2.0": the package whose loader it was judged for
  std::string kind;       // archive, index, store, store-archive, wheel, package-wheel,
                          // runtime-wheel, tarball
  std::vector<CompatManifest> manifests;
  std::vector<std::string> notes;  // things worth knowing that are not incompatibilities
  std::optional<format::Provenance> provenance;  // how it was built, when its index says so
  std::vector<std::string> warnings;             // a dirty build: compatible, but worth a look
  std::vector<CompatProblem> problems;
  bool compatible() const { return problems.empty(); }
};

struct CompatReport {
  LoaderFacts loader;
  std::vector<int> devices;  // compute capabilities checked (90 = 9.0); empty: not checked
  // The driver weighed (check_driver): cuDriverGetVersion's number, 0 when none was (no driver
  // here and no --driver); `driver_from` says whose it is ("--driver", "this node's driver").
  int driver = 0;
  std::string driver_from;
  std::vector<CompatPackage> packages;
  bool compatible() const;
  // Exit code: 0 when compatible, else the most severe problem kind's (docs/exit-codes.md).
  int exit_code() const;
  std::string to_json() const;
  std::string to_table() const;
};

// The package and version an input names itself (an archive's or manifest's, an index's, a
// wheel's) and where a description of it may lie beside it; nullopt for an input that names
// none (a store, kiln's runtime wheel or tarball) or cannot be read (check_compat says why).
struct InputRelease {
  std::string package, version;
  std::vector<std::filesystem::path> beside;  // directories that may hold its description
};
std::optional<InputRelease> release_named_by(const std::filesystem::path& input);

// Never throws for a bad package: an unreadable or missing package is a problem of that
// package (kind NotFound / Format), so every package is reported. Target wheels are judged on
// the devices as one set (check_target_wheels_together) unless wheels_as_a_set is false: then
// the caller does it once over the reports it merges.
CompatReport check_compat(const LoaderFacts& loader, const std::vector<int>& device_ccs,
                          const std::vector<std::filesystem::path>& packages,
                          bool wheels_as_a_set = true);

// The driver's half of the loader's rule (docs/compatibility.md) over every package of `rep`:
// an archive whose toolkit's code the driver does not run gets a note naming both versions; a
// package with nothing the driver runs (on any of rep.devices that one of its targets serves,
// or at all when no device was checked) is unsupported (field cuda_version: the package's
// toolkits and the driver's version); a target wheel given with another wheel of the same
// target that the driver runs gets a note instead ("not for this driver"), as for devices.
// `driver` 0: nothing weighed, the report says so.
void check_driver(CompatReport& rep, int driver, const std::string& from);

// Target wheels given together are a set offered to pip: a wheel whose target does not run on a
// device is "not for" it (a note) when another wheel of its package and version in `rep` does.
// check_compat applies it to its own inputs; a caller that merges reports of several
// check_compat calls (one per input, each judged as its own package) applies it once, after.
void check_target_wheels_together(CompatReport& rep);

}  // namespace kiln::release
