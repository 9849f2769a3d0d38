// `kiln tarball --dist DIR --out DIR [--targets ...] [--prefix DIR]`: a relocatable install
// tree (bin, lib, include, lib/cmake/kiln, share/kiln/artifacts) packed reproducibly.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "builder/build.hpp"
#include "commands/commands.hpp"
#include "format/target.hpp"
#include "kiln/error.hpp"
#include "release/tarball.hpp"
#include "runtime/environment.hpp"

namespace kiln::commands {

namespace {

using Json = nlohmann::ordered_json;

std::string tarball_json(const release::TarballResult& r) {
  Json j = Json::object();
  j["file"] = r.file.string();
  j["size"] = r.size;
  j["sha256"] = r.sha256;
  j["targets"] = r.targets;
  j["entries"] = r.entries;
  return j.dump(2) + "\n";
}

void print_tarball(const release::TarballResult& r) {
  std::string targets;
  for (const auto& x : r.targets) targets += (targets.empty() ? "" : ",") + x;
  std::printf("%s  %.1f MiB  %zu entries  targets %s\nsha256 %s\n", r.file.c_str(),
              static_cast<double>(r.size) / (1024.0 * 1024.0), r.entries, targets.c_str(),
              r.sha256.c_str());
}

}  // namespace

void add_tarball_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "tarball",
      "pack kiln's relocatable install tree for this CUDA version: bin/kiln, lib/libkiln.so*, "
      "lib/libkiln-kernels.so* (the reference package kiln-kernels), include/kiln, "
      "lib/cmake/kiln (find_package(kiln) -> kiln::kiln, kiln::kernels, kiln::cli, "
      "kiln_add_kernel_package) and share/kiln/artifacts (the verified stores of the reference "
      "package's chosen targets, which a loader of libkiln-kernels finds beside it with no "
      "environment variable). Reproducible: with SOURCE_DATE_EPOCH (or "
      "the archives' build time) the same inputs give the same bytes.");
  struct Opts {
    std::string dist, out, prefix, version, targets;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--dist", o->dist, "directory holding the release index and archives")
      ->required();
  cmd->add_option("--out", o->out, "directory to write the tarball into (created if missing)")
      ->required();
  cmd->add_option("--targets", o->targets,
                  "comma-separated targets to ship (default: every target in the index)");
  cmd->add_option("--prefix", o->prefix,
                  "the kiln install tree to pack, made by `cmake --install BUILD --prefix DIR` "
                  "(default: the tree this kiln runs from)");
  cmd->add_option("--version", o->version, "release version to pack (default: this kiln's)")
      ->check(package_version_option());
  cmd->add_flag("--json", o->json, "print {file, size, sha256, targets, entries}");
  cmd->callback([o, &rc] {
    release::TarballOptions t;
    t.dist = o->dist;
    t.out = o->out;
    if (!o->targets.empty())  // empty: every target of the index
      for (const auto& target : format::parse_target_list(o->targets)) t.targets.push_back(target.str());
    t.version = o->version;
    t.prefix = release::tarball_prefix(o->prefix, release::running_install_prefix());
    if (std::string sde = runtime::read_environment().source_date_epoch; !sde.empty())
      t.mtime = builder::parse_source_date_epoch(sde);
    t.progress = [](const std::string& s) {
      std::fprintf(stderr, "kiln tarball: %s\n", s.c_str());
    };
    release::TarballResult r = release::build_tarball(t);
    if (o->json)
      std::cout << tarball_json(r);
    else
      print_tarball(r);
    rc = 0;
  });
}

}  // namespace kiln::commands
