// The loader's one-entry manifest reader (core/format/manifest_entry.hpp) against parse_manifest:
// for every manifest here, kiln's own and thousands of mutations of them, both accept with the
// same values or both refuse with the same kind and message.
#include "format/manifest_entry.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "format/manifest.hpp"
#include "kiln/error.hpp"
#include "plan/resolver.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
const std::string kOrigin = "store/kiln-kernels-x/manifest.json";

// A manifest as JSON text, artifacts included; comparing these compares every field (params
// as a JSON object: compared as a list too).
std::string canonical(format::Manifest m, const format::ArtifactEntry* only = nullptr) {
  m.artifacts.clear();
  if (only) m.artifacts.push_back(*only);
  return format::manifest_to_json(m);
}

struct Tally {
  int accepted = 0, refused = 0, strict = 0;
};

// parse_manifest and ManifestEntries::read on one text: the same error, or the same header and
// the same entry for every URI.
void expect_same(const std::string& text, const std::string& what, Tally* tally = nullptr) {
  SCOPED_TRACE(what);
  std::optional<format::Manifest> want;
  std::optional<Error> want_error;
  try {
    want = format::parse_manifest(text, kOrigin);
  } catch (const Error& e) {
    want_error = e;
  }
  std::shared_ptr<const format::ManifestEntries> got;
  std::optional<Error> got_error;
  try {
    got = format::ManifestEntries::read(std::string(text), kOrigin);
  } catch (const Error& e) {
    got_error = e;
  }
  if (want_error) {
    if (tally) ++tally->refused;
    ASSERT_TRUE(got_error) << "accepted what parse_manifest refuses: " << want_error->what();
    EXPECT_EQ(got_error->kind(), want_error->kind());
    EXPECT_EQ(std::string(got_error->what()), std::string(want_error->what()));
    return;
  }
  ASSERT_FALSE(got_error) << "refused what parse_manifest accepts: " << got_error->what();
  if (tally) {
    ++tally->accepted;
    tally->strict += got->strict();
  }
  EXPECT_EQ(got->text(), text);
  EXPECT_EQ(canonical(got->header()), canonical(*want));
  for (const auto& a : want->artifacts) {
    auto m = got->for_uri(a.uri);
    const format::ArtifactEntry* e = m->find(a.uri);
    ASSERT_NE(e, nullptr) << a.uri;
    EXPECT_EQ(canonical(*m, e), canonical(*want, &a)) << a.uri;
    EXPECT_EQ(e->params, a.params) << a.uri;  // JSON would fold repeated keys
    EXPECT_EQ(m->artifacts.size(), 1u) << a.uri;  // whichever reader decided: no other URI's
  }
  EXPECT_EQ(got->for_uri("not_listed_anywhere")->find("not_listed_anywhere"), nullptr);
}

// A manifest with every kind of field filled: params out of alphabetical order, two entries,
// flags, skipped families.
format::Manifest rich_manifest() {
  test::ReleaseSpec rel;
  rel.flags = {"-O3", "-std=c++17", "", "-DNAME=x y"};
  format::Manifest m = test::release_manifest(rel, "sm_90a");
  format::ArtifactEntry norm = m.artifacts.front();
  norm.uri = "rmsnorm_dtype_f16_block_256";
  norm.family = "rmsnorm";
  norm.params = {{"dtype", "f16"}, {"block", "256"}};
  norm.entries = {
      {"kiln::rmsnorm_kernel<__half, 256>", "_ZN4kiln14rmsnorm_kernelI6__halfLi256EEvv"},
      {"kiln::rmsnorm_tail<__half>", "_ZN4kiln12rmsnorm_tailI6__halfEEvv"}};
  norm.file = "rmsnorm_dtype_f16_block_256.fatbin";
  m.artifacts.push_back(norm);
  format::ArtifactEntry bare = norm;
  bare.uri = "z";
  bare.params = {};
  bare.flags = {};
  bare.file = "z.bin";
  m.artifacts.push_back(bare);
  m.skipped = {{"chopper", "supports only sm_100f"}, {"gemm_f16_tc", "needs sm_80+"}};
  return m;
}

// kiln's own manifests: the fixture's, the rich one, the documented example and the fuzz
// seeds (manifests of real builds).
std::vector<std::pair<std::string, std::string>> seeds() {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("fixture", format::manifest_to_json(test::release_manifest({}, "sm_80")));
  out.emplace_back("rich", format::manifest_to_json(rich_manifest()));
  const std::string src = KILN_TEST_SOURCE_DIR;
  for (const char* f :
       {"manifests/examples/manifest.json", "fuzz/corpus/manifest/release-sm_80-manifest.json",
        "fuzz/corpus/manifest/release-compute_80-manifest.json"}) {
    std::string text = test::read_file(src + "/" + f);
    EXPECT_FALSE(text.empty()) << f;
    out.emplace_back(f, text);
  }
  return out;
}

