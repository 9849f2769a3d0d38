#include "tuf_repo.hpp"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "atomic_file.hpp"
#include "kiln/error.hpp"
#include "tuf_metadata.hpp"
#include "tuf_signer.hpp"

namespace kiln::tuf_repo {

namespace fs = std::filesystem;
using nlohmann::json;
using tuf::Signer;

namespace {

const char* kSpec = "1.0.34";

fs::path key_path(const fs::path& dir, const std::string& role) {
  return dir / "keys" / (role + ".pem");
}

// The scheme is kept beside the key: "<role>.scheme" holds one line.
Signer load_key(const fs::path& dir, const std::string& role) {
  fs::path p = key_path(dir, role);
  std::string scheme = read_whole_file(dir / "keys" / (role + ".scheme"));
  while (!scheme.empty() && (scheme.back() == '\n' || scheme.back() == ' ')) scheme.pop_back();
  return Signer::from_private_pem(read_whole_file(p), scheme);
}

void save_key(const fs::path& dir, const std::string& role, const Signer& s) {
  fs::create_directories(dir / "keys");
  write_file_atomically(key_path(dir, role), s.private_pem());
  ::chmod(key_path(dir, role).c_str(), 0600);
  write_file_atomically(dir / "keys" / (role + ".scheme"), s.public_key().scheme + "\n");
}

json read_signed(const fs::path& dir, const std::string& file) {
  fs::path p = dir / "metadata" / file;
  json doc = json::parse(read_whole_file(p), nullptr, false);
  if (doc.is_discarded() || !doc.contains("signed"))
    throw Error(ErrorKind::Format, p.string() + ": not TUF metadata");
  return doc["signed"];
}

void write_signed(const fs::path& dir, const std::string& file, const json& signed_json,
                  const std::vector<const Signer*>& signers) {
  write_file_atomically(dir / "metadata" / file, tuf::sign_metadata(signed_json, signers));
}

json common(const char* type, std::int64_t version, std::time_t expires) {
  return {{"_type", type},
          {"spec_version", kSpec},
          {"version", version},
          {"expires", format_expires(expires)}};
}

std::time_t days(std::time_t now, int n) { return now + static_cast<std::time_t>(n) * 86400; }

void publish_snapshot_timestamp(const fs::path& dir, const Expiry& e, std::time_t now) {
  json targets_signed = read_signed(dir, "targets.json");
  json snapshot = read_signed(dir, "snapshot.json");
  std::int64_t snap_version = snapshot["version"].get<std::int64_t>() + 1;
  json next_snapshot = common("snapshot", snap_version, days(now, e.snapshot_days));
  std::string targets_bytes = read_whole_file(dir / "metadata" / "targets.json");
  next_snapshot["meta"] = {{"targets.json",
                            {{"version", targets_signed["version"]},
                             {"length", targets_bytes.size()},
                             {"hashes", {{"sha256", *tuf::hex_digest("sha256", targets_bytes)}}}}}};
  Signer snap_key = load_key(dir, "snapshot");
  write_signed(dir, "snapshot.json", next_snapshot, {&snap_key});

  std::string snapshot_bytes = read_whole_file(dir / "metadata" / "snapshot.json");
  json timestamp = read_signed(dir, "timestamp.json");
  json next_ts = common("timestamp", timestamp["version"].get<std::int64_t>() + 1,
                        days(now, e.timestamp_days));
  next_ts["meta"] = {{"snapshot.json",
                      {{"version", snap_version},
                       {"length", snapshot_bytes.size()},
                       {"hashes", {{"sha256", *tuf::hex_digest("sha256", snapshot_bytes)}}}}}};
  Signer ts_key = load_key(dir, "timestamp");
  write_signed(dir, "timestamp.json", next_ts, {&ts_key});
}

}  // namespace

std::string format_expires(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void init_repository(const fs::path& dir, const std::string& scheme, const Expiry& e,
                     std::time_t now) {
  if (fs::exists(dir / "metadata" / "root.json"))
    throw Error(ErrorKind::Usage, (dir / "metadata" / "root.json").string() +
                                      " exists: this directory is already a TUF repository");
  fs::create_directories(dir / "metadata");
  fs::create_directories(dir / "targets");
  json root = common("root", 1, days(now, e.root_days));
  root["consistent_snapshot"] = false;
  root["keys"] = json::object();
  root["roles"] = json::object();
  std::vector<Signer> keys;
  for (const char* role : {"root", "targets", "snapshot", "timestamp"}) {
    Signer s = Signer::generate(scheme);
    save_key(dir, role, s);
    root["keys"][s.keyid()] = tuf::key_to_json(s.public_key());
    root["roles"][role] = {{"keyids", {s.keyid()}}, {"threshold", 1}};
    keys.push_back(std::move(s));
  }
  write_signed(dir, "1.root.json", root, {&keys[0]});
  write_signed(dir, "root.json", root, {&keys[0]});
  json targets = common("targets", 1, days(now, e.targets_days));
  targets["targets"] = json::object();
  write_signed(dir, "targets.json", targets, {&keys[1]});
  // Version 0 placeholders are never published: publish_snapshot_timestamp writes v1 of both.
  write_file_atomically(dir / "metadata" / "snapshot.json",
                        json{{"signed", {{"version", 0}}}}.dump());
  write_file_atomically(dir / "metadata" / "timestamp.json",
                        json{{"signed", {{"version", 0}}}}.dump());
  publish_snapshot_timestamp(dir, e, now);
}

std::vector<std::string> add_targets(const fs::path& dir, const std::vector<fs::path>& files,
                                     const Expiry& e, std::time_t now) {
  json targets = read_signed(dir, "targets.json");
  json next =
      common("targets", targets["version"].get<std::int64_t>() + 1, days(now, e.targets_days));
  next["targets"] = targets["targets"];
  if (targets.contains("delegations")) next["delegations"] = targets["delegations"];
  std::vector<std::string> names;
  for (const auto& f : files) {
    std::string data = read_whole_file(f);
    std::string name = f.filename().string();
    write_file_atomically(dir / "targets" / name, data);
    next["targets"][name] = {{"length", data.size()},
                             {"hashes",
                              {{"sha256", *tuf::hex_digest("sha256", data)},
                               {"sha512", *tuf::hex_digest("sha512", data)}}}};
    names.push_back(name);
  }
  Signer key = load_key(dir, "targets");
  write_signed(dir, "targets.json", next, {&key});
  publish_snapshot_timestamp(dir, e, now);
  return names;
}

void refresh_snapshot_timestamp(const fs::path& dir, const Expiry& e, std::time_t now) {
  publish_snapshot_timestamp(dir, e, now);
}

void rotate_key(const fs::path& dir, const std::string& role, const std::string& scheme,
                const Expiry& e, std::time_t now) {
  if (role != "root" && role != "targets" && role != "snapshot" && role != "timestamp")
    throw Error(ErrorKind::Usage,
                "rotate: unknown role \"" + role + "\" (root, targets, snapshot, timestamp)");
  json root = read_signed(dir, "root.json");
  std::int64_t version = root["version"].get<std::int64_t>() + 1;
  Signer old_root = load_key(dir, "root");
  Signer old_key = load_key(dir, role);
  Signer fresh = Signer::generate(scheme);
  json next = root;
  next["version"] = version;
  next["expires"] = format_expires(days(now, e.root_days));
  next["keys"].erase(old_key.keyid());
  next["keys"][fresh.keyid()] = tuf::key_to_json(fresh.public_key());
  next["roles"][role]["keyids"] = {fresh.keyid()};
  std::vector<const Signer*> signers{&old_root};
  if (role == "root") signers.push_back(&fresh);
  write_signed(dir, std::to_string(version) + ".root.json", next, signers);
  write_signed(dir, "root.json", next, signers);
  fs::rename(key_path(dir, role),
             dir / "keys" / (role + ".pem." + std::to_string(version - 1) + ".old"));
  save_key(dir, role, fresh);
  // Re-sign what the new key now signs, so clients see it at once.
  if (role == "targets") {
    add_targets(dir, {}, e, now);
  } else if (role != "root") {
    publish_snapshot_timestamp(dir, e, now);
  }
}

}  // namespace kiln::tuf_repo
