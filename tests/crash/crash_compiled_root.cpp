// The step a kiln built with -DKILN_TRUSTED_TUF_ROOT makes before its first TUF fetch, for
// crash_points.sh (case fetch-compiled-root): the compiled-in root written once, atomically, as
// <METADATA_PARENT>/compiled-root-<sha256>.json (fetch::materialize_anchor), with ROOT's bytes as
// the compiled-in root (a second build of kiln with a root compiled in would make the same call).
// Exit 0 and the file's path on stdout, else the error's exit code with its message on stderr.
#include <exception>
#include <iostream>

#include "fetch/fetch.hpp"
#include "fetch/tuf_mirror.hpp"
#include "io/atomic_file.hpp"
#include "kiln/error.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " ROOT METADATA_PARENT\n";
    return 2;
  }
  try {
    std::string root = kiln::io::read_whole_file(argv[1], 1 << 20);
    kiln::fetch::TrustAnchor anchor =
        kiln::fetch::choose_trust_anchor(kiln::fetch::FetchOptions{}, "", false, "the release", root);
    kiln::fetch::materialize_anchor(anchor, argv[2]);
    std::cout << anchor.value << "\n";
    return 0;
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: error (" << kiln::to_string(e.kind()) << "): " << e.what() << "\n";
    return kiln::exit_code(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "crash_compiled_root: " << e.what() << "\n";
    return 1;
  }
}
