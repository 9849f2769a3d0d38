#pragma once
// A mirror as a TUF repository (docs/tuf.md, "Mirrors as TUF repositories"): the rule that
// picks a fetch's trust anchor, where a root's metadata lives in the cache, and where a target
// lies on a mirror. fetch.cpp runs the client over these; `kiln bundle` and `kiln install
// --bundle` use the same anchor rule and metadata directory.
//
// Mirror layout, as `kiln tuf-repo` writes it:
//   <mirror>/metadata/   <N>.root.json, timestamp.json, [<v>.]snapshot.json, [<v>.]targets.json
//   <mirror>/targets/    [<sha256>.]<file> for every file of the release (index, archives, ...)
// The index and each archive are targets named by their release file names (index_file_name,
// archive_file_name), so a release added with `kiln tuf-repo add <mirror dir>` is what a node
// fetches.
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "fetch/fetch.hpp"
#include "fetch/verified_download.hpp"
#include "format/manifest.hpp"
#include "tuf/tuf_error.hpp"
#include "tuf/tuf_metadata.hpp"

namespace kiln::tuf {
class Updater;
}

namespace kiln::fetch {

constexpr const char* kTufMetadataDir = "metadata";
constexpr const char* kTufTargetsDir = "targets";

// What a fetch trusts the index through: a pinned digest, or a TUF root.
struct TrustAnchor {
  enum class Kind { IndexPin, TufRoot };
  Kind kind = Kind::IndexPin;
  std::string value;   // the lowercase hex digest, or the root file's path
  std::string source;  // where it came from, for messages: "--tuf-root / KILN_TUF_ROOT", ...
  // A root compiled in has no file until materialize_anchor writes one: its bytes.
  std::string compiled_root;
};

// The TUF root compiled in with -DKILN_TRUSTED_TUF_ROOT=FILE (generated source); empty: none.
std::string_view compiled_tuf_root();

// Pure: the anchor for a fetch of release `version`. Precedence:
//   1. what the caller configured: opts.tuf_root (--tuf-root, KILN_TUF_ROOT,
//      LoaderConfig::tuf_root) or opts.index_sha256 (--index-sha256, KILN_INDEX_SHA256,
//      LoaderConfig::index_sha256); both configured is Error{Usage} naming both: kiln does not
//      guess which one the operator meant;
//   2. otherwise a root installed beside libkiln (opts.installed_tuf_root, when
//      `installed_root_exists`);
//   3. otherwise the root compiled in (`compiled_root`: -DKILN_TRUSTED_TUF_ROOT=FILE);
//   4. otherwise the digest compiled in (`compiled_pin`, -DKILN_TRUSTED_INDEX_SHA256);
//   5. otherwise Error{Usage}: kiln never trusts an unpinned index.
// A pin that is not 64 hex digits is Error{Usage}. `release` names the release in messages.
TrustAnchor choose_trust_anchor(const FetchOptions& opts, const std::string& compiled_pin,
                                bool installed_root_exists, const std::string& release,
                                std::string_view compiled_root = compiled_tuf_root());

// A compiled-in root as a file, so that everything after the choice reads a path: written once
// (atomically) as <metadata_parent>/compiled-root-<sha256 of its bytes>.json; `anchor.value`
// becomes that path. Other anchors are left as they are. Error{Usage} without a metadata
// directory, Error{Io} when it cannot be written.
void materialize_anchor(TrustAnchor& anchor, const std::string& metadata_parent);

// The metadata directory of the repository whose trust starts at `anchor_root` (the root
// file's bytes): <parent>/<sha256 of those bytes>. One directory per root, not per mirror: every
// mirror of a repository serves copies of the same metadata, so what one mirror served is the
// rollback reference for all of them.
std::filesystem::path tuf_metadata_dir(const std::filesystem::path& parent,
                                       std::string_view anchor_root);

// Reads the root file the anchor names (bounded like a root from a mirror); Error{NotFound} or
// Error{Io} naming it and `source`.
// The time TUF expiry is judged at on this node (docs/tuf.md, "A wrong clock"): what its clock
// reads, unless that is earlier than the newest file of the node's metadata directory for the
// root (written when the node last accepted metadata of it, at the time its clock read then):
// the clock has gone back since, so expiry is judged at that file's time and metadata that had
// expired by then is never accepted again. Never later than needed: the clock when it is ahead.
struct ExpiryTime {
  std::time_t clock = 0;   // what the node's clock reads
  std::time_t at = 0;      // what expiry is judged at: the later of the clock and the file's time
  std::string floor_file;  // the file whose time `at` is, when later than the clock
};
ExpiryTime expiry_time(const std::filesystem::path& metadata_dir, std::time_t clock);
// e, or when it is an Expired refusal judged at a time later than the clock, the same refusal
// saying so, with both times.
tuf::Error explain_clock(const tuf::Error& e, const ExpiryTime& t);

std::string read_anchor_root(const TrustAnchor& anchor);

// Creates `dir` and stores `anchor_root` as its root.json unless it has one (a root reached
// through the chain from it), atomically under <dir>/.tuf.lock. Error{Io} naming the directory.
// A stored root.json that no longer parses or verifies itself is replaced by the anchor's (its
// chain is walked again from the mirror); returns what was replaced and why, for the log.
std::optional<std::string> prepare_metadata_dir(const std::filesystem::path& dir,
                                                std::string_view anchor_root);

// The targets metadata's entry for a file the index also pins (an archive, the description): it
// must list the file with the index's length and sha256, else a tuf::Error naming the attack
// (target-not-found, target-mismatch) and `metadata_url`.
tuf::TargetFile trusted_pinned_target(tuf::Updater& updater, const format::IndexFile& f,
                                      const std::string& metadata_url);

// <mirror>/targets/[<sha256>.]<path>.
std::string tuf_target_url(const std::string& mirror, const tuf::TargetFile& info,
                           bool consistent_snapshot);

// What download_verified must see for a target: exactly its length, its sha256 and every other
// hash it lists. A target without sha256 is refused (tuf::Error, Attack::Malformed): kiln's
// verified download is keyed by it, and `kiln tuf-repo` always writes it.
DownloadExpect tuf_download_expect(const tuf::TargetFile& info);

}  // namespace kiln::fetch
