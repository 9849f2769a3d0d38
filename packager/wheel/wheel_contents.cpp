// What a wheel holds for one verified archive (pure): the package files in store layout,
// __init__.py, METADATA, WHEEL and RECORD text (wheel.hpp: wheel_contents).
#include <algorithm>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "store/store.hpp"
#include "wheel/wheel.hpp"
#include "wheel/wheel_paths.hpp"

namespace kiln::wheel {

namespace {

void require_plain(std::string_view what, std::string_view value) {
  bool ok = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '+';
  });
  if (!ok)
    throw Error(ErrorKind::Format, std::string(what) + " '" + std::string(value) +
                                       "' holds characters a wheel cannot carry");
}

std::string init_py(const format::Manifest& m) {
  std::string v = pep440_version(m.package_version);
  std::ostringstream s;
  s << "\"\"\"CUDA kernels for " << m.target << " (CUDA " << m.cuda_version
    << "), built ahead of time by kiln.\n\n"
    << "Data only: libkiln reads the fatbins under artifact_dir(). Point it there with\n"
    << "KILN_ARTIFACT_PATH=$(python -c 'import "
    << wheel_name_component(distribution_name(m.package, m.cuda_version, m.target))
    << " as k; print(k.artifact_dir())')\n\"\"\"\n\n"
    << "import os\n\n"
    << "__version__ = \"" << v << "\"\n"
    << "TARGET = \"" << m.target << "\"\n"
    << "CUDA_VERSION = \"" << m.cuda_version << "\"\n\n\n"
    << "def artifact_dir():\n"
    << "    \"\"\"Absolute path of the kiln store inside this package (for "
       "KILN_ARTIFACT_PATH).\"\"\"\n"
    << "    return os.path.join(os.path.dirname(os.path.abspath(__file__)), \"artifacts\")\n";
  return s.str();
}

std::string package_init_py(std::string_view package, const std::string& version,
                            const std::string& description_name) {
  std::ostringstream s;
  s << "\"\"\"The kernel package " << package << " " << version
    << " as kiln describes it: its kernels and the sources\n"
    << "the JIT tier compiles from (no GPU code). kiln.load(\"" << package
    << "\") finds it through the entry point\n"
    << "group kiln.packages, and this package's target wheels through kiln.targets.\n\"\"\"\n\n"
    << "import os\n\n"
    << "__version__ = \"" << version << "\"\n"
    << "PACKAGE = \"" << package << "\"\n\n\n"
    << "def description_path():\n"
    << "    \"\"\"Absolute path of the package description (<name>-<version>.package.json).\"\"\"\n"
    << "    return os.path.join(os.path.dirname(os.path.abspath(__file__)), \"" << description_name
    << "\")\n";
  return s.str();
}

// METADATA, WHEEL, entry_points.txt and RECORD after `files` (the package files, sorted).
void append_dist_info(std::vector<WheelFile>& files, const std::string& dist_info,
                      const std::string& metadata, std::string_view generator_version,
                      const std::string& entry_points) {
  files.push_back({dist_info + "/METADATA", metadata});
  std::string wheel_txt = "Wheel-Version: 1.0\n";
  wheel_txt += "Generator: kiln " + std::string(generator_version) + "\n";
  wheel_txt += "Root-Is-Purelib: true\n";
  wheel_txt += "Tag: py3-none-any\n";
  files.push_back({dist_info + "/WHEEL", std::move(wheel_txt)});
  files.push_back({dist_info + "/entry_points.txt", entry_points});
  std::string record;
  for (const auto& f : files) {
    // Paths come from validated names: nothing the csv module would quote.
    if (f.path.find_first_of(",\"\r\n") != std::string::npos)
      throw Error(ErrorKind::Format, "wheel path '" + f.path + "' cannot be written in RECORD");
    record += f.path + "," + record_hash(f.data) + "," + std::to_string(f.data.size()) + "\n";
  }
  record += dist_info + "/RECORD,,\n";
  files.push_back({dist_info + "/RECORD", std::move(record)});
}

}  // namespace

