#include "tuf/tuf_error.hpp"

namespace kiln::tuf {

namespace {

ErrorKind kind_of(Attack a) {
  switch (a) {
    case Attack::Malformed:
    case Attack::WrongType:
      return ErrorKind::Format;
    case Attack::TargetNotFound:
      return ErrorKind::NotFound;
    case Attack::Network:
      return ErrorKind::Network;
    default:
      return ErrorKind::Integrity;
  }
}

}  // namespace

const char* to_string(Attack a) {
  switch (a) {
    case Attack::Malformed:
      return "malformed metadata";
    case Attack::WrongType:
      return "wrong role type";
    case Attack::BadSignature:
      return "signature threshold not met";
    case Attack::UntrustedKey:
      return "signed by a key not trusted for the role (revoked or unknown)";
    case Attack::RootVersionGap:
      return "root version not sequential";
    case Attack::Rollback:
      return "rollback";
    case Attack::EqualVersion:
      return "equal version";
    case Attack::Expired:
      return "expired metadata (freeze)";
    case Attack::SnapshotMismatch:
      return "snapshot differs from timestamp";
    case Attack::MixAndMatch:
      return "targets role differs from snapshot (mix-and-match)";
    case Attack::TooLarge:
      return "response too large (endless data)";
    case Attack::TargetMismatch:
      return "target bytes differ from metadata";
    case Attack::NotDelegated:
      return "role not delegated";
    case Attack::TargetNotFound:
      return "target not found";
    case Attack::Network:
      return "repository unreachable";
  }
  return "?";
}

const char* attack_id(Attack a) {
  switch (a) {
    case Attack::Malformed:
      return "malformed";
    case Attack::WrongType:
      return "wrong-type";
    case Attack::BadSignature:
      return "threshold";
    case Attack::UntrustedKey:
      return "untrusted-key";
    case Attack::RootVersionGap:
      return "root-version-gap";
    case Attack::Rollback:
      return "rollback";
    case Attack::EqualVersion:
      return "equal-version";
    case Attack::Expired:
      return "freeze";
    case Attack::SnapshotMismatch:
      return "snapshot-mismatch";
    case Attack::MixAndMatch:
      return "mix-and-match";
    case Attack::TooLarge:
      return "endless-data";
    case Attack::TargetMismatch:
      return "target-mismatch";
    case Attack::NotDelegated:
      return "not-delegated";
    case Attack::TargetNotFound:
      return "target-not-found";
    case Attack::Network:
      return "unreachable";
  }
  return "?";
}

Error::Error(Attack attack, const std::string& message)
    : kiln::Error(kind_of(attack), std::string("tuf: ") + to_string(attack) + ": " + message,
                  {{"attack", attack_id(attack)}}),
      attack_(attack) {}

}  // namespace kiln::tuf
