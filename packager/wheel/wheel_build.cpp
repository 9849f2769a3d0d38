// `kiln wheel`'s orchestration: find the index in dist, choose the targets' archives, check
// each against the index and its manifest, and write one wheel per target (wheel.hpp:
// build_wheels).
#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "format/manifest.hpp"
#include "format/target.hpp"
#include "io/artifact_check.hpp"
#include "io/atomic_file.hpp"
#include "io/file_lock.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "project/package_description.hpp"
#include "store/index_entry_check.hpp"
#include "store/store.hpp"
#include "store/store_scan.hpp"
#include "util/join.hpp"
#include "wheel/wheel.hpp"

namespace kiln::wheel {
namespace fs = std::filesystem;

namespace {

fs::path find_index(const fs::path& dist) {
  std::error_code ec;
  if (!fs::is_directory(dist, ec))
    throw Error(ErrorKind::NotFound, "dist directory not found: " + dist.string() +
                                         " (kiln build --dist DIR writes one)");
  std::vector<fs::path> found;
  for (fs::directory_iterator it(dist, ec), end; !ec && it != end; it.increment(ec)) {
    if (format::release_of_file_name(it->path().filename().string(), "-index.json"))
      found.push_back(it->path());
  }
  if (ec) throw Error(ErrorKind::Io, "cannot list " + dist.string() + ": " + ec.message());
  std::sort(found.begin(), found.end());
  if (found.empty())
    throw Error(ErrorKind::NotFound, "no <package>-<version>-index.json in " + dist.string() +
                                         " (kiln build --dist DIR writes one)");
  if (found.size() > 1) {
    std::string names =
        util::join(found, ", ", [](const fs::path& f) { return f.filename().string(); });
    throw Error(ErrorKind::Usage, dist.string() + " holds the indexes of several releases (" +
                                      names + "); give --dist a directory with one");
  }
  return found.front();
}

std::vector<format::IndexEntry> choose_archives(const format::Index& idx, const std::vector<std::string>& wanted,
                                        const std::string& index_name) {
  std::string listed = util::join(idx.archives, ", ", [](const format::IndexEntry& a) { return a.target; });
  if (idx.archives.empty()) throw Error(ErrorKind::NotFound, index_name + " lists no archives");
  if (wanted.empty()) return idx.archives;
  std::vector<format::IndexEntry> chosen;
  std::vector<std::string> missing;
  for (const auto& w : wanted) {
    auto t = format::parse_target(w);
    if (!t)
      throw Error(ErrorKind::Usage, "--targets: '" + w +
                                        "' is not a target: expected sm_<arch>[a|f] or "
                                        "compute_<arch>[a|f], e.g. sm_90a or compute_80");
    std::string name = t->str();
    auto it = std::find_if(idx.archives.begin(), idx.archives.end(),
                           [&](const format::IndexEntry& e) { return e.target == name; });
    if (it == idx.archives.end()) {
      if (std::find(missing.begin(), missing.end(), name) == missing.end()) missing.push_back(name);
      continue;
    }
    bool dup = std::any_of(chosen.begin(), chosen.end(),
                           [&](const format::IndexEntry& e) { return e.target == name; });
    if (!dup) chosen.push_back(*it);
  }
  if (!missing.empty()) {
    std::string names = util::join(missing, ", ");
    throw Error(ErrorKind::NotFound, "target" + std::string(missing.size() > 1 ? "s " : " ") +
                                         names + " not in " + index_name + ", which lists " +
                                         listed);
  }
  return chosen;
}

std::string join_problems(const std::vector<store::VerifyProblem>& problems) {
  std::string s;
  for (const auto& p : problems) s += (s.empty() ? "" : "\n  ") + p.message;
  return s;
}

// What was written is checked as a user would check it before anyone else sees it.
void check_written(const fs::path& whl) {
  auto wheel_problems = verify_wheel(whl);
  if (wheel_problems.empty()) return;
  std::error_code ec;
  fs::remove(whl, ec);
  throw Error(ErrorKind::Internal, whl.string() +
                                       " failed its own check: " + wheel_problems.front().file +
                                       ": " + wheel_problems.front().what);
}

BuiltWheel build_one(const fs::path& index_path, const format::Index& idx, const format::IndexEntry& entry,
                     const BuildOptions& options) {
  const fs::path archive = index_path.parent_path() / entry.file;
  const std::string as = archive.string();
  const std::string ip = index_path.string();
  // Read once; every check below and the wheel itself use these very bytes.
  std::string bytes = io::read_whole_file(archive);
  if (auto mm = io::pin_mismatch(bytes, io::ArtifactPin{entry.size, entry.sha256}))
    throw Error(ErrorKind::Integrity, mm->message(as, ip));
  auto members = format::read_archive_bytes(bytes, as);
  bytes.clear();
  bytes.shrink_to_fit();
  format::Manifest m;
  auto problems = store::verify_archive_members(members, as, &m);
  if (!problems.empty())
    throw Error(*store::most_severe(problems),
                "refusing to make a wheel of " + as + ":\n  " + join_problems(problems));
  // The one manifest-against-index rule (index_entry_check.hpp): another target's bytes are
  // integrity, another release's are stale, as kiln verify, install and compat say.
  store::require_manifest_matches_index(m, entry, idx, as, ip, "make a wheel of");

  // The package's description, pinned by the index, goes into the wheel's store beside the
  // archive: a node that pip-installed the wheel has what `kiln resolve` and `compat` read.
  std::vector<format::ArchiveMember> beside;
  if (const auto& d = idx.description) {
    fs::path dp = index_path.parent_path() / d->file;
    std::string text = io::read_whole_file(dp, io::limits::kMaxJsonBytes);
    if (auto mm = io::pin_mismatch(text, io::ArtifactPin{d->size, d->sha256}))
      throw Error(ErrorKind::Integrity, mm->message(dp.string(), ip));
    beside.push_back({d->file, std::move(text)});
  }
  auto files = wheel_contents(m, members, kiln::version(), beside);
  members.clear();
  const fs::path whl =
      options.out / wheel_file_name(m.package, m.package_version, m.cuda_version, m.target);
  std::string written = write_zip(whl, files, options.source_date_epoch.value_or(m.build_time));
  check_written(whl);
  return BuiltWheel{m.target, whl, written.size(), io::sha256_hex(written)};
}

// The package's own wheel from the description the index pins: its bytes checked against the pin
// and read strictly (project/package_description.hpp), its package and version the index's.
BuiltWheel build_package_wheel(const fs::path& index_path, const format::Index& idx,
                               const BuildOptions& options) {
  const std::string ip = index_path.string();
  if (!idx.description)
    throw Error(ErrorKind::NotFound,
                ip + " pins no package description (index format 3 does; kiln build writes it), "
                     "so there is nothing to make the package's own wheel of");
  // The distribution is the package's name; no package is named "kiln" (is_package_name), the
  // runtime's distribution.
  const auto& d = *idx.description;
  const fs::path dp = index_path.parent_path() / d.file;
  std::string text = io::read_whole_file(dp, io::limits::kMaxJsonBytes);
  if (auto mm = io::pin_mismatch(text, io::ArtifactPin{d.size, d.sha256}))
    throw Error(ErrorKind::Integrity, mm->message(dp.string(), ip));
  auto described = project::read_package_description(text, dp.string());
  const std::string name = described->get()->name, version = described->get()->version;
  if (name != idx.package || version != idx.package_version)
    throw Error(ErrorKind::Stale, dp.string() + " describes " + name + " " + version +
                                      ", the index " + ip + " is of " + idx.package + " " +
                                      idx.package_version);
  // An extra for every target of the release, whichever are built now: the same bytes for any
  // --targets.
  std::vector<std::string> targets;
  for (const auto& a : idx.archives)
    targets.push_back(distribution_name(idx.package, a.cuda_version, a.target));
  auto files = package_wheel_contents(idx.package, idx.package_version, {d.file, std::move(text)},
                                      kiln::version(), targets, options.require_every_target);
  const fs::path whl = options.out / package_wheel_file_name(idx.package, idx.package_version);
  // Nothing in the description dates it: without SOURCE_DATE_EPOCH the earliest zip time, so
  // that its bytes depend on the description alone (not on the targets chosen).
  std::string written = write_zip(whl, files, options.source_date_epoch.value_or(kZipEpochMin));
  check_written(whl);
  return BuiltWheel{"", whl, written.size(), io::sha256_hex(written)};
}

}  // namespace

BuildResult build_wheels(const BuildOptions& options,
                         const std::function<void(const BuiltWheel&)>& on_wheel) {
  const fs::path index_path = find_index(options.dist);
  const format::Index idx = format::parse_index(io::read_whole_file(index_path), index_path.string());
  const auto chosen = choose_archives(idx, options.targets, index_path.string());
  std::error_code ec;
  fs::create_directories(options.out, ec);
  if (ec || !fs::is_directory(options.out))
    throw Error(ErrorKind::Io, "cannot create output directory " + options.out.string() +
                                   (ec ? ": " + ec.message() : ""));
  // One wheel writer per directory; it removes the wheels' temporaries a dead writer left.
  io::FileLock lock = io::FileLock::acquire_directory(options.out, std::chrono::seconds(60));
  io::remove_orphaned_temps_if(options.out, [](std::string_view file) {
    return file.size() > 4 && file.substr(file.size() - 4) == ".whl";
  });
  BuildResult result;
  try {
    result.wheels.push_back(build_package_wheel(index_path, idx, options));
    if (on_wheel) on_wheel(result.wheels.back());
  } catch (const Error& e) {
    result.failed.push_back({"", e.kind(), e.what()});
  }
  for (const auto& entry : chosen) {
    try {
      result.wheels.push_back(build_one(index_path, idx, entry, options));
      if (on_wheel) on_wheel(result.wheels.back());
    } catch (const Error& e) {
      result.failed.push_back({entry.target, e.kind(), e.what()});
    }
  }
  return result;
}

std::optional<ErrorKind> BuildResult::worst() const {
  // Among failures of equal severity, the last one's kind.
  std::vector<store::VerifyProblem> kinds;
  for (auto f = failed.rbegin(); f != failed.rend(); ++f) kinds.push_back({f->kind, "", "", ""});
  return store::most_severe(kinds);
}

int BuildResult::exit_code() const {
  auto w = worst();
  return w ? kiln::exit_code(*w) : 0;
}

}  // namespace kiln::wheel
