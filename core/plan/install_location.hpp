#pragma once
// Where this install keeps its files: the share/kiln directory beside the library (or binary)
// holding an address, found through dladdr; its artifact store and its TUF root.
#include <string>

namespace kiln::plan {

// <dir of the file holding `address`>/../share/kiln/artifacts ("" when it cannot be found):
// with a package description's address, the store installed beside the package's library.
std::string installed_store_dir(const void* address);

// <dir of the file holding libkiln (or bin/kiln)>/../share/kiln/tuf/root.json: the TUF root an
// operator installs beside the library (kiln tarball ships none); "" when the library cannot be
// found; the file may not exist.
std::string installed_tuf_root();

}  // namespace kiln::plan
