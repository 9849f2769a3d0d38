// Publishing a release: one archive per target and the index pinning them, written into dist
// as a set (build.hpp: publish_release). `kiln build` and `kiln merge` both publish here.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "builder/build.hpp"
#include "builder/toolkit.hpp"
#include "builder/toolkit_merge.hpp"
#include "format/archive.hpp"
#include "io/atomic_file.hpp"
#include "io/file_lock.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "project/package.hpp"
#include "project/package_description.hpp"
#include "runtime/environment.hpp"

namespace kiln::builder {
namespace fs = std::filesystem;

namespace {

// True when `path` is an archive holding exactly `members` (names, order and bytes); the
// manifest among them pins build time, versions and digests, which fix the archive's bytes.
bool same_members(const fs::path& path, const std::vector<format::ArchiveMember>& members) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  try {
    auto old = format::read_archive(path);
    if (old.size() != members.size()) return false;
    for (size_t i = 0; i < old.size(); ++i)
      if (old[i].name != members[i].name || old[i].data != members[i].data) return false;
    return true;
  } catch (const Error&) {
    return false;  // unreadable or corrupt: rewrite it
  }
}

std::string archive_tmp_name(const std::string& final_name) {
  return "." + final_name + ".partial-" + std::to_string(::getpid());
}

// What a publish of `package` `version` killed mid-way left in the dist (crash points,
// tests/crash/): archives under their temporary names (archive_tmp_name, and write_archive's
// own temporary beside each) and the index's and description's AtomicFile temporaries. Only
// while holding the dist's lock, which every publisher holds.
void remove_killed_publish_leftovers(const fs::path& dist, const std::string& package,
                                     const std::string& version) {
  auto of_release = [&](std::string_view file) {
    return format::names_release_file(file, package, version);
  };
  io::remove_orphaned_temps_if(dist, of_release);
  std::error_code ec;
  for (fs::directory_iterator it(dist, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 1 && name[0] == '.' && of_release(std::string_view(name).substr(1)) &&
        name.find(".partial-") != std::string::npos) {
      std::error_code rm;
      fs::remove(it->path(), rm);
    }
  }
}

}  // namespace

PackageIdentity package_identity(const project::Project& project) {
  format::Provenance prov;
  prov.kiln_version = kiln::version();
  prov.hosts = {host_name()};
  if (auto git = find_on_path("git", runtime::read_environment().path)) {
    const std::string root = project.root.string();
    ProcessResult head = run_process({*git, "-C", root, "rev-parse", "HEAD"});
    if (head.exit_code == 0) {
      prov.source_commit = head.output;
      while (!prov.source_commit.empty() &&
             (prov.source_commit.back() == '\n' || prov.source_commit.back() == '\r'))
        prov.source_commit.pop_back();
      ProcessResult status =
          run_process({*git, "-C", root, "status", "--porcelain", "--untracked-files=no"});
      if (status.exit_code == 0) prov.source_dirty = !status.output.empty();
    }
  }
  std::string commit = prov.source_commit;
  std::error_code ec;
  fs::path kiln_tree = fs::weakly_canonical(KILN_SOURCE_DIR, ec);
  if (!ec && fs::weakly_canonical(project.root, ec) == kiln_tree && !ec) commit = kiln::git_commit();
  project::PackageData data(project);
  return {project.name, project.version, commit, kiln::cuda_version(),
          project::package_description_json(*data.get()), std::move(prov)};
}

