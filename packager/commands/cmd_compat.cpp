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
      "device(s). Each input that names its package (an index, archive, manifest or wheel) is "
      "judged as that package unless --source/--package/--version name one: by the current "
      "directory's project when it is that package, else its installed description, else the "
      "one beside the input, else without one (source hashes unchecked, and said). Exit 0 only "
      "when every package is compatible; otherwise the exit code of the worst problem (4 stale: "
      "version/format/hash; 5 unsupported: no target for the device; 3 integrity; 10 format; 6 "
      "not found). Every problem names the field and both values.");
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
                "print {loader, devices, compatible, exit_code, packages: [{path, kind, judged_as, "
                "compatible, manifests, problems: [{kind, field, where, package, loader, "
                "message}], notes}]}");
  cmd->callback([o, &rc] {
    const LoaderFacts loader =
        o->loader == "this" ? this_loader_facts() : open_loader_facts(o->loader);
    const std::vector<std::filesystem::path> stores = description_stores(LoaderConfig::from_env());
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
    const std::vector<int> devices(ccs.begin(), ccs.end());
    // The package given (--source, --package, --version) judges every input; else each input
    // that names its package is judged as that one, and the default only those naming none.
    std::optional<LoaderFacts> given;
    auto default_facts = [&]() -> const LoaderFacts& {
      if (!given) {
        given = loader;
        set_package(*given, *describe_package(o->pkg, stores, o->json).data->get());
      }
      return *given;
    };
    auto facts_for = [&](const std::filesystem::path& input) -> LoaderFacts {
      std::optional<InputRelease> named;
      if (!package_given(o->pkg)) named = release_named_by(input);
      if (!named) return default_facts();
      LoaderFacts f = loader;
      if (auto d = describe_package_named_by_input(o->pkg, stores, named->package, named->version,
                                                   named->beside, o->json)) {
        set_package(f, *d->data->get());
        return f;
      }
      f.package = named->package;
      f.package_version = named->version;
      f.source_hashes.clear();
      f.kernels_known = false;
      return f;
    };
    std::optional<CompatReport> rep;
    for (const auto& input : o->packages) {
      LoaderFacts f = facts_for(input);
      CompatReport one = check_compat(f, devices, {input}, /*wheels_as_a_set=*/false);
      for (auto& p : one.packages) {
        p.judged_as = f.package + " " + f.package_version;
        if (!f.kernels_known && p.kind != "package-wheel")  // a package wheel carries its own
          p.notes.push_back("no description of " + p.judged_as +
                            " beside it or installed: its kernels' source hashes are not checked");
        else if (rep && rep->loader.package != f.package)
          p.notes.push_back("judged as " + p.judged_as + ", the package it names");
      }
      if (!rep)
        rep = std::move(one);
      else
        rep->packages.insert(rep->packages.end(), one.packages.begin(), one.packages.end());
    }
    check_target_wheels_together(*rep);  // the wheels of every input, as one set
    std::cout << (o->json ? rep->to_json() : rep->to_table());
    rc = rep->exit_code();
  });
}

}  // namespace kiln::cli