// Every node of `j` (not the root), as JSON pointers.
void collect_pointers(const Json& j, const std::string& at, std::vector<std::string>& out) {
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.push_back(at + "/" + it.key());
      collect_pointers(it.value(), at + "/" + it.key(), out);
    }
  else if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i) {
      out.push_back(at + "/" + std::to_string(i));
      collect_pointers(j[i], at + "/" + std::to_string(i), out);
    }
}

// Mutations of the tree: every node removed, replaced by values of every type and shape, and
// an unknown key added to every object. Each is emitted pretty and compact.
void tree_mutations(const Json& root,
                    const std::function<void(const std::string&, const std::string&)>& emit) {
  std::vector<std::string> pointers;
  collect_pointers(root, "", pointers);
  const std::vector<Json> replacements = {"",
                                          "x",
                                          "sm_90a",
                                          "compute_80",
                                          "13.0",
                                          "1.2.3",
                                          "manifest.json",
                                          "a/b",
                                          "..",
                                          std::string(64, 'a'),
                                          std::string(64, 'A'),
                                          std::string(63, 'a'),
                                          0,
                                          1,
                                          2,
                                          -1,
                                          1.5,
                                          Json::number_unsigned_t{9223372036854775807ULL},
                                          Json::number_unsigned_t{9223372036854775808ULL},
                                          Json::number_unsigned_t{18446744073709551615ULL},
                                          true,
                                          false,
                                          nullptr,
                                          Json::array(),
                                          Json::object(),
                                          Json::array({"x"}),
                                          Json::array({1}),
                                          Json::object({{"k", "v"}}),
                                          Json::object({{"name", "n"}, {"symbol", "s"}})};
  auto both = [&](const Json& m, const std::string& what) {
    emit(m.dump(2) + "\n", what);
    emit(m.dump(), what + " (compact)");
  };
  for (const auto& p : pointers) {
    Json::json_pointer jp(p);
    {
      Json m = root;
      Json& parent = m.at(jp.parent_pointer());
      if (parent.is_object())
        parent.erase(jp.back());
      else
        parent.erase(std::stoul(jp.back()));
      both(m, p + " removed");
    }
    for (const auto& r : replacements) {
      Json m = root;
      m.at(jp) = r;
      both(m, p + " = " + r.dump());
    }
  }
  pointers.insert(pointers.begin(), "");
  for (const auto& p : pointers) {
    Json::json_pointer jp(p);
    if (!root.at(jp).is_object()) continue;
    Json m = root;
    m.at(jp)["sha265"] = "typo";
    both(m, p + " with an unknown key");
    Json n = root;
    n.at(jp)[""] = "";
    both(n, p + " with an empty key");
    // Every member given twice, the other value first or last (parse_manifest keeps the last):
    // the other value is the member's own with one element fewer, or a string.
    for (auto it = root.at(jp).begin(); it != root.at(jp).end(); ++it) {
      Json other = it.value();
      if (other.is_structured() && !other.empty())
        other.erase(other.begin());
      else
        other = "other";
      Json marked = root;
      marked.at(jp)[it.key()] = "@@member@@";
      std::string text = marked.dump(2);
      std::string member = Json(it.key()).dump() + ": \"@@member@@\"";
      auto at = text.find(member);
      ASSERT_NE(at, std::string::npos);
      std::string key = Json(it.key()).dump() + ": ";
      for (bool other_first : {true, false}) {
        const Json& a = other_first ? other : it.value();
        const Json& b = other_first ? it.value() : other;
        std::string dup = text;
        dup.replace(at, member.size(), key + a.dump() + ", " + key + b.dump());
        emit(dup,
             p + "/" + it.key() + " given twice, " + (other_first ? "other first" : "other last"));
      }
    }
  }
  // Artifacts sharing a field with the first one (duplicate URIs, files), or repeated whole.
  const Json& arts = root.at("artifacts");
  for (std::size_t i = 1; i < arts.size(); ++i)
    for (auto it = arts[0].begin(); it != arts[0].end(); ++it) {
      Json m = root;
      m["artifacts"][i][it.key()] = it.value();
      both(m, "artifacts[" + std::to_string(i) + "]." + it.key() + " as artifacts[0]'s");
    }
  if (!arts.empty()) {
    Json m = root;
    m["artifacts"].push_back(arts[0]);
    both(m, "artifacts[0] repeated at the end");
  }
}

