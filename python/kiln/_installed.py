"""Which kiln packages pip installed, found through the installed distributions' metadata.

`kiln wheel` writes, for a release of a package (acme-kernels 1.2.0, say):

* the package's own wheel, distribution ``acme-kernels``: the package description
  (``acme_kernels/acme-kernels-1.2.0.package.json``) and an entry point
  ``acme-kernels = acme_kernels`` in the group ``kiln.packages``;
* one data wheel per target, distribution ``acme-kernels-cu13-sm90a``: a kiln store under
  ``acme_kernels_cu13_sm90a/artifacts`` and an entry point ``acme-kernels =
  acme_kernels_cu13_sm90a`` in the group ``kiln.targets``; it requires ``acme-kernels==1.2.0``.

Nothing here reads a variable or a path given by the user, and nothing imports the extension:
the files are located through each distribution's RECORD (docs/wheels.md, "Finding installed
wheels"; docs/decisions.md, "Pip pairs the versions").
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import shlex
import sys
from importlib import metadata

PACKAGES_GROUP = "kiln.packages"
TARGETS_GROUP = "kiln.targets"


@dataclasses.dataclass
class Installed:
    name: str  # "acme-kernels"
    version: str  # the package wheel's version (PEP 440)
    description: pathlib.Path  # the <name>-<version>.package.json inside the package wheel
    stores: list[pathlib.Path]  # store dirs of the installed target wheels of this version
    stale: list[str]  # messages for target wheels of another version (both versions, pip cmd),
    # and for a kiln runtime outside the package wheel's Requires-Dist range
    # Store dirs of the target wheels of another version: a loader may still search them, and
    # the loader refuses their archives as stale (another package version) and goes on.
    stale_stores: list[pathlib.Path] = dataclasses.field(default_factory=list)


def _normalize(name: str) -> str:
    """PEP 503 normalisation: 'Acme_Kernels' and 'acme-kernels' are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    return list(metadata.entry_points(group=group))  # Python >= 3.10 (the runtime: >= 3.12)


def _dist_name(dist: metadata.Distribution) -> str:
    return dist.metadata["Name"] or "?"


def _located(dist: metadata.Distribution, module: str, suffix: str) -> list[pathlib.Path]:
    """Files of `dist` (its RECORD) directly under `module`/ whose name ends with `suffix`."""
    out = []
    for f in dist.files or []:
        parts = pathlib.PurePosixPath(str(f)).parts
        if len(parts) == 2 and parts[0] == module and parts[1].endswith(suffix):
            out.append(pathlib.Path(str(dist.locate_file(f))).resolve())
    return sorted(out)


def _pip_command(requirement: str) -> str:
    return f"{shlex.quote(sys.executable)} -m pip install {shlex.quote(requirement)}"


