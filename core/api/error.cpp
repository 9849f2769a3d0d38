#include "kiln/error.hpp"

namespace kiln {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Internal:
      return "internal";
    case ErrorKind::Usage:
      return "usage";
    case ErrorKind::Integrity:
      return "integrity";
    case ErrorKind::Stale:
      return "stale";
    case ErrorKind::Unsupported:
      return "unsupported";
    case ErrorKind::NotFound:
      return "not-found";
    case ErrorKind::Compile:
      return "compile";
    case ErrorKind::Network:
      return "network";
    case ErrorKind::Io:
      return "io";
    case ErrorKind::Format:
      return "format";
    case ErrorKind::Driver:
      return "driver";
    case ErrorKind::Limit:
      return "limit";
  }
  return "internal";
}

// Documented in docs/exit-codes.md; keep the two in step.
int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Internal:
      return 1;
    case ErrorKind::Usage:
      return 2;
    case ErrorKind::Integrity:
      return 3;
    case ErrorKind::Stale:
      return 4;
    case ErrorKind::Unsupported:
      return 5;
    case ErrorKind::NotFound:
      return 6;
    case ErrorKind::Compile:
      return 7;
    case ErrorKind::Network:
      return 8;
    case ErrorKind::Io:
      return 9;
    case ErrorKind::Format:
      return 10;
    case ErrorKind::Driver:
      return 11;
    case ErrorKind::Limit:
      return 12;
  }
  return 1;
}

}  // namespace kiln

namespace kiln {

const std::vector<ErrorField>& Error::fields() const {
  static const std::vector<ErrorField> kNone;
  return fields_ ? *fields_ : kNone;
}

const std::string* Error::field(std::string_view name) const {
  for (const auto& f : fields())
    if (f.name == name) return &f.value;
  return nullptr;
}

Error Error::with(std::string name, std::string value) const {
  std::vector<ErrorField> more = fields();
  more.push_back({std::move(name), std::move(value)});
  return Error(kind_, what(), std::move(more));
}

}  // namespace kiln
