// Loader over a fake driver and compiler, with stores as real directories on disk.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "checked_artifact.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "jit/jit.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"
#include "loader_factory.hpp"
#include "plan/resolver.hpp"
#include "project/registry.hpp"
#include "runtime/cold_phases.hpp"
#include "runtime/driver.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::ErrorKind;
using kiln::test::TempDir;

const std::string kUri = "axpy_dtype_f32";

class FakeDriver : public kiln::runtime::Driver {
 public:
  std::atomic<int> loads{0};
  std::atomic<void*> ctx{reinterpret_cast<void*>(0x100)};
  int cc = 90;
  bool capturing = false;
  std::set<std::string> empty_images;  // load "successfully" with zero kernels
  std::mutex mu;
  std::vector<std::string> images;  // every image handed to load_library

  void init() override {}
  int driver_version() override { return 13000; }
  std::vector<kiln::runtime::DeviceInfo> devices() override { return {{0, "Fake GPU", cc}}; }
  void* current_context() override { return ctx.load(); }
  int current_device_cc() override { return cc; }
  bool stream_is_capturing(void*) override { return capturing; }
  void* load_library(const std::string& image) override {
    ++loads;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // widen any race
    std::lock_guard<std::mutex> lock(mu);
    images.push_back(image);
    return reinterpret_cast<void*>(images.size());
  }
  unsigned kernel_count(void* lib) override {
    std::lock_guard<std::mutex> lock(mu);
    return empty_images.count(images[reinterpret_cast<size_t>(lib) - 1]) ? 0 : 1;
  }
  void* get_kernel(void* lib, const std::string&) override { return lib; }
  void* kernel_function(void* k) override {
    return reinterpret_cast<void*>(reinterpret_cast<size_t>(k) * 1000 +
                                   reinterpret_cast<size_t>(ctx.load()));
  }
  void unload_library(void*) noexcept override {}
  void launch(void*, const unsigned*, const unsigned*, unsigned, void*, void**) override {}
};

// The real disk behind the loader's store scanner, counting file reads (artifacts and manifests
// read whole, manifests opened for a lookup) so tests can prove nothing was read, and noting
// every store directory listed.
class CountingFs : public kiln::store::DiskStoreFs {
 public:
  mutable std::atomic<int> reads{0};
  mutable std::mutex mu;
  mutable std::vector<std::string> scanned;  // every store directory listed, in order
  std::string read(const std::string& path, std::uint64_t max_bytes) const override {
    ++reads;
    return kiln::store::DiskStoreFs::read(path, max_bytes);
  }
  std::unique_ptr<kiln::format::ManifestFile> open_manifest(
      const std::string& path, const kiln::io::FileIdentity& id) const override {
    ++reads;
    return kiln::store::DiskStoreFs::open_manifest(path, id);
  }
  kiln::store::StoreListing list(const std::string& dir, std::string_view package) const override {
    std::lock_guard<std::mutex> lock(mu);
    scanned.push_back(dir);
    return kiln::store::DiskStoreFs::list(dir, package);
  }
};

class FakeJit : public kiln::jit::JitCompiler {
 public:
  bool available = true;
  bool corrupt_sidecar = false;
  std::atomic<int> compiles{0};
  kiln::jit::JitCapability probe() override {
    kiln::jit::JitCapability c;
    c.available = available;
    c.missing = available ? "" : "libnvrtc.so.13 not found";
    c.nvrtc_major = 13;
    c.supported_archs = {75, 80, 86, 89, 90, 100, 120};
    return c;
  }
  kiln::jit::JitResult compile(const kiln::project::Specialisation& spec,
                               const kiln::project::Family&, int cc,
                               const std::string& cache_dir) override {
    ++compiles;
    kiln::jit::JitResult r;
    r.image = "cubin:" + spec.uri + ":" + std::to_string(cc);
    for (size_t i = 0; i < spec.entries.size(); ++i) r.symbols.push_back("sym" + std::to_string(i));
    r.cache_path = cache_dir + "/jit/key.cubin";
    kiln::test::write_file(r.cache_path, r.image);
    nlohmann::json meta = {{"cubin_sha256", kiln::io::sha256_hex(corrupt_sidecar ? "x" : r.image)},
                           {"cubin_size", r.image.size()}};
    kiln::test::write_file(cache_dir + "/jit/key.json", meta.dump());
    return r;
  }
};

// One store entry of kUri for a target, as `kiln install` leaves it (the shared fixture's
// write_store_entry), fresh for this build's Loader (the fixture's `loadable` mode) unless the
// version or source hash says otherwise.
struct EntrySpec {
  EntrySpec(std::string t, std::string v = kiln::version(), std::string h = "")
      : target(std::move(t)), version(std::move(v)), source_hash(std::move(h)) {}
  std::string target;
  std::string version;
  std::string source_hash;  // "" = the embedded registry's
  std::string bytes;        // "" = "image:<target>"
};

// Writes the entry into `store`; returns the path of its artifact.
std::string write_loadable_entry(const fs::path& store, const EntrySpec& a) {
  kiln::test::ReleaseSpec rel;
  rel.loadable = true;
  rel.version = a.version;
  if (!a.source_hash.empty()) rel.source_hash_override[kUri] = a.source_hash;
  rel.with_artifacts({{kUri, a.bytes.empty() ? "image:" + a.target : a.bytes}});
  return (kiln::test::write_store_entry(store, rel, a.target) / (kUri + ".fatbin")).string();
}

struct Rig {
  TempDir tmp;
  std::shared_ptr<FakeDriver> driver = std::make_shared<FakeDriver>();
  std::shared_ptr<CountingFs> fs = std::make_shared<CountingFs>();
  std::shared_ptr<FakeJit> jit = std::make_shared<FakeJit>();
  std::atomic<int> fetches{0};
  std::function<void(const std::string&)> on_fetch;  // writes into the cache store
  std::vector<std::string> offered = {"sm_90"};      // what the fake pinned index lists
  std::vector<std::string> fetched;                  // targets fetch was asked for, in order
  std::atomic<int> index_fetches{0};
  std::vector<std::string> ca_bundles;  // FetchOptions::ca_bundle of every index and fetch call
  kiln::LoaderConfig cfg;

  Rig() {
    cfg.cache_dir = (tmp / "cache").string();
    cfg.offline = true;
    cfg.disable_jit = true;
  }
  std::unique_ptr<kiln::Loader> loader() {
    kiln::plan::LoaderDeps d;
    d.driver = driver;
    d.fs = fs;
    d.jit = jit;
    d.installed_store = (tmp / "installed").string();
    d.fetch = [this](const kiln::fetch::FetchOptions& o, const std::vector<std::string>& targets,
                     const std::string& dest) {
      ++fetches;
      ca_bundles.push_back(o.ca_bundle);
      fetched.push_back(targets.at(0));
      if (!on_fetch) throw kiln::Error(ErrorKind::Network, "mirror down: HTTP 503");
      on_fetch(dest);
      kiln::fetch::FetchResult r;
      r.installed.push_back(dest + "/" + targets[0]);
      return r;
    };
    d.index_targets = [this](const kiln::fetch::FetchOptions& o) {
      ++index_fetches;
      ca_bundles.push_back(o.ca_bundle);
      return offered;
    };
    return kiln::make_loader(kiln::test::reference_description(), cfg, std::move(d));
  }
};

