// Checking a wheel as pip would read it: its name, .dist-info (WHEEL, METADATA, RECORD) and
// every member's digest and size; and reading the manifests inside (wheel.hpp: verify_wheel,
// wheel_manifests).
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "store/store.hpp"
#include "util/join.hpp"
#include "wheel/wheel.hpp"
#include "wheel/wheel_paths.hpp"

namespace kiln::wheel {
namespace fs = std::filesystem;

namespace {

constexpr const char* kManifestName = "manifest.json";

// ---- wheel file names and metadata files

struct WheelName {
  std::string name;
  std::string version;
  std::set<std::string> tags;  // expanded "py-abi-plat"
};

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t at = s.find(sep, start);
    out.emplace_back(s.substr(start, at == std::string_view::npos ? s.npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

std::optional<WheelName> parse_wheel_file_name(const std::string& file) {
  const std::string ext = ".whl";
  if (file.size() <= ext.size() || file.compare(file.size() - ext.size(), ext.size(), ext) != 0)
    return std::nullopt;
  auto parts = split(std::string_view(file).substr(0, file.size() - ext.size()), '-');
  if (parts.size() != 5 && parts.size() != 6) return std::nullopt;
  for (const auto& p : parts)
    if (p.empty()) return std::nullopt;
  WheelName w;
  w.name = parts[0];
  w.version = parts[1];
  std::size_t t = parts.size() - 3;
  for (const auto& py : split(parts[t], '.'))
    for (const auto& abi : split(parts[t + 1], '.'))
      for (const auto& plat : split(parts[t + 2], '.')) w.tags.insert(py + "-" + abi + "-" + plat);
  return w;
}

// "Key: Value" lines up to the first blank line (the METADATA body follows it).
std::multimap<std::string, std::string> parse_headers(const std::string& text) {
  std::multimap<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) break;
    auto colon = line.find(':');
    if (colon == std::string::npos || line[0] == ' ' || line[0] == '\t') continue;
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
    out.emplace(line.substr(0, colon), value);
  }
  return out;
}

std::optional<std::string> header(const std::multimap<std::string, std::string>& h,
                                  const std::string& key) {
  auto it = h.find(key);
  if (it == h.end()) return std::nullopt;
  return it->second;
}

// One RECORD row as the csv module writes and reads it: comma-separated, fields with a comma
// or quote in double quotes, quotes doubled. nullopt for a malformed row.
std::optional<std::vector<std::string>> parse_csv_row(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"' && fields.back().empty()) {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) return std::nullopt;
  return fields;
}

}  // namespace

std::vector<WheelProblem> verify_wheel(const fs::path& whl) {
  std::vector<WheelProblem> problems;
  const std::string w = whl.string();
  auto add = [&](const std::string& file, const std::string& what) {
    problems.push_back({file, what});
  };
  const std::string file_name = whl.filename().string();
  std::optional<WheelName> wn = parse_wheel_file_name(file_name);
  if (!wn)
    add(w, "file name '" + file_name +
               "' is not <name>-<version>[-<build>]-<python>-<abi>-<platform>.whl");

  std::vector<WheelFile> files;
  try {
    files = read_zip(whl);
  } catch (const Error& e) {
    add(w, e.what());
    return problems;
  }

  std::map<std::string, const WheelFile*> by_path;
  std::set<std::string> dist_infos;
  for (const auto& f : files) {
    const std::string where = w + ":" + f.path;
    if (!is_plain_path(f.path))
      add(where, "path is absolute, holds '..' or '.', a backslash or an empty part");
    if (!by_path.emplace(f.path, &f).second) add(where, "appears more than once in the zip");
    auto slash = f.path.find('/');
    std::string top = f.path.substr(0, slash);
    const std::string sfx = ".dist-info";
    if (slash != std::string::npos && top.size() > sfx.size() &&
        top.compare(top.size() - sfx.size(), sfx.size(), sfx) == 0)
      dist_infos.insert(top);
  }
  if (dist_infos.size() != 1) {
    std::string names = util::join(dist_infos, ", ");
    add(w, "holds " + std::to_string(dist_infos.size()) + " .dist-info directories" +
               (names.empty() ? "" : " (" + names + ")") + ", expected exactly one");
    return problems;
  }
  const std::string di = *dist_infos.begin();
  if (wn) {
    const std::string expected = wn->name + "-" + wn->version + ".dist-info";
    const std::string base = di.substr(0, di.size() - std::string(".dist-info").size());
    auto dash = base.rfind('-');
    std::string di_name = base.substr(0, dash == std::string::npos ? 0 : dash);
    std::string di_version = dash == std::string::npos ? "" : base.substr(dash + 1);
    if (wheel_name_component(di_name) != wheel_name_component(wn->name) ||
        di_version != wn->version)
      add(w + ":" + di, "does not match the file name, which needs " + expected);
  }

  auto find = [&](const std::string& name) -> const WheelFile* {
    auto it = by_path.find(di + "/" + name);
    if (it == by_path.end()) {
      add(w, di + "/" + name + " is missing");
      return nullptr;
    }
    return it->second;
  };

  if (const WheelFile* wheel_file = find("WHEEL")) {
    const std::string where = w + ":" + wheel_file->path;
    auto h = parse_headers(wheel_file->data);
    auto version = header(h, "Wheel-Version");
    if (!version)
      add(where, "has no Wheel-Version");
    else if (version->rfind("1.", 0) != 0)
      add(where, "Wheel-Version is " + *version + ", this kiln reads 1.x");
    auto purelib = header(h, "Root-Is-Purelib");
    if (!purelib || (*purelib != "true" && *purelib != "false"))
      add(where, "Root-Is-Purelib must be true or false");
    std::set<std::string> tags;
    for (auto [it, end] = h.equal_range("Tag"); it != end; ++it) tags.insert(it->second);
    if (tags.empty()) add(where, "has no Tag");
    if (wn && !tags.empty() && tags != wn->tags) {
      add(where, "tags " + util::join(tags, ", ") + " differ from the file name's " +
                     util::join(wn->tags, ", "));
    }
  }
  if (const WheelFile* metadata = find("METADATA")) {
    const std::string where = w + ":" + metadata->path;
    auto h = parse_headers(metadata->data);
    if (!header(h, "Metadata-Version")) add(where, "has no Metadata-Version");
    auto name = header(h, "Name");
    auto version = header(h, "Version");
    if (!name)
      add(where, "has no Name");
    else if (wn && wheel_name_component(*name) != wheel_name_component(wn->name))
      add(where, "Name is " + *name + ", the file name says " + wn->name);
    if (!version)
      add(where, "has no Version");
    else if (wn && *version != wn->version)
      add(where, "Version is " + *version + ", the file name says " + wn->version);
  }

  const std::string record_path = di + "/RECORD";
  const WheelFile* record = find("RECORD");
  if (!record) return problems;
  const std::string rw = w + ":" + record_path;
  std::set<std::string> listed;
  std::istringstream in(record->data);
  std::string line;
  int row = 0;
  while (std::getline(in, line)) {
    ++row;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string at = rw + " row " + std::to_string(row);
    auto fields = parse_csv_row(line);
    if (!fields || fields->size() != 3) {
      add(at, "is not path,hash,size");
      continue;
    }
    const std::string& path = (*fields)[0];
    const std::string& hash = (*fields)[1];
    const std::string& size = (*fields)[2];
    if (!is_plain_path(path)) add(at, "path '" + path + "' is absolute or holds '..'");
    if (!listed.insert(path).second) {
      add(at, path + " is listed more than once");
      continue;
    }
    if (path == record_path) continue;  // RECORD cannot hold its own digest
    auto it = by_path.find(path);
    if (it == by_path.end()) {
      add(at, path + " is listed but not in the wheel");
      continue;
    }
    const std::string& data = it->second->data;
    const std::string fw = w + ":" + path;
    if (size != std::to_string(data.size()))
      add(fw, "size is " + std::to_string(data.size()) + " bytes, RECORD says '" + size + "'");
    if (hash.rfind("sha256=", 0) != 0) {
      add(fw, "RECORD hash '" + hash + "' is not sha256=... (kiln checks sha256)");
      continue;
    }
    std::string actual = record_hash(data);
    if (hash != actual) add(fw, "hash is " + actual + ", RECORD says " + hash);
  }
  if (!listed.count(record_path)) add(rw, "does not list itself (" + record_path + ",,)");
  for (const auto& f : files) {
    // Signatures of RECORD cannot be listed in it (binary distribution format).
    if (f.path == di + "/RECORD.jws" || f.path == di + "/RECORD.p7s") continue;
    if (!listed.count(f.path)) add(w + ":" + f.path, "is not listed in RECORD");
  }
  return problems;
}

namespace {

// The entries of one [group] of an entry_points.txt: (name, value) in file order.
std::vector<std::pair<std::string, std::string>> entry_points(const std::string& text,
                                                              const std::string& group) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line;
  bool inside = false;
  // One pass each way: entry_points.txt comes from an untrusted wheel, and erasing a leading
  // blank at a time is quadratic in a long run of them.
  auto trim = [](const std::string& v) {
    const char* blanks = " \t\r\n\f\v";
    std::size_t b = v.find_first_not_of(blanks);
    return b == std::string::npos ? std::string() : v.substr(b, v.find_last_not_of(blanks) - b + 1);
  };
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      inside = trim(line.substr(1, line.size() - 2)) == group;
      continue;
    }
    auto eq = line.find('=');
    if (inside && eq != std::string::npos)
      out.emplace_back(trim(line.substr(0, eq)), trim(line.substr(eq + 1)));
  }
  return out;
}

}  // namespace

