// Air-gapped bundles: written from a TUF mirror by `kiln bundle`, verified and installed by
// `kiln install --bundle` (bundle.hpp has the layout and the expiry rule).
#include "release/bundle.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <tuple>

#include "fetch/tuf_mirror.hpp"
#include "format/archive.hpp"
#include "format/archive_stream.hpp"
#include "format/manifest.hpp"
#include "format/target.hpp"
#include "format/toolkit.hpp"
#include "io/atomic_file.hpp"
#include "io/file_lock.hpp"
#include "io/limits.hpp"
#include "io/scratch_dir.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "plan/target_choice.hpp"
#include "store/index_entry_check.hpp"
#include "tuf/tuf_metadata.hpp"
#include "tuf/tuf_updater.hpp"
#include "util/join.hpp"

namespace kiln::release {

namespace {

namespace fs = std::filesystem;
using fetch::TrustAnchor;

constexpr const char* kBundleUrl = "bundle:/";

// The bundle's files through the TUF client's Fetcher interface: "<kBundleUrl><name>" is
// <dir>/<name>, a missing file is "not there" (it ends the root chain), and a file is read only
// when it is a regular file no larger than the bound for it.
class DirectoryFetcher final : public tuf::Fetcher {
 public:
  explicit DirectoryFetcher(fs::path dir) : dir_(std::move(dir)) {}

  std::optional<std::string> get(const std::string& url, std::size_t max_bytes) override {
    std::string name = url.substr(std::string(kBundleUrl).size());
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      return std::nullopt;
    fs::path p = dir_ / name;
    std::error_code ec;
    if (!fs::exists(p, ec)) return std::nullopt;
    try {
      return io::read_whole_file(p, max_bytes);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Limit) throw;
      throw tuf::Error(tuf::Attack::TooLarge, p.string() + ": more than " +
                                                  std::to_string(max_bytes) +
                                                  " bytes, the bound for this file");
    }
  }

  bool stream(const std::string& url, std::size_t max_bytes,
              const std::function<bool(const char*, std::size_t)>& sink) override {
    std::optional<std::string> body = get(url, max_bytes);
    if (!body) return false;
    return sink(body->data(), body->size());
  }

 private:
  fs::path dir_;
};

// The trust anchor of a bundle: a TUF root, by the fetch's precedence (configured, else the
// one installed beside kiln); an index pin cannot verify a bundle.
TrustAnchor bundle_anchor(const fetch::FetchOptions& trust, const std::string& version) {
  fetch::FetchOptions o = trust;
  o.index_sha256.clear();
  std::error_code ec;
  bool installed = !o.installed_tuf_root.empty() && fs::is_regular_file(o.installed_tuf_root, ec);
  try {
    TrustAnchor a = fetch::choose_trust_anchor(o, "", installed, version);
    fetch::materialize_anchor(a, o.tuf_metadata_dir);
    return a;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Usage) throw;
    throw Error(ErrorKind::Usage,
                "a bundle is made and verified with a TUF root: pass --tuf-root FILE or set "
                "KILN_TUF_ROOT" +
                    (o.installed_tuf_root.empty()
                         ? std::string()
                         : " (no root is installed beside kiln at " + o.installed_tuf_root + ")"));
  }
}

// Length and every hash of a target file, reading at most one byte past its length: a regular
// file only (no FIFO or device behind a name). Throws tuf::Error(TargetMismatch).
void verify_target_file(const fs::path& p, const tuf::TargetFile& info) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(ErrorKind::Io, "cannot open " + p.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::Io, "not a regular file: " + p.string());
  }
  tuf::MultiHasher hasher(info.hashes, "target " + info.path);
  std::int64_t size = 0;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      throw Error(ErrorKind::Io, "cannot read " + p.string() + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    size += n;
    if (size > info.length) break;  // the length decides; no need to read the rest
    hasher.update(std::string_view(buf, static_cast<std::size_t>(n)));
  }
  ::close(fd);
  if (size != info.length)
    throw tuf::Error(tuf::Attack::TargetMismatch,
                     "target " + info.path + ": " + p.string() + " holds " +
                         (size > info.length ? "more than " + std::to_string(info.length)
                                             : std::to_string(size)) +
                         " bytes, metadata says " + std::to_string(info.length));
  for (const auto& [alg, got] : hasher.finish())
    if (got != info.hashes.at(alg))
      throw tuf::Error(tuf::Attack::TargetMismatch, "target " + info.path + ": " + alg + " is " +
                                                        got + ", metadata says " +
                                                        info.hashes.at(alg));
}

