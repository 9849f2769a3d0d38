#include "tuf/tuf_error.hpp"

#include <cstddef>
#include <iterator>

namespace kiln::tuf {

namespace {

// One row per Attack, in the enum's order: the words a person reads, the id a program reads
// (the "attack" field), and the kind the CLI maps to an exit code. docs/tuf.md "Errors".
struct AttackRow {
  Attack attack;
  const char* description;
  const char* id;
  ErrorKind kind;
};

constexpr AttackRow kAttackRows[] = {
    {Attack::Malformed, "malformed metadata", "malformed", ErrorKind::Format},
    {Attack::WrongType, "wrong role type", "wrong-type", ErrorKind::Format},
    {Attack::BadSignature, "signature threshold not met", "threshold", ErrorKind::Integrity},
    {Attack::UntrustedKey, "signed by a key not trusted for the role (revoked or unknown)",
     "untrusted-key", ErrorKind::Integrity},
    {Attack::RootVersionGap, "root version not sequential", "root-version-gap",
     ErrorKind::Integrity},
    {Attack::Rollback, "rollback", "rollback", ErrorKind::Integrity},
    {Attack::EqualVersion, "equal version", "equal-version", ErrorKind::Integrity},
    {Attack::Expired, "expired metadata (freeze)", "freeze", ErrorKind::Integrity},
    {Attack::SnapshotMismatch, "snapshot differs from timestamp", "snapshot-mismatch",
     ErrorKind::Integrity},
    {Attack::MixAndMatch, "targets role differs from snapshot (mix-and-match)", "mix-and-match",
     ErrorKind::Integrity},
    {Attack::TooLarge, "response too large (endless data)", "endless-data", ErrorKind::Integrity},
    {Attack::TargetMismatch, "target bytes differ from metadata", "target-mismatch",
     ErrorKind::Integrity},
    {Attack::NotDelegated, "role not delegated", "not-delegated", ErrorKind::Integrity},
    {Attack::TargetNotFound, "target not found", "target-not-found", ErrorKind::NotFound},
    {Attack::Network, "repository unreachable", "unreachable", ErrorKind::Network},
};

// Row i is Attack i, so a lookup is an index; a row out of order fails the build.
constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < std::size(kAttackRows); ++i)
    if (static_cast<std::size_t>(kAttackRows[i].attack) != i) return false;
  return std::size(kAttackRows) == static_cast<std::size_t>(Attack::Network) + 1;
}
static_assert(rows_in_enum_order(), "kAttackRows: one row per Attack, in the enum's order");

const AttackRow* row_of(Attack a) {
  auto i = static_cast<std::size_t>(a);
  return i < std::size(kAttackRows) ? &kAttackRows[i] : nullptr;
}

ErrorKind kind_of(Attack a) {
  const AttackRow* row = row_of(a);
  return row ? row->kind : ErrorKind::Integrity;
}

}  // namespace

const char* to_string(Attack a) {
  const AttackRow* row = row_of(a);
  return row ? row->description : "?";
}

const char* attack_id(Attack a) {
  const AttackRow* row = row_of(a);
  return row ? row->id : "?";
}

Error::Error(Attack attack, const std::string& message)
    : kiln::Error(kind_of(attack), std::string("tuf: ") + to_string(attack) + ": " + message,
                  {{"attack", attack_id(attack)}}),
      attack_(attack) {}

}  // namespace kiln::tuf
