#include "project/registry.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "util/join.hpp"

namespace kiln::project {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& origin, const std::string& family,
                       const std::string& field, const std::string& what) {
  std::string msg = origin + ": ";
  if (!family.empty()) msg += "family '" + family + "': ";
  if (!field.empty()) msg += "field '" + field + "': ";
  throw Error(ErrorKind::Format, msg + what);
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool is_value_token(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  });
}

std::vector<std::string> string_array(const json& j, const std::string& origin,
                                      const std::string& fam, const std::string& field,
                                      bool allow_empty) {
  if (!j.is_array()) fail(origin, fam, field, "expected an array of strings");
  if (j.empty() && !allow_empty) fail(origin, fam, field, "must not be empty");
  std::vector<std::string> out;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string() || j[i].get<std::string>().empty())
      fail(origin, fam, field + "[" + std::to_string(i) + "]", "expected a non-empty string");
    out.push_back(j[i].get<std::string>());
  }
  return out;
}

void check_keys(const json& obj, const std::set<std::string>& allowed, const std::string& origin,
                const std::string& fam, const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!allowed.count(it.key()))
      fail(origin, fam, where + it.key(),
           "unknown field (allowed: " + util::join(allowed, ", ") + ")");
}

std::string substitute(const std::string& expr, const Family& fam,
                       const std::vector<std::pair<std::string, std::string>>& values,
                       const std::map<std::string, std::string>& types) {
  std::string out;
  for (size_t i = 0; i < expr.size(); ++i) {
    if (expr[i] != '{') {
      out += expr[i];
      continue;
    }
    size_t close = expr.find('}', i);
    std::string name = expr.substr(i + 1, close - i - 1);
    for (size_t p = 0; p < fam.params.size(); ++p) {
      if (fam.params[p].name != name) continue;
      out += fam.params[p].kind == "type" ? types.at(values[p].second) : values[p].second;
    }
    i = close;
  }
  return out;
}

}  // namespace

const Specialisation* Registry::find(std::string_view uri) const {
  auto it = std::lower_bound(specialisations.begin(), specialisations.end(), uri,
                             [](const Specialisation& s, std::string_view u) { return s.uri < u; });
  return (it != specialisations.end() && it->uri == uri) ? &*it : nullptr;
}

const Family* Registry::family(std::string_view name) const {
  for (const auto& f : families)
    if (f.name == name) return &f;
  return nullptr;
}

std::string declared_only(const Family& family) {
  return "family '" + family.name + "' is declared only for " +
         util::join(family.targets, ", ", [](const format::TargetRule& r) { return r.text; });
}

std::optional<std::string> undeclared_target(const Family& family, const format::Target& t) {
  if (format::rule_allows(family.targets, t)) return std::nullopt;
  return declared_only(family);
}

