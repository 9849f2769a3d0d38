#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "kiln/registry.hpp"

namespace kiln::cli {

std::string default_source_dir() {
#ifdef KILN_SOURCE_DIR
  return KILN_SOURCE_DIR;
#else
  return ".";
#endif
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
                   "read registry/kernels.json and kernels/ from this source tree instead of "
                   "the registry embedded in this kiln");
  list->callback([opts, &rc] {
    Registry owned;
    const Registry* r = &embedded_registry();
    if (!opts->source.empty()) {
      owned = load_registry(opts->source);
      r = &owned;
    }
    if (opts->json) {
      std::cout << registry_to_json(*r);
    } else {
      for (const auto& s : r->specialisations) {
        const Family* fam = r->family(s.family);
        std::string targets;
        for (const auto& t : fam->targets) targets += (targets.empty() ? "" : ",") + t.text;
        std::printf("%-44s %-14s %-10s %.12s\n", s.uri.c_str(), s.family.c_str(), targets.c_str(),
                    s.source_hash.c_str());
      }
      std::printf("%zu specialisations in %zu families (%s)\n", r->specialisations.size(),
                  r->families.size(), r->origin.c_str());
    }
    rc = 0;
  });
}

}  // namespace kiln::cli
