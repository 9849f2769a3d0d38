#include "format/manifest.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <tuple>

#include "format/manifest_rules.hpp"
#include "format/release_json.hpp"
#include "format/target.hpp"
#include "format/toolkit.hpp"
#include "format/untrusted_json.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "util/field_error.hpp"
#include "util/join.hpp"

namespace kiln::format {

using namespace manifest_rules;
namespace {

// ordered_json keeps keys in insertion order: that order is the canonical one, and parsing
// with it keeps "params" in registry order.
using Json = nlohmann::ordered_json;

constexpr std::string_view kIndexMarker = "kiln-index";
constexpr std::array<std::string_view, 9> kIndexFields = {
    "format",       "format_version", "package",     "package_version", "git_commit",
    "cuda_version", "archives",       "description", "provenance"};
constexpr std::array<std::string_view, 7> kProvenanceFields = {
    "source", "kiln_version", "toolkits", "hosts", "build_time", "build_time_origin", "targets"};
constexpr std::array<std::string_view, 2> kSourceFields = {"commit", "dirty"};
constexpr std::array<std::string_view, 2> kToolkitFields = {"name", "version"};
// What `choose_build_time` says (packager/builder): the only words a reader may show.
constexpr std::array<std::string_view, 3> kBuildTimeOrigins = {
    "SOURCE_DATE_EPOCH", "git commit time", "fixed (no git commit)"};
constexpr std::array<std::string_view, 3> kIndexFileFields = {"file", "size", "sha256"};
constexpr std::array<std::string_view, 4> kIndexArchiveFieldsBefore5 = {"file", "target", "size",
                                                                        "sha256"};
constexpr std::array<std::string_view, 5> kIndexArchiveFields = {"file", "target", "cuda_version",
                                                                 "size", "sha256"};
// The first index format whose archives carry their own cuda_version.
constexpr int kIndexFormatToolkitPerArchive = 5;

using util::fail;

const Json& member(const Json& obj, const std::string& key, const std::string& origin,
                   const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(origin, where + key, "missing");
  return *it;
}

// Unknown keys are refused: a typo ("sha265") must not silently drop a checked field. New
// fields come with a format version bump.
// string_views of literals: called once per artifact and entry, it allocates nothing.
template <std::size_t N>
void check_keys(const Json& obj, const std::array<std::string_view, N>& allowed,
                const std::string& origin, const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (field_index(allowed, it.key())) continue;
    fail(origin, where + it.key(), "unknown field (allowed: " + util::join(allowed, ", ") + ")");
  }
}

std::string get_string(const Json& obj, const std::string& key, const std::string& origin,
                       const std::string& where, bool allow_empty = false) {
  const Json& v = member(obj, key, origin, where);
  if (!v.is_string()) fail(origin, where + key, "expected a string, found " + quote_json(v));
  std::string s = v.get<std::string>();
  if (s.empty() && !allow_empty) fail(origin, where + key, "must not be empty");
  return s;
}

std::uint64_t get_u64(const Json& obj, const std::string& key, const std::string& origin,
                      const std::string& where) {
  const Json& v = member(obj, key, origin, where);
  if (!v.is_number_unsigned())
    fail(origin, where + key, "expected a non-negative integer, found " + quote_json(v));
  return v.get<std::uint64_t>();
}

std::string get_sha256(const Json& obj, const std::string& key, const std::string& origin,
                       const std::string& where) {
  std::string s = get_string(obj, key, origin, where);
  if (!io::is_sha256_hex(s))
    fail(origin, where + key, "expected 64 lowercase hex digits (SHA-256), found '" + s + "'");
  return s;
}

Json parse_root(std::string_view text, const std::string& origin,
                RepeatedKeys repeated = RepeatedKeys::last_wins) {
  Json root = parse_untrusted_json<Json>(text, origin, io::limits::kMaxJsonBytes, repeated);
  if (!root.is_object()) fail(origin, "", "expected a JSON object at the top level");
  return root;
}

// The marker and version are checked before anything else, so a file from a newer kiln is
// reported as "too new" rather than as a list of unknown fields.
void check_header(const Json& root, std::string_view marker, int supported, const std::string& what,
                  const std::string& origin, int oldest_supported = 0) {
  if (oldest_supported == 0) oldest_supported = supported;
  std::string found = get_string(root, "format", origin, "");
  if (found != marker)
    fail(origin, "format", "expected \"" + std::string(marker) + "\", found \"" + found + "\"");
  const Json& v = member(root, "format_version", origin, "");
  if (!v.is_number_integer())
    fail(origin, "format_version", "expected an integer, found " + quote_json(v));
  long long ver = v.get<long long>();
  const std::string reads = oldest_supported == supported ? std::to_string(supported)
                                                          : std::to_string(oldest_supported) +
                                                                " to " + std::to_string(supported);
  if (ver > supported)
    throw Error(ErrorKind::Stale, origin + ": " + what + " format version " + std::to_string(ver) +
                                      " is too new; this kiln reads " + reads +
                                      ". Upgrade kiln, or fetch the package built for this kiln.");
  if (ver < oldest_supported)
    throw Error(ErrorKind::Stale, origin + ": " + what + " format version " + std::to_string(ver) +
                                      " is too old; this kiln reads " + reads +
                                      ". Rebuild the package with this kiln.");
}

void check_cuda(const std::string& cuda, const std::string& origin, const std::string& field) {
  if (!is_cuda_version(cuda))
    fail(origin, field, "expected MAJOR.MINOR (e.g. 13.0), found '" + cuda + "'");
}

void check_common(const std::string& package, const std::string& package_version,
                  const std::string& origin) {
  if (!is_package_name(package))
    fail(origin, "package", std::string(kPackageNameRule) + ", found '" + package + "'");
  if (!is_package_version(package_version))
    fail(origin, "package_version",
         "expected MAJOR.MINOR.PATCH[-prerelease], found '" + package_version + "'");
}

// Newest toolkit first; a spelling that is not MAJOR.MINOR (never in a parsed index) last.
bool newer_toolkit(const std::string& a, const std::string& b) {
  auto x = parse_cuda_version(a), y = parse_cuda_version(b);
  if (x && y && !(*x == *y)) return *y < *x;
  if (x.has_value() != y.has_value()) return x.has_value();
  return a < b;
}

Target get_target(const Json& obj, const std::string& origin, const std::string& where) {
  std::string t = get_string(obj, "target", origin, where);
  auto parsed = canonical_target(t);
  if (!parsed)
    fail(origin, where + "target",
         "expected an SM target like sm_90a or compute_80, found '" + t + "'");
  return *parsed;
}

Json artifact_to_json(const ArtifactEntry& a) {
  Json params = Json::object();
  for (const auto& [k, v] : a.params) params[k] = v;
  Json entries = Json::array();
  for (const auto& e : a.entries) {
    Json je = Json::object();
    je["name"] = e.name;
    je["symbol"] = e.symbol;
    entries.push_back(std::move(je));
  }
  Json j = Json::object();
  j["uri"] = a.uri;
  j["family"] = a.family;
  j["params"] = std::move(params);
  j["entries"] = std::move(entries);
  j["source_hash"] = a.source_hash;
  j["flags"] = a.flags;
  j["file"] = a.file;
  j["size"] = a.size;
  j["sha256"] = a.sha256;
  return j;
}

ArtifactEntry artifact_from_json(const Json& j, const std::string& origin,
                                 const std::string& where) {
  if (!j.is_object()) fail(origin, where.substr(0, where.size() - 1), "expected an object");
  check_keys(j, kArtifactFields, origin, where);
  ArtifactEntry a;
  a.uri = get_string(j, "uri", origin, where);
  a.family = get_string(j, "family", origin, where);
  const Json& params = member(j, "params", origin, where);
  if (!params.is_object()) fail(origin, where + "params", "expected an object of strings");
  for (auto it = params.begin(); it != params.end(); ++it) {
    if (!it.value().is_string())
      fail(origin, where + "params." + it.key(),
           "expected a string, found " + quote_json(it.value()));
    a.params.emplace_back(it.key(), it.value().get<std::string>());
  }
  const Json& entries = member(j, "entries", origin, where);
  if (!entries.is_array() || entries.empty())
    fail(origin, where + "entries", "expected a non-empty array of {name, symbol}");
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string w = where + "entries[" + std::to_string(i) + "].";
    if (!entries[i].is_object()) fail(origin, w.substr(0, w.size() - 1), "expected an object");
    check_keys(entries[i], kEntryFields, origin, w);
    a.entries.push_back(
        {get_string(entries[i], "name", origin, w), get_string(entries[i], "symbol", origin, w)});
  }
  a.source_hash = get_sha256(j, "source_hash", origin, where);
  const Json& flags = member(j, "flags", origin, where);
  if (!flags.is_array()) fail(origin, where + "flags", "expected an array of strings");
  for (size_t i = 0; i < flags.size(); ++i) {
    if (!flags[i].is_string())
      fail(origin, where + "flags[" + std::to_string(i) + "]", "expected a string");
    a.flags.push_back(flags[i].get<std::string>());
  }
  a.file = get_string(j, "file", origin, where);
  if (!is_artifact_file_name(a.file))
    fail(
        origin, where + "file",
        "expected a plain file name (no '/', not '..', not manifest.json), found '" + a.file + "'");
  a.size = get_u64(j, "size", origin, where);
  a.sha256 = get_sha256(j, "sha256", origin, where);
  return a;
}

