#include "release/compat.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "format/manifest.hpp"
#include "format/target.hpp"
#include "format/toolkit.hpp"
#include "io/atomic_file.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "plan/resolver.hpp"
#include "plan/target_choice.hpp"
#include "project/package_description.hpp"
#include "release/tarball.hpp"
#include "store/index_entry_check.hpp"
#include "store/store.hpp"
#include "store/store_scan.hpp"
#include "wheel/wheel.hpp"

namespace kiln::release {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The loader's rules for one manifest (resolver.cpp plan_stores): format, package version,
// then each kernel's source hash.
void check_manifest(const LoaderFacts& loader, const format::Manifest& m, const std::string& origin,
                    CompatPackage& pkg) {
  CompatManifest cm;
  cm.origin = origin;
  cm.target = m.target;
  cm.package = m.package;
  cm.package_version = m.package_version;
  cm.cuda_version = m.cuda_version;
  cm.format_version = m.format_version;
  cm.artifacts = m.artifacts.size();
  auto problem = [&](ErrorKind kind, const std::string& field, const std::string& pv,
                     const std::string& lv, const std::string& msg) {
    pkg.problems.push_back({kind, field, origin, pv, lv, msg});
    cm.compatible = false;
  };
  // The loader's own rule (stale_fields, resolver.hpp): the manifest-level fields once, then
  // each known kernel's source hash.
  auto report = [&](const plan::StaleField& f, const std::string& prefix) {
    problem(ErrorKind::Stale, f.field, f.package_value, f.loader_value, prefix + f.message);
  };
  for (const auto& f :
       plan::stale_fields(m, format::ArtifactEntry{},
                    {loader.package, loader.package_version, loader.manifest_format, ""}))
    report(f, "");
  for (const auto& a : m.artifacts) {
    if (!loader.kernels_known) break;  // no description: nothing to judge the hashes by
    auto want = loader.source_hash(a.uri);
    if (!want) {
      ++cm.unknown_uris;
      continue;
    }
    for (const auto& f : plan::stale_fields(
             m, a, {loader.package, loader.package_version, loader.manifest_format, *want}))
      if (f.field == "source_hash") report(f, a.uri + ": ");
  }
  if (cm.unknown_uris)
    pkg.notes.push_back(origin + ": " + std::to_string(cm.unknown_uris) +
                        " kernel(s) unknown to package " + loader.package +
                        " (never requested by its loader)");
  if (m.cuda_version != loader.cuda_version)
    pkg.notes.push_back(origin + ": built with CUDA " + m.cuda_version + ", libkiln with CUDA " +
                        loader.cuda_version +
                        " (the loader weighs the archive's toolkit against the node's driver, not "
                        "libkiln's)");
  pkg.manifests.push_back(std::move(cm));
}

// A manifest text that may not parse: a format version this libkiln does not read is an
// incompatibility (with both values), anything else a format problem.
void check_manifest_text(const LoaderFacts& loader, const std::string& text,
                         const std::string& origin, CompatPackage& pkg) {
  try {
    check_manifest(loader, format::parse_manifest(text, origin), origin, pkg);
  } catch (const Error& e) {
    std::string declared = plan::declared_format(text);
    if (e.kind() == ErrorKind::Stale)
      pkg.problems.push_back({ErrorKind::Stale, "format_version", origin, declared,
                              std::to_string(loader.manifest_format),
                              "format_version differs: manifest has " + declared +
                                  ", this libkiln reads " +
                                  std::to_string(loader.manifest_format)});
    else
      pkg.problems.push_back({e.kind(), "manifest", origin, "", "", e.what()});
  }
}

void add_verify_problems(const std::vector<store::VerifyProblem>& vps, CompatPackage& pkg) {
  for (const auto& v : vps)
    pkg.problems.push_back(
        {v.kind, v.field.empty() ? "integrity" : v.field, v.file, "", "", v.message});
}

void check_archive(const LoaderFacts& loader, const fs::path& p, CompatPackage& pkg) {
  pkg.kind = "archive";
  auto members = format::read_archive(p);
  if (members.empty() || members.front().name != "manifest.json")
    throw Error(ErrorKind::Format, p.string() + ": the first member is not manifest.json");
  check_manifest_text(loader, members.front().data, p.string(), pkg);
  // Integrity matters too: the loader refuses an artifact whose bytes differ from the manifest.
  if (pkg.problems.empty()) add_verify_problems(store::verify_archive_members(members, p.string()), pkg);
}

// How the release was built, and the warning a build from a changed tree deserves.
void note_provenance(const format::Index& idx, CompatPackage& pkg) {
  if (!idx.provenance) return;
  pkg.provenance = idx.provenance;
  if (auto w = format::dirty_build_warning(*idx.provenance)) pkg.warnings.push_back(*w);
}

void check_index(const LoaderFacts& loader, const fs::path& p, CompatPackage& pkg) {
  pkg.kind = "index";
  std::string text = io::read_whole_file(p);
  format::Index idx;
  try {
    idx = format::parse_index(text, p.string());
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Stale) throw;
    pkg.problems.push_back({ErrorKind::Stale, "index format_version", p.string(), "?",
                            std::to_string(loader.index_format), e.what()});
    return;
  }
  note_provenance(idx, pkg);
  // The loader judged may be another build (--loader): it reads indexes up to its own format.
  if (idx.format_version > loader.index_format)
    pkg.problems.push_back({ErrorKind::Stale, "index format_version", p.string(),
                            std::to_string(idx.format_version), std::to_string(loader.index_format),
                            "index format version " + std::to_string(idx.format_version) +
                                " is too new for the loader, which reads up to " +
                                std::to_string(loader.index_format)});
  if (idx.package != loader.package)
    pkg.problems.push_back(
        {ErrorKind::Stale, "package", p.string(), idx.package, loader.package,
         "package: index is of " + idx.package + ", the loader serves " + loader.package});
  if (idx.package_version != loader.package_version)
    pkg.problems.push_back({ErrorKind::Stale, "package_version", p.string(), idx.package_version,
                            loader.package_version,
                            "package_version: index is " + idx.package_version + ", " +
                                loader.package + " is " + loader.package_version});
  // Source hashes live in the archives' manifests: check those that sit beside the index.
  for (const auto& a : idx.archives) {
    fs::path ap = p.parent_path() / a.file;
    std::error_code ec;
    if (!fs::exists(ap, ec)) {
      pkg.notes.push_back(a.file + " (" + a.target +
                          ") is not beside the index: its kernels' source hashes are unchecked");
      CompatManifest cm;
      cm.origin = ap.string();
      cm.target = a.target;
      cm.package = idx.package;
      cm.package_version = idx.package_version;
      cm.cuda_version = a.cuda_version;
      pkg.manifests.push_back(cm);
      continue;
    }
    CompatPackage sub;
    try {
      check_archive(loader, ap, sub);
    } catch (const Error& e) {
      sub.problems.push_back({e.kind(), "archive", ap.string(), "", "", e.what()});
    }
    for (auto& m : sub.manifests) {
      // The one manifest-against-index check (index_entry_check.hpp), as kiln verify has it.
      format::Manifest read;
      read.target = m.target;
      read.package = m.package;
      read.package_version = m.package_version;
      read.cuda_version = m.cuda_version;
      for (const auto& x : store::manifest_index_mismatches(read, a, idx))
        sub.problems.push_back({x.kind, x.field, ap.string(), x.in_manifest, x.in_index,
                                ap.string() + ": manifest " + x.field + " is " + x.in_manifest +
                                    ", " + p.string() + " says " + x.in_index});
      pkg.manifests.push_back(m);
    }
    for (auto& x : sub.problems)
      if (x.field != "package_version" || x.package_value != idx.package_version)
        pkg.problems.push_back(x);
    pkg.notes.insert(pkg.notes.end(), sub.notes.begin(), sub.notes.end());
  }
}

