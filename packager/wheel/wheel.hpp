#pragma once
// Python data wheels (PEP 427, packaging.python.org "Binary distribution format") holding one
// verified archive each, unpacked in store layout, so that
//   KILN_ARTIFACT_PATH=$(python -c 'import kiln_kernels_cu13_sm90a as k; print(k.artifact_dir())')
// lets libkiln find the kernels. Documented in docs/wheels.md.
//
//   kiln_kernels_cu<M>_<target>-<version>-py3-none-any.whl
//     kiln_kernels_cu<M>_<target>/__init__.py                  artifact_dir(), constants
//     kiln_kernels_cu<M>_<target>/artifacts/<archive stem>/     manifest.json, <uri>.fatbin ...
//     kiln_kernels_cu<M>_<target>-<version>.dist-info/         METADATA, WHEEL, RECORD (last)
//
// Beside them, the package's own wheel (no GPU code): its description, which carries the sources
// the JIT tier compiles from, found by the kiln Python module through the entry point group
// kiln.packages; each target wheel names its package in kiln.targets and requires it at exactly
// its version, and the package wheel requires the kiln runtimes that read its formats:
//
//   acme_kernels-<version>-py3-none-any.whl
//     acme_kernels/__init__.py                                 description_path(), constants
//     acme_kernels/<package>-<version>.package.json            the description the index pins
//     acme_kernels-<version>.dist-info/                        METADATA, WHEEL, entry_points.txt,
//                                                              RECORD (last)
//
// Zip bytes depend only on the contents and the timestamp: sorted names, .dist-info last, fixed
// mtime, mode 0644, uid/gid 0, deflate at a fixed level.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "kiln/error.hpp"

