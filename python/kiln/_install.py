"""`python -m kiln install PACKAGE`: pip install the target wheel of PACKAGE for this machine.

pip cannot see the GPU, so it cannot choose among a package's target wheels
(acme-kernels-cu13-sm90a, acme-kernels-cu13-sm80, ...). This command lists the target wheels
offered in a directory (--find-links) or on an index (--index-url, PEP 691 JSON or PEP 503
HTML simple pages), or, with neither, where pip itself is configured to look (its find-links
and index-url, from PIP_* variables or pip.conf; PyPI when nothing is configured), chooses one for the local devices by kiln.choose_target (the loader's one
target-choice rule), and runs `python -m pip install "<package>[<extra>]==<version>"
<target wheel>==<version>` (the package wheel names one extra per target wheel), which pip
resolves together with the kiln runtime by their Requires-Dist (docs/wheels.md). Run again
when a new release is offered, it upgrades both together.
"""

from __future__ import annotations

import argparse
import html.parser
import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request

from kiln._installed import _normalize, _release_key

# docs/exit-codes.md
EXIT_USAGE = 2
EXIT_UNSUPPORTED = 5
EXIT_NOT_FOUND = 6
EXIT_NETWORK = 8
EXIT_FORMAT = 10
EXIT_LIMIT = 12

_WHEEL_RE = r"^{prefix}_cu(\d+)_((?:sm|compute)\d+[af]?)-([^-]+)-py3-none-any\.whl$"
_TARGET_RE = re.compile(r"^(sm|compute)_?(\d+)([af]?)$")
_TIMEOUT_S = 30
_MAX_INDEX_PAGE_BYTES = 64 << 20  # as limits::kMaxJsonBytes: a JSON or HTML index page


class InstallError(Exception):
    def __init__(self, kind: str, code: int, message: str):
        super().__init__(message)
        self.kind = kind
        self.code = code


def _target_name(compact: str) -> str:
    """'sm90a' -> 'sm_90a', 'compute80' -> 'compute_80' (docs/wheels.md, "Names")."""
    m = _TARGET_RE.match(compact)
    if not m:
        raise InstallError("usage", EXIT_USAGE,
                           f"'{compact}' is not a target: expected sm_<arch>[a|f] or "
                           f"compute_<arch>[a|f], e.g. sm_90a or compute_80")
    return f"{m.group(1)}_{m.group(2)}{m.group(3)}"


def _version_key(v: str):
    """PEP 440 order for the spellings kiln writes; any other spelling sorts first."""
    return _release_key(v) or ((), 0, 0, 0)


def _pep440(version: str) -> str:
    """kiln's '0.2.0-rc1' as PEP 440 spells it; a PEP 440 version stays."""
    m = re.match(r"^(\d+\.\d+\.\d+)-(a|alpha|b|beta|rc|c|pre|preview|dev)\.?(\d+)$", version, re.I)
    if not m:
        return version
    pre = {"alpha": "a", "beta": "b", "c": "rc", "pre": "rc", "preview": "rc"}.get(
        m.group(2).lower(), m.group(2).lower())
    return f"{m.group(1)}.dev{int(m.group(3))}" if pre == "dev" else \
        f"{m.group(1)}{pre}{int(m.group(3))}"


class _Offer:
    def __init__(self, file: str, cuda_major: int, target: str, version: str, where: str):
        self.file, self.cuda_major, self.target, self.version = file, cuda_major, target, version
        self.where = where  # path or URL of the wheel

    def distribution(self, package: str) -> str:
        return f"{_normalize(package)}-cu{self.cuda_major}-{self.target.replace('_', '')}"


def _offers_in_names(package: str, names_and_where) -> list[_Offer]:
    prefix = re.escape(_normalize(package).replace("-", "_"))
    rx = re.compile(_WHEEL_RE.format(prefix=prefix))
    out = []
    for name, where in names_and_where:
        m = rx.match(name)
        if m:
            out.append(_Offer(name, int(m.group(1)), _target_name(m.group(2)), m.group(3), where))
    return out