void check_store(const LoaderFacts& loader, const fs::path& p, CompatPackage& pkg) {
  pkg.kind = "store";
  auto entries = store::scan_store(p);
  if (entries.empty()) throw Error(ErrorKind::NotFound, p.string() + " holds no archive directory");
  std::size_t others = 0;
  for (const auto& e : entries) {
    // Several packages share a store; a loader reads only its own package's directories.
    const std::string dir_name = fs::path(e.dir).filename().string();
    auto owner = format::release_name_package(dir_name);
    if (owner && *owner != loader.package) {
      ++others;
      continue;
    }
    fs::path mf = fs::path(e.dir) / "manifest.json";
    std::error_code ec;
    if (!fs::exists(mf, ec)) {
      pkg.problems.push_back({e.error_kind, "manifest", e.dir, "", "", e.error});
      continue;
    }
    check_manifest_text(loader, io::read_whole_file(mf), mf.string(), pkg);
  }
  if (others)
    pkg.notes.push_back(std::to_string(others) + " archive director" + (others == 1 ? "y" : "ies") +
                        " of other packages in " + p.string() + " (a loader of " + loader.package +
                        " never reads them)");
  if (pkg.manifests.empty() && pkg.problems.empty())
    throw Error(ErrorKind::NotFound,
                p.string() + " holds no archive directory of package " + loader.package);
}