// Mutations of the text: duplicate keys (each member line repeated before and after itself,
// with its own value or another), truncations, trailing bytes, escapes, non-ASCII, nesting,
// numbers at and past every bound.
void text_mutations(const std::string& text,
                    const std::function<void(const std::string&, const std::string&)>& emit) {
  std::vector<std::string> lines;
  for (std::size_t b = 0; b < text.size();) {
    std::size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    lines.push_back(text.substr(b, e - b));
    b = e + 1;
  }
  auto join = [](const std::vector<std::string>& ls) {
    std::string s;
    for (const auto& l : ls) s += l + "\n";
    return s;
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string l = lines[i];
    auto colon = l.find("\": ");
    if (colon == std::string::npos || l.back() == '{' || l.back() == '[') continue;
    std::string member = l.back() == ',' ? l.substr(0, l.size() - 1) : l;
    std::string key_part = member.substr(0, colon + 3);
    for (const std::string& dup : {member, key_part + "\"dup\"", key_part + "7"}) {
      auto before = lines;
      before.insert(before.begin() + i, dup + ",");
      emit(join(before), "line " + std::to_string(i) + " repeated before as " + dup);
      auto after = lines;
      after[i] = member + ",";
      after.insert(after.begin() + i + 1, dup + (l.back() == ',' ? "," : ""));
      emit(join(after), "line " + std::to_string(i) + " repeated after as " + dup);
    }
  }
  for (std::size_t n = 0; n < text.size(); n += 7)
    emit(text.substr(0, n), "cut at " + std::to_string(n));
  emit(text.substr(0, text.size() - 1), "no final newline");
  for (const std::string& tail : std::vector<std::string>{
           "x", "{}", "[]", std::string(1, '\0'), " \t\r\n ", "/* c */", "1", "\"s\"", ",", "}"})
    emit(text + tail, "followed by " + tail);
  emit("\xEF\xBB\xBF" + text, "after a byte order mark");
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  emit(crlf, "CRLF");
  std::string tabs;
  for (char c : text) tabs += c == ' ' ? '\t' : c;
  emit(tabs, "tabs");
  auto replace_first = [&](const std::string& from, const std::string& to) {
    std::string s = text;
    auto pos = s.find(from);
    if (pos == std::string::npos) return;
    s.replace(pos, from.size(), to);
    emit(s, from + " -> " + to);
  };
  replace_first("\"format\"", "\"\\u0066ormat\"");
  replace_first("\"kiln-manifest\"", "\"kiln\\u002dmanifest\"");
  replace_first("\"axpy\"", "\"\\u0061xpy\"");
  replace_first("\"axpy\"", "\"ax\\/py\"");
  replace_first("\"axpy\"", "\"axpy\\n\"");
  replace_first("\"axpy\"", "\"axp\xC3\xA9\"");
  replace_first("\"axpy\"", "\"axp\xFF\"");
  replace_first("\"axpy\"", "\"axp\x7F\"");
  replace_first("\"axpy\"", "\"axp\ty\"");
  replace_first("\"3f9c2a1\"", "\"3f9c\xE2\x82\xAC\"");
  replace_first("\"format_version\": 1", "\"format_version\": 2");
  replace_first("\"format_version\": 1", "\"format_version\": 0");
  replace_first("\"format_version\": 1", "\"format_version\": -1");
  replace_first("\"format_version\": 1", "\"format_version\": 01");
  replace_first("\"format_version\": 1", "\"format_version\": 1.0");
  replace_first("\"format_version\": 1", "\"format_version\": 1e0");
  replace_first("\"format_version\": 1", "\"format_version\": 18446744073709551617");
  replace_first("\"format_version\": 1", "\"format_version\": 1e999");
  replace_first("\"format_version\": 1", "\"format_version\": -0");
  replace_first("\"build_time\": ", "\"build_time\": 9223372036854775807, \"x\": ");
  for (const std::string n : {"0",
                              "00",
                              "-0",
                              "1.5",
                              "1e3",
                              "1E3",
                              "9223372036854775807",
                              "9223372036854775808",
                              "9999999999999999999",
                              "18446744073709551615",
                              "18446744073709551616",
                              "99999999999999999999999",
                              "1e999",
                              "-1",
                              "0x10",
                              "+1",
                              "1 2",
                              "Infinity",
                              "NaN",
                              "true",
                              "null"}) {
    std::string s = text;
    auto pos = s.find("\"build_time\": ");
    if (pos == std::string::npos) break;
    pos += 14;
    auto end = s.find_first_of(",\n", pos);
    s.replace(pos, end - pos, n);
    emit(s, "build_time " + n);
    std::string z = text;
    pos = z.find("\"size\": ");
    if (pos == std::string::npos) continue;
    pos += 8;
    end = z.find_first_of(",\n", pos);
    z.replace(pos, end - pos, n);
    emit(z, "size " + n);
  }
  for (int depth : {3, 63, 64, 65, 1000}) {
    std::string deep = std::string(depth, '[') + std::string(depth, ']');
    replace_first("\"dtype\": \"", "\"dtype\": " + deep + ", \"x\": \"");
    std::string s = text;
    auto pos = s.find("\"flags\": [");
    if (pos != std::string::npos) {
      s.insert(pos + 10, deep + ",");
      emit(s, "flags holding nesting " + std::to_string(depth));
    }
  }
}

