#include "store/store.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "format/archive_stream.hpp"
#include "format/fatbin.hpp"
#include "format/untrusted_json.hpp"
#include "io/artifact_check.hpp"
#include "io/atomic_file.hpp"
#include "io/file_descriptor.hpp"
#include "io/file_lock.hpp"
#include "io/scratch_dir.hpp"
#include "io/sha256.hpp"
#include "store/index_entry_check.hpp"
#include "store/store_scan.hpp"

#include <nlohmann/json.hpp>

namespace kiln::store {
namespace {

namespace fs = std::filesystem;

constexpr const char* kManifestName = "manifest.json";
// A big install on a slow disk takes seconds; a holder gone for this long is hung (NFS).
constexpr std::chrono::milliseconds kInstallLockTimeout{10 * 60 * 1000};

int severity(ErrorKind k) {
  switch (k) {
    case ErrorKind::Integrity:
      return 6;
    case ErrorKind::Stale:
      return 5;
    case ErrorKind::Format:
      return 4;
    case ErrorKind::NotFound:
      return 3;
    case ErrorKind::Io:
      return 2;
    default:
      return 1;
  }
}

void write_file_exclusive(const fs::path& p, const std::string& data) {
  io::UniqueFd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) throw Error(ErrorKind::Io, "cannot create " + p.string() + ": " + std::strerror(errno));
  if (!io::write_all(fd.get(), data))
    throw Error(ErrorKind::Io, "cannot write " + p.string() + ": " + std::strerror(errno));
  // Reaches the disk with the rest of the temp directory (flush_unpacked).
  if (fd.close() != 0)
    throw Error(ErrorKind::Io, "cannot write " + p.string() + ": " + std::strerror(errno));
}

// Every file unpacked into `dir` reaches the disk before the directory is renamed into place:
// one syncfs(2) of its filesystem, not an fsync per member (which made installing 20,000
// artifacts take minutes: a journal commit each; docs/decisions.md, "Manifests looked up, not
// read").
void flush_unpacked(const fs::path& dir) {
  io::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd || ::syncfs(fd.get()) != 0)
    throw Error(ErrorKind::Io, "cannot flush " + dir.string() + ": " + std::strerror(errno));
}

// A member streamed into a new file of the temp dir.
class StreamedFile {
 public:
  explicit StreamedFile(const fs::path& p) : path_(p) {
    fd_.reset(::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd_)
      throw Error(ErrorKind::Io, "cannot create " + p.string() + ": " + std::strerror(errno));
  }
  void write(const char* data, std::size_t size) {
    if (!io::write_all(fd_.get(), std::string_view(data, size)))
      throw Error(ErrorKind::Io, "cannot write " + path_.string() + ": " + std::strerror(errno));
  }
  // The data reaches the disk with the rest of the temp directory (flush_unpacked).
  void close() {
    if (fd_.close() != 0)
      throw Error(ErrorKind::Io, "cannot write " + path_.string() + ": " + std::strerror(errno));
  }

 private:
  fs::path path_;
  io::UniqueFd fd_;
};

std::string join_problems(const std::vector<VerifyProblem>& problems) {
  std::string out;
  for (const auto& p : problems) out += (out.empty() ? "" : "\n  ") + p.message;
  return out;
}

StoreArchive scan_store_entry(const fs::path& dir) {
  StoreArchive sa;
  sa.dir = dir.string();
  fs::path mpath = dir / kManifestName;
  try {
    format::Manifest m = format::parse_manifest(io::read_whole_file(mpath, io::limits::kMaxLocalFileBytes), mpath.string());
    require_archive_dir_name(sa.dir, m);
    sa.manifest = std::make_shared<const format::Manifest>(std::move(m));
  } catch (const Error& e) {
    sa.error_kind = e.kind();
    sa.error = e.kind() == ErrorKind::NotFound
                   ? "no manifest.json in store directory " + dir.string()
                   : e.what();
  }
  return sa;
}

}  // namespace

std::optional<ErrorKind> most_severe(const std::vector<VerifyProblem>& problems) {
  std::optional<ErrorKind> worst;
  for (const auto& p : problems)
    if (!worst || severity(p.kind) > severity(*worst)) worst = p.kind;
  return worst;
}

std::vector<StoreArchive> scan_store(const fs::path& store) {
  // Which entries are archive directories is the one rule of store_scan.hpp, as for the loader.
  StoreListing listing = list_store_archive_dirs(store);
  switch (listing.status) {
    case ListingStatus::Listed:
      break;
    case ListingStatus::Absent:
      return {};
    case ListingStatus::NotADirectory:
      throw Error(ErrorKind::Io, "store " + store.string() + " is not a directory");
    case ListingStatus::Unlistable:
      throw Error(ErrorKind::Io, "store " + store.string() + " " + listing.problem);
  }
  std::vector<StoreArchive> out;
  for (const auto& name : listing.archive_names) out.push_back(scan_store_entry(store / name));
  return out;
}

