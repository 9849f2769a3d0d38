// `kiln inspect PATH`: what a fatbin, cubin, archive, index, manifest or store holds, read with
// kiln's own parsers (no cuobjdump). Also registers `kiln verify` and `kiln install`, whose code
// lives in cmd_verify.cpp and cmd_install.cpp, so main.cpp needs one line for all three.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands/commands.hpp"
#include "format/archive.hpp"
#include "format/archive_stream.hpp"
#include "format/fatbin.hpp"
#include "format/manifest.hpp"
#include "io/atomic_file.hpp"
#include "kiln/error.hpp"
#include "project/package_description.hpp"
#include "project/project_paths.hpp"
#include "util/join.hpp"
#include "store/store.hpp"

namespace kiln::commands {

void add_verify_command(CLI::App& app, int& rc);   // cmd_verify.cpp
void add_install_command(CLI::App& app, int& rc);  // cmd_install.cpp

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

Json symbols_json(const std::vector<std::string>& mangled) {
  Json arr = Json::array();
  for (const auto& m : mangled) {
    Json s = Json::object();
    s["symbol"] = m;
    s["name"] = format::demangle(m);
    arr.push_back(std::move(s));
  }
  return arr;
}

Json inspect_fatbin(const fs::path& p) {
  std::string bytes = io::read_whole_file(p);
  auto images = format::parse_fatbin(bytes, p.string());
  Json arr = Json::array();
  for (const auto& img : images) {
    Json j = Json::object();
    j["kind"] = img.kind == format::FatbinImage::Ptx   ? "ptx"
                : img.kind == format::FatbinImage::Elf ? "elf"
                                               : "other";
    j["target"] = img.target();
    j["size"] = img.size;
    j["compressed"] = img.compressed;
    j["decompressed_size"] = img.decompressed_size;
    // Symbols are a convenience: an image kiln cannot decode is still listed, with the reason.
    try {
      std::string payload = format::fatbin_image_payload(bytes, img);
      if (img.kind == format::FatbinImage::Elf) {
        j["elf_sm"] = format::elf_sm_arch(payload);
        j["kernels"] = symbols_json(format::elf_function_symbols(payload));
      } else if (img.kind == format::FatbinImage::Ptx) {
        j["kernels"] = symbols_json(format::ptx_entry_names(payload));
      }
    } catch (const Error& e) {
      j["note"] = e.what();
    }
    arr.push_back(std::move(j));
  }
  Json out = Json::object();
  out["images"] = std::move(arr);
  return out;
}

Json inspect_cubin(const fs::path& p) {
  std::string bytes = io::read_whole_file(p);
  Json out = Json::object();
  out["elf_sm"] = format::elf_sm_arch(bytes);
  out["kernels"] = symbols_json(format::elf_function_symbols(bytes));
  return out;
}

Json manifest_json(const format::Manifest& m) { return Json::parse(format::manifest_to_json(m)); }

// Streamed: member names and sizes from their headers, only the manifest's data is read.
Json inspect_archive(const fs::path& p) {
  format::ArchiveStream r = format::ArchiveStream::open_file(p);
  Json out = Json::object();
  Json mem = Json::array();
  std::optional<Json> manifest;
  while (auto h = r.next()) {
    Json j = Json::object();
    j["name"] = h->name;
    j["size"] = h->size;
    mem.push_back(std::move(j));
    if (h->name == "manifest.json" && !manifest)
      manifest = manifest_json(format::parse_manifest(r.read_data_whole(io::limits::kMaxManifestBytes),
                                              p.string() + ":manifest.json"));
  }
  r.finish();
  out["members"] = std::move(mem);
  if (!manifest) throw Error(ErrorKind::Format, p.string() + ": holds no manifest.json");
  out["manifest"] = std::move(*manifest);
  return out;
}

Json inspect_store(const fs::path& p) {
  Json arr = Json::array();
  for (const auto& sa : store::scan_store(p)) {
    Json j = Json::object();
    j["directory"] = sa.dir;
    if (sa.manifest) {
      j["package"] = sa.manifest->package;
      j["package_version"] = sa.manifest->package_version;
      j["cuda_version"] = sa.manifest->cuda_version;
      j["target"] = sa.manifest->target;
      j["artifacts"] = sa.manifest->artifacts.size();
    } else {
      j["error_kind"] = to_string(sa.error_kind);
      j["error"] = sa.error;
    }
    arr.push_back(std::move(j));
  }
  Json out = Json::object();
  out["archives"] = std::move(arr);
  return out;
}

// A package description (<name>-<version>.package.json), read as strictly as every command
// reads it: the package, its specialisations and the sources the JIT tier compiles from.
Json inspect_description(const fs::path& p) {
  std::unique_ptr<project::PackageData> data = project::load_package_description(p);
  const kiln_package& d = *data->get();
  Json kernels = Json::array();
  for (std::size_t i = 0; i < d.kernel_count; ++i)
    kernels.push_back({{"uri", d.kernels[i].uri},
                       {"family", d.kernels[i].family},
                       {"source_hash", d.kernels[i].source_hash}});
  Json files = Json::array();
  for (std::size_t i = 0; i < d.file_count; ++i)
    files.push_back({{"path", d.files[i].path}, {"size", d.files[i].size}});
  return {{"package", d.name}, {"version", d.version}, {"kernels", kernels}, {"files", files}};
}

void print_manifest_text(const Json& m) {
  std::printf(
      "package %s %s (commit %s), CUDA %s, target %s, built %lld\n",
      m["package"].get<std::string>().c_str(), m["package_version"].get<std::string>().c_str(),
      m["git_commit"].get<std::string>().c_str(), m["cuda_version"].get<std::string>().c_str(),
      m["target"].get<std::string>().c_str(), m["build_time"].get<long long>());
  std::printf("%zu artifacts:\n", m["artifacts"].size());
  for (const auto& a : m["artifacts"])
    std::printf("  %-40s %-32s %10llu  sha256 %.16s\n", a["uri"].get<std::string>().c_str(),
                a["file"].get<std::string>().c_str(), a["size"].get<unsigned long long>(),
                a["sha256"].get<std::string>().c_str());
  for (const auto& s : m["skipped"])
    std::printf("  skipped family %s: %s\n", s["family"].get<std::string>().c_str(),
                s["reason"].get<std::string>().c_str());
}

void print_fatbin_text(const Json& j) {
  std::printf("%zu images:\n", j["images"].size());
  for (const auto& img : j["images"]) {
    std::printf(
        "  %-4s %-12s %10llu bytes%s\n", img["kind"].get<std::string>().c_str(),
        img["target"].get<std::string>().c_str(), img["size"].get<unsigned long long>(),
        img["compressed"].get<bool>()
            ? (" (zstd, " + std::to_string(img["decompressed_size"].get<unsigned long long>()) +
               " unpacked)")
                  .c_str()
            : "");
    if (img.contains("kernels"))
      for (const auto& k : img["kernels"])
        std::printf("       %s\n", k["name"].get<std::string>().c_str());
    if (img.contains("note"))
      std::printf("       note: %s\n", img["note"].get<std::string>().c_str());
  }
}

void print_index_text(const Json& index) {
  // Before index format 5 one toolkit at the top; from 5 each archive names its own.
  std::string cuda = index.contains("cuda_version") ? index["cuda_version"].get<std::string>() : "";
  if (cuda.empty()) {
    std::vector<std::string> toolkits;
    for (const auto& a : index["archives"]) {
      std::string t = a["cuda_version"].get<std::string>();
      if (std::find(toolkits.begin(), toolkits.end(), t) == toolkits.end()) toolkits.push_back(t);
    }
    cuda = toolkits.empty() ? "none" : util::join(toolkits, ", ");
  }
  std::printf("release %s %s (commit %s), CUDA %s, %zu archives:\n",
              index["package"].get<std::string>().c_str(),
              index["package_version"].get<std::string>().c_str(),
              index["git_commit"].get<std::string>().c_str(), cuda.c_str(),
              index["archives"].size());
  for (const auto& a : index["archives"])
    std::printf("  %-8s %-52s %10llu  sha256 %.16s\n", a["target"].get<std::string>().c_str(),
                a["file"].get<std::string>().c_str(), a["size"].get<unsigned long long>(),
                a["sha256"].get<std::string>().c_str());
  if (index.contains("description"))
    std::printf("  %-8s %-52s %10llu  sha256 %.16s\n", "describe",
                index["description"]["file"].get<std::string>().c_str(),
                index["description"]["size"].get<unsigned long long>(),
                index["description"]["sha256"].get<std::string>().c_str());
}

void print_store_text(const Json& j) {
  std::printf("%zu archives:\n", j["archives"].size());
  for (const auto& a : j["archives"]) {
    if (a.contains("error"))
      std::printf("  BROKEN %s: %s\n", a["directory"].get<std::string>().c_str(),
                  a["error"].get<std::string>().c_str());
    else
      std::printf("  %-8s %s (%zu artifacts)\n", a["target"].get<std::string>().c_str(),
                  a["directory"].get<std::string>().c_str(), a["artifacts"].get<std::size_t>());
  }
}

void print_text(store::PathKind kind, const Json& j) {
  switch (kind) {
    case store::PathKind::Fatbin:
      print_fatbin_text(j);
      break;
    case store::PathKind::Cubin:
      std::printf("cubin for sm_%d, %zu kernels:\n", j["elf_sm"].get<int>(), j["kernels"].size());
      for (const auto& k : j["kernels"])
        std::printf("  %s\n", k["name"].get<std::string>().c_str());
      break;
    case store::PathKind::Archive:
      print_manifest_text(j["manifest"]);
      std::printf("%zu members (in archive order):", j["members"].size());
      for (const auto& m : j["members"]) std::printf(" %s", m["name"].get<std::string>().c_str());
      std::printf("\n");
      break;
    case store::PathKind::Manifest:
    case store::PathKind::StoreArchive:
      print_manifest_text(j["manifest"]);
      break;
    case store::PathKind::Index:
      print_index_text(j["index"]);
      if (j.contains("built")) std::printf("  built    %s\n", j["built"].get<std::string>().c_str());
      break;
    case store::PathKind::Store:
      print_store_text(j);
      break;
    case store::PathKind::Unknown:
      break;
  }
}

// What a path of `kind` holds, as JSON (the text output is printed from it).
Json inspect_path(store::PathKind kind, const fs::path& p) {
  Json j = Json::object();
  switch (kind) {
    case store::PathKind::Fatbin:
      return inspect_fatbin(p);
    case store::PathKind::Cubin:
      return inspect_cubin(p);
    case store::PathKind::Archive:
      return inspect_archive(p);
    case store::PathKind::Manifest:
      j["manifest"] =
          manifest_json(format::parse_manifest(io::read_whole_file(p, io::limits::kMaxLocalFileBytes), p.string()));
      return j;
    case store::PathKind::StoreArchive:
      j["manifest"] = manifest_json(
          format::parse_manifest(io::read_whole_file(p / "manifest.json", io::limits::kMaxLocalFileBytes),
                         (p / "manifest.json").string()));
      return j;
    case store::PathKind::Index: {
      const format::Index idx =
          format::parse_index(io::read_whole_file(p, io::limits::kMaxLocalFileBytes), p.string());
      j["index"] = Json::parse(format::index_to_json(idx));
      if (idx.provenance) {
        j["built"] = format::describe_provenance(*idx.provenance);
        j["warnings"] = Json::array();
        if (auto w = format::dirty_build_warning(*idx.provenance)) j["warnings"].push_back(*w);
      }
      return j;
    }
    case store::PathKind::Store:
      return inspect_store(p);
    case store::PathKind::Unknown:
      break;
  }
  throw Error(ErrorKind::Format, p.string() +
                                     " is none of: fatbin (magic 0xBA55ED50), cubin (ELF), "
                                     "archive (.tar.zst), kiln index or manifest (JSON with "
                                     "\"format\"), store directory");
}

void print_description(const fs::path& p, bool json) {
  Json j = inspect_description(p);
  if (json) {
    Json out = {{"path", p.string()}, {"kind", "description"}};
    for (auto it = j.begin(); it != j.end(); ++it) out[it.key()] = it.value();
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("%s: description of package %s %s, %zu specialisations, %zu source files\n",
              p.c_str(), j["package"].get<std::string>().c_str(),
              j["version"].get<std::string>().c_str(), j["kernels"].size(), j["files"].size());
  for (const auto& f : j["files"])
    std::printf("  %10llu  %s\n", f["size"].get<unsigned long long>(),
                f["path"].get<std::string>().c_str());
}

void inspect(const fs::path& p, bool json) {
  if (project::is_package_description_file(p)) return print_description(p, json);
  store::PathKind kind = store::classify_path(p);
  Json j = inspect_path(kind, p);
  if (j.contains("warnings"))
    for (const auto& w : j["warnings"])
      std::fprintf(stderr, "warning: %s: %s\n", p.c_str(), w.get<std::string>().c_str());
  if (json) {
    Json out = Json::object();
    out["path"] = p.string();
    out["kind"] = to_string(kind);
    for (auto it = j.begin(); it != j.end(); ++it) out[it.key()] = it.value();
    std::cout << out.dump(2) << "\n";
  } else {
    std::printf("%s: %s\n", p.c_str(), to_string(kind));
    print_text(kind, j);
  }
}

}  // namespace

void add_format_commands(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "inspect",
      "show what PATH holds: a fatbin or cubin (images, targets, sizes, kernels), an archive "
      "(.tar.zst: manifest fields, artifacts, members), an index (archives and description with "
      "sizes and digests, and how the release was built: kiln, toolkit, host, commit, whether "
      "the tree had uncommitted changes, which is warned about), a manifest.json, a package description (<name>-<version>.package.json: "
      "package, specialisations, sources), or a store directory (its archives). Reads the bytes "
      "itself; "
      "needs no cuobjdump. Checks nothing: use `kiln verify` for that.");
  struct Opts {
    std::string path;
    bool json = false;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("PATH", opts->path, "fatbin, cubin, archive, index, manifest or store directory")
      ->required();
  cmd->add_flag("--json", opts->json, "machine-readable output");
  cmd->callback([opts, &rc] {
    inspect(opts->path, opts->json);
    rc = 0;
  });
  add_verify_command(app, rc);
  add_install_command(app, rc);
}

}  // namespace kiln::commands
