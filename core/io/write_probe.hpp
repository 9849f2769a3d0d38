#pragma once
// Whether a directory can really be written: a file is created, written, closed and deleted in
// it (docs/rules.md, "Capabilities are checked whole": permission bits alone do not tell about
// read-only mounts, quotas or root).
#include <string>

namespace kiln::io {

// Creates `dir` when missing, then a file .kiln-doctor-<pid> in it, writes, closes and removes
// it. "" when all of that worked, else why not in words ("cannot create it: ...", "cannot create
// a file in it: ...", "cannot write and delete a file in it").
std::string write_probe(const std::string& dir);

}  // namespace kiln::io
