// The role options of `kiln tuf-repo` (--scheme, --keys, --threshold) as init and the root
// changes take them.
#include "tuf_repo/tuf_repo.hpp"

namespace kiln::tuf_repo {

InitOptions init_options(const RoleOptions& o, bool consistent_snapshot) {
  InitOptions io;
  for (const auto& s : o.schemes) apply_role_option(io.roles, "scheme", s);
  for (const auto& k : o.key_counts) apply_role_option(io.roles, "keys", k);
  for (const auto& t : o.thresholds) apply_role_option(io.roles, "threshold", t);
  io.consistent_snapshot = consistent_snapshot;
  return io;
}

RootChangeOptions root_change_options(RootChange change, const std::string& role,
                                      const std::string& keyid, bool targets_only,
                                      const RoleOptions& o) {
  RootChangeOptions rc;
  rc.change = change;
  rc.role = role;
  rc.keyid = keyid;
  rc.targets_only = targets_only;
  std::map<std::string, RoleSpec> specs;
  for (const auto& s : o.schemes) apply_role_option(specs, "scheme", s);
  for (const auto& t : o.thresholds) apply_role_option(specs, "threshold", t);
  if (!o.schemes.empty()) rc.scheme = specs[role].scheme;
  for (const auto& t : o.thresholds)
    if (t.find('=') == std::string::npos || t.rfind(role + "=", 0) == 0)
      rc.threshold = specs[role].threshold;
  return rc;
}

}  // namespace kiln::tuf_repo
