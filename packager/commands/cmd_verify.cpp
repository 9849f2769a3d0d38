// `kiln verify PATH`: checks an archive, an index with the archives beside it, or an unpacked
// store, reports every problem (not only the first) and exits with the code of the worst.
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "commands/commands.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "project/package_description.hpp"
#include "store/store.hpp"

namespace kiln::cli {

void add_verify_command(CLI::App& app, int& rc);

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct Checked {
  std::vector<std::string> items;  // what was looked at, for the report
  std::vector<VerifyProblem> problems;
};

// The release inputs are judged as: named (--source, --package [--version]; an empty version:
// any), every input then of it; or the project here, a default only for inputs of its own
// package; or none: each input is judged by what it names itself, a store by the descriptions
// beside it.
struct Judging {
  std::optional<ChosenPackage> release;
  bool by_default = false;  // the project here, not named on the command line
  // Whether an input of `package` is judged as the release (else as what it names itself).
  bool covers(const std::string& package) const {
    return release && (!by_default || package == release->name);
  }
  // The version verify_*_file checks for every input: only a release named for all.
  std::string version_for_all() const {
    return release && !by_default ? release->version : std::string();
  }
};

Judging judging(const PackageOptions& o, bool quiet) {
  if (!package_named(o)) return {};
  if (!package_given(o)) return {choose_package(o, quiet), true};
  std::error_code ec;
  if (o.source.empty() && o.version.empty() && !fs::exists("registry/package.json", ec))
    return {ChosenPackage{o.package, "", ""}, false};  // --package alone: any version
  return {choose_package(o, quiet), false};
}

// The version each package described in `store` has there (<name>-<version>.package.json; the
// newest when several): what its archives in that store must be.
std::map<std::string, std::string> described_versions(const fs::path& store) {
  std::map<std::string, std::string> out;
  for (const auto& d : find_package_descriptions({store})) out.emplace(d.package, d.version);
  return out;
}

void check_release(const std::string& file, const std::string& package, const std::string& version,
                   const std::string& what, const ChosenPackage& want, Checked& out) {
  if (package.empty()) return;  // not read: verify_*_file said why
  if (package != want.name)
    out.problems.push_back({ErrorKind::Stale, file, "package",
                            file + ": " + what + " of package " + package + ", not " + want.name +
                                " (name another with --package or --source)"});
  else if (!want.version.empty() && version != want.version)
    out.problems.push_back(
        {ErrorKind::Stale, file, "package_version",
         file + ": package_version is " + version + ", " + want.name + " is " + want.version});
}

// Every archive directory's bytes are checked; the package version against the release named,
// or, with none, against the description of its package beside the store (a store shared by
// several packages holds other releases, which their own loaders judge).
void verify_store_dir(const fs::path& p, bool single, const Judging& judged, Checked& out) {
  std::vector<StoreArchive> entries;
  if (single) {
    // One unpacked archive directory, read as a store scan reads each of its entries.
    entries.push_back(scan_store_archive(p.filename().empty() ? p.parent_path() : p));
  } else {
    entries = scan_store(p);
  }
  fs::path store = single ? fs::path(entries.front().dir).parent_path() : p;
  const std::map<std::string, std::string> described = described_versions(store);
  for (const auto& e : entries) {
    out.items.push_back(e.dir);
    auto probs = verify_store_archive(e);
    out.problems.insert(out.problems.end(), probs.begin(), probs.end());
    if (!e.manifest) continue;
    const std::string file = e.dir + "/manifest.json";
    if (judged.covers(e.manifest->package) &&
        (single || e.manifest->package == judged.release->name)) {
      check_release(file, e.manifest->package, e.manifest->package_version, "an archive",
                    *judged.release, out);
    } else if (judged.release && !judged.by_default) {
      continue;  // another package's, left to its own loader
    } else if (auto d = described.find(e.manifest->package); d != described.end()) {
      check_release(file, e.manifest->package, e.manifest->package_version, "an archive",
                    {d->first, d->second, ""}, out);
    }
  }
}

// The description an index pins (present and of the pinned digest: verify_index_file), read as
// every command reads it: strictly, and of the index's package and version.
void check_indexed_description(const fs::path& index, const Index& idx, Checked& out) {
  if (!idx.description) return;
  fs::path f = index.parent_path() / idx.description->file;
  out.items.push_back(f.string());
  std::error_code ec;
  if (!fs::is_regular_file(f, ec)) return;  // reported by verify_index_file
  try {
    std::unique_ptr<PackageData> d = load_package_description(f);
    if (d->get()->name != idx.package || d->get()->version != idx.package_version)
      out.problems.push_back({ErrorKind::Stale, f.string(), "package",
                              f.string() + ": describes " + d->get()->name + " " +
                                  d->get()->version + ", the index is " + idx.package + " " +
                                  idx.package_version});
  } catch (const Error& e) {
    out.problems.push_back({e.kind(), f.string(), "description", e.what()});
  }
}

}  // namespace

