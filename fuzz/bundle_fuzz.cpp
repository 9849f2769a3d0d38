// install_bundle (packager/release/bundle.cpp) over any bytes: an air-gapped bundle carried to a
// node, as a .tar.zst (the input, which may also be plain tar: the reader takes both) and, when
// kiln's archive reader accepts the input, as a directory of its members. The node trusts a
// fixed root (fuzz/bundle-root.json, or $KILN_FUZZ_BUNDLE_ROOT: the root the seeds were signed
// under) and checks expiry at a fixed time, so the seeds verify and install; every run starts
// from an empty store and metadata directory.
// A finding: an exception other than kiln::Error of a documented kind; an install that leaves in
// the store an archive directory that does not verify (verify_store_archive).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "format/archive.hpp"
#include "fuzz_util.hpp"
#include "release/bundle.hpp"
#include "store/store.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kiln;

fs::path g_root;  // the trusted root.json
fs::path g_tmp;   // private scratch directory, removed at exit

void remove_scratch() {
  std::error_code ec;
  fs::remove_all(g_tmp, ec);
}

void write_file(const fs::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fuzz::finding("cannot write the scratch file " + p.string());
}

void install_and_check(const fs::path& bundle) {
  const fs::path run = g_tmp / "run";
  std::error_code ec;
  fs::remove_all(run, ec);
  fs::create_directories(run / "tuf");
  release::BundleInstallRequest req;
  req.bundle = bundle;
  req.trust.tuf_root = g_root.string();
  req.trust.tuf_metadata_dir = (run / "tuf").string();
  req.dest = run / "store";
  req.expiry_reference = 1700000000;  // before any seed's metadata expires
  req.log = [](const std::string&) {};
  release::BundleInstallResult r;
  if (!fuzz::refuses_cleanly([&] { r = release::install_bundle(req); },
                             {ErrorKind::Integrity, ErrorKind::Format, ErrorKind::Stale,
                              ErrorKind::NotFound, ErrorKind::Limit, ErrorKind::Unsupported}))
    return;
  // Accepted: every entry of the store is an archive directory that verifies.
  for (const store::StoreArchive& e : store::scan_store(req.dest)) {
    std::vector<store::VerifyProblem> problems = store::verify_store_archive(e);
    if (!problems.empty())
      fuzz::finding("an accepted bundle left " + e.dir +
                    ", which does not verify: " + problems.front().message);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* root = std::getenv("KILN_FUZZ_BUNDLE_ROOT");
  g_root = fs::absolute(root && *root ? root : "fuzz/bundle-root.json");
  if (!fs::is_regular_file(g_root)) {
    std::fprintf(stderr,
                 "bundle_fuzz: no trusted root at %s (run from the repository root, or "
                 "set KILN_FUZZ_BUNDLE_ROOT)\n",
                 g_root.c_str());
    std::exit(2);
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-fuzz-bundle-XXXXXX";
  if (!::mkdtemp(tmpl.data())) std::abort();
  g_tmp = tmpl;
  std::atexit(remove_scratch);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = fuzz::as_text(data, size);
  const fs::path tarball = g_tmp / "bundle.tar.zst";
  write_file(tarball, bytes);
  install_and_check(tarball);
  // The same members as a directory bundle (names the reader accepted: plain, no '/').
  std::vector<format::ArchiveMember> members;
  try {
    members = format::read_archive_bytes(bytes, "fuzz bundle");
  } catch (const Error&) {
    return 0;
  }
  const fs::path dir = g_tmp / "bundle-dir";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  for (const auto& m : members) {
    if (m.name.empty() || m.name == "." || m.name == ".." || m.name.find('/') != std::string::npos)
      continue;
    write_file(dir / m.name, m.data);
  }
  install_and_check(dir);
  return 0;
}