def _release_key(version: str):
    """PEP 440 order for the spellings kiln writes (N.N.N[aN|bN|rcN][.devN]); None otherwise."""
    m = re.match(r"^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.dev(\d+))?$", version)
    if not m:
        return None
    release = [int(x) for x in m.group(1).split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    phase = {"a": 1, "b": 2, "rc": 3}.get(m.group(2) or "", 0 if m.group(4) else 4)
    dev = int(m.group(4)) if m.group(4) else 1 << 62
    return (tuple(release), phase, int(m.group(3) or 0), dev)


def _outside(version: str, specifiers: str) -> bool | None:
    """Whether `version` is outside `specifiers` (">=0.1.0,<0.2", as kiln wheel writes them);
    None when either is not a spelling kiln writes (then pip, not kiln, is the judge)."""
    v = _release_key(version)
    if v is None:
        return None
    for spec in specifiers.split(","):
        m = re.match(r"^\s*(>=|<=|==|!=|<|>)\s*(\S+)\s*$", spec)
        bound = _release_key(m.group(2)) if m else None
        if m is None or bound is None:
            return None
        op = m.group(1)
        if op == "<" and bound[1] == 4 and v[1] < 4 and v[0] == bound[0]:
            return True  # PEP 440: "<V" keeps V's own pre-releases out
        ok = {">=": v >= bound, "<=": v <= bound, "==": v == bound, "!=": v != bound,
              "<": v < bound, ">": v > bound}[op]
        if not ok:
            return True
    return False


def _runtime_mismatch(name: str, dist: metadata.Distribution) -> str | None:
    """A message when the installed kiln runtime is outside the range the package wheel
    requires (a runtime upgraded or downgraded past it with the package left behind)."""
    try:
        runtime = metadata.version("kiln")
    except metadata.PackageNotFoundError:
        return None  # not run from an installed runtime (a source tree): nothing to compare
    for req in dist.requires or []:
        m = re.match(r"^kiln\s*\(?\s*([<>=!][^;)]*)\)?\s*(;.*)?$", req)
        if not m:
            continue
        specifiers = m.group(1).strip()
        if _outside(runtime, specifiers):
            return (f"{name} {dist.version} requires kiln{specifiers} (the runtimes that read "
                    f"its formats) and this runtime is kiln {runtime}: its description may be "
                    f"refused as stale; to pair them run: "
                    f"{_pip_command(f'kiln{specifiers}')} (or upgrade {name} with "
                    f"python -m kiln install {name})")
    return None


def _package_entries() -> dict[str, list[metadata.EntryPoint]]:
    by_name: dict[str, list[metadata.EntryPoint]] = {}
    for ep in _entry_points(PACKAGES_GROUP):
        by_name.setdefault(_normalize(ep.name), []).append(ep)
    return by_name


def _describe(name: str, ep: metadata.EntryPoint) -> Installed:
    dist = ep.dist
    if dist is None:
        raise LookupError(f"the {PACKAGES_GROUP} entry point {ep.name} names no distribution")
    found = _located(dist, ep.value, ".package.json")
    if len(found) != 1:
        raise LookupError(
            f"{_dist_name(dist)} {dist.version} declares {name} in {PACKAGES_GROUP} but holds "
            f"{len(found)} {ep.value}/<name>-<version>.package.json files (expected one); "
            f"reinstall it: {_pip_command(f'{_dist_name(dist)}=={dist.version}')}"
        )
    installed = Installed(name=ep.name, version=dist.version, description=found[0],
                          stores=[], stale=[])
    runtime = _runtime_mismatch(ep.name, dist)
    if runtime:
        installed.stale.append(runtime)
    for tep in _entry_points(TARGETS_GROUP):
        if _normalize(tep.name) != _normalize(name) or tep.dist is None:
            continue
        tdist = tep.dist
        store = pathlib.Path(str(tdist.locate_file(f"{tep.value}/artifacts"))).resolve()
        if tdist.version == dist.version:
            installed.stores.append(store)
            continue
        tname = _dist_name(tdist)
        installed.stale_stores.append(store)
        installed.stale.append(
            f"{tname} {tdist.version} is installed beside {ep.name} {dist.version}: its "
            f"kernels belong to {ep.name} {tdist.version} and the loader refuses them as stale "
            f"(another package version); to pair them run: "
            f"{_pip_command(f'{tname}=={dist.version}')}"
        )
    installed.stores.sort()
    installed.stale_stores.sort()
    return installed


def find_installed(name: str) -> Installed:
    """The installed package `name` (its package wheel) and its target wheels.

    Raises LookupError naming what was looked for and where when no installed distribution
    declares `name` in the kiln.packages entry point group.
    """
    entries = _package_entries()
    eps = entries.get(_normalize(name), [])
    if not eps:
        known = ", ".join(sorted(ep.name for group in entries.values() for ep in group))
        targets = sorted({_dist_name(t.dist) + " " + t.dist.version
                          for t in _entry_points(TARGETS_GROUP)
                          if _normalize(t.name) == _normalize(name) and t.dist is not None})
        hint = (f"; target wheels of it are installed ({', '.join(targets)}) without their "
                f"package wheel (installed with --no-deps?): {_pip_command(name)}"
                if targets else f"; install it: python -m kiln install {name} --find-links DIR "
                                f"(or --index-url URL)")
        raise LookupError(
            f"kiln package {name} is not installed in {sys.prefix}: no installed distribution "
            f"declares it in the {PACKAGES_GROUP} entry point group (installed kiln packages: "
            f"{known or 'none'}){hint}"
        )
    if len(eps) > 1:
        owners = ", ".join(sorted(f"{_dist_name(ep.dist)} {ep.dist.version}" for ep in eps
                                  if ep.dist is not None))
        raise LookupError(
            f"kiln package {name} is declared by several installed distributions ({owners}); "
            f"uninstall all but one"
        )
    return _describe(name, eps[0])


def installed_packages() -> list[Installed]:
    """Every installed kiln package, sorted by name (for the doctor). A package whose wheel
    is broken is left out here; find_installed(name) says what is wrong with it."""
    out = []
    for key, eps in sorted(_package_entries().items()):
        try:
            out.append(find_installed(eps[0].name))
        except LookupError:
            continue
    return out
