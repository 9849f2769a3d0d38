#include "format/manifest.hpp"

#include <gtest/gtest.h>

#include "kiln/error.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

const std::string kHashA(64, 'a');
const std::string kHashB(64, 'b');

format::Manifest sample_manifest() {
  format::Manifest m;
  m.package = "kiln-kernels";
  m.package_version = "0.1.0";
  m.git_commit = "3f9c2a1";
  m.cuda_version = "13.0";
  m.target = "sm_90a";
  m.build_time = 1764403200;
  format::ArtifactEntry norm;
  norm.uri = "rmsnorm_dtype_f16_block_256";
  norm.family = "rmsnorm";
  // "dtype" sorts after "block": registry order must survive, not alphabetical order.
  norm.params = {{"dtype", "f16"}, {"block", "256"}};
  norm.entries = {
      {"kiln::rmsnorm_kernel<__half, 256>", "_ZN4kiln14rmsnorm_kernelI6__halfLi256EEvv"}};
  norm.source_hash = kHashA;
  norm.flags = {"-O3", "-gencode=arch=compute_90a,code=sm_90a"};
  norm.file = "rmsnorm_dtype_f16_block_256.fatbin";
  norm.size = 4096;
  norm.sha256 = kHashB;
  format::ArtifactEntry axpy = norm;
  axpy.uri = "axpy_dtype_f32";
  axpy.family = "axpy";
  axpy.params = {{"dtype", "f32"}};
  axpy.entries = {{"kiln::axpy_kernel<float>", "_ZN4kiln11axpy_kernelIfEEvxfPKT_PS1_"}};
  axpy.file = "axpy_dtype_f32.fatbin";
  m.artifacts = {norm, axpy};  // deliberately unsorted
  m.skipped = {{"gemm_f16_tc", "needs sm_80+"}, {"chopper", "supports only sm_100f"}};
  return m;
}

format::Index sample_index() {
  format::Index idx;
  idx.package = "kiln-kernels";
  idx.package_version = "0.1.0";
  idx.git_commit = "3f9c2a1";
  idx.archives = {{"kiln-kernels-0.1.0-cuda13.0-sm_90a.tar.zst", "sm_90a", "13.0", 52760, kHashA},
                  {"kiln-kernels-0.1.0-cuda13.0-sm_80.tar.zst", "sm_80", "13.0", 48213, kHashB}};
  format::Provenance p;
  p.source_commit = "3f9c2a1d5e7b8c9a0f1e2d3c4b5a69788796a5b4";
  p.source_dirty = false;
  p.kiln_version = "0.1.0";
  p.toolkits = {{"nvcc", "13.0.88"}};
  p.hosts = {"x86_64-linux"};
  p.build_time = 1764547200;
  p.build_time_origin = "git commit time";
  p.targets = {"sm_90a", "sm_80"};
  idx.provenance = p;
  return idx;
}

// Runs `fn`, expects Error of `kind`, returns its message.
template <typename Fn>
std::string error_of(ErrorKind kind, Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

void replace_once(std::string& s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  ASSERT_NE(pos, std::string::npos) << from;
  s.replace(pos, from.size(), to);
}

TEST(Manifest, SerialisesCanonicallyWithMarkerFirstAndTrailingNewline) {
  std::string text = format::manifest_to_json(sample_manifest());
  EXPECT_EQ(text.rfind("{\n  \"format\": \"kiln-manifest\",\n  \"format_version\": 2,\n"
                       "  \"package\": \"kiln-kernels\",\n  \"package_version\": \"0.1.0\",\n",
                       0),
            0u)
      << text;
  EXPECT_EQ(text.back(), '\n');
  EXPECT_LT(text.find("axpy_dtype_f32"), text.find("rmsnorm_dtype_f16_block_256"));
  EXPECT_LT(text.find("chopper"), text.find("gemm_f16_tc"));
}

TEST(Manifest, RoundTripGivesSameBytesAndValues) {
  std::string text = format::manifest_to_json(sample_manifest());
  format::Manifest back = format::parse_manifest(text, "m.json");
  EXPECT_EQ(format::manifest_to_json(back), text);
  ASSERT_EQ(back.artifacts.size(), 2u);
  const format::ArtifactEntry* a = back.find("rmsnorm_dtype_f16_block_256");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->params,
            (std::vector<std::pair<std::string, std::string>>{{"dtype", "f16"}, {"block", "256"}}));
  EXPECT_EQ(a->entries[0].symbol, "_ZN4kiln14rmsnorm_kernelI6__halfLi256EEvv");
  EXPECT_EQ(a->size, 4096u);
  EXPECT_EQ(back.build_time, 1764403200);
  EXPECT_EQ(back.find("nope"), nullptr);
}

