// `kiln install ARCHIVE|INDEX... --dest DIR`: verify archives and unpack them into a store.
// An index pins each archive beside it by sha256; a bare archive is checked against its own
// manifest. One refused archive does not stop the others; the exit code is the worst failure.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "atomic_file.hpp"
#include "commands.hpp"
#include "index_entry_check.hpp"
#include "kiln/error.hpp"
#include "kiln/store.hpp"
#include "kiln/version.hpp"

namespace kiln::cli {

void add_install_command(CLI::App& app, int& rc);

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const char* action_name(InstallResult::Action a) {
  switch (a) {
    case InstallResult::Action::Installed:
      return "installed";
    case InstallResult::Action::Replaced:
      return "replaced";
    case InstallResult::Action::Unchanged:
      return "unchanged";
  }
  return "installed";
}

}  // namespace

void add_install_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "install",
      "verify archives and unpack them into a store directory (--dest). Given an index, installs "
      "every archive listed in it from the index's directory, each checked against the index's "
      "sha256; given archives, checks each against its manifest. A refused archive leaves the "
      "store as it was. Archives of another package or version than the project's (--source, "
      "default: the current directory's or kiln's own; or --package and --version) are refused "
      "(exit 4) unless --any-version.");
  struct Opts {
    std::vector<std::string> inputs;
    std::string dest;
    bool json = false;
    bool any_version = false;
    PackageOptions pkg;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("INPUT", opts->inputs, "archives (.tar.zst) and/or indexes (index.json)")
      ->required();
  cmd->add_option("--dest", opts->dest, "store directory to install into (created if missing)")
      ->required();
  cmd->add_flag("--json", opts->json, "machine-readable report");
  cmd->add_flag("--any-version", opts->any_version,
                "install archives whatever their package and version (for mirrors and stores "
                "that serve several packages and releases; each keeps its own directory)");
  add_package_options(cmd, opts->pkg);
  cmd->callback([opts, &rc] {
    RequiredRelease required;
    if (!opts->any_version) {
      ChosenPackage c = choose_package(opts->pkg);
      required = {c.name, c.version};
    }
    Json installed = Json::array();
    Json failures = Json::array();
    std::optional<ErrorKind> worst;
    auto fail = [&](const std::string& input, const Error& e) {
      Json j = Json::object();
      j["input"] = input;
      j["kind"] = to_string(e.kind());
      j["message"] = e.what();
      Json fields = Json::object();
      for (const auto& f : e.fields())
        if (!fields.contains(f.name)) fields[f.name] = f.value;
      j["fields"] = std::move(fields);
      failures.push_back(std::move(j));
      worst = most_severe({{e.kind(), "", "", ""}, {worst.value_or(e.kind()), "", "", ""}});
      if (!opts->json)
        std::fprintf(stderr, "kiln: error (%s): %s\n", to_string(e.kind()), e.what());
    };
    // `from`: the index entry and index that pinned the archive, checked against its manifest
    // (the one check fetch uses too) before anything is unpacked.
    auto one = [&](const fs::path& archive, const std::optional<std::string>& sha,
                   const IndexEntry* entry, const Index* idx, const std::string& index_origin) {
      if (entry)
        if (auto m = read_leading_manifest(archive))
          require_manifest_matches_index(*m, *entry, *idx, archive.string(), index_origin);
      InstallResult r = install_archive(archive, opts->dest, sha, required);
      Json j = Json::object();
      j["archive"] = archive.string();
      j["target"] = r.manifest.target;
      j["directory"] = r.directory.string();
      j["action"] = action_name(r.action);
      installed.push_back(std::move(j));
      if (!opts->json)
        std::printf("%-9s %s -> %s\n", action_name(r.action), archive.c_str(), r.directory.c_str());
    };
    for (const auto& input : opts->inputs) {
      fs::path p = input;
      try {
        PathKind kind = classify_path(p);
        if (kind == PathKind::Archive) {
          one(p, std::nullopt, nullptr, nullptr, "");
        } else if (kind == PathKind::Index) {
          Index idx = parse_index(read_whole_file(p, limits::kMaxLocalFileBytes), p.string());
          if (!required.package.empty() && idx.package != required.package)
            throw Error(ErrorKind::Stale, p.string() + ": the index of package " + idx.package +
                                              ", not " + required.package +
                                              " (name it with --package or --source, or pass "
                                              "--any-version)");
          if (!required.version.empty() && idx.package_version != required.version)
            throw Error(ErrorKind::Stale, p.string() + ": package_version is " +
                                              idx.package_version + ", " + required.package +
                                              " wanted is " + required.version +
                                              " (pass --any-version to install it anyway)");
          if (idx.archives.empty())
            throw Error(ErrorKind::NotFound, p.string() + " lists no archives");
          for (const auto& a : idx.archives) {
            fs::path ap = p.parent_path() / a.file;
            try {
              one(ap, a.sha256, &a, &idx, p.string());
            } catch (const Error& e) {
              fail(ap.string(), e);
            }
          }
        } else {
          throw Error(ErrorKind::Usage, input + " is a " + to_string(kind) +
                                            ", not an archive (.tar.zst) or an index");
        }
      } catch (const Error& e) {
        fail(input, e);
      }
    }
    if (opts->json) {
      Json out = Json::object();
      out["dest"] = opts->dest;
      out["ok"] = !worst.has_value();
      out["exit_code"] = worst ? exit_code(*worst) : 0;
      out["installed"] = std::move(installed);
      out["failed"] = std::move(failures);
      std::cout << out.dump(2) << "\n";
    }
    rc = worst ? exit_code(*worst) : 0;
  });
}

}  // namespace kiln::cli
