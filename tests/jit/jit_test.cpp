#include "jit/jit.hpp"

#include "io/file_lock.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>

#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "project/registry.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;
using test::write_file;

// Re-run as a child by ProbeWithoutBuiltinsNamesThemAndTheTestCompile: print the probe, exit
// before any test runs.
[[maybe_unused]] const bool kProbeChild = [] {
  if (!std::getenv("KILN_JIT_TEST_PROBE_CHILD")) return false;
  jit::NvrtcConfig config;  // KILN_NVRTC_LIBRARY, through the one table, as the Loader passes it
  config.library = kiln::LoaderConfig::from_env().nvrtc_library;
  jit::JitCapability cap = jit::NvrtcCompiler(config).probe();
  std::printf("available=%d\nmissing=%s\n", cap.available ? 1 : 0, cap.missing.c_str());
  std::fflush(stdout);
  std::_Exit(0);
}();

const char* kRegistry = R"({
  "format": 1,
  "types": {"f32": "float", "f16": "__half"},
  "families": [
    {"name": "tiny", "sources": ["tiny.cu"], "entries": ["kiln::tiny_scale<{dtype}>"],
     "params": [{"name": "dtype", "kind": "type", "values": ["f32", "f16"]}],
     "targets": ["sm_80+"], "flags": ["-DTINY_FACTOR=3"]},
    {"name": "broken", "sources": ["broken.cu"], "entries": ["kiln::broken_kernel"],
     "targets": ["sm_80+"]},
    {"name": "hopperish", "sources": ["tiny.cu"], "entries": ["kiln::tiny_scale<float>"],
     "targets": ["sm_90a"]}
  ]
})";

const char* kTinyCu = R"(#include "helpers.cuh"
namespace kiln {
template <typename T>
__global__ void tiny_scale(T* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = scale_value(x[i]);
}
}  // namespace kiln
)";

const char* kHelpersCuh = R"(#pragma once
#include <cuda_fp16.h>
#ifndef TINY_FACTOR
#define TINY_FACTOR 2
#endif
namespace kiln {
__device__ inline float scale_value(float v) { return v * TINY_FACTOR; }
__device__ inline __half scale_value(__half v) { return __float2half(__half2float(v) * TINY_FACTOR); }
}  // namespace kiln
)";

const char* kBrokenCu = R"(namespace kiln {
__global__ void broken_kernel() { kiln_undeclared_thing = 1; }
}  // namespace kiln
)";

class Jit : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(src_ / "kernels/tiny.cu", kTinyCu);
    write_file(src_ / "kernels/helpers.cuh", kHelpersCuh);
    write_file(src_ / "kernels/broken.cu", kBrokenCu);
    tree_ = std::make_shared<project::DiskSourceTree>((src_ / "kernels").string());
    reg_ = project::parse_registry(kRegistry, "test-registry.json");
    project::compute_source_hashes(reg_, *tree_);
  }

  jit::NvrtcConfig config() {
    jit::NvrtcConfig c;
    c.sources = tree_;
    c.log = [this](jit::JitLogLevel, const std::string& line) { log_ += line + "\n"; };
    return c;
  }
  const project::Specialisation& spec(const std::string& uri) {
    const project::Specialisation* s = reg_.find(uri);
    EXPECT_NE(s, nullptr) << uri;
    return *s;
  }
  const project::Family& family(const std::string& uri) { return *reg_.family(spec(uri).family); }
  jit::JitResult compile(jit::NvrtcCompiler& c, const std::string& uri, int cc = 90) {
    return c.compile(spec(uri), family(uri), cc, cache_.path().string());
  }
  std::string cache_file(const jit::JitResult& r, const std::string& ext) {
    return fs::path(r.cache_path).replace_extension(ext).string();
  }

  TempDir src_, cache_;
  std::shared_ptr<project::DiskSourceTree> tree_;
  project::Registry reg_;
  std::string log_;
};

