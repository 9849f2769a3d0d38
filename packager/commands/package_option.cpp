// The package a command acts on (commands.hpp: PackageOptions), and `kiln package-source`,
// which writes a project's package description for kiln_add_kernel_package.
#include <fstream>
#include <iostream>

#include "commands/commands.hpp"
#include "format/manifest.hpp"
#include "io/atomic_file.hpp"
#include "project/package.hpp"

namespace kiln::cli {

CLI::Validator package_name_option() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (is_package_name(value)) return "";
        return "--package '" + value.substr(0, 80) + "': " + kPackageNameRule;
      },
      "NAME");
}

void add_package_options(CLI::App* cmd, PackageOptions& o, bool with_version) {
  cmd->add_option("--source", o.source,
                  "the kernel project (VERSION, registry/package.json, registry/kernels.json, "
                  "kernels/) whose package this acts on (default: the current directory when it "
                  "holds registry/package.json, else the tree this kiln was built from)");
  cmd->add_option("--package", o.package, "the package's name instead of the project's")
      ->check(package_name_option());
  if (with_version)
    cmd->add_option("--version", o.version, "the package's version instead of the project's")
        ->check(package_version_option());
}

ChosenPackage choose_package(const PackageOptions& o) {
  ChosenPackage c;
  if (!o.package.empty() && !o.version.empty() && o.source.empty()) {
    c.name = o.package;
    c.version = o.version;
    return c;
  }
  std::string dir = o.source.empty() ? default_source_dir() : o.source;
  Project p = load_project(dir);
  c.name = o.package.empty() ? p.name : o.package;
  c.version = o.version.empty() ? p.version : o.version;
  c.project_dir = p.root.string();
  return c;
}

void add_package_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "package-source",
      "write a kernel project's package description (kiln/package.h) as a C source defining\n"
      "`const kiln_package* SYMBOL(void)`: the name, version, every specialisation (URI,\n"
      "parameters, entries, source hash) and the sources the JIT tier compiles from. Run by\n"
      "kiln_add_kernel_package (CMake); the output is rewritten only when it changes.\n"
      "Exit codes: 0 ok, 2 usage, 6 a project file missing, 10 a malformed one, 9 io.");
  struct Opts {
    std::string source, symbol, output, depfile;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--source", o->source, "the kernel project (default: as for every command)");
  cmd->add_option("--symbol", o->symbol, "the C function to define")->required();
  cmd->add_option("--output", o->output, "the C file to write")->required();
  cmd->add_option("--depfile", o->depfile,
                  "also write a Makefile-style dependency file listing every input");
  cmd->callback([o, &rc] {
    if (!is_c_identifier(o->symbol))
      throw Error(ErrorKind::Usage, "--symbol '" + o->symbol + "' is not a C identifier");
    Project project = load_project(o->source.empty() ? default_source_dir() : o->source);
    PackageData data(project);
    std::string text = data.to_c_source(o->symbol);
    auto write_if_changed = [](const std::string& path, const std::string& bytes) {
      std::ifstream in(path, std::ios::binary);
      std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (in && old == bytes) return;
      write_file_atomically(path, bytes);
    };
    write_if_changed(o->output, text);
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

}  // namespace kiln::cli