void check_device(const std::vector<int>& ccs, CompatPackage& pkg) {
  if (ccs.empty() || pkg.manifests.empty()) return;
  for (int cc : ccs) {
    // The loader's own target-choice rule over the targets the package offers.
    std::vector<std::string> offered;
    for (const auto& m : pkg.manifests) offered.push_back(m.target);
    plan::NamedChoice choice = plan::choose_named_targets(cc, offered);
    std::string why;
    for (const auto& [t, reason] : choice.rejected) why += (why.empty() ? "" : "; ") + reason;
    if (choice.candidates.empty()) {
      std::string targets;
      for (const auto& m : pkg.manifests) targets += (targets.empty() ? "" : ",") + m.target;
      pkg.problems.push_back({ErrorKind::Unsupported, "target", pkg.path, targets,
                              plan::device_target(cc),
                              "target: package has " + targets + ", device is " +
                                  plan::device_target(cc) + " (CC " + plan::cc_string(cc) + "): " + why});
    }
  }
}

// The package's own wheel (docs/wheels.md): its description read strictly and of the wheel's
// package and version; its kiln requirement must let this kiln in; and when the release's index
// lies beside it, the description must be the one the index pins. Otherwise stale.
void check_package_wheel(const LoaderFacts& loader, const wheel::PackageWheel& pw,
                         const fs::path& p, CompatPackage& pkg) {
  const std::string origin = p.string() + ":" + pw.description_path;
  auto described = project::read_package_description(pw.description, origin);
  const std::string name = described->get()->name, version = described->get()->version;
  if (name != pw.package || wheel::pep440_version(version) != pw.version)
    pkg.problems.push_back({ErrorKind::Format, "package", origin, name + " " + version,
                            pw.package + " " + pw.version,
                            origin + " describes " + name + " " + version + ", the wheel is " +
                                pw.package + " " + pw.version});
  pkg.notes.push_back("package " + name + " " + version + ", " +
                      std::to_string(described->get()->kernel_count) + " kernels, " +
                      std::to_string(described->get()->file_count) + " source files");
  if (loader.package == name && !loader.package_version.empty() &&
      loader.package_version != version)
    pkg.problems.push_back({ErrorKind::Stale, "package_version", origin, version,
                            loader.package_version,
                            "package_version: the wheel describes " + name + " " + version +
                                ", this libkiln serves " + loader.package_version});
  if (pw.runtime_requirement.empty()) {
    pkg.problems.push_back({ErrorKind::Format, "requires_dist", p.string(), "", loader.version,
                            p.string() + " requires no kiln runtime (Requires-Dist: kiln...)"});
  } else if (!loader.version.empty() &&
             !wheel::satisfies(wheel::pep440_version(loader.version), pw.runtime_requirement)) {
    pkg.problems.push_back(
        {ErrorKind::Stale, "requires_dist", p.string(), pw.runtime_requirement, loader.version,
         "requires_dist: " + p.string() + " requires " + pw.runtime_requirement +
             ", which excludes this kiln " + loader.version + " (" + loader.library + ")"});
  }
  const fs::path index = p.parent_path() / format::index_file_name(name, version);
  std::error_code ec;
  if (!fs::is_regular_file(index, ec)) return;
  format::Index idx = format::parse_index(io::read_whole_file(index, io::limits::kMaxJsonBytes), index.string());
  note_provenance(idx, pkg);
  const std::string got = io::sha256_hex(pw.description);
  if (!idx.description || idx.description->sha256 != got ||
      idx.description->size != pw.description.size())
    pkg.problems.push_back({ErrorKind::Stale, "description", origin, got,
                            idx.description ? idx.description->sha256 : "",
                            "description: " + origin + " (sha256 " + got +
                                ") is not the description " + index.string() +
                                (idx.description ? " pins (sha256 " + idx.description->sha256 + ")"
                                                 : " pins (it pins none)") +
                                ": the wheel is of another build of " + name + " " + version});
  else
    pkg.notes.push_back("the description " + index.filename().string() + " pins");
}

