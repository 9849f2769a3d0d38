#include "release/tarball.hpp"

#include "kiln/kernels.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "format/libarchive_handles.hpp"
#include "io/atomic_file.hpp"
#include "io/file_lock.hpp"
#include "io/scratch_dir.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "release/loader_facts.hpp"
#include "release/tree_platform.hpp"
#include "store/store.hpp"
#include "util/join.hpp"

namespace kiln::release {

namespace fs = std::filesystem;

namespace {

// One entry of the install tree, keyed by its path below the top directory.
struct TreeEntry {
  enum class Type { Dir, File, Link } type = Type::File;
  fs::path source;          // File: where the bytes come from
  std::string link_target;  // Link: a plain file name in the same directory
  bool executable = false;
};

using Tree = std::map<std::string, TreeEntry>;

void add_parents(Tree& tree, const std::string& rel) {
  for (fs::path p = fs::path(rel).parent_path(); !p.empty(); p = p.parent_path())
    tree.emplace(p.string(), TreeEntry{TreeEntry::Type::Dir, {}, {}, true});
}

void add_file(Tree& tree, const std::string& rel, const fs::path& source) {
  std::error_code ec;
  auto st = fs::symlink_status(source, ec);
  if (ec) throw Error(ErrorKind::Io, "cannot read " + source.string() + ": " + ec.message());
  TreeEntry e;
  if (fs::is_symlink(st)) {
    fs::path target = fs::read_symlink(source, ec);
    if (ec || target.has_parent_path() || target.empty() || target == "." || target == "..")
      throw Error(ErrorKind::Format,
                  source.string() + " is a link to '" + target.string() +
                      "': only links to a file in the same directory are packed");
    e.type = TreeEntry::Type::Link;
    e.link_target = target.string();
  } else if (fs::is_regular_file(st)) {
    e.source = source;
    e.executable = (st.permissions() & fs::perms::owner_exec) != fs::perms::none;
  } else {
    throw Error(ErrorKind::Format,
                source.string() + " is neither a regular file nor a link: not packed");
  }
  add_parents(tree, rel);
  tree[rel] = e;
}

void add_dir_recursive(Tree& tree, const std::string& rel, const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> children;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    children.push_back(it->path());
  if (ec) throw Error(ErrorKind::Io, "cannot list " + dir.string() + ": " + ec.message());
  tree.emplace(rel, TreeEntry{TreeEntry::Type::Dir, {}, {}, true});
  add_parents(tree, rel);
  for (const auto& c : children) {
    std::string child_rel = rel + "/" + c.filename().string();
    if (fs::is_directory(fs::symlink_status(c, ec)))
      add_dir_recursive(tree, child_rel, c);
    else
      add_file(tree, child_rel, c);
  }
}

// The kiln install tree under `prefix`: exactly the parts a consumer needs. Every missing part
// is named in one error.
void add_install_tree(Tree& tree, const fs::path& prefix) {
  std::vector<std::string> missing;
  std::error_code ec;
  fs::path exe = prefix / "bin" / "kiln";
  if (!fs::is_regular_file(exe, ec)) missing.push_back(exe.string());
  // libkiln and the reference package's library (its description: kiln_kernels_package()).
  std::vector<fs::path> libs;
  bool kernels_lib = false;
  for (auto it = fs::directory_iterator(prefix / "lib", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("libkiln.so", 0) == 0) libs.push_back(it->path());
    if (name.rfind("libkiln-kernels.so", 0) == 0) {
      libs.push_back(it->path());
      kernels_lib = true;
    }
  }
  if (libs.empty()) missing.push_back((prefix / "lib" / "libkiln.so*").string());
  if (!kernels_lib) missing.push_back((prefix / "lib" / "libkiln-kernels.so*").string());
  fs::path header = prefix / "include" / "kiln" / "kiln.h";
  if (!fs::is_regular_file(header, ec)) missing.push_back(header.string());
  fs::path config = prefix / "lib" / "cmake" / "kiln" / "kilnConfig.cmake";
  if (!fs::is_regular_file(config, ec)) missing.push_back(config.string());
  fs::path pc = prefix / "lib" / "pkgconfig" / "kiln.pc";
  if (!fs::is_regular_file(pc, ec)) missing.push_back(pc.string());
  fs::path readme = prefix / "share" / "doc" / "kiln" / "README.md";
  if (!fs::is_regular_file(readme, ec)) missing.push_back(readme.string());
  if (!missing.empty()) {
    std::string msg = prefix.string() + " is not a complete kiln install tree; missing:";
    for (const auto& m : missing) msg += "\n  " + m;
    msg +=
        "\nMake one with `cmake --install BUILD_DIR --prefix DIR` (a shared-library build) and "
        "pass --prefix DIR.";
    throw Error(ErrorKind::NotFound, msg);
  }
  add_file(tree, "bin/kiln", exe);
  for (const auto& l : libs) add_file(tree, "lib/" + l.filename().string(), l);
  add_dir_recursive(tree, "include/kiln", prefix / "include" / "kiln");
  add_dir_recursive(tree, "lib/cmake/kiln", prefix / "lib" / "cmake" / "kiln");
  add_file(tree, "lib/pkgconfig/kiln.pc", pc);
  add_file(tree, "share/doc/kiln/README.md", readme);
}

std::string problems_text(const std::vector<store::VerifyProblem>& problems) {
  std::string s;
  for (const auto& p : problems) s += "\n  " + p.message;
  return s;
}

}  // namespace

std::string host_platform() {
#if defined(__x86_64__)
  return "linux-x86_64";
#elif defined(__aarch64__)
  return "linux-aarch64";
#else
  return "linux-unknown";
#endif
}

bool is_kiln_tarball_name(const std::string& name) {
  const std::string suffix = ".tar.zst";
  return name.size() > 5 + suffix.size() && name.compare(0, 5, "kiln-") == 0 && name[5] >= '0' &&
         name[5] <= '9' && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string tarball_file_name(const std::string& version, const std::string& cuda,
                              const std::string& platform) {
  return "kiln-" + version + "-cuda" + cuda + "-" + platform + ".tar.zst";
}

std::optional<fs::path> running_install_prefix() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.parent_path().filename() != "bin") return std::nullopt;
  fs::path prefix = exe.parent_path().parent_path();
  if (!fs::is_regular_file(prefix / "lib" / "cmake" / "kiln" / "kilnConfig.cmake", ec))
    return std::nullopt;
  return prefix;
}

