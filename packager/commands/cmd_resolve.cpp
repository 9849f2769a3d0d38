// `kiln resolve URI [--device sm_90|auto] [--driver X.Y] [--explain] [--json]`: the loader's
// decision for one URI, without loading anything. --device answers for a GPU that is not
// present, --driver for a driver that is not (its CUDA version weighed against each toolkit).
#include <iostream>

#include "commands/commands.hpp"
#include "format/target.hpp"
#include "format/toolkit.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "plan/resolver.hpp"
#include "project/package.hpp"

namespace kiln::commands {

// "sm_90", "sm_90a" (the device is CC 9.0 either way), "9.0", "90".
int parse_device_cc(const std::string& text, const std::string& other_words) {
  if (auto t = format::parse_target(text); t && t->kind == format::Target::Kind::Sass) return t->arch;
  std::string digits;
  for (char c : text)
    if (c != '.') digits += c;
  if (!digits.empty() && digits.size() <= 3 &&
      digits.find_first_not_of("0123456789") == std::string::npos && digits[0] != '0' &&
      (text.find('.') == std::string::npos || text.size() - text.find('.') == 2))
    return std::stoi(digits);
  throw Error(ErrorKind::Usage, "--device '" + text +
                                    "' is not a device: expected sm_<arch> (e.g. sm_90), a "
                                    "compute capability (9.0) or " +
                                    other_words);
}

void add_resolve_command(CLI::App& app, int& rc);
void add_resolve_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "resolve",
      "show where the loader would take a kernel from for a device, and why every other "
      "candidate was rejected (local stores, then mirrors, then JIT; nothing is loaded, "
      "downloaded or compiled). Reads the same settings as libkiln, every KILN_* variable of "
      "docs/loader.md (those that decide the answer: KILN_ARTIFACT_PATH, KILN_CACHE_DIR, "
      "KILN_MIRRORS, KILN_INDEX_SHA256, KILN_OFFLINE, KILN_DISABLE_JIT, KILN_ALLOW_STALE); a bad "
      "value is a usage error (exit 2). "
      "Exit 0 when a source was found, 6 when none.");
  struct Opts {
    std::string uri;
    std::string device = "auto";
    std::string driver;
    bool explain = false;
    bool json = false;
    PackageOptions pkg;
  };
  auto o = std::make_shared<Opts>();
  add_described_package_options(cmd, o->pkg);
  cmd->add_option("uri", o->uri, "kernel URI, e.g. rmsnorm_dtype_bf16_block_256")->required();
  cmd->add_option("--device", o->device,
                  "sm_<arch> or a compute capability (9.0) to answer for a GPU that is not "
                  "here; auto = the current CUDA device (needs the driver)")
      ->capture_default_str();
  cmd->add_option("--driver", o->driver,
                  "a driver's CUDA version (12.8) to answer for a driver that is not here: each "
                  "candidate's toolkit and the JIT tier's NVRTC are weighed against it; default: "
                  "this machine's driver, when there is one");
  cmd->add_flag("--explain", o->explain, "also list every directory searched and each rejection");
  cmd->add_flag("--json", o->json,
                "print {uri, device, driver, chosen: {tier, target, path, reason} | null, rejected: "
                "[{tier, target, path, reason}]}");
  cmd->callback([o, &rc] {
    std::optional<int> cc;
    if (o->device != "auto") cc = parse_device_cc(o->device, "auto");
    std::optional<int> driver;
    if (!o->driver.empty()) driver = format::parse_driver_option(o->driver, "--driver");
    LoaderConfig cfg = LoaderConfig::from_env();
    DescribedPackage described = describe_package(o->pkg, description_stores(cfg), o->json);
    const project::PackageData& data = *described.data;
    // The store a tarball installs beside this kiln (<prefix>/share/kiln/artifacts), as the
    // package's library installed there would find it.
    cfg.installed_store = plan::installed_store_dir(reinterpret_cast<const void*>(&add_resolve_command));
    Loader loader(*data.get(), cfg);
    Resolution r = loader.resolve(o->uri, cc, driver);
    rc = r.chosen ? 0 : exit_code(ErrorKind::NotFound);
    if (o->json) {
      std::cout << r.to_json();
      return;
    }
    if (r.chosen)
      std::cout << r.uri << " on " << r.device << ": " << r.chosen->tier
                << (r.chosen->target.empty() ? "" : " " + r.chosen->target) << " " << r.chosen->path
                << "\n";
    else if (r.rejected.empty())
      std::cout << r.uri << " on " << r.device << ": no source (run with --explain for why)\n";
    else  // the word of the last tier walked: why the walk ended with nothing
      std::cout << r.uri << " on " << r.device << ": no source; " << r.rejected.back().tier << ": "
                << r.rejected.back().reason << " (run with --explain for every rejection)\n";
    if (!o->explain) return;
    std::cout << "driver: "
              << (r.driver.empty() ? std::string("not known (no driver here, no --driver): the "
                                                 "toolkits that built each candidate were not weighed")
                                   : r.driver + (driver ? " (--driver)" : "") +
                                         ": each candidate's toolkit weighed against it")
              << "\n";
    if (r.chosen && !r.chosen->reason.empty()) std::cout << "why: " << r.chosen->reason << "\n";
    std::cout << "searched, in order:\n";
    for (const auto& s : r.searched) std::cout << "  " << s << "\n";
    std::cout << "rejected:\n";
    if (r.rejected.empty()) std::cout << "  (none)\n";
    for (const auto& c : r.rejected)
      std::cout << "  [" << c.tier << (c.target.empty() ? "" : " " + c.target) << "] "
                << (c.path.empty() ? "" : c.path + ": ") << c.reason << "\n";
  });
}

// cmd_doctor.cpp
void add_doctor_command(CLI::App& app, int& rc);

void add_loader_commands(CLI::App& app, int& rc) {
  add_resolve_command(app, rc);
  add_doctor_command(app, rc);
}

}  // namespace kiln::commands
