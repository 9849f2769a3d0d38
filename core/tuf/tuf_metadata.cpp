#include "tuf/tuf_metadata.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "util/join.hpp"

namespace kiln::tuf {

using nlohmann::json;

namespace {

[[noreturn]] void malformed(const std::string& what, const std::string& detail) {
  throw Error(Attack::Malformed, what + ": " + detail);
}

void canonical_into(const json& j, std::string& out) {
  switch (j.type()) {
    case json::value_t::null:
      out += "null";
      break;
    case json::value_t::boolean:
      out += j.get<bool>() ? "true" : "false";
      break;
    case json::value_t::number_integer:
      out += std::to_string(j.get<std::int64_t>());
      break;
    case json::value_t::number_unsigned:
      out += std::to_string(j.get<std::uint64_t>());
      break;
    case json::value_t::number_float:
      throw Error(Attack::Malformed,
                  "canonical JSON has no floating-point numbers (found " + j.dump() + ")");
    case json::value_t::string: {
      out += '"';
      for (char c : j.get_ref<const std::string&>()) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      out += '"';
      break;
    }
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& e : j) {
        if (!first) out += ',';
        first = false;
        canonical_into(e, out);
      }
      out += ']';
      break;
    }
    case json::value_t::object: {
      // nlohmann::json keeps object keys in a std::map: byte order of UTF-8, which is code
      // point order, as securesystemslib sorts.
      out += '{';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += ',';
        first = false;
        canonical_into(json(it.key()), out);
        out += ':';
        canonical_into(it.value(), out);
      }
      out += '}';
      break;
    }
    default:
      throw Error(Attack::Malformed, "canonical JSON: unsupported value " + j.dump());
  }
}

const json& field(const json& obj, const char* name, const std::string& what) {
  if (!obj.is_object()) malformed(what, "expected an object holding \"" + std::string(name) + "\"");
  auto it = obj.find(name);
  if (it == obj.end()) malformed(what, "missing field \"" + std::string(name) + "\"");
  return *it;
}

std::string get_string(const json& obj, const char* name, const std::string& what) {
  const json& v = field(obj, name, what);
  if (!v.is_string()) malformed(what, "field \"" + std::string(name) + "\" is not a string");
  return v.get<std::string>();
}

std::int64_t get_int(const json& obj, const char* name, const std::string& what, std::int64_t min) {
  const json& v = field(obj, name, what);
  if (!v.is_number_integer())
    malformed(what, "field \"" + std::string(name) + "\" is not an integer: " + v.dump());
  std::int64_t n = v.get<std::int64_t>();
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    malformed(what, "field \"" + std::string(name) + "\" is too large: " + v.dump());
  if (n < min)
    malformed(what, "field \"" + std::string(name) + "\" is " + std::to_string(n) +
                        ", below the minimum " + std::to_string(min));
  return n;
}

std::vector<std::string> get_string_list(const json& v, const std::string& what,
                                         const std::string& name) {
  if (!v.is_array()) malformed(what, "field \"" + name + "\" is not a list");
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) malformed(what, "field \"" + name + "\" holds a non-string");
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::time_t parse_expires(const std::string& s, const std::string& what) {
  std::optional<std::time_t> t = parse_utc_time(s);
  if (!t) malformed(what, "\"expires\" is not a valid YYYY-MM-DDTHH:MM:SSZ date: \"" + s + "\"");
  return *t;
}

void parse_common(const json& j, const char* expected_type, const std::string& what, Common& c) {
  if (!j.is_object()) malformed(what, "\"signed\" is not an object");
  c.type = get_string(j, "_type", what);
  if (c.type != expected_type)
    throw Error(Attack::WrongType,
                what + ": \"_type\" is \"" + c.type + "\", expected \"" + expected_type + "\"");
  c.version = get_int(j, "version", what, 1);
  c.spec_version = get_string(j, "spec_version", what);
  // "1.0.34", "1.0": major version 1 only.
  std::vector<std::string> parts;
  std::string cur;
  for (char ch : c.spec_version + ".") {
    if (ch == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  bool digits = std::all_of(parts.begin(), parts.end(), [](const std::string& p) {
    return !p.empty() &&
           std::all_of(p.begin(), p.end(), [](char x) { return x >= '0' && x <= '9'; });
  });
  if (parts.size() < 2 || parts.size() > 3 || !digits || parts[0] != "1")
    malformed(what, "unsupported \"spec_version\" \"" + c.spec_version + "\" (this client: 1.x)");
  c.expires_text = get_string(j, "expires", what);
  c.expires = parse_expires(c.expires_text, what);
}

Key parse_key(const json& j, const std::string& what) {
  Key k;
  k.keytype = get_string(j, "keytype", what);
  k.scheme = get_string(j, "scheme", what);
  k.public_value = get_string(field(j, "keyval", what), "public", what);
  return k;
}

std::map<std::string, Key> parse_keys(const json& j, const std::string& what) {
  if (!j.is_object()) malformed(what, "\"keys\" is not an object");
  std::map<std::string, Key> keys;
  for (auto it = j.begin(); it != j.end(); ++it)
    keys[it.key()] = parse_key(it.value(), what + " key " + it.key());
  return keys;
}

RoleKeys parse_role_keys(const json& j, const std::string& what) {
  RoleKeys r;
  r.keyids = get_string_list(field(j, "keyids", what), what, "keyids");
  std::set<std::string> unique(r.keyids.begin(), r.keyids.end());
  if (unique.size() != r.keyids.size()) malformed(what, "\"keyids\" lists a keyid twice");
  r.threshold = static_cast<int>(get_int(j, "threshold", what, 1));
  return r;
}

std::map<std::string, std::string> parse_hashes(const json& j, const std::string& what) {
  if (!j.is_object() || j.empty()) malformed(what, "\"hashes\" is not a non-empty object");
  std::map<std::string, std::string> h;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string()) malformed(what, "hash \"" + it.key() + "\" is not a string");
    h[it.key()] = it.value().get<std::string>();
  }
  return h;
}