TEST(ManifestEntries, AgreesWithParseManifestOnEveryMutationOfKilnsManifests) {
  Tally tally;
  int n = 0;
  for (const auto& [name, text] : seeds()) {
    expect_same(text, name, &tally);
    Json root = Json::parse(text);
    auto emit = [&, name = name](const std::string& t, const std::string& what) {
      if (n++ % test::kSweepStride == 0) expect_same(t, name + ": " + what, &tally);
    };
    tree_mutations(root, emit);
    text_mutations(text, emit);
    if (HasFatalFailure()) return;
  }
  // Both sides of the comparison were exercised, and the strict reader decided most of what
  // was accepted (the rest: escapes, duplicates, numbers outside its subset).
  EXPECT_GT(tally.refused, 2000 / test::kSweepStride);
  EXPECT_GT(tally.accepted, 1000 / test::kSweepStride);
  EXPECT_GT(tally.strict, tally.accepted / 2);
}

TEST(ManifestEntries, TheStrictReaderDecidesEveryManifestKilnWrites) {
  for (const auto& [name, text] : seeds()) {
    auto e = format::ManifestEntries::read(std::string(text), kOrigin);
    EXPECT_TRUE(e->strict()) << name;
    auto compact = format::ManifestEntries::read(Json::parse(text).dump(), kOrigin);
    EXPECT_TRUE(compact->strict()) << name;
  }
  // Any field order: each object's keys reversed.
  Json root = Json::parse(format::manifest_to_json(rich_manifest()));
  std::function<Json(const Json&)> reversed = [&](const Json& j) -> Json {
    if (j.is_array()) {
      Json out = Json::array();
      for (const auto& v : j) out.push_back(reversed(v));
      return out;
    }
    if (!j.is_object()) return j;
    Json out = Json::object();
    std::vector<std::string> keys;
    for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
    for (auto k = keys.rbegin(); k != keys.rend(); ++k) out[*k] = reversed(j.at(*k));
    return out;
  };
  std::string text = reversed(root).dump(1, '\t');
  auto e = format::ManifestEntries::read(std::string(text), kOrigin);
  EXPECT_TRUE(e->strict());
  expect_same(text, "keys reversed");
}

// The strict reader scans strings and whitespace through byte tables: a byte it must not accept
// (a control byte, DEL, non-ASCII, a backslash, a quote) at each of the first 18 offsets of a
// long string, and whitespace runs of every length up to 20, read exactly as parse_manifest
// reads them.
TEST(ManifestEntries, EveryByteAtEveryOffsetOfAStringReadsAsParseManifestReadsIt) {
  const std::string text = seeds().front().second;
  const std::string key = "\"git_commit\": \"";
  const std::size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  const std::size_t value = at + key.size();
  const std::string long_value(40, 'a');
  std::string base = text;
  base.replace(value, text.find('"', value) - value, long_value);
  expect_same(base, "long git_commit");
  const std::string bytes[] = {std::string(1, '\0'), "\x01", "\t", "\x1f", " ", "~", "\x7f",
                               "\x80", "\xff", "\xc3\xa9", "\\n", "\\", "\""};
  for (std::size_t off = 0; off < 18; ++off)
    for (const auto& b : bytes) {
      std::string t = base;
      t.replace(value + off, 1, b);
      expect_same(t, "byte " + std::to_string(static_cast<unsigned char>(b[0])) + " at offset " +
                         std::to_string(off));
    }
  // Indentation of 0 to 20 bytes of each whitespace byte, and of a non-whitespace byte.
  const std::size_t line = text.find("\n  \"format_version\"");
  ASSERT_NE(line, std::string::npos);
  for (std::size_t n = 0; n <= 20; ++n)
    for (char c : {' ', '\t', '\r', '\n', '\v', '\f'}) {
      std::string t = text;
      t.replace(line + 1, 2, std::string(n, c));
      expect_same(t, "indent of " + std::to_string(n) + " x " + std::to_string(c));
    }
}