void add_verify_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "verify",
      "check PATH and report every problem: an archive (.tar.zst: manifest first, format "
      "version, every artifact's size and sha256), an index (the description and each archive "
      "beside it: present, size and sha256 as pinned, each manifest agreeing with the index, "
      "then as an archive), or a store directory (each manifest and artifact digest). The "
      "package and version archives must have: the release named by --source or --package "
      "[--version]; else what the input names itself (the project in the current directory "
      "only for inputs of its own package), and in a store the version described beside it "
      "(<name>-<version>.package.json); with a package named, other packages' archives in a "
      "store are left to their own loaders. Exit 0 when all is well, else the code of the most "
      "severe problem: 3 "
      "integrity, "
      "4 stale, 10 format, 6 not found, 9 io, 12 limit (a size, depth or count bound of "
      "docs/security.md exceeded).");
  struct Opts {
    std::string path;
    bool json = false;
    PackageOptions pkg;
  };
  auto opts = std::make_shared<Opts>();
  add_package_options(cmd, opts->pkg);
  cmd->add_option("PATH", opts->path, "archive, index, store directory or one unpacked archive")
      ->required();
  cmd->add_flag("--json", opts->json, "machine-readable report");
  cmd->callback([opts, &rc] {
    fs::path p = opts->path;
    const Judging judged = judging(opts->pkg, opts->json);
    const std::string version = judged.version_for_all();
    Checked c;
    // The release check verify_*_file did not make: a named release's package (its version is
    // checked there), or the whole release for the default's own package.
    auto judge = [&](const std::string& file, const std::string& package,
                     const std::string& package_version, const std::string& what) {
      if (!judged.covers(package)) return;
      if (judged.by_default || package != judged.release->name)
        check_release(file, package, package_version, what, *judged.release, c);
    };
    // `is`: "is of" (an archive), "is the index of".
    auto say = [&](const std::string& is, const std::string& package,
                   const std::string& package_version) {
      if (package.empty() || judged.covers(package) || opts->json) return;
      if (!judged.release)
        std::fprintf(stderr, "kiln verify: no package named: %s %s %s %s\n", p.c_str(), is.c_str(),
                     package.c_str(), package_version.c_str());
      else
        std::fprintf(stderr,
                     "kiln verify: %s %s %s %s, judged as that package (the project here "
                     "is %s)\n",
                     p.c_str(), is.c_str(), package.c_str(), package_version.c_str(),
                     judged.release->name.c_str());
    };
    PathKind kind = classify_path(p);
    switch (kind) {
      case PathKind::Archive: {
        c.items.push_back(p.string());
        Manifest m;
        c.problems = verify_archive_file(p, version, &m);
        judge(p.string(), m.package, m.package_version, "an archive");
        say("is of", m.package, m.package_version);
        break;
      }
      case PathKind::Index: {
        Index idx;
        c.problems = verify_index_file(p, version, &idx);
        judge(p.string(), idx.package, idx.package_version, "the index");
        say("is the index of", idx.package, idx.package_version);
        c.items.push_back(p.string());
        check_indexed_description(p, idx, c);
        for (const auto& a : idx.archives) c.items.push_back((p.parent_path() / a.file).string());
        break;
      }
      case PathKind::Store:
        verify_store_dir(p, false, judged, c);
        // An empty store verifies nothing; saying "OK" would hide a failed install.
        if (c.items.empty())
          c.problems.push_back({ErrorKind::NotFound, p.string(), "archives",
                                p.string() + ": no archive directories in this store"});
        break;
      case PathKind::StoreArchive:
        verify_store_dir(p, true, judged, c);
        break;
      default:
        throw Error(ErrorKind::Usage, "kiln verify checks archives, indexes and stores; " +
                                          p.string() + " is " + describe(kind) +
                                          " (try `kiln inspect`)");
    }
    auto worst = most_severe(c.problems);
    if (opts->json) {
      Json out = Json::object();
      out["path"] = p.string();
      out["kind"] = to_string(kind);
      out["ok"] = !worst.has_value();
      out["exit_code"] = worst ? exit_code(*worst) : 0;
      out["checked"] = c.items;
      Json probs = Json::array();
      for (const auto& pr : c.problems) {
        Json j = Json::object();
        j["kind"] = to_string(pr.kind);
        j["file"] = pr.file;
        j["field"] = pr.field;
        j["message"] = pr.message;
        probs.push_back(std::move(j));
      }
      out["problems"] = std::move(probs);
      std::cout << out.dump(2) << "\n";
    } else {
      for (const auto& pr : c.problems)
        std::printf("FAIL (%s) %s [%s]: %s\n", to_string(pr.kind), pr.file.c_str(),
                    pr.field.c_str(), pr.message.c_str());
      std::printf("%s %s: %zu checked, %zu problem%s\n", worst ? "FAILED" : "OK", p.c_str(),
                  c.items.size(), c.problems.size(), c.problems.size() == 1 ? "" : "s");
    }
    rc = worst ? exit_code(*worst) : 0;
  });
}

}  // namespace kiln::cli