StoreArchive scan_store_archive(const fs::path& dir) { return scan_store_entry(dir); }

std::string read_verified_artifact(const fs::path& archive_dir, const format::ArtifactEntry& artifact) {
  fs::path p = archive_dir / artifact.file;
  std::string data;
  try {
    data = io::read_whole_file(p, io::limits::kMaxLocalArtifactBytes);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::NotFound)
      throw Error(ErrorKind::NotFound,
                  io::missing_message(p.string(), artifact.uri, (archive_dir / kManifestName).string()),
                  {{"uri", artifact.uri}, {"path", p.string()}, {"field", "file"}});
    throw;
  }
  if (auto m = io::pin_mismatch(data, {artifact.size, artifact.sha256}))
    throw Error(ErrorKind::Integrity, m->message(p.string(), "manifest"),
                {{"uri", artifact.uri},
                 {"path", p.string()},
                 {"field", m->field},
                 {"expected", m->expected},
                 {"actual", m->actual}});
  return data;
}

std::vector<VerifyProblem> verify_store_archive(const StoreArchive& entry) {
  std::vector<VerifyProblem> problems;
  if (!entry.manifest) {
    problems.push_back({entry.error_kind, (fs::path(entry.dir) / kManifestName).string(),
                        "manifest", entry.error});
    return problems;
  }
  std::vector<std::string> listed = {kManifestName};
  for (const auto& a : entry.manifest->artifacts) {
    listed.push_back(a.file);
    try {
      read_verified_artifact(entry.dir, a);
    } catch (const Error& e) {
      const std::string* field = e.field("field");
      problems.push_back(
          {e.kind(), (fs::path(entry.dir) / a.file).string(), field ? *field : "file", e.what()});
    }
  }
  // A listed file that is missing was reported by read_verified_artifact, with its URI.
  std::error_code ec;
  std::vector<std::string> present;
  for (const auto& e : fs::directory_iterator(entry.dir, ec))
    present.push_back(e.path().filename().string());
  for (const auto& name : io::coverage(listed, present).unlisted) {
    std::string path = (fs::path(entry.dir) / name).string();
    problems.push_back(
        {ErrorKind::Integrity, path, "file", io::unlisted_message(path, "the manifest")});
  }
  if (ec)
    problems.push_back(
        {ErrorKind::Io, entry.dir, "", "cannot list " + entry.dir + ": " + ec.message()});
  return problems;
}

bool store_has_verified(const fs::path& store, const std::string& stem) {
  std::error_code ec;
  if (!is_archive_dir_name(stem)) return false;
  if (!fs::is_directory(store / stem, ec)) return false;
  StoreArchive sa = scan_store_entry(store / stem);
  return sa.manifest && verify_store_archive(sa).empty();
}

std::vector<VerifyProblem> verify_archive_members(const std::vector<format::ArchiveMember>& members,
                                                  const std::string& origin,
                                                  format::Manifest* manifest_out) {
  std::vector<VerifyProblem> problems;
  auto add = [&](ErrorKind k, const std::string& file, const std::string& field,
                 const std::string& msg) {
    problems.push_back({k, file, field, msg});
  };
  auto it = std::find_if(members.begin(), members.end(),
                         [](const format::ArchiveMember& m) { return m.name == kManifestName; });
  if (it == members.end()) {
    add(ErrorKind::Format, origin, kManifestName, origin + ": holds no manifest.json");
    return problems;
  }
  // Readers stream the manifest first to decide before unpacking anything else.
  if (it != members.begin())
    add(ErrorKind::Format, origin, kManifestName,
        origin + ": manifest.json must be the first member, found '" + members.front().name +
            "' first");
  format::Manifest m;
  std::string morigin = origin + ":" + kManifestName;
  try {
    m = format::parse_manifest(it->data, morigin);
  } catch (const Error& e) {
    add(e.kind(), morigin, "manifest", e.what());
    return problems;
  }
  std::map<std::string, const format::ArchiveMember*> by_name;
  std::vector<std::string> present;
  for (const auto& mem : members) {
    by_name[mem.name] = &mem;
    present.push_back(mem.name);
  }
  std::vector<std::string> listed = {kManifestName};
  for (const auto& a : m.artifacts) {
    listed.push_back(a.file);
    std::string where = origin + ":" + a.file;
    auto found = by_name.find(a.file);
    if (found == by_name.end()) {
      add(ErrorKind::Integrity, where, "file", io::missing_message(where, a.uri, "the manifest"));
      continue;
    }
    if (auto mm = io::pin_mismatch(found->second->data, {a.size, a.sha256}))
      add(ErrorKind::Integrity, where, mm->field, mm->message(where, "manifest"));
  }
  for (const auto& name : io::coverage(listed, present).unlisted) {
    std::string where = origin + ":" + name;
    add(ErrorKind::Integrity, where, "file", io::unlisted_message(where, "the manifest"));
  }
  if (manifest_out) *manifest_out = std::move(m);
  return problems;
}

