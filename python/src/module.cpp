// kiln._kiln: the nanobind module behind the `kiln` Python package (python/kiln/__init__.py
// wraps it). The API follows kiln/loader.hpp: Config is LoaderConfig, Loader is kiln::Loader
// over a DescribedPackage, Kernel is a KernelHandle; kiln::Error becomes the kiln.Error subclass
// of its kind (python/kiln/_errors.py) with the kind, exit code, message and context fields.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "described_package.hpp"
#include "dlpack_view.hpp"
#include "kernel_args.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "machine_facts.hpp"
#include "ops_bindings.hpp"
#include "python_errors.hpp"
#include "python_loader.hpp"
#include "runtime/driver.hpp"
#include "util/join.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {

namespace {

// kiln.Error's subclass for `e`'s kind, built by kiln._errors (one home for the classes).
void raise_kiln_error(const Error& e) {
  nb::list fields;
  for (const auto& f : e.fields()) fields.append(nb::make_tuple(f.name, f.value));
  nb::object errors = nb::module_::import_("kiln._errors");
  nb::object exc = errors.attr("_from_native")(to_string(e.kind()), exit_code(e.kind()),
                                               std::string(e.what()), fields);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
}

// ---- Config: LoaderConfig's fields, one property each ------------------------------------

const std::vector<std::string>& config_fields() {
  static const std::vector<std::string> names = {
      "artifact_path",   "cache_dir", "mirrors",     "index_sha256", "tuf_root",
      "ca_bundle",       "offline",   "disable_jit", "allow_stale",  "use_installed_store",
      "installed_store", "log_level", "api_log",     "log_file",     "nvrtc_library",
      "cuda_home"};
  return names;
}

// Paths may be given as os.PathLike; lists of them too.
nb::object fspath_value(const std::string& field, nb::handle value) {
  nb::object fspath = nb::module_::import_("os").attr("fspath");
  if (field == "artifact_path" || field == "mirrors") {
    if (PyUnicode_Check(value.ptr()) || !PySequence_Check(value.ptr()))
      throw type_error("Config." + field + " takes a list of " +
                      (field == "mirrors" ? "URLs" : "directories") + ", not a " +
                      nb::cast<std::string>(nb::type_name(value.type())),
                  {{"setting", field}});
    nb::list out;
    for (nb::handle item : value) out.append(field == "mirrors" ? nb::borrow(item) : fspath(item));
    return out;
  }
  if (nb::hasattr(value, "__fspath__")) return fspath(value);
  return nb::borrow(value);
}

void apply_fields(LoaderConfig& cfg, nb::kwargs fields) {
  // Through a copy that Python owns: `cfg` may be an instance still being initialised.
  nb::object self = nb::cast(cfg, nb::rv_policy::copy);
  for (auto [key, value] : fields) {
    const std::string name = nb::cast<std::string>(key);
    bool known = false;
    for (const auto& f : config_fields()) known = known || f == name;
    if (!known) {
      throw type_error(
          "Config has no field '" + name + "'; its fields: " + util::join(config_fields(), ", "),
          {{"setting", name}});
    }
    try {
      nb::setattr(self, name.c_str(), fspath_value(name, value));
    } catch (const nb::python_error& e) {
      throw type_error("Config." + name + ": " + nb::cast<std::string>(nb::repr(value)) + " is not a " +
                      nb::cast<std::string>(self.attr(name.c_str()).type().attr("__name__")),
                  {{"setting", name}});
    }
  }
  cfg = nb::cast<LoaderConfig>(self);
}

void bind_config(nb::module_& m) {
  nb::class_<LoaderConfig>(m, "Config",
                           "A loader's configuration: LoaderConfig's fields (kiln/loader.hpp). "
                           "Config(**fields) starts from the built-in defaults and reads no "
                           "environment; Config.from_env(**fields) starts from the KILN_* "
                           "variables. Explicit fields win in both.")
      .def("__init__",
           [](LoaderConfig* self, nb::kwargs fields) {
             new (self) LoaderConfig();
             apply_fields(*self, fields);
           })
      .def_static(
          "from_env",
          [](nb::kwargs fields) {
            LoaderConfig cfg = LoaderConfig::from_env();
            apply_fields(cfg, fields);
            return cfg;
          },
          "The KILN_* variables (docs/loader.md \"Settings\"), then `fields`; a bad variable is "
          "kiln.UsageError naming it.")
      .def_static(
          "fields", [] { return config_fields(); }, "The field names, in order.")
      .def(
          "replace",
          [](const LoaderConfig& self, nb::kwargs fields) {
            LoaderConfig cfg = self;
            apply_fields(cfg, fields);
            return cfg;
          },
          "A copy with `fields` changed.")
      .def_rw("artifact_path", &LoaderConfig::artifact_path)
      .def_rw("cache_dir", &LoaderConfig::cache_dir)
      .def_rw("mirrors", &LoaderConfig::mirrors)
      .def_rw("index_sha256", &LoaderConfig::index_sha256)
      .def_rw("tuf_root", &LoaderConfig::tuf_root)
      .def_rw("ca_bundle", &LoaderConfig::ca_bundle)
      .def_rw("offline", &LoaderConfig::offline)
      .def_rw("disable_jit", &LoaderConfig::disable_jit)
      .def_rw("allow_stale", &LoaderConfig::allow_stale)
      .def_rw("use_installed_store", &LoaderConfig::use_installed_store)
      .def_rw("installed_store", &LoaderConfig::installed_store)
      .def_rw("log_level", &LoaderConfig::log_level)
      .def_rw("api_log", &LoaderConfig::api_log)
      .def_rw("log_file", &LoaderConfig::log_file)
      .def_rw("nvrtc_library", &LoaderConfig::nvrtc_library)
      .def_rw("cuda_home", &LoaderConfig::cuda_home)
      .def("__repr__", [](nb::handle self) {
        std::string r = "kiln.Config(";
        bool first = true;
        for (const auto& f : config_fields()) {
          r +=
              (first ? "" : ", ") + f + "=" + nb::cast<std::string>(nb::repr(self.attr(f.c_str())));
          first = false;
        }
        return r + ")";
      });
}

// ---- Package, Loader, Kernel --------------------------------------------------------------

// A loaded kernel; keeps its Loader alive. Its uri and origin stay readable after the loader is
// closed; the handle is used only while the loader is open (handle_of).
struct Kernel {
  const KernelHandle* handle = nullptr;
  nb::object owner;  // the kiln._kiln.Loader that loaded it
  std::string uri, origin;
  std::size_t entries = 0;
};

const KernelHandle& handle_of(const Kernel& k) {
  nb::cast<PythonLoader&>(k.owner).live();  // Error{Usage} once the loader is closed
  return *k.handle;
}

std::shared_ptr<DescribedPackage> package_from(nb::handle description, nb::handle package) {
  if (!description.is_none() && !package.is_none())
    throw type_error("Loader takes description= or package=, not both", {{"argument", "package"}});
  if (!package.is_none()) {
    if (!nb::isinstance<DescribedPackage>(package))
      throw type_error("package= takes a kiln.Package (Package.from_file, Package.from_library), "
                  "not a " +
                      nb::cast<std::string>(nb::type_name(package.type())),
                  {{"argument", "package"}});
    return nb::cast<std::shared_ptr<DescribedPackage>>(package);
  }
  if (description.is_none())
    throw type_error("Loader needs description=PATH (a <name>-<version>.package.json) or "
                "package=kiln.Package; kiln.load(NAME) finds an installed package's",
                {{"argument", "description"}});
  nb::object path = nb::module_::import_("os").attr("fspath")(description);
  return DescribedPackage::from_file(nb::cast<std::string>(path));
}

void init_loader(PythonLoader* self, nb::handle description, nb::handle package,
                 std::optional<LoaderConfig> config) {
  std::shared_ptr<DescribedPackage> pkg = package_from(description, package);
  LoaderConfig cfg = config ? std::move(*config) : LoaderConfig::from_env();
  // A description file ships in its package's store: that store is "the installed one".
  if (cfg.installed_store.empty()) cfg.installed_store = pkg->store_dir();
  auto loader = std::make_shared<Loader>(pkg->get(), std::move(cfg));
  new (self) PythonLoader{std::move(pkg), std::move(loader)};
}

nb::object resolution_dict(const Resolution& r, bool explain) {
  nb::dict parsed = nb::cast<nb::dict>(nb::module_::import_("json").attr("loads")(r.to_json()));
  if (!explain) {
    nb::dict brief;
    for (const char* k : {"uri", "device", "chosen"})
      if (parsed.contains(k)) brief[k] = parsed[k];
    return brief;
  }
  return parsed;
}

void launch(PythonLoader& self, const Kernel& k, nb::handle grid, nb::handle block, nb::handle args,
            nb::handle shared_bytes, nb::handle stream, nb::handle entry_arg) {
  const std::size_t entry =
      index_in_range(entry_arg, "entry", 0, std::numeric_limits<std::uint32_t>::max());
  std::shared_ptr<Loader> live = self.live();
  if (entry >= k.entries)
    throw Error(ErrorKind::Usage,
                "entry " + std::to_string(entry) + " of " + k.uri + ": it has " +
                    std::to_string(k.entries) + " entr" + (k.entries == 1 ? "y" : "ies"),
                {{"argument", "entry"}, {"uri", k.uri}});
  if (&nb::cast<PythonLoader&>(k.owner) != &self)
    throw Error(
        ErrorKind::Usage,
        "kernel " + k.uri + " was loaded by another Loader; launch it with that one",
        {{"argument", "kernel"}, {"uri", k.uri}});
  Loader::Dim3 g = dim3(grid, "grid"), b = dim3(block, "block");
  const std::size_t shared =
      index_in_range(shared_bytes, "shared_bytes", 0, std::numeric_limits<unsigned>::max());
  void* st = launch_stream(stream, args);
  PackedArgs packed(args, st, *k.handle, entry);
  nb::gil_scoped_release release;
  live->launch(*k.handle, entry, g, b, shared, st, packed.params(), packed.count());
}

// The parameters of a kernel's entry as the driver reports them (UnsupportedError when it
// cannot: a driver older than CUDA 12.4).
std::vector<KernelArgument> kernel_arguments(const Kernel& k, std::size_t entry) {
  return nb::cast<PythonLoader&>(k.owner).live()->arguments(handle_of(k), entry);
}

void bind_package(nb::module_& m) {
  nb::class_<DescribedPackage>(m, "Package", "A kernel package's description.")
      .def_static(
          "from_file",
          [](nb::handle path) {
            return DescribedPackage::from_file(
                nb::cast<std::string>(nb::module_::import_("os").attr("fspath")(path)));
          },
          "path"_a, "Reads and checks a <name>-<version>.package.json.")
      .def_static("from_library", &DescribedPackage::from_library, "path"_a, "symbol"_a,
                  "The package a library made with kiln_add_kernel_package defines.")
      .def_prop_ro("name", [](const DescribedPackage& p) { return std::string(p.get().name); })
      .def_prop_ro("version",
                   [](const DescribedPackage& p) { return std::string(p.get().version); })
      .def_prop_ro("origin", &DescribedPackage::origin)
      .def_prop_ro("uris",
                   [](const DescribedPackage& p) {
                     std::vector<std::string> uris;
                     for (std::size_t i = 0; i < p.get().kernel_count; ++i)
                       uris.emplace_back(p.get().kernels[i].uri);
                     return uris;
                   })
      .def("__repr__", [](const DescribedPackage& p) {
        return "kiln.Package('" + std::string(p.get().name) + "', '" + p.get().version +
               "', origin='" + p.origin() + "')";
      });
}

void bind_kernel(nb::module_& m) {
  nb::class_<KernelArgument>(m, "ArgumentInfo",
                             "One kernel parameter: its byte offset in the parameter buffer and "
                             "its size in bytes.")
      .def_ro("offset", &KernelArgument::offset)
      .def_ro("size", &KernelArgument::size)
      .def("__eq__",
           [](const KernelArgument& a, const KernelArgument& b) {
             return a.offset == b.offset && a.size == b.size;
           })
      .def("__iter__",
           [](const KernelArgument& a) { return nb::iter(nb::make_tuple(a.offset, a.size)); })
      .def("__repr__", [](const KernelArgument& a) {
        return "kiln.ArgumentInfo(offset=" + std::to_string(a.offset) +
               ", size=" + std::to_string(a.size) + ")";
      });
  nb::class_<Kernel>(m, "Kernel", "A kernel loaded for the current context (Loader.get).")
      .def_prop_ro("uri", [](const Kernel& k) { return k.uri; })
      .def_prop_ro("origin", [](const Kernel& k) { return k.origin; })
      .def_prop_ro("entries", [](const Kernel& k) { return k.entries; })
      .def_prop_ro(
          "device", [](const Kernel& k) { return handle_of(k).device; },
          "The ordinal of the device whose context the kernel was loaded for; arrays a launch "
          "passes must be on it.")
      .def_prop_ro(
          "num_arguments",
          [](const Kernel& k) { return kernel_arguments(k, 0).size(); },
          "How many parameters entry 0 takes, as the driver reports them (kiln.UnsupportedError "
          "when the driver cannot: older than CUDA 12.4).")
      .def_prop_ro(
          "arguments_info", [](const Kernel& k) { return kernel_arguments(k, 0); },
          "Entry 0's parameters in order: each an ArgumentInfo(offset, size) in bytes.")
      .def(
          "entry_arguments_info",
          [](const Kernel& k, nb::handle entry) {
            return kernel_arguments(k, index_in_range(entry, "entry", 0, std::numeric_limits<std::uint32_t>::max()));
          },
          "entry"_a, nb::sig("def entry_arguments_info(self, entry: int) -> list[ArgumentInfo]"),
          "The parameters of entry `entry` (a kernel of several entries: see Kernel.entries).")
      .def_prop_ro(
          "functions",
          [](const Kernel& k) {
            std::vector<std::uint64_t> f;
            for (void* p : handle_of(k).functions)
              f.push_back(reinterpret_cast<std::uintptr_t>(p));
            return f;
          },
          "The CUfunction of each entry, as ints (registry order); kiln.UsageValueError once "
          "its loader is closed (the functions are unloaded with it).")
      .def("__repr__", [](const Kernel& k) {
        return "kiln.Kernel('" + k.uri + "', origin='" + k.origin + "')";
      });
}

void bind_loader(nb::module_& m) {
  nb::class_<PythonLoader>(m, "Loader",
                           "Serves one kernel package (kiln::Loader): get, prefetch, resolve, "
                           "launch.")
      // The signatures below name the types the nb::handle parameters take (the stubs,
      // kiln/_kiln.pyi, come from them: docs/python.md "Types").
      .def("__init__", &init_loader, nb::kw_only(), "description"_a = nb::none(),
           "package"_a = nb::none(), "config"_a = nb::none(),
           nb::sig("def __init__(self, *, description: str | os.PathLike[str] | None = None, "
                   "package: Package | None = None, config: Config | None = None) -> None"))
      .def_prop_ro("package", [](const PythonLoader& l) { return l.package; })
      .def_prop_ro("config", [](const PythonLoader& l) { return l.live()->config(); })
      .def_prop_ro("id", [](const PythonLoader& l) { return l.live()->id(); })
      .def_prop_ro("closed", [](const PythonLoader& l) { return !l.loader; })
      .def(
          "stats_json", [](const PythonLoader& l) { return l.live()->stats().json(); },
          "What the loader did since it was made: LoaderStats' JSON form (kiln.Loader.stats "
          "parses it).")
      .def(
          "close", [](PythonLoader& l) { l.loader.reset(); },
          "Frees the loader and the modules it loaded (at once, or when a call in flight in "
          "another thread returns); using it afterwards is a kiln.UsageValueError. Idempotent.")
      .def(
          "get",
          [](nb::handle self, const std::string& uri, nb::handle stream) {
            std::shared_ptr<Loader> live = nb::cast<PythonLoader&>(self).live();
            void* st = stream_handle(stream);
            const KernelHandle* h = nullptr;
            {
              nb::gil_scoped_release release;
              h = stream.is_none() ? &live->get(uri) : &live->get(uri, st);
            }
            return Kernel{h, nb::borrow(self), h->uri, h->origin, h->functions.size()};
          },
          "uri"_a, "stream"_a = nb::none())
      .def(
          "prefetch",
          [](PythonLoader& l, const std::vector<std::string>& uris) {
            std::shared_ptr<Loader> live = l.live();
            nb::gil_scoped_release release;
            live->prefetch(uris);
          },
          "uris"_a)
      .def(
          "resolve",
          [](PythonLoader& l, const std::string& uri, nb::handle cc_given, bool explain) {
            std::shared_ptr<Loader> live = l.live();
            std::optional<int> cc;
            if (!cc_given.is_none()) cc = parse_cc(cc_given, "cc");
            Resolution r;
            {
              nb::gil_scoped_release release;
              r = live->resolve(uri, cc);
            }
            return resolution_dict(r, explain);
          },
          "uri"_a, "cc"_a = nb::none(), "explain"_a = true,
          nb::sig("def resolve(self, uri: str, cc: int | str | None = None, "
                  "explain: bool = True) -> dict[str, typing.Any]"))
      .def("launch", &launch, "kernel"_a, "grid"_a, "block"_a, "args"_a, "shared_bytes"_a = 0,
           "stream"_a = nb::none(), "entry"_a = 0,
           nb::sig("def launch(self, kernel: Kernel, grid: int | collections.abc.Sequence[int], "
                   "block: int | collections.abc.Sequence[int], "
                   "args: collections.abc.Sequence[object], shared_bytes: int = 0, "
                   "stream: object | None = None, entry: int = 0) -> None"));
}

// What kiln.ops reads of a DLPack array (bfloat16 has no __cuda_array_interface__ typestr),
// asking the producer to order its work before `stream` (a CUstream as int; None: the legacy
// default stream).
nb::tuple dlpack_view(nb::handle value, nb::handle stream) {
  DLPackView v = read_dlpack(value, "array", nb::int_(dlpack_stream(stream_handle(stream))));
  return nb::make_tuple(v.data, v.device_type, v.device_id, v.code, v.bits, v.lanes,
                        nb::tuple(nb::cast(v.shape)), nb::tuple(nb::cast(v.strides)));
}

void bind_scalars(nb::module_& m) {
  m.def("_dlpack_view", &dlpack_view, "value"_a, "stream"_a = nb::none());
  m.def(
      "_zero_stats_json", [] { return LoaderStats{}.json(); },
      "The statistics of a loader that did nothing yet (kiln.Loader.stats before the native "
      "loader is made).");
  m.def(
      "_device_pointer",
      [](nb::handle v, nb::handle stream) {
        return device_pointer(v, "array", stream_handle(stream));
      },
      "value"_a, "stream"_a = nb::none());
  m.def(
      "_stream_handle",
      [](nb::handle stream) {
        return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(stream_handle(stream)));
      },
      "stream"_a, "The CUstream of an int or a stream object, as an int (0 for None).");
  m.def(
      "_synchronize",
      [](nb::handle stream) {
        void* st = stream_handle(stream);
        nb::gil_scoped_release release;
        runtime::make_cuda_driver()->synchronize(st);
      },
      "stream"_a, "Waits for a CUstream (cuStreamSynchronize).");
  m.def(
      "_current_device",
      [] {
        nb::gil_scoped_release release;
        return runtime::make_cuda_driver()->current_device();
      },
      "The ordinal of the current context's device (device 0's primary context when none).");
  nb::class_<Scalar>(m, "Scalar", "A typed scalar kernel argument: kiln.f32(x), kiln.i32(x)...")
      .def_ro("type", &Scalar::type)
      .def_prop_ro("bytes",
                   [](const Scalar& s) {
                     return nb::bytes(reinterpret_cast<const char*>(s.bytes.data()), s.size);
                   })
      .def("__repr__", [](const Scalar& s) { return "kiln." + s.type + "(...)"; });
  // The signature of each: nb::sig keeps the pointer, so literals.
  static const char* const scalar_types[][2] = {
      {"f32", "def f32(value: float) -> Scalar"}, {"f64", "def f64(value: float) -> Scalar"},
      {"i8", "def i8(value: typing.SupportsIndex) -> Scalar"},     {"u8", "def u8(value: typing.SupportsIndex) -> Scalar"},
      {"i16", "def i16(value: typing.SupportsIndex) -> Scalar"},   {"u16", "def u16(value: typing.SupportsIndex) -> Scalar"},
      {"i32", "def i32(value: typing.SupportsIndex) -> Scalar"},   {"u32", "def u32(value: typing.SupportsIndex) -> Scalar"},
      {"i64", "def i64(value: typing.SupportsIndex) -> Scalar"},   {"u64", "def u64(value: typing.SupportsIndex) -> Scalar"}};
  for (const auto& [t, sig] : scalar_types) {
    std::string type = t;
    m.def(
        t, [type](nb::handle v) { return make_scalar(type, v); }, "value"_a, nb::sig(sig));
  }
}

}  // namespace

}  // namespace kiln::python

NB_MODULE(_kiln, m) {
  using namespace kiln::python;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const kiln::Error& e) {
      raise_kiln_error(e);
    }
  });
  bind_config(m);
  bind_scalars(m);
  bind_package(m);
  bind_kernel(m);
  bind_loader(m);
  bind_machine_facts(m);
  bind_ops(m);
}