std::optional<PackageWheel> read_package_wheel(const fs::path& whl) {
  const std::string w = whl.string();
  auto files = read_zip(whl);
  const WheelFile* entry_points_file = nullptr;
  const WheelFile* metadata = nullptr;
  for (const auto& f : files) {
    auto parts = split(f.path, '/');
    if (parts.size() != 2 || parts[0].size() < 11 ||
        parts[0].compare(parts[0].size() - 10, 10, ".dist-info") != 0)
      continue;
    if (parts[1] == "entry_points.txt") entry_points_file = &f;
    if (parts[1] == "METADATA") metadata = &f;
  }
  if (!entry_points_file) return std::nullopt;
  auto entries = entry_points(entry_points_file->data, kPackagesEntryPointGroup);
  if (entries.empty()) return std::nullopt;
  if (entries.size() > 1)
    throw Error(ErrorKind::Format, w + ": " + entry_points_file->path + " names " +
                                       std::to_string(entries.size()) + " " +
                                       kPackagesEntryPointGroup + " entries, a package wheel one");
  PackageWheel out;
  out.package = entries[0].first;
  const std::string module = entries[0].second;
  if (metadata) {
    auto h = parse_headers(metadata->data);
    out.version = header(h, "Version").value_or("");
    for (auto [it, end] = h.equal_range("Requires-Dist"); it != end; ++it) {
      const std::string& r = it->second;
      if (r.rfind("kiln", 0) == 0 && r.size() > 4 && r.find_first_of(" <>=!~(", 4) == 4)
        out.runtime_requirement = r;
    }
  }
  int found = 0;
  for (const auto& f : files) {
    auto parts = split(f.path, '/');
    const std::string sfx = ".package.json";
    if (parts.size() == 2 && parts[0] == module && parts[1].size() > sfx.size() &&
        parts[1].compare(parts[1].size() - sfx.size(), sfx.size(), sfx) == 0) {
      ++found;
      out.description_path = f.path;
      out.description = f.data;
    }
  }
  if (found != 1)
    throw Error(ErrorKind::Format, w + ": a package wheel holds one " + module +
                                       "/<name>-<version>.package.json, this one " +
                                       std::to_string(found));
  return out;
}

std::vector<format::Manifest> wheel_manifests(const fs::path& whl) {
  auto files = read_zip(whl);
  std::sort(files.begin(), files.end(),
            [](const WheelFile& a, const WheelFile& b) { return a.path < b.path; });
  std::vector<format::Manifest> out;
  for (const auto& f : files) {
    auto parts = split(f.path, '/');
    if (parts.size() != 4 || parts[1] != "artifacts" || parts[3] != kManifestName) continue;
    const std::string origin = whl.string() + ":" + f.path;
    format::Manifest m = format::parse_manifest(f.data, origin);
    std::string stem = format::archive_stem(m.package, m.package_version, m.cuda_version, m.target);
    if (parts[2] != stem)
      throw Error(ErrorKind::Format, origin + ": directory " + parts[2] +
                                         " does not match the manifest, which names " + stem);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace kiln::wheel