TEST(Manifest, NewerFormatVersionIsStaleSayingTooNewAndWhatThisKilnReads) {
  std::string text = format::manifest_to_json(sample_manifest());
  replace_once(text, "\"format_version\": 2", "\"format_version\": 3");
  // Unknown fields of the newer format must not hide the version message.
  replace_once(text, "\"git_commit\"", "\"signature\": \"x\",\n  \"git_commit\"");
  std::string msg = error_of(ErrorKind::Stale, [&] { format::parse_manifest(text, "dir/manifest.json"); });
  EXPECT_NE(msg.find("dir/manifest.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("format version 3 is too new; this kiln reads 2"), std::string::npos) << msg;
}

TEST(Manifest, OlderFormatVersionIsStaleSayingTooOld) {
  std::string text = format::manifest_to_json(sample_manifest());
  replace_once(text, "\"format_version\": 2", "\"format_version\": 0");
  std::string msg = error_of(ErrorKind::Stale, [&] { format::parse_manifest(text, "m.json"); });
  EXPECT_NE(msg.find("format version 0 is too old"), std::string::npos) << msg;
}

// Format 1 (kiln 0.1.0) had no package name: refused as too old, before its missing field.
TEST(Manifest, FormatOneWithoutAPackageNameIsRefusedAsTooOld) {
  std::string text = format::manifest_to_json(sample_manifest());
  replace_once(text, "\"format_version\": 2", "\"format_version\": 1");
  replace_once(text, "  \"package\": \"kiln-kernels\",\n", "");
  std::string msg = error_of(ErrorKind::Stale, [&] { format::parse_manifest(text, "m.json"); });
  EXPECT_NE(msg.find("manifest format version 1 is too old; this kiln reads 2"), std::string::npos)
      << msg;
  std::string idx = format::index_to_json(sample_index());
  replace_once(idx, "\"format_version\": 5", "\"format_version\": 1");
  msg = error_of(ErrorKind::Stale, [&] { format::parse_index(idx, "i.json"); });
  EXPECT_NE(msg.find("index format version 1 is too old; this kiln reads 2 to 5"),
            std::string::npos)
      << msg;
}

TEST(Manifest, PackageNameMustBeAPackageName) {
  for (const char* bad :
       {"Kiln", "1kiln", "kiln-", "-kiln", "kiln--x", "kiln_x", "kiln-1x", "", "kiln"}) {
    std::string text = format::manifest_to_json(sample_manifest());
    replace_once(text, "\"package\": \"kiln-kernels\"",
                 std::string("\"package\": \"") + bad + "\"");
    std::string msg = error_of(ErrorKind::Format, [&] { format::parse_manifest(text, "m.json"); });
    EXPECT_NE(msg.find("'package'"), std::string::npos) << bad << ": " << msg;
  }
  EXPECT_TRUE(format::is_package_name("kiln-kernels"));
  EXPECT_TRUE(format::is_package_name("acme-scale2"));
  EXPECT_FALSE(format::is_package_name(std::string(65, 'a')));
}

TEST(Manifest, IndexGivenAsManifestIsRefusedNamingTheMarker) {
  std::string msg =
      error_of(ErrorKind::Format, [&] { format::parse_manifest(format::index_to_json(sample_index()), "x.json"); });
  EXPECT_NE(msg.find("'format'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kiln-index"), std::string::npos) << msg;
}

TEST(Manifest, MissingFieldIsNamedWithItsPath) {
  std::string text = format::manifest_to_json(sample_manifest());
  replace_once(text, "\"sha256\"", "\"sha\"");
  std::string msg = error_of(ErrorKind::Format, [&] { format::parse_manifest(text, "m.json"); });
  EXPECT_NE(msg.find("m.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("artifacts[0].sha"), std::string::npos) << msg;
}

TEST(Manifest, BadFieldValuesAreRefusedNamingField) {
  struct Case {
    std::string from, to, field;
  };
  std::vector<Case> cases = {
      {"\"target\": \"sm_90a\"", "\"target\": \"sm90\"", "'target'"},
      {"\"cuda_version\": \"13.0\"", "\"cuda_version\": \"13\"", "'cuda_version'"},
      {"\"package_version\": \"0.1.0\"", "\"package_version\": \"0.1\"", "'package_version'"},
      {"\"size\": 4096", "\"size\": -1", "artifacts[0].size"},
      {"\"size\": 4096", "\"size\": \"4096\"", "artifacts[0].size"},
      {"\"sha256\": \"bbbb", "\"sha256\": \"BBBB", "artifacts[0].sha256"},
      {"\"file\": \"axpy_dtype_f32.fatbin\"", "\"file\": \"../axpy.fatbin\"", "artifacts[0].file"},
      {"\"file\": \"axpy_dtype_f32.fatbin\"", "\"file\": \"manifest.json\"", "artifacts[0].file"},
      {"\"build_time\": 1764403200", "\"build_time\": 1.5", "'build_time'"},
      {"\"uri\": \"axpy_dtype_f32\"", "\"uri\": \"axpy_dtype_f32\", \"extra\": 1",
       "artifacts[0].extra"},
      {"\"uri\": \"rmsnorm_dtype_f16_block_256\"", "\"uri\": \"axpy_dtype_f32\"",
       "artifacts[1].uri"},
  };
  for (const auto& c : cases) {
    std::string text = format::manifest_to_json(sample_manifest());
    replace_once(text, c.from, c.to);
    std::string msg = error_of(ErrorKind::Format, [&] { format::parse_manifest(text, "m.json"); });
    EXPECT_NE(msg.find(c.field), std::string::npos) << c.to << " -> " << msg;
  }
}

TEST(Manifest, NotJsonIsFormatErrorNamingOrigin) {
  std::string msg =
      error_of(ErrorKind::Format, [] { format::parse_manifest("{\"format\":", "broken.json"); });
  EXPECT_NE(msg.find("broken.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST(Index, RoundTripSortsArchivesByTargetAndKeepsBytes) {
  std::string text = format::index_to_json(sample_index());
  EXPECT_EQ(text.rfind("{\n  \"format\": \"kiln-index\",\n  \"format_version\": 5,\n", 0), 0u);
  EXPECT_LT(text.find("sm_80.tar.zst"), text.find("sm_90a.tar.zst"));
  format::Index back = format::parse_index(text, "i.json");
  EXPECT_EQ(format::index_to_json(back), text);
  ASSERT_EQ(back.archives.size(), 2u);
  EXPECT_EQ(back.archives[0].target, "sm_80");
  EXPECT_EQ(back.archives[0].size, 48213u);
}

// Index format 3 pins the package's description beside the index like an archive.
TEST(Index, FormatThreePinsTheDescriptionAndReadsItBack) {
  format::Index idx = sample_index();
  idx.description = format::IndexFile{"kiln-kernels-0.1.0.package.json", 812, kHashA};
  std::string text = format::index_to_json(idx);
  EXPECT_NE(text.find("\"description\": {\n    \"file\": \"kiln-kernels-0.1.0.package.json\",\n"
                      "    \"size\": 812,"),
            std::string::npos)
      << text;
  format::Index back = format::parse_index(text, "i.json");
  ASSERT_TRUE(back.description.has_value());
  EXPECT_EQ(back.description->file, "kiln-kernels-0.1.0.package.json");
  EXPECT_EQ(back.description->size, 812u);
  EXPECT_EQ(back.description->sha256, kHashA);
  EXPECT_EQ(format::index_to_json(back), text);
  EXPECT_EQ(format::description_file_name("acme-kernels", "1.2.0-rc1"),
            "acme-kernels-1.2.0-rc1.package.json");
}

// Index format 4 says how the release was built; it reads back to the same values and bytes.
TEST(Index, FormatFourRecordsProvenanceAndReadsItBack) {
  const std::string text = format::index_to_json(sample_index());
  EXPECT_NE(text.find("\"provenance\": {\n    \"source\": {\n      \"commit\": "
                      "\"3f9c2a1d5e7b8c9a0f1e2d3c4b5a69788796a5b4\",\n      \"dirty\": false\n    },"),
            std::string::npos)
      << text;
  format::Index back = format::parse_index(text, "i.json");
  ASSERT_TRUE(back.provenance.has_value());
  EXPECT_EQ(back.provenance->toolkits.at(0).version, "13.0.88");
  EXPECT_EQ(back.provenance->targets, (std::vector<std::string>{"sm_90a", "sm_80"}));
  EXPECT_EQ(back.provenance->source_dirty, std::optional<bool>(false));
  EXPECT_EQ(format::index_to_json(back), text);
  EXPECT_EQ(format::describe_provenance(*back.provenance),
            "kiln 0.1.0, nvcc 13.0.88, on x86_64-linux, from commit "
            "3f9c2a1d5e7b8c9a0f1e2d3c4b5a69788796a5b4 (clean), build time 1764547200 (git commit "
            "time), targets sm_90a,sm_80");
  EXPECT_FALSE(format::dirty_build_warning(*back.provenance).has_value());
  // Outside git: no commit, dirtiness unknown (null), and no warning.
  format::Index none = sample_index();
  none.provenance->source_commit = "";
  none.provenance->source_dirty = std::nullopt;
  const std::string none_text = format::index_to_json(none);
  EXPECT_NE(none_text.find("\"dirty\": null"), std::string::npos) << none_text;
  EXPECT_FALSE(format::parse_index(none_text, "i.json").provenance->source_dirty.has_value());
}

TEST(Index, ADirtyBuildIsWarnedAboutNamingItsCommit) {
  format::Index idx = sample_index();
  idx.provenance->source_dirty = true;
  format::Index back = format::parse_index(format::index_to_json(idx), "i.json");
  auto w = format::dirty_build_warning(*back.provenance);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("uncommitted changes at commit 3f9c2a1d5e7b8c9a0f1e2d3c4b5a69788796a5b4"),
            std::string::npos)
      << *w;
  EXPECT_NE(format::describe_provenance(*back.provenance).find("with uncommitted changes"),
            std::string::npos);
}

// Each bad provenance is refused naming the field: a reader shows these values on a terminal.
TEST(Index, ProvenanceIsCheckedFieldByField) {
  struct Case {
    std::string from, to, field;
  };
  const std::vector<Case> cases = {
      {"\"x86_64-linux\"", "\"x86_64\\u001b[31m\"", "provenance.hosts[0]"},
      {"\"dirty\": false", "\"dirty\": \"no\"", "provenance.source.dirty"},
      {"\"3f9c2a1d5e7b8c9a0f1e2d3c4b5a69788796a5b4\"", "\"3f9c2a1\"", "provenance.source.commit"},
      {"\"git commit time\"", "\"yesterday\"", "provenance.build_time_origin"},
      {"\"13.0.88\"", "\"\"", "provenance.toolkits[0].version"},
      {"\"kiln_version\": \"0.1.0\"", "\"kiln_version\": \"zero\"", "provenance.kiln_version"},
      {"\"hosts\": [\n      \"x86_64-linux\"\n    ]", "\"hosts\": []", "provenance.hosts"},
      {"\"sm_80\"\n    ]", "\"sm_90a\"\n    ]", "provenance.targets"},
      {"\"build_time\": 1764547200", "\"build_time\": -1", "provenance.build_time"},
      {"\"build_time_origin\"", "\"build_origin\"", "provenance.build_origin"},
  };
  const std::string good = format::index_to_json(sample_index());
  for (const auto& c : cases) {
    std::string text = good;
    replace_once(text, c.from, c.to);
    std::string msg = error_of(ErrorKind::Format, [&] { format::parse_index(text, "i.json"); });
    EXPECT_NE(msg.find("field '" + c.field + "'"), std::string::npos) << c.to << ": " << msg;
  }
  // Required from format 4 on, refused before it.
  std::string missing = good;
  missing.erase(missing.find(",\n  \"provenance\""), std::string::npos);
  missing += "\n}\n";
  std::string msg = error_of(ErrorKind::Format, [&] { format::parse_index(missing, "i.json"); });
  EXPECT_NE(msg.find("field 'provenance': missing"), std::string::npos) << msg;
  format::Index three = sample_index();
  three.format_version = 3;
  std::string old = format::index_to_json(three);
  msg = error_of(ErrorKind::Format, [&] { format::parse_index(old, "i.json"); });
  EXPECT_NE(msg.find("field 'provenance': not a field of index format 3 (from 4 on)"),
            std::string::npos)
      << msg;
}

// An index of format 2 (before descriptions) is still read; it cannot carry one.
TEST(Index, FormatTwoIsStillReadWithoutADescription) {
  format::Index idx = sample_index();
  idx.provenance.reset();
  idx.format_version = 2;
  std::string text = format::index_to_json(idx);
  format::Index back = format::parse_index(text, "old.json");
  EXPECT_EQ(back.format_version, 2);
  EXPECT_FALSE(back.description.has_value());
  idx.description = format::IndexFile{"kiln-kernels-0.1.0.package.json", 1, kHashA};
  std::string msg =
      error_of(ErrorKind::Format, [&] { format::parse_index(format::index_to_json(idx), "old.json"); });
  EXPECT_NE(msg.find("field 'description': not a field of index format 2"), std::string::npos)
      << msg;
}

// The description's name is derived from the index's package and version, so an index cannot
// point at another package's description or out of its directory; its fields are strict.
TEST(Index, DescriptionMustBeTheDerivedNameWithStrictFields) {
  format::Index idx = sample_index();
  idx.description = format::IndexFile{"../acme-kernels-0.1.0.package.json", 1, kHashA};
  std::string msg = error_of(ErrorKind::Format, [&] { format::parse_index(format::index_to_json(idx), "i.json"); });
  EXPECT_NE(msg.find("description.file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected 'kiln-kernels-0.1.0.package.json'"), std::string::npos) << msg;
  const std::string hash_d(64, 'd');
  idx.description = format::IndexFile{"kiln-kernels-0.1.0.package.json", 1, hash_d};
  std::string text = format::index_to_json(idx);
  replace_once(text, "\"size\": 1,", "\"size\": 1, \"url\": \"http://x\",");
  msg = error_of(ErrorKind::Format, [&] { format::parse_index(text, "i.json"); });
  EXPECT_NE(msg.find("description.url"), std::string::npos) << msg;
  text = format::index_to_json(idx);
  replace_once(text, hash_d, "zz");
  msg = error_of(ErrorKind::Format, [&] { format::parse_index(text, "i.json"); });
  EXPECT_NE(msg.find("description.sha256"), std::string::npos) << msg;
}

TEST(Index, ArchiveFileMustBeTheNameDerivedFromVersionCudaAndTarget) {
  std::string text = format::index_to_json(sample_index());
  replace_once(text, "\"kiln-kernels-0.1.0-cuda13.0-sm_80.tar.zst\"",
               "\"kiln-kernels-0.1.0-cuda13.0-sm_90a.tar.zst\"");
  std::string msg = error_of(ErrorKind::Format, [&] { format::parse_index(text, "i.json"); });
  EXPECT_NE(msg.find("archives[0].file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kiln-kernels-0.1.0-cuda13.0-sm_80.tar.zst"), std::string::npos) << msg;
}

TEST(Index, NewerIndexFormatIsStale) {
  std::string text = format::index_to_json(sample_index());
  replace_once(text, "\"format_version\": 5", "\"format_version\": 7");
  std::string msg = error_of(ErrorKind::Stale, [&] { format::parse_index(text, "i.json"); });
  EXPECT_NE(msg.find("index format version 7 is too new; this kiln reads 2 to 5"),
            std::string::npos)
      << msg;
}

// "<package>-<version><suffix>": both parts when the name is one, nothing otherwise.
TEST(Names, AReleaseFileNameGivesItsPackageAndVersion) {
  auto r = format::release_of_file_name("acme-scale-1.2.0-rc1-index.json", "-index.json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->package, "acme-scale");
  EXPECT_EQ(r->version, "1.2.0-rc1");
  EXPECT_EQ(format::release_of_file_name("kiln-kernels-0.1.0-SHA256SUMS", "-SHA256SUMS")->package,
            "kiln-kernels");
  for (const char* not_one : {"-index.json", "acme-index.json", "Acme-1.0.0-index.json",
                              "acme-1.0-index.json", "acme-1.0.0-index.json.bak",
                              "acme-1.0.0-SHA256SUMS", "../acme-1.0.0-index.json"})
    EXPECT_FALSE(format::release_of_file_name(not_one, "-index.json")) << not_one;
}

TEST(Names, AReleasesFilesAndTheirTemporariesAreTold) {
  for (const char* f : {"acme-1.2.0-cuda13.0-sm_90a.tar.zst", "acme-1.2.0-index.json",
                        "acme-1.2.0.package.json", "acme-1.2.0-SHA256SUMS",
                        "acme-1.2.0-index.json.tmp.0123456789abcdef"})
    EXPECT_TRUE(format::names_release_file(f, "acme", "1.2.0")) << f;
  for (const char* f : {"acme-1.2.0", "acme-1.2.1-index.json", "acme-kernels-1.2.0-index.json",
                        "acme-1.2.00-index.json", "acme1.2.0-index.json", "README"})
    EXPECT_FALSE(format::names_release_file(f, "acme", "1.2.0")) << f;
}

TEST(Names, ArchiveIndexAndStemFollowTheGrammar) {
  EXPECT_EQ(format::archive_file_name("kiln-kernels", "0.1.0", "13.0", "sm_90a"),
            "kiln-kernels-0.1.0-cuda13.0-sm_90a.tar.zst");
  EXPECT_EQ(format::archive_stem("kiln-kernels", "0.1.0", "13.0", "compute_80"),
            "kiln-kernels-0.1.0-cuda13.0-compute_80");
  EXPECT_EQ(format::index_file_name("kiln-kernels", "0.1.0"), "kiln-kernels-0.1.0-index.json");
}

TEST(Examples, CheckedInExamplesParseAndAreCanonical) {
  auto dir = std::filesystem::path(test::source_dir()) / "manifests" / "examples";
  std::string mtext = test::read_file(dir / "manifest.json");
  ASSERT_FALSE(mtext.empty());
  format::Manifest m = format::parse_manifest(mtext, "manifests/examples/manifest.json");
  EXPECT_EQ(format::manifest_to_json(m), mtext);
  EXPECT_FALSE(m.artifacts.empty());
  std::string itext = test::read_file(dir / "index.json");
  ASSERT_FALSE(itext.empty());
  format::Index idx = format::parse_index(itext, "manifests/examples/index.json");
  EXPECT_EQ(format::index_to_json(idx), itext);
  EXPECT_EQ(idx.package_version, m.package_version);
}

}  // namespace
}  // namespace kiln