def _offers_in_dir(package: str, directory: str) -> list[_Offer]:
    if not os.path.isdir(directory):
        raise InstallError("not-found", EXIT_NOT_FOUND,
                           f"--find-links {directory}: no such directory")
    names = sorted(os.listdir(directory))
    return _offers_in_names(package, [(n, os.path.join(os.path.abspath(directory), n))
                                      for n in names])


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str]] = []  # (text, href)
        self._href = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None:
            self.links.append((data.strip(), self._href))
            self._href = None


def _get_simple(url: str):
    """A simple-repository page as (names, JSON or None): PEP 691 JSON when served, else the
    PEP 503 HTML page's links."""
    req = urllib.request.Request(url, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
    try:
        with urllib.request.urlopen(req, timeout=_TIMEOUT_S) as r:
            # An index page is untrusted input: read at most its bound, and say so past it.
            body = r.read(_MAX_INDEX_PAGE_BYTES + 1)
            ctype = r.headers.get("Content-Type", "")
    except Exception as e:  # urllib raises several kinds; each is "the index did not serve"
        raise InstallError("network", EXIT_NETWORK, f"cannot read the index page {url}: {e}")
    if len(body) > _MAX_INDEX_PAGE_BYTES:
        raise InstallError("limit", EXIT_LIMIT,
                           f"the index page {url} is larger than {_MAX_INDEX_PAGE_BYTES} bytes "
                           "(the bound on an index page): give --find-links a directory, or an "
                           "index that serves fewer projects")
    if "json" in ctype:
        try:
            return json.loads(body), None
        except ValueError as e:
            raise InstallError("format", EXIT_FORMAT, f"the index page {url} is not JSON: {e}")
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    return None, parser.links


def _offers_on_index(package: str, index_url: str) -> list[_Offer]:
    root = index_url.rstrip("/") + "/"
    data, links = _get_simple(root)
    # A served directory listing (python -m http.server) spells a project "name/".
    names = ([p["name"] for p in data.get("projects", [])] if data
             else [t.rstrip("/") for t, _ in links])
    rx = re.compile(r"^" + re.escape(_normalize(package)) + r"-cu\d+-(sm|compute)\d+[af]?$")
    projects = sorted({_normalize(n) for n in names if rx.match(_normalize(n))})
    offers = []
    for project in projects:
        page = urllib.parse.urljoin(root, project + "/")
        data, links = _get_simple(page)
        files = ([(f["filename"], urllib.parse.urljoin(page, f["url"]))
                  for f in data.get("files", [])] if data
                 else [(t, urllib.parse.urljoin(page, h)) for t, h in links])
        offers += _offers_in_names(package, files)
    return offers


_PYPI = "https://pypi.org/simple"


def _pip_configuration() -> dict[str, str]:
    """pip's own settings as `pip config list` reports them (PIP_* variables over files)."""
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                             text=True, timeout=_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    files: dict[str, str] = {}
    env: dict[str, str] = {}
    for line in out.splitlines():
        m = re.match(r"^([^.=]*)\.([a-z-]+)='(.*)'$", line.strip())
        if m:
            (env if m.group(1) == ":env:" else files)[m.group(2)] = m.group(3)
    return {**files, **env}


def _configured_sources() -> tuple[list[str], list[str]]:
    """(find-links directories, index URLs) where pip looks when given no source."""
    conf = _pip_configuration()
    links = [d[len("file://"):] if d.startswith("file://") else d
             for d in conf.get("find-links", "").split()]
    no_index = conf.get("no-index", "").lower() in ("1", "true", "yes", "on")
    indexes = [] if no_index else [conf.get("index-url") or _PYPI] + \
        conf.get("extra-index-url", "").split()
    return [d for d in links if os.path.isdir(d)], indexes


def _device_target(package: str, available: list[str]) -> tuple[str, str]:
    """(target, why) chosen by kiln's one rule for the local devices, or InstallError."""
    import kiln  # the extension: only when a device must be asked

    listed = ", ".join(available)
    try:
        devices = list(kiln.devices())
    except Exception as e:  # a machine without a driver: kiln says why
        devices, why = [], str(e)
    else:
        why = "kiln.devices() lists none"
    if not devices:
        raise InstallError(
            "unsupported", EXIT_UNSUPPORTED,
            f"no CUDA device on this machine ({why}), so no target wheel of {package} can be "
            f"chosen for it; pip cannot see the GPU either. Give --target with one of: {listed}")
    target = kiln.choose_target(available)  # the loader's rule, for device 0
    # The whole decision, with each target's reason, where this runtime offers it.
    explain = getattr(kiln, "target_choice", None)
    facts = explain(available) if explain else {}
    if target is None:
        why_not = "; ".join(why for _, why in facts.get("rejected", []))
        raise InstallError(
            "unsupported", EXIT_UNSUPPORTED,
            f"no target wheel of {package} runs on this machine's device (offered: {listed})"
            + (f": {why_not}" if why_not else ""))
    reason = next((why for t, why in facts.get("candidates", []) if t == target), "")
    return str(target), reason


def _driver(args) -> tuple[int, str]:
    """(cuDriverGetVersion's number, whose): --driver X.Y (the CLI's own parser), else this
    node's driver, else (0, ""): toolkits are not weighed, and the plan says so."""
    if args.driver is not None:
        from kiln import _kiln

        try:
            return _kiln._parse_driver_option(args.driver, "--driver"), "--driver"
        except Exception as e:  # kiln.UsageError: the flag and the value named
            raise InstallError("usage", EXIT_USAGE, getattr(e, "message", str(e))) from e
    try:
        from kiln import _kiln

        n = _kiln._driver_version()
    except ImportError:
        return 0, ""
    return (n, "this node's driver") if n else (0, "")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kiln install",
        description="pip install the target wheel of a kiln package chosen for this machine's "
                    "GPU by kiln's target-choice rule; pip brings the package's own wheel and "
                    "the kiln runtime by dependency (docs/wheels.md).")
    p.add_argument("package", help="the kiln package, e.g. acme-kernels")
    p.add_argument("--version", help="the package version (default: the newest offered)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--find-links", metavar="DIR",
                     help="a directory of wheels (kiln wheel --out); with neither this nor "
                          "--index-url: where pip is configured to look (PIP_FIND_LINKS, "
                          "PIP_INDEX_URL, pip.conf), else PyPI")
    src.add_argument("--index-url", metavar="URL",
                     help="a simple repository (PEP 503/691), e.g. https://pypi.org/simple")
    p.add_argument("--target", help="install this target's wheel (e.g. sm_90a) instead of asking "
                                    "the local devices")
    p.add_argument("--driver", metavar="X.Y",
                   help="a driver's CUDA version (12.8) to answer for a driver that is not here: "
                        "only target wheels of a CUDA it runs are chosen, the newest first; "
                        "default: this node's driver, when there is one")
    p.add_argument("--no-index", action="store_true",
                   help="with --find-links: pass --no-index to pip (the directory must then hold "
                        "the package wheel and the kiln runtime too)")
    p.add_argument("--dry-run", action="store_true", help="print the pip command, run nothing")
    p.add_argument("--json", action="store_true", help="print the choice as JSON on stdout")
    return p