ErrorKind get_error(kiln::Loader& l, const std::string& uri, std::string* msg) {
  try {
    l.get(uri);
  } catch (const kiln::Error& e) {
    *msg = e.what();
    return e.kind();
  }
  *msg = "<no error>";
  return ErrorKind::Internal;
}

// Every file and directory with its contents: equal before and after means nothing written.
std::string tree_digest(const fs::path& root) {
  kiln::io::Sha256 h;
  std::vector<fs::path> all;
  for (auto& e : fs::recursive_directory_iterator(root)) all.push_back(e.path());
  std::sort(all.begin(), all.end());
  for (const auto& p : all) {
    h.field("path", p.string());
    if (fs::is_regular_file(p)) h.field("data", kiln::test::read_file(p));
  }
  return h.hex();
}

TEST(Loader, OfflineMissFailsAtOnceListingEverySearchedDirectoryAndTheFetchCommand) {
  Rig rig;
  fs::create_directories(rig.tmp / "empty");
  rig.cfg.artifact_path = {(rig.tmp / "missing").string(), (rig.tmp / "empty").string()};
  rig.cfg.mirrors = {"https://mirror.example/kiln"};
  auto l = rig.loader();
  std::string msg;
  EXPECT_EQ(get_error(*l, kUri, &msg), ErrorKind::NotFound);
  EXPECT_EQ(rig.fetches.load(), 0);  // offline: the mirror is never contacted
  for (const std::string& d : {(rig.tmp / "missing").string(), (rig.tmp / "empty").string(),
                               (rig.tmp / "installed").string(), rig.cfg.cache_dir})
    EXPECT_NE(msg.find(d), std::string::npos) << d << "\n" << msg;
  EXPECT_NE(msg.find(kUri + " on sm_90"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offline"), std::string::npos) << msg;
  EXPECT_NE(msg.find("KILN_DISABLE_JIT"), std::string::npos) << msg;
  // The advice names an archive the release really has (ci/targets.txt has sm_90a, no sm_90).
  EXPECT_NE(msg.find("kiln fetch --package kiln-kernels --version " + std::string(kiln::version()) +
                     " --device sm_90 --dest " + rig.cfg.cache_dir),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(std::string("kiln-kernels-") + kiln::version() + "-cuda" +
                     kiln::cuda_version() + "-sm_90a.tar.zst"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("--targets sm_90 "), std::string::npos) << msg;
  EXPECT_EQ(rig.index_fetches.load(), 0);
  EXPECT_EQ(rig.driver->loads.load(), 0);
}

TEST(Loader, LoadsTheExactSassFromTheFirstStoreAndHandsTheVerifiedBytesToTheDriver) {
  Rig rig;
  write_loadable_entry(rig.tmp / "s1", {"sm_80"});
  std::string want = write_loadable_entry(rig.tmp / "s1", {"sm_90"});
  write_loadable_entry(rig.tmp / "s1", {"compute_80"});
  write_loadable_entry(rig.tmp / "s2", {"sm_90a"});
  rig.cfg.artifact_path = {(rig.tmp / "s1").string(), (rig.tmp / "s2").string()};
  auto l = rig.loader();
  const kiln::KernelHandle& h = l->get(kUri);
  EXPECT_EQ(h.origin, want);
  EXPECT_EQ(h.functions.size(), 1u);
  ASSERT_EQ(rig.driver->images.size(), 1u);
  EXPECT_EQ(rig.driver->images[0], "image:sm_90");
  auto r = l->resolve(kUri, 90);
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->tier, "store");
  EXPECT_EQ(r.chosen->path, want);
}

TEST(Loader, CorruptedArtifactIsRejectedAndTheNextCandidateIsUsed) {
  Rig rig;
  std::string bad = write_loadable_entry(rig.tmp / "s1", {"sm_90"});
  std::string good = write_loadable_entry(rig.tmp / "s2", {"sm_90"});
  kiln::test::write_file(bad, "image:sm_99");  // same size, different bytes
  rig.cfg.artifact_path = {(rig.tmp / "s1").string(), (rig.tmp / "s2").string()};
  auto l = rig.loader();
  EXPECT_EQ(l->get(kUri).origin, good);
  EXPECT_EQ(rig.driver->images, std::vector<std::string>{"image:sm_90"});
  auto r = l->resolve(kUri, 90);
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->path, good);
  bool seen = false;
  for (const auto& c : r.rejected)
    if (c.path == bad) seen = c.reason.find("integrity") != std::string::npos;
  EXPECT_TRUE(seen);
}

TEST(Loader, CorruptedOnlyArtifactFailsWithIntegrityAndNothingReachesTheDriver) {
  Rig rig;
  std::string bad = write_loadable_entry(rig.tmp / "s1", {"sm_90"});
  kiln::test::write_file(bad, "image:sm_91");
  rig.cfg.artifact_path = {(rig.tmp / "s1").string()};
  auto l = rig.loader();
  std::string msg;
  EXPECT_EQ(get_error(*l, kUri, &msg), ErrorKind::Integrity);
  EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  EXPECT_EQ(rig.driver->loads.load(), 0);
}

// --- the one candidate check get() and resolve() share (checked_artifact.hpp)

TEST(CheckedArtifact, MatchingArtifactIsVerifiedWithTheBytesThatWereHashed) {
  TempDir tmp;
  std::string path = (tmp / "a.fatbin").string();
  kiln::test::write_file(path, "image:sm_90");
  kiln::plan::StoreScanner fs;
  auto a = kiln::read_checked_artifact(fs, {"store", "sm_90", path, ""}, 11,
                                       kiln::io::sha256_hex("image:sm_90"));
  EXPECT_EQ(a.outcome, kiln::CheckedArtifact::Outcome::Verified);
  EXPECT_EQ(a.bytes, "image:sm_90");
}

TEST(CheckedArtifact, OtherBytesAreAMismatchRejectedForIntegrityNamingBothDigests) {
  TempDir tmp;
  std::string path = (tmp / "a.fatbin").string();
  kiln::test::write_file(path, "image:sm_99");
  kiln::plan::StoreScanner fs;
  std::string pinned = kiln::io::sha256_hex("image:sm_90");
  auto a = kiln::read_checked_artifact(fs, {"mirror", "sm_90", path, ""}, 11, pinned);
  EXPECT_EQ(a.outcome, kiln::CheckedArtifact::Outcome::Mismatch);
  EXPECT_EQ(a.refusal.kind, ErrorKind::Integrity);
  EXPECT_EQ(a.refusal.candidate.tier, "mirror");
  EXPECT_EQ(a.refusal.candidate.target, "sm_90");
  EXPECT_EQ(a.refusal.candidate.path, path);
  EXPECT_EQ(a.refusal.candidate.reason,
            kiln::plan::verify_artifact("image:sm_99", 11, pinned));  // the pure check's words
  EXPECT_NE(a.refusal.candidate.reason.find(kiln::io::sha256_hex("image:sm_99")),
            std::string::npos);
}

TEST(CheckedArtifact, MissingFileIsUnreadableWithTheReadsErrorKindAndMessage) {
  TempDir tmp;
  std::string path = (tmp / "gone.fatbin").string();
  kiln::plan::StoreScanner fs;
  auto a = kiln::read_checked_artifact(fs, {"store", "sm_90", path, ""}, 11,
                                       kiln::io::sha256_hex("image:sm_90"));
  EXPECT_EQ(a.outcome, kiln::CheckedArtifact::Outcome::Unreadable);
  ErrorKind kind = ErrorKind::Internal;
  std::string what;
  try {
    fs.read_file(path);
  } catch (const kiln::Error& e) {
    kind = e.kind();
    what = e.what();
  }
  EXPECT_EQ(kind, ErrorKind::NotFound);  // a missing file; read_file's other errors pass as well
  EXPECT_EQ(a.refusal.kind, kind);
  EXPECT_EQ(a.refusal.candidate.reason, what);
  EXPECT_NE(what.find(path), std::string::npos) << what;
  EXPECT_EQ(a.refusal.candidate.path, path);
}

TEST(Loader, ImageThatLoadsWithZeroKernelsIsRejectedAndTheNextTargetTried) {
  Rig rig;
  std::string misfit = write_loadable_entry(rig.tmp / "s", {"sm_90"});
  std::string ptx = write_loadable_entry(rig.tmp / "s", {"compute_90"});
  rig.driver->empty_images = {"image:sm_90"};
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  auto l = rig.loader();
  EXPECT_EQ(l->get(kUri).origin, ptx);
  EXPECT_EQ(rig.driver->loads.load(), 2);

  Rig only;
  write_loadable_entry(only.tmp / "s", {"sm_90"});
  only.driver->empty_images = {"image:sm_90"};
  only.cfg.artifact_path = {(only.tmp / "s").string()};
  auto l2 = only.loader();
  std::string msg;
  EXPECT_EQ(get_error(*l2, kUri, &msg), ErrorKind::NotFound);
  EXPECT_NE(msg.find("holds no kernel for CC 9.0"), std::string::npos) << msg;
}

TEST(Loader, StaleSourceHashIsRejectedNamingTheFieldAndJitIsUsedNext) {
  Rig rig;
  std::string stale =
      write_loadable_entry(rig.tmp / "s", {"sm_90", kiln::version(), std::string(64, 'b')});
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  rig.cfg.disable_jit = false;
  auto l = rig.loader();
  const auto& h = l->get(kUri);
  EXPECT_EQ(h.origin, "jit:" + rig.cfg.cache_dir + "/jit/key.cubin");
  EXPECT_EQ(rig.jit->compiles.load(), 1);
  auto r = l->resolve(kUri, 90);
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->tier, "jit");
  ASSERT_FALSE(r.rejected.empty());
  EXPECT_EQ(r.rejected[0].path, stale);
  EXPECT_NE(r.rejected[0].reason.find("source_hash differs: artifact has " + std::string(64, 'b')),
            std::string::npos)
      << r.rejected[0].reason;
}

