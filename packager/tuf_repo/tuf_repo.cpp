#include "tuf_repo/tuf_repo.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "io/atomic_file.hpp"
#include "io/file_lock.hpp"
#include "io/private_key_scan.hpp"
#include "kiln/error.hpp"
#include "tuf/tuf_metadata.hpp"
#include "tuf/tuf_signer.hpp"
#include "util/join.hpp"

namespace kiln::tuf_repo {

namespace fs = std::filesystem;
using nlohmann::json;
using tuf::Signer;

namespace {

const char* kSpec = "1.0.34";
const char* kRoles[] = {"root", "targets", "snapshot", "timestamp"};

bool known_role(const std::string& role) {
  return std::find(std::begin(kRoles), std::end(kRoles), role) != std::end(kRoles);
}

void check_role(const std::string& role, const std::string& what) {
  if (!known_role(role))
    throw Error(ErrorKind::Usage, "tuf-repo: " + what + ": unknown role \"" + role +
                                      "\" (root, targets, snapshot, timestamp)");
}

void check_signing_scheme(const std::string& scheme, const std::string& what) {
  if (scheme != "ed25519" && scheme != "ecdsa-sha2-nistp256")
    throw Error(ErrorKind::Usage, "tuf-repo: " + what + ": scheme \"" + scheme +
                                      "\" cannot sign here (ed25519, ecdsa-sha2-nistp256)");
}

fs::path role_key_dir(const KeyDirs& keys, const std::string& role) {
  return (role == "root" || role == "targets" ? keys.offline : keys.online) / role;
}

fs::path retired_dir(const KeyDirs& keys, const std::string& role) {
  return (role == "root" || role == "targets" ? keys.offline : keys.online) / "retired" / role;
}

void save_key(const KeyDirs& keys, const std::string& role, const Signer& s) {
  fs::path d = role_key_dir(keys, role);
  fs::create_directories(d);
  ::chmod(d.parent_path().c_str(), 0700);
  ::chmod(d.c_str(), 0700);
  fs::path p = d / (s.keyid() + ".pem");
  io::write_file_atomically(p, s.private_pem());
  ::chmod(p.c_str(), 0600);
}

fs::path metadata_path(const fs::path& dir, const std::string& file) {
  return dir / "metadata" / file;
}

json read_signed(const fs::path& dir, const std::string& file) {
  fs::path p = metadata_path(dir, file);
  json doc = json::parse(io::read_whole_file(p), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("signed") ||
      !doc["signed"].is_object())
    throw Error(ErrorKind::Format, p.string() + ": not TUF metadata (no \"signed\" object)");
  return doc["signed"];
}

std::int64_t version_of(const fs::path& dir, const std::string& file) {
  if (!fs::exists(metadata_path(dir, file))) return 0;
  json s = read_signed(dir, file);
  if (!s.contains("version") || !s["version"].is_number_integer())
    throw Error(ErrorKind::Format,
                metadata_path(dir, file).string() + ": field \"version\" is not an integer");
  return s["version"].get<std::int64_t>();
}

// A root change killed between <N+1>.root.json and root.json: clients already follow N+1 (they
// fetch the versioned names), so root.json is brought up to it before anything reads it; a
// command reading the older root.json would publish a second, different root N+1 (crash points,
// tests/crash/).
void complete_interrupted_root(const fs::path& dir) {
  if (!fs::exists(metadata_path(dir, "root.json"))) return;
  std::int64_t v = version_of(dir, "root.json");
  for (fs::path next; fs::exists(next = metadata_path(dir, std::to_string(v + 1) + ".root.json"));
       ++v)
    io::write_file_atomically(metadata_path(dir, "root.json"), io::read_whole_file(next));
}

// One command at a time writes a repository: flock on the repository directory itself (it is
// served as it is: no lock file in it). Once held, what a command killed mid-write left is
// removed: AtomicFile's temporaries in metadata/ and in the key directories (a kill between a
// file's write and its rename; crash points, tests/crash/).
io::FileLock lock_repository(const fs::path& dir, const KeyDirs& keys) {
  check_keys_apart(dir, keys);
  io::FileLock lock = io::FileLock::acquire_directory(dir, std::chrono::minutes(10));
  complete_interrupted_root(dir);
  if (!lock.held()) return lock;  // a filesystem that cannot lock a directory: nothing removed
  io::remove_orphaned_temps(dir / "metadata");
  for (const char* role : kRoles) io::remove_orphaned_temps(role_key_dir(keys, role));
  return lock;
}

json common(const char* type, std::int64_t version, std::time_t expires) {
  return {{"_type", type},
          {"spec_version", kSpec},
          {"version", version},
          {"expires", tuf::format_utc_time(expires)}};
}

std::time_t days(std::time_t now, int n) { return now + static_cast<std::time_t>(n) * 86400; }

std::string short_id(const std::string& keyid) { return keyid.substr(0, 8); }

// The keys of `role` (as `root` lists them) whose private key files are at hand; refuses
// (Error{NotFound}) when fewer than the role's threshold are, naming the directory, the
// threshold and the missing keyids.
// `pending`: keys made by this command and not saved yet, counted as at hand (not returned).
std::vector<Signer> role_signers(const KeyDirs& keys, const tuf::Root& root,
                                 const std::string& role,
                                 const std::vector<Signer>* pending = nullptr) {
  const tuf::RoleKeys& rk = root.roles.at(role);
  fs::path d = role_key_dir(keys, role);
  std::vector<Signer> out;
  std::vector<std::string> missing;
  int at_hand = 0;
  for (const auto& id : rk.keyids) {
    if (pending && std::any_of(pending->begin(), pending->end(),
                               [&](const Signer& s) { return s.keyid() == id; })) {
      ++at_hand;
      continue;
    }
    fs::path p = d / (id + ".pem");
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) {
      missing.push_back(short_id(id));
      continue;
    }
    Signer s = Signer::from_private_pem(io::read_whole_file(p), root.keys.at(id).scheme);
    if (s.keyid() != id)
      throw Error(ErrorKind::Integrity, p.string() + ": key file holds key " + short_id(s.keyid()) +
                                            ", its name says " + short_id(id));
    out.push_back(std::move(s));
    ++at_hand;
  }
  if (at_hand < rk.threshold)
    throw Error(ErrorKind::NotFound,
                "tuf-repo: signing " + role + " needs " + std::to_string(rk.threshold) +
                    " of its " + std::to_string(rk.keyids.size()) + " keys (threshold, root v" +
                    std::to_string(root.version) + "), found " + std::to_string(at_hand) + " in " +
                    d.string() + " (missing " + util::join(missing, ", ") + ")");
  return out;
}

// What a publication will sign, checked before any file is written.
void check_signers(const KeyDirs& keys, const tuf::Root& root,
                   const std::vector<std::string>& roles,
                   const std::vector<Signer>* pending = nullptr) {
  for (const auto& role : roles) role_signers(keys, root, role, pending);
}

std::vector<std::string> republished_roles(const std::string& changed, bool targets_only) {
  if (changed == "targets")
    return targets_only ? std::vector<std::string>{"targets"}
                        : std::vector<std::string>{"targets", "snapshot", "timestamp"};
  if (changed == "root" || targets_only) return {};
  return {"snapshot", "timestamp"};
}

std::vector<const Signer*> pointers(const std::vector<Signer>& v) {
  std::vector<const Signer*> out;
  for (const auto& s : v) out.push_back(&s);
  return out;
}

tuf::Root trusted_root(const fs::path& dir) {
  return tuf::parse_root(read_signed(dir, "root.json"), metadata_path(dir, "root.json").string());
}

// Writes <name> and, under consistent snapshots, <version>.<name> with the same bytes.
void publish(const fs::path& dir, const std::string& name, std::int64_t version,
             const std::string& bytes, bool consistent) {
  if (consistent)
    io::write_file_atomically(metadata_path(dir, std::to_string(version) + "." + name), bytes);
  io::write_file_atomically(metadata_path(dir, name), bytes);
}

json meta_entry(std::int64_t version, const std::string& bytes) {
  return {{"version", version},
          {"length", bytes.size()},
          {"hashes", {{"sha256", *tuf::hex_digest("sha256", bytes)}}}};
}

// The signers of `role` under `root`, and with `also` (a root about to replace or be replaced
// by it) those of its keys for the role that are at hand too: metadata both roots accept.
std::vector<Signer> signers_for(const KeyDirs& keys, const tuf::Root& root, const std::string& role,
                                const tuf::Root* also) {
  std::vector<Signer> out = role_signers(keys, root, role);
  if (!also) return out;
  fs::path d = role_key_dir(keys, role);
  for (const auto& id : also->roles.at(role).keyids) {
    std::error_code ec;
    if (std::any_of(out.begin(), out.end(), [&](const Signer& s) { return s.keyid() == id; }) ||
        !fs::is_regular_file(d / (id + ".pem"), ec))
      continue;
    out.push_back(
        Signer::from_private_pem(io::read_whole_file(d / (id + ".pem")), also->keys.at(id).scheme));
  }
  return out;
}

void publish_snapshot_timestamp(const fs::path& dir, const KeyDirs& keys, const tuf::Root& root,
                                const Expiry& e, std::time_t now, const tuf::Root* also = nullptr) {
  // Signers first: a missing online key leaves every file as it was.
  std::vector<Signer> snap_keys = signers_for(keys, root, "snapshot", also);
  std::vector<Signer> ts_keys = signers_for(keys, root, "timestamp", also);
  std::string targets_bytes = io::read_whole_file(metadata_path(dir, "targets.json"));
  std::int64_t targets_version = version_of(dir, "targets.json");
  std::int64_t snap_version = version_of(dir, "snapshot.json") + 1;
  json snapshot = common("snapshot", snap_version, days(now, e.snapshot_days));
  snapshot["meta"] = {{"targets.json", meta_entry(targets_version, targets_bytes)}};
  std::string snapshot_bytes = tuf::sign_metadata(snapshot, pointers(snap_keys));
  publish(dir, "snapshot.json", snap_version, snapshot_bytes, root.consistent_snapshot);

  json ts = common("timestamp", version_of(dir, "timestamp.json") + 1, days(now, e.timestamp_days));
  ts["meta"] = {{"snapshot.json", meta_entry(snap_version, snapshot_bytes)}};
  io::write_file_atomically(metadata_path(dir, "timestamp.json"),
                        tuf::sign_metadata(ts, pointers(ts_keys)));
}

// New targets version listing `targets_map`, then (unless `targets_only`: `refresh` publishes
// it where the online keys are) snapshot and timestamp.
void publish_targets(const fs::path& dir, const KeyDirs& keys, const tuf::Root& root,
                     const json& targets_map, bool targets_only, const Expiry& e, std::time_t now,
                     const tuf::Root* also = nullptr) {
  check_signers(keys, root, republished_roles("targets", targets_only));
  std::vector<Signer> signers = signers_for(keys, root, "targets", also);
  std::int64_t version = version_of(dir, "targets.json") + 1;
  json next = common("targets", version, days(now, e.targets_days));
  next["targets"] = targets_map;
  publish(dir, "targets.json", version, tuf::sign_metadata(next, pointers(signers)),
          root.consistent_snapshot);
  if (!targets_only) publish_snapshot_timestamp(dir, keys, root, e, now, also);
}

// What the changed role signs, re-signed under `root` (and `also`, signers_for()).
void resign_after_root_change(const fs::path& dir, const KeyDirs& keys, const RootChangeOptions& o,
                              const tuf::Root& root, const tuf::Root* also, const Expiry& e,
                              std::time_t now) {
  if (o.role == "targets")
    publish_targets(dir, keys, root, read_signed(dir, "targets.json")["targets"], o.targets_only, e,
                    now, also);
  else if (o.role != "root" && !o.targets_only)
    publish_snapshot_timestamp(dir, keys, root, e, now, also);
}

void link_or_copy(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::remove(to, ec);
  fs::create_hard_link(from, to, ec);
  if (ec) fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

// Length, sha256 and sha512 of a file, read in pieces (release archives can be large).
std::pair<std::uint64_t, std::map<std::string, std::string>> hash_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, "tuf-repo add: cannot read " + file.string());
  tuf::MultiHasher hasher({{"sha256", ""}, {"sha512", ""}}, file.string());
  std::vector<char> buf(1 << 20);
  std::uint64_t length = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    auto n = static_cast<std::size_t>(in.gcount());
    hasher.update(std::string_view(buf.data(), n));
    length += n;
  }
  if (in.bad()) throw Error(ErrorKind::Io, "tuf-repo add: reading " + file.string() + " failed");
  return {length, hasher.finish()};
}

