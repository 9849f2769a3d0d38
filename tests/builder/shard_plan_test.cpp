// Pure parts of sharded builds and reproducible build times: the partition, the shard
// manifest round trip and every refusal of plan_merge, without nvcc or disks.
#include <gtest/gtest.h>

#include <set>

#include "builder/build.hpp"
#include "builder/shard.hpp"
#include "kiln/error.hpp"
#include "project/registry.hpp"

namespace kiln {
namespace {

const char* kRegistry = R"({
  "format": 1,
  "types": {"f32": "float", "f16": "__half"},
  "families": [
    {"name": "norm", "sources": ["norm.cu"], "entries": ["kiln::norm<{dtype}, {block}>"],
     "params": [{"name": "dtype", "kind": "type", "values": ["f32", "f16"]},
                {"name": "block", "kind": "int", "values": [128, 256]}],
     "targets": ["sm_80+"]},
    {"name": "hopper", "sources": ["hopper.cu"], "entries": ["kiln::hop"],
     "targets": ["sm_90a"]}
  ]
})";

builder::BuildPlan plan() {
  project::Registry r = project::parse_registry(kRegistry, "reg.json");
  return builder::plan_build(r, {*format::parse_target("sm_80"), *format::parse_target("sm_90a")}, {}, "/src");
}

