// The package description as a JSON file (package_description.hpp has the grammar).
#include "project/package_description.hpp"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "format/manifest.hpp"
#include "format/untrusted_json.hpp"
#include "io/atomic_file.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "util/field_error.hpp"

namespace kiln::project {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr const char* kSuffix = ".package.json";

using util::fail;

// The members of `object` (named `where` in messages), each in `allowed`, every one present.
void require_exactly(const Json& object, const std::string& origin, const std::string& where,
                     std::initializer_list<const char*> fields) {
  if (!object.is_object()) fail(origin, where, "expected a JSON object");
  for (auto it = object.begin(); it != object.end(); ++it)
    if (std::none_of(fields.begin(), fields.end(), [&](const char* f) { return it.key() == f; }))
      fail(origin, where + (where.empty() ? "" : ".") + it.key(), "unknown field");
  for (const char* f : fields)
    if (!object.contains(f)) fail(origin, where + (where.empty() ? "" : ".") + f, "missing");
}

const std::string& string_at(const Json& object, const char* key, const std::string& origin,
                             const std::string& field) {
  const Json& v = object.at(key);
  if (!v.is_string()) fail(origin, field, "expected a string");
  return v.get_ref<const std::string&>();
}

const Json& array_at(const Json& object, const char* key, const std::string& origin,
                     const std::string& field, std::uint64_t max_items) {
  const Json& v = object.at(key);
  if (!v.is_array()) fail(origin, field, "expected an array");
  if (v.size() > max_items)
    fail(origin, field,
         std::to_string(v.size()) + " items, more than the limit of " + std::to_string(max_items) +
             " (docs/security.md)",
         ErrorKind::Limit);
  return v;
}

bool is_uri(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A path inside a project: relative, '/'-separated, no empty, "." or ".." part.
bool is_project_path(std::string_view p) {
  if (p.empty() || p.front() == '/' || p.back() == '/') return false;
  std::size_t start = 0;
  while (start <= p.size()) {
    std::size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    std::string_view part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string_view::npos)
      return false;
    start = end + 1;
  }
  return true;
}

PackageData::Kernel read_kernel(const Json& k, const std::string& origin,
                                const std::string& where) {
  require_exactly(k, origin, where, {"uri", "family", "params", "entries", "source_hash"});
  PackageData::Kernel out;
  out.uri = string_at(k, "uri", origin, where + ".uri");
  if (!is_uri(out.uri))
    fail(origin, where + ".uri", "'" + out.uri.substr(0, 80) + "' is not a URI ([a-z0-9_]+)");
  out.family = string_at(k, "family", origin, where + ".family");
  if (!is_uri(out.family)) fail(origin, where + ".family", "not a family name ([a-z0-9_]+)");
  out.source_hash = string_at(k, "source_hash", origin, where + ".source_hash");
  if (!io::is_sha256_hex(out.source_hash))
    fail(origin, where + ".source_hash", "expected 64 lowercase hex digits");
  const Json& params = array_at(k, "params", origin, where + ".params", 64);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Json& pair = params[i];
    std::string at = where + ".params[" + std::to_string(i) + "]";
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
      fail(origin, at, "expected [name, value], two strings");
    out.params.push_back(pair[0].get<std::string>());
    out.params.push_back(pair[1].get<std::string>());
  }
  const Json& entries = array_at(k, "entries", origin, where + ".entries", 256);
  if (entries.empty()) fail(origin, where + ".entries", "a kernel has at least one entry");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].is_string() || entries[i].get_ref<const std::string&>().empty())
      fail(origin, where + ".entries[" + std::to_string(i) + "]", "expected a name expression");
    out.entries.push_back(entries[i].get<std::string>());
  }
  return out;
}

