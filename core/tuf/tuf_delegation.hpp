#pragma once
// Delegation matching (specification 1.0.34, 5.6.7): which delegated role may sign for a target
// path, by `paths` patterns, `path_hash_prefixes` or succinct hash bins. Pure functions over the
// parsed delegations of tuf_metadata.hpp; the updater walks the tree with them.
#include <string>
#include <string_view>

#include "tuf/tuf_metadata.hpp"

namespace kiln::tuf {

// fnmatch-style matching of one target path against one delegation pattern, segment by
// segment ("/" never matched by a wildcard); '*', '?', '[abc]', '[!abc]'.
bool path_matches_pattern(std::string_view target_path, std::string_view pattern);
bool role_delegates_path(const DelegatedRole& role, std::string_view target_path);

// The bin a target path falls into: "<prefix>-<hex bin, zero-padded>".
std::string succinct_role_for_target(const SuccinctRoles& roles, std::string_view target_path);
// True when `name` is one of the bins of `roles` ("<prefix>-<hex bin of the right width>").
bool is_succinct_role(const SuccinctRoles& roles, std::string_view name);

}  // namespace kiln::tuf
