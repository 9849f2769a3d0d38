// parse_shard_manifest and plan_merge (packager/builder/shard.cpp) over any bytes: the shard.json a
// CI runner wrote with `kiln build --shard I/N`, which `kiln merge` reads. Refusals are typed and
// name the file; an accepted manifest writes and reads back to the same bytes, and planning a
// merge of it alone refuses cleanly (a typed error; one about a shard not given names that
// shard, not this file) or gives one complete manifest per target of the shard.
#include "builder/shard.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln;
  const std::string origin = "fuzz-shard/shard.json";
  builder::ShardManifest m;
  if (!fuzz::refuses_cleanly([&] { m = builder::parse_shard_manifest(fuzz::as_text(data, size), origin); },
                             {ErrorKind::Format, ErrorKind::Stale, ErrorKind::Limit}, origin))
    return 0;
  std::string canonical;
  if (!fuzz::refuses_cleanly([&] { canonical = builder::shard_to_json(m); }, {})) return 0;
  builder::ShardManifest again;
  if (!fuzz::refuses_cleanly([&] { again = builder::parse_shard_manifest(canonical, "canonical"); }, {}))
    return 0;
  if (builder::shard_to_json(again) != canonical)
    fuzz::finding("shard_to_json(parse_shard_manifest(x)) is not stable:\n" +
                  canonical.substr(0, 400));
  builder::MergePlan plan;
  if (!fuzz::refuses_cleanly(
          [&] {
            plan = builder::plan_merge({builder::ShardInput{origin, m}});
          },
          {ErrorKind::Format, ErrorKind::Stale, ErrorKind::NotFound}))
    return 0;
  if (plan.manifests.size() != m.targets.size())
    fuzz::finding("a merge plan of one shard has " + std::to_string(plan.manifests.size()) +
                  " manifests for " + std::to_string(m.targets.size()) + " targets");
  for (std::size_t t = 0; t < plan.manifests.size(); ++t)
    if (plan.held_by.size() <= t || plan.held_by[t].size() != plan.manifests[t].artifacts.size())
      fuzz::finding("held_by does not cover every artifact of target " + std::to_string(t));
  return 0;
}
