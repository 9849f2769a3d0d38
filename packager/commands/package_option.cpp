// The package a command acts on (commands.hpp: PackageOptions), and `kiln package-source`,
// which writes a project's package description for kiln_add_kernel_package.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <set>

#include "commands/commands.hpp"
#include "format/manifest.hpp"
#include "io/atomic_file.hpp"
#include "io/sha256.hpp"
#include "plan/resolver.hpp"
#include "project/package.hpp"
#include "project/package_description.hpp"

namespace kiln::commands {

CLI::Validator package_name_option() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (format::is_package_name(value)) return "";
        return "--package '" + value.substr(0, 80) + "': " + format::kPackageNameRule;
      },
      "NAME");
}

ReleaseArg parse_release_arg(const std::string& text) {
  ReleaseArg r;
  std::string name = text;
  if (auto eq = text.find('='); eq != std::string::npos) {
    name = text.substr(0, eq);
    r.pin = text.substr(eq + 1);
    for (char& c : r.pin) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!io::is_sha256_hex(r.pin))
      throw Error(ErrorKind::Usage, "--release '" + text.substr(0, 160) +
                                        "': the pin after '=' is not a SHA-256 (64 hex digits)");
  }
  std::optional<std::string_view> package = format::release_name_package(name);
  std::string version = package ? name.substr(package->size() + 1) : std::string();
  if (!package || !format::is_package_version(version))
    throw Error(ErrorKind::Usage,
                "--release '" + text.substr(0, 160) +
                    "' is not NAME-VERSION (e.g. kiln-kernels-0.1.0): " + format::kPackageNameRule);
  r.package = std::string(*package);
  r.version = version;
  return r;
}

CLI::Validator release_name_option() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          if (!parse_release_arg(value).pin.empty())
            return "--release '" + value.substr(0, 160) +
                   "': no pin here (a TUF root is the trust)";
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      "NAME-VERSION");
}

void add_package_options(CLI::App* cmd, PackageOptions& o, bool with_version) {
  cmd->add_option("--source", o.source,
                  "the kernel project (VERSION, registry/package.json, registry/kernels.json, "
                  "kernels/) whose package this acts on (default: the current directory when it "
                  "holds registry/package.json, else the one package described in "
                  "KILN_ARTIFACT_PATH, beside this kiln or in the cache, else the tree this kiln "
                  "was built from, said on stderr)");
  cmd->add_option("--package", o.package, "the package's name instead of the project's")
      ->check(package_name_option());
  if (with_version)
    cmd->add_option("--version", o.version, "the package's version instead of the project's")
        ->check(package_version_option());
}

// describe_package's order, as the help of the commands that use it says it.
constexpr const char* kPackageChoiceHelp =
    "The package (its URIs, version and source hashes) is taken from --source PROJECT; else\n"
    "--package NAME [--version V], described by NAME-V.package.json in KILN_ARTIFACT_PATH, the\n"
    "store installed beside this kiln (<prefix>/share/kiln/artifacts) or the cache; else the\n"
    "project in the current directory; else the one package described in those stores; else\n"
    "the project this kiln was built from, when it exists (said on stderr).";

void add_described_package_options(CLI::App* cmd, PackageOptions& o) {
  cmd->add_option("--source", o.source,
                  "the kernel project whose package is judged (its URIs, version and source "
                  "hashes); default: see below");
  cmd->add_option("--package", o.package,
                  "the package described by NAME-VERSION.package.json in the stores below")
      ->check(package_name_option());
  cmd->add_option("--version", o.version, "with --package: that version (default: the newest)")
      ->check(package_version_option());
  cmd->footer(kPackageChoiceHelp);
}

bool package_given(const PackageOptions& o) {
  return !o.source.empty() || !o.package.empty() || !o.version.empty();
}

bool package_named(const PackageOptions& o) {
  std::error_code ec;
  return package_given(o) || std::filesystem::exists("registry/package.json", ec);
}