Registry parse_registry(std::string_view text, const std::string& origin) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(origin, "", "", std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object()) fail(origin, "", "", "expected a JSON object at the top level");
  check_keys(root, {"format", "types", "families", "comment"}, origin, "", "");

  Registry reg;
  reg.origin = origin;
  if (!root.contains("format") || !root["format"].is_number_integer())
    fail(origin, "", "format", "missing or not an integer");
  reg.format = root["format"].get<int>();
  if (reg.format < kRegistryFormat)
    fail(origin, "", "format",
         "version " + std::to_string(reg.format) + " is too old; this kiln reads version " +
             std::to_string(kRegistryFormat));
  if (reg.format > kRegistryFormat)
    fail(origin, "", "format",
         "version " + std::to_string(reg.format) + " is too new; this kiln reads version " +
             std::to_string(kRegistryFormat) + " (upgrade kiln)");

  if (!root.contains("types") || !root["types"].is_object())
    fail(origin, "", "types", "missing or not an object of dtype name -> C++ type");
  for (auto it = root["types"].begin(); it != root["types"].end(); ++it) {
    if (!is_value_token(it.key()) || !it.value().is_string())
      fail(origin, "", "types." + it.key(), "expected a lowercase name mapped to a C++ type");
    reg.types[it.key()] = it.value().get<std::string>();
  }

  if (!root.contains("families") || !root["families"].is_array() || root["families"].empty())
    fail(origin, "", "families", "missing or empty");

  std::set<std::string> names;
  for (size_t fi = 0; fi < root["families"].size(); ++fi) {
    const json& jf = root["families"][fi];
    std::string where = "families[" + std::to_string(fi) + "]";
    if (!jf.is_object()) fail(origin, "", where, "expected an object");
    if (!jf.contains("name") || !jf["name"].is_string())
      fail(origin, "", where + ".name", "missing or not a string");
    Family fam;
    fam.name = jf["name"].get<std::string>();
    const std::string& fn = fam.name;
    if (!is_identifier(fn))
      fail(origin, fn, "name", "must match [a-z][a-z0-9_]* (it starts every URI)");
    if (!names.insert(fn).second) fail(origin, fn, "name", "declared twice");
    check_keys(jf, {"name", "sources", "entries", "params", "targets", "flags", "comment"}, origin,
               fn, "");
    for (const char* req : {"sources", "entries", "targets"})
      if (!jf.contains(req)) fail(origin, fn, req, "missing");

    fam.sources = string_array(jf["sources"], origin, fn, "sources", false);
    for (const auto& s : fam.sources)
      if (s.front() == '/' || s.find("..") != std::string::npos ||
          s.find('\\') != std::string::npos)
        fail(origin, fn, "sources", "'" + s + "' must be a plain path inside kernels/");
    fam.entries = string_array(jf["entries"], origin, fn, "entries", false);

    if (jf.contains("params")) {
      const json& jp = jf["params"];
      if (!jp.is_array()) fail(origin, fn, "params", "expected an array");
      std::set<std::string> pnames;
      for (size_t pi = 0; pi < jp.size(); ++pi) {
        std::string pw = "params[" + std::to_string(pi) + "]";
        const json& p = jp[pi];
        if (!p.is_object()) fail(origin, fn, pw, "expected an object");
        check_keys(p, {"name", "kind", "values"}, origin, fn, pw + ".");
        RegistryParam rp;
        if (!p.contains("name") || !p["name"].is_string() ||
            !is_identifier(p["name"].get<std::string>()))
          fail(origin, fn, pw + ".name", "missing or not an identifier");
        rp.name = p["name"].get<std::string>();
        if (!pnames.insert(rp.name).second)
          fail(origin, fn, pw + ".name", "'" + rp.name + "' repeated");
        rp.kind = p.value("kind", std::string("str"));
        if (rp.kind != "type" && rp.kind != "int" && rp.kind != "str")
          fail(origin, fn, pw + ".kind", "'" + rp.kind + "' is not one of type, int, str");
        if (!p.contains("values") || !p["values"].is_array() || p["values"].empty())
          fail(origin, fn, pw + ".values", "missing or empty");
        std::set<std::string> seen;
        for (size_t vi = 0; vi < p["values"].size(); ++vi) {
          const json& v = p["values"][vi];
          std::string vw = pw + ".values[" + std::to_string(vi) + "]";
          std::string sv;
          if (rp.kind == "int") {
            if (!v.is_number_integer()) fail(origin, fn, vw, "expected an integer");
            sv = std::to_string(v.get<long long>());
            if (v.get<long long>() < 0) fail(origin, fn, vw, "must not be negative");
          } else {
            if (!v.is_string() || !is_value_token(v.get<std::string>()))
              fail(origin, fn, vw, "expected a lowercase token [a-z0-9]+");
            sv = v.get<std::string>();
            if (rp.kind == "type" && !reg.types.count(sv))
              fail(origin, fn, vw, "type '" + sv + "' is not declared in 'types'");
          }
          if (!seen.insert(sv).second) fail(origin, fn, vw, "value '" + sv + "' repeated");
          rp.values.push_back(sv);
        }
        fam.params.push_back(std::move(rp));
      }
    }

    for (size_t ei = 0; ei < fam.entries.size(); ++ei) {
      const std::string& e = fam.entries[ei];
      for (size_t i = e.find('{'); i != std::string::npos; i = e.find('{', i + 1)) {
        size_t close = e.find('}', i);
        if (close == std::string::npos)
          fail(origin, fn, "entries[" + std::to_string(ei) + "]", "unclosed '{' in '" + e + "'");
        std::string ph = e.substr(i + 1, close - i - 1);
        bool known = std::any_of(fam.params.begin(), fam.params.end(),
                                 [&](const RegistryParam& p) { return p.name == ph; });
        if (!known)
          fail(origin, fn, "entries[" + std::to_string(ei) + "]",
               "placeholder '{" + ph + "}' names no parameter");
      }
    }

    auto rules = string_array(jf["targets"], origin, fn, "targets", false);
    for (const auto& r : rules) {
      auto rule = format::parse_target_rule(r);
      if (!rule)
        fail(origin, fn, "targets",
             "'" + r + "' is not a target rule (e.g. \"sm_80+\" or \"sm_90a\")");
      fam.targets.push_back(*rule);
    }

    if (jf.contains("flags")) fam.flags = string_array(jf["flags"], origin, fn, "flags", true);
    for (const auto& f : fam.flags)
      for (const char* banned : {"-arch", "--gpu-architecture", "-gencode", "--generate-code",
                                 "-code", "--gpu-code", "-lineinfo", "-G"})
        if (f == banned || f.rfind(std::string(banned) + "=", 0) == 0)
          fail(origin, fn, "flags",
               "'" + f +
                   "' is not allowed: targets come from --targets, and debug/lineinfo "
                   "flags make builds irreproducible");

    reg.families.push_back(std::move(fam));
  }

  // Expansion: cartesian product in registry order, last parameter varying fastest.
  std::set<std::string> uris;
  for (const auto& fam : reg.families) {
    size_t total = 1;
    for (const auto& p : fam.params) total *= p.values.size();
    for (size_t k = 0; k < total; ++k) {
      std::vector<size_t> idx(fam.params.size());
      size_t rem = k;
      for (size_t p = fam.params.size(); p-- > 0;) {
        idx[p] = rem % fam.params[p].values.size();
        rem /= fam.params[p].values.size();
      }
      Specialisation s;
      s.family = fam.name;
      s.uri = fam.name;
      for (size_t p = 0; p < fam.params.size(); ++p) {
        s.params.emplace_back(fam.params[p].name, fam.params[p].values[idx[p]]);
        s.uri += "_" + fam.params[p].name + "_" + fam.params[p].values[idx[p]];
      }
      for (const auto& e : fam.entries)
        s.entries.push_back(substitute(e, fam, s.params, reg.types));
      if (!uris.insert(s.uri).second)
        fail(origin, fam.name, "params",
             "expands to URI '" + s.uri + "' that another family also has");
      reg.specialisations.push_back(std::move(s));
    }
  }
  std::sort(reg.specialisations.begin(), reg.specialisations.end(),
            [](const Specialisation& a, const Specialisation& b) { return a.uri < b.uri; });
  return reg;
}

