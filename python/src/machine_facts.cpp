#include "machine_facts.hpp"

#include <dlfcn.h>
#include <link.h>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "format/target.hpp"
#include "format/toolkit.hpp"
#include "jit/jit.hpp"
#include "kiln/error.hpp"
#include "kiln/kiln.h"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"
#include "plan/doctor_probes.hpp"
#include "plan/load_readiness.hpp"
#include "plan/resolver.hpp"
#include "plan/store_scanner.hpp"
#include "plan/target_choice.hpp"
#include "python_errors.hpp"
#include "project/package_description.hpp"
#include "runtime/driver.hpp"
#include "runtime/lazy_libs.hpp"

namespace kiln::python {

namespace {

[[noreturn]] void bad_cc(const char* name, const std::string& got, bool wrong_type) {
  const std::string message = std::string(name) + ": '" + got +
                              "' is no compute capability: give 90 (for 9.0), \"9.0\", or a "
                              "target such as \"sm_90\"";
  if (wrong_type) throw type_error(message, {{"argument", name}, {"value", got}});
  throw Error(ErrorKind::Usage, message, {{"argument", name}, {"value", got}});
}

std::vector<runtime::DeviceInfo> driver_devices() {
  auto driver = runtime::make_cuda_driver();
  driver->init();  // Error{Unsupported} naming libcuda.so.1 or the cuInit error
  return driver->devices();
}

nb::list device_list() {
  nb::list out;
  for (const auto& d : driver_devices())
    out.append(nb::make_tuple(d.ordinal, d.name, d.cc, plan::device_target(d.cc)));
  return out;
}

// cc given, or device 0's (the device a fresh process's first get() uses).
int cc_or_first_device(nb::handle cc) {
  if (!cc.is_none()) return parse_cc(cc, "cc");
  std::vector<runtime::DeviceInfo> devs = driver_devices();
  if (devs.empty())
    throw Error(ErrorKind::Unsupported,
                "no CUDA device: the driver reports none; pass cc= (90 for 9.0) to choose "
                "for another machine",
                {{"argument", "cc"}});
  return devs.front().cc;
}

nb::dict target_choice(const std::vector<std::string>& available, nb::handle cc) {
  plan::NamedChoice c = plan::choose_named_targets(cc_or_first_device(cc), available);
  nb::list candidates, rejected;
  for (const auto& [t, why] : c.candidates) candidates.append(nb::make_tuple(t, why));
  for (const auto& [t, why] : c.rejected) rejected.append(nb::make_tuple(t, why));
  nb::dict d;
  d["cc"] = c.cc;
  d["device"] = plan::device_target(c.cc);
  d["candidates"] = candidates;
  d["rejected"] = rejected;
  return d;
}

std::optional<std::string> choose_target(const std::vector<std::string>& available, nb::handle cc) {
  plan::NamedChoice c = plan::choose_named_targets(cc_or_first_device(cc), available);
  if (c.candidates.empty()) return std::nullopt;
  return c.candidates.front().first;
}

// Where the dynamic linker found an already loaded library ("" when it is not loaded).
std::string loaded_path(const std::string& soname) {
  void* h = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) return "";
  link_map* lm = nullptr;
  std::string path;
  if (::dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name) path = lm->l_name;
  ::dlclose(h);
  return path;
}

nb::dict driver_facts(nb::list& devices_out) {
  nb::dict d;
  d["library"] = runtime::kCudaDriverLibrary;
  try {
    auto driver = runtime::make_cuda_driver();
    driver->init();
    int v = driver->driver_version();
    d["available"] = true;
    d["version"] = std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
    d["path"] = loaded_path(runtime::kCudaDriverLibrary);
    d["detail"] = "";
    for (const auto& dev : driver->devices())
      devices_out.append(nb::make_tuple(dev.ordinal, dev.name, dev.cc, plan::device_target(dev.cc)));
  } catch (const Error& e) {
    d["available"] = false;
    d["version"] = "";
    d["path"] = "";
    d["detail"] = e.what();
  }
  return d;
}

nb::dict nvrtc_facts(const LoaderConfig& cfg) {
  jit::NvrtcConfig nc;
  nc.library = cfg.nvrtc_library;
  nc.cuda_home = cfg.cuda_home;
  // The NVRTC the loader would take is the one this driver runs (jit/jit.hpp).
  try {
    auto driver = runtime::make_cuda_driver();
    driver->init();
    nc.driver = driver->driver_version();
  } catch (const Error&) {
    nc.driver = 0;  // no driver: not weighed, as the loader
  }
  jit::JitCapability cap = jit::make_nvrtc_compiler(std::move(nc))->probe();
  nb::dict d;
  d["available"] = cap.available;
  d["version"] = cap.available
                     ? std::to_string(cap.nvrtc_major) + "." + std::to_string(cap.nvrtc_minor)
                     : std::string();
  d["path"] = cap.library_path;
  d["detail"] = cap.missing;
  d["jit_disabled"] = cfg.disable_jit;
  return d;
}

nb::list library_facts() {
  nb::list out;
  for (auto lib : {runtime::lazy_libs::Library::Curl, runtime::lazy_libs::Library::Archive}) {
    runtime::lazy_libs::LibraryFacts f = runtime::lazy_libs::facts(lib);
    std::optional<std::string> problem = runtime::lazy_libs::load_problem(lib);
    nb::dict d;
    d["name"] = f.name;
    d["soname"] = f.soname;
    d["loaded"] = !problem;
    d["path"] = problem ? std::string() : loaded_path(f.soname);
    d["package"] = f.package;
    d["needed_for"] = f.used_for;
    d["detail"] = problem.value_or("");
    out.append(d);
  }
  return out;
}

// Everything `python -m kiln doctor` reports that the native side knows; the Python side adds
// the cache directory's write check and the installed packages.
nb::dict doctor_facts(const LoaderConfig& cfg) {
  nb::dict j;
  nb::list devices;
  j["driver"] = driver_facts(devices);
  j["devices"] = devices;
  j["nvrtc"] = nvrtc_facts(cfg);
  j["libraries"] = library_facts();
  return j;
}

// One installed package: its name, version and target stores (kiln._installed).
using InstalledPackage = std::tuple<std::string, std::string, std::vector<std::string>>;

// The verdict of `python -m kiln doctor`, by the rule `kiln doctor` judges by (judge_loading)
// over the same kinds of facts: `native` (what _doctor_facts found: driver, devices, NVRTC),
// the cache directory's write check, the stores of every installed package and the configured
// ones (scanned as the loader scans them), and the mirrors probed for each installed package's
// index. Returns {ok, missing, mirrors: [{url, reachable, detail}]}.
nb::dict load_verdict(const LoaderConfig& cfg, nb::dict native, const std::string& cache_problem,
                      const std::vector<InstalledPackage>& packages) {
  plan::LoadFacts f;
  nb::dict driver = nb::cast<nb::dict>(native["driver"]);
  f.driver_loads = nb::cast<bool>(driver["available"]);
  f.driver_problem = nb::cast<std::string>(driver["detail"]);
  for (nb::handle d : nb::cast<nb::list>(native["devices"]))
    f.device_ccs.push_back(nb::cast<int>(nb::cast<nb::tuple>(d)[2]));
  nb::dict nvrtc = nb::cast<nb::dict>(native["nvrtc"]);
  const bool nvrtc_ok = nb::cast<bool>(nvrtc["available"]);
  f.jit_usable = nvrtc_ok && !cfg.disable_jit;
  f.jit_problem = nvrtc_ok ? std::string("disabled by KILN_DISABLE_JIT")
                           : nb::cast<std::string>(nvrtc["detail"]);
  f.cache_dir = cfg.cache_dir;
  f.cache_problem = cache_problem;

  // One entry per directory, the targets of every package's usable archives in it.
  std::map<std::string, std::size_t> seen;
  auto add_store = [&](const plan::StoreScanner& disk, const std::string& dir, const std::string& source,
                       bool required) {
    plan::StoreScan scan = disk.scan(dir, source);
    auto [it, fresh] = seen.emplace(dir, f.stores.size());
    if (fresh) f.stores.push_back({dir, source, required, scan.readable, scan.problem, {}});
    for (const auto& a : scan.archives)
      if (a.manifest) f.stores[it->second].targets.push_back(a.manifest->target);
  };
  auto add_stores = [&](const plan::StoreScanner& disk, const std::vector<std::string>& own) {
    for (const auto& d : own) add_store(disk, d, "installed package", false);
    for (const auto& d : cfg.artifact_path) add_store(disk, d, "artifact path", true);
    add_store(disk, cfg.cache_dir, "cache directory", false);
  };
  for (const auto& [name, version, stores] : packages)
    add_stores(plan::StoreScanner(name, version), stores);
  if (packages.empty()) add_stores(plan::StoreScanner(), {});

  f.offline = cfg.offline;
  if (packages.empty()) f.mirrors = plan::probe_mirror_facts(cfg, "", "");
  for (const auto& [name, version, stores] : packages)
    for (auto& m : plan::probe_mirror_facts(cfg, name, version)) {
      m.detail = name + " " + version + ": " + m.detail;
      f.mirrors.push_back(std::move(m));
    }

  const plan::LoadVerdict v = plan::judge_loading(f);
  nb::dict out;
  out["ok"] = v.ok;
  out["missing"] = v.missing;
  nb::list mirrors;
  for (const auto& m : f.mirrors) {
    nb::dict d;
    d["url"] = m.url;
    d["reachable"] = m.reachable;
    d["detail"] = m.detail;
    mirrors.append(d);
  }
  out["mirrors"] = mirrors;
  return out;
}

nb::dict build_facts() {
  nb::dict d;
  d["version"] = std::string(version());
  d["commit"] = std::string(git_commit());
  d["cuda"] = std::string(cuda_full_version());
  d["manifest_format"] = kiln_manifest_format();
  d["index_format"] = kiln_index_format();
  d["package_description_format"] = project::kPackageDescriptionFormat;
  d["package_abi_version"] = KILN_PACKAGE_ABI_VERSION;
  return d;
}

}  // namespace