ChosenPackage choose_package(const PackageOptions& o, bool quiet) {
  if (!o.package.empty() && !o.version.empty() && o.source.empty())
    return {o.package, o.version, ""};
  DescribedPackage d = describe_package(o, description_stores(LoaderConfig::from_env()), quiet);
  ChosenPackage c{d.data->get()->name, d.data->get()->version, d.project_dir};
  if (!o.version.empty()) c.version = o.version;
  return c;
}

namespace {


std::string joined(const std::vector<std::filesystem::path>& paths) {
  std::string out;
  for (const auto& p : paths) out += (out.empty() ? "" : ", ") + p.string();
  return out.empty() ? "(none)" : out;
}

// Says which package a command acts on and where it came from (stderr: stdout stays the
// command's answer, --json included).
DescribedPackage said(DescribedPackage d, const std::string& why, bool quiet) {
  if (!quiet)
    std::cerr << "kiln: " << (why.empty() ? "" : why + "; ") << "package " << d.data->get()->name
            << " " << d.data->get()->version << " from " << d.origin << "\n";
  return d;
}

DescribedPackage from_project(const std::string& dir, const std::string& why, bool quiet) {
  project::Project project = project::load_project(dir);
  return said({std::make_unique<project::PackageData>(project), "the project " + project.root.string(),
               project.root.string()},
              why, quiet);
}

DescribedPackage from_description(const project::FoundDescription& f, bool quiet) {
  return said({project::load_package_description(f.file), f.file.string(), ""}, "", quiet);
}

}  // namespace

std::vector<std::filesystem::path> description_stores(const LoaderConfig& cfg) {
  std::vector<std::filesystem::path> stores(cfg.artifact_path.begin(), cfg.artifact_path.end());
  std::string installed =
      plan::installed_store_dir(reinterpret_cast<const void*>(&description_stores));
  if (!installed.empty()) stores.emplace_back(installed);
  if (!cfg.cache_dir.empty()) stores.emplace_back(cfg.cache_dir);
  return stores;
}

DescribedPackage describe_package(const PackageOptions& o,
                                  const std::vector<std::filesystem::path>& stores, bool quiet) {
  if (!o.source.empty()) return from_project(o.source, "", quiet);
  std::string looked = "the stores " + joined(stores);
  if (!o.package.empty()) {
    for (const auto& f : project::find_package_descriptions(stores, o.package))
      if (o.version.empty() || f.version == o.version) return from_description(f, quiet);
    throw Error(ErrorKind::NotFound,
                "no description of package " + o.package +
                    (o.version.empty() ? "" : " " + o.version) + " (" +
                    project::package_description_file_name(o.package, o.version.empty() ? "<version>"
                                                                                 : o.version) +
                    ") in " + looked +
                    ": install the package (its CMake install or kiln install writes it there), "
                    "add its store to KILN_ARTIFACT_PATH, or pass --source PROJECT")
        .with("package", o.package);
  }
  std::error_code ec;
  if (std::filesystem::exists("registry/package.json", ec)) return from_project(".", "", quiet);
  std::vector<project::FoundDescription> found = project::find_package_descriptions(stores);
  std::set<std::string> names;
  for (const auto& f : found) names.insert(f.package);
  if (names.size() == 1) return from_description(found.front(), quiet);
  if (names.size() > 1) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw Error(ErrorKind::Usage, "several packages are described in " + looked + " (" + list +
                                      "): name one with --package NAME");
  }
  std::string built_from = default_source_dir();
  if (built_from != "." && std::filesystem::exists(built_from, ec))
    return from_project(built_from,
                        "no project here and no package described in " + looked +
                            "; using the project this kiln was built from (pass --source or "
                            "--package to choose)",
                        quiet);
  throw Error(ErrorKind::NotFound,
              "no package to act on: no kernel project in the current directory (no "
              "registry/package.json) and no package description (<name>-<version>.package.json) "
              "in " + looked + ": pass --source PROJECT or --package NAME");
}