namespace {

// The manifest an archive stream starts with, and its text. nullopt, with the problem added,
// when the archive holds no member, does not start with manifest.json, or the manifest does not
// parse; throws Error{Limit} for a manifest declared larger than kMaxManifestBytes.
struct LeadingManifest {
  std::string text;
  format::Manifest manifest;
};
std::optional<LeadingManifest> read_first_manifest(format::ArchiveStream& r,
                                                   std::vector<VerifyProblem>& problems) {
  const std::string& origin = r.origin();
  auto first = r.next();
  if (!first) {
    r.finish();
    problems.push_back(
        {ErrorKind::Format, origin, kManifestName, origin + ": holds no manifest.json"});
    return std::nullopt;
  }
  if (first->name != kManifestName) {
    problems.push_back(
        {ErrorKind::Format, origin, kManifestName,
         origin + ": no manifest.json first (manifest.json must be the first member, found '" +
             first->name + "' first); nothing else is read before the manifest"});
    return std::nullopt;
  }
  std::string morigin = origin + ":" + kManifestName;
  if (first->size > io::limits::kMaxManifestBytes)
    throw Error(ErrorKind::Limit, morigin + ": declared size " + std::to_string(first->size) +
                                      " exceeds the limit of " +
                                      std::to_string(io::limits::kMaxManifestBytes) +
                                      " (docs/security.md)");
  LeadingManifest out;
  out.text = r.read_data_whole(io::limits::kMaxManifestBytes);
  try {
    out.manifest = format::parse_manifest(out.text, morigin);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Limit) throw;
    problems.push_back({e.kind(), morigin, "manifest", e.what()});
    return std::nullopt;
  }
  return out;
}

// The limits decided from the manifest, before any other member is read (docs/security.md):
// member count, each artifact's declared size, the total. Throws Error{Limit}. Returns the
// manifest's artifacts by file name.
std::map<std::string, const format::ArtifactEntry*> check_declared_limits(const LeadingManifest& lm,
                                                                  const std::string& morigin) {
  const format::Manifest& m = lm.manifest;
  std::uint64_t total = lm.text.size();
  if (m.artifacts.size() + 1 > io::limits::kMaxMembers)
    throw Error(ErrorKind::Limit, morigin + ": lists " + std::to_string(m.artifacts.size()) +
                                      " artifacts, more than the limit of " +
                                      std::to_string(io::limits::kMaxMembers - 1) +
                                      " (docs/security.md)");
  std::map<std::string, const format::ArtifactEntry*> by_file;
  for (const auto& a : m.artifacts) {
    if (a.size > io::limits::kMaxMemberBytes)
      throw Error(ErrorKind::Limit, morigin + ": artifact '" + a.file + "' declares " +
                                        std::to_string(a.size) + " bytes, more than the limit of " +
                                        std::to_string(io::limits::kMaxMemberBytes) +
                                        " per member (docs/security.md)");
    total += a.size;
    by_file[a.file] = &a;
  }
  if (total > io::limits::kMaxUnpackedBytes)
    throw Error(ErrorKind::Limit, morigin + ": declares " + std::to_string(total) +
                                      " bytes in all, more than the limit of " +
                                      std::to_string(io::limits::kMaxUnpackedBytes) +
                                      " unpacked (docs/security.md)");
  return by_file;
}

// Every member after the manifest against the artifact it must be: listed, of the size listed
// (checked from the header, before its data is read), then hashed while streamed and, with
// `unpack_dir`, written there. Returns the files found; problems are added and the stream goes on.
std::vector<std::string> stream_members(format::ArchiveStream& r,
                                        const std::map<std::string, const format::ArtifactEntry*>& by_file,
                                        const fs::path* unpack_dir,
                                        std::vector<VerifyProblem>& problems) {
  std::vector<std::string> found;
  while (auto h = r.next()) {
    std::string where = r.origin() + ":" + h->name;
    auto it = by_file.find(h->name);
    if (it == by_file.end()) {
      // Its data is never read (next() skips it); the reader's total still counts it.
      problems.push_back(
          {ErrorKind::Integrity, where, "file", io::unlisted_message(where, "the manifest")});
      continue;
    }
    const format::ArtifactEntry& a = *it->second;
    found.push_back(a.file);
    if (auto mm = io::size_mismatch(h->size, a.size)) {
      problems.push_back({ErrorKind::Integrity, where, "size", mm->message(where, "manifest")});
      continue;
    }
    io::Sha256 hash;
    std::optional<StreamedFile> out;
    if (unpack_dir) out.emplace(*unpack_dir / a.file);
    r.read_data([&](const char* p, std::size_t n) {
      hash.update(p, n);
      if (out) out->write(p, n);
    });
    if (out) out->close();
    if (auto mm = io::digest_mismatch(hash.hex(), a.sha256))
      problems.push_back({ErrorKind::Integrity, where, "sha256", mm->message(where, "manifest")});
  }
  r.finish();
  return found;
}

