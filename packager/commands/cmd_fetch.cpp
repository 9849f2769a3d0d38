// `kiln fetch`: download, verify and unpack release archives from trusted mirrors into a store.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "commands/commands.hpp"
#include "fetch/fetch.hpp"
#include "format/target.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "format/toolkit.hpp"
#include "plan/device_fetch.hpp"
#include "plan/resolver.hpp"
#include "runtime/driver.hpp"

namespace kiln::commands {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + " ") {
    if (c == ' ' || c == ',' || c == '\t' || c == '\n') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

void report_progress(fetch::FetchOptions& opts, util::ProgressLine& progress) {
  opts.log = [&progress](const std::string& line) { progress.line(line); };
  opts.progress = [&progress](const std::string& file, std::uint64_t received, std::uint64_t size) {
    progress.bytes(file, received, size);
  };
}

fetch::FetchOptions with_environment(fetch::FetchOptions opts) {
  // The loader's one table and the mirror tier's own mapping: the same variables, values and
  // errors as libkiln.
  const fetch::FetchOptions env = plan::mirror_fetch_options(LoaderConfig::from_env(), plan::installed_tuf_root());
  if (opts.mirrors.empty()) opts.mirrors = env.mirrors;
  if (opts.index_sha256.empty()) opts.index_sha256 = env.index_sha256;
  if (opts.tuf_root.empty()) opts.tuf_root = env.tuf_root;
  if (opts.ca_bundle.empty()) opts.ca_bundle = env.ca_bundle;
  opts.installed_tuf_root = env.installed_tuf_root;
  opts.tuf_metadata_dir = env.tuf_metadata_dir;
  if (env.offline) opts.offline = true;
  return opts;
}

int device_cc(const std::string& device) {
  if (device != "auto") return parse_device_cc(device, "auto");
  std::vector<runtime::DeviceInfo> devs;
  try {
    auto driver = runtime::make_cuda_driver();
    driver->init();
    devs = driver->devices();
  } catch (const Error& e) {
    throw Error(ErrorKind::Unsupported,
                std::string("--device auto: no CUDA device to pick archives for (") + e.what() +
                    "); name one instead, e.g. --device sm_90");
  }
  if (devs.empty())
    throw Error(ErrorKind::Unsupported,
                "--device auto: the CUDA driver reports no device; name one instead, e.g. "
                "--device sm_90");
  return devs.front().cc;
}

namespace {

constexpr const char* kFetchHelp =
    "download the release archives for some targets (--targets) or for a device (--device)\n"
    "from trusted mirrors, verify them against the pinned index and unpack them into a store.\n"
    "--device sm_XX|X.Y|auto fetches the pinned index and picks by the loader's target-choice\n"
    "rule among the targets it lists: exact SASS, else SASS of the same major and a lower\n"
    "minor, else PTX of a lower or equal arch; the best one, then the next on failure.\n"
    "Re-running is a no-op that re-verifies what is there.\n"
    "Mirrors: --mirror, else KILN_MIRRORS, else the build's default list.\n"
    "Trust: --index-sha256 / KILN_INDEX_SHA256 (a digest pinning the index), or\n"
    "--tuf-root / KILN_TUF_ROOT (a TUF root: each mirror is then a TUF repository as\n"
    "`kiln tuf-repo` writes it, and the index and archives are verified through its signed\n"
    "metadata, kept in $KILN_CACHE_DIR/tuf/); not both. With neither: the root installed\n"
    "beside kiln (<prefix>/share/kiln/tuf/root.json), else the build's pin, else refused.\n"
    "Each archive's manifest must name the target, release and CUDA version of its index\n"
    "entry. Deadlines: --timeout for the whole command; --download-timeout per mirror for the\n"
    "index or TUF metadata (retries included), + size/--min-rate per archive request.\n"
    "Exit codes: 0 ok, 2 usage, 3 integrity (bad bytes everywhere, or an archive filed under\n"
    "another target; under TUF every attack: rollback, freeze, mix-and-match, bad or too few\n"
    "signatures, endless data, wrong target bytes, named in the error's \"attack\" field),\n"
    "4 stale (an index or archive of another package or release), 5 unsupported (--device: no\n"
    "archive of the release runs there; auto: no GPU), 6 not found (offline, no archive for a\n"
    "target, the release missing on every mirror: HTTP 404/410 or no such file, or a TUF root\n"
    "pointed at a mirror without TUF metadata), 8 network (no mirror could answer: refused,\n"
    "timed out, 5xx after retries, TLS; or --timeout passed), 9 io.";

struct FetchOpts {
  std::string targets;
  std::string device;
  std::string driver;  // --driver; "" = this node's driver, when there is one
  std::string dest;
  std::vector<std::string> mirrors;
  fetch::FetchOptions fetch;
  PackageOptions pkg;
  bool json = false;
  double timeout_s = 0;           // --timeout; set from FetchOptions' defaults below
  double download_timeout_s = 0;  // --download-timeout
};

// The options that tune transfers, in their own group of --help.
void add_tuning_options(CLI::App* cmd, FetchOpts& o) {
  auto* tuning = cmd->add_option_group("tuning");
  tuning->add_option("--max-parallel", o.fetch.max_parallel, "archives downloading at once")
      ->capture_default_str();
  tuning->add_option("--connect-timeout-ms", o.fetch.connect_timeout_ms)->capture_default_str();
  tuning
      ->add_option("--low-speed-bytes", o.fetch.low_speed_bytes,
                   "abort a transfer slower than this many bytes/s ...")
      ->capture_default_str();
  tuning->add_option("--low-speed-seconds", o.fetch.low_speed_seconds, "... for this many seconds")
      ->capture_default_str();
  tuning
      ->add_option("--retries", o.fetch.max_retries,
                   "further attempts per mirror for 5xx, 429 and connection errors")
      ->capture_default_str();
  tuning->add_option("--retry-base-ms", o.fetch.retry_base_ms, "first backoff delay")
      ->capture_default_str();
  tuning
      ->add_option("--download-timeout", o.download_timeout_s,
                   "seconds a mirror may take for the index or TUF metadata, all retries "
                   "together; for an archive, per request, plus its size at --min-rate; past "
                   "it the next mirror is asked")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  tuning
      ->add_option("--min-rate", o.fetch.download_min_rate,
                   "bytes/s an archive's deadline allows for its size (from the index or "
                   "the TUF targets metadata)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

// `chosen`: the target --device picked (cc its device), "" for --targets.
void print_fetch(const FetchOpts& o, const fetch::FetchOptions& opts, const fetch::FetchResult& r, int cc,
                 const std::string& chosen, const DriverChoice& driver) {
  if (o.json) {
    nlohmann::ordered_json j;
    if (!chosen.empty()) {
      j["device"] = plan::device_target(cc);
      j["target"] = chosen;
    }
    j["driver"] = driver.number > 0 ? nlohmann::ordered_json(format::driver_cuda_version(driver.number).str())
                                    : nlohmann::ordered_json(nullptr);
    j["driver_from"] = driver.number > 0 ? nlohmann::ordered_json(driver.from) : nlohmann::ordered_json(nullptr);
    j["package"] = opts.package;
    j["version"] = opts.version;
    j["installed"] = r.installed;
    j["already_present"] = r.already_present;
    j["description"] = r.description.empty() ? nlohmann::ordered_json(nullptr)
                                             : nlohmann::ordered_json(r.description);
    j["failures"] = nlohmann::ordered_json::array();
    for (const auto& f : r.failures) {
      nlohmann::ordered_json one = {{"mirror", f.mirror}, {"url", f.url}, {"what", f.what}};
      if (!f.attack.empty()) one["attack"] = f.attack;
      j["failures"].push_back(std::move(one));
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (!chosen.empty())
    std::cout << "CC " << plan::cc_string(cc) << ": " << chosen << " of release " << opts.package << " "
              << opts.version << "\n";
  std::cout << "driver: " << driver.words() << "\n";
  for (const auto& d : r.installed) std::cout << "installed " << d << "\n";
  for (const auto& d : r.already_present) std::cout << "present, verified " << d << "\n";
  if (!r.description.empty()) std::cout << "described " << r.description << "\n";
  if (!r.failures.empty())
    std::cout << r.failures.size() << " failed attempt(s) on the way; see above\n";
}

int run_fetch(const FetchOpts& o) {
  fetch::FetchOptions opts = o.fetch;
  // Of each target's archives, the newest toolkit this driver runs (fetch.hpp FetchOptions::driver).
  const DriverChoice driver = choose_driver(o.driver);
  opts.driver = driver.number;
  ChosenPackage chosen_pkg = choose_package(o.pkg, o.json);
  opts.package = chosen_pkg.name;
  opts.version = chosen_pkg.version;
  opts.mirrors = o.mirrors;
  opts.timeout_ms = std::max(1L, std::lround(o.timeout_s * 1000));
  opts.download_timeout_ms = std::max(1L, std::lround(o.download_timeout_s * 1000));
  opts = with_environment(std::move(opts));
  opts.with_description = true;
  // Progress goes to stderr so that --json output on stdout stays parseable.
  util::ProgressLine progress(stderr, util::progress_style_for(stderr), "kiln fetch: ");
  report_progress(opts, progress);
  if (!o.device.empty()) {
    const int cc = device_cc(o.device);
    plan::DeviceFetch d = plan::fetch_for_device(opts, cc, o.dest);  // plan/device_fetch.hpp
    progress.finish();
    print_fetch(o, opts, d.result, cc, d.target, driver);
    return 0;
  }
  if (o.targets.empty())
    throw Error(ErrorKind::Usage,
                "kiln fetch needs --targets LIST or --device sm_XX|auto (see --help)");
  fetch::FetchResult r = fetch::fetch_targets(opts, split_list(o.targets), o.dest);
  progress.finish();
  print_fetch(o, opts, r, 0, "", driver);
  return 0;
}

}  // namespace

void add_fetch_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("fetch", kFetchHelp);
  auto o = std::make_shared<FetchOpts>();
  o->timeout_s = static_cast<double>(o->fetch.timeout_ms) / 1000;
  o->download_timeout_s = static_cast<double>(o->fetch.download_timeout_ms) / 1000;
  auto* targets_opt =
      cmd->add_option("--targets", o->targets, "comma-separated targets, e.g. sm_90a,sm_80");
  auto* device_opt = cmd->add_option(
      "--device", o->device,
      "pick the archive for a device instead: sm_XX, a compute capability (9.0), or auto (the "
      "current CUDA device; an error without one)");
  targets_opt->excludes(device_opt);
  add_driver_option(cmd, o->driver,
                    "of each target, the archive of the newest toolkit it runs is fetched, and "
                    "--device passes over a target it runs none of");
  device_opt->excludes(targets_opt);
  cmd->add_option("--dest", o->dest, "the store to unpack into (created if missing)")->required();
  cmd->add_option("--mirror", o->mirrors,
                  "mirror URL (http://, https://, file:// or an absolute directory); repeat to "
                  "give several, tried in order");
  add_package_options(cmd, o->pkg);
  cmd->add_option("--index-sha256", o->fetch.index_sha256,
                  "SHA-256 (hex) that pins the release index");
  cmd->add_option("--tuf-root", o->fetch.tuf_root,
                  "a TUF root.json: each mirror is a TUF repository (<mirror>/metadata, "
                  "<mirror>/targets) and its signed metadata verifies the index and archives; "
                  "not with --index-sha256 (docs/tuf.md)");
  cmd->add_option("--ca-bundle", o->fetch.ca_bundle,
                  "PEM file of CA certificates for https mirrors (default: KILN_CA_BUNDLE, "
                  "else the system store)");
  cmd->add_flag("--offline", o->fetch.offline,
                "use nothing but what is in --dest; no network access (also KILN_OFFLINE=1)");
  cmd->add_flag("--json", o->json, "print the result as JSON on stdout");
  cmd->add_option("--timeout", o->timeout_s,
                  "seconds the whole fetch may take (lock waits, retries, every mirror); past it "
                  "the fetch ends with a network error (exit 8)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_tuning_options(cmd, *o);
  cmd->callback([o, &rc] { rc = run_fetch(*o); });
}

}  // namespace kiln::commands
