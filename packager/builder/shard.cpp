#include "builder/shard.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "format/manifest.hpp"
#include "format/release_json.hpp"
#include "io/atomic_file.hpp"
#include "io/file_lock.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "project/package_description.hpp"
#include "util/field_error.hpp"

namespace kiln::builder {
namespace fs = std::filesystem;

namespace {

using Json = nlohmann::ordered_json;
constexpr const char* kShardMarker = "kiln-shard";

using util::fail;

const Json& member(const Json& obj, const std::string& key, const std::string& origin) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(origin, key, "missing");
  return *it;
}

std::string str(const Json& obj, const std::string& key, const std::string& origin,
                bool allow_empty = false) {
  const Json& v = member(obj, key, origin);
  if (!v.is_string()) fail(origin, key, "expected a string, found " + v.dump());
  if (v.get<std::string>().empty() && !allow_empty) fail(origin, key, "must not be empty");
  return v.get<std::string>();
}

std::vector<std::string> strings(const Json& obj, const std::string& key,
                                 const std::string& origin) {
  const Json& v = member(obj, key, origin);
  if (!v.is_array()) fail(origin, key, "expected an array of strings");
  std::vector<std::string> out;
  for (const auto& x : v) {
    if (!x.is_string()) fail(origin, key, "expected an array of strings, found " + x.dump());
    out.push_back(x.get<std::string>());
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

std::string spec_text(const ShardSpec& s) {
  return std::to_string(s.index) + "/" + std::to_string(s.count);
}

// The shards' provenance as one: the release is dirty when any shard's tree was, unknown when
// any was outside git and none dirty; the hosts of every shard. The rest plan_merge checked equal.
format::Provenance merged_provenance(const std::vector<ShardInput>& shards) {
  format::Provenance p = shards.front().manifest.provenance;
  std::set<std::string> hosts;
  for (const auto& s : shards) {
    const format::Provenance& q = s.manifest.provenance;
    hosts.insert(q.hosts.begin(), q.hosts.end());
    if (q.source_dirty.value_or(false))
      p.source_dirty = true;
    else if (!q.source_dirty && !p.source_dirty.value_or(false))
      p.source_dirty = std::nullopt;
  }
  p.hosts.assign(hosts.begin(), hosts.end());
  return p;
}

}  // namespace

std::string shard_member_path(const std::string& target, const std::string& file) {
  return target + "/" + file;
}

std::string shard_to_json(const ShardManifest& m) {
  Json j = format::release_json_header("kind", kShardMarker, m);
  j["registry_sha256"] = m.registry_sha256;
  j["toolchain"] = {{"nvcc_version", m.nvcc_version}, {"base_flags", m.base_flags}};
  j["build_time"] = m.build_time;
  j["provenance"] = Json::parse(format::provenance_to_json(m.provenance));
  j["shard"] = spec_text(m.shard);
  j["work"] = m.work;
  j["work_shards"] = m.work_shards;
  Json targets = Json::array();
  for (const auto& t : m.targets) targets.push_back(Json::parse(format::manifest_to_json(t)));
  j["targets"] = std::move(targets);
  return j.dump(2) + "\n";
}

ShardManifest parse_shard_manifest(std::string_view text, const std::string& origin) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const std::exception& e) {
    fail(origin, "", std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) fail(origin, "", "expected a JSON object");
  if (str(j, "kind", origin) != kShardMarker)
    fail(origin, "kind", "expected \"kiln-shard\", found \"" + str(j, "kind", origin) + "\"");
  ShardManifest m;
  const Json& fv = member(j, "format_version", origin);
  if (!fv.is_number_integer()) fail(origin, "format_version", "expected an integer");
  m.format_version = fv.get<int>();
  if (m.format_version != kShardFormat)
    throw Error(ErrorKind::Stale, origin + ": shard format_version " +
                                      std::to_string(m.format_version) + ", this kiln reads " +
                                      std::to_string(kShardFormat));
  m.package = str(j, "package", origin);
  m.package_version = str(j, "package_version", origin);
  m.git_commit = str(j, "git_commit", origin, /*allow_empty=*/true);
  m.cuda_version = str(j, "cuda_version", origin);
  m.registry_sha256 = str(j, "registry_sha256", origin);
  const Json& tc = member(j, "toolchain", origin);
  if (!tc.is_object()) fail(origin, "toolchain", "expected an object");
  m.nvcc_version = str(tc, "nvcc_version", origin + " toolchain");
  m.base_flags = strings(tc, "base_flags", origin + " toolchain");
  const Json& bt = member(j, "build_time", origin);
  if (!bt.is_number_integer()) fail(origin, "build_time", "expected an integer");
  m.build_time = bt.get<std::int64_t>();
  m.provenance = format::parse_provenance(member(j, "provenance", origin).dump(), origin);
  try {
    m.shard = parse_shard_spec(str(j, "shard", origin));
  } catch (const Error& e) {
    fail(origin, "shard", e.what());
  }
  m.work = strings(j, "work", origin);
  const Json& ws = member(j, "work_shards", origin);
  if (!ws.is_array() || ws.size() != m.work.size())
    fail(origin, "work_shards", "expected an array of one shard number per piece of work");
  for (const auto& x : ws) {
    if (!x.is_number_integer() || x.get<long long>() < 1 || x.get<long long>() > m.shard.count)
      fail(origin, "work_shards", "expected shard numbers 1.." + std::to_string(m.shard.count) +
                                      ", found " + x.dump());
    m.work_shards.push_back(x.get<int>());
  }
  const Json& ts = member(j, "targets", origin);
  if (!ts.is_array()) fail(origin, "targets", "expected an array of manifests");
  for (size_t i = 0; i < ts.size(); ++i)
    m.targets.push_back(
        format::parse_manifest(ts[i].dump(), origin + " targets[" + std::to_string(i) + "]"));
  return m;
}

MergePlan plan_merge(const std::vector<ShardInput>& shards) {
  if (shards.empty()) throw Error(ErrorKind::Usage, "kiln merge: no shard given");
  const ShardInput& a = shards.front();
  auto differ = [&](const ShardInput& b, const std::string& field, const std::string& va,
                    const std::string& vb) {
    if (va == vb) return;
    throw Error(ErrorKind::Stale, "shard " + b.origin + " (" + spec_text(b.manifest.shard) +
                                      ") differs from shard " + a.origin + " (" +
                                      spec_text(a.manifest.shard) + ") in field '" + field +
                                      "': " + vb + " vs " + va +
                                      "; every shard of a release comes from one tree and "
                                      "one toolchain");
  };
  for (const auto& b : shards) {
    const ShardManifest& x = a.manifest;
    const ShardManifest& y = b.manifest;
    differ(b, "package", x.package, y.package);
    differ(b, "package_version", x.package_version, y.package_version);
    differ(b, "git_commit", x.git_commit, y.git_commit);
    differ(b, "cuda_version", x.cuda_version, y.cuda_version);
    differ(b, "registry_sha256", x.registry_sha256, y.registry_sha256);
    differ(b, "toolchain.nvcc_version", x.nvcc_version, y.nvcc_version);
    differ(b, "toolchain.base_flags", join(x.base_flags), join(y.base_flags));
    differ(b, "build_time", std::to_string(x.build_time), std::to_string(y.build_time));
    const format::Provenance& px = x.provenance;
    const format::Provenance& py = y.provenance;
    differ(b, "provenance.source.commit", px.source_commit, py.source_commit);
    differ(b, "provenance.kiln_version", px.kiln_version, py.kiln_version);
    differ(b, "provenance.build_time_origin", px.build_time_origin, py.build_time_origin);
    differ(b, "provenance.targets", join(px.targets), join(py.targets));
    differ(b, "shard count", std::to_string(x.shard.count), std::to_string(y.shard.count));
    differ(b, "work", std::to_string(x.work.size()) + " pieces",
           std::to_string(y.work.size()) + " pieces");
    differ(b, "work", join(x.work), join(y.work));
    std::vector<std::string> xs, ys;
    for (int i : x.work_shards) xs.push_back(std::to_string(i));
    for (int i : y.work_shards) ys.push_back(std::to_string(i));
    differ(b, "work_shards", join(xs), join(ys));
    std::vector<std::string> xt, yt;
    for (const auto& t : x.targets) xt.push_back(t.target);
    for (const auto& t : y.targets) yt.push_back(t.target);
    differ(b, "targets", join(xt), join(yt));
  }
  // Each shard index once.
  std::map<int, const ShardInput*> by_index;
  for (const auto& s : shards) {
    auto [it, fresh] = by_index.emplace(s.manifest.shard.index, &s);
    if (!fresh)
      throw Error(ErrorKind::Format, "shards " + it->second->origin + " and " + s.origin +
                                         " are both shard " + spec_text(s.manifest.shard));
  }

  MergePlan plan;
  const ShardManifest& first = a.manifest;
  plan.id = {first.package, first.package_version, first.git_commit, first.cuda_version, "",
             merged_provenance(shards)};
  plan.build_time = first.build_time;
  std::set<std::string> work(first.work.begin(), first.work.end());
  std::map<std::string, std::size_t> holder;  // work key -> shard
  for (size_t t = 0; t < first.targets.size(); ++t) {
    format::Manifest m = first.targets[t];
    m.artifacts.clear();
    std::vector<std::pair<format::ArtifactEntry, std::size_t>> arts;
    for (size_t si = 0; si < shards.size(); ++si) {
      const format::Manifest& sm = shards[si].manifest.targets[t];
      differ(shards[si], "targets[" + std::to_string(t) + "].skipped",
             Json::parse(format::manifest_to_json(first.targets[t]))["skipped"].dump(),
             Json::parse(format::manifest_to_json(sm))["skipped"].dump());
      for (const auto& e : sm.artifacts) {
        std::string key = work_key(sm.target, e.uri);
        if (!work.count(key))
          throw Error(ErrorKind::Format, "shard " + shards[si].origin + " holds " + key +
                                             ", which is not in the build's work list");
        auto [it, fresh] = holder.emplace(key, si);
        if (!fresh)
          throw Error(ErrorKind::Format, key + " is held twice: by shard " +
                                             shards[it->second].origin + " and by shard " +
                                             shards[si].origin);
        arts.emplace_back(e, si);
      }
    }
    std::sort(arts.begin(), arts.end(),
              [](const auto& x, const auto& y) { return x.first.uri < y.first.uri; });
    std::vector<std::size_t> held;
    for (auto& [e, si] : arts) {
      m.artifacts.push_back(std::move(e));
      held.push_back(si);
    }
    plan.manifests.push_back(std::move(m));
    plan.held_by.push_back(std::move(held));
  }
  for (size_t p = 0; p < first.work.size(); ++p) {
    if (holder.count(first.work[p])) continue;
    int want = p < first.work_shards.size() ? first.work_shards[p] : shard_of(p, first.shard.count);
    std::string who = by_index.count(want)
                          ? "shard " + by_index.at(want)->origin + " does not hold it"
                          : "shard " + std::to_string(want) + "/" +
                                std::to_string(first.shard.count) + " was not given";
    throw Error(ErrorKind::NotFound, "no shard holds " + first.work[p] + " (" + who +
                                         "); merge needs every piece of the build's work");
  }
  return plan;
}

std::string write_shard(const std::string& dir_in, const ShardManifest& identity,
                        const std::vector<ArchiveContent>& contents,
                        const std::string& description_json) {
  fs::path dir = fs::absolute(dir_in).lexically_normal();
  std::error_code ec;
  fs::remove(dir / kShardFileName, ec);  // a half-written shard never looks whole
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::Io, "cannot create " + dir.string() + ": " + ec.message());
  // One writer per shard directory; it removes the temporaries a dead (killed) writer left.
  io::FileLock lock = io::FileLock::acquire_directory(dir, std::chrono::seconds(60));
  io::remove_orphaned_temps(dir);
  ShardManifest sm = identity;
  for (const auto& c : contents) {
    fs::create_directories(dir / c.manifest.target, ec);
    if (ec)
      throw Error(ErrorKind::Io,
                  "cannot create " + (dir / c.manifest.target).string() + ": " + ec.message());
    io::remove_orphaned_temps(dir / c.manifest.target);
    for (size_t i = 0; i < c.manifest.artifacts.size(); ++i)
      io::write_file_atomically(
          dir / shard_member_path(c.manifest.target, c.manifest.artifacts[i].file), c.bytes[i]);
    sm.targets.push_back(c.manifest);
  }
  fs::path description = dir / format::description_file_name(sm.package, sm.package_version);
  if (description_json.empty())
    fs::remove(description, ec);
  else
    io::write_file_atomically(description, description_json);
  fs::path p = dir / kShardFileName;
  io::write_file_atomically(p, shard_to_json(sm));
  return p.string();
}