// ---- provenance (index format 4) ----

Json provenance_json(const Provenance& p) {
  Json o = Json::object();
  Json src = Json::object();
  src["commit"] = p.source_commit;
  src["dirty"] = p.source_dirty ? Json(*p.source_dirty) : Json(nullptr);
  o["source"] = std::move(src);
  o["kiln_version"] = p.kiln_version;
  Json tks = Json::array();
  for (const auto& t : p.toolkits) tks.push_back(Json{{"name", t.name}, {"version", t.version}});
  o["toolkits"] = std::move(tks);
  o["hosts"] = p.hosts;
  o["build_time"] = p.build_time;
  o["build_time_origin"] = p.build_time_origin;
  o["targets"] = p.targets;
  return o;
}

// A word a terminal may show as is: non-empty, at most 64 of [A-Za-z0-9._+-].
bool is_plain_word(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '+' || c == '-';
  });
}

std::vector<std::string> get_words(const Json& obj, const std::string& key, const std::string& origin,
                                   const std::string& where) {
  const Json& a = member(obj, key, origin, where);
  if (!a.is_array() || a.empty()) fail(origin, where + key, "expected a non-empty array of strings");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string at = where + key + "[" + std::to_string(i) + "]";
    if (!a[i].is_string() || !is_plain_word(a[i].get<std::string>()))
      fail(origin, at, "expected a word of at most 64 letters, digits and ._+-, found " + quote_json(a[i]));
    out.push_back(a[i].get<std::string>());
  }
  return out;
}