TEST(Loader, StaleOnlyFailsWithStaleKindAndAllowStaleLoadsIt) {
  Rig rig;
  std::string stale = write_loadable_entry(rig.tmp / "s", {"sm_90", "0.0.1"});
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  {
    auto l = rig.loader();
    std::string msg;
    EXPECT_EQ(get_error(*l, kUri, &msg), ErrorKind::Stale);
    EXPECT_NE(
        msg.find(
            "package_version differs: archive has 0.0.1, this loader's package kiln-kernels is " +
            std::string(kiln::version())),
        std::string::npos)
        << msg;
  }
  rig.cfg.allow_stale = true;
  auto l = rig.loader();
  EXPECT_EQ(l->get(kUri).origin, stale);
}

TEST(Loader, ManifestWithNewerFormatVersionIsRejectedNamingBothValues) {
  Rig rig;
  std::string art = write_loadable_entry(rig.tmp / "s", {"sm_90"});
  fs::path manifest = fs::path(art).parent_path() / "manifest.json";
  auto j = nlohmann::json::parse(kiln::test::read_file(manifest));
  j["format_version"] = kiln::format::kManifestFormat + 1;
  kiln::test::write_file(manifest, j.dump(2));
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  auto l = rig.loader();
  std::string msg;
  EXPECT_EQ(get_error(*l, kUri, &msg), ErrorKind::Stale);
  EXPECT_NE(msg.find("format_version differs: manifest has " +
                     std::to_string(kiln::format::kManifestFormat + 1) + ", this libkiln reads " +
                     std::to_string(kiln::format::kManifestFormat)),
            std::string::npos)
      << msg;
}

TEST(Loader, ReadOnlyStoreIsUsedAndLeftByteForByteUntouched) {
  Rig rig;
  std::string art = write_loadable_entry(rig.tmp / "ro", {"sm_90"});
  write_loadable_entry(rig.tmp / "ro", {"sm_80"});
  std::string before = tree_digest(rig.tmp / "ro");
  ASSERT_EQ(kiln::test::run("chmod -R a-w '" + (rig.tmp / "ro").string() + "'").exit_code, 0);
  rig.cfg.artifact_path = {(rig.tmp / "ro").string()};
  auto l = rig.loader();
  EXPECT_EQ(l->get(kUri).origin, art);
  l->resolve(kUri, 90);
  l->resolve(kUri, 86);
  // Root ignores the mode bits, so the proof is the tree being unchanged.
  EXPECT_EQ(tree_digest(rig.tmp / "ro"), before);
}