std::pair<std::string, std::string> read_file_entry(const Json& f, const std::string& origin,
                                                    const std::string& where) {
  require_exactly(f, origin, where, {"path", "size", "sha256", "text"});
  std::string path = string_at(f, "path", origin, where + ".path");
  if (!is_project_path(path))
    fail(origin, where + ".path",
         "'" + path.substr(0, 80) +
             "' is not a relative path inside "
             "a project (no leading '/', no '.' or '..' part)");
  std::string text = string_at(f, "text", origin, where + ".text");
  const Json& size = f.at("size");
  if (!size.is_number_unsigned() || size.get<std::uint64_t>() != text.size())
    fail(origin, where + ".size",
         "expected the length of text (" + std::to_string(text.size()) + " bytes)",
         ErrorKind::Integrity);
  const std::string& sha = string_at(f, "sha256", origin, where + ".sha256");
  if (io::sha256_hex(text) != sha)
    fail(origin, where + ".sha256",
         "sha256 of text is " + io::sha256_hex(text) + ", the description says " + sha.substr(0, 80),
         ErrorKind::Integrity);
  return {std::move(path), std::move(text)};
}

}  // namespace

std::string package_description_file_name(std::string_view name, std::string_view version) {
  return format::description_file_name(name, version);
}

std::string package_description_json(const kiln_package& p) {
  Json root = Json::object();
  root["format"] = kPackageDescriptionFormat;
  root["package"] = p.name;
  root["package_version"] = p.version;
  Json kernels = Json::array();
  for (std::size_t i = 0; i < p.kernel_count; ++i) {
    const kiln_package_kernel& k = p.kernels[i];
    Json params = Json::array();
    for (std::size_t j = 0; j < k.param_pairs; ++j)
      params.push_back(Json::array({k.params[2 * j], k.params[2 * j + 1]}));
    Json entries = Json::array();
    for (std::size_t j = 0; j < k.entry_count; ++j) entries.push_back(k.entries[j]);
    kernels.push_back({{"uri", k.uri},
                       {"family", k.family},
                       {"params", std::move(params)},
                       {"entries", std::move(entries)},
                       {"source_hash", k.source_hash}});
  }
  root["kernels"] = std::move(kernels);
  Json files = Json::array();
  for (std::size_t i = 0; i < p.file_count; ++i) {
    const kiln_package_file& f = p.files[i];
    std::string text(f.data, f.size);
    files.push_back(
        {{"path", f.path}, {"size", f.size}, {"sha256", io::sha256_hex(text)}, {"text", text}});
  }
  root["files"] = std::move(files);
  try {
    return root.dump(1) + "\n";
  } catch (const nlohmann::json::type_error& e) {  // 316: invalid UTF-8
    throw Error(ErrorKind::Format, std::string("package ") + p.name + " " + p.version +
                                       ": a source is not UTF-8 text, which a package "
                                       "description carries as JSON text: " +
                                       e.what());
  }
}

std::unique_ptr<PackageData> read_package_description(std::string_view text,
                                                      const std::string& origin) {
  Json root = format::parse_untrusted_json<Json>(text, origin);
  if (!root.is_object()) fail(origin, "", "expected a JSON object at the top level");
  if (root.contains("format")) {
    const Json& f = root["format"];
    if (!f.is_number_integer()) fail(origin, "format", "expected an integer");
    long long v = f.get<long long>();
    if (v != kPackageDescriptionFormat)
      fail(origin, "format",
           "version " + std::to_string(v) + " is too " +
               (v < kPackageDescriptionFormat ? "old" : "new (upgrade kiln)") +
               "; this kiln reads version " + std::to_string(kPackageDescriptionFormat),
           ErrorKind::Stale);
  }
  require_exactly(root, origin, "", {"format", "package", "package_version", "kernels", "files"});
  std::string name = string_at(root, "package", origin, "package");
  if (!format::is_package_name(name))
    fail(origin, "package", std::string(format::kPackageNameRule) + ", found '" + name.substr(0, 80) + "'");
  std::string version = string_at(root, "package_version", origin, "package_version");
  if (!format::is_package_version(version))
    fail(origin, "package_version", "expected MAJOR.MINOR.PATCH[-prerelease]");

  const Json& kernels = array_at(root, "kernels", origin, "kernels", io::limits::kMaxPackageKernels);
  std::vector<PackageData::Kernel> parsed;
  parsed.reserve(kernels.size());
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    parsed.push_back(read_kernel(kernels[i], origin, "kernels[" + std::to_string(i) + "]"));
    if (i > 0 && !(parsed[i - 1].uri < parsed[i].uri))
      fail(origin, "kernels[" + std::to_string(i) + "].uri",
           "'" + parsed[i].uri + "' is not after '" + parsed[i - 1].uri +
               "': kernels are sorted by uri, each once");
  }
  const Json& files = array_at(root, "files", origin, "files", io::limits::kMaxPackageFiles);
  std::vector<std::pair<std::string, std::string>> read_files;
  std::set<std::string> paths;
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::string where = "files[" + std::to_string(i) + "]";
    read_files.push_back(read_file_entry(files[i], origin, where));
    if (!paths.insert(read_files.back().first).second)
      fail(origin, where + ".path", "'" + read_files.back().first + "' appears twice");
  }
  return std::make_unique<PackageData>(std::move(name), std::move(version), std::move(parsed),
                                       std::move(read_files));
}

