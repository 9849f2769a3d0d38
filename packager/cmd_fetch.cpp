// `kiln fetch`: download, verify and unpack release archives from trusted mirrors into a store.
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.hpp"
#include "kiln/error.hpp"
#include "kiln/fetch.hpp"
#include "kiln/target.hpp"

namespace kiln::cli {

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

void add_fetch_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "fetch",
      "download the release archives for some targets from trusted mirrors, verify them against\n"
      "the pinned index and unpack them into a store. Re-running is a no-op that re-verifies\n"
      "what is there. Mirrors: --mirror, else KILN_MIRRORS, else the build's default list.\n"
      "The index digest: --index-sha256, else KILN_INDEX_SHA256, else the build's pin.\n"
      "Exit codes: 0 ok, 2 usage, 3 integrity (bad bytes everywhere), 6 not found (offline,\n"
      "or no archive for a target), 8 network (no mirror could serve), 9 io.");
  struct Opts {
    std::string targets;
    std::string dest;
    std::vector<std::string> mirrors;
    FetchOptions fetch;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--targets", o->targets, "comma-separated targets, e.g. sm_90a,sm_80")
      ->required();
  cmd->add_option("--dest", o->dest, "the store to unpack into (created if missing)")->required();
  cmd->add_option("--mirror", o->mirrors,
                  "mirror URL (http://, https://, file:// or an absolute directory); repeat to "
                  "give several, tried in order");
  cmd->add_option("--version", o->fetch.version, "release to fetch (default: this kiln's version)")
      ->check(package_version_option());
  cmd->add_option("--index-sha256", o->fetch.index_sha256,
                  "SHA-256 (hex) that pins the release index");
  cmd->add_option("--ca-bundle", o->fetch.ca_bundle,
                  "PEM file of CA certificates for https mirrors (default: KILN_CA_BUNDLE, "
                  "else the system store)");
  cmd->add_flag("--offline", o->fetch.offline,
                "use nothing but what is in --dest; no network access (also KILN_OFFLINE=1)");
  cmd->add_flag("--json", o->json, "print the result as JSON on stdout");
  auto* tuning = cmd->add_option_group("tuning");
  tuning->add_option("--max-parallel", o->fetch.max_parallel, "archives downloading at once")
      ->capture_default_str();
  tuning->add_option("--connect-timeout-ms", o->fetch.connect_timeout_ms)->capture_default_str();
  tuning
      ->add_option("--low-speed-bytes", o->fetch.low_speed_bytes,
                   "abort a transfer slower than this many bytes/s ...")
      ->capture_default_str();
  tuning->add_option("--low-speed-seconds", o->fetch.low_speed_seconds, "... for this many seconds")
      ->capture_default_str();
  tuning
      ->add_option("--retries", o->fetch.max_retries,
                   "further attempts per mirror for 5xx, 429 and connection errors")
      ->capture_default_str();
  tuning->add_option("--retry-base-ms", o->fetch.retry_base_ms, "first backoff delay")
      ->capture_default_str();

  cmd->callback([o, &rc] {
    FetchOptions opts = o->fetch;
    opts.mirrors = o->mirrors;
    if (opts.mirrors.empty())
      if (const char* env = std::getenv("KILN_MIRRORS")) opts.mirrors = split_list(env);
    if (opts.index_sha256.empty())
      if (const char* env = std::getenv("KILN_INDEX_SHA256")) opts.index_sha256 = env;
    if (const char* env = std::getenv("KILN_OFFLINE")) {
      std::string v = env;
      if (v == "1" || v == "true" || v == "yes")
        opts.offline = true;
      else if (!(v.empty() || v == "0" || v == "false" || v == "no"))
        throw Error(ErrorKind::Usage, "KILN_OFFLINE='" + v + "': expected 1 or 0");
    }
    // Progress goes to stderr so that --json output on stdout stays parseable.
    opts.log = [](const std::string& line) { std::cerr << "kiln fetch: " << line << "\n"; };
    std::vector<std::string> targets;
    for (const auto& t : split_list(o->targets)) targets.push_back(t);

    FetchResult r = fetch_targets(opts, targets, o->dest);
    if (o->json) {
      nlohmann::ordered_json j;
      j["installed"] = r.installed;
      j["already_present"] = r.already_present;
      j["failures"] = nlohmann::ordered_json::array();
      for (const auto& f : r.failures)
        j["failures"].push_back({{"mirror", f.mirror}, {"url", f.url}, {"what", f.what}});
      std::cout << j.dump(2) << "\n";
    } else {
      for (const auto& d : r.installed) std::cout << "installed " << d << "\n";
      for (const auto& d : r.already_present) std::cout << "present, verified " << d << "\n";
      if (!r.failures.empty())
        std::cout << r.failures.size() << " failed attempt(s) on the way; see above\n";
    }
    rc = 0;
  });
}

}  // namespace kiln::cli
