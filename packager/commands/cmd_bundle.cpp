// `kiln bundle`: the trusted TUF metadata of a release and the archives some devices or targets
// need, gathered from a TUF mirror into a directory or a .tar.zst for an air-gapped machine,
// where `kiln install --bundle` verifies and installs it (bundle.hpp, docs/tuf.md "Bundles").
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "builder/build.hpp"
#include "commands/commands.hpp"
#include "format/toolkit.hpp"
#include "kiln/error.hpp"
#include "release/bundle.hpp"
#include "runtime/environment.hpp"

namespace kiln::commands {

namespace {

struct BundleArgs {
  std::string out;
  std::string targets;
  std::vector<std::string> devices;
  std::vector<std::string> mirrors;
  std::vector<std::string> releases;
  std::string driver;  // --driver; "" = this node's driver, when there is one
  fetch::FetchOptions fetch;
  PackageOptions pkg;
  bool json = false;
  double timeout_s = 0;
};

// The request the options make: each --release, else the package chosen (choose_package); the
// fetch options completed from the environment; the entries' time from SOURCE_DATE_EPOCH.
release::BundleRequest bundle_request(const BundleArgs& o) {
  release::BundleRequest req;
  fetch::FetchOptions flags = o.fetch;
  flags.mirrors = o.mirrors;
  flags.timeout_ms = std::max(1L, std::lround(o.timeout_s * 1000));
  for (const auto& r : o.releases) {
    ReleaseArg named = parse_release_arg(r);
    req.releases.push_back({named.package, named.version, {}});
  }
  if (req.releases.empty()) {
    ChosenPackage chosen = choose_package(o.pkg, o.json);
    req.releases.push_back({chosen.name, chosen.version, {}});
  }
  req.fetch = with_environment(std::move(flags));
  req.targets = split_list(o.targets);
  for (const auto& d : o.devices) req.devices.push_back(device_cc(d));
  req.out = o.out;
  if (std::string sde = runtime::read_environment().source_date_epoch; !sde.empty())
    req.mtime = builder::parse_source_date_epoch(sde);
  return req;
}

std::string bundle_json(const std::string& out, const release::BundleResult& r,
                        const DriverChoice& driver) {
  nlohmann::ordered_json j;
  j["out"] = out;
  j["driver"] = driver.number > 0 ? nlohmann::ordered_json(format::driver_cuda_version(driver.number).str())
                                  : nlohmann::ordered_json(nullptr);
  j["driver_from"] = driver.number > 0 ? nlohmann::ordered_json(driver.from) : nlohmann::ordered_json(nullptr);
  if (r.releases.size() == 1) {  // one release: its fields at the top, as before
    j["package"] = r.releases.front().package;
    j["version"] = r.releases.front().version;
    j["targets"] = r.releases.front().targets;
  }
  j["releases"] = nlohmann::ordered_json::array();
  for (const auto& rel : r.releases)
    j["releases"].push_back(
        {{"package", rel.package}, {"version", rel.version}, {"targets", rel.targets}});
  j["root_version"] = r.root_version;
  j["timestamp_version"] = r.timestamp_version;
  j["timestamp_expires"] = r.timestamp_expires;
  j["files"] = r.files;
  return j.dump(2) + "\n";
}

void print_bundle(const std::string& out, const release::BundleResult& r) {
  std::cout << "bundle " << out << ": root v" << r.root_version << ", timestamp v"
            << r.timestamp_version << " (expires " << r.timestamp_expires << ")\n";
  for (const auto& rel : r.releases) {
    std::cout << "  release " << rel.package << " " << rel.version << ":";
    for (const auto& t : rel.targets) std::cout << " " << t;
    std::cout << "\n";
  }
  for (const auto& f : r.files) std::cout << "  " << f << "\n";
  std::cout << "install it offline: kiln install --bundle " << out
            << " --tuf-root ROOT --dest STORE (before " << r.timestamp_expires
            << ", or with --expiry-reference)\n";
}

}  // namespace

void add_bundle_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "bundle",
      "gather, from a TUF mirror (kiln tuf-repo), the signed metadata of one or several releases\n"
      "(root chain, timestamp, snapshot, targets, delegations), each release's index and\n"
      "description, and the archives chosen by --targets or --device (of every release) into\n"
      "OUT, a new directory or a FILE.tar.zst, for `kiln install --bundle OUT --tuf-root ROOT`\n"
      "on a machine without network. The releases: each --release NAME-VERSION; else the one\n"
      "--package/--version/--source name, or the package described beside kiln (stderr says\n"
      "which). Everything is fetched and verified as\n"
      "`kiln fetch --tuf-root` does (same root, metadata in $KILN_CACHE_DIR/tuf/), and the bundle\n"
      "is verified as an installer would before it is written. Trust: --tuf-root, else\n"
      "KILN_TUF_ROOT, else the root installed beside kiln; an index pin cannot make a bundle.\n"
      "Exit codes as kiln fetch (docs/exit-codes.md).");
  auto o = std::make_shared<BundleArgs>();
  o->timeout_s = static_cast<double>(o->fetch.timeout_ms) / 1000;
  cmd->add_option("--out", o->out, "the bundle to write: a new directory, or FILE.tar.zst")
      ->required();
  cmd->add_option("--targets", o->targets, "comma-separated targets, e.g. sm_90a,sm_80");
  cmd->add_option("--device", o->devices,
                  "a device to carry the best archive for: sm_XX, a compute capability (9.0), or "
                  "auto; repeat for several")
      ->take_all();
  add_driver_option(cmd, o->driver,
                    "of each target, the archive of the newest toolkit it runs is carried, and "
                    "--device passes over a target it runs none of");
  cmd->add_option("--mirror", o->mirrors, "TUF mirror URL (repeat: tried in order)");
  cmd->add_option("--tuf-root", o->fetch.tuf_root, "the TUF root.json the bundle is verified with");
  cmd->add_option("--release", o->releases,
                  "a release to carry, NAME-VERSION (e.g. kiln-kernels-0.1.0); repeat for several "
                  "(of one or several packages); instead of --package/--version/--source")
      ->check(release_name_option());
  add_package_options(cmd, o->pkg);
  cmd->add_option("--ca-bundle", o->fetch.ca_bundle, "PEM file of CA certificates for https");
  cmd->add_option("--timeout", o->timeout_s, "seconds the whole fetch may take")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print the result as JSON on stdout");
  cmd->callback([o, &rc] {
    const DriverChoice driver = choose_driver(o->driver);  // a bad --driver fails first
    release::BundleRequest req = bundle_request(*o);
    // Of each target, the newest toolkit this driver runs (fetch.hpp FetchOptions::driver).
    req.fetch.driver = driver.number;
    // Progress goes to stderr so that --json output on stdout stays parseable.
    util::ProgressLine progress(stderr, util::progress_style_for(stderr), "kiln bundle: ");
    report_progress(req.fetch, progress);
    release::BundleResult r = release::write_bundle(req);
    progress.finish();
    if (o->json) {
      std::cout << bundle_json(o->out, r, driver);
    } else {
      print_bundle(o->out, r);
      std::cout << "driver: " << driver.words() << "\n";
    }
    rc = 0;
  });
}

}  // namespace kiln::commands
