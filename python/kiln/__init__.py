"""kiln from Python: load verified, ahead-of-time built CUDA kernels and launch them.

    import kiln
    loader = kiln.load("acme-kernels")          # an installed package's wheels
    k = loader.get("scale_dtype_f32")
    loader.launch(k, grid=(n + 255) // 256, block=256, args=[y, x, kiln.f32(2.0), n])

The API follows the C++ one (kiln/loader.hpp); docs/python.md is the guide.
"""

from __future__ import annotations

import pathlib
import warnings
from typing import TYPE_CHECKING, Any, NamedTuple

from kiln import _kiln
from kiln._errors import (
    CompileError,
    DriverError,
    Error,
    FormatError,
    IntegrityError,
    InternalError,
    IoError,
    LimitError,
    NetworkError,
    NotFoundError,
    StaleError,
    StaleWarning,
    UnsupportedError,
    UsageError,
)
from kiln._kiln import (
    ArgumentInfo,
    Config,
    Kernel,
    Loader,
    Package,
    Scalar,
    choose_target,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    target_choice,
    u8,
    u16,
    u32,
    u64,
)

_BUILD = _kiln._build_facts()
__version__: str = _BUILD["version"]


class Device(NamedTuple):
    ordinal: int
    name: str
    cc: int  # compute capability as 90 for 9.0
    target: str  # "sm_90"


def devices() -> list[Device]:
    """The CUDA devices through the driver; UnsupportedError when libcuda.so.1 does not load."""
    return [Device(*d) for d in _kiln.devices()]


def build_facts() -> dict[str, Any]:
    """This runtime's version, commit, CUDA toolkit and the format versions it reads."""
    return dict(_BUILD)


def load(name: str, config: Config | None = None, **fields: Any) -> Loader:
    """A Loader for the installed package `name` (its package wheel and target wheels).

    The stores of its installed target wheels go first on the config's artifact_path; a target
    wheel of another version is reported as a StaleWarning and skipped (the loader goes on to
    its next tier). NotFoundError when no package wheel of that name is installed.
    """
    try:
        from kiln import _installed
    except ImportError as e:
        raise NotFoundError(
            f"kiln.load({name!r}): this kiln runtime has no kiln._installed to find installed "
            f"package wheels with ({e}); use kiln.Loader(description=PATH)",
            {"package": name}) from None
    try:
        found = _installed.find_installed(name)
    except LookupError as e:
        raise NotFoundError(str(e.args[0] if e.args else e), {"package": name}) from None
    for message in found.stale:
        warnings.warn(message, StaleWarning, stacklevel=2)
    cfg = config if config is not None else Config.from_env()
    if fields:
        cfg = cfg.replace(**fields)
    stores = _stores_best_first(found.name, found.stores)
    cfg = cfg.replace(artifact_path=[str(s) for s in stores] + list(cfg.artifact_path))
    return Loader(description=found.description, config=cfg)


def _stores_best_first(package: str, stores: list[pathlib.Path]) -> list[pathlib.Path]:
    """The target wheels' stores in the order the target-choice rule ranks their targets for
    device 0. The loader's store order wins over target preference (docs/loader.md: a PTX in
    the first store beats SASS in the second), so with the sm_90a and compute_80 wheels both
    installed, sm_90a's store must come first. Each store is listed by the loader's own store
    rule. Stores of no candidate target keep their order, after; without a device, the order
    is as found."""
    target_of: dict[str, pathlib.Path] = {}  # target -> the first store offering it
    for store in stores:
        for target in _kiln._store_targets(str(store), package):
            target_of.setdefault(target, store)
    try:
        ranked = [t for t, _ in target_choice(sorted(target_of))["candidates"]]
    except Error:
        return list(stores)
    first = list(dict.fromkeys(target_of[t] for t in ranked))
    return first + [s for s in stores if s not in first]


if TYPE_CHECKING:
    # A type checker sees kiln.ops as the submodule it is; it does not see __getattr__, which
    # would make every misspelt attribute of kiln pass (docs/python.md "Types").
    from kiln import ops as ops
else:

    def __getattr__(name: str) -> Any:
        if name == "ops":  # imported on first use: it may import torch
            import importlib

            return importlib.import_module("kiln.ops")
        raise AttributeError(f"module 'kiln' has no attribute {name!r}")


__all__ = [
    "ArgumentInfo",
    "CompileError", "Config", "Device", "DriverError", "Error", "FormatError", "IntegrityError",
    "InternalError", "IoError", "Kernel", "LimitError", "Loader", "NetworkError",
    "NotFoundError", "Package", "Scalar", "StaleError", "StaleWarning", "UnsupportedError",
    "UsageError", "build_facts", "choose_target", "devices", "f32", "f64", "i8", "i16", "i32",
    "i64", "load", "target_choice", "u8", "u16", "u32", "u64",
]
