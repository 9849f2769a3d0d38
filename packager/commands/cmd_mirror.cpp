// `kiln mirror stage|verify|sync`: put a release on a mirror, check a mirror end to end, copy a
// release from an upstream mirror (docs/mirrors.md, "Operating a mirror"). The logic is in
// mirror_*.cpp (mirror.hpp); this file parses options and prints.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "commands/commands.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "mirror/mirror.hpp"
#include "store/store.hpp"

namespace kiln::commands {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// One staged release: its JSON, and its lines unless --json.
Json report_staged(const mirror::StageOptions& opts, const mirror::StageResult& r, bool json) {
  const std::string sums = mirror::checksums_file_name(opts.package, opts.version);
  const std::string to = opts.to.string();
  Json j = Json::object();
  j["to"] = to;
  j["package"] = opts.package;
  j["version"] = opts.version;
  j["copied"] = r.copied;
  j["unchanged"] = r.unchanged;
  j["carried"] = r.carried;
  j["checksums"] = sums;
  j["checksums_sha256"] = r.checksums_sha256;
  j["index_written"] = r.index_written;
  if (!json) {
    for (const auto& n : r.copied) std::printf("copied    %s\n", n.c_str());
    for (const auto& n : r.unchanged) std::printf("unchanged %s\n", n.c_str());
    for (const auto& n : r.carried) std::printf("kept      %s\n", n.c_str());
    std::printf("%s: %s %s: %zu copied, %zu unchanged, %zu kept; %s sha256 %s\n", to.c_str(),
                opts.package.c_str(), opts.version.c_str(), r.copied.size(), r.unchanged.size(),
                r.carried.size(), sums.c_str(), r.checksums_sha256.c_str());
  }
  return j;
}

void add_stage(CLI::App& mirror, int& rc) {
  auto* cmd = mirror.add_subcommand(
      "stage",
      "copy releases from dist directories into a mirror directory: a release's index, the\n"
      "description and archives it pins, and the wheels and tarballs of that version, each\n"
      "verified first (index, digests, manifests, artifacts). Writes\n"
      "<package>-<version>-SHA256SUMS last, atomically, one per release. The releases: the one\n"
      "named (--package/--version, --source, or the project here); else every release whose\n"
      "index is in the dist directories. A file of the same name and other bytes already in\n"
      "the mirror is refused (exit 3) before anything of that release is copied; identical\n"
      "files are left alone. Before SHA256SUMS, the mirror's pip index: simple/ (PEP 503 HTML,\n"
      "PEP 691 JSON as index.json beside each page) and <wheel>.metadata (PEP 658) for every\n"
      "wheel the mirror's checksum files list, all versions, so that\n"
      "`pip install --index-url <mirror>/simple/ \"kiln-kernels[cu13-sm90a]\"` works from a\n"
      "static server.");
  struct Opts {
    std::vector<std::string> sources;
    std::string to;
    PackageOptions pkg;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("DIR", o->sources,
                  "dist directories (kiln build --dist, kiln wheel, kiln tarball)")
      ->required();
  cmd->add_option("--to", o->to, "the mirror directory (created if missing)")->required();
  add_package_options(cmd, o->pkg);
  cmd->add_flag("--json", o->json, "print the result as JSON on stdout");
  cmd->callback([o, &rc] {
    // The releases: the one named, else every index in the sources (releases_to_stage).
    const std::vector<fs::path> sources(o->sources.begin(), o->sources.end());
    std::vector<mirror::ReleaseName> releases;
    if (package_named(o->pkg)) {
      ChosenPackage chosen = choose_package(o->pkg, o->json);
      releases.push_back({chosen.name, chosen.version});
    } else {
      releases = mirror::releases_to_stage(sources, o->to);
    }
    Json all = Json::array();
    for (const auto& release : releases) {
      mirror::StageOptions opts;
      opts.sources = sources;
      opts.to = o->to;
      opts.package = release.package;
      opts.version = release.version;
      opts.log = [](const std::string& line) {
        std::cerr << "kiln mirror stage: " << line << "\n";
      };
      all.push_back(report_staged(opts, mirror::stage_release(opts), o->json));
    }
    if (o->json) {
      // One release: its fields at the top level, as before; every one under "releases".
      Json out = all.size() == 1 ? all.front() : Json::object();
      if (all.size() != 1) out["to"] = o->to;
      out["releases"] = all;
      std::cout << out.dump(2) << "\n";
    }
    rc = 0;
  });
}

// The releases `kiln mirror verify` checks: the one named (--source, --package/--version, or the
// project here), else every release in the directory (mirror's releases_to_verify).
std::vector<mirror::ReleaseName> releases_named_or_in(const PackageOptions& pkg, bool quiet,
                                              const std::string& dir,
                                              const mirror::VerifyMirrorOptions& pins) {
  if (package_named(pkg)) {
    ChosenPackage chosen = choose_package(pkg, quiet);
    return {{chosen.name, chosen.version}};
  }
  return mirror::releases_to_verify(dir, !pins.index_sha256.empty() || !pins.sums_sha256.empty());
}

Json release_report_json(const mirror::MirrorReport& r) {
  auto worst = r.worst();
  Json j = Json::object();
  j["package"] = r.package;
  j["version"] = r.version;
  j["ok"] = !worst.has_value();
  j["exit_code"] = worst ? exit_code(*worst) : 0;
  Json files = Json::array();
  for (const auto& f : r.files) {
    Json e = Json::object();
    e["name"] = f.name;
    e["kind"] = to_string(f.kind);
    e["status"] = to_string(f.status);
    e["error"] = f.error ? Json(kiln::to_string(*f.error)) : Json(nullptr);
    e["detail"] = f.detail;
    files.push_back(std::move(e));
  }
  j["files"] = std::move(files);
  return j;
}

// {dir, ok, exit_code, releases: [{package, version, ok, exit_code, files}]}; with one release,
// its package, version and files also at the top (the report before several were checked).
Json mirror_report_json(const std::string& dir, const std::vector<mirror::MirrorReport>& reports,
                        std::optional<ErrorKind> worst) {
  Json j = Json::object();
  j["dir"] = dir;
  if (reports.size() == 1) {
    j["package"] = reports[0].package;
    j["version"] = reports[0].version;
  }
  j["ok"] = !worst.has_value();
  j["exit_code"] = worst ? exit_code(*worst) : 0;
  Json releases = Json::array();
  for (const auto& r : reports) releases.push_back(release_report_json(r));
  if (reports.size() == 1) j["files"] = releases[0]["files"];
  j["releases"] = std::move(releases);
  return j;
}

// One table of every file of every release, then a line per release.
void print_mirror_reports(const std::string& dir, const std::vector<mirror::MirrorReport>& reports) {
  std::size_t width = 4;
  for (const auto& r : reports)
    for (const auto& f : r.files) width = std::max(width, f.name.size());
  std::printf("%-8s  %-9s  %-*s  %s\n", "STATUS", "KIND", static_cast<int>(width), "FILE",
              "DETAIL");
  for (const auto& r : reports)
    for (const auto& f : r.files) {
      std::string detail = f.error ? "(" + std::string(kiln::to_string(*f.error)) + ") " : "";
      detail += f.detail;
      std::printf("%-8s  %-9s  %-*s  %s\n", to_string(f.status), to_string(f.kind),
                  static_cast<int>(width), f.name.c_str(), detail.c_str());
    }
  for (const auto& r : reports) {
    std::size_t bad = 0;
    for (const auto& f : r.files) bad += f.error ? 1 : 0;
    std::printf("%s %s (%s release %s): %zu files, %zu with problems\n",
                r.worst() ? "FAILED" : "OK", dir.c_str(), r.package.c_str(), r.version.c_str(),
                r.files.size(), bad);
  }
}

void add_verify(CLI::App& mirror, int& rc) {
  auto* cmd = mirror.add_subcommand(
      "verify",
      "check a mirror directory end to end and report every file of each release, good or bad\n"
      "(the release named by --source, --package/--version or the project here; else every\n"
      "release in DIR, each package and version, in one table; a pin covers one release):\n"
      "<package>-<version>-SHA256SUMS present and well formed, every file it lists present with "
      "its\n"
      "digest, the index (version, --index-sha256, its SHA256SUMS line), each archive it lists\n"
      "(size, digest, manifest, artifacts), the pip index (each wheel's <wheel>.metadata equal\n"
      "to its METADATA; every simple/ page link to a wheel carrying the file's sha256), and\n"
      "files of the release that nothing lists.\n"
      "With --index-sha256 and/or --sums-sha256, every file must also be covered by a pin: the\n"
      "pinned index covers itself and its archives, a pinned SHA256SUMS every file it lists;\n"
      "wheels and tarballs without a pinned SHA256SUMS are reported 'uncovered'.\n"
      "Exit 0 when all is well, else the code of the worst problem: 3 integrity (digests,\n"
      "unlisted or uncovered files), 4 stale, 10 format, 6 not found.");
  struct Opts {
    std::string dir;
    mirror::VerifyMirrorOptions verify;
    PackageOptions pkg;
    std::vector<std::string> releases;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("DIR", o->dir, "the mirror directory")->required();
  add_package_options(cmd, o->pkg);
  cmd->add_option("--release", o->releases,
                  "NAME-VERSION[=INDEX_SHA256]: a release to verify, with its own index pin; "
                  "repeat for several");
  cmd->add_option("--index-sha256", o->verify.index_sha256,
                  "SHA-256 (hex) the index must have, e.g. the digest the loaders pin");
  cmd->add_option(
      "--sums-sha256", o->verify.sums_sha256,
      "SHA-256 (hex) <package>-<version>-SHA256SUMS must have (`kiln mirror stage` prints "
      "it); covers wheels and tarballs");
  cmd->add_flag("--json", o->json, "machine-readable report");
  cmd->callback([o, &rc] {
    // Each release to verify with the pins that cover it: --release NAME-VERSION[=PIN] each
    // with its own, else releases_named_or_in's with --index-sha256 / --sums-sha256.
    std::vector<mirror::VerifyMirrorOptions> asked;
    for (const auto& text : o->releases) {
      ReleaseArg r = parse_release_arg(text);
      mirror::VerifyMirrorOptions vo = o->verify;
      vo.package = r.package;
      vo.version = r.version;
      if (!r.pin.empty()) vo.index_sha256 = r.pin;
      asked.push_back(std::move(vo));
    }
    if (o->releases.empty())
      for (const mirror::ReleaseName& release : releases_named_or_in(o->pkg, o->json, o->dir, o->verify)) {
        mirror::VerifyMirrorOptions vo = o->verify;
        vo.package = release.package;
        vo.version = release.version;
        asked.push_back(std::move(vo));
      }
    std::vector<mirror::MirrorReport> reports;
    for (const auto& vo : asked) reports.push_back(mirror::verify_mirror(o->dir, vo));
    const std::optional<ErrorKind> worst = mirror::worst_of(reports);
    if (o->json)
      std::cout << mirror_report_json(o->dir, reports, worst).dump(2) << "\n";
    else
      print_mirror_reports(o->dir, reports);
    rc = worst ? exit_code(*worst) : 0;
  });
}

constexpr const char* kSyncHelp =
    "copy a release from an upstream mirror (http://, https://, file://) into a directory,\n"
    "all or nothing. Needs a pin: --index-sha256 (covers the index and the archives and\n"
    "description it pins) and/or\n"
    "--sums-sha256 (covers every file <package>-<version>-SHA256SUMS lists). SHA256SUMS first\n"
    "(against --sums-sha256), then the index (against --index-sha256 / KILN_INDEX_SHA256 and\n"
    "its SHA256SUMS line). Every SHA256SUMS line must be a file of --version (else exit 10,\n"
    "nothing written). Wheels and tarballs are published only under a pinned SHA256SUMS;\n"
    "otherwise they are withheld and named. Each file to publish that is not already present\n"
    "with the right digest is downloaded into DIR/.kiln-sync-<package>-<version>-XXXXXX/\n"
    "while hashing and verified (archives: size, digest, content); only when every file\n"
    "verified are they\n"
    "renamed into DIR, the index and SHA256SUMS (listing only what was published) last.\n"
    "Any failure leaves DIR as it was. Several releases at once: --release NAME-VERSION=PIN\n"
    "for each (its own index pin), synced one after the other, each all or nothing.\n"
    "The pip index (simple/, <wheel>.metadata) is rewritten from the files in DIR before\n"
    "SHA256SUMS, so a page never names a file that is not there yet.\n"
    "Exit codes: 0 ok, 2 usage, 3 integrity, 4 stale, 6 not found, 8 network, 9 io,\n"
    "10 format.";

struct SyncOpts {
  mirror::SyncOptions sync;
  std::string to;
  PackageOptions pkg;
  std::vector<std::string> releases;
  bool json = false;
};

void add_sync_tuning(CLI::App* cmd, mirror::SyncOptions& sync) {
  auto* tuning = cmd->add_option_group("tuning");
  tuning->add_option("--connect-timeout-ms", sync.connect_timeout_ms)->capture_default_str();
  tuning
      ->add_option("--low-speed-bytes", sync.low_speed_bytes,
                   "abort a transfer slower than this many bytes/s ...")
      ->capture_default_str();
  tuning->add_option("--low-speed-seconds", sync.low_speed_seconds, "... for this many seconds")
      ->capture_default_str();
  tuning
      ->add_option("--retries", sync.max_retries,
                   "further attempts per file for 5xx, 429 and connection errors")
      ->capture_default_str();
  tuning->add_option("--retry-base-ms", sync.retry_base_ms, "first backoff delay")
      ->capture_default_str();
  tuning
      ->add_option("--max-file-bytes", sync.max_file_bytes,
                   "largest wheel or tarball accepted (archives are capped at their indexed size)")
      ->capture_default_str();
}

// The syncs asked for: one per --release NAME-VERSION=PIN, each with its own index pin; else
// the release named, pinned by --index-sha256 (else KILN_INDEX_SHA256) and/or --sums-sha256.
std::vector<mirror::SyncOptions> syncs_asked(const SyncOpts& o, const LoaderConfig& env) {
  std::vector<mirror::SyncOptions> syncs;
  if (o.releases.empty()) {
    mirror::SyncOptions one = o.sync;
    ChosenPackage chosen = choose_package(o.pkg, o.json);
    one.package = chosen.name;
    one.version = chosen.version;
    if (one.index_sha256.empty()) one.index_sha256 = env.index_sha256;
    syncs.push_back(std::move(one));
    return syncs;
  }
  if (!o.sync.index_sha256.empty() || !o.sync.sums_sha256.empty() || !o.pkg.package.empty() ||
      !o.pkg.version.empty() || !o.pkg.source.empty())
    throw Error(ErrorKind::Usage,
                "--release NAME-VERSION=PIN names each release with its own "
                "pin: not with --package, --version, --source, "
                "--index-sha256 or --sums-sha256");
  for (const auto& text : o.releases) {
    ReleaseArg r = parse_release_arg(text);
    if (r.pin.empty())
      throw Error(ErrorKind::Usage, "--release '" + text +
                                        "': a sync needs the index pin, "
                                        "NAME-VERSION=INDEX_SHA256");
    mirror::SyncOptions one = o.sync;
    one.package = r.package;
    one.version = r.version;
    one.index_sha256 = r.pin;
    syncs.push_back(std::move(one));
  }
  return syncs;
}

// One synced release: its JSON, and its lines unless --json.
Json report_synced(const mirror::SyncOptions& opts, const mirror::SyncResult& r, bool json) {
  Json j = Json::object();
  j["from"] = opts.from;
  j["to"] = opts.to.string();
  j["package"] = opts.package;
  j["version"] = opts.version;
  j["transferred"] = r.transferred;
  j["already_good"] = r.already_good;
  Json withheld = Json::array();
  for (const auto& w : r.withheld)
    withheld.push_back({{"name", w.name}, {"kind", to_string(w.kind)}, {"reason", w.reason}});
  j["withheld"] = std::move(withheld);
  j["bytes_transferred"] = r.bytes_transferred;
  j["bytes_downloaded"] = r.bytes_downloaded;
  j["index_written"] = r.index_written;
  if (!json) {
    for (const auto& n : r.transferred) std::printf("transferred  %s\n", n.c_str());
    for (const auto& w : r.withheld)
      std::printf("withheld     %s: %s\n", w.name.c_str(), w.reason.c_str());
    std::printf("%s %s: %zu files transferred (%llu bytes), %zu already good, %zu withheld\n",
                opts.package.c_str(), opts.version.c_str(), r.transferred.size(),
                static_cast<unsigned long long>(r.bytes_transferred), r.already_good.size(),
                r.withheld.size());
  }
  return j;
}

void add_sync(CLI::App& mirror, int& rc) {
  auto* cmd = mirror.add_subcommand("sync", kSyncHelp);
  auto o = std::make_shared<SyncOpts>();
  cmd->add_option("--from", o->sync.from,
                  "upstream mirror URL (http://, https://, file:// or an absolute directory)")
      ->required();
  cmd->add_option("--to", o->to, "the local mirror directory (created if missing)")->required();
  add_package_options(cmd, o->pkg);
  cmd->add_option("--release", o->releases,
                  "NAME-VERSION=INDEX_SHA256: a release and its index pin; repeat for several "
                  "(instead of --package/--version/--index-sha256)");
  cmd->add_option("--index-sha256", o->sync.index_sha256,
                  "SHA-256 (hex) the index must have (also KILN_INDEX_SHA256)");
  cmd->add_option(
      "--sums-sha256", o->sync.sums_sha256,
      "SHA-256 (hex) <package>-<version>-SHA256SUMS must have (`kiln mirror stage` prints "
      "it); without it wheels and tarballs are not published");
  cmd->add_option("--ca-bundle", o->sync.ca_bundle,
                  "PEM file of CA certificates for https (default: KILN_CA_BUNDLE, else the "
                  "system store)");
  cmd->add_flag("--json", o->json, "print the summary as JSON on stdout");
  add_sync_tuning(cmd, o->sync);
  cmd->callback([o, &rc] {
    const LoaderConfig env = LoaderConfig::from_env();  // the one table of variables
    Json all = Json::array();
    for (mirror::SyncOptions& opts : syncs_asked(*o, env)) {
      opts.to = o->to;
      if (opts.ca_bundle.empty()) opts.ca_bundle = env.ca_bundle;
      // Progress goes to stderr so that --json output on stdout stays parseable: a status line
      // on a terminal, plain lines in a log (util/progress.hpp).
      util::ProgressLine progress(stderr, util::progress_style_for(stderr), "kiln mirror sync: ");
      opts.log = [&progress](const std::string& line) { progress.line(line); };
      opts.progress = [&progress](const std::string& file, std::uint64_t received,
                                  std::optional<std::uint64_t> size) {
        progress.bytes(file, received, size);
      };
      mirror::SyncResult synced = mirror::sync_release(opts);
      progress.finish();
      all.push_back(report_synced(opts, synced, o->json));
    }
    if (o->json) {
      // One release: its fields at the top level, as before; every one under "releases".
      Json out = all.size() == 1 ? all.front() : Json::object();
      out["releases"] = all;
      std::cout << out.dump(2) << "\n";
    }
    rc = 0;
  });
}

}  // namespace

void add_mirror_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "mirror",
      "operate a mirror: stage a release into a mirror directory, verify a mirror end to end,\n"
      "sync a release from an upstream mirror. The mirror is also a pip index (simple/):\n"
      "pip install --index-url <mirror>/simple/ ... See docs/mirrors.md.");
  cmd->require_subcommand(1);
  add_stage(*cmd, rc);
  add_verify(*cmd, rc);
  add_sync(*cmd, rc);
}

}  // namespace kiln::commands