TEST(Loader, ConcurrentGetsOfOneUriIn16ThreadsLoadOnce) {
  Rig rig;
  write_loadable_entry(rig.tmp / "s", {"sm_90"});
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  auto l = rig.loader();
  std::vector<const kiln::KernelHandle*> got(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) threads.emplace_back([&, i] { got[i] = &l->get(kUri); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(rig.driver->loads.load(), 1);
  for (auto* h : got) EXPECT_EQ(h, got[0]);
}

TEST(Loader, EachContextGetsItsOwnEntry) {
  Rig rig;
  write_loadable_entry(rig.tmp / "s", {"sm_90"});
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  auto l = rig.loader();
  const auto& a = l->get(kUri);
  rig.driver->ctx = reinterpret_cast<void*>(0x200);
  const auto& b = l->get(kUri);
  EXPECT_NE(&a, &b);
  EXPECT_NE(a.functions[0], b.functions[0]);
  EXPECT_EQ(rig.driver->loads.load(), 2);
  rig.driver->ctx = reinterpret_cast<void*>(0x100);
  EXPECT_EQ(&l->get(kUri), &a);
  EXPECT_EQ(rig.driver->loads.load(), 2);
}

TEST(Loader, MissDuringStreamCaptureFailsWithoutReadingAnythingAndPrefetchFixesIt) {
  Rig rig;
  write_loadable_entry(rig.tmp / "s", {"sm_90"});
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  auto l = rig.loader();
  rig.driver->capturing = true;
  void* stream = reinterpret_cast<void*>(0x5);
  try {
    l->get(kUri, stream);
    FAIL() << "expected an error";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("prefetch before capture"), std::string::npos);
  }
  EXPECT_EQ(rig.fs->reads.load(), 0);
  EXPECT_EQ(rig.driver->loads.load(), 0);
  rig.driver->capturing = false;
  l->prefetch({kUri});
  rig.driver->capturing = true;
  EXPECT_EQ(l->get(kUri, stream).uri, kUri);
}

TEST(Loader, UnknownUriIsNotFoundListingNearMatches) {
  Rig rig;
  auto l = rig.loader();
  std::string msg;
  EXPECT_EQ(get_error(*l, "rmsnorm_dtype_bf16_block_255", &msg), ErrorKind::NotFound);
  EXPECT_NE(msg.find("rmsnorm_dtype_bf16_block_256"), std::string::npos) << msg;
  EXPECT_EQ(rig.fs->reads.load(), 0);
}

TEST(Loader, MirrorDownloadIntoTheCacheIsVerifiedAndLoaded) {
  Rig rig;
  rig.cfg.offline = false;
  rig.cfg.mirrors = {"file:///srv/mirror"};
  rig.on_fetch = [](const std::string& dest) { write_loadable_entry(dest, {"sm_90"}); };
  auto l = rig.loader();
  const auto& h = l->get(kUri);
  EXPECT_EQ(rig.fetches.load(), 1);
  EXPECT_EQ(h.origin.rfind(rig.cfg.cache_dir, 0), 0u) << h.origin;
}

TEST(Loader, MirrorTierPassesTheConfiguredCaBundleToTheIndexAndTheDownload) {
  Rig rig;
  rig.cfg.offline = false;
  rig.cfg.mirrors = {"https://mirror.example/kiln"};
  rig.cfg.ca_bundle = "/etc/site/ca.pem";  // KILN_CA_BUNDLE
  rig.on_fetch = [](const std::string& dest) { write_loadable_entry(dest, {"sm_90"}); };
  auto l = rig.loader();
  l->get(kUri);
  EXPECT_EQ(rig.ca_bundles, (std::vector<std::string>{"/etc/site/ca.pem", "/etc/site/ca.pem"}));
}

TEST(Loader, FailedMirrorIsRecordedAndJitUsedWithAWarning) {
  Rig rig;
  rig.cfg.offline = false;
  rig.cfg.disable_jit = false;
  rig.cfg.mirrors = {"https://mirror.example/kiln"};
  auto l = rig.loader();
  EXPECT_EQ(l->get(kUri).origin.rfind("jit:", 0), 0u);
  EXPECT_EQ(rig.fetches.load(), 1);
}

TEST(Loader, JitResultWhoseDigestSidecarDisagreesIsRejected) {
  Rig rig;
  rig.cfg.disable_jit = false;
  rig.jit->corrupt_sidecar = true;
  auto l = rig.loader();
  std::string msg;
  EXPECT_EQ(get_error(*l, kUri, &msg), ErrorKind::Integrity);
  EXPECT_NE(msg.find("[jit sm_90]"), std::string::npos) << msg;
  EXPECT_EQ(rig.driver->loads.load(), 0);
}

TEST(Loader, JitUnavailableIsNamedInTheFailure) {
  Rig rig;
  rig.cfg.disable_jit = false;
  rig.jit->available = false;
  auto l = rig.loader();
  std::string msg;
  EXPECT_EQ(get_error(*l, kUri, &msg), ErrorKind::NotFound);
  EXPECT_NE(msg.find("NVRTC unavailable: libnvrtc.so.13 not found"), std::string::npos) << msg;
}

TEST(Loader, FamilyNotDeclaredForTheDeviceIsServedByNoTierAndTheAdviceSaysSo) {
  // hopper_wgmma is declared only for sm_90a: on CC 8.6 neither the mirror's sm_86 archive nor
  // the JIT may serve it, though both would run there and the fake JIT compiles anything.
  Rig rig;
  rig.driver->cc = 86;
  rig.cfg.disable_jit = false;
  rig.cfg.offline = false;
  rig.cfg.mirrors = {"https://mirror.example/kiln"};
  rig.offered = {"sm_80", "sm_86", "sm_90a"};
  auto l = rig.loader();
  std::string msg;
  EXPECT_EQ(get_error(*l, "hopper_wgmma_bn_64", &msg), ErrorKind::NotFound);
  EXPECT_EQ(rig.jit->compiles.load(), 0);
  EXPECT_TRUE(rig.fetched.empty()) << msg;
  EXPECT_NE(msg.find("[mirror sm_86] https://mirror.example/kiln: family 'hopper_wgmma' is "
                     "declared only for sm_90a"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("[jit sm_86] family 'hopper_wgmma' is declared only for sm_90a"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("which cannot run on CC 8.6: no archive of kiln-kernels"), std::string::npos)
      << msg;
  // resolve() walks the same plan: no tier promised.
  kiln::Resolution r = l->resolve("hopper_wgmma_bn_64", 86);
  EXPECT_FALSE(r.chosen) << r.to_json();
  // On the device it is declared for, the JIT serves it with the arch-specific target.
  rig.driver->cc = 90;
  rig.cfg.mirrors.clear();
  kiln::Resolution r90 = rig.loader()->resolve("hopper_wgmma_bn_64", 90);
  ASSERT_TRUE(r90.chosen) << r90.to_json();
  EXPECT_EQ(r90.chosen->tier, "jit");
  EXPECT_EQ(r90.chosen->target, "sm_90a");
}

TEST(Loader, WarmGetIsFast) {
  Rig rig;
  write_loadable_entry(rig.tmp / "s", {"sm_90"});
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  auto l = rig.loader();
  l->get(kUri);
  const int n = 200000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) l->get(kUri);
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
  std::printf("warm get: %.1f ns\n", ns);
  EXPECT_LT(ns, 2000.0);  // loose bound for sanitizer/debug builds; target is <= 200 ns
}

TEST(Loader, WarmHitsFromManyThreadsReturnTheOneHandleWithoutLoadingAgain) {
  Rig rig;
  write_loadable_entry(rig.tmp / "s", {"sm_90"});
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  auto l = rig.loader();
  const kiln::KernelHandle* first = &l->get(kUri);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 2000; ++k)
        if (&l->get(kUri) != first) ++wrong;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(rig.driver->loads.load(), 1);
}

TEST(Loader, ANewLoaderNeverSeesTheHandlesOfADestroyedOne) {
  // Loaders built one after another usually land at the same address; each must load its own.
  Rig rig;
  for (int i = 0; i < 4; ++i) {
    fs::path store = rig.tmp / ("s" + std::to_string(i));
    std::string want = write_loadable_entry(store, {"sm_90"});
    rig.cfg.artifact_path = {store.string()};
    auto l = rig.loader();
    EXPECT_EQ(l->get(kUri).origin, want);
    EXPECT_EQ(l->get(kUri).origin, want);
    EXPECT_EQ(rig.driver->loads.load(), i + 1);
  }
}

TEST(Loader, ColdGetReadsOnlyRunnableArchivesAndStopsAtTheFirstStoreThatServes) {
  Rig rig;
  write_loadable_entry(rig.tmp / "s1", {"sm_80"});
  fs::path bad_dir =
      rig.tmp / "s1" /
      kiln::format::archive_stem("kiln-kernels", kiln::version(), kiln::cuda_version(), "sm_80");
  kiln::test::write_file(bad_dir / "manifest.json", "not json");
  std::string want = write_loadable_entry(rig.tmp / "s1", {"sm_90"});
  std::string later = write_loadable_entry(rig.tmp / "s2", {"sm_90"});
  rig.cfg.artifact_path = {(rig.tmp / "s1").string(), (rig.tmp / "s2").string()};
  auto l = rig.loader();
  EXPECT_EQ(l->get(kUri).origin, want);
  EXPECT_EQ(rig.fs->reads.load(), 2);  // the sm_90 manifest and its artifact, nothing else
  // resolve() still explains everything, the unreadable sm_80 manifest included.
  auto r = l->resolve(kUri, 90);
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->path, want);
  bool bad_seen = false, later_seen = false;
  for (const auto& c : r.rejected) {
    if (c.path == (bad_dir / "manifest.json").string()) bad_seen = true;
    if (c.path == later) later_seen = true;
  }
  EXPECT_TRUE(bad_seen);
  EXPECT_TRUE(later_seen);
}

