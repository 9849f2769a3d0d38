#pragma once
// One error model: library code throws kiln::Error (kind + message); the CLI maps kinds to
// exit codes (see docs/exit-codes.md).
#include <stdexcept>
#include <string>

#include "kiln/export.h"

namespace kiln {

enum class ErrorKind {
  Internal,     // a bug or an unexpected system failure
  Usage,        // bad arguments or configuration
  Integrity,    // a digest or size does not match what is pinned
  Stale,        // version, format version or source hash differs from this libkiln
  Unsupported,  // target or capability missing (arch, nvcc, NVRTC, driver, device)
  NotFound,     // nothing usable where it was looked for
  Compile,      // nvcc / NVRTC failed on a kernel
  Network,      // a mirror could not serve what was asked
  Io,           // reading or writing a file failed
  Format,       // a file is malformed (JSON, archive, fatbin, registry)
  Driver,       // the CUDA driver reported an error
  Limit,        // untrusted input exceeds a limit of docs/security.md (size, depth, count)
};

KILN_API const char* to_string(ErrorKind kind);
KILN_API int exit_code(ErrorKind kind);

// KILN_API: its typeinfo and vtable are libkiln's, so `catch (const kiln::Error&)` in an
// application matches what libkiln throws.
class KILN_API Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace kiln
