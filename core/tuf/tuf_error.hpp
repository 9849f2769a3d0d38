#pragma once
// What the TUF client refuses, and the error that carries it. Every refusal of core/tuf is a
// tuf::Error (a kiln::Error) naming its Attack, so a caller and a test can tell a rollback
// from a freeze from a bad signature; docs/tuf.md "Errors" lists them.
#include <string>

#include "kiln/error.hpp"

namespace kiln::tuf {

// What the client refused, by the attack (or fault) it guards against. docs/tuf.md lists them.
enum class Attack {
  Malformed,         // not TUF metadata: bad JSON, a missing or mistyped field
  WrongType,         // "_type" is not the role asked for
  BadSignature,      // fewer valid signatures than the role's threshold
  UntrustedKey,      // signed only by keys the role does not list (revoked, or never trusted)
  RootVersionGap,    // root N+1 is not version N+1
  Rollback,          // a version lower than the trusted one
  EqualVersion,      // timestamp version equal to the trusted one (not an attack: keep ours)
  Expired,           // freeze: metadata past its "expires"
  SnapshotMismatch,  // snapshot differs from what timestamp names (version, length, hashes)
  MixAndMatch,       // a targets role differs from what snapshot names
  TooLarge,          // a response longer than the bound for it (endless data)
  TargetMismatch,    // target bytes differ from their length or hashes
  NotDelegated,      // a role that no trusted delegation names, or missing from snapshot
  TargetNotFound,    // no trusted role lists the target
  Network,           // the repository did not answer
};
const char* to_string(Attack a);
// The attack as one word for programs: the value of the error's "attack" field
// ("rollback", "freeze", "mix-and-match", ...; docs/tuf.md "Errors").
const char* attack_id(Attack a);

// Carries the field attack=<attack_id>, so the attack survives a copy into a plain kiln::Error
// (Error::with, the loader's resolution failure, `kiln fetch --json`).
class Error : public kiln::Error {
 public:
  Error(Attack attack, const std::string& message);
  Attack attack() const { return attack_; }

 private:
  Attack attack_;
};

}  // namespace kiln::tuf