Provenance provenance_from_json(const Json& o, const std::string& origin) {
  const std::string w = "provenance.";
  if (!o.is_object()) fail(origin, "provenance", "expected an object");
  check_keys(o, kProvenanceFields, origin, w);
  Provenance p;
  const Json& src = member(o, "source", origin, w);
  if (!src.is_object()) fail(origin, w + "source", "expected an object");
  check_keys(src, kSourceFields, origin, w + "source.");
  p.source_commit = get_string(src, "commit", origin, w + "source.", /*allow_empty=*/true);
  const bool hex = std::all_of(p.source_commit.begin(), p.source_commit.end(),
                               [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  if (!p.source_commit.empty() && (!hex || (p.source_commit.size() != 40 && p.source_commit.size() != 64)))
    fail(origin, w + "source.commit",
         "expected a full git commit (40 or 64 lowercase hex digits) or \"\", found '" + p.source_commit + "'");
  const Json& dirty = member(src, "dirty", origin, w + "source.");
  if (dirty.is_boolean())
    p.source_dirty = dirty.get<bool>();
  else if (!dirty.is_null())
    fail(origin, w + "source.dirty", "expected true, false or null, found " + quote_json(dirty));
  if (p.source_commit.empty() && p.source_dirty)
    fail(origin, w + "source.dirty", "must be null when there is no commit");
  p.kiln_version = get_string(o, "kiln_version", origin, w);
  if (!is_package_version(p.kiln_version))
    fail(origin, w + "kiln_version", "expected MAJOR.MINOR.PATCH[-prerelease], found '" + p.kiln_version + "'");
  const Json& tks = member(o, "toolkits", origin, w);
  if (!tks.is_array() || tks.empty()) fail(origin, w + "toolkits", "expected a non-empty array");
  for (std::size_t i = 0; i < tks.size(); ++i) {
    const std::string at = w + "toolkits[" + std::to_string(i) + "]";
    if (!tks[i].is_object()) fail(origin, at, "expected an object");
    check_keys(tks[i], kToolkitFields, origin, at + ".");
    BuildTool t{get_string(tks[i], "name", origin, at + "."), get_string(tks[i], "version", origin, at + ".")};
    if (!is_plain_word(t.name)) fail(origin, at + ".name", "expected a tool name, found '" + t.name + "'");
    if (!is_plain_word(t.version))
      fail(origin, at + ".version", "expected a version, found '" + t.version + "'");
    if (!p.toolkits.empty() && !(std::tie(p.toolkits.back().name, p.toolkits.back().version) <
                                 std::tie(t.name, t.version)))
      fail(origin, at, "toolkits must be sorted by name and version, each once");
    p.toolkits.push_back(std::move(t));
  }
  p.hosts = get_words(o, "hosts", origin, w);
  for (std::size_t i = 1; i < p.hosts.size(); ++i)
    if (!(p.hosts[i - 1] < p.hosts[i]))
      fail(origin, w + "hosts", "hosts must be sorted, each once");
  const Json& bt = member(o, "build_time", origin, w);
  if (!bt.is_number_integer() || bt.get<std::int64_t>() < 0)
    fail(origin, w + "build_time", "expected seconds since the epoch, found " + quote_json(bt));
  p.build_time = bt.get<std::int64_t>();
  p.build_time_origin = get_string(o, "build_time_origin", origin, w);
  if (!field_index(kBuildTimeOrigins, p.build_time_origin))
    fail(origin, w + "build_time_origin",
         "expected one of " + util::join(kBuildTimeOrigins, ", ") + "; found '" + p.build_time_origin + "'");
  std::set<std::string> seen;
  for (const auto& t : get_words(o, "targets", origin, w)) {
    auto parsed = canonical_target(t);
    if (!parsed || parsed->str() != t)
      fail(origin, w + "targets", "expected SM targets like sm_90a or compute_80, found '" + t + "'");
    if (!seen.insert(t).second) fail(origin, w + "targets", "target '" + t + "' given twice");
    p.targets.push_back(t);
  }
  return p;
}

}  // namespace

namespace manifest_rules {

bool is_dotted_number(std::string_view s, int parts) {
  int seen = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i) return false;
    ++seen;
    if (j == s.size()) break;
    if (s[j] != '.') return false;
    i = j + 1;
    if (i == s.size()) return false;
  }
  return seen == parts;
}