namespace kiln::wheel {

// --- names (pure) ---

// "<package>-cu13-sm90a" for CUDA "13.0" and target "sm_90a" (kiln-kernels-cu13-sm90a for the
// reference package).
std::string distribution_name(std::string_view package, std::string_view cuda_version,
                              std::string_view target);
// The distribution name as wheel file and .dist-info names spell it: PEP 503 normalisation,
// then '-' to '_': "kiln_kernels_cu13_sm90a". Also the import package name.
std::string wheel_name_component(std::string_view distribution);
// A kiln package version as PEP 440 spells it: "0.1.0" stays, "0.2.0-rc1" becomes "0.2.0rc1".
// Throws Error{Format} for a version PEP 440 has no spelling for.
std::string pep440_version(std::string_view package_version);
// "kiln_kernels_cu13_sm90a-0.1.0-py3-none-any.whl"
std::string wheel_file_name(std::string_view package, std::string_view package_version,
                            std::string_view cuda_version, std::string_view target);
// The package's own wheel: "acme_kernels-1.2.0-py3-none-any.whl".
std::string package_wheel_file_name(std::string_view package, std::string_view package_version);
// What a package wheel requires of the kiln runtime, from the version of the kiln that writes it:
// the same MAJOR.MINOR, which reads the formats it writes (docs/decisions.md, "Pip pairs the
// versions"): "kiln>=0.1.0,<0.2" for 0.1.3; a pre-release of MAJOR.MINOR.0 is the lower bound
// itself ("kiln>=0.2.0rc1,<0.3" for 0.2.0-rc1).
std::string runtime_requirement(std::string_view kiln_version);
// The entry point groups (entry_points.txt) the kiln Python module discovers wheels by: each
// entry is named after the package (acme-kernels) and its value is the wheel's import package.
constexpr const char* kPackagesEntryPointGroup = "kiln.packages";
constexpr const char* kTargetsEntryPointGroup = "kiln.targets";

// RECORD's hash field: "sha256=" + urlsafe base64 of the digest without '=' padding.
std::string record_hash(std::string_view data);

// --- contents (pure) ---

struct WheelFile {
  std::string path;  // '/'-separated, relative
  std::string data;
};

// Every file of the wheel for one verified archive (its members and parsed manifest), in zip
// order: package files sorted by path, then METADATA, WHEEL and RECORD. `generator_version` is
// the version of the kiln writing it (WHEEL's Generator). `beside_store`: files that go in the
// store beside the archive's directory (the package description the index pins), plain names.
std::vector<WheelFile> wheel_contents(const format::Manifest& manifest,
                                      const std::vector<format::ArchiveMember>& members,
                                      std::string_view generator_version,
                                      const std::vector<format::ArchiveMember>& beside_store = {});

// Every file of the package's own wheel, in zip order: __init__.py and the description (the
// file of `description`, its bytes as the index pins them), then METADATA (Requires-Dist:
// runtime_requirement(generator_version), and for each of `target_distributions`, the target
// wheels' distribution names (distribution_name), an extra named by what follows
// "<package>-" ("cu13-sm90a") that requires it at exactly this version), WHEEL,
// entry_points.txt and RECORD. The description is not parsed here: build_wheels checks it first.
// With `require_every_target`, it also requires each of them without an extra (pip then installs
// and upgrades every target wheel with the package: BuildOptions::require_every_target).
std::vector<WheelFile> package_wheel_contents(
    std::string_view package, std::string_view package_version, const format::ArchiveMember& description,
    std::string_view generator_version, const std::vector<std::string>& target_distributions = {},
    bool require_every_target = false);

// --- zip (I/O) ---

// The earliest time a zip (DOS) timestamp can hold: 1980-01-01T00:00:00Z.
constexpr std::int64_t kZipEpochMin = 315532800;

// Writes `files` in the given order as a zip through libarchive: deflate, every entry's mtime
// `mtime_epoch` (clamped to the DOS range, stored as UTC whatever the local time zone), mode
// 0644, uid/gid 0. Temp file beside `out`, renamed on success: no partial wheel is left.
// Returns the bytes written. Throws Error{Io} (or Usage for a bad member name).
std::string write_zip(const std::filesystem::path& out, const std::vector<WheelFile>& files,
                      std::int64_t mtime_epoch);
// Every regular file of a zip, in central-directory order. Throws Error{NotFound} when missing,
// Error{Format} when it is not a readable zip or holds a link, device or duplicate name.
std::vector<WheelFile> read_zip(const std::filesystem::path& zip);

// --- building wheels from a dist directory ---

struct BuildOptions {
  std::filesystem::path dist;        // holds <package>-<ver>-index.json and the archives
  std::vector<std::string> targets;  // empty: every target in the index
  std::filesystem::path out;         // created when missing
  // Timestamp of every zip entry; nullopt: each archive's manifest build_time.
  std::optional<std::int64_t> source_date_epoch;
  // The package wheel requires every target wheel of the release at its version, not only
  // through its extras: `pip install -U <package>` then upgrades them all with it, and every
  // machine installs every target (docs/wheels.md, "Versions").
  bool require_every_target = false;
};

struct BuiltWheel {
  std::string target;  // empty for the package's own wheel
  std::filesystem::path file;
  std::uint64_t size = 0;
  std::string sha256;  // of the .whl
};

struct FailedWheel {
  std::string target;  // empty for the package's own wheel
  ErrorKind kind = ErrorKind::Internal;
  std::string message;
};

struct BuildResult {
  std::vector<BuiltWheel> wheels;
  std::vector<FailedWheel> failed;
  // The most severe failure's kind (store.hpp: most_severe; of equal ones, the last), nullopt
  // when none failed; the exit code of `kiln wheel`: its code, or 0.
  std::optional<ErrorKind> worst() const;
  int exit_code() const;
};

// The index in `dist` (exactly one <package>-<ver>-index.json) is parsed; each chosen target's
// archive is read once, its bytes checked against the index (size, sha256), its members against
// its manifest, the manifest against the index entry; only then is its wheel written. A target
// that fails is recorded in `failed` and the others go on. Throws (before writing anything)
// Error{NotFound} for a missing dist/index or a target the index does not list (naming what it
// lists), Error{Usage} for a malformed target name or several indexes.
// The package's own wheel is written first, from the description the index pins (checked against
// the pin and read strictly, its package and version the index's); an index that pins none
// gets a failure for it. `on_wheel` is called after each wheel is written (progress).
BuildResult build_wheels(const BuildOptions& options,
                         const std::function<void(const BuiltWheel&)>& on_wheel = {});

// --- checking a wheel ---

// What a package's own wheel says: read from its zip (no RECORD check: verify_wheel does that).
struct PackageWheel {
  std::string package;              // the kiln.packages entry's name
  std::string version;              // METADATA Version (PEP 440)
  std::string runtime_requirement;  // the Requires-Dist on kiln, "" when none
  std::string description_path;     // member path of the .package.json
  std::string description;          // its bytes
};
// nullopt when the wheel declares no kiln.packages entry (a target wheel, kiln's runtime, any
// other wheel). Throws Error{NotFound}/Format for an unreadable wheel, Error{Format} for a
// package wheel without exactly one description or with several kiln.packages entries.
std::optional<PackageWheel> read_package_wheel(const std::filesystem::path& whl);

// Whether PEP 440 version `version` satisfies `specifiers` ("kiln>=0.1.0,<0.2" with the name, or
// ">=0.1.0,<0.2" without), for the spellings kiln writes (N.N.N[aN|bN|rcN][.devN]) and the
// operators >=, <=, >, <, ==, !=. Throws Error{Format} for anything else.
bool satisfies(std::string_view version, std::string_view specifiers);

struct WheelProblem {
  std::string file;  // the wheel, or "<wheel>:<member>"
  std::string what;  // full sentence
};

// Checks that the zip opens; one .dist-info directory, named after the wheel file name; WHEEL
// (Wheel-Version 1.x, Root-Is-Purelib, tags equal to the file name's) and METADATA (Name and
// Version equal to the file name's) present; RECORD lists every file exactly once with the
// right sha256 and size and nothing that is missing; no absolute, "..", or backslash paths.
// Every problem is reported; empty means the wheel is good.
std::vector<WheelProblem> verify_wheel(const std::filesystem::path& whl);

// The manifests inside a wheel (every "<pkg>/artifacts/<stem>/manifest.json"), parsed, in path
// order. Does not check RECORD (call verify_wheel for that). Throws Error{NotFound}/Format for an
// unreadable wheel, Error{Format}/Stale from the manifest parser, and Error{Format} when a
// manifest's directory is not the stem its fields name.
std::vector<kiln::format::Manifest> wheel_manifests(const std::filesystem::path& whl);

}  // namespace kiln::wheel