std::vector<std::string> quoted_includes(std::string_view src) {
  std::vector<std::string> out;
  std::istringstream in{std::string(src)};
  std::string line;
  while (std::getline(in, line)) {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] != '#') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0) continue;
    i = line.find_first_not_of(" \t", i + 7);
    if (i == std::string::npos || line[i] != '"') continue;
    size_t close = line.find('"', i + 1);
    if (close == std::string::npos) continue;
    out.push_back(line.substr(i + 1, close - i - 1));
  }
  return out;
}

namespace {

// One family's source hash and hashed files: its sources and the kernels/ headers they include,
// read through `load` (memoised by the caller), and its declaration.
template <typename Load>
void hash_family(Family& fam, const SourceTree& tree, Load& load) {
  std::set<std::string> files;
  std::vector<std::pair<std::string, std::string>> todo;
  for (const auto& s : fam.sources) todo.emplace_back(s, "");
  while (!todo.empty()) {
    auto [path, by] = todo.back();
    todo.pop_back();
    if (!files.insert(path).second) continue;
    const std::string& text = load(path, fam.name, by);
    std::string dir = std::filesystem::path(path).parent_path().string();
    for (const auto& inc : quoted_includes(text)) {
      // Quoted includes resolve beside the including file, then at kernels/ root; a name
      // found in neither is not ours (a toolkit header) and does not enter the hash.
      std::string beside = dir.empty() ? inc : dir + "/" + inc;
      if (tree.read(beside))
        todo.emplace_back(std::filesystem::path(beside).lexically_normal().string(), path);
      else if (tree.read(inc))
        todo.emplace_back(std::filesystem::path(inc).lexically_normal().string(), path);
    }
  }
  fam.hashed_files.assign(files.begin(), files.end());
  io::Sha256 h;
  h.field("kiln-source-hash", "1");
  // The declaration is hashed too: entries, params and flags change the bytes built.
  h.field("family", fam.name);
  for (const auto& e : fam.entries) h.field("entry", e);
  for (const auto& p : fam.params) {
    h.field("param", p.name);
    h.field("kind", p.kind);
    for (const auto& v : p.values) h.field("value", v);
  }
  for (const auto& f : fam.flags) h.field("flag", f);
  for (const auto& f : fam.hashed_files) {
    h.field("file", f);
    h.field("content", load(f, fam.name, ""));
  }
  fam.source_hash = h.hex();
}

// Hashes the families for which `want(family)` holds; memoises file contents across them.
template <typename Want>
void hash_families(Registry& reg, const SourceTree& tree, Want want) {
  std::map<std::string, std::string> contents;  // memo by path
  auto load = [&](const std::string& path, const std::string& fam,
                  const std::string& needed_by) -> const std::string& {
    auto it = contents.find(path);
    if (it != contents.end()) return it->second;
    auto data = tree.read(path);
    if (!data)
      fail(reg.origin, fam, "sources",
           "'" + path + "' " + (needed_by.empty() ? "" : "(included by " + needed_by + ") ") +
               "not found in " + tree.describe());
    return contents.emplace(path, std::move(*data)).first->second;
  };
  for (auto& fam : reg.families)
    if (want(fam)) hash_family(fam, tree, load);
  for (auto& s : reg.specialisations) {
    const Family* fam = reg.family(s.family);
    if (want(*fam)) s.source_hash = fam->source_hash;
  }
}

}  // namespace

