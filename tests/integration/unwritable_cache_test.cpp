// The loader keeps serving when its cache directory cannot be written (docs/loader.md, "When the
// cache cannot be written"): the mirror tier over a real HTTP server on loopback and the JIT tier
// with the real NVRTC, under a cache that is not a directory, full (RLIMIT_FSIZE: writes fail
// with EFBIG, as on a full disk or quota they fail with ENOSPC or EDQUOT) or read-only (a read-only
// bind mount in a user namespace of this test process, where the kernel allows one), with TMPDIR
// unwritable as well. Each serves the kernel from memory and warns once per process, naming the
// directory and the system's words; nothing is left in the cache. "Once per process" is what is
// tested: each test runs in a process of its own (ctest runs every gtest case alone).
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>

#include "jit/jit.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "loader_factory.hpp"
#include "misbehaving_server.hpp"
#include "plan/resolver.hpp"
#include "stand_in_driver.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"
#include "transport/http_transport.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::MisbehavingServer;
using test::TempDir;

// How the cache directory is made unwritable.
enum class Fault { NotADirectory, Full, ReadOnly };

std::string fault_name(Fault f) {
  switch (f) {
    case Fault::NotADirectory: return "NotADirectory";
    case Fault::Full: return "Full";
    case Fault::ReadOnly: return "ReadOnly";
  }
  return "?";
}

// The system's words each fault gives (strerror).
std::string system_words(Fault f) {
  switch (f) {
    case Fault::NotADirectory: return "Not a directory";
    case Fault::Full: return "File too large";
    case Fault::ReadOnly: return "Read-only file system";
  }
  return "?";
}

void write_id_map(const char* file, const std::string& line) {
  std::ofstream(file) << line;
}

// This process in a user and mount namespace of its own (uid and gid mapped to themselves), `dir`
// bound read-only over itself: writes under it fail with EROFS, as on a read-only mount, for
// root too. False where the kernel or the sandbox refuses a user namespace.
bool make_read_only(const fs::path& dir) {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
  write_id_map("/proc/self/setgroups", "deny");
  write_id_map("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1");
  write_id_map("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  if (mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0) return false;
  return mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0;
}

// Writes of regular files past `bytes` fail with EFBIG while it lives (SIGXFSZ ignored, as a
// write on a full disk fails with ENOSPC instead of killing the process).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);
    rlimit l = old_;
    l.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &l);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

// TMPDIR pointing at `dir` while it lives (set after the test's own temporary directories and
// servers exist: they need a working one), restored after.
class TmpdirAt {
 public:
  explicit TmpdirAt(const fs::path& dir) {
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    setenv("TMPDIR", dir.c_str(), 1);
  }
  ~TmpdirAt() {
    if (old_)
      setenv("TMPDIR", old_->c_str(), 1);
    else
      unsetenv("TMPDIR");
  }

 private:
  std::optional<std::string> old_;
};

// Standard error into a pipe while it lives (the loader's log; a pipe, since a file could not grow
// under the Full case's limit): text() is what was written.
class StderrCapture {
 public:
  StderrCapture() {
    if (pipe(fds_) != 0) return;
    fcntl(fds_[0], F_SETFL, O_NONBLOCK);
    fflush(stderr);
    saved_ = dup(2);
    dup2(fds_[1], 2);
  }
  ~StderrCapture() { restore(); }
  std::string text() {
    restore();
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = read(fds_[0], buf, sizeof buf)) > 0;) out.append(buf, n);
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    close(fds_[1]);
    saved_ = -1;
  }
  int fds_[2] = {-1, -1};
  int saved_ = -1;
};

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Every file under `dir` that is not an empty lock file: what a write left behind.
std::vector<std::string> written_under(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory()) continue;
    if (it->path().extension() == ".lock") continue;
    out.push_back(it->path().string());
  }
  return out;
}

class UnwritableCache : public ::testing::TestWithParam<Fault> {
 protected:
  void SetUp() override {
    transport::forget_bad_mirrors();
    test::ReleaseSpec spec;
    spec.loadable = true;
    spec.artifacts = [](const std::string& target) {
      const unsigned seed = target == "sm_90a" ? 1 : 3;
      return std::vector<test::SyntheticArtifact>{
          {"axpy_dtype_f32", test::random_bytes(20000, seed)},
          {"axpy_dtype_bf16", test::random_bytes(20000, seed + 1)}};
    };
    rel = test::write_release_dist(tmp / "release", spec, {"sm_90a", "sm_80"});
    test::write_file(tmp / "a-file", "");
    switch (GetParam()) {
      case Fault::NotADirectory:
        cache = tmp / "a-file" / "cache";  // ENOTDIR at the first directory made under it
        tmpdir = tmp / "a-file" / "tmp";
        break;
      case Fault::Full:
        cache = tmp / "cache";
        tmpdir = tmp / "tmp";
        fs::create_directories(tmpdir);
        break;
      case Fault::ReadOnly:
        cache = tmp / "ro" / "cache";
        tmpdir = tmp / "ro" / "tmp";
        fs::create_directories(cache);
        fs::create_directories(tmpdir);
        if (!make_read_only(tmp / "ro"))
          GTEST_SKIP() << "no user namespace for a read-only bind mount here; the "
                          "NotADirectory and Full cases cover the same code paths";
        break;
    }
  }

  void TearDown() override {
    // The bind gone, the temporary directory can be removed.
    if (GetParam() == Fault::ReadOnly) umount2((tmp / "ro").c_str(), MNT_DETACH);
  }