namespace {

// The description every shard carries ("" when none does): the same bytes in each, since the
// shards agree on package, version and registry but a description also carries the sources.
std::string shards_description(const std::vector<ShardInput>& shards) {
  std::string first;
  for (size_t i = 0; i < shards.size(); ++i) {
    const ShardManifest& m = shards[i].manifest;
    fs::path f = fs::path(shards[i].origin) / format::description_file_name(m.package, m.package_version);
    std::error_code ec;
    std::string text =
        fs::is_regular_file(f, ec) ? io::read_whole_file(f, io::limits::kMaxJsonBytes) : std::string();
    if (i == 0) {
      if (!text.empty()) project::read_package_description(text, f.string());  // strict, bounded
      first = std::move(text);
    } else if (text != first) {
      throw Error(ErrorKind::Stale, "shards " + shards[0].origin + " and " + shards[i].origin +
                                        " carry different package descriptions (" +
                                        f.filename().string() +
                                        "): were they built from the same sources?");
    }
  }
  return first;
}

}  // namespace

MergeResult run_merge(const std::vector<std::string>& shard_dirs, const std::string& dist_dir) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<ShardInput> inputs;
  for (const auto& d : shard_dirs) {
    fs::path p = fs::path(d) / kShardFileName;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec))
      throw Error(ErrorKind::NotFound, d + " is not a shard: it has no " + kShardFileName +
                                           " (a shard is what `kiln build --shard I/N` "
                                           "writes to its --dist)");
    inputs.push_back({d, parse_shard_manifest(io::read_whole_file(p), p.string())});
  }
  MergePlan plan = plan_merge(inputs);
  plan.id.description_json = shards_description(inputs);
  // One archive's results in memory at a time (publish_release asks for each in turn).
  auto content = [&](std::size_t t) {
    ArchiveContent c;
    c.manifest = plan.manifests.at(t);
    for (size_t i = 0; i < c.manifest.artifacts.size(); ++i) {
      const format::ArtifactEntry& e = c.manifest.artifacts[i];
      const ShardInput& s = inputs[plan.held_by[t][i]];
      fs::path f = fs::path(s.origin) / shard_member_path(c.manifest.target, e.file);
      std::string bytes = io::read_whole_file(f);
      std::string digest = io::sha256_hex(bytes);
      if (bytes.size() != e.size || digest != e.sha256)
        throw Error(ErrorKind::Integrity,
                    "shard " + s.origin + ": " + f.string() + " does not match its entry in " +
                        kShardFileName + " (sha256 " + digest + ", " +
                        std::to_string(bytes.size()) + " bytes; the shard says " + e.sha256 + ", " +
                        std::to_string(e.size) + " bytes)");
      c.bytes.push_back(std::move(bytes));
    }
    return c;
  };
  MergeResult r;
  r.archives = publish_release(plan.id, plan.manifests.size(), content, plan.build_time, dist_dir,
                               &r.index_path, &r.dropped);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace kiln::builder
