// kiln build's result cache without nvcc or a network: the key (every input changes it, a tree at
// another path does not), the entry format (Bazel's ActionResult, read strictly), and the
// directory cache (what a lookup returns for a hit, a miss and each kind of poisoned entry; no
// temporary file left behind). The HTTP cache against nginx is in
// tests/integration/build_cache_test.cpp; builds through the cache in run_build_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "builder/build.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "project/registry.hpp"
#include "result_cache/result_cache.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;
using test::write_file;

const char* kRegistry = R"({
  "format": 1,
  "types": {"f32": "float", "f16": "__half"},
  "families": [
    {"name": "scale", "sources": ["scale.cu"], "entries": ["kiln::scale<{dtype}>"],
     "params": [{"name": "dtype", "kind": "type", "values": ["f32", "f16"]}],
     "targets": ["sm_80+"], "flags": ["-DSCALE=2"]}
  ]
})";

struct KeyRig {
  project::Registry reg = project::parse_registry(kRegistry, "kernels.json");
  builder::CompilerIdentity compiler{"13.0.88", "gcc (Debian 12.2.0-14) 12.2.0", ""};

  KeyRig() {
    for (auto& s : reg.specialisations) s.source_hash = std::string(64, 'a');
  }
  // The key of scale_dtype_f32 for `target`, planned in `source_dir`, out dir `out_dir`.
  builder::CompileKey key(const std::string& target = "sm_90", const std::string& source_dir = "/a/src",
                 const std::string& out_dir = "/a/out") const {
    builder::BuildPlan plan = builder::plan_build(reg, {*format::parse_target(target)}, {"scale_dtype_f32"}, source_dir);
    const builder::PlannedArtifact& a = plan.targets.at(0).artifacts.at(0);
    return builder::compile_key(a, *reg.find(a.uri), plan.stubs.at(a.stub), source_dir, out_dir, compiler);
  }
};

TEST(CompileKey, ChangesWhenAnyInputThatShapesTheBytesChanges) {
  KeyRig base;
  const std::string k = base.key().hex;
  ASSERT_EQ(k.size(), 64u);
  std::set<std::string> keys{k};
  auto differs = [&](const KeyRig& rig, const char* what, const std::string& target = "sm_90") {
    std::string other = rig.key(target).hex;
    EXPECT_NE(other, k) << what << " left the key unchanged";
    EXPECT_TRUE(keys.insert(other).second) << what << " gave the key of another change";
  };
  {
    KeyRig r;  // a source or header byte (the family's source hash)
    for (auto& s : r.reg.specialisations) s.source_hash = std::string(64, 'b');
    differs(r, "the source hash");
  }
  {
    KeyRig r;  // a parameter value (same URI and entries: only the parameter differs)
    const_cast<project::Specialisation*>(r.reg.find("scale_dtype_f32"))->params[0].second = "f64";
    differs(r, "a parameter");
  }
  {
    KeyRig r;  // an entry (also changes the stub)
    const_cast<project::Specialisation*>(r.reg.find("scale_dtype_f32"))->entries[0] = "kiln::other<float>";
    differs(r, "an entry");
  }
  {
    KeyRig r;  // a family flag
    r.reg.families[0].flags = {"-DSCALE=3"};
    differs(r, "a flag");
  }
  {
    KeyRig r;
    r.compiler.nvcc_version = "13.0.89";
    differs(r, "the toolkit version");
  }
  {
    KeyRig r;
    r.compiler.host_compiler = "gcc (Debian 13.1.0-1) 13.1.0";
    differs(r, "the host compiler");
  }
  {
    KeyRig r;
    r.compiler.nvcc_environment = "NVCC_APPEND_FLAGS=-DX=1\n";
    differs(r, "NVCC_APPEND_FLAGS");
  }
  differs(base, "the target", "sm_80");
  differs(base, "an arch-specific target", "sm_90a");
  EXPECT_EQ(base.key().hex, k) << "the same inputs must give the same key";
}

TEST(CompileKey, IsTheSameForTreesAtDifferentPathsUnlessAFlagEmbedsPaths) {
  KeyRig rig;
  builder::CompileKey here = rig.key("sm_90", "/home/a/src", "/home/a/out");
  builder::CompileKey there = rig.key("sm_90", "/ci/runner-7/checkout", "/tmp/build-42");
  EXPECT_EQ(here.hex, there.hex);
  for (const auto& [tag, value] : here.fields) {
    EXPECT_EQ(value.find("/home/a"), std::string::npos) << tag << ": " << value;
  }
  // -lineinfo puts the directory into the image: such results are not shared across paths.
  rig.reg.families[0].flags = {"-lineinfo"};
  EXPECT_NE(rig.key("sm_90", "/home/a/src", "/home/a/out").hex,
            rig.key("sm_90", "/ci/runner-7/checkout", "/tmp/build-42").hex);
}