// The store tier's order is artifact path (each directory once), installed store, cache; the
// first store that serves ends it: later stores are not even listed.
TEST(Loader, AStoreHitEndsTheSearchAndLaterStoresAreNeverScanned) {
  Rig rig;
  std::string want = write_loadable_entry(rig.tmp / "path", {"sm_90"});
  write_loadable_entry(rig.tmp / "installed", {"sm_90"});
  write_loadable_entry(rig.cfg.cache_dir, {"sm_90"});
  rig.cfg.artifact_path = {(rig.tmp / "path").string()};
  auto l = rig.loader();
  EXPECT_EQ(l->get(kUri).origin, want);
  EXPECT_EQ(rig.fs->scanned, std::vector<std::string>{(rig.tmp / "path").string()});

  // Nothing in the artifact path: the installed store next, and it serves.
  Rig miss;
  fs::create_directories(miss.tmp / "path");
  std::string installed = write_loadable_entry(miss.tmp / "installed", {"sm_90"});
  write_loadable_entry(miss.cfg.cache_dir, {"sm_90"});
  miss.cfg.artifact_path = {(miss.tmp / "path").string(), (miss.tmp / "path").string()};
  auto l2 = miss.loader();
  EXPECT_EQ(l2->get(kUri).origin, installed);
  EXPECT_EQ(miss.fs->scanned, (std::vector<std::string>{(miss.tmp / "path").string(),
                                                        (miss.tmp / "installed").string()}));
}

