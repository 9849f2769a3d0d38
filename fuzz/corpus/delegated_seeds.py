#!/usr/bin/env python3
"""Delegated targets seeds for tuf_metadata_fuzz (fuzz/corpus/make_seeds.sh runs this).

`kiln tuf-repo` signs no delegations, so these are the real targets metadata of the seed
repository with a "delegations" block added, in the three forms of the specification (paths
patterns, path_hash_prefixes, succinct_roles hash bins), and one bin's own targets metadata. The
keys are the real targets key of the root; signatures are kept as they are (the fuzz target
parses and matches delegations; it checks no signature, so they need not verify).

    delegated_seeds.py ROOT_JSON TARGETS_JSON OUT_DIR
"""
import copy
import hashlib
import json
import sys

root = json.load(open(sys.argv[1]))
targets = json.load(open(sys.argv[2]))
out = sys.argv[3]
keyid = root["signed"]["roles"]["targets"]["keyids"][0]
key = root["signed"]["keys"][keyid]


def write(name, doc):
    with open(f"{out}/{name}", "w") as f:
        json.dump(doc, f, sort_keys=True, separators=(",", ":"))


def with_delegations(delegations):
    doc = copy.deepcopy(targets)
    doc["signed"]["delegations"] = delegations
    return doc


write("derived-targets-path-patterns.json", with_delegations({
    "keys": {keyid: key},
    "roles": [
        {"name": "kernels", "keyids": [keyid], "threshold": 1, "terminating": True,
         "paths": ["kiln-kernels-*-index.json", "kiln-kernels-*.tar.zst", "wheels/*/[!.]*.whl"]},
        {"name": "by-prefix", "keyids": [keyid], "threshold": 1, "terminating": False,
         "path_hash_prefixes": ["8f", "a0", "e3b0"]},
    ]}))
write("derived-targets-hash-bins.json", with_delegations({
    "keys": {keyid: key},
    "succinct_roles": {"keyids": [keyid], "threshold": 1, "bit_length": 8,
                       "name_prefix": "kiln-bins"}}))
# A bin's own metadata: the targets that hash into it (sha256 of the path, first 8 bits).
path = next(iter(targets["signed"]["targets"]))
bin_name = "kiln-bins-%02x" % hashlib.sha256(path.encode()).digest()[0]
bin_doc = copy.deepcopy(targets)
bin_doc["signed"]["version"] = 1
bin_doc["signed"]["targets"] = {path: targets["signed"]["targets"][path]}
write("derived-%s.json" % bin_name, bin_doc)