ErrorKind kind_of(const std::function<void()>& f, std::string* msg) {
  try {
    f();
  } catch (const Error& e) {
    *msg = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no error";
  return ErrorKind::Internal;
}

TEST(BuildTime, SourceDateEpochWinsThenTheCommitThenTheFixedValue) {
  EXPECT_EQ(builder::choose_build_time(std::string("1700000000"), std::string("1600000000\n")).seconds,
            1700000000);
  auto git = builder::choose_build_time(std::nullopt, std::string("1600000000\n"));
  EXPECT_EQ(git.seconds, 1600000000);
  EXPECT_EQ(git.origin, "git commit time");
  EXPECT_EQ(builder::choose_build_time(std::nullopt, std::nullopt).seconds, builder::kFixedBuildTime);
  EXPECT_EQ(builder::choose_build_time(std::nullopt, std::string("fatal: not a git repository")).seconds,
            builder::kFixedBuildTime);
  EXPECT_EQ(builder::choose_build_time(std::string(""), std::nullopt).seconds, builder::kFixedBuildTime);
  std::string msg;
  EXPECT_EQ(kind_of([] { builder::choose_build_time(std::string("yesterday"), std::nullopt); }, &msg),
            ErrorKind::Usage);
  EXPECT_NE(msg.find("SOURCE_DATE_EPOCH='yesterday'"), std::string::npos) << msg;
}

TEST(ShardSpec, ParsesIOfNAndRefusesTheRest) {
  auto s = builder::parse_shard_spec("3/4");
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(s.count, 4);
  for (const char* bad : {"", "4", "0/4", "5/4", "1/0", "-1/2", "1/2/3", "x/2", "1/99999"}) {
    std::string msg;
    EXPECT_EQ(kind_of([&] { builder::parse_shard_spec(bad); }, &msg), ErrorKind::Usage) << bad;
    EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
  }
}

TEST(ShardPlan, EveryPieceOfWorkInExactlyOneShardAndSizesWithinOne) {
  builder::BuildPlan p = plan();  // 4 norm x 2 targets + hopper on sm_90a = 9
  std::vector<std::string> work = builder::plan_work(p);
  ASSERT_EQ(work.size(), 9u);
  EXPECT_EQ(work.front(), "sm_80/norm_dtype_f16_block_128");
  for (int n = 1; n <= 10; ++n) {
    std::multiset<std::string> seen;
    std::size_t lo = 99, hi = 0;
    for (int i = 1; i <= n; ++i) {
      builder::BuildPlan s = builder::shard_plan(p, {i, n});
      ASSERT_EQ(s.targets.size(), 2u);  // every target kept, with its skipped list
      EXPECT_EQ(s.targets[0].skipped.size(), 1u);
      auto w = builder::plan_work(s);
      seen.insert(w.begin(), w.end());
      lo = std::min(lo, w.size());
      hi = std::max(hi, w.size());
      std::set<std::string> stubs;  // one stub per URI, shared by its targets
      for (const auto& tp : s.targets)
        for (const auto& a : tp.artifacts) stubs.insert(a.stub);
      EXPECT_EQ(s.stubs.size(), stubs.size());
    }
    EXPECT_EQ(seen, std::multiset<std::string>(work.begin(), work.end())) << "N=" << n;
    EXPECT_LE(hi - lo, 1u) << "N=" << n;
  }
  // Deterministic: the same plan gives the same shard, every time.
  EXPECT_EQ(builder::plan_work(builder::shard_plan(p, {2, 3})), builder::plan_work(builder::shard_plan(plan(), {2, 3})));
}

// Shards of a two-target build, as run_build would describe them.
std::vector<builder::ShardInput> shards(int n) {
  builder::BuildPlan p = plan();
  std::vector<builder::ShardInput> out;
  for (int i = 1; i <= n; ++i) {
    builder::ShardManifest m;
    m.package = "kiln-kernels";
    m.package_version = "0.1.0";
    m.git_commit = "abc";
    m.cuda_version = "13.0";
    m.registry_sha256 = std::string(64, 'b');
    m.nvcc_version = "13.0.88";
    m.base_flags = builder::base_nvcc_flags();
    m.build_time = 315532800;
    m.provenance.source_commit = std::string(40, 'a');
    m.provenance.source_dirty = false;
    m.provenance.kiln_version = "0.1.0";
    m.provenance.toolkits = {{"nvcc", "13.0.88"}};
    m.provenance.hosts = {i == 2 ? "aarch64-linux" : "x86_64-linux"};
    m.provenance.build_time = m.build_time;
    m.provenance.build_time_origin = "fixed (no git commit)";
    m.provenance.targets = {"sm_80", "sm_90a"};
    m.shard = {i, n};
    m.work = builder::plan_work(p);
    m.work_shards = builder::plan_work_shards(p, n);
    for (const auto& tp : builder::shard_plan(p, {i, n}).targets) {
      format::Manifest t;
      t.package = "kiln-kernels";
      t.package_version = m.package_version;
      t.git_commit = m.git_commit;
      t.cuda_version = m.cuda_version;
      t.target = tp.target.str();
      t.build_time = m.build_time;
      t.skipped = tp.skipped;
      for (const auto& a : tp.artifacts) {
        format::ArtifactEntry e;
        e.uri = a.uri;
        e.family = a.family;
        e.entries = {{"kiln::hop", "_Z3hopv"}};
        e.source_hash = std::string(64, 'a');
        e.flags = {"-O3"};
        e.file = a.uri + ".fatbin";
        e.size = 1;
        e.sha256 = std::string(64, 'c');
        t.artifacts.push_back(e);
      }
      m.targets.push_back(t);
    }
    // Through the file format and back, as merge reads it.
    out.push_back({"s" + std::to_string(i), builder::parse_shard_manifest(builder::shard_to_json(m), "shard.json")});
  }
  return out;
}

TEST(PlanMerge, ShardsInAnyOrderGiveCompleteSortedManifests) {
  for (int n = 1; n <= 4; ++n) {
    auto in = shards(n);
    std::reverse(in.begin(), in.end());
    builder::MergePlan mp = builder::plan_merge(in);
    ASSERT_EQ(mp.manifests.size(), 2u);
    EXPECT_EQ(mp.manifests[0].artifacts.size(), 4u);
    EXPECT_EQ(mp.manifests[1].artifacts.size(), 5u);
    EXPECT_EQ(mp.manifests[1].artifacts[0].uri, "hopper");
    EXPECT_EQ(mp.manifests[0].skipped.size(), 1u);
    EXPECT_EQ(mp.id.name, "kiln-kernels");
    EXPECT_EQ(mp.build_time, 315532800);
  }
}

TEST(PlanMerge, RefusesDisagreeingIdentityNamingFieldShardAndBothValues) {
  struct Case {
    std::string field;
    std::function<void(builder::ShardManifest&)> edit;
    std::string want;
  };
  std::vector<Case> cases = {
      {"package_version", [](builder::ShardManifest& m) { m.package_version = "0.2.0"; }, "0.2.0 vs 0.1.0"},
      {"registry_sha256", [](builder::ShardManifest& m) { m.registry_sha256 = std::string(64, 'd'); },
       std::string(64, 'd') + " vs " + std::string(64, 'b')},
      {"toolchain.nvcc_version", [](builder::ShardManifest& m) { m.nvcc_version = "13.1.0"; },
       "13.1.0 vs 13.0.88"},
      {"toolchain.base_flags", [](builder::ShardManifest& m) { m.base_flags.push_back("-G"); }, "-G vs"},
      {"build_time", [](builder::ShardManifest& m) { m.build_time = 1; }, "1 vs 315532800"},
      {"shard count", [](builder::ShardManifest& m) { m.shard.count = 3; }, "3 vs 2"},
      {"package", [](builder::ShardManifest& m) { m.package = "other"; }, "other vs kiln-kernels"},
  };
  for (const auto& c : cases) {
    auto in = shards(2);
    c.edit(in[1].manifest);
    std::string msg;
    EXPECT_EQ(kind_of([&] { builder::plan_merge(in); }, &msg), ErrorKind::Stale) << c.field;
    EXPECT_NE(msg.find("shard s2 (2/"), std::string::npos) << msg;
    EXPECT_NE(msg.find("field '" + c.field + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
  }
}

TEST(PlanMerge, RefusesMissingDuplicatedAndForeignWork) {
  std::string msg;
  auto in = shards(3);
  in.erase(in.begin() + 1);
  EXPECT_EQ(kind_of([&] { builder::plan_merge(in); }, &msg), ErrorKind::NotFound);
  EXPECT_NE(msg.find("no shard holds sm_80/norm_dtype_f16_block_256 (shard 2/3 was not given)"),
            std::string::npos)
      << msg;

  in = shards(2);
  in.push_back(in[0]);
  in.back().origin = "copy";
  EXPECT_EQ(kind_of([&] { builder::plan_merge(in); }, &msg), ErrorKind::Format);
  EXPECT_NE(msg.find("shards s1 and copy are both shard 1/2"), std::string::npos) << msg;

  in = shards(2);
  in[1].manifest.targets[0].artifacts.push_back(in[0].manifest.targets[0].artifacts[0]);
  EXPECT_EQ(kind_of([&] { builder::plan_merge(in); }, &msg), ErrorKind::Format);
  EXPECT_NE(msg.find("sm_80/norm_dtype_f16_block_128 is held twice: by shard s1 and by shard s2"),
            std::string::npos)
      << msg;

  in = shards(2);
  in[1].manifest.targets[0].artifacts[0].uri = "stranger";
  EXPECT_EQ(kind_of([&] { builder::plan_merge(in); }, &msg), ErrorKind::Format);
  EXPECT_NE(msg.find("shard s2 holds sm_80/stranger, which is not in the build's work list"),
            std::string::npos)
      << msg;

  // A shard held back (its results missing) while its index is given: named as not holding it.
  in = shards(2);
  in[1].manifest.targets[0].artifacts.clear();
  EXPECT_EQ(kind_of([&] { builder::plan_merge(in); }, &msg), ErrorKind::NotFound);
  EXPECT_NE(msg.find("shard s2 does not hold it"), std::string::npos) << msg;
}

// The merged index says every host that built a shard, and that the tree was dirty when any
// shard's was; shards of different commits or targets are refused as any identity field is.
TEST(PlanMerge, ProvenanceListsEveryShardsHostAndIsDirtyWhenAnyShardWas) {
  auto in = shards(3);
  builder::MergePlan p = builder::plan_merge(in);
  EXPECT_EQ(p.id.provenance.hosts, (std::vector<std::string>{"aarch64-linux", "x86_64-linux"}));
  EXPECT_EQ(p.id.provenance.source_dirty, std::optional<bool>(false));
  in[2].manifest.provenance.source_dirty = true;
  EXPECT_EQ(builder::plan_merge(in).id.provenance.source_dirty, std::optional<bool>(true));
  in[2].manifest.provenance.source_commit = std::string(40, 'b');
  std::string msg;
  EXPECT_EQ(kind_of([&] { builder::plan_merge(in); }, &msg), ErrorKind::Stale);
  EXPECT_NE(msg.find("field 'provenance.source.commit'"), std::string::npos) << msg;
}

TEST(ShardManifestFormat, RefusesUnknownKindAndFormat) {
  std::string msg;
  EXPECT_EQ(kind_of([] { builder::parse_shard_manifest(R"({"kind": "kiln-index"})", "x.json"); }, &msg),
            ErrorKind::Format);
  EXPECT_NE(msg.find("x.json: field 'kind'"), std::string::npos) << msg;
  std::string text = builder::shard_to_json(shards(1)[0].manifest);
  auto at = text.find("\"format_version\": 3");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 19, "\"format_version\": 2");  // a shard of the kiln before work_shards
  EXPECT_EQ(kind_of([&] { builder::parse_shard_manifest(text, "y.json"); }, &msg), ErrorKind::Stale);
}

}  // namespace
}  // namespace kiln