std::vector<WheelFile> wheel_contents(const format::Manifest& manifest,
                                      const std::vector<format::ArchiveMember>& members,
                                      std::string_view generator_version,
                                      const std::vector<format::ArchiveMember>& beside_store) {
  require_plain("package version", manifest.package_version);
  require_plain("CUDA version", manifest.cuda_version);
  require_plain("target", manifest.target);
  require_plain("kiln version", generator_version);
  const std::string dist =
      distribution_name(manifest.package, manifest.cuda_version, manifest.target);
  const std::string pkg = wheel_name_component(dist);
  const std::string version = pep440_version(manifest.package_version);
  const std::string stem = format::archive_stem(manifest.package, manifest.package_version,
                                        manifest.cuda_version, manifest.target);
  const std::string dist_info = pkg + "-" + version + ".dist-info";

  std::vector<WheelFile> files;
  files.push_back({pkg + "/__init__.py", init_py(manifest)});
  for (const auto& m : members) {
    if (!is_plain_path(m.name) || m.name.find('/') != std::string::npos)
      throw Error(ErrorKind::Format, "archive member '" + m.name + "' is not a plain file name");
    files.push_back({pkg + "/artifacts/" + stem + "/" + m.name, m.data});
  }
  for (const auto& f : beside_store) {
    if (!is_plain_path(f.name) || f.name.find('/') != std::string::npos || f.name == stem)
      throw Error(ErrorKind::Format, "store file '" + f.name + "' is not a plain file name");
    files.push_back({pkg + "/artifacts/" + f.name, f.data});
  }
  std::sort(files.begin(), files.end(),
            [](const WheelFile& a, const WheelFile& b) { return a.path < b.path; });

  std::string metadata = "Metadata-Version: 2.1\n";
  metadata += "Name: " + dist + "\n";
  metadata += "Version: " + version + "\n";
  metadata += "Summary: CUDA kernels for " + manifest.target + " (CUDA " + manifest.cuda_version +
              ") built ahead of time by kiln, loaded by libkiln\n";
  metadata += "Requires-Python: >=3.8\n";
  // Pip pairs the versions: this target's kernels belong to exactly this release's description.
  metadata += "Requires-Dist: " + manifest.package + "==" + version + "\n";
  append_dist_info(
      files, dist_info, metadata, generator_version,
      std::string("[") + kTargetsEntryPointGroup + "]\n" + manifest.package + " = " + pkg + "\n");
  return files;
}

std::vector<WheelFile> package_wheel_contents(std::string_view package,
                                              std::string_view package_version,
                                              const format::ArchiveMember& description,
                                              std::string_view generator_version,
                                              const std::vector<std::string>& target_distributions,
                                              bool require_every_target) {
  require_plain("package", package);
  require_plain("package version", package_version);
  require_plain("kiln version", generator_version);
  if (!is_plain_path(description.name) || description.name.find('/') != std::string::npos)
    throw Error(ErrorKind::Format,
                "package description '" + description.name + "' is not a plain file name");
  const std::string pkg = wheel_name_component(package);
  const std::string version = pep440_version(package_version);
  const std::string dist_info = pkg + "-" + version + ".dist-info";
  std::vector<WheelFile> files;
  files.push_back({pkg + "/" + description.name, description.data});
  files.push_back({pkg + "/__init__.py", package_init_py(package, version, description.name)});
  std::sort(files.begin(), files.end(),
            [](const WheelFile& a, const WheelFile& b) { return a.path < b.path; });

  std::string metadata = "Metadata-Version: 2.1\n";
  metadata += "Name: " + std::string(package) + "\n";
  metadata += "Version: " + version + "\n";
  metadata += "Summary: The kiln kernel package " + std::string(package) +
              ": its description and the sources its JIT tier compiles from (install a target "
              "wheel for the prebuilt kernels)\n";
  metadata += "Requires-Python: >=3.8\n";
  // The runtimes that read the formats this kiln writes (docs/wheels.md, "Versions").
  metadata += "Requires-Dist: " + runtime_requirement(generator_version) + "\n";
  // One extra per target wheel of the release, requiring it at exactly this version, so that
  // `pip install -U "<package>[cu13-sm90a]"` moves both together (docs/wheels.md, "Versions").
  std::vector<std::string> extras;
  for (const auto& d : target_distributions) {
    if (d.size() <= package.size() + 1 || d.compare(0, package.size(), package) != 0 ||
        d[package.size()] != '-')
      throw Error(ErrorKind::Internal, "target wheel '" + d + "' is not of package " +
                                           std::string(package));
    extras.push_back(d.substr(package.size() + 1));
  }
  std::sort(extras.begin(), extras.end());
  extras.erase(std::unique(extras.begin(), extras.end()), extras.end());
  for (const auto& e : extras) {
    metadata += "Provides-Extra: " + e + "\n";
    metadata += "Requires-Dist: " + std::string(package) + "-" + e + "==" + version +
                "; extra == \"" + e + "\"\n";
  }
  if (require_every_target)
    for (const auto& e : extras)
      metadata += "Requires-Dist: " + std::string(package) + "-" + e + "==" + version + "\n";
  append_dist_info(files, dist_info, metadata, generator_version,
                   std::string("[") + kPackagesEntryPointGroup + "]\n" + std::string(package) +
                       " = " + pkg + "\n");
  return files;
}

}  // namespace kiln::wheel
