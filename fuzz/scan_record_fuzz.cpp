// The scan record (core/store/scan_record.hpp): a file in the loader's cache directory that a
// later process trusts for a store's listing and, per manifest, a ManifestLayout that lets
// ManifestEntries::read_with_layout (core/format/manifest_entry.cpp) skip checking every artifact.
// The file can be forged or corrupted, so two things are checked over any bytes:
//
// 1. parse_scan_record never crashes; what it accepts is for the asked package and store, its
//    names are archive directory names of the package, sorted and unique, every manifest is one
//    of them, and format_scan_record gives a text that parses back to the same record.
// 2. No layout makes the loader see another entry than the manifest's own. For the genuine
//    manifest text M below, read_with_layout(M, layout) gives nullptr, or a reader whose header
//    is M's and whose for_uri(u), for every URI of M and every URI the layout's spans name,
//    lists no artifact that is not M's own entry for its URI (parse_manifest's, compared as
//    canonical JSON and params). It never throws: M is valid.
//
// Layouts come from every manifest of an accepted record and, for bytes that are not a record,
// from the bytes themselves (layout_from_bytes), so the fuzzer reaches read_with_layout without
// first having to spell a whole record.
//
//   scan_record_fuzz --write-seeds=DIR    writes the seeds of fuzz/corpus/scan_record/ to DIR
//                                         (fuzz/corpus/make_seeds.sh) and exits
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/manifest.hpp"
#include "format/manifest_entry.hpp"
#include "fuzz_util.hpp"
#include "store/scan_record.hpp"
#include "store/store_scan.hpp"

