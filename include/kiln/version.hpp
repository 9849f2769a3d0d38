#pragma once
// Build identity of this libkiln, generated from VERSION and git at build time.

#include "kiln/export.h"

namespace kiln {
KILN_API const char* version();     // package version from VERSION, e.g. "0.1.0"
KILN_API const char* git_commit();  // short commit ("" outside git; "-dirty" suffix when modified)
KILN_API const char* cuda_version();       // CUDA toolkit major.minor built with, e.g. "13.0"
KILN_API const char* cuda_full_version();  // full toolkit version, e.g. "13.0.88"
}  // namespace kiln