bool is_plain_file_name(std::string_view s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string_view::npos &&
         s.find('\\') == std::string_view::npos && s.find('\0') == std::string_view::npos;
}

bool is_artifact_file_name(std::string_view s) {
  return is_plain_file_name(s) && s != "manifest.json";
}

std::optional<Target> canonical_target(std::string_view s) {
  auto t = parse_target(s);
  if (!t || t->str() != s) return std::nullopt;
  return t;
}

}  // namespace manifest_rules

// Package versions are MAJOR.MINOR.PATCH with an optional -prerelease (no build metadata: a
// '+' would not survive in wheel and URL names).
bool is_package_version(std::string_view sv) {
  std::string s(sv);
  size_t dash = s.find('-');
  std::string core = s.substr(0, dash);
  if (!is_dotted_number(core, 3)) return false;
  if (dash == std::string::npos) return true;
  std::string pre = s.substr(dash + 1);
  return !pre.empty() && std::all_of(pre.begin(), pre.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.';
  });
}

bool names_release_file(std::string_view file, std::string_view package, std::string_view version) {
  const std::size_t n = package.size() + 1 + version.size();
  return file.size() > n && file.substr(0, package.size()) == package &&
         file[package.size()] == '-' && file.substr(package.size() + 1, version.size()) == version &&
         (file[n] == '-' || file[n] == '.');
}

const ArtifactEntry* Manifest::find(std::string_view uri) const {
  for (const auto& a : artifacts)
    if (a.uri == uri) return &a;
  return nullptr;
}