// kiln's runtime distribution, kiln-<version>-<tags>.whl: of this kiln's version.
void check_runtime_wheel(const LoaderFacts& loader, const fs::path& p, CompatPackage& pkg) {
  const std::string name = p.filename().string();
  const std::string version = name.substr(5, name.find('-', 5) - 5);
  if (!loader.version.empty() && version != wheel::pep440_version(loader.version))
    pkg.problems.push_back({ErrorKind::Stale, "version", p.string(), version, loader.version,
                            "version: the kiln runtime wheel " + name + " is kiln " + version +
                                ", this libkiln is " + loader.version + " (" + loader.library +
                                ")"});
  else
    pkg.notes.push_back("the kiln runtime " + version);
}

}  // namespace
// Target wheels given together (`kiln compat --device sm_90 dist/*.whl`) are a set offered to
// pip, one wheel per target, of which `python -m kiln install` picks the device's: a wheel whose
// target does not run on a device is "not for" it (a note) when another wheel of the same
// package and version given with it does; only when none of them runs there is each a problem.
void check_target_wheels_together(CompatReport& rep) {
  const std::vector<int>& ccs = rep.devices;
  std::vector<CompatPackage*> wheels;
  for (auto& pkg : rep.packages)
    if (pkg.kind == "wheel") wheels.push_back(&pkg);
  for (auto* w : wheels) {
    if (w->manifests.empty()) continue;
    const auto& m0 = w->manifests.front();
    std::vector<std::string> offered;  // every target of this package and version given
    for (const auto* o : wheels)
      for (const auto& m : o->manifests)
        if (m.package == m0.package && m.package_version == m0.package_version)
          offered.push_back(m.target);
    std::vector<int> served_elsewhere, alone;
    for (int cc : ccs)
      (plan::choose_named_targets(cc, offered).candidates.empty() ? alone : served_elsewhere)
          .push_back(cc);
    CompatPackage own;
    own.path = w->path;
    own.manifests = w->manifests;
    check_device(alone, *w);  // no wheel given runs there: the problem, as for one wheel
    check_device(served_elsewhere, own);
    for (const auto& x : own.problems)  // another wheel given serves the device
      w->notes.push_back("not for " + x.loader_value + " (another wheel given serves it): " +
                         x.message);
  }
}

std::optional<InputRelease> release_named_by(const fs::path& p) {
  try {
    const std::string name = p.filename().string();
    if (ends_with(name, ".whl")) {
      if (name.rfind("kiln-", 0) == 0) return std::nullopt;  // kiln's runtime
      if (auto pw = wheel::read_package_wheel(p)) return InputRelease{pw->package, pw->version, {}};
      auto ms = wheel::wheel_manifests(p);
      if (ms.empty()) return std::nullopt;
      return InputRelease{ms.front().package, ms.front().package_version, {}};
    }
    store::PathKind kind = store::classify_path(p);
    if (kind == store::PathKind::Archive) {
      if (is_kiln_tarball_name(name)) return std::nullopt;
      auto members = format::read_archive(p);
      if (members.empty() || members.front().name != "manifest.json") return std::nullopt;
      format::Manifest m = format::parse_manifest(members.front().data, p.string());
      return InputRelease{m.package, m.package_version, {p.parent_path()}};
    }
    if (kind == store::PathKind::Index) {
      format::Index idx = format::parse_index(io::read_whole_file(p, io::limits::kMaxJsonBytes), p.string());
      return InputRelease{idx.package, idx.package_version, {p.parent_path()}};
    }
    if (kind == store::PathKind::Manifest || kind == store::PathKind::StoreArchive) {
      fs::path mf = kind == store::PathKind::Manifest ? p : p / "manifest.json";
      format::Manifest m = format::parse_manifest(io::read_whole_file(mf, io::limits::kMaxJsonBytes), mf.string());
      // A store archive's description lies in its store, beside the archive directory.
      fs::path dir = fs::absolute(mf).parent_path();
      return InputRelease{m.package, m.package_version, {dir.parent_path(), dir}};
    }
  } catch (const Error&) {
  }
  return std::nullopt;
}

