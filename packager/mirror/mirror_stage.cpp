// `kiln mirror stage` (mirror.hpp: stage_release): a verified release copied from dist
// directories into a mirror directory, the checksum file written last.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fetch/fetch_internal.hpp"
#include "format/manifest.hpp"
#include "io/artifact_check.hpp"
#include "io/atomic_file.hpp"
#include "io/private_key_scan.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "mirror/mirror.hpp"
#include "mirror/mirror_internal.hpp"
#include "mirror/simple_index.hpp"
#include "store/store.hpp"
#include "util/join.hpp"

namespace kiln::mirror {

namespace fs = std::filesystem;
using namespace detail;

namespace {

struct Candidate {
  ReleaseFileKind kind = ReleaseFileKind::Other;
  fs::path path;
  Digest digest;
};

// Copies src to dst through a temp file beside dst, hashing; refuses bytes that are not the
// ones verified (the source changed meanwhile).
void copy_verified(const fs::path& src, const fs::path& dst, const std::string& sha256) {
  std::ifstream in(src, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, "cannot open " + src.string());
  io::AtomicFile out(dst);
  io::Sha256 h;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    std::string_view chunk(buf, static_cast<std::size_t>(in.gcount()));
    h.update(chunk);
    out.write(chunk);
  }
  if (in.bad()) throw Error(ErrorKind::Io, "cannot read " + src.string());
  std::string got = h.hex();
  if (got != sha256)
    throw Error(ErrorKind::Integrity, src.string() +
                                          " changed while being staged: verified sha256 " + sha256 +
                                          ", copied " + got + "; nothing was replaced");
  out.commit();
}

int copy_order(ReleaseFileKind k) {
  // The index goes last (before the checksum file): a reader never sees an index whose
  // archives are missing.
  switch (k) {
    case ReleaseFileKind::Archive:
    case ReleaseFileKind::Description:
      return 0;
    case ReleaseFileKind::Wheel:
    case ReleaseFileKind::PackageWheel:
    case ReleaseFileKind::RuntimeWheel:
    case ReleaseFileKind::Tarball:
    case ReleaseFileKind::WheelMetadata:
    case ReleaseFileKind::SimplePage:
    case ReleaseFileKind::Other:
      return 1;
    case ReleaseFileKind::Index:
      return 2;
    case ReleaseFileKind::Checksums:
      return 3;
  }
  return 1;
}

}  // namespace

std::vector<ReleaseName> releases_to_stage(const std::vector<fs::path>& sources,
                                           const fs::path& to) {
  std::set<std::pair<std::string, std::string>> found;
  for (const auto& src : sources)
    for (const auto& r : releases_in(src))
      if (detail::is_regular(src / format::index_file_name(r.package, r.version)))
        found.emplace(r.package, r.version);
  std::error_code ec;
  if (fs::is_directory(to, ec))
    for (const auto& r : releases_in(to))
      for (const auto& src : sources)
        if (fs::is_directory(src, ec) && !detail::release_files_in(src, r.package, r.version).empty())
          found.emplace(r.package, r.version);
  if (found.empty()) {
    std::string looked;
    for (const auto& src : sources) looked += (looked.empty() ? "" : ", ") + src.string();
    throw Error(ErrorKind::NotFound, "no release to stage: no <package>-<version>-index.json in " +
                                         looked + ", and no file there of a release " +
                                         to.string() +
                                         " holds (name one with --package and --version)");
  }
  std::vector<ReleaseName> out;
  for (const auto& [package, version] : found) out.push_back({package, version});
  return out;
}

