#include "fetch/tuf_mirror.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <system_error>

#include "io/atomic_file.hpp"
#include "io/file_lock.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "tuf/tuf_trusted_set.hpp"
#include "tuf/tuf_updater.hpp"

namespace kiln::fetch {

namespace fs = std::filesystem;

namespace {

// Where an index pin comes from: a flag, a loader's own config (kiln_config.index_sha256,
// LoaderConfig::index_sha256) or the process-wide variable.
const char* kPinSource = "--index-sha256, kiln_config.index_sha256 or KILN_INDEX_SHA256";
const char* kRootSource = "--tuf-root / KILN_TUF_ROOT";

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

TrustAnchor pin(const std::string& value, const std::string& source) {
  std::string hex = lowercase(value);
  if (!io::is_sha256_hex(hex))
    throw Error(ErrorKind::Usage,
                "index digest '" + value + "' (" + source + ") is not 64 hex digits");
  return {TrustAnchor::Kind::IndexPin, hex, source, ""};
}

}  // namespace

TrustAnchor choose_trust_anchor(const FetchOptions& opts, const std::string& compiled_pin,
                                bool installed_root_exists, const std::string& version,
                                std::string_view compiled_root) {
  if (!opts.tuf_root.empty() && !opts.index_sha256.empty())
    throw Error(ErrorKind::Usage,
                "two trust anchors are configured for the index of release " + version +
                    ": a TUF root (" + kRootSource + ": " + opts.tuf_root +
                    ") and an index digest (" + kPinSource + ": " + opts.index_sha256 +
                    "). kiln trusts one per fetch and does not guess which was meant: unset one "
                    "(docs/tuf.md, \"Trust anchors\")");
  if (!opts.tuf_root.empty()) return {TrustAnchor::Kind::TufRoot, opts.tuf_root, kRootSource, ""};
  if (!opts.index_sha256.empty()) return pin(opts.index_sha256, kPinSource);
  if (!opts.installed_tuf_root.empty() && installed_root_exists)
    return {TrustAnchor::Kind::TufRoot, opts.installed_tuf_root,
            "the root installed beside libkiln or bin/kiln (share/kiln/tuf/root.json)", ""};
  if (!compiled_root.empty()) {
    TrustAnchor a{TrustAnchor::Kind::TufRoot, "", "the root compiled in (-DKILN_TRUSTED_TUF_ROOT)",
                  std::string(compiled_root)};
    return a;
  }
  if (!compiled_pin.empty()) return pin(compiled_pin, "built in (-DKILN_TRUSTED_INDEX_SHA256)");
  throw Error(ErrorKind::Usage,
              "no trust anchor for the index of release " + version +
                  ": pass --tuf-root FILE (a TUF root; KILN_TUF_ROOT) or --index-sha256 HEX "
                  "(KILN_INDEX_SHA256). This kiln has no root installed beside it" +
                  (opts.installed_tuf_root.empty() ? "" : " (" + opts.installed_tuf_root + ")") +
                  " and was built without -DKILN_TRUSTED_TUF_ROOT or -DKILN_TRUSTED_INDEX_SHA256; "
                  "kiln never trusts an unpinned index");
}

fs::path tuf_metadata_dir(const fs::path& parent, std::string_view anchor_root) {
  return parent / io::sha256_hex(anchor_root);
}

void materialize_anchor(TrustAnchor& anchor, const std::string& metadata_parent) {
  if (anchor.kind != TrustAnchor::Kind::TufRoot || anchor.compiled_root.empty() ||
      !anchor.value.empty())
    return;
  if (metadata_parent.empty())
    throw Error(ErrorKind::Usage,
                "the compiled-in TUF root needs a metadata directory (the cache "
                "directory's tuf/)");
  fs::path file =
      fs::path(metadata_parent) / ("compiled-root-" + io::sha256_hex(anchor.compiled_root) + ".json");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    fs::create_directories(metadata_parent, ec);
    if (ec)
      throw Error(ErrorKind::Io, "cannot create " + metadata_parent + ": " + ec.message(),
                  {{"path", metadata_parent}});
    // Its writers hold a lock on the directory, so the temporaries a dead writer left are
    // removed here rather than kept forever.
    io::FileLock lock =
        io::FileLock::acquire_directory(metadata_parent, std::chrono::seconds(60));
    io::remove_orphaned_temps(metadata_parent, file.filename().string());
    if (!fs::is_regular_file(file, ec)) io::write_file_atomically(file, anchor.compiled_root);
  }
  anchor.value = file.string();
}

std::string read_anchor_root(const TrustAnchor& anchor) {
  if (!anchor.compiled_root.empty()) return anchor.compiled_root;
  try {
    return io::read_whole_file(anchor.value, tuf::Limits{}.root);
  } catch (const Error& e) {
    throw Error(e.kind(),
                std::string("the TUF root (") + anchor.source + ") cannot be read: " + e.what(),
                {{"path", anchor.value}});
  }
}