// Target path -> file, for files and whole directories.
std::vector<std::pair<std::string, fs::path>> collect_targets(const std::vector<fs::path>& paths) {
  std::vector<std::pair<std::string, fs::path>> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::pair<std::string, fs::path>> in_dir;
      for (const auto& entry : fs::recursive_directory_iterator(p))
        if (entry.is_regular_file())
          in_dir.emplace_back(fs::relative(entry.path(), p).generic_string(), entry.path());
      if (in_dir.empty())
        throw Error(ErrorKind::NotFound, "tuf-repo add: " + p.string() + " holds no files");
      std::sort(in_dir.begin(), in_dir.end());
      out.insert(out.end(), in_dir.begin(), in_dir.end());
    } else if (fs::is_regular_file(p, ec)) {
      out.emplace_back(p.filename().string(), p);
    } else {
      throw Error(ErrorKind::NotFound,
                  "tuf-repo add: " + p.string() + " is neither a file nor a directory");
    }
  }
  return out;
}

}  // namespace

namespace {

// `p` absolute, symbolic links of its existing part resolved, no trailing separator.
fs::path resolved(const fs::path& p) {
  fs::path r = fs::weakly_canonical(fs::absolute(p));
  return r.filename().empty() && r.has_parent_path() && r != r.root_path() ? r.parent_path() : r;
}

bool is_within(const fs::path& inner, const fs::path& outer) {
  auto [o, i] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  return o == outer.end();
}

}  // namespace

