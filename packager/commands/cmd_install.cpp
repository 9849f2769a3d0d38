// `kiln install ARCHIVE|INDEX... --dest DIR`: verify archives and unpack them into a store.
// An index pins each archive beside it by size and sha256 and is installed all or nothing
// (store.hpp install_release); a bare archive is checked against its own manifest. One refused
// input does not stop the others; the exit code is the worst failure.
// `kiln install --bundle B --tuf-root ROOT --dest DIR`: an air-gapped bundle (bundle.hpp),
// verified whole against the TUF root before anything is installed.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands/commands.hpp"
#include "commands/error_json.hpp"
#include "kiln/error.hpp"
#include "plan/install_acceptance.hpp"
#include "release/bundle.hpp"
#include "store/store.hpp"
#include "tuf/tuf_metadata.hpp"

namespace kiln::commands {

void add_install_command(CLI::App& app, int& rc);

namespace {

using Json = nlohmann::ordered_json;

const char* action_name(store::InstallResult::Action a) {
  switch (a) {
    case store::InstallResult::Action::Installed:
      return "installed";
    case store::InstallResult::Action::Replaced:
      return "replaced";
    case store::InstallResult::Action::Unchanged:
      return "unchanged";
  }
  return "installed";
}

constexpr const char* kInstallHelp =
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
    "an attack, named in the error's \"attack\" field).";

struct InstallOpts {
  std::vector<std::string> inputs;
  std::string dest;
  bool json = false;
  bool any_version = false;
  PackageOptions pkg;
  std::string bundle;
  std::string tuf_root;
  std::string expiry_reference;
};

// --bundle B: install_bundle (release/bundle.hpp) and its report.
int install_from_bundle(const InstallOpts& o) {
  release::BundleInstallRequest req;
  fetch::FetchOptions trust;
  trust.tuf_root = o.tuf_root;
  req.trust = with_environment(std::move(trust));
  req.bundle = o.bundle;
  // A bundle names its releases: with none named, every one it carries is installed.
  if (!o.pkg.source.empty() || !o.pkg.package.empty() || !o.pkg.version.empty()) {
    ChosenPackage c = choose_package(o.pkg, o.json);
    req.package = c.name;
    req.version = c.version;
  }
  req.dest = o.dest;
  if (!o.expiry_reference.empty()) {
    req.expiry_reference = tuf::parse_utc_time(o.expiry_reference);
    if (!req.expiry_reference)
      throw Error(ErrorKind::Usage, "--expiry-reference '" + o.expiry_reference +
                                        "' is not a time YYYY-MM-DDTHH:MM:SSZ (UTC)");
  }
  req.log = [](const std::string& line) { std::cerr << "kiln install: " << line << "\n"; };
  release::BundleInstallResult r = release::install_bundle(req);
  if (o.json) {
    Json out = Json::object();
    out["dest"] = o.dest;
    out["bundle"] = o.bundle;
    out["ok"] = true;
    out["root_version"] = r.root_version;
    out["timestamp_version"] = r.timestamp_version;
    out["expiry_reference"] = o.expiry_reference.empty() ? Json(nullptr) : Json(o.expiry_reference);
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
  return 0;
}

// INPUT...: each installed by install_input (plan/install_acceptance.hpp) under the rule of
// which release it must be; one refused input does not stop the others; the exit code is the
// worst failure's.
int install_inputs(const InstallOpts& o) {
  if (o.inputs.empty())
    throw Error(ErrorKind::Usage, "kiln install needs INPUT... or --bundle B (see --help)");
  const bool named = package_named(o.pkg);
  const bool given = package_given(o.pkg);
  std::optional<store::RequiredRelease> chosen;
  if (!o.any_version && named) {
    ChosenPackage c = choose_package(o.pkg, o.json);
    chosen = store::RequiredRelease{c.name, c.version};
  }
  const plan::InstallAcceptance rule = plan::install_acceptance(o.any_version, given, chosen, o.dest);
  if (!o.any_version && !given && !named && !o.json)
    std::fprintf(stderr,
                 "kiln install: no --package or --source given and no project here: "
                 "installing the package and version each input names%s\n",
                 rule.described.empty() ? "" : ", at the version described beside the store");
  Json installed = Json::array();
  Json descriptions = Json::array();
  Json failures = Json::array();
  std::optional<ErrorKind> worst;
  for (const auto& input : o.inputs) {
    try {
      plan::InputInstall r = plan::install_input(input, o.dest, rule);
      for (const auto& [archive, a] : r.archives) {
        installed.push_back({{"archive", archive.string()},
                             {"target", a.manifest.target},
                             {"directory", a.directory.string()},
                             {"action", action_name(a.action)}});
        if (!o.json)
          std::printf("%-9s %s -> %s\n", action_name(a.action), archive.c_str(),
                      a.directory.c_str());
      }
      if (r.description) {
        descriptions.push_back(r.description->second.string());
        if (!o.json)
          std::printf("%-9s %s -> %s\n", "described", r.description->first.c_str(),
                      r.description->second.c_str());
      }
    } catch (const Error& e) {
      failures.push_back({{"input", input},
                          {"kind", to_string(e.kind())},
                          {"message", e.what()},
                          {"fields", error_fields_json(e)}});
      worst = store::most_severe({{e.kind(), "", "", ""}, {worst.value_or(e.kind()), "", "", ""}});
      if (!o.json) std::fprintf(stderr, "kiln: error (%s): %s\n", to_string(e.kind()), e.what());
    }
  }
  if (o.json) {
    Json out = Json::object();
    out["dest"] = o.dest;
    out["ok"] = !worst.has_value();
    out["exit_code"] = worst ? exit_code(*worst) : 0;
    out["installed"] = std::move(installed);
    out["descriptions"] = std::move(descriptions);
    out["failed"] = std::move(failures);
    std::cout << out.dump(2) << "\n";
  }
  return worst ? exit_code(*worst) : 0;
}

}  // namespace

void add_install_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("install", kInstallHelp);
  auto opts = std::make_shared<InstallOpts>();
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
    rc = opts->bundle.empty() ? install_inputs(*opts) : install_from_bundle(*opts);
  });
}

}  // namespace kiln::commands
