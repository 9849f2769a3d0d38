#pragma once
// Air-gapped bundles (docs/tuf.md, "Bundles"): the trusted TUF metadata of a release and the
// targets a node needs, carried to a machine with no network and verified there against a TUF
// root before anything is installed.
//
// Layout, one flat directory (or the same files in one .tar.zst, written and read by kiln's
// archive code, which holds plain file names only):
//   <N>.root.json                 the root chain from the bundling root's version to the newest
//   timestamp.json                TUF metadata, as the repository signed it and named it:
//   [<v>.]snapshot.json           <v>. under consistent snapshots; delegated role names
//   [<v>.]targets.json            percent-encoded (tuf::quote_name)
//   [[<v>.]<role>.json ...]
//   <index_file_name(package, version)>   each release's index, a TUF target
//   <description_file_name(...)>  its description when the index pins one, a TUF target
//   <archive_file_name(...)>      each chosen archive, a TUF target
// A bundle may carry several releases of the repository (of one or several packages): the
// metadata is the repository's, and each release is verified against its own index.
// Targets are stored under tuf::quote_name(target path); every name appears once.
//
// Expiry: a bundle is verified against the current time, like a fetch. --expiry-reference TIME
// is the only way to accept metadata that has expired since: every check then uses TIME, a
// warning says so before anything is verified, and every role found expired by the clock is
// named; nothing else relaxes (signatures, thresholds, versions, rollback, lengths, hashes).
#include <ctime>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fetch/fetch.hpp"
#include "format/manifest.hpp"
#include "store/store.hpp"

namespace kiln::release {

// A release a bundle carries: <package>-<version>-index.json, its description when the index
// pins one, and the archives chosen of it.
struct BundleRelease {
  std::string package;
  std::string version;
  std::vector<std::string> targets;  // in a result: the archives' targets, sorted
};

struct BundleRequest {
  fetch::FetchOptions fetch;  // mirrors, TUF root, metadata dir, deadlines (package/version unused)
  std::vector<BundleRelease> releases;  // at least one; their targets unused
  std::vector<std::string> targets;     // archives asked for by target, of every release
  std::vector<int> devices;             // compute capabilities: the archive the loader would pick
  std::filesystem::path out;            // a new directory, or FILE.tar.zst
  std::int64_t mtime = 0;               // of the tarball's entries (SOURCE_DATE_EPOCH)
};

struct BundleResult {
  std::vector<BundleRelease> releases;  // as asked, each with the targets carried
  std::vector<std::string> files;       // every file of the bundle, sorted
  std::int64_t root_version = 0;     // the newest root it carries
  std::int64_t timestamp_version = 0;
  std::string timestamp_expires;
};

// Fetches through TUF (the one fetch: same transport, deadlines and verification as `kiln
// fetch --tuf-root`) the index and the chosen archives, copies the trusted metadata beside them
// under its lock, verifies the result as `kiln install --bundle` would (against the same root,
// in a scratch metadata directory), and only then renames it to `out` or packs it. Error{Usage}
// when the trust anchor is not a TUF root, or `out` exists.
BundleResult write_bundle(const BundleRequest& req);

struct BundleInstallRequest {
  std::filesystem::path bundle;  // a directory or a .tar.zst
  fetch::FetchOptions trust;            // tuf_root / installed_tuf_root / tuf_metadata_dir
  // The release to install (both, or neither: then every release whose index the bundle
  // carries, each verified before any is installed).
  std::string package;
  std::string version;
  std::filesystem::path dest;                   // the store
  std::optional<std::time_t> expiry_reference;  // see "Expiry" above
  std::function<void(const std::string&)> log;  // progress and the expiry warnings
};

struct BundleInstallResult {
  std::vector<BundleRelease> releases;  // those installed (targets: what was installed)
  std::vector<store::InstallResult> installed;
  std::vector<std::filesystem::path> descriptions;  // written into the store
  std::int64_t root_version = 0;
  std::int64_t timestamp_version = 0;
  // Roles the clock says have expired, accepted because of expiry_reference:
  // "timestamp.json v2 expired 2026-12-01T00:00:00Z".
  std::vector<std::string> expired_accepted;
};

// Verifies everything in the bundle against the root (root chain, signatures and thresholds,
// versions and rollback against the node's TUF metadata for that root, expiry, the index's and
// every archive's length and hashes, each archive's index entry and manifest) before any
// archive is installed; then installs each archive the bundle carries into `dest`. The
// accepted metadata joins the node's metadata for that root (<cache>/tuf/<root sha256>/), the
// reference of the next bundle or fetch. A refusal is the tuf::Error's kind with the field
// attack=<id>; nothing is installed.
BundleInstallResult install_bundle(const BundleInstallRequest& req);

}  // namespace kiln::release