fs::path default_keys_dir(const fs::path& dir) {
  fs::path r = resolved(dir);
  if (r.filename().empty())
    throw Error(ErrorKind::Usage, "tuf-repo: --dir " + dir.string() +
                                      " has no name to put the keys beside (<dir>.keys): give "
                                      "--keys-dir");
  return r.parent_path() / (r.filename().string() + ".keys");
}

KeyDirs key_dirs_for(const fs::path& dir, const KeyDirOptions& o) {
  fs::path base = o.keys_dir.empty() ? default_keys_dir(dir) : o.keys_dir;
  return {o.offline.empty() ? base / "offline" : o.offline,
          o.online.empty() ? base / "online" : o.online};
}

void check_keys_apart(const fs::path& dir, const KeyDirs& keys) {
  const fs::path repo = resolved(dir);
  auto refuse = [&](const fs::path& key_dir, const std::string& sentence) {
    throw Error(ErrorKind::Usage,
                "tuf-repo: " + sentence +
                    ": a server publishing the repository would serve the private keys. Keep "
                    "them apart: --keys-dir DIR (default " +
                    default_keys_dir(dir).string() +
                    ", beside the repository), and the offline keys (root, targets) on an "
                    "offline machine (docs/tuf.md)",
                {{"path", key_dir.string()}, {"repository", dir.string()}});
  };
  for (const char* old : {"offline", "online"}) {
    std::error_code ec;
    fs::path legacy = dir / "keys" / old;
    if (fs::is_directory(legacy, ec))
      refuse(legacy, "key directory " + legacy.string() + " is inside the repository " +
                         dir.string() +
                         " (where earlier kiln versions kept keys): move it out (mv " +
                         (dir / "keys").string() + " " + default_keys_dir(dir).string() +
                         "), and rotate every key that may have been served");
  }
  const std::pair<const char*, fs::path> dirs[] = {{"offline", keys.offline},
                                                   {"online", keys.online}};
  for (const auto& [which, key_dir] : dirs) {
    const fs::path k = resolved(key_dir);
    const std::string names = std::string(which) + " key directory " + key_dir.string();
    if (is_within(k, repo)) refuse(key_dir, names + " is inside the repository " + dir.string());
    if (is_within(repo, k))
      refuse(key_dir, names + " holds the repository " + dir.string() +
                          " (a server, or a copy, of one would carry the other)");
  }
}