int parse_cc(nb::handle value, const char* name) {
  if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
    long long cc = PyLong_AsLongLong(value.ptr());
    if (cc == -1 && PyErr_Occurred()) PyErr_Clear();
    if (cc < 10 || cc > 999) bad_cc(name, nb::cast<std::string>(nb::str(value)), false);
    return static_cast<int>(cc);
  }
  if (!PyUnicode_Check(value.ptr())) bad_cc(name, nb::cast<std::string>(nb::repr(value)), true);
  const std::string s = nb::cast<std::string>(value);
  if (std::optional<format::Target> t = format::parse_target(s)) return t->arch;
  const auto dot = s.find('.');
  if (dot != std::string::npos && dot > 0 && dot + 2 == s.size() &&
      s.find_first_not_of("0123456789.") == std::string::npos && s.find('.', dot + 1) == s.npos)
    return std::stoi(s.substr(0, dot)) * 10 + (s.back() - '0');
  bad_cc(name, s, false);
}

void bind_machine_facts(nb::module_& m) {
  m.def("devices", &device_list, nb::sig("def devices() -> list[tuple[int, str, int, str]]"),
        "The CUDA devices as (ordinal, name, cc, target) tuples; kiln.UnsupportedError when "
        "the driver (libcuda.so.1) does not load or initialise.");
  m.def("choose_target", &choose_target, nb::arg("available"), nb::arg("cc") = nb::none(),
        nb::sig("def choose_target(available: collections.abc.Sequence[str], "
                "cc: int | str | None = None) -> str | None"),
        "The best of `available` for a device of compute capability `cc` (90 = 9.0; default: "
        "device 0) by kiln's one target-choice rule, or None when none runs there.");
  m.def("target_choice", &target_choice, nb::arg("available"), nb::arg("cc") = nb::none(),
        nb::sig("def target_choice(available: collections.abc.Sequence[str], "
                "cc: int | str | None = None) -> dict[str, typing.Any]"),
        "The whole decision: {cc, device, candidates: [(target, why)], rejected: [(target, "
        "why)]}.");
  m.def(
      "parse_cc", [](nb::handle v) { return parse_cc(v, "cc"); }, nb::arg("cc"),
      nb::sig("def parse_cc(cc: int | str) -> int"),
      "A compute capability as an int (90 for 9.0) from 90, \"9.0\" or a target name.");
  m.def(
      "_store_targets",
      [](const std::string& store, const std::string& package) {
        std::vector<std::string> targets;
        for (const format::Target& t : plan::targets_in_store(store, package)) targets.push_back(t.str());
        return targets;
      },
      nb::arg("store"), nb::arg("package"),
      "The targets of `package`'s archive directories in `store`, as the loader's store scan "
      "lists them (the store rule, bounded); [] when the store cannot be listed.");
  m.def(
      "_store_toolkits",
      [](const std::string& store, const std::string& package, int driver) {
        // plan/doctor_probes.hpp: the doctor's own facts, by package, version and toolkit.
        std::vector<std::tuple<std::string, std::string, std::string, std::size_t, int, std::string>> out;
        plan::StoreScanner disk(package);
        for (const auto& t : plan::store_toolkits(disk.scan(store, "installed"), driver))
          out.emplace_back(t.package, t.version, t.toolkit, t.archives, t.runnable, t.refusal);
        return out;
      },
      nb::arg("store"), nb::arg("package"), nb::arg("driver"),
      "Of `package`'s archives in `store`, by (package, version, toolkit): how many, how many "
      "the driver (cuDriverGetVersion's number; 0: not weighed) runs, and why none when none.");
  m.def(
      "_driver_version",
      []() {
        try {
          auto driver = runtime::make_cuda_driver();
          driver->init();
          return driver->driver_version();
        } catch (const Error&) {
          return 0;  // no driver: toolkits are not weighed
        }
      },
      "This node's driver as cuDriverGetVersion's number (12080 for CUDA 12.8); 0 without one.");
  m.def(
      "_parse_driver_option",
      [](const std::string& text, const std::string& flag) {
        return format::parse_driver_option(text, flag);
      },
      nb::arg("text"), nb::arg("flag"),
      "A --driver X.Y value as cuDriverGetVersion's number (12.8 -> 12080); kiln.UsageError "
      "naming the flag otherwise (format/toolkit.hpp, the CLI's own parser).");
  m.def(
      "_driver_refuses_major",
      [](int cuda_major, const std::string& target, int driver) -> std::optional<std::string> {
        // A target wheel names only its toolkit's major (`_cu12_`): its SASS needs M.0.
        auto t = format::parse_target(target);
        if (!t) return "'" + target + "' is not a target";
        return plan::toolkit_refusal(std::to_string(cuda_major) + ".0", *t, driver);
      },
      nb::arg("cuda_major"), nb::arg("target"), nb::arg("driver"),
      "Why a driver of `driver` cannot run a target wheel of CUDA `cuda_major` (the loader's "
      "rule, plan/target_choice.hpp toolkit_refusal); None when it can.");
  m.def("_doctor_facts", &doctor_facts, nb::arg("config"));
  m.def("_load_verdict", &load_verdict, nb::arg("config"), nb::arg("native"),
        nb::arg("cache_problem"), nb::arg("packages"),
        "Whether loading can work here, by `kiln doctor`'s rule: {ok, missing, mirrors}.");
  m.def("_build_facts", &build_facts);
}

}  // namespace kiln::python