TEST(Loader, FailedColdGetStillListsTheRejectionsOfAFullScan) {
  Rig rig;
  std::string sm80 = write_loadable_entry(rig.tmp / "s", {"sm_80"});
  std::string bad = write_loadable_entry(rig.tmp / "s", {"sm_90"});
  kiln::test::write_file(bad, "image:sm_99");
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  auto l = rig.loader();
  std::string msg;
  EXPECT_EQ(get_error(*l, kUri, &msg), ErrorKind::Integrity);
  EXPECT_NE(msg.find(sm80), std::string::npos) << msg;
  EXPECT_NE(msg.find("runs only on CC 8.x"), std::string::npos) << msg;
  EXPECT_NE(msg.find(bad + ": integrity"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(bad + ": integrity"), msg.rfind(bad + ": integrity")) << msg;  // tried once
  EXPECT_EQ(rig.driver->loads.load(), 0);
}

// The real driver pointed at a libcuda.so.1 that does not exist: "no driver" on every machine,
// a GPU one included, through the same dlopen failure path a driver-less node takes.
std::shared_ptr<kiln::runtime::Driver> absent_driver(const TempDir& tmp) {
  return kiln::runtime::make_cuda_driver((tmp / "no-driver-here" / "libcuda.so.1").string());
}

TEST(Loader, WithoutADriverGetIsUnsupportedNamingLibcuda) {
  kiln::LoaderConfig cfg;
  TempDir tmp;
  cfg.cache_dir = (tmp / "cache").string();
  cfg.offline = true;
  cfg.disable_jit = true;
  kiln::plan::LoaderDeps deps;
  deps.driver = absent_driver(tmp);
  auto lp = kiln::make_loader(kiln::test::reference_description(), cfg, std::move(deps));
  kiln::Loader& l = *lp;
  std::string msg;
  EXPECT_EQ(get_error(l, kUri, &msg), ErrorKind::Unsupported) << msg;
  EXPECT_NE(msg.find("no CUDA driver"), std::string::npos) << msg;
  EXPECT_NE(msg.find("libcuda.so.1"), std::string::npos) << msg;
}

TEST(ResolveCli, JsonForAnAbsentDeviceNamesChoiceAndEveryRejection) {
  TempDir tmp;
  std::string want = write_loadable_entry(tmp / "store", {"sm_90"});
  write_loadable_entry(tmp / "store", {"sm_100"});
  write_loadable_entry(tmp / "store", {"sm_80"});
  std::string env = "KILN_ARTIFACT_PATH='" + (tmp / "store").string() + "' KILN_CACHE_DIR='" +
                    (tmp / "cache").string() + "' KILN_OFFLINE=1 KILN_DISABLE_JIT=1 KILN_MIRRORS= ";
  auto r = kiln::test::run(env + kiln::test::kiln_cli() + " resolve " + kUri +
                           " --device sm_90 --explain --json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["uri"], kUri);
  EXPECT_EQ(j["device"], "sm_90");
  EXPECT_EQ(j["chosen"]["tier"], "store");
  EXPECT_EQ(j["chosen"]["target"], "sm_90");
  EXPECT_EQ(j["chosen"]["path"], want);
  std::map<std::string, std::string> reasons;
  for (const auto& c : j["rejected"]) reasons[c["target"].get<std::string>()] = c["reason"];
  EXPECT_NE(reasons["sm_100"].find("runs only on CC 10.x"), std::string::npos);
  EXPECT_NE(reasons["sm_80"].find("runs only on CC 8.x"), std::string::npos);

  auto miss = kiln::test::run(env + kiln::test::kiln_cli() + " resolve " + kUri +
                              " --device sm_120 --json 2>/dev/null");
  EXPECT_EQ(miss.exit_code, 6) << miss.out;
  auto jm = nlohmann::json::parse(miss.out);
  EXPECT_TRUE(jm["chosen"].is_null());

  auto bad = kiln::test::run(kiln::test::kiln_cli() + " resolve " + kUri + " --device sm_9x");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
}

TEST(DoctorCli, ReportsFactsAndSaysWhatLoadingLacks) {
  TempDir tmp;
  std::string env = kiln::test::nvrtc_child_env() + "KILN_CACHE_DIR='" + (tmp / "cache").string() +
                    "' KILN_ARTIFACT_PATH= ";
  auto r = kiln::test::run(env + kiln::test::kiln_cli() + " doctor --json 2>/dev/null");
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(r.exit_code, j["ok"].get<bool>() ? 0 : 5) << r.out;
  EXPECT_TRUE(j["cache_dir"]["writable"].get<bool>());
  EXPECT_TRUE(fs::is_directory(tmp / "cache"));
  EXPECT_TRUE(fs::is_empty(tmp / "cache"));  // the probe file was deleted
  EXPECT_EQ(j["tools"].size(), 4u);
  bool gpu = !j["devices"].empty();
  auto req = kiln::test::run(env + kiln::test::kiln_cli() + " doctor --require-gpu");
  if (!gpu) {
    EXPECT_EQ(req.exit_code, 5) << req.out;
  }

  auto missing_store =
      kiln::test::run(kiln::test::nvrtc_child_env() + "KILN_ARTIFACT_PATH='" +
                      (tmp / "nope").string() + "' " + kiln::test::kiln_cli() + " doctor");
  EXPECT_EQ(missing_store.exit_code, 5) << missing_store.out;
  EXPECT_NE(
      missing_store.out.find("missing: store " + (tmp / "nope").string() + " (does not exist)"),
      std::string::npos)
      << missing_store.out;
}

// The stand-in libcuda.so.1 of the Python tests (one CC 9.0 device, runs nothing), built here:
// the directory to put first on LD_LIBRARY_PATH.
fs::path stand_in_driver_dir(const fs::path& dir) {
  const fs::path lib = dir / "libcuda.so.1";
  auto r = kiln::test::run("cc -shared -fPIC -O1 -Wl,-soname,libcuda.so.1 -o '" + lib.string() +
                           "' '" + kiln::test::source_dir() + "/tests/python/stand_in_cuda.c'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return dir;
}

// Doctor's environment: the store, the mirrors and the driver's directory given, JIT off, the
// package named so that the mirrors are probed for its index.
std::string doctor_cli(const fs::path& tmp, const fs::path& store, const std::string& mirrors,
                       const std::string& driver_dir, const std::string& args) {
  return kiln::test::nvrtc_child_env() + "LD_LIBRARY_PATH='" + driver_dir + "' KILN_CACHE_DIR='" +
         (tmp / "cache").string() + "' KILN_ARTIFACT_PATH='" + store.string() + "' KILN_MIRRORS='" +
         mirrors + "' KILN_DISABLE_JIT=1 " + kiln::test::kiln_cli() +
         " doctor --package kiln-kernels --version " + kiln::version() + " " + args;
}

// No archive in the store, the only mirror unreachable, JIT off (and, without a GPU here, no
// driver): nothing can load, and doctor says so, naming each missing piece.
TEST(DoctorCli, NothingToLoadFromExitsUnsupportedNamingWhatIsMissing) {
  TempDir tmp;
  fs::create_directories(tmp / "store");
  const std::string cli =
      doctor_cli(tmp.path(), tmp / "store", "http://127.0.0.1:9", "/nonexistent", "");
  auto j = nlohmann::json::parse(kiln::test::run(cli + "--json 2>/dev/null").out);
  const bool gpu = !j["devices"].empty();
  EXPECT_FALSE(j["ok"].get<bool>());
  ASSERT_EQ(j["missing"].size(), gpu ? 1u : 2u) << j.dump(2);
  const std::string source = j["missing"][gpu ? 0 : 1];
  EXPECT_EQ(source.rfind("a source of kernels", 0), 0u) << source;
  EXPECT_NE(source.find("no store holds an archive"), std::string::npos) << source;
  EXPECT_NE(source.find("(searched " + (tmp / "store").string()), std::string::npos) << source;
  EXPECT_NE(source.find("no mirror reached (http://127.0.0.1:9: "), std::string::npos) << source;
  EXPECT_NE(source.find("no usable JIT (disabled by KILN_DISABLE_JIT)"), std::string::npos)
      << source;
  if (!gpu) {
    EXPECT_EQ(j["missing"][0].get<std::string>().rfind("CUDA driver (", 0), 0u) << j.dump(2);
  }

  auto text = kiln::test::run(cli + "2>/dev/null");
  EXPECT_EQ(text.exit_code, 5) << text.out;
  EXPECT_EQ(text.out.find("ok:"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("missing: " + source + "\n"), std::string::npos) << text.out;
  if (!gpu) {
    EXPECT_NE(text.out.find("missing: CUDA driver ("), std::string::npos) << text.out;
  }
}

// A driver with a CC 9.0 device and an sm_90 archive of the package in the store: ok, though
// the only mirror is unreachable.
TEST(DoctorCli, ADeviceAndAStoreArchiveThatRunsOnItIsOk) {
  TempDir tmp;
  kiln::test::ReleaseSpec rel;
  rel.version = kiln::version();
  kiln::test::write_store_entry(tmp / "store", rel, "sm_90");
  const std::string driver = stand_in_driver_dir(tmp.path()).string();
  auto r = kiln::test::run(
      doctor_cli(tmp.path(), tmp / "store", "http://127.0.0.1:9", driver, "2>/dev/null"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("gpu 0: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok: loading can work here\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("missing:"), std::string::npos) << r.out;

  // The same store for a device it cannot serve (sm_80: the archive is sm_90 SASS): missing.
  auto cc80 = kiln::test::run("KILN_STAND_IN_CC=80 " + doctor_cli(tmp.path(), tmp / "store", "",
                                                                  driver, "--json 2>/dev/null"));
  EXPECT_EQ(cc80.exit_code, 5) << cc80.out;
  auto j = nlohmann::json::parse(cc80.out);
  ASSERT_EQ(j["missing"].size(), 1u) << cc80.out;
  EXPECT_EQ(j["missing"][0].get<std::string>().rfind("a source of kernels for sm_80 (CC 8.0)", 0),
            0u)
      << cc80.out;
}

// With the JIT on, doctor test-compiles with this machine's NVRTC while the benchmarks' and
// the userland smoke's stand-in driver (bench/stand_in_libcuda.c) is the libcuda.so.1 of the
// process: NVRTC 13 opens libcuda itself and calls cuGetExportTable, which that stand-in once
// lacked (the doctor died of SIGSEGV, exit 139, printing nothing).
TEST(DoctorCli, TheNvrtcTestCompileRunsBesideTheStandInDriver) {
  const fs::path driver_dir = kiln::test::stand_in_libcuda_dir();
  if (driver_dir.empty()) GTEST_SKIP() << "no stand-in libcuda (-DKILN_BUILD_BENCH=ON builds it)";
  TempDir tmp;
  kiln::test::ReleaseSpec rel;
  rel.version = kiln::version();
  kiln::test::write_store_entry(tmp / "store", rel, "sm_90");
  const std::string driver = driver_dir.string();
  auto r =
      kiln::test::run(kiln::test::nvrtc_child_env() + "LD_LIBRARY_PATH='" + driver +
                      "' KILN_CACHE_DIR='" + (tmp / "cache").string() + "' KILN_ARTIFACT_PATH='" +
                      (tmp / "store").string() + "' " + kiln::test::kiln_cli() +
                      " doctor --package kiln-kernels --version " + kiln::version() + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("test compile ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok: loading can work here\n"), std::string::npos) << r.out;
}

// --- the mirror tier over the pinned index, through the one target-choice rule

const std::vector<std::string> kReleaseTargets = {"sm_80",  "sm_86",  "sm_89",     "sm_90a",
                                                  "sm_100", "sm_120", "compute_80"};

TEST(Loader, MirrorTierFetchesTheBestTargetTheIndexOffersNotTheDeviceName) {
  Rig rig;
  rig.cfg.offline = false;
  rig.cfg.mirrors = {"http://127.0.0.1:1/mirror"};
  rig.offered = kReleaseTargets;  // no sm_90 archive: the real release
  rig.on_fetch = [&rig](const std::string& dest) {
    write_loadable_entry(dest, {rig.fetched.back()});
  };
  auto l = rig.loader();
  const auto& h = l->get(kUri);
  EXPECT_EQ(rig.index_fetches.load(), 1);
  EXPECT_EQ(rig.fetched, std::vector<std::string>{"sm_90a"});
  EXPECT_EQ(rig.driver->images, std::vector<std::string>{"image:sm_90a"});
  EXPECT_EQ(h.origin.rfind(rig.cfg.cache_dir, 0), 0u) << h.origin;
}

TEST(Loader, MirrorTierTriesTheNextTargetWhenTheBestCannotBeFetched) {
  Rig rig;
  rig.cfg.offline = false;
  rig.cfg.mirrors = {"http://127.0.0.1:1/mirror"};
  rig.offered = kReleaseTargets;
  rig.driver->cc = 86;
  rig.on_fetch = [&rig](const std::string& dest) {
    if (rig.fetched.back() == "sm_86")
      throw kiln::Error(ErrorKind::Integrity, "SHA-256 mismatch: index pins a, served b");
    write_loadable_entry(dest, {rig.fetched.back()});
  };
  auto l = rig.loader();
  EXPECT_EQ(l->get(kUri).origin.rfind(rig.cfg.cache_dir, 0), 0u);
  EXPECT_EQ(rig.fetched, (std::vector<std::string>{"sm_86", "sm_80"}));
  EXPECT_EQ(rig.driver->images, std::vector<std::string>{"image:sm_80"});
}

TEST(Loader, MirrorTierFailureNamesEveryTargetTriedAndEveryOneThatCannotRun) {
  Rig rig;
  rig.cfg.offline = false;
  rig.cfg.mirrors = {"http://127.0.0.1:1/mirror"};
  rig.offered = kReleaseTargets;
  auto l = rig.loader();  // on_fetch unset: every fetch fails with HTTP 503
  std::string msg;
  EXPECT_EQ(get_error(*l, kUri, &msg), ErrorKind::NotFound);
  EXPECT_EQ(rig.fetched, (std::vector<std::string>{"sm_90a", "compute_80"}));
  EXPECT_NE(msg.find("[mirror sm_90a] http://127.0.0.1:1/mirror: mirror down: HTTP 503"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("[mirror compute_80] http://127.0.0.1:1/mirror: mirror down: HTTP 503"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("[mirror sm_80] http://127.0.0.1:1/mirror: SASS sm_80 runs only on CC 8.x; "
                     "the device is CC 9.0"),
            std::string::npos)
      << msg;
}

TEST(Loader, MirrorTierWithNoArchiveThatCanRunFetchesNothing) {
  Rig rig;
  rig.cfg.offline = false;
  rig.cfg.mirrors = {"http://127.0.0.1:1/mirror"};
  rig.offered = {"sm_100", "sm_120"};
  auto l = rig.loader();
  std::string msg;
  EXPECT_EQ(get_error(*l, kUri, &msg), ErrorKind::NotFound);
  EXPECT_EQ(rig.fetches.load(), 0);
  EXPECT_NE(msg.find(std::string("no archive of kiln-kernels ") + kiln::version() +
                     " can run on CC 9.0 (the index lists: sm_100, sm_120)"),
            std::string::npos)
      << msg;
}

// --- one plan, walked by get() and resolve(): the same candidates and reasons

// The "[tier target] path: reason" lines of a failed get()'s message, in order.
std::vector<std::string> rejected_lines(const std::string& msg) {
  std::vector<std::string> out;
  std::size_t at = msg.find("\nrejected:");
  if (at == std::string::npos) return out;
  std::size_t pos = msg.find('\n', at + 1);
  while (pos != std::string::npos && msg.compare(pos, 4, "\n  [") == 0) {
    std::size_t end = msg.find('\n', pos + 1);
    out.push_back(msg.substr(pos + 3, end == std::string::npos ? end : end - pos - 3));
    pos = end;
  }
  return out;
}

std::vector<std::string> explain_lines(const kiln::Resolution& r) {
  std::vector<std::string> out;
  for (const auto& c : r.rejected)
    out.push_back("[" + c.tier + (c.target.empty() ? "" : " " + c.target) + "] " +
                  (c.path.empty() ? "" : c.path + ": ") + c.reason);
  return out;
}

void expect_same_story(Rig& rig) {
  auto l = rig.loader();
  std::string msg;
  get_error(*l, kUri, &msg);
  auto r = l->resolve(kUri, 90);
  EXPECT_FALSE(r.chosen) << r.to_json();
  auto from_get = rejected_lines(msg);
  EXPECT_GE(from_get.size(), 4u) << msg;
  EXPECT_EQ(from_get, explain_lines(r)) << msg << "\n" << r.to_json();
  for (const auto& s : r.searched) EXPECT_NE(msg.find("\n  " + s + "\n"), std::string::npos) << s;
}

TEST(Loader, ResolveExplainAndAFailingGetReportTheSameCandidatesAndReasonsOffline) {
  Rig rig;  // offline, JIT disabled
  write_loadable_entry(rig.tmp / "s1", {"sm_80"});
  write_loadable_entry(rig.tmp / "s1", {"sm_90", "0.0.1"});
  std::string bad = write_loadable_entry(rig.tmp / "s2", {"compute_80"});
  kiln::test::write_file(bad, "image:compute_81");
  rig.cfg.artifact_path = {(rig.tmp / "s1").string(), (rig.tmp / "s2").string(),
                           (rig.tmp / "missing").string()};
  rig.cfg.mirrors = {"http://127.0.0.1:1/mirror"};
  expect_same_story(rig);
}

TEST(Loader, ResolveExplainAndAFailingGetReportTheSameCandidatesAndReasonsWithoutNvrtc) {
  Rig rig;
  rig.cfg.offline = false;  // no mirror configured
  rig.cfg.disable_jit = false;
  rig.jit->available = false;
  write_loadable_entry(rig.tmp / "s1", {"sm_100"});
  std::string bad = write_loadable_entry(rig.tmp / "s1", {"sm_90a"});
  kiln::test::write_file(bad, "image:sm_90b");
  rig.cfg.artifact_path = {(rig.tmp / "s1").string()};
  expect_same_story(rig);
  EXPECT_EQ(rig.jit->compiles.load(), 0);
}

// The cold path remembers a store's listing and manifests while they are unchanged on disk
// (identity_cache.hpp); only entries a second old are remembered, hence the waits.
void let_settle() { std::this_thread::sleep_for(std::chrono::milliseconds(1100)); }

TEST(Loader, ASettledManifestIsNotReadAgainButEveryLoadStillHashesTheArtifact) {
  Rig rig;
  std::string art = write_loadable_entry(rig.tmp / "s", {"sm_90"});
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  let_settle();
  EXPECT_EQ(rig.loader()->get(kUri).origin, art);
  EXPECT_EQ(rig.fs->reads.load(), 2);  // manifest + artifact
  EXPECT_EQ(rig.loader()->get(kUri).origin, art);
  EXPECT_EQ(rig.fs->reads.load(), 3);  // the artifact only
  // Same size, other bytes, the manifest untouched: refused by the digest of the remembered one.
  kiln::test::write_file(art, "image:sm_91");
  std::string msg;
  EXPECT_EQ(get_error(*rig.loader(), kUri, &msg), ErrorKind::Integrity);
  EXPECT_NE(msg.find(art + ": integrity"), std::string::npos) << msg;
  EXPECT_EQ(rig.driver->loads.load(), 2);
}

TEST(Loader, AManifestRewrittenAfterItWasRememberedIsReadAgain) {
  Rig rig;
  EntrySpec first("sm_90");
  first.bytes = "first image";
  std::string art = write_loadable_entry(rig.tmp / "s", first);
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  let_settle();
  rig.loader()->get(kUri);
  EntrySpec second("sm_90");
  second.bytes = "second image, longer";
  EXPECT_EQ(write_loadable_entry(rig.tmp / "s", second), art);  // manifest and artifact rewritten
  rig.loader()->get(kUri);
  std::lock_guard<std::mutex> lock(rig.driver->mu);
  ASSERT_EQ(rig.driver->images.size(), 2u);
  EXPECT_EQ(rig.driver->images[1], "second image, longer");
}

TEST(Loader, AnArchiveAddedToARememberedStoreIsFound) {
  Rig rig;
  write_loadable_entry(rig.tmp / "s", {"sm_80"});
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  let_settle();
  std::string msg;
  EXPECT_EQ(get_error(*rig.loader(), kUri, &msg), ErrorKind::NotFound);
  std::string art = write_loadable_entry(rig.tmp / "s", {"sm_90"});
  EXPECT_EQ(rig.loader()->get(kUri).origin, art);
}

TEST(Loader, ColdGetPhasesCoverTheStoreWorkAndAddUpToItsTime) {
  Rig rig;
  write_loadable_entry(rig.tmp / "s", {"sm_90"});
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  kiln::runtime::cold::PhaseTimes t;
  kiln::runtime::cold::set_phase_sink(&t);
  auto t0 = std::chrono::steady_clock::now();
  auto l = rig.loader();
  l->get(kUri);
  auto wall =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  kiln::runtime::cold::set_phase_sink(nullptr);
  auto at = [&](kiln::runtime::cold::Phase p) { return t.ns[static_cast<int>(p)]; };
  using P = kiln::runtime::cold::Phase;
  for (P p : {P::LoaderCreate, P::Registry, P::Context, P::StoreScan, P::ManifestParse, P::Read,
              P::Hash, P::Other})
    EXPECT_GT(at(p), 0u) << kiln::runtime::cold::phase_name(p);
  // The fake driver sleeps 2 ms in load_library: in driver_load, and in no other phase.
  EXPECT_GE(at(P::DriverLoad), 2'000'000u);
  EXPECT_LT(t.total() - at(P::DriverLoad), static_cast<std::uint64_t>(wall) - 2'000'000u);
  EXPECT_LE(t.total(), static_cast<std::uint64_t>(wall));
  // A warm hit is not timed.
  kiln::runtime::cold::PhaseTimes warm;
  kiln::runtime::cold::set_phase_sink(&warm);
  l->get(kUri);
  kiln::runtime::cold::set_phase_sink(nullptr);
  EXPECT_EQ(warm.total(), 0u);
}

TEST(Loader, ColdGetOfAWholeReleaseReadsOnlyTheBestArchivesManifest) {
  Rig rig;
  write_loadable_entry(rig.tmp / "s", {"compute_80"});
  std::string sass = write_loadable_entry(rig.tmp / "s", {"sm_90"});
  write_loadable_entry(rig.tmp / "s", {"sm_80"});
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  EXPECT_EQ(rig.loader()->get(kUri).origin, sass);
  EXPECT_EQ(rig.fs->reads.load(), 2);  // the sm_90 manifest and its artifact: not compute_80's
}

TEST(Loader, WhenTheBestArchiveFailsTheColdGetFallsBackToTheNextTargetOfTheSameStore) {
  Rig rig;
  std::string ptx = write_loadable_entry(rig.tmp / "s", {"compute_80"});
  std::string sass = write_loadable_entry(rig.tmp / "s", {"sm_90"});
  kiln::test::write_file(sass, "image:sm_99");  // same size, other bytes
  rig.cfg.artifact_path = {(rig.tmp / "s").string()};
  EXPECT_EQ(rig.loader()->get(kUri).origin, ptx);
  EXPECT_EQ(rig.driver->images, std::vector<std::string>{"image:compute_80"});
}

}  // namespace