fs::path tarball_prefix(const std::string& flag, const std::optional<fs::path>& running) {
  if (!flag.empty()) return flag;
  if (running) return *running;
  throw Error(ErrorKind::Usage,
              "this kiln runs from a build directory, not an install tree: run `cmake "
              "--install BUILD_DIR --prefix DIR` and pass --prefix DIR (or run DIR/bin/kiln)");
}

TarballResult build_tarball(const TarballOptions& opts) {
  auto say = [&](const std::string& s) {
    if (opts.progress) opts.progress(s);
  };
  const std::string version = opts.version.empty() ? kiln::version() : opts.version;
  // A tarball is kiln's own install tree: the tool, libkiln and the reference package, with the
  // reference package's stores.
  fs::path index_path = opts.dist / format::index_file_name(KILN_KERNELS_PACKAGE_NAME, version);
  std::error_code ec;
  if (!fs::is_regular_file(index_path, ec))
    throw Error(ErrorKind::NotFound,
                "no release index " + index_path.filename().string() + " in " + opts.dist.string() +
                    " (run `kiln build --dist " + opts.dist.string() +
                    "` first, or pass the --dist that holds kiln " + version + ")");

  // 1. Everything packed is verified first: the index, each archive it pins, their manifests.
  say("verifying " + index_path.string());
  format::Index index;
  auto problems = store::verify_index_file(index_path, version, &index);
  if (!problems.empty())
    throw Error(*store::most_severe(problems),
                index_path.string() + " did not verify:" + problems_text(problems));

  std::vector<const format::IndexEntry*> chosen;
  if (opts.targets.empty()) {
    for (const auto& a : index.archives) chosen.push_back(&a);
  } else {
    std::set<std::string> seen;
    for (const auto& t : opts.targets) {
      if (!seen.insert(t).second) continue;
      auto it = std::find_if(index.archives.begin(), index.archives.end(),
                             [&](const format::IndexEntry& a) { return a.target == t; });
      if (it == index.archives.end()) {
        std::string have =
            util::join(index.archives, ", ", [](const format::IndexEntry& a) { return a.target; });
        throw Error(ErrorKind::NotFound, "target " + t + " is not in " + index_path.string() +
                                             " (it has: " + have + ")");
      }
      chosen.push_back(&*it);
    }
  }
  if (chosen.empty()) throw Error(ErrorKind::NotFound, index_path.string() + " lists no archive");

  // 2. The install tree, and the libkiln in it must be the one these stores are for.
  if (opts.prefix.empty()) throw Error(ErrorKind::Usage, "no install prefix given");
  Tree tree;
  add_install_tree(tree, opts.prefix);
  fs::path lib;
  for (const auto& [rel, e] : tree)
    if (rel.rfind("lib/libkiln.so", 0) == 0 && e.type == TreeEntry::Type::File) lib = e.source;
  // The tarball is named for the host its binaries run on, read from their ELF headers: a tree
  // cross-built for aarch64 on an x86_64 machine is packed there as linux-aarch64.
  const std::string platform = elf_platform(lib);
  for (const auto& [rel, e] : tree)
    if (e.type == TreeEntry::Type::File &&
        (rel == "bin/kiln" || rel.rfind("lib/libkiln-kernels.so", 0) == 0))
      if (std::string p = elf_platform(e.source); p != platform)
        throw Error(ErrorKind::Format, e.source.string() + " is built for " + p + ", but " +
                                           lib.string() + " for " + platform +
                                           ": one install tree is built for one host");
  LoaderFacts facts;
  if (platform == host_platform()) {
    facts = open_loader_facts(lib);
  } else {
    // It cannot be loaded on this host: its version and CUDA version are read from the tree.
    facts = unloaded_loader_facts(opts.prefix, lib);
    say(lib.string() + " is built for " + platform + ", not this " + host_platform() +
        " host: kiln " + facts.version + " (its file name), CUDA " + facts.cuda_version +
        " (lib/cmake/kiln/kilnConfig.cmake), read without loading it");
  }
  // The archives' toolkits need not be libkiln's: the loader weighs each against the node's
  // driver (docs/compatibility.md). The tarball is named by libkiln's.
  if (facts.version != index.package_version)
    throw Error(ErrorKind::Stale, facts.library + " is kiln " + facts.version + ", but " +
                                      index_path.string() + " is kiln " + index.package_version +
                                      ": a tarball ships a libkiln that accepts its stores");

  fs::create_directories(opts.out, ec);
  if (ec) throw Error(ErrorKind::Io, "cannot create " + opts.out.string() + ": " + ec.message());
  // One tarball writer per directory; it removes what a killed writer left: its scratch
  // directories and the AtomicFile temporary of the tarball.
  const std::string file_name = tarball_file_name(version, facts.cuda_version, platform);
  io::FileLock out_lock = io::FileLock::acquire_directory(opts.out, std::chrono::seconds(60));
  if (out_lock.held()) {
    for (const auto& e : fs::directory_iterator(opts.out, ec))
      if (e.path().filename().string().rfind(".kiln-tarball-", 0) == 0) {
        std::error_code gone;
        fs::remove_all(e.path(), gone);
      }
    io::remove_orphaned_temps(opts.out, file_name);
  }
  io::ScratchDir scratch(opts.out, ".kiln-tarball-");
  std::int64_t newest = 0;
  TarballResult res;
  for (const format::IndexEntry* a : chosen) {
    say("unpacking " + a->file);
    store::InstallResult ir = store::install_archive(opts.dist / a->file, scratch.path(), a->sha256,
                                       store::RequiredRelease{KILN_KERNELS_PACKAGE_NAME, version});
    newest = std::max(newest, ir.manifest.build_time);
    add_dir_recursive(tree, "share/kiln/artifacts/" + ir.directory.filename().string(),
                      ir.directory);
    res.targets.push_back(a->target);
  }
  // The package's description beside the stores (pinned by the index, checked above): what
  // `kiln resolve` and `compat` read on a node that has the tarball and no source tree.
  if (index.description)
    add_file(tree, "share/kiln/artifacts/" + index.description->file,
             opts.dist / index.description->file);
  const std::int64_t mtime = opts.mtime.value_or(newest);

  // 3. Pack: sorted paths under one top directory, fixed metadata.
  const std::string top = "kiln-" + version + "-cuda" + facts.cuda_version + "-" + platform;
  res.file = opts.out / file_name;
  say("packing " + std::to_string(tree.size()) + " entries into " + res.file.string());
  io::AtomicFile out(res.file);
  format::ArchiveWriter a(archive_write_new());
  if (!a) throw Error(ErrorKind::Internal, "libarchive: archive_write_new failed");
  // What the file said when a write failed (the path's temporary and the system's words):
  // libarchive itself only knows "Write error".
  struct Sink {
    io::AtomicFile* file;
    std::string failure;
  } sink{&out, {}};
  auto check = [&](int r, const std::string& what) {
    if (r != ARCHIVE_OK)
      throw Error(ErrorKind::Io, "cannot write " + res.file.string() + ": " + what + ": " +
                                     (sink.failure.empty() ? format::la_error(a.get()) : sink.failure));
  };
  check(archive_write_set_format_pax_restricted(a.get()), "set tar format");
  check(archive_write_add_filter_zstd(a.get()), "add zstd filter");
  check(archive_write_set_filter_option(a.get(), "zstd", "compression-level", "19"),
        "set zstd level");
  auto write_cb = [](struct archive*, void* client, const void* buf, size_t n) -> la_ssize_t {
    auto* to = static_cast<Sink*>(client);
    try {
      to->file->write(std::string_view(static_cast<const char*>(buf), n));
      return static_cast<la_ssize_t>(n);
    } catch (const std::exception& e) {
      to->failure = e.what();
      return -1;
    }
  };
  // No padding of the last block: a zstd stream followed by zero bytes is refused by `zstd -d`.
  check(archive_write_set_bytes_in_last_block(a.get(), 1), "set last block size");
  // archive_write_open, not open2 (libarchive 3.6): the tarball's kiln runs with the libarchive of
  // a glibc 2.28 host (RHEL 8: 3.3, Debian 11: 3.4).
  check(archive_write_open(a.get(), &sink, nullptr, write_cb, nullptr), "open");

  std::vector<std::string> members{top};
  for (const auto& [rel, e] : tree) members.push_back(top + "/" + rel);
  std::vector<char> buf(1 << 20);
  for (const auto& name : members) {
    const TreeEntry dir_entry{TreeEntry::Type::Dir, {}, {}, true};
    const TreeEntry& e = name == top ? dir_entry : tree.at(name.substr(top.size() + 1));
    std::unique_ptr<archive_entry, format::EntryFree> ent(archive_entry_new());
    if (!ent) throw Error(ErrorKind::Internal, "libarchive: archive_entry_new failed");
    archive_entry_set_pathname(ent.get(), name.c_str());
    archive_entry_set_mtime(ent.get(), static_cast<time_t>(mtime), 0);
    archive_entry_set_uid(ent.get(), 0);
    archive_entry_set_gid(ent.get(), 0);
    archive_entry_set_uname(ent.get(), "root");
    archive_entry_set_gname(ent.get(), "root");
    std::uintmax_t size = 0;
    switch (e.type) {
      case TreeEntry::Type::Dir:
        archive_entry_set_filetype(ent.get(), AE_IFDIR);
        archive_entry_set_perm(ent.get(), 0755);
        break;
      case TreeEntry::Type::Link:
        archive_entry_set_filetype(ent.get(), AE_IFLNK);
        archive_entry_set_perm(ent.get(), 0777);
        archive_entry_set_symlink(ent.get(), e.link_target.c_str());
        break;
      case TreeEntry::Type::File:
        size = fs::file_size(e.source, ec);
        if (ec)
          throw Error(ErrorKind::Io, "cannot read " + e.source.string() + ": " + ec.message());
        archive_entry_set_filetype(ent.get(), AE_IFREG);
        archive_entry_set_perm(ent.get(), e.executable ? 0755 : 0644);
        archive_entry_set_size(ent.get(), static_cast<la_int64_t>(size));
        break;
    }
    check(archive_write_header(a.get(), ent.get()), "header of " + name);
    if (e.type == TreeEntry::Type::File) {
      std::ifstream in(e.source, std::ios::binary);
      if (!in) throw Error(ErrorKind::Io, "cannot open " + e.source.string());
      std::uintmax_t left = size;
      while (left > 0) {
        auto want = static_cast<std::streamsize>(std::min<std::uintmax_t>(left, buf.size()));
        in.read(buf.data(), want);
        if (in.gcount() != want)
          throw Error(ErrorKind::Io, e.source.string() + " changed size while being packed");
        la_ssize_t n = archive_write_data(a.get(), buf.data(), static_cast<size_t>(want));
        if (n != want) check(ARCHIVE_FATAL, "data of " + name);
        left -= static_cast<std::uintmax_t>(want);
      }
    }
    check(archive_write_finish_entry(a.get()), "end of " + name);
  }
  check(archive_write_close(a.get()), "close");
  a.reset();
  out.commit();
  res.entries = members.size();
  res.sha256 = io::sha256_file(res.file, &res.size);
  return res;
}

