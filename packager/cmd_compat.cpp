// `kiln compat [--loader LIB|this] [--device sm_XX|auto|none]... PACKAGE... [--json]`: does a
// package work with this libkiln (or another build of it) on this GPU? A yes, or a precise no.
#include <algorithm>
#include <iostream>
#include <memory>
#include <set>

#include "commands.hpp"
#include "compat.hpp"
#include "driver.hpp"
#include "kiln/error.hpp"
#include "kiln/target.hpp"
#include "loader_facts.hpp"

namespace kiln::cli {

namespace {

// "sm_90", "sm_90a" (CC 9.0 either way), "9.0", "90".
int parse_device_cc(const std::string& text) {
  if (auto t = parse_target(text); t && t->kind == Target::Kind::Sass) return t->arch;
  std::string digits;
  for (char c : text)
    if (c != '.') digits += c;
  bool ok = !digits.empty() && digits.size() <= 3 &&
            digits.find_first_not_of("0123456789") == std::string::npos && digits[0] != '0' &&
            (text.find('.') == std::string::npos || text.size() - text.find('.') == 2);
  if (!ok)
    throw Error(ErrorKind::Usage, "--device '" + text +
                                      "' is not a device: expected sm_<arch> (e.g. sm_90), a "
                                      "compute capability (9.0), auto or none");
  return std::stoi(digits);
}

}  // namespace

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
    std::string devices = "auto";
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("PACKAGE", o->packages, "archive, index, store directory, wheel or tarball")
      ->required();
  cmd->add_option("--loader", o->loader,
                  "the libkiln to answer for: `this` (the one this kiln runs with, default) or "
                  "the path of another libkiln.so");
  cmd->add_option("--device", o->devices,
                  "comma-separated devices to check targets against: sm_90, 9.0, auto (every GPU "
                  "present; default) or none");
  cmd->add_flag("--json", o->json,
                "print {loader, devices, compatible, exit_code, packages: [{path, kind, "
                "compatible, manifests, problems: [{kind, field, where, package, loader, "
                "message}], notes}]}");
  cmd->callback([o, &rc] {
    LoaderFacts facts = o->loader == "this" ? this_loader_facts() : open_loader_facts(o->loader);
    std::set<int> ccs;
    std::vector<std::string> devs;
    for (std::size_t at = 0; at <= o->devices.size();) {
      std::size_t comma = std::min(o->devices.find(',', at), o->devices.size());
      if (comma > at) devs.push_back(o->devices.substr(at, comma - at));
      at = comma + 1;
    }
    for (const auto& d : devs) {
      if (d == "none") continue;
      if (d != "auto") {
        ccs.insert(parse_device_cc(d));
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