std::optional<std::string> prepare_metadata_dir(const fs::path& dir, std::string_view anchor_root) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Error(ErrorKind::Io,
                "cannot create the TUF metadata directory " + dir.string() + ": " + ec.message(),
                {{"path", dir.string()}});
  io::FileLock lock = io::FileLock::acquire(dir / ".tuf.lock", std::chrono::seconds(60));
  io::remove_orphaned_temps(dir);  // a dead writer's (every writer holds the lock)
  if (fs::exists(dir / "root.json", ec)) {
    try {
      tuf::TrustedSet stored(io::read_whole_file(dir / "root.json"), 0);
      return std::nullopt;
    } catch (const kiln::Error& e) {
      // The node's trusted root no longer parses or verifies itself (bit rot, a torn disk): it
      // is replaced by the anchor, whose chain the next refresh walks again from the mirror.
      // Otherwise one flipped byte would refuse every repository of this root for good.
      io::write_file_atomically(dir / "root.json", anchor_root);
      return "the stored trusted root " + (dir / "root.json").string() +
             " is damaged (" + e.what() + "): replaced by the trust anchor's root";
    }
  }
  io::write_file_atomically(dir / "root.json", anchor_root);
  return std::nullopt;
}

std::string tuf_target_url(const std::string& mirror, const tuf::TargetFile& info,
                           bool consistent_snapshot) {
  return mirror + "/" + kTufTargetsDir + "/" + tuf::remote_target_path(info, consistent_snapshot);
}

DownloadExpect tuf_download_expect(const tuf::TargetFile& info) {
  auto sha = info.hashes.find("sha256");
  if (sha == info.hashes.end())
    throw tuf::Error(tuf::Attack::Malformed,
                     "target " + info.path +
                         " lists no sha256 hash: kiln verifies every download by it (kiln "
                         "tuf-repo writes sha256 and sha512)");
  DownloadExpect e;
  e.sha256 = sha->second;
  e.exact_size = static_cast<std::uint64_t>(info.length);
  e.max_bytes = e.exact_size.value();
  for (const auto& [alg, hex] : info.hashes)
    if (alg != "sha256") e.other_hashes[alg] = hex;
  // An algorithm this build cannot compute is refused here, before any byte is requested.
  if (!e.other_hashes.empty()) tuf::MultiHasher check(e.other_hashes, "target " + info.path);
  return e;
}

// The targets metadata's entry for a file the index also pins (an archive, the description): it
// must list the file with the index's length and sha256, else the attack is named.
tuf::TargetFile trusted_pinned_target(tuf::Updater& updater, const format::IndexFile& f,
                                      const std::string& metadata_url) {
  std::optional<tuf::TargetFile> a = updater.get_targetinfo(f.file);
  if (!a)
    throw tuf::Error(tuf::Attack::TargetNotFound, "the index pins " + f.file +
                                                      " but no trusted targets role of " +
                                                      metadata_url + " lists it");
  auto sha = a->hashes.find("sha256");
  if (static_cast<std::uint64_t>(a->length) != f.size || sha == a->hashes.end() ||
      sha->second != f.sha256)
    throw tuf::Error(tuf::Attack::TargetMismatch,
                     "target " + f.file + ": the index pins " + std::to_string(f.size) +
                         " bytes, sha256 " + f.sha256 + "; the targets metadata says " +
                         std::to_string(a->length) + " bytes, sha256 " +
                         (sha == a->hashes.end() ? std::string("(none)") : sha->second));
  return *a;
}

ExpiryTime expiry_time(const std::filesystem::path& metadata_dir, std::time_t clock) {
  ExpiryTime t;
  t.clock = t.at = clock;
  std::error_code ec;
  for (auto it = fs::directory_iterator(metadata_dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (st.st_mtime > t.at) {
      t.at = st.st_mtime;
      t.floor_file = it->path().string();
    }
  }
  return t;
}

tuf::Error explain_clock(const tuf::Error& e, const ExpiryTime& t) {
  if (e.attack() != tuf::Attack::Expired || t.at == t.clock) return e;
  std::string what = e.what();
  const std::string prefix = std::string("tuf: ") + tuf::to_string(e.attack()) + ": ";
  if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
  return tuf::Error(tuf::Attack::Expired,
                   what + ". This node's clock reads " +
                       tuf::format_utc_time(t.clock) + ", earlier than " +
                       tuf::format_utc_time(t.at) + ", when it wrote " + t.floor_file +
                       ": the clock is behind (it went back since), so expiry was judged at " +
                       tuf::format_utc_time(t.at) + "; set the clock right");
}

}  // namespace kiln::fetch