std::string host_name() {
  struct utsname u {};
  if (::uname(&u) != 0) return "unknown-linux";
  std::string out = std::string(u.machine) + "-" + u.sysname;
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

format::Provenance build_provenance(const PackageIdentity& id, const std::string& nvcc_full_version,
                                    std::int64_t build_time, const std::string& build_time_origin,
                                    const std::vector<format::Target>& targets) {
  format::Provenance p = id.provenance;
  p.toolkits = {{"nvcc", nvcc_full_version}};
  p.build_time = build_time;
  p.build_time_origin = build_time_origin;
  p.targets.clear();
  for (const auto& t : targets) p.targets.push_back(t.str());
  return p;
}

std::vector<PublishedArchive> publish_release(
    const PackageIdentity& id, std::size_t archives,
    const std::function<ArchiveContent(std::size_t)>& content, std::int64_t build_time,
    const std::string& dist_dir_in, std::string* index_path, std::vector<std::string>* dropped) {
  fs::path dist_dir = fs::absolute(dist_dir_in).lexically_normal();
  // Archives are assembled under temporary names and renamed only after all of them are
  // written, so a failure leaves the previous dist as it was.
  std::error_code ec;
  // A failure leaves no dist directory it did not find (a bad compile result is found only
  // when its archive's turn comes).
  const bool created = !fs::exists(dist_dir, ec);
  fs::create_directories(dist_dir, ec);
  if (ec) throw Error(ErrorKind::Io, "cannot create " + dist_dir.string() + ": " + ec.message());
  // One publisher at a time per dist (flock on the directory: nothing is added to it).
  io::FileLock lock = io::FileLock::acquire_directory(dist_dir, std::chrono::minutes(10));
  // Not held where the filesystem cannot lock a directory: then nothing is removed.
  if (lock.held()) remove_killed_publish_leftovers(dist_dir, id.name, id.version);
  std::vector<std::pair<fs::path, fs::path>> pending;  // temp -> final
  std::vector<PublishedArchive> out;
  format::Index index;
  index.package = id.name;
  index.package_version = id.version;
  index.git_commit = id.git_commit;
  index.provenance = id.provenance;
  // The other toolkits' archives of this release that the index in dist lists stay listed
  // (toolkit_merge.hpp); this publish's toolkit replaces its own.
  KeptToolkits kept = kept_toolkits(dist_dir, id, id.cuda_version);
  if (dropped) *dropped = kept.dropped;
  if (!kept.archives.empty()) {
    index.archives = kept.archives;
    index.provenance = merged_provenance(id.provenance, kept);
  }
  try {
    for (std::size_t a = 0; a < archives; ++a) {
      ArchiveContent c = content(a);
      const format::Manifest& m = c.manifest;
      std::vector<format::ArchiveMember> files;
      files.reserve(m.artifacts.size() + 1);
      for (size_t i = 0; i < m.artifacts.size(); ++i)
        files.push_back({m.artifacts[i].file, std::move(c.bytes.at(i))});
      std::sort(files.begin(), files.end(),
                [](const format::ArchiveMember& x, const format::ArchiveMember& y) { return x.name < y.name; });
      files.insert(files.begin(), format::ArchiveMember{"manifest.json", format::manifest_to_json(m)});
      std::string name = format::archive_file_name(id.name, id.version, id.cuda_version, m.target);
      PublishedArchive pa;
      pa.path = (dist_dir / name).string();
      auto target = format::parse_target(m.target);
      if (!target)
        throw Error(ErrorKind::Format,
                    "manifest of " + name + ": target '" + m.target + "' is not a target name");
      pa.target = *target;
      if (same_members(dist_dir / name, files)) {
        // zstd -19 dominates a no-op rebuild; the same members give the same bytes anyway.
        pa.sha256 = io::sha256_file(dist_dir / name, &pa.size);
      } else {
        fs::path tmp = dist_dir / archive_tmp_name(name);
        pending.emplace_back(tmp, dist_dir / name);
        format::write_archive(tmp, files, build_time);
        pa.sha256 = io::sha256_file(tmp, &pa.size);
      }
      pa.artifacts = m.artifacts.size();
      pa.skipped = m.skipped;
      index.archives.push_back({name, m.target, id.cuda_version, pa.size, pa.sha256});
      out.push_back(std::move(pa));
    }
    for (const auto& [tmp, fin] : pending) {
      fs::rename(tmp, fin, ec);
      if (ec)
        throw Error(ErrorKind::Io,
                    "cannot rename " + tmp.string() + " to " + fin.string() + ": " + ec.message());
    }
    pending.clear();
    if (!id.description_json.empty()) {
      std::string name = format::description_file_name(id.name, id.version);
      io::write_file_atomically(dist_dir / name, id.description_json);
      index.description =
          format::IndexFile{name, id.description_json.size(), io::sha256_hex(id.description_json)};
    }
    fs::path idx = dist_dir / format::index_file_name(id.name, id.version);
    io::write_file_atomically(idx, format::index_to_json(index));
    if (index_path) *index_path = idx.string();
  } catch (...) {
    for (const auto& p : pending) fs::remove(p.first, ec);
    if (created) fs::remove(dist_dir, ec);  // only when empty
    throw;
  }
  return out;
}

}  // namespace kiln::builder