std::string key_line(const NewKey& k) {
  return k.role + " " + k.keyid + " " + k.scheme + " " + k.file.string();
}

void apply_role_option(std::map<std::string, RoleSpec>& roles, const std::string& what,
                       const std::string& option) {
  auto eq = option.find('=');
  std::string value = eq == std::string::npos ? option : option.substr(eq + 1);
  std::vector<std::string> targets;
  if (eq == std::string::npos) {
    targets.assign(std::begin(kRoles), std::end(kRoles));
  } else {
    targets.push_back(option.substr(0, eq));
    check_role(targets[0], "--" + what + " " + option);
  }
  for (const auto& role : targets) {
    RoleSpec& spec = roles[role];
    if (what == "scheme") {
      check_signing_scheme(value, "--scheme " + option);
      spec.scheme = value;
      continue;
    }
    int n = 0;
    try {
      std::size_t used = 0;
      n = std::stoi(value, &used);
      if (used != value.size()) n = 0;
    } catch (const std::exception&) {
      n = 0;
    }
    if (n < 1 || n > 64)
      throw Error(ErrorKind::Usage, "tuf-repo: --" + what + " " + option + ": \"" + value +
                                        "\" is not a count from 1 to 64");
    (what == "keys" ? spec.keys : spec.threshold) = n;
  }
}