std::string manifest_to_json(const Manifest& m) {
  std::vector<const ArtifactEntry*> arts;
  for (const auto& a : m.artifacts) arts.push_back(&a);
  std::stable_sort(arts.begin(), arts.end(),
                   [](const ArtifactEntry* x, const ArtifactEntry* y) { return x->uri < y->uri; });
  std::vector<const SkippedFamily*> skipped;
  for (const auto& s : m.skipped) skipped.push_back(&s);
  std::stable_sort(
      skipped.begin(), skipped.end(),
      [](const SkippedFamily* x, const SkippedFamily* y) { return x->family < y->family; });

  Json root = release_json_header("format", kMarker, m);
  root["target"] = m.target;
  root["build_time"] = m.build_time;
  Json ja = Json::array();
  for (const auto* a : arts) ja.push_back(artifact_to_json(*a));
  root["artifacts"] = std::move(ja);
  Json js = Json::array();
  for (const auto* s : skipped) {
    Json o = Json::object();
    o["family"] = s->family;
    o["reason"] = s->reason;
    js.push_back(std::move(o));
  }
  root["skipped"] = std::move(js);
  return root.dump(2) + "\n";
}

Manifest parse_manifest(std::string_view json_text, const std::string& origin) {
  // A key given twice is refused, not read as its last value: an artifact object that repeats
  // its keys would otherwise take another artifact's file under its own URI, and the loader's
  // lookup (manifest_entry.hpp), which refuses repeated keys, must agree with this reader.
  Json root = parse_root(json_text, origin, RepeatedKeys::refused);
  check_header(root, kMarker, kManifestFormat, "manifest", origin);
  check_keys(root, kRootFields, origin, "");
  Manifest m;
  m.format_version = root["format_version"].get<int>();
  m.package = get_string(root, "package", origin, "");
  m.package_version = get_string(root, "package_version", origin, "");
  m.git_commit = get_string(root, "git_commit", origin, "", /*allow_empty=*/true);
  m.cuda_version = get_string(root, "cuda_version", origin, "");
  check_common(m.package, m.package_version, origin);
  check_cuda(m.cuda_version, origin, "cuda_version");
  m.target = get_target(root, origin, "").str();
  const Json& bt = member(root, "build_time", origin, "");
  if (!bt.is_number_integer() || bt.get<std::int64_t>() < 0)
    fail(origin, "build_time", "expected seconds since the epoch, found " + quote_json(bt));
  m.build_time = bt.get<std::int64_t>();

  const Json& arts = member(root, "artifacts", origin, "");
  if (!arts.is_array()) fail(origin, "artifacts", "expected an array");
  std::set<std::string> uris, files;
  for (size_t i = 0; i < arts.size(); ++i) {
    std::string where = "artifacts[" + std::to_string(i) + "].";
    ArtifactEntry a = artifact_from_json(arts[i], origin, where);
    if (!uris.insert(a.uri).second) fail(origin, where + "uri", "duplicate uri '" + a.uri + "'");
    // Sorted, as written: a loader looks a URI up by binary search (manifest_entry.hpp).
    if (!m.artifacts.empty() && !(m.artifacts.back().uri < a.uri))
      fail(origin, where + "uri",
           "'" + a.uri + "' comes after '" + m.artifacts.back().uri +
               "': artifacts are sorted by uri");
    if (!files.insert(a.file).second)
      fail(origin, where + "file", "duplicate file '" + a.file + "'");
    m.artifacts.push_back(std::move(a));
  }
  const Json& skipped = member(root, "skipped", origin, "");
  if (!skipped.is_array()) fail(origin, "skipped", "expected an array");
  for (size_t i = 0; i < skipped.size(); ++i) {
    std::string where = "skipped[" + std::to_string(i) + "].";
    if (!skipped[i].is_object())
      fail(origin, "skipped[" + std::to_string(i) + "]", "expected an object");
    check_keys(skipped[i], kSkippedFields, origin, where);
    m.skipped.push_back({get_string(skipped[i], "family", origin, where),
                         get_string(skipped[i], "reason", origin, where)});
  }
  return m;
}

