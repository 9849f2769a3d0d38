// Kernel packages (kiln/package.h, project/package.hpp): a project's own identity, the generated
// description, and several packages served side by side in one process from shared stores.
#include "project/package.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "format/manifest.hpp"
#include "kernel_project.hpp"
#include "kiln/error.hpp"
#include "kiln/kiln.h"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"
#include "loader_factory.hpp"
#include "plan/resolver.hpp"
#include "project/project_paths.hpp"
#include "stand_in_driver.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::ErrorKind;
using kiln::test::TempDir;
using kiln::test::write_file;

const std::string kUri = "axpy_dtype_f32";

// A project that is not kiln's: acme-kernels 1.2.0 with kiln's axpy family under the same URIs,
// its source changed (so its source hashes differ from the reference package's).
fs::path write_acme_project(const fs::path& dir) {
  const fs::path kiln_src = kiln::test::source_dir();
  kiln::test::KernelProject acme;
  acme.name = "acme-kernels";
  acme.version = "1.2.0";
  acme.registry = kiln::test::read_file(kiln_src / "registry" / "kernels.json");
  for (const char* f : {"common.cuh", "axpy.cu", "gemm_f16_tc.cu", "gemm_f32.cu", "hopper_wgmma.cu",
                        "reduce_sum.cu", "rmsnorm.cu", "silu_and_mul.cu", "softmax.cu"})
    acme.kernels.emplace_back(f, kiln::test::read_file(kiln_src / "kernels" / f));
  acme.kernels.emplace_back(
      "axpy.cu", kiln::test::read_file(kiln_src / "kernels" / "axpy.cu") + "// acme's own axpy\n");
  return kiln::test::write_kernel_project(dir, acme);
}

// A store entry of `uri` for sm_90 of a package, fresh for a loader of that package.
fs::path write_entry(const fs::path& store, const kiln::project::Package& pkg, const std::string& version,
                     const std::string& bytes) {
  kiln::test::ReleaseSpec rel;
  rel.package = pkg.name();
  rel.version = version;
  rel.loadable = true;  // entries as the reference package names them (acme's are the same)
  rel.source_hash_override[kUri] = pkg.spec(kUri)->source_hash;
  rel.with_artifacts({{kUri, bytes}});
  return kiln::test::write_store_entry(store, rel, "sm_90");
}

struct TwoPackages {
  TempDir tmp;
  kiln::project::Project acme_project = kiln::project::load_project(write_acme_project(tmp / "acme"));
  kiln::project::PackageData acme_data{acme_project};
  kiln::project::Package acme{acme_data.get()};
  const kiln::project::Package& reference = kiln::test::reference_package();
  std::shared_ptr<kiln::test::Cc90Driver> driver = std::make_shared<kiln::test::Cc90Driver>();
  kiln::LoaderConfig cfg;

  TwoPackages() {
    cfg.artifact_path = {(tmp / "shared-store").string()};
    cfg.cache_dir = (tmp / "shared-cache").string();
    cfg.offline = true;
    cfg.disable_jit = true;
  }
  std::unique_ptr<kiln::Loader> loader(const kiln_package& desc) {
    kiln::plan::LoaderDeps d;
    d.driver = driver;
    d.installed_store = (tmp / "none").string();
    return kiln::make_loader(desc, cfg, std::move(d));
  }
};

TEST(Packages, AProjectsOwnNameAndVersionComeFromItsFiles) {
  TempDir tmp;
  kiln::project::Project p = kiln::project::load_project(write_acme_project(tmp / "acme"));
  EXPECT_EQ(p.name, "acme-kernels");
  EXPECT_EQ(p.version, "1.2.0");
  EXPECT_NE(p.registry.find(kUri)->source_hash,
            kiln::test::reference_package().spec(kUri)->source_hash);
  // The reference package is kiln's tree, described at build time like any project.
  kiln::project::Project kiln_tree = kiln::project::load_project(kiln::test::source_dir());
  EXPECT_EQ(kiln_tree.name, KILN_KERNELS_PACKAGE_NAME);
  EXPECT_EQ(kiln_tree.version, kiln::version());
  EXPECT_EQ(kiln::test::reference_package().name(), kiln_tree.name);
  EXPECT_EQ(kiln::test::reference_package().uris().size(),
            kiln_tree.registry.specialisations.size());
}

