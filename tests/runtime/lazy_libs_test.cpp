// libcurl and libarchive loaded on first use (core/runtime/lazy_libs.hpp): libkiln.so does not
// need them, a load from a local store works without them, and whatever does need one fails
// with an error that names the library, its SONAME, dlerror() and what to do. The libraries
// are made unloadable through the test seam (a file name that does not exist), not by
// uninstalling them; everything else here is real (libkiln's real fetch, store and loader).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "fetch/fetch.hpp"
#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "jit/jit.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"
#include "loader_factory.hpp"
#include "plan/resolver.hpp"
#include "project/registry.hpp"
#include "runtime/driver.hpp"
#include "runtime/lazy_libs.hpp"
#include "store/index_entry_check.hpp"
#include "store/store.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using runtime::lazy_libs::Library;
using test::TempDir;

// Makes `lib` unloadable for the life of the object: dlopen is pointed at a file that does
// not exist, so dlerror() is the real one.
class Unloadable {
 public:
  explicit Unloadable(Library lib) : lib_(lib) {
    runtime::lazy_libs::set_file_for_tests(lib_, file_for(lib_));
  }
  ~Unloadable() { runtime::lazy_libs::set_file_for_tests(lib_, ""); }
  Unloadable(const Unloadable&) = delete;
  Unloadable& operator=(const Unloadable&) = delete;
  static std::string file_for(Library lib) {
    return lib == Library::Curl ? "libcurl-made-unloadable-by-kiln-test.so.4"
                                : "libarchive-made-unloadable-by-kiln-test.so.13";
  }

 private:
  Library lib_;
};

using test::error_of;

// What every "cannot be loaded" error says: the library, the file tried, dlerror()'s text,
// what needed it and how to fix it.
void expect_names_library_and_fix(const std::string& msg, Library lib,
                                  const std::string& needed_for) {
  runtime::lazy_libs::LibraryFacts f = runtime::lazy_libs::facts(lib);
  EXPECT_CONTAINS(msg, f.name + " (" + Unloadable::file_for(lib) + ") cannot be loaded");
  EXPECT_CONTAINS(msg, "cannot open shared object file");  // dlerror()
  EXPECT_CONTAINS(msg, needed_for);
  if (f.package.empty())
    EXPECT_CONTAINS(msg, "install the package that provides " + f.soname);
  else
    EXPECT_CONTAINS(msg, "install the Debian package " + f.package + " (it provides " + f.soname);
}

TEST(LazyLibs, RealLibrariesLoadWithEverySymbolFromTheConfiguredSoname) {
  ASSERT_EQ(runtime::lazy_libs::load_problem(Library::Curl), std::nullopt);
  ASSERT_EQ(runtime::lazy_libs::load_problem(Library::Archive), std::nullopt);
  runtime::lazy_libs::LibraryFacts c = runtime::lazy_libs::facts(Library::Curl);
  runtime::lazy_libs::LibraryFacts a = runtime::lazy_libs::facts(Library::Archive);
  EXPECT_EQ(c.soname.rfind("libcurl.so.", 0), 0u) << c.soname;
  EXPECT_EQ(a.soname.rfind("libarchive.so.", 0), 0u) << a.soname;

  // The tables answer, and their functions live in the library of that SONAME.
  const runtime::lazy_libs::CurlApi& curl = runtime::lazy_libs::curl("this test");
  EXPECT_STREQ(curl.easy_strerror(CURLE_OK), "No error");
  Dl_info info{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(curl.easy_init), &info), 0);
  EXPECT_CONTAINS(std::string(info.dli_fname), "libcurl.so");
  const runtime::lazy_libs::ArchiveApi& la = runtime::lazy_libs::archive("this test");
  runtime::lazy_libs::ReadHandle r(la.read_new(), {&la});
  ASSERT_TRUE(r);
  EXPECT_EQ(la.read_support_filter_zstd(r.get()), ARCHIVE_OK);
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(la.read_new), &info), 0);
  EXPECT_CONTAINS(std::string(info.dli_fname), "libarchive.so");
}