std::string index_to_json(const Index& idx) {
  std::vector<const IndexEntry*> arcs;
  for (const auto& a : idx.archives) arcs.push_back(&a);
  // Sorted by target as Target orders them (SASS first, then arch), then newest toolkit first,
  // file name as tie-break.
  std::stable_sort(arcs.begin(), arcs.end(), [](const IndexEntry* x, const IndexEntry* y) {
    auto tx = parse_target(x->target), ty = parse_target(y->target);
    if (tx && ty && !(*tx == *ty)) return *tx < *ty;
    if (x->target != y->target) return x->target < y->target;
    if (x->cuda_version != y->cuda_version) return newer_toolkit(x->cuda_version, y->cuda_version);
    return x->file < y->file;
  });
  const bool per_archive = idx.format_version >= kIndexFormatToolkitPerArchive;
  Json root = release_identity_header("format", kIndexMarker, idx);
  if (!per_archive) root["cuda_version"] = idx.archives.empty() ? "" : idx.archives.front().cuda_version;
  Json ja = Json::array();
  for (const auto* a : arcs) {
    Json o = Json::object();
    o["file"] = a->file;
    o["target"] = a->target;
    if (per_archive) o["cuda_version"] = a->cuda_version;
    o["size"] = a->size;
    o["sha256"] = a->sha256;
    ja.push_back(std::move(o));
  }
  root["archives"] = std::move(ja);
  if (idx.description) {
    Json d = Json::object();
    d["file"] = idx.description->file;
    d["size"] = idx.description->size;
    d["sha256"] = idx.description->sha256;
    root["description"] = std::move(d);
  }
  if (idx.provenance) root["provenance"] = provenance_json(*idx.provenance);
  return root.dump(2) + "\n";
}

std::vector<std::string> index_toolkits(const Index& idx) {
  std::vector<std::string> out;
  for (const auto& a : idx.archives)
    if (std::find(out.begin(), out.end(), a.cuda_version) == out.end()) out.push_back(a.cuda_version);
  std::sort(out.begin(), out.end(), newer_toolkit);
  return out;
}

std::string provenance_to_json(const Provenance& p) { return provenance_json(p).dump(2) + "\n"; }

Provenance parse_provenance(std::string_view json_text, const std::string& origin) {
  return provenance_from_json(parse_untrusted_json<Json>(json_text, origin, io::limits::kMaxJsonBytes,
                                                         RepeatedKeys::refused),
                              origin);
}

Index parse_index(std::string_view json_text, const std::string& origin) {
  Json root = parse_root(json_text, origin);
  check_header(root, kIndexMarker, kIndexFormat, "index", origin, kOldestIndexFormat);
  check_keys(root, kIndexFields, origin, "");
  Index idx;
  idx.format_version = root["format_version"].get<int>();
  idx.package = get_string(root, "package", origin, "");
  idx.package_version = get_string(root, "package_version", origin, "");
  idx.git_commit = get_string(root, "git_commit", origin, "", /*allow_empty=*/true);
  check_common(idx.package, idx.package_version, origin);
  // Before format 5 one toolkit built the whole release and the index said which at the top;
  // from 5 each archive says its own, and the top-level field is refused.
  const bool per_archive = idx.format_version >= kIndexFormatToolkitPerArchive;
  std::string release_cuda;
  if (per_archive) {
    if (root.contains("cuda_version"))
      fail(origin, "cuda_version",
           "not a field of index format " + std::to_string(idx.format_version) +
               " (up to 4; from 5 on each archive has its own)");
  } else {
    release_cuda = get_string(root, "cuda_version", origin, "");
    check_cuda(release_cuda, origin, "cuda_version");
  }
  const Json& arcs = member(root, "archives", origin, "");
  if (!arcs.is_array()) fail(origin, "archives", "expected an array");
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t i = 0; i < arcs.size(); ++i) {
    std::string where = "archives[" + std::to_string(i) + "].";
    if (!arcs[i].is_object())
      fail(origin, "archives[" + std::to_string(i) + "]", "expected an object");
    if (per_archive)
      check_keys(arcs[i], kIndexArchiveFields, origin, where);
    else
      check_keys(arcs[i], kIndexArchiveFieldsBefore5, origin, where);
    IndexEntry e;
    e.file = get_string(arcs[i], "file", origin, where);
    e.target = get_target(arcs[i], origin, where).str();
    if (per_archive) {
      e.cuda_version = get_string(arcs[i], "cuda_version", origin, where);
      check_cuda(e.cuda_version, origin, where + "cuda_version");
    } else {
      e.cuda_version = release_cuda;
    }
    e.size = get_u64(arcs[i], "size", origin, where);
    e.sha256 = get_sha256(arcs[i], "sha256", origin, where);
    // The name is derived from the fields, so an entry cannot point at another target's or
    // another toolkit's archive or at a path outside the index's directory.
    std::string expected =
        archive_file_name(idx.package, idx.package_version, e.cuda_version, e.target);
    if (e.file != expected)
      fail(origin, where + "file", "expected '" + expected + "', found '" + e.file + "'");
    if (!seen.insert({e.cuda_version, e.target}).second)
      fail(origin, where + "target",
           per_archive ? "duplicate target '" + e.target + "' of CUDA " + e.cuda_version
                       : "duplicate target '" + e.target + "'");
    idx.archives.push_back(std::move(e));
  }
  if (root.contains("description")) {
    if (idx.format_version < 3)
      fail(origin, "description",
           "not a field of index format " + std::to_string(idx.format_version) + " (from 3 on)");
    const Json& d = root["description"];
    if (!d.is_object()) fail(origin, "description", "expected an object");
    check_keys(d, kIndexFileFields, origin, "description.");
    IndexFile f;
    f.file = get_string(d, "file", origin, "description.");
    f.size = get_u64(d, "size", origin, "description.");
    f.sha256 = get_sha256(d, "sha256", origin, "description.");
    // Derived from the package and version, as archive names are: never a path elsewhere.
    std::string expected = description_file_name(idx.package, idx.package_version);
    if (f.file != expected)
      fail(origin, "description.file", "expected '" + expected + "', found '" + f.file + "'");
    idx.description = std::move(f);
  }
  if (idx.format_version >= 4) {
    idx.provenance = provenance_from_json(member(root, "provenance", origin, ""), origin);
  } else if (root.contains("provenance")) {
    fail(origin, "provenance",
         "not a field of index format " + std::to_string(idx.format_version) + " (from 4 on)");
  }
  return idx;
}

