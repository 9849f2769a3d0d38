// `kiln merge SHARD... --dist DIR`: the shards of one build (`kiln build --shard I/N`) merged into
// the archives and index a one-machine build gives (builder/shard.hpp: run_merge).
#include <cstdio>
#include <memory>

#include "builder/shard.hpp"
#include "commands/commands.hpp"

namespace kiln::commands {

void add_merge_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "merge",
      "merge the shards of one build (`kiln build --shard I/N`, each built anywhere) into the "
      "archives and index, byte-identical to a one-machine `kiln build` of the same tree.\n"
      "Refused, naming the field and the shard: shards of different package versions, "
      "registries, toolchains or build times (exit 4); a missing piece of work (6); a "
      "duplicated one (10); a result whose digest does not match its bytes (3).\n"
      "Details: docs/packager.md");
  struct Opts {
    std::vector<std::string> shards;
    std::string dist;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("shards", o->shards, "shard directories (what each --shard build wrote)")
      ->required();
  cmd->add_option("--dist", o->dist, "where archives and the index are published")->required();
  cmd->callback([o, &rc] {
    builder::MergeResult r = builder::run_merge(o->shards, o->dist);
    for (const auto& line : r.dropped) std::fprintf(stderr, "%s\n", line.c_str());
    std::printf("merged %zu shards in %.2f s\n", o->shards.size(), r.seconds);
    for (const auto& a : r.archives)
      std::printf("%s  %zu artifacts, %llu bytes, sha256 %s\n", a.path.c_str(), a.artifacts,
                  static_cast<unsigned long long>(a.size), a.sha256.c_str());
    std::printf("%s\n", r.index_path.c_str());
    rc = 0;
  });
}

}  // namespace kiln::commands