TEST(LazyLibs, UnloadableLibcurlFailsUnsupportedNamingItsSonameDlerrorUseAndFix) {
  {
    Unloadable no_curl(Library::Curl);
    std::string msg = error_of(ErrorKind::Unsupported,
                               [] { runtime::lazy_libs::curl("the mirror tier (https://m.example)"); });
    expect_names_library_and_fix(msg, Library::Curl, "the mirror tier (https://m.example)");
    EXPECT_CONTAINS(msg, "KILN_OFFLINE=1");
    EXPECT_CONTAINS(msg, "KILN_ARTIFACT_PATH");
    EXPECT_NE(runtime::lazy_libs::load_problem(Library::Curl), std::nullopt);
  }
  // The seam cleared: the real, cached table again.
  EXPECT_EQ(runtime::lazy_libs::load_problem(Library::Curl), std::nullopt);
  EXPECT_STREQ(runtime::lazy_libs::curl("this test").easy_strerror(CURLE_OK), "No error");
}

TEST(LazyLibs, ALibraryLackingSymbolsFailsUpFrontNamingEveryMissingOne) {
  // libkiln itself loads fine and has none of libcurl's functions.
  runtime::lazy_libs::set_file_for_tests(Library::Curl, KILN_LIB_PATH);
  std::string msg = error_of(ErrorKind::Unsupported, [] { runtime::lazy_libs::curl("this test"); });
  runtime::lazy_libs::set_file_for_tests(Library::Curl, "");
  EXPECT_CONTAINS(msg, "lacks curl_global_init, curl_easy_init,");
  EXPECT_CONTAINS(msg, "curl_getdate (libkiln was built against libcurl " LIBCURL_VERSION ")");
  // The URL API (7.62) is optional: a libcurl without it loads and refuses redirects
  // (tests/transport/redirect_check_test.cpp), so it is not among what is missing.
  EXPECT_EQ(msg.find("curl_url"), std::string::npos) << msg;
}

TEST(LazyLibs, KilnFetchWithoutLibcurlFailsUnsupportedAndWritesNothing) {
  Unloadable no_curl(Library::Curl);
  TempDir tmp;
  fetch::FetchOptions opts;
  opts.package = "kiln-kernels";
  opts.version = "0.1.0";
  opts.mirrors = {"http://127.0.0.1:9/kiln"};
  opts.index_sha256 = std::string(64, 'a');
  std::string msg = error_of(ErrorKind::Unsupported,
                             [&] { fetch::fetch_targets(opts, {"sm_90"}, (tmp / "store").string()); });
  expect_names_library_and_fix(msg, Library::Curl,
                               "downloading the release index and archives from the mirrors "
                               "http://127.0.0.1:9/kiln");
  // Nothing downloaded or installed: at most the (empty) destination and its locks.
  for (const auto& e : fs::recursive_directory_iterator(tmp / "store"))
    EXPECT_TRUE(e.is_directory() || e.path().string().find(".kiln-locks") != std::string::npos)
        << e.path();

  msg = error_of(ErrorKind::Unsupported, [&] { fetch::fetch_index_targets(opts); });
  EXPECT_CONTAINS(msg, "downloading the release index from the mirrors");

  // No mirror configured: still the usage error it always was, not a missing library.
  opts.mirrors.clear();
  if (fetch::default_mirrors().empty()) {
    msg = error_of(ErrorKind::Usage,
                   [&] { fetch::fetch_targets(opts, {"sm_90"}, (tmp / "store").string()); });
    EXPECT_CONTAINS(msg, "no mirror configured");
  }

  // Offline never loads libcurl: the offline answer (nothing local) is unchanged.
  opts.offline = true;
  error_of(ErrorKind::NotFound, [&] { fetch::fetch_targets(opts, {"sm_90"}, (tmp / "store").string()); });
}

