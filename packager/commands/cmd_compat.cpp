// `kiln compat [--loader LIB|this] [--device sm_XX|auto|none]... PACKAGE... [--json]`: does a
// package work with this libkiln (or another build of it) on this GPU? A yes, or a precise no.
#include <iostream>
#include <memory>
#include <set>

#include "commands/commands.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "release/compat.hpp"
#include "release/loader_facts.hpp"
#include "runtime/driver.hpp"

namespace kiln::cli {

void add_compat_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "compat",
      "answer whether packages (archives, an index, a store, wheels, kiln tarballs) will be "
      "accepted by this libkiln or another build of it (--loader LIB): manifest format "
      "version, package version, each kernel's source hash, and whether a target runs on the "
      "device(s). Exit 0 only when every package is compatible; otherwise the exit code of the "
      "worst problem (4 stale: version/format/hash; 5 unsupported: no target for the device; "
      "3 integrity; 10 format; 6 not found). Every problem names the field and both values.");
  struct Opts {
    std::vector<std::string> packages;
    std::string loader = "this";
    PackageOptions pkg;
    std::string devices = "auto";
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("PACKAGE", o->packages, "archive, index, store directory, wheel or tarball")
      ->required();
  cmd->add_option("--loader", o->loader,
                  "the libkiln to answer for: `this` (the one this kiln runs with, default) or "
                  "the path of another libkiln.so");
  add_described_package_options(cmd, o->pkg);
  cmd->add_option("--device", o->devices,
                  "comma-separated devices to check targets against: sm_90, 9.0, auto (every GPU "
                  "present; default) or none");
  cmd->add_flag("--json", o->json,
                "print {loader, devices, compatible, exit_code, packages: [{path, kind, "
                "compatible, manifests, problems: [{kind, field, where, package, loader, "
                "message}], notes}]}");
  cmd->callback([o, &rc] {
    LoaderFacts facts = o->loader == "this" ? this_loader_facts() : open_loader_facts(o->loader);
    set_package(facts, *describe_package(o->pkg, description_stores(LoaderConfig::from_env()), o->json)
                            .data->get());
    std::set<int> ccs;
    std::vector<std::string> devs = split_list(o->devices);
    for (const auto& d : devs) {
      if (d == "none") continue;
      if (d != "auto") {
        ccs.insert(parse_device_cc(d, "auto or none"));
        continue;
      }
      try {
        auto driver = make_cuda_driver();
        driver->init();
        for (const auto& dev : driver->devices()) ccs.insert(dev.cc);
      } catch (const Error&) {
        // No driver or no device: targets are not checked, and the report says so.
      }
    }
    std::vector<std::filesystem::path> pkgs(o->packages.begin(), o->packages.end());
    CompatReport rep = check_compat(facts, std::vector<int>(ccs.begin(), ccs.end()), pkgs);
    std::cout << (o->json ? rep.to_json() : rep.to_table());
    rc = rep.exit_code();
  });
}

}  // namespace kiln::cli