// An archive streamed against its manifest, which must be its first member: the manifest is
// read (at most kMaxManifestBytes) and parsed, its member count, sizes and total are checked
// against the limits before any other member is read, and every later member must be one it
// lists, with the size it records, before its data is read. Data is hashed while streamed and,
// when `unpack_dir` is given, written there. Refusals that leave nothing to decide from
// (structure, limits) throw; per-artifact problems are collected and the stream goes on.
std::vector<VerifyProblem> check_archive_stream(format::ArchiveStream& r, format::Manifest* manifest_out,
                                                const fs::path* unpack_dir) {
  std::vector<VerifyProblem> problems;
  std::optional<LeadingManifest> lm = read_first_manifest(r, problems);
  if (!lm) return problems;
  const std::string morigin = r.origin() + ":" + kManifestName;
  const std::map<std::string, const format::ArtifactEntry*> by_file = check_declared_limits(*lm, morigin);
  if (unpack_dir) write_file_exclusive(*unpack_dir / kManifestName, lm->text);
  std::vector<std::string> found = stream_members(r, by_file, unpack_dir, problems);
  std::vector<std::string> listed;
  for (const auto& a : lm->manifest.artifacts) listed.push_back(a.file);
  for (const auto& file : io::coverage(listed, found).missing) {
    std::string where = r.origin() + ":" + file;
    problems.push_back({ErrorKind::Integrity, where, "file",
                        io::missing_message(where, by_file.at(file)->uri, "the manifest")});
  }
  if (manifest_out) *manifest_out = std::move(lm->manifest);
  return problems;
}

// The existing copy holds exactly what was just unpacked: same manifest bytes, and every artifact
// it lists present with the recorded size and sha256, nothing else.
bool directory_matches(const fs::path& dir, const fs::path& unpacked) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  try {
    if (io::read_whole_file(dir / kManifestName, io::limits::kMaxManifestBytes) !=
        io::read_whole_file(unpacked / kManifestName, io::limits::kMaxManifestBytes))
      return false;
  } catch (const Error&) {
    return false;
  }
  StoreArchive sa = scan_store_entry(dir);
  return sa.manifest && verify_store_archive(sa).empty();
}

// `.tmp-*` directories of installers that died (kill -9, power loss). Safe only while holding
// the store's install lock: every live installer holds it for as long as its temp dir exists.
void remove_orphaned_temp_dirs(const fs::path& store) {
  std::error_code ec;
  for (fs::directory_iterator it(store, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(".tmp-", 0) != 0) continue;
    std::error_code rec;
    fs::remove_all(it->path(), rec);
  }
}

fs::path store_install_lock_path(const fs::path& store) {
  return store / ".kiln-locks" / "install.lock";
}

// A pinned digest is checked before a single byte is decompressed: a forged archive never
// reaches libarchive and never touches the store.
void require_pinned_digest(const fs::path& archive, const std::string& expected_sha256) {
  std::error_code ec;
  if (!fs::exists(archive, ec))
    throw Error(ErrorKind::NotFound, "archive not found: " + archive.string());
  if (!fs::is_regular_file(archive, ec))
    throw Error(ErrorKind::Io, "not a regular file: " + archive.string());
  if (auto mm = io::digest_mismatch(io::sha256_file(archive), expected_sha256))
    throw Error(ErrorKind::Integrity, mm->message(archive.string(), "the pinned digest"),
                {{"path", archive.string()},
                 {"field", "sha256"},
                 {"expected", mm->expected},
                 {"actual", mm->actual}});
}

