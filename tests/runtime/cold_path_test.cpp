// The cold path's private machinery: the phase timers the benchmark reads (cold_phases.hpp),
// the identity-keyed memory of store listings and manifests (identity_cache.hpp), the one
// process-wide driver, and the single-read file reader.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <algorithm>

#include <chrono>
#include <string>
#include <thread>

#include "format/untrusted_json.hpp"
#include "io/atomic_file.hpp"
#include "io/identity_cache.hpp"
#include "kiln/error.hpp"
#include "project/registry.hpp"
#include "runtime/cold_phases.hpp"
#include "runtime/driver.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

using std::chrono::milliseconds;
using test::TempDir;

std::uint64_t ms_ns(int ms) { return static_cast<std::uint64_t>(ms) * 1'000'000; }

TEST(ColdPhases, NestedTimerTimeIsTakenOutOfTheEnclosingPhase) {
  runtime::cold::PhaseTimes t;
  runtime::cold::set_phase_sink(&t);
  {
    runtime::cold::PhaseTimer outer(runtime::cold::Phase::Other);
    std::this_thread::sleep_for(milliseconds(5));
    {
      runtime::cold::PhaseTimer inner(runtime::cold::Phase::Hash);
      std::this_thread::sleep_for(milliseconds(60));
    }
  }
  runtime::cold::set_phase_sink(nullptr);
  EXPECT_GE(t.ns[static_cast<int>(runtime::cold::Phase::Hash)], ms_ns(60));
  EXPECT_GE(t.ns[static_cast<int>(runtime::cold::Phase::Other)], ms_ns(5));
  EXPECT_LT(t.ns[static_cast<int>(runtime::cold::Phase::Other)], ms_ns(55));  // the 60 ms are not in it
  EXPECT_EQ(t.ns[static_cast<int>(runtime::cold::Phase::Read)], 0u);
  EXPECT_EQ(t.total(),
            t.ns[static_cast<int>(runtime::cold::Phase::Hash)] + t.ns[static_cast<int>(runtime::cold::Phase::Other)]);
}

TEST(ColdPhases, WithoutASinkNothingIsRecorded) {
  runtime::cold::PhaseTimes t;
  {
    runtime::cold::PhaseTimer off(runtime::cold::Phase::Read);  // no sink: off
    std::this_thread::sleep_for(milliseconds(2));
  }
  runtime::cold::set_phase_sink(&t);
  {
    runtime::cold::PhaseTimer started(runtime::cold::Phase::Read);
    runtime::cold::set_phase_sink(nullptr);  // removed while it runs: it records nothing
  }
  EXPECT_EQ(t.total(), 0u);
  EXPECT_STREQ(runtime::cold::phase_name(runtime::cold::Phase::ManifestParse), "manifest_parse");
  EXPECT_STREQ(runtime::cold::phase_name(runtime::cold::Phase::DriverLoad), "driver_load");
}

