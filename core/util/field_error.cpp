#include "util/field_error.hpp"

namespace kiln::util {

Error field_error(const std::string& path, const std::string& field, const std::string& what,
                  ErrorKind kind) {
  return Error(kind, path + ": " + (field.empty() ? "" : "field '" + field + "': ") + what)
      .with("path", path)
      .with("field", field);
}

void fail(const std::string& path, const std::string& field, const std::string& what,
          ErrorKind kind) {
  throw field_error(path, field, what, kind);
}

}  // namespace kiln::util