  std::unique_ptr<Loader> loader(std::shared_ptr<test::Cc90Driver> drv, bool mirror) {
    LoaderConfig cfg;
    cfg.cache_dir = cache.string();
    if (mirror) {
      cfg.mirrors = {server->url()};
      cfg.index_sha256 = rel.index_sha256;
    }
    cfg.offline = !mirror;
    cfg.disable_jit = mirror;
    cfg.use_installed_store = false;
    cfg.log_level = "warn";  // to standard error, captured by the test
    plan::LoaderDeps d;  // the real fetch over loopback HTTP, the real NVRTC
    d.driver = std::move(drv);
    return make_loader(test::reference_description(), cfg, std::move(d));
  }
  std::optional<FileSizeLimit> full() {
    std::optional<FileSizeLimit> l;
    if (GetParam() == Fault::Full) l.emplace(512);  // below an archive and a cubin
    return l;
  }

  TempDir tmp;
  test::SyntheticDist rel;
  fs::path cache, tmpdir;
  std::optional<MisbehavingServer> server;
};

TEST_P(UnwritableCache, MirrorTierServesVerifiedBytesFromMemoryAndWarnsOnce) {
  server.emplace(rel.dir, "ok");
  auto drv = std::make_shared<test::Cc90Driver>();
  auto l = loader(drv, true);
  StderrCapture err;
  {
    TmpdirAt unusable(tmpdir);  // nothing in the loader may need it either
    auto limit = full();
    const KernelHandle& a = l->get("axpy_dtype_f32");
    const KernelHandle& b = l->get("axpy_dtype_bf16");
    EXPECT_EQ(a.origin, "memory:" + server->url() + "/" + rel.archive.at("sm_90a") +
                            "/axpy_dtype_f32.fatbin");
    EXPECT_EQ(b.origin.rfind("memory:", 0), 0u) << b.origin;
  }
  ASSERT_EQ(drv->images.size(), 2u);
  EXPECT_EQ(drv->images[0], rel.artifacts.at("sm_90a").at("axpy_dtype_f32.fatbin"));
  EXPECT_EQ(drv->images[1], rel.artifacts.at("sm_90a").at("axpy_dtype_bf16.fatbin"));
  const std::string text = err.text();
  EXPECT_EQ(count(text, "[warn]"), 1u) << text;
  EXPECT_EQ(count(text, "cannot keep kernels fetched from mirrors in the cache directory"), 1u)
      << text;
  EXPECT_CONTAINS(text, cache.string());
  EXPECT_CONTAINS(text, system_words(GetParam()));
  EXPECT_EQ(written_under(cache), std::vector<std::string>{});
  EXPECT_EQ(written_under(tmpdir), std::vector<std::string>{});
}

TEST_P(UnwritableCache, JitTierCompilesWithNvrtcAndLoadsWithoutADiskEntryAndWarnsOnce) {
  auto probe = jit::make_nvrtc_compiler()->probe();
  if (!probe.available) GTEST_SKIP() << "NVRTC is not usable here: " << probe.missing;
  auto drv = std::make_shared<test::Cc90Driver>();
  auto l = loader(drv, false);
  StderrCapture err;
  {
    TmpdirAt unusable(tmpdir);  // nothing in the loader may need it either
    auto limit = full();
    EXPECT_EQ(l->get("axpy_dtype_f32").origin, "jit:memory");
    EXPECT_EQ(l->get("axpy_dtype_bf16").origin, "jit:memory");
  }
  ASSERT_EQ(drv->images.size(), 2u);
  EXPECT_EQ(drv->images[0].substr(0, 4), "\x7f" "ELF");
  const std::string text = err.text();
  // The fast-path miss warns on every JIT (as ever); the cache's one warning is said once.
  EXPECT_EQ(count(text, "cannot keep JIT-compiled kernels in the cache directory"), 1u) << text;
  EXPECT_CONTAINS(text, (cache / "jit").string());
  EXPECT_CONTAINS(text, system_words(GetParam()));
  EXPECT_EQ(written_under(cache), std::vector<std::string>{});
  EXPECT_EQ(written_under(tmpdir), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Faults, UnwritableCache,
                         ::testing::Values(Fault::NotADirectory, Fault::Full, Fault::ReadOnly),
                         [](const auto& p) { return fault_name(p.param); });

// With the cache writable and only TMPDIR unusable, nothing changes: the loader never writes
// there, so the mirror's archive lands in the cache as usual and no warning is said.
TEST(UnwritableTmpdir, MirrorTierInstallsIntoTheCacheAsUsualAndSaysNothing) {
  transport::forget_bad_mirrors();
  TempDir tmp;
  test::ReleaseSpec spec;
  spec.loadable = true;
  test::SyntheticDist rel = test::write_release_dist(tmp / "release", spec, {"sm_90a"});
  test::write_file(tmp / "a-file", "");
  MisbehavingServer server(rel.dir, "ok");
  TmpdirAt unusable(tmp / "a-file" / "tmp");
  LoaderConfig cfg;
  cfg.cache_dir = (tmp / "cache").string();
  cfg.mirrors = {server.url()};
  cfg.index_sha256 = rel.index_sha256;
  cfg.disable_jit = true;
  cfg.use_installed_store = false;
  cfg.log_file = (tmp / "loader.log").string();
  plan::LoaderDeps d;
  d.driver = std::make_shared<test::Cc90Driver>();
  auto l = make_loader(test::reference_description(), cfg, std::move(d));
  EXPECT_EQ(l->get("axpy_dtype_f32").origin,
            (tmp / "cache" / rel.stem("sm_90a") / "axpy_dtype_f32.fatbin").string());
  EXPECT_FALSE(fs::exists(tmp / "loader.log") &&
               test::read_file(tmp / "loader.log").find("cannot keep") != std::string::npos);
}

}  // namespace
}  // namespace kiln
