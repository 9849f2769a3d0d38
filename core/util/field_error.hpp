#pragma once
// The one error for a bad field of a file kiln reads (a manifest, a shard file, a package
// description): the file and the field named in the message and carried as the error's fields.
#include <string>

#include "kiln/error.hpp"

namespace kiln::util {

// "<path>: field '<field>': <what>" ("<path>: <what>" when `field` is empty), with the fields
// path=<path> and field=<field> (kiln::Error::with), so that `--json` and callers read them
// without parsing the message.
Error field_error(const std::string& path, const std::string& field, const std::string& what,
                  ErrorKind kind = ErrorKind::Format);

// Throws field_error(path, field, what, kind).
[[noreturn]] void fail(const std::string& path, const std::string& field, const std::string& what,
                       ErrorKind kind = ErrorKind::Format);

}  // namespace kiln::util