CompatReport check_compat(const LoaderFacts& loader, const std::vector<int>& device_ccs,
                          const std::vector<fs::path>& packages, bool wheels_as_a_set) {
  CompatReport rep;
  rep.loader = loader;
  rep.devices = device_ccs;
  for (const auto& p : packages) {
    CompatPackage pkg;
    pkg.path = p.string();
    try {
      std::string name = p.filename().string();
      store::PathKind kind = store::classify_path(p);  // NotFound when missing
      // kiln's runtime wheel by its name (no package can be named kiln); a package's own wheel
      // by its kiln.packages entry point; any other wheel is a target wheel.
      const bool runtime_wheel = ends_with(name, ".whl") && name.rfind("kiln-", 0) == 0;
      std::optional<wheel::PackageWheel> package_wheel;
      if (ends_with(name, ".whl") && !runtime_wheel) package_wheel = wheel::read_package_wheel(p);
      if (runtime_wheel) {
        pkg.kind = "runtime-wheel";
        check_runtime_wheel(loader, p, pkg);
      } else if (package_wheel) {
        pkg.kind = "package-wheel";
        check_package_wheel(loader, *package_wheel, p, pkg);
      } else if (ends_with(name, ".whl")) {
        pkg.kind = "wheel";
        for (const auto& m : wheel::wheel_manifests(p))
          check_manifest(loader, m,
                         p.string() + ":" +
                             format::archive_stem(m.package, m.package_version, m.cuda_version, m.target),
                         pkg);
      } else if (kind == store::PathKind::Archive && is_kiln_tarball_name(name)) {
        pkg.kind = "tarball";
        for (const auto& m : tarball_manifests(p))
          check_manifest(loader, m,
                         p.string() + ":" +
                             format::archive_stem(m.package, m.package_version, m.cuda_version, m.target),
                         pkg);
        if (pkg.manifests.empty()) pkg.notes.push_back("the tarball ships no kernel store");
      } else if (kind == store::PathKind::Archive) {
        check_archive(loader, p, pkg);
      } else if (kind == store::PathKind::Index) {
        check_index(loader, p, pkg);
      } else if (kind == store::PathKind::Store) {
        check_store(loader, p, pkg);
      } else if (kind == store::PathKind::StoreArchive || kind == store::PathKind::Manifest) {
        pkg.kind = kind == store::PathKind::Manifest ? "manifest" : "store-archive";
        fs::path mf = kind == store::PathKind::Manifest ? p : p / "manifest.json";
        check_manifest_text(loader, io::read_whole_file(mf), mf.string(), pkg);
      } else {
        throw Error(ErrorKind::Usage,
                    p.string() + " is " + describe(kind) +
                        ", not a package (archive, index, store, wheel or kiln tarball)");
      }
      if (pkg.kind != "wheel") check_device(device_ccs, pkg);  // wheels: together, below
    } catch (const Error& e) {
      if (pkg.kind.empty()) pkg.kind = "unknown";
      pkg.problems.push_back({e.kind(), "package", p.string(), "", "", e.what()});
    }
    rep.packages.push_back(std::move(pkg));
  }
  if (wheels_as_a_set) check_target_wheels_together(rep);
  return rep;
}