TEST(Packages, AProjectWithoutItsPackageFileIsNotFoundNamingWhatWasLookedFor) {
  TempDir tmp;
  write_acme_project(tmp / "acme");
  fs::remove(tmp / "acme" / "registry" / "package.json");
  std::string msg =
      kiln::test::error_of(ErrorKind::NotFound, [&] { kiln::project::load_project(tmp / "acme"); });
  EXPECT_NE(msg.find((tmp / "acme" / "registry" / "package.json").string()), std::string::npos)
      << msg;
  write_file(tmp / "acme" / "registry" / "package.json", "{\"format\": 1, \"name\": \"Acme\"}");
  msg = kiln::test::error_of(ErrorKind::Format, [&] { kiln::project::load_project(tmp / "acme"); });
  EXPECT_NE(msg.find("field 'name'"), std::string::npos) << msg;
  write_file(tmp / "acme" / "registry" / "package.json", "{\"format\": 1, \"name\": \"acme\"}");
  write_file(tmp / "acme" / "VERSION", "one\n");
  msg = kiln::test::error_of(ErrorKind::Format, [&] { kiln::project::load_project(tmp / "acme"); });
  EXPECT_NE(msg.find("VERSION"), std::string::npos) << msg;
}

std::vector<std::string> target_names(const std::vector<kiln::format::Target>& targets) {
  std::vector<std::string> out;
  for (const auto& t : targets) out.push_back(t.str());
  return out;
}

TEST(Packages, TheDefaultProjectIsTheOneHereElseTheTreeKilnWasBuiltFrom) {
  TempDir here, built;
  write_file(built / "registry" / "package.json", "{}");
  const fs::path before = fs::current_path();
  fs::current_path(here.path());
  EXPECT_EQ(kiln::project::default_project_dir(built.path().string()), built.path().string());
  EXPECT_EQ(kiln::project::default_project_dir((here / "gone").string()), ".");
  EXPECT_EQ(kiln::project::default_project_dir(""), ".");
  write_file(here / "registry" / "package.json", "{}");
  EXPECT_EQ(kiln::project::default_project_dir(built.path().string()), ".");
  fs::current_path(before);
}

TEST(Packages, ADescriptionFileIsARegularFileNamedDotPackageJson) {
  kiln::test::TempDir dir;
  kiln::test::write_file(dir / "acme-1.0.0.package.json", "{}");
  kiln::test::write_file(dir / "package.json", "{}");
  fs::create_directories(dir / "d.package.json");
  EXPECT_TRUE(kiln::project::is_package_description_file(dir / "acme-1.0.0.package.json"));
  EXPECT_FALSE(kiln::project::is_package_description_file(dir / "package.json"));
  EXPECT_FALSE(kiln::project::is_package_description_file(dir / "d.package.json"));
  EXPECT_FALSE(kiln::project::is_package_description_file(dir / "missing.package.json"));
}

TEST(PackageFile, TargetsAreOptionalAndKeptInTheFilesOrder) {
  const std::string origin = "acme/registry/package.json";
  kiln::project::PackageFile pf = kiln::project::parse_package_file(
      R"({"format": 1, "name": "acme", "targets": ["sm_90a", "sm_80", "compute_80"]})", origin);
  EXPECT_EQ(pf.name, "acme");
  EXPECT_EQ(target_names(pf.targets), (std::vector<std::string>{"sm_90a", "sm_80", "compute_80"}));
  EXPECT_TRUE(kiln::project::parse_package_file(R"({"format": 1, "name": "acme"})", origin).targets.empty());
}