// ---- the entry ----

TEST(ActionResult, RoundTripsAndSkipsFieldsKilnDoesNotWrite) {
  result_cache::CachedOutput out{"axpy_dtype_f32.fatbin", std::string(64, 'c'), 7960};
  std::string bytes = result_cache::encode_action_result(out);
  result_cache::CachedOutput back = result_cache::decode_action_result(bytes, "entry");
  EXPECT_EQ(back.name, out.name);
  EXPECT_EQ(back.sha256, out.sha256);
  EXPECT_EQ(back.size, out.size);
  // exit_code = 0 (field 4, varint) and execution_metadata (field 9, a message) as other
  // clients write them.
  std::string more = bytes + std::string("\x20\x00\x4a\x02\x08\x01", 6);
  EXPECT_EQ(result_cache::decode_action_result(more, "entry").sha256, out.sha256);
  // The wire bytes as protoc encodes this message: 0x12 (field 2, bytes), its length, ...
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x12);
}

TEST(ActionResult, RefusesWhatIsNotOneOutputWithASha256Digest) {
  result_cache::CachedOutput out{"a.fatbin", std::string(64, 'c'), 10};
  std::string good = result_cache::encode_action_result(out);
  auto refusal = [](const std::string& bytes) {
    return test::error_of(ErrorKind::Format, [&] { result_cache::decode_action_result(bytes, "ac/k"); });
  };
  EXPECT_NE(refusal(good.substr(0, good.size() - 3)).find("runs past the end"), std::string::npos);
  EXPECT_NE(refusal(good + good).find("names 2 output files, not one"), std::string::npos);
  EXPECT_NE(refusal("").find("names 0 output files"), std::string::npos);
  EXPECT_NE(refusal(std::string(11, '\xff')).find("varint"), std::string::npos);
  result_cache::CachedOutput md5{"a.fatbin", std::string(32, 'c'), 10};
  EXPECT_NE(refusal(result_cache::encode_action_result(md5)).find("not 64 lowercase hex"), std::string::npos);
  EXPECT_NE(refusal("\x0b").find("wire type 3"), std::string::npos);
}

// ---- the directory cache ----

struct DirRig {
  TempDir dir;
  fs::path root = dir / "cache";
  std::unique_ptr<result_cache::ResultCache> cache = result_cache::open_result_cache(root.string());
  const std::string key = std::string(64, '1');
  const std::string bytes = std::string("fatbin bytes \x01\x02", 15);

  fs::path entry_file() const { return root / result_cache::action_path(key); }
  fs::path blob_file() const { return root / result_cache::blob_path(io::sha256_hex(bytes)); }
  // Every file under the cache, relative to it.
  std::set<std::string> files() const {
    std::set<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(root))
      if (e.is_regular_file()) out.insert(fs::relative(e.path(), root).string());
    return out;
  }
};

TEST(DirectoryCache, StoresTheBytesThenTheEntryAndLeavesNoTemporaryFile) {
  DirRig rig;
  result_cache::CacheStore s = rig.cache->store(rig.key, "a.fatbin", rig.bytes);
  ASSERT_TRUE(s.ok) << s.reason;
  EXPECT_EQ(s.bytes_stored, rig.bytes.size() + read_file(rig.entry_file()).size());
  EXPECT_EQ(rig.files(),
            (std::set<std::string>{result_cache::action_path(rig.key), result_cache::blob_path(io::sha256_hex(rig.bytes))}));
  EXPECT_EQ(read_file(rig.blob_file()), rig.bytes);
  result_cache::CacheLookup hit = rig.cache->lookup(rig.key, "a.fatbin");
  EXPECT_EQ(hit.outcome, result_cache::CacheLookup::Outcome::Hit) << hit.reason;
  EXPECT_EQ(hit.bytes, rig.bytes);
  EXPECT_EQ(hit.bytes_fetched, s.bytes_stored);
  // Storing again replaces both files whole (rename over), still no temporary left.
  ASSERT_TRUE(rig.cache->store(rig.key, "a.fatbin", rig.bytes).ok);
  EXPECT_EQ(rig.files().size(), 2u);
}