def _plan(args) -> dict:
    if args.find_links or args.index_url:
        offers = (_offers_in_dir(args.package, args.find_links) if args.find_links
                  else _offers_on_index(args.package, args.index_url))
        where = args.find_links or args.index_url
    else:  # pip's configuration, and pip then runs with it unchanged
        links, indexes = _configured_sources()
        offers = [o for d in links for o in _offers_in_dir(args.package, d)]
        unreachable = None
        for url in indexes:  # an unreachable index matters only when nothing else offers
            try:
                offers += _offers_on_index(args.package, url)
            except InstallError as e:
                if e.kind != "network":
                    raise
                unreachable = e
        if not offers and unreachable:
            raise unreachable
        where = "pip's configured sources (" + ", ".join(links + indexes) + ")"
    if not offers:
        raise InstallError("not-found", EXIT_NOT_FOUND,
                           f"no target wheel of {args.package} in {where} (looked for "
                           f"{_normalize(args.package).replace('-', '_')}_cu<N>_<target>-"
                           f"<version>-py3-none-any.whl; kiln wheel writes them)")
    versions = sorted({o.version for o in offers}, key=_version_key)
    version = _pep440(args.version) if args.version else versions[-1]
    offers = [o for o in offers if o.version == version]
    if not offers:
        raise InstallError("not-found", EXIT_NOT_FOUND,
                           f"{args.package} {args.version} has no target wheel in {where}, "
                           f"which offers versions {', '.join(versions)}")
    # The driver weighed (--driver, else this node's): of each target, only the CUDA majors
    # whose code it runs (the loader's rule); then the newest (the wheels' names say which).
    driver, driver_from = _driver(args)
    if driver:
        from kiln import _kiln

        refused: dict[str, str] = {}
        for o in offers:
            why = _kiln._driver_refuses_major(o.cuda_major, o.target, driver)
            if why:
                refused[o.file] = why
        runnable = [o for o in offers if o.file not in refused]
        if not runnable:
            d = f"{driver // 1000}.{driver % 1000 // 10}"
            raise InstallError(
                "unsupported", EXIT_UNSUPPORTED,
                f"no target wheel of {args.package} {version} runs on this driver (CUDA {d}, "
                f"{driver_from}): " + "; ".join(f"{f}: {w}" for f, w in sorted(refused.items())))
        offers = runnable
    newest: dict[str, int] = {}
    for o in offers:
        newest[o.target] = max(newest.get(o.target, 0), o.cuda_major)
    offers = [o for o in offers if o.cuda_major == newest[o.target]]
    available = sorted({o.target for o in offers})
    if args.target:
        target, reason = _target_name(args.target), "--target"
        if target not in available:
            raise InstallError("not-found", EXIT_NOT_FOUND,
                               f"{args.package} {version} has no wheel for {target} in {where}, "
                               f"which offers {', '.join(available)}")
    else:
        target, reason = _device_target(args.package, available)
    offer = next(o for o in offers if o.target == target)
    requirement = f"{offer.distribution(args.package)}=={version}"
    # The package with the target's extra too (kiln wheel writes one per target: docs/wheels.md),
    # so that `pip install -U "<package>[<extra>]"` later moves both; asked for together, pip
    # pairs them in one resolution (and a package wheel without the extra still installs).
    extra = offer.distribution(args.package)[len(_normalize(args.package)) + 1:]
    requirements = [f"{args.package}[{extra}]=={version}", requirement]
    source = (["--find-links", os.path.abspath(args.find_links)] if args.find_links
              else ["--index-url", args.index_url] if args.index_url else [])
    if args.no_index:
        source.append("--no-index")
    return {
        "package": args.package, "version": version, "target": target, "reason": reason,
        "cuda_major": offer.cuda_major,
        "driver": f"{driver // 1000}.{driver % 1000 // 10}" if driver else None,
        "driver_from": driver_from if driver else None,
        "available": available, "wheel": offer.file, "where": offer.where,
        "requirement": requirement, "extra": extra, "requirements": requirements,
        "command": [sys.executable, "-m", "pip", "install", *source, *requirements],
    }