TEST(LazyLibs, UnpackingWithoutLibarchiveFailsUnsupportedNamingTheArchive) {
  TempDir tmp;
  fs::path archive = tmp / "a.tar.zst";
  format::write_archive(archive, {{"manifest.json", "{}"}}, 0);  // the real libarchive
  ASSERT_TRUE(fs::is_regular_file(archive));

  Unloadable no_archive(Library::Archive);
  std::string msg =
      error_of(ErrorKind::Unsupported, [&] { store::install_archive(archive, tmp / "store"); });
  expect_names_library_and_fix(msg, Library::Archive, "unpacking " + archive.string());
  EXPECT_CONTAINS(msg, "stores that are already unpacked");
  // Nothing unpacked: the store holds only its install lock (docs/mirrors.md: locks stay).
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(tmp / "store"))
    if (e.path().filename() != ".kiln-locks") left.push_back(e.path().filename().string());
  EXPECT_TRUE(left.empty()) << left.front();

  msg = error_of(ErrorKind::Unsupported, [&] { store::read_leading_manifest(archive); });
  EXPECT_CONTAINS(msg, "reading the manifest of " + archive.string());
  msg = error_of(ErrorKind::Unsupported, [&] {
    format::write_archive(tmp / "b.tar.zst", {{"manifest.json", "{}"}}, 0);
  });
  EXPECT_CONTAINS(msg, "writing the archive " + (tmp / "b.tar.zst").string());
  EXPECT_FALSE(fs::exists(tmp / "b.tar.zst"));
}

// --- a load from a local store, with neither library loadable

const std::string kUri = "axpy_dtype_f32";

class FakeDriver : public runtime::Driver {
 public:
  std::atomic<int> loads{0};
  void init() override {}
  int driver_version() override { return 13000; }
  std::vector<runtime::DeviceInfo> devices() override { return {{0, "Fake GPU", 90}}; }
  void* current_context() override { return reinterpret_cast<void*>(0x100); }
  int current_device_cc() override { return 90; }
  bool stream_is_capturing(void*) override { return false; }
  void* load_library(const std::string&) override {
    return reinterpret_cast<void*>(static_cast<std::size_t>(++loads));
  }
  unsigned kernel_count(void*) override { return 1; }
  void* get_kernel(void* lib, const std::string&) override { return lib; }
  void* kernel_function(void* k) override { return k; }
  void unload_library(void*) noexcept override {}
  void launch(void*, const unsigned*, const unsigned*, unsigned, void*, void**) override {}
};

// One unpacked archive directory (manifest.json + <uri>.fatbin) for sm_90 in `store`, fresh
// for this build's registry. Returns the artifact's path.
fs::path write_store(const fs::path& store) {
  test::ReleaseSpec rel;
  rel.loadable = true;
  rel.with_artifacts({{kUri, "image:sm_90"}});
  return test::write_store_entry(store, rel, "sm_90") / (kUri + ".fatbin");
}

TEST(LazyLibs, WithoutLibcurlAndLibarchiveALocalStoreLoadsAndTheMirrorTierIsSkippedNamingLibcurl) {
  Unloadable no_curl(Library::Curl);
  Unloadable no_archive(Library::Archive);
  TempDir tmp;
  fs::path artifact = write_store(tmp / "store");
  LoaderConfig cfg;
  cfg.artifact_path = {(tmp / "store").string()};
  cfg.cache_dir = (tmp / "cache").string();
  cfg.offline = false;
  cfg.mirrors = {"http://127.0.0.1:9/kiln"};
  cfg.index_sha256 = std::string(64, 'a');  // pinned: the mirror tier gets as far as downloading
  cfg.disable_jit = true;
  auto driver = std::make_shared<FakeDriver>();
  plan::LoaderDeps deps;  // the real fetch, index download and disk store
  deps.driver = driver;
  deps.installed_store = (tmp / "installed").string();
  auto loader_ptr = make_loader(kiln::test::reference_description(), cfg, std::move(deps));
  Loader& loader = *loader_ptr;

  const KernelHandle& h = loader.get(kUri);
  EXPECT_EQ(h.origin.rfind(artifact.parent_path().string(), 0), 0u) << h.origin;
  EXPECT_EQ(driver->loads.load(), 1);

  // Not in the store: the mirror tier is tried, skipped for want of libcurl like any other
  // skip reason, and the failure says so.
  std::string msg;
  try {
    loader.get("axpy_dtype_f16");
  } catch (const Error& e) {
    msg = e.what();
  }
  expect_names_library_and_fix(msg, Library::Curl,
                               "downloading the release index from the mirrors "
                               "http://127.0.0.1:9/kiln (the mirror tier, kiln fetch)");
  EXPECT_EQ(driver->loads.load(), 1);
  EXPECT_FALSE(fs::exists(tmp / "cache" / "downloads"));
}

// --- the dependency closure of the built libkiln.so

