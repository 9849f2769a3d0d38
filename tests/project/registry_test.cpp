#include "project/registry.hpp"

#include <gtest/gtest.h>

#include <set>

#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kernel_project.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

using test::TempDir;
using test::write_file;

const char* kTwoFamilies = test::kTwoFamilyRegistry;

std::string expect_format_error(const std::string& text) {
  try {
    project::parse_registry(text, "reg.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    return e.what();
  }
  ADD_FAILURE() << "no error for: " << text;
  return "";
}

TEST(Registry, ExpandsCartesianProductWithUrisInParameterOrder) {
  project::Registry r = project::parse_registry(kTwoFamilies, "reg.json");
  ASSERT_EQ(r.specialisations.size(), 5u);
  std::vector<std::string> uris;
  for (auto& s : r.specialisations) uris.push_back(s.uri);
  EXPECT_EQ(uris, (std::vector<std::string>{"hopper", "norm_dtype_f16_block_128",
                                            "norm_dtype_f16_block_256", "norm_dtype_f32_block_128",
                                            "norm_dtype_f32_block_256"}));
  const project::Specialisation* s = r.find("norm_dtype_f16_block_256");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->entries, std::vector<std::string>{"kiln::norm<__half, 256>"});
  EXPECT_EQ(s->params[0], (std::pair<std::string, std::string>{"dtype", "f16"}));
  EXPECT_EQ(r.find("norm_dtype_f64_block_256"), nullptr);
}

TEST(Registry, SameInputGivesSameUrisAndJsonBytes) {
  project::Registry a = project::parse_registry(kTwoFamilies, "a.json");
  project::Registry b = project::parse_registry(kTwoFamilies, "b.json");
  EXPECT_EQ(project::registry_to_json(a), project::registry_to_json(b));
}

TEST(Registry, TargetRulesAdmitOnlyWhatTheyName) {
  project::Registry r = project::parse_registry(kTwoFamilies, "reg.json");
  const project::Family* hop = r.family("hopper");
  const project::Family* norm = r.family("norm");
  EXPECT_TRUE(format::rule_allows(hop->targets, *format::parse_target("sm_90a")));
  EXPECT_FALSE(format::rule_allows(hop->targets, *format::parse_target("sm_90")));
  EXPECT_FALSE(format::rule_allows(hop->targets, *format::parse_target("sm_80")));
  EXPECT_TRUE(format::rule_allows(norm->targets, *format::parse_target("sm_80")));
  EXPECT_TRUE(format::rule_allows(norm->targets, *format::parse_target("compute_90")));
  EXPECT_FALSE(format::rule_allows(norm->targets, *format::parse_target("sm_75")));
}

