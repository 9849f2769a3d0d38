// The on-disk JIT cache under <cache_dir>/jit (format in jit.hpp): its key, and its entries
// read back, checked and written.
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "format/untrusted_json.hpp"
#include "io/atomic_file.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "jit/jit_internal.hpp"
#include "kiln/error.hpp"

namespace kiln::jit {
namespace fs = std::filesystem;
using nlohmann::json;

std::string jit_cache_key(const JitKeyInputs& in) {
  io::Sha256 h;
  h.field("kiln-jit-key", std::to_string(kJitCacheFormat));
  h.field("uri", in.uri);
  h.field("source_hash", in.source_hash);
  h.field("source_bytes", in.source_bytes_sha256);
  h.field("nvrtc", std::to_string(in.nvrtc_major) + "." + std::to_string(in.nvrtc_minor));
  for (const auto& o : in.options) h.field("option", o);
  h.field("arch", std::to_string(in.arch));
  return h.hex();
}

namespace detail {
namespace {

// Cache files are untrusted local bytes: regular files of bounded size only (a FIFO or a link
// to /dev/zero is a miss, and the entry is rebuilt and renamed over it).
std::optional<std::string> read_whole(const fs::path& p) {
  try {
    return io::read_whole_file(p, io::limits::kMaxLocalArtifactBytes);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<JitResult> read_entry(const fs::path& cubin_path, const fs::path& json_path,
                                    const project::Specialisation& spec, const std::string& arch,
                                    std::string& problem) {
  problem.clear();
  auto meta_text = read_whole(json_path);
  if (!meta_text) return std::nullopt;
  try {
    json meta = format::parse_untrusted_json<json>(*meta_text, json_path.string());
    if (meta.at("format").get<int>() != kJitCacheFormat) {
      problem =
          "format " + format::quote_json(meta.at("format")) + " is not " + std::to_string(kJitCacheFormat);
      return std::nullopt;
    }
    if (meta.at("uri").get<std::string>() != spec.uri || meta.at("arch") != arch ||
        meta.at("entries").get<std::vector<std::string>>() != spec.entries) {
      problem = "it describes another kernel (" + meta.at("uri").get<std::string>() + ", " +
                meta.at("arch").get<std::string>() + ")";
      return std::nullopt;
    }
    auto image = read_whole(cubin_path);
    if (!image) {
      problem = "its cubin is missing";
      return std::nullopt;
    }
    std::string want = meta.at("cubin_sha256").get<std::string>();
    std::string got = io::sha256_hex(*image);
    if (got != want || image->size() != meta.at("cubin_size").get<size_t>()) {
      problem = "cubin sha256 " + got + " (" + std::to_string(image->size()) +
                " bytes) does not match the recorded " + want;
      return std::nullopt;
    }
    JitResult res;
    res.image = std::move(*image);
    res.symbols = meta.at("symbols").get<std::vector<std::string>>();
    if (res.symbols.size() != spec.entries.size()) {
      problem = "it lists " + std::to_string(res.symbols.size()) + " symbols for " +
                std::to_string(spec.entries.size()) + " entries";
      return std::nullopt;
    }
    res.cache_path = cubin_path.string();
    res.from_cache = true;
    return res;
  } catch (const json::exception& e) {
    problem = std::string("its json is malformed: ") + e.what();
    return std::nullopt;
  } catch (const Error& e) {
    problem = std::string("its json is refused: ") + e.what();
    return std::nullopt;
  }
}

void remove_orphaned_temporaries(const fs::path& dir, const std::string& key) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(key + ".cubin.tmp.", 0) == 0 || name.rfind(key + ".json.tmp.", 0) == 0)
      fs::remove(e.path(), ec);
  }
}

void write_entry(const fs::path& cubin_path, const fs::path& json_path, const project::Specialisation& spec,
                 const std::string& arch, const std::string& nvrtc_version, const JitResult& res) {
  json meta = {{"format", kJitCacheFormat},
               {"uri", spec.uri},
               {"arch", arch},
               {"nvrtc", nvrtc_version},
               {"entries", spec.entries},
               {"symbols", res.symbols},
               {"cubin_sha256", io::sha256_hex(res.image)},
               {"cubin_size", res.image.size()}};
  io::write_file_atomically(cubin_path, res.image);
  io::write_file_atomically(json_path, meta.dump(2) + "\n");
}

}  // namespace detail
}  // namespace kiln::jit
