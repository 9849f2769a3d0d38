// The mirror as a pip index (simple_index.hpp): PEP 503 pages, their PEP 691 JSON, PEP 658
// metadata files; written by stage and sync, checked by verify.
#include "mirror/simple_index.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/atomic_file.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "mirror/mirror_internal.hpp"
#include "wheel/wheel.hpp"

namespace kiln::mirror {

namespace fs = std::filesystem;

namespace {

constexpr const char* kRoot = "simple/";
// The largest page or metadata file verify reads back.
constexpr std::size_t kMaxPageBytes = std::size_t{64} << 20;

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string html_unescape(std::string_view s) {
  static const std::pair<const char*, char> entities[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#39;", '\''}};
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    bool done = false;
    for (const auto& [name, c] : entities) {
      std::string_view n(name);
      if (s.substr(i, n.size()) == n) {
        out += c;
        i += n.size();
        done = true;
        break;
      }
    }
    if (!done) out += s[i++];
  }
  return out;
}

// A file name as one URL path segment: unreserved characters (RFC 3986) and '+' stay, the rest
// is %XX.
std::string percent_encode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string json_string(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// METADATA's Requires-Python header (the headers end at the first blank line), "" when none.
std::string requires_python(std::string_view metadata) {
  std::size_t pos = 0;
  while (pos < metadata.size()) {
    std::size_t nl = metadata.find('\n', pos);
    std::string_view line = metadata.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;
    constexpr std::string_view key = "Requires-Python:";
    if (line.size() >= key.size() && line.compare(0, key.size(), key) == 0) {
      std::string_view v = line.substr(key.size());
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
      return std::string(v);
    }
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return "";
}

const char* kHtmlHead =
    "<!DOCTYPE html>\n"
    "<html>\n"
    "  <head>\n"
    "    <meta name=\"pypi:repository-version\" content=\"1.0\">\n";

std::string page_path(const std::string& project, const char* file) {
  return std::string(kRoot) + project + "/" + file;
}

// What a served page says of each file it links: file name -> (sha256, metadata sha256).
struct Link {
  std::string sha256;
  std::string metadata_sha256;
};

std::map<std::string, Link> html_links(const std::string& page) {
  std::map<std::string, Link> out;
  static const std::regex anchor(R"re(<a\s+href="([^"]*)"([^>]*)>)re");
  static const std::regex meta(R"re(data-(?:dist-info|core)-metadata="sha256=([0-9a-f]*)")re");
  for (std::sregex_iterator it(page.begin(), page.end(), anchor), end; it != end; ++it) {
    std::string href = html_unescape((*it)[1].str());
    std::string sha;
    if (auto h = href.find("#sha256="); h != std::string::npos) {
      sha = href.substr(h + 8);
      href.resize(h);
    } else if (auto f = href.find('#'); f != std::string::npos) {
      href.resize(f);
    }
    std::string name = percent_decode(href.substr(href.rfind('/') + 1));
    Link l{sha, ""};
    std::smatch m;
    std::string attrs = (*it)[2].str();
    if (std::regex_search(attrs, m, meta)) l.metadata_sha256 = m[1].str();
    out[name] = l;
  }
  return out;
}

std::map<std::string, Link> json_links(const std::string& page, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(page);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Format, origin + " is not JSON: " + e.what());
  }
  std::map<std::string, Link> out;
  if (!j.is_object() || !j.contains("files") || !j["files"].is_array())
    throw Error(ErrorKind::Format, origin + " has no \"files\" list (PEP 691)");
  for (const auto& f : j["files"]) {
    if (!f.is_object() || !f.contains("filename") || !f["filename"].is_string()) continue;
    Link l;
    if (f.contains("hashes") && f["hashes"].is_object() && f["hashes"].contains("sha256") &&
        f["hashes"]["sha256"].is_string())
      l.sha256 = f["hashes"]["sha256"].get<std::string>();
    for (const char* key : {"core-metadata", "dist-info-metadata"})
      if (f.contains(key) && f[key].is_object() && f[key].contains("sha256") &&
          f[key]["sha256"].is_string())
        l.metadata_sha256 = f[key]["sha256"].get<std::string>();
    out[f["filename"].get<std::string>()] = l;
  }
  return out;
}

bool write_if_changed(const fs::path& p, const std::string& bytes) {
  std::error_code ec;
  if (fs::is_regular_file(p, ec) && fs::file_size(p, ec) == bytes.size() && !ec) {
    try {
      if (detail::read_capped(p, bytes.size()) == bytes) return false;
    } catch (const Error&) {
      // unreadable: written anew below
    }
  }
  fs::create_directories(p.parent_path(), ec);
  if (ec)
    throw Error(ErrorKind::Io, "cannot create " + p.parent_path().string() + ": " + ec.message());
  io::write_file_atomically(p, bytes);
  return true;
}

bool is_root_page(const std::string& path) {
  return path == std::string(kRoot) + "index.html" || path == std::string(kRoot) + "index.json";
}

}  // namespace

std::string simple_project_name(std::string_view wheel_file) {
  std::string_view dist = wheel_file.substr(0, wheel_file.find('-'));
  std::string out;
  bool sep = false;
  for (char c : dist) {
    if (c == '-' || c == '_' || c == '.') {
      sep = true;
      continue;
    }
    if (sep && !out.empty()) out += '-';
    sep = false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::vector<SimplePage> simple_index_pages(const std::vector<IndexedWheel>& wheels) {
  std::map<std::string, std::vector<const IndexedWheel*>> projects;
  for (const auto& w : wheels) projects[simple_project_name(w.file)].push_back(&w);
  std::vector<SimplePage> pages;

  std::string root_html = std::string(kHtmlHead) +
                          "    <title>Simple index</title>\n"
                          "  </head>\n"
                          "  <body>\n";
  std::string root_json = "{\n  \"meta\": {\"api-version\": \"1.0\"},\n  \"projects\": [";
  bool first = true;
  for (const auto& [name, files] : projects) {
    root_html += "    <a href=\"" + html_escape(percent_encode(name)) + "/\">" + html_escape(name) +
                 "</a><br>\n";
    root_json += std::string(first ? "\n" : ",\n") + "    {\"name\": " + json_string(name) + "}";
    first = false;
  }
  root_html += "  </body>\n</html>\n";
  root_json += std::string(first ? "]\n}\n" : "\n  ]\n}\n");
  pages.push_back({std::string(kRoot) + "index.html", root_html});
  pages.push_back({std::string(kRoot) + "index.json", root_json});

  for (auto& [name, files] : projects) {
    std::sort(files.begin(), files.end(),
              [](const IndexedWheel* a, const IndexedWheel* b) { return a->file < b->file; });
    std::string html = std::string(kHtmlHead) + "    <title>Links for " + html_escape(name) +
                       "</title>\n  </head>\n  <body>\n    <h1>Links for " + html_escape(name) +
                       "</h1>\n";
    std::string json = "{\n  \"meta\": {\"api-version\": \"1.0\"},\n  \"name\": " +
                       json_string(name) + ",\n  \"files\": [";
    bool first_file = true;
    for (const IndexedWheel* w : files) {
      const std::string url = "../../" + percent_encode(w->file);
      const std::string meta_sha = io::sha256_hex(w->metadata);
      const std::string rp = requires_python(w->metadata);
      html += "    <a href=\"" + html_escape(url) + "#sha256=" + w->sha256 + "\"";
      if (!rp.empty()) html += " data-requires-python=\"" + html_escape(rp) + "\"";
      html += " data-dist-info-metadata=\"sha256=" + meta_sha + "\" data-core-metadata=\"sha256=" +
              meta_sha + "\">" + html_escape(w->file) + "</a><br>\n";
      json += std::string(first_file ? "\n" : ",\n") + "    {\"filename\": " + json_string(w->file) +
              ", \"url\": " + json_string(url) + ", \"hashes\": {\"sha256\": \"" + w->sha256 + "\"}";
      if (!rp.empty()) json += ", \"requires-python\": " + json_string(rp);
      json += ", \"core-metadata\": {\"sha256\": \"" + meta_sha +
              "\"}, \"dist-info-metadata\": {\"sha256\": \"" + meta_sha + "\"}}";
      first_file = false;
    }
    html += "  </body>\n</html>\n";
    json += "\n  ]\n}\n";
    pages.push_back({page_path(name, "index.html"), html});
    pages.push_back({page_path(name, "index.json"), json});
  }
  return pages;
}

std::string wheel_metadata(const fs::path& wheel) {
  const std::string file = wheel.filename().string();
  std::size_t a = file.find('-');
  std::size_t b = a == std::string::npos ? a : file.find('-', a + 1);
  if (b == std::string::npos)
    throw Error(ErrorKind::Format, wheel.string() + " is not named as a wheel");
  const std::string member = file.substr(0, b) + ".dist-info/METADATA";
  for (auto& f : wheel::read_zip(wheel))
    if (f.path == member) return std::move(f.data);
  throw Error(ErrorKind::Format, wheel.string() + " has no " + member);
}

std::vector<IndexedWheel> mirror_wheels(const fs::path& mirror,
                                        const std::optional<FreshRelease>& fresh) {
  std::vector<IndexedWheel> out;
  std::vector<ReleaseName> releases = releases_in(mirror);
  if (fresh && std::none_of(releases.begin(), releases.end(), [&](const ReleaseName& r) {
        return r.package == fresh->release.package && r.version == fresh->release.version;
      }))
    releases.push_back(fresh->release);
  for (const auto& r : releases) {
    const bool is_fresh =
        fresh && fresh->release.package == r.package && fresh->release.version == r.version;
    const std::string sums_name = checksums_file_name(r.package, r.version);
    std::vector<ChecksumEntry> entries;
    if (is_fresh) {
      entries = fresh->listed;
    } else {
      try {
        entries = parse_checksums(detail::read_capped(mirror / sums_name, kMaxChecksumsBytes),
                                  sums_name, sums_name);
      } catch (const Error&) {
        continue;  // no usable checksum file: nothing of this release is offered
      }
    }
    for (const auto& e : entries) {
      auto kind = classify_release_file(e.name, r.package, r.version);
      if (!kind || !is_wheel(*kind) || !detail::is_regular(mirror / e.name)) continue;
      const fs::path meta = mirror / (e.name + ".metadata");
      std::string metadata;
      try {
        if (!is_fresh && detail::is_regular(meta))
          metadata = detail::read_capped(meta, kMaxPageBytes);
        else
          metadata = wheel_metadata(mirror / e.name);
      } catch (const Error&) {
        if (is_fresh) throw;  // stage and sync checked these wheels: a failure here is real
        continue;             // another release's broken wheel: not offered (its verify says why)
      }
      out.push_back({e.name, e.sha256, std::move(metadata)});
    }
  }
  return out;
}

SimpleIndexResult write_simple_index(const fs::path& mirror,
                                     const std::optional<FreshRelease>& fresh) {
  SimpleIndexResult result;
  std::vector<IndexedWheel> wheels = mirror_wheels(mirror, fresh);
  std::error_code ec;
  // A mirror that never offered a wheel gets no index.
  if (wheels.empty() && !fs::is_directory(mirror / "simple", ec)) return result;
  // The files first, the pages that name them after, the root page last.
  for (const auto& w : wheels)
    if (write_if_changed(mirror / (w.file + ".metadata"), w.metadata))
      result.written.push_back(w.file + ".metadata");
  std::vector<SimplePage> pages = simple_index_pages(wheels);
  std::stable_partition(pages.begin(), pages.end(),
                        [](const SimplePage& p) { return !is_root_page(p.path); });
  for (const auto& p : pages)
    if (write_if_changed(mirror / p.path, p.bytes)) result.written.push_back(p.path);
  std::set<std::string> projects;
  for (const auto& w : wheels) projects.insert(simple_project_name(w.file));
  result.projects = projects.size();
  result.wheels = wheels.size();
  return result;
}

std::vector<IndexRow> check_simple_index(const fs::path& mirror, const std::string& package,
                                         const std::string& version,
                                         const std::vector<ChecksumEntry>& listed) {
  std::vector<IndexRow> rows;
  // The release's wheels that are there: their digest and METADATA as the files have them.
  struct Actual {
    std::string sha256;
    std::optional<std::string> metadata_sha256;
  };
  std::map<std::string, Actual> mine;
  std::set<std::string> my_projects;
  for (const auto& e : listed) {
    auto kind = classify_release_file(e.name, package, version);
    if (!kind || !is_wheel(*kind) || !detail::is_regular(mirror / e.name)) continue;
    Actual a{detail::digest_of(mirror / e.name).sha256, std::nullopt};
    const std::string meta_name = e.name + ".metadata";
    const ReleaseFileKind mk = ReleaseFileKind::WheelMetadata;
    try {
      std::string metadata = wheel_metadata(mirror / e.name);
      a.metadata_sha256 = io::sha256_hex(metadata);
      const fs::path mp = mirror / meta_name;
      if (!detail::is_regular(mp)) {
        rows.push_back({meta_name, mk, ErrorKind::NotFound, FileStatus::Missing,
                        "the PEP 658 metadata file of " + e.name +
                            " is not there (pip reads it before the wheel; `kiln mirror stage` "
                            "writes it)"});
      } else {
        std::string have = detail::read_capped(mp, kMaxPageBytes);
        if (have != metadata)
          rows.push_back({meta_name, mk, ErrorKind::Integrity, FileStatus::Mismatch,
                          "sha256 " + io::sha256_hex(have) + ", the METADATA in " + e.name +
                              " has " + *a.metadata_sha256});
        else
          rows.push_back({meta_name, mk, std::nullopt, FileStatus::Ok,
                          "sha256 " + *a.metadata_sha256 + ", the METADATA of " + e.name});
      }
    } catch (const Error& err) {
      rows.push_back({meta_name, mk, err.kind(), FileStatus::Invalid,
                      "cannot read the METADATA of " + e.name + ": " + err.what()});
    }
    mine[e.name] = a;
    my_projects.insert(simple_project_name(e.name));
  }
  if (mine.empty()) return rows;

  auto check_page = [&](const std::string& path, const std::string& project) {
    const fs::path p = mirror / path;
    if (!detail::is_regular(p)) {
      rows.push_back({path, ReleaseFileKind::SimplePage, ErrorKind::NotFound, FileStatus::Missing,
                      "not found: pip finds the release's wheels through it (`kiln mirror stage` "
                      "writes it)"});
      return;
    }
    std::string bytes;
    try {
      bytes = detail::read_capped(p, kMaxPageBytes);
    } catch (const Error& e) {
      rows.push_back({path, ReleaseFileKind::SimplePage, e.kind(), FileStatus::Invalid, e.what()});
      return;
    }
    std::vector<std::string> problems;
    if (!project.empty()) {
      std::map<std::string, Link> links;
      try {
        links = path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0
                    ? json_links(bytes, path)
                    : html_links(bytes);
      } catch (const Error& e) {
        rows.push_back({path, ReleaseFileKind::SimplePage, e.kind(), FileStatus::Invalid, e.what()});
        return;
      }
      for (const auto& [file, link] : links)
        if (!detail::is_regular(mirror / file))
          problems.push_back("links " + file + ", which is not in " + mirror.string());
      for (const auto& [file, a] : mine) {
        if (simple_project_name(file) != project) continue;
        auto it = links.find(file);
        if (it == links.end()) {
          problems.push_back("does not link " + file);
          continue;
        }
        if (it->second.sha256 != a.sha256)
          problems.push_back("links " + file + " with sha256 " + it->second.sha256 +
                             ", the file has " + a.sha256);
        if (a.metadata_sha256 && it->second.metadata_sha256 != *a.metadata_sha256)
          problems.push_back("gives the metadata of " + file + " sha256 " +
                             it->second.metadata_sha256 + ", its METADATA has " +
                             *a.metadata_sha256);
      }
    }
    if (problems.empty()) {
      rows.push_back({path, ReleaseFileKind::SimplePage, std::nullopt, FileStatus::Ok,
                      project.empty() ? "names the release's projects"
                                      : "links and hashes match the files"});
      return;
    }
    std::string detail;
    for (const auto& s : problems) detail += (detail.empty() ? "" : "; ") + s;
    rows.push_back(
        {path, ReleaseFileKind::SimplePage, ErrorKind::Integrity, FileStatus::Mismatch, detail});
  };
  for (const char* f : {"index.html", "index.json"}) check_page(std::string(kRoot) + f, "");
  for (const auto& project : my_projects)
    for (const char* f : {"index.html", "index.json"}) check_page(page_path(project, f), project);
  // The root must name each of the release's projects.
  for (auto& row : rows) {
    if (!is_root_page(row.name) || row.error) continue;
    std::string bytes = detail::read_capped(mirror / row.name, kMaxPageBytes);
    for (const auto& project : my_projects) {
      bool named = bytes.find("\"" + html_escape(percent_encode(project)) + "/\"") !=
                       std::string::npos ||
                   bytes.find("{\"name\": " + json_string(project) + "}") != std::string::npos;
      if (!named) {
        row.error = ErrorKind::Integrity;
        row.status = FileStatus::Mismatch;
        row.detail = "does not name the project " + project;
      }
    }
  }
  return rows;
}

}  // namespace kiln::mirror
