#include "release/compat_inputs.hpp"

#include <set>

#include "kiln/error.hpp"

namespace kiln::release {

LoaderFacts facts_judged_as(const LoaderFacts& loader, const InputRelease& named,
                            const kiln_package* described) {
  LoaderFacts f = loader;
  if (described) {
    set_package(f, *described);
    return f;
  }
  f.package = named.package;
  f.package_version = named.version;
  f.source_hashes.clear();
  f.kernels_known = false;
  return f;
}

CompatReport check_compat_inputs(
    const std::vector<std::string>& inputs, const std::vector<int>& devices,
    const std::function<LoaderFacts(const std::filesystem::path&)>& facts_for) {
  std::optional<CompatReport> rep;
  for (const auto& input : inputs) {
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
  if (!rep) throw Error(ErrorKind::Usage, "kiln compat needs at least one package");
  check_target_wheels_together(*rep);  // the wheels of every input, as one set
  return std::move(*rep);
}

std::vector<int> compat_devices(const std::vector<std::string>& values,
                                const std::function<int(const std::string&)>& parse,
                                const std::function<std::vector<int>()>& present) {
  std::set<int> ccs;
  for (const auto& d : values) {
    if (d == "none") continue;
    if (d != "auto") {
      ccs.insert(parse(d));
      continue;
    }
    try {
      for (int cc : present()) ccs.insert(cc);
    } catch (const Error&) {
      // No driver or no device: targets are not checked, and the report says so.
    }
  }
  return {ccs.begin(), ccs.end()};
}

}  // namespace kiln::release