// A file an index pins, beside it: present, then its size (before hashing) and its sha256
// against the pin, in the words of io/artifact_check.hpp naming the file and the index. nullopt
// when it matches. `kiln verify INDEX` reports by it and `kiln install INDEX` refuses by it.
std::optional<Error> pinned_file_refusal(const fs::path& path, const io::ArtifactPin& pin,
                                         const std::string& index_origin) {
  const std::string as = path.string();
  std::vector<ErrorField> fields = {{"path", as}, {"index", index_origin}};
  auto refusal = [&](ErrorKind kind, const std::string& message, std::vector<ErrorField> more) {
    fields.insert(fields.end(), more.begin(), more.end());
    return Error(kind, message, fields);
  };
  std::error_code ec;
  if (!fs::exists(path, ec))
    return refusal(ErrorKind::NotFound,
                   as + ": listed in " + index_origin + " but not found beside it",
                   {{"field", "file"}});
  std::size_t size = 0;
  std::string digest;
  try {
    const std::uintmax_t on_disk = fs::file_size(path, ec);
    if (auto mm = ec ? std::optional<io::PinMismatch>() : io::size_mismatch(on_disk, pin.size))
      return refusal(ErrorKind::Integrity, mm->message(as, index_origin),
                     {{"field", mm->field}, {"expected", mm->expected}, {"actual", mm->actual}});
    digest = io::sha256_file(path, &size);
  } catch (const Error& e) {
    return refusal(e.kind(), e.what(), {{"field", "file"}});
  }
  if (auto mm = io::pin_mismatch(size, digest, pin))
    return refusal(ErrorKind::Integrity, mm->message(as, index_origin),
                   {{"field", mm->field}, {"expected", mm->expected}, {"actual", mm->actual}});
  return std::nullopt;
}

// One installer at a time per store; whoever takes the lock removes what dead ones left.
io::FileLock lock_store_for_install(const fs::path& dest_store) {
  std::error_code ec;
  fs::create_directories(dest_store / ".kiln-locks", ec);
  if (ec)
    throw Error(ErrorKind::Io, "cannot create store " + dest_store.string() + " (its " +
                                   (dest_store / ".kiln-locks").string() + "): " + ec.message(),
                {{"path", (dest_store / ".kiln-locks").string()}});
  io::FileLock lock = io::FileLock::acquire(store_install_lock_path(dest_store), kInstallLockTimeout);
  remove_orphaned_temp_dirs(dest_store);
  return lock;
}

// Streams `archive` into `unpack_dir`, verified member by member; throws, naming every problem,
// unless all matched (and, with a pin, the bytes unpacked are the bytes pinned).
format::Manifest unpack_verified(const fs::path& archive, const fs::path& unpack_dir,
                         const std::optional<std::string>& expected_sha256) {
  io::Sha256 raw;
  format::ArchiveStream reader = format::ArchiveStream::open_file(archive, {}, &raw);
  format::Manifest m;
  auto problems = check_archive_stream(reader, &m, &unpack_dir);
  if (!problems.empty())
    throw Error(*most_severe(problems),
                "refusing to install " + archive.string() + ":\n  " + join_problems(problems));
  // The bytes unpacked are the bytes pinned (the file cannot have changed in between).
  if (expected_sha256)
    if (auto mm = io::digest_mismatch(raw.hex(), *expected_sha256))
      throw Error(ErrorKind::Integrity, archive.string() + ": changed while being installed: " +
                                            mm->message("", "the pinned digest"));
  return m;
}

// An archive of another package or release than `required` names is Stale, both values named.
void require_release(const fs::path& archive, const format::Manifest& m, const RequiredRelease& required) {
  if (!required.package.empty() && m.package != required.package)
    throw Error(ErrorKind::Stale,
                "refusing to install " + archive.string() + ": it is an archive of package " +
                    m.package + ", not " + required.package +
                    " (name the package with --package or --source, or pass --any-version)",
                {{"path", archive.string()},
                 {"field", "package"},
                 {"expected", required.package},
                 {"actual", m.package}});
  if (!required.version.empty() && m.package_version != required.version)
    throw Error(ErrorKind::Stale,
                "refusing to install " + archive.string() + ": package_version is " +
                    m.package_version + ", the package " + m.package + " wanted is " +
                    required.version + "; fetch the archives of release " + required.version,
                {{"path", archive.string()},
                 {"field", "package_version"},
                 {"expected", required.version},
                 {"actual", m.package_version}});
}

// Renames the verified temp dir to `target`, swapping it with an existing copy in one step, so
// readers never find the directory missing; the old copy ends up under the temp name and is
// removed with it.
InstallResult::Action move_into_place(io::ScratchDir& tmp, const fs::path& target,
                                      const fs::path& dest_store) {
  if (::chmod(tmp.path().c_str(), 0755) != 0)
    throw Error(ErrorKind::Io, "cannot chmod " + tmp.path().string() + ": " + std::strerror(errno));
  io::sync_directory(tmp.path());
  if (::rename(tmp.path().c_str(), target.c_str()) == 0) {
    tmp.release();
    io::sync_directory(dest_store);
    return InstallResult::Action::Installed;
  }
  if (errno != EEXIST && errno != ENOTEMPTY)
    throw Error(ErrorKind::Io, "cannot rename " + tmp.path().string() + " to " + target.string() +
                                   ": " + std::strerror(errno));
  if (::renameat2(AT_FDCWD, tmp.path().c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS)
      throw Error(ErrorKind::Io, "cannot replace " + target.string() + ": " + std::strerror(errno));
    // Filesystems without RENAME_EXCHANGE: move the old copy aside, then rename.
    io::ScratchDir aside(dest_store, ".tmp-", "temporary directory");
    fs::path old = aside.path() / "old";
    if (::rename(target.c_str(), old.c_str()) != 0)
      throw Error(ErrorKind::Io,
                  "cannot move " + target.string() + " aside: " + std::strerror(errno));
    if (::rename(tmp.path().c_str(), target.c_str()) != 0) {
      int err = errno;
      ::rename(old.c_str(), target.c_str());  // put the old copy back
      throw Error(ErrorKind::Io, "cannot replace " + target.string() + ": " + std::strerror(err));
    }
    tmp.release();
  }
  io::sync_directory(dest_store);
  return InstallResult::Action::Replaced;
}

}  // namespace