namespace {

using namespace kiln;

const std::string kPackage = "kiln-kernels";
const std::string kStore = "/srv/kiln/store";
const std::string kManifestDir = "kiln-kernels-0.1.0-cuda13.0-sm_80";
const std::string kOrigin = kStore + "/" + kManifestDir + "/manifest.json";

// Every field of `m` (artifacts: only `only`, if any), as canonical JSON, as
// manifest_entry_fuzz.cpp compares them (params also compared as a list by the caller).
std::string canonical(Manifest m, const ArtifactEntry* only = nullptr) {
  m.artifacts.clear();
  if (only) m.artifacts.push_back(*only);
  return manifest_to_json(m);
}

ArtifactEntry artifact(std::string uri, std::vector<std::pair<std::string, std::string>> params,
                       std::vector<std::string> flags, char hash_digit) {
  ArtifactEntry a;
  a.family = "axpy";
  a.params = std::move(params);
  a.entries = {{"kiln::axpy_kernel<float>", "_ZN4kiln11axpy_kernelIfEEvxfPKT_PS1_"}};
  a.source_hash = std::string(64, hash_digit);
  a.flags = std::move(flags);
  a.file = uri + ".fatbin";
  a.size = 7032;
  a.sha256 = std::string(64, 'e');
  a.uri = std::move(uri);
  return a;
}

// M: a manifest kiln could have written (manifest_to_json, which the strict reader accepts
// whole), built here so that the target needs no file. Its text is made to give a forged layout
// room: each URI also appears as a value inside another artifact's object (a flag, a param, a
// family), so a span can name a URI while lying over the wrong object; "axpy" is a prefix of the
// others (the sorted-spans check and the binary search); and flags hold "{", "}", "[" and "]",
// so spans can start and end inside strings.
std::string genuine_manifest_text() {
  Manifest m;
  m.package = kPackage;
  m.package_version = "0.1.0";
  m.git_commit = "0123abc";
  m.cuda_version = "13.0";
  m.target = "sm_80";
  m.build_time = 1700000000;
  m.artifacts.push_back(artifact("axpy", {{"dtype", "axpy_dtype_f16"}}, {"-O3", "{", "}"}, 'a'));
  m.artifacts.push_back(artifact("axpy_dtype_f16", {{"dtype", "f16"}, {"uri", "axpy"}},
                                 {"-O3", "axpy_dtype_f32", "[", "]"}, 'b'));
  m.artifacts.push_back(artifact("axpy_dtype_f32", {{"dtype", "f32"}},
                                 {"-O3", "{uri: ", "axpy_dtype_f16", "}"}, 'c'));
  m.skipped.push_back({"hopper_wgmma", "supports only sm_90a"});
  return manifest_to_json(m);
}

struct GenuineEntry {
  std::string json;  // canonical(manifest, &entry)
  std::vector<std::pair<std::string, std::string>> params;
};

// M, and what the loader must see in it: ManifestEntries::read's header and entries (checked
// against parse_manifest's once, at start-up, so that a bug there does not pass for the truth).
struct Genuine {
  std::string text;
  Manifest parsed;
  std::shared_ptr<const ManifestEntries> entries;
  ManifestLayout layout;
  std::string header;
  std::map<std::string, GenuineEntry, std::less<>> by_uri;
};

Genuine make_genuine() {
  Genuine g;
  g.text = genuine_manifest_text();
  fuzz::refuses_cleanly(
      [&] {
        g.parsed = parse_manifest(g.text, kOrigin);
        g.entries = ManifestEntries::read(std::string(g.text), kOrigin);
      },
      {});
  // A text outside the strict reader's subset would leave no layout to fuzz with.
  if (!g.entries->strict() || !g.entries->layout())
    fuzz::finding("M is not read by the strict reader:\n" + g.text);
  g.layout = *g.entries->layout();
  g.header = canonical(g.entries->header());
  if (g.header != canonical(g.parsed)) fuzz::finding("read(M)'s header is not parse_manifest's");
  for (const ArtifactEntry& want : g.parsed.artifacts) {
    auto m = g.entries->for_uri(want.uri);
    const ArtifactEntry* e = m->find(want.uri);
    if (!e || canonical(*m, e) != canonical(g.parsed, &want) || e->params != want.params)
      fuzz::finding("read(M) gives another entry than parse_manifest for '" + want.uri + "'");
    g.by_uri[want.uri] = {canonical(*m, e), e->params};
  }
  return g;
}

const Genuine& genuine() {
  static const Genuine g = make_genuine();
  return g;
}

// What the loader sees for `uri` through `got` must be M's: its header, and at most one
// artifact, M's own entry for `uri` (M is read strictly, so for_uri lists uri's entry only).
void check_for_uri(const ManifestEntries& got, const std::string& uri) {
  const Genuine& g = genuine();
  std::shared_ptr<const Manifest> m;
  fuzz::refuses_cleanly([&] { m = got.for_uri(uri); }, {});
  if (!m) fuzz::finding("for_uri('" + uri + "') gave no manifest");
  if (canonical(*m) != g.header)
    fuzz::finding("for_uri('" + uri + "') gave another header: " + canonical(*m));
  if (m->artifacts.size() > 1 || (m->artifacts.size() == 1 && m->artifacts[0].uri != uri))
    fuzz::finding("for_uri('" + uri +
                  "') lists another artifact than uri's: " + manifest_to_json(*m));
  for (const ArtifactEntry& a : m->artifacts) {
    auto want = g.by_uri.find(a.uri);
    if (want == g.by_uri.end())
      fuzz::finding("for_uri('" + uri + "') lists '" + a.uri + "', which M does not");
    if (canonical(*m, &a) != want->second.json || a.params != want->second.params)
      fuzz::finding("for_uri('" + uri + "') gives another entry for '" + a.uri +
                    "': " + canonical(*m, &a));
  }
}

// Property 2 for one layout. for_uri changes state (an artifact whose span does not read as
// recorded makes the reader read M whole from then on), so the URIs are asked of two readers in
// two orders: the layout's own URIs first (forged spans read before any fallback), then M's
// first.
void check_layout(const ManifestLayout& layout) {
  const Genuine& g = genuine();
  auto read = [&] {
    std::shared_ptr<const ManifestEntries> got;
    fuzz::refuses_cleanly(
        [&] { got = ManifestEntries::read_with_layout(g.text, kOrigin, layout); }, {});
    if (got && canonical(got->header()) != g.header)
      fuzz::finding("read_with_layout gave another header: " + canonical(got->header()));
    return got;
  };
  auto first = read();
  if (!first) return;
  for (const ArtifactSpan& s : layout.spans)
    if (s.uri_pos > g.text.size() || s.uri_len > g.text.size() - s.uri_pos)
      fuzz::finding("read_with_layout took a span whose URI lies outside the text");
  const std::vector<std::string>& span_uris = layout.uris;
  for (const std::string& u : span_uris) check_for_uri(*first, u);
  for (const auto& [u, e] : g.by_uri) check_for_uri(*first, u);
  auto second = read();
  if (!second) fuzz::finding("read_with_layout accepted a layout once, not twice");
  for (const auto& [u, e] : g.by_uri) check_for_uri(*second, u);
  for (auto it = span_uris.rbegin(); it != span_uris.rend(); ++it) check_for_uri(*second, *it);
}

// Bytes that are not a record, read as a layout: little-endian 16-bit numbers (an odd last byte
// dropped): artifacts_begin, artifacts_end, then four per span in the record's order (begin,
// end, uri_pos, uri_len; an incomplete last group dropped). 16 bits span M many times over, and
// 0xfff0..0xffff stand for SIZE_MAX-15..SIZE_MAX so that sums that could wrap are reached too.
// Each span's URI (which read_with_layout looks up) is M's bytes at uri_pos/uri_len when they lie
// in M, else empty (refused). Fewer than 4 bytes: no layout.
std::optional<ManifestLayout> layout_from_bytes(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return std::nullopt;
  auto number = [&](std::size_t i) -> std::size_t {
    unsigned v = data[2 * i] | static_cast<unsigned>(data[2 * i + 1]) << 8;
    if (v >= 0xfff0) return std::numeric_limits<std::size_t>::max() - (0xffff - v);
    return v;
  };
  ManifestLayout layout;
  layout.artifacts_begin = number(0);
  layout.artifacts_end = number(1);
  for (std::size_t i = 2; i + 4 <= size / 2; i += 4) {
    ArtifactSpan s;
    s.begin = number(i);
    s.end = number(i + 1);
    s.uri_pos = number(i + 2);
    s.uri_len = number(i + 3);
    layout.spans.push_back(s);
    const std::string& m = genuine().text;
    layout.uris.push_back(s.uri_pos <= m.size() && s.uri_len <= m.size() - s.uri_pos
                              ? m.substr(s.uri_pos, s.uri_len)
                              : std::string());
  }
  return layout;
}

std::string layout_to_bytes(const ManifestLayout& layout) {
  std::string out;
  auto put = [&](std::size_t v) {
    if (v >= 0xfff0) fuzz::finding("a seed layout number does not fit 16 bits");
    out += static_cast<char>(v & 0xff);
    out += static_cast<char>(v >> 8);
  };
  put(layout.artifacts_begin);
  put(layout.artifacts_end);
  for (const ArtifactSpan& s : layout.spans) {
    put(s.begin);
    put(s.end);
    put(s.uri_pos);
    put(s.uri_len);
  }
  return out;
}

// Property 1 for bytes parse_scan_record accepted.
void check_record(const ScanRecord& r) {
  if (r.package != kPackage || r.store != kStore)
    fuzz::finding("accepted a record for '" + r.package + "' at '" + r.store + "'");
  for (std::size_t i = 0; i < r.names.size(); ++i) {
    if (!is_archive_dir_name(r.names[i], kPackage))
      fuzz::finding("accepted the name '" + r.names[i] + "'");
    if (i > 0 && !(r.names[i - 1] < r.names[i]))
      fuzz::finding("names not sorted and unique at '" + r.names[i] + "'");
  }
  for (const auto& [name, m] : r.manifests)
    if (!std::binary_search(r.names.begin(), r.names.end(), name))
      fuzz::finding("a manifest of '" + name + "', which is not among the names");
  std::optional<std::string> text = format_scan_record(r);
  if (!text) fuzz::finding("format_scan_record refuses an accepted record");
  std::optional<ScanRecord> back = parse_scan_record(*text, kPackage, kStore);
  if (!back || !(*back == r)) fuzz::finding("the formatted record does not read back:\n" + *text);
}

// The seeds' records: M's real layout, and one forged over M.
ScanRecord seed_record(std::vector<std::string> names) {
  ScanRecord r;
  r.package = kPackage;
  r.store = kStore;
  r.dir = {2049, 1310721, 4096, 1700000000123456789, 1700000000123456789};
  r.names = std::move(names);
  return r;
}

// M's layout with the span of "axpy_dtype_f16"'s object naming instead the "axpy_dtype_f32"
// flag inside it, and the real "axpy_dtype_f32" span dropped (the spans stay sorted, each URI
// once): read_with_layout takes it, and for_uri("axpy_dtype_f32") must not read the f16 object.
ManifestLayout forged_layout() {
  const Genuine& g = genuine();
  ManifestLayout forged = g.layout;
  forged.spans.clear();
  for (ArtifactSpan s : g.layout.spans) {
    std::string_view uri = s.uri(g.text);
    if (uri == "axpy_dtype_f32") continue;
    if (uri == "axpy_dtype_f16") {
      std::size_t flag = g.text.find("\"axpy_dtype_f32\"", s.begin);
      if (flag == std::string::npos || flag >= s.end) fuzz::finding("M lost its f32 flag");
      s.uri_pos = flag + 1;
      s.uri_len = 14;
    }
    forged.spans.push_back(s);
  }
  forged.uris.clear();
  for (const ArtifactSpan& s : forged.spans) forged.uris.emplace_back(s.uri(g.text));
  return forged;
}

void write_seeds(const std::string& dir) {
  const Genuine& g = genuine();
  const std::vector<std::string> names = {"kiln-kernels-0.1.0-cuda13.0-compute_80", kManifestDir,
                                          "kiln-kernels-0.1.0-cuda13.0-sm_90a"};
  ScanRecord real = seed_record(names);
  real.manifests[kManifestDir] = {{2049, 1310722, static_cast<std::int64_t>(g.text.size()),
                                   1700000000000000000, 1700000000000000001},
                                  g.layout};
  ScanRecord forged = real;
  forged.manifests["kiln-kernels-0.1.0-cuda13.0-sm_90a"] = {{2049, 1310723, 0, -1, 0},
                                                            forged_layout()};
  // The "skipped" array's brackets given as the artifacts array (refused: it is not the root's
  // "artifacts"; an earlier reader took it and read M with nothing skipped and nothing listed).
  ManifestLayout on_skipped;
  on_skipped.artifacts_begin = g.text.find('[', g.text.find("\"skipped\""));
  on_skipped.artifacts_end = g.text.find(']', on_skipped.artifacts_begin) + 1;
  const std::vector<std::pair<std::string, std::string>> seeds = {
      {"record-genuine-layout", format_scan_record(real).value()},
      {"record-forged-layout", format_scan_record(forged).value()},
      {"record-names-only", format_scan_record(seed_record(names)).value()},
      {"record-empty-store", format_scan_record(seed_record({})).value()},
      {"layout-bytes-genuine", layout_to_bytes(g.layout)},
      {"layout-bytes-forged", layout_to_bytes(forged_layout())},
      {"layout-bytes-skipped-array", layout_to_bytes(on_skipped)},
  };
  for (const auto& [name, bytes] : seeds) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out << bytes;
    if (!out.flush()) fuzz::finding("cannot write " + dir + "/" + name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const std::string flag = "--write-seeds=";
  for (int i = 1; i < *argc; ++i) {
    std::string_view arg = (*argv)[i];
    if (arg.compare(0, flag.size(), flag) == 0) {
      write_seeds(std::string(arg.substr(flag.size())));
      std::exit(0);
    }
  }
  // The properties must hold for M's own layout and for the seeds' forged one, read as they
  // would be: otherwise the target checks nothing.
  const Genuine& g = genuine();
  auto real = ManifestEntries::read_with_layout(std::string(g.text), kOrigin, g.layout);
  auto forged = ManifestEntries::read_with_layout(std::string(g.text), kOrigin, forged_layout());
  if (!real || !forged) fuzz::finding("read_with_layout refuses M's own or the forged layout");
  check_layout(g.layout);
  check_layout(forged_layout());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<ScanRecord> record = parse_scan_record(fuzz::as_text(data, size), kPackage, kStore);
  if (record) {
    check_record(*record);
    for (const auto& [name, m] : record->manifests) check_layout(m.layout);
  } else if (std::optional<ManifestLayout> layout = layout_from_bytes(data, size)) {
    check_layout(*layout);
  }
  return 0;
}