TEST(LibkilnNeeded, OnlyLibcryptoLibzstdAndTheCAndCxxRuntime) {
  std::string lib = KILN_LIB_PATH;
  if (lib.size() < 3 || lib.compare(lib.size() - 2, 2, ".a") == 0)
    GTEST_SKIP() << "libkiln is built static (KILN_SHARED=OFF): no NEEDED entries";
  test::RunResult r = test::run("readelf -d '" + lib + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::vector<std::string> allowed = {"libcrypto.so.", "libzstd.so.", "libstdc++.so.", "libm.so.",
                                      "libgcc_s.so.",  "libc.so.",    "ld-linux"};
#ifdef KILN_SANITIZED
  // -DKILN_SANITIZE builds link the sanitizer runtimes into every binary; no release does.
  for (const char* rt : {"libasan.so.", "libubsan.so.", "libtsan.so.", "liblsan.so."})
    allowed.push_back(rt);
#endif
  std::vector<std::string> needed, extra;
  const std::string tag = "Shared library: [";
  for (std::size_t p = r.out.find(tag); p != std::string::npos; p = r.out.find(tag, p + 1)) {
    std::size_t b = p + tag.size(), e = r.out.find(']', b);
    needed.push_back(r.out.substr(b, e - b));
  }
  ASSERT_FALSE(needed.empty()) << "readelf listed no NEEDED entry for " << lib << ":\n" << r.out;
  for (const auto& n : needed) {
    bool ok = false;
    for (const auto& a : allowed) ok = ok || n.rfind(a, 0) == 0;
    if (!ok) extra.push_back(n);
  }
  std::string list;
  for (const auto& x : extra) list += " " + x;
  EXPECT_TRUE(extra.empty()) << lib << " needs libraries outside the allow-list (libcrypto, "
                             << "libzstd, the C and C++ runtime):" << list
                             << "; what only mirrors or archives need is loaded by lazy_libs";
}

// libkiln holds process-wide state until exit (the CUDA driver, the libraries it dlopened, its
// caches): it is linked -z nodelete, so a dlclose leaves it mapped. A copy in another directory
// is a separate instance nothing else holds: loaded, closed, and still there.
TEST(LibkilnUnload, DlcloseLeavesItLoaded) {
  std::string lib = KILN_LIB_PATH;
  if (lib.size() < 3 || lib.compare(lib.size() - 2, 2, ".a") == 0)
    GTEST_SKIP() << "libkiln is built static (KILN_SHARED=OFF)";
  TempDir dir;
  fs::path copy = dir / "libkiln.so";
  fs::copy_file(lib, copy);
  void* h = ::dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << ::dlerror();
  ASSERT_EQ(::dlclose(h), 0) << ::dlerror();
  void* again = ::dlopen(copy.c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(again, nullptr) << copy << " was unloaded by dlclose";
  if (again) ::dlclose(again);
}

TEST(DoctorCli, ReportsThatLibcurlAndLibarchiveLoadWithTheirSonames) {
  TempDir tmp;
  std::string env = test::nvrtc_child_env() + "KILN_CACHE_DIR='" + (tmp / "cache").string() +
                    "' KILN_ARTIFACT_PATH= KILN_MIRRORS= ";
  // Whether loading can work here (no GPU: it cannot) is not this test's; the facts are.
  test::RunResult r = test::run(env + test::kiln_cli() + " doctor --json 2>/dev/null");
  ASSERT_NE(r.out.find('{'), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["libraries"].size(), 2u) << r.out;
  for (auto [i, lib] : {std::pair{0, Library::Curl}, {1, Library::Archive}}) {
    const auto& l = j["libraries"][static_cast<std::size_t>(i)];
    EXPECT_EQ(l["name"], runtime::lazy_libs::facts(lib).name);
    EXPECT_EQ(l["soname"], runtime::lazy_libs::facts(lib).soname);
    EXPECT_EQ(l["loaded"], true) << l.dump();
    EXPECT_EQ(l["detail"], "");
  }
  test::RunResult text = test::run(env + test::kiln_cli() + " doctor 2>/dev/null");
  EXPECT_CONTAINS(text.out, "libcurl: " + runtime::lazy_libs::facts(Library::Curl).soname + " loads");
  EXPECT_CONTAINS(text.out, "libarchive: " + runtime::lazy_libs::facts(Library::Archive).soname + " loads");
}

}  // namespace
}  // namespace kiln