std::unique_ptr<PackageData> load_package_description(const fs::path& file) {
  return read_package_description(io::read_whole_file(file, io::limits::kMaxJsonBytes), file.string());
}

std::vector<FoundDescription> find_package_descriptions(const std::vector<fs::path>& stores,
                                                        std::string_view package) {
  std::vector<FoundDescription> out;
  for (const auto& store : stores) {
    std::error_code ec;
    std::vector<FoundDescription> here;
    std::uint64_t seen = 0;
    for (fs::directory_iterator it(store, ec), end; !ec && it != end; it.increment(ec)) {
      if (++seen > io::limits::kMaxStoreEntries) break;
      std::string name = it->path().filename().string();
      if (name.size() <= std::string_view(kSuffix).size() ||
          name.compare(name.size() - std::string_view(kSuffix).size(), std::string::npos,
                       kSuffix) != 0)
        continue;
      std::string stem = name.substr(0, name.size() - std::string_view(kSuffix).size());
      std::optional<std::string_view> owner = format::release_name_package(stem);
      if (!owner) continue;
      FoundDescription d{it->path(), std::string(*owner), stem.substr(owner->size() + 1)};
      if (!format::is_package_version(d.version)) continue;
      if (!package.empty() && d.package != package) continue;
      here.push_back(std::move(d));
    }
    std::sort(here.begin(), here.end(), [](const FoundDescription& a, const FoundDescription& b) {
      if (a.package != b.package) return a.package < b.package;
      return compare_package_versions(a.version, b.version) > 0;
    });
    out.insert(out.end(), here.begin(), here.end());
  }
  return out;
}

int compare_package_versions(std::string_view a, std::string_view b) {
  auto split = [](std::string_view v) {
    std::size_t dash = v.find('-');
    std::string_view core = v.substr(0, dash);
    std::string_view pre = dash == std::string_view::npos ? std::string_view{} : v.substr(dash + 1);
    std::vector<std::uint64_t> nums;
    std::size_t start = 0;
    while (start <= core.size()) {
      std::size_t end = core.find('.', start);
      if (end == std::string_view::npos) end = core.size();
      std::uint64_t n = 0;
      for (char c : core.substr(start, end - start))
        n = (c >= '0' && c <= '9') ? n * 10 + static_cast<std::uint64_t>(c - '0') : n;
      nums.push_back(n);
      start = end + 1;
    }
    return std::make_pair(nums, pre);
  };
  auto [an, ap] = split(a);
  auto [bn, bp] = split(b);
  if (an != bn) return an < bn ? -1 : 1;
  if (ap == bp) return 0;
  if (ap.empty()) return 1;  // a release is newer than its pre-releases
  if (bp.empty()) return -1;
  return ap < bp ? -1 : 1;
}

}  // namespace kiln::project
