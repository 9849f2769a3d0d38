#pragma once
// Errors as Python raises them: kiln._errors turns a kiln::Error of kind usage into
// kiln.UsageValueError unless its "python" field says otherwise (the field is not shown:
// _from_native drops it). These mark the ones that are another built-in for a Python caller.
#include <string>
#include <utility>
#include <vector>

#include "kiln/error.hpp"

namespace kiln::python {

// A wrong type: kiln.UsageTypeError (a TypeError).
inline Error type_error(const std::string& message, std::vector<ErrorField> fields) {
  fields.push_back({"python", "type"});
  return Error(ErrorKind::Usage, message, std::move(fields));
}

// A file the caller named that does not exist: kiln.MissingFileError, a NotFoundError and a
// FileNotFoundError (.path).
inline Error missing_file(const std::string& message, const std::string& path) {
  return Error(ErrorKind::NotFound, message, {{"path", path}, {"python", "missing-file"}});
}

}  // namespace kiln::python