TEST(Registry, ErrorsNameFileFamilyAndField) {
  std::string m = expect_format_error(R"({"format":1,"types":{},"families":[
      {"name":"a","sources":["a.cu"],"entries":["k<{dtype}>"],"targets":["sm_80+"]}]})");
  EXPECT_NE(m.find("reg.json"), std::string::npos) << m;
  EXPECT_NE(m.find("family 'a'"), std::string::npos) << m;
  EXPECT_NE(m.find("entries[0]"), std::string::npos) << m;
  EXPECT_NE(m.find("{dtype}"), std::string::npos) << m;

  m = expect_format_error(R"({"format":1,"types":{},"families":[
      {"name":"a","sources":["a.cu"],"entries":["k"],"targets":["sm_8O+"]}]})");
  EXPECT_NE(m.find("field 'targets'"), std::string::npos) << m;
  EXPECT_NE(m.find("sm_8O+"), std::string::npos) << m;

  m = expect_format_error(R"({"format":1,"types":{"f32":"float"},"families":[
      {"name":"a","sources":["a.cu"],"entries":["k"],"targets":["sm_80+"],
       "params":[{"name":"dtype","kind":"type","values":["f32","f64"]}]}]})");
  EXPECT_NE(m.find("params[0].values[1]"), std::string::npos) << m;
  EXPECT_NE(m.find("'f64'"), std::string::npos) << m;

  m = expect_format_error(R"({"format":1,"types":{},"families":[
      {"name":"a","sources":["a.cu"],"entries":["k"],"targets":["sm_80+"],"flagz":[]}]})");
  EXPECT_NE(m.find("field 'flagz'"), std::string::npos) << m;

  m = expect_format_error(R"({"format":1,"types":{},"families":[
      {"name":"a","sources":["a.cu"],"entries":["k"],"targets":["sm_80+"],"flags":["-arch=sm_80"]}]})");
  EXPECT_NE(m.find("-arch=sm_80"), std::string::npos) << m;

  m = expect_format_error(R"({"format":1,"types":{},"families":[
      {"name":"a","sources":["../a.cu"],"entries":["k"],"targets":["sm_80+"]}]})");
  EXPECT_NE(m.find("inside kernels/"), std::string::npos) << m;

  m = expect_format_error(R"({"format":1,"types":{},"families":[
      {"name":"a","sources":["a.cu"],"entries":["k"],"targets":["sm_80+"]},
      {"name":"a","sources":["b.cu"],"entries":["k"],"targets":["sm_80+"]}]})");
  EXPECT_NE(m.find("declared twice"), std::string::npos) << m;

  m = expect_format_error(R"({"format":1,"types":{},"families":[
      {"name":"a","sources":["a.cu"],"entries":["k"]}]})");
  EXPECT_NE(m.find("field 'targets': missing"), std::string::npos) << m;

  m = expect_format_error("{\"format\":1,");
  EXPECT_NE(m.find("not valid JSON"), std::string::npos) << m;
}

TEST(Registry, FormatVersionTooOldAndTooNewAreDistinct) {
  std::string old_m = expect_format_error(R"({"format":0,"types":{},"families":[]})");
  std::string new_m = expect_format_error(R"({"format":2,"types":{},"families":[]})");
  EXPECT_NE(old_m.find("too old"), std::string::npos) << old_m;
  EXPECT_NE(new_m.find("too new"), std::string::npos) << new_m;
}

TEST(Registry, UriCollisionBetweenFamiliesIsRejected) {
  std::string m = expect_format_error(R"({"format":1,"types":{},"families":[
      {"name":"a_x","sources":["a.cu"],"entries":["k"],"targets":["sm_80+"]},
      {"name":"a","sources":["b.cu"],"entries":["k"],"targets":["sm_80+"],
       "params":[{"name":"x","kind":"str","values":["q"]}]},
      {"name":"a_x_q","sources":["c.cu"],"entries":["k"],"targets":["sm_80+"]}]})");
  EXPECT_NE(m.find("a_x_q"), std::string::npos) << m;
}

class SourceHashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir_ / "common.cuh", "// common\n");
    write_file(dir_ / "only_norm.cuh", "#include \"common.cuh\"\n");
    write_file(dir_ / "norm.cu", "#include \"only_norm.cuh\"\n#include <cuda_fp16.h>\nnorm\n");
    write_file(dir_ / "hopper.cu", "#include \"common.cuh\"\nhopper\n");
  }
  std::map<std::string, std::string> hashes() {
    project::Registry r = project::parse_registry(kTwoFamilies, "reg.json");
    project::compute_source_hashes(r, project::DiskSourceTree(dir_.path().string()));
    std::map<std::string, std::string> out;
    for (auto& f : r.families) out[f.name] = f.source_hash;
    return out;
  }
  TempDir dir_;
};

TEST_F(SourceHashTest, CoversTransitiveIncludesAndNothingElse) {
  project::Registry r = project::parse_registry(kTwoFamilies, "reg.json");
  project::compute_source_hashes(r, project::DiskSourceTree(dir_.path().string()));
  EXPECT_EQ(r.family("norm")->hashed_files,
            (std::vector<std::string>{"common.cuh", "norm.cu", "only_norm.cuh"}));
  EXPECT_EQ(r.family("hopper")->hashed_files,
            (std::vector<std::string>{"common.cuh", "hopper.cu"}));
  EXPECT_EQ(r.find("norm_dtype_f32_block_128")->source_hash, r.family("norm")->source_hash);
  EXPECT_TRUE(io::is_sha256_hex(r.family("norm")->source_hash));
}