fs::path store_file_lock_path(const fs::path& store, const std::string& file) {
  return store / ".kiln-locks" / (file + ".lock");
}

io::FileLock lock_store_file(const fs::path& store, const std::string& file,
                         std::chrono::milliseconds timeout, std::vector<fs::path>* removed,
                         const std::function<void()>& on_wait) {
  const fs::path lock_path = store_file_lock_path(store, file);
  std::error_code ec;
  fs::create_directories(lock_path.parent_path(), ec);
  if (ec)
    throw Error(ErrorKind::Io, "cannot create the lock directory " +
                                   lock_path.parent_path().string() + ": " + ec.message());
  std::optional<io::FileLock> now = io::FileLock::try_acquire(lock_path);
  if (!now && on_wait) on_wait();
  io::FileLock lock = now ? std::move(*now) : io::FileLock::acquire(lock_path, timeout);
  std::vector<fs::path> gone = io::remove_orphaned_temps(store, file);
  if (removed) *removed = std::move(gone);
  return lock;
}

fs::path install_description(std::string_view bytes, const format::IndexFile& pin,
                             const fs::path& dest_store, const std::string& origin,
                             const std::string& index_origin) {
  if (auto mm = io::pin_mismatch(bytes, io::ArtifactPin{pin.size, pin.sha256}))
    throw Error(ErrorKind::Integrity, mm->message(origin, index_origin))
        .with("file", origin)
        .with("field", mm->field);
  std::error_code ec;
  fs::create_directories(dest_store, ec);
  if (ec)
    throw Error(ErrorKind::Io, "cannot create store " + dest_store.string() + ": " + ec.message());
  io::FileLock lock = lock_store_file(dest_store, pin.file, kInstallLockTimeout);
  fs::path out = dest_store / pin.file;
  io::write_file_atomically(out, bytes);
  return out;
}

InstallResult install_archive(const fs::path& archive, const fs::path& dest_store,
                              const std::optional<std::string>& expected_sha256,
                              const RequiredRelease& required, ArchiveAfterInstall after) {
  if (expected_sha256) require_pinned_digest(archive, *expected_sha256);
  io::FileLock lock = lock_store_for_install(dest_store);
  // Streamed into a temp dir inside the store, verified member by member; renamed into place
  // only when everything matched. Any refusal removes the temp dir: the store keeps its old
  // contents (and the lock file).
  io::ScratchDir tmp(dest_store, ".tmp-", "temporary directory");
  InstallResult result;
  result.manifest = unpack_verified(archive, tmp.path(), expected_sha256);
  const format::Manifest& m = result.manifest;
  require_release(archive, m, required);
  result.directory =
      dest_store / format::archive_stem(m.package, m.package_version, m.cuda_version, m.target);
  std::error_code ec;
  if (after == ArchiveAfterInstall::Remove) fs::remove(archive, ec);
  if (directory_matches(result.directory, tmp.path())) {
    result.action = InstallResult::Action::Unchanged;
    return result;
  }
  flush_unpacked(tmp.path());
  result.action = move_into_place(tmp, result.directory, dest_store);
  return result;
}

namespace {

// The refusals of a release install, thrown as one Error of the most severe kind when there is
// any: every refused file named, the fields those of the first refusal of that kind.
void throw_refusals(const std::vector<Error>& refused, const fs::path& index_path,
                    const fs::path& dest_store) {
  if (refused.empty()) return;
  std::vector<VerifyProblem> kinds;
  for (const auto& e : refused) kinds.push_back({e.kind(), "", "", ""});
  const ErrorKind kind = *most_severe(kinds);
  std::string msg = "refusing to install the release of " + index_path.string() + " (" +
                    dest_store.string() + " is left as it was):";
  const Error* first = nullptr;
  for (const auto& e : refused) {
    msg += "\n  " + std::string(e.what());
    if (!first && e.kind() == kind) first = &e;
  }
  throw Error(kind, msg, first->fields());
}

}  // namespace

