// `kiln verify PATH`: checks an archive, an index with the archives beside it, or an unpacked
// store, reports every problem (not only the first) and exits with the code of the worst.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands/commands.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
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

// Every archive directory's bytes are checked; the package version only of the chosen
// package's (a store shared by several packages holds other releases, which their own loaders
// judge).
void verify_store_dir(const fs::path& p, bool single, const ChosenPackage& pkg, Checked& out) {
  std::vector<StoreArchive> entries;
  if (single) {
    // One unpacked archive directory, read as a store scan reads each of its entries.
    entries.push_back(scan_store_archive(p.filename().empty() ? p.parent_path() : p));
  } else {
    entries = scan_store(p);
  }
  for (const auto& e : entries) {
    out.items.push_back(e.dir);
    auto probs = verify_store_archive(e);
    out.problems.insert(out.problems.end(), probs.begin(), probs.end());
    if (!e.manifest) continue;
    if (single && e.manifest->package != pkg.name)
      out.problems.push_back(
          {ErrorKind::Stale, e.dir + "/manifest.json", "package",
           e.dir + ": an archive of package " + e.manifest->package + ", not " + pkg.name});
    else if (e.manifest->package == pkg.name && e.manifest->package_version != pkg.version)
      out.problems.push_back({ErrorKind::Stale, e.dir + "/manifest.json", "package_version",
                              e.dir + ": package_version is " + e.manifest->package_version + ", " +
                                  pkg.name + " is " + pkg.version});
  }
}

}  // namespace

void add_verify_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "verify",
      "check PATH and report every problem: an archive (.tar.zst: manifest first, format "
      "version, every artifact's size and sha256, package and version those of the project "
      "(--source, default the current directory's or kiln's own; or --package/--version)), an "
      "index (each archive beside it: present, size and sha256 as pinned, manifest agreeing "
      "with the index, then as an archive), or a store directory (each manifest and artifact "
      "digest; the version of the chosen package's archives; other packages' are left to their "
      "own loaders). Exit 0 when all is well, else the code of the most severe problem: 3 "
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
    // The package version archives must have: the project's (--source, or the default one), or
    // --version.
    const ChosenPackage pkg = choose_package(opts->pkg);
    const std::string& version = pkg.version;
    PathKind kind = classify_path(p);
    Checked c;
    switch (kind) {
      case PathKind::Archive:
        c.items.push_back(p.string());
        {
          Manifest m;
          c.problems = verify_archive_file(p, version, &m);
          if (!m.package.empty() && m.package != pkg.name)
            c.problems.push_back({ErrorKind::Stale, p.string(), "package",
                                  p.string() + ": an archive of package " + m.package + ", not " +
                                      pkg.name + " (name it with --source or --package)"});
        }
        break;
      case PathKind::Index: {
        Index idx;
        c.problems = verify_index_file(p, version, &idx);
        if (!idx.package.empty() && idx.package != pkg.name)
          c.problems.push_back({ErrorKind::Stale, p.string(), "package",
                                p.string() + ": the index of package " + idx.package + ", not " +
                                    pkg.name + " (name it with --source or --package)"});
        c.items.push_back(p.string());
        for (const auto& a : idx.archives) c.items.push_back((p.parent_path() / a.file).string());
        break;
      }
      case PathKind::Store:
        verify_store_dir(p, false, pkg, c);
        // An empty store verifies nothing; saying "OK" would hide a failed install.
        if (c.items.empty())
          c.problems.push_back({ErrorKind::NotFound, p.string(), "archives",
                                p.string() + ": no archive directories in this store"});
        break;
      case PathKind::StoreArchive:
        verify_store_dir(p, true, pkg, c);
        break;
      default:
        throw Error(ErrorKind::Usage, "kiln verify checks archives, indexes and stores; " +
                                          p.string() + " is a " + to_string(kind) +
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
