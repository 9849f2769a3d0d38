#include <filesystem>
#include <iostream>

#include "commands/commands.hpp"
#include "project/package.hpp"
#include "project/project_paths.hpp"
#include "project/registry.hpp"

namespace kiln::commands {

std::string default_source_dir() {
#ifdef KILN_SOURCE_DIR
  return project::default_project_dir(KILN_SOURCE_DIR);
#else
  return project::default_project_dir("");
#endif
}

std::string project_dir(const std::string& source, bool quiet) {
  if (!source.empty()) return source;
  std::string dir = default_source_dir();
  if (dir != "." && !quiet) {
    std::error_code ec;
    std::cerr << "kiln: no kernel project in " << std::filesystem::current_path(ec).string()
              << " (no registry/package.json); using the project this kiln was built from, " << dir
              << " (pass --source to choose)\n";
  }
  return dir;
}

void add_registry_command(CLI::App& app, int& rc) {
  auto* reg = app.add_subcommand("registry", "inspect the kernel registry");
  reg->require_subcommand(1);
  auto* list = reg->add_subcommand(
      "list", "print every specialisation: URI, family, parameters, targets, source hash");
  struct Opts {
    bool json = false;
    std::string source;
  };
  auto opts = std::make_shared<Opts>();
  list->add_flag("--json", opts->json, "machine-readable output (stable bytes)");
  list->add_option("--source", opts->source,
                   "the kernel project (VERSION, registry/, kernels/) to list (default: the "
                   "current directory when it holds registry/package.json, else the tree this "
                   "kiln was built from)");
  list->callback([opts, &rc] {
    project::Project project = project::load_project(project_dir(opts->source, opts->json));
    const project::Registry* r = &project.registry;
    if (opts->json) {
      std::cout << project::registry_to_json(*r);
    } else {
      for (const auto& s : r->specialisations) {
        const project::Family* fam = r->family(s.family);
        std::string targets;
        for (const auto& t : fam->targets) targets += (targets.empty() ? "" : ",") + t.text;
        std::printf("%-44s %-14s %-10s %.12s\n", s.uri.c_str(), s.family.c_str(), targets.c_str(),
                    s.source_hash.c_str());
      }
      std::printf("%zu specialisations in %zu families of package %s %s (%s)\n",
                  r->specialisations.size(), r->families.size(), project.name.c_str(),
                  project.version.c_str(), r->origin.c_str());
    }
    rc = 0;
  });
}

}  // namespace kiln::commands
