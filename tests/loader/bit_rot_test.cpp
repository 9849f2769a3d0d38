// Bit rot under the loader: one flipped byte, at every position, of an installed artifact, its
// manifest or the store's scan record. The loader either loads the asked URI's own verified bytes
// or refuses the candidate, naming both digests or the parse error, and the next tier (JIT) serves:
// it never hands the driver another kernel's bytes, whatever byte of the manifest is flipped.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "io/sha256.hpp"
#include "jit/jit.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"
#include "loader_factory.hpp"
#include "plan/resolver.hpp"
#include "plan/store_scanner.hpp"
#include "stand_in_driver.hpp"
#include "store/scan_record.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const std::string kUri = "axpy_dtype_f32";
const std::string kOther = "axpy_dtype_f16";  // the manifest's other kernel: never to be loaded

// The next tier: a compile whose result is pinned by its sidecar, as the NVRTC compiler's is.
class JitStandIn : public jit::JitCompiler {
 public:
  static constexpr const char* kImage = "jit-image";
  jit::JitCapability probe() override {
    jit::JitCapability c;
    c.available = true;
    c.nvrtc_major = 13;
    c.supported_archs = {80, 90};
    return c;
  }
  jit::JitResult compile(const project::Specialisation& spec, const project::Family&, int,
                         const std::string& cache_dir) override {
    jit::JitResult r;
    r.image = kImage;
    for (std::size_t i = 0; i < spec.entries.size(); ++i) r.symbols.push_back("s" + std::to_string(i));
    r.cache_path = cache_dir + "/jit/key.cubin";
    test::write_file(r.cache_path, r.image);
    nlohmann::json meta = {{"cubin_sha256", io::sha256_hex(r.image)}, {"cubin_size", r.image.size()}};
    test::write_file(cache_dir + "/jit/key.json", meta.dump());
    return r;
  }
};

enum class Kind { Artifact, Manifest, ScanRecord };

struct Rig {
  TempDir tmp;
  fs::path store = tmp / "store", cache = tmp / "cache";
  fs::path entry;
  std::string mine, other;  // the two kernels' bytes

  Rig() {
    test::ReleaseSpec rel;
    rel.loadable = true;
    mine = test::random_bytes(300, 7);
    other = test::random_bytes(300, 8);
    rel.with_artifacts({{kUri, mine}, {kOther, other}});
    entry = test::write_store_entry(store, rel, "sm_90");
    plan::forget_store_memory();
  }
  std::unique_ptr<Loader> loader(std::shared_ptr<test::Cc90Driver> drv) {
    LoaderConfig cfg;
    cfg.cache_dir = cache.string();
    cfg.artifact_path = {store.string()};
    cfg.offline = true;
    cfg.use_installed_store = false;
    plan::LoaderDeps d;
    d.driver = std::move(drv);
    d.jit = std::make_shared<JitStandIn>();
    return make_loader(test::reference_description(), cfg, std::move(d));
  }
  fs::path file(Kind k) const {
    switch (k) {
      case Kind::Artifact: return entry / (kUri + ".fatbin");
      case Kind::Manifest: return entry / "manifest.json";
      case Kind::ScanRecord:
        return store::scan_record_path(cache.string(), "kiln-kernels", store.string());
    }
    return {};
  }
};

std::string kind_name(Kind k) {
  switch (k) {
    case Kind::Artifact: return "Artifact";
    case Kind::Manifest: return "Manifest";
    case Kind::ScanRecord: return "ScanRecord";
  }
  return "?";
}

class BitRot : public ::testing::TestWithParam<Kind> {};

