#pragma once
// Build identity of this libkiln, generated from VERSION and git at build time.

namespace kiln {
const char* version();            // package version from VERSION, e.g. "0.1.0"
const char* git_commit();         // short commit ("" outside git; "-dirty" suffix when modified)
const char* cuda_version();       // CUDA toolkit major.minor built with, e.g. "13.0"
const char* cuda_full_version();  // full toolkit version, e.g. "13.0.88"
}  // namespace kiln