std::optional<DescribedPackage> describe_package_named_by_input(
    const PackageOptions& o, const std::vector<std::filesystem::path>& stores,
    const std::string& package, const std::string& version,
    const std::vector<std::filesystem::path>& beside, bool quiet) {
  auto taken = [&](DescribedPackage d) {
    if (!quiet)
      std::cerr << "kiln: the input names " << package << " " << version << ": judged as package "
                << d.data->get()->name << " " << d.data->get()->version << " from " << d.origin
                << "\n";
    return std::optional<DescribedPackage>(std::move(d));
  };
  // The default, when it is the package named: the project here, or the one described.
  try {
    DescribedPackage d = describe_package(o, stores, /*quiet=*/true);
    if (d.data->get()->name == package) return taken(std::move(d));
  } catch (const Error&) {
    // No default (none, or several described): the input's own package is looked for below.
  }
  auto load =
      [&](const std::vector<std::filesystem::path>& where) -> std::optional<DescribedPackage> {
    std::vector<project::FoundDescription> found = project::find_package_descriptions(where, package);
    auto same = std::find_if(found.begin(), found.end(),
                             [&](const project::FoundDescription& f) { return f.version == version; });
    if (same == found.end()) same = found.begin();
    if (same == found.end()) return std::nullopt;
    return DescribedPackage{project::load_package_description(same->file), same->file.string(), ""};
  };
  if (auto d = load(stores)) return taken(std::move(*d));
  if (auto d = load(beside)) return taken(std::move(*d));
  if (!quiet)
    std::cerr << "kiln: the input names " << package << " " << version
              << ", which no description here describes (" << joined(stores)
              << "): judged without one\n";
  return std::nullopt;
}

void add_package_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "package-source",
      "write a kernel project's package description (kiln/package.h) as a C source defining\n"
      "`const kiln_package* SYMBOL(void)`: the name, version, every specialisation (URI,\n"
      "parameters, entries, source hash) and the sources the JIT tier compiles from. Run by\n"
      "kiln_add_kernel_package (CMake); the output is rewritten only when it changes.\n"
      "--description also writes it as the JSON file that ships beside the package's stores\n"
      "(<name>-<version>.package.json; docs/packages.md), which commands read on a node\n"
      "without the project.\n"
      "Exit codes: 0 ok, 2 usage, 6 a project file missing, 10 a malformed one, 9 io.");
  struct Opts {
    std::string source, symbol, output, depfile, description;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--source", o->source, "the kernel project (default: as for every command)");
  cmd->add_option("--symbol", o->symbol, "the C function to define")->required();
  cmd->add_option("--output", o->output, "the C file to write")->required();
  cmd->add_option("--description", o->description,
                  "also write the description as JSON to this file (installed beside the "
                  "package's stores as <name>-<version>.package.json)");
  cmd->add_option("--depfile", o->depfile,
                  "also write a Makefile-style dependency file listing every input");
  cmd->callback([o, &rc] {
    if (!project::is_c_identifier(o->symbol))
      throw Error(ErrorKind::Usage, "--symbol '" + o->symbol + "' is not a C identifier");
    project::Project project = project::load_project(project_dir(o->source, false));
    project::PackageData data(project);
    std::string text = data.to_c_source(o->symbol);
    auto write_if_changed = [](const std::string& path, const std::string& bytes) {
      std::ifstream in(path, std::ios::binary);
      std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (in && old == bytes) return;
      io::write_file_atomically(path, bytes);
    };
    write_if_changed(o->output, text);
    if (!o->description.empty())
      write_if_changed(o->description, project::package_description_json(*data.get()));
    if (!o->depfile.empty()) {
      auto esc = [](const std::string& p) {
        std::string out;
        for (char ch : p) {
          if (ch == ' ' || ch == '#' || ch == '\\') out += '\\';
          if (ch == '$') out += '$';
          out += ch;
        }
        return out;
      };
      std::string dep = esc(o->output) + ":";
      for (const auto& in : data.inputs()) dep += " \\\n  " + esc(in.string());
      write_if_changed(o->depfile, dep + "\n");
    }
    std::cerr << "kiln package-source: " << project.name << " " << project.version << ", "
              << data.get()->kernel_count << " specialisations, " << data.get()->file_count
              << " files -> " << o->output << "\n";
    rc = 0;
  });
}

}  // namespace kiln::commands