void compute_source_hashes(Registry& reg, const SourceTree& tree) {
  hash_families(reg, tree, [](const Family&) { return true; });
}

std::optional<std::string> DiskSourceTree::read(const std::string& relpath) const {
  std::ifstream in(std::filesystem::path(dir_) / relpath, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Registry load_registry(const std::string& repo_root) {
  std::filesystem::path file = std::filesystem::path(repo_root) / "registry" / "kernels.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(ErrorKind::NotFound, "registry file not found: " + file.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  Registry reg = parse_registry(ss.str(), file.string());
  compute_source_hashes(reg,
                        DiskSourceTree((std::filesystem::path(repo_root) / "kernels").string()));
  return reg;
}

std::string registry_to_json(const Registry& reg) {
  json arr = json::array();
  for (const auto& s : reg.specialisations) {
    const Family* fam = reg.family(s.family);
    json params = json::object();
    for (const auto& [k, v] : s.params) params[k] = v;
    json targets = json::array();
    for (const auto& t : fam->targets) targets.push_back(t.text);
    arr.push_back({{"uri", s.uri},
                   {"family", s.family},
                   {"params", params},
                   {"entries", s.entries},
                   {"targets", targets},
                   {"flags", fam->flags},
                   {"source_hash", s.source_hash}});
  }
  return arr.dump(2) + "\n";
}

}  // namespace kiln::project