struct VerifiedBundle {
  format::Index index;
  fs::path index_path;
  std::vector<std::pair<format::IndexEntry, fs::path>> archives;  // those the bundle carries
  std::optional<fs::path> description;  // the description the index pins, when carried
  std::int64_t root_version = 0;
  std::int64_t timestamp_version = 0;
  std::string timestamp_expires;
  std::vector<std::string> expired;  // by `clock`, while `now` accepted them
};

// Every check of install_bundle but the install: the TUF workflow over the bundle's files with
// `md` as the trusted metadata, expiry against `now`; then the index and each carried archive
// against the targets metadata, and each archive's index entry against its target.
VerifiedBundle verify_bundle(const fs::path& dir, const fs::path& md, const std::string& package,
                             const std::string& version, std::time_t now, std::time_t clock) {
  DirectoryFetcher fetcher(dir);
  tuf::UpdaterOptions uo;
  uo.metadata_dir = md;
  uo.metadata_url = kBundleUrl;
  uo.keep_root_history = true;
  tuf::Updater updater(uo, fetcher, now);
  try {
    updater.refresh();
  } catch (const tuf::Error& e) {
    // Nothing is downloaded from a bundle: "unreachable" is a metadata file it does not hold
    // (found by fuzz/bundle_fuzz.cpp; it read as a network failure, exit 8).
    if (e.attack() != tuf::Attack::Network) throw;
    const std::string m = e.what();
    const std::size_t at = m.find(kBundleUrl);
    std::string file = at == std::string::npos ? m : m.substr(at + std::strlen(kBundleUrl));
    file = file.substr(0, file.find(':'));
    throw Error(ErrorKind::NotFound, "the bundle " + dir.string() + " has no " + file +
                                         ", which its TUF metadata needs: not a whole bundle "
                                         "(kiln bundle writes the root chain, timestamp.json, "
                                         "snapshot and targets metadata)")
        .with("file", file);
  }

  VerifiedBundle out;
  const tuf::TrustedSet& trusted = updater.trusted();
  out.root_version = trusted.root().version;
  out.timestamp_version = trusted.timestamp()->version;
  out.timestamp_expires = trusted.timestamp()->expires_text;
  auto note_expired = [&](const char* role, const tuf::Common& c) {
    if (c.expired(clock))
      out.expired.push_back(std::string(role) + " v" + std::to_string(c.version) + " expired " +
                            c.expires_text);
  };
  note_expired("root.json", trusted.root());
  note_expired("timestamp.json", *trusted.timestamp());
  note_expired("snapshot.json", *trusted.snapshot());
  if (const tuf::Targets* t = trusted.trusted_targets("targets", "root"))
    note_expired("targets.json", *t);

  const std::string name = format::index_file_name(package, version);
  std::optional<tuf::TargetFile> info = updater.get_targetinfo(name);
  if (!info)
    throw tuf::Error(tuf::Attack::TargetNotFound, "no trusted targets role of the bundle " +
                                                      dir.string() + " lists " + name +
                                                      ": it is not a bundle of release " + package +
                                                      " " + version + " (--package, --version)");
  out.index_path = dir / tuf::quote_name(name);
  if (!fs::exists(out.index_path))
    throw Error(ErrorKind::NotFound, "the bundle " + dir.string() + " lacks " + name,
                {{"path", out.index_path.string()}});
  verify_target_file(out.index_path, *info);
  out.index = format::parse_index(io::read_whole_file(out.index_path, io::limits::kMaxLocalFileBytes),
                          out.index_path.string());
  if (out.index.package != package)
    throw Error(ErrorKind::Stale, out.index_path.string() + " is the target " + name +
                                      " but holds the index of package " + out.index.package +
                                      ", not " + package);
  if (out.index.package_version != version)
    throw Error(ErrorKind::Stale, out.index_path.string() + " is the target " + name +
                                      " but holds the index of release " +
                                      out.index.package_version + ", not " + version);
  for (const auto& e : out.index.archives) {
    fs::path p = dir / tuf::quote_name(e.file);
    std::error_code ec;
    if (!fs::exists(p, ec)) continue;  // not carried: the bundle was made for other targets
    tuf::TargetFile a = fetch::trusted_pinned_target(
        updater, format::IndexFile{e.file, e.size, e.sha256}, "the bundle " + dir.string());
    verify_target_file(p, a);
    out.archives.emplace_back(e, p);
  }
  if (const auto& d = out.index.description; d && fs::exists(dir / tuf::quote_name(d->file))) {
    // The description the index pins, carried as a target like the archives.
    tuf::TargetFile a =
        fetch::trusted_pinned_target(updater, *d, "the bundle " + dir.string());
    verify_target_file(dir / tuf::quote_name(d->file), a);
    out.description = dir / tuf::quote_name(d->file);
  }
  if (out.archives.empty())
    throw Error(ErrorKind::NotFound,
                "the bundle " + dir.string() + " carries no archive of release " + version +
                    " (its index lists " + std::to_string(out.index.archives.size()) + ")");
  return out;
}

