"""kiln.Loader: serves one kernel package (kiln::Loader through kiln._kiln.Loader).

The native loader is made when the Loader is, unless kiln.load gave a step to run first (the
order of the installed target wheels' stores, which needs the device): then at the first get,
prefetch, resolve or launch, so kiln.load does not start the CUDA driver (a process may fork
before it asks for a kernel). close() (or the end of a `with` block) frees the loader and its
modules at once; using a closed loader is a kiln.UsageValueError.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from kiln import _kiln
from kiln._kiln import Kernel, Package
from kiln._config import Config, as_config
from kiln._device import cc_of_device, cc_value
from kiln._errors import usage


def _package(description: object, package: object) -> Any:
    if description is not None and package is not None:
        raise usage("Loader takes description= or package=, not both", "package", TypeError)
    if package is not None:
        if not isinstance(package, _kiln.Package):
            raise usage("package= takes a kiln.Package (Package.from_file, Package.from_library), "
                        f"not a {type(package).__name__}", "package", TypeError)
        return package
    if description is None:
        raise usage("Loader needs description=PATH (a <name>-<version>.package.json) or "
                    "package=kiln.Package; kiln.load(NAME) finds an installed package's",
                    "description", TypeError)
    if not isinstance(description, (str, os.PathLike)):
        raise usage(f"description= takes a path (str or os.PathLike), not a "
                    f"{type(description).__name__}", "description", TypeError)
    return _kiln.Package.from_file(os.fspath(description))


class Loader:
    """Serves one kernel package: get, prefetch, resolve, launch (docs/python.md, section 2).

    Parameters (keyword-only):
      description: a <name>-<version>.package.json (str or os.PathLike); its directory is the
        loader's installed store.
      package: a kiln.Package instead (Package.from_file, Package.from_library).
      config: a kiln.Config; None reads the KILN_* variables (Config.from_env()).

    A Loader is a context manager: `with kiln.load(...) as loader:` closes it at the end.
    """

    def __init__(self, *, description: str | os.PathLike[str] | None = None,
                 package: Package | None = None, config: Config | None = None,
                 _arrange: Callable[[Config], Config] | None = None) -> None:
        self._config = Config.from_env() if config is None else as_config(config)
        self._package = _package(description, package)
        self._arrange = _arrange
        self._native_loader: Any = None
        self._closed = False
        self._lock = threading.Lock()
        if _arrange is None:
            self._native()

    def _native(self) -> Any:
        """The native loader, made on first use; a UsageValueError once closed."""
        native = self._native_loader
        if native is not None:
            return native
        with self._lock:
            if self._closed:
                raise usage("this kiln.Loader is closed (Loader.close(), or the end of its with "
                            "block): make a new one", "loader")
            if self._native_loader is None:
                cfg = self._arrange(self._config) if self._arrange is not None else self._config
                self._native_loader = _kiln.Loader(package=self._package, config=cfg._native())
                self._config = _config_of(self._native_loader)
            return self._native_loader

    @property
    def package(self) -> Package:
        """The kiln.Package served (name, version, uris, origin)."""
        return self._package  # type: ignore[no-any-return]

    @property
    def config(self) -> Config:
        """The configuration (immutable). kiln.load's loader puts the installed target wheels'
        stores first on artifact_path in the device's order when it is first used."""
        return self._config

    @property
    def id(self) -> int:
        """The loader's id, as the C++ Loader::id()."""
        return int(self._native().id)

    @property
    def closed(self) -> bool:
        """True once close() ran."""
        return self._closed

    def stats(self) -> dict[str, Any]:
        """What this loader did since it was made (docs/python.md, "Statistics"): the JSON form
        of the C++ Loader::stats() as a dict. Keys: stats_format (1), hits (memory, store,
        mirror, jit), misses, bytes (read, verified, fetched), time_ns (store, mirror, jit),
        jit_compiles, rejected (by reason: "stale", "integrity", ...; every reason present).
        Counters only grow: subtract two snapshots for the work in between. A loader not yet
        used (kiln.load's, before its first get) reports zeros."""
        native = self._native_loader
        if native is None and self._arrange is not None and not self._closed:
            return json.loads(_kiln._zero_stats_json())  # type: ignore[no-any-return]
        return json.loads(self._native().stats_json())  # type: ignore[no-any-return]

    def get(self, uri: str, stream: object | None = None) -> Kernel:
        """The kiln.Kernel `uri`, loaded for the current CUDA context (once per context).

        uri: the kernel's URI (loader.package.uris lists them).
        stream: with a stream, a miss while that stream is being captured into a CUDA graph
          fails (prefetch before capture); an int CUstream or an object with `cuda_stream` /
          `__cuda_stream__`.
        """
        return self._native().get(uri, stream)  # type: ignore[no-any-return]

    def prefetch(self, uris: Sequence[str]) -> None:
        """Loads every URI of `uris`; one error reports every failure."""
        self._native().prefetch(list(uris))

    def resolve(self, uri: str, device: int | None = None, explain: bool = True, *,
                cc: Any = None) -> dict[str, Any]:
        """The decision for `uri` without loading: the keys of `kiln resolve --json`.

        uri: the kernel's URI.
        device: a device ordinal (0, 1, ...): decide for that device. None: the current
          context's device (and a kernel it already loaded).
        explain: False keeps only uri, device (its target) and chosen.
        cc: decide for a compute capability instead of a device: 90, "9.0", "sm_90" or
          kiln.ComputeCapability(9, 0).
        """
        if device is not None and cc is not None:
            raise usage("resolve takes device= (an ordinal) or cc= (a compute capability), not "
                        "both", "cc", TypeError)
        if device is not None:
            cc_int: int | None = cc_of_device(device, "device")
        else:
            cc_int = None if cc is None else cc_value(cc, "cc")
        if not isinstance(explain, bool):
            raise usage(f"explain= takes True or False, not {explain!r}", "explain", TypeError)
        return dict(self._native().resolve(uri, cc_int, explain))

    def launch(self, kernel: Kernel, grid: int | Sequence[int], block: int | Sequence[int],
               args: Sequence[object], shared_bytes: int = 0, stream: object | None = None,
               entry: int = 0) -> None:
        """cuLaunchKernel on entry `entry` of `kernel` (docs/python.md, "Arguments").

        kernel: a kiln.Kernel this loader's get returned.
        grid, block: an int, or 1 to 3 ints.
        args: the kernel's arguments, each as the table of docs/python.md packs it.
        shared_bytes: dynamic shared memory, in bytes.
        stream: an int CUstream, or an object with `cuda_stream` / `__cuda_stream__`; None:
          the current stream of the arguments' framework (torch, CuPy), else the legacy
          default stream (docs/python.md, "Devices and streams").
        entry: the entry of a kernel of several (registry order).
        """
        self._native().launch(kernel, grid, block, args, shared_bytes, stream, entry)

    def close(self) -> None:
        """Frees the loader and every module it loaded, now (or, for a call in flight in another
        thread, when it returns). Kernels it returned can no longer be launched; using the
        loader is a kiln.UsageValueError. Closing again does nothing."""
        with self._lock:
            self._closed = True
            native, self._native_loader = self._native_loader, None
        if native is not None:
            native.close()

    def __enter__(self) -> Loader:
        self._native()  # a closed loader is refused here too
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<kiln.Loader of {self._package.name} {self._package.version}{state}>"


def _config_of(native: Any) -> Config:
    """The Config a native loader holds (the description's store as installed_store)."""
    c = native.config
    fields = {name: getattr(c, name) for name in Config.fields()}
    for name in ("artifact_path", "mirrors"):
        fields[name] = tuple(fields[name])
    return Config(**fields)

