#pragma once
// Each `kiln` subcommand registers itself on the CLI11 app; its callback stores the exit code
// in `rc`. kiln::Error escapes to main(), which prints it and maps its kind to an exit code.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fetch/fetch.hpp"
#include "format/target.hpp"
#include "kiln/error.hpp"
#include "kiln/config.hpp"
#include "project/package.hpp"
#include "util/progress.hpp"

namespace kiln::commands {

void add_registry_command(CLI::App& app, int& rc);
void add_fetch_command(CLI::App& app, int& rc);
void add_build_command(CLI::App& app, int& rc);
void add_merge_command(CLI::App& app, int& rc);       // cmd_merge.cpp
// `kiln inspect`, `kiln verify`, `kiln install` (cmd_inspect/verify/install.cpp).
void add_format_commands(CLI::App& app, int& rc);
void add_loader_commands(CLI::App& app, int& rc);     // resolve, doctor (cmd_resolve.cpp)
void add_tarball_command(CLI::App& app, int& rc);     // cmd_tarball.cpp
void add_wheel_command(CLI::App& app, int& rc);       // cmd_wheel.cpp
void add_mirror_command(CLI::App& app, int& rc);      // mirror verify|sync|stage (cmd_mirror.cpp)
void add_compat_command(CLI::App& app, int& rc);      // cmd_compat.cpp
void add_tuf_client_command(CLI::App& app, int& rc);  // cmd_tuf_client.cpp
void add_tuf_repo_command(CLI::App& app, int& rc);    // cmd_tuf_repo.cpp
void add_bundle_command(CLI::App& app, int& rc);      // cmd_bundle.cpp

// "a, b c" -> {"a", "b", "c"}: a list option or variable split at commas and whitespace.
std::vector<std::string> split_list(const std::string& s);

// A --device value as a compute capability (90 for "sm_90", "sm_90a", "9.0", "90"). Throws
// Error{Usage} naming the value and the accepted forms, ending with `other_words` (the
// command's own keywords, e.g. "auto").
int parse_device_cc(const std::string& text, const std::string& other_words);

// The driver a command weighs toolkits against (docs/compatibility.md): `--driver X.Y` when
// given (format::parse_driver_option), else this node's driver when there is one, else none.
struct DriverChoice {
  int number = 0;    // cuDriverGetVersion's number (12080 for CUDA 12.8); 0: none, not weighed
  std::string from;  // "--driver", "this node's driver"; "" when none
  // For a report: "CUDA 12.8 (--driver)", or that toolkits were not weighed and how to ask.
  std::string words() const;
};
DriverChoice choose_driver(const std::string& flag_value);
// Adds `--driver X.Y` to `cmd`, into `value`; `what` says what the command weighs with it.
void add_driver_option(CLI::App* cmd, std::string& value, const std::string& what);

// A --device value of `kiln fetch` and `kiln bundle`: parse_device_cc's forms, or "auto" (the
// first GPU the CUDA driver reports; Error{Unsupported} without one).
int device_cc(const std::string& device);

// `kiln fetch` and `kiln bundle` options completed from the environment (LoaderConfig::from_env
// through mirror_fetch_options): mirrors, index pin, TUF root, CA bundle where no flag gave one;
// the root installed beside kiln, the TUF metadata directory under the cache, offline.
fetch::FetchOptions with_environment(fetch::FetchOptions flags);

// `kiln fetch` and `kiln bundle` report through `progress` (util/progress.hpp: a status line on
// a terminal, plain lines in a log): the fetch's lines, and each download's bytes. `progress`
// must outlive the fetch.
void report_progress(fetch::FetchOptions& opts, util::ProgressLine& progress);

// Every command's --version option checks its value with this (version_option.cpp):
// MAJOR.MINOR.PATCH[-prerelease] or a usage error (exit 2).
CLI::Validator package_version_option();

// An Error as one line of JSON (error_json.cpp): {"error": {"kind", "exit_code", "message",
// "fields": {name: value, ...}}}. main() prints it on stdout, after the usual line on stderr,
// when the command that failed was given --json (json_requested).
std::string error_json(const Error& e);
bool json_requested(const CLI::App& app);

// The kernel project a command acts on when --source is not given: the current directory when it
// holds registry/package.json, else the tree this kiln was configured from (its reference
// package) when that still exists, else "." (and load_project names what is missing).
std::string default_source_dir();
// The project a project command (build, registry list, package-source) acts on: `source` when
// given, else default_source_dir(); when that is the tree this kiln was built from, says so on
// stderr unless `quiet` (--json).
std::string project_dir(const std::string& source, bool quiet);

// A command's package (package_option.cpp): --source PROJECT, --package NAME, --version V.
struct PackageOptions {
  std::string source;
  std::string package;
  std::string version;
};
// Adds --source and --package (and --version unless the command has its own).
void add_package_options(CLI::App* cmd, PackageOptions& o, bool with_version = true);
struct ChosenPackage {
  std::string name;
  std::string version;
  std::string project_dir;  // "" unless it came from a project
};
// The release a command acts on: --package and --version as given; else describe_package's
// choice (below), with --version, when given, in place of the described one.
ChosenPackage choose_package(const PackageOptions& o, bool quiet);
// Whether a package is named: --source, --package or --version given, or a project (one
// holding registry/package.json) in the current directory. With none, the commands that are
// given an index, archive, store, bundle or dist act on what it names itself.
bool package_named(const PackageOptions& o);
// Whether --source, --package or --version was given: then every input is judged as that
// package. Without, the project in the current directory and the package described beside
// kiln are defaults only for inputs that name no package (or name that one): an index,
// archive, manifest or wheel that names another is judged as the package it names.
bool package_given(const PackageOptions& o);
CLI::Validator package_name_option();

// A --release value: NAME-VERSION, with an optional =INDEX_SHA256 pin where the command takes
// one (`kiln mirror sync`): "acme-kernels-1.2.0=3fa9...". Throws Error{Usage} naming the value.
struct ReleaseArg {
  std::string package;
  std::string version;
  std::string pin;  // "" when none
};
ReleaseArg parse_release_arg(const std::string& text);
CLI::Validator release_name_option();  // NAME-VERSION, no pin

// The package a command that judges freshness acts on (`kiln resolve`, `kiln compat`: they need
// every URI and source hash), from, in this order: --source PROJECT; --package NAME [--version]
// as described by a <name>-<version>.package.json in `stores` (the newest version unless one is
// given); the project in the current directory; the one package described in `stores`; the
// project this kiln was built from when it still exists (said on stderr). Throws Error{NotFound}
// naming every place looked, Error{Usage} when several packages are installed and none is named.
// Says on stderr which package it took and from where, unless `quiet` (--json: stdout is the
// answer, and callers capture both).
struct DescribedPackage {
  std::unique_ptr<project::PackageData> data;
  std::string origin;       // "the project DIR", or the description file
  std::string project_dir;  // the project's root when it came from one, else ""
};
DescribedPackage describe_package(const PackageOptions& o,
                                  const std::vector<std::filesystem::path>& stores, bool quiet);
// The package an input that names its own (`package` at `version`) is judged as when none was
// given (package_given false): describe_package's default when it is that package; else that
// package's description in `stores` (of `version` when there, else the newest); else its
// description among `beside` (the one the input carries or has beside it); nullopt when kiln
// has none, and the caller judges what it can without one. Never another package. Says on
// stderr which it took, unless `quiet`.
std::optional<DescribedPackage> describe_package_named_by_input(
    const PackageOptions& o, const std::vector<std::filesystem::path>& stores,
    const std::string& package, const std::string& version,
    const std::vector<std::filesystem::path>& beside, bool quiet);
// The stores a command looks in for installed descriptions: KILN_ARTIFACT_PATH (or the
// config's), the store installed beside this kiln (<prefix>/share/kiln/artifacts), the cache.
std::vector<std::filesystem::path> description_stores(const LoaderConfig& cfg);
// --source, --package and --version as describe_package reads them, with the help saying so.
void add_described_package_options(CLI::App* cmd, PackageOptions& o);
void add_package_command(CLI::App& app, int& rc);  // `kiln package-source` (package_option.cpp)

}  // namespace kiln::commands
