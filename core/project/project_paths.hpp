#pragma once
// Which paths a command takes for a project's: the project it acts on when none is named, and a
// package description file among the other inputs it reads. Unit-tested in
// tests/packages_test.cpp.
#include <filesystem>
#include <string>

namespace kiln::project {

// The project a command acts on when none is named: the current directory ("."), when it holds
// registry/package.json; else `built_from` (the tree kiln was configured from, "" when unknown)
// when that still holds one; else "." (and load_project names what is missing).
std::string default_project_dir(const std::string& built_from);

// Whether `path` is a regular file named as a description is (<anything>.package.json).
bool is_package_description_file(const std::filesystem::path& path);

}  // namespace kiln::project
