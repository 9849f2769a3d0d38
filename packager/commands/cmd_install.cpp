// `kiln install ARCHIVE|INDEX... --dest DIR`: verify archives and unpack them into a store.
// An index pins each archive beside it by size and sha256 and is installed all or nothing
// (store.hpp install_release); a bare archive is checked against its own manifest. One refused
// input does not stop the others; the exit code is the worst failure.
// `kiln install --bundle B --tuf-root ROOT --dest DIR`: an air-gapped bundle (bundle.hpp),
// verified whole against the TUF root before anything is installed.
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "commands/commands.hpp"
#include "io/atomic_file.hpp"
#include "io/limits.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "project/package_description.hpp"
#include "release/bundle.hpp"
#include "store/index_entry_check.hpp"
#include "store/store.hpp"
#include "tuf/tuf_metadata.hpp"

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
      "every archive listed in it from the index's directory, all or nothing: every archive and "
      "the package description are checked against the index's size and sha256 (exit 3 naming "
      "the file, the index and both values) and every archive is unpacked and checked before "
      "any lands; given archives, checks each against its manifest. A refused archive or "
      "release leaves the store as it was. Archives of another package or version than the "
      "one named (--source, --package and --version) are refused (exit 4) unless "
      "--any-version, and so are archives of the current directory's project at another "
      "version; other inputs install their own package and version, except that a package "
      "described beside --dest (<name>-<version>.package.json) must be of the version "
      "described.\n"
      "Given an index, the package description it pins (<name>-<version>.package.json) is "
      "written beside the archives last, once all of them are in place.\n"
      "--bundle B (from `kiln bundle`): installs the release named (--package and --version, "
      "or --source), else every release B carries, with their descriptions; it "
      "verifies B's TUF metadata against the root (--tuf-root, "
      "else KILN_TUF_ROOT, else the root installed beside kiln: signatures, thresholds, "
      "versions against what this machine trusted before, expiry, lengths and hashes of the "
      "index and every archive) before installing anything; metadata expiry is checked against "
      "the clock, and only --expiry-reference TIME accepts metadata that has expired since, "
      "with a warning naming each expired role. A refused bundle installs nothing (exit 3 for "
      "an attack, named in the error's \"attack\" field).");
  struct Opts {
    std::vector<std::string> inputs;
    std::string dest;
    bool json = false;
    bool any_version = false;
    PackageOptions pkg;
    std::string bundle;
    std::string tuf_root;
    std::string expiry_reference;
  };
  auto opts = std::make_shared<Opts>();
  auto* inputs =
      cmd->add_option("INPUT", opts->inputs, "archives (.tar.zst) and/or indexes (index.json)");
  auto* bundle = cmd->add_option("--bundle", opts->bundle,
                                 "an air-gapped bundle from `kiln bundle` (directory or .tar.zst)");
  inputs->excludes(bundle);
  cmd->add_option("--tuf-root", opts->tuf_root, "--bundle: the TUF root.json it is verified with")
      ->needs(bundle);
  cmd->add_option("--expiry-reference", opts->expiry_reference,
                  "--bundle: check TUF expiry against this time (YYYY-MM-DDTHH:MM:SSZ) instead "
                  "of the clock: the only way to accept expired metadata, logged as a warning")
      ->needs(bundle);
  cmd->add_option("--dest", opts->dest, "store directory to install into (created if missing)")
      ->required();
  cmd->add_flag("--json", opts->json, "machine-readable report");
  cmd->add_flag("--any-version", opts->any_version,
                "install archives whatever their package and version (for mirrors and stores "
                "that serve several packages and releases; each keeps its own directory)");
  add_package_options(cmd, opts->pkg);
  cmd->callback([opts, &rc] {
    if (!opts->bundle.empty()) {
      packager::BundleInstallRequest req;
      FetchOptions trust;
      trust.tuf_root = opts->tuf_root;
      req.trust = with_environment(std::move(trust));
      req.bundle = opts->bundle;
      // A bundle names its releases: with none named, every one it carries is installed.
      const PackageOptions& asked = opts->pkg;
      if (!asked.source.empty() || !asked.package.empty() || !asked.version.empty()) {
        ChosenPackage c = choose_package(asked, opts->json);
        req.package = c.name;
        req.version = c.version;
      }
      req.dest = opts->dest;
      if (!opts->expiry_reference.empty()) {
        req.expiry_reference = tuf::parse_utc_time(opts->expiry_reference);
        if (!req.expiry_reference)
          throw Error(ErrorKind::Usage, "--expiry-reference '" + opts->expiry_reference +
                                            "' is not a time YYYY-MM-DDTHH:MM:SSZ (UTC)");
      }
      req.log = [](const std::string& line) { std::cerr << "kiln install: " << line << "\n"; };
      packager::BundleInstallResult r = packager::install_bundle(req);
      if (opts->json) {
        Json out = Json::object();
        out["dest"] = opts->dest;
        out["bundle"] = opts->bundle;
        out["ok"] = true;
        out["root_version"] = r.root_version;
        out["timestamp_version"] = r.timestamp_version;
        out["expiry_reference"] =
            opts->expiry_reference.empty() ? Json(nullptr) : Json(opts->expiry_reference);
        out["expired_accepted"] = r.expired_accepted;
        Json installed = Json::array();
        for (const auto& i : r.installed)
          installed.push_back({{"target", i.manifest.target},
                               {"directory", i.directory.string()},
                               {"action", action_name(i.action)}});
        out["installed"] = std::move(installed);
        Json releases = Json::array();
        for (const auto& rel : r.releases)
          releases.push_back(
              {{"package", rel.package}, {"version", rel.version}, {"targets", rel.targets}});
        out["releases"] = std::move(releases);
        Json described = Json::array();
        for (const auto& d : r.descriptions) described.push_back(d.string());
        out["descriptions"] = std::move(described);
        std::cout << out.dump(2) << "\n";
      } else {
        for (const auto& i : r.installed)
          std::printf("%-9s %s\n", action_name(i.action), i.directory.c_str());
        for (const auto& d : r.descriptions) std::printf("%-9s %s\n", "described", d.c_str());
      }
      rc = 0;
      return;
    }
    if (opts->inputs.empty())
      throw Error(ErrorKind::Usage, "kiln install needs INPUT... or --bundle B (see --help)");
    RequiredRelease required;
    const bool named = package_named(opts->pkg);
    // Named on the command line: every input must be of it. The project here is a default only
    // for inputs of its own package: another package's index or archive names its own package and
    // version; a package described beside the destination store (<name>-<version>.package.json,
    // which its loader judges freshness by) must be of that version.
    const bool given = package_given(opts->pkg);
    std::map<std::string, FoundDescription> described;
    if (!opts->any_version && named) {
      ChosenPackage c = choose_package(opts->pkg, opts->json);
      required = {c.name, c.version};
    }
    if (!opts->any_version && !given) {
      for (auto& d : find_package_descriptions({opts->dest}))
        described.emplace(d.package, std::move(d));  // newest first: the first one stays
      if (!named && !opts->json)
        std::fprintf(stderr, "kiln install: no --package or --source given and no project here: "
                             "installing the package and version each input names%s\n",
                     described.empty() ? "" : ", at the version described beside the store");
    }
    auto required_for = [&](const std::string& package) -> RequiredRelease {
      if (opts->any_version || given || (named && package == required.package)) return required;
      auto d = described.find(package);
      if (d == described.end()) return {};
      return {package, d->second.version};
    };
    Json installed = Json::array();
    Json descriptions = Json::array();
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
    auto report = [&](const fs::path& archive, const InstallResult& r) {
      Json j = Json::object();
      j["archive"] = archive.string();
      j["target"] = r.manifest.target;
      j["directory"] = r.directory.string();
      j["action"] = action_name(r.action);
      installed.push_back(std::move(j));
      if (!opts->json)
        std::printf("%-9s %s -> %s\n", action_name(r.action), archive.c_str(), r.directory.c_str());
    };
    // A bare archive is checked against its own manifest.
    auto one = [&](const fs::path& archive) {
      // Its manifest, read ahead only where the package whose description beside --dest pins
      // it must be known before unpacking.
      std::optional<Manifest> m;
      if (!described.empty()) m = read_leading_manifest(archive);
      report(archive, install_archive(archive, opts->dest, std::nullopt,
                                      required_for(m ? m->package : std::string())));
    };
    for (const auto& input : opts->inputs) {
      fs::path p = input;
      try {
        PathKind kind = classify_path(p);
        if (kind == PathKind::Archive) {
          one(p);
        } else if (kind == PathKind::Index) {
          Index idx = parse_index(read_whole_file(p, limits::kMaxLocalFileBytes), p.string());
          const RequiredRelease wanted = required_for(idx.package);
          if (!wanted.package.empty() && idx.package != wanted.package)
            throw Error(ErrorKind::Stale, p.string() + ": the index of package " + idx.package +
                                              ", not " + wanted.package +
                                              " (name it with --package or --source, or pass "
                                              "--any-version)");
          if (!wanted.version.empty() && idx.package_version != wanted.version)
            throw Error(ErrorKind::Stale, p.string() + ": package_version is " +
                                              idx.package_version + ", " + wanted.package +
                                              " wanted is " + wanted.version +
                                              " (the version named or described beside --dest; "
                                              "name this one with --version " +
                                              idx.package_version +
                                              ", or pass --any-version to keep both)");
          if (idx.archives.empty())
            throw Error(ErrorKind::NotFound, p.string() + " lists no archives");
          // All or nothing: every archive and the description checked against the index
          // before anything is written (install_release).
          ReleaseInstallResult r = install_release(p, idx, opts->dest);
          for (std::size_t i = 0; i < r.archives.size(); ++i)
            report(p.parent_path() / idx.archives[i].file, r.archives[i]);
          if (r.description) {
            descriptions.push_back(r.description->string());
            if (!opts->json)
              std::printf("%-9s %s -> %s\n", "described",
                          (p.parent_path() / idx.description->file).c_str(),
                          r.description->c_str());
          }
        } else {
          throw Error(ErrorKind::Usage, input + " is " + describe(kind) +
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
      out["descriptions"] = std::move(descriptions);
      out["failed"] = std::move(failures);
      std::cout << out.dump(2) << "\n";
    }
    rc = worst ? exit_code(*worst) : 0;
  });
}

}  // namespace kiln::cli