std::vector<NewKey> init_repository(const fs::path& dir, const KeyDirs& keys,
                                    const InitOptions& options, const Expiry& e, std::time_t now) {
  std::map<std::string, RoleSpec> specs;
  for (const char* role : kRoles) {
    auto it = options.roles.find(role);
    specs[role] = it == options.roles.end() ? RoleSpec{} : it->second;
    const RoleSpec& s = specs[role];
    check_signing_scheme(s.scheme, std::string("role ") + role);
    if (s.threshold > s.keys)
      throw Error(ErrorKind::Usage, std::string("tuf-repo init: role ") + role + ": threshold " +
                                        std::to_string(s.threshold) + " is more than its " +
                                        std::to_string(s.keys) + " keys");
  }
  check_keys_apart(dir, keys);
  fs::create_directories(dir);
  io::FileLock lock = lock_repository(dir, keys);
  // timestamp.json is the last file an init writes: without it, no client could have used the
  // repository, and an init that did not finish (killed) starts over. Its keys stay in the key
  // directories, listed by no root.
  if (fs::exists(metadata_path(dir, "timestamp.json")))
    throw Error(ErrorKind::Usage, metadata_path(dir, "timestamp.json").string() +
                                      " exists: this directory is already a TUF repository");
  for (const char* file : {"root.json", "1.root.json", "targets.json", "1.targets.json",
                           "snapshot.json", "1.snapshot.json"}) {
    std::error_code gone;
    fs::remove(metadata_path(dir, file), gone);
  }
  json root = common("root", 1, days(now, e.root_days));
  root["consistent_snapshot"] = options.consistent_snapshot;
  root["keys"] = json::object();
  root["roles"] = json::object();
  std::map<std::string, std::vector<Signer>> signers;
  std::vector<NewKey> written;
  for (const char* role : kRoles) {
    json ids = json::array();
    for (int i = 0; i < specs[role].keys; ++i) {
      Signer s = Signer::generate(specs[role].scheme);
      root["keys"][s.keyid()] = tuf::key_to_json(s.public_key());
      ids.push_back(s.keyid());
      signers[role].push_back(std::move(s));
    }
    root["roles"][role] = {{"keyids", ids}, {"threshold", specs[role].threshold}};
  }
  fs::create_directories(dir / "metadata");
  fs::create_directories(dir / "targets");
  for (const char* role : kRoles)
    for (const auto& s : signers[role]) {
      save_key(keys, role, s);
      written.push_back({role, s.keyid(), s.public_key().scheme,
                         role_key_dir(keys, role) / (s.keyid() + ".pem")});
    }
  std::string root_bytes = tuf::sign_metadata(root, pointers(signers["root"]));
  io::write_file_atomically(metadata_path(dir, "1.root.json"), root_bytes);
  io::write_file_atomically(metadata_path(dir, "root.json"), root_bytes);
  publish_targets(dir, keys, trusted_root(dir), json::object(), false, e, now);
  return written;
}