void check_driver(CompatReport& rep, int driver, const std::string& from) {
  rep.driver = driver;
  rep.driver_from = driver > 0 ? from : "";
  if (driver <= 0) return;
  const std::string drv = format::driver_cuda_version(driver).str();
  auto driver_runs = [&](const CompatManifest& m) {
    auto t = format::parse_target(m.target);
    return t && !plan::toolkit_refusal(m.cuda_version, *t, driver);
  };
  // Target wheels given together are a set offered to pip (check_target_wheels_together): a
  // wheel of a toolkit the driver refuses is "not for" it when another wheel of the set, of the
  // same package, version and target, is of a toolkit it runs.
  auto another_wheel_serves = [&](const CompatPackage& w) {
    for (const auto& other : rep.packages) {
      if (&other == &w || other.kind != "wheel" || other.judged_as != w.judged_as) continue;
      for (const auto& om : other.manifests)
        for (const auto& wm : w.manifests)
          if (om.target == wm.target && om.package == wm.package &&
              om.package_version == wm.package_version && driver_runs(om))
            return true;
    }
    return false;
  };
  for (auto& pkg : rep.packages) {
    if (pkg.manifests.empty()) continue;
    // Each manifest: runs on this driver, or why not (plan/target_choice.hpp toolkit_refusal).
    std::vector<std::optional<std::string>> refusal;
    std::set<std::string> toolkits;
    for (const auto& m : pkg.manifests) {
      auto t = format::parse_target(m.target);
      refusal.push_back(t ? plan::toolkit_refusal(m.cuda_version, *t, driver) : std::nullopt);
      if (refusal.back()) pkg.notes.push_back(m.origin + ": " + *refusal.back());
      toolkits.insert(m.cuda_version);
    }
    std::string tks;
    for (const auto& t : toolkits) tks += (tks.empty() ? "" : ",") + t;
    const bool served_by_another = pkg.kind == "wheel" && another_wheel_serves(pkg);
    auto problem = [&](const std::string& msg) {
      std::string why;
      for (const auto& r : refusal)
        if (r && why.find(*r) == std::string::npos) why += (why.empty() ? "" : "; ") + *r;
      if (served_by_another)
        pkg.notes.push_back("not for this driver (CUDA " + drv + ", another wheel given serves it): " +
                            why);
      else
        pkg.problems.push_back({ErrorKind::Unsupported, "cuda_version", pkg.path, tks,
                                "CUDA " + drv, msg + ": " + why});
    };
    if (rep.devices.empty()) {
      if (std::all_of(refusal.begin(), refusal.end(), [](const auto& r) { return r.has_value(); }))
        problem("cuda_version: package has CUDA " + tks + "; the driver (" + from + ") runs CUDA " +
                drv + ", which runs none of them");
      continue;
    }
    for (int cc : rep.devices) {
      std::vector<std::string> offered;
      for (const auto& m : pkg.manifests) offered.push_back(m.target);
      plan::NamedChoice choice = plan::choose_named_targets(cc, offered);
      if (choice.candidates.empty()) continue;  // check_device's problem
      bool runs = false;
      for (std::size_t i = 0; i < pkg.manifests.size(); ++i)
        for (const auto& c : choice.candidates)
          if (c.first == pkg.manifests[i].target && !refusal[i]) runs = true;
      if (!runs)
        problem("cuda_version: of the archives that run on " + plan::device_target(cc) +
                ", none was built by a toolkit that the driver (" + from + ", CUDA " + drv +
                ") runs");
    }
  }
}

bool CompatReport::compatible() const {
  return std::all_of(packages.begin(), packages.end(),
                     [](const CompatPackage& p) { return p.compatible(); });
}

int CompatReport::exit_code() const {
  std::vector<store::VerifyProblem> all;
  for (const auto& p : packages)
    for (const auto& x : p.problems) all.push_back({x.kind, "", "", ""});
  auto worst = store::most_severe(all);
  return worst ? kiln::exit_code(*worst) : 0;
}

