#include "tuf/tuf_trusted_set.hpp"

#include "tuf/tuf_delegation.hpp"

namespace kiln::tuf {

namespace {

std::string v(std::int64_t n) { return std::to_string(n); }

[[noreturn]] void out_of_order(const std::string& what) {
  throw kiln::Error(ErrorKind::Internal, "tuf: " + what + " (client workflow out of order)");
}

}  // namespace

// "3 days", "1 year 12 days", "40 minutes": how far the clock is past an expiry, for a reader
// deciding whether the clock or the repository is wrong.
std::string how_long(std::time_t seconds) {
  const std::int64_t s = seconds;
  auto unit = [](std::int64_t n, const char* one) {
    return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
  };
  if (s < 3600) return unit(s / 60, "minute");
  if (s < 86400) return unit(s / 3600, "hour");
  if (s < 365 * 86400) return unit(s / 86400, "day");
  return unit(s / (365 * 86400), "year") + " " + unit(s % (365 * 86400) / 86400, "day");
}

void refuse_if_expired(const Common& role, const std::string& file, std::time_t now) {
  if (role.expired(now))
    throw Error(Attack::Expired,
                file + " v" + v(role.version) + ": field \"expires\" is " + role.expires_text +
                    ", now is past it: this node's clock reads " + format_utc_time(now) + ", " +
                    how_long(now - role.expires) +
                    " later. Either the metadata has expired (the repository was not re-signed "
                    "in time, or it is being replayed) or this node's clock is wrong: if `date "
                    "-u` is not the real time, set the clock right and try again");
}

TrustedSet::TrustedSet(std::string_view root_bytes, std::time_t now) : now_(now) {
  Envelope env = parse_envelope(root_bytes, "trusted root.json");
  root_ = parse_root(env.signed_json, "trusted root.json");
  verify_threshold(env, root_.keys, root_.roles.at("root"),
                   "trusted root.json v" + v(root_.version), "itself");
}

void TrustedSet::update_root(std::string_view bytes) {
  if (timestamp_) out_of_order("root updated after timestamp");
  std::string what = "root.json v" + v(root_.version + 1);
  Envelope env = parse_envelope(bytes, what);
  Root next = parse_root(env.signed_json, what);
  verify_threshold(env, root_.keys, root_.roles.at("root"), what,
                   "trusted root v" + v(root_.version));
  if (next.version != root_.version + 1)
    throw Error(Attack::RootVersionGap, what + ": field \"version\" is " + v(next.version) +
                                            ", expected " + v(root_.version + 1));
  verify_threshold(env, next.keys, next.roles.at("root"), what, "itself");
  root_ = std::move(next);
}

void TrustedSet::update_timestamp(std::string_view bytes) {
  if (snapshot_) out_of_order("timestamp updated after snapshot");
  refuse_if_expired(root_, "root.json", now_);
  Envelope env = parse_envelope(bytes, "timestamp.json");
  Timestamp next = parse_timestamp(env.signed_json, "timestamp.json");
  verify_threshold(env, root_.keys, root_.roles.at("timestamp"),
                   "timestamp.json v" + v(next.version), "root v" + v(root_.version));
  if (timestamp_) {
    if (next.version < timestamp_->version)
      throw Error(Attack::Rollback, "timestamp.json: field \"version\" is " + v(next.version) +
                                        ", trusted version is " + v(timestamp_->version));
    if (next.version == timestamp_->version)
      throw Error(Attack::EqualVersion,
                  "timestamp.json: field \"version\" is " + v(next.version) + ", same as trusted");
    if (next.snapshot_meta.version < timestamp_->snapshot_meta.version)
      throw Error(Attack::Rollback,
                  "timestamp.json v" + v(next.version) + ": field meta.snapshot.json.version is " +
                      v(next.snapshot_meta.version) + ", trusted timestamp names " +
                      v(timestamp_->snapshot_meta.version));
  }
  // Trusted before the expiry check: an expired but newer timestamp still raises the bar
  // for rollback of the next one (spec 5.4.3-5.4.4).
  timestamp_ = std::move(next);
  refuse_if_expired(*timestamp_, "timestamp.json", now_);
}

void TrustedSet::update_snapshot(std::string_view bytes, bool from_local_disk) {
  if (!timestamp_) out_of_order("snapshot before timestamp");
  if (!targets_.empty()) out_of_order("snapshot updated after targets");
  refuse_if_expired(*timestamp_, "timestamp.json", now_);
  const MetaFile& meta = timestamp_->snapshot_meta;
  if (!from_local_disk)
    verify_length_and_hashes(bytes, meta.length, meta.hashes, Attack::SnapshotMismatch,
                             "snapshot.json (timestamp v" + v(timestamp_->version) + " meta)");
  Envelope env = parse_envelope(bytes, "snapshot.json");
  Snapshot next = parse_snapshot(env.signed_json, "snapshot.json");
  verify_threshold(env, root_.keys, root_.roles.at("snapshot"), "snapshot.json v" + v(next.version),
                   "root v" + v(root_.version));
  if (snapshot_) {
    for (const auto& [name, info] : snapshot_->meta) {
      auto it = next.meta.find(name);
      if (it == next.meta.end())
        throw Error(Attack::Rollback, "snapshot.json v" + v(next.version) + ": meta \"" + name +
                                          "\" is missing, trusted snapshot v" +
                                          v(snapshot_->version) + " has version " +
                                          v(info.version));
      if (it->second.version < info.version)
        throw Error(Attack::Rollback, "snapshot.json v" + v(next.version) + ": meta \"" + name +
                                          "\" version is " + v(it->second.version) +
                                          ", trusted snapshot has " + v(info.version));
    }
  }
  snapshot_ = std::move(next);
  check_final_snapshot();
}

void TrustedSet::check_final_snapshot() const {
  if (!snapshot_ || !timestamp_) out_of_order("snapshot not loaded");
  refuse_if_expired(*snapshot_, "snapshot.json", now_);
  if (snapshot_->version != timestamp_->snapshot_meta.version)
    throw Error(Attack::SnapshotMismatch,
                "snapshot.json: field \"version\" is " + v(snapshot_->version) + ", timestamp v" +
                    v(timestamp_->version) + " names " + v(timestamp_->snapshot_meta.version));
}

const std::map<std::string, Key>* TrustedSet::delegator_keys(const std::string& delegator,
                                                             const std::string& role,
                                                             RoleKeys& out) const {
  if (delegator == "root") {
    if (role != "targets") return nullptr;
    out = root_.roles.at("targets");
    return &root_.keys;
  }
  auto it = targets_.find(delegator);
  if (it == targets_.end() || !it->second.targets.delegations) return nullptr;
  const Delegations& d = *it->second.targets.delegations;
  for (const auto& r : d.roles)
    if (r.name == role) {
      out = r.keys;
      return &d.keys;
    }
  if (d.succinct && is_succinct_role(*d.succinct, role)) {
    out = d.succinct->keys;
    return &d.keys;
  }
  return nullptr;
}

const Targets& TrustedSet::update_delegated_targets(std::string_view bytes, const std::string& role,
                                                    const std::string& delegator) {
  if (!snapshot_) out_of_order("targets before snapshot");
  check_final_snapshot();
  RoleKeys role_keys;
  const std::map<std::string, Key>* keys = delegator_keys(delegator, role, role_keys);
  if (!keys)
    throw Error(Attack::NotDelegated,
                "role \"" + role + "\" is not delegated by trusted \"" + delegator + "\"");
  std::string file = role + ".json";
  auto meta = snapshot_->meta.find(file);
  if (meta == snapshot_->meta.end())
    throw Error(Attack::NotDelegated, "snapshot.json v" + v(snapshot_->version) +
                                          " has no meta entry for \"" + file + "\"");
  verify_length_and_hashes(bytes, meta->second.length, meta->second.hashes, Attack::MixAndMatch,
                           file + " (snapshot v" + v(snapshot_->version) + " meta)");
  Envelope env = parse_envelope(bytes, file);
  Targets next = parse_targets(env.signed_json, file);
  verify_threshold(env, *keys, role_keys, file + " v" + v(next.version), "\"" + delegator + "\"");
  if (next.version != meta->second.version)
    throw Error(Attack::MixAndMatch, file + ": field \"version\" is " + v(next.version) +
                                         ", snapshot v" + v(snapshot_->version) + " names " +
                                         v(meta->second.version));
  refuse_if_expired(next, file, now_);
  auto& slot = targets_[role];
  slot.targets = std::move(next);
  slot.bytes = std::string(bytes);
  slot.delegator = delegator;
  return slot.targets;
}

const Targets* TrustedSet::trusted_targets(const std::string& role,
                                           const std::string& delegator) const {
  auto it = targets_.find(role);
  if (it == targets_.end() || it->second.delegator != delegator) return nullptr;
  return &it->second.targets;
}

const std::string* TrustedSet::trusted_targets_bytes(const std::string& role) const {
  auto it = targets_.find(role);
  return it == targets_.end() ? nullptr : &it->second.bytes;
}

}  // namespace kiln::tuf