// Unpacks a .tar.zst bundle into `into` through kiln's archive reader (plain names only,
// every size and count bounded: docs/security.md).
void unpack_bundle(const fs::path& tarball, const fs::path& into) {
  format::ArchiveStream in = format::ArchiveStream::open_file(tarball);
  while (auto h = in.next()) {
    io::AtomicFile f(into / h->name);
    in.read_data([&](const char* d, std::size_t n) { f.write(std::string_view(d, n)); });
    f.commit();
  }
  in.finish();
}

std::int64_t root_version_of(const std::string& root_bytes) {
  tuf::Envelope env = tuf::parse_envelope(root_bytes, "the TUF root");
  return tuf::parse_root(env.signed_json, "the TUF root").version;
}

bool is_tarball(const fs::path& p) {
  std::string s = p.filename().string();
  return s.size() > 8 && s.compare(s.size() - 8, 8, ".tar.zst") == 0;
}

}  // namespace

namespace {

std::string release_list(const std::vector<BundleRelease>& releases) {
  return util::join(releases, ", ",
                    [](const BundleRelease& r) { return r.package + " " + r.version; });
}

// One release's index, description and chosen archives, fetched through TUF into `staging`.
void fetch_release_into(const BundleRequest& req, fetch::FetchOptions o, const BundleRelease& release,
                        const fs::path& staging) {
  o.package = release.package;
  o.version = release.version;
  o.with_description = true;
  o.index = fetch::fetch_release_index(o);  // downloaded once: the archives' fetch reuses it
  const std::vector<std::string>& offered = o.index->targets;
  std::set<std::string> chosen;
  for (const auto& t : req.targets) chosen.insert(t);
  // With a driver (o.driver), a target counts only when the driver runs one of its archives'
  // toolkits (the fetch then takes the newest of those); else the next best target.
  std::vector<format::IndexEntry> entries;
  if (o.driver > 0) entries = format::parse_index(o.index->json, o.index->url).archives;
  auto driver_refuses_target = [&](const std::string& target) -> std::optional<std::string> {
    if (o.driver <= 0) return std::nullopt;
    auto t = format::parse_target(target);
    std::string why;
    for (const auto& e : entries) {
      if (e.target != target || !t) continue;
      auto r = plan::toolkit_refusal(e.cuda_version, *t, o.driver);
      if (!r) return std::nullopt;
      why += (why.empty() ? "" : "; ") + e.file + ": " + *r;
    }
    return why.empty() ? std::optional<std::string>() : why;
  };
  for (int cc : req.devices) {
    plan::NamedChoice c = plan::choose_named_targets(cc, offered);
    if (c.candidates.empty())
      throw Error(ErrorKind::Unsupported, "no archive of release " + release.package + " " +
                                              release.version + " can run on CC " + plan::cc_string(cc));
    std::string pick, refused;
    for (const auto& cand : c.candidates) {
      auto why = driver_refuses_target(cand.first);
      if (!why) {
        pick = cand.first;
        break;
      }
      refused += (refused.empty() ? "" : "; ") + *why;
    }
    if (pick.empty())
      throw Error(ErrorKind::Unsupported,
                  "no archive of release " + release.package + " " + release.version +
                      " that runs on CC " + plan::cc_string(cc) + " was built by a toolkit this driver (" +
                      format::driver_words(o.driver) + ") runs: " + refused,
                  {{"driver", format::driver_cuda_version(o.driver).str()}});
    chosen.insert(pick);
    if (o.log)
      o.log(release.package + " " + release.version + " for CC " + plan::cc_string(cc) + ": " + pick);
  }
  fetch::FetchResult r = fetch::fetch_archive_files(o, {chosen.begin(), chosen.end()}, staging.string());
  std::string index_name = tuf::quote_name(format::index_file_name(release.package, release.version));
  if (fs::exists(staging / index_name))
    throw Error(ErrorKind::Usage,
                "release " + release.package + " " + release.version + " is named twice");
  io::write_file_atomically(staging / index_name, r.index_json);
}

}  // namespace