StageResult stage_release(const StageOptions& opts) {
  const ReleaseName release = detail::resolved_release(opts.package, opts.version);
  const std::string& package = release.package;
  const std::string& version = release.version;
  if (opts.sources.empty()) throw Error(ErrorKind::Usage, "no dist directory to stage from");
  if (opts.to.empty()) throw Error(ErrorKind::Usage, "no mirror directory given (--to)");
  io::refuse_private_key_in({opts.to}, "mirror stage",
                        "would be served from the mirror " + opts.to.string());
  auto log = [&](const std::string& line) {
    if (opts.log) opts.log(line);
  };
  std::string source_list =
      util::join(opts.sources, ", ", [](const fs::path& s) { return s.string(); });

  std::vector<store::VerifyProblem> problems;
  std::map<std::string, Candidate> cand;
  std::map<std::string, fs::path> archives_found;  // first source holding each archive name
  // A name found in two sources must be the same bytes in both.
  auto add_candidate = [&](const std::string& name, ReleaseFileKind kind, const fs::path& p) {
    detail::Digest d = detail::digest_of(p);
    auto it = cand.find(name);
    if (it == cand.end()) {
      cand[name] = {kind, p, d};
    } else if (it->second.digest.sha256 != d.sha256) {
      problems.push_back({ErrorKind::Integrity, p.string(), "sha256",
                          name + ": " + it->second.path.string() + " has sha256 " +
                              it->second.digest.sha256 + ", " + p.string() + " has " + d.sha256});
    }
  };
  for (const auto& src : opts.sources) {
    std::error_code ec;
    if (!fs::is_directory(src, ec))
      throw Error(ErrorKind::NotFound, "dist directory " + src.string() + " does not exist");
    for (const auto& [name, kind] : detail::release_files_in(src, package, version)) {
      switch (kind) {
        case ReleaseFileKind::Index:
        case ReleaseFileKind::Wheel:
        case ReleaseFileKind::PackageWheel:
        case ReleaseFileKind::RuntimeWheel:
        case ReleaseFileKind::Tarball:
          add_candidate(name, kind, src / name);
          break;
        case ReleaseFileKind::Archive:
        case ReleaseFileKind::Description:
          archives_found.emplace(name, src / name);
          break;
        case ReleaseFileKind::WheelMetadata:
        case ReleaseFileKind::SimplePage:
          log("skipping " + (src / name).string() + ": written from the wheel in the mirror");
          break;
        case ReleaseFileKind::Checksums:
        case ReleaseFileKind::Other:
          log("skipping " + (src / name).string() + ": not an index, archive, wheel or tarball");
          break;
      }
    }
  }

  // The index and every archive it lists, verified before anything is copied.
  const std::string index_name = format::index_file_name(package, version);
  if (cand.count(index_name)) {
    const fs::path ip = cand[index_name].path;
    format::Index idx = format::parse_index(detail::read_capped(ip, fetch::kMaxIndexBytes), ip.string());
    if (idx.package != package)
      throw Error(ErrorKind::Stale,
                  ip.string() + ": package is " + idx.package + ", expected " + package);
    if (idx.package_version != version)
      throw Error(ErrorKind::Stale, ip.string() + ": package_version is " + idx.package_version +
                                        ", expected " + version);
    std::set<std::string> listed;
    // A file the index pins (an archive, the description): found beside the index, else in
    // another source directory; of the pinned size and sha256. Empty when not found.
    auto pinned_file = [&](const std::string& file, std::uint64_t size, const std::string& sha,
                           ReleaseFileKind kind) -> fs::path {
      listed.insert(file);
      fs::path ap = detail::is_regular(ip.parent_path() / file) ? ip.parent_path() / file
                    : archives_found.count(file)        ? archives_found[file]
                                                        : fs::path();
      if (ap.empty()) {
        problems.push_back({ErrorKind::NotFound, file, "file",
                            ip.string() + " lists " + file + ", found in none of " + source_list});
        return ap;
      }
      detail::Digest d = detail::digest_of(ap);
      if (auto mm = io::pin_mismatch(d.size, d.sha256, io::ArtifactPin{size, sha}))
        problems.push_back(
            {ErrorKind::Integrity, ap.string(), mm->field, mm->message(ap.string(), ip.string())});
      cand[file] = {kind, ap, d};
      return ap;
    };
    for (const auto& e : idx.archives) {
      fs::path ap = pinned_file(e.file, e.size, e.sha256, ReleaseFileKind::Archive);
      if (ap.empty()) continue;
      auto inner = detail::check_archive_content(ap, e, idx, version, ip.string());
      problems.insert(problems.end(), inner.begin(), inner.end());
    }
    if (const auto& d = idx.description)
      pinned_file(d->file, d->size, d->sha256, ReleaseFileKind::Description);
    for (const auto& [name, p] : archives_found)
      if (!listed.count(name))
        log("skipping " + p.string() + ": " + index_name + " does not list it");
  }
  for (const auto& [name, c] : cand)
    if (is_wheel(c.kind))
      for (const auto& p : check_wheel(c.path))
        problems.push_back({ErrorKind::Integrity, c.path.string(), "RECORD", p});
  if (!problems.empty())
    throw Error(*store::most_severe(problems), "refusing to stage release " + version + " into " +
                                            opts.to.string() + ":" + detail::join_problems(problems));

  // The mirror as it is: what its checksum file lists stays listed if it still matches.
  std::error_code ec;
  fs::create_directories(opts.to, ec);
  if (ec || !fs::is_directory(opts.to, ec))
    throw Error(ErrorKind::Io, "cannot create the mirror directory " + opts.to.string() +
                                   (ec ? ": " + ec.message() : ""));
  io::FileLock lock = detail::lock_release_in_mirror(opts.to, package, version);
  const std::string sums_name = checksums_file_name(package, version);
  const fs::path sums_path = opts.to / sums_name;
  std::vector<ChecksumEntry> previous;
  std::string previous_text;
  if (detail::is_regular(sums_path)) {
    previous_text = detail::read_capped(sums_path, kMaxChecksumsBytes);
    try {
      previous = parse_checksums(previous_text, sums_path.string(), sums_name);
    } catch (const Error& e) {
      throw Error(e.kind(),
                  std::string(e.what()) + "\nFix or remove " + sums_path.string() +
                      " (`kiln mirror verify " + opts.to.string() + "` shows what the " +
                      "mirror holds) and stage again.",
                  e.fields());
    }
  }
  StageResult result;
  std::vector<ChecksumEntry> entries;
  std::set<std::string> unchanged;
  for (const auto& [name, c] : cand) {
    const fs::path dst = opts.to / name;
    if (fs::exists(dst, ec)) {
      detail::Digest have = detail::digest_of(dst);
      if (have.sha256 != c.digest.sha256) {
        problems.push_back({ErrorKind::Integrity, dst.string(), "sha256",
                            dst.string() + " exists with sha256 " + have.sha256 + "; " +
                                c.path.string() + " has " + c.digest.sha256 +
                                ": refusing to overwrite a published file (remove it first if the "
                                "new one is right)"});
        continue;
      }
      unchanged.insert(name);
    }
    entries.push_back({name, c.digest.sha256});
  }
  for (const auto& e : previous) {
    auto it = cand.find(e.name);
    if (it != cand.end()) {
      if (it->second.digest.sha256 != e.sha256)
        problems.push_back({ErrorKind::Integrity, e.name, "sha256",
                            sums_path.string() + " already lists " + e.name + " with sha256 " +
                                e.sha256 + "; " + it->second.path.string() + " has " +
                                it->second.digest.sha256 +
                                ": a published name never gets other bytes"});
      continue;
    }
    const fs::path p = opts.to / e.name;
    if (!detail::is_regular(p)) {
      problems.push_back({ErrorKind::NotFound, p.string(), "file",
                          sums_path.string() + " lists " + e.name + " (sha256 " + e.sha256 +
                              "), which is not in " + opts.to.string()});
      continue;
    }
    detail::Digest have = detail::digest_of(p);
    if (have.sha256 != e.sha256) {
      problems.push_back({ErrorKind::Integrity, p.string(), "sha256",
                          p.string() + ": sha256 is " + have.sha256 + ", " + sums_path.string() +
                              " lists " + e.sha256});
      continue;
    }
    entries.push_back(e);
    result.carried.push_back(e.name);
  }
  if (!cand.count(index_name) &&
      std::none_of(previous.begin(), previous.end(),
                   [&](const ChecksumEntry& e) { return e.name == index_name; }))
    problems.push_back({ErrorKind::NotFound, index_name, "file",
                        "no " + index_name + " in " + source_list + ", and " + opts.to.string() +
                            " holds none listed in " + sums_name +
                            ": stage the `kiln build --dist` directory of release " + version});
  if (!problems.empty())
    throw Error(*store::most_severe(problems), "refusing to stage release " + version + " into " +
                                            opts.to.string() + ":" + detail::join_problems(problems) +
                                            "\nNothing was copied.");

  std::vector<std::pair<std::string, const Candidate*>> order;
  for (const auto& [name, c] : cand) order.push_back({name, &c});
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return copy_order(a.second->kind) < copy_order(b.second->kind);
  });
  for (const auto& [name, c] : order) {
    if (unchanged.count(name)) {
      result.unchanged.push_back(name);
      log("unchanged " + name + " (same bytes already in " + opts.to.string() + ")");
      continue;
    }
    log("copying " + c->path.string() + " (" + std::to_string(c->digest.size) + " bytes)");
    copy_verified(c->path, opts.to / name, c->digest.sha256);
    result.copied.push_back(name);
  }
  // The pip index next, from the files now in place (simple_index.hpp); the checksum file last:
  // it vouches only for files already in place, and a release it lists has its pages.
  SimpleIndexResult index = write_simple_index(opts.to, FreshRelease{release, entries});
  for (const auto& p : index.written) log("wrote " + (opts.to / p).string());
  result.index_written = index.written;
  std::string text = checksums_to_text(entries);
  result.checksums_sha256 = io::sha256_hex(text);
  if (text != previous_text) {
    io::write_file_atomically(sums_path, text);
    log("wrote " + sums_path.string() + " (" + std::to_string(entries.size()) + " files)");
  } else {
    log("unchanged " + sums_path.string());
  }
  return result;
}

}  // namespace kiln::mirror
