#pragma once
// The TUF client's trusted metadata and every rule of specification 1.0.34 section 5 that
// decides whether new bytes may join it. Pure logic: bytes in, typed metadata or a named
// tuf::Error out; the clock is a value passed in (so faketime and tests control it).
//
// Order of use (TrustedSet refuses any other as Error{Internal}):
//   TrustedSet(root bytes)     the anchor; must carry a threshold of its own signatures
//   update_root(N+1) ...       each signed by a threshold of N and of itself
//   update_timestamp           the root must not be expired by now
//   update_snapshot            length/hashes as timestamp says (unless from the local disk)
//   update_delegated_targets   "targets" (delegator "root"), then delegated roles
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "tuf/tuf_metadata.hpp"

namespace kiln::tuf {

// The freeze rule, the same for every role: throws Attack::Expired when `role` is past its
// "expires" at `now`, naming `file`, its version and that date.
void refuse_if_expired(const Common& role, const std::string& file, std::time_t now);

class TrustedSet {
 public:
  TrustedSet(std::string_view root_bytes, std::time_t now);

  // Root N+1: signed by a threshold of the trusted root's root keys and of its own, with
  // version exactly N+1. Expiry is not checked here (an intermediate root may be expired).
  void update_root(std::string_view bytes);

  // Rules: root not expired; signed by the root's timestamp threshold; version not lower
  // (Attack::Rollback) nor equal (Attack::EqualVersion: keep ours); snapshot version it names
  // not lower than the trusted timestamp's; not expired (Attack::Expired) — checked after the
  // new timestamp is taken as the reference for rollback, as the spec orders.
  void update_timestamp(std::string_view bytes);

  // `from_local_disk`: bytes from our own metadata dir, already checked when stored: length and
  // hashes are not compared to timestamp (they may predate it), everything else is.
  void update_snapshot(std::string_view bytes, bool from_local_disk);

  // Targets role `role`, delegated by `delegator` ("root" for top-level targets). Checks the
  // snapshot first (not expired, version matches timestamp), then length/hashes/version
  // against the snapshot's entry, signatures against the delegator's keys for this role, and
  // expiry. A role already trusted through the same delegator is returned as is; reached
  // through another delegator, its bytes are verified again against that delegator's keys.
  const Targets& update_delegated_targets(std::string_view bytes, const std::string& role,
                                          const std::string& delegator);

  // The trusted targets role, if it was verified through `delegator`; nullptr otherwise.
  const Targets* trusted_targets(const std::string& role, const std::string& delegator) const;
  // The bytes of a trusted targets role, whichever delegator it was verified through.
  const std::string* trusted_targets_bytes(const std::string& role) const;

  const Root& root() const { return root_; }
  const std::optional<Timestamp>& timestamp() const { return timestamp_; }
  const std::optional<Snapshot>& snapshot() const { return snapshot_; }
  std::time_t now() const { return now_; }

  // Throws unless the trusted snapshot is valid as final: not expired and the version the
  // timestamp names.
  void check_final_snapshot() const;

 private:
  struct TrustedTargets {
    Targets targets;
    std::string bytes;
    std::string delegator;
  };
  const std::map<std::string, Key>* delegator_keys(const std::string& delegator,
                                                   const std::string& role, RoleKeys& out) const;

  std::time_t now_;
  Root root_;
  std::optional<Timestamp> timestamp_;
  std::optional<Snapshot> snapshot_;
  std::map<std::string, TrustedTargets> targets_;
};

}  // namespace kiln::tuf
