"""kiln from Python: load verified, ahead-of-time built CUDA kernels and launch them.

    import kiln
    loader = kiln.load("acme-kernels")          # an installed package's wheels
    k = loader.get("scale_dtype_f32")
    loader.launch(k, grid=(n + 255) // 256, block=256, args=[y, x, kiln.f32(2.0), n])

The API follows the C++ one (kiln/loader.hpp); docs/python.md is the guide.
"""

from __future__ import annotations

import os as _os
import pathlib as _pathlib
import typing as _typing
import warnings as _warnings
from collections.abc import Callable as _Callable
from typing import Any as _Any

from kiln import _kiln
from kiln._config import Config, as_config as _as_config
from kiln._device import ComputeCapability, Device, choose_target, devices, target_choice
from kiln._errors import (
    CompileError,
    DriverError,
    Error,
    FormatError,
    IntegrityError,
    InternalError,
    IoError,
    LimitError,
    MissingFileError,
    NetworkError,
    NotFoundError,
    StaleError,
    StaleWarning,
    UnsupportedError,
    UsageAttributeError,
    UsageError,
    UsageTypeError,
    UsageValueError,
)
from kiln._kiln import ArgumentInfo, Kernel, Package, Scalar
from kiln._loader import Loader

# Package's constructors as Python functions, so inspect.signature and help() read them (the
# class itself is the extension's: a Package is made only by these).
_native_from_file = Package.from_file
_native_from_library = Package.from_library


def _package_from_file(path: str | _os.PathLike[str]) -> Package:
    """Reads and checks a package description, <name>-<version>.package.json.

    path: the file (str or os.PathLike); kiln.MissingFileError when it does not exist.
    """
    return _native_from_file(path)


def _package_from_library(path: str, symbol: str) -> Package:
    """The package a library made with kiln_add_kernel_package defines.

    path: the shared library; symbol: the SYMBOL given to kiln_add_kernel_package
    (acme_kernels_package).
    """
    return _native_from_library(path, symbol)


_package_from_file.__name__ = _package_from_file.__qualname__ = "from_file"
_package_from_library.__name__ = _package_from_library.__qualname__ = "from_library"
setattr(Package, "from_file", staticmethod(_package_from_file))
setattr(Package, "from_library", staticmethod(_package_from_library))

_BUILD = _kiln._build_facts()
__version__: str = _BUILD["version"]


def _scalar(type_name: str, python_type: str, what: str) -> _Callable[..., Scalar]:
    native = getattr(_kiln, type_name)

    def make(value: _Any) -> Scalar:
        return native(value)  # type: ignore[no-any-return]

    make.__name__ = make.__qualname__ = type_name
    make.__module__ = __name__
    make.__annotations__ = {"value": python_type, "return": "Scalar"}
    make.__doc__ = (f"A {what} kernel argument (kiln.Scalar of type {type_name!r}).\n\n"
                    f"value: a Python {python_type}, converted exactly or refused "
                    "(kiln.UsageError naming the range).")
    return make


f32: _Callable[[float], Scalar] = _scalar("f32", "float", "32-bit float")
f64: _Callable[[float], Scalar] = _scalar("f64", "float", "64-bit float")
i8: _Callable[[int], Scalar] = _scalar("i8", "int", "signed 8-bit integer")
u8: _Callable[[int], Scalar] = _scalar("u8", "int", "unsigned 8-bit integer")
i16: _Callable[[int], Scalar] = _scalar("i16", "int", "signed 16-bit integer")
u16: _Callable[[int], Scalar] = _scalar("u16", "int", "unsigned 16-bit integer")
i32: _Callable[[int], Scalar] = _scalar("i32", "int", "signed 32-bit integer")
u32: _Callable[[int], Scalar] = _scalar("u32", "int", "unsigned 32-bit integer")
i64: _Callable[[int], Scalar] = _scalar("i64", "int", "signed 64-bit integer")
u64: _Callable[[int], Scalar] = _scalar("u64", "int", "unsigned 64-bit integer")


def build_facts() -> dict[str, _Any]:
    """This runtime's version, commit, CUDA toolkit and the format versions it reads."""
    return dict(_BUILD)


def load(name: str, config: Config | None = None, **fields: _Any) -> Loader:
    """A Loader for the installed package `name` (its package wheel and target wheels).

    name: the package's distribution name ("kiln-kernels").
    config: a kiln.Config; None reads the KILN_* variables (Config.from_env()).
    fields: Config fields that replace the config's (offline=True, ...).

    The stores of its installed target wheels go first on the config's artifact_path, in the
    order the target-choice rule ranks their targets for the device, when the loader is first
    used (kiln.load itself does not start the CUDA driver). A target wheel of another version
    is reported as a StaleWarning and skipped (the loader goes on to its next tier).
    NotFoundError when no package wheel of that name is installed.
    """
    cfg = Config.from_env() if config is None else _as_config(config)
    if fields:
        cfg = cfg.replace(**fields)
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
        _warnings.warn(message, StaleWarning, stacklevel=2)
    stores = list(found.stores)

    def arrange(c: Config) -> Config:
        ordered = _stores_best_first(found.name, stores)
        return c.replace(artifact_path=[str(s) for s in ordered] + list(c.artifact_path))

    return Loader(description=found.description, config=cfg, _arrange=arrange)


def _stores_best_first(package: str, stores: list[_pathlib.Path]) -> list[_pathlib.Path]:
    """The target wheels' stores in the order the target-choice rule ranks their targets for
    device 0. The loader's store order wins over target preference (docs/loader.md: a PTX in
    the first store beats SASS in the second), so with the sm_90a and compute_80 wheels both
    installed, sm_90a's store must come first. Each store is listed by the loader's own store
    rule. Stores of no candidate target keep their order, after; without a device, the order
    is as found."""
    target_of: dict[str, _pathlib.Path] = {}  # target -> the first store offering it
    for store in stores:
        for target in _kiln._store_targets(str(store), package):
            target_of.setdefault(target, store)
    try:
        ranked = [t for t, _ in _kiln.target_choice(sorted(target_of), None)["candidates"]]
    except Error:
        return list(stores)
    first = list(dict.fromkeys(target_of[t] for t in ranked))
    return first + [s for s in stores if s not in first]


if _typing.TYPE_CHECKING:
    # A type checker sees kiln.ops as the submodule it is; it does not see __getattr__, which
    # would make every misspelt attribute of kiln pass (docs/python.md "Types").
    from kiln import ops as ops
else:

    def __getattr__(name: str) -> _Any:
        if name == "ops":  # imported on first use
            import importlib

            return importlib.import_module("kiln.ops")
        raise AttributeError(f"module 'kiln' has no attribute {name!r}")


__all__ = [
    "ArgumentInfo", "CompileError", "ComputeCapability", "Config", "Device", "DriverError",
    "Error",
    "FormatError", "IntegrityError", "InternalError", "IoError",
    "Kernel", "LimitError", "Loader", "MissingFileError", "NetworkError", "NotFoundError",
    "Package", "Scalar",
    "StaleError", "StaleWarning", "UnsupportedError", "UsageAttributeError", "UsageError",
    "UsageTypeError", "UsageValueError", "build_facts", "choose_target", "devices", "f32",
    "f64", "i8", "i16", "i32", "i64", "load", "target_choice", "u8", "u16", "u32", "u64",
]


def __dir__() -> list[str]:
    """The API: __all__, the submodule ops and __version__ (no imported helpers)."""
    return sorted([*__all__, "ops", "__version__"])