std::vector<std::string> add_targets(const fs::path& dir, const KeyDirs& keys,
                                     const std::vector<fs::path>& paths, bool targets_only,
                                     const Expiry& e, std::time_t now) {
  io::FileLock lock = lock_repository(dir, keys);
  tuf::Root root = trusted_root(dir);
  // Refuse before copying anything when a key is missing, or when what would be published
  // holds a private key.
  check_signers(keys, root, republished_roles("targets", targets_only));
  std::vector<fs::path> published(paths);
  published.push_back(dir);
  io::refuse_private_key_in(published, "tuf-repo add",
                        "would be published in the TUF repository " + dir.string());
  json targets = read_signed(dir, "targets.json");
  json map = targets.value("targets", json::object());
  std::vector<std::string> names;
  for (const auto& [name, file] : collect_targets(paths)) {
    auto [length, hashes] = hash_file(file);
    fs::path dest = dir / "targets" / name;
    fs::create_directories(dest.parent_path());
    fs::path first = root.consistent_snapshot
                         ? dest.parent_path() / (hashes["sha256"] + "." + dest.filename().string())
                         : dest;
    fs::path tmp = first.string() + ".tmp";
    try {
      fs::copy_file(file, tmp, fs::copy_options::overwrite_existing);
      fs::rename(tmp, first);
    } catch (const fs::filesystem_error&) {
      std::error_code gone;
      fs::remove(tmp, gone);  // a full disk keeps no half copy in the served targets/
      throw;
    }
    if (root.consistent_snapshot)
      link_or_copy(first, dest.parent_path() / (hashes["sha512"] + "." + dest.filename().string()));
    map[name] = {{"length", length}, {"hashes", hashes}};
    names.push_back(name);
  }
  publish_targets(dir, keys, root, map, targets_only, e, now);
  return names;
}

void refresh_snapshot_timestamp(const fs::path& dir, const KeyDirs& keys, const Expiry& e,
                                std::time_t now) {
  io::FileLock lock = lock_repository(dir, keys);
  publish_snapshot_timestamp(dir, keys, trusted_root(dir), e, now);
}

