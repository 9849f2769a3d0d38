"""`python -m kiln doctor [--json]`: what the C++ `kiln doctor` checks that matters to a Python
user, each a fact that was checked (the driver loaded and answered, NVRTC compiled a test
program, libcurl/libarchive loaded and from where, a file was really written in the cache
directory), plus this runtime's version and the formats it reads, and the kiln packages
installed in this environment. The verdict is `kiln doctor`'s, by the same C++ rule
(plan/load_readiness.hpp through _kiln._load_verdict): exit 0 when loading can work here (a
driver with a device, a writable cache directory, readable configured stores, and each device
served by a store archive that runs on it, a mirror that answered or a usable JIT), else 5
(unsupported), each missing piece named."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

import kiln
from kiln import _kiln


def _cache_check(path: str) -> str:
    """"" when a file can be created in `path` (made if missing), else why not."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".kiln-doctor-"):
            pass
        return ""
    except OSError as e:
        return f"{type(e).__name__}: {e}"


def _driver_number(driver: dict) -> int:
    """cuDriverGetVersion's number of the doctor's driver facts (12080 for "12.8"); 0: none."""
    if not driver.get("available"):
        return 0
    major, _, minor = str(driver.get("version", "")).partition(".")
    return int(major) * 1000 + int(minor) * 10 if major.isdigit() and minor.isdigit() else 0


def _toolkits(stores: list[str], package: str, driver: int) -> list[dict]:
    """Of the package's archives in its stores, each toolkit and whether this driver runs it
    (the loader's rule, through the C++ doctor's own facts)."""
    out: list[dict] = []
    for store in stores:
        for _pkg, version, cuda, archives, runnable, detail in \
                _kiln._store_toolkits(store, package, driver):
            out.append({"store": store, "version": version, "cuda_version": cuda,
                        "archives": archives,
                        "driver_runs": (runnable > 0) if driver else None,
                        "runnable_archives": runnable if driver else None, "detail": detail})
    return out


def _installed_packages(driver: int = 0) -> dict:
    try:
        from kiln import _installed
    except ImportError as e:
        return {"available": False, "detail": f"kiln._installed is not in this runtime ({e})",
                "packages": []}
    out = []
    for p in _installed.installed_packages():
        stores = [str(s) for s in p.stores]
        out.append({"name": p.name, "version": p.version, "description": str(p.description),
                    "stores": stores, "stale": list(p.stale),
                    "toolkits": _toolkits(stores, p.name, driver)})
    return {"available": True, "detail": "", "packages": out}


def facts(config: kiln.Config | None = None) -> dict[str, Any]:
    cfg = config if config is not None else kiln.Config.from_env()
    native_cfg = cfg._native()
    j: dict[str, Any] = {"runtime": kiln.build_facts(), "python": sys.version.split()[0],
         "module": os.path.dirname(kiln.__file__)}
    native = _kiln._doctor_facts(native_cfg)
    j["driver"] = native["driver"]
    j["devices"] = [dict(zip(("ordinal", "name", "cc", "target"), d))
                    for d in native["devices"]]
    j["nvrtc"] = native["nvrtc"]
    j["libraries"] = native["libraries"]
    problem = _cache_check(cfg.cache_dir)
    j["cache_dir"] = {"path": cfg.cache_dir, "writable": not problem, "detail": problem}
    j["offline"] = cfg.offline
    j["mirrors"] = list(cfg.mirrors)
    driver = _driver_number(j["driver"])
    j["driver"]["cuda_version"] = j["driver"]["version"] if driver else None
    j["installed"] = _installed_packages(driver)
    packages = [(p["name"], p["version"], p["stores"]) for p in j["installed"]["packages"]]
    verdict = _kiln._load_verdict(native_cfg, native, problem, packages)
    j["mirror_probes"] = verdict["mirrors"]
    j["missing"] = list(verdict["missing"])
    j["ok"] = verdict["ok"]
    return j


def _print(j: dict) -> None:
    r = j["runtime"]
    print(f"kiln {r['version']} (Python runtime, CUDA {r['cuda']}) at {j['module']}, "
          f"Python {j['python']}")
    print(f"reads: manifest format {r['manifest_format']}, index format {r['index_format']}, "
          f"package description format {r['package_description_format']}")
    d = j["driver"]
    if d["available"]:
        print(f"driver: {d['library']} loaded from {d['path'] or '?'}, runs CUDA {d['version']}")
    else:
        print(f"driver: not available: {d['detail']}")
    if not j["devices"]:
        print("gpu: none")
    for dev in j["devices"]:
        print(f"gpu {dev['ordinal']}: {dev['name']}, compute capability "
              f"{dev['cc'] // 10}.{dev['cc'] % 10} ({dev['target']})")
    n = j["nvrtc"]
    if n["available"]:
        print(f"nvrtc: {n['version']} at {n['path']}, test compile ok" +
              (" (JIT disabled by KILN_DISABLE_JIT)" if n["jit_disabled"] else ""))
    else:
        print(f"nvrtc: not usable: {n['detail']} (the JIT tier is off)")
    for lib in j["libraries"]:
        if lib["loaded"]:
            state = f"found at {lib['path'] or lib['soname']}"
        else:
            fix = lib["package"] or "the package that provides it"
            state = f"missing: {lib['detail']}; install {fix}"
        print(f"{lib['name']}: {lib['soname']} {state} (needed only for {lib['needed_for']})")
    c = j["cache_dir"]
    print(f"cache directory: {c['path']}, writable: {'yes' if c['writable'] else 'no'}" +
          (f" ({c['detail']})" if c["detail"] else ""))
    print(f"offline: {'yes' if j['offline'] else 'no'}; mirrors: "
          f"{' '.join(j['mirrors']) or 'none configured'}")
    for m in j["mirror_probes"]:
        print(f"mirror {m['url']}: {m['detail']}")
    inst = j["installed"]
    if not inst["available"]:
        print(f"installed packages: unknown: {inst['detail']}")
    elif not inst["packages"]:
        print("installed packages: none")
    for p in inst["packages"]:
        print(f"package {p['name']} {p['version']}: {len(p['stores'])} target store(s)")
        for s in p["stale"]:
            print(f"  stale: {s}")
        for t in p.get("toolkits", []):  # which of its toolkits this driver runs
            if t["driver_runs"] is None:
                verdict = "not weighed (no driver)"
            elif t["runnable_archives"] == t["archives"]:
                verdict = "this driver runs them"
            elif t["driver_runs"]:
                verdict = f"this driver runs {t['runnable_archives']} of them"
            else:
                verdict = f"this driver runs none: {t['detail']}"
            print(f"  CUDA {t['cuda_version']}: {t['archives']} archive(s), {verdict}")
    if j["ok"]:
        print("ok: loading can work here")
    for m in j["missing"]:
        print(f"missing: {m}")


def main(argv: list[str]) -> int:
    if any(a not in ("--json",) for a in argv):
        sys.stderr.write(f"kiln: error (usage): doctor takes only --json, got {argv}\n")
        return 2
    try:
        j = facts()
    except kiln.Error as e:
        sys.stderr.write(f"kiln: error ({e.kind}): {e.message}\n")
        if "--json" in argv:
            print(json.dumps(e.to_json()))
        return e.exit_code
    if "--json" in argv:
        print(json.dumps(j, indent=2))
    else:
        _print(j)
    return 0 if j["ok"] else 5