MetaFile parse_metafile(const json& j, const std::string& what) {
  MetaFile m;
  m.version = get_int(j, "version", what, 1);
  if (j.contains("length")) m.length = get_int(j, "length", what, 0);
  if (j.contains("hashes")) m.hashes = parse_hashes(j["hashes"], what);
  return m;
}

}  // namespace

std::optional<std::time_t> parse_utc_time(std::string_view text) {
  std::string s(text);
  int y, mo, d, h, mi, se;
  char tail = 0;
  if (s.size() != 20 ||
      std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &se, &tail) != 7 ||
      tail != 'Z' || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':')
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return std::nullopt;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  return timegm(&tm);
}

std::string format_utc_time(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string canonical_json(const json& j) {
  std::string out;
  canonical_into(j, out);
  return out;
}

Envelope parse_envelope(std::string_view bytes, const std::string& what) {
  json doc = json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (doc.is_discarded()) malformed(what, "not valid JSON");
  if (!doc.is_object()) malformed(what, "not a JSON object");
  Envelope env;
  env.signed_json = field(doc, "signed", what);
  if (!env.signed_json.is_object()) malformed(what, "\"signed\" is not an object");
  try {
    env.canonical_signed = canonical_json(env.signed_json);
  } catch (const Error& e) {
    // canonical_json knows no file: name it (a float anywhere in "signed"; found by fuzzing).
    const std::string m = e.what();
    const std::size_t at = m.find("canonical JSON");
    malformed(what, "\"signed\": " + (at == std::string::npos ? m : m.substr(at)));
  }
  const json& sigs = field(doc, "signatures", what);
  if (!sigs.is_array()) malformed(what, "\"signatures\" is not a list");
  for (const auto& s : sigs) {
    std::string keyid = get_string(s, "keyid", what + " signature");
    std::string sig_hex = get_string(s, "sig", what + " signature");
    if (env.signatures.count(keyid))
      malformed(what, "two signatures carry keyid " + keyid + " (keyids must be unique)");
    // A signature that is not hex cannot verify; keep it as empty bytes so it counts nothing.
    env.signatures[keyid] = hex_decode(sig_hex).value_or(std::string());
  }
  return env;
}

Root parse_root(const json& j, const std::string& what) {
  Root r;
  parse_common(j, "root", what, r);
  const json& cs = field(j, "consistent_snapshot", what);
  if (!cs.is_boolean()) malformed(what, "\"consistent_snapshot\" is not a boolean");
  r.consistent_snapshot = cs.get<bool>();
  r.keys = parse_keys(field(j, "keys", what), what);
  const json& roles = field(j, "roles", what);
  if (!roles.is_object()) malformed(what, "\"roles\" is not an object");
  for (auto it = roles.begin(); it != roles.end(); ++it)
    r.roles[it.key()] = parse_role_keys(it.value(), what + " role " + it.key());
  for (const char* need : {"root", "timestamp", "snapshot", "targets"})
    if (!r.roles.count(need)) malformed(what, std::string("\"roles\" has no \"") + need + "\"");
  if (r.roles.size() != 4)
    malformed(what, "\"roles\" names " + std::to_string(r.roles.size()) +
                        " roles, expected exactly root, timestamp, snapshot, targets");
  return r;
}

Timestamp parse_timestamp(const json& j, const std::string& what) {
  Timestamp t;
  parse_common(j, "timestamp", what, t);
  const json& meta = field(j, "meta", what);
  if (!meta.is_object() || meta.size() != 1 || !meta.contains("snapshot.json"))
    malformed(what, "\"meta\" must hold exactly \"snapshot.json\"");
  t.snapshot_meta = parse_metafile(meta["snapshot.json"], what + " meta snapshot.json");
  return t;
}

Snapshot parse_snapshot(const json& j, const std::string& what) {
  Snapshot s;
  parse_common(j, "snapshot", what, s);
  const json& meta = field(j, "meta", what);
  if (!meta.is_object()) malformed(what, "\"meta\" is not an object");
  for (auto it = meta.begin(); it != meta.end(); ++it)
    s.meta[it.key()] = parse_metafile(it.value(), what + " meta " + it.key());
  return s;
}

Targets parse_targets(const json& j, const std::string& what) {
  Targets t;
  parse_common(j, "targets", what, t);
  const json& targets = field(j, "targets", what);
  if (!targets.is_object()) malformed(what, "\"targets\" is not an object");
  for (auto it = targets.begin(); it != targets.end(); ++it) {
    std::string w = what + " target " + it.key();
    TargetFile f;
    f.path = it.key();
    f.length = get_int(it.value(), "length", w, 0);
    f.hashes = parse_hashes(field(it.value(), "hashes", w), w);
    t.targets[it.key()] = std::move(f);
  }
  if (j.contains("delegations")) {
    const json& dj = j["delegations"];
    Delegations d;
    d.keys = parse_keys(field(dj, "keys", what), what);
    bool has_roles = dj.contains("roles"), has_succinct = dj.contains("succinct_roles");
    if (has_roles == has_succinct)
      malformed(what, "\"delegations\" needs exactly one of \"roles\" and \"succinct_roles\"");
    if (has_roles) {
      if (!dj["roles"].is_array()) malformed(what, "delegation \"roles\" is not a list");
      std::set<std::string> names;
      for (const auto& rj : dj["roles"]) {
        DelegatedRole r;
        r.name = get_string(rj, "name", what + " delegation");
        std::string w = what + " delegation " + r.name;
        if (r.name == "root" || r.name == "timestamp" || r.name == "snapshot" ||
            r.name == "targets")
          malformed(w, "a delegated role may not use a top-level role name");
        if (!names.insert(r.name).second) malformed(w, "delegated twice in one role");
        r.keys = parse_role_keys(rj, w);
        const json& term = field(rj, "terminating", w);
        if (!term.is_boolean()) malformed(w, "\"terminating\" is not a boolean");
        r.terminating = term.get<bool>();
        if (rj.contains("paths")) r.paths = get_string_list(rj["paths"], w, "paths");
        if (rj.contains("path_hash_prefixes"))
          r.path_hash_prefixes = get_string_list(rj["path_hash_prefixes"], w, "path_hash_prefixes");
        if (r.paths && r.path_hash_prefixes)
          malformed(w, "has both \"paths\" and \"path_hash_prefixes\"");
        d.roles.push_back(std::move(r));
      }
    } else {
      const json& sj = dj["succinct_roles"];
      SuccinctRoles s;
      s.keys = parse_role_keys(sj, what + " succinct_roles");
      s.bit_length = static_cast<int>(get_int(sj, "bit_length", what + " succinct_roles", 1));
      if (s.bit_length > 32) malformed(what, "succinct_roles \"bit_length\" is above 32");
      s.name_prefix = get_string(sj, "name_prefix", what + " succinct_roles");
      d.succinct = std::move(s);
    }
    t.delegations = std::move(d);
  }
  return t;
}

void verify_threshold(const Envelope& env, const std::map<std::string, Key>& keys,
                      const RoleKeys& role, const std::string& role_name,
                      const std::string& signer_name) {
  int valid = 0;
  for (const auto& keyid : role.keyids) {  // keyids are unique (parse_role_keys)
    auto k = keys.find(keyid);
    auto s = env.signatures.find(keyid);
    if (k == keys.end() || s == env.signatures.end()) continue;
    if (verify_signature(k->second, s->second, env.canonical_signed)) ++valid;
  }
  if (valid >= role.threshold) return;
  std::vector<std::string> untrusted;
  for (const auto& [keyid, sig] : env.signatures)
    if (std::find(role.keyids.begin(), role.keyids.end(), keyid) == role.keyids.end())
      untrusted.push_back(keyid.substr(0, 8));
  std::string msg = role_name + " has " + std::to_string(valid) +
                    " valid signature(s) from the keys " + signer_name +
                    " trusts for it, threshold is " + std::to_string(role.threshold);
  if (untrusted.empty()) throw Error(Attack::BadSignature, msg);
  msg += "; signed by key(s) " + util::join(untrusted, ", ") + " that " + signer_name +
         " does not list for it";
  bool only_untrusted = valid == 0;
  for (const auto& [keyid, sig] : env.signatures)
    if (std::find(role.keyids.begin(), role.keyids.end(), keyid) != role.keyids.end())
      only_untrusted = false;
  throw Error(only_untrusted ? Attack::UntrustedKey : Attack::BadSignature, msg);
}

std::string quote_name(std::string_view name) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : name) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '.' || c == '-' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

}  // namespace kiln::tuf