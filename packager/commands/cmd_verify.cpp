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

// The release archives must belong to: named (--source, --package [--version], or the project
// here; an empty version: any), or, with none named, nullopt: each input is judged by what it
// names itself, and a store by the descriptions beside it.
std::optional<ChosenPackage> named_release(const PackageOptions& o, bool quiet) {
  if (!package_named(o)) return std::nullopt;
  std::error_code ec;
  if (o.source.empty() && o.version.empty() && !fs::exists("registry/package.json", ec))
    return ChosenPackage{o.package, "", ""};  // --package alone: that package, any version
  return choose_package(o, quiet);
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
void verify_store_dir(const fs::path& p, bool single, const std::optional<ChosenPackage>& named,
                      Checked& out) {
  std::vector<StoreArchive> entries;
  if (single) {
    // One unpacked archive directory, read as a store scan reads each of its entries.
    entries.push_back(scan_store_archive(p.filename().empty() ? p.parent_path() : p));
  } else {
    entries = scan_store(p);
  }
  fs::path store = single ? fs::path(entries.front().dir).parent_path() : p;
  const std::map<std::string, std::string> described =
      named ? std::map<std::string, std::string>() : described_versions(store);
  for (const auto& e : entries) {
    out.items.push_back(e.dir);
    auto probs = verify_store_archive(e);
    out.problems.insert(out.problems.end(), probs.begin(), probs.end());
    if (!e.manifest) continue;
    const std::string file = e.dir + "/manifest.json";
    if (named && (single || e.manifest->package == named->name)) {
      check_release(file, e.manifest->package, e.manifest->package_version, "an archive", *named,
                    out);
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
      "package and version archives must have: the release named by --source, --package "
      "[--version] or the project in the current directory; with none named, what the input "
      "names itself, and in a store the version described beside it "
      "(<name>-<version>.package.json); other packages' archives in a store are left to their "
      "own loaders. Exit 0 when all is well, else the code of the most severe problem: 3 "
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
    const std::optional<ChosenPackage> named = named_release(opts->pkg, opts->json);
    const std::string version = named ? named->version : std::string();
    PathKind kind = classify_path(p);
    Checked c;
    switch (kind) {
      case PathKind::Archive: {
        c.items.push_back(p.string());
        Manifest m;
        c.problems = verify_archive_file(p, version, &m);
        if (named && !m.package.empty() && m.package != named->name)
          check_release(p.string(), m.package, m.package_version, "an archive", *named, c);
        if (!named && !m.package.empty() && !opts->json)
          std::fprintf(stderr, "kiln verify: no package named: %s is of %s %s\n", p.c_str(),
                       m.package.c_str(), m.package_version.c_str());
        break;
      }
      case PathKind::Index: {
        Index idx;
        c.problems = verify_index_file(p, version, &idx);
        if (named && !idx.package.empty() && idx.package != named->name)
          check_release(p.string(), idx.package, idx.package_version, "the index", *named, c);
        if (!named && !idx.package.empty() && !opts->json)
          std::fprintf(stderr, "kiln verify: no package named: %s is the index of %s %s\n",
                       p.c_str(), idx.package.c_str(), idx.package_version.c_str());
        c.items.push_back(p.string());
        check_indexed_description(p, idx, c);
        for (const auto& a : idx.archives) c.items.push_back((p.parent_path() / a.file).string());
        break;
      }
      case PathKind::Store:
        verify_store_dir(p, false, named, c);
        // An empty store verifies nothing; saying "OK" would hide a failed install.
        if (c.items.empty())
          c.problems.push_back({ErrorKind::NotFound, p.string(), "archives",
                                p.string() + ": no archive directories in this store"});
        break;
      case PathKind::StoreArchive:
        verify_store_dir(p, true, named, c);
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