BundleResult write_bundle(const BundleRequest& req) {
  if (req.releases.empty())
    throw Error(ErrorKind::Usage,
                "kiln bundle: no release named (--release NAME-VERSION, --package and --version, "
                "or --source)");
  const TrustAnchor anchor = bundle_anchor(req.fetch, release_list(req.releases));
  if (req.targets.empty() && req.devices.empty())
    throw Error(ErrorKind::Usage, "kiln bundle needs --targets LIST or --device D (see --help)");
  std::error_code ec;
  fs::path parent = req.out.parent_path().empty() ? fs::path(".") : req.out.parent_path();
  fs::create_directories(parent, ec);
  if (ec)
    throw Error(ErrorKind::Io, "cannot create " + parent.string() + ": " + ec.message(),
                {{"path", parent.string()}});
  // One bundle writer per directory; it removes what a dead (killed) writer of the same OUT
  // left: its staging and check directories, and write_archive's temporary of OUT.tar.zst.
  io::FileLock parent_lock = io::FileLock::acquire_directory(parent, std::chrono::seconds(60));
  const std::string scratch_prefix = "." + req.out.filename().string() + ".tmp-";
  const std::string archive_temp_prefix = req.out.filename().string() + ".tmp.";
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(scratch_prefix, 0) == 0 || name.rfind(archive_temp_prefix, 0) == 0) {
      std::error_code gone;
      fs::remove_all(e.path(), gone);
    }
  }
  if (fs::exists(req.out, ec))
    throw Error(ErrorKind::Usage, req.out.string() + " exists: a bundle is written to a new path",
                {{"path", req.out.string()}});
  io::ScratchDir staging(parent, scratch_prefix);

  fetch::FetchOptions o = req.fetch;
  o.index_sha256.clear();
  o.tuf_root = anchor.value;  // the fetch takes the same root, whatever its default would be
  for (const auto& release : req.releases) fetch_release_into(req, o, release, staging.path());
  fs::remove_all(staging.path() / ".kiln-locks", ec);

  auto add = [&](const std::string& name, std::string_view bytes) {
    if (fs::exists(staging.path() / name))
      throw Error(ErrorKind::Format, "two files of the bundle would be named " + name);
    io::write_file_atomically(staging.path() / name, bytes);
  };
  // The trusted metadata, copied under its lock so no refresh changes it halfway.
  const std::string anchor_root = fetch::read_anchor_root(anchor);
  const fs::path md = fetch::tuf_metadata_dir(o.tuf_metadata_dir, anchor_root);
  {
    io::FileLock lock = io::FileLock::acquire(md / ".tuf.lock", std::chrono::seconds(60));
    // Under consistent snapshots a client asks for "<version>.<role>.json" but for timestamp
    // and roots: the bundle names them as the repository does.
    bool consistent =
        tuf::parse_root(
            tuf::parse_envelope(io::read_whole_file(md / "root.json"), "root.json").signed_json,
            "root.json")
            .consistent_snapshot;
    for (const auto& e : fs::directory_iterator(md)) {
      std::string name = e.path().filename().string();
      if (!e.is_regular_file() || name == "root.json" || name.size() < 5 ||
          name.compare(name.size() - 5, 5, ".json") != 0)
        continue;
      std::string bytes = io::read_whole_file(e.path(), io::limits::kMaxLocalFileBytes);
      bool versioned_name =
          name == "timestamp.json" || name.find(".root.json") != std::string::npos;
      if (consistent && !versioned_name)
        name = std::to_string(
                   tuf::parse_envelope(bytes, name).signed_json.at("version").get<std::int64_t>()) +
               "." + name;
      add(name, bytes);
    }
    std::string own = std::to_string(root_version_of(anchor_root)) + ".root.json";
    if (!fs::exists(staging.path() / own)) add(own, anchor_root);
  }

  // The bundle as a node will see it, before it is published.
  // (Beside the staging directory, not in TMPDIR: what a kill leaves there the next run removes.)
  io::ScratchDir scratch(parent, scratch_prefix);
  fetch::prepare_metadata_dir(scratch.path(), anchor_root);
  std::time_t now = o.tuf_clock ? o.tuf_clock() : std::time(nullptr);
  BundleResult out;
  for (const auto& release : req.releases) {
    VerifiedBundle check =
        verify_bundle(staging.path(), scratch.path(), release.package, release.version, now, now);
    BundleRelease carried{release.package, release.version, {}};
    for (const auto& [e, p] : check.archives) carried.targets.push_back(e.target);
    std::sort(carried.targets.begin(), carried.targets.end());
    out.releases.push_back(std::move(carried));
    out.root_version = check.root_version;
    out.timestamp_version = check.timestamp_version;
    out.timestamp_expires = check.timestamp_expires;
  }
  std::vector<format::ArchiveMember> members;
  for (const auto& e : fs::directory_iterator(staging.path())) {
    out.files.push_back(e.path().filename().string());
    if (is_tarball(req.out)) members.push_back({out.files.back(), io::read_whole_file(e.path())});
  }
  std::sort(out.files.begin(), out.files.end());
  std::sort(members.begin(), members.end(),
            [](const format::ArchiveMember& a, const format::ArchiveMember& b) { return a.name < b.name; });
  if (is_tarball(req.out)) {
    // The archives inside are compressed already: a low level costs little and saves nothing.
    format::write_archive(req.out, members, req.mtime, 3);
  } else {
    fs::rename(staging.path(), req.out, ec);
    if (ec)
      throw Error(ErrorKind::Io, "cannot rename " + staging.path().string() + " to " +
                                     req.out.string() + ": " + ec.message());
    staging.release();
    io::sync_directory(parent);
  }
  return out;
}

