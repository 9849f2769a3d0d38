// `kiln wheel --dist DIR [--targets t1,t2] --out DIR [--json]`: one Python data wheel per target
// from the verified archives of a release (docs/wheels.md). A target whose archive is refused
// does not stop the others; the exit code is the worst failure.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "builder/build.hpp"
#include "commands/commands.hpp"
#include "format/target.hpp"
#include "kiln/error.hpp"
#include "runtime/environment.hpp"
#include "store/store.hpp"
#include "wheel/wheel.hpp"

namespace kiln::commands {

namespace {

using Json = nlohmann::ordered_json;

std::string human_size(std::uint64_t bytes) {
  char buf[32];
  if (bytes < 1024) return std::to_string(bytes) + " B";
  if (bytes < (std::uint64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  else if (bytes < (std::uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  else
    std::snprintf(buf, sizeof buf, "%.1f GiB",
                  static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

Json wheel_kind(const std::string& target) { return target.empty() ? "package" : "target"; }
Json target_or_null(const std::string& target) {
  return target.empty() ? Json(nullptr) : Json(target);
}

std::string wheels_json(const wheel::BuildResult& result) {
  Json wheels = Json::array();
  for (const auto& w : result.wheels) {
    Json j = Json::object();
    j["wheel"] = wheel_kind(w.target);
    j["target"] = target_or_null(w.target);
    j["file"] = w.file.string();
    j["size"] = w.size;
    j["sha256"] = w.sha256;
    wheels.push_back(std::move(j));
  }
  Json failed = Json::array();
  for (const auto& f : result.failed) {
    Json j = Json::object();
    j["wheel"] = wheel_kind(f.target);
    j["target"] = target_or_null(f.target);
    j["kind"] = to_string(f.kind);
    j["message"] = f.message;
    failed.push_back(std::move(j));
  }
  Json out = Json::object();
  out["wheels"] = std::move(wheels);
  out["failed"] = std::move(failed);
  out["ok"] = !result.worst().has_value();
  out["exit_code"] = result.exit_code();
  return out.dump(2) + "\n";
}

void print_wheels(const wheel::BuildResult& result, const std::string& out) {
  for (const auto& f : result.failed)
    std::fprintf(stderr, "kiln: wheel %s failed (%s): %s\n",
                 f.target.empty() ? "package" : f.target.c_str(), to_string(f.kind),
                 f.message.c_str());
  for (const auto& w : result.wheels)
    std::printf("%s  %s  %s\n", w.sha256.c_str(), human_size(w.size).c_str(), w.file.c_str());
  std::printf("%zu wheel%s written to %s", result.wheels.size(),
              result.wheels.size() == 1 ? "" : "s", out.c_str());
  if (!result.failed.empty()) std::printf(", %zu failed", result.failed.size());
  std::printf("\n");
}

}  // namespace

void add_wheel_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "wheel",
      "turn a release (kiln build --dist DIR) into Python wheels: the package's own wheel "
      "<package>-<version>-py3-none-any.whl (its description and JIT sources, no GPU code; "
      "requires the kiln runtime of this kiln's MAJOR.MINOR, kiln>=M.m.0,<M.m+1, and offers "
      "one extra per target, <package>[cu<CUDA major>-<target>], requiring that target's wheel "
      "at its version) and one data wheel per target, "
      "<package>_cu<CUDA major>_<target>-<version>-py3-none-any.whl, which requires the "
      "package's wheel at exactly its version, so pip installs and upgrades them together. The "
      "index, the description and each chosen archive are verified first; a "
      "target wheel holds the archive unpacked as a store. `python -m kiln install PACKAGE "
      "--find-links DIR` picks the target wheel for this machine's GPU. Timestamps: "
      "SOURCE_DATE_EPOCH, else the manifest's build_time (1980-01-01 for the package wheel); "
      "the same inputs give the same bytes. See docs/wheels.md.");
  struct Opts {
    std::string dist;
    std::string targets;
    std::string out;
    bool require_every_target = false;
    bool json = false;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("--dist", opts->dist,
                  "directory holding one <package>-<version>-index.json and its archives")
      ->required();
  cmd->add_option("--targets", opts->targets,
                  "comma-separated targets from the index (default: every target it lists)");
  cmd->add_option("--out", opts->out, "directory to write the wheels to (created if missing)")
      ->required();
  cmd->add_flag("--require-every-target", opts->require_every_target,
                "the package wheel requires every target wheel of the release at its version "
                "(not only through its extras): pip installs and upgrades all of them with the "
                "package, so even a bare `pip install -U <package>` keeps them paired; every "
                "machine then installs every target");
  cmd->add_flag("--json", opts->json,
                "print {wheels: [{wheel, target, file, size, sha256}], failed: [{wheel, target, "
                "kind, message}]}: wheel is \"package\" (target null) or \"target\"");
  cmd->callback([opts, &rc] {
    wheel::BuildOptions o;
    o.dist = opts->dist;
    o.out = opts->out;
    o.require_every_target = opts->require_every_target;
    if (!opts->targets.empty()) {
      for (const auto& t : format::parse_target_list(opts->targets)) o.targets.push_back(t.str());
    }
    if (std::string sde = runtime::read_environment().source_date_epoch; !sde.empty())
      o.source_date_epoch = builder::parse_source_date_epoch(sde);

    auto result = wheel::build_wheels(o, [](const wheel::BuiltWheel& w) {
      std::fprintf(stderr, "wheel %s: %s (%s)\n", w.target.empty() ? "package" : w.target.c_str(),
                   w.file.filename().c_str(), human_size(w.size).c_str());
    });
    rc = result.exit_code();
    if (opts->json)
      std::cout << wheels_json(result);
    else
      print_wheels(result, opts->out);
  });
}

}  // namespace kiln::commands