std::vector<format::Manifest> tarball_manifests(const fs::path& tarball) {
  format::ArchiveReader a(archive_read_new());
  if (!a) throw Error(ErrorKind::Internal, "libarchive: archive_read_new failed");
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_zstd(a.get());
  if (archive_read_open_filename(a.get(), tarball.c_str(), 1 << 16) != ARCHIVE_OK)
    throw Error(ErrorKind::Format,
                "cannot read " + tarball.string() + " as a tarball: " + format::la_error(a.get()));
  std::vector<format::Manifest> out;
  bool saw_libkiln = false;
  archive_entry* e = nullptr;
  int r;
  while ((r = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK) {
    std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    if (name.find("/lib/libkiln.so") != std::string::npos) saw_libkiln = true;
    // <top>/share/kiln/artifacts/<stem>/manifest.json
    fs::path p(name);
    auto it = p.begin();
    std::vector<std::string> parts;
    for (; it != p.end(); ++it) parts.push_back(it->string());
    bool is_manifest = parts.size() == 6 && parts[1] == "share" && parts[2] == "kiln" &&
                       parts[3] == "artifacts" && parts[5] == "manifest.json" &&
                       archive_entry_filetype(e) == AE_IFREG;
    if (!is_manifest) continue;
    if (archive_entry_size(e) > (16 << 20))
      throw Error(ErrorKind::Format, tarball.string() + ": " + name + " is implausibly large");
    std::string text(static_cast<size_t>(archive_entry_size(e)), '\0');
    if (archive_read_data(a.get(), text.data(), text.size()) !=
        static_cast<la_ssize_t>(text.size()))
      throw Error(ErrorKind::Format,
                  "cannot read " + name + " in " + tarball.string() + ": " + format::la_error(a.get()));
    out.push_back(format::parse_manifest(text, tarball.string() + ":" + name));
  }
  if (r != ARCHIVE_EOF)
    throw Error(ErrorKind::Format,
                "cannot read " + tarball.string() + " as a tarball: " + format::la_error(a.get()));
  if (!saw_libkiln)
    throw Error(ErrorKind::Format, tarball.string() + " is not a kiln tarball (no lib/libkiln.so)");
  return out;
}

}  // namespace kiln::release