namespace {

// The releases whose index a bundle directory carries (<package>-<version>-index.json).
std::vector<BundleRelease> releases_in_bundle(const fs::path& dir) {
  std::vector<BundleRelease> out;
  std::uint64_t seen = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (++seen > io::limits::kMaxStoreEntries)
      throw Error(ErrorKind::Limit, "the bundle " + dir.string() + " holds more than " +
                                        std::to_string(io::limits::kMaxStoreEntries) +
                                        " entries, the limit (docs/security.md)");
    if (!e.is_regular_file()) continue;
    if (auto r = format::release_of_file_name(e.path().filename().string(), "-index.json"))
      out.push_back({r->package, r->version, {}});
  }
  std::sort(out.begin(), out.end(), [](const BundleRelease& a, const BundleRelease& b) {
    return std::tie(a.package, a.version) < std::tie(b.package, b.version);
  });
  if (out.empty())
    throw Error(ErrorKind::NotFound, "the bundle " + dir.string() +
                                         " carries no release index (<package>-<version>-"
                                         "index.json): is it a bundle from `kiln bundle`?");
  return out;
}

}  // namespace

BundleInstallResult install_bundle(const BundleInstallRequest& req) {
  if (req.package.empty() != req.version.empty())
    throw Error(ErrorKind::Usage,
                "kiln install --bundle: name both the package and the version, or neither (then "
                "every release the bundle carries is installed)");
  auto say = [&](const std::string& m) {
    if (req.log) req.log(m);
  };
  std::error_code ec;
  if (!fs::exists(req.bundle, ec))
    throw Error(ErrorKind::NotFound, "bundle not found: " + req.bundle.string(),
                {{"path", req.bundle.string()}});
  std::optional<io::ScratchDir> unpacked;
  fs::path dir = req.bundle;
  if (!fs::is_directory(req.bundle, ec)) {
    unpacked.emplace(fs::temp_directory_path(), "kiln-bundle-");
    unpack_bundle(req.bundle, unpacked->path());
    dir = unpacked->path();
  }
  std::vector<BundleRelease> releases =
      req.package.empty() ? releases_in_bundle(dir)
                          : std::vector<BundleRelease>{{req.package, req.version, {}}};

  const TrustAnchor anchor = bundle_anchor(req.trust, release_list(releases));
  if (req.trust.tuf_metadata_dir.empty())
    throw Error(ErrorKind::Usage, "no TUF metadata directory (the cache directory's tuf/)");
  const std::string anchor_root = fetch::read_anchor_root(anchor);
  const fs::path md = fetch::tuf_metadata_dir(req.trust.tuf_metadata_dir, anchor_root);
  const std::time_t clock = std::time(nullptr);
  // The clock, or later when it has gone back since this node last accepted metadata of the root
  // (fetch::expiry_time, read before the directory is prepared); --expiry-reference replaces both.
  fetch::ExpiryTime when = fetch::expiry_time(md, clock);
  if (auto replaced = fetch::prepare_metadata_dir(md, anchor_root)) say("WARNING: " + *replaced);

  std::time_t now = when.at;
  if (req.expiry_reference) {
    when.at = clock;
    now = *req.expiry_reference;
    say("WARNING: --expiry-reference " + tuf::format_utc_time(now) +
        ": TUF metadata expiry is checked against that time, not the clock (" +
        tuf::format_utc_time(clock) +
        "): metadata that has expired is accepted, so this install is not protected against a "
        "replayed (frozen) bundle. Signatures, thresholds, versions and hashes are checked as "
        "always.");
  }
  // Every release, and every manifest against its index entry, before the first install.
  std::vector<VerifiedBundle> verified;
  for (const auto& release : releases) {
    VerifiedBundle vb = [&] {
      try {
        return verify_bundle(dir, md, release.package, release.version, now, clock);
      } catch (const tuf::Error& e) {
        throw fetch::explain_clock(e, when);
      }
    }();
    for (const auto& [e, p] : vb.archives)
      if (std::optional<format::Manifest> m = store::read_leading_manifest(p))
        store::require_manifest_matches_index(*m, e, vb.index, p.string(), vb.index_path.string());
    say("verified " + release.package + " " + release.version + " in " + req.bundle.string() +
        " against root v" + std::to_string(vb.root_version) + " (" + anchor.source +
        "): timestamp v" + std::to_string(vb.timestamp_version) + ", " +
        std::to_string(vb.archives.size()) + " archive(s)");
    verified.push_back(std::move(vb));
  }
  BundleInstallResult out;
  for (const auto& e : verified.front().expired)
    say("WARNING: accepted expired metadata because of --expiry-reference: " + e);
  out.root_version = verified.front().root_version;
  out.timestamp_version = verified.front().timestamp_version;
  out.expired_accepted = verified.front().expired;
  for (std::size_t i = 0; i < releases.size(); ++i) {
    const VerifiedBundle& vb = verified[i];
    BundleRelease done{releases[i].package, releases[i].version, {}};
    for (const auto& [e, p] : vb.archives) {
      out.installed.push_back(
          store::install_archive(p, req.dest, e.sha256, store::RequiredRelease{done.package, done.version}));
      done.targets.push_back(e.target);
      say("installed " + out.installed.back().directory.string());
    }
    if (vb.description) {
      out.descriptions.push_back(store::install_description(
          io::read_whole_file(*vb.description, io::limits::kMaxJsonBytes), *vb.index.description, req.dest,
          vb.description->string(), vb.index_path.string()));
      say("installed " + out.descriptions.back().string());
    }
    out.releases.push_back(std::move(done));
  }
  return out;
}

}  // namespace kiln::release