TEST_F(SourceHashTest, TouchingAHeaderChangesExactlyTheFamiliesIncludingIt) {
  auto before = hashes();
  EXPECT_EQ(hashes(), before);  // deterministic
  write_file(dir_ / "only_norm.cuh", "#include \"common.cuh\"\n// edited\n");
  auto after = hashes();
  EXPECT_NE(after["norm"], before["norm"]);
  EXPECT_EQ(after["hopper"], before["hopper"]);
  write_file(dir_ / "common.cuh", "// common, edited\n");
  auto after2 = hashes();
  EXPECT_NE(after2["norm"], after["norm"]);
  EXPECT_NE(after2["hopper"], after["hopper"]);
}

TEST_F(SourceHashTest, MissingSourceIsNamedWithTheFamily) {
  std::filesystem::remove(dir_ / "hopper.cu");
  project::Registry r = project::parse_registry(kTwoFamilies, "reg.json");
  try {
    project::compute_source_hashes(r, project::DiskSourceTree(dir_.path().string()));
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("family 'hopper'"), std::string::npos) << m;
    EXPECT_NE(m.find("'hopper.cu'"), std::string::npos) << m;
  }
}

TEST(Registry, QuotedIncludesIgnoresAngleIncludesAndComments) {
  EXPECT_EQ(project::quoted_includes("#include \"a.cuh\"\n  #  include \"b/c.cuh\"\n#include <x.h>\n"
                            "// #include \"no.cuh\"\n"),
            (std::vector<std::string>{"a.cuh", "b/c.cuh"}));
}

TEST(Registry, RepositoryRegistryIsValidAndMatchesEmbeddedCopy) {
  project::Registry disk = project::load_registry(test::source_dir());
  EXPECT_GE(disk.specialisations.size(), 30u);
  std::set<std::string> uris;
  for (auto& s : disk.specialisations) uris.insert(s.uri);
  EXPECT_EQ(uris.size(), disk.specialisations.size());
  // libkiln carries the registry it was built from: same URIs and source hashes.
  const project::Registry& emb = kiln::test::reference_package().registry();
  ASSERT_EQ(emb.specialisations.size(), disk.specialisations.size());
  for (size_t i = 0; i < emb.specialisations.size(); ++i) {
    EXPECT_EQ(emb.specialisations[i].uri, disk.specialisations[i].uri);
    EXPECT_EQ(emb.specialisations[i].source_hash, disk.specialisations[i].source_hash);
  }
}

TEST(Targets, ParseAndRunsOnRules) {
  EXPECT_EQ(format::parse_target("sm_90a")->str(), "sm_90a");
  EXPECT_EQ(format::parse_target("compute_80")->kind, format::Target::Kind::Ptx);
  EXPECT_FALSE(format::parse_target("sm90"));
  EXPECT_FALSE(format::parse_target("sm_9x"));
  EXPECT_FALSE(format::parse_target("sm_"));
  EXPECT_FALSE(format::parse_target("sm_090"));
  EXPECT_TRUE(format::runs_on(*format::parse_target("sm_80"), 90) == false);  // other major
  EXPECT_TRUE(format::runs_on(*format::parse_target("sm_80"), 86));
  EXPECT_FALSE(format::runs_on(*format::parse_target("sm_86"), 80));
  EXPECT_TRUE(format::runs_on(*format::parse_target("sm_90a"), 90));
  EXPECT_FALSE(format::runs_on(*format::parse_target("sm_90a"), 91));
  EXPECT_TRUE(format::runs_on(*format::parse_target("sm_100f"), 103));
  EXPECT_FALSE(format::runs_on(*format::parse_target("sm_100f"), 120));
  EXPECT_TRUE(format::runs_on(*format::parse_target("compute_80"), 90));
  EXPECT_FALSE(format::runs_on(*format::parse_target("compute_90"), 89));
}

TEST(Targets, ListParsingNamesTheBadItem) {
  EXPECT_EQ(format::parse_target_list("sm_80, sm_90a,sm_80").size(), 2u);
  try {
    format::parse_target_list("sm_80,sm90a");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("'sm90a'"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