std::string CompatReport::to_json() const {
  Json j = Json::object();
  j["loader"] = {{"library", loader.library},           {"version", loader.version},
                 {"package", loader.package},           {"package_version", loader.package_version},
                 {"cuda_version", loader.cuda_version}, {"manifest_format", loader.manifest_format},
                 {"index_format", loader.index_format}};
  j["devices"] = Json::array();
  for (int cc : devices) j["devices"].push_back(plan::device_target(cc));
  j["driver"] = driver > 0 ? Json(format::driver_cuda_version(driver).str()) : Json();
  j["driver_from"] = driver > 0 ? Json(driver_from) : Json();
  j["compatible"] = compatible();
  j["exit_code"] = exit_code();
  j["packages"] = Json::array();
  for (const auto& p : packages) {
    Json jp = Json::object();
    jp["path"] = p.path;
    jp["kind"] = p.kind;
    jp["judged_as"] = p.judged_as;
    jp["compatible"] = p.compatible();
    jp["manifests"] = Json::array();
    for (const auto& m : p.manifests)
      jp["manifests"].push_back({{"origin", m.origin},
                                 {"target", m.target},
                                 {"package", m.package},
                                 {"package_version", m.package_version},
                                 {"format_version", m.format_version},
                                 {"cuda_version", m.cuda_version},
                                 {"artifacts", m.artifacts},
                                 {"unknown_uris", m.unknown_uris},
                                 {"compatible", m.compatible}});
    jp["problems"] = Json::array();
    for (const auto& x : p.problems)
      jp["problems"].push_back({{"kind", to_string(x.kind)},
                                {"field", x.field},
                                {"where", x.where},
                                {"package", x.package_value},
                                {"loader", x.loader_value},
                                {"message", x.message}});
    jp["notes"] = p.notes;
    jp["warnings"] = p.warnings;
    jp["provenance"] = p.provenance ? Json::parse(format::provenance_to_json(*p.provenance)) : Json();
    j["packages"].push_back(std::move(jp));
  }
  return j.dump(2) + "\n";
}

std::string CompatReport::to_table() const {
  std::ostringstream s;
  s << "loader  " << loader.library << "\n        kiln " << loader.version << " serving "
    << loader.package << " " << loader.package_version << ", CUDA " << loader.cuda_version
    << ", manifest format " << loader.manifest_format << ", index format " << loader.index_format
    << "\n";
  s << "device  ";
  if (devices.empty()) s << "none given or present (targets not checked; pass --device sm_XX)";
  for (std::size_t i = 0; i < devices.size(); ++i)
    s << (i ? ", " : "") << plan::device_target(devices[i]) << " (CC " << plan::cc_string(devices[i]) << ")";
  s << "\ndriver  ";
  if (driver > 0)
    s << "CUDA " << format::driver_cuda_version(driver).str() << " (" << driver_from
      << "): each archive's toolkit weighed against it";
  else
    s << "none here nor given (toolkits not weighed; pass --driver X.Y)";
  s << "\n\n";
  // Columns as wide as their widest cell: a release with seven targets stays readable.
  auto targets_of = [](const CompatPackage& p) {
    std::string t;
    for (const auto& m : p.manifests) t += (t.empty() ? "" : ",") + m.target;
    return t.empty() ? std::string("-") : t;
  };
  std::size_t wp = 7, wk = 4, wt = 7;
  for (const auto& p : packages) {
    wp = std::max(wp, p.path.size());
    wk = std::max(wk, p.kind.size());
    wt = std::max(wt, targets_of(p).size());
  }
  auto pad = [](const std::string& x, std::size_t w) {
    return x + std::string(w - x.size() + 2, ' ');
  };
  s << pad("PACKAGE", wp) << pad("KIND", wk) << pad("TARGETS", wt) << "RESULT\n";
  for (const auto& p : packages) {
    std::string result = p.compatible() ? "compatible"
                                        : "INCOMPATIBLE (" + std::to_string(p.problems.size()) +
                                              (p.problems.size() == 1 ? " problem)" : " problems)");
    s << pad(p.path, wp) << pad(p.kind, wk) << pad(targets_of(p), wt) << result << "\n";
  }
  for (const auto& p : packages) {
    if (p.problems.empty() && p.notes.empty() && !p.provenance) continue;
    s << "\n" << p.path << ":\n";
    for (const auto& x : p.problems)
      s << "  " << to_string(x.kind) << "  " << x.where << ": " << x.message << "\n";
    for (const auto& w : p.warnings) s << "  warning  " << w << "\n";
    if (p.provenance) s << "  built  " << format::describe_provenance(*p.provenance) << "\n";
    for (const auto& n : p.notes) s << "  note  " << n << "\n";
  }
  s << "\n" << (compatible() ? "compatible" : "NOT compatible") << "\n";
  return s.str();
}

}  // namespace kiln::release
