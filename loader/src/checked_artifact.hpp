#pragma once
// The one check get() and resolve() make of a store candidate: its artifact read once, then
// held to its manifest entry's size and SHA-256. get() hands the very buffer that was hashed to
// the driver (no re-read between check and use); resolve() reports the outcome, so "what would
// get() load" and "why not this one" come from one place. Defined in loader.cpp; not installed.
#include <cstdint>
#include <string>

#include "kiln/loader.hpp"
#include "plan/resolver.hpp"

namespace kiln {

struct CheckedArtifact {
  enum class Outcome { Verified, Unreadable, Mismatch };
  Outcome outcome = Outcome::Verified;
  std::string bytes;  // Verified: what was read and hashed
  // Otherwise: the candidate with the reason, the read's error (and its kind) or the mismatch
  // in verify_artifact's words (Integrity).
  plan::Rejection refusal;
};

// Throws no kiln::Error: a read that fails is an Unreadable outcome.
CheckedArtifact read_checked_artifact(const plan::StoreScanner& fs, const Candidate& c, std::uint64_t size,
                                      const std::string& sha256);

}  // namespace kiln
