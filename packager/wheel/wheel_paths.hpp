#pragma once
// Shared by the wheel files (names, contents, zip, verify): the one rule for a member path.
#include <string>

namespace kiln::wheel {

// A '/'-separated relative path with no empty, "." or ".." part, no backslash and no NUL: the
// only member names a wheel is written with or accepted with.
bool is_plain_path(const std::string& p);

}  // namespace kiln::wheel