TEST(PackageFile, BadTargetsAreFormatErrorsNamingTheFileAndTheField) {
  const std::string origin = "acme/registry/package.json";
  struct Case {
    const char* targets;
    const char* says;
  };
  for (const Case& c : {Case{"[]", "expected a non-empty array of targets"},
                        Case{R"("sm_80")", "expected a non-empty array of targets"},
                        Case{R"(["sm_80", 90])", "expected strings, found 90"},
                        Case{R"(["sm_80", "sm90a"])", "'sm90a' is not a target"},
                        Case{R"(["sm_80", "sm_90a+"])", "'sm_90a+' is not a target"},
                        Case{R"(["sm_80", "sm_90a", "sm_80"])", "'sm_80' is listed twice"}}) {
    const std::string json =
        std::string(R"({"format": 1, "name": "acme", "targets": )") + c.targets + "}";
    std::string msg =
        kiln::test::error_of(ErrorKind::Format, [&] { kiln::project::parse_package_file(json, origin); });
    EXPECT_EQ(msg.rfind(origin + ": field 'targets': ", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
  }
  // Still strict: a misspelt field is an error, not an ignored one.
  std::string msg = kiln::test::error_of(ErrorKind::Format, [&] {
    kiln::project::parse_package_file(R"({"format": 1, "name": "acme", "target": ["sm_80"]})", origin);
  });
  EXPECT_NE(msg.find("field 'target': unknown field (allowed: format, name, targets, toolkits, comment)"),
            std::string::npos)
      << msg;
}

TEST(PackageFile, AProjectCarriesItsPackageFilesTargets) {
  TempDir tmp;
  write_acme_project(tmp / "acme");
  EXPECT_TRUE(kiln::project::load_project(tmp / "acme").targets.empty());
  write_file(tmp / "acme" / "registry" / "package.json",
             R"({"format": 1, "name": "acme-kernels", "targets": ["sm_80", "sm_90a"]})");
  EXPECT_EQ(target_names(kiln::project::load_project(tmp / "acme").targets),
            (std::vector<std::string>{"sm_80", "sm_90a"}));
  EXPECT_EQ(target_names(kiln::project::read_package_file(tmp / "acme").targets),
            (std::vector<std::string>{"sm_80", "sm_90a"}));
}

// Two packages with the same URIs, one store and one cache directory: each loader loads its own
// package's bytes, and neither reads, rejects or even names the other's archive.
TEST(Packages, TwoPackagesInOneProcessShareAStoreAndEachLoadsOnlyItsOwn) {
  TwoPackages t;
  fs::path store = t.tmp / "shared-store";
  fs::path ref_dir = write_entry(store, t.reference, kiln::version(), "reference-axpy");
  fs::path acme_dir = write_entry(store, t.acme, "1.2.0", "acme-axpy");
  EXPECT_EQ(ref_dir.filename().string().rfind("kiln-kernels-", 0), 0u);
  EXPECT_EQ(acme_dir.filename().string().rfind("acme-kernels-1.2.0-", 0), 0u);

  auto ref = t.loader(*kiln_kernels_package());
  auto acme = t.loader(*t.acme_data.get());
  EXPECT_EQ(ref->get(kUri).origin, (ref_dir / (kUri + ".fatbin")).string());
  EXPECT_EQ(acme->get(kUri).origin, (acme_dir / (kUri + ".fatbin")).string());
  ASSERT_EQ(t.driver->images.size(), 2u);
  EXPECT_EQ(t.driver->images[0], "reference-axpy");
  EXPECT_EQ(t.driver->images[1], "acme-axpy");
  EXPECT_STREQ(acme->package().name, "acme-kernels");

  for (auto* l : {ref.get(), acme.get()}) {
    kiln::Resolution r = l->resolve(kUri, 90);
    const std::string other = l == ref.get() ? "acme-kernels" : "kiln-kernels";
    for (const auto& c : r.rejected)
      EXPECT_EQ(c.path.find(other), std::string::npos) << c.path << ": " << c.reason;
  }
}

TEST(Packages, StaleIsJudgedAgainstTheLoadersOwnPackage) {
  TwoPackages t;
  fs::path store = t.tmp / "shared-store";
  write_entry(store, t.reference, kiln::version(), "reference-axpy");
  write_entry(store, t.acme, "1.1.0", "old-acme-axpy");  // an older acme release
  auto acme = t.loader(*t.acme_data.get());
  try {
    acme->get(kUri);
    FAIL() << "loaded a stale archive";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Stale) << e.what();
    EXPECT_NE(std::string(e.what()).find(
                  "package_version differs: archive has 1.1.0, this loader's package "
                  "acme-kernels is 1.2.0"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("kiln fetch --package acme-kernels --version 1.2.0"),
              std::string::npos)
        << e.what();
  }
  // The reference package's loader does not care about acme's stale archive.
  EXPECT_EQ(t.loader(*kiln_kernels_package())->get(kUri).origin.find("kiln-kernels-"),
            (t.tmp / "shared-store").string().size() + 1);
}

TEST(Packages, AnUnknownUriNamesThePackageItWasAskedOf) {
  TwoPackages t;
  auto acme = t.loader(*t.acme_data.get());
  std::string msg = kiln::test::error_of(ErrorKind::NotFound, [&] { acme->get("axpy_dtype_f33"); });
  EXPECT_NE(msg.find("no kernel axpy_dtype_f33 in package acme-kernels 1.2.0"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("did you mean: axpy_dtype_f32"), std::string::npos) << msg;
}

TEST(Packages, AKernelIsCheckedWhenALookupReachesItNotWhenTheLoaderIsCreated) {
  // Creating a Loader costs the same for 10 kernels or 20,000: the table is checked where a
  // lookup goes (the kernel found and its neighbours), and whole once a lookup misses.
  const kiln_package* ref = kiln_kernels_package();
  ASSERT_GE(ref->kernel_count, 3u);
  std::vector<kiln_package_kernel> table(ref->kernels, ref->kernels + ref->kernel_count);
  const std::size_t last = table.size() - 1;
  table[last].family = nullptr;
  kiln_package bad = *ref;
  bad.kernels = table.data();
  kiln::project::Package p(&bad);
  ASSERT_NE(p.spec(table[0].uri), nullptr);
  EXPECT_EQ(*p.rank(table[1].uri), 1u);
  std::string msg = kiln::test::error_of(ErrorKind::Usage, [&] { p.spec(table[last].uri); });
  EXPECT_NE(msg.find("kernel " + std::to_string(last) + " has a null field"), std::string::npos)
      << msg;
  msg = kiln::test::error_of(ErrorKind::Usage, [&] { kiln::project::Package(&bad).spec("no_such"); });
  EXPECT_NE(msg.find("has a null field"), std::string::npos) << msg;
}

TEST(Packages, ADescriptionThatDoesNotHoldTogetherIsRefusedAsUsage) {
  kiln_package bad = *kiln_kernels_package();
  bad.abi_version = KILN_PACKAGE_ABI_VERSION + 1;
  std::string msg = kiln::test::error_of(ErrorKind::Usage, [&] { kiln::project::Package p(&bad); });
  EXPECT_NE(msg.find("abi_version"), std::string::npos) << msg;
  bad = *kiln_kernels_package();
  bad.name = "Kiln Kernels";
  msg = kiln::test::error_of(ErrorKind::Usage, [&] { kiln::Loader l(bad); });
  EXPECT_NE(msg.find("name 'Kiln Kernels'"), std::string::npos) << msg;
  bad = *kiln_kernels_package();
  bad.version = "1.0";
  msg = kiln::test::error_of(ErrorKind::Usage, [&] { kiln::project::Package p(&bad); });
  EXPECT_NE(msg.find("version '1.0'"), std::string::npos) << msg;
  // Kernels out of order: lookups would miss, so the description is refused by the first
  // lookup that reaches them, found or not, and by a listing of every URI.
  std::vector<kiln_package_kernel> swapped(kiln_kernels_package()->kernels,
                                           kiln_kernels_package()->kernels + 2);
  std::swap(swapped[0], swapped[1]);
  bad = *kiln_kernels_package();
  bad.kernels = swapped.data();
  bad.kernel_count = swapped.size();
  for (const char* uri : {swapped[0].uri, swapped[1].uri, "no_such_kernel"}) {
    msg = kiln::test::error_of(ErrorKind::Usage, [&] { kiln::Loader(bad).get(uri); });
    EXPECT_NE(msg.find("not sorted"), std::string::npos) << uri << ": " << msg;
  }
  msg = kiln::test::error_of(ErrorKind::Usage, [&] { kiln::project::Package(&bad).uris(); });
  EXPECT_NE(msg.find("not sorted"), std::string::npos) << msg;
  EXPECT_EQ(kiln_package_source_hash(&bad, swapped[0].uri), nullptr);

  // The C ABI: NULL and a bad description are usage errors with a message, no loader.
  kiln_loader* l = reinterpret_cast<kiln_loader*>(0x1);
  EXPECT_EQ(kiln_loader_create(nullptr, nullptr, &l), KILN_ERROR_USAGE);
  EXPECT_EQ(l, nullptr);
  EXPECT_NE(std::string(kiln_last_error()).find("package is NULL"), std::string::npos);
  bad = *kiln_kernels_package();
  bad.abi_version = 0;
  EXPECT_EQ(kiln_loader_create(&bad, nullptr, &l), KILN_ERROR_USAGE);
  EXPECT_NE(std::string(kiln_last_error()).find("abi_version 0"), std::string::npos);
  EXPECT_EQ(kiln_package_source_hash(&bad, kUri.c_str()), nullptr);
  EXPECT_STREQ(kiln_package_source_hash(kiln_kernels_package(), kUri.c_str()),
               kiln::test::reference_package().spec(kUri)->source_hash.c_str());
}

// The generator's C, compiled by the system's C compiler into a shared library and opened: the
// same description, field by field; and a loader of it finds the store installed beside that
// library (<prefix>/share/kiln/artifacts) with no variable.
TEST(Packages, GeneratedSourceCompilesToTheSameDescriptionAndItsInstalledStoreIsFound) {
  TwoPackages t;
  fs::path prefix = t.tmp / "prefix";
  fs::create_directories(prefix / "lib");
  fs::path c = t.tmp / "acme_package.c";
  write_file(c, t.acme_data.to_c_source("acme_kernels_package"));
  fs::path so = prefix / "lib" / "libacme-kernels.so";
  std::string cmd = "cc -std=c11 -Wall -Werror -shared -fPIC -I'" +
                    std::string(kiln::test::source_dir()) + "/include' -o '" + so.string() +
                    "' '" + c.string() + "' 2>&1";
  auto r = kiln::test::run(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << ::dlerror();
  auto fn = reinterpret_cast<const kiln_package* (*)()>(::dlsym(h, "acme_kernels_package"));
  ASSERT_NE(fn, nullptr);
  const kiln_package* got = fn();
  const kiln_package* want = t.acme_data.get();
  EXPECT_EQ(got->abi_version, want->abi_version);
  EXPECT_STREQ(got->name, want->name);
  EXPECT_STREQ(got->version, want->version);
  ASSERT_EQ(got->kernel_count, want->kernel_count);
  for (std::size_t i = 0; i < got->kernel_count; ++i) {
    const kiln_package_kernel &g = got->kernels[i], &w = want->kernels[i];
    EXPECT_STREQ(g.uri, w.uri);
    EXPECT_STREQ(g.family, w.family);
    EXPECT_STREQ(g.source_hash, w.source_hash);
    ASSERT_EQ(g.param_pairs, w.param_pairs);
    for (std::size_t k = 0; k < 2 * g.param_pairs; ++k) EXPECT_STREQ(g.params[k], w.params[k]);
    ASSERT_EQ(g.entry_count, w.entry_count);
    for (std::size_t k = 0; k < g.entry_count; ++k) EXPECT_STREQ(g.entries[k], w.entries[k]);
  }
  ASSERT_EQ(got->file_count, want->file_count);
  for (std::size_t i = 0; i < got->file_count; ++i) {
    EXPECT_STREQ(got->files[i].path, want->files[i].path);
    ASSERT_EQ(got->files[i].size, want->files[i].size);
    EXPECT_EQ(std::memcmp(got->files[i].data, want->files[i].data, got->files[i].size), 0)
        << got->files[i].path;
  }
  // The JIT tier's registry, parsed back from the description's own files, hashes the same.
  kiln::project::Package from_library(got);
  EXPECT_EQ(from_library.registry().find(kUri)->source_hash,
            t.acme_project.registry.find(kUri)->source_hash);

  // The store installed beside the library that defines the description.
  kiln::project::Package pkg(got);
  fs::path installed = write_entry(prefix / "share" / "kiln" / "artifacts", pkg, "1.2.0", "x");
  kiln::LoaderConfig cfg = t.cfg;
  cfg.artifact_path.clear();
  kiln::plan::LoaderDeps d;
  d.driver = t.driver;  // no installed_store: found with dladdr, as an application's would be
  auto loader = kiln::make_loader(*got, cfg, std::move(d));
  kiln::Resolution res = loader->resolve(kUri, 90);
  ASSERT_TRUE(res.chosen) << res.to_json();
  EXPECT_EQ(fs::weakly_canonical(res.chosen->path),
            fs::weakly_canonical(installed / (kUri + ".fatbin")));
  bool named = false;
  for (const auto& s : res.searched)
    named = named || s.find("installed beside the package's library") != std::string::npos;
  EXPECT_TRUE(named) << res.to_json();
}

}  // namespace

namespace {

// The CLI on a project that is not kiln's: build nothing (synthetic archives of acme-kernels,
// with acme's real source hashes), then verify, compat and install act on acme's package; a
// store shared with kiln-kernels is judged per package.
TEST(PackagesCli, VerifyCompatAndInstallActOnTheProjectsPackageInASharedStore) {
  TwoPackages t;
  fs::path project = t.tmp / "acme";
  kiln::test::ReleaseSpec rel;
  rel.package = "acme-kernels";
  rel.version = "1.2.0";
  rel.loadable = true;
  rel.source_hash_override[kUri] = t.acme.spec(kUri)->source_hash;
  rel.with_artifacts({{kUri, "acme-image"}});
  auto dist = kiln::test::write_release_dist(t.tmp / "dist", rel, {"sm_90a"});
  const std::string kiln = kiln::test::kiln_cli();
  const std::string src = " --source '" + project.string() + "'";
  fs::path store = t.tmp / "shared";

  // Another package's archive is not a "kiln tarball": compat reads it as an archive.
  auto c = kiln::test::run(kiln + " compat --device sm_90" + src + " '" +
                           (dist.dir / dist.archive.at("sm_90a")).string() + "' 2>&1");
  EXPECT_EQ(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find("serving acme-kernels 1.2.0"), std::string::npos) << c.out;

  // Install into a store that already holds the reference package's archive.
  kiln::test::ReleaseSpec ref;
  ref.loadable = true;
  kiln::test::write_store_entry(store, ref, "sm_90");
  auto i = kiln::test::run(kiln + " install" + src + " '" + dist.index_path.string() +
                           "' --dest '" + store.string() + "' 2>&1");
  ASSERT_EQ(i.exit_code, 0) << i.out;
  // Naming another package than the index's: refused as stale, nothing written.
  auto wrong = kiln::test::run(kiln + " install --package kiln-kernels --version 0.1.0 '" +
                               dist.index_path.string() + "' --dest '" +
                               (t.tmp / "other").string() + "' 2>&1");
  EXPECT_EQ(wrong.exit_code, 4) << wrong.out;
  EXPECT_NE(wrong.out.find("the index of package acme-kernels, not kiln-kernels"),
            std::string::npos)
      << wrong.out;
  EXPECT_FALSE(fs::exists(t.tmp / "other" / dist.stem("sm_90a")));
  // Naming nothing, outside any project: the index names its package, and that is installed
  // (an operator's node has no project to name it from), saying so.
  auto named_by_index = kiln::test::run("cd '" + t.tmp.path().string() + "' && " + kiln + " install '" +
                                        dist.index_path.string() + "' --dest '" +
                                        (t.tmp / "other").string() + "' 2>&1");
  EXPECT_EQ(named_by_index.exit_code, 0) << named_by_index.out;
  EXPECT_NE(named_by_index.out.find("installing the package and version each input names"),
            std::string::npos)
      << named_by_index.out;
  EXPECT_TRUE(fs::exists(t.tmp / "other" / dist.stem("sm_90a") / "manifest.json"));

  // The shared store verifies for either package: each one's version is its own.
  for (const std::string& s : {src, std::string()}) {
    auto v = kiln::test::run(kiln + " verify" + s + " '" + store.string() + "' 2>&1");
    EXPECT_EQ(v.exit_code, 0) << s << "\n" << v.out;
  }
  auto cs = kiln::test::run(kiln + " compat --device sm_90" + src + " '" + store.string() +
                            "' --json 2>/dev/null");
  EXPECT_EQ(cs.exit_code, 0) << cs.out;
  EXPECT_NE(cs.out.find("1 archive directory of other packages"), std::string::npos) << cs.out;
}

}  // namespace
