#pragma once
// One error model: library code throws kiln::Error (kind + message + context fields); the CLI
// maps kinds to exit codes (see docs/exit-codes.md) and prints the fields with --json.
//
// Context fields are an ordered list of (name, value) pairs. Code that decides something from
// an error reads kind() and field(), never the message text, which is for people. The names in
// use are listed in docs/exit-codes.md.
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

struct ErrorField {
  std::string name;
  std::string value;
  bool operator==(const ErrorField& o) const { return name == o.name && value == o.value; }
};

// KILN_API: its typeinfo and vtable are libkiln's, so `catch (const kiln::Error&)` in an
// application matches what libkiln throws.
class KILN_API Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Error(ErrorKind kind, const std::string& message, std::vector<ErrorField> fields)
      : std::runtime_error(message),
        kind_(kind),
        fields_(fields.empty()
                    ? nullptr
                    : std::make_shared<const std::vector<ErrorField>>(std::move(fields))) {}
  ErrorKind kind() const { return kind_; }
  // Every context field, in the order they were added (empty when there are none).
  const std::vector<ErrorField>& fields() const;
  // The value of the first field called `name`; nullptr when there is none.
  const std::string* field(std::string_view name) const;
  // A copy of this error with one more field; `throw e.with("mirror", m)` adds context on the
  // way up without touching the message.
  Error with(std::string name, std::string value) const;

 private:
  ErrorKind kind_;
  // Shared and immutable, so that copying an Error (as throw and exception_ptr do) cannot throw.
  std::shared_ptr<const std::vector<ErrorField>> fields_;
};

}  // namespace kiln