std::vector<std::string> change_root(const fs::path& dir, const KeyDirs& keys,
                                     const RootChangeOptions& o, const Expiry& e, std::time_t now) {
  check_role(o.role, "root change");
  if (!o.scheme.empty()) check_signing_scheme(o.scheme, "--scheme");
  io::FileLock lock = lock_repository(dir, keys);
  json current = read_signed(dir, "root.json");
  tuf::Root old_root = trusted_root(dir);
  json next = current;
  next["version"] = old_root.version + 1;
  next["expires"] = tuf::format_utc_time(days(now, e.root_days));
  const std::string what =
      "tuf-repo: root v" + std::to_string(old_root.version + 1) + ": role " + o.role;

  std::vector<std::string> ids = old_root.roles.at(o.role).keyids;
  std::vector<std::string> leaving;
  std::vector<Signer> fresh;
  if (o.change == RootChange::Rotate) {
    for (const auto& id : ids) {
      fresh.push_back(Signer::generate(o.scheme.empty() ? old_root.keys.at(id).scheme : o.scheme));
      leaving.push_back(id);
    }
    ids.clear();
  } else if (o.change == RootChange::AddKey) {
    fresh.push_back(Signer::generate(o.scheme.empty() ? "ed25519" : o.scheme));
  } else {
    std::vector<std::string> hits;
    for (const auto& id : ids)
      if (o.keyid.size() >= 8 && id.compare(0, o.keyid.size(), o.keyid) == 0) hits.push_back(id);
    if (hits.size() != 1)
      throw Error(ErrorKind::Usage, what + ": keyid \"" + o.keyid + "\" matches " +
                                        std::to_string(hits.size()) +
                                        " of its keys (give 8 or more leading characters of one)");
    leaving = hits;
    ids.erase(std::find(ids.begin(), ids.end(), hits[0]));
  }
  for (const auto& s : fresh) {
    ids.push_back(s.keyid());
    next["keys"][s.keyid()] = tuf::key_to_json(s.public_key());
  }
  int threshold = o.threshold > 0 ? o.threshold : old_root.roles.at(o.role).threshold;
  if (threshold > static_cast<int>(ids.size()))
    throw Error(
        ErrorKind::Usage,
        what + ": threshold " + std::to_string(threshold) + " is more than its " +
            std::to_string(ids.size()) + " keys left" +
            (o.change == RootChange::Revoke ? " (lower it with --threshold, or add a key first)"
                                            : ""));
  next["roles"][o.role] = {{"keyids", ids}, {"threshold", threshold}};
  // Keys no role uses any more leave the key table.
  std::set<std::string> used;
  for (const auto& [name, role] : next["roles"].items())
    for (const auto& id : role["keyids"]) used.insert(id.get<std::string>());
  for (auto it = next["keys"].begin(); it != next["keys"].end();)
    it = used.count(it.key()) ? std::next(it) : next["keys"].erase(it);
  tuf::Root new_root = tuf::parse_root(next, "root v" + std::to_string(old_root.version + 1));

  // Signed by every root key at hand, old and new: a threshold of each is checked below, as
  // a client checks it, before anything is written.
  std::vector<Signer> signers = role_signers(keys, old_root, "root");
  std::set<std::string> have;
  for (const auto& s : signers) have.insert(s.keyid());
  if (o.role == "root")
    for (auto& s : fresh) {
      std::string pem = s.private_pem();
      signers.push_back(Signer::from_private_pem(pem, s.public_key().scheme));
      have.insert(s.keyid());
    }
  int new_root_signers = 0;
  for (const auto& id : new_root.roles.at("root").keyids) new_root_signers += have.count(id);
  if (new_root_signers < new_root.roles.at("root").threshold)
    throw Error(ErrorKind::NotFound,
                what + ": root v" + std::to_string(new_root.version) + " needs " +
                    std::to_string(new_root.roles.at("root").threshold) +
                    " signatures of its own root keys, " + std::to_string(new_root_signers) +
                    " are at hand in " + role_key_dir(keys, "root").string());
  // The roles re-signed after the root, with the new root's keys (the new ones not saved yet).
  check_signers(keys, new_root, republished_roles(o.role, o.targets_only), &fresh);
  std::string bytes = tuf::sign_metadata(next, pointers(signers));
  tuf::Envelope env = tuf::parse_envelope(bytes, "root v" + std::to_string(new_root.version));
  tuf::verify_threshold(env, old_root.keys, old_root.roles.at("root"), "new root",
                        "root v" + std::to_string(old_root.version));
  tuf::verify_threshold(env, new_root.keys, new_root.roles.at("root"), "new root", "itself");

  std::vector<std::string> lines;
  for (const auto& s : fresh) {
    save_key(keys, o.role, s);
    lines.push_back(key_line({o.role, s.keyid(), s.public_key().scheme,
                              role_key_dir(keys, o.role) / (s.keyid() + ".pem")}));
  }
  // The role's metadata are signed by its old and new keys together before the new root is
  // published, and by the new keys alone after: a kill in between leaves metadata that clients
  // of either root accept (crash points, tests/crash/). Old keys not at hand (a lost key being
  // replaced) are skipped.
  resign_after_root_change(dir, keys, o, new_root, &old_root, e, now);
  io::write_file_atomically(metadata_path(dir, std::to_string(new_root.version) + ".root.json"), bytes);
  io::write_file_atomically(metadata_path(dir, "root.json"), bytes);
  for (const auto& id : leaving) {
    fs::path from = role_key_dir(keys, o.role) / (id + ".pem");
    std::error_code ec;
    if (!fs::exists(from, ec)) continue;
    fs::create_directories(retired_dir(keys, o.role));
    fs::rename(from, retired_dir(keys, o.role) / (id + ".pem"));
    lines.push_back("retired " + o.role + " " + id);
  }
  // Re-sign what the role's new keys sign, so clients see them at once.
  resign_after_root_change(dir, keys, o, new_root, nullptr, e, now);
  return lines;
}

}  // namespace kiln::tuf_repo