ReleaseInstallResult install_release(const fs::path& index_path, const format::Index& index,
                                     const fs::path& dest_store) {
  const fs::path dir = index_path.parent_path();
  const std::string ip = index_path.string();
  std::vector<Error> refused;
  // Every pinned file against the index's size and digest before anything is decompressed.
  for (const auto& e : index.archives)
    if (auto r = pinned_file_refusal(dir / e.file, io::ArtifactPin{e.size, e.sha256}, ip))
      refused.push_back(*r);
  std::string description;
  const fs::path description_path = index.description ? dir / index.description->file : fs::path();
  if (index.description) {
    const format::IndexFile& pin = *index.description;
    if (auto r = pinned_file_refusal(description_path, io::ArtifactPin{pin.size, pin.sha256}, ip))
      refused.push_back(*r);
    else
      try {
        description = io::read_whole_file(description_path, io::limits::kMaxJsonBytes);
      } catch (const Error& e) {
        refused.push_back(e);
      }
  }
  throw_refusals(refused, index_path, dest_store);
  // Each manifest against its index entry, from the first member alone.
  for (const auto& e : index.archives) {
    const fs::path ap = dir / e.file;
    try {
      if (std::optional<format::Manifest> m = read_leading_manifest(ap))
        require_manifest_matches_index(*m, e, index, ap.string(), ip);
    } catch (const Error& err) {
      refused.push_back(err);
    }
  }
  throw_refusals(refused, index_path, dest_store);
  // Every archive unpacked and checked into a temp dir of its own before any is renamed.
  io::FileLock lock = lock_store_for_install(dest_store);
  struct Staged {
    std::unique_ptr<io::ScratchDir> tmp;
    InstallResult result;
  };
  std::vector<Staged> staged;
  for (const auto& e : index.archives) {
    const fs::path ap = dir / e.file;
    try {
      Staged s{std::make_unique<io::ScratchDir>(dest_store, ".tmp-", "temporary directory"), {}};
      s.result.manifest = unpack_verified(ap, s.tmp->path(), e.sha256);
      const format::Manifest& m = s.result.manifest;
      require_manifest_matches_index(m, e, index, ap.string(), ip);
      s.result.directory =
          dest_store / format::archive_stem(m.package, m.package_version, m.cuda_version, m.target);
      staged.push_back(std::move(s));
    } catch (const Error& err) {
      refused.push_back(err);
    }
  }
  throw_refusals(refused, index_path, dest_store);
  if (!staged.empty()) flush_unpacked(staged.front().tmp->path());  // one syncfs for them all
  ReleaseInstallResult out;
  for (auto& s : staged) {
    if (directory_matches(s.result.directory, s.tmp->path()))
      s.result.action = InstallResult::Action::Unchanged;
    else
      s.result.action = move_into_place(*s.tmp, s.result.directory, dest_store);
    out.archives.push_back(std::move(s.result));
  }
  // Last: a description beside the store says its archives are there.
  if (index.description)
    out.description = install_description(description, *index.description, dest_store,
                                          description_path.string(), ip);
  return out;
}

std::vector<VerifyProblem> verify_archive_file(const fs::path& archive,
                                               const std::string& expected_package_version,
                                               format::Manifest* manifest_out) {
  std::vector<VerifyProblem> problems;
  format::Manifest m;
  try {
    format::ArchiveStream reader = format::ArchiveStream::open_file(archive);
    problems = check_archive_stream(reader, &m, nullptr);
  } catch (const Error& e) {
    problems.push_back({e.kind(), archive.string(), "archive", e.what()});
    return problems;
  }
  bool parsed = !m.package_version.empty();
  if (parsed && !expected_package_version.empty() && m.package_version != expected_package_version)
    problems.push_back({ErrorKind::Stale, archive.string(), "package_version",
                        archive.string() + ": package_version is " + m.package_version +
                            ", this kiln is " + expected_package_version +
                            "; fetch the archives of release " + expected_package_version});
  if (manifest_out && parsed) *manifest_out = std::move(m);
  return problems;
}

std::vector<VerifyProblem> verify_index_file(const fs::path& index_path,
                                             const std::string& expected_package_version,
                                             format::Index* index_out) {
  std::vector<VerifyProblem> problems;
  format::Index idx;
  try {
    idx = format::parse_index(io::read_whole_file(index_path, io::limits::kMaxLocalFileBytes), index_path.string());
  } catch (const Error& e) {
    problems.push_back({e.kind(), index_path.string(), "index", e.what()});
    return problems;
  }
  const std::string ip = index_path.string();
  if (!expected_package_version.empty() && idx.package_version != expected_package_version)
    problems.push_back({ErrorKind::Stale, ip, "package_version",
                        ip + ": package_version is " + idx.package_version + ", this kiln is " +
                            expected_package_version});
  fs::path dir = index_path.parent_path();
  // A file the index pins: present beside it, of the pinned size and sha256. False when it
  // could not be read at all.
  auto check_pinned = [&](const fs::path& path, std::uint64_t want_size, const std::string& want) {
    std::optional<Error> refused = pinned_file_refusal(path, io::ArtifactPin{want_size, want}, ip);
    if (!refused) return true;
    const std::string field = *refused->field("field");
    problems.push_back({refused->kind(), path.string(), field, refused->what()});
    return field != "file";
  };
  if (idx.description)
    check_pinned(dir / idx.description->file, idx.description->size, idx.description->sha256);
  for (const auto& e : idx.archives) {
    fs::path ap = dir / e.file;
    std::string as = ap.string();
    if (!check_pinned(ap, e.size, e.sha256)) continue;
    format::Manifest m;
    auto inner = verify_archive_file(ap, "", &m);
    problems.insert(problems.end(), inner.begin(), inner.end());
    if (m.package_version.empty()) continue;  // manifest unreadable: already reported
    auto against_index = manifest_index_problems(m, e, idx, as, ip);
    problems.insert(problems.end(), against_index.begin(), against_index.end());
  }
  if (index_out) *index_out = std::move(idx);
  return problems;
}

const char* to_string(PathKind kind) {
  switch (kind) {
    case PathKind::Fatbin:
      return "fatbin";
    case PathKind::Cubin:
      return "cubin";
    case PathKind::Archive:
      return "archive";
    case PathKind::Index:
      return "index";
    case PathKind::Manifest:
      return "manifest";
    case PathKind::Store:
      return "store";
    case PathKind::StoreArchive:
      return "store-archive";
    case PathKind::Unknown:
      return "unknown";
  }
  return "unknown";
}

namespace {

// What a file's name says it is, as `kiln build --dist` and `kiln mirror stage` name them: the
// word of a file whose content does not say (JSON that does not parse, a truncated or empty file,
// an index whose "format" is missing or mistyped), so that its parser names the fault.
PathKind kind_by_name(const std::string& name) {
  auto ends_with = [&](std::string_view tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail.data(), tail.size()) == 0;
  };
  if (ends_with("-index.json")) return PathKind::Index;
  if (name == kManifestName) return PathKind::Manifest;
  if (ends_with(".tar.zst")) return PathKind::Archive;
  return PathKind::Unknown;
}

}  // namespace

const char* describe(PathKind kind) {
  switch (kind) {
    case PathKind::Fatbin:
      return "a fatbin";
    case PathKind::Cubin:
      return "a cubin";
    case PathKind::Archive:
      return "an archive";
    case PathKind::Index:
      return "an index";
    case PathKind::Manifest:
      return "a manifest";
    case PathKind::Store:
      return "a store";
    case PathKind::StoreArchive:
      return "an unpacked archive";
    case PathKind::Unknown:
      break;
  }
  return "a file of no kind kiln reads (not an index, manifest, archive or fatbin by its content "
         "or its name)";
}

PathKind classify_path(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error(ErrorKind::NotFound, "no such file or directory: " + path.string());
  if (fs::is_directory(path, ec))
    return fs::exists(path / kManifestName, ec) ? PathKind::StoreArchive : PathKind::Store;
  // Only a regular file is opened: a FIFO would block the open, a device never ends.
  if (!fs::is_regular_file(path, ec))
    throw Error(ErrorKind::Io, path.string() + ": not a regular file or directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, "cannot open " + path.string() + ": " + std::strerror(errno));
  std::string head(512, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (format::looks_like_fatbin(head)) return PathKind::Fatbin;
  if (head.compare(0, 4,
                   "\x7f"
                   "ELF") == 0)
    return PathKind::Cubin;
  if (head.compare(0, 4, "\x28\xb5\x2f\xfd") == 0) return PathKind::Archive;
  if (head.size() >= 262 && head.compare(257, 5, "ustar") == 0) return PathKind::Archive;
  const PathKind named = kind_by_name(path.filename().string());
  std::size_t first = head.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && head[first] == '{') {
    std::string text = io::read_whole_file(path, io::limits::kMaxLocalFileBytes);
    try {
      auto j = format::parse_untrusted_json<nlohmann::json>(text, path.string());
      auto it = j.find("format");
      if (it != j.end() && it->is_string()) {
        if (*it == "kiln-index") return PathKind::Index;
        if (*it == "kiln-manifest") return PathKind::Manifest;
      }
    } catch (const nlohmann::json::exception&) {
    } catch (const Error& e) {
      // Too large or too deep: say so rather than guess.
      if (e.kind() != ErrorKind::Format) throw;
      // Malformed, but it says what it means to be: let that parser name the fault.
      if (text.find("\"kiln-index\"") != std::string::npos) return PathKind::Index;
      if (text.find("\"kiln-manifest\"") != std::string::npos) return PathKind::Manifest;
    }
  }
  return named;
}

}  // namespace kiln::store