TEST(IdentityCache, AnEntryIsSettledOnlyWhenBothTimestampsAreASecondOlderThanTheRead) {
  io::FileIdentity id;
  id.mtime_ns = 10'000'000'000;
  id.ctime_ns = 10'000'000'000;
  EXPECT_TRUE(io::settled(id, 11'000'000'000));
  EXPECT_FALSE(io::settled(id, 10'999'999'999));
  id.ctime_ns = 10'500'000'000;  // a later inode change (chmod, rename, utimensat) counts too
  EXPECT_FALSE(io::settled(id, 11'000'000'000));
}

TEST(IdentityCache, RemembersASettledValueUntilTheIdentityChangesAndForgetsUnsettledOnes) {
  io::IdentityCache<std::string> cache;
  io::FileIdentity a;
  a.ino = 7;
  a.size = 3;
  const std::int64_t later = 5 * io::kSettledNs;
  cache.put("/s/m", a, later, std::make_shared<const std::string>("one"));
  ASSERT_NE(cache.find("/s/m", a), nullptr);
  EXPECT_EQ(*cache.find("/s/m", a), "one");
  io::FileIdentity b = a;
  b.mtime_ns = 1;  // same inode and size, touched: a miss
  EXPECT_EQ(cache.find("/s/m", b), nullptr);
  io::FileIdentity fresh = a;
  fresh.ctime_ns = later;  // changed just now: not remembered, and the old value is dropped
  cache.put("/s/m", fresh, later, std::make_shared<const std::string>("two"));
  EXPECT_EQ(cache.find("/s/m", fresh), nullptr);
  EXPECT_EQ(cache.find("/s/m", a), nullptr);
}

TEST(IdentityCache, IdentityOfAFileRewrittenInPlaceWithItsOldMtimeStillDiffers) {
  TempDir tmp;
  std::string p = (tmp / "manifest.json").string();
  test::write_file(p, "{\"a\": 1}");
  struct timespec old[2] = {{1'000'000, 0}, {1'000'000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), old, 0), 0);
  auto before = io::identity_of(p);
  ASSERT_TRUE(before);
  EXPECT_EQ(before->mtime_ns, 1'000'000LL * 1'000'000'000);
  std::this_thread::sleep_for(milliseconds(20));  // beyond the kernel's timestamp granularity
  test::write_file(p, "{\"a\": 2}");              // same size
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), old, 0), 0);
  auto after = io::identity_of(p);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->mtime_ns, before->mtime_ns);
  EXPECT_EQ(after->size, before->size);
  EXPECT_FALSE(*after == *before);  // ctime moved: the remembered manifest is not reused
  EXPECT_FALSE(io::identity_of((tmp / "absent").string()));
}

// embedded_spec reads the table made at build time (registry/table_gen.cpp); embedded_registry
// parses kernels.json and hashes the sources at run time. Every URI must get the same values.
TEST(EmbeddedSpec, TheBuildTimeTableGivesEveryUriTheFullRegistrysValues) {
  // Asked first, before the full registry exists: nothing shared between the two paths.
  const project::Specialisation* axpy = kiln::test::reference_package().spec("axpy_dtype_f32");
  ASSERT_NE(axpy, nullptr);
  const project::Registry& full = kiln::test::reference_package().registry();
  std::vector<std::string> uris = kiln::test::reference_package().uris();
  ASSERT_EQ(uris.size(), full.specialisations.size());
  for (const auto& s : full.specialisations) {
    const project::Specialisation* lazy = kiln::test::reference_package().spec(s.uri);
    ASSERT_NE(lazy, nullptr) << s.uri;
    EXPECT_EQ(lazy->source_hash, s.source_hash) << s.uri;
    EXPECT_EQ(lazy->source_hash.size(), 64u) << s.uri;
    EXPECT_EQ(lazy->entries, s.entries) << s.uri;
    EXPECT_EQ(lazy->family, s.family) << s.uri;
    EXPECT_EQ(lazy->params, s.params) << s.uri;
    EXPECT_EQ(lazy->uri, s.uri);
  }
  EXPECT_TRUE(std::is_sorted(uris.begin(), uris.end()));
  EXPECT_EQ(kiln::test::reference_package().spec("axpy_dtype_f32"),
            axpy);  // stable for the process
  EXPECT_EQ(kiln::test::reference_package().spec("axpy_dtype_f99"), nullptr);
}

TEST(UntrustedJson, BuildsExactlyTheTreeNlohmannBuildsAndFailsWithItsMessage) {
  const std::string texts[] = {
      R"({"b": 1, "a": [1, -2, 3.5, 1e300, 18446744073709551615, true, false, null], "c": {}})",
      R"({"k": 1, "z": {"y": [], "x": {"w": "\u00e9\n"}}, "k": 2, "a": [[[]], {}]})",
      R"([{"uri": "u", "params": {"dtype": "f32", "block": "256"}}, "s", 0])",
      "  \"just a string\"  ",
      "-0",
      "[]"};
  for (const auto& t : texts) {
    auto fast = format::parse_untrusted_json<nlohmann::ordered_json>(t, "t.json");
    auto plain = format::parse_untrusted_json<nlohmann::json>(t, "t.json");
    EXPECT_EQ(fast, nlohmann::ordered_json::parse(t)) << t;
    EXPECT_EQ(fast.dump(), nlohmann::ordered_json::parse(t).dump()) << t;  // member order too
    EXPECT_EQ(plain, nlohmann::json::parse(t)) << t;
  }
  for (std::string bad : {R"({"a": 1,})", R"({"a": 1e999})", "[1] x", "{\"a\": tru}", ""}) {
    std::string want;
    try {
      auto unused = nlohmann::ordered_json::parse(bad);
      ADD_FAILURE() << "nlohmann accepted " << bad << unused.dump();
    } catch (const nlohmann::json::exception& e) {
      want = e.what();
    }
    ASSERT_FALSE(want.empty()) << bad;
    try {
      format::parse_untrusted_json<nlohmann::ordered_json>(bad, "bad.json");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Format) << bad;
      EXPECT_EQ(std::string(e.what()), "bad.json: not valid JSON: " + want) << bad;
    }
  }
}

TEST(CudaDriver, EveryLoaderSharesTheOneProcessWideDriver) {
  // Nothing is opened here (no init): this runs with or without libcuda.
  EXPECT_EQ(runtime::make_cuda_driver().get(), runtime::make_cuda_driver().get());
}

TEST(ReadWholeFile, ReturnsEveryByteOfEmptySmallAndMultiBufferFiles) {
  TempDir tmp;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7960}, std::size_t{200000}}) {
    std::string data(n, '\0');
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<char>(i * 131 + 7);
    auto p = tmp / ("f" + std::to_string(n));
    test::write_file(p, data);
    EXPECT_EQ(io::read_whole_file(p, 1 << 20), data) << n;
  }
}

}  // namespace
}  // namespace kiln