TEST(ManifestEntries, ConvertsEachUrisArtifactOnceAndSharesIt) {
  format::Manifest m = rich_manifest();
  auto e = format::ManifestEntries::read(format::manifest_to_json(m), kOrigin);
  ASSERT_TRUE(e->strict());
  EXPECT_TRUE(e->header().artifacts.empty());
  auto norm = e->for_uri("rmsnorm_dtype_f16_block_256");
  ASSERT_EQ(norm->artifacts.size(), 1u);
  EXPECT_EQ(norm->artifacts[0].params,
            (std::vector<std::pair<std::string, std::string>>{{"dtype", "f16"}, {"block", "256"}}));
  EXPECT_EQ(norm->artifacts[0].entries.size(), 2u);
  EXPECT_EQ(norm->skipped.size(), 2u);
  EXPECT_EQ(e->for_uri("rmsnorm_dtype_f16_block_256"), norm);  // the same object, not a copy
  auto absent = e->for_uri("rmsnorm");
  EXPECT_TRUE(absent->artifacts.empty());
  EXPECT_EQ(absent->target, "sm_90a");
}

// The fast scan of get() looks manifests up with ManifestEntries: it keeps the URI's entry only
// and checks the header and that entry; a rule broken in the asked artifact is refused with
// parse_manifest's message and kind, as the full scan refuses any.
TEST(ManifestEntries, GetsFastScanKeepsOneEntryAndChecksWhatItReads) {
  test::TempDir tmp;
  test::ReleaseSpec rel;
  fs::path dir = test::write_store_entry(tmp.path(), rel, "sm_80");
  plan::StoreScanner disk;
  plan::StoreScan fast = disk.scan_for(tmp.path().string(), "test", "axpy_dtype_f32", 80);
  ASSERT_EQ(fast.archives.size(), 1u);
  ASSERT_TRUE(fast.archives[0].manifest) << fast.archives[0].error;
  ASSERT_EQ(fast.archives[0].manifest->artifacts.size(), 1u);
  EXPECT_EQ(fast.archives[0].manifest->artifacts[0].uri, "axpy_dtype_f32");
  plan::StoreScan full = disk.scan(tmp.path().string(), "test");
  ASSERT_TRUE(full.archives.at(0).manifest);
  EXPECT_EQ(full.archives[0].manifest->artifacts.size(), 2u);

  // axpy_dtype_f16 (the first artifact, not the one asked for) gets a digest of the wrong form.
  std::string text = test::read_file(dir / "manifest.json");
  auto pos = text.find("\"sha256\": \"");
  ASSERT_NE(pos, std::string::npos);
  text.insert(pos + 11, "X");
  test::write_file(dir / "manifest.json", text);
  std::string want;
  try {
    format::parse_manifest(text, (dir / "manifest.json").string());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    want = e.what();
  }
  ASSERT_NE(want.find("artifacts[0].sha256"), std::string::npos) << want;
  // get()'s fast scan looks its URI up (ManifestEntries::open) and checks what it reads: the
  // header and axpy_dtype_f32's object, which are sound (install checked the rest; docs/
  // decisions.md, "Manifests looked up, not read").
  fast = disk.scan_for(tmp.path().string(), "test", "axpy_dtype_f32", 80);
  ASSERT_EQ(fast.archives.size(), 1u);
  ASSERT_TRUE(fast.archives[0].manifest) << fast.archives[0].error;
  EXPECT_NE(fast.archives[0].manifest->find("axpy_dtype_f32"), nullptr);
  // Asked for the broken one, it refuses with parse_manifest's own error.
  fast = disk.scan_for(tmp.path().string(), "test", "axpy_dtype_f16", 80);
  ASSERT_EQ(fast.archives.size(), 1u);
  EXPECT_FALSE(fast.archives[0].manifest);
  EXPECT_EQ(fast.archives[0].error_kind, ErrorKind::Format);
  EXPECT_EQ(fast.archives[0].error, want);
  // A full scan (kiln verify's, the failure's explanation) checks the whole manifest.
  full = disk.scan(tmp.path().string(), "test");
  EXPECT_EQ(full.archives.at(0).error, want);
}

}  // namespace
}  // namespace kiln