unsigned elf_sm(const std::string& image) {
  std::uint32_t flags = 0;
  std::memcpy(&flags, image.data() + 48, 4);  // e_flags of an ELF64 header
  return (flags >> 8) & 0xff;
}

TEST_F(Jit, ProbeReportsNvrtc13AvailableWithItsArchList) {
  jit::JitCapability cap = jit::NvrtcCompiler(config()).probe();
  ASSERT_TRUE(cap.available) << cap.missing;
  EXPECT_EQ(cap.missing, "");
  EXPECT_EQ(cap.nvrtc_major, 13);
  EXPECT_TRUE(cap.supports(80));
  EXPECT_TRUE(cap.supports(90));
  EXPECT_FALSE(cap.supports(70)) << "Volta is gone from CUDA 13";
  EXPECT_TRUE(fs::exists(cap.library_path)) << cap.library_path;
  EXPECT_TRUE(fs::exists(fs::path(cap.include_dir) / "cuda_fp16.h")) << cap.include_dir;
}

TEST_F(Jit, ProbeWithMissingLibraryIsUnavailableNamingTheLibrary) {
  TempDir dir;
  jit::NvrtcConfig c = config();
  c.library = (dir / "libnvrtc.so.13").string();
  jit::JitCapability cap = jit::NvrtcCompiler(c).probe();
  EXPECT_FALSE(cap.available);
  EXPECT_NE(cap.missing.find(c.library), std::string::npos) << cap.missing;
  EXPECT_NE(cap.missing.find("dlopen"), std::string::npos) << cap.missing;

  try {
    jit::NvrtcCompiler(c).compile(spec("tiny_dtype_f32"), family("tiny_dtype_f32"), 90,
                             cache_.path().string());
    FAIL() << "compiled without NVRTC";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("tiny_dtype_f32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.library), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(cache_ / "jit")) << "nothing written when JIT is unavailable";
}

TEST_F(Jit, ProbeWithoutBuiltinsNamesThemAndTheTestCompile) {
  // NVRTC finds libnvrtc-builtins through the loader's search (here: ld.so.cache), so the child
  // runs under ld.so --inhibit-cache with no LD_LIBRARY_PATH and NVRTC linked from a directory
  // that holds no builtins.
  const char* ldso = "/lib64/ld-linux-x86-64.so.2";
  if (!fs::exists(ldso)) GTEST_SKIP() << "no " << ldso << " to run the child with";
  jit::JitCapability real = jit::NvrtcCompiler(config()).probe();
  ASSERT_TRUE(real.available) << real.missing;
  TempDir dir;
  fs::create_symlink(real.library_path, dir / "libnvrtc.so.13");
  std::string self = fs::read_symlink("/proc/self/exe").string();
  auto r = test::run("env -u LD_LIBRARY_PATH KILN_JIT_TEST_PROBE_CHILD=1 KILN_NVRTC_LIBRARY=" +
                     (dir / "libnvrtc.so.13").string() + " " + ldso + " --inhibit-cache " + self);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  if (r.out.find("available=1") != std::string::npos)
    GTEST_SKIP() << "libnvrtc-builtins is in a default library directory; cannot hide it";
  EXPECT_NE(r.out.find("available=0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libnvrtc-builtins.so.13"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("test compile"), std::string::npos) << r.out;
}

TEST_F(Jit, CompilesSpecToCubinForTheExactArchWithMangledSymbols) {
  jit::NvrtcCompiler c(config());
  jit::JitResult r = compile(c, "tiny_dtype_f16", 90);
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(c.compiles(), 1);
  ASSERT_GT(r.image.size(), 64u);
  EXPECT_EQ(r.image.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(elf_sm(r.image), 90u);
  ASSERT_EQ(r.symbols.size(), 1u);
  EXPECT_EQ(r.symbols[0].rfind("_Z", 0), 0u) << r.symbols[0];
  EXPECT_NE(r.symbols[0].find("tiny_scale"), std::string::npos) << r.symbols[0];
  EXPECT_NE(r.image.find(r.symbols[0]), std::string::npos) << "the symbol is in the cubin";

  // On disk: the cubin and a json that pins its digest and lists the symbols.
  EXPECT_EQ(fs::path(r.cache_path).parent_path(), cache_.path() / "jit");
  EXPECT_EQ(read_file(r.cache_path), r.image);
  auto meta = nlohmann::json::parse(read_file(cache_file(r, ".json")));
  EXPECT_EQ(meta["uri"], "tiny_dtype_f16");
  EXPECT_EQ(meta["arch"], "sm_90");
  EXPECT_EQ(meta["cubin_sha256"], io::sha256_hex(r.image));
  EXPECT_EQ(meta["symbols"], nlohmann::json(r.symbols));
  for (const auto& e : fs::directory_iterator(cache_ / "jit"))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

TEST_F(Jit, ArchSpecificFamilyCompilesForItsAVariant) {
  jit::NvrtcCompiler c(config());
  jit::JitResult r = compile(c, "hopperish", 90);
  auto meta = nlohmann::json::parse(read_file(cache_file(r, ".json")));
  EXPECT_EQ(meta["arch"], "sm_90a");
  try {
    compile(c, "hopperish", 80);
    FAIL() << "sm_90a family compiled for sm_80";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("sm_80"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sm_90a"), std::string::npos) << e.what();
  }
}

TEST_F(Jit, SecondCompileIsServedFromDiskCacheWithoutCallingNvrtc) {
  jit::NvrtcCompiler first(config());
  jit::JitResult a = compile(first, "tiny_dtype_f32");
  jit::NvrtcCompiler second(config());  // as another process would: nothing in memory
  jit::JitResult b = compile(second, "tiny_dtype_f32");
  EXPECT_TRUE(b.from_cache);
  EXPECT_EQ(second.compiles(), 0);
  EXPECT_EQ(b.image, a.image);
  EXPECT_EQ(b.symbols, a.symbols);
  EXPECT_EQ(b.cache_path, a.cache_path);
}

TEST_F(Jit, DifferentArchsAndSpecsGetDifferentCacheEntries) {
  jit::NvrtcCompiler c(config());
  jit::JitResult a = compile(c, "tiny_dtype_f32", 80);
  jit::JitResult b = compile(c, "tiny_dtype_f32", 90);
  jit::JitResult d = compile(c, "tiny_dtype_f16", 90);
  EXPECT_EQ(c.compiles(), 3);
  EXPECT_NE(a.cache_path, b.cache_path);
  EXPECT_NE(b.cache_path, d.cache_path);
  EXPECT_EQ(elf_sm(a.image), 80u);
  EXPECT_NE(a.symbols[0], d.symbols[0]);
}

TEST_F(Jit, ChangedSourceMissesTheCache) {
  jit::NvrtcCompiler c(config());
  jit::JitResult a = compile(c, "tiny_dtype_f32");
  write_file(src_ / "kernels/helpers.cuh", std::string(kHelpersCuh) + "// edited\n");
  project::compute_source_hashes(reg_, *tree_);
  jit::JitResult b = compile(c, "tiny_dtype_f32");
  EXPECT_FALSE(b.from_cache);
  EXPECT_NE(a.cache_path, b.cache_path);
}

TEST_F(Jit, CorruptCachedCubinIsDetectedRemovedAndRecompiled) {
  jit::NvrtcCompiler c(config());
  jit::JitResult good = compile(c, "tiny_dtype_f32");
  std::string bytes = read_file(good.cache_path);
  bytes[bytes.size() / 2] ^= 0x5a;  // same size: only the digest can tell
  write_file(good.cache_path, bytes);

  jit::NvrtcCompiler again(config());
  jit::JitResult r = compile(again, "tiny_dtype_f32");
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(again.compiles(), 1);
  EXPECT_EQ(r.image, good.image);
  EXPECT_EQ(read_file(r.cache_path), good.image);
  EXPECT_NE(log_.find("unusable"), std::string::npos) << log_;
  EXPECT_NE(log_.find("sha256"), std::string::npos) << log_;
  EXPECT_NE(log_.find(cache_file(good, ".json")), std::string::npos) << log_;
}

TEST_F(Jit, CompileErrorIsCompileKindWithLogUriAndArchAndLeavesNoEntry) {
  jit::NvrtcCompiler c(config());
  try {
    compile(c, "broken", 90);
    FAIL() << "broken kernel compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Compile);
    std::string m = e.what();
    EXPECT_NE(m.find("broken"), std::string::npos) << m;
    EXPECT_NE(m.find("sm_90"), std::string::npos) << m;
    EXPECT_NE(m.find("kiln_undeclared_thing"), std::string::npos) << "NVRTC's log: " << m;
  }
  for (const auto& e : fs::directory_iterator(cache_ / "jit"))
    EXPECT_EQ(e.path().extension(), ".lock") << e.path();
}

TEST_F(Jit, ArchNvrtcCannotBuildIsUnsupportedNamingIt) {
  jit::NvrtcCompiler c(config());
  try {
    compile(c, "tiny_dtype_f32", 85);
    FAIL() << "compiled for sm_85";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("sm_85"), std::string::npos) << e.what();
  }
}

TEST_F(Jit, MissingSourceIsNotFoundNamingFileAndTree) {
  project::Family fam = family("tiny_dtype_f32");
  fam.sources = {"gone.cu"};
  fam.hashed_files.clear();
  jit::NvrtcCompiler c(config());
  try {
    c.compile(spec("tiny_dtype_f32"), fam, 90, cache_.path().string());
    FAIL() << "compiled a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    EXPECT_NE(std::string(e.what()).find("gone.cu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(tree_->describe()), std::string::npos) << e.what();
  }
}

TEST_F(Jit, TwoProcessesCompilingOneKeyAtOnceCompileOnce) {
  ASSERT_TRUE(jit::NvrtcCompiler(config()).probe().available);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t kids[2];
  for (pid_t& kid : kids) {
    kid = fork();
    ASSERT_GE(kid, 0);
    if (kid == 0) {
      close(go[1]);
      char c;
      if (read(go[0], &c, 1) < 0) _exit(90);  // EOF: the parent let both go at once
      try {
        jit::NvrtcConfig cfg = config();
        cfg.log = nullptr;
        jit::NvrtcCompiler compiler(cfg);
        jit::JitResult r = compile(compiler, "tiny_dtype_f16");
        bool ok = r.image.substr(0, 4) ==
                      "\x7f"
                      "ELF" &&
                  r.symbols.size() == 1;
        _exit(ok ? compiler.compiles() : 91);
      } catch (...) {
        _exit(92);
      }
    }
  }
  close(go[0]);
  close(go[1]);
  int total = 0;
  for (pid_t kid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(kid, &status, 0), kid);
    ASSERT_TRUE(WIFEXITED(status));
    int code = WEXITSTATUS(status);
    ASSERT_LE(code, 1) << "child failed with " << code;
    total += code;
  }
  EXPECT_EQ(total, 1);
  jit::NvrtcCompiler after(config());
  EXPECT_TRUE(compile(after, "tiny_dtype_f16").from_cache);
}

TEST_F(Jit, CompileWaitsForTheKeyLockThenUsesTheHoldersResult) {
  // Learn the key (it does not depend on the cache directory) and the entry's bytes.
  TempDir elsewhere;
  jit::NvrtcCompiler c(config());
  jit::JitResult made =
      c.compile(spec("tiny_dtype_f32"), family("tiny_dtype_f32"), 90, elsewhere.path().string());
  std::string key = fs::path(made.cache_path).stem().string();
  fs::create_directories(cache_ / "jit");
  write_file(cache_ / ("jit/" + key + ".cubin.tmp.deadbeef"), "left by a crashed writer");

  // Another process holds the key's lock while it "compiles".
  io::FileLock held = io::FileLock::acquire(cache_ / ("jit/" + key + ".lock"), std::chrono::seconds(1));
  jit::NvrtcCompiler waiter(config());
  std::future<jit::JitResult> pending =
      std::async(std::launch::async, [&] { return compile(waiter, "tiny_dtype_f32"); });
  EXPECT_EQ(pending.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "compile did not wait for the lock";
  fs::copy_file(made.cache_path, cache_ / ("jit/" + key + ".cubin"));
  fs::copy_file(cache_file(made, ".json"), cache_ / ("jit/" + key + ".json"));
  held.release();
  jit::JitResult r = pending.get();
  EXPECT_TRUE(r.from_cache);
  EXPECT_EQ(waiter.compiles(), 0);
  EXPECT_EQ(r.image, made.image);
  EXPECT_TRUE(fs::exists(cache_ / ("jit/" + key + ".cubin.tmp.deadbeef")))
      << "a hit under the lock touches nothing";

  // A compile that must write sweeps the key's orphaned temporaries.
  fs::remove(cache_ / ("jit/" + key + ".json"));
  jit::JitResult fresh = compile(waiter, "tiny_dtype_f32");
  EXPECT_FALSE(fresh.from_cache);
  EXPECT_FALSE(fs::exists(cache_ / ("jit/" + key + ".cubin.tmp.deadbeef")));
}

TEST_F(Jit, LockHeldPastTheTimeoutIsIoErrorNamingTheLock) {
  TempDir elsewhere;
  jit::NvrtcCompiler c(config());
  jit::JitResult made =
      c.compile(spec("tiny_dtype_f32"), family("tiny_dtype_f32"), 90, elsewhere.path().string());
  fs::path lock_path = cache_ / ("jit/" + fs::path(made.cache_path).stem().string() + ".lock");
  fs::create_directories(lock_path.parent_path());
  io::FileLock held = io::FileLock::acquire(lock_path, std::chrono::seconds(1));
  jit::NvrtcConfig cfg = config();
  cfg.lock_timeout = std::chrono::milliseconds(200);
  jit::NvrtcCompiler impatient(cfg);
  try {
    compile(impatient, "tiny_dtype_f32");
    FAIL() << "compiled while another holder had the lock";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find(lock_path.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(impatient.compiles(), 0);
}

TEST_F(Jit, EmbeddedKernelSourcesCompileThroughTheDefaultCompiler) {
  // The loader's configuration: the package's sources and registry, NVRTC found by name.
  const project::Registry& reg = kiln::test::reference_package().registry();
  jit::NvrtcConfig config;
  config.sources = kiln::test::reference_package().sources();
  auto compiler = jit::make_nvrtc_compiler(config);
  for (const char* uri : {"axpy_dtype_bf16", "hopper_wgmma_bn_64"}) {
    const project::Specialisation* s = reg.find(uri);
    ASSERT_NE(s, nullptr) << uri;
    jit::JitResult r = compiler->compile(*s, *reg.family(s->family), 90, cache_.path().string());
    EXPECT_EQ(r.image.substr(0, 4),
              "\x7f"
              "ELF")
        << uri;
    EXPECT_EQ(r.symbols.size(), s->entries.size()) << uri;
  }
}

// A cache that cannot be written costs the disk entry, not the kernel (docs/loader.md, "When the
// cache cannot be written"): NVRTC's result comes back from memory with the reason.
TEST_F(Jit, CacheUnderAFileCompilesInMemoryNamingThePathAndTheSystemsWords) {
  write_file(cache_ / "a-file", "");
  const fs::path cache = cache_ / "a-file" / "cache";
  jit::NvrtcCompiler c(config());
  jit::JitResult r =
      c.compile(spec("tiny_dtype_f32"), family("tiny_dtype_f32"), 90, cache.string());
  EXPECT_EQ(r.image.substr(0, 4), "\x7f" "ELF");
  ASSERT_EQ(r.symbols.size(), 1u);
  EXPECT_TRUE(r.cache_path.empty()) << r.cache_path;
  EXPECT_FALSE(r.from_cache);
  EXPECT_NE(r.not_kept.find((cache / "jit").string()), std::string::npos) << r.not_kept;
  EXPECT_NE(r.not_kept.find("Not a directory"), std::string::npos) << r.not_kept;
  EXPECT_EQ(c.compiles(), 1);
  EXPECT_EQ(read_file(cache_ / "a-file"), "");
}

TEST_F(Jit, FullCacheLeavesNoEntryNorTemporaryAndTheResultComesFromMemory) {
  jit::NvrtcCompiler c(config());
  jit::JitResult kept = [&] {
    TempDir other;  // the same compile where the disk takes it: the bytes to compare with
    return c.compile(spec("tiny_dtype_f16"), family("tiny_dtype_f16"), 90, other.path().string());
  }();
  jit::JitResult r;
  {
    rlimit old{};
    getrlimit(RLIMIT_FSIZE, &old);
    auto old_handler = signal(SIGXFSZ, SIG_IGN);  // EFBIG, as a full disk gives ENOSPC
    rlimit l = old;
    l.rlim_cur = 512;
    setrlimit(RLIMIT_FSIZE, &l);
    r = compile(c, "tiny_dtype_f16");
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
  }
  EXPECT_EQ(r.image, kept.image);
  EXPECT_EQ(r.symbols, kept.symbols);
  EXPECT_NE(r.not_kept.find("File too large"), std::string::npos) << r.not_kept;
  EXPECT_NE(r.not_kept.find((cache_ / "jit").string()), std::string::npos) << r.not_kept;
  for (const auto& e : fs::directory_iterator(cache_ / "jit"))
    EXPECT_EQ(e.path().extension(), ".lock") << "left behind: " << e.path();
  // The fault gone, the next compile keeps its entry as ever.
  jit::JitResult again = compile(c, "tiny_dtype_f16");
  EXPECT_TRUE(again.not_kept.empty()) << again.not_kept;
  EXPECT_EQ(read_file(again.cache_path), kept.image);
}

TEST(JitKey, EveryInputChangesTheKey) {
  jit::JitKeyInputs base;
  base.uri = "axpy_dtype_f32";
  base.source_hash = std::string(64, 'a');
  base.source_bytes_sha256 = std::string(64, 'b');
  base.nvrtc_major = 13;
  base.nvrtc_minor = 0;
  base.options = {"--gpu-architecture=sm_90", "-std=c++17"};
  base.arch = 90;
  const std::string k = jit::jit_cache_key(base);
  EXPECT_EQ(k, jit::jit_cache_key(base));
  EXPECT_TRUE(io::is_sha256_hex(k));
  std::vector<jit::JitKeyInputs> variants(7, base);
  variants[0].uri = "axpy_dtype_f16";
  variants[1].source_hash = std::string(64, 'c');
  variants[2].source_bytes_sha256 = std::string(64, 'c');
  variants[3].nvrtc_minor = 1;
  variants[4].options.push_back("-DX=1");
  variants[5].arch = 80;
  variants[6].options = {"--gpu-architecture=sm_90-std=c++17"};  // fields never run together
  for (const auto& v : variants) EXPECT_NE(jit::jit_cache_key(v), k);
}

TEST(JitKey, TargetIsThePlainArchUnlessOnlyTheAVariantIsDeclared) {
  project::Family plain, only_a;
  plain.targets = {*format::parse_target_rule("sm_80+")};
  only_a.targets = {*format::parse_target_rule("sm_90a")};
  EXPECT_EQ(jit::jit_target(plain, 90)->str(), "sm_90");
  EXPECT_EQ(jit::jit_target(only_a, 90)->str(), "sm_90a");
  EXPECT_FALSE(jit::jit_target(only_a, 100).has_value());
  EXPECT_FALSE(jit::jit_target(plain, 75).has_value());
  EXPECT_EQ(
      jit::nvrtc_options(plain, *jit::jit_target(plain, 90), "/cuda/include"),
      (std::vector<std::string>{"--gpu-architecture=sm_90", "-std=c++17", "-I/cuda/include"}));
}

}  // namespace
}  // namespace kiln
