// `kiln verify PATH`: checks an archive, an index with the archives beside it, or an unpacked
// store, reports every problem (not only the first) and exits with the code of the worst.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands/commands.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "release/verify_release.hpp"

namespace kiln::commands {

void add_verify_command(CLI::App& app, int& rc);

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The release inputs are judged as (verify_release.hpp): the one --source, --package
// [--version] name; --package alone: any version of it; or the project here, by default.
release::ReleaseJudging judging(const PackageOptions& o, bool quiet) {
  if (!package_named(o)) return {};
  auto judged = [](const ChosenPackage& c) { return release::JudgedRelease{c.name, c.version}; };
  if (!package_given(o)) return {judged(choose_package(o, quiet)), true};
  std::error_code ec;
  if (o.source.empty() && o.version.empty() && !fs::exists("registry/package.json", ec))
    return {release::JudgedRelease{o.package, ""}, false};  // --package alone: any version
  return {judged(choose_package(o, quiet)), false};
}

void print_note(const fs::path& p, const release::NamedByInput& n, const release::ReleaseJudging& judged) {
  if (!judged.release)
    std::fprintf(stderr, "kiln verify: no package named: %s %s %s %s\n", p.c_str(), n.is.c_str(),
                 n.package.c_str(), n.version.c_str());
  else
    std::fprintf(stderr,
                 "kiln verify: %s %s %s %s, judged as that package (the project here "
                 "is %s)\n",
                 p.c_str(), n.is.c_str(), n.package.c_str(), n.version.c_str(),
                 judged.release->name.c_str());
}

std::string report_json(const fs::path& p, const release::ReleaseVerification& c) {
  Json out = Json::object();
  out["path"] = p.string();
  out["kind"] = to_string(c.kind);
  out["ok"] = !c.worst().has_value();
  out["exit_code"] = c.exit_code();
  out["checked"] = c.checked;
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
  return out.dump(2) + "\n";
}

void print_report(const fs::path& p, const release::ReleaseVerification& c) {
  for (const auto& pr : c.problems)
    std::printf("FAIL (%s) %s [%s]: %s\n", to_string(pr.kind), pr.file.c_str(), pr.field.c_str(),
                pr.message.c_str());
  std::printf("%s %s: %zu checked, %zu problem%s\n", c.worst() ? "FAILED" : "OK", p.c_str(),
              c.checked.size(), c.problems.size(), c.problems.size() == 1 ? "" : "s");
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
    const fs::path p = opts->path;
    const release::ReleaseJudging judged = judging(opts->pkg, opts->json);
    const release::ReleaseVerification c = release::verify_release_path(p, judged);
    if (c.named && !opts->json) print_note(p, *c.named, judged);
    if (opts->json)
      std::cout << report_json(p, c);
    else
      print_report(p, c);
    rc = c.exit_code();
  });
}

}  // namespace kiln::commands
