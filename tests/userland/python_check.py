"""The Python check of the foreign-userland smoke (scripts/userland_smoke.sh), run inside the
userland by the venv's interpreter after pip installed kiln, kiln-kernels and its sm_90a target
wheel from the release's mirror directory: every URI of kiln-kernels resolves for a device of
compute capability 9.0 to the installed target wheel's store (target sm_90a), without a GPU.
Exit 0 when all do; 1 naming the first URI that did not and kiln's answer."""
import json
import platform
import sys

import kiln

loader = kiln.load("kiln-kernels")
uris = list(loader.package.uris)
print(f"python check: kiln {kiln.__version__} on {platform.machine()}, Python "
      f"{platform.python_version()}, {loader.package.name} {loader.package.version}: "
      f"{len(uris)} URIs")
if not uris:
    sys.exit("python check: kiln-kernels lists no URI")
for uri in uris:
    r = loader.resolve(uri, cc=90)
    chosen = r.get("chosen") or {}
    if r.get("device") != "sm_90" or chosen.get("tier") != "store" or chosen.get("target") != "sm_90a":
        sys.exit(f"python check: {uri} for sm_90 was not served by the sm_90a target wheel: "
                 + json.dumps(r, indent=1))
print(f"python check: ok: every URI resolves for sm_90 to the store of sm_90a, e.g. {chosen['path']}")