TEST_P(BitRot, EveryFlippedByteLoadsTheAskedKernelOrIsRefusedAndTheNextTierServes) {
  Rig rig;
  if (GetParam() == Kind::ScanRecord) {
    // A record is kept only of a store unchanged for a while (scan_record.hpp).
    std::this_thread::sleep_for(std::chrono::nanoseconds(store::kRecordSettledNs) +
                                std::chrono::milliseconds(200));
    rig.loader(std::make_shared<test::Cc90Driver>())->get(kUri);
    plan::forget_store_memory();
  }
  const fs::path damaged = rig.file(GetParam());
  ASSERT_TRUE(fs::exists(damaged)) << damaged;
  const std::string original = test::read_file(damaged);
  int from_store = 0, refused = 0;
  for (std::size_t i = 0; i < original.size(); i += test::kSweepStride) {
    std::string bytes = original;
    bytes[i] = static_cast<char>(bytes[i] ^ 0x01);
    test::write_file(damaged, bytes);
    plan::forget_store_memory();  // as a fresh process
    auto drv = std::make_shared<test::Cc90Driver>();
    auto l = rig.loader(drv);
    const KernelHandle& h = l->get(kUri);
    ASSERT_EQ(drv->images.size(), 1u) << "byte " << i;
    const std::string& loaded = drv->images[0];
    ASSERT_NE(loaded, rig.other) << "byte " << i << " of " << damaged << " loaded " << kOther;
    if (loaded == rig.mine) {
      ++from_store;
      EXPECT_EQ(h.origin, (rig.entry / (kUri + ".fatbin")).string()) << "byte " << i;
      continue;
    }
    ++refused;
    ASSERT_EQ(loaded, JitStandIn::kImage) << "byte " << i << ": bytes of no kernel loaded";
    EXPECT_EQ(h.origin.rfind("jit:", 0), 0u) << h.origin;
    if (GetParam() == Kind::Artifact) {
      // Refused naming both digests (resolve lists the same rejection get() passed over).
      Resolution r = l->resolve(kUri, 90);
      std::string reasons;
      for (const auto& c : r.rejected) reasons += c.path + ": " + c.reason + "\n";
      EXPECT_NE(reasons.find(io::sha256_hex(bytes)), std::string::npos) << reasons;
      EXPECT_NE(reasons.find(io::sha256_hex(original)), std::string::npos) << reasons;
      EXPECT_NE(reasons.find(damaged.string()), std::string::npos) << reasons;
    }
  }
  test::write_file(damaged, original);
  if (GetParam() == Kind::Artifact) {
    EXPECT_EQ(from_store, 0);  // every flip refused
  }
  if (GetParam() == Kind::ScanRecord) {
    EXPECT_EQ(refused, 0);  // a record is only a cache
  }
  EXPECT_GT(from_store + refused, 0);
}

INSTANTIATE_TEST_SUITE_P(Files, BitRot,
                         ::testing::Values(Kind::Artifact, Kind::Manifest, Kind::ScanRecord),
                         [](const auto& p) { return kind_name(p.param); });

// A flipped byte in the manifest that leaves it valid JSON but changes the asked URI's digest is
// refused naming both digests; one that breaks the JSON is refused naming the parse error.
TEST(BitRotManifest, ADigestFlippedNamesBothDigestsAndBrokenJsonNamesTheParseError) {
  Rig rig;
  const fs::path m = rig.file(Kind::Manifest);
  const std::string original = test::read_file(m);
  const std::string want = io::sha256_hex(rig.mine);
  std::string bytes = original;
  const auto at = bytes.find(want);
  ASSERT_NE(at, std::string::npos);
  bytes[at] = bytes[at] == 'a' ? 'b' : 'a';
  test::write_file(m, bytes);
  auto reasons = [&] {
    plan::forget_store_memory();
    Resolution r = rig.loader(std::make_shared<test::Cc90Driver>())->resolve(kUri, 90);
    std::string out;
    for (const auto& c : r.rejected) out += c.path + ": " + c.reason + "\n";
    return out;
  };
  std::string why = reasons();
  EXPECT_NE(why.find(want), std::string::npos) << why;
  EXPECT_NE(why.find(bytes.substr(at, 64)), std::string::npos) << why;
  // A brace gone: the parse error, naming the file.
  bytes = original;
  bytes[original.find('{')] = ' ';
  test::write_file(m, bytes);
  why = reasons();
  EXPECT_NE(why.find(m.string()), std::string::npos) << why;
}

// An unreadable store file (here a directory where the file should be: what a read of it says
// is the system's, as for EIO or EACCES) is a rejected candidate with the read's own words, and
// the next tier serves.
TEST(UnreadableStoreFile, AnArtifactOrManifestThatCannotBeReadIsRefusedWithItsReasonAndJitServes) {
  for (const std::string& which : {kUri + ".fatbin", std::string("manifest.json")}) {
    Rig rig;
    const fs::path f = rig.entry / which;
    fs::remove(f);
    fs::create_directories(f / "not-a-file");
    auto drv = std::make_shared<test::Cc90Driver>();
    auto l = rig.loader(drv);
    EXPECT_EQ(l->get(kUri).origin.rfind("jit:", 0), 0u) << which;
    ASSERT_EQ(drv->images, std::vector<std::string>{JitStandIn::kImage}) << which;
    plan::forget_store_memory();
    Resolution r = l->resolve(kUri, 90);
    std::string reasons;
    for (const auto& c : r.rejected) reasons += c.tier + " " + c.path + ": " + c.reason + "\n";
    EXPECT_NE(reasons.find(f.string()), std::string::npos) << reasons;
    ASSERT_TRUE(r.chosen) << reasons;
    EXPECT_EQ(r.chosen->tier, "jit");
  }
}

}  // namespace
}  // namespace kiln