def main(argv: list[str]) -> int:
    if argv[:1] == ["install"]:
        argv = argv[1:]
    args = _parser().parse_args(argv)
    try:
        plan = _plan(args)
    except InstallError as e:
        print(f"kiln: error ({e.kind}): {e}", file=sys.stderr)
        if args.json:
            print(json.dumps({"error": {"kind": e.kind, "exit_code": e.code,
                                        "message": str(e)}}))
        return e.code
    plan["dry_run"] = args.dry_run
    print(f"{args.package} {plan['version']}: {plan['target']} ({plan['reason'] or 'chosen'}) "
          f"of {', '.join(plan['available'])}: {plan['wheel']}", file=sys.stderr)
    print(f"driver: CUDA {plan['driver']} ({plan['driver_from']}): only wheels of a CUDA it runs"
          if plan["driver"] else "driver: none here nor --driver: the wheels' CUDA was not "
          "weighed (the newest is chosen)", file=sys.stderr)
    if args.dry_run:
        if args.json:
            print(json.dumps(plan, indent=2))
        else:
            print(" ".join(plan["command"]))
        return 0
    rc = subprocess.call(plan["command"], stdout=sys.stderr if args.json else None)
    plan["pip_exit_code"] = rc
    if args.json:
        print(json.dumps(plan, indent=2))
    if rc != 0:
        print(f"kiln: pip failed (exit {rc}): {' '.join(plan['command'])}", file=sys.stderr)
    return rc