std::optional<std::string_view> release_name_package(std::string_view name) {
  if (name.find('/') != std::string_view::npos) return std::nullopt;
  for (std::size_t dash = name.find('-'); dash != std::string_view::npos;
       dash = name.find('-', dash + 1)) {
    if (dash + 1 < name.size() && name[dash + 1] >= '0' && name[dash + 1] <= '9') {
      std::string_view pkg = name.substr(0, dash);
      if (is_package_name(pkg)) return pkg;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<ReleaseOfFile> release_of_file_name(std::string_view name, std::string_view suffix) {
  if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix)
    return std::nullopt;
  std::string_view stem = name.substr(0, name.size() - suffix.size());
  std::optional<std::string_view> package = release_name_package(stem);
  if (!package) return std::nullopt;
  std::string_view version = stem.substr(package->size() + 1);
  if (!is_package_version(version)) return std::nullopt;
  return ReleaseOfFile{std::string(*package), std::string(version)};
}

bool is_package_name(std::string_view s) {
  if (s.empty() || s.size() > kMaxPackageNameLength) return false;
  if (s == "kiln") return false;  // kiln-<version>-... names kiln's own tarballs and checksums
  bool segment_start = true;
  for (char c : s) {
    bool lower = c >= 'a' && c <= 'z', digit = c >= '0' && c <= '9';
    if (segment_start) {
      if (!lower) return false;
      segment_start = false;
    } else if (c == '-') {
      segment_start = true;
    } else if (!lower && !digit) {
      return false;
    }
  }
  return !segment_start;
}

std::string archive_stem(std::string_view package, std::string_view version, std::string_view cuda,
                         std::string_view target) {
  return std::string(package) + "-" + std::string(version) + "-cuda" + std::string(cuda) + "-" +
         std::string(target);
}

std::string archive_file_name(std::string_view package, std::string_view version,
                              std::string_view cuda, std::string_view target) {
  return archive_stem(package, version, cuda, target) + ".tar.zst";
}

std::string index_file_name(std::string_view package, std::string_view version) {
  return std::string(package) + "-" + std::string(version) + "-index.json";
}

std::string description_file_name(std::string_view package, std::string_view version) {
  return std::string(package) + "-" + std::string(version) + ".package.json";
}

}  // namespace kiln::format
