// `kiln compat [--loader LIB|this] [--device sm_XX|auto|none]... [--driver X.Y] PACKAGE...
// [--json]`: does a package work with this libkiln (or another build of it) on this GPU and this
// driver? A yes, or a precise no.
#include <iostream>
#include <memory>

#include "commands/commands.hpp"
#include "kiln/error.hpp"
#include "kiln/config.hpp"
#include "release/compat.hpp"
#include "release/compat_inputs.hpp"
#include "release/loader_facts.hpp"
#include "runtime/driver.hpp"

namespace kiln::commands {

namespace {

struct CompatArgs {
  std::vector<std::string> packages;
  std::string loader = "this";
  PackageOptions pkg;
  std::string devices = "auto";
  std::string driver;  // "" = this node's driver, when there is one
  bool json = false;
};

// Every GPU the CUDA driver reports (throws without a driver).
std::vector<int> present_devices() {
  auto driver = runtime::make_cuda_driver();
  driver->init();
  std::vector<int> ccs;
  for (const auto& dev : driver->devices()) ccs.push_back(dev.cc);
  return ccs;
}

// The report over every input: the package given (--source, --package, --version) judges every
// input; else each input that names its package is judged as that one (its description as kiln
// finds it), and the default only those naming none.
release::CompatReport compat(const CompatArgs& o) {
  const release::LoaderFacts loader = o.loader == "this" ? release::this_loader_facts() : release::open_loader_facts(o.loader);
  const std::vector<std::filesystem::path> stores = description_stores(LoaderConfig::from_env());
  const std::vector<int> devices = release::compat_devices(
      split_list(o.devices), [](const std::string& d) { return parse_device_cc(d, "auto or none"); },
      present_devices);
  std::optional<release::LoaderFacts> given;
  auto default_facts = [&]() -> const release::LoaderFacts& {
    if (!given) {
      given = loader;
      release::set_package(*given, *describe_package(o.pkg, stores, o.json).data->get());
    }
    return *given;
  };
  return release::check_compat_inputs(o.packages, devices, [&](const std::filesystem::path& input) {
    std::optional<release::InputRelease> named;
    if (!package_given(o.pkg)) named = release::release_named_by(input);
    if (!named) return default_facts();
    auto d = describe_package_named_by_input(o.pkg, stores, named->package, named->version,
                                             named->beside, o.json);
    return release::facts_judged_as(loader, *named, d ? d->data->get() : nullptr);
  });
}

}  // namespace

void add_compat_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "compat",
      "answer whether packages (archives, an index, a store, wheels, kiln tarballs) will be "
      "accepted by this libkiln or another build of it (--loader LIB): manifest format "
      "version, package version, each kernel's source hash, and whether a target runs on the "
      "device(s) and whether the driver (this node's, or --driver X.Y) runs the toolkit that "
      "built one of them. Each input that names its package (an index, archive, manifest or wheel) is "
      "judged as that package unless --source/--package/--version name one: by the current "
      "directory's project when it is that package, else its installed description, else the "
      "one beside the input, else without one (source hashes unchecked, and said). Exit 0 only "
      "when every package is compatible; otherwise the exit code of the worst problem (4 stale: "
      "version/format/hash; 5 unsupported: no target for the device, or nothing the driver runs; 3 integrity; 10 format; 6 "
      "not found). Every problem names the field and both values.");
  auto o = std::make_shared<CompatArgs>();
  cmd->add_option("PACKAGE", o->packages, "archive, index, store directory, wheel or tarball")
      ->required();
  cmd->add_option("--loader", o->loader,
                  "the libkiln to answer for: `this` (the one this kiln runs with, default) or "
                  "the path of another libkiln.so");
  add_described_package_options(cmd, o->pkg);
  cmd->add_option("--device", o->devices,
                  "comma-separated devices to check targets against: sm_90, 9.0, auto (every GPU "
                  "present; default) or none");
  add_driver_option(cmd, o->driver,
                    "a release with nothing it runs (on the devices checked) is unsupported");
  cmd->add_flag("--json", o->json,
                "print {loader, devices, driver, driver_from, compatible, exit_code, packages: [{path, kind, judged_as, "
                "compatible, manifests, problems: [{kind, field, where, package, loader, "
                "message}], notes}]}");
  cmd->callback([o, &rc] {
    const DriverChoice driver = choose_driver(o->driver);  // a bad --driver fails first
    release::CompatReport rep = compat(*o);
    release::check_driver(rep, driver.number, driver.from);
    std::cout << (o->json ? rep.to_json() : rep.to_table());
    rc = rep.exit_code();
  });
}

}  // namespace kiln::commands