TEST(DirectoryCache, ReadersSeeTheWholeEntryWhileOthersStoreTheSameKey) {
  // Shards on one machine share a directory: two writers store one key over and over while a
  // reader looks it up. A store renames over the old files, so every lookup is a whole hit.
  DirRig rig;
  const std::string big(256 * 1024, 'k');  // large enough that a torn write would show
  ASSERT_TRUE(rig.cache->store(rig.key, "a.fatbin", big).ok);
  std::atomic<bool> stop{false};
  std::atomic<int> stores{0};
  auto writer = [&] {
    while (!stop)
      if (rig.cache->store(rig.key, "a.fatbin", big).ok) ++stores;
  };
  {
    std::thread w1(writer), w2(writer);
    struct Join {  // also when an assertion below returns early
      std::atomic<bool>& stop;
      std::thread &a, &b;
      ~Join() {
        stop = true;
        a.join();
        b.join();
      }
    } join{stop, w1, w2};
    for (int i = 0; i < 300 || stores < 10; ++i) {
      result_cache::CacheLookup r = rig.cache->lookup(rig.key, "a.fatbin");
      ASSERT_EQ(r.outcome, result_cache::CacheLookup::Outcome::Hit) << r.reason;
      ASSERT_EQ(r.bytes, big);
    }
  }
  EXPECT_EQ(rig.files().size(), 2u) << "temporary files left behind";
}

TEST(DirectoryCache, AnUnknownKeyOrAnEntryWhoseBytesAreGoneIsAMiss) {
  DirRig rig;
  EXPECT_EQ(rig.cache->lookup(rig.key, "a.fatbin").outcome, result_cache::CacheLookup::Outcome::Miss);
  ASSERT_TRUE(rig.cache->store(rig.key, "a.fatbin", rig.bytes).ok);
  fs::remove(rig.blob_file());
  result_cache::CacheLookup r = rig.cache->lookup(rig.key, "a.fatbin");
  EXPECT_EQ(r.outcome, result_cache::CacheLookup::Outcome::Miss) << r.reason;
  EXPECT_TRUE(r.bytes.empty());
}

TEST(DirectoryCache, PoisonedEntriesAreRefusedNamingWhatIsWrong) {
  DirRig rig;
  ASSERT_TRUE(rig.cache->store(rig.key, "a.fatbin", rig.bytes).ok);
  auto refusal = [&](const std::string& name = "a.fatbin") {
    result_cache::CacheLookup r = rig.cache->lookup(rig.key, name);
    EXPECT_EQ(r.outcome, result_cache::CacheLookup::Outcome::Refused) << r.reason;
    EXPECT_TRUE(r.bytes.empty());
    return r.reason;
  };
  // Same size, one byte flipped: the digest check.
  std::string flipped = rig.bytes;
  flipped[3] ^= 1;
  write_file(rig.blob_file(), flipped);
  std::string why = refusal();
  EXPECT_NE(why.find(rig.blob_file().string() + ": sha256 is " + io::sha256_hex(flipped)),
            std::string::npos)
      << why;
  EXPECT_NE(why.find(io::sha256_hex(rig.bytes)), std::string::npos) << why;
  // Longer than the entry says: refused before it is hashed.
  write_file(rig.blob_file(), rig.bytes + "more");
  EXPECT_NE(refusal().find("more than"), std::string::npos);
  write_file(rig.blob_file(), rig.bytes.substr(1));
  EXPECT_NE(refusal().find("size is 14 bytes"), std::string::npos);
  // An entry for another output, and one that is no ActionResult.
  write_file(rig.blob_file(), rig.bytes);
  EXPECT_NE(refusal("b.fatbin").find("names output 'a.fatbin', not 'b.fatbin'"), std::string::npos);
  write_file(rig.entry_file(), "<html>not found</html>");
  EXPECT_NE(refusal().find(rig.entry_file().string() + ": not a Bazel ActionResult"),
            std::string::npos);
  write_file(rig.entry_file(), std::string(result_cache::kMaxActionResultBytes + 1, '\x12'));
  EXPECT_NE(refusal().find("more than the limit"), std::string::npos);
}

TEST(DirectoryCache, AnEntryThatCannotBeReadMakesTheCacheUnavailable) {
  DirRig rig;
  fs::create_directories(rig.entry_file());  // a directory where the entry file should be
  result_cache::CacheLookup r = rig.cache->lookup(rig.key, "a.fatbin");
  EXPECT_EQ(r.outcome, result_cache::CacheLookup::Outcome::Unavailable);
  EXPECT_NE(r.reason.find(rig.entry_file().string()), std::string::npos) << r.reason;
}

TEST(DirectoryCache, OnlyDirectoriesAndHttpUrlsAreCaches) {
  for (const char* bad : {"s3://bucket/kiln", "grpc://127.0.0.1:9092", "file:///tmp/c", ""}) {
    std::string msg = test::error_of(ErrorKind::Usage, [&] { result_cache::open_result_cache(bad); });
    EXPECT_NE(msg.find("Bazel's HTTP cache protocol"), std::string::npos) << msg;
  }
  TempDir d;
  write_file(d / "file", "x");
  std::string msg =
      test::error_of(ErrorKind::Io, [&] { result_cache::open_result_cache((d / "file").string()); });
  EXPECT_NE(msg.find((d / "file").string()), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln
